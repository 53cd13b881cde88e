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

/* ==== the packed layout (quant.h) ======================================== */

/* Both directions move 4-byte code groups (one lane of a packed vector);
 * Q8_0 groups get their sign bits flipped on the way. */
void qtts_pack_row(const void *plain, void *packed, int cols, int q4) {
    const int nb = cols / QTTS_QK, ng = qtts_packed_groups(cols), K = qtts_packed_vectors(q4);
    const size_t bb = q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
    const uint32_t flip = q4 ? 0u : 0x80808080u;
    uint8_t *codes = packed;
    uint8_t *scales = codes + (size_t)ng * K * 64;
    /* padding blocks: code 0 (Q8_0 stored as 0x80, Q4_0 nibbles 8), scale +0 */
    if (nb % QTTS_PACK_BLOCKS) {
        memset(codes, q4 ? 0x88 : 0x80, (size_t)ng * K * 64);
        memset(scales, 0, (size_t)ng * QTTS_PACK_BLOCKS * 2);
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)plain + (size_t)b * bb;
        uint8_t *lane = codes + 64 * (size_t)K * (b / QTTS_PACK_BLOCKS) + 4 * (b % QTTS_PACK_BLOCKS);
        memcpy(scales + 2 * (size_t)b, blk, 2);
        for (int k = 0; k < K; k++) {
            uint32_t w;
            memcpy(&w, blk + 2 + 4 * k, 4);
            w ^= flip;
            memcpy(lane + 64 * k, &w, 4);
        }
    }
}

void qtts_unpack_block(const void *packed, int cols, int q4, int b, void *blk) {
    const int ng = qtts_packed_groups(cols), K = qtts_packed_vectors(q4);
    const uint32_t flip = q4 ? 0u : 0x80808080u;
    const uint8_t *codes = packed;
    const uint8_t *lane = codes + 64 * (size_t)K * (b / QTTS_PACK_BLOCKS) + 4 * (b % QTTS_PACK_BLOCKS);
    memcpy(blk, codes + (size_t)ng * K * 64 + 2 * (size_t)b, 2);
    for (int k = 0; k < K; k++) {
        uint32_t w;
        memcpy(&w, lane + 64 * k, 4);
        w ^= flip;
        memcpy((uint8_t *)blk + 2 + 4 * k, &w, 4);
    }
}

void qtts_unpack_row(const void *packed, void *plain, int cols, int q4) {
    const size_t bb = q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
    for (int b = 0; b < cols / QTTS_QK; b++)
        qtts_unpack_block(packed, cols, q4, b, (uint8_t *)plain + (size_t)b * bb);
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

/* Rows of src (F32/BF16 to quantize, or plain Q8_0/Q4_0 to pack) into the
 * packed matrix dst, rows_per_task at a time over the pool. */
typedef struct {
    const qtts_mat *src;
    qtts_mat *dst;
    int rows_per_task;
    bool nomem;
} pack_job;

static void pack_task(void *ctx, int task) {
    pack_job *j = ctx;
    const int C = j->src->cols, r0 = task * j->rows_per_task;
    const int r1 = QTTS_MIN(r0 + j->rows_per_task, j->src->rows);
    const bool q4 = j->dst->dtype == QTTS_DT_Q4_0, from_float = j->src->dtype != j->dst->dtype;
    const size_t plain_rb = qtts_mat_row_bytes(j->dst->dtype, C), rb = qtts_mat_stride(j->dst);
    float *row = from_float ? qtts_malloc(sizeof(float) * C) : NULL;
    uint8_t *plain = from_float ? qtts_malloc(plain_rb) : NULL;
    if (from_float && (!row || !plain)) {
        qtts_free(row);
        qtts_free(plain);
        __atomic_store_n(&j->nomem, true, __ATOMIC_RELAXED);
        return;
    }
    for (int r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)j->src->data + (size_t)r * plain_rb;
        if (from_float) {
            qtts_mat_row(row, j->src, r);
            if (q4) qtts_quantize_row_q4_0(row, plain, C);
            else qtts_quantize_row_q8_0(row, plain, C);
            src = plain;
        }
        qtts_pack_row(src, (uint8_t *)j->dst->data + (size_t)r * rb, C, q4);
    }
    qtts_free(row);
    qtts_free(plain);
}

/* *dst = src in format q, packed; what names the operation in messages. */
static qtts_status pack_into(const qtts_mat *src, qtts_dtype q, qtts_mat *dst, const char *what,
                             qtts_err *err) {
    if (src->rows <= 0 || src->cols <= 0 || src->cols % QTTS_QK)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "%s: [%d, %d] matrix: columns must be a positive multiple of %d", what,
                         src->rows, src->cols, QTTS_QK);
    uint64_t bytes;
    if (!qtts_mul_ok((uint64_t)src->rows, qtts_packed_row_bytes(q == QTTS_DT_Q4_0, src->cols),
                     &bytes) ||
        bytes > SIZE_MAX)
        return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: matrix too large");
    qtts_mat m = {.data = qtts_aligned_alloc((size_t)bytes), .dtype = q, .rows = src->rows,
                  .cols = src->cols, .packed = true};
    if (!m.data) return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: out of memory");
    pack_job j = {src, &m, 64, false};
    qtts_parallel_for((src->rows + j.rows_per_task - 1) / j.rows_per_task, pack_task, &j);
    if (j.nomem) {
        qtts_mat_free(&m);
        return qtts_fail(err, QTTS_ERR_NOMEM, "quantize: out of memory");
    }
    *dst = m;
    return QTTS_OK;
}

qtts_status qtts_mat_quantize(const qtts_mat *src, qtts_dtype q, qtts_mat *dst, qtts_err *err) {
    memset(dst, 0, sizeof *dst);
    if (q != QTTS_DT_Q8_0 && q != QTTS_DT_Q4_0)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: target dtype must be Q8_0 or Q4_0");
    if (src->dtype != QTTS_DT_F32 && src->dtype != QTTS_DT_BF16)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: source must be F32 or BF16");
    return pack_into(src, q, dst, "quantize", err);
}

qtts_status qtts_mat_pack(const qtts_mat *src, qtts_mat *dst, qtts_err *err) {
    memset(dst, 0, sizeof *dst);
    if ((src->dtype != QTTS_DT_Q8_0 && src->dtype != QTTS_DT_Q4_0) || src->packed)
        return qtts_fail(err, QTTS_ERR_INVALID, "pack: source must be a plain Q8_0/Q4_0 matrix");
    return pack_into(src, src->dtype, dst, "pack", err);
}

void qtts_mat_unpack_row(const qtts_mat *m, int row, void *plain) {
    QTTS_ASSERT(m->packed && row >= 0 && row < m->rows);
    qtts_unpack_row((const uint8_t *)m->data + (size_t)row * qtts_mat_stride(m), plain, m->cols,
                    m->dtype == QTTS_DT_Q4_0);
}

void qtts_mat_free(qtts_mat *m) {
    if (!m) return;
    qtts_free((void *)m->data);
    memset(m, 0, sizeof *m);
}
