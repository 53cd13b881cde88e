/*
 * talker.h - the talker (codebook-0 decoder) and the code predictor (CP,
 * codebooks 1..15), fp32 compute on weights viewed in place in the mmap.
 *
 * Shapes (H = talker hidden, C = CP hidden, T = text hidden, hd = head dim,
 * G = num_code_groups = 16, V = talker vocab 3072, Vc = CP vocab 2048):
 *
 *   text id --text_embedding[T]--> fc1 (+b1, T->T) --silu--> fc2 (+b2, T->H)  = P(id) [H]
 *   codec id --codec_embedding--> E(id) [H]
 *   prefill: embeds[L,H] --28 x layer--> final norm --> hidden[H] (last row)
 *            --codec_head--> logits[V]
 *   step:    x[H] at position n_pos, same stack, KV cache appended
 *   cp_frame(hidden[H], c0):
 *       z0 = S(hidden), z1 = S(E(c0))          S = small_to_mtp [C,H]+b or identity
 *       CP stack on [z0,z1] at positions 0,1 --norm--> cp_head[0] --> c1
 *       for j = 1..14: z = S(E_j(c_j)) at position j+1 --> cp_head[j] --> c_{j+1}
 *       (E_j = CP codec_embedding[j-1], width H; CP KV cache reset per frame)
 *   next talker input = E(c0) + sum_{i=1..15} E_i(c_i)   [H], unprojected
 *
 * Layer (both stacks): h = rmsnorm(x); q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ;
 * per-head rmsnorm on q and k; rotate-half RoPE (fp32 tables, §5.2 of the
 * spec); causal GQA attention (query head j uses KV head j / (heads/kv));
 * x += o·Woᵀ; x += down(silu(gate(h2)) * up(h2)) with h2 = rmsnorm(x).
 *
 * Ownership: qtts_talker_weights is immutable after load and borrows the
 * tensor data of the safetensors set (which must outlive it); it owns only
 * f32 copies of norm/bias vectors, RoPE tables of the CP, the three
 * constant text rows and the matrices it quantized at load.
 *
 * Quantization (docs/QUANT.md): the linear-layer matrices of the talker
 * (28 layers x q,k,v,o,gate,up,down and codec_head) and of the code
 * predictor (its layers, the 15 lm_heads and small_to_mtp_projection) may
 * be Q8_0 or Q4_0, per component: quantized at load from BF16/F32
 * (qtts_talker_load_quant; the bf16 pages are then released from the
 * process), or stored so in a quantized model file (used in place when
 * its rows are packed, format version 2; repacked at load otherwise).
 * Embeddings, norms, biases and the text projection stay at full
 * precision. qtts_talker_quant_part names the matrices of each component,
 * for the loader and the offline writer alike. qtts_talker_state is one request's mutable timeline:
 * the talker KV cache (preallocated for max_pos positions), the CP KV cache
 * and all scratch. Several states can share one weights object.
 *
 * Determinism: every row goes through the same per-row code whether it is
 * processed alone (step), in a prefill chunk, or in a batch of several
 * requests, so the bits do not depend on how rows are grouped.
 *
 * Batching: qtts_talker_step_batch and qtts_cp_frame_batch advance n
 * requests (n distinct states) together: each weight matrix is read once
 * for all n rows, while attention, sampling and every other per-row stage
 * use each request's own state, position, sampler parameters and RNG. A
 * request's result is bit-identical to its single-request call
 * (qtts_talker_step / qtts_cp_frame are the batch of one). The batch's
 * activations live in the first job's state, which grows to fit.
 */
#ifndef QTTS_TALKER_H
#define QTTS_TALKER_H

#include "../base/base.h"
#include "../io/config.h"
#include "../io/safetensors.h"
#include "../kernels/kernels.h"
#include "sampling.h"

/* Weight formats of the quantizable matrices of one component. */
typedef enum {
    QTTS_QUANT_NONE = 0,  /* as stored (BF16/F32; or Q8_0/Q4_0 in a quantized file) */
    QTTS_QUANT_INT8,      /* Q8_0 */
    QTTS_QUANT_INT4,      /* Q4_0 */
} qtts_quant;

typedef struct {
    qtts_quant talker, cp;
} qtts_talker_quant;

/* Element format of the talker's KV cache (the code predictor's, at most
 * G positions, stays fp32). bf16 halves the bytes each decode step reads
 * over a long context; the values are rounded to nearest even as they are
 * stored (kernels.h, qtts_attn_scores_bf16). */
typedef enum { QTTS_KV_F32 = 0, QTTS_KV_BF16 } qtts_kv_format;

/* Which component a tensor name's matrix belongs to for quantization. */
typedef enum { QTTS_QPART_NONE, QTTS_QPART_TALKER, QTTS_QPART_CP } qtts_qpart;
qtts_qpart qtts_talker_quant_part(const char *name);

/* "none"/"bf16"/"" -> NONE, "int8"/"q8_0" -> INT8, "int4"/"q4_0" -> INT4
 * (case-insensitive); false for anything else. NULL is NONE. */
bool qtts_quant_parse(const char *s, qtts_quant *out);
const char *qtts_quant_name(qtts_quant q);      /* "none", "int8", "int4" */
qtts_dtype qtts_quant_dtype(qtts_quant q);      /* QTTS_DT_Q8_0 / Q4_0; F32 for NONE */

/* One decoder layer. D = stack width, I = inter, nh/nkv heads, hd head dim. */
typedef struct {
    qtts_mat q, k, v, o;      /* [nh*hd, D], [nkv*hd, D], [nkv*hd, D], [D, nh*hd] */
    qtts_mat gate, up, down;  /* [I, D], [I, D], [D, I] */
    float *attn_norm;         /* [D]  input_layernorm */
    float *mlp_norm;          /* [D]  post_attention_layernorm */
    float *q_norm, *k_norm;   /* [hd] */
} qtts_layer_weights;

/* A decoder stack (talker or CP). */
typedef struct {
    int dim, inter, n_layers, n_heads, n_kv, head_dim;
    float eps;
    double theta;
    qtts_layer_weights *layers;  /* [n_layers] */
    float *norm;                 /* [dim] final norm */
} qtts_stack_weights;

typedef struct {
    int hidden;       /* H */
    int text_hidden;  /* T */
    int text_vocab;
    int vocab;        /* V: talker codec vocabulary */
    int n_groups;     /* G: codebooks per frame */
    int cp_vocab;     /* Vc: entries per CP codebook */

    qtts_stack_weights talker, cp;

    qtts_mat text_embedding;       /* [text_vocab, T] */
    qtts_mat text_fc1, text_fc2;   /* [T, T], [H, T] */
    float *text_fc1_b, *text_fc2_b;/* [T], [H] */
    qtts_mat codec_embedding;      /* [V, H]   E */
    qtts_mat codec_head;           /* [V, H] */

    qtts_mat *cp_embedding;        /* [G-1] of [Vc, H]: entry j embeds codebook j+1 */
    qtts_mat *cp_head;             /* [G-1] of [Vc, C]: entry j predicts codebook j+1 */
    bool has_mtp;                  /* small_to_mtp_projection present (C != H) */
    qtts_mat mtp;                  /* [C, H] */
    float *mtp_b;                  /* [C] */

    float *cp_cos, *cp_sin;        /* [G, hd/2] CP RoPE table (positions 0..G-1) */
    float *p_pad, *p_bos, *p_eos;  /* [H] P(tts_pad), P(tts_bos), P(tts_eos) */

    qtts_talker_quant quant;       /* formats as loaded (NONE: BF16/F32) */
    qtts_kv_format kv;             /* KV cache of the states made after it is set (F32 at load) */
    void **owned;                  /* data of the matrices quantized at load */
    int n_owned, cap_owned;
} qtts_talker_weights;

/* Bind and shape-check every talker/CP tensor of the set against cfg
 * (BF16 or F32 matrices; Q8_0/Q4_0 too for the quantizable ones, which
 * only a quantized model file holds). Fails with QTTS_ERR_FORMAT naming
 * the tensor when one is missing or mis-shaped, or when
 * small_to_mtp_projection is present iff C == H does not hold. */
qtts_status qtts_talker_load(const qtts_config *cfg, const qtts_st_set *st,
                             qtts_talker_weights **out, qtts_err *err);

/* qtts_talker_load, then each component's matrices in q's format (q may be
 * NULL: as stored): BF16/F32 matrices are quantized (qtts_mat_quantize)
 * and their mapped pages released; matrices already stored in that
 * format are used in place (packed rows) or repacked (plain blocks, an
 * older file). QTTS_ERR_UNSUPPORTED when a matrix is stored
 * quantized in another format than the one asked for. */
qtts_status qtts_talker_load_quant(const qtts_config *cfg, const qtts_st_set *st,
                                   const qtts_talker_quant *q, qtts_talker_weights **out,
                                   qtts_err *err);
void qtts_talker_free(qtts_talker_weights *w);  /* NULL ok */

typedef struct qtts_talker_state qtts_talker_state;

/* A state whose talker KV cache holds max_pos positions (prefill length +
 * generated steps), in w->kv's format. Memory: layers * 2 * nkv * hd * 4
 * bytes per position (2 for bf16), reserved for max_pos positions rounded up
 * to whole chunks of 128 and touched a chunk at a time as positions fill. */
qtts_status qtts_talker_state_new(const qtts_talker_weights *w, int max_pos,
                                  qtts_talker_state **out, qtts_err *err);
/* The same with `chunk` positions per chunk of the KV cache (talker.c: its
 * layout) instead of the default; the results are the same bits for any
 * chunk, which the tests check with small ones. */
qtts_status qtts_talker_state_new_chunked(const qtts_talker_weights *w, int max_pos, int chunk,
                                          qtts_talker_state **out, qtts_err *err);
void qtts_talker_state_free(qtts_talker_state *st);  /* NULL ok */
int qtts_talker_state_max_pos(const qtts_talker_state *st);
int qtts_talker_state_pos(const qtts_talker_state *st);  /* positions filled */

/* P(id) for n text ids: out[n, H]. QTTS_ERR_INVALID on an id outside the
 * text vocabulary. */
qtts_status qtts_talker_text_proj(const qtts_talker_weights *w, const int32_t *ids, int n,
                                  float *out, qtts_err *err);

/* out[H] = E(id), the talker codec embedding row (id < V). */
void qtts_talker_codec_row(const qtts_talker_weights *w, int id, float *out);

/* out[H] = E(codes[0]) + sum_{i=1..G-1} E_i(codes[i]), summed in that order.
 * codes[0] < V, codes[i] < Vc (asserted). */
void qtts_talker_codec_sum(const qtts_talker_weights *w, const int32_t *codes, float *out);

/* Reset the state and run the talker on embeds[L, H] at positions 0..L-1.
 * logits[V] and hidden[H] (final-normed) belong to the last position.
 * QTTS_ERR_LIMIT if L > max_pos. */
qtts_status qtts_talker_prefill(const qtts_talker_weights *w, qtts_talker_state *st,
                                const float *embeds, int L, float *logits, float *hidden,
                                qtts_err *err);

/* The same, computing positions from..L-1 only (0 <= from < L): the KV
 * cache's positions below `from` must hold what a prefill of these same
 * rows wrote there (a position's KV depends only on the rows up to it, and
 * every row goes through the same per-row code, so the results are the
 * same bits as qtts_talker_prefill's). */
qtts_status qtts_talker_prefill_from(const qtts_talker_weights *w, qtts_talker_state *st,
                                     const float *embeds, int L, int from, float *logits,
                                     float *hidden, qtts_err *err);

/* One talker position: x[H] at position pos(st), then pos(st) += 1.
 * QTTS_ERR_LIMIT when the KV cache is full. */
qtts_status qtts_talker_step(const qtts_talker_weights *w, qtts_talker_state *st,
                             const float *x, float *logits, float *hidden, qtts_err *err);

/* One request's part of qtts_talker_step_batch. */
typedef struct {
    qtts_talker_state *st;
    const float *x;          /* [H] input row */
    float *logits, *hidden;  /* out: [V], [H] (final-normed) */
    qtts_status status;      /* out: this request's result (QTTS_ERR_LIMIT: KV cache full) */
    qtts_err *err;           /* out: its message when status != QTTS_OK; may be NULL */
} qtts_talker_step_job;

/* qtts_talker_step for each of n jobs (distinct states) as one batch. A
 * job that fails (status) does not advance and does not affect the others.
 * Returns non-zero only when nothing was done (QTTS_ERR_NOMEM growing the
 * batch scratch). */
qtts_status qtts_talker_step_batch(const qtts_talker_weights *w, qtts_talker_step_job *jobs,
                                   int n, qtts_err *err);

/* The CP for one frame: given the talker hidden[H] that produced c0 and c0
 * itself, produce codes_out[G-1] = c1..c15 (sampled with sp; greedy when
 * !sp->do_sample). cp_logits_out, if not NULL, receives the raw logits of
 * the G-1 steps [G-1, Vc]. QTTS_ERR_NUMERIC on a non-finite logit. */
qtts_status qtts_cp_frame(const qtts_talker_weights *w, qtts_talker_state *st,
                          const float *hidden, int c0, const qtts_sampler_params *sp,
                          qtts_rng *rng, int32_t *codes_out, float *cp_logits_out,
                          qtts_err *err);

/* One request's part of qtts_cp_frame_batch (the arguments of qtts_cp_frame). */
typedef struct {
    qtts_talker_state *st;
    const float *hidden;             /* [H] */
    int c0;
    const qtts_sampler_params *sp;
    qtts_rng *rng;
    int32_t *codes_out;              /* out: [G-1] */
    float *cp_logits_out;            /* out: [G-1, Vc] raw logits, or NULL */
    qtts_status status;              /* out: QTTS_ERR_INVALID (c0), QTTS_ERR_NUMERIC */
    qtts_err *err;                   /* out: its message when status != QTTS_OK; may be NULL */
} qtts_cp_job;

/* qtts_cp_frame for each of n jobs (distinct states) as one batch: each of
 * the G-1 passes is one matmul per weight over the live jobs' rows (2 rows
 * per job in the first pass). A job that fails leaves the batch at that
 * pass; the others go on. Returns non-zero only when nothing was done
 * (QTTS_ERR_NOMEM growing the batch scratch). */
qtts_status qtts_cp_frame_batch(const qtts_talker_weights *w, qtts_cp_job *jobs, int n,
                                qtts_err *err);

/* true iff all n values are finite. */
bool qtts_all_finite(const float *x, size_t n);

#endif
