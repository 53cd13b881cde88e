/*
 * kernels_impl.h - the instruction-set layer behind kernels.h. This header
 * and the dispatcher in kernels.c are the only places that know which
 * instruction sets exist.
 *
 * Each ISA file (kernels_ref.c, kernels_avx2.c, kernels_avxvnni.c,
 * kernels_avx512.c, kernels_neon.c, kernels_neondot.c) fills one qtts_isa
 * table of row kernels. The Makefile compiles each file with its own target
 * flags and the rest of the library for the baseline, and kernels.c picks
 * the best table the CPU supports once, at first use. A file whose
 * architecture is not the build target compiles to nothing.
 *
 * ==== Accumulation orders ===============================================
 *
 * Every path computes a row the same way for any n, any row range and any
 * thread, which is what makes batched and threaded runs bit-identical to
 * single-stream ones. Across paths:
 *
 * F32/BF16, scalar reference: 8 fp32 lanes, lane l sums w[i]*x[i] for
 *   i = l mod 8 with a separate multiply and add; the lanes are then added
 *   pairwise ((0+4)+(1+5))+((2+6)+(3+7)); then the bias.
 * F32/BF16, every SIMD path ("the SIMD order"): 16 fp32 lanes, lane l
 *   accumulates w[i]*x[i] for i = l mod 16 in increasing i with a fused
 *   multiply-add; columns past cols count as w = x = 0 (one more fma per
 *   lane of the last, partial group); then the lanes fold in halves:
 *   a[l] += a[l+8], a[l] += a[l+4], a[l] += a[l+2], a[l] += a[l+1];
 *   then the bias. AVX2, AVX-512 and NEON give bit-identical results.
 *   (The reference does not use this order because a scalar fmaf is a
 *   slow library call on CPUs without FMA, where it is the fallback.)
 *   Budget against the reference (both are fp32 sums of the same exact
 *   products, each within (terms per lane + tree depth) units of 2^-24 of
 *   sum|w*x|):
 *     |y_simd - y_ref| <= (cols/16 + cols/8 + 8) * 2^-24 * sum_i |w_i x_i|
 *                         + 2^-23 (|y_ref| + |bias|)   (the bias add).
 *
 * Q8_0/Q4_0, every path including the reference: each row of x is
 *   quantized per 32-element block b (qtts_quantize_act_ref: scale
 *   dx = amax/127, codes round-half-even(x/dx) in [-127, 127]); the
 *   block's integer dot P(b) = sum_{i<32} w[32b+i] * q[32b+i] (signed
 *   codes) is exact; lane b mod 16 = fma((float)P(b), dw(b) * dx(b), lane)
 *   for b = 0, 1, ... in order (the scale product rounded, then one
 *   rounding for the multiply-add; |P| < 2^24, so the conversion is
 *   exact); the 16 lanes fold as above; then the bias. This is the order
 *   of the packed layout (quant.h), where a 32-bit lane accumulates one
 *   block: every path, the CUDA kernel too, is bit-identical to the
 *   reference. The fp32 work per block (the scale product, the convert,
 *   the multiply-add), not the integer dot, bounds these kernels on
 *   AVX-512, so it is done 16 blocks per instruction.
 *   Budget against the f32 reference on the dequantized weights W' (the
 *   activation codes are within dx/2 of x, plus the fp32 rounding of both
 *   sums), with m_i = |w'_i| (|x_i| + dx(b(i))):
 *     |y_q - y_f32(W')| <= sum_i |w'_i| dx(b(i)) (1/2 + 1e-5)
 *                          + (cols/32 + cols/8 + 12) * 2^-24 * sum_i m_i
 *                          + 2^-23 (|y_f32| + |bias|).
 *
 * The weight formats' own error (quantize then dequantize) is stated in
 * quant.h and measured in docs/QUANT.md.
 */
#ifndef QTTS_KERNELS_IMPL_H
#define QTTS_KERNELS_IMPL_H

#include <math.h>

#include "kernels.h"

#if defined(__x86_64__)
#define QTTS_ISA_X86 1
#elif defined(__aarch64__)
#define QTTS_ISA_ARM64 1
#endif

/* Rows [r0, r1) of W against all n rows of x: y[t*rows + r]. Quantized
 * weights (always packed) take x quantized and packed like them
 * (qtts_pack_act): per x row, ng = qtts_packed_groups(cols) groups. */
typedef struct {
    const qtts_mat *W;
    int n;
    const float *x;     /* [n, cols]       F32/BF16 weights */
    const int8_t *xq;   /* [n, ng*512]     Q8_0/Q4_0: codes, byte 64*(8g+k) + 4i + j =
                         *                 code 4k + j of block 16g + i (0 past the end) */
    const float *xd;    /* [n, ng*16]      scale of block 16g + i (0 past the end) */
    const int32_t *xs;  /* [n, ng*16]      sum of block 16g + i's codes (0 past the end) */
    const float *bias;  /* [rows] or NULL */
    float *y;           /* [n, rows] */
} qtts_mm_job;

/* Bytes of one packed x row of cols columns: codes, scales and sums. */
static inline size_t qtts_packed_act_bytes(int cols) {
    return (size_t)qtts_packed_groups(cols) * (512 + 16 * sizeof(float) + 16 * sizeof(int32_t));
}
/* One row's codes q[cols] and scales d[cols/32] (qtts_quantize_act_ref) in
 * the packed order of qtts_mm_job. */
void qtts_pack_act(const int8_t *q, const float *d, int cols, int8_t *xq, float *xd, int32_t *xs);

/* Weight prefetch of the x86 tiles. The kernels walk W in blocks of
 * rows (one contiguous span of nr * stride bytes; the blocks of a matmul
 * follow each other in memory) and reuse each block for every x row in
 * tiles of a few W rows by a few x rows. The hardware prefetchers alone
 * ramp up too late on such 0.5-4 KB streams, so the tiles of a block
 * prefetch the block at least QTTS_PREFETCH_AHEAD bytes ahead (whole
 * blocks: 2 for a 4-row Q8_0 block of 1024 columns, 4 for Q4_0), front to
 * back, each tile its share of the lines in proportion to its share of
 * the block's work, a few lines at each step of its own arithmetic
 * (qtts_prefetch_step in the tile's loops). So the lines are requested at
 * the rate the block consumes them, whatever the number of x rows:
 *  - Issuing a whole tile at once as it starts stalled a Zen 4 core: the
 *    prefetches queue behind its outstanding-miss limit and the
 *    arithmetic waits for them (21% of the Q8_0 kernel's samples sat on
 *    the prefetch loop). Spread, one thread reads DRAM 20% faster there
 *    (Q8_0 decode; AVX2 Q8_0 2.3x, 4-row tiles 1.5x).
 *  - Left to the tiles of the first x rows alone, a prefill's block (16-32
 *    x rows) had its lines requested in the first quarter or less of its
 *    time, the same burst again: 16 x rows read DRAM at 60% of the speed
 *    they compute from cache.
 *  - The same number of tiles ahead lost Q4_0 its lead time, hence a
 *    distance in bytes (6-12 KB measured alike).
 *  - Lines walked row by row instead of front to back read slower (the
 *    float tiles did so; front to back is 23% faster for AVX-512 bf16,
 *    2x for AVX2 bf16).
 *  - The lines go to L2 (PREFETCHT1), not L1: on the Zen 4 a decode frame
 *    of synthetic int8 weights took 86-92 ms on one thread against
 *    106-128 with PREFETCHT0, and the model's talker + CP 67-69 ms against
 *    81-83 (int4 -9%, bf16 -20%, a B = 4 step -27%; AVX2 alike within the
 *    noise; prefill unsettled, up to 10% slower in some pairs, and no
 *    better with L1 prefetches for the tiles that share a block).
 *    Likely why: an L1 prefetch holds one of the core's few L1 miss
 *    buffers until its line arrives from DRAM, and the tile's own loads
 *    queue behind them; one to L2 is tracked there, and the loads then
 *    hit L2 in a few cycles.
 *  - Except for matrices marked resident (qtts_mat.resident: re-read
 *    within a step and small enough to stay in the last-level cache, the
 *    code predictor's on a large L3): their lines come from the L3 in
 *    tens of nanoseconds, so an L1 prefetch frees its miss buffer soon,
 *    and it saves the loads the L2 round trip. On the 260 MB L3 of the
 *    Intel host, 0.6B's code predictor took 5-7% less time with L1
 *    prefetches at int4 (45 MB per pass) and ~4% less at int8 (80 MB);
 *    at bf16 (160 MB, too much to stay there) 2% more, and the talker
 *    (DRAM) 2-8% more. On a host whose L3 sysfs gives as 480 MB, 80 and
 *    150 MB lost 5% and 30%, hence the size cap of qtts_mat_resident_fits.
 *    Closer lines suit the L3's latency: QTTS_PREFETCH_AHEAD_L1.
 *  - Each line prefetched to L2 is prefetched again, to L1, when the
 *    tile's reads are QTTS_PREFETCH_NEAR bytes from it (`back`): the L2
 *    hit it then waits for is short, so the L1 miss buffer is soon free
 *    again. On the Intel host the talker (from DRAM) took 4-6% less time
 *    (`ab_pairs`: 0.6B int4 0.944-0.960, int8 0.964, bf16 0.984, 1.7B
 *    int4 0.959; a B = 4 int8 step 5% less; prefill unchanged).
 *    0.5-5 KB measured alike. On the EPYC (Zen 4) host the int4 talker
 *    took 1.126 of the time without it (`ab_pairs`, 0.6B).
 * A prefetch never faults, so running past the matrix is harmless. */
#define QTTS_PREFETCH_AHEAD 8192
#define QTTS_PREFETCH_AHEAD_L1 4096   /* resident: 2-4 KB ~1-2% faster than 8, 16 KB 7% slower */
#define QTTS_PREFETCH_NEAR 2048        /* the second, L1 prefetch of a line not resident */
/* The attention calls' prefetch of K/V rows (attn_impl.h): to L1
 * ATTN_PF_NEAR rows ahead of the row being read, to L2 ATTN_PF_FAR rows
 * ahead (16 KB of 128-wide heads in either format). qtts_attn_cold_rows
 * gives the far distance to callers. */
#define ATTN_PF_NEAR(bf16) ((bf16) ? 8 : 4)
#define ATTN_PF_FAR(bf16) ((bf16) ? 64 : 32)

typedef struct {
    const char *p, *end; /* next line to prefetch; end of this tile's share */
    size_t step;         /* bytes per qtts_prefetch_step */
    size_t back;         /* not l1: each line's L1 prefetch goes to p - back */
    bool l1;             /* to L1 (a resident matrix), else to L2 and then to L1 */
} qtts_prefetcher;

/* The prefetch of the share [from, from + len) of `of` equal parts of the
 * block at least QTTS_PREFETCH_AHEAD (l1: QTTS_PREFETCH_AHEAD_L1) bytes
 * ahead of `block` (`bytes` long), in whole lines (part boundaries
 * rounded down, so the shares of 0..of tile the block's lines exactly),
 * over `steps` calls of qtts_prefetch_step, ceil(lines / steps) lines
 * each (the last calls may find nothing left). */
static inline qtts_prefetcher qtts_prefetch_begin(const void *block, size_t bytes, size_t steps,
                                                  unsigned from, unsigned len, unsigned of,
                                                  bool l1) {
    const size_t dist = l1 ? QTTS_PREFETCH_AHEAD_L1 : QTTS_PREFETCH_AHEAD;
    const size_t far = (dist + bytes - 1) / bytes * bytes;
    const char *ahead = (const char *)block + far;
    const size_t lines = (bytes + 63) / 64;
    size_t a = 0, b = lines;
    if (len < of) { /* one tile of several: the later x rows of a prefill or a large batch */
        a = lines * from / of;
        b = lines * (from + len) / of;
    }
    return (qtts_prefetcher){.p = ahead + 64 * a, .end = ahead + 64 * b,
                             .step = 64 * ((b - a + steps - 1) / steps),
                             .back = far - QTTS_PREFETCH_NEAR, .l1 = l1};
}

/* The prefetcher of the tile of W rows [r, r + RW) and x rows [t, t + RX)
 * in the block of W rows [rb, rb + nr) (W: the matrix's data, `stride`
 * bytes per row) against n x rows, its arithmetic in `steps` steps. The
 * tiles of a block go x rows outer, W rows inner (the block's strips of x
 * rows in order, each strip's tiles in row order), so this tile's work
 * starts after t * nr + (r - rb) * RX of the block's nr * n (W row, x row)
 * pairs. */
static inline qtts_prefetcher qtts_prefetch_tile(const void *W, size_t stride, size_t steps,
                                                 int rb, int nr, int n, int r, int t, int RW,
                                                 int RX, bool l1) {
    return qtts_prefetch_begin((const char *)W + (size_t)rb * stride, (size_t)nr * stride, steps,
                               (unsigned)(t * nr + (r - rb) * RX), (unsigned)(RW * RX),
                               (unsigned)(nr * n), l1);
}

static inline void qtts_prefetch_step(qtts_prefetcher *f) {
    const char *stop = f->p + f->step < f->end ? f->p + f->step : f->end;
    if (f->l1)
        for (; f->p < stop; f->p += 64) __builtin_prefetch(f->p, 0, 3);
    else
        for (; f->p < stop; f->p += 64) {
            __builtin_prefetch(f->p, 0, 2);
            __builtin_prefetch(f->p - f->back, 0, 3);
        }
}

typedef void (*qtts_mm_fn)(const qtts_mm_job *j, int r0, int r1);

typedef struct {
    const char *name;
    qtts_mm_fn mm_f32, mm_bf16, mm_q8_0, mm_q4_0;
    /* One row of cols (multiple of 32) values to codes + per-block scales,
     * bit-identical to qtts_quantize_act_ref. */
    void (*quantize_act)(const float *x, int cols, int8_t *q, float *d);
    /* qtts_pack_act, bit for bit */
    void (*pack_act)(const int8_t *q, const float *d, int cols, int8_t *xq, float *xd, int32_t *xs);
    /* qtts_attn_scores / qtts_attn_out (kernels.h; attn_impl.h) */
    void (*attn_scores)(float *scores, size_t lds, const float *q, int nh, const float *k,
                        size_t ldk, int ctx, int d, float scale, const void *next, int next_rows);
    void (*attn_out)(float *out, const float *p, size_t ldp, int nh, const float *v, size_t ldv,
                     int ctx, int d, bool acc, const void *next, int next_rows);
    /* the same over a bf16 cache (qtts_attn_scores_bf16 / qtts_attn_out_bf16) */
    void (*attn_scores_bf16)(float *scores, size_t lds, const float *q, int nh,
                             const uint16_t *k, size_t ldk, int ctx, int d, float scale,
                             const void *next, int next_rows);
    void (*attn_out_bf16)(float *out, const float *p, size_t ldp, int nh, const uint16_t *v,
                          size_t ldv, int ctx, int d, bool acc, const void *next, int next_rows);
} qtts_isa;

extern const qtts_isa qtts_isa_ref;
#if QTTS_ISA_X86
extern const qtts_isa qtts_isa_avx2, qtts_isa_avxvnni, qtts_isa_avx512;
#endif
#if QTTS_ISA_ARM64
extern const qtts_isa qtts_isa_neon, qtts_isa_neondot;
#endif

/* ==== dispatch (kernels.c) ============================================== */

/* Every table compiled into this build, fastest first, the reference
 * last; returns the count (<= cap stored). */
int qtts_isa_compiled(const qtts_isa **out, int cap);
/* Whether this CPU (and OS) can run isa. */
bool qtts_isa_usable(const qtts_isa *isa);
/* bf16 dot products for the bf16 convs: AVX512-BF16 (with the AVX-512 set
 * qtts_isa_avx512 needs), or AArch64 FEAT_BF16 (HWCAP2_BF16). */
bool qtts_cpu_avx512bf16(void);
bool qtts_cpu_arm_bf16(void);
/* The table qtts_matmul uses: the first usable compiled one. */
const qtts_isa *qtts_isa_active(void);
/* qtts_matmul on a given table (tests, benchmarks); same threading. */
void qtts_matmul_isa(const qtts_isa *isa, float *y, const float *x, int n, const qtts_mat *W,
                     const float *bias);
/* qtts_matmul_multi and qtts_matmul_swiglu on a given table. */
void qtts_matmul_multi_isa(const qtts_isa *isa, int count, float *const *y, const float *x, int n,
                           const qtts_mat *const *W);
void qtts_matmul_swiglu_isa(const qtts_isa *isa, float *y, float *up, const float *x, int n,
                            const qtts_mat *gate, const qtts_mat *upw);

/* ==== shared reference pieces =========================================== */

/* The 16-lane fold of the SIMD and quantized orders. */
static inline float qtts_fold16(float a[16]) {
    for (int w = 8; w >= 1; w >>= 1)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

/* Activation quantization, the definition every path reproduces: per
 * block of 32, dx = amax/127 (fp32), codes = round-half-even(x * (1/dx))
 * (0 for an all-zero block). NaN input gives unspecified codes. */
static inline void qtts_quantize_act_ref(const float *x, int cols, int8_t *q, float *d) {
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const float *xb = x + b * QTTS_QK;
        float amax = 0.0f;
        for (int i = 0; i < QTTS_QK; i++) {
            float a = fabsf(xb[i]);
            amax = a > amax ? a : amax;
        }
        const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
        for (int i = 0; i < QTTS_QK; i++) {
            float v = nearbyintf(xb[i] * id);
            q[b * QTTS_QK + i] = (int8_t)(fabsf(v) <= 127.0f ? v : 0.0f);
        }
        d[b] = dx;
    }
}

/* Reference quantized row dots in the order stated above (kernels_ref.c),
 * on the plain layout: w is one row of blocks, xq/xd one quantized row of
 * x (not packed). The oracle the packed paths are tested against. */
float qtts_dot_q8_0_ref(const void *w, const int8_t *xq, const float *xd, int cols);
float qtts_dot_q4_0_ref(const void *w, const int8_t *xq, const float *xd, int cols);

/* A block's scale as f32 (blocks are only 2-byte aligned). */
static inline float qtts_block_scale(const uint8_t *blk) {
    qtts_half h;
    __builtin_memcpy(&h, blk, sizeof h);
    return qtts_half_to_f32(h);
}

#endif
