/*
 * attn_impl.h - the two vector loops of attention (the scores q·k_j and
 * the output sum_j p_j v_j), written once with GCC vector types and
 * included by each ISA file, which compiles them for its own registers
 * (kernels_impl.h: attn_scores / attn_out).
 *
 * Both keep the scalar code's order exactly, so every path, the CUDA
 * kernels included (ops_llm.cu), gives the same bits:
 *   - a score is qtts_dot_f32(q, k_j, d): 8 lanes, lane l sums q[i]*k[i]
 *     for i = l mod 8 with a separate multiply and add (a partial last
 *     group counts as zeros, which add nothing: a lane that starts at +0
 *     never holds -0), folded ((0+4)+(1+5))+((2+6)+(3+7)), then times the
 *     scale;
 *   - out[i] = sum_j p[j] * v_j[i] for j = 0, 1, ... from +0, a multiply
 *     then an add per term: each element is its own chain, so computing
 *     16 of them per instruction changes nothing.
 * The compiler may not fuse the multiplies and adds: the build passes
 * -ffp-contract=off.
 */
#ifndef QTTS_ATTN_IMPL_H
#define QTTS_ATTN_IMPL_H

#include <string.h>

typedef float qtts_v8f __attribute__((vector_size(32), aligned(4)));
typedef float qtts_v16f __attribute__((vector_size(64), aligned(4)));

static inline float attn_fold8(qtts_v8f a) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* 8 values from p, zeros past n (n < 8) */
static inline qtts_v8f attn_load8(const float *p, int n) {
    qtts_v8f v = {0};
    if (n >= 8) memcpy(&v, p, sizeof v);
    else memcpy(&v, p, sizeof(float) * (size_t)n);
    return v;
}

static void attn_scores_v(float *scores, const float *q, const float *k, size_t ldk, int ctx,
                          int d, float scale) {
    int j = 0;
    for (; j + 4 <= ctx; j += 4) {   /* four positions at once: independent chains */
        qtts_v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        const float *k0 = k + (size_t)j * ldk;
        for (int i = 0; i < d; i += 8) {
            const qtts_v8f qv = attn_load8(q + i, d - i);
            a0 = a0 + qv * attn_load8(k0 + i, d - i);
            a1 = a1 + qv * attn_load8(k0 + ldk + i, d - i);
            a2 = a2 + qv * attn_load8(k0 + 2 * ldk + i, d - i);
            a3 = a3 + qv * attn_load8(k0 + 3 * ldk + i, d - i);
        }
        scores[j] = attn_fold8(a0) * scale;
        scores[j + 1] = attn_fold8(a1) * scale;
        scores[j + 2] = attn_fold8(a2) * scale;
        scores[j + 3] = attn_fold8(a3) * scale;
    }
    for (; j < ctx; j++) {
        qtts_v8f a = {0};
        for (int i = 0; i < d; i += 8) a = a + attn_load8(q + i, d - i) * attn_load8(k + (size_t)j * ldk + i, d - i);
        scores[j] = attn_fold8(a) * scale;
    }
}

static void attn_out_v(float *out, const float *p, const float *v, size_t ldv, int ctx, int d) {
    int i = 0;
    for (; i + 64 <= d; i += 64) {   /* 64 outputs held in registers over all j */
        qtts_v16f o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0};
        for (int j = 0; j < ctx; j++) {
            const float *vj = v + (size_t)j * ldv + i;
            qtts_v16f w0, w1, w2, w3;
            memcpy(&w0, vj, sizeof w0);
            memcpy(&w1, vj + 16, sizeof w1);
            memcpy(&w2, vj + 32, sizeof w2);
            memcpy(&w3, vj + 48, sizeof w3);
            const float pj = p[j];
            o0 = o0 + pj * w0;
            o1 = o1 + pj * w1;
            o2 = o2 + pj * w2;
            o3 = o3 + pj * w3;
        }
        memcpy(out + i, &o0, sizeof o0);
        memcpy(out + i + 16, &o1, sizeof o1);
        memcpy(out + i + 32, &o2, sizeof o2);
        memcpy(out + i + 48, &o3, sizeof o3);
    }
    for (; i < d; i++) {
        float o = 0.0f;
        for (int j = 0; j < ctx; j++) o += p[j] * v[(size_t)j * ldv + i];
        out[i] = o;
    }
}

#endif
