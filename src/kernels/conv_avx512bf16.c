/*
 * conv_avx512bf16.c - the bf16 conv tile and panel packing (kernels.h, "bf16
 * convolutions"; conv_impl.h, qtts_conv_bf16_isa) on AVX512-BF16 (x86-64).
 *
 * Tile: the fp32 AVX-512 tile's shape (8 rows x 48 columns, 8 x 3 zmm
 * accumulators), one panel row of it now a pair of reduction rows: per pair,
 * 3 aligned loads of 16 words (each the two rows' bf16 inputs of a column)
 * and 24 VDPBF16PS, each adding w[2p] x[2p] + w[2p+1] x[2p+1] to 16
 * columns of one output row, the weight pair broadcast as one word. The
 * same epilogue as the fp32 tile (conv_avx512_out.h).
 *
 * Packing: 16 columns of the two rows rounded to bf16 by one VCVTNE2PS2BF16
 * (row a in the low half, row b in the high half) and interleaved into
 * words by one word permute.
 */
#include "conv_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "conv_avx512_out.h"

#define NR QTTS_AVX512_NR
#define INLINE static inline __attribute__((always_inline))

INLINE void tile_nv(const qtts_conv_tile *t, const int NV) {
    const uint32_t *w = t->wb, *xp = t->xb;
    const float *acc = t->acc;
    __m512 a[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            a[r][v] = t->load ? _mm512_load_ps(acc + r * NR + 16 * v) : _mm512_setzero_ps();
    const char *wn = t->w_next;
    for (int k = 0; k < t->kc; k++, xp += NR, w += QTTS_CONV_MR) {
        /* the next group's weights: 32 bytes per pair row, a line per two */
        if (wn && !(k & 1)) __builtin_prefetch(wn + (size_t)k * 32);
        __m512bh x[3];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) x[v] = (__m512bh)_mm512_load_si512(xp + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const __m512bh wr = (__m512bh)_mm512_set1_epi32((int)w[r]);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) a[r][v] = _mm512_dpbf16_ps(a[r][v], wr, x[v]);
        }
    }
    qtts_avx512_tile_out(t, a, NV);
}

static void tile_bf16(const qtts_conv_tile *t) {
    if (t->cols > 32) tile_nv(t, 3);
    else if (t->cols > 16) tile_nv(t, 2);
    else tile_nv(t, 1);
}

/* Few columns (conv_impl.h, qtts_conv_narrow), rows in lanes: per pair of
 * reduction rows, one load of a group's 8 weight words and one VDPBF16PS
 * per column against that column's input pair broadcast. A lane's
 * VDPBF16PS is the tile's (the same two products into the same
 * accumulator, the operands' roles swapped), so the bits are the tile's. */
INLINE void narrow_gc(const qtts_conv_narrow *t, int g0, const int G, const int C) {
    const size_t gs = (size_t)t->K * QTTS_CONV_MR;
    const uint32_t *w = t->wb + (size_t)g0 * gs, *xk = t->xb;
    __m256 a[8][8];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) a[g][c] = _mm256_setzero_ps();
    for (int p = 0; p < t->K; p++, w += QTTS_CONV_MR, xk += C) {
        __m256bh xb[8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) xb[c] = (__m256bh)_mm256_set1_epi32((int)xk[c]);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            const __m256bh wv = (__m256bh)_mm256_loadu_si256((const __m256i *)(w + g * gs));
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) a[g][c] = _mm256_dpbf16_ps(a[g][c], wv, xb[c]);
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

#define NARROW_G(C) ((C) <= 2 ? 8 : (C) <= 4 ? 4 : 2)
QTTS_NARROW_ENTRY(narrow_bf16, narrow_gc, NARROW_G)

/* Word j of the result: bf16 j of row a (word index j) and of row b (16 + j). */
static const uint16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

static void pack_pair(uint32_t *dst, const float *a, const float *b, int cols, int nr) {
    const __m512i idx = _mm512_loadu_si512(interleave);
    int j = 0;
    for (; j < cols; j += 16) {
        const __mmask16 m = qtts_lanes_below(cols - j);
        const __m512 va = _mm512_maskz_loadu_ps(m, a + j);
        const __m512 vb = b ? _mm512_maskz_loadu_ps(m, b + j) : _mm512_setzero_ps();
        const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(vb, va);
        _mm512_mask_storeu_epi32(dst + j, m, _mm512_permutexvar_epi16(idx, h));
    }
    for (j = cols; j < nr; j++) dst[j] = 0;
}

const qtts_conv_bf16_isa qtts_conv_bf16_avx512 = {"avx512-bf16", NR, 256, tile_bf16, pack_pair,
                                                   narrow_bf16};

#endif
