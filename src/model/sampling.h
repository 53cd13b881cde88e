/*
 * sampling.h - the reference's logits-processor chain and token draw.
 *
 * Talker (codebook 0), in the order HF generate 4.57 applies them:
 *   1. repetition penalty over the distinct ids already generated in this
 *      utterance: s < 0 ? s*p : s/p in fp32 (p rounded to fp32, as torch
 *      does with a Python scalar); skipped when p == 1
 *   2. min-new-tokens: while n_history < min_new_tokens, s[eos] = -inf
 *      (HF builds two processors for this, MinLength with min_length =
 *      2 + 0 prompt ids since the prompt is inputs_embeds, and
 *      MinNewTokensLength; both block EOS while fewer than 2 ids exist)
 *   3. suppress: s[i] = -inf for i in [suppress_begin, suppress_end)
 *      except eos
 *   then qtts_sample(): greedy = argmax of the scores as processed so far
 *   (first index on ties; no warper runs, as in HF, which only adds the
 *   warpers when do_sample); sampling = temperature (if != 1; s / t in
 *   fp32), top-k (if k != 0; keep everything >= the k-th largest value,
 *   ties kept), top-p (if p < 1; see qtts_apply_top_p), softmax, one draw.
 * Code predictor: only qtts_sample() (no penalty, no suppression, no
 * min-new-tokens).
 *
 * In the reference the suppression exception is the config's
 * codec_eos_token_id (2150) even when generate() gets another eos_token_id;
 * here one eos_id serves both rules, so an EOS override inside the
 * suppressed range is not reproduced.
 *
 * Non-finite scores: every function here first rewrites NaN to -inf (HF
 * would propagate it; the engine checks logits separately). All -inf gives
 * index 0. A +inf score is infinitely likely: the draw returns the first.
 *
 * The RNG is ours (xoshiro256**, seeded through splitmix64): torch's
 * multinomial stream cannot be reproduced, so sampled output matches the
 * reference only in distribution; greedy output matches exactly.
 */
#ifndef QTTS_SAMPLING_H
#define QTTS_SAMPLING_H

#include "../base/base.h"

typedef struct {
    bool do_sample;
    int top_k;          /* 0 = off */
    float top_p;        /* 1.0 = off */
    float temperature;  /* > 0 and finite (asserted; validate at the API
                           boundary, where 0 means "use greedy"); 1.0 = off */
} qtts_sampler_params;

typedef struct { uint64_t s[4]; } qtts_rng;

void qtts_rng_seed(qtts_rng *rng, uint64_t seed);
uint64_t qtts_rng_next(qtts_rng *rng);
double qtts_rng_uniform(qtts_rng *rng);  /* [0, 1) with 53 random bits */

typedef struct {
    float repetition_penalty;  /* 1.0 = off */
    int eos_id;                /* 2150 */
    int min_new_tokens;        /* 2 */
    int suppress_begin;        /* vocab - 1024 = 2048 */
    int suppress_end;          /* vocab = 3072 */
} qtts_talker_rules;

/* Steps 1-3 above, in place on scores[vocab]. history holds the n_history
 * codebook-0 ids generated so far (any order, repeats allowed). */
void qtts_talker_process(float *scores, int vocab, const int32_t *history, int n_history,
                         const qtts_talker_rules *rules);

/* Temperature / top-k / top-p / draw (or argmax when !do_sample), in place on
 * scores[vocab] (they are modified). Returns the chosen id. If margin is
 * non-NULL it receives top1 - top2 of the scores as they were on entry
 * (used to recognise near-ties in greedy tests): 0 on a tie, +inf when at
 * most one score is above -inf. scratch must hold vocab
 * floats + vocab ints (see QTTS_SAMPLE_SCRATCH). */
#define QTTS_SAMPLE_SCRATCH(vocab) ((size_t)(vocab) * (sizeof(float) + sizeof(int)))
int qtts_sample(float *scores, int vocab, const qtts_sampler_params *p, qtts_rng *rng,
                void *scratch, float *margin);

/* Stages of qtts_sample exposed for the golden tests (in place). Each one
 * is the HF warper itself, applied unconditionally; qtts_sample decides
 * which to run. scratch is as for qtts_sample.
 *
 * temperature: s / t in fp32; t > 0 and finite (asserted).
 * top-k: k == 0 or k >= vocab is a no-op; else entries < the k-th largest
 *   value (counted with multiplicity) become -inf. O(vocab log k).
 * top-p: p in [0, 1] (asserted). Sort ascending exactly as torch.sort does
 *   on CPU (libstdc++ std::sort: not stable, the order of tied values is
 *   reproduced), softmax, cumulative sum (double, rounded to fp32 per
 *   element), remove entries whose cumulative probability <= thr, never the
 *   last (largest) one. thr = (float)(1.0 - p) in double, where p is first
 *   read back as the shortest decimal that rounds to the float (0.9f is
 *   taken as 0.9), matching HF's Python-float arithmetic. If the maximum is
 *   infinite nothing is removed (torch's softmax is NaN there). */
void qtts_apply_temperature(float *scores, int vocab, float temperature);
void qtts_apply_top_k(float *scores, int vocab, int k, void *scratch);
void qtts_apply_top_p(float *scores, int vocab, float p, void *scratch);

/* torch.sort(values, descending=False) on CPU: sorts values[n] ascending
 * and applies the same permutation to indices[n] (pass 0..n-1 to get
 * torch's sorted_indices), ties in torch's order. No NaN allowed. */
void qtts_sort_ascending_like_torch(float *values, int *indices, int n);

#endif
