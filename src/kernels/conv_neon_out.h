/*
 * conv_neon_out.h - the end of both NEON conv tiles (conv_neon.c fp32,
 * conv_neonbf16.c bf16): the 8 x 3 accumulator vectors to the tile's acc,
 * then, on the last K block, y = acc + bias (+ y when accumulating) for the
 * needed rows and columns, in scalar code (a few outputs per tile; the
 * same add as the scalar table). Included only by AArch64 files.
 */
#ifndef QTTS_CONV_NEON_OUT_H
#define QTTS_CONV_NEON_OUT_H

#include <arm_neon.h>

#include "conv_impl.h"

#define QTTS_NEON_NR 12   /* tile columns: 3 float32x4 */

static inline __attribute__((always_inline)) void qtts_neon_tile_out(const qtts_conv_tile *t,
                                                                     float32x4_t a[8][3]) {
    const int NR = QTTS_NEON_NR;
    float *acc = t->acc;
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++)
#pragma GCC unroll 3
        for (int v = 0; v < 3; v++) vst1q_f32(acc + r * NR + 4 * v, a[r][v]);
    if (!t->y) return;
    for (int r = 0; r < t->rows; r++) {
        float *yr = t->y + (size_t)r * t->ldy;
        const float b = t->bias ? t->bias[r] : 0.0f;
        for (int j = 0; j < t->cols; j++) {
            const float v = acc[r * NR + j] + b;
            yr[j] = t->accumulate ? yr[j] + v : v;
        }
    }
}

#endif
