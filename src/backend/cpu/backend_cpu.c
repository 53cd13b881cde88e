/*
 * backend_cpu.c - backend.h on the CPU: the stages of model/ run as they
 * are, on weights viewed in place in the mmap. A qtts_seq is a
 * qtts_talker_state (plus its step-input row); the batched stages are
 * model/talker.c's qtts_talker_step_batch and qtts_cp_frame_batch.
 */
#include <string.h>

#include "../backend.h"

typedef struct {
    qtts_backend base;
    const qtts_talker_weights *w;
    const qtts_codec_decoder *codec;
} cpu_backend;

/* The per-sequence state: the talker state plus the step-input row (per
 * sequence, so sessions on different threads never share scratch), and
 * the rows of its last prefill.
 *
 * Prompt reuse: the KV cache's positions 0..kept_len-1 hold what the
 * prefill of kept[0..kept_len) wrote (decode steps only write positions
 * after the prompt). A new prefill whose leading rows are the same bits
 * computes only the rows after them (qtts_talker_prefill_from, the same
 * results): requests of one speaker, language and instruction share the
 * role and codec-prefix rows, and the instruction's or an in-context
 * reference transcript's rows. */
struct qtts_seq {
    qtts_talker_state *ts;
    float *x;          /* [H] */
    float *kept;       /* [kept_cap, H] */
    int kept_len, kept_cap;
    int last_reused;   /* rows the last prefill did not compute */
};

static void cpu_destroy(qtts_backend *be) { qtts_free(be); }

static qtts_status cpu_seq_new(qtts_backend *be, int max_pos, qtts_seq **out, qtts_err *err) {
    cpu_backend *c = (cpu_backend *)be;
    *out = NULL;
    qtts_seq *s = qtts_calloc(1, sizeof *s);
    if (!s || !(s->x = qtts_malloc(sizeof(float) * (size_t)c->w->hidden))) {
        qtts_free(s);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (sequence state)");
    }
    qtts_status st = qtts_talker_state_new(c->w, max_pos, &s->ts, err);
    if (st) {
        qtts_free(s->x);
        qtts_free(s);
        return st;
    }
    *out = s;
    return QTTS_OK;
}

static void cpu_seq_free(qtts_backend *be, qtts_seq *s) {
    if (!s) return;
    qtts_talker_state_free(s->ts);
    qtts_free(s->x);
    qtts_free(s->kept);
    qtts_free(s);
}

static int cpu_seq_max_pos(const qtts_backend *be, const qtts_seq *s) {
    return qtts_talker_state_max_pos(s->ts);
}

static qtts_status cpu_prefill(qtts_backend *be, qtts_seq *s, const float *embeds, int L,
                               float *logits, float *hidden, qtts_err *err) {
    const qtts_talker_weights *w = ((cpu_backend *)be)->w;
    const size_t row = sizeof(float) * (size_t)w->hidden;
    /* leading rows equal to the kept ones, at least the last row computed */
    int from = 0;
    while (from < L - 1 && from < s->kept_len &&
           !memcmp(embeds + (size_t)from * w->hidden, s->kept + (size_t)from * w->hidden, row))
        from++;
    s->kept_len = 0;   /* until this prefill has written its rows */
    s->last_reused = 0;
    qtts_status st = qtts_talker_prefill_from(w, s->ts, embeds, L, from, logits, hidden, err);
    if (st) return st;
    s->last_reused = from;
    if (L > s->kept_cap) {   /* no room to keep them: the next prefill computes every row */
        float *p = qtts_realloc(s->kept, row * (size_t)L);
        if (!p) return QTTS_OK;
        s->kept = p;
        s->kept_cap = L;
    }
    memcpy(s->kept, embeds, row * (size_t)L);
    s->kept_len = L;
    return QTTS_OK;
}

static void cpu_seq_forget(qtts_backend *be, qtts_seq *s) { s->kept_len = 0; }

static int cpu_seq_reused(const qtts_backend *be, const qtts_seq *s) { return s->last_reused; }

static qtts_status cpu_step(qtts_backend *be, qtts_seq *s, const int32_t *codes,
                            const float *text_row, float *logits, float *hidden, qtts_err *err) {
    const qtts_talker_weights *w = ((cpu_backend *)be)->w;
    qtts_talker_codec_sum(w, codes, s->x);
    qtts_add_inplace(s->x, text_row, (size_t)w->hidden);
    return qtts_talker_step(w, s->ts, s->x, logits, hidden, err);
}

static qtts_status cpu_cp_frame(qtts_backend *be, qtts_seq *s, const float *hidden, int c0,
                                const qtts_sampler_params *sp, qtts_rng *rng, int32_t *codes_out,
                                float *cp_logits, qtts_err *err) {
    return qtts_cp_frame(((cpu_backend *)be)->w, s->ts, hidden, c0, sp, rng, codes_out, cp_logits,
                         err);
}

static qtts_status cpu_step_batch(qtts_backend *be, qtts_step_item *items, int n,
                                  qtts_err *err) {
    const qtts_talker_weights *w = ((cpu_backend *)be)->w;
    qtts_talker_step_job *jobs = qtts_calloc((size_t)n, sizeof *jobs);
    if (!jobs) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (batch of %d)", n);
    for (int i = 0; i < n; i++) {
        qtts_seq *s = items[i].seq;
        qtts_talker_codec_sum(w, items[i].codes, s->x);
        qtts_add_inplace(s->x, items[i].text_row, (size_t)w->hidden);
        jobs[i] = (qtts_talker_step_job){.st = s->ts, .x = s->x, .logits = items[i].logits,
                                         .hidden = items[i].hidden, .err = items[i].err};
    }
    qtts_status st = qtts_talker_step_batch(w, jobs, n, err);
    for (int i = 0; i < n && !st; i++) items[i].status = jobs[i].status;
    qtts_free(jobs);
    return st;
}

static qtts_status cpu_cp_frame_batch(qtts_backend *be, qtts_cp_item *items, int n,
                                      qtts_err *err) {
    qtts_cp_job *jobs = qtts_calloc((size_t)n, sizeof *jobs);
    if (!jobs) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (batch of %d)", n);
    for (int i = 0; i < n; i++)
        jobs[i] = (qtts_cp_job){.st = items[i].seq->ts, .hidden = items[i].hidden,
                                .c0 = items[i].c0, .sp = items[i].sp, .rng = items[i].rng,
                                .codes_out = items[i].codes_out,
                                .cp_logits_out = items[i].cp_logits, .err = items[i].err};
    qtts_status st = qtts_cp_frame_batch(((cpu_backend *)be)->w, jobs, n, err);
    for (int i = 0; i < n && !st; i++) items[i].status = jobs[i].status;
    qtts_free(jobs);
    return st;
}

static qtts_status cpu_codec_decode_window(qtts_backend *be, const int32_t *codes, int T,
                                           float *wav, qtts_err *err) {
    return qtts_codec_decode_window(((cpu_backend *)be)->codec, codes, T, wav, NULL, err);
}

static const qtts_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .seq_new = cpu_seq_new,
    .seq_free = cpu_seq_free,
    .seq_max_pos = cpu_seq_max_pos,
    .prefill = cpu_prefill,
    .seq_forget = cpu_seq_forget,
    .seq_reused = cpu_seq_reused,
    .step = cpu_step,
    .cp_frame = cpu_cp_frame,
    .step_batch = cpu_step_batch,
    .cp_frame_batch = cpu_cp_frame_batch,
    .codec_decode_window = cpu_codec_decode_window,
};

qtts_status qtts_backend_cpu_open(const qtts_talker_weights *talker,
                                  const qtts_codec_decoder *codec, qtts_backend **out,
                                  qtts_err *err) {
    cpu_backend *c = qtts_calloc(1, sizeof *c);
    if (!c) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    c->base.ops = &cpu_ops;
    c->w = talker;
    c->codec = codec;
    *out = &c->base;
    return QTTS_OK;
}
