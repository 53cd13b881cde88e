/*
 * generate.h - the per-sequence generation loop (spec §7.1) as a resumable
 * state machine, so that a scheduler can advance many sequences together.
 *
 *   begin:  prefill(prompt.embeds [L,H]) -> logits[V], g[H]; draw
 *   step:   c1..c15 = cp_frame(g, c0)          -> on_frame(k, [c0..c15])
 *           x = E(c0) + sum_i E_i(c_i) + (k < n_trailing ? trailing[k] : Ppad)
 *           talker_step(x) -> logits, g ; k += 1; draw
 *   draw:   c0 = sample(talker_process(logits, history))  rep. penalty, min tokens, suppress
 *           history += c0
 *           stop if c0 == eos or |history| == max_new_tokens  (the last c0 is then dropped:
 *                                                                frames = draws - 1 at the cap)
 *
 * A generation is active while a drawn c0 waits for its frame; each step
 * emits exactly one frame. qtts_generate runs begin + steps to the end.
 * qtts_gen_step_batch advances n generations by one frame each with the
 * backend's batched stages; every generation's draws, frames and debug
 * capture are bit-identical to running it alone.
 *
 * prefill, cp_frame and the talker step run on the backend (backend.h); the
 * loop, the sampling rules and the bookkeeping run here on the host. w is
 * the host view of the weights (dimensions and the constant Ppad row).
 * The sequence must hold prompt.len + max_new_tokens - 1 positions.
 */
#ifndef QTTS_GENERATE_H
#define QTTS_GENERATE_H

#include "../backend/backend.h"
#include "prompt.h"
#include "sampling.h"
#include "talker.h"

typedef struct {
    qtts_sampler_params talker;  /* codebook 0 */
    qtts_talker_rules rules;     /* codebook 0: penalty, min tokens, suppression, eos */
    qtts_sampler_params cp;      /* codebooks 1..G-1 */
    int max_new_tokens;          /* codebook-0 draws, EOS included (>= 1) */
    uint64_t seed;
} qtts_gen_params;

/* The model's defaults: generation_config.json values, eos = codec eos id,
 * min_new_tokens 2, suppression [V-1024, V), seed 0. */
void qtts_gen_params_default(const qtts_config *cfg, qtts_gen_params *p);

/* Called once per completed frame with codes[G] (c0..c15). Return non-zero
 * to stop: the generation then fails with QTTS_ERR_CANCELLED. */
typedef int (*qtts_frame_fn)(void *user, int frame, const int32_t *codes);

/* Optional capture for tests; any array may be NULL. Rows beyond the caps
 * are not recorded (the counts still advance). */
typedef struct {
    int cap_draws;
    float *talker_logits;    /* [cap_draws, V] raw codec_head logits behind each draw */
    int32_t *talker_tokens;  /* [cap_draws] drawn c0 */
    float *talker_margin;    /* [cap_draws] top1 - top2 of the processed scores */
    float *talker_hidden;    /* [cap_draws, H] final-normed hidden behind each draw */
    int cap_cp_frames;
    float *cp_logits;        /* [cap_cp_frames, G-1, Vc] raw CP logits per frame */
} qtts_gen_debug;

typedef struct {
    int n_draws;           /* codebook-0 tokens drawn, EOS included */
    int n_frames;          /* frames emitted */
    bool stopped_by_eos;
} qtts_gen_result;

/* One sequence's generation. Fields are read-only outside generate.c;
 * be, seq, w, prompt, dbg and user are borrowed and must outlive it. */
typedef struct {
    qtts_backend *be;
    qtts_seq *seq;
    const qtts_talker_weights *w;
    const qtts_prompt *prompt;
    qtts_gen_params gp;
    qtts_frame_fn on_frame;
    void *user;
    qtts_gen_debug *dbg;

    qtts_gen_result r;     /* progress so far (also after a failure) */
    bool active;           /* a drawn c0 waits for its frame */
    qtts_status status;    /* the failure that ended it, or QTTS_OK */
    int c0;                /* the pending draw */
    qtts_rng rng;          /* codebook 0 and the CP draw from this one stream */
    float *logits;         /* [V] as produced */
    float *scores;         /* [V] the copy the processors and the sampler modify */
    float *g;              /* [H] talker hidden behind the pending draw */
    int32_t *history;      /* [max_new_tokens] drawn c0 */
    int32_t *codes;        /* [G] the frame being built */
    void *scratch;         /* sampler scratch */
} qtts_gen;

/* Checks the limits, runs the prefill and the first draw. Always
 * initialises *g (call qtts_gen_end afterwards, also on failure). On
 * success g is active unless the first draw already ended it (EOS, or
 * max_new_tokens == 1). */
qtts_status qtts_gen_begin(qtts_gen *g, qtts_backend *be, qtts_seq *seq,
                           const qtts_talker_weights *w, const qtts_prompt *prompt,
                           const qtts_gen_params *gp, qtts_frame_fn on_frame, void *user,
                           qtts_gen_debug *dbg, qtts_err *err);

static inline bool qtts_gen_active(const qtts_gen *g) { return g->active; }

/* One frame of an active generation: cp_frame, on_frame, talker step, next
 * draw (single-sequence backend stages). On failure g is inactive. */
qtts_status qtts_gen_step(qtts_gen *g, qtts_err *err);

/* One frame for each of n >= 1 active generations on one backend (distinct
 * sequences). n == 1 is qtts_gen_step; otherwise the backend's batched
 * stages run. Generation i that fails becomes inactive with status set and
 * its message in errs[i]; the others go on. The return value is non-zero
 * only for a whole-batch failure: QTTS_ERR_INVALID for a bad list (nothing
 * done), or a backend/allocation failure that then ended every generation
 * of the batch (each with that status and errs[i] = *err). on_frame fires
 * for the generations in list order. */
qtts_status qtts_gen_step_batch(qtts_gen **gens, int n, qtts_err *errs, qtts_err *err);

/* Frees the generation's buffers (idempotent; g->r stays valid). */
void qtts_gen_end(qtts_gen *g);

/* begin + steps until inactive + end. res (may be NULL) is filled also on
 * failure (progress up to the failure). */
qtts_status qtts_generate(qtts_backend *be, qtts_seq *seq, const qtts_talker_weights *w,
                          const qtts_prompt *prompt, const qtts_gen_params *gp,
                          qtts_frame_fn on_frame, void *user, qtts_gen_debug *dbg,
                          qtts_gen_result *res, qtts_err *err);

#endif
