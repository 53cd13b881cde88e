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
 * times signed bytes) on the weight codes made unsigned (see load_pair)
 * and x, summed from a per-x-row correction so the partials are exact.
 * What bounds these kernels is the vector work per (block pair, weight
 * row), not the bytes: the unpacking, the two scales and the scale-and-add
 * cost more than the VPDPBUSD, so each is one or two instructions here (a
 * word permute for both scales, an xor or a permute and a shift for the
 * codes, one fma). A last, odd block is done at 256 bits and added to
 * lanes 0-7 only.
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

/* Blocks b and b+1 of a weight row, ready for VPDPBUSD: their codes as
 * unsigned bytes (block b in bytes 0-31, b+1 in 32-63) and their scales
 * (d(b) in lanes 0-7, d(b+1) in 8-15). The unsigned codes are the signed
 * ones plus k, k = 8 for Q4_0 (the nibble itself) and 128 for Q8_0 (the
 * sign bit flipped), so each int32 partial is exact when its sum starts
 * from -k * (the lane's sum of x), which dot_init gives per x row.
 * Both scales come out of one load by a word permute (scales and codes
 * are at even offsets in both formats); for Q4_0 the same load gives the
 * nibbles, each block's 16 bytes put in two 128-bit lanes so one variable
 * shift takes the high nibbles in the odd lanes. */
typedef struct {
    __m512i u;
    __m512 d;
} wpair;

/* Word indices: scales of the pair, and Q4_0's nibble bytes. */
static const uint16_t q4_scale_idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9};
static const uint16_t q8_scale_idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17};
static const uint16_t q4_nibble_idx[32] = {1,  2,  3,  4,  5,  6,  7,  8,  1,  2,  3,
                                           4,  5,  6,  7,  8,  10, 11, 12, 13, 14, 15,
                                           16, 17, 10, 11, 12, 13, 14, 15, 16, 17};

INLINE wpair load_pair(const uint8_t *blk, const bool q4) {
    wpair p;
    if (q4) {
        /* the pair's 36 bytes only: a masked load never reads past the matrix */
        const __m512i L = _mm512_maskz_loadu_epi8((__mmask64)0xfffffffffULL, blk);
        const long long k4 = 0x0004000400040004LL;   /* 16-bit shift counts: 4 in lanes 1, 3 */
        const __m512i sh = _mm512_set_epi64(k4, k4, 0, 0, k4, k4, 0, 0);
        const __m512i nib = _mm512_permutexvar_epi16(_mm512_loadu_si512(q4_nibble_idx), L);
        p.u = _mm512_and_si512(_mm512_srlv_epi16(nib, sh), _mm512_set1_epi8(15));
        p.d = _mm512_cvtph_ps(_mm512_castsi512_si256(
            _mm512_permutexvar_epi16(_mm512_loadu_si512(q4_scale_idx), L)));
    } else {
        /* 64 of the pair's 68 bytes hold both scales; the codes are two
         * 32-byte runs */
        const __m512i L = _mm512_loadu_si512(blk);
        const __m512i codes = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2))),
            _mm256_loadu_si256((const __m256i *)(blk + sizeof(qtts_block_q8_0) + 2)), 1);
        p.u = _mm512_xor_si512(codes, _mm512_set1_epi8((char)0x80));
        p.d = _mm512_cvtph_ps(_mm512_castsi512_si256(
            _mm512_permutexvar_epi16(_mm512_loadu_si512(q8_scale_idx), L)));
    }
    return p;
}

/* -k * (sum of x over each lane's 4 bytes): the start of every partial
 * of that x row (see load_pair). */
INLINE __m512i dot_init(__m512i x, const bool q4) {
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(q4 ? 8 : (char)0x80), x));
}

/* One block at 256 bits (a last, odd one). Q8_0: |x| times w negated
 * where x < 0. Q4_0: the nibbles times x, minus 8 * (sum of x per lane). */
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
        __m512i xv[4], x0[4];
        __m512 xs[4];
        /* lanes 0-7 take element 0 of a pair, lanes 8-15 element 1 */
        const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
        for (int p = 0; p < RX; p++) {
            xs[p] = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(_mm_castsi128_ps(
                                                    _mm_loadl_epi64((const __m128i *)(xd[p] + b)))));
            xv[p] = _mm512_loadu_si512(xq[p] + b * QTTS_QK);
            x0[p] = dot_init(xv[p], q4);
        }
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            const uint8_t *blk = w[r] + (size_t)b * block_bytes(q4);
            if (t == 0) prefetch(blk + ahead * rb);
            const wpair wp = load_pair(blk, q4);
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) {
                /* the two blocks' scale products, the same as d(b) * xd[b] in
                 * scalar code */
                const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(x0[p], wp.u, xv[p]));
                acc[p][r] = _mm512_fmadd_ps(f, _mm512_mul_ps(wp.d, xs[p]), acc[p][r]);
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
                const __m256 f = _mm256_cvtepi32_ps(dot256(wv, xv, q4));
                acc[p][r] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(f),
                                                  _mm512_set1_ps(dw * xd[p][b]), acc[p][r],
                                                  (__mmask16)0x00ff);
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
