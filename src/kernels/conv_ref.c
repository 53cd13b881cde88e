/*
 * conv_ref.c - scalar reference 1-D convolution kernels (kernels.h, "1-D
 * convolution kernels" section) used by the speech-tokenizer decoder.
 *
 * Layout: activations are channel-major [C, n] rows with a caller-chosen
 * row stride; causal left padding is (taps-1)*dil zero columns that the
 * caller keeps in front of every input row, so no kernel ever branches on
 * the sequence start.
 *
 * qtts_conv1d_causal computes a tile of MR=8 output channels x NR=8 time
 * samples in local accumulators:
 *     for tap k:  for ci:  acc[r][j] += Wp[k][ci][r] * x[ci][t0 + j - (taps-1-k)*dil]
 * Tiles run over column blocks of the input sized to stay in L2 (about
 * 192 KiB: 64..1024 columns of cin rows); within a block every MR row group of packed
 * weights ([taps][cin][MR], contiguous) passes over it. The inner r x j
 * update is a fixed-size loop the compiler vectorises (SSE2 at -O2:
 * ~12-16 GFLOP/s on one core of a 2-core AMD EPYC dev VM).
 * A transposed conv is rewritten at pack time as a polyphase causal conv
 * (s phases x cout outputs, k/s taps) so it runs through the same tile.
 * All sums are fp32, tap-major then channel order, identical for a column
 * whichever tile (full or edge) computes it.
 */
#include "kernels.h"

#include "../base/thread.h"

#include <math.h>
#include <string.h>

#define MR QTTS_CONV_MR
#define NR 8

/* Packing: block b of MR output rows gets [taps][cin][MR]. A task packs a
 * run of blocks; the pool spreads them (load time is mostly first-touch
 * page faults on the packed copy, which run in parallel). Row `row` of a
 * transposed conv's polyphase form is phase row / cout, channel row % cout,
 * read straight from the torch ConvTranspose1d layout [cin, cout, k]. */
typedef struct {
    float *dst;
    const float *w;
    int rows, cin, taps;
    int tr_cout, tr_k, tr_s;   /* tr_s > 0: w is a transposed conv's weight */
    int blocks_per_task, n_blocks;
} pack_job;

#define PACK_AHEAD 4   /* input channels ahead that a transposed conv's packing prefetches */

/* A transposed conv's weights of input channel ci for polyphase row `row`
 * (phase row / cout, channel row % cout), at the input shift 0: the shift
 * q is q * tr_s further. */
static const float *tr_src(const pack_job *j, int ci, int row) {
    return j->w + (size_t)ci * j->tr_cout * j->tr_k + (size_t)(row % j->tr_cout) * j->tr_k +
           row / j->tr_cout;
}

static void pack_task(void *ctx, int task) {
    const pack_job *j = ctx;
    const int b0 = task * j->blocks_per_task;
    const int b1 = QTTS_MIN(j->n_blocks, b0 + j->blocks_per_task);
    const int cin = j->cin, taps = j->taps;
    const size_t plane = (size_t)cin * MR;   /* floats from one tap to the next in a block */
    /* Input channel outermost: the MR rows' weights of one channel lie
     * close together in both source layouts (a row's [cin][taps], or the
     * transposed [cin][cout][k] slab of one channel), so the source is read
     * in a few forward streams and each tap's plane is written in order. */
    for (int b = b0; b < b1; b++) {
        float *blk = j->dst + (size_t)b * taps * plane;
        for (int ci = 0; ci < cin; ci++) {
            if (j->tr_s && ci + PACK_AHEAD < cin)   /* channels are a slab apart: prefetch */
                for (int r = 0; r < MR && b * MR + r < j->rows; r++) {
                    const float *src = tr_src(j, ci + PACK_AHEAD, b * MR + r);
                    __builtin_prefetch(src);
                    __builtin_prefetch(src + (size_t)(taps - 1) * j->tr_s);
                }
            for (int r = 0; r < MR; r++) {
                float *d = blk + (size_t)ci * MR + r;
                const int row = b * MR + r;
                if (row >= j->rows) {
                    for (int k = 0; k < taps; k++) d[k * plane] = 0.0f;
                } else if (j->tr_s) {
                    /* tap k reads input shift q = taps - 1 - k */
                    const float *src = tr_src(j, ci, row);
                    for (int k = 0; k < taps; k++)
                        d[k * plane] = src[(size_t)(taps - 1 - k) * j->tr_s];
                } else {
                    const float *src = j->w + ((size_t)row * cin + ci) * taps;
                    for (int k = 0; k < taps; k++) d[k * plane] = src[k];
                }
            }
        }
    }
}

bool qtts_conv1d_alloc(qtts_conv1d *c, int cout, int cin, int taps, int dil) {
    QTTS_ASSERT(cout > 0 && cin > 0 && taps > 0 && dil > 0);
    memset(c, 0, sizeof(*c));
    const int nblk = (cout + MR - 1) / MR;
    if (!(c->w = qtts_aligned_alloc((size_t)nblk * taps * cin * MR * sizeof(float)))) return false;
    c->cout = cout;
    c->cin = cin;
    c->taps = taps;
    c->dil = dil;
    return true;
}

/* A transposed conv whose cout is a whole number of blocks: block b is
 * channels cb = b % (cout/MR) of phase b / (cout/MR), so a task takes
 * channel blocks cb (blocks_per_task of them) in every phase at once. The
 * MR channels' weights of one input channel, [MR][k] in the source, are
 * then read once and contiguously for all s phases; block by block, each
 * phase would read that span again (s times the source for block 1's
 * 75 MB). Same values, same places as pack_task. */
static void pack_tr_task(void *ctx, int task) {
    const pack_job *j = ctx;
    const int nco = j->tr_cout / MR, cin = j->cin, taps = j->taps, k = j->tr_k, s = j->tr_s;
    const int cb0 = task * j->blocks_per_task, cb1 = QTTS_MIN(nco, cb0 + j->blocks_per_task);
    const size_t plane = (size_t)cin * MR, span = (size_t)MR * k;   /* span: floats */
    for (int cb = cb0; cb < cb1; cb++)
        for (int ci = 0; ci < cin; ci++) {
            const float *src = j->w + ((size_t)ci * j->tr_cout + (size_t)cb * MR) * k;
            if (ci + PACK_AHEAD < cin) {   /* input channels are a slab apart */
                const char *a = (const char *)(src + (size_t)PACK_AHEAD * j->tr_cout * k);
                for (size_t o = 0; o < span * sizeof(float); o += 64) __builtin_prefetch(a + o);
            }
            for (int p = 0; p < s; p++) {
                float *d = j->dst + (size_t)(p * nco + cb) * taps * plane + (size_t)ci * MR;
                /* tap t reads input shift q = taps - 1 - t */
                for (int t = 0; t < taps; t++)
                    for (int r = 0; r < MR; r++)
                        d[t * plane + r] = src[(size_t)r * k + p + (size_t)(taps - 1 - t) * s];
            }
        }
}

static bool pack(qtts_conv1d *c, const float *w, const float *bias, int rows, int cin, int taps,
                 int dil, int tr_cout, int tr_k, int tr_s) {
    if (!qtts_conv1d_alloc(c, rows, cin, taps, dil)) return false;
    const int nblk = (rows + MR - 1) / MR;
    if (bias) {
        c->bias = qtts_malloc(sizeof(float) * rows);
        if (!c->bias) {
            qtts_conv1d_free(c);
            return false;
        }
        for (int r = 0; r < rows; r++) c->bias[r] = bias[tr_s ? r % tr_cout : r];
    }
    /* about 1 MiB of packed weights per task */
    const size_t blk_bytes = (size_t)taps * cin * MR * sizeof(float);
    const int per = (int)QTTS_MAX(1, QTTS_MIN((size_t)nblk, (1u << 20) / blk_bytes));
    pack_job j = {c->w, w, rows, cin, taps, tr_cout, tr_k, tr_s, per, nblk};
    if (tr_s && tr_cout % MR == 0) {
        const int nco = tr_cout / MR;
        j.blocks_per_task = (int)QTTS_MAX(1, QTTS_MIN((size_t)nco, (1u << 20) / (blk_bytes * tr_s)));
        qtts_parallel_for((nco + j.blocks_per_task - 1) / j.blocks_per_task, pack_tr_task, &j);
    } else {
        qtts_parallel_for((nblk + per - 1) / per, pack_task, &j);
    }
    return true;
}

bool qtts_conv1d_init(qtts_conv1d *c, const float *w, const float *bias, int cout, int cin,
                      int taps, int dil) {
    QTTS_ASSERT(cout > 0 && cin > 0 && taps > 0 && dil > 0);
    return pack(c, w, bias, cout, cin, taps, dil, 0, 0, 0);
}

bool qtts_convtr1d_init(qtts_conv1d *c, const float *w, const float *bias, int cin, int cout,
                        int k, int s) {
    QTTS_ASSERT(cin > 0 && cout > 0 && s > 0 && k >= s && k % s == 0);
    return pack(c, w, bias, s * cout, cin, k / s, 1, cout, k, s);
}

void qtts_conv1d_free(qtts_conv1d *c) {
    if (!c) return;
    qtts_free(c->w);
    qtts_free(c->bias);
    qtts_free(c->wb);
    memset(c, 0, sizeof(*c));
}

/* One full MR x NR tile: columns t0..t0+NR-1 of output rows b*MR... */
static void conv_tile(const float *restrict wp, const float *restrict x, size_t ldx, int cin,
                      int taps, int dil, float acc[MR][NR]) {
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = 0.0f;
    for (int k = 0; k < taps; k++) {
        const float *xk = x - (ptrdiff_t)(taps - 1 - k) * dil;
        const float *wk = wp + (size_t)k * cin * MR;
        for (int ci = 0; ci < cin; ci++) {
            const float *restrict xr = xk + (size_t)ci * ldx;
            const float *restrict wr = wk + (size_t)ci * MR;
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < NR; j++) acc[r][j] += wr[r] * xr[j];
        }
    }
}

/* Edge tile with nr < NR columns (same per-column summation order). */
static void conv_tile_edge(const float *restrict wp, const float *restrict x, size_t ldx,
                           int cin, int taps, int dil, int nr, float acc[MR][NR]) {
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = 0.0f;
    for (int k = 0; k < taps; k++) {
        const float *xk = x - (ptrdiff_t)(taps - 1 - k) * dil;
        const float *wk = wp + (size_t)k * cin * MR;
        for (int ci = 0; ci < cin; ci++) {
            const float *xr = xk + (size_t)ci * ldx;
            const float *wr = wk + (size_t)ci * MR;
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < nr; j++) acc[r][j] += wr[r] * xr[j];
        }
    }
}

void qtts_conv1d_causal(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                        int n, bool accumulate) {
    QTTS_ASSERT(c->w); /* the fp32 weights (not a conv converted to bf16) */
    const int cout = c->cout, cin = c->cin, taps = c->taps, dil = c->dil;
    const int nblk = (cout + MR - 1) / MR;
    /* Column blocks sized so that one block of input rows (cin x (cb + halo))
     * stays in L2 while every row group of weights passes over it. */
    int cb = (int)((192u << 10) / (sizeof(float) * (size_t)cin)) / NR * NR;
    cb = QTTS_MAX(64, QTTS_MIN(1024, cb));
    float acc[MR][NR];
    for (int c0 = 0; c0 < n; c0 += cb) {
        const int c1 = QTTS_MIN(n, c0 + cb);
        for (int b = 0; b < nblk; b++) {
            const float *wp = c->w + (size_t)b * taps * cin * MR;
            const int co0 = b * MR, rows = QTTS_MIN(MR, cout - co0);
            for (int t0 = c0; t0 < c1; t0 += NR) {
                const int nr = QTTS_MIN(NR, n - t0);
                if (nr == NR)
                    conv_tile(wp, x + t0, ldx, cin, taps, dil, acc);
                else
                    conv_tile_edge(wp, x + t0, ldx, cin, taps, dil, nr, acc);
                for (int r = 0; r < rows; r++) {
                    float *yr = y + (size_t)(co0 + r) * ldy + t0;
                    const float bv = c->bias ? c->bias[co0 + r] : 0.0f;
                    if (accumulate)
                        for (int j = 0; j < nr; j++) yr[j] += acc[r][j] + bv;
                    else
                        for (int j = 0; j < nr; j++) yr[j] = acc[r][j] + bv;
                }
            }
        }
    }
}

void qtts_interleave_phases(float *y, const float *ph, int cout, int n, int s) {
    for (int co = 0; co < cout; co++) {
        float *yr = y + (size_t)co * n * s;
        for (int p = 0; p < s; p++) {
            const float *pr = ph + ((size_t)p * cout + co) * n;
            for (int m = 0; m < n; m++) yr[(size_t)m * s + p] = pr[m];
        }
    }
}

void qtts_dwconv1d_causal(float *y, size_t ldy, const float *x, size_t ldx, const float *w,
                          const float *bias, int channels, int taps, int dil, int n) {
    for (int c = 0; c < channels; c++) {
        const float *xr = x + (size_t)c * ldx;
        const float *wr = w + (size_t)c * taps;
        float *yr = y + (size_t)c * ldy;
        for (int t = 0; t < n; t++) yr[t] = 0.0f;
        for (int k = 0; k < taps; k++) {
            const float *xs = xr - (ptrdiff_t)(taps - 1 - k) * dil;
            const float wk = wr[k];
            for (int t = 0; t < n; t++) yr[t] += wk * xs[t];
        }
        const float bv = bias ? bias[c] : 0.0f;
        for (int t = 0; t < n; t++) yr[t] += bv;
    }
}

void qtts_snake_params(float *ea, float *ib, const float *alpha, const float *beta,
                       int channels) {
    for (int c = 0; c < channels; c++) {
        ea[c] = expf(alpha[c]);
        ib[c] = 1.0f / (expf(beta[c]) + 1e-9f);
    }
}

void qtts_snake_beta(float *y, size_t ldy, const float *x, size_t ldx, const float *ea,
                     const float *ib, int channels, int n) {
    for (int c = 0; c < channels; c++) {
        const float a = ea[c], b = ib[c];
        const float *xr = x + (size_t)c * ldx;
        float *yr = y + (size_t)c * ldy;
        for (int t = 0; t < n; t++) {
            const float s = sinf(xr[t] * a);
            yr[t] = xr[t] + b * (s * s);
        }
    }
}

void qtts_layernorm_channels(float *x, size_t ld, int channels, int n, const float *w,
                             const float *b, float eps) {
    enum { CB = 256 };
    double sum[CB];
    float mean[CB], inv[CB];
    for (int t0 = 0; t0 < n; t0 += CB) {
        const int nc = QTTS_MIN(CB, n - t0);
        for (int j = 0; j < nc; j++) sum[j] = 0.0;
        for (int c = 0; c < channels; c++) {
            const float *xr = x + (size_t)c * ld + t0;
            for (int j = 0; j < nc; j++) sum[j] += xr[j];
        }
        for (int j = 0; j < nc; j++) {
            mean[j] = (float)(sum[j] / channels);
            sum[j] = 0.0;
        }
        for (int c = 0; c < channels; c++) {
            const float *xr = x + (size_t)c * ld + t0;
            for (int j = 0; j < nc; j++) {
                const double d = (double)xr[j] - (double)mean[j];
                sum[j] += d * d;
            }
        }
        for (int j = 0; j < nc; j++) inv[j] = 1.0f / sqrtf((float)(sum[j] / channels) + eps);
        for (int c = 0; c < channels; c++) {
            float *xr = x + (size_t)c * ld + t0;
            const float wc = w[c], bc = b[c];
            for (int j = 0; j < nc; j++) xr[j] = ((xr[j] - mean[j]) * inv[j]) * wc + bc;
        }
    }
}

void qtts_transpose(float *out, size_t ldo, const float *in, size_t ldi, int rows, int n) {
    enum { B = 32 };
    for (int r0 = 0; r0 < rows; r0 += B)
        for (int t0 = 0; t0 < n; t0 += B) {
            const int r1 = QTTS_MIN(rows, r0 + B), t1 = QTTS_MIN(n, t0 + B);
            for (int r = r0; r < r1; r++)
                for (int t = t0; t < t1; t++) out[(size_t)t * ldo + r] = in[(size_t)r * ldi + t];
        }
}
