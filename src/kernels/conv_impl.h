/*
 * conv_impl.h - the instruction-set layer behind qtts_conv1d_run and
 * qtts_snake_run (kernels.h, "Blocked convolution" section). conv.c holds
 * the blocking, threading and dispatch and the scalar table; conv_avx2.c,
 * conv_avx512.c (compiled with their own flags, see the Makefile) and
 * conv_neon.c each fill one qtts_conv_isa table, conv_avx512bf16.c and
 * conv_neonbf16.c a bf16 one. A file for another architecture compiles to
 * nothing.
 *
 * ==== The convolution as a GEMM ===========================================
 *
 * Output rows come in groups of QTTS_CONV_MR = 8 (the packing of
 * qtts_conv1d: w[g][kk][r], kk = tap * cin + ci, zero rows past cout), the
 * time axis in tiles of `nr` columns, the reduction axis kk in blocks of
 * `kc` rows. conv.c packs the input rows kk0..kk0+kc-1 of one column tile
 * into a panel xp[kc][nr] (row kk is input channel ci shifted left by
 * (taps-1-tap)*dil columns; columns at or past n are zero) and calls the
 * ISA's tile kernel once per row group on it, with the group's kc x 8
 * weights w[kk][r] (contiguous) and an 8 x nr accumulator tile.
 *
 * ==== Accumulation order (every path, bit for bit) ========================
 *
 * Each output y[co, t] is one fp32 chain in increasing kk, starting from
 * +0: acc = fma(w[co, kk], x[kk, t], acc) (a fused multiply-add, one
 * rounding), carried across K blocks through the accumulator tile (an exact
 * fp32 store and reload); then v = acc + bias[co] (bias 0 when absent), and
 * y = v, or y = y + v when accumulating. No lane, tile, block or thread
 * boundary enters this order, so the result does not depend on n, on where
 * a column sits, on the blocking chosen for this CPU's caches or on the
 * thread count; and the scalar path (fmaf), AVX2 and AVX-512 give the same
 * bits. It is not the order of qtts_conv1d_causal (separate multiply and
 * add): against it, and against exact arithmetic, each output is within
 * K * 2^-24 * sum_kk |w x| (+ one rounding of the bias add).
 *
 * ==== SnakeBeta ===========================================================
 *
 * y = x + ib * sin(ea * x)^2 per element, every path the same operations in
 * fp32 (qtts_snake_ref in conv.c is the definition): u = ea * x; if
 * |u| <= 8192, j = round-half-even(u * 2/pi), r = u - j*P1 - j*P2 - j*P3
 * (three fmas, Cody-Waite with pi/2 = P1 + P2 + P3), z = r*r, s = sin(r)
 * and c = cos(r) by the Cephes minimax polynomials on [-pi/4, pi/4] (Horner
 * with fmas), sin(u)^2 = s*s for even j and c*c for odd j; otherwise (large
 * or non-finite u) sinf(u)^2 from libm. Then y = fma(ib, sin^2, x).
 * Max error of sin^2 against the exact value: a few units of 2^-24.
 */
#ifndef QTTS_CONV_IMPL_H
#define QTTS_CONV_IMPL_H

#include "kernels.h"

/* One tile-kernel call: rows 0..7 of a group x columns 0..nr-1. */
typedef struct {
    const float *w;      /* [kc][8] packed weights of the group, from kk0 */
    const float *xp;     /* [kc][nr] panel, 64-byte aligned */
    /* Or, for tables with `direct` and a full tile (cols == nr): no panel;
     * panel row k is xr[k] + xcol (any alignment), the conv's input row
     * itself. */
    const float *const *xr;
    int xcol;
    /* bf16 tiles instead: kc pairs of reduction rows, [kc][8] weight words
     * and a [kc][nr] panel of words (bf16 of row 2p low, 2p+1 high) */
    const uint32_t *wb, *xb;
    int kc;
    /* The weights the next tile call will read (the next row group's, at
     * the same K block), or NULL: a kernel may prefetch them while it
     * computes. With few columns a tile is over before the hardware
     * prefetchers ramp up on the next group's weights, which lie a whole
     * K row of groups away, so small-n convs would otherwise wait on
     * memory latency. */
    const void *w_next;
    float *acc;          /* [8][nr] partial sums, 64-byte aligned */
    bool load;           /* start from acc (else from +0) */
    int rows;            /* rows < cout in this group (others may be skipped) */
    int cols;            /* columns < cols of the tile are needed (every
                          * block of the tile says the same); a kernel may
                          * compute the others, they are never stored */
    /* Final block only (y != NULL): write rows < rows, columns < cols of
     * y (row stride ldy) instead of acc. */
    float *y;
    size_t ldy;
    const float *bias;   /* [rows] or NULL */
    bool accumulate;
} qtts_conv_tile;

/*
 * A conv on few columns (n <= QTTS_CONV_NARROW_MAX: the early layers of a
 * streaming push, 1-8 columns per frame) is a matrix-vector product in
 * disguise: every weight is used for n columns only, so the time is the
 * weight read. The tile above puts columns in lanes and computes a whole
 * vector of them whatever n, 8 dependent FMAs per reduction row and row
 * group, and reads weights at a fraction of the memory's speed. The narrow
 * kernel puts the 8 rows of a group in lanes instead: per reduction row it
 * loads the group's 8 weights once and does one FMA per needed column, over
 * several row groups at once (independent chains to hide the FMA latency,
 * each group's weights one sequential stream). Each output is still the
 * same fp32 chain in increasing kk, so the bits are the tile's.
 *
 * Input: xk[kk][cols], row kk = tap * cin + ci as in the panel (packed once
 * per conv by conv.c). Groups g0..g1-1 of the conv's packed weights, all K
 * rows; y as in qtts_conv_tile's final block.
 */
#define QTTS_CONV_NARROW_MAX 8

typedef struct {
    const float *w;      /* the conv's packed weights [groups][K][8] */
    const float *xk;     /* [K][cols] */
    /* bf16 kernels instead: [groups][K][8] and [K][cols] words, each a
     * pair of reduction rows (qtts_conv_tile.wb/xb), K counted in pairs */
    const uint32_t *wb, *xb;
    int K, cols, cout;
    float *y;            /* row 0 of the conv's output, row stride ldy */
    size_t ldy;
    const float *bias;   /* [cout] or NULL */
    bool accumulate;
} qtts_conv_narrow;

/* The end of a narrow kernel's group g: v[c][r] is row r's chain for
 * column c (C columns); y = v + bias (0 without), or y + that. */
static inline void qtts_narrow_out(const qtts_conv_narrow *t, int g, const float v[][8], int C) {
    const int row = g * QTTS_CONV_MR, rows = QTTS_MIN(QTTS_CONV_MR, t->cout - row);
    for (int r = 0; r < rows; r++) {
        float *yr = t->y + (size_t)(row + r) * t->ldy;
        const float b = t->bias ? t->bias[row + r] : 0.0f;
        for (int c = 0; c < C; c++) {
            const float val = v[c][r] + b;
            yr[c] = t->accumulate ? yr[c] + val : val;
        }
    }
}

/* Defines a table's narrow entry point `name` (qtts_conv_isa.narrow) over
 * its kernel gc(t, g0, G, C) of G groups x C columns, both constants once
 * inlined: groups in chunks of G_OF(C), the remainder one at a time, and
 * t->cols (1..8) dispatched to a constant C. */
#define QTTS_NARROW_ENTRY(name, gc, G_OF)                                                     \
    static inline __attribute__((always_inline)) void name##_c(const qtts_conv_narrow *t,     \
                                                               int g0, int g1, const int C) { \
        const int G = G_OF(C);                                                                \
        int g = g0;                                                                           \
        for (; g + G <= g1; g += G) gc(t, g, G, C);                                           \
        for (; g < g1; g++) gc(t, g, 1, C);                                                   \
    }                                                                                         \
    static void name(const qtts_conv_narrow *t, int g0, int g1) {                             \
        switch (t->cols) {                                                                    \
        case 1: name##_c(t, g0, g1, 1); break;                                                \
        case 2: name##_c(t, g0, g1, 2); break;                                                \
        case 3: name##_c(t, g0, g1, 3); break;                                                \
        case 4: name##_c(t, g0, g1, 4); break;                                                \
        case 5: name##_c(t, g0, g1, 5); break;                                                \
        case 6: name##_c(t, g0, g1, 6); break;                                                \
        case 7: name##_c(t, g0, g1, 7); break;                                                \
        case 8: name##_c(t, g0, g1, 8); break;                                                \
        default: QTTS_ASSERT(!"narrow conv: 1-8 columns");                                    \
        }                                                                                     \
    }

typedef struct {
    const char *name;
    int nr;              /* columns per tile */
    int kc;              /* reduction rows per panel */
    void (*tile)(const qtts_conv_tile *t);
    /* One row of SnakeBeta: y[i] = x[i] + ib * sin(ea * x[i])^2, i < n
     * (y may alias x). */
    void (*snake)(float *y, const float *x, float ea, float ib, int n);
    /* Row groups g0..g1-1 of a conv on t->cols <= QTTS_CONV_NARROW_MAX
     * columns (above), or NULL: the tiles serve every n. */
    void (*narrow)(const qtts_conv_narrow *t, int g0, int g1);
    bool direct;         /* the tile reads qtts_conv_tile.xr */
} qtts_conv_isa;

extern const qtts_conv_isa qtts_conv_isa_ref;
#if defined(__x86_64__)
extern const qtts_conv_isa qtts_conv_isa_avx2, qtts_conv_isa_avx512;
#endif
#if defined(__aarch64__)
extern const qtts_conv_isa qtts_conv_isa_neon;
#endif

/* The bf16 conv (kernels.h) of one instruction set: a tile on word panels
 * (qtts_conv_tile.wb/xb, kc counted in pairs) and the packing of one pair
 * of input rows: dst[j] = bf16(a[j]) | bf16(b[j]) << 16 (round to nearest
 * even) for j < cols, 0 for cols <= j < nr; b NULL reads as zeros. */
typedef struct {
    const char *name;
    int nr;
    int kc;              /* reduction rows per panel (even) */
    void (*tile)(const qtts_conv_tile *t);
    void (*pack_pair)(uint32_t *dst, const float *a, const float *b, int cols, int nr);
    void (*narrow)(const qtts_conv_narrow *t, int g0, int g1);   /* or NULL */
} qtts_conv_bf16_isa;

#if defined(__x86_64__)
extern const qtts_conv_bf16_isa qtts_conv_bf16_avx512;
#endif
#if defined(__aarch64__)
extern const qtts_conv_bf16_isa qtts_conv_bf16_neon;
#endif

/* The kc the conv runs isa's tiles at on a core with an L1 data cache of
 * l1d bytes (conv.c; 0 or less: unknown): the table's own kc, or a smaller
 * one that keeps a direct tile's input rows in L1. qtts_conv_isa_active
 * returns the best table with this CPU's kc; qtts_conv_isa_usable the
 * tables as they are. */
int qtts_conv_kc_for(const qtts_conv_isa *isa, long l1d);

/* Every table compiled in and usable on this CPU, fastest first, the
 * scalar one last; returns the count (<= cap stored). */
int qtts_conv_isa_usable(const qtts_conv_isa **out, int cap);
/* The table qtts_conv1d_run / qtts_snake_run use. */
const qtts_conv_isa *qtts_conv_isa_active(void);

/* qtts_conv1d_run / qtts_snake_run on a given table (tests, benchmarks). */
void qtts_conv1d_run_isa(const qtts_conv_isa *isa, const qtts_conv1d *c, float *y, size_t ldy,
                         const float *x, size_t ldx, int n, bool accumulate, qtts_conv_ws *ws);
void qtts_conv1d_run_many_isa(const qtts_conv_isa *isa, int count, const qtts_conv1d *const *c,
                              float *const *y, size_t ldy, const float *const *x, size_t ldx,
                              int n, qtts_conv_ws *ws);
void qtts_snake_run_isa(const qtts_conv_isa *isa, float *y, size_t ldy, const float *x,
                        size_t ldx, const float *ea, const float *ib, int channels, int n);

/* A workspace of ws's own for participant p of the pool (created on
 * first use; NULL on allocation failure), for work that each thread runs
 * alone within one job (conv_wino.c); freed with ws. Only p's thread, or
 * the caller outside a job, may touch it. */
qtts_conv_ws *qtts_conv_ws_part(qtts_conv_ws *ws, int p);

/* A buffer of at least `floats` (64-byte aligned) owned by ws, apart from
 * the per-task slots, for a caller that runs convs between its own passes
 * (conv_wino.c); valid until the next call. NULL on allocation failure. */
float *qtts_conv_ws_scratch(qtts_conv_ws *ws, size_t floats);

/* The definition of the SnakeBeta order above, one element. */
float qtts_snake_ref(float x, float ea, float ib);

/* Constants of that definition (shared by every path). */
#define QTTS_SNAKE_LIMIT 8192.0f
#define QTTS_SNAKE_2_PI 0.636619772367581343f   /* 2/pi */
#define QTTS_SNAKE_P1 1.5703125f                 /* pi/2 = P1 + P2 + P3 */
#define QTTS_SNAKE_P2 4.837512969970703125e-4f
#define QTTS_SNAKE_P3 7.54978995489188216e-8f
#define QTTS_SNAKE_S1 -1.6666654611e-1f          /* sin r = r + r z (S1 + z (S2 + z S3)) */
#define QTTS_SNAKE_S2 8.3321608736e-3f
#define QTTS_SNAKE_S3 -1.9515295891e-4f
#define QTTS_SNAKE_C1 4.166664568298827e-2f      /* cos r = 1 - z/2 + z^2 (C1 + z (C2 + z C3)) */
#define QTTS_SNAKE_C2 -1.388731625493765e-3f
#define QTTS_SNAKE_C3 2.443315711809948e-5f

#endif
