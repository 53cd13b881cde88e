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

#include <stdbool.h>
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

/* Rows of K or V a position block prefetches ahead of its own: 16 rows
 * (8 KB for 128-wide heads). A long context's cache (28 layers x 8 heads x
 * 512 B per position, K and V: 115 MB at 500 positions) streams from DRAM
 * every step, and the hardware prefetchers alone ramp up at every 4 KB
 * page. */
#define ATTN_PF_ROWS 16

static inline void attn_prefetch_row(const float *r, int d) {
    for (int i = 0; i < d; i += 16) __builtin_prefetch(r + i, 0, 3);
}

/* One block of four positions (k0: the first one's row) against head
 * pairs: s[h * lds] for the nh (1 or 2) heads q + h * d. */
static inline void attn_scores4(float *s, size_t lds, const float *q, int nh, const float *k0,
                                size_t ldk, int d, float scale) {
    qtts_v8f a[2][4] = {{{0}}};
    for (int i = 0; i < d; i += 8) {
        const qtts_v8f k_0 = attn_load8(k0 + i, d - i), k_1 = attn_load8(k0 + ldk + i, d - i);
        const qtts_v8f k_2 = attn_load8(k0 + 2 * ldk + i, d - i);
        const qtts_v8f k_3 = attn_load8(k0 + 3 * ldk + i, d - i);
        for (int h = 0; h < nh; h++) {
            const qtts_v8f qv = attn_load8(q + (size_t)h * d + i, d - i);
            a[h][0] = a[h][0] + qv * k_0;
            a[h][1] = a[h][1] + qv * k_1;
            a[h][2] = a[h][2] + qv * k_2;
            a[h][3] = a[h][3] + qv * k_3;
        }
    }
    for (int h = 0; h < nh; h++)
        for (int r = 0; r < 4; r++) s[h * lds + r] = attn_fold8(a[h][r]) * scale;
}

/* scores[h * lds + j] for nh heads sharing K: each K row is read once for
 * two heads at a time (grouped-query attention). */
static void attn_scores_v(float *scores, size_t lds, const float *q, int nh, const float *k,
                          size_t ldk, int ctx, int d, float scale) {
    int j = 0;
    for (; j + 4 <= ctx; j += 4) {   /* four positions at once: independent chains */
        const float *k0 = k + (size_t)j * ldk;
        for (int r = 0; r < 4 && j + ATTN_PF_ROWS + r < ctx; r++)
            attn_prefetch_row(k0 + (size_t)(ATTN_PF_ROWS + r) * ldk, d);
        for (int h = 0; h < nh; h += 2)
            attn_scores4(scores + h * lds + j, lds, q + (size_t)h * d, nh - h < 2 ? 1 : 2, k0, ldk,
                         d, scale);
    }
    for (; j < ctx; j++)
        for (int h = 0; h < nh; h++) {
            qtts_v8f a = {0};
            for (int i = 0; i < d; i += 8)
                a = a + attn_load8(q + (size_t)h * d + i, d - i) *
                            attn_load8(k + (size_t)j * ldk + i, d - i);
            scores[h * lds + j] = attn_fold8(a) * scale;
        }
}

/* out[h * d + i] for nh heads sharing V, 64 outputs of one head at a time
 * held in registers over every j (the first of a row's 64-column passes
 * prefetches the row ahead). */
static void attn_out_v(float *out, const float *p, size_t ldp, int nh, const float *v,
                       size_t ldv, int ctx, int d) {
    for (int h = 0; h < nh; h++) {
        const float *ph = p + h * ldp;
        float *oh = out + (size_t)h * d;
        int i = 0;
        for (; i + 64 <= d; i += 64) {
            qtts_v16f o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0};
            const bool pf = h == 0 && i == 0;
            for (int j = 0; j < ctx; j++) {
                const float *vj = v + (size_t)j * ldv + i;
                if (pf && j + ATTN_PF_ROWS < ctx) attn_prefetch_row(vj + ATTN_PF_ROWS * ldv, d);
                qtts_v16f w0, w1, w2, w3;
                memcpy(&w0, vj, sizeof w0);
                memcpy(&w1, vj + 16, sizeof w1);
                memcpy(&w2, vj + 32, sizeof w2);
                memcpy(&w3, vj + 48, sizeof w3);
                const float pj = ph[j];
                o0 = o0 + pj * w0;
                o1 = o1 + pj * w1;
                o2 = o2 + pj * w2;
                o3 = o3 + pj * w3;
            }
            memcpy(oh + i, &o0, sizeof o0);
            memcpy(oh + i + 16, &o1, sizeof o1);
            memcpy(oh + i + 32, &o2, sizeof o2);
            memcpy(oh + i + 48, &o3, sizeof o3);
        }
        for (; i < d; i++) {
            float o = 0.0f;
            for (int j = 0; j < ctx; j++) o += ph[j] * v[(size_t)j * ldv + i];
            oh[i] = o;
        }
    }
}

#endif
