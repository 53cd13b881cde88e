/*
 * generate.h - the single-sequence generation loop (spec §7.1).
 *
 *   prefill(prompt.embeds [L,H]) -> logits[V], g[H]
 *   k = 0
 *   loop:
 *     c0 = sample(talker_process(logits, history))      rep. penalty, min tokens, suppress
 *     history += c0
 *     stop if c0 == eos or |history| == max_new_tokens  (the last c0 is then dropped:
 *                                                          frames = draws - 1 at the cap)
 *     c1..c15 = cp_frame(g, c0)          -> on_frame(k, [c0..c15])
 *     x = E(c0) + sum_i E_i(c_i) + (k < n_trailing ? trailing[k] : Ppad)
 *     talker_step(x) -> logits, g ; k += 1
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
 * to stop: qtts_generate then returns QTTS_ERR_CANCELLED. */
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

qtts_status qtts_generate(qtts_backend *be, qtts_seq *seq, const qtts_talker_weights *w,
                          const qtts_prompt *prompt, const qtts_gen_params *gp,
                          qtts_frame_fn on_frame, void *user, qtts_gen_debug *dbg,
                          qtts_gen_result *res, qtts_err *err);

#endif
