/*
 * conv.c - qtts_conv1d_run and qtts_snake_run: blocking, threading and
 * instruction-set dispatch, plus the scalar table (conv_impl.h states the
 * accumulation order every path reproduces).
 *
 * Blocking (a Goto-style GEMM; M = output rows, N = time, K = taps*cin):
 * the work is cut into tasks of (row-group range) x (column-tile range),
 * claimed by the thread pool in any order. Inside a task:
 *
 *   for each K block of kc rows:
 *     pack the input panels xp[tile][kc][nr] of all the task's column tiles
 *       (each input row read once, left to right, rows prefetched ahead)
 *     for each column tile of the task:
 *       for each row group of the task:
 *         tile kernel: 8 x nr outputs += W[8][kc] x xp[tile]   (panel in L1,
 *                                                               weights in L2)
 *
 * Tables with `direct` tiles (AVX-512) skip the packing for every
 * full column tile: the tile reads its kc input rows where they lie, from
 * a table of row pointers (a reduction row is an input row at a tap's
 * shift, so the panel would only be a copy). Only a partial last tile is
 * packed (zero columns past n, nothing read past the row). The copies cost
 * 8% of a codec decode on a Zen 4; reading in place, with kc = 256 instead
 * of 128, ran the k7 convs 7% faster there (an interleaved A/B). The AVX2
 * tile, which reads its panel twice (two passes of 4 rows), ran 9% slower
 * in place, so it keeps its panels.
 *
 * The task's weight block (groups x 8 x kc), its accumulator tiles (groups
 * x tiles x 8 x nr) and its panels each get about a quarter of the L2, so
 * each weight block is read from memory once per task and each panel feeds
 * every row group of the task. Tasks split the rows first, then the
 * columns, until there are a few per thread. None of these choices changes
 * a result bit (conv_impl.h).
 *
 * Workspace: each running task takes one per-thread buffer (accumulators +
 * panel) from a qtts_conv_ws slot, claimed with an atomic bit mask; slots
 * grow on the calling thread before the job starts, so tasks never
 * allocate. If that allocation fails the conv still runs, on the caller,
 * one tile and one row group at a time with buffers on the stack: slower,
 * same bits.
 *
 * A conv converted to bf16 (qtts_conv1d_to_bf16) takes the same blocking
 * with the bf16 table's tile: its panels hold pairs of reduction rows as
 * bf16 words (packed by the table, which rounds), its weights pairs too,
 * and K blocks start at even rows.
 *
 * A conv on at most QTTS_CONV_NARROW_MAX columns goes to the table's
 * narrow kernel where it has one (conv_impl.h): the input is packed once
 * as xk[K][n] and the row groups are split over the pool; every weight is
 * read once. If the workspace for xk cannot be had, the tiles run instead.
 *
 * SnakeBeta runs row by row on the ISA's row function, rows split over the
 * pool.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../base/thread.h"
#include "conv_impl.h"
#include "kernels_impl.h"

#define MR QTTS_CONV_MR
#define TASKS_PER_THREAD 4
/* Below this many multiply-adds a conv runs on the caller alone. */
#define MIN_PARALLEL_MACS (256 * 1024)
/* Largest nr * kc of any table (the fallback's stack panel). */
#define MAX_PANEL (48 * 256)
#define MAX_NR 48
#define MAX_KC 256
#define PACK_AHEAD 8     /* rows a pack prefetches ahead */

/* ==== scalar table ======================================================== */

float qtts_snake_ref(float x, float ea, float ib) {
    const float u = ea * x;
    float s2;
    if (fabsf(u) <= QTTS_SNAKE_LIMIT) {
        const float j = nearbyintf(u * QTTS_SNAKE_2_PI);
        float r = fmaf(-j, QTTS_SNAKE_P1, u);
        r = fmaf(-j, QTTS_SNAKE_P2, r);
        r = fmaf(-j, QTTS_SNAKE_P3, r);
        const float z = r * r;
        if (((int)j & 1) == 0) {
            const float p = fmaf(fmaf(QTTS_SNAKE_S3, z, QTTS_SNAKE_S2), z, QTTS_SNAKE_S1);
            const float s = fmaf(r * z, p, r);
            s2 = s * s;
        } else {
            const float p = fmaf(fmaf(QTTS_SNAKE_C3, z, QTTS_SNAKE_C2), z, QTTS_SNAKE_C1);
            const float c = fmaf(z * z, p, fmaf(-0.5f, z, 1.0f));
            s2 = c * c;
        }
    } else {
        const float s = sinf(u);
        s2 = s * s;
    }
    return fmaf(ib, s2, x);
}

static void snake_row_ref(float *y, const float *x, float ea, float ib, int n) {
    for (int i = 0; i < n; i++) y[i] = qtts_snake_ref(x[i], ea, ib);
}

#define REF_NR 8

static void tile_ref(const qtts_conv_tile *t) {
    float acc[MR][REF_NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < REF_NR; j++) acc[r][j] = t->load ? t->acc[r * REF_NR + j] : 0.0f;
    for (int k = 0; k < t->kc; k++) {
        const float *w = t->w + (size_t)k * MR, *x = t->xp + (size_t)k * REF_NR;
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < REF_NR; j++) acc[r][j] = fmaf(w[r], x[j], acc[r][j]);
    }
    if (!t->y) {
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < REF_NR; j++) t->acc[r * REF_NR + j] = acc[r][j];
        return;
    }
    for (int r = 0; r < t->rows; r++) {
        float *yr = t->y + (size_t)r * t->ldy;
        const float b = t->bias ? t->bias[r] : 0.0f;
        for (int j = 0; j < t->cols; j++) {
            const float v = acc[r][j] + b;
            yr[j] = t->accumulate ? yr[j] + v : v;
        }
    }
}

const qtts_conv_isa qtts_conv_isa_ref = {"scalar", REF_NR, 256, tile_ref, snake_row_ref, NULL, false};

/* ==== dispatch ============================================================= */

/* kc of a `direct` table (its tiles read the input rows in place) on a
 * core with at least DIRECT_KC_L1 bytes of L1 data cache. A column tile's
 * kc input rows, 48 floats each at any alignment (up to 4 lines), are read
 * again by every row group of the task: at kc = 128 they take 32 KB, so on
 * a 48 KB L1 (Intel since Ice Lake; also AMD Zen 5, not measured) the row
 * groups after the first read them from L1. At the tables' 256 they come
 * from L2. On the Intel host, in paired rounds: `bench_codec` decode 0.966
 * (kc 128) and 0.958 (64); the engine's streamed codec 0.979 and 0.973 (8
 * rounds each). The Zen 4 (32 KB L1) ran its direct tiles faster at 256
 * than at 128, so smaller L1s keep the table's kc. kc does not change a
 * result bit (conv_impl.h). */
#define DIRECT_KC 128
#define DIRECT_KC_L1 (48l << 10)

int qtts_conv_isa_usable(const qtts_conv_isa **out, int cap) {
    int n = 0;
#if defined(__x86_64__)
    if (qtts_isa_usable(&qtts_isa_avx512) && n < cap) out[n++] = &qtts_conv_isa_avx512;
    if (qtts_isa_usable(&qtts_isa_avx2) && n < cap) out[n++] = &qtts_conv_isa_avx2;
#endif
#if defined(__aarch64__)
    if (n < cap) out[n++] = &qtts_conv_isa_neon;   /* NEON is baseline AArch64 */
#endif
    if (n < cap) out[n++] = &qtts_conv_isa_ref;
    return n;
}

static qtts_conv_isa active;   /* the best table, with this CPU's kc (qtts_conv_kc_for) */
static size_t l2_bytes;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

int qtts_conv_kc_for(const qtts_conv_isa *isa, long l1d) {
    return isa->direct && l1d >= DIRECT_KC_L1 ? DIRECT_KC : isa->kc;
}

static void pick_active(void) {
    const qtts_conv_isa *t[4];
    qtts_conv_isa_usable(t, 4);
    active = *t[0];
    active.kc = qtts_conv_kc_for(t[0], sysconf(_SC_LEVEL1_DCACHE_SIZE));
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    l2_bytes = l2 >= (64 << 10) && l2 <= (64 << 20) ? (size_t)l2 : (size_t)1 << 20;
}

const qtts_conv_isa *qtts_conv_isa_active(void) {
    pthread_once(&active_once, pick_active);
    return &active;
}

const char *qtts_conv_isa_name(void) { return qtts_conv_isa_active()->name; }

/* The bf16 table this CPU runs, or NULL; looked up once (CPUID is slow
 * under some hypervisors, and every bf16 conv asks). */
static const qtts_conv_bf16_isa *bf16_active;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

static void pick_bf16(void) {
#if defined(__x86_64__)
    if (qtts_cpu_avx512bf16()) bf16_active = &qtts_conv_bf16_avx512;
#endif
#if defined(__aarch64__)
    if (qtts_cpu_arm_bf16()) bf16_active = &qtts_conv_bf16_neon;
#endif
}

static const qtts_conv_bf16_isa *bf16_table(void) {
    pthread_once(&bf16_once, pick_bf16);
    return bf16_active;
}

bool qtts_conv_bf16_usable(void) { return bf16_table() != NULL; }

/* fp32 -> bf16, round to nearest even (NaN stays a quiet NaN), as
 * VCVTNE2PS2BF16 rounds. */
static uint32_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

bool qtts_conv1d_to_bf16(qtts_conv1d *c) {
    if (!c->w || !bf16_table()) return false;
    const int K = c->taps * c->cin, K2 = (K + 1) / 2, groups = (c->cout + MR - 1) / MR;
    uint32_t *wb = qtts_aligned_alloc(sizeof(uint32_t) * (size_t)groups * K2 * MR);
    if (!wb) return false;
    for (int g = 0; g < groups; g++)
        for (int p = 0; p < K2; p++)
            for (int r = 0; r < MR; r++) {
                const float *wg = c->w + (size_t)g * K * MR;
                const uint32_t lo = to_bf16(wg[(size_t)2 * p * MR + r]);
                const uint32_t hi = 2 * p + 1 < K ? to_bf16(wg[(size_t)(2 * p + 1) * MR + r]) : 0;
                wb[((size_t)g * K2 + p) * MR + r] = lo | hi << 16;
            }
    qtts_free(c->w);
    c->w = NULL;
    c->wb = wb;
    return true;
}

/* ==== workspace ============================================================ */

struct qtts_conv_ws {
    _Atomic uint64_t busy;            /* bit s: slot s is held by a running task */
    qtts_conv_ws *part[QTTS_MAX_THREADS];   /* qtts_conv_ws_part */
    float *buf[QTTS_MAX_THREADS];
    size_t cap[QTTS_MAX_THREADS];     /* floats */
    float *scratch;                   /* qtts_conv_ws_scratch */
    size_t scratch_cap;
};

bool qtts_conv_wino_reserve(qtts_conv_ws *ws, size_t floats) {
    return !floats || qtts_conv_ws_scratch(ws, floats) != NULL;
}

float *qtts_conv_ws_scratch(qtts_conv_ws *ws, size_t floats) {
    if (!ws) return NULL;
    if (ws->scratch_cap < floats) {
        qtts_free(ws->scratch);
        ws->scratch = qtts_aligned_alloc(sizeof(float) * floats);
        ws->scratch_cap = ws->scratch ? floats : 0;
    }
    return ws->scratch;
}

qtts_conv_ws *qtts_conv_ws_new(void) {
    qtts_conv_ws *ws = qtts_calloc(1, sizeof(*ws));
    if (ws) atomic_init(&ws->busy, 0);
    return ws;
}

qtts_conv_ws *qtts_conv_ws_part(qtts_conv_ws *ws, int p) {
    if (!ws || p < 0 || p >= QTTS_MAX_THREADS) return NULL;
    if (!ws->part[p]) ws->part[p] = qtts_conv_ws_new();
    return ws->part[p];
}

void qtts_conv_ws_free(qtts_conv_ws *ws) {
    if (!ws) return;
    for (int i = 0; i < QTTS_MAX_THREADS; i++) qtts_conv_ws_free(ws->part[i]);
    for (int i = 0; i < QTTS_MAX_THREADS; i++) qtts_free(ws->buf[i]);
    qtts_free(ws->scratch);
    qtts_free(ws);
}

/* Makes slots 0..n-1 hold at least floats each; false on allocation failure. */
static bool ws_reserve(qtts_conv_ws *ws, int n, size_t floats) {
    for (int i = 0; i < n; i++) {
        if (ws->cap[i] >= floats) continue;
        qtts_free(ws->buf[i]);
        ws->buf[i] = qtts_aligned_alloc(sizeof(float) * floats);
        ws->cap[i] = ws->buf[i] ? floats : 0;
        if (!ws->buf[i]) return false;
    }
    return true;
}

static int slot_claim(qtts_conv_ws *ws, int n) {
    for (;;) {
        uint64_t b = atomic_load_explicit(&ws->busy, memory_order_relaxed);
        for (int s = 0; s < n; s++)
            if (!(b & (1ull << s)) &&
                atomic_compare_exchange_weak_explicit(&ws->busy, &b, b | (1ull << s),
                                                      memory_order_acquire, memory_order_relaxed))
                return s;
    }
}

static void slot_release(qtts_conv_ws *ws, int s) {
    atomic_fetch_and_explicit(&ws->busy, ~(1ull << s), memory_order_release);
}

/* ==== the conv ============================================================= */

typedef struct {
    const qtts_conv_isa *isa;         /* the fp32 table, or NULL with bf */
    const qtts_conv_bf16_isa *bf;     /* the bf16 table when c has bf16 weights */
    int nr;                           /* the table's tile columns */
    void (*tile)(const qtts_conv_tile *t);
    const qtts_conv1d *c;
    float *y;
    size_t ldy;
    const float *x;
    size_t ldx;
    int n, K, nkb, ngroups, ntiles, kc;
    int gpt, tpt, nmc;                /* groups / tiles per task, group chunks */
    bool accumulate;
    qtts_conv_ws *ws;
    int nslots;
} conv_job;

/* Input row kk of a conv's reduction (channel ci shifted left by
 * (taps-1-tap)*dil columns), as the panels read it. */
static const float *reduction_row(const qtts_conv1d *c, const float *x, size_t ldx, int kk) {
    const int tap = kk / c->cin, ci = kk % c->cin;
    return x + (size_t)ci * ldx - (ptrdiff_t)(c->taps - 1 - tap) * c->dil;
}

/* Rows far apart: a pack fetches the span of row kk (PACK_AHEAD rows on)
 * that column tiles t0..t1-1 will read while it copies the current row. */
static void prefetch_row(const conv_job *j, int kk, int t0, int t1) {
    const int c0 = t0 * j->nr, c1 = QTTS_MIN(t1 * j->nr, j->n);
    const char *p = (const char *)(reduction_row(j->c, j->x, j->ldx, kk) + c0);
    for (int b = 0; b < (c1 - c0) * (int)sizeof(float); b += 64) __builtin_prefetch(p + b);
}

/* Panels of rows kk0..kk0+kc-1 for column tiles t0..t1-1: xp[tile][kc][nr],
 * zero past column n. Each input row is read once, left to right across
 * the tiles (sequential for the prefetchers, one page walk per row). */
static void pack_panels(const conv_job *j, float *xp, int kk0, int kc, int t0, int t1) {
    const int nr = j->nr;
    const size_t tile_floats = (size_t)kc * nr;
    for (int i = 0; i < kc; i++) {
        const float *src = reduction_row(j->c, j->x, j->ldx, kk0 + i);
        float *dst = xp + (size_t)i * nr;
        if (i + PACK_AHEAD < kc) prefetch_row(j, kk0 + i + PACK_AHEAD, t0, t1);
        for (int ti = t0; ti < t1; ti++, dst += tile_floats) {
            const int col = ti * nr, cols = QTTS_MIN(nr, j->n - col);
            if (cols == nr) {   /* fixed sizes, so that the copies are inlined */
                if (nr == 48) memcpy(dst, src + col, sizeof(float) * 48);
                else if (nr == 24) memcpy(dst, src + col, sizeof(float) * 24);
                else memcpy(dst, src + col, sizeof(float) * (size_t)nr);
            } else {
                memcpy(dst, src + col, sizeof(float) * (size_t)cols);
                memset(dst + cols, 0, sizeof(float) * (size_t)(nr - cols));
            }
        }
    }
}

/* The bf16 form of pack_panels: pair rows p of rows kk0 + 2p, kk0 + 2p + 1
 * (the second zero past K), xb[tile][(kc+1)/2][nr] words. */
static void pack_panels_bf16(const conv_job *j, uint32_t *xb, int kk0, int kc, int t0, int t1) {
    const int nr = j->nr;
    const size_t tile_words = (size_t)((kc + 1) / 2) * nr;
    for (int i = 0; i < kc; i += 2) {
        const float *src[2] = {NULL, NULL};
        for (int h = 0; h < 2 && i + h < kc; h++) {
            src[h] = reduction_row(j->c, j->x, j->ldx, kk0 + i + h);
            if (i + h + PACK_AHEAD < kc) prefetch_row(j, kk0 + i + h + PACK_AHEAD, t0, t1);
        }
        uint32_t *dst = xb + (size_t)(i / 2) * nr;
        for (int ti = t0; ti < t1; ti++, dst += tile_words) {
            const int col = ti * nr, cols = QTTS_MIN(nr, j->n - col);
            j->bf->pack_pair(dst, src[0] + col, src[1] ? src[1] + col : NULL, cols, nr);
        }
    }
}

/* Groups g0..g1-1 x tiles t0..t1-1 with accumulators acc (groups x tiles
 * x 8 x nr) and panels xp (tiles x kc x nr; bf16: words, half as many rows). */
static void conv_block(const conv_job *j, int g0, int g1, int t0, int t1, float *acc, float *xp) {
    const qtts_conv1d *c = j->c;
    const int nr = j->nr, kc = j->kc, ntl = t1 - t0, K2 = (j->K + 1) / 2;
    for (int kb = 0; kb < j->nkb; kb++) {
        const int kk0 = kb * kc, kcb = QTTS_MIN(kc, j->K - kk0), kp = (kcb + 1) / 2;
        const bool last = kb == j->nkb - 1;
        /* direct tiles read the input rows in place; only a partial last
         * tile still gets a panel (nothing is read past column n) */
        const bool direct = !j->bf && j->isa->direct;
        const int tp = direct ? QTTS_MAX(t0, j->n / nr) : t0;
        const float *rowp[MAX_KC];
        if (direct)
            for (int i = 0; i < kcb; i++) rowp[i] = reduction_row(c, j->x, j->ldx, kk0 + i);
        if (j->bf) pack_panels_bf16(j, (uint32_t *)xp, kk0, kcb, t0, t1);
        else if (tp < t1) pack_panels(j, xp, kk0, kcb, tp, t1);
        for (int ti = t0; ti < t1; ti++) {
            const int col = ti * nr, cols = QTTS_MIN(nr, j->n - col);
            const bool dt = direct && ti < tp;
            /* the fields every group of this tile shares; the loop sets the rest
             * (a fresh initializer per tile call cleared the struct each time) */
            qtts_conv_tile t = {.kc = j->bf ? kp : kcb, .load = kb > 0, .cols = cols};
            if (last) t.ldy = j->ldy, t.accumulate = j->accumulate;
            for (int g = g0; g < g1; g++) {
                const int row = g * MR;
                t.acc = acc + ((size_t)(g - g0) * ntl + (ti - t0)) * MR * nr;
                t.rows = QTTS_MIN(MR, c->cout - row);
                t.w_next = NULL;
                const int gn = g + 1 < g1 ? g + 1 : -1;
                if (j->bf) {
                    t.wb = c->wb + ((size_t)g * K2 + kk0 / 2) * MR;
                    t.xb = (const uint32_t *)xp + (size_t)(ti - t0) * kp * nr;
                    if (gn >= 0) t.w_next = c->wb + ((size_t)gn * K2 + kk0 / 2) * MR;
                } else {
                    t.w = c->w + ((size_t)g * j->K + kk0) * MR;
                    if (dt) t.xr = rowp, t.xcol = col;
                    else t.xp = xp + (size_t)(ti - tp) * kcb * nr;
                    if (gn >= 0) t.w_next = c->w + ((size_t)gn * j->K + kk0) * MR;
                }
                if (last) {
                    t.y = j->y + (size_t)row * j->ldy + col;
                    t.bias = c->bias ? c->bias + row : NULL;
                }
                j->tile(&t);
            }
        }
    }
}

static size_t task_floats(const conv_job *j) {
    return (size_t)j->gpt * j->tpt * MR * j->nr + (size_t)j->tpt * j->kc * j->nr;
}

static void conv_task(void *ctx, int task) {
    const conv_job *j = ctx;
    const int mc = task % j->nmc, nc = task / j->nmc;
    const int g0 = mc * j->gpt, g1 = QTTS_MIN(j->ngroups, g0 + j->gpt);
    const int t0 = nc * j->tpt, t1 = QTTS_MIN(j->ntiles, t0 + j->tpt);
    const int s = slot_claim(j->ws, j->nslots);
    float *acc = j->ws->buf[s];
    conv_block(j, g0, g1, t0, t1, acc, acc + (size_t)j->gpt * j->tpt * MR * j->nr);
    slot_release(j->ws, s);
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* A conv on few columns through a table's narrow kernel (conv_impl.h). */
typedef struct {
    void (*narrow)(const qtts_conv_narrow *t, int g0, int g1);
    qtts_conv_narrow t;
    int ngroups, gpt;
} narrow_job;

static void narrow_task(void *ctx, int task) {
    const narrow_job *j = ctx;
    const int g0 = task * j->gpt;
    j->narrow(&j->t, g0, QTTS_MIN(j->ngroups, g0 + j->gpt));
}

/* false (nothing done) when the workspace for the packed input cannot be
 * had. bf: the bf16 table when c has bf16 weights, else NULL. */
static bool narrow_run(const qtts_conv_isa *isa, const qtts_conv_bf16_isa *bf,
                       const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                       int n, bool accumulate, qtts_conv_ws *ws) {
    const int K = c->taps * c->cin, rows = bf ? (K + 1) / 2 : K;
    if (!ws || !ws_reserve(ws, 1, (size_t)rows * n)) return false;
    narrow_job j = {.narrow = bf ? bf->narrow : isa->narrow,
                    .t = {.K = rows, .cols = n, .cout = c->cout, .y = y, .ldy = ldy,
                          .bias = c->bias, .accumulate = accumulate},
                    .ngroups = ceil_div(c->cout, MR)};
    if (bf) {
        /* xb[p][n]: the bf16 pair of reduction rows 2p, 2p + 1 (zero past K) */
        uint32_t *xb = (uint32_t *)ws->buf[0];
        for (int p = 0; p < rows; p++)
            bf->pack_pair(xb + (size_t)p * n, reduction_row(c, x, ldx, 2 * p),
                          2 * p + 1 < K ? reduction_row(c, x, ldx, 2 * p + 1) : NULL, n, n);
        j.t.wb = c->wb, j.t.xb = xb;
    } else {
        /* xk[kk][n] */
        float *xk = ws->buf[0];
        for (int kk = 0; kk < K; kk++)
            memcpy(xk + (size_t)kk * n, reduction_row(c, x, ldx, kk), sizeof(float) * (size_t)n);
        j.t.w = c->w, j.t.xk = xk;
    }
    const int threads = qtts_threads_count();
    const bool parallel = threads > 1 && (double)c->cout * K * n >= MIN_PARALLEL_MACS;
    /* tasks of whole 8-group chunks (the kernels' widest), a few per thread */
    const int tasks0 = parallel ? TASKS_PER_THREAD * threads : 1;
    j.gpt = QTTS_MAX(1, ceil_div(ceil_div(j.ngroups, tasks0), 8)) * 8;
    const int tasks = ceil_div(j.ngroups, j.gpt);
    if (parallel && tasks > 1) qtts_parallel_for(tasks, narrow_task, &j);
    else
        for (int t = 0; t < tasks; t++) narrow_task(&j, t);
    return true;
}

/* The blocking and task split of c on n columns (the tiles' path): j gets
 * everything but y, x and ws; returns the task count, and *parallel
 * whether they go to the pool. */
static int plan_tiles(conv_job *j, const qtts_conv_isa *isa, const qtts_conv_bf16_isa *bf,
                      const qtts_conv1d *c, size_t ldy, size_t ldx, int n, bool accumulate,
                      bool *parallel) {
    const int nr = bf ? bf->nr : isa->nr, kc = bf ? bf->kc : isa->kc;
    *j = (conv_job){.isa = bf ? NULL : isa, .bf = bf, .nr = nr, .tile = bf ? bf->tile : isa->tile,
                    .c = c, .ldy = ldy, .ldx = ldx, .n = n,
                    .K = c->taps * c->cin, .ngroups = ceil_div(c->cout, MR),
                    .ntiles = ceil_div(n, nr), .accumulate = accumulate};
    j->nkb = ceil_div(j->K, kc);
    j->kc = kc;
    /* Weight block (groups x 8 x kc) in a quarter of the L2. */
    const size_t l2 = l2_bytes;
    int gpt = (int)QTTS_MAX((size_t)1, l2 / 4 / (sizeof(float) * MR * (size_t)QTTS_MIN(kc, j->K)));
    gpt = QTTS_MIN(gpt, j->ngroups);
    int nmc = ceil_div(j->ngroups, gpt);
    /* accumulators in a quarter of the L2, panels in another */
    int tpt = (int)QTTS_MAX((size_t)1, l2 / 4 / (sizeof(float) * MR * nr * (size_t)gpt));
    tpt = QTTS_MIN(tpt, (int)QTTS_MAX((size_t)1, l2 / 4 / (sizeof(float) * nr * (size_t)QTTS_MIN(kc, j->K))));
    tpt = QTTS_MIN(tpt, j->ntiles);
    int nnc = ceil_div(j->ntiles, tpt);
    const int threads = qtts_threads_count();
    const double macs = (double)c->cout * j->K * n;
    *parallel = threads > 1 && macs >= MIN_PARALLEL_MACS;
    /* Enough tasks that a slow thread does not hold the others up: split
     * the rows first (the weights are still read once), down to 64 rows a
     * task, then the columns (each column chunk reads its weights again). */
    while (*parallel && nmc * nnc < TASKS_PER_THREAD * threads) {
        if (gpt >= 16) nmc = ceil_div(j->ngroups, gpt = ceil_div(gpt, 2));
        else if (tpt > 1) nnc = ceil_div(j->ntiles, tpt = ceil_div(tpt, 2));
        else if (gpt > 1) nmc = ceil_div(j->ngroups, gpt = ceil_div(gpt, 2));
        else break;
    }
    j->gpt = gpt = ceil_div(j->ngroups, nmc); /* balance the chunks */
    j->tpt = tpt = ceil_div(j->ntiles, nnc);
    j->nmc = nmc = ceil_div(j->ngroups, gpt);
    nnc = ceil_div(j->ntiles, tpt);
    return nmc * nnc;
}

/* Every tile of j, one group at a time on the stack (when no workspace
 * can be had): the same bits. */
static void run_unbuffered(const conv_job *j) {
    _Alignas(64) float acc[MR * MAX_NR];
    _Alignas(64) float xp[MAX_PANEL];
    QTTS_ASSERT(j->nr <= MAX_NR && (size_t)j->nr * j->kc <= MAX_PANEL);
    for (int ti = 0; ti < j->ntiles; ti++)
        for (int g = 0; g < j->ngroups; g++) conv_block(j, g, g + 1, ti, ti + 1, acc, xp);
}

/* Whether a conv on n columns goes to the table's narrow kernel. */
static bool narrow_applies(const qtts_conv_isa *isa, const qtts_conv_bf16_isa *bf, int n) {
    return n <= QTTS_CONV_NARROW_MAX && (bf ? bf->narrow : isa->narrow);
}

/* The narrow kernel where it applies; true when it ran. */
static bool try_narrow(const qtts_conv_isa *isa, const qtts_conv_bf16_isa *bf, const qtts_conv1d *c,
                       float *y, size_t ldy, const float *x, size_t ldx, int n, bool accumulate,
                       qtts_conv_ws *ws) {
    if (!narrow_applies(isa, bf, n)) return false;
    qtts_conv_ws *own = ws ? NULL : qtts_conv_ws_new();
    const bool done = narrow_run(isa, bf, c, y, ldy, x, ldx, n, accumulate, ws ? ws : own);
    qtts_conv_ws_free(own);
    return done;
}

void qtts_conv1d_run_isa(const qtts_conv_isa *isa, const qtts_conv1d *c, float *y, size_t ldy,
                         const float *x, size_t ldx, int n, bool accumulate, qtts_conv_ws *ws) {
    if (n <= 0) return;
    qtts_conv_isa_active();   /* l2_bytes */
    /* bf16 weights exist only where bf16_table() is usable (to_bf16) */
    const qtts_conv_bf16_isa *bf = c->wb ? bf16_table() : NULL;
    QTTS_ASSERT(bf || c->w);
    if (try_narrow(isa, bf, c, y, ldy, x, ldx, n, accumulate, ws)) return;
    conv_job j;
    bool parallel;
    const int tasks = plan_tiles(&j, isa, bf, c, ldy, ldx, n, accumulate, &parallel);
    j.y = y, j.x = x;
    j.nslots = parallel ? QTTS_MIN(tasks, qtts_threads_count()) : 1;
    qtts_conv_ws *own = NULL;
    if (!ws) ws = own = qtts_conv_ws_new();
    j.ws = ws;
    if (!ws || !ws_reserve(ws, j.nslots, task_floats(&j))) run_unbuffered(&j);   /* out of memory */
    else if (!parallel || tasks == 1)
        for (int t = 0; t < tasks; t++) conv_task(&j, t);
    else qtts_parallel_for(tasks, conv_task, &j);
    qtts_conv_ws_free(own);
}

/* Several convs' tasks in one split: task t is task t % per of conv t / per. */
typedef struct {
    const conv_job *jobs;
    int per;
} many_job;

static void many_task(void *ctx, int t) {
    const many_job *m = ctx;
    conv_task((void *)&m->jobs[t / m->per], t % m->per);
}

void qtts_conv1d_run_many_isa(const qtts_conv_isa *isa, int count, const qtts_conv1d *const *c,
                              float *const *y, size_t ldy, const float *const *x, size_t ldx,
                              int n, qtts_conv_ws *ws) {
    QTTS_ASSERT(count >= 0 && count <= QTTS_CONV_MANY_MAX);
    if (n <= 0 || count == 0) return;
    qtts_conv_isa_active();   /* l2_bytes */
    bool same = true;
    for (int i = 0; i < count; i++)
        same = same && c[i]->w && !c[i]->wb && c[i]->cout == c[0]->cout &&
               c[i]->cin == c[0]->cin && c[i]->taps == c[0]->taps;
    conv_job jobs[QTTS_CONV_MANY_MAX];
    bool parallel = false;
    int per = 0;
    if (same && !narrow_applies(isa, NULL, n)) {
        per = plan_tiles(&jobs[0], isa, NULL, c[0], ldy, ldx, n, false, &parallel);
        parallel = parallel || (qtts_threads_count() > 1 && count * per > 1 &&
                                count * (double)c[0]->cout * jobs[0].K * n >= MIN_PARALLEL_MACS);
    }
    if (!parallel || count == 1) {   /* one by one: the narrow kernel, bf16, or too small to split */
        for (int i = 0; i < count; i++)
            qtts_conv1d_run_isa(isa, c[i], y[i], ldy, x[i], ldx, n, false, ws);
        return;
    }
    qtts_conv_ws *own = NULL;
    if (!ws) ws = own = qtts_conv_ws_new();
    const int nslots = QTTS_MIN(count * per, qtts_threads_count());
    for (int i = 0; i < count; i++) {
        if (i) jobs[i] = jobs[0];
        jobs[i].c = c[i], jobs[i].y = y[i], jobs[i].x = x[i];
        jobs[i].ws = ws, jobs[i].nslots = nslots;
    }
    if (!ws || !ws_reserve(ws, nslots, task_floats(&jobs[0])))
        for (int i = 0; i < count; i++) run_unbuffered(&jobs[i]);   /* out of memory */
    else {
        many_job m = {jobs, per};
        qtts_parallel_for(count * per, many_task, &m);
    }
    qtts_conv_ws_free(own);
}

void qtts_conv1d_run_many(int count, const qtts_conv1d *const *c, float *const *y, size_t ldy,
                          const float *const *x, size_t ldx, int n, qtts_conv_ws *ws) {
    qtts_conv1d_run_many_isa(qtts_conv_isa_active(), count, c, y, ldy, x, ldx, n, ws);
}

void qtts_conv1d_run(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                     int n, bool accumulate, qtts_conv_ws *ws) {
    qtts_conv1d_run_isa(qtts_conv_isa_active(), c, y, ldy, x, ldx, n, accumulate, ws);
}

/* ==== SnakeBeta ============================================================ */

typedef struct {
    const qtts_conv_isa *isa;
    float *y;
    size_t ldy;
    const float *x;
    size_t ldx;
    const float *ea, *ib;
    int channels, n, per;
} snake_job;

static void snake_task(void *ctx, int t) {
    const snake_job *j = ctx;
    const int c1 = QTTS_MIN(j->channels, (t + 1) * j->per);
    for (int c = t * j->per; c < c1; c++)
        j->isa->snake(j->y + (size_t)c * j->ldy, j->x + (size_t)c * j->ldx, j->ea[c], j->ib[c],
                      j->n);
}

void qtts_snake_run_isa(const qtts_conv_isa *isa, float *y, size_t ldy, const float *x,
                        size_t ldx, const float *ea, const float *ib, int channels, int n) {
    if (channels <= 0 || n <= 0) return;
    const int threads = qtts_threads_count();
    snake_job j = {isa, y, ldy, x, ldx, ea, ib, channels, n, channels};
    if (threads > 1 && (double)channels * n >= 32768) {
        j.per = ceil_div(channels, TASKS_PER_THREAD * threads);
        qtts_parallel_for(ceil_div(channels, j.per), snake_task, &j);
    } else {
        snake_task(&j, 0);
    }
}

void qtts_snake_run(float *y, size_t ldy, const float *x, size_t ldx, const float *ea,
                    const float *ib, int channels, int n) {
    qtts_snake_run_isa(qtts_conv_isa_active(), y, ldy, x, ldx, ea, ib, channels, n);
}
