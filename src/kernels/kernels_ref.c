/*
 * kernels_ref.c - scalar reference implementations of kernels.h.
 *
 * Dot products accumulate in 8 independent fp32 lanes (then summed
 * pairwise): cheap for the compiler to vectorise and a fixed, documented
 * order, so every caller sees the same bits for the same inputs.
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

qtts_mat qtts_mat_from(const qtts_tensor *t) {
    QTTS_ASSERT(t && (t->dtype == QTTS_DT_F32 || t->dtype == QTTS_DT_BF16));
    QTTS_ASSERT(t->rank == 2 || (t->rank == 3 && t->shape[2] == 1));
    qtts_mat m = {t->data, t->dtype, (int)t->shape[0], (int)t->shape[1]};
    return m;
}

static inline float reduce8(const float a[8]) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

float qtts_dot_f32(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    return reduce8(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += qtts_bf16_to_f32(w[i + l]) * x[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += qtts_bf16_to_f32(w[i]) * x[i];
    return reduce8(acc);
}

void qtts_matmul(float *y, const float *x, int n, const qtts_mat *W, const float *bias) {
    const int R = W->rows, C = W->cols;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * C;
        float *yr = y + (size_t)t * R;
        if (W->dtype == QTTS_DT_BF16) {
            const uint16_t *w = W->data;
            for (int r = 0; r < R; r++) yr[r] = dot_bf16(w + (size_t)r * C, xr, C);
        } else {
            const float *w = W->data;
            for (int r = 0; r < R; r++) yr[r] = qtts_dot_f32(w + (size_t)r * C, xr, C);
        }
        if (bias)
            for (int r = 0; r < R; r++) yr[r] += bias[r];
    }
}

void qtts_mat_row(float *out, const qtts_mat *W, int row) {
    QTTS_ASSERT(row >= 0 && row < W->rows);
    if (W->dtype == QTTS_DT_BF16) {
        const uint16_t *w = (const uint16_t *)W->data + (size_t)row * W->cols;
        for (int i = 0; i < W->cols; i++) out[i] = qtts_bf16_to_f32(w[i]);
    } else {
        memcpy(out, (const float *)W->data + (size_t)row * W->cols, sizeof(float) * W->cols);
    }
}

void qtts_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0; /* the reference reduces in fp32; double keeps us closer to exact */
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] * inv) * w[i];
}

void qtts_layernorm(float *out, const float *x, const float *w, const float *b, int n,
                    float eps) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= n;
    float inv = 1.0f / sqrtf((float)var + eps);
    for (int i = 0; i < n; i++) out[i] = ((x[i] - (float)mean) * inv) * w[i] + b[i];
}

void qtts_rope(float *x, const float *cos, const float *sin, int d) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        float a = x[i], b = x[i + h];
        x[i] = a * cos[i] - b * sin[i];
        x[i + h] = b * cos[i] + a * sin[i];
    }
}

void qtts_rope_table(float *cos_t, float *sin_t, int n_pos, int d, double theta) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)d);
        for (int p = 0; p < n_pos; p++) {
            float ang = (float)p * inv;
            cos_t[(size_t)p * h + i] = cosf(ang);
            sin_t[(size_t)p * h + i] = sinf(ang);
        }
    }
}

void qtts_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        s += x[i];
    }
    float inv = (float)(1.0 / s);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void qtts_silu_inplace(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

void qtts_gelu_erf_inplace(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void qtts_swiglu(float *y, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void qtts_add_inplace(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
