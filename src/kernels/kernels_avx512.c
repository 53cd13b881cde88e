/*
 * kernels_avx512.c - AVX-512 (F, BW, VL) + VNNI row kernels (x86-64), in
 * the orders of kernels_impl.h; bit-identical to kernels_avx2.c.
 *
 * F32/BF16: the 16 lanes of a (W row, x row) pair are one zmm accumulator;
 * the last, partial group of columns is read with zero-masked loads, which
 * is the reference's zero padding. Decode (one x row) uses 8x1 tiles,
 * several x rows use 4x4 tiles (16 accumulators of 32 registers).
 * AVX512_BF16's VDPBF16PS is not used: it would round x to bf16, and on
 * Sapphire Rapids it is slower than upconverting and using fp32 FMA.
 *
 * Q8_0/Q4_0: two consecutive blocks fill one 512-bit vector, so lanes 0-7
 * hold the even block's partials and lanes 8-15 the odd one's, exactly the
 * reference's lane assignment. The int8 products are VPDPBUSD (unsigned
 * times signed bytes): for Q8_0 on |x| and w negated where x < 0 (a
 * masked subtract: AVX-512 has no VPSIGNB), for Q4_0 on the raw nibbles
 * and x, minus 8 * sum(x) per lane. A last, odd block is done at 256 bits
 * and added to lanes 0-7 only.
 */
#include "kernels_impl.h"

#if QTTS_ISA_X86
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* The fold of kernels_impl.h on one 16-lane accumulator. */
INLINE float fold16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 v8 = _mm256_add_ps(lo, hi);
    __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    __m128 v1 = _mm_add_ss(v2, _mm_movehdup_ps(v2));
    return _mm_cvtss_f32(v1);
}

/* The tiles of the first x rows (t == 0: each W row's one read from
 * memory; later x rows find it in cache) prefetch the next tile's rows
 * (which follow in memory) at the column they read: a tile's rows are
 * 0.5-4 KB streams, too short for the hardware prefetchers. Batched tiles
 * need it as much as decode ones. A prefetch never faults past the matrix. */
INLINE void prefetch(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_T0); }

/* ==== F32 / BF16 ========================================================= */

/* 16 weights from column i (the first `mask` lanes; the rest zero). */
INLINE __m512 load16(const void *w, int i, __mmask16 mask, const bool bf16) {
    if (bf16) {
        const __m256i h = _mm256_maskz_loadu_epi16(mask, (const uint16_t *)w + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(mask, (const float *)w + i);
}

INLINE void tile_float(const qtts_mm_job *j, int r0, int t, const int RW, const int RX,
                       const bool bf16) {
    const int C = j->W->cols, R = j->W->rows;
    const size_t es = bf16 ? 2 : 4;
    const void *w[8];
    const float *x[4];
    __m512 acc[4][8];
#pragma GCC unroll 8
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * C * es;
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++) {
        x[p] = j->x + (size_t)(t + p) * C;
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) acc[p][r] = _mm512_setzero_ps();
    }
    for (int i = 0; i < C; i += 16) {
        const __mmask16 m = C - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - i)) - 1);
        __m512 xv[4];
#pragma GCC unroll 4
        for (int p = 0; p < RX; p++) xv[p] = _mm512_maskz_loadu_ps(m, x[p] + i);
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) {
            if (t == 0) prefetch((const uint8_t *)w[r] + (size_t)i * es + (size_t)RW * C * es);
            const __m512 wv = load16(w[r], i, m, bf16);
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) acc[p][r] = _mm512_fmadd_ps(wv, xv[p], acc[p][r]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++)
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) {
            float v = fold16(acc[p][r]);
            j->y[(size_t)(t + p) * R + r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
        }
}

INLINE void mm_float(const qtts_mm_job *j, int r0, int r1, const bool bf16) {
    for (int rb = r0; rb < r1; rb += 8) {       /* blocks of 8 rows, reused over x rows */
        const int nr = QTTS_MIN(8, r1 - rb);
        int t = 0;
        for (; t + 4 <= j->n; t += 4) {
            int r = rb;
            for (; r + 4 <= rb + nr; r += 4) tile_float(j, r, t, 4, 4, bf16);
            for (; r < rb + nr; r++) tile_float(j, r, t, 1, 4, bf16);
        }
        for (; t < j->n; t++) {
            if (nr == 8) tile_float(j, rb, t, 8, 1, bf16);
            else
                for (int r = rb; r < rb + nr; r++) tile_float(j, r, t, 1, 1, bf16);
        }
    }
}

static void mm_f32(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, false); }
static void mm_bf16(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, true); }

/* ==== Q8_0 / Q4_0 ======================================================== */

INLINE size_t block_bytes(const bool q4) {
    return q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
}

INLINE float block_scale(const uint8_t *row, int b, const bool q4) {
    uint16_t h;
    __builtin_memcpy(&h, row + (size_t)b * block_bytes(q4), sizeof h);
    return _cvtsh_ss(h);
}

/* The 32 codes of block b: Q8_0 as signed bytes, Q4_0 as the unsigned
 * nibbles (code + 8; see dot_q4). */
INLINE __m256i codes256(const uint8_t *row, int b, const bool q4) {
    const uint8_t *blk = row + (size_t)b * block_bytes(q4) + 2;
    if (q4) {
        const __m128i q = _mm_loadu_si128((const __m128i *)blk), m = _mm_set1_epi8(15);
        return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
    }
    return _mm256_loadu_si256((const __m256i *)blk);
}

/* Blocks b and b+1: codes of b in bytes 0-31, of b+1 in bytes 32-63.
 * Q4_0: each block's 16 bytes are broadcast to both 128-bit halves of its
 * 256 (a load port op each), then one variable shift takes the high
 * nibbles in the odd 128-bit lanes and one AND masks all four: about half
 * the instructions of unpacking the blocks one by one. */
INLINE __m512i codes512(const uint8_t *row, int b, const bool q4) {
    if (q4) {
        const uint8_t *b0 = row + (size_t)b * sizeof(qtts_block_q4_0) + 2;
        const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b0));
        const __m256i q1 = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(b0 + sizeof(qtts_block_q4_0))));
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        const long long k4 = 0x0004000400040004LL;   /* 16-bit shift counts: 4 in lanes 1, 3 */
        const __m512i sh = _mm512_set_epi64(k4, k4, 0, 0, k4, k4, 0, 0);
        return _mm512_and_si512(_mm512_srlv_epi16(q, sh), _mm512_set1_epi8(15));
    }
    return _mm512_inserti64x4(_mm512_castsi256_si512(codes256(row, b, q4)), codes256(row, b + 1, q4), 1);
}

/* The partials of two blocks (lanes 0-7: block b, 8-15: block b+1).
 * Q8_0: |x| times w negated where x < 0 (neg). Q4_0: the nibbles times x,
 * minus x8 = 8 * (sum of x per lane), i.e. sum (n - 8) x. */
INLINE __m512i dot512(__m512i w, __m512i ax, __mmask64 neg, __m512i x, __m512i x8, const bool q4) {
    const __m512i zero = _mm512_setzero_si512();
    if (q4) return _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, w, x), x8);
    return _mm512_dpbusd_epi32(zero, ax, _mm512_mask_sub_epi8(w, neg, zero, w));
}

INLINE __m256i dot256(__m256i w, __m256i x, const bool q4) {
    const __m256i zero = _mm256_setzero_si256();
    if (q4) {
        const __m256i x8 = _mm256_slli_epi32(_mm256_dpbusd_epi32(zero, _mm256_set1_epi8(1), x), 3);
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, w, x), x8);
    }
    return _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(x), _mm256_sign_epi8(w, x));
}

INLINE void tile_quant(const qtts_mm_job *j, int r0, int t, const int RW, const int RX,
                       const bool q4) {
    const int C = j->W->cols, R = j->W->rows, nb = C / QTTS_QK;
    const size_t rb = qtts_mat_row_bytes(j->W->dtype, C);
    /* Prefetch distance in rows: Q4_0 rows are about half as many bytes
     * and cost more instructions per byte, so one tile ahead leaves too few
     * reads in flight; four tiles ahead took the 0.6B int4 talker+CP from
     * 34.7 to 30.1 ms/frame (Q8_0 gained nothing from a longer distance). */
    const size_t ahead = (size_t)(q4 ? 4 : 1) * RW;
    const __m512i zero = _mm512_setzero_si512();
    const uint8_t *w[4];
    const int8_t *xq[4];
    const float *xd[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * rb;
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++) {
        xq[p] = j->xq + (size_t)(t + p) * C;
        xd[p] = j->xd + (size_t)(t + p) * nb;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) acc[p][r] = _mm512_setzero_ps();
    }
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i xv[4], ax[4], x8[4];
        __m512 xs[4];
        __mmask64 neg[4];
        /* lanes 0-7 take element 0 of a pair, lanes 8-15 element 1 */
        const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
        for (int p = 0; p < RX; p++) {
            xs[p] = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(_mm_castsi128_ps(
                                                    _mm_loadl_epi64((const __m128i *)(xd[p] + b)))));
            xv[p] = _mm512_loadu_si512(xq[p] + b * QTTS_QK);
            if (q4) {
                x8[p] = _mm512_slli_epi32(_mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), xv[p]), 3);
            } else {
                ax[p] = _mm512_abs_epi8(xv[p]);
                neg[p] = _mm512_movepi8_mask(xv[p]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            if (t == 0) prefetch(w[r] + (size_t)b * block_bytes(q4) + ahead * rb);
            const __m512i wv = codes512(w[r], b, q4);
            /* the two blocks' scales, d0 in lanes 0-7 and d1 in 8-15; times
             * x's scales, the same products as d0 * xd[b] in scalar code */
            const uint8_t *h = w[r] + (size_t)b * block_bytes(q4);
            uint16_t h0, h1;
            __builtin_memcpy(&h0, h, 2);
            __builtin_memcpy(&h1, h + block_bytes(q4), 2);
            const __m128i hh = _mm_insert_epi16(_mm_cvtsi32_si128(h0), h1, 1);
            const __m512 wd = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(_mm_cvtph_ps(hh)));
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) {
                const __m512 f = _mm512_cvtepi32_ps(dot512(wv, ax[p], neg[p], xv[p], x8[p], q4));
                acc[p][r] = _mm512_add_ps(acc[p][r], _mm512_mul_ps(f, _mm512_mul_ps(wd, xs[p])));
            }
        }
    }
    if (b < nb) { /* a last, even block: lanes 0-7 only */
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            const __m256i wv = codes256(w[r], b, q4);
            const float dw = block_scale(w[r], b, q4);
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq[p] + b * QTTS_QK));
                const __m256 prod = _mm256_mul_ps(_mm256_cvtepi32_ps(dot256(wv, xv, q4)),
                                                  _mm256_set1_ps(dw * xd[p][b]));
                acc[p][r] = _mm512_mask_add_ps(acc[p][r], (__mmask16)0x00ff, acc[p][r],
                                               _mm512_castps256_ps512(prod));
            }
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++)
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            float v = fold16(acc[p][r]);
            j->y[(size_t)(t + p) * R + r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
        }
}

INLINE void mm_quant(const qtts_mm_job *j, int r0, int r1, const bool q4) {
    for (int rb = r0; rb < r1; rb += 4) {
        const int nr = QTTS_MIN(4, r1 - rb);
        int t = 0;
        for (; t + 4 <= j->n; t += 4) {
            int r = rb;
            for (; r + 2 <= rb + nr; r += 2) tile_quant(j, r, t, 2, 4, q4);
            if (r < rb + nr) tile_quant(j, r, t, 1, 4, q4);
        }
        for (; t < j->n; t++) {
            if (nr == 4) tile_quant(j, rb, t, 4, 1, q4);
            else
                for (int r = rb; r < rb + nr; r++) tile_quant(j, r, t, 1, 1, q4);
        }
    }
}

static void mm_q8_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, false); }
static void mm_q4_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, true); }

/* qtts_quantize_act_ref, one block (two zmm) at a time. */
static void quantize_act(const float *x, int cols, int8_t *q, float *d) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * QTTS_QK), v1 = _mm512_loadu_ps(x + b * QTTS_QK + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)(q + b * QTTS_QK),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
        _mm_storeu_si128((__m128i *)(q + b * QTTS_QK + 16),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
        d[b] = dx;
    }
}

const qtts_isa qtts_isa_avx512 = {
    .name = "avx512",
    .mm_f32 = mm_f32,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .quantize_act = quantize_act,
};

#endif
