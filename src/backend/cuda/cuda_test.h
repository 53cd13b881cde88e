/*
 * cuda_test.h - single device ops on host data, for the op-by-op parity
 * suite (tests/cuda/test_cuda_ops.c). Not used by the engine; present only
 * in builds with the CUDA backend (make cuda / make test-cuda).
 *
 * Every call is synchronous, copies its inputs to the device, runs the
 * same launcher the backend uses and copies the result back. The first
 * call picks device 0 (CUDA_VISIBLE_DEVICES chooses which); QTTS_ERR_UNSUPPORTED
 * with "no CUDA device" when there is none.
 */
#ifndef QTTS_CUDA_TEST_H
#define QTTS_CUDA_TEST_H

#include "../../base/base.h"
#include "../../kernels/kernels.h"
#include "../../model/sampling.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns CUDA-graph capture of a "cuda" backend on or off (on by default),
 * so the tests can check that graphs change no bits. */
struct qtts_backend;
void qtts_cuda_test_set_graphs(struct qtts_backend *be, bool on);
/* Whether the backend still uses graphs: a failed capture turns them off
 * for good (the stages then run as direct launches, with the same bits). */
bool qtts_cuda_test_graphs_on(const struct qtts_backend *be);

/* Device name and compute capability into desc; UNSUPPORTED without a device. */
qtts_status qtts_cuda_probe(char *desc, size_t cap, qtts_err *err);

/* y[n, W.rows] = x[n, W.cols] · Wᵀ (+ bias), any qtts_mat format. */
qtts_status qtts_cuda_test_matmul(const qtts_mat *W, const float *x, int n, const float *bias,
                                  float *y, qtts_err *err);
/* y[n, gate.rows] = silu(x · gateᵀ) * (x · upᵀ) (the fused SwiGLU matmul). */
qtts_status qtts_cuda_test_swiglu(const qtts_mat *gate, const qtts_mat *up, const float *x,
                                  int n, float *y, qtts_err *err);
/* out[n, D] = rmsnorm of each row. */
qtts_status qtts_cuda_test_rmsnorm(const float *x, const float *w, int n, int D, float eps,
                                   float *out, qtts_err *err);
/* One row: per-head RMSNorm (qn/kn, NULL = none) + RoPE of q[nh*hd] and
 * k[nkv*hd] in place, with the table row cos/sin[hd/2]. */
qtts_status qtts_cuda_test_qk_rope(float *q, float *k, const float *qn, const float *kn, int nh,
                                   int nkv, int hd, float eps, const float *cos_row,
                                   const float *sin_row, qtts_err *err);
/* One query row q[nh*hd] at position ctx-1 over caches kc/vc [nkv][ctx][hd]:
 * out[nh*hd]. */
qtts_status qtts_cuda_test_attention(const float *q, const float *kc, const float *vc, int nh,
                                     int nkv, int hd, int ctx, float scale, float *out,
                                     qtts_err *err);
/* y[cout, n] (+)= conv(x[cin, n]) with qtts_conv1d c; x unpadded. */
qtts_status qtts_cuda_test_conv(const qtts_conv1d *c, const float *x, int n, bool accumulate,
                                float *y, qtts_err *err);
/* y[C, n] = SnakeBeta(x). */
qtts_status qtts_cuda_test_snake(const float *x, const float *ea, const float *ib, int C, int n,
                                 float *y, qtts_err *err);
/* qtts_layernorm_channels on x[C, n] in place. */
qtts_status qtts_cuda_test_layernorm_ch(float *x, int C, int n, const float *w, const float *b,
                                        float eps, qtts_err *err);
/* One code-predictor draw on logits[V] (not modified) with sp and rng
 * (advanced as qtts_sample advances it). *code = the id; QTTS_ERR_NUMERIC
 * on a non-finite logit. */
qtts_status qtts_cuda_test_sample(const float *logits, int V, const qtts_sampler_params *sp,
                                  qtts_rng *rng, int *code, qtts_err *err);

#ifdef __cplusplus
}
#endif

#endif
