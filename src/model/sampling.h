/*
 * sampling.h - the reference's logits-processor chain and token draw.
 *
 * Talker (codebook 0), in the order HF generate 4.57 applies them:
 *   1. repetition penalty over the distinct ids already generated in this
 *      utterance (s > 0 ? s/p : s*p), skipped when p == 1
 *   2. min-new-tokens: while n_history < min_new_tokens, s[eos] = -inf
 *   3. suppress: s[i] = -inf for i in [suppress_begin, suppress_end)
 *      except eos
 *   then qtts_sample(): greedy = argmax (first index on ties); sampling =
 *   temperature (if != 1), top-k (if k != 0; keep everything >= the k-th
 *   largest value, ties kept), top-p (if p < 1), softmax, one draw.
 * Code predictor: only qtts_sample() (no penalty, no suppression).
 *
 * The RNG is ours (xoshiro256**): torch's multinomial stream cannot be
 * reproduced, so sampled output matches the reference only in
 * distribution; greedy output matches exactly.
 */
#ifndef QTTS_SAMPLING_H
#define QTTS_SAMPLING_H

#include "../base/base.h"

typedef struct {
    bool do_sample;
    int top_k;          /* 0 = off */
    float top_p;        /* 1.0 = off */
    float temperature;  /* > 0; 1.0 = off */
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
 * (used to recognise near-ties in greedy tests). scratch must hold vocab
 * floats + vocab ints (see QTTS_SAMPLE_SCRATCH). */
#define QTTS_SAMPLE_SCRATCH(vocab) ((size_t)(vocab) * (sizeof(float) + sizeof(int)))
int qtts_sample(float *scores, int vocab, const qtts_sampler_params *p, qtts_rng *rng,
                void *scratch, float *margin);

/* Stages of qtts_sample exposed for the golden tests (in place). */
void qtts_apply_temperature(float *scores, int vocab, float temperature);
void qtts_apply_top_k(float *scores, int vocab, int k, void *scratch);
void qtts_apply_top_p(float *scores, int vocab, float p, void *scratch);

#endif
