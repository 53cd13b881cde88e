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

#include "../base/thread.h"

#include <math.h>
#include <string.h>

static inline float elu1(float v) {
    float y;
    qtts_elu_row(&y, &v, 1);
    return y;
}

typedef struct {
    float *y;
    const float *x;
    size_t ldy, ldx;
    int channels, n, rows_per_task;
} elu_job;

static void elu_task(void *ctx, int task) {
    const elu_job *j = ctx;
    const int c1 = j->channels < (task + 1) * j->rows_per_task ? j->channels
                                                               : (task + 1) * j->rows_per_task;
    for (int c = task * j->rows_per_task; c < c1; c++)
        qtts_elu_row(j->y + (size_t)c * j->ldy, j->x + (size_t)c * j->ldx, (size_t)j->n);
}

/* Rows split over the thread pool in tasks of about 64K values (each row
 * is computed the same way whatever its task). */
void qtts_elu(float *y, size_t ldy, const float *x, size_t ldx, int channels, int n) {
    if (channels <= 0 || n <= 0) return;
    int per = (int)((64 * 1024 + n - 1) / n);
    per = per < 1 ? 1 : per > channels ? channels : per;
    elu_job j = {y, x, ldy, ldx, channels, n, per};
    qtts_parallel_for((channels + per - 1) / per, elu_task, &j);
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

void qtts_vq_nearest_rows(const float *r, int nr, const float *cb, const float *cb_sq, int count,
                          int dim, int *out) {
    enum { ROWS = 8, CW = 256 };   /* rows per kernel call, codewords per block */
    float dots[ROWS * CW];
    for (int r0 = 0; r0 < nr; r0 += ROWS) {
        const int n = nr - r0 < ROWS ? nr - r0 : ROWS;
        const float *rr = r + (size_t)r0 * dim;
        float rn[ROWS], best_d[ROWS];
        for (int i = 0; i < n; i++) {
            rn[i] = qtts_vq_sqnorm(rr + (size_t)i * dim, dim);
            best_d[i] = INFINITY;
            out[r0 + i] = 0;
        }
        for (int j0 = 0; j0 < count; j0 += CW) {
            const int m = count - j0 < CW ? count - j0 : CW;
            /* the rows as the "heads" of one call: each codeword is loaded
             * once for two rows, and every dot keeps its own order */
            const int left = count - j0 - m;   /* the next piece's rows, prefetched */
            qtts_attn_scores(dots, CW, rr, n, cb + (size_t)j0 * dim, (size_t)dim, m, dim, 1.0f,
                             cb + (size_t)(j0 + m) * dim, left < CW ? left : CW);
            for (int i = 0; i < n; i++)
                for (int k = 0; k < m; k++) {
                    float d2 = (-2.0f * dots[i * CW + k] + rn[i]) + cb_sq[j0 + k];
                    d2 = d2 > 0.0f ? d2 : 0.0f;
                    const float d = sqrtf(d2);
                    if (d < best_d[i]) {
                        best_d[i] = d;
                        out[r0 + i] = j0 + k;
                    }
                }
        }
    }
}

int qtts_vq_nearest(const float *r, const float *cb, const float *cb_sq, int count, int dim) {
    int best;
    qtts_vq_nearest_rows(r, 1, cb, cb_sq, count, dim, &best);
    return best;
}
