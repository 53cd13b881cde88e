/*
 * kernels_neon.c - AArch64 NEON row kernels, in the orders of
 * kernels_impl.h; bit-identical to the x86 SIMD paths. kernels_neondot.c
 * compiles this file a second time with QTTS_NEON_DOTPROD defined (and
 * -march=armv8.2-a+dotprod), which forms the quantized blocks' integer
 * dots with SDOT; this baseline build uses widening multiplies and
 * pairwise adds, which give the same exact integers.
 *
 * F32/BF16: the 16 lanes of a (W row, x row) pair are four float32x4
 * accumulators (lanes 0-3, 4-7, 8-11, 12-15), one fused multiply-add each
 * per group of 16 columns. Decode uses 4x1 tiles, several x rows 2x2
 * (16 accumulators of 32 registers). The last, partial group is read from
 * zero-padded copies.
 *
 * Q8_0/Q4_0: the packed layout (quant.h) puts 16 blocks in the 32-bit
 * lanes of each 64-byte vector, i.e. 4 blocks per q-register: lane i of
 * the 16 is lane i%4 of register i/4, the F32 accumulators' lanes. Each
 * lane forms its block's exact integer dot (SDOT, or widening multiplies
 * and pairwise adds), so the fp32 work of kernels_impl.h (convert, scale
 * product, fused multiply-add) is one instruction per 4 blocks, in the
 * reference's lane order. Q8_0 codes are turned back to signed (an xor
 * of the sign bit); Q4_0 nibbles (code + 8, 0..15) are used as they are
 * and each lane starts from -8 times the block's x code sum. Decode uses
 * 4x1 tiles, several x rows 2x2.
 */
#include "kernels_impl.h"

#if QTTS_ISA_ARM64
#include <arm_neon.h>
#include "attn_impl.h"

#ifdef QTTS_NEON_DOTPROD
#define ISA_TABLE qtts_isa_neondot
#define ISA_NAME "neon-dotprod"
#else
#define ISA_TABLE qtts_isa_neon
#define ISA_NAME "neon"
#endif

#define INLINE static inline __attribute__((always_inline))

/* The fold of kernels_impl.h on lanes a[0] (0-3) .. a[3] (12-15). */
INLINE float fold16(const float32x4_t a[4]) {
    const float32x4_t c = vaddq_f32(vaddq_f32(a[0], a[2]), vaddq_f32(a[1], a[3]));
    const float32x2_t d = vadd_f32(vget_low_f32(c), vget_high_f32(c));
    return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
}

/* Decode tiles prefetch the next tile's rows (which follow in memory) at
 * the column they read: a tile's rows are 0.5-4 KB streams, too short for
 * the hardware prefetchers; the tiles of the first x rows (t == 0) do it,
 * decode and batched alike. A prefetch never faults past the matrix. */
INLINE void prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/* ==== F32 / BF16 ========================================================= */

INLINE float32x4_t load4(const void *w, int i, const bool bf16) {
    if (bf16) return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + i), 16));
    return vld1q_f32((const float *)w + i);
}

INLINE void tile_float(const qtts_mm_job *j, int r0, int t, const int RW, const int RX,
                       const bool bf16) {
    const int C = j->W->cols, R = j->W->rows;
    const size_t es = bf16 ? 2 : 4;
    const void *w[4];
    const float *x[2];
    float32x4_t acc[2][4][4];
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * C * es;
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++) {
        x[p] = j->x + (size_t)(t + p) * C;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[p][r][q] = vdupq_n_f32(0.0f);
    }
    int i = 0;
    for (; i + 16 <= C; i += 16) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            float32x4_t xv[2];
#pragma GCC unroll 2
            for (int p = 0; p < RX; p++) xv[p] = vld1q_f32(x[p] + i + 4 * q);
#pragma GCC unroll 4
            for (int r = 0; r < RW; r++) {
                if (t == 0 && q == 0) prefetch((const uint8_t *)w[r] + (size_t)i * es + (size_t)RW * C * es);
                const float32x4_t wv = load4(w[r], i + 4 * q, bf16);
#pragma GCC unroll 2
                for (int p = 0; p < RX; p++) acc[p][r][q] = vfmaq_f32(acc[p][r][q], wv, xv[p]);
            }
        }
    }
    if (i < C) { /* the last, partial group: zero-padded copies */
        float wt[4][16] = {{0}}, xt[2][16] = {{0}};
        for (int r = 0; r < RW; r++)
            for (int k = i; k < C; k++)
                wt[r][k - i] = bf16 ? qtts_bf16_to_f32(((const uint16_t *)w[r])[k])
                                    : ((const float *)w[r])[k];
        for (int p = 0; p < RX; p++)
            for (int k = i; k < C; k++) xt[p][k - i] = x[p][k];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
#pragma GCC unroll 4
            for (int r = 0; r < RW; r++) {
                const float32x4_t wv = vld1q_f32(wt[r] + 4 * q);
#pragma GCC unroll 2
                for (int p = 0; p < RX; p++)
                    acc[p][r][q] = vfmaq_f32(acc[p][r][q], wv, vld1q_f32(xt[p] + 4 * q));
            }
    }
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++)
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            float v = fold16(acc[p][r]);
            j->y[(size_t)(t + p) * R + r0 + r] = j->bias ? v + j->bias[r0 + r] : v;
        }
}

INLINE void mm_float(const qtts_mm_job *j, int r0, int r1, const bool bf16) {
    for (int rb = r0; rb < r1; rb += 4) {       /* blocks of 4 rows, reused over x rows */
        const int nr = QTTS_MIN(4, r1 - rb);
        int t = 0;
        for (; t + 2 <= j->n; t += 2) {
            int r = rb;
            for (; r + 2 <= rb + nr; r += 2) tile_float(j, r, t, 2, 2, bf16);
            if (r < rb + nr) tile_float(j, r, t, 1, 2, bf16);
        }
        for (; t < j->n; t++) {
            if (nr == 4) tile_float(j, rb, t, 4, 1, bf16);
            else
                for (int r = rb; r < rb + nr; r++) tile_float(j, r, t, 1, 1, bf16);
        }
    }
}

static void mm_f32(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, false); }
static void mm_bf16(const qtts_mm_job *j, int r0, int r1) { mm_float(j, r0, r1, true); }

/* ==== Q8_0 / Q4_0 ======================================================== */

/* Lanes 4q..4q+3 (register q of the 16) of one group of a packed weight
 * row against a packed x row: lane l is the exact integer dot of block
 * 16g + 4q + l. wv[k] are the weight codes matched with x vector k (bytes
 * 16q..16q+15 of each: the same 4 code bytes of 4 consecutive blocks), x
 * is the x row's group plus 16q, and a0 is the lanes' start (-8 times the
 * blocks' x code sums for the Q4_0 nibbles, which are code + 8; 0 for Q8_0,
 * whose codes are turned back to signed). */
INLINE int32x4_t dot_group(const int8x16_t wv[8], const int8_t *x, int32x4_t a0, const bool q4) {
#ifdef QTTS_NEON_DOTPROD
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) a0 = vdotq_s32(a0, wv[k], vld1q_s8(x + 64 * k));
    return a0;
#else
    /* int16 products summed per byte position, then pairwise into the
     * lanes: Q4_0's 8 products per position (|w| <= 15) fit in int16,
     * Q8_0's only 2 (|w| <= 127), so Q8_0 widens after every pair. */
    int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
    int16x8_t ml = vdupq_n_s16(0), mh = vdupq_n_s16(0);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const int8x16_t xv = vld1q_s8(x + 64 * k);
        if (!q4 && k % 2 == 0) {
            ml = vmull_s8(vget_low_s8(wv[k]), vget_low_s8(xv));
            mh = vmull_high_s8(wv[k], xv);
        } else {
            ml = vmlal_s8(ml, vget_low_s8(wv[k]), vget_low_s8(xv));
            mh = vmlal_high_s8(mh, wv[k], xv);
        }
        if (!q4 && k % 2 == 1) {
            lo = vpadalq_s16(lo, ml);
            hi = vpadalq_s16(hi, mh);
        }
    }
    if (q4) {
        lo = vpaddlq_s16(ml);
        hi = vpaddlq_s16(mh);
    }
    return vaddq_s32(a0, vpaddq_s32(lo, hi));
#endif
}

/* Rows r0..r0+RW-1 of W against x rows t..t+RX-1. Per group and register
 * q, each weight row's codes are loaded and made signed once for the tile's
 * x rows; the x vectors are loaded where they are used (L1 hits). */
INLINE void tile_quant(const qtts_mm_job *j, int r0, int t, const int RW, const int RX,
                       const bool q4) {
    const int C = j->W->cols, R = j->W->rows, ng = qtts_packed_groups(C);
    const int K = qtts_packed_vectors(q4);
    const size_t rb = qtts_mat_stride(j->W), code_bytes = (size_t)ng * K * 64;
    const size_t ahead = (size_t)RW * rb;
    const uint8_t *w[4];
    const int8_t *xq[2];
    const float *xd[2];
    const int32_t *xs[2];
    float32x4_t acc[2][4][4];   /* [x row][W row][lanes 0-3, 4-7, 8-11, 12-15] */
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * rb;
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++) {
        xq[p] = j->xq + (size_t)(t + p) * ng * 512;
        xd[p] = j->xd + (size_t)(t + p) * ng * 16;
        xs[p] = j->xs + (size_t)(t + p) * ng * 16;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[p][r][q] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t low4 = vdupq_n_u8(15), sign = vdupq_n_u8(0x80);
    for (int g = 0; g < ng; g++) {
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            const uint8_t *cw = w[r] + (size_t)g * K * 64;
            const uint16_t *sw = (const uint16_t *)(w[r] + code_bytes) + g * 16;
            if (t == 0) {
#pragma GCC unroll 8
                for (int k = 0; k < K; k++) prefetch(cw + 64 * k + ahead);
                prefetch((const uint8_t *)sw + ahead);
            }
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                int8x16_t wv[8];
                if (q4) {
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        const uint8x16_t L = vld1q_u8(cw + 64 * k + 16 * q);
                        wv[k] = vreinterpretq_s8_u8(vandq_u8(L, low4));
                        wv[k + 4] = vreinterpretq_s8_u8(vshrq_n_u8(L, 4));
                    }
                } else {
#pragma GCC unroll 8
                    for (int k = 0; k < 8; k++)
                        wv[k] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(cw + 64 * k + 16 * q), sign));
                }
                const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(sw + 4 * q)));
#pragma GCC unroll 2
                for (int p = 0; p < RX; p++) {
                    const int b = g * 16 + 4 * q;
                    const int32x4_t a0 = q4 ? vnegq_s32(vshlq_n_s32(vld1q_s32(xs[p] + b), 3))
                                            : vdupq_n_s32(0);
                    const int32x4_t P = dot_group(wv, xq[p] + (size_t)g * 512 + 16 * q, a0, q4);
                    acc[p][r][q] = vfmaq_f32(acc[p][r][q], vcvtq_f32_s32(P),
                                             vmulq_f32(dw, vld1q_f32(xd[p] + b)));
                }
            }
        }
    }
#pragma GCC unroll 2
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
        for (; t + 2 <= j->n; t += 2) {
            int r = rb;
            for (; r + 2 <= rb + nr; r += 2) tile_quant(j, r, t, 2, 2, q4);
            if (r < rb + nr) tile_quant(j, r, t, 1, 2, q4);
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

/* qtts_quantize_act_ref, one block at a time (vcvtnq: round half to even). */
static void quantize_act(const float *x, int cols, int8_t *q, float *d) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + b * QTTS_QK + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        const float amax = vmaxvq_f32(m);
        const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
        for (int k = 0; k < 8; k += 2) {
            const int16x8_t s = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k], id))),
                                             vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id))));
            vst1_s8(q + b * QTTS_QK + 4 * k, vqmovn_s16(s));
        }
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
