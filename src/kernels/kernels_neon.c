/*
 * kernels_neon.c - AArch64 NEON row kernels, in the orders of
 * kernels_impl.h; bit-identical to the x86 SIMD paths. kernels_neondot.c
 * compiles this file a second time with QTTS_NEON_DOTPROD defined (and
 * -march=armv8.2-a+dotprod), which forms the int8 partials with SDOT;
 * this baseline build uses widening multiplies and pairwise adds, which
 * give the same exact integers.
 *
 * F32/BF16: the 16 lanes of a (W row, x row) pair are four float32x4
 * accumulators (lanes 0-3, 4-7, 8-11, 12-15), one fused multiply-add each
 * per group of 16 columns. Decode uses 4x1 tiles, several x rows 2x2
 * (16 accumulators of 32 registers). The last, partial group is read from
 * zero-padded copies.
 *
 * Q8_0/Q4_0: a block's partials P[0..3] and P[4..7] are two int32x4; even
 * blocks go to the pair's lanes 0-7, odd blocks to lanes 8-15, each added
 * with one fused multiply-add by the block's scale product (vfmaq_n_f32),
 * the order of kernels_impl.h.
 */
#include "kernels_impl.h"

#if QTTS_ISA_ARM64
#include <arm_neon.h>

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

/* P[0..3] (from 16 codes w, x) of half a block. */
INLINE int32x4_t dot_i8(int8x16_t w, int8x16_t x) {
#ifdef QTTS_NEON_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), w, x);
#else
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    const int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(w), vget_high_s8(x)));
    return vpaddq_s32(lo, hi);
#endif
}

INLINE void tile_quant(const qtts_mm_job *j, int r0, int t, const int RW, const int RX,
                       const bool q4) {
    const int C = j->W->cols, R = j->W->rows, nb = C / QTTS_QK;
    const size_t rb = qtts_mat_row_bytes(j->W->dtype, C);
    const size_t bb = q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
    const uint8_t *w[4];
    const int8_t *xq[2];
    const float *xd[2];
    float32x4_t acc[2][4][4];   /* [x row][W row][lanes 0-3, 4-7, 8-11, 12-15] */
#pragma GCC unroll 4
    for (int r = 0; r < RW; r++) w[r] = (const uint8_t *)j->W->data + (size_t)(r0 + r) * rb;
#pragma GCC unroll 2
    for (int p = 0; p < RX; p++) {
        xq[p] = j->xq + (size_t)(t + p) * C;
        xd[p] = j->xd + (size_t)(t + p) * nb;
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[p][r][q] = vdupq_n_f32(0.0f);
    }
    for (int b = 0; b < nb; b++) {
        const int h = 2 * (b & 1);
        int8x16_t xv[2][2];
#pragma GCC unroll 2
        for (int p = 0; p < RX; p++) {
            xv[p][0] = vld1q_s8(xq[p] + b * QTTS_QK);
            xv[p][1] = vld1q_s8(xq[p] + b * QTTS_QK + 16);
        }
#pragma GCC unroll 4
        for (int r = 0; r < RW; r++) {
            const uint8_t *blk = w[r] + (size_t)b * bb;
            if (t == 0) prefetch(blk + RW * rb);
            __fp16 hd;
            __builtin_memcpy(&hd, blk, sizeof hd);
            const float dw = (float)hd;
            int8x16_t lo, hi;
            if (q4) {
                const uint8x16_t q = vld1q_u8(blk + 2);
                lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))), vdupq_n_s8(8));
                hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
            } else {
                lo = vld1q_s8((const int8_t *)blk + 2);
                hi = vld1q_s8((const int8_t *)blk + 18);
            }
#pragma GCC unroll 2
            for (int p = 0; p < RX; p++) {
                const float s = dw * xd[p][b];
                const float32x4_t f0 = vcvtq_f32_s32(dot_i8(lo, xv[p][0]));
                const float32x4_t f1 = vcvtq_f32_s32(dot_i8(hi, xv[p][1]));
                acc[p][r][h] = vfmaq_n_f32(acc[p][r][h], f0, s);
                acc[p][r][h + 1] = vfmaq_n_f32(acc[p][r][h + 1], f1, s);
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
};

#endif
