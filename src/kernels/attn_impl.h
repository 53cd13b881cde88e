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
 *     16 of them per instruction changes nothing. With `acc` the chains
 *     start from out's values instead of +0, so a context cut into pieces
 *     (the talker's chunked cache) gives the bits of one call over all.
 * The compiler may not fuse the multiplies and adds: the build passes
 * -ffp-contract=off.
 *
 * K and V are fp32 or bf16 (a bf16 KV cache, kernels.h): bf16 values are
 * widened exactly as they are loaded, so a bf16 call gives the bits of the
 * fp32 call on the widened cache. Each loop is written once over a
 * `const bool bf16` that every caller passes as a constant.
 */
#ifndef QTTS_ATTN_IMPL_H
#define QTTS_ATTN_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef float qtts_v8f __attribute__((vector_size(32), aligned(4)));
typedef float qtts_v16f __attribute__((vector_size(64), aligned(4)));
typedef uint16_t qtts_v8h __attribute__((vector_size(16), aligned(2)));
typedef uint16_t qtts_v16h __attribute__((vector_size(32), aligned(2)));
typedef uint32_t qtts_v8u __attribute__((vector_size(32)));
typedef uint32_t qtts_v16u __attribute__((vector_size(64)));

#define ATTN_INLINE static inline __attribute__((always_inline))

/* The address of element i of a K/V cache (fp32 or bf16). */
ATTN_INLINE const void *attn_at(const void *p, size_t i, const bool bf16) {
    return bf16 ? (const void *)((const uint16_t *)p + i) : (const void *)((const float *)p + i);
}

/* Element i as a float (bf16: its bits shifted up, which is exact). */
ATTN_INLINE float attn_get(const void *p, size_t i, const bool bf16) {
    if (!bf16) return ((const float *)p)[i];
    const uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float attn_fold8(qtts_v8f a) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* attn_fold8 of four sums at once, the same association in every lane:
 * the 128-bit halves added (x0+x4 .. x3+x7), then two horizontal adds. */
ATTN_INLINE void attn_fold8x4(float *r, qtts_v8f a, qtts_v8f b, qtts_v8f c, qtts_v8f d) {
#if defined(__AVX2__)
    const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps((__m256)a, (__m256)b, 0x20),
                                    _mm256_permute2f128_ps((__m256)a, (__m256)b, 0x31));
    const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps((__m256)c, (__m256)d, 0x20),
                                    _mm256_permute2f128_ps((__m256)c, (__m256)d, 0x31));
    const __m256 h1 = _mm256_hadd_ps(ab, cd);   /* a01 a23 c01 c23 | b01 b23 d01 d23 */
    const __m256 h2 = _mm256_hadd_ps(h1, h1);   /* a c a c | b d b d */
    r[0] = h2[0];
    r[1] = h2[4];
    r[2] = h2[1];
    r[3] = h2[5];
#else
    r[0] = attn_fold8(a);
    r[1] = attn_fold8(b);
    r[2] = attn_fold8(c);
    r[3] = attn_fold8(d);
#endif
}

/* 8 values from p, zeros past n (n < 8) */
static inline qtts_v8f attn_load8(const float *p, int n) {
#if defined(__AVX2__)
    /* GCC 12 builds the vector below in memory from two 16-byte copies
     * and reloads it whole, a store-forwarding stall per load */
    if (n >= 8) return (qtts_v8f)_mm256_loadu_ps(p);
#endif
    qtts_v8f v = {0};
    if (n >= 8) memcpy(&v, p, sizeof v);
    else memcpy(&v, p, sizeof(float) * (size_t)n);
    return v;
}

/* attn_load8 of a K row (fp32 or bf16) from element i. */
ATTN_INLINE qtts_v8f attn_load8kv(const void *p, size_t i, int n, const bool bf16) {
    if (!bf16) return attn_load8((const float *)p + i, n);
#if defined(__AVX2__)
    /* GCC 12 splits the generic widening below into halves and inserts
     * (~5 instructions per 8 values); VPMOVZXWD + VPSLLD is the same
     * exact widening in two. */
    if (n >= 8)
        return (qtts_v8f)_mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))), 16));
#endif
    qtts_v8h h = {0};
    if (n >= 8) memcpy(&h, (const uint16_t *)p + i, sizeof h);
    else memcpy(&h, (const uint16_t *)p + i, sizeof(uint16_t) * (size_t)n);
    return (qtts_v8f)(__builtin_convertvector(h, qtts_v8u) << 16);
}

/* *v = 16 values of a V row (fp32 or bf16) from element i (an out
 * parameter: a 64-byte vector return is an ABI warning without AVX-512). */
ATTN_INLINE void attn_load16kv(qtts_v16f *v, const void *p, size_t i, const bool bf16) {
    if (!bf16) {
        memcpy(v, (const float *)p + i, sizeof *v);
        return;
    }
#if defined(__AVX512F__)
    *v = (qtts_v16f)_mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))), 16));
#else
    qtts_v16h h;
    memcpy(&h, (const uint16_t *)p + i, sizeof h);
    *v = (qtts_v16f)(__builtin_convertvector(h, qtts_v16u) << 16);
#endif
}

/* Rows of K or V prefetched ahead of the ones being read, in two steps as
 * the matmuls' weights: to L2 ATTN_PF_FAR rows ahead (16 KB of 128-wide
 * heads), then to L1 ATTN_PF_NEAR rows ahead (2 KB; both in
 * kernels_impl.h). A
 * long context's cache (28 layers x 8 heads x 256 B per position, K and
 * V, in bf16: 57 MB at 500 positions) streams from DRAM every step, and
 * the hardware prefetchers alone ramp up at every 4 KB page. A single L1
 * prefetch 8 KB ahead held the core's few L1 miss buffers for a whole
 * DRAM round trip: one thread read a cold layer's K/V (8 heads, 430
 * positions) at ~10 GB/s that way and at ~14 GB/s with the two steps, and
 * at 1000-1060 positions the talker step took 0.973 of the time
 * (`ab_pairs`, 0.6B int4; within the noise at 23-123 positions, where a
 * head's rows are read before any prefetch could land).
 * The prefetch runs on past a call's last row into the rows its caller
 * names as read next (kernels.h: next): the talker's cache comes in
 * chunks of 128 positions, one call each, and K's last chunk is followed
 * by V's first. Stopping at each call's end left the first 64 rows of
 * every chunk, and of V, without a software prefetch: carried across, the
 * talker step took 0.930 of the time at 1000-1060 positions (talker + code
 * predictor 0.956), 0.953 at 400-460 and 0.98 at 23-123 (`ab_pairs` on an
 * AMD EPYC (Zen 4) host, 0.6B int4, 6-8 rounds each). */

/* The lines of row j of d elements, to L1 (l1) or to L2: row j of the
 * call's ctx rows at p, and past them row j - ctx of the next_rows rows at
 * next (the next piece of a chunked cache, or V after K: kernels.h), so
 * the two-step prefetch runs on across the end of a call. Rows past both
 * are not touched. */
ATTN_INLINE void attn_prefetch_row(const void *p, size_t ld, int ctx, const void *next,
                                   int next_rows, int j, int d, const bool bf16, const bool l1) {
    const void *r;
    if (j < ctx) r = attn_at(p, (size_t)j * ld, bf16);
    else if (j - ctx < next_rows) r = attn_at(next, (size_t)(j - ctx) * ld, bf16);
    else return;
    const size_t bytes = (size_t)d * (bf16 ? 2 : 4);
    if (l1)
        for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch((const char *)r + i, 0, 3);
    else
        for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch((const char *)r + i, 0, 2);
}

/* One block of four positions (k0: the first one's row) against one or
 * two heads: s[h * lds + r] for the heads q + h * d. Each sum is its own
 * variable: GCC keeps these eight in registers, where an array of them
 * lands on the stack and halves the speed. */
ATTN_INLINE void attn_scores4(float *s, size_t lds, const float *q, const int nh, const void *k0,
                              size_t ldk, int d, float scale, const bool bf16) {
    qtts_v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
    for (int i = 0; i < d; i += 8) {
        const qtts_v8f k_0 = attn_load8kv(k0, (size_t)i, d - i, bf16);
        const qtts_v8f k_1 = attn_load8kv(k0, ldk + i, d - i, bf16);
        const qtts_v8f k_2 = attn_load8kv(k0, 2 * ldk + i, d - i, bf16);
        const qtts_v8f k_3 = attn_load8kv(k0, 3 * ldk + i, d - i, bf16);
        const qtts_v8f qa = attn_load8(q + i, d - i);
        a0 = a0 + qa * k_0;
        a1 = a1 + qa * k_1;
        a2 = a2 + qa * k_2;
        a3 = a3 + qa * k_3;
        if (nh == 2) {
            const qtts_v8f qb = attn_load8(q + d + i, d - i);
            b0 = b0 + qb * k_0;
            b1 = b1 + qb * k_1;
            b2 = b2 + qb * k_2;
            b3 = b3 + qb * k_3;
        }
    }
    float f[4];
    attn_fold8x4(f, a0, a1, a2, a3);
    for (int r = 0; r < 4; r++) s[r] = f[r] * scale;
    if (nh == 2) {
        attn_fold8x4(f, b0, b1, b2, b3);
        for (int r = 0; r < 4; r++) s[lds + r] = f[r] * scale;
    }
}

#if defined(__AVX512F__)
/* Elements i..i+7 of rows r and r + 1 (r: the row at k0) in one 16-lane
 * vector, row r in the low half. */
ATTN_INLINE qtts_v16f attn_load8x2kv(const void *k0, size_t ldk, size_t i, const bool bf16) {
    if (bf16) {
        const uint16_t *p = (const uint16_t *)k0 + i;
        const __m256i h = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
            _mm_loadu_si128((const __m128i *)(p + ldk)), 1);
        return (qtts_v16f)_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    const float *p = (const float *)k0 + i;
    return (qtts_v16f)_mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(p))),
        _mm256_castps_pd(_mm256_loadu_ps(p + ldk)), 1));
}

/* 8 values of q in both halves. */
ATTN_INLINE qtts_v16f attn_q8x2(const float *q) {
    return (qtts_v16f)_mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(q))));
}

/* The low and the high 8 lanes. */
ATTN_INLINE qtts_v8f attn_lo8(qtts_v16f v) {
    return (qtts_v8f)_mm512_castps512_ps256((__m512)v);
}

ATTN_INLINE qtts_v8f attn_hi8(qtts_v16f v) {
    return (qtts_v8f)_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd((__m512)v), 1));
}

/* attn_scores4 for d a multiple of 8, two positions per 16-lane vector:
 * each half holds one position's eight lane sums, the same chains as the
 * 8-lane code, at half the vector operations. */
ATTN_INLINE void attn_scores4_x2(float *s, size_t lds, const float *q, const int nh,
                                 const void *k0, size_t ldk, int d, float scale, const bool bf16) {
    qtts_v16f a01 = {0}, a23 = {0}, b01 = {0}, b23 = {0};
    const void *k2 = attn_at(k0, 2 * ldk, bf16);
    for (int i = 0; i < d; i += 8) {
        const qtts_v16f k01 = attn_load8x2kv(k0, ldk, (size_t)i, bf16);
        const qtts_v16f k23 = attn_load8x2kv(k2, ldk, (size_t)i, bf16);
        const qtts_v16f qa = attn_q8x2(q + i);
        a01 = a01 + qa * k01;
        a23 = a23 + qa * k23;
        if (nh == 2) {
            const qtts_v16f qb = attn_q8x2(q + d + i);
            b01 = b01 + qb * k01;
            b23 = b23 + qb * k23;
        }
    }
    float f[4];
    attn_fold8x4(f, attn_lo8(a01), attn_hi8(a01), attn_lo8(a23), attn_hi8(a23));
    for (int r = 0; r < 4; r++) s[r] = f[r] * scale;
    if (nh == 2) {
        attn_fold8x4(f, attn_lo8(b01), attn_hi8(b01), attn_lo8(b23), attn_hi8(b23));
        for (int r = 0; r < 4; r++) s[lds + r] = f[r] * scale;
    }
}
#endif

/* scores[h * lds + j] for nh heads sharing K: each K row is read once for
 * two heads at a time (grouped-query attention). */
ATTN_INLINE void attn_scores_t(float *scores, size_t lds, const float *q, int nh, const void *k,
                               size_t ldk, int ctx, int d, float scale, const void *next,
                               int next_rows, const bool bf16) {
    const int near = ATTN_PF_NEAR(bf16), far = ATTN_PF_FAR(bf16);
    int j = 0;
    for (; j + 4 <= ctx; j += 4) {   /* four positions at once: independent chains */
        const void *k0 = attn_at(k, (size_t)j * ldk, bf16);
        for (int r = 0; r < 4; r++)
            attn_prefetch_row(k, ldk, ctx, next, next_rows, j + near + r, d, bf16, true);
        for (int r = 0; r < 4; r++)
            attn_prefetch_row(k, ldk, ctx, next, next_rows, j + far + r, d, bf16, false);
        int h = 0;
#if defined(__AVX512F__)
        if (d % 8 == 0) {
            for (; h + 2 <= nh; h += 2)
                attn_scores4_x2(scores + h * lds + j, lds, q + (size_t)h * d, 2, k0, ldk, d, scale,
                                bf16);
            if (h < nh)
                attn_scores4_x2(scores + h * lds + j, lds, q + (size_t)h * d, 1, k0, ldk, d, scale,
                                bf16);
            continue;
        }
#endif
        for (; h + 2 <= nh; h += 2)   /* constant head counts: the sums stay in registers */
            attn_scores4(scores + h * lds + j, lds, q + (size_t)h * d, 2, k0, ldk, d, scale, bf16);
        if (h < nh)
            attn_scores4(scores + h * lds + j, lds, q + (size_t)h * d, 1, k0, ldk, d, scale, bf16);
    }
    for (; j < ctx; j++)
        for (int h = 0; h < nh; h++) {
            qtts_v8f a = {0};
            for (int i = 0; i < d; i += 8)
                a = a + attn_load8(q + (size_t)h * d + i, d - i) *
                            attn_load8kv(k, (size_t)j * ldk + i, d - i, bf16);
            scores[h * lds + j] = attn_fold8(a) * scale;
        }
}

static void attn_scores_v(float *scores, size_t lds, const float *q, int nh, const float *k,
                          size_t ldk, int ctx, int d, float scale, const void *next,
                          int next_rows) {
    attn_scores_t(scores, lds, q, nh, k, ldk, ctx, d, scale, next, next_rows, false);
}

static void attn_scores_bf16_v(float *scores, size_t lds, const float *q, int nh,
                               const uint16_t *k, size_t ldk, int ctx, int d, float scale,
                               const void *next, int next_rows) {
    attn_scores_t(scores, lds, q, nh, k, ldk, ctx, d, scale, next, next_rows, true);
}

/* out[h * d + i] for nh heads sharing V: 64 outputs at a time held in
 * registers over every j, for two heads at once where the registers allow
 * (AVX-512: 8 accumulators of 16 lanes; each V row is then read once for
 * both, and 8 independent chains hide the add latency that bounds 4), else
 * one. The first pass over the rows prefetches them ahead. */
#if defined(__AVX512F__)
#define ATTN_OUT_PAIR 1
#else
#define ATTN_OUT_PAIR 0
#endif

ATTN_INLINE void attn_out64(float *o, const float *p, size_t ldp, const int nh, const void *v,
                            size_t ldv, int ctx, int d, bool pf, const void *next, int next_rows,
                            bool acc, const bool bf16) {
    const int near = ATTN_PF_NEAR(bf16), far = ATTN_PF_FAR(bf16);
    qtts_v16f o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0}, u0 = {0}, u1 = {0}, u2 = {0}, u3 = {0};
    if (acc) {
        memcpy(&o0, o, sizeof o0);
        memcpy(&o1, o + 16, sizeof o1);
        memcpy(&o2, o + 32, sizeof o2);
        memcpy(&o3, o + 48, sizeof o3);
        if (nh == 2) {
            memcpy(&u0, o + d, sizeof u0);
            memcpy(&u1, o + d + 16, sizeof u1);
            memcpy(&u2, o + d + 32, sizeof u2);
            memcpy(&u3, o + d + 48, sizeof u3);
        }
    }
    for (int j = 0; j < ctx; j++) {
        const void *vj = attn_at(v, (size_t)j * ldv, bf16);
        if (pf) {
            attn_prefetch_row(v, ldv, ctx, next, next_rows, j + near, d, bf16, true);
            attn_prefetch_row(v, ldv, ctx, next, next_rows, j + far, d, bf16, false);
        }
        qtts_v16f w0, w1, w2, w3;
        attn_load16kv(&w0, vj, 0, bf16);
        attn_load16kv(&w1, vj, 16, bf16);
        attn_load16kv(&w2, vj, 32, bf16);
        attn_load16kv(&w3, vj, 48, bf16);
        const float pj = p[j];
        o0 = o0 + pj * w0;
        o1 = o1 + pj * w1;
        o2 = o2 + pj * w2;
        o3 = o3 + pj * w3;
        if (nh == 2) {
            const float qj = p[ldp + j];
            u0 = u0 + qj * w0;
            u1 = u1 + qj * w1;
            u2 = u2 + qj * w2;
            u3 = u3 + qj * w3;
        }
    }
    memcpy(o, &o0, sizeof o0);
    memcpy(o + 16, &o1, sizeof o1);
    memcpy(o + 32, &o2, sizeof o2);
    memcpy(o + 48, &o3, sizeof o3);
    if (nh == 2) {
        memcpy(o + d, &u0, sizeof u0);
        memcpy(o + d + 16, &u1, sizeof u1);
        memcpy(o + d + 32, &u2, sizeof u2);
        memcpy(o + d + 48, &u3, sizeof u3);
    }
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* attn_out64 for one head in 8-lane vectors: eight sums, a loaded V
 * vector and p_j fit the 16 ymm registers, where attn_out64's 16-lane
 * vectors (two ymm each: 8 sums and 8 loaded values) spilled. The same
 * chains (each output its own), so the same bits. */
ATTN_INLINE void attn_out64_8(float *o, const float *p, const void *v, size_t ldv, int ctx, int d,
                              bool pf, const void *next, int next_rows, bool acc,
                              const bool bf16) {
    const int near = ATTN_PF_NEAR(bf16), far = ATTN_PF_FAR(bf16);
    qtts_v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    if (acc) {
        s0 = attn_load8(o, 8), s1 = attn_load8(o + 8, 8), s2 = attn_load8(o + 16, 8);
        s3 = attn_load8(o + 24, 8), s4 = attn_load8(o + 32, 8), s5 = attn_load8(o + 40, 8);
        s6 = attn_load8(o + 48, 8), s7 = attn_load8(o + 56, 8);
    }
    for (int j = 0; j < ctx; j++) {
        const void *vj = attn_at(v, (size_t)j * ldv, bf16);
        if (pf) {
            attn_prefetch_row(v, ldv, ctx, next, next_rows, j + near, d, bf16, true);
            attn_prefetch_row(v, ldv, ctx, next, next_rows, j + far, d, bf16, false);
        }
        const float pj = p[j];
        s0 = s0 + pj * attn_load8kv(vj, 0, 8, bf16);
        s1 = s1 + pj * attn_load8kv(vj, 8, 8, bf16);
        s2 = s2 + pj * attn_load8kv(vj, 16, 8, bf16);
        s3 = s3 + pj * attn_load8kv(vj, 24, 8, bf16);
        s4 = s4 + pj * attn_load8kv(vj, 32, 8, bf16);
        s5 = s5 + pj * attn_load8kv(vj, 40, 8, bf16);
        s6 = s6 + pj * attn_load8kv(vj, 48, 8, bf16);
        s7 = s7 + pj * attn_load8kv(vj, 56, 8, bf16);
    }
    _mm256_storeu_ps(o, (__m256)s0), _mm256_storeu_ps(o + 8, (__m256)s1);
    _mm256_storeu_ps(o + 16, (__m256)s2), _mm256_storeu_ps(o + 24, (__m256)s3);
    _mm256_storeu_ps(o + 32, (__m256)s4), _mm256_storeu_ps(o + 40, (__m256)s5);
    _mm256_storeu_ps(o + 48, (__m256)s6), _mm256_storeu_ps(o + 56, (__m256)s7);
}
#endif

ATTN_INLINE void attn_out_t(float *out, const float *p, size_t ldp, int nh, const void *v,
                            size_t ldv, int ctx, int d, bool acc, const void *next,
                            int next_rows, const bool bf16) {
    for (int h = 0; h < nh;) {
        const int two = ATTN_OUT_PAIR && h + 2 <= nh;
        const float *ph = p + h * ldp;
        float *oh = out + (size_t)h * d;
        int i = 0;
        for (; i + 64 <= d; i += 64) {
            /* the first pass over the rows prefetches whole rows ahead, and
             * next's first rows as it ends */
            const bool pf = h == 0 && i == 0;
            const void *vi = attn_at(v, (size_t)i, bf16);
#if defined(__AVX2__) && !defined(__AVX512F__)
            attn_out64_8(oh + i, ph, vi, ldv, ctx, d, pf, next, next_rows, acc, bf16);
            (void)two;
#else
            if (two)
                attn_out64(oh + i, ph, ldp, 2, vi, ldv, ctx, d, pf, next, next_rows, acc, bf16);
            else attn_out64(oh + i, ph, ldp, 1, vi, ldv, ctx, d, pf, next, next_rows, acc, bf16);
#endif
        }
        for (int hh = 0; hh < 1 + two; hh++)
            for (int ii = i; ii < d; ii++) {
                float o = acc ? oh[(size_t)hh * d + ii] : 0.0f;
                for (int j = 0; j < ctx; j++)
                    o += ph[hh * ldp + j] * attn_get(v, (size_t)j * ldv + ii, bf16);
                oh[(size_t)hh * d + ii] = o;
            }
        h += 1 + two;
    }
}

static void attn_out_v(float *out, const float *p, size_t ldp, int nh, const float *v,
                       size_t ldv, int ctx, int d, bool acc, const void *next, int next_rows) {
    attn_out_t(out, p, ldp, nh, v, ldv, ctx, d, acc, next, next_rows, false);
}

static void attn_out_bf16_v(float *out, const float *p, size_t ldp, int nh, const uint16_t *v,
                            size_t ldv, int ctx, int d, bool acc, const void *next,
                            int next_rows) {
    attn_out_t(out, p, ldp, nh, v, ldv, ctx, d, acc, next, next_rows, true);
}

#endif
