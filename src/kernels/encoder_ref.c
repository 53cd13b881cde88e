/*
 * encoder_ref.c - scalar reference implementations of encoder_kernels.h
 * (ELU, phase packing and weight packing for strided causal convs, the
 * vector-quantizer nearest-codeword search).
 *
 * Strided conv weight packing: the torch weight w[cout, cin, k] becomes a
 * torch-layout stride-1 weight W[cout, cin*s, taps] with
 *     W[o, c*s + p, q] = w[o, c, q*s + p - (taps*s - k)]   (0 outside [0, k))
 * which qtts_conv1d_init then packs for the tiled conv kernel. Tap q of the
 * stride-1 conv reads packed column t - (taps-1-q), i.e. samples
 * (t - taps + 1 + q)*s + p, which is exactly the sample the torch conv
 * multiplies with w[o, c, q*s + p - (taps*s - k)] after its k - s samples
 * of left padding.
 */
#include "encoder_kernels.h"

#include <math.h>
#include <string.h>

static inline float elu1(float v) { return v > 0.0f ? v : expm1f(v); }

void qtts_elu(float *y, size_t ldy, const float *x, size_t ldx, int channels, int n) {
    for (int c = 0; c < channels; c++) {
        const float *xr = x + (size_t)c * ldx;
        float *yr = y + (size_t)c * ldy;
        for (int t = 0; t < n; t++) yr[t] = elu1(xr[t]);
    }
}

bool qtts_conv1d_strided_init(qtts_conv1d *c, const float *w, const float *bias, int cout, int cin,
                              int k, int s) {
    memset(c, 0, sizeof(*c));
    QTTS_ASSERT(cout > 0 && cin > 0 && s > 0 && k >= s);
    const int taps = qtts_conv1d_strided_taps(k, s), front = taps * s - k, cs = cin * s;
    float *W = qtts_calloc((size_t)cout * cs * taps, sizeof(float));
    if (!W) return false;
    for (int o = 0; o < cout; o++)
        for (int ci = 0; ci < cin; ci++)
            for (int j = 0; j < k; j++) {
                const int jj = j + front, q = jj / s, p = jj % s;
                W[((size_t)o * cs + (size_t)ci * s + p) * taps + q] = w[((size_t)o * cin + ci) * k + j];
            }
    const bool ok = qtts_conv1d_init(c, W, bias, cout, cs, taps, 1);
    qtts_free(W);
    return ok;
}

void qtts_phase_pack(float *X, size_t ldX, const float *x, size_t ldx, int channels, int n, int s,
                     bool elu, bool pad_rep) {
    const int m = (n + s - 1) / s;
    for (int c = 0; c < channels; c++) {
        const float *xr = x + (size_t)c * ldx;
        float pad = 0.0f;
        if (pad_rep && n > 0) pad = elu ? elu1(xr[n - 1]) : xr[n - 1];
        for (int p = 0; p < s; p++) {
            float *Xr = X + ((size_t)c * s + p) * ldX;
            for (int t = 0; t < m; t++) {
                const int i = t * s + p;
                Xr[t] = i < n ? (elu ? elu1(xr[i]) : xr[i]) : pad;
            }
        }
    }
}

float qtts_vq_sqnorm(const float *v, int dim) { return qtts_dot_f32(v, v, dim); }

int qtts_vq_nearest(const float *r, const float *cb, const float *cb_sq, int count, int dim) {
    const float rn = qtts_vq_sqnorm(r, dim);
    int best = 0;
    float best_d = INFINITY;
    for (int j = 0; j < count; j++) {
        const float dot = qtts_dot_f32(r, cb + (size_t)j * dim, dim);
        float d2 = (-2.0f * dot + rn) + cb_sq[j];
        d2 = d2 > 0.0f ? d2 : 0.0f;
        const float d = sqrtf(d2);
        if (d < best_d) {
            best_d = d;
            best = j;
        }
    }
    return best;
}
