/*
 * conv_neon.c - AArch64 NEON conv tile kernel and SnakeBeta row, in the
 * orders of conv_impl.h; bit-identical to the scalar table.
 *
 * Tile: 8 rows x 12 columns: 8 x 3 float32x4 accumulators, 3 panel
 * vectors and the group's 8 weights of one panel row in two vectors (29
 * of the 32 registers). Per panel row: 5 loads and 24 fused multiply-adds
 * by element (FMLA v.4s, v.4s, v.s[i]), so each output stays one fma
 * chain in increasing kk. Columns past `cols` are computed on the panel's
 * zero padding and never stored; the store of y is scalar (a few outputs
 * per tile, the same add as the scalar table).
 *
 * Few columns (n <= QTTS_CONV_NARROW_MAX): rows in lanes instead, as in
 * conv_narrow_x86.h, with FMLA by a scalar element.
 *
 * Snake: 4 lanes of the polynomial of conv_impl.h with the same fused and
 * unfused operations, the quadrant's parity by a bit select; lanes with
 * |u| > 8192 or non-finite u are redone with libm sinf; the row's tail goes
 * through a zero-padded copy, so every element gets the same operations.
 */
#include "conv_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "conv_neon_out.h"

#define NR QTTS_NEON_NR
#define INLINE static inline __attribute__((always_inline))

static void tile_neon(const qtts_conv_tile *t) {
    const float *w = t->w, *xp = t->xp;
    const float *acc = t->acc;
    float32x4_t a[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < 3; v++)
            a[r][v] = t->load ? vld1q_f32(acc + r * NR + 4 * v) : vdupq_n_f32(0.0f);
    const char *wn = t->w_next;
    for (int k = 0; k < t->kc; k++, xp += NR, w += QTTS_CONV_MR) {
        /* the next group's weights, a line per two panel rows */
        if (wn && !(k & 1)) __builtin_prefetch(wn + (size_t)k * 32);
        const float32x4_t x0 = vld1q_f32(xp), x1 = vld1q_f32(xp + 4), x2 = vld1q_f32(xp + 8);
        const float32x4_t w0 = vld1q_f32(w), w1 = vld1q_f32(w + 4);
#define ROW(r, wv, lane)                                        \
    a[r][0] = vfmaq_laneq_f32(a[r][0], x0, wv, lane);           \
    a[r][1] = vfmaq_laneq_f32(a[r][1], x1, wv, lane);           \
    a[r][2] = vfmaq_laneq_f32(a[r][2], x2, wv, lane)
        ROW(0, w0, 0);
        ROW(1, w0, 1);
        ROW(2, w0, 2);
        ROW(3, w0, 3);
        ROW(4, w1, 0);
        ROW(5, w1, 1);
        ROW(6, w1, 2);
        ROW(7, w1, 3);
#undef ROW
    }
    qtts_neon_tile_out(t, a);
}

/* ==== Few columns (conv_impl.h, qtts_conv_narrow) ======================== */

/* G row groups x C columns, rows in lanes: a group's 8 weights of one
 * reduction row in two vectors, each column's input a scalar operand
 * (FMLA by element), group g, column c one fma chain per lane from +0 in
 * increasing kk. G x C x 2 accumulators stay under 25 of the 32 registers. */
INLINE void narrow_gc(const qtts_conv_narrow *t, int g0, const int G, const int C) {
    const size_t gs = (size_t)t->K * QTTS_CONV_MR;
    const float *w = t->w + (size_t)g0 * gs, *xk = t->xk;
    float32x4_t a[8][8][2];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) a[g][c][0] = a[g][c][1] = vdupq_n_f32(0.0f);
    for (int kk = 0; kk < t->K; kk++, w += QTTS_CONV_MR, xk += C) {
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            const float32x4_t w0 = vld1q_f32(w + g * gs), w1 = vld1q_f32(w + g * gs + 4);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                a[g][c][0] = vfmaq_n_f32(a[g][c][0], w0, xk[c]);
                a[g][c][1] = vfmaq_n_f32(a[g][c][1], w1, xk[c]);
            }
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        float v[8][8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) vst1q_f32(v[c], a[g][c][0]), vst1q_f32(v[c] + 4, a[g][c][1]);
        qtts_narrow_out(t, g0 + g, v, C);
    }
}

#define NARROW_G(C) ((C) == 1 ? 8 : (C) <= 3 ? 4 : (C) == 4 ? 2 : 1)
QTTS_NARROW_ENTRY(narrow_neon, narrow_gc, NARROW_G)

/* ==== SnakeBeta =========================================================== */

#define SET(c) vdupq_n_f32(c)

INLINE float32x4_t snake4(float32x4_t x, float32x4_t ea, float32x4_t ib) {
    const float32x4_t u = vmulq_f32(ea, x);
    const float32x4_t j = vrndnq_f32(vmulq_f32(u, SET(QTTS_SNAKE_2_PI)));
    /* fmaf(-j, P, r) == r - j * P, one rounding: FMLS */
    float32x4_t r = vfmsq_f32(u, j, SET(QTTS_SNAKE_P1));
    r = vfmsq_f32(r, j, SET(QTTS_SNAKE_P2));
    r = vfmsq_f32(r, j, SET(QTTS_SNAKE_P3));
    const float32x4_t z = vmulq_f32(r, r);
    const float32x4_t ps =
        vfmaq_f32(SET(QTTS_SNAKE_S1), vfmaq_f32(SET(QTTS_SNAKE_S2), SET(QTTS_SNAKE_S3), z), z);
    const float32x4_t s = vfmaq_f32(r, vmulq_f32(r, z), ps);
    const float32x4_t pc =
        vfmaq_f32(SET(QTTS_SNAKE_C1), vfmaq_f32(SET(QTTS_SNAKE_C2), SET(QTTS_SNAKE_C3), z), z);
    const float32x4_t c =
        vfmaq_f32(vfmaq_f32(SET(1.0f), SET(-0.5f), z), vmulq_f32(z, z), pc);
    const uint32x4_t odd =
        vtstq_u32(vreinterpretq_u32_s32(vcvtq_s32_f32(j)), vdupq_n_u32(1));
    float32x4_t s2 = vbslq_f32(odd, vmulq_f32(c, c), vmulq_f32(s, s));
    /* not |u| <= limit: NaN included, as in the scalar definition */
    const uint32x4_t big = vmvnq_u32(vcaleq_f32(u, SET(QTTS_SNAKE_LIMIT)));
    if (__builtin_expect(vmaxvq_u32(big) != 0, 0)) {
        float uu[4], ss[4];
        uint32_t bb[4];
        vst1q_f32(uu, u);
        vst1q_f32(ss, s2);
        vst1q_u32(bb, big);
        for (int l = 0; l < 4; l++)
            if (bb[l]) {
                const float sv = sinf(uu[l]);
                ss[l] = sv * sv;
            }
        s2 = vld1q_f32(ss);
    }
    return vfmaq_f32(x, ib, s2);
}

static void snake_neon(float *y, const float *x, float ea_, float ib_, int n) {
    const float32x4_t ea = SET(ea_), ib = SET(ib_);
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, snake4(vld1q_f32(x + i), ea, ib));
    if (i < n) {
        float buf[4] = {0};
        memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));
        vst1q_f32(buf, snake4(vld1q_f32(buf), ea, ib));
        memcpy(y + i, buf, sizeof(float) * (size_t)(n - i));
    }
}

const qtts_conv_isa qtts_conv_isa_neon = {"neon", NR, 256, tile_neon, snake_neon,
                                          narrow_neon, false};

#endif
