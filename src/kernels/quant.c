/*
 * quant.c - reference quantize/dequantize for the formats of quant.h, and
 * load-time quantization of whole matrices (qtts_mat_quantize).
 *
 * Quantization runs once per weight at load, so it is plain scalar C and
 * the definition of the formats' rounding; the quantized dot products live
 * with the other row kernels (kernels_ref.c and the ISA files).
 *
 * Both quantizers round the block scale to binary16 first and derive the
 * codes from the rounded scale, so each code is the best one for the scale
 * that is actually stored.
 */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "../base/thread.h"
#include "kernels.h"

#define HALF_MAX 65504.0f

qtts_half qtts_f32_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (qtts_half)(sign | 0x7e00u);        /* NaN */
    if (ax >= 0x477ff000u) return (qtts_half)(sign | 0x7c00u);       /* >= 65520: inf */
    if (ax < 0x38800000u) {                                          /* < 2^-14: subnormal */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (qtts_half)(sign | (uint32_t)nearbyintf(a * 16777216.0f)); /* units of 2^-24 */
    }
    uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax >> 13) & 0x3ffu));
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;          /* carry may bump the exponent */
    return (qtts_half)(sign | h);
}

float qtts_half_to_f32(qtts_half h) { return qtts_f16_to_f32(h); }

/* Round half to even for |v| <= 2^22 without a libm call: adding 1.5 * 2^23
 * leaves no fraction bits, so the addition rounds (in the default mode),
 * and the subtraction is exact. */
static inline float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* Stores half(d) (clamped to the finite range) into the block and returns
 * the rounded value. */
static float put_scale(uint8_t *blk, float d) {
    if (fabsf(d) > HALF_MAX) d = copysignf(HALF_MAX, d);
    qtts_half h = qtts_f32_to_half(d);
    memcpy(blk, &h, sizeof h);
    return qtts_half_to_f32(h);
}

void qtts_quantize_row_q8_0(const float *x, void *dst, int cols) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const float *xb = x + b * QTTS_QK;
        uint8_t *blk = (uint8_t *)dst + b * sizeof(qtts_block_q8_0);
        int8_t *qs = (int8_t *)(blk + offsetof(qtts_block_q8_0, qs));
        float amax = 0.0f;
        for (int i = 0; i < QTTS_QK; i++) {
            const float a = fabsf(xb[i]);
            amax = a > amax ? a : amax;
        }
        const float d = put_scale(blk, amax / 127.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < QTTS_QK; i++) {
            float v = xb[i] * id;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v == v ? v : 0.0f;   /* NaN -> 0 */
            qs[i] = (int8_t)round_even(v);
        }
    }
}

void qtts_quantize_row_q4_0(const float *x, void *dst, int cols) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const float *xb = x + b * QTTS_QK;
        uint8_t *blk = (uint8_t *)dst + b * sizeof(qtts_block_q4_0);
        uint8_t *qs = blk + offsetof(qtts_block_q4_0, qs);
        float m = 0.0f;
        for (int i = 0; i < QTTS_QK; i++)
            if (fabsf(xb[i]) > fabsf(m)) m = xb[i];
        const float d = put_scale(blk, m / -8.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < QTTS_QK / 2; i++) {
            int c[2];
            for (int h = 0; h < 2; h++) {   /* floor(x/d + 8.5) in [0, 15]; NaN -> 0 */
                const float v = xb[i + 16 * h] * id + 8.5f;
                c[h] = !(v >= 0.0f) ? 0 : v >= 15.0f ? 15 : (int)v;
            }
            qs[i] = (uint8_t)(c[0] | (c[1] << 4));
        }
    }
}

void qtts_dequantize_row_q8_0(const void *src, float *y, int cols) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const uint8_t *blk = (const uint8_t *)src + b * sizeof(qtts_block_q8_0);
        const int8_t *qs = (const int8_t *)(blk + offsetof(qtts_block_q8_0, qs));
        qtts_half h;
        memcpy(&h, blk, sizeof h);
        const float d = qtts_half_to_f32(h);
        for (int i = 0; i < QTTS_QK; i++) y[b * QTTS_QK + i] = d * qs[i];
    }
}

void qtts_dequantize_row_q4_0(const void *src, float *y, int cols) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const uint8_t *blk = (const uint8_t *)src + b * sizeof(qtts_block_q4_0);
        const uint8_t *qs = blk + offsetof(qtts_block_q4_0, qs);
        qtts_half h;
        memcpy(&h, blk, sizeof h);
        const float d = qtts_half_to_f32(h);
        for (int i = 0; i < QTTS_QK / 2; i++) {
            y[b * QTTS_QK + i] = d * (float)((qs[i] & 15) - 8);
            y[b * QTTS_QK + i + 16] = d * (float)((qs[i] >> 4) - 8);
        }
    }
}

/* ==== whole matrices ===================================================== */

size_t qtts_mat_row_bytes(qtts_dtype dt, int cols) {
    switch (dt) {
    case QTTS_DT_F32: return (size_t)cols * 4;
    case QTTS_DT_BF16: return (size_t)cols * 2;
    case QTTS_DT_Q8_0: return (size_t)(cols / QTTS_QK) * sizeof(qtts_block_q8_0);
    case QTTS_DT_Q4_0: return (size_t)(cols / QTTS_QK) * sizeof(qtts_block_q4_0);
    default: QTTS_ASSERT(!"qtts_mat_row_bytes: not a matrix dtype");
    }
    return 0;
}

typedef struct {
    const qtts_mat *src;
    qtts_mat *dst;
    int rows_per_task;
    bool nomem;
} quantize_job;

static void quantize_task(void *ctx, int task) {
    quantize_job *j = ctx;
    const int C = j->src->cols, r0 = task * j->rows_per_task;
    const int r1 = QTTS_MIN(r0 + j->rows_per_task, j->src->rows);
    float *row = qtts_malloc(sizeof(float) * C);
    if (!row) {
        __atomic_store_n(&j->nomem, true, __ATOMIC_RELAXED);
        return;
    }
    const size_t rb = qtts_mat_row_bytes(j->dst->dtype, C);
    for (int r = r0; r < r1; r++) {
        qtts_mat_row(row, j->src, r);
        uint8_t *out = (uint8_t *)j->dst->data + (size_t)r * rb;
        if (j->dst->dtype == QTTS_DT_Q8_0) qtts_quantize_row_q8_0(row, out, C);
        else qtts_quantize_row_q4_0(row, out, C);
    }
    qtts_free(row);
}

qtts_status qtts_mat_quantize(const qtts_mat *src, qtts_dtype q, qtts_mat *dst, qtts_err *err) {
    memset(dst, 0, sizeof *dst);
    if (q != QTTS_DT_Q8_0 && q != QTTS_DT_Q4_0)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: target dtype must be Q8_0 or Q4_0");
    if (src->dtype != QTTS_DT_F32 && src->dtype != QTTS_DT_BF16)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: source must be F32 or BF16");
    if (src->rows <= 0 || src->cols <= 0 || src->cols % QTTS_QK)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "quantize: [%d, %d] matrix: columns must be a positive multiple of %d",
                         src->rows, src->cols, QTTS_QK);
    uint64_t bytes;
    if (!qtts_mul_ok((uint64_t)src->rows, qtts_mat_row_bytes(q, src->cols), &bytes) ||
        bytes > SIZE_MAX)
        return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: matrix too large");
    qtts_mat m = {qtts_aligned_alloc((size_t)bytes), q, src->rows, src->cols};
    if (!m.data) return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: out of memory");
    quantize_job j = {src, &m, 64, false};
    qtts_parallel_for((src->rows + j.rows_per_task - 1) / j.rows_per_task, quantize_task, &j);
    if (j.nomem) {
        qtts_mat_free(&m);
        return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: out of memory");
    }
    *dst = m;
    return QTTS_OK;
}

void qtts_mat_free(qtts_mat *m) {
    if (!m) return;
    qtts_free((void *)m->data);
    memset(m, 0, sizeof *m);
}
