/*
 * conv_wino.c - a 7-tap causal conv in Winograd form, F(6,7), F(4,7) or
 * F(2,7), and a 2-tap one (a transposed conv's polyphase form) as F(4,2),
 * over the blocked convolution (kernels.h, "Winograd form").
 *
 * M consecutive outputs of one residue class of a dilated R-tap conv,
 * y[t], y[t + d], ..., y[t + (M-1) d], read the N = M + R - 1 inputs
 * s_k = x[t + (k - R + 1) d], k = 0..N-1. Winograd's minimal filtering
 * algorithm (Toom-Cook on N - 1 points and infinity) gets all M from N
 * products per input channel instead of R M:
 *
 *     u = Bᵀ s  (per input channel)     N values per group
 *     m_i = W_i u_i  (i = 0..N-1)       N [cout, cin] GEMMs over the groups
 *     y = Aᵀ m + bias                   M outputs per group
 *
 * with W_i = G_i · w (the R taps of each (output, input) channel pair
 * folded into N values, in double at load, rounded once to fp32). The rows
 * of Bᵀ are scaled to coprime integers and the scale moved into G
 * (tools/wino_derive.py derives all three and checks y = Aᵀ[(G g) ⊙ (Bᵀ s)]
 * exactly in rationals).
 *
 * F(6,7), points 0, ±1, ±2, ±1/2, ±3/2, ±3/4 and infinity: 12 products
 * per 6 outputs, 0.29x the direct conv's multiply-adds:
 *
 *   Bᵀ = [ 324    0 -2421     0  5737     0 -5448     0  2064     0  -256    0 ]
 *        [   0  324   324 -2097 -2097  3640  3640 -1808 -1808   256   256    0 ]
 *        [   0 -324   324  2097 -2097 -3640  3640  1808 -1808  -256   256    0 ]
 *        [   0  162    81 -1170  -585  2576  1288 -2080 -1040   512   256    0 ]
 *        [   0 -162    81  1170  -585 -2576  1288  2080 -1040  -512   256    0 ]
 *        [   0  324   648 -1125 -2250  1237  2474  -500 -1000    64   128    0 ]
 *        [   0 -324   648  1125 -2250 -1237  2474   500 -1000   -64   128    0 ]
 *        [   0 -108   -72   759   506 -1575 -1050  1116   744  -192  -128    0 ]
 *        [   0  108   -72  -759   506  1575 -1050 -1116   744   192  -128    0 ]
 *        [   0 -108  -144   615   820  -819 -1092   360   480   -48   -64    0 ]
 *        [   0  108  -144  -615   820   819 -1092  -360   480    48   -64    0 ]
 *        [   0 -324     0  2421     0 -5737     0  5448     0 -2064     0  256 ]
 *
 *   G: row i = (p^0 .. p^6) times 1/324 (point 0: (1, 0, ..., 0)), 1/630
 *   (±1), 1/138600 (±2), 2/225 (±1/2), 2/8505 (±3/2), 8192/467775 (±3/4),
 *   1/256 (infinity: (0, ..., 0, 1)).
 *
 *   Aᵀ: row r = (1, p^r for each finite point p ≠ 0 in the order above, 0),
 *   row 0 also 1 for point 0, row 5 also 1 for infinity; the powers of
 *   3/4 up to 243/1024 are exact in binary, as are those of 3/2.
 *
 * F(4,7), points 0, ±1, ±2, ±1/2, ±3/2 and infinity: 10 products per 4
 * outputs, 0.36x:
 *
 *   Bᵀ = [ 36   0 -205    0  273    0 -120    0  16   0 ]   G: 1/36    (1, 0, ..., 0)
 *        [  0 -36  -36  169  169 -104 -104   16  16   0 ]      1/90    (p^0 .. p^6), p = 1
 *        [  0  36  -36 -169  169  104 -104  -16  16   0 ]      1/90    p = -1
 *        [  0 -18   -9   98   49 -112  -56   32  16   0 ]      1/2520  p = 2
 *        [  0  18   -9  -98   49  112  -56  -32  16   0 ]      1/2520  p = -2
 *        [  0  36   72  -61 -122   29   58   -4  -8   0 ]      2/45    p = 1/2
 *        [  0 -36   72   61 -122  -29   58    4  -8   0 ]      2/45    p = -1/2
 *        [  0  12    8  -63  -42   63   42  -12  -8   0 ]      2/315   p = 3/2
 *        [  0 -12    8   63  -42  -63   42   12  -8   0 ]      2/315   p = -3/2
 *        [  0  36    0 -205    0  273    0 -120   0  16 ]      1/16    (0, ..., 0, 1)
 *
 *   Aᵀ = [ 1  1  1  1  1   1     1     1     1    0 ]
 *        [ 0  1 -1  2 -2  1/2  -1/2   3/2  -3/2   0 ]
 *        [ 0  1  1  4  4  1/4   1/4   9/4   9/4   0 ]
 *        [ 0  1 -1  8 -8  1/8  -1/8  27/8 -27/8   1 ]
 *
 * F(2,7), points 0, ±1, ±2, ±1/2 and infinity: 8 products per 2 outputs
 * (0.57x), for convs whose frames are too short for F(4,7):
 *
 *   Bᵀ = [ 4   0 -21   0  21   0  -4  0 ]   G = [ 1/4     0     0 ... 0    ]
 *        [ 0  -4  -4  17  17  -4  -4  0 ]       [ 1/18 (1, 1, 1, 1, 1, 1, 1) ]
 *        [ 0   4  -4 -17  17   4  -4  0 ]       [ 1/18 (1,-1, 1,-1, 1,-1, 1) ]
 *        [ 0   2   1 -10  -5   8   4  0 ]       [ 1/360 (1, 2, 4, 8, 16, 32, 64) ]
 *        [ 0  -2   1  10  -5  -8   4  0 ]       [ 1/360 (1,-2, 4,-8, 16,-32, 64) ]
 *        [ 0   4   8  -5 -10   1   2  0 ]       [ 1/180 (64, 32, 16, 8, 4, 2, 1) ]
 *        [ 0  -4   8   5 -10  -1   2  0 ]       [ 1/180 (64,-32, 16,-8, 4,-2, 1) ]
 *        [ 0  -4   0  21   0 -21   0  4 ]       [ 0 ... 0     1/4 ]
 *
 *   Aᵀ = [ 1  1  1  1  1  1    1    0 ]
 *        [ 0  1 -1  2 -2  1/2 -1/2  1 ]
 *
 * F(4,2), for 2-tap convs (dilation 1), points 0, ±1, 2 and infinity: 5
 * products per 4 outputs, 0.625x:
 *
 *   Bᵀ = [ 2 -1 -2  1  0 ]   G = [ 1/2    0  ]   Aᵀ = [ 1  1  1  1  0 ]
 *        [ 0  2  1 -1  0 ]       [ 1/2  1/2  ]        [ 0  1 -1  2  0 ]
 *        [ 0 -2  3 -1  0 ]       [ 1/6 -1/6  ]        [ 0  1  1  4  0 ]
 *        [ 0 -1  0  1  0 ]       [ 1/6  1/3  ]        [ 0  1 -1  8  1 ]
 *        [ 0  2 -1 -2  1 ]       [  0    1   ]
 *
 * (In the model of tools/wino_derive.py its rms error is 2.5 times the
 * direct sum's.) Every entry of the four Aᵀ is ± a power of two times a
 * power of 3 up to 243: exact in fp32. The GEMMs are the blocked kernels of this CPU on 1-tap convs, all N
 * in one split over the pool (qtts_conv1d_run_many: a chunk's GEMMs are
 * small, and one wait for the pool per GEMM cost more than the threads'
 * imbalance inside one), and every transform below is plain C in a fixed
 * order (the build keeps -ffp-contract=off): the bits are the same on
 * every instruction set and thread count.
 *
 * Which outputs group is fixed per frame, never per call: the caller runs
 * whole frames of `frame` columns (the codec decoder pushes whole frames),
 * and within a frame the positions of each residue class mod d group in
 * order, M at a time; a class whose length is not a multiple of M gets one
 * more group over its last M positions, of which only the outputs no group
 * before gave are kept. So an output's bits depend only on its position in
 * its frame: a stream pushing frames one at a time gets what one call over
 * all of them gets. A class of M - 1 positions gets a group over the
 * position before the frame's first of the class and its own M - 1, so the
 * form is chosen by the shortest class (frame / d positions): F(6,7) where
 * it holds 5 or more, F(4,7) where 3 or 4, else F(2,7). A group then reads
 * at most d columns further left than the direct conv does (w->left).
 * (A group of M for M - 1 outputs beats two of the next smaller form:
 * 12 products against 20, or 10 against 16.)
 *
 * Error (tests/unit/test_kernels_conv, random data, rms against the exact
 * sum): F(2,7) 2-4 times the direct sum's, F(4,7) 3-4 times F(2,7)'s,
 * F(6,7) about twice F(4,7)'s. Points for F(6,7) were chosen by the error
 * model of tools/wino_derive.py: ±3/2 with ±3/4 or ±2/3 35-39 times the
 * direct sum's, ±1/3 or ±1/4 38-48, ±3, ±4 or ±4/3 110-180; a fourth pair
 * (F(8,7), 1.75 products an output against 2) 110-320.
 */
#include <math.h>
#include <string.h>

#include "../base/thread.h"
#include "conv_impl.h"

#define TAPS 7          /* the most taps of a form */
#define MAX_FRAME 4096   /* longest frame (stack scratch per class sequence) */
#define MAX_NPT QTTS_CONV_WINO_MAX_POINTS

/* Positions of residue class r (mod d) in a frame: ceil((frame - r) / d). */
static int class_len(const qtts_conv_wino *w, int r) { return (w->frame - r + w->dil - 1) / w->dil; }

/* Groups of a class of len positions: len / M whole ones, and one more
 * over its last M when M does not divide len. */
static int class_groups(int len, int M) { return (len + M - 1) / M; }

/* G (N x 7) as numerator / denominator, see above. The three 7-tap
 * forms share their points' rows: F(2,7) takes the first 7 rows of
 * G7_NUM, F(4,7) the first 9, F(6,7) all 11, each then G7_INF (the point
 * at infinity); the row scales differ per form. */
static const double G7_NUM[11][TAPS] = {
    {1, 0, 0, 0, 0, 0, 0},
    {1, 1, 1, 1, 1, 1, 1},
    {1, -1, 1, -1, 1, -1, 1},
    {1, 2, 4, 8, 16, 32, 64},
    {1, -2, 4, -8, 16, -32, 64},
    {64, 32, 16, 8, 4, 2, 1},                 /* (1/2)^k, times 64 */
    {64, -32, 16, -8, 4, -2, 1},
    {64, 96, 144, 216, 324, 486, 729},        /* (3/2)^k, times 64 */
    {64, -96, 144, -216, 324, -486, 729},
    {8192, 6144, 4608, 3456, 2592, 1944, 1458},  /* (3/4)^k, times 8192 */
    {8192, -6144, 4608, -3456, 2592, -1944, 1458},
};
static const double G7_INF[TAPS] = {0, 0, 0, 0, 0, 0, 1};
/* the row scales of the comment above as denominators, where the
 * numerators are scaled: F(4,7)'s rows of 1/2 and 3/2 (45/2 * 64,
 * 315/2 * 64), F(6,7)'s of 1/2, 3/2 and 3/4 (225/2 * 64, 8505/2 * 64,
 * 467775/8192 * 8192) */
static const double G2_DEN[8] = {4, 18, 18, 360, 360, 180, 180, 4};
static const double G4_DEN[10] = {36, 90, 90, 2520, 2520, 1440, 1440, 10080, 10080, 16};
static const double G6_DEN[12] = {324,  630,  630,    138600, 138600, 7200,
                                  7200, 272160, 272160, 467775, 467775, 256};

/* F(4,2) */
static const double G42_NUM[5][TAPS] = {{1, 0}, {1, 1}, {1, -1}, {1, 2}, {0, 1}};
static const double G42_DEN[5] = {2, 2, 6, 6, 1};

void qtts_conv_wino_free(qtts_conv_wino *w) {
    if (!w) return;
    for (int i = 0; i < MAX_NPT; i++) qtts_conv1d_free(&w->pt[i]);
    memset(w, 0, sizeof(*w));
}

bool qtts_conv_wino_applies(const qtts_conv1d *c, int frame) {
    if (!c->w || frame > MAX_FRAME || c->dil < 1) return false;
    if (c->taps == 2) return c->dil == 1 && frame >= 3;
    return c->taps == 7 && c->dil <= MAX_FRAME / 2 && frame >= 2 * c->dil;
}

/* W_i[co][ci] = sum_k G[i][k] w[co][ci][k] in double, rounded once, for
 * the QTTS_CONV_MR output channels of one packed block (one task): read
 * from block `task` of c->w ([cout/8][k * cin + ci][8]) and written into
 * the same block of each point's packed 1-tap conv ([cout/8][ci][8]). The
 * eight channels of a block lie side by side in both, so the sums run on
 * all eight at once; rows past cout are zero in c->w and come out +0. */
typedef struct {
    const qtts_conv1d *c;
    int npt;
    const double *num[MAX_NPT];   /* row i of G's numerators */
    const double *den;
    float *pt[MAX_NPT];           /* each point's packed weights */
} wino_pt_job;

/* Four channels of a block as one vector (GCC vector extensions: each
 * lane the scalar operation, so the bits of the scalar code; fp
 * contraction is off). R is a constant in each caller's copy, so that the
 * R tap vectors and the sum stay in registers. */
typedef double pt_v4d __attribute__((vector_size(32)));
typedef float pt_v4f __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) void pt_block(const wino_pt_job *j, int task,
                                                           const int R) {
    const int cin = j->c->cin, MR = QTTS_CONV_MR;
    const float *src = j->c->w + (size_t)task * R * cin * MR;
    for (int ci = 0; ci < cin; ci++)
        for (int h = 0; h < MR; h += 4) {
            pt_v4d g[TAPS];
            for (int k = 0; k < R; k++) {
                pt_v4f f;
                memcpy(&f, src + ((size_t)k * cin + ci) * MR + h, sizeof(f));
                g[k] = __builtin_convertvector(f, pt_v4d);
            }
            for (int i = 0; i < j->npt; i++) {
                pt_v4d s = {0, 0, 0, 0};
                for (int k = 0; k < R; k++) s += j->num[i][k] * g[k];
                const pt_v4f o = __builtin_convertvector(s / j->den[i], pt_v4f);
                memcpy(j->pt[i] + ((size_t)task * cin + ci) * MR + h, &o, sizeof(o));
            }
        }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))   /* 4 doubles a vector */
#endif
static void wino_pt_task(void *ctx, int task) {
    const wino_pt_job *j = ctx;
    if (j->c->taps == 7) pt_block(j, task, 7);
    else pt_block(j, task, 2);
}

bool qtts_conv_wino_init(qtts_conv_wino *w, const qtts_conv1d *c, int frame) {
    memset(w, 0, sizeof(*w));
    if (!qtts_conv_wino_applies(c, frame)) return false;
    const int cout = c->cout, cin = c->cin, d = c->dil, R = c->taps;
    /* the shortest class (the last) holds frame / d positions; 2 taps:
     * F(4,2) only */
    const int shortest = frame / d;
    const int M = R == 2 || (shortest >= 3 && shortest < 5) ? 4 : shortest >= 5 ? 6 : 2;
    *w = (qtts_conv_wino){.cout = cout, .cin = cin, .taps = R, .dil = d, .frame = frame,
                          .m = M, .npt = M + R - 1};
    for (int r = 0; r < d; r++) {   /* class r's group over its last M starts at len - M */
        const int len = class_len(w, r);
        w->left = QTTS_MAX(w->left, (R - 1 + QTTS_MAX(0, M - len)) * d - r);
        w->ngroups += class_groups(len, M);
    }
    wino_pt_job j = {.c = c, .npt = w->npt,
                     .den = R == 2 ? G42_DEN : M == 6 ? G6_DEN : M == 4 ? G4_DEN : G2_DEN};
    for (int i = 0; i < w->npt; i++) {
        j.num[i] = R == 2 ? G42_NUM[i] : i < w->npt - 1 ? G7_NUM[i] : G7_INF;
        if (!qtts_conv1d_alloc(&w->pt[i], cout, cin, 1, 1)) {
            qtts_conv_wino_free(w);
            return false;
        }
        j.pt[i] = w->pt[i].w;
    }
    qtts_parallel_for((cout + QTTS_CONV_MR - 1) / QTTS_CONV_MR, wino_pt_task, &j);
    return true;
}

/* ==== transforms ========================================================= */

typedef struct {
    const qtts_conv_wino *w;
    const qtts_conv1d *c;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    int f0, nf;            /* frames of this chunk (f0 relative to x, y) */
    float *u, *m;          /* [npt][cin][q], [npt][cout][q] */
    int q;                 /* groups in the chunk */
    int per;               /* channels per task */
} wino_job;

/* The transforms run on each residue class of a frame as a sequence z[m] =
 * x[base + m d] (base = frame start + r): group j is outputs m = M j ..
 * M j + M - 1 and reads s_k = z[M j + k - H], H = taps - 1. Copied apart
 * into M phases zp[p][i] = z[M i + p - H], s_k = zp[k % M][j + k / M], so
 * the arithmetic runs on contiguous vectors of groups (GCC vector
 * extensions: AVX, SSE or NEON as the build allows, elementwise IEEE
 * operations with no contraction, so the same bits as one group at a
 * time). */
#define ZCAP (MAX_FRAME / 2 + 8 + 16)   /* + the widest vector */

#define IN_TF2(T, s0, s1, s2, s3, s4, s5, s6, s7, U, J)                                \
    do {                                                                               \
        const T e1 = 17.0f * s4 - 4.0f * (s2 + s6), o1 = 17.0f * s3 - 4.0f * (s1 + s5); \
        const T e3 = (s2 + 4.0f * s6) - 5.0f * s4;                                     \
        const T o3 = 2.0f * ((s1 + 4.0f * s5) - 5.0f * s3);                            \
        const T e5 = 2.0f * ((4.0f * s2 + s6) - 5.0f * s4);                            \
        const T o5 = (4.0f * s1 + s5) - 5.0f * s3;                                     \
        U(0, J, 4.0f * (s0 - s6) + 21.0f * (s4 - s2));                                 \
        U(1, J, e1 + o1);                                                              \
        U(2, J, e1 - o1);                                                              \
        U(3, J, e3 + o3);                                                              \
        U(4, J, e3 - o3);                                                              \
        U(5, J, e5 + o5);                                                              \
        U(6, J, e5 - o5);                                                              \
        U(7, J, 4.0f * (s7 - s1) + 21.0f * (s3 - s5));                                 \
    } while (0)

#define OUT_TF2(T, m0, m1, m2, m3, m4, m5, m6, m7, b, Y0, Y1)                          \
    do {                                                                               \
        const T a12 = m1 + m2, s12 = m1 - m2, a34 = m3 + m4, s34 = m3 - m4;            \
        const T a56 = m5 + m6, s56 = m5 - m6;                                          \
        Y0 = ((m0 + a12) + (a34 + a56)) + b;                                           \
        Y1 = ((s12 + 2.0f * s34) + (0.5f * s56 + m7)) + b;                             \
    } while (0)

/* F(4,7): rows i and i + 1 (i = 1, 3, 5, 7) of Bᵀ are e ± o, e on the
 * even inputs s2..s8 and o on the odd ones s1..s7 */
#define IN_TF4(T, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, U, J)                        \
    do {                                                                               \
        const T e1 = (169.0f * s4 - 36.0f * s2) + (16.0f * s8 - 104.0f * s6);           \
        const T o1 = (169.0f * s3 - 36.0f * s1) + (16.0f * s7 - 104.0f * s5);           \
        const T e3 = (49.0f * s4 - 9.0f * s2) + (16.0f * s8 - 56.0f * s6);              \
        const T o3 = 2.0f * ((49.0f * s3 - 9.0f * s1) + (16.0f * s7 - 56.0f * s5));     \
        const T e5 = 2.0f * ((36.0f * s2 - 61.0f * s4) + (29.0f * s6 - 4.0f * s8));     \
        const T o5 = (36.0f * s1 - 61.0f * s3) + (29.0f * s5 - 4.0f * s7);              \
        const T e7 = 8.0f * (s2 - s8) + 42.0f * (s6 - s4);                             \
        const T o7 = 12.0f * (s1 - s7) + 63.0f * (s5 - s3);                            \
        U(0, J, (36.0f * s0 - 205.0f * s2) + ((273.0f * s4 - 120.0f * s6) + 16.0f * s8)); \
        U(1, J, e1 + o1);                                                              \
        U(2, J, e1 - o1);                                                              \
        U(3, J, e3 + o3);                                                              \
        U(4, J, e3 - o3);                                                              \
        U(5, J, e5 + o5);                                                              \
        U(6, J, e5 - o5);                                                              \
        U(7, J, e7 + o7);                                                              \
        U(8, J, e7 - o7);                                                              \
        U(9, J, (36.0f * s1 - 205.0f * s3) + ((273.0f * s5 - 120.0f * s7) + 16.0f * s9)); \
    } while (0)

#define OUT_TF4(T, m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, b, Y0, Y1, Y2, Y3)          \
    do {                                                                               \
        const T a12 = m1 + m2, s12 = m1 - m2, a34 = m3 + m4, s34 = m3 - m4;            \
        const T a56 = m5 + m6, s56 = m5 - m6, a78 = m7 + m8, s78 = m7 - m8;            \
        Y0 = ((m0 + a12) + (a34 + (a56 + a78))) + b;                                   \
        Y1 = ((s12 + 2.0f * s34) + (0.5f * s56 + 1.5f * s78)) + b;                     \
        Y2 = ((a12 + 4.0f * a34) + (0.25f * a56 + 2.25f * a78)) + b;                   \
        Y3 = ((s12 + 8.0f * s34) + (0.125f * s56 + (3.375f * s78 + m9))) + b;          \
    } while (0)

/* F(6,7): rows i and i + 1 (i = 1, 3, 5, 7, 9) of Bᵀ are e ± o, e on the
 * even inputs s2..s10 and o on the odd ones s1..s9 */
#define IN_TF6(T, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, U, J)                  \
    do {                                                                                   \
        const T e1 = (324.0f * s2 - 2097.0f * s4) + ((3640.0f * s6 - 1808.0f * s8) + 256.0f * s10); \
        const T o1 = (324.0f * s1 - 2097.0f * s3) + ((3640.0f * s5 - 1808.0f * s7) + 256.0f * s9); \
        const T e3 = (81.0f * s2 - 585.0f * s4) + ((1288.0f * s6 - 1040.0f * s8) + 256.0f * s10); \
        const T o3 =                                                                       \
            2.0f * ((81.0f * s1 - 585.0f * s3) + ((1288.0f * s5 - 1040.0f * s7) + 256.0f * s9)); \
        const T e5 =                                                                       \
            2.0f * ((324.0f * s2 - 1125.0f * s4) + ((1237.0f * s6 - 500.0f * s8) + 64.0f * s10)); \
        const T o5 = (324.0f * s1 - 1125.0f * s3) + ((1237.0f * s5 - 500.0f * s7) + 64.0f * s9); \
        const T e7 = (506.0f * s4 - 72.0f * s2) + ((744.0f * s8 - 1050.0f * s6) - 128.0f * s10); \
        const T o7 = (759.0f * s3 - 108.0f * s1) + ((1116.0f * s7 - 1575.0f * s5) - 192.0f * s9); \
        const T e9 = (820.0f * s4 - 144.0f * s2) + ((480.0f * s8 - 1092.0f * s6) - 64.0f * s10); \
        const T o9 = (615.0f * s3 - 108.0f * s1) + ((360.0f * s7 - 819.0f * s5) - 48.0f * s9); \
        U(0, J, (324.0f * s0 - 2421.0f * s2) +                                             \
                    ((5737.0f * s4 - 5448.0f * s6) + (2064.0f * s8 - 256.0f * s10)));      \
        U(1, J, e1 + o1);                                                                  \
        U(2, J, e1 - o1);                                                                  \
        U(3, J, e3 + o3);                                                                  \
        U(4, J, e3 - o3);                                                                  \
        U(5, J, e5 + o5);                                                                  \
        U(6, J, e5 - o5);                                                                  \
        U(7, J, e7 + o7);                                                                  \
        U(8, J, e7 - o7);                                                                  \
        U(9, J, e9 + o9);                                                                  \
        U(10, J, e9 - o9);                                                                 \
        U(11, J, (2421.0f * s3 - 324.0f * s1) +                                            \
                     ((5448.0f * s7 - 5737.0f * s5) + (256.0f * s11 - 2064.0f * s9)));     \
    } while (0)

/* F(4,2) */
#define IN_TF42(T, s0, s1, s2, s3, s4, U, J)                                           \
    do {                                                                               \
        const T a = s3 - s1;                                                           \
        U(0, J, 2.0f * (s0 - s2) + a);                                                 \
        U(1, J, 2.0f * s1 + (s2 - s3));                                                \
        U(2, J, 3.0f * s2 - (2.0f * s1 + s3));                                         \
        U(3, J, a);                                                                    \
        U(4, J, 2.0f * (s1 - s3) + (s4 - s2));                                         \
    } while (0)

#define OUT_TF42(T, m0, m1, m2, m3, m4, b, Y0, Y1, Y2, Y3)                             \
    do {                                                                               \
        const T a12 = m1 + m2, s12 = m1 - m2;                                          \
        Y0 = ((m0 + a12) + m3) + b;                                                    \
        Y1 = (s12 + 2.0f * m3) + b;                                                    \
        Y2 = (a12 + 4.0f * m3) + b;                                                    \
        Y3 = (s12 + (8.0f * m3 + m4)) + b;                                             \
    } while (0)

/* Aᵀ's coefficients of ±3/4: 9/16, 27/64, 81/256, 243/1024 */
#define OUT_TF6(T, m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, b, Y0, Y1, Y2, Y3, Y4, Y5) \
    do {                                                                                   \
        const T a12 = m1 + m2, s12 = m1 - m2, a34 = m3 + m4, s34 = m3 - m4;                \
        const T a56 = m5 + m6, s56 = m5 - m6, a78 = m7 + m8, s78 = m7 - m8;                \
        const T a9 = m9 + m10, s9 = m9 - m10;                                              \
        Y0 = (((m0 + a12) + (a34 + a56)) + (a78 + a9)) + b;                                \
        Y1 = ((s12 + 2.0f * s34) + (0.5f * s56 + (1.5f * s78 + 0.75f * s9))) + b;          \
        Y2 = ((a12 + 4.0f * a34) + (0.25f * a56 + (2.25f * a78 + 0.5625f * a9))) + b;      \
        Y3 = ((s12 + 8.0f * s34) + (0.125f * s56 + (3.375f * s78 + 0.421875f * s9))) + b;  \
        Y4 = ((a12 + 16.0f * a34) + (0.0625f * a56 + (5.0625f * a78 + 0.31640625f * a9))) + b; \
        Y5 = ((s12 + 32.0f * s34) +                                                        \
              (0.03125f * s56 + (7.59375f * s78 + (0.2373046875f * s9 + m11)))) + b;       \
    } while (0)

/* The loops come in two widths, picked at run time (in_seq, out_seq):
 * 16 groups a vector (one zmm) where AVX-512 is present, whose 32
 * registers hold an F(6,7) group's 12 inputs; 8 (one ymm) on AVX2 and
 * the baseline, built for both and picked at load (ifunc). At 16 on AVX2
 * (two ymm a vector, 24 for the inputs against 16 registers) the loops
 * spilled: perf over F(6,7) convs of 96 and 192 channels (12 frames, one
 * thread) put the transforms at 0.22-0.26 of the tiles' samples, and at
 * 8 at 0.11-0.20. Other targets build one copy, 16 wide. */
#if defined(__x86_64__) && defined(__GNUC__)
#define VW 16
#define SEQ(name) name##_16
#define WIDE __attribute__((target("avx512f")))
#include "conv_wino_seq.h"
#define VW 8
#define SEQ(name) name##_8
#if !defined(__SANITIZE_THREAD__)   /* TSan cannot run ifunc resolvers */
#define WIDE __attribute__((target_clones("avx2", "default")))
#else
#define WIDE
#endif
#include "conv_wino_seq.h"
/* the AVX-512 copies where the CPU has AVX-512, as a target_clones
 * resolver would pick (libgcc fills the CPU model before main: a read) */
#define PICK(name) (__builtin_cpu_supports("avx512f") ? name##_16 : name##_8)
#else
#define VW 16
#define SEQ(name) name##_16
#define WIDE
#include "conv_wino_seq.h"
#define PICK(name) name##_16
#endif

typedef void (*in_seq_fn)(float *const zp[6], float *const u[MAX_NPT], int np);
typedef void (*out_seq_fn)(float *const yp[6], const float *const m[MAX_NPT], float b, int np);

static in_seq_fn in_seq(const qtts_conv_wino *w) {
    if (w->taps == 2) return PICK(in_seq42);
    return w->m == 6 ? PICK(in_seq6) : w->m == 4 ? PICK(in_seq4) : PICK(in_seq2);
}
static out_seq_fn out_seq(const qtts_conv_wino *w) {
    if (w->taps == 2) return PICK(out_seq42);
    return w->m == 6 ? PICK(out_seq6) : w->m == 4 ? PICK(out_seq4) : PICK(out_seq2);
}

/* zp[p][i] = z0[(M i + p) d] for the inputs the np whole groups of a class
 * read (i up to np - 1 + (N - 1 - p) / M): a copy per input, in the order
 * of the input, with M a constant (the form's), so that the copies of one
 * group are a run of M loads and stores on fixed offsets. */
static inline __attribute__((always_inline)) void gather_m(float *const zp[6], const float *z0,
                                                           ptrdiff_t d, const int M, const int N,
                                                           int np) {
    /* every phase reads i <= np - 1 + (N - 1 - (M - 1)) / M; the first
     * (N - 1) % M + 1 phases one more */
    const int all = np + (N - M) / M, more = (N - 1) % M + 1;
    const ptrdiff_t step = M * d;
    const float *src = z0;
    float *restrict q[6];
#pragma GCC unroll 6
    for (int p = 0; p < M; p++) q[p] = zp[p];
    int i = 0;
    for (; i < all; i++, src += step)
#pragma GCC unroll 6
        for (int p = 0; p < M; p++) q[p][i] = src[p * d];
    if (more < M)
        for (int p = 0; p < more; p++) q[p][i] = src[p * d];
}

static void gather(float *const zp[6], const float *z0, int d, int M, int N, int np) {
    if (M == 6) gather_m(zp, z0, d, 6, N, np);
    else if (M == 4) gather_m(zp, z0, d, 4, N, np);
    else gather_m(zp, z0, d, 2, N, np);
}

/* z[(M g + p) d] = yp[p][g] for the whole groups g < whole, M constant. */
static inline __attribute__((always_inline)) void scatter_m(float *z, ptrdiff_t d, const int M,
                                                            float *const yp[6], int whole) {
    const ptrdiff_t step = M * d;
    const float *restrict q[6];
#pragma GCC unroll 6
    for (int p = 0; p < M; p++) q[p] = yp[p];
    for (int g = 0; g < whole; g++, z += step)
#pragma GCC unroll 6
        for (int p = 0; p < M; p++) z[p * d] = q[p][g];
}

static void scatter(float *z, int d, int M, float *const yp[6], int whole) {
    if (M == 6) scatter_m(z, d, 6, yp, whole);
    else if (M == 4) scatter_m(z, d, 4, yp, whole);
    else scatter_m(z, d, 2, yp, whole);
}

/* Input transform of channels [task*per, ...). */
static void in_task(void *ctx, int task) {
    const wino_job *j = ctx;
    const qtts_conv_wino *w = j->w;
    const int c1 = QTTS_MIN(w->cin, (task + 1) * j->per), d = w->dil, M = w->m;
    const int N = w->npt, H = w->taps - 1;   /* H: the history a group reads */
    float zbuf[6][ZCAP];
    float *const zp[6] = {zbuf[0], zbuf[1], zbuf[2], zbuf[3], zbuf[4], zbuf[5]};
    const in_seq_fn seq = in_seq(w);
    for (int ci = task * j->per; ci < c1; ci++) {
        const float *xr = j->x + (size_t)ci * j->ldx;
        float *u[MAX_NPT];
        for (int i = 0; i < N; i++) u[i] = j->u + ((size_t)i * w->cin + ci) * j->q;
        for (int f = 0; f < j->nf; f++) {
            const float *xf = xr + (size_t)(j->f0 + f) * w->frame;
            for (int r = 0; r < d; r++) {
                const int len = class_len(w, r), np = len / M;
                const float *z = xf + r;
                gather(zp, z - (ptrdiff_t)H * d, d, M, N, np);
                seq(zp, u, np);
                for (int i = 0; i < N; i++) u[i] += np;
                if (len % M) {   /* the group over the last M: s_k = z[len - M - H + k] */
                    float t[6][4];   /* [M][N / M] */
                    float *const tp[6] = {t[0], t[1], t[2], t[3], t[4], t[5]};
                    for (int k = 0; k < N; k++)
                        t[k % M][k / M] = z[(ptrdiff_t)(len - M - H + k) * d];
                    seq(tp, u, 1);
                    for (int i = 0; i < N; i++) u[i] += 1;
                }
            }
        }
    }
}

/* Output transform of rows [task*per, ...). */
static void out_task(void *ctx, int task) {
    const wino_job *j = ctx;
    const qtts_conv_wino *w = j->w;
    const int c1 = QTTS_MIN(w->cout, (task + 1) * j->per), d = w->dil, M = w->m, N = w->npt;
    float ybuf[6][ZCAP];
    float *const yp[6] = {ybuf[0], ybuf[1], ybuf[2], ybuf[3], ybuf[4], ybuf[5]};
    const out_seq_fn seq = out_seq(w);
    for (int co = task * j->per; co < c1; co++) {
        float *yr = j->y + (size_t)co * j->ldy;
        const float b = j->c->bias ? j->c->bias[co] : 0.0f;
        const float *m[MAX_NPT];
        for (int i = 0; i < N; i++) m[i] = j->m + ((size_t)i * w->cout + co) * j->q;
        for (int f = 0; f < j->nf; f++) {
            float *yf = yr + (size_t)(j->f0 + f) * w->frame;
            for (int r = 0; r < d; r++) {
                const int len = class_len(w, r), ng = class_groups(len, M), whole = len / M;
                seq(yp, m, b, ng);
                float *z = yf + r;
                scatter(z, d, M, yp, whole);
                /* the group over the last M: the outputs no group before gave */
                for (int p = M - len % M; len % M && p < M; p++)
                    z[(ptrdiff_t)(len - M + p) * d] = yp[p][ng - 1];
                for (int i = 0; i < N; i++) m[i] += ng;
            }
        }
    }
}

static void run_tasks(int items, int per_min, qtts_task_fn fn, wino_job *j) {
    const int threads = qtts_threads_count();
    j->per = QTTS_MAX(per_min, (items + 4 * threads - 1) / (4 * threads));
    const int tasks = (items + j->per - 1) / j->per;
    if (threads > 1 && tasks > 1) qtts_parallel_for(tasks, fn, j);
    else
        for (int t = 0; t < tasks; t++) fn(j, t);
}

/* Bytes of scratch per chunk (the U and M blocks) aimed
 * at: a few MB, so that a chunk's transformed inputs are still in the
 * caches when its GEMMs read them. 2, 6 and 12 MB measured alike for
 * 96-384 channels; 768 channels (18.9 MB of weights, read again by every
 * chunk) ran ~8% faster in one 9 MB chunk of 12 frames than in two, but
 * that is ~1% of a decode for 13 MB more per stream. */
#define CHUNK_BYTES (6u << 20)

/* Transformed weights up to which each thread runs whole chunks of its
 * own frames (run_own) rather than every chunk split over the pool: each
 * thread then reads all of them, from its own caches. The decoder's
 * 384-channel convs (5.9 MB at F(4,7)) ran faster split: that block took
 * 4.2-5.5 ms a frame against 5.1-5.9 on their own frames (`bench_codec`,
 * 12 frames, two vCPUs on one core complex and on two); 96-192 channels
 * (0.4-1.5 MB) keep their own frames. */
#define OWN_MAX_BYTES (5u << 20)

/* Scratch floats per frame of a chunk, and frames per chunk (of `parts`
 * threads' chunks at once). */
static size_t frame_floats(const qtts_conv_wino *w) {
    return (size_t)w->npt * (w->cin + w->cout) * w->ngroups;
}

static int chunk_frames(const qtts_conv_wino *w, int frames, int parts) {
    const size_t fpc =
        QTTS_MAX((size_t)1, CHUNK_BYTES / (size_t)parts / (sizeof(float) * frame_floats(w)));
    return (int)QTTS_MIN((size_t)frames, fpc);
}

int qtts_conv_wino_reach(const qtts_conv_wino *w, int n) {
    if (n <= 0) return 0;
    /* Column t of a run ending at a frame's end, T - t = back (1..n), sits
     * at position pos of its frame (class r, place m in the class); its
     * group starts at place s of the class (m rounded down to a multiple
     * of M, or the class's last-M group's len - M) and reads s_k = z[s + k
     * - taps + 1]. Only the group's first output uses s_0: column 0 of every
     * Bᵀ above is zero but in row 0, and so is column 0 of every Aᵀ (point
     * 0) but in row 0. So the output at place m > s depends on z from
     * s + 1 - taps + 1 on, the one at s from s - taps + 1 (the direct
     * conv's). Shifting t by a frame shifts what it reads by a frame, so
     * the leftmost lies within the first frame of the n columns. */
    const int d = w->dil, M = w->m, F = w->frame, H = w->taps - 1;
    int64_t most = 0;
    for (int back = n; back > 0 && back > n - F; back--) {
        const int pos = (int)((F - back % F) % F), r = pos % d, m = pos / d;
        const int len = class_len(w, r), s = m >= len / M * M ? len - M : m - m % M;
        const int first = (m > s ? s + 1 : s) - H;   /* the first place it depends on */
        /* the frame's start is back + pos columns before the end */
        most = QTTS_MAX(most, (int64_t)back + pos - ((int64_t)first * d + r));
    }
    return (int)most;
}

double qtts_conv_wino_macs(const qtts_conv_wino *w) {
    return (double)w->npt * w->ngroups * w->cout * w->cin;
}

size_t qtts_conv_wino_scratch(const qtts_conv_wino *w, int frames) {
    return frames > 0 ? frame_floats(w) * (size_t)chunk_frames(w, frames, 1) : 0;
}

/* Frames [f0, f0 + nf) through the transforms and the GEMMs, with
 * scratch buf; split over the pool, or all on the calling thread. */
static void run_chunk(const qtts_conv_wino *w, const qtts_conv1d *c, float *y, size_t ldy,
                      const float *x, size_t ldx, int f0, int nf, float *buf, qtts_conv_ws *ws,
                      bool split) {
    const int cin = w->cin, cout = w->cout;
    wino_job j = {.w = w, .c = c, .x = x, .ldx = ldx, .y = y, .ldy = ldy, .f0 = f0, .nf = nf,
                  .q = nf * w->ngroups};
    j.u = buf;
    j.m = j.u + (size_t)w->npt * cin * j.q;
    if (split) run_tasks(cin, 4, in_task, &j);
    else j.per = cin, in_task(&j, 0);
    const qtts_conv1d *pt[MAX_NPT];
    float *mi[MAX_NPT];
    const float *ui[MAX_NPT];
    for (int i = 0; i < w->npt; i++) {
        pt[i] = &w->pt[i];
        mi[i] = j.m + (size_t)i * cout * j.q;
        ui[i] = j.u + (size_t)i * cin * j.q;
    }
    /* inside a job of the pool (!split) this runs on the calling thread */
    qtts_conv1d_run_many(w->npt, pt, mi, (size_t)j.q, ui, (size_t)j.q, j.q, ws);
    if (split) run_tasks(cout, 4, out_task, &j);
    else j.per = cout, out_task(&j, 0);
}

/* run_own: each participant takes the frames of its home range (stealing
 * at the end), and runs them alone in chunks of fc frames, in its own
 * workspace (parts[p], scratch bufs[p]). */
typedef struct {
    const qtts_conv_wino *w;
    const qtts_conv1d *c;
    float *y;
    size_t ldy;
    const float *x;
    size_t ldx;
    int fc;
    qtts_conv_ws *parts[QTTS_MAX_THREADS];
    float *bufs[QTTS_MAX_THREADS];
    qtts_steal steal;
} own_job;

static void own_task(void *ctx, int task) {
    (void)task;
    own_job *o = ctx;
    const int me = qtts_thread_participant() % o->steal.parts;
    int a, b;
    while (qtts_steal_next(&o->steal, me, &a, &b))
        for (int f = a; f < b; f += o->fc)
            run_chunk(o->w, o->c, o->y, o->ldy, o->x, o->ldx, f, QTTS_MIN(o->fc, b - f),
                      o->bufs[me], o->parts[me], false);
}

/* Whether the frames went through run_own: false, with nothing written,
 * when it does not apply (one thread, fewer frames than threads, large
 * weights) or a thread's workspace cannot be had. Why: the decoder's
 * activations are written by one thread and read by another at every
 * split over the pool, and where the two threads sit on different core
 * complexes (no shared L3; one VM measured a 300 ns round trip between
 * its two vCPUs, against 56 ns at other times) those reads cross the
 * interconnect. A thread that keeps to its own frames reads its own
 * transformed inputs and products, and waits for the pool once per conv
 * instead of three times per chunk. */
static bool run_own(const qtts_conv_wino *w, const qtts_conv1d *c, float *y, size_t ldy,
                    const float *x, size_t ldx, int frames, qtts_conv_ws *ws) {
    const int threads = QTTS_MIN(qtts_threads_count(), QTTS_MAX_THREADS);
    if (threads < 2 || frames < threads ||
        (size_t)w->npt * w->cout * w->cin * sizeof(float) > OWN_MAX_BYTES)
        return false;
    /* on the stack: qtts_steal's ranges are 64-byte aligned */
    own_job o = {.w = w, .c = c, .y = y, .ldy = ldy, .x = x, .ldx = ldx};
    o.fc = chunk_frames(w, (frames + threads - 1) / threads, threads);
    for (int p = 0; p < threads; p++) {
        o.parts[p] = qtts_conv_ws_part(ws, p);
        o.bufs[p] = o.parts[p] ? qtts_conv_ws_scratch(o.parts[p], frame_floats(w) * o.fc) : NULL;
        if (!o.bufs[p]) return false;
    }
    qtts_steal_init(&o.steal, frames, threads);
    qtts_parallel_for(threads, own_task, &o);
    return true;
}

bool qtts_conv_wino_run(const qtts_conv_wino *w, const qtts_conv1d *c, float *y, size_t ldy,
                        const float *x, size_t ldx, int n, qtts_conv_ws *ws) {
    if (n <= 0) return true;
    if (n % w->frame) return false;
    const int frames = n / w->frame;
    if (ws && run_own(w, c, y, ldy, x, ldx, frames, ws)) return true;
    const int fc = chunk_frames(w, frames, 1);
    float *buf = qtts_conv_ws_scratch(ws, qtts_conv_wino_scratch(w, frames));
    if (!buf) return false;
    for (int f0 = 0; f0 < frames; f0 += fc)
        run_chunk(w, c, y, ldy, x, ldx, f0, QTTS_MIN(fc, frames - f0), buf, ws, true);
    return true;
}
