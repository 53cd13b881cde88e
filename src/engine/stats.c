/*
 * stats.c - the timing decorator of engine_internal.h: a backend whose
 * every op forwards to the wrapped one, the decode-time stages timed with
 * the monotonic clock. Sequences are the inner backend's own.
 */
#include "engine_internal.h"

typedef struct {
    qtts_backend base;
    qtts_backend_ops ops;   /* the inner backend's name, timed ops */
    qtts_backend *in;
    qtts_engine_stats *st;
} timed;

#define IN(be) (((timed *)(be))->in)
#define ST(be) (((timed *)(be))->st)

static void t_destroy(qtts_backend *be) {
    qtts_backend_close(IN(be));
    qtts_free(be);
}

static qtts_status t_seq_new(qtts_backend *be, int max_pos, qtts_seq **out, qtts_err *err) {
    return IN(be)->ops->seq_new(IN(be), max_pos, out, err);
}

static void t_seq_free(qtts_backend *be, qtts_seq *s) { IN(be)->ops->seq_free(IN(be), s); }

static int t_seq_max_pos(const qtts_backend *be, const qtts_seq *s) {
    return IN(be)->ops->seq_max_pos(IN(be), s);
}

static qtts_status t_prefill(qtts_backend *be, qtts_seq *s, const float *embeds, int L,
                             float *logits, float *hidden, qtts_err *err) {
    const double t0 = qtts_now();
    qtts_status r = IN(be)->ops->prefill(IN(be), s, embeds, L, logits, hidden, err);
    ST(be)->prefill_s += qtts_now() - t0;
    ST(be)->prefills++;
    ST(be)->prefill_rows += L;
    return r;
}

static void t_seq_forget(qtts_backend *be, qtts_seq *s) { IN(be)->ops->seq_forget(IN(be), s); }

static int t_seq_reused(const qtts_backend *be, const qtts_seq *s) {
    return IN(be)->ops->seq_reused(IN(be), s);
}

static qtts_status t_step(qtts_backend *be, qtts_seq *s, const int32_t *codes,
                          const float *text_row, float *logits, float *hidden, qtts_err *err) {
    const double t0 = qtts_now();
    qtts_status r = IN(be)->ops->step(IN(be), s, codes, text_row, logits, hidden, err);
    ST(be)->talker_s += qtts_now() - t0;
    ST(be)->talker_calls++;
    ST(be)->talker_rows++;
    return r;
}

static qtts_status t_cp_frame(qtts_backend *be, qtts_seq *s, const float *hidden, int c0,
                              const qtts_sampler_params *sp, qtts_rng *rng, int32_t *codes_out,
                              float *cp_logits, qtts_err *err) {
    const double t0 = qtts_now();
    qtts_status r =
        IN(be)->ops->cp_frame(IN(be), s, hidden, c0, sp, rng, codes_out, cp_logits, err);
    ST(be)->cp_s += qtts_now() - t0;
    ST(be)->cp_calls++;
    ST(be)->cp_rows++;
    return r;
}

static qtts_status t_step_batch(qtts_backend *be, qtts_step_item *items, int n, qtts_err *err) {
    const double t0 = qtts_now();
    qtts_status r = IN(be)->ops->step_batch(IN(be), items, n, err);
    ST(be)->talker_s += qtts_now() - t0;
    ST(be)->talker_calls++;
    ST(be)->talker_rows += n;
    return r;
}

static qtts_status t_cp_frame_batch(qtts_backend *be, qtts_cp_item *items, int n, qtts_err *err) {
    const double t0 = qtts_now();
    qtts_status r = IN(be)->ops->cp_frame_batch(IN(be), items, n, err);
    ST(be)->cp_s += qtts_now() - t0;
    ST(be)->cp_calls++;
    ST(be)->cp_rows += n;
    return r;
}

static qtts_status t_codec_decode_window(qtts_backend *be, const int32_t *codes, int T,
                                         float *wav, qtts_err *err) {
    return IN(be)->ops->codec_decode_window(IN(be), codes, T, wav, err);
}

qtts_status qtts_backend_timed(qtts_backend *inner, qtts_engine_stats *stats, qtts_backend **out,
                               qtts_err *err) {
    timed *t = qtts_calloc(1, sizeof *t);
    if (!t) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    t->ops = (qtts_backend_ops){
        .name = inner->ops->name,
        .destroy = t_destroy,
        .seq_new = t_seq_new,
        .seq_free = t_seq_free,
        .seq_max_pos = t_seq_max_pos,
        .prefill = t_prefill,
        .seq_forget = inner->ops->seq_forget ? t_seq_forget : NULL,
        .seq_reused = inner->ops->seq_reused ? t_seq_reused : NULL,
        .step = t_step,
        .cp_frame = t_cp_frame,
        .step_batch = t_step_batch,
        .cp_frame_batch = t_cp_frame_batch,
        .codec_decode_window = t_codec_decode_window,
    };
    t->base.ops = &t->ops;
    t->in = inner;
    t->st = stats;
    *out = &t->base;
    return QTTS_OK;
}
