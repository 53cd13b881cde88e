/*
 * conv_avx512.c - AVX-512F conv tile kernel and SnakeBeta row (x86-64), in
 * the orders of conv_impl.h; bit-identical to the scalar and AVX2 tables.
 *
 * Tile: all 8 rows x 48 columns at once: 8 x 3 zmm accumulators + 3 panel
 * vectors (27 of 32 registers); a tile needing 32 or 16 columns or fewer
 * runs on 2 or 1 of the vectors. Per panel row: 3 loads (aligned from a
 * panel, unaligned from the input rows of a direct tile), 8 weight
 * broadcasts and 24 FMAs, so the loads stay well under the FMA ports' needs.
 * The last partial column group of y is read and written with masks; the
 * final store prefetches the same rows of the next column tile, and every
 * other panel row prefetches a line of the next row group's weights
 * (qtts_conv_tile.w_next).
 *
 * Snake: 16 lanes of the polynomial of conv_impl.h, parity blend by mask;
 * lanes with |u| > 8192 or non-finite u are redone with libm sinf; the
 * row's tail is the same code under a mask.
 */
#include "conv_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "conv_avx512_out.h"

#define NR QTTS_AVX512_NR
#define INLINE static inline __attribute__((always_inline))

/* NV of the tile's 3 column vectors: a tile with few needed columns (the
 * first frames of a stream give the decoder's early convs 4-32 columns)
 * computes only the vectors that hold them. Each output is the same fma
 * chain whatever NV, so the bits do not depend on it. */
INLINE void tile_nv(const qtts_conv_tile *t, const int NV, const bool DIRECT) {
    const float *w = t->w, *xp = t->xp;
    const float *const *xr = t->xr;
    const int xcol = t->xcol;
    const float *acc = t->acc;
    __m512 a[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            a[r][v] = t->load ? _mm512_load_ps(acc + r * NR + 16 * v) : _mm512_setzero_ps();
    const char *wn = t->w_next;
    for (int k = 0; k < t->kc; k++, xp += NR, w += QTTS_CONV_MR) {
        /* one line of the next group's weights per two panel rows (its
         * kc x 8 floats, 64 bytes per two rows) */
        if (wn && !(k & 1)) __builtin_prefetch(wn + (size_t)k * 32);
        __m512 x[3];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            x[v] = DIRECT ? _mm512_loadu_ps(xr[k] + xcol + 16 * v) : _mm512_load_ps(xp + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const __m512 wr = _mm512_set1_ps(w[r]);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) a[r][v] = _mm512_fmadd_ps(wr, x[v], a[r][v]);
        }
    }
    qtts_avx512_tile_out(t, a, NV);
}

static void tile_avx512(const qtts_conv_tile *t) {
    if (t->xr) tile_nv(t, 3, true);
    else if (t->cols > 32) tile_nv(t, 3, false);
    else if (t->cols > 16) tile_nv(t, 2, false);
    else tile_nv(t, 1, false);
}

/* ==== Few columns ======================================================== */

/* 32 vector registers: G x C accumulators + C broadcasts stay under 24. */
#define NARROW_G(C) ((C) <= 2 ? 8 : (C) <= 4 ? 4 : 2)
#include "conv_narrow_x86.h"

/* ==== SnakeBeta =========================================================== */

#define SET(c) _mm512_set1_ps(c)

INLINE __m512 snake16(__m512 x, __m512 ea, __m512 ib) {
    const __m512 u = _mm512_mul_ps(ea, x);
    const __m512 j = _mm512_roundscale_ps(_mm512_mul_ps(u, SET(QTTS_SNAKE_2_PI)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(j, SET(QTTS_SNAKE_P1), u);
    r = _mm512_fnmadd_ps(j, SET(QTTS_SNAKE_P2), r);
    r = _mm512_fnmadd_ps(j, SET(QTTS_SNAKE_P3), r);
    const __m512 z = _mm512_mul_ps(r, r);
    const __m512 ps = _mm512_fmadd_ps(_mm512_fmadd_ps(SET(QTTS_SNAKE_S3), z, SET(QTTS_SNAKE_S2)),
                                      z, SET(QTTS_SNAKE_S1));
    const __m512 s = _mm512_fmadd_ps(_mm512_mul_ps(r, z), ps, r);
    const __m512 pc = _mm512_fmadd_ps(_mm512_fmadd_ps(SET(QTTS_SNAKE_C3), z, SET(QTTS_SNAKE_C2)),
                                      z, SET(QTTS_SNAKE_C1));
    const __m512 c = _mm512_fmadd_ps(_mm512_mul_ps(z, z), pc,
                                     _mm512_fmadd_ps(SET(-0.5f), z, SET(1.0f)));
    const __mmask16 odd = _mm512_test_epi32_mask(_mm512_cvtps_epi32(j), _mm512_set1_epi32(1));
    __m512 s2 = _mm512_mask_blend_ps(odd, _mm512_mul_ps(s, s), _mm512_mul_ps(c, c));
    const __mmask16 big =
        _mm512_cmp_ps_mask(_mm512_abs_ps(u), SET(QTTS_SNAKE_LIMIT), _CMP_NLE_UQ);
    if (__builtin_expect(big != 0, 0)) {
        float uu[16], ss[16];
        _mm512_storeu_ps(uu, u);
        _mm512_storeu_ps(ss, s2);
        for (int l = 0; l < 16; l++)
            if (big >> l & 1) {
                const float sv = sinf(uu[l]);
                ss[l] = sv * sv;
            }
        s2 = _mm512_loadu_ps(ss);
    }
    return _mm512_fmadd_ps(ib, s2, x);
}

static void snake_avx512(float *y, const float *x, float ea_, float ib_, int n) {
    const __m512 ea = SET(ea_), ib = SET(ib_);
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, snake16(_mm512_loadu_ps(x + i), ea, ib));
    if (i < n) {
        const __mmask16 m = qtts_lanes_below(n - i);
        _mm512_mask_storeu_ps(y + i, m, snake16(_mm512_maskz_loadu_ps(m, x + i), ea, ib));
    }
}

const qtts_conv_isa qtts_conv_isa_avx512 = {"avx512", NR, 256, tile_avx512, snake_avx512,
                                            qtts_conv_narrow_x86, true};

#endif
