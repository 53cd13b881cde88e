/*
 * conv_narrow_x86.h - the few-column conv kernel (conv_impl.h,
 * qtts_conv_narrow) on 8-lane AVX2/FMA vectors, shared by conv_avx2.c and
 * conv_avx512.c, which define NARROW_G(C) first: row groups per chunk for C
 * columns, as many as their register file holds. Included only by files
 * compiled with AVX2 and FMA.
 *
 * Rows in lanes: per reduction row kk, each group's 8 weights are one
 * load, each column's input one broadcast, and group g, column c is one
 * FMA chain a = fma(w, x, a) from +0 in increasing kk, then
 * v = a + bias (0 without), y = v or y + v: the order of conv_impl.h, so
 * the bits are the tiles'.
 *
 * No software prefetch: each group's weights are one sequential stream
 * that the hardware prefetchers follow; a prefetch 1 or 4 KB ahead per
 * stream read the decoder's largest few-column convs (44 and 75 MB) 10-25%
 * slower in interleaved runs.
 */
#ifndef QTTS_CONV_NARROW_X86_H
#define QTTS_CONV_NARROW_X86_H

#include <immintrin.h>

#include "conv_impl.h"

static inline __attribute__((always_inline)) void qtts_narrow_gc(const qtts_conv_narrow *t,
                                                                 int g0, const int G,
                                                                 const int C) {
    const size_t gs = (size_t)t->K * QTTS_CONV_MR;
    const float *w = t->w + (size_t)g0 * gs, *xk = t->xk;
    __m256 a[8][8];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) a[g][c] = _mm256_setzero_ps();
    for (int kk = 0; kk < t->K; kk++, w += QTTS_CONV_MR, xk += C) {
        __m256 xb[8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) xb[c] = _mm256_broadcast_ss(xk + c);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            const __m256 wv = _mm256_loadu_ps(w + g * gs);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) a[g][c] = _mm256_fmadd_ps(wv, xb[c], a[g][c]);
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        float v[8][8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) _mm256_storeu_ps(v[c], a[g][c]);
        qtts_narrow_out(t, g0 + g, v, C);
    }
}

QTTS_NARROW_ENTRY(qtts_conv_narrow_x86, qtts_narrow_gc, NARROW_G)

#endif
