/*
 * conv_neonbf16.c - the bf16 conv tile and panel packing (kernels.h, "bf16
 * convolutions"; conv_impl.h, qtts_conv_bf16_isa) on AArch64 with BF16
 * (FEAT_BF16: BFDOT, BFCVTN; built with -march=armv8.2-a+bf16 and chosen
 * only where the kernel reports HWCAP2_BF16).
 *
 * Tile: the NEON fp32 tile's shape (8 rows x 12 columns, 8 x 3 float32x4
 * accumulators); per pair of reduction rows, 3 loads of 4 words (each the
 * two rows' bf16 inputs of a column), the 8 rows' weight words in two
 * vectors, and 24 BFDOT by element, each adding w[2p] x[2p] + w[2p+1]
 * x[2p+1] to 4 columns of one output row.
 *
 * Packing: 4 columns of each row rounded by BFCVTN (to nearest even) and
 * interleaved into words by a zip.
 */
#include "conv_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "conv_neon_out.h"

#define NR QTTS_NEON_NR

static void tile_bf16(const qtts_conv_tile *t) {
    const uint32_t *w = t->wb, *xp = t->xb;
    const float *acc = t->acc;
    float32x4_t a[8][3];
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < 3; v++)
            a[r][v] = t->load ? vld1q_f32(acc + r * NR + 4 * v) : vdupq_n_f32(0.0f);
    const char *wn = t->w_next;
    for (int k = 0; k < t->kc; k++, xp += NR, w += QTTS_CONV_MR) {
        if (wn && !(k & 1)) __builtin_prefetch(wn + (size_t)k * 32);
        const bfloat16x8_t x0 = vreinterpretq_bf16_u32(vld1q_u32(xp)),
                           x1 = vreinterpretq_bf16_u32(vld1q_u32(xp + 4)),
                           x2 = vreinterpretq_bf16_u32(vld1q_u32(xp + 8));
        const bfloat16x8_t w0 = vreinterpretq_bf16_u32(vld1q_u32(w)),
                           w1 = vreinterpretq_bf16_u32(vld1q_u32(w + 4));
#define ROW(r, wv, lane)                                        \
    a[r][0] = vbfdotq_laneq_f32(a[r][0], x0, wv, lane);         \
    a[r][1] = vbfdotq_laneq_f32(a[r][1], x1, wv, lane);         \
    a[r][2] = vbfdotq_laneq_f32(a[r][2], x2, wv, lane)
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

static void pack_pair(uint32_t *dst, const float *a, const float *b, int cols, int nr) {
    int j = 0;
    for (; j + 4 <= cols; j += 4) {
        const uint16x4_t ha = vreinterpret_u16_bf16(vcvt_bf16_f32(vld1q_f32(a + j)));
        const uint16x4_t hb =
            b ? vreinterpret_u16_bf16(vcvt_bf16_f32(vld1q_f32(b + j))) : vdup_n_u16(0);
        vst1q_u16((uint16_t *)(dst + j), vcombine_u16(vzip1_u16(ha, hb), vzip2_u16(ha, hb)));
    }
    if (j < cols) { /* the last 1-3 columns through zero-padded copies */
        float ta[4] = {0}, tb[4] = {0};
        uint32_t out[4];
        memcpy(ta, a + j, sizeof(float) * (size_t)(cols - j));
        if (b) memcpy(tb, b + j, sizeof(float) * (size_t)(cols - j));
        const uint16x4_t ha = vreinterpret_u16_bf16(vcvt_bf16_f32(vld1q_f32(ta)));
        const uint16x4_t hb = vreinterpret_u16_bf16(vcvt_bf16_f32(vld1q_f32(tb)));
        vst1q_u16((uint16_t *)out, vcombine_u16(vzip1_u16(ha, hb), vzip2_u16(ha, hb)));
        memcpy(dst + j, out, sizeof(uint32_t) * (size_t)(cols - j));
        j = cols;
    }
    for (; j < nr; j++) dst[j] = 0;
}

const qtts_conv_bf16_isa qtts_conv_bf16_neon = {"neon-bf16", NR, 256, tile_bf16, pack_pair, NULL};

#endif
