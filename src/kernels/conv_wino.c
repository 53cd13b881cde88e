/*
 * conv_wino.c - a 7-tap causal conv as Winograd F(2,7) over the blocked
 * convolution (kernels.h, "Winograd form").
 *
 * Two outputs of a dilated 7-tap conv, y[t] and y[t + d], read the eight
 * inputs s_k = x[t + (k - 6) d], k = 0..7. Winograd's minimal filtering
 * algorithm F(2,7) (Toom-Cook on the points 0, 1, -1, 2, -2, 1/2, -1/2
 * and infinity) gets both from eight products instead of fourteen:
 *
 *     u = Bᵀ s  (per input channel)     8 values per pair
 *     m_i = W_i u_i  (i = 0..7)         eight [cout, cin] GEMMs over the pairs
 *     y = Aᵀ m + bias                   2 outputs per pair
 *
 * with W_i = G_i · w (the 7 taps of each (output, input) channel pair
 * folded into 8 values, in double at load, rounded once to fp32). The rows
 * of Bᵀ are scaled to small integers and the scale moved into G:
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
 * (tools/wino_f27.py derives them and checks y = Aᵀ[(G g) ⊙ (Bᵀ s)] exactly
 * in rationals.) The GEMMs are the blocked kernels of this CPU on 1-tap
 * convs, all eight in one split over the pool (qtts_conv1d_run_many: a
 * chunk's GEMMs are small, and one wait for the pool per GEMM cost more
 * than the threads' imbalance inside one), and every transform below is plain C in a
 * fixed order (the build keeps -ffp-contract=off): the bits are the same on
 * every instruction set and thread count.
 *
 * Which outputs pair up is fixed per frame, never per call: the caller runs
 * whole frames of `frame` columns (the codec decoder pushes whole frames),
 * and within a frame the positions of each residue class mod d pair up in
 * order, (r, r + d), (r + 2d, r + 3d), ...; a class with an odd count gets
 * one more pair over its last two positions, whose second output is kept
 * (the first was computed by the pair before). So an output's bits depend
 * only on its position in its frame: a stream pushing frames one at a time
 * gets what one call over all of them gets. Every class needs two
 * positions (frame >= 2d): the pairs read no further left than the direct
 * conv does.
 *
 * Error: F(2,7) on these points adds about as much rounding as the direct
 * sum has (2-4x its error on random data, tests/unit/test_kernels_conv).
 */
#include <math.h>
#include <string.h>

#include "../base/thread.h"
#include "conv_impl.h"

#define NPT 8   /* points (m + r - 1) */
#define TAPS 7
#define MAX_FRAME 4096   /* longest frame (stack scratch per class sequence) */

/* Positions of residue class r (mod d) in a frame: ceil((frame - r) / d),
 * in pairs (2j, 2j + 1), and for an odd count one more over its last two. */
static int class_len(const qtts_conv_wino *w, int r) { return (w->frame - r + w->dil - 1) / w->dil; }

/* G (8 x 7) as numerator / denominator, see above. */
static const double G_NUM[NPT][TAPS] = {
    {1, 0, 0, 0, 0, 0, 0},       {1, 1, 1, 1, 1, 1, 1},       {1, -1, 1, -1, 1, -1, 1},
    {1, 2, 4, 8, 16, 32, 64},    {1, -2, 4, -8, 16, -32, 64}, {64, 32, 16, 8, 4, 2, 1},
    {64, -32, 16, -8, 4, -2, 1}, {0, 0, 0, 0, 0, 0, 1},
};
static const double G_DEN[NPT] = {4, 18, 18, 360, 360, 180, 180, 4};

void qtts_conv_wino_free(qtts_conv_wino *w) {
    if (!w) return;
    for (int i = 0; i < NPT; i++) qtts_conv1d_free(&w->pt[i]);
    memset(w, 0, sizeof(*w));
}

bool qtts_conv_wino_applies(const qtts_conv1d *c, int frame) {
    return c->w && c->taps == TAPS && c->dil >= 1 && c->dil <= MAX_FRAME / 2 &&
           frame >= 2 * c->dil && frame <= MAX_FRAME;
}

/* W_i[co][ci] = sum_k G[i][k] w[co][ci][k] in double, rounded once, for
 * the QTTS_CONV_MR output channels of one task, one packed block of c->w
 * ([cout/8][k * cin + ci][8]). */
typedef struct {
    const qtts_conv1d *c;
    float *wi;            /* [NPT][cout][cin] */
} wino_pt_job;

static void wino_pt_task(void *ctx, int task) {
    const wino_pt_job *j = ctx;
    const int cout = j->c->cout, cin = j->c->cin, K = TAPS * cin;
    const size_t per = (size_t)cout * cin;
    const int co1 = QTTS_MIN(cout, (task + 1) * QTTS_CONV_MR);
    for (int co = task * QTTS_CONV_MR; co < co1; co++) {
        const float *wg = j->c->w + (size_t)(co / QTTS_CONV_MR) * K * QTTS_CONV_MR +
                          co % QTTS_CONV_MR;
        for (int ci = 0; ci < cin; ci++) {
            double g[TAPS];
            for (int k = 0; k < TAPS; k++) g[k] = wg[((size_t)k * cin + ci) * QTTS_CONV_MR];
            for (int i = 0; i < NPT; i++) {
                double s = 0;
                for (int k = 0; k < TAPS; k++) s += G_NUM[i][k] * g[k];
                j->wi[per * i + (size_t)co * cin + ci] = (float)(s / G_DEN[i]);
            }
        }
    }
}

bool qtts_conv_wino_init(qtts_conv_wino *w, const qtts_conv1d *c, int frame) {
    memset(w, 0, sizeof(*w));
    if (!qtts_conv_wino_applies(c, frame)) return false;
    const int cout = c->cout, cin = c->cin, d = c->dil;
    *w = (qtts_conv_wino){.cout = cout, .cin = cin, .dil = d, .frame = frame};
    const size_t per = (size_t)cout * cin;
    float *wi = qtts_malloc(sizeof(float) * per * NPT);   /* [8][cout][cin] */
    bool ok = wi != NULL;
    if (ok) {
        for (int r = 0; r < d; r++) w->npairs += (class_len(w, r) + 1) / 2;
        wino_pt_job j = {.c = c, .wi = wi};
        qtts_parallel_for((cout + QTTS_CONV_MR - 1) / QTTS_CONV_MR, wino_pt_task, &j);
        for (int i = 0; i < NPT && ok; i++)
            ok = qtts_conv1d_init(&w->pt[i], wi + per * i, NULL, cout, cin, 1, 1);
    }
    qtts_free(wi);
    if (!ok) qtts_conv_wino_free(w);
    return ok;
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
    float *u, *m;          /* [8][cin][q], [8][cout][q] */
    int q;                 /* pairs in the chunk */
    int per;               /* channels per task */
} wino_job;

/* The transforms run on each residue class of a frame as a sequence z[m] =
 * x[base + m d] (base = frame start + r): pair j is outputs m = 2j, 2j + 1
 * and reads s_k = z[2j + k - 6]. Copied apart into evens ze[j] = z[2j - 6]
 * and odds zo[j] = z[2j - 5], s_2a = ze[j + a] and s_2a+1 = zo[j + a], so
 * the arithmetic runs on contiguous vectors of pairs (GCC vector
 * extensions: AVX, SSE or NEON as the build allows, elementwise IEEE
 * operations with no contraction, so the same bits as one pair at a
 * time). */
#define VW 16
typedef float vf __attribute__((vector_size(VW * sizeof(float)), aligned(4)));
#define ZCAP (MAX_FRAME / 2 + 8 + VW)

#define IN_TF(T, s0, s1, s2, s3, s4, s5, s6, s7, U, J)                                 \
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

#define OUT_TF(T, m0, m1, m2, m3, m4, m5, m6, m7, b, Y0, Y1)                           \
    do {                                                                               \
        const T a12 = m1 + m2, s12 = m1 - m2, a34 = m3 + m4, s34 = m3 - m4;            \
        const T a56 = m5 + m6, s56 = m5 - m6;                                          \
        Y0 = ((m0 + a12) + (a34 + a56)) + b;                                           \
        Y1 = ((s12 + 2.0f * s34) + (0.5f * s56 + m7)) + b;                             \
    } while (0)

/* On x86-64 the two loops below are built for AVX-512, AVX2 and the
 * baseline and picked at load (ifunc): the same operations on wider
 * registers, so the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDE
#endif

/* u_i[j] for the np pairs of one class sequence (ze, zo as above) */
WIDE static void in_seq(const float *ze, const float *zo, float *const u[NPT], int np) {
    int j = 0;
#define UV(i, J, v) (*(vf *)(u[i] + (J)) = (v))
    for (; j + VW <= np; j += VW) {
        const vf s0 = *(const vf *)(ze + j), s1 = *(const vf *)(zo + j);
        const vf s2 = *(const vf *)(ze + j + 1), s3 = *(const vf *)(zo + j + 1);
        const vf s4 = *(const vf *)(ze + j + 2), s5 = *(const vf *)(zo + j + 2);
        const vf s6 = *(const vf *)(ze + j + 3), s7 = *(const vf *)(zo + j + 3);
        IN_TF(vf, s0, s1, s2, s3, s4, s5, s6, s7, UV, j);
    }
#undef UV
#define US(i, J, v) (u[i][J] = (v))
    for (; j < np; j++) {
        const float s0 = ze[j], s1 = zo[j], s2 = ze[j + 1], s3 = zo[j + 1];
        const float s4 = ze[j + 2], s5 = zo[j + 2], s6 = ze[j + 3], s7 = zo[j + 3];
        IN_TF(float, s0, s1, s2, s3, s4, s5, s6, s7, US, j);
    }
#undef US
}

/* y0[j], y1[j] (outputs m = 2j, 2j + 1) of np pairs from m_i */
WIDE static void out_seq(float *y0, float *y1, const float *const m[NPT], float b, int np) {
    int j = 0;
    for (; j + VW <= np; j += VW) {
#define L(i) (*(const vf *)(m[i] + j))
        const vf m0 = L(0), m1 = L(1), m2 = L(2), m3 = L(3), m4 = L(4), m5 = L(5), m6 = L(6),
                 m7 = L(7);
#undef L
        vf a, c;
        OUT_TF(vf, m0, m1, m2, m3, m4, m5, m6, m7, b, a, c);
        *(vf *)(y0 + j) = a;
        *(vf *)(y1 + j) = c;
    }
    for (; j < np; j++) OUT_TF(float, m[0][j], m[1][j], m[2][j], m[3][j], m[4][j], m[5][j],
                               m[6][j], m[7][j], b, y0[j], y1[j]);
}

/* Input transform of channels [task*per, ...). */
static void in_task(void *ctx, int task) {
    const wino_job *j = ctx;
    const qtts_conv_wino *w = j->w;
    const int c1 = QTTS_MIN(w->cin, (task + 1) * j->per), d = w->dil;
    float ze[ZCAP], zo[ZCAP];
    for (int ci = task * j->per; ci < c1; ci++) {
        const float *xr = j->x + (size_t)ci * j->ldx;
        float *u[NPT];
        for (int i = 0; i < NPT; i++) u[i] = j->u + ((size_t)i * w->cin + ci) * j->q;
        for (int f = 0; f < j->nf; f++) {
            const float *xf = xr + (size_t)(j->f0 + f) * w->frame;
            for (int r = 0; r < d; r++) {
                const int len = class_len(w, r), np = len / 2;
                const float *z = xf + r;
                for (int m = 0; m < np + 3; m++) {
                    ze[m] = z[(ptrdiff_t)(2 * m - 6) * d];
                    zo[m] = z[(ptrdiff_t)(2 * m - 5) * d];
                }
                in_seq(ze, zo, u, np);
                for (int i = 0; i < NPT; i++) u[i] += np;
                if (len % 2) {   /* the pair over the last two: s_k = z[len - 8 + k] */
                    float e4[4], o4[4];
                    for (int a = 0; a < 4; a++) {
                        e4[a] = z[(ptrdiff_t)(len - 8 + 2 * a) * d];
                        o4[a] = z[(ptrdiff_t)(len - 7 + 2 * a) * d];
                    }
                    in_seq(e4, o4, u, 1);
                    for (int i = 0; i < NPT; i++) u[i] += 1;
                }
            }
        }
    }
}

/* Output transform of rows [task*per, ...). */
static void out_task(void *ctx, int task) {
    const wino_job *j = ctx;
    const qtts_conv_wino *w = j->w;
    const int c1 = QTTS_MIN(w->cout, (task + 1) * j->per), d = w->dil;
    float y0[ZCAP], y1[ZCAP];
    for (int co = task * j->per; co < c1; co++) {
        float *yr = j->y + (size_t)co * j->ldy;
        const float b = j->c->bias ? j->c->bias[co] : 0.0f;
        const float *m[NPT];
        for (int i = 0; i < NPT; i++) m[i] = j->m + ((size_t)i * w->cout + co) * j->q;
        for (int f = 0; f < j->nf; f++) {
            float *yf = yr + (size_t)(j->f0 + f) * w->frame;
            for (int r = 0; r < d; r++) {
                const int len = class_len(w, r), np = (len + 1) / 2;
                out_seq(y0, y1, m, b, np);
                float *z = yf + r;
                for (int p = 0; p < len / 2; p++) {
                    z[(ptrdiff_t)(2 * p) * d] = y0[p];
                    z[(ptrdiff_t)(2 * p + 1) * d] = y1[p];
                }
                if (len % 2) z[(ptrdiff_t)(len - 1) * d] = y1[np - 1];   /* its second output */
                for (int i = 0; i < NPT; i++) m[i] += np;
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
 * thread then reads all of them, from its own caches. */
#define OWN_MAX_BYTES (6u << 20)

/* Scratch floats per frame of a chunk, and frames per chunk (of `parts`
 * threads' chunks at once). */
static size_t frame_floats(const qtts_conv_wino *w) {
    return (size_t)NPT * (w->cin + w->cout) * w->npairs;
}

static int chunk_frames(const qtts_conv_wino *w, int frames, int parts) {
    const size_t fpc =
        QTTS_MAX((size_t)1, CHUNK_BYTES / (size_t)parts / (sizeof(float) * frame_floats(w)));
    return (int)QTTS_MIN((size_t)frames, fpc);
}

double qtts_conv_wino_macs(const qtts_conv_wino *w) {
    return (double)NPT * w->npairs * w->cout * w->cin;
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
                  .q = nf * w->npairs};
    j.u = buf;
    j.m = j.u + (size_t)NPT * cin * j.q;
    if (split) run_tasks(cin, 4, in_task, &j);
    else j.per = cin, in_task(&j, 0);
    const qtts_conv1d *pt[NPT];
    float *mi[NPT];
    const float *ui[NPT];
    for (int i = 0; i < NPT; i++) {
        pt[i] = &w->pt[i];
        mi[i] = j.m + (size_t)i * cout * j.q;
        ui[i] = j.u + (size_t)i * cin * j.q;
    }
    /* inside a job of the pool (!split) this runs on the calling thread */
    qtts_conv1d_run_many(NPT, pt, mi, (size_t)j.q, ui, (size_t)j.q, j.q, ws);
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
        (size_t)NPT * w->cout * w->cin * sizeof(float) > OWN_MAX_BYTES)
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
