/*
 * conv_avx512_out.h - the part of an AVX-512 conv tile that both the fp32
 * tile (conv_avx512.c) and the bf16 tile (conv_avx512bf16.c) end with:
 * the 8 x NV accumulator vectors to the tile's acc, then, on the last K
 * block, y = acc + bias (+ y when accumulating) for the needed rows and
 * columns. Included only by files compiled with AVX-512 flags.
 */
#ifndef QTTS_CONV_AVX512_OUT_H
#define QTTS_CONV_AVX512_OUT_H

#include <immintrin.h>

#include "conv_impl.h"

#define QTTS_AVX512_NR 48   /* tile columns: 3 zmm */

static inline __attribute__((always_inline)) __mmask16 qtts_lanes_below(int n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

static inline __attribute__((always_inline)) void qtts_avx512_tile_out(const qtts_conv_tile *t,
                                                                       __m512 a[8][3],
                                                                       const int NV) {
    const int NR = QTTS_AVX512_NR;
    float *acc = t->acc;
    /* Through memory, so that the accumulators stay in registers above. */
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) _mm512_store_ps(acc + r * NR + 16 * v, a[r][v]);
    if (!t->y) return;
    for (int r = 0; r < t->rows; r++) {
        float *yr = t->y + (size_t)r * t->ldy;
        /* the next column tile's rows of y (read when accumulating, and owned
         * for the store either way) */
        __builtin_prefetch(yr + NR, 1);
        __builtin_prefetch(yr + NR + 16, 1);
        __builtin_prefetch(yr + NR + 32, 1);
        const __m512 b = _mm512_set1_ps(t->bias ? t->bias[r] : 0.0f);
        for (int v = 0; v < NV && 16 * v < t->cols; v++) {
            const __mmask16 m = qtts_lanes_below(t->cols - 16 * v);
            __m512 val = _mm512_add_ps(_mm512_load_ps(acc + r * NR + 16 * v), b);
            if (t->accumulate) val = _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr + 16 * v), val);
            _mm512_mask_storeu_ps(yr + 16 * v, m, val);
        }
    }
}

#endif
