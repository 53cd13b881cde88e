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
 * Q8_0/Q4_0: the packed layout (quant.h) puts 16 blocks in the 32-bit
 * lanes of each 64-byte vector, so VPDPBUSD (unsigned times signed bytes)
 * sums a whole block's integer dot in one lane and the fp32 work (scale
 * product, convert, multiply-add) is one instruction per 16 blocks: the
 * reference's lane assignment. Q4_0 unpacks 128 codes per load: an and,
 * a shift and an and, or in decode tiles two ands (tile_quant).
 */
#include "kernels_impl.h"

#if QTTS_ISA_X86
#include <immintrin.h>
#include "attn_impl.h"

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

/* fold16 of four accumulators at once, the same pairs added in the same
 * tree (so the same bits): lanes l + l+8 of each, then l + l+4, then
 * (l + l+2) and (l+1 + l+3) summed. Element r of the result is
 * fold16(a[r]); 14 instructions instead of 4 x 8. */
INLINE __m128 fold16x4(const __m512 a[4]) {
    /* [a0 lo+hi | a1 lo+hi], [a2 lo+hi | a3 lo+hi] */
    const __m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44),
                                     _mm512_shuffle_f32x4(a[0], a[1], 0xee));
    const __m512 t23 = _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44),
                                     _mm512_shuffle_f32x4(a[2], a[3], 0xee));
    /* 128-bit lane r: elements l + l+4 of a[r]'s 8 */
    const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88),
                                   _mm512_shuffle_f32x4(t01, t23, 0xdd));
    /* per lane: [e0+e2, e1+e3, ...], then element 0 = (e0+e2) + (e1+e3) */
    const __m512 v = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4e));
    const __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, 0xb1));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), w));
}

/* y[0 .. RW) = the folds of acc[0 .. RW) (+ bias[0 .. RW)): one x row of
 * a tile. Four at a time when RW allows, else one by one. */
INLINE void store_folds(float *y, const __m512 *acc, const int RW, const float *bias) {
    if (RW % 4 == 0) {
#pragma GCC unroll 2
        for (int r = 0; r < RW; r += 4) {
            __m128 v = fold16x4(acc + r);
            if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias + r));
            _mm_storeu_ps(y + r, v);
        }
    } else {
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) {
            const float v = fold16(acc[r]);
            y[r] = bias ? v + bias[r] : v;
        }
    }
}

/* Every tile, decode, batched and prefill, float and quantized,
 * prefetches its share of its block 8 KB ahead a few lines per column
 * step or code vector (qtts_prefetch_tile, kernels_impl.h). */

/* ==== F32 / BF16 ========================================================= */

/* 16 weights from column i (the first `mask` lanes; the rest zero). */
INLINE __m512 load16(const void *w, int i, __mmask16 mask, const bool bf16) {
    if (bf16) {
        const __m256i h = _mm256_maskz_loadu_epi16(mask, (const uint16_t *)w + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(mask, (const float *)w + i);
}

/* W rows [r0, r0 + RW) against x rows [t, t + RX), in the block of W rows
 * [rb, rb + nr). */
INLINE void tile_float(const qtts_mm_job *j, int rb, int nr, int r0, int t, const int RW,
                       const int RX, const bool bf16) {
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
    qtts_prefetcher pf = qtts_prefetch_tile(j->W->data, (size_t)C * es, (size_t)(C + 15) / 16,
                                            rb, nr, j->n, r0, t, RW, RX, j->W->resident);
    for (int i = 0; i < C; i += 16) {
        const __mmask16 m = C - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - i)) - 1);
        qtts_prefetch_step(&pf);
        __m512 xv[4];
#pragma GCC unroll 4
        for (int p = 0; p < RX; p++) xv[p] = _mm512_maskz_loadu_ps(m, x[p] + i);
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) {
            const __m512 wv = load16(w[r], i, m, bf16);
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) acc[p][r] = _mm512_fmadd_ps(wv, xv[p], acc[p][r]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++)
        store_folds(j->y + (size_t)(t + p) * R + r0, acc[p], RW, j->bias ? j->bias + r0 : NULL);
}

INLINE void mm_float(const qtts_mm_job *j, int r0, int r1, const bool bf16) {
    for (int rb = r0; rb < r1; rb += 8) {       /* blocks of 8 rows, reused over x rows */
        const int nr = QTTS_MIN(8, r1 - rb);
        int t = 0;
        for (; t + 4 <= j->n; t += 4) {
            int r = rb;
            for (; r + 4 <= rb + nr; r += 4) tile_float(j, rb, nr, r, t, 4, 4, bf16);
            for (; r < rb + nr; r++) tile_float(j, rb, nr, r, t, 1, 4, bf16);
        }
        for (; t < j->n; t++) {
            if (nr == 8) tile_float(j, rb, nr, rb, t, 8, 1, bf16);
            else
                for (int r = rb; r < rb + nr; r++) tile_float(j, rb, nr, r, t, 1, 1, bf16);
        }
    }
}

static void mm_f32(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, false); }
static void mm_bf16(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, true); }

/* ==== Q8_0 / Q4_0 ======================================================== */

/* One group (16 blocks) of one packed weight row against one packed x row:
 * lane i of the result is the integer dot of block 16g + i. The weight
 * codes are unsigned (Q8_0: code + 128 as stored; Q4_0: the nibbles, code
 * + 8), so VPDPBUSD takes them as they are and each lane starts from
 * -k * (sum of the block's x codes), k = 128 or 8 (start()). xq is the x
 * row's group (8 vectors of 64 bytes). */
INLINE __m512i start(const int32_t *xs, const bool q4) {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_slli_epi32(_mm512_loadu_si512(xs), q4 ? 3 : 7));
}

/* Rows r0..r0+RW-1 of W against x rows t..t+RX-1 (in the block of W rows
 * [rb, rb + nr)). Per group, the code vectors are walked in the outer
 * loop: each x vector is loaded once for the tile's W rows and each weight
 * vector (unpacked once) serves the tile's x rows, so a 4x4 tile does 16
 * VPDPBUSD per 8 loads; the RW x RX int32 sums are converted and scaled
 * once per group. RW <= 8 and RX <= 4, and RW * RX <= 16 (the registers). */
INLINE void tile_quant(const qtts_mm_job *j, int rb, int nr, int r0, int t, const int RW,
                       const int RX, const bool q4) {
    const int C = j->W->cols, R = j->W->rows, ng = qtts_packed_groups(C);
    const int K = qtts_packed_vectors(q4);
    const size_t stride = qtts_mat_stride(j->W), code_bytes = (size_t)ng * K * 64;
    const uint8_t *w[8];
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
    __m512 acc[4][8];
#pragma GCC unroll 8
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * stride;
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++) {
        xq[p] = j->xq + (size_t)(t + p) * ng * 512;
        xd[p] = j->xd + (size_t)(t + p) * ng * 16;
        xs[p] = j->xs + (size_t)(t + p) * ng * 16;
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) acc[p][r] = _mm512_setzero_ps();
    }
    const __m512i low4 = _mm512_set1_epi8(15);
    qtts_prefetcher pf =
        qtts_prefetch_tile(j->W->data, stride, (size_t)ng * K, rb, nr, j->n, r0, t, RW, RX,
                           j->W->resident);
    /* Q4_0 decode tiles take the high nibbles in place (and 0xF0, no
     * shift) into their own sums, 16 times the products, and add those
     * sums shifted right by 4 once per group: exact (a multiple of 16, at
     * most 16 x 16 x 15 x 128 per lane), so the same integer dot. It saves
     * the 16-bit shift, which competes with VPDPBUSD for one port on Intel
     * cores. Tiles of several x rows would need 32 sums: they shift. */
    const bool split = q4 && RX == 1;
    const __m512i high4 = _mm512_set1_epi8((char)0xF0);
    for (int g = 0; g < ng; g++) {
        __m512i a[4][8], ah[8];
#pragma GCC unroll 4
        for (int p = 0; p < RX; p++) {
            const __m512i x0 = start(xs[p] + g * 16, q4);
#pragma GCC unroll 8
            for (int r = 0; r < RW; r++) a[p][r] = x0;
        }
        if (split)
#pragma GCC unroll 8
            for (int r = 0; r < RW; r++) ah[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < K; k++) {
            qtts_prefetch_step(&pf);
            __m512i xk[4], xh[4];
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++) {
                const int8_t *xg = xq[p] + (size_t)g * 512;
                xk[p] = _mm512_loadu_si512(xg + 64 * k);
                if (q4) xh[p] = _mm512_loadu_si512(xg + 64 * (k + 4));
            }
#pragma GCC unroll 8
            for (int r = 0; r < RW; r++) {
                const __m512i L = _mm512_loadu_si512(w[r] + (size_t)g * K * 64 + 64 * k);
                if (split) {
                    a[0][r] = _mm512_dpbusd_epi32(a[0][r], _mm512_and_si512(L, low4), xk[0]);
                    ah[r] = _mm512_dpbusd_epi32(ah[r], _mm512_and_si512(L, high4), xh[0]);
                } else if (q4) {
                    const __m512i lo = _mm512_and_si512(L, low4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(L, 4), low4);
#pragma GCC unroll 4
                    for (int p = 0; p < RX; p++) {
                        a[p][r] = _mm512_dpbusd_epi32(a[p][r], lo, xk[p]);
                        a[p][r] = _mm512_dpbusd_epi32(a[p][r], hi, xh[p]);
                    }
                } else {
#pragma GCC unroll 4
                    for (int p = 0; p < RX; p++) a[p][r] = _mm512_dpbusd_epi32(a[p][r], L, xk[p]);
                }
            }
        }
        if (split)
#pragma GCC unroll 8
            for (int r = 0; r < RW; r++) a[0][r] = _mm512_add_epi32(a[0][r], _mm512_srai_epi32(ah[r], 4));
#pragma GCC unroll 8
        for (int r = 0; r < RW; r++) {
            const __m512 dw = _mm512_cvtph_ps(
                _mm256_loadu_si256((const __m256i *)(w[r] + code_bytes + (size_t)g * 32)));
#pragma GCC unroll 4
            for (int p = 0; p < RX; p++)
                acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[p][r]),
                                            _mm512_mul_ps(dw, _mm512_loadu_ps(xd[p] + g * 16)),
                                            acc[p][r]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < RX; p++)
        store_folds(j->y + (size_t)(t + p) * R + r0, acc[p], RW, j->bias ? j->bias + r0 : NULL);
}

/* Decode and small batches (x rows < 4) take the rows in blocks of 8, one
 * 8 x 1 tile per x row, where the matrix is at most 2048 columns wide:
 * `ab_pairs` against 4-row blocks on the Intel host, talker step 0.6B int4
 * 0.947-0.950, int8 0.972, 1.7B int4 0.930; the code predictor (from the
 * L3) 0.952 at 0.6B int4. The tile's fixed work (prefetcher set-up, the
 * folds of its sums) is spread over twice the rows, and a core has twice
 * the weight streams in flight. Wider rows keep 4-row blocks: an 8-row
 * block of 3072 columns (14 KB at Q4_0) moves the first prefetch to a whole
 * block ahead, past what L1 holds for a resident matrix, and cost the code
 * predictor ~4%; a matrix streamed from DRAM (the talker's down
 * projection, 1024 x 3072) takes 8-row blocks as well, its L2 prefetch
 * unbounded by L1: `bench_kernels` read it at 93% of the probe against
 * 86-87%, and the talker step took 0.986 of the time (`ab_pairs`, 0.6B
 * int4). Prefill and larger batches keep the 4 x 4 tiles. */
#define DECODE_BLOCK_MAX_COLS 2048
/* Except Q8_0 decode and small batches from DRAM (x rows < 4, a matrix not
 * resident), which take the rows one at a time, 1 x n tiles: each
 * thread's loads then walk its range front to back instead of 8 rows side
 * by side. On the EPYC (Zen 4) host, `ab_pairs` with the 0.6B int8 model
 * (file-mapped weights): frame 0.77-0.94 of the 8-row blocks' time in four
 * runs (talker 0.75-0.93, CP 0.78-0.94); 2-row blocks 0.92, 4-row 1.01.
 * Batches (`bench_backend --batch`, four alternations): B = 2 0.82-0.99,
 * B = 3 0.89-1.07. `bench_kernels` (one thread, weights on huge pages) read
 * DRAM at ~30 GB/s against ~22 for the same matrices, though the 1 x 1
 * tile computes slower from cache (38 GB/s against 65). Q4_0 keeps its
 * blocks: row tiles gave its talker 0.97 but its code predictor, served
 * partly from this L3, 1.23. Not measured on Intel. */

INLINE void mm_quant(const qtts_mm_job *j, int r0, int r1, const bool q4) {
    if (j->n < 4 && !q4 && !j->W->resident) {   /* Q8_0 decode from DRAM: row after row */
        for (int r = r0; r < r1; r++) {
            if (j->n == 1) tile_quant(j, r, 1, r, 0, 1, 1, false);
            else if (j->n == 2) tile_quant(j, r, 1, r, 0, 1, 2, false);
            else tile_quant(j, r, 1, r, 0, 1, 3, false);
        }
        return;
    }
    const int B =   /* rows a block */
        j->n < 4 && (j->W->cols <= DECODE_BLOCK_MAX_COLS || !j->W->resident) ? 8 : 4;
    for (int rb = r0; rb < r1; rb += B) {
        const int nr = QTTS_MIN(B, r1 - rb);
        int t = 0;
        for (; t + 4 <= j->n; t += 4) {   /* only with B = 4 */
            if (nr == 4) tile_quant(j, rb, nr, rb, t, 4, 4, q4);
            else
                for (int r = rb; r < rb + nr; r++) tile_quant(j, rb, nr, r, t, 1, 4, q4);
        }
        for (; t < j->n; t++) {
            if (nr == 8) tile_quant(j, rb, nr, rb, t, 8, 1, q4);
            else if (nr == 4) tile_quant(j, rb, nr, rb, t, 4, 1, q4);
            else
                for (int r = rb; r < rb + nr; r++) tile_quant(j, rb, nr, r, t, 1, 1, q4);
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

/* qtts_pack_act, a group (16 blocks) at a time. The group's codes, 16
 * blocks of 8 four-byte words, are a 16 x 8 matrix of dwords in block
 * order; the packed order is its transpose (word k of the 16 blocks in
 * vector k). R[j] holds blocks 2j and 2j + 1. Two-source dword permutes
 * make T[2a] = words 0-3 and T[2a+1] = words 4-7 of blocks 4a..4a+3, each
 * 128-bit lane one word of the four; a 4 x 4 transpose of those lanes
 * gives the packed vectors. Each block's code sum is VPDPBUSD against
 * ones over the packed vectors (lane i: block i). Missing blocks of a
 * last, partial group are loaded as zeros (codes, scale and sum 0, as the
 * reference writes them). Bits as qtts_pack_act; at 1024 columns ~2.5x
 * faster on the EPYC (Zen 4) host. */
static void pack_act(const int8_t *q, const float *d, int cols, int8_t *xq, float *xd, int32_t *xs) {
    const int nb = cols / QTTS_QK, ng = qtts_packed_groups(cols);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i lo4 = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
    const __m512i hi4 = _mm512_set_epi32(31, 23, 15, 7, 30, 22, 14, 6, 29, 21, 13, 5, 28, 20, 12, 4);
    for (int g = 0; g < ng; g++) {
        const int left = nb - 16 * g;   /* blocks in this group, 1..16 */
        const int8_t *src = q + (size_t)g * 512;
        int8_t *dst = xq + (size_t)g * 512;
        __m512i R[8];
        if (left >= 16) {
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) R[j] = _mm512_loadu_si512(src + 64 * j);
            _mm512_storeu_ps(xd + g * 16, _mm512_loadu_ps(d + g * 16));
        } else {
            for (int j = 0; j < 8; j++) {
                const int n = left - 2 * j;   /* blocks of R[j] present: 2, 1 or none */
                R[j] = _mm512_maskz_loadu_epi8(n >= 2 ? ~0ull : n == 1 ? 0xffffffffull : 0,
                                               src + 64 * j);
            }
            _mm512_storeu_ps(xd + g * 16,
                             _mm512_maskz_loadu_ps((__mmask16)((1u << left) - 1), d + g * 16));
        }
        __m512i T[8];
#pragma GCC unroll 4
        for (int a = 0; a < 4; a++) {
            T[2 * a] = _mm512_permutex2var_epi32(R[2 * a], lo4, R[2 * a + 1]);
            T[2 * a + 1] = _mm512_permutex2var_epi32(R[2 * a], hi4, R[2 * a + 1]);
        }
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {   /* words 4h..4h+3 */
            const __m512i b0 = _mm512_shuffle_i64x2(T[h], T[2 + h], 0x44);
            const __m512i b1 = _mm512_shuffle_i64x2(T[h], T[2 + h], 0xEE);
            const __m512i b2 = _mm512_shuffle_i64x2(T[4 + h], T[6 + h], 0x44);
            const __m512i b3 = _mm512_shuffle_i64x2(T[4 + h], T[6 + h], 0xEE);
            const __m512i o0 = _mm512_shuffle_i64x2(b0, b2, 0x88);
            const __m512i o1 = _mm512_shuffle_i64x2(b0, b2, 0xDD);
            const __m512i o2 = _mm512_shuffle_i64x2(b1, b3, 0x88);
            const __m512i o3 = _mm512_shuffle_i64x2(b1, b3, 0xDD);
            _mm512_storeu_si512(dst + 64 * (4 * h), o0);
            _mm512_storeu_si512(dst + 64 * (4 * h + 1), o1);
            _mm512_storeu_si512(dst + 64 * (4 * h + 2), o2);
            _mm512_storeu_si512(dst + 64 * (4 * h + 3), o3);
            s0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s0, ones, o0), ones, o1);
            s1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s1, ones, o2), ones, o3);
        }
        _mm512_storeu_si512(xs + g * 16, _mm512_add_epi32(s0, s1));
    }
}

const qtts_isa qtts_isa_avx512 = {
    .name = "avx512",
    .mm_f32 = mm_f32,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .quantize_act = quantize_act,
    .pack_act = pack_act,
    .attn_scores = attn_scores_v,
    .attn_out = attn_out_v,
    .attn_scores_bf16 = attn_scores_bf16_v,
    .attn_out_bf16 = attn_out_bf16_v,
};

#endif
