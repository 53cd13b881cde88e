/*
 * kernels.h - CPU math used by every model stage. Plain C ABI, no model
 * knowledge. All activations are fp32; weights are read in their file
 * dtype (BF16 upcast exactly on use, F32 as is) straight from the mmap.
 *
 * Determinism rule: a row of a matmul is computed by exactly the same code
 * (same accumulation order) whether it is alone or one of many rows, so a
 * batched step gives bit-identical results to a single-stream step.
 *
 * kernels_ref.c is the scalar reference: the oracle for every optimised
 * path added later.
 */
#ifndef QTTS_KERNELS_H
#define QTTS_KERNELS_H

#include "../base/base.h"
#include "../io/safetensors.h"

/* A 2-D weight matrix [rows, cols] (PyTorch Linear layout: y = x·Wᵀ),
 * row-major, viewed in place (not owned). */
typedef struct {
    const void *data;
    qtts_dtype dtype;   /* QTTS_DT_F32 or QTTS_DT_BF16 */
    int rows, cols;
} qtts_mat;

/* View a tensor as a matrix: rank-2 [rows, cols], or rank-3 [rows, cols, 1]
 * (1x1 convs). Asserts on programmer error; shapes are checked at load. */
qtts_mat qtts_mat_from(const qtts_tensor *t);

/* y[n, W.rows] = x[n, W.cols] · Wᵀ (+ bias[W.rows] if bias != NULL). */
void qtts_matmul(float *y, const float *x, int n, const qtts_mat *W, const float *bias);

/* One row of W as f32 (embedding lookup): out[W.cols] = W[row]. */
void qtts_mat_row(float *out, const qtts_mat *W, int row);

/* out = x / sqrt(mean(x²) + eps) * w  (n elements; out may alias x). */
void qtts_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* LayerNorm with weight and bias (biased variance, like torch). */
void qtts_layernorm(float *out, const float *x, const float *w, const float *b, int n,
                    float eps);

/* Rotate-half ("NeoX") RoPE on one head of dim d, given the cos/sin row of
 * the position: cos/sin hold d/2 values; pairs are (i, i + d/2). */
void qtts_rope(float *x, const float *cos, const float *sin, int d);

/* cos/sin tables for positions [0, n_pos): inv_freq[i] = 1/theta^(2i/d)
 * in fp32 (exponent float(2i)/d, fp32 pow), angle = float(p)*inv_freq[i]
 * in fp32 — exactly the reference's rotary embedding. Each table is
 * [n_pos, d/2]. */
void qtts_rope_table(float *cos, float *sin, int n_pos, int d, double theta);

/* In-place softmax over n values (max-subtracted, fp32). */
void qtts_softmax(float *x, int n);

void qtts_silu_inplace(float *x, size_t n);
void qtts_gelu_erf_inplace(float *x, size_t n);   /* exact GELU: 0.5x(1+erf(x/√2)) */

/* y[i] = silu(gate[i]) * up[i] */
void qtts_swiglu(float *y, const float *gate, const float *up, size_t n);

/* y += x */
void qtts_add_inplace(float *y, const float *x, size_t n);

/* Dot product with the same 8-lane accumulation order as qtts_matmul rows. */
float qtts_dot_f32(const float *a, const float *b, int n);

#endif
