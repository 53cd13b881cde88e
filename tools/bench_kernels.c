/*
 * bench_kernels.c - matvec speed per weight format and thread count, as
 * GB/s of weight bytes read, next to a memory-bandwidth probe run in the
 * same process (`make bench-kernels`, BENCH_ARGS="..." to pass options).
 *
 *   probe    streaming read (qtts_stream_read: 16-byte loads, burst
 *            prefetch 4 KB ahead, the fastest plain read) of the very
 *            bytes a case then reads, run just before each run of it: the
 *            memory-read floor, measured under the same load.
 *   shapes   one x row (decode) against the 0.6B talker / code-predictor
 *            matrices: q [2048,1024], k/v [1024,1024], o [1024,2048],
 *            gate/up [3072,1024], down [1024,3072], codec head [3072,1024].
 *            Each case cycles through enough copies of W (--set MB) that
 *            the weights come from DRAM, as they do in a decode step; the
 *            "hot" column reads one copy repeatedly (L2/L3), the compute
 *            ceiling of each kernel.
 *   frame    one talker step (28 layers + codec head) and 15 code-predictor
 *            passes (5 layers + one head each) on distinct synthetic weights
 *            of the real shapes, split into jobs as the engine splits them
 *            (q/k/v one job, gate/up one with the SwiGLU): milliseconds per
 *            frame against the floor (the probe reading the talker's
 *            weights once and the CP's 15 times) at the same thread count.
 *
 * Every figure is the median of --runs runs. Weights are synthetic (values
 * do not change the speed of these kernels); the kernels are the ones
 * qtts_matmul uses (--isa NAME picks another compiled path).
 *
 * --rows N (1-32) runs every matmul on N x rows at once (the batched
 * kernels a server's B = N step uses, or a prefill chunk's); GB/s then
 * still counts each weight byte once.
 *
 *   bench_kernels [--threads 1,2] [--runs 7] [--set 256] [--frames 5]
 *                 [--formats f32,bf16,q8_0,q4_0] [--no-frame] [--isa NAME]
 *                 [--rows N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "base/base.h"
#include "base/thread.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant.h"

#define MAX_RUNS 64
#define MAX_ROWS 32 /* the talker prefill chunk (QTTS_TALKER_ROWS) */

static int g_rows = 1; /* x rows per matmul (--rows) */


static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ==== the bandwidth probe ================================================ */

typedef struct {
    const uint64_t *buf;
    size_t words_per_task;
    qtts_steal *steal;
    uint64_t sums[256];
} probe_job;

/* Each thread streams one contiguous home range of the 256 pieces, as the
 * matmuls split their rows (qtts_steal), with qtts_stream_read (the
 * library's fastest plain read: 16-byte loads, 2 KB blocks prefetched
 * whole ahead). Pieces dealt out one at a time read 5-15% slower on the
 * EPYC host (`qwen3-tts bench`'s probe, app/bench.c). */
static void probe_task(void *ctx, int p) {
    probe_job *j = ctx;
    int a, b;
    while (qtts_steal_next(j->steal, p, &a, &b))
        for (int t = a; t < b; t++)
            j->sums[t] = qtts_stream_read(j->buf + (size_t)t * j->words_per_task, j->words_per_task * 8);
}

/* Seconds to read `bytes` (rounded down to 256 pieces) with the current pool. */
static double probe_once(const void *buf, size_t bytes) {
    qtts_steal steal;
    const int threads = qtts_threads_count();
    qtts_steal_init(&steal, 256, threads);
    probe_job j = {buf, bytes / 8 / 256 / 16 * 16, &steal, {0}};
    double t0 = qtts_now();
    qtts_parallel_for(threads, probe_task, &j);
    return qtts_now() - t0;
}

/* ==== synthetic weights ================================================== */

/* Fill a [rows, cols] matrix of dtype dt at p with plausible values. */
static void fill_mat(uint8_t *p, qtts_dtype dt, int rows, int cols) {
    const size_t rb = qtts_mat_row_bytes(dt, cols), n = rb * rows;
    if (dt == QTTS_DT_F32 || dt == QTTS_DT_BF16) {
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            float v = ((int)(next_rand() >> 40) - (1 << 23)) * (0.05f / (1 << 23));
            if (dt == QTTS_DT_F32) memcpy(p + 4 * i, &v, 4);
            else {
                uint16_t h = qtts_f32_to_bf16(v);
                memcpy(p + 2 * i, &h, 2);
            }
        }
        return;
    }
    /* quantized: random plain blocks, packed row by row (the layout the
     * kernels read; the same bytes per row for these shapes) */
    (void)n;
    uint8_t *plain = qtts_malloc(rb);
    QTTS_ASSERT(plain && qtts_packed_row_bytes(dt == QTTS_DT_Q4_0, cols) == rb);
    const size_t bb = dt == QTTS_DT_Q8_0 ? sizeof(qtts_block_q8_0) : sizeof(qtts_block_q4_0);
    const qtts_half d = qtts_f32_to_half(0.002f);
    for (int r = 0; r < rows; r++) {
        for (size_t i = 0; i < rb; i += 8) {
            uint64_t v = next_rand();
            memcpy(plain + i, &v, QTTS_MIN(8, rb - i));
        }
        for (size_t i = 0; i < rb; i += bb) {
            memcpy(plain + i, &d, 2);
            if (dt == QTTS_DT_Q8_0)
                for (size_t k = 2; k < bb; k++)
                    if (plain[i + k] == 0x80) plain[i + k] = 0x81;   /* -128 is not a valid code */
        }
        qtts_pack_row(plain, p + (size_t)r * rb, cols, dt == QTTS_DT_Q4_0);
    }
    qtts_free(plain);
}

static bool is_quant(qtts_dtype dt) { return dt == QTTS_DT_Q8_0 || dt == QTTS_DT_Q4_0; }

/* ==== matvec per shape =================================================== */

typedef struct {
    const char *name;
    int rows, cols;
} shape;

static const shape shapes[] = {
    {"q     [2048,1024]", 2048, 1024}, {"k/v   [1024,1024]", 1024, 1024},
    {"o     [1024,2048]", 1024, 2048}, {"gate  [3072,1024]", 3072, 1024},
    {"down  [1024,3072]", 1024, 3072}, {"head  [3072,1024]", 3072, 1024},
};

static const qtts_isa *isa;

typedef struct {
    double gbs;      /* median GB/s of weight reads */
    double ratio;    /* median of (kernel GB/s / probe GB/s), each run next to its probe */
} result;

/* y = W x over copies of W filling set_bytes (set_bytes 0: one copy read
 * 20 times, from the caches; no probe). Each run is preceded by a probe
 * reading the same bytes, so the ratio compares like with like on a
 * machine whose load changes. */
static result bench_shape(uint8_t *arena, size_t set_bytes, const shape *s, qtts_dtype dt, int runs) {
    const size_t wb = qtts_mat_row_bytes(dt, s->cols) * s->rows;
    int copies = (int)(set_bytes / wb);
    if (copies < 1) copies = 1;
    const int reps = set_bytes == 0 ? 20 : 1;
    for (int c = 0; c < copies; c++) fill_mat(arena + (size_t)c * wb, dt, s->rows, s->cols);
    float *x = qtts_aligned_alloc(sizeof(float) * s->cols * g_rows),
          *y = qtts_aligned_alloc(sizeof(float) * s->rows * g_rows);
    for (int i = 0; i < s->cols * g_rows; i++) x[i] = (float)((int)(next_rand() % 2001) - 1000) / 1000.0f;
    double gbs[MAX_RUNS], ratio[MAX_RUNS];
    for (int r = -1; r < runs; r++) {   /* run -1 warms up */
        const double tp = set_bytes ? probe_once(arena, wb * copies) : 0;
        double t0 = qtts_now();
        for (int k = 0; k < reps; k++)
            for (int c = 0; c < copies; c++) {
                const qtts_mat W = {.data = arena + (size_t)c * wb, .dtype = dt, .rows = s->rows,
                                     .cols = s->cols, .packed = is_quant(dt)};
                qtts_matmul_isa(isa, y, x, g_rows, &W, NULL);
            }
        const double t = qtts_now() - t0;
        if (r >= 0) {
            gbs[r] = (double)wb * copies * reps / t / 1e9;
            ratio[r] = tp / t;
        }
    }
    qtts_free(x);
    qtts_free(y);
    return (result){bench_median(gbs, runs), set_bytes ? bench_median(ratio, runs) : 0};
}

/* ==== one frame ========================================================== */

typedef struct {
    qtts_mat m[7];     /* q, k, v, o, gate, up, down */
} layer;

typedef struct {
    qtts_dtype dt;
    layer talker[28], cp[5];
    qtts_mat head, cp_head[15];
    uint8_t *mem;
    size_t bytes_talker, bytes_cp_pass;   /* weights read by one talker step / one CP pass */
} model;

static bool model_new(model *m, qtts_dtype dt) {
    static const int lr[7] = {2048, 1024, 1024, 1024, 3072, 3072, 1024};
    static const int lc[7] = {1024, 1024, 1024, 2048, 1024, 1024, 3072};
    size_t layer_bytes = 0;
    for (int i = 0; i < 7; i++) layer_bytes += qtts_mat_row_bytes(dt, lc[i]) * lr[i];
    const size_t head_bytes = qtts_mat_row_bytes(dt, 1024) * 3072, cph = qtts_mat_row_bytes(dt, 1024) * 2048;
    const size_t total = 33 * layer_bytes + head_bytes + 15 * cph;
    memset(m, 0, sizeof *m);
    m->dt = dt;
    if (!(m->mem = qtts_aligned_alloc(total))) return false;
    uint8_t *p = m->mem;
    /* the code predictor's layers as the engine marks them (talker.c) */
    const bool cp_resident = qtts_mat_resident_fits(5 * (uint64_t)layer_bytes);
    for (int l = 0; l < 33; l++) {
        layer *L = l < 28 ? &m->talker[l] : &m->cp[l - 28];
        for (int i = 0; i < 7; i++) {
            L->m[i] = (qtts_mat){.data = p, .dtype = dt, .rows = lr[i], .cols = lc[i],
                                 .packed = is_quant(dt), .resident = l >= 28 && cp_resident};
            fill_mat(p, dt, lr[i], lc[i]);
            p += qtts_mat_row_bytes(dt, lc[i]) * lr[i];
        }
    }
    m->head =
        (qtts_mat){.data = p, .dtype = dt, .rows = 3072, .cols = 1024, .packed = is_quant(dt)};
    fill_mat(p, dt, 3072, 1024);
    p += head_bytes;
    for (int j = 0; j < 15; j++) {
        m->cp_head[j] =
            (qtts_mat){.data = p, .dtype = dt, .rows = 2048, .cols = 1024, .packed = is_quant(dt)};
        fill_mat(p, dt, 2048, 1024);
        p += cph;
    }
    m->bytes_talker = 28 * layer_bytes + head_bytes;
    m->bytes_cp_pass = 5 * layer_bytes + cph;
    return true;
}

/* The matmuls of n layers, split into jobs as the engine's layer splits
 * them (talker.c): q, k and v as one split; o; gate and up as one split,
 * with the SwiGLU; down. */
static void run_layers(const layer *L, int n, float *h, float *big, float *out, float *up) {
    for (int l = 0; l < n; l++) {
        float *const qkv[3] = {big, out, up};
        const qtts_mat *const W[3] = {&L[l].m[0], &L[l].m[1], &L[l].m[2]};
        qtts_matmul_multi_isa(isa, 3, qkv, h, g_rows, W);
        qtts_matmul_isa(isa, out, big, g_rows, &L[l].m[3], NULL);              /* o */
        qtts_matmul_swiglu_isa(isa, big, up, h, g_rows, &L[l].m[4], &L[l].m[5]);
        qtts_matmul_isa(isa, out, big, g_rows, &L[l].m[6], NULL);              /* down */
    }
}

/* Median ms per frame over `frames` frames (after one warm-up frame), and
 * the median of frame time / floor, the floor being a probe that reads the
 * same bytes (the talker's weights once, the CP's 15 times) just before. */
static void bench_frame(const model *m, int frames, double *ms_out, double *floor_out, double *ratio_out) {
    const size_t fb = sizeof(float) * 3072 * g_rows;
    float *h = qtts_aligned_alloc(fb), *big = qtts_aligned_alloc(fb), *out = qtts_aligned_alloc(fb),
          *up = qtts_aligned_alloc(fb);
    for (int i = 0; i < 3072 * g_rows; i++)
        h[i] = big[i] = up[i] = (float)((int)(next_rand() % 2001) - 1000) / 1000.0f;
    const uint8_t *cp = (const uint8_t *)m->cp[0].m[0].data;
    double ms[MAX_RUNS], fl[MAX_RUNS], ratio[MAX_RUNS];
    for (int f = -1; f < frames; f++) {
        double tp = probe_once(m->mem, (size_t)(cp - m->mem));   /* talker layers */
        tp += probe_once(m->head.data, m->bytes_talker - (size_t)(cp - m->mem));
        for (int j = 0; j < 15; j++) tp += probe_once(cp, m->bytes_cp_pass);   /* approx.: CP layers + heads */
        double t0 = qtts_now();
        run_layers(m->talker, 28, h, big, out, up);
        qtts_matmul_isa(isa, big, h, g_rows, &m->head, NULL);
        for (int j = 0; j < 15; j++) {
            run_layers(m->cp, 5, h, big, out, up);
            qtts_matmul_isa(isa, big, h, g_rows, &m->cp_head[j], NULL);
        }
        const double t = qtts_now() - t0;
        if (f >= 0) {
            ms[f] = t * 1e3;
            fl[f] = tp * 1e3;
            ratio[f] = t / tp;
        }
    }
    qtts_free(h);
    qtts_free(big);
    qtts_free(out);
    qtts_free(up);
    *ms_out = bench_median(ms, frames);
    *floor_out = bench_median(fl, frames);
    *ratio_out = bench_median(ratio, frames);
}

/* ==== main =============================================================== */

static int parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

int main(int argc, char **argv) {
    int threads[8] = {1, 2}, n_threads = 2, runs = 7, frames = 5, set_mb = 256;
    bool do_frame = true;
    const char *formats = "f32,bf16,q8_0,q4_0", *isa_name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--threads")) n_threads = parse_list(v, threads, 8), i++;
        else if (!strcmp(a, "--runs")) runs = atoi(v), i++;
        else if (!strcmp(a, "--frames")) frames = atoi(v), i++;
        else if (!strcmp(a, "--set")) set_mb = atoi(v), i++;
        else if (!strcmp(a, "--formats")) formats = v, i++;
        else if (!strcmp(a, "--isa")) isa_name = v, i++;
        else if (!strcmp(a, "--no-frame")) do_frame = false;
        else if (!strcmp(a, "--rows")) g_rows = QTTS_MAX(1, QTTS_MIN(atoi(v), MAX_ROWS)), i++;
        else {
            fprintf(stderr, "usage: %s [--threads 1,2] [--runs 7] [--set MB] [--frames 5] "
                            "[--formats f32,bf16,q8_0,q4_0] [--isa NAME] [--no-frame] [--rows N]\n",
                    argv[0]);
            return 2;
        }
    }
    runs = QTTS_MAX(1, QTTS_MIN(runs, MAX_RUNS));
    frames = QTTS_MAX(1, QTTS_MIN(frames, MAX_RUNS));
    isa = qtts_isa_active();
    if (isa_name) {
        const qtts_isa *all[16];
        int n = qtts_isa_compiled(all, 16);
        isa = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(all[i]->name, isa_name) && qtts_isa_usable(all[i])) isa = all[i];
        if (!isa) {
            fprintf(stderr, "isa %s: not compiled in or not supported by this CPU\n", isa_name);
            return 2;
        }
    }
    const qtts_dtype all_dt[4] = {QTTS_DT_F32, QTTS_DT_BF16, QTTS_DT_Q8_0, QTTS_DT_Q4_0};
    const char *dt_name[4] = {"f32", "bf16", "q8_0", "q4_0"};
    bool use[4];
    for (int d = 0; d < 4; d++) use[d] = strstr(formats, dt_name[d]) != NULL;

    const size_t set = (size_t)set_mb << 20;
    uint8_t *arena = qtts_aligned_alloc(set + (64 << 20));
    if (!arena) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    memset(arena, 1, set + (64 << 20));
    printf("kernels: %s, %d CPUs, working set %d MiB per case, medians of %d runs\n", isa->name,
           qtts_cpu_count(), set_mb, runs);

    printf("\nmemory-read probe over the working set (GB/s, median):");
    for (int t = 0; t < n_threads; t++) {
        qtts_threads_init(threads[t]);
        double g[MAX_RUNS];
        for (int r = 0; r < runs; r++) g[r] = (double)set / probe_once(arena, set) / 1e9;
        printf("  %d thr %.1f", threads[t], bench_median(g, runs));
    }
    printf("\n\nmatmul, %d x row%s: weight GB/s from DRAM (in parentheses: percent of a probe\n"
           "reading the same bytes just before each run), then from the caches (one copy\n"
           "of W read repeatedly)\n", g_rows, g_rows > 1 ? "s at once" : "");
    printf("%-18s %-5s", "shape", "fmt");
    for (int t = 0; t < n_threads; t++) printf("  DRAM %d thr    ", threads[t]);
    for (int t = 0; t < n_threads; t++) printf("  hot %d thr", threads[t]);
    printf("\n");
    for (size_t s = 0; s < QTTS_ARRAY_LEN(shapes); s++)
        for (int d = 0; d < 4; d++) {
            if (!use[d]) continue;
            printf("%-18s %-5s", shapes[s].name, dt_name[d]);
            for (int t = 0; t < n_threads; t++) {
                qtts_threads_init(threads[t]);
                result r = bench_shape(arena, set, &shapes[s], all_dt[d], runs);
                printf("  %5.1f (%3.0f%%)  ", r.gbs, 100 * r.ratio);
            }
            for (int t = 0; t < n_threads; t++) {
                qtts_threads_init(threads[t]);
                printf("  %9.1f", bench_shape(arena, 0, &shapes[s], all_dt[d], runs).gbs);
            }
            printf("\n");
            fflush(stdout);
        }
    qtts_free(arena);

    if (do_frame) {
        printf("\none frame (talker step + 15 code-predictor passes, synthetic 0.6B weights);\n"
               "floor: a probe reading the same bytes just before each frame\n");
        for (int d = 1; d < 4; d++) {   /* f32 is not a decode format */
            if (!use[d]) continue;
            model m;
            if (!model_new(&m, all_dt[d])) {
                fprintf(stderr, "out of memory for the %s model\n", dt_name[d]);
                continue;
            }
            const double gb = (m.bytes_talker + 15.0 * m.bytes_cp_pass) / 1e9;
            printf("  %-5s %.3f GB read per frame (talker %.3f, CP %.3f x 15)\n", dt_name[d], gb,
                   m.bytes_talker / 1e9, m.bytes_cp_pass / 1e9);
            for (int t = 0; t < n_threads; t++) {
                qtts_threads_init(threads[t]);
                double ms, fl, ratio;
                bench_frame(&m, frames, &ms, &fl, &ratio);
                printf("        %d thr: %7.1f ms per frame, floor %6.1f ms (%.1f GB/s), ratio %.2f\n",
                       threads[t], ms, fl, gb / fl * 1e3, ratio);
                fflush(stdout);
            }
            qtts_free(m.mem);
        }
    }
    qtts_threads_shutdown();
    return 0;
}
