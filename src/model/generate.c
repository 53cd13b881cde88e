/*
 * generate.c - the generation loop of generate.h.
 *
 * Buffers (owned here for one call): logits[V] as produced, scores[V] (the
 * copy the processors and the sampler modify), g[H] talker hidden,
 * history[max_new_tokens] drawn c0, codes[G].
 */
#include "generate.h"

#include <string.h>

void qtts_gen_params_default(const qtts_config *cfg, qtts_gen_params *p) {
    memset(p, 0, sizeof(*p));
    p->talker.do_sample = cfg->gen.do_sample;
    p->talker.top_k = cfg->gen.top_k;
    p->talker.top_p = cfg->gen.top_p;
    p->talker.temperature = cfg->gen.temperature;
    p->rules.repetition_penalty = cfg->gen.repetition_penalty;
    p->rules.eos_id = cfg->codec_eos_id;
    p->rules.min_new_tokens = 2;
    p->rules.suppress_begin = cfg->talker.vocab - 1024;
    p->rules.suppress_end = cfg->talker.vocab;
    p->cp.do_sample = cfg->gen.subtalker_do_sample;
    p->cp.top_k = cfg->gen.subtalker_top_k;
    p->cp.top_p = cfg->gen.subtalker_top_p;
    p->cp.temperature = cfg->gen.subtalker_temperature;
    p->max_new_tokens = cfg->gen.max_new_tokens;
    p->seed = 0;
}

qtts_status qtts_generate(qtts_backend *be, qtts_seq *seq, const qtts_talker_weights *w,
                          const qtts_prompt *prompt, const qtts_gen_params *gp,
                          qtts_frame_fn on_frame, void *user, qtts_gen_debug *dbg,
                          qtts_gen_result *res, qtts_err *err) {
    const int H = w->hidden, V = w->vocab, G = w->n_groups, Vc = w->cp_vocab;
    qtts_gen_result r = {0};
    if (res) *res = r;
    if (gp->max_new_tokens < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "generate: max_new_tokens %d < 1",
                         gp->max_new_tokens);
    if (prompt->n_trailing < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "generate: empty trailing-text queue");
    const int64_t need = (int64_t)prompt->len + gp->max_new_tokens - 1;
    if (need > be->ops->seq_max_pos(be, seq))
        return qtts_fail(err, QTTS_ERR_LIMIT, "generate: %d prompt rows + %d new tokens need %lld "
                         "positions, the state holds %d", prompt->len, gp->max_new_tokens,
                         (long long)need, be->ops->seq_max_pos(be, seq));

    qtts_status s = QTTS_OK;
    float *logits = qtts_malloc(sizeof(float) * (size_t)V);
    float *scores = qtts_malloc(sizeof(float) * (size_t)V);
    float *g = qtts_malloc(sizeof(float) * (size_t)H);
    int32_t *history = qtts_malloc(sizeof(int32_t) * (size_t)gp->max_new_tokens);
    int32_t *codes = qtts_malloc(sizeof(int32_t) * (size_t)G);
    void *scratch = qtts_malloc(QTTS_SAMPLE_SCRATCH(V));
    if (!logits || !scores || !g || !history || !codes || !scratch) {
        s = qtts_fail(err, QTTS_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    qtts_rng rng;
    qtts_rng_seed(&rng, gp->seed);

    if ((s = be->ops->prefill(be, seq, prompt->embeds, prompt->len, logits, g, err))) goto done;
    for (int k = 0;; k++) {
        if (!qtts_all_finite(logits, (size_t)V)) {
            s = qtts_fail(err, QTTS_ERR_NUMERIC, "talker: non-finite logits at step %d", k);
            goto done;
        }
        const bool rec = dbg && r.n_draws < dbg->cap_draws;
        if (rec && dbg->talker_logits)
            memcpy(dbg->talker_logits + (size_t)r.n_draws * V, logits, sizeof(float) * V);
        if (rec && dbg->talker_hidden)
            memcpy(dbg->talker_hidden + (size_t)r.n_draws * H, g, sizeof(float) * H);

        memcpy(scores, logits, sizeof(float) * V);
        qtts_talker_process(scores, V, history, r.n_draws, &gp->rules);
        float margin;
        const int c0 = qtts_sample(scores, V, &gp->talker, &rng, scratch, &margin);
        if (rec && dbg->talker_tokens) dbg->talker_tokens[r.n_draws] = c0;
        if (rec && dbg->talker_margin) dbg->talker_margin[r.n_draws] = margin;
        history[r.n_draws++] = c0;
        if (c0 == gp->rules.eos_id) {
            r.stopped_by_eos = true;
            break;
        }
        if (r.n_draws == gp->max_new_tokens) break;

        codes[0] = c0;
        float *cpl = dbg && dbg->cp_logits && k < dbg->cap_cp_frames
                         ? dbg->cp_logits + (size_t)k * (G - 1) * Vc
                         : NULL;
        if ((s = be->ops->cp_frame(be, seq, g, c0, &gp->cp, &rng, codes + 1, cpl, err))) goto done;
        r.n_frames++;
        if (on_frame && on_frame(user, k, codes)) {
            s = qtts_fail(err, QTTS_ERR_CANCELLED, "generate: cancelled at frame %d", k);
            goto done;
        }

        const float *text_row =
            k < prompt->n_trailing ? prompt->trailing + (size_t)k * H : w->p_pad;
        if ((s = be->ops->step(be, seq, codes, text_row, logits, g, err))) goto done;
    }
done:
    if (res) *res = r;
    qtts_free(logits);
    qtts_free(scores);
    qtts_free(g);
    qtts_free(history);
    qtts_free(codes);
    qtts_free(scratch);
    return s;
}
