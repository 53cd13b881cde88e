/*
 * encoder_kernels.h - CPU math the speech-tokenizer encoder needs on top of
 * kernels.h: ELU, strided causal convolutions run as stride-1 convs over a
 * phase-packed input, and the vector-quantizer nearest-codeword search.
 *
 * Strided conv (torch Conv1d, kernel k, stride s, causal left padding
 * k - s, output length ceil(n / s)): with taps = ceil(k / s), the input
 * x[C, n] is packed phase-major as X[C*s, m] with X[c*s + p, t] =
 * x[c, t*s + p] (m = ceil(n / s); columns past n take the right padding),
 * behind taps-1 history columns per row that hold the left padding. The
 * weight is packed once as a stride-1 conv of C*s input channels and
 * `taps` taps (front-padded with zero taps to taps*s), so
 *     y[o, t] = sum_{c,j} w[o, c, j] * x[c, t*s + j - (k - s)]
 * runs through a stride-1 causal conv on X (the encoder: qtts_conv1d_run).
 *
 * Nearest codeword: the reference scores codewords with torch.cdist, which
 * for more than 25 codewords takes the matmul ("expanded") form
 *     d2 = (-2 r.c + |r|^2) + |c|^2   in fp32, clamped at 0, then sqrt,
 * and argmin keeps the first minimum. qtts_vq_nearest evaluates exactly that
 * expression for every codeword with one fixed summation order (the same
 * for every codeword, so equal codewords tie and the lower index wins).
 */
#ifndef QTTS_ENCODER_KERNELS_H
#define QTTS_ENCODER_KERNELS_H

#include "kernels.h"

/* y[c, t] = elu(x[c, t]) = x > 0 ? x : qtts_expm1(x)  (alpha 1; y may
 * alias x when ldy == ldx). Rows are split over the thread pool. */
void qtts_elu(float *y, size_t ldy, const float *x, size_t ldx, int channels, int n);

/* Pack a torch Conv1d weight w[cout, cin, k] (+ bias[cout] or NULL) with
 * stride s as the equivalent stride-1 conv over a phase-packed input
 * (cin*s channels, ceil(k/s) taps); see the top of this file. false on
 * allocation failure. Requires k >= s. */
bool qtts_conv1d_strided_init(qtts_conv1d *c, const float *w, const float *bias, int cout, int cin,
                              int k, int s);

/* Taps of the packed form: ceil(k / s). The packed input needs taps-1
 * history columns per row. */
static inline int qtts_conv1d_strided_taps(int k, int s) { return (k + s - 1) / s; }

/* X[c*s + p, t] = f(x[c, t*s + p]) for t < m = ceil(n/s) (X row stride
 * ldX, pointing at column 0 after the history), f = ELU when elu is true
 * else the identity. Positions t*s + p >= n take `pad` (a per-channel value
 * when pad_rep is true: x[c, n-1], the replicate padding; else zero). */
void qtts_phase_pack(float *X, size_t ldX, const float *x, size_t ldx, int channels, int n, int s,
                     bool elu, bool pad_rep);

/* Index of the codeword of cb[count, dim] nearest to r[dim] under the
 * reference's expanded-form distance (first index on ties). cb_sq[j] must
 * be qtts_vq_sqnorm of codeword j. The dots r.c are qtts_dot_f32's, taken
 * from qtts_attn_scores (scale 1, exact), which computes them four
 * codewords at a time on the CPU's vector units in that same order. */
int qtts_vq_nearest(const float *r, const float *cb, const float *cb_sq, int count, int dim);

/* out[i] = qtts_vq_nearest(r + i * dim, ...) for the nr rows r[nr, dim],
 * the same bits, several rows per pass over the codebook. */
void qtts_vq_nearest_rows(const float *r, int nr, const float *cb, const float *cb_sq, int count,
                          int dim, int *out);

/* |v|^2 in fp32, summed in the order qtts_vq_nearest uses for |r|^2. */
float qtts_vq_sqnorm(const float *v, int dim);

#endif
