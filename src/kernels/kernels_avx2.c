/*
 * kernels_avx2.c - AVX2 + FMA + F16C row kernels (x86-64), in the orders
 * of kernels_impl.h. kernels_avxvnni.c compiles this file a second time
 * with QTTS_AVXVNNI defined, which swaps the int8 dot step for the
 * AVX-VNNI instruction; everything else is shared.
 *
 * F32/BF16: the 16 lanes of a (W row, x row) pair are two 8-wide fp32
 * accumulators (lanes 0-7 and 8-15). A tile computes RW rows of W against
 * RX rows of x, sharing each load of W across the x rows and each load of
 * x across the W rows. One x row (decode) uses 4x1 tiles: 8 independent
 * FMA chains, more than DRAM can feed. Several x rows (prefill, codec)
 * use 2x3 tiles: 12 accumulators, the most that fit 16 registers. BF16
 * decode has its own tile that holds the lanes as even/odd halves, which
 * saves the widening shuffles (tile_bf16_split).
 *
 * Q8_0/Q4_0: the packed layout (quant.h) puts one block in each 32-bit
 * lane, so the 16 lanes of a group are two 8-wide halves and a lane's
 * int32 sum is its block's whole integer dot; the fp32 work (scale
 * product, convert, multiply-add) is one instruction per 8 blocks.
 * Without VNNI the byte products are maddubs (unsigned times signed,
 * pairs summed to 16 bits) then madd with ones: Q8_0 feeds it |x| and the
 * signed codes with x's sign (pair sums never saturate: 2 * 127 * 127 <
 * 32767), Q4_0 the raw nibbles (0..15) and x, from a start of
 * -8 * (the block's sum of x), their products added in 16 bits
 * (q4_step). AVX-VNNI's VPDPBUSD takes the stored unsigned codes of both
 * formats directly.
 */
#include "kernels_impl.h"

#if QTTS_ISA_X86
#include <immintrin.h>
#include "attn_impl.h"

#ifdef QTTS_AVXVNNI
#define ISA_TABLE qtts_isa_avxvnni
#define ISA_NAME "avx-vnni"
#else
#define ISA_TABLE qtts_isa_avx2
#define ISA_NAME "avx2"
#endif

#define INLINE static inline __attribute__((always_inline))

/* A matmul reads each weight row from memory once, in short streams (a
 * tile's rows are only 0.5-4 KB each), too short for the hardware
 * prefetchers to ramp up: every tile, float and quantized, decode,
 * batched and prefill, prefetches its share of its block 8 KB ahead a
 * few lines per column step or (group half, row) (qtts_prefetch_tile,
 * kernels_impl.h). */

/* ==== F32 / BF16 ========================================================= */

INLINE __m256 load8(const void *w, int i, bool bf16) {
    if (bf16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)w + i);
}

/* The fold of kernels_impl.h on lanes lo (0-7) and hi (8-15). */
INLINE float fold16(__m256 lo, __m256 hi) {
    __m256 v8 = _mm256_add_ps(lo, hi);
    __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    __m128 v1 = _mm_add_ss(v2, _mm_movehdup_ps(v2));
    return _mm_cvtss_f32(v1);
}

/* y[t + p][r0 + r] for r < RW, p < RX; the tile is in the block of W rows
 * [rb, rb + nr). */
INLINE void tile_float(const qtts_mm_job *j, int rb, int nr, int r0, int t, const int RW,
                       const int RX, const bool bf16) {
    const int C = j->W->cols, R = j->W->rows;
    const size_t es = bf16 ? 2 : 4;
    const void *w[4];
    const float *x[3];
    __m256 acc[3][4][2];
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * C * es;
#pragma GCC unroll 3
    for (int p = 0; p < RX; p++) {
        x[p] = j->x + (size_t)(t + p) * C;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) acc[p][r][0] = acc[p][r][1] = _mm256_setzero_ps();
    }
    qtts_prefetcher pf = qtts_prefetch_tile(j->W->data, (size_t)C * es, (size_t)(C + 15) / 16,
                                            rb, nr, j->n, r0, t, RW, RX, j->W->resident);
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        qtts_prefetch_step(&pf);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int r = 0; r < RW; r++) {
                const __m256 wv = load8(w[r], i + 8 * h, bf16);
#pragma GCC unroll 3
                for (int p = 0; p < RX; p++)
                    acc[p][r][h] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[p] + i + 8 * h), acc[p][r][h]);
            }
    }
    if (i < C) { /* the last, partial group: zero-padded copies */
        float wt[4][16] = {{0}}, xt[3][16] = {{0}};
        for (int r = 0; r < RW; r++)
            for (int k = i; k < C; k++)
                wt[r][k - i] = bf16 ? qtts_bf16_to_f32(((const uint16_t *)w[r])[k])
                                    : ((const float *)w[r])[k];
        for (int p = 0; p < RX; p++)
            for (int k = i; k < C; k++) xt[p][k - i] = x[p][k];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int r = 0; r < RW; r++) {
                const __m256 wv = _mm256_loadu_ps(wt[r] + 8 * h);
#pragma GCC unroll 3
                for (int p = 0; p < RX; p++)
                    acc[p][r][h] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt[p] + 8 * h), acc[p][r][h]);
            }
    }
#pragma GCC unroll 3
    for (int p = 0; p < RX; p++)
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            float v = fold16(acc[p][r][0], acc[p][r][1]);
            j->y[(size_t)(t + p) * R + r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
        }
}

INLINE void mm_float(const qtts_mm_job *j, int r0, int r1, const bool bf16) {
    for (int rb = r0; rb < r1; rb += 4) {       /* blocks of 4 rows, reused over x rows */
        const int nr = QTTS_MIN(4, r1 - rb);
        int t = 0;
        for (; t + 3 <= j->n; t += 3) {
            int r = rb;
            for (; r + 2 <= rb + nr; r += 2) tile_float(j, rb, nr, r, t, 2, 3, bf16);
            if (r < rb + nr) tile_float(j, rb, nr, r, t, 1, 3, bf16);
        }
        for (; t < j->n; t++) {
            if (nr == 4) tile_float(j, rb, nr, rb, t, 4, 1, bf16);
            else
                for (int r = rb; r < rb + nr; r++) tile_float(j, rb, nr, r, t, 1, 1, bf16);
        }
    }
}

/* ---- BF16 decode (one x row) ----
 * A 256-bit load of 16 bf16 weights holds element pairs (2k, 2k+1) in
 * 32-bit lane k, so a shift gives the even elements as fp32 and a mask the
 * odd ones: two operations per 16 weights instead of two widening
 * shuffles and two shifts. Lane k of the "even" accumulator is then lane
 * 2k of the SIMD order and lane k of the "odd" one lane 2k+1; x is split
 * the same way once per call (xs: per group of 16, the 8 even then the 8
 * odd values), and fold16_split adds the lanes in exactly the pairs of the
 * SIMD order, so the result is bit-identical to tile_float's. */

#define SPLIT_MAX_COLS 8192   /* xs lives on the stack */

/* xs[16g + k] = x[16g + 2k], xs[16g + 8 + k] = x[16g + 2k + 1]; zero past cols. */
static void split_even_odd(float *xs, const float *x, int C) {
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));   /* a0 a2 b0 b2 | a4 a6 b4 b6 */
        const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        _mm256_storeu_ps(xs + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8)));
        _mm256_storeu_ps(xs + i + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xd8)));
    }
    if (i < C)
        for (int m = 0; m < 16; m++) xs[i + (m & 1) * 8 + m / 2] = i + m < C ? x[i + m] : 0.0f;
}

/* The SIMD-order fold of lanes held as even (lanes 0,2,..,14) and odd. */
INLINE float fold16_split(__m256 ev, __m256 od) {
    __m128 e4 = _mm_add_ps(_mm256_castps256_ps128(ev), _mm256_extractf128_ps(ev, 1));   /* lanes 2k of a[l]+a[l+8] */
    __m128 o4 = _mm_add_ps(_mm256_castps256_ps128(od), _mm256_extractf128_ps(od, 1));   /* lanes 2k+1 */
    __m128 e2 = _mm_add_ps(e4, _mm_movehl_ps(e4, e4));   /* lanes 0, 2 of a[l]+a[l+4] */
    __m128 o2 = _mm_add_ps(o4, _mm_movehl_ps(o4, o4));   /* lanes 1, 3 */
    __m128 e1 = _mm_add_ss(e2, _mm_movehdup_ps(e2));     /* lane 0 of a[l]+a[l+2] */
    __m128 o1 = _mm_add_ss(o2, _mm_movehdup_ps(o2));     /* lane 1 */
    return _mm_cvtss_f32(_mm_add_ss(e1, o1));
}

/* y[r0 + r] for r < RW against the split x row xs (padded to groups of 16). */
INLINE void tile_bf16_split(const qtts_mm_job *j, int r0, const float *xs, const int RW) {
    const int C = j->W->cols;
    const uint16_t *w[4];
    __m256 ev[4], od[4];
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) {
        w[r] = (const uint16_t *)j->W->data + (size_t)(r0 + r) * C;
        ev[r] = od[r] = _mm256_setzero_ps();
    }
    qtts_prefetcher pf =
        qtts_prefetch_begin(w[0], (size_t)RW * C * 2, (size_t)(C + 15) / 16, 0, 1, 1,
                            j->W->resident);
    int i = 0;
    for (; i + 16 <= C; i += 16) {
        const __m256 xe = _mm256_loadu_ps(xs + i), xo = _mm256_loadu_ps(xs + i + 8);
        qtts_prefetch_step(&pf);
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w[r] + i));
            ev[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), xe, ev[r]);
            od[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), xo, od[r]);
        }
    }
    if (i < C) { /* the last, partial group: zero-padded copies */
        const __m256 xe = _mm256_loadu_ps(xs + i), xo = _mm256_loadu_ps(xs + i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            uint16_t t[16] = {0};
            for (int k = i; k < C; k++) t[k - i] = w[r][k];
            const __m256i v = _mm256_loadu_si256((const __m256i *)t);
            ev[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), xe, ev[r]);
            od[r] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), xo, od[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) {
        const float v = fold16_split(ev[r], od[r]);
        j->y[r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
    }
}

static void mm_f32(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, false); }

static void mm_bf16(const qtts_mm_job *j, int r0, int r1) {
    const int C = j->W->cols;
    if (j->n != 1 || C > SPLIT_MAX_COLS) {
        mm_float(j, r0, r1, true);
        return;
    }
    _Alignas(32) float xs[SPLIT_MAX_COLS + 16];
    split_even_odd(xs, j->x, C);
    int r = r0;
    for (; r + 4 <= r1; r += 4) tile_bf16_split(j, r, xs, 4);
    for (; r < r1; r++) tile_bf16_split(j, r, xs, 1);
}

/* ==== Q8_0 / Q4_0 ======================================================== */

/* One 32-byte vector L of Q4_0 codes (its low nibbles against xk, its high
 * ones against xh) into a half group's sums, then those sums into the
 * lanes' int32 dots (q4_finish). With VNNI, the low nibbles go straight
 * into a, and the high nibbles are taken in place (an and with 0xF0) into
 * their own sums ah, 16 times the products, added shifted right by 4 once
 * per half group: exact, without a 16-bit shift per vector. Without VNNI,
 * maddubs would saturate on 240 x 127 pairs, so the high nibbles are
 * shifted down; a nibble pair's sum is at most |15 * 128 * 2| = 3840, so a
 * block's 8 maddubs results (its 32 weights in one half group) add in 16
 * bits in ah (at most 30720, exact) and are widened by one madd: 9
 * multiplies per 256 weights instead of 16, the same integers. */
INLINE void q4_step(__m256i *a, __m256i *ah, __m256i L, __m256i xk, __m256i xh) {
    const __m256i low4 = _mm256_set1_epi8(15);
#ifdef QTTS_AVXVNNI
    *a = _mm256_dpbusd_avx_epi32(*a, _mm256_and_si256(L, low4), xk);
    *ah = _mm256_dpbusd_avx_epi32(*ah, _mm256_and_si256(L, _mm256_set1_epi8((char)0xF0)), xh);
#else
    *ah = _mm256_add_epi16(*ah, _mm256_maddubs_epi16(_mm256_and_si256(L, low4), xk));
    *ah = _mm256_add_epi16(*ah, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(L, 4), low4), xh));
#endif
}

INLINE __m256i q4_finish(__m256i a, __m256i ah) {
#ifdef QTTS_AVXVNNI
    return _mm256_add_epi32(a, _mm256_srai_epi32(ah, 4));
#else
    return _mm256_add_epi32(a, _mm256_madd_epi16(ah, _mm256_set1_epi16(1)));
#endif
}

/* a + the lane dots of Q8_0 codes stored as code + 128 (wu) and x. With
 * VNNI the unsigned codes go in as they are (the lane started from
 * -128 * sum x); without, the signed codes (wu ^ 0x80) with |x| and x's
 * sign, whose pair sums never saturate (2 * 127 * 127 < 32767). */
INLINE __m256i dot_q8(__m256i a, __m256i wu, __m256i x) {
#ifdef QTTS_AVXVNNI
    return _mm256_dpbusd_avx_epi32(a, wu, x);
#else
    const __m256i w = _mm256_xor_si256(wu, _mm256_set1_epi8((char)0x80));
    return _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(x, x),
                                                                      _mm256_sign_epi8(w, x)),
                                                 _mm256_set1_epi16(1)));
#endif
}

/* Where each lane's integer dot starts: -k * (the block's sum of x codes)
 * for unsigned codes (Q4_0 nibbles k = 8; Q8_0 k = 128 with VNNI), else 0. */
INLINE __m256i dot_start(const int32_t *xs, const bool q4) {
#ifndef QTTS_AVXVNNI
    if (!q4) return _mm256_setzero_si256();
#endif
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)xs), q4 ? 3 : 7));
}

/* Rows r0.. of W against x rows t.. (in the block of W rows [rb, rb + nr)):
 * the 16 lanes of a group are two halves (lanes 0-7: bytes 0-31 of each
 * 64-byte vector, blocks 16g..16g+7; lanes 8-15: bytes 32-63), each an
 * 8-wide accumulator. */
INLINE void tile_quant(const qtts_mm_job *j, int rb, int nr, int r0, int t, const int RW,
                       const int RX, const bool q4) {
    const int C = j->W->cols, R = j->W->rows, ng = qtts_packed_groups(C);
    const int K = qtts_packed_vectors(q4);
    const size_t stride = qtts_mat_stride(j->W), code_bytes = (size_t)ng * K * 64;
    const uint8_t *w[4];
    const int8_t *xq[2];
    const float *xd[2];
    const int32_t *xs[2];
    __m256 acc[2][4][2];
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * stride;
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++) {
        xq[p] = j->xq + (size_t)(t + p) * ng * 512;
        xd[p] = j->xd + (size_t)(t + p) * ng * 16;
        xs[p] = j->xs + (size_t)(t + p) * ng * 16;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) acc[p][r][0] = acc[p][r][1] = _mm256_setzero_ps();
    }
    qtts_prefetcher pf = qtts_prefetch_tile(j->W->data, stride, (size_t)ng * 2 * RW, rb, nr, j->n,
                                            r0, t, RW, RX, j->W->resident);
    for (int g = 0; g < ng; g++) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i x0[2];
            __m256 dx[2];
#pragma GCC unroll 2
            for (int p = 0; p < RX; p++) {
                x0[p] = dot_start(xs[p] + g * 16 + 8 * h, q4);
                dx[p] = _mm256_loadu_ps(xd[p] + g * 16 + 8 * h);
            }
#pragma GCC unroll 4
            for (int r = 0; r < RW; r++) {
                const uint8_t *cw = w[r] + (size_t)g * K * 64 + 32 * h;
                const uint8_t *sw = w[r] + code_bytes + (size_t)g * 32 + 16 * h;
                __m256i a[2], ah[2];
                qtts_prefetch_step(&pf);
#pragma GCC unroll 2
                for (int p = 0; p < RX; p++) {
                    a[p] = x0[p];
                    ah[p] = _mm256_setzero_si256();
                }
#pragma GCC unroll 8
                for (int k = 0; k < K; k++) {
                    const __m256i L = _mm256_loadu_si256((const __m256i *)(cw + 64 * k));
#pragma GCC unroll 2
                    for (int p = 0; p < RX; p++) {
                        const int8_t *xg = xq[p] + (size_t)g * 512 + 32 * h;
                        const __m256i xk = _mm256_loadu_si256((const __m256i *)(xg + 64 * k));
                        if (q4)
                            q4_step(&a[p], &ah[p], L, xk,
                                    _mm256_loadu_si256((const __m256i *)(xg + 64 * (k + 4))));
                        else
                            a[p] = dot_q8(a[p], L, xk);
                    }
                }
                if (q4)
#pragma GCC unroll 2
                    for (int p = 0; p < RX; p++) a[p] = q4_finish(a[p], ah[p]);
                const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sw));
#pragma GCC unroll 2
                for (int p = 0; p < RX; p++)
                    acc[p][r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[p]), _mm256_mul_ps(dw, dx[p]),
                                                   acc[p][r][h]);
            }
        }
    }
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++)
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            float v = fold16(acc[p][r][0], acc[p][r][1]);
            j->y[(size_t)(t + p) * R + r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
        }
}

INLINE void mm_quant(const qtts_mm_job *j, int r0, int r1, const bool q4) {
    for (int rb = r0; rb < r1; rb += 4) {
        const int nr = QTTS_MIN(4, r1 - rb);
        int t = 0;
        for (; t + 2 <= j->n; t += 2) {
            int r = rb;
            for (; r + 2 <= rb + nr; r += 2) tile_quant(j, rb, nr, r, t, 2, 2, q4);
            if (r < rb + nr) tile_quant(j, rb, nr, r, t, 1, 2, q4);
        }
        for (; t < j->n; t++) {
            if (nr == 4) tile_quant(j, rb, nr, rb, t, 4, 1, q4);
            else
                for (int r = rb; r < rb + nr; r++) tile_quant(j, rb, nr, r, t, 1, 1, q4);
        }
    }
}

static void mm_q8_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, false); }
static void mm_q4_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, true); }

/* qtts_quantize_act_ref, 32 values at a time. */
static void quantize_act(const float *x, int cols, int8_t *q, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int b = 0; b < cols / QTTS_QK; b++) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + b * QTTS_QK + 8 * k);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i[4];
        for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        _mm256_storeu_si256((__m256i *)(q + b * QTTS_QK), _mm256_permutevar8x32_epi32(p, order));
        d[b] = dx;
    }
}

const qtts_isa ISA_TABLE = {
    .name = ISA_NAME,
    .mm_f32 = mm_f32,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .quantize_act = quantize_act,
    .pack_act = qtts_pack_act,
    .attn_scores = attn_scores_v,
    .attn_out = attn_out_v,
    .attn_scores_bf16 = attn_scores_bf16_v,
    .attn_out_bf16 = attn_out_bf16_v,
};

#endif
