/*
 * conv_avx2.c - AVX2 + FMA conv tile kernel and SnakeBeta row (x86-64), in
 * the orders of conv_impl.h; bit-identical to the scalar table.
 *
 * Tile: 8 rows x 24 columns, done as two passes of 4 rows over the same
 * panel (4 x 3 ymm accumulators + 3 panel vectors + 1 broadcast weight = 16
 * registers). Per panel row: 3 aligned loads, 4 weight broadcasts, 12 FMAs.
 * Panels of KC = 128 reduction rows: the panel (12 KB) and a group's
 * weights (4 KB) stay in a 32 KB L1 through both passes and every row
 * group. At 256 (24 + 8 KB) the weights pushed the panel out to L2: on
 * a Zen 3 (AVX2 only, 32 KB L1) `bench_codec` decoded 6-8% slower (16
 * alternations, minimum and median), while the tile alone computes at
 * the FMA probe's rate from L1 at either kc.
 * The last partial column group of y is read and written with
 * vmaskmovps, so nothing past column `cols` is touched. The final store
 * prefetches the same rows of the next column tile (a row of y is far from
 * the next one, so the hardware prefetchers do not cover it).
 *
 * Snake: 8 lanes of the polynomial of conv_impl.h (both the sine and cosine
 * polynomials, blended by the quadrant's parity); lanes with |u| > 8192 or
 * non-finite u are redone with libm sinf. The row's tail is the same code
 * on masked loads, so every element gets the same operations.
 */
#include "conv_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define NR 24
#define INLINE static inline __attribute__((always_inline))

INLINE __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* NV of the tile's 3 column vectors (see conv_avx512.c's tile_nv): the
 * same chains whatever NV. */
INLINE void tile_nv(const qtts_conv_tile *t, const int NV) {
    for (int h = 0; h < 2; h++) {
        if (4 * h >= t->rows) break;   /* rows past cout are never stored */
        const float *w = t->w + 4 * h, *xp = t->xp;
        float *acc = t->acc + 4 * h * NR;
        __m256 a[4][3];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                a[r][v] = t->load ? _mm256_load_ps(acc + r * NR + 8 * v) : _mm256_setzero_ps();
        /* the next group's weights, a line per two panel rows (first pass) */
        const char *wn = h == 0 ? t->w_next : NULL;
        for (int k = 0, kc = t->kc; k < kc; k++, xp += NR, w += QTTS_CONV_MR) {
            if (wn && !(k & 1)) __builtin_prefetch(wn + (size_t)k * 32);
            __m256 x[3];
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) x[v] = _mm256_load_ps(xp + 8 * v);
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const __m256 wr = _mm256_broadcast_ss(w + r);
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++) a[r][v] = _mm256_fmadd_ps(wr, x[v], a[r][v]);
            }
        }
        /* Through memory, so that the accumulators stay in registers above. */
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) _mm256_store_ps(acc + r * NR + 8 * v, a[r][v]);
        if (!t->y) continue;
        const int rows = QTTS_MIN(4, t->rows - 4 * h);
        for (int r = 0; r < rows; r++) {
            float *yr = t->y + (size_t)(4 * h + r) * t->ldy;
            /* the next column tile's rows of y (read when accumulating, and
             * owned for the store either way) */
            __builtin_prefetch(yr + NR, 1);
            __builtin_prefetch(yr + NR + 16, 1);
            const __m256 b = _mm256_set1_ps(t->bias ? t->bias[4 * h + r] : 0.0f);
            for (int v = 0; v < NV && 8 * v < t->cols; v++) {
                __m256 val = _mm256_add_ps(_mm256_load_ps(acc + r * NR + 8 * v), b);
                float *p = yr + 8 * v;
                if (t->cols - 8 * v >= 8) {
                    if (t->accumulate) val = _mm256_add_ps(_mm256_loadu_ps(p), val);
                    _mm256_storeu_ps(p, val);
                } else {
                    const __m256i m = lanes_below(t->cols - 8 * v);
                    if (t->accumulate) val = _mm256_add_ps(_mm256_maskload_ps(p, m), val);
                    _mm256_maskstore_ps(p, m, val);
                }
            }
        }
    }
}

static void tile_avx2(const qtts_conv_tile *t) {
    if (t->cols > 16) tile_nv(t, 3);
    else if (t->cols > 8) tile_nv(t, 2);
    else tile_nv(t, 1);
}

/* ==== SnakeBeta =========================================================== */

#define SET(c) _mm256_set1_ps(c)

INLINE __m256 snake8(__m256 x, __m256 ea, __m256 ib) {
    const __m256 u = _mm256_mul_ps(ea, x);
    const __m256 j = _mm256_round_ps(_mm256_mul_ps(u, SET(QTTS_SNAKE_2_PI)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(j, SET(QTTS_SNAKE_P1), u);
    r = _mm256_fnmadd_ps(j, SET(QTTS_SNAKE_P2), r);
    r = _mm256_fnmadd_ps(j, SET(QTTS_SNAKE_P3), r);
    const __m256 z = _mm256_mul_ps(r, r);
    const __m256 ps = _mm256_fmadd_ps(_mm256_fmadd_ps(SET(QTTS_SNAKE_S3), z, SET(QTTS_SNAKE_S2)),
                                      z, SET(QTTS_SNAKE_S1));
    const __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(r, z), ps, r);
    const __m256 pc = _mm256_fmadd_ps(_mm256_fmadd_ps(SET(QTTS_SNAKE_C3), z, SET(QTTS_SNAKE_C2)),
                                      z, SET(QTTS_SNAKE_C1));
    const __m256 c = _mm256_fmadd_ps(_mm256_mul_ps(z, z), pc,
                                     _mm256_fmadd_ps(SET(-0.5f), z, SET(1.0f)));
    const __m256i odd = _mm256_and_si256(_mm256_cvtps_epi32(j), _mm256_set1_epi32(1));
    __m256 s2 = _mm256_blendv_ps(_mm256_mul_ps(s, s), _mm256_mul_ps(c, c),
                                 _mm256_castsi256_ps(_mm256_cmpeq_epi32(odd, _mm256_set1_epi32(1))));
    const __m256 au = _mm256_andnot_ps(SET(-0.0f), u);
    const int big = _mm256_movemask_ps(_mm256_cmp_ps(au, SET(QTTS_SNAKE_LIMIT), _CMP_NLE_UQ));
    if (__builtin_expect(big != 0, 0)) {
        float uu[8], ss[8];
        _mm256_storeu_ps(uu, u);
        _mm256_storeu_ps(ss, s2);
        for (int l = 0; l < 8; l++)
            if (big >> l & 1) {
                const float sv = sinf(uu[l]);
                ss[l] = sv * sv;
            }
        s2 = _mm256_loadu_ps(ss);
    }
    return _mm256_fmadd_ps(ib, s2, x);
}

static void snake_avx2(float *y, const float *x, float ea_, float ib_, int n) {
    const __m256 ea = SET(ea_), ib = SET(ib_);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, snake8(_mm256_loadu_ps(x + i), ea, ib));
    if (i < n) {
        const __m256i m = lanes_below(n - i);
        _mm256_maskstore_ps(y + i, m, snake8(_mm256_maskload_ps(x + i, m), ea, ib));
    }
}

/* ==== Few columns ======================================================== */

/* 16 vector registers: G x C accumulators + C broadcasts + a weight vector. */
#define NARROW_G(C) ((C) == 1 ? 8 : (C) <= 3 ? 4 : (C) == 4 ? 2 : 1)
#include "conv_narrow_x86.h"

#define KC 128

const qtts_conv_isa qtts_conv_isa_avx2 = {"avx2", NR, KC, tile_avx2, snake_avx2,
                                          qtts_conv_narrow_x86, false};

#endif
