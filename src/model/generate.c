/*
 * generate.c - the generation state machine of generate.h.
 *
 * Buffers (owned by a qtts_gen from begin to end): logits[V] as produced,
 * scores[V] (the copy the processors and the sampler modify), g[H] talker
 * hidden, history[max_new_tokens] drawn c0, codes[G].
 *
 * A step is four phases, each over all generations of the batch in list
 * order: the code predictor (one batched backend call), the frame
 * callbacks, the talker step (one batched backend call, only for the
 * generations still going) and the next draw. A generation that fails in a
 * phase leaves the batch there.
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

static qtts_status gen_fail(qtts_gen *g, qtts_status st) {
    g->active = false;
    g->status = st;
    return st;
}

/* Draw c0 from g->logits / g->g (the talker output of step k = n_draws)
 * and decide whether a frame follows. */
static qtts_status gen_draw(qtts_gen *g, qtts_err *err) {
    const int H = g->w->hidden, V = g->w->vocab;
    const int k = g->r.n_draws;
    qtts_gen_debug *dbg = g->dbg;
    if (!qtts_all_finite(g->logits, (size_t)V))
        return gen_fail(g, qtts_fail(err, QTTS_ERR_NUMERIC,
                                     "talker: non-finite logits at step %d", k));
    const bool rec = dbg && k < dbg->cap_draws;
    if (rec && dbg->talker_logits)
        memcpy(dbg->talker_logits + (size_t)k * V, g->logits, sizeof(float) * V);
    if (rec && dbg->talker_hidden)
        memcpy(dbg->talker_hidden + (size_t)k * H, g->g, sizeof(float) * H);

    memcpy(g->scores, g->logits, sizeof(float) * V);
    qtts_talker_process(g->scores, V, g->history, k, &g->gp.rules);
    float margin;
    const int c0 = qtts_sample(g->scores, V, &g->gp.talker, &g->rng, g->scratch, &margin);
    if (rec && dbg->talker_tokens) dbg->talker_tokens[k] = c0;
    if (rec && dbg->talker_margin) dbg->talker_margin[k] = margin;
    g->history[g->r.n_draws++] = c0;
    g->c0 = c0;
    if (c0 == g->gp.rules.eos_id) {
        g->r.stopped_by_eos = true;
        g->active = false;
    } else {
        g->active = g->r.n_draws < g->gp.max_new_tokens;
    }
    return QTTS_OK;
}

qtts_status qtts_gen_begin(qtts_gen *g, qtts_backend *be, qtts_seq *seq,
                           const qtts_talker_weights *w, const qtts_prompt *prompt,
                           const qtts_gen_params *gp, qtts_frame_fn on_frame, void *user,
                           qtts_gen_debug *dbg, qtts_err *err) {
    const int H = w->hidden, V = w->vocab, G = w->n_groups;
    memset(g, 0, sizeof *g);
    g->be = be;
    g->seq = seq;
    g->w = w;
    g->prompt = prompt;
    g->gp = *gp;
    g->on_frame = on_frame;
    g->user = user;
    g->dbg = dbg;
    if (gp->max_new_tokens < 1)
        return gen_fail(g, qtts_fail(err, QTTS_ERR_INVALID, "generate: max_new_tokens %d < 1",
                                     gp->max_new_tokens));
    if (prompt->n_trailing < 1)
        return gen_fail(g, qtts_fail(err, QTTS_ERR_INVALID,
                                     "generate: empty trailing-text queue"));
    const int64_t need = (int64_t)prompt->len + gp->max_new_tokens - 1;
    if (need > be->ops->seq_max_pos(be, seq))
        return gen_fail(g, qtts_fail(err, QTTS_ERR_LIMIT,
                                     "generate: %d prompt rows + %d new tokens need %lld "
                                     "positions, the state holds %d", prompt->len,
                                     gp->max_new_tokens, (long long)need,
                                     be->ops->seq_max_pos(be, seq)));
    g->logits = qtts_malloc(sizeof(float) * (size_t)V);
    g->scores = qtts_malloc(sizeof(float) * (size_t)V);
    g->g = qtts_malloc(sizeof(float) * (size_t)H);
    g->history = qtts_malloc(sizeof(int32_t) * (size_t)gp->max_new_tokens);
    g->codes = qtts_malloc(sizeof(int32_t) * (size_t)G);
    g->scratch = qtts_malloc(QTTS_SAMPLE_SCRATCH(V));
    if (!g->logits || !g->scores || !g->g || !g->history || !g->codes || !g->scratch)
        return gen_fail(g, qtts_fail(err, QTTS_ERR_NOMEM, "generate: out of memory"));
    qtts_rng_seed(&g->rng, gp->seed);
    qtts_status s = be->ops->prefill(be, seq, prompt->embeds, prompt->len, g->logits, g->g, err);
    if (s) return gen_fail(g, s);
    return gen_draw(g, err);
}

void qtts_gen_end(qtts_gen *g) {
    qtts_free(g->logits);
    qtts_free(g->scores);
    qtts_free(g->g);
    qtts_free(g->history);
    qtts_free(g->codes);
    qtts_free(g->scratch);
    g->logits = g->scores = g->g = NULL;
    g->history = g->codes = NULL;
    g->scratch = NULL;
    g->active = false;
}

/* The text row added to the talker input after frame k. */
static const float *text_row(const qtts_gen *g, int k) {
    return k < g->prompt->n_trailing ? g->prompt->trailing + (size_t)k * g->w->hidden
                                     : g->w->p_pad;
}

/* Ends every generation of idx[0..m) with the whole-batch failure st. */
static qtts_status fail_all(qtts_gen **gens, const int *idx, int m, qtts_status st,
                            qtts_err *errs, const qtts_err *err) {
    for (int r = 0; r < m; r++) {
        const int i = idx ? idx[r] : r;
        gen_fail(gens[i], st);
        if (err && &errs[i] != err) errs[i] = *err;
    }
    return st;
}

qtts_status qtts_gen_step_batch(qtts_gen **gens, int n, qtts_err *errs, qtts_err *err) {
    if (n < 1 || !gens || !errs)
        return qtts_fail(err, QTTS_ERR_INVALID, "generate: empty batch");
    qtts_backend *be = gens[0]->be;
    for (int i = 0; i < n; i++) {
        if (!gens[i] || !gens[i]->active || gens[i]->be != be)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "generate: batch entry %d is not an active generation on this "
                             "backend", i);
        for (int j = 0; j < i; j++)
            if (gens[j]->seq == gens[i]->seq)
                return qtts_fail(err, QTTS_ERR_INVALID,
                                 "generate: batch entries %d and %d share a sequence", j, i);
    }
    const int G = gens[0]->w->n_groups, Vc = gens[0]->w->cp_vocab;
    qtts_cp_item *ci = qtts_calloc((size_t)n, sizeof *ci);
    qtts_step_item *si = qtts_calloc((size_t)n, sizeof *si);
    int *idx = qtts_calloc((size_t)n, sizeof *idx);
    qtts_status st = QTTS_OK;
    if (!ci || !si || !idx) {
        st = fail_all(gens, NULL, n, qtts_fail(err, QTTS_ERR_NOMEM, "generate: out of memory"),
                      errs, err);
        goto done;
    }

    /* 1. codebooks 1..G-1 of every frame */
    for (int i = 0; i < n; i++) {
        qtts_gen *g = gens[i];
        const int k = g->r.n_frames;
        g->codes[0] = g->c0;
        ci[i] = (qtts_cp_item){
            .seq = g->seq, .hidden = g->g, .c0 = g->c0, .sp = &g->gp.cp, .rng = &g->rng,
            .codes_out = g->codes + 1,
            .cp_logits = g->dbg && g->dbg->cp_logits && k < g->dbg->cap_cp_frames
                             ? g->dbg->cp_logits + (size_t)k * (G - 1) * Vc
                             : NULL,
            .err = &errs[i]};
    }
    if (n == 1)
        ci[0].status = be->ops->cp_frame(be, ci[0].seq, ci[0].hidden, ci[0].c0, ci[0].sp,
                                         ci[0].rng, ci[0].codes_out, ci[0].cp_logits, &errs[0]);
    else if ((st = be->ops->cp_frame_batch(be, ci, n, err))) {
        fail_all(gens, NULL, n, st, errs, err);
        goto done;
    }

    /* 2. the frames, 3. the talker step for the generations still going */
    int m = 0;
    for (int i = 0; i < n; i++) {
        qtts_gen *g = gens[i];
        if (ci[i].status) {
            gen_fail(g, ci[i].status);
            continue;
        }
        const int k = g->r.n_frames++;
        if (g->on_frame && g->on_frame(g->user, k, g->codes)) {
            gen_fail(g, qtts_fail(&errs[i], QTTS_ERR_CANCELLED,
                                  "generate: cancelled at frame %d", k));
            continue;
        }
        si[m] = (qtts_step_item){.seq = g->seq, .codes = g->codes, .text_row = text_row(g, k),
                                 .logits = g->logits, .hidden = g->g, .err = &errs[i]};
        idx[m++] = i;
    }
    if (m == 1 && n == 1)
        si[0].status = be->ops->step(be, si[0].seq, si[0].codes, si[0].text_row, si[0].logits,
                                     si[0].hidden, &errs[0]);
    else if (m && (st = be->ops->step_batch(be, si, m, err))) {
        fail_all(gens, idx, m, st, errs, err);
        goto done;
    }

    /* 4. the next draws */
    for (int r = 0; r < m; r++) {
        qtts_gen *g = gens[idx[r]];
        if (si[r].status)
            gen_fail(g, si[r].status);
        else
            gen_draw(g, &errs[idx[r]]);
    }
done:
    qtts_free(ci);
    qtts_free(si);
    qtts_free(idx);
    return st;
}

qtts_status qtts_gen_step(qtts_gen *g, qtts_err *err) {
    qtts_status st = qtts_gen_step_batch(&g, 1, err, err);
    return st ? st : g->status;
}

qtts_status qtts_generate(qtts_backend *be, qtts_seq *seq, const qtts_talker_weights *w,
                          const qtts_prompt *prompt, const qtts_gen_params *gp,
                          qtts_frame_fn on_frame, void *user, qtts_gen_debug *dbg,
                          qtts_gen_result *res, qtts_err *err) {
    qtts_gen g;
    qtts_status s = qtts_gen_begin(&g, be, seq, w, prompt, gp, on_frame, user, dbg, err);
    while (s == QTTS_OK && g.active) s = qtts_gen_step(&g, err);
    if (res) *res = g.r;
    qtts_gen_end(&g);
    return s;
}
