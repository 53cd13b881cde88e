/*
 * bench.c - `qwen3-tts bench`: how fast each stage runs on this machine,
 * and how far each is from what the machine allows.
 *
 *   qwen3-tts bench -m MODEL_DIR [--quant Q] [-j N] [--frames N] [--runs N] [--json]
 *
 * One engine is opened (timed: "open", with the megabytes of model files
 * that came into the page cache meanwhile, about what it read from disk:
 * a cold open is mostly the disk's time), with the engine's stage timers on
 * (engine_internal.h). Then, per run: the probes, then one synthesis of
 * the text (a 12-word sentence by default) for exactly --frames frames
 * unless EOS comes first (the model's sampling defaults, seed = run
 * index; one short warm-up synthesis goes first). Reported, as medians
 * over the runs:
 *
 *   talker, code predictor, codec decoder   ms per frame (stage timers)
 *   prefill                                  ms (one prompt)
 *   reference skip                           ms (in-context clones: the codec
 *                                            decoder brought past the reference
 *                                            frames, apart from the codec's ms)
 *   time to first audio                      request start -> first on_audio
 *   RTF                                      wall time / audio time, whole request
 *
 * Audio is streamed (qtts_request.stream_chunk_frames, --stream N,
 * at most 12 frames per decode, the first after --stream-first, default
 * 1; --stream 0: the 300-frame windows), so TTFA and RTF are those of a
 * streaming client.
 *   peak RSS                                 getrusage, whole process
 *
 * The stage timers need the stages one after the other: the timed run
 * decodes between two frames on all threads (the engine's serial_codec).
 * Where the engine would decode beside generation instead (the CPU
 * backend on two or more threads: a stream's pushes after the first, or
 * the 300-frame windows through a stream, but not a voice's windows,
 * which an in-context clone holds to the end; qtts_engine_options), each
 * run is followed at once by the same synthesis that way, untimed but
 * for its wall clock and stages: its RTF and TTFA are the table's (what a
 * user gets), the timed run's RTF is given beside them, with the median
 * of the runs' ratios. --serial-codec runs only the timed runs.
 *
 * and each decode-time stage as a multiple of its floor, the time the
 * machine needs at the least:
 *
 *   weights  the stage's weight bytes per frame read by a streaming probe
 *            (qtts_stream_read on every thread: 16-byte loads with a
 *            burst prefetch 4 KB ahead; each thread its part of every
 *            matrix, as the matmuls split their rows) over the very same
 *            memory: the talker's matrices once, the code predictor's layers 15 times
 *            and each head once, as a frame reads them (so the probe sees
 *            the same caches the stage does); right before the run and
 *            again right after it, the mean of the two times (on a shared
 *            host the bandwidth one probe sees drifts by 10-30% within
 *            seconds while the stages' times hold, and a probe on one side
 *            alone moved the x floor by as much; docs/PERFORMANCE.md);
 *   compute  the stage's multiply-adds per frame over a peak probe run on
 *            every thread: fp32 FMA (12 independent chains of 8-lane FMAs
 *            on AVX2) for BF16/F32 weights and the codec decoder, int8 dot
 *            products (vpmaddubsw + vpmaddwd chains) for Q8_0/Q4_0.
 *
 * The machine line also gives the threads' round trip (round_trip_ns,
 * before and after each run: median, least and most), which tells where
 * the scheduler put the threads: on one core complex or on two.
 *
 * floor = max(weights, compute); "x floor" = measured / floor, per run,
 * then the median. The probes read the model's own memory and need no
 * buffers, so peak RSS is the engine's alone. They measure the host CPU,
 * so with another backend (cuda) they are skipped and the floors are left
 * out ("-" in the table, null in JSON).
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "codes_file.h"
#include "qwen3_tts.h"

#include "base/base.h"
#include "base/thread.h"
#include "engine/engine_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

#define MAX_RUNS 64
#define DEFAULT_TEXT "The quick brown fox jumps over the lazy dog by the river."

static void bdie(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void bdie(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("qwen3-tts: bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n <= 2 * MAX_RUNS (the round trips: two a run) */
static double median(const double *v, int n) {
    if (n <= 0) return 0;
    double s[2 * MAX_RUNS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* A measured number, or (NaN: not measured) "-" in the table and null in JSON. */
static const char *num_or_dash(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) return "-";
    snprintf(buf, n, fmt, v);
    return buf;
}

static const char *num_or_null(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) return "null";
    snprintf(buf, n, fmt, v);
    return buf;
}

/* ==== bandwidth probe ===================================================== */

typedef struct {
    const unsigned char *p;
    size_t n;
} span;

typedef struct {
    span *s;
    int n, cap;
    int *mat;          /* mat[k]: the first span of matrix k; mat[n_mats] = n */
    int n_mats, cap_mats;
    uint64_t bytes;
} span_list;

typedef struct {
    const span *s;
    const int *order;  /* unit i streams span order[i] */
    uint64_t *sums;
    qtts_steal *steal;
} bw_job;

#define SPAN_CHUNK (64u << 10)

static void *grow(void *p, int *cap, size_t elem) {
    *cap = *cap ? 2 * *cap : 1024;
    p = realloc(p, elem * (size_t)*cap);
    if (!p) bdie("out of memory");
    return p;
}

static void spans_add_mat(span_list *l, const qtts_mat *m) {
    const size_t n = qtts_mat_row_bytes(m->dtype, m->cols) * (size_t)m->rows;
    const unsigned char *p = m->data;
    if (l->n_mats + 2 > l->cap_mats) l->mat = grow(l->mat, &l->cap_mats, sizeof *l->mat);
    l->mat[l->n_mats++] = l->n;
    l->bytes += n;
    for (size_t off = 0; off < n; off += SPAN_CHUNK) {
        if (l->n == l->cap) l->s = grow(l->s, &l->cap, sizeof *l->s);
        l->s[l->n++] = (span){p + off, QTTS_MIN(SPAN_CHUNK, n - off)};
    }
    l->mat[l->n_mats] = l->n;
}

static void spans_add_layers(span_list *l, const qtts_stack_weights *s) {
    for (int i = 0; i < s->n_layers; i++) {
        const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(&s->layers[i]);
        for (int k = 0; k < QTTS_LAYER_MATS; k++) spans_add_mat(l, m[k]);
    }
}

static void bw_task(void *ctx, int p) {
    const bw_job *j = ctx;
    int a, b;
    while (qtts_steal_next(j->steal, p, &a, &b))
        for (int i = a; i < b; i++) j->sums[i] = qtts_stream_read(j->s[j->order[i]].p, j->s[j->order[i]].n);
}

/* Seconds to stream every span of l once, on the process-wide pool, with
 * each thread reading what the matmuls give it: part p of `threads` of
 * every matrix, matrix after matrix in the frame's order. Those parts,
 * part 0's then part 1's and so on, are the home ranges of a qtts_steal
 * split, so each thread streams its own share front to back and takes
 * over the rest of another's when its own is done.
 * Why this split: the code predictor reads its layers 15 times a frame.
 * With its two vCPUs on two core complexes, each with its own 32 MB L3,
 * the EPYC host's matmuls read the same half of every CP matrix on each
 * pass, half the CP per L3, and at int8 beat a probe that streamed whole
 * passes per thread (x floor 0.94-0.97). Split this way, the CP's probe
 * read 44-70 GB/s against 39-55 for whole passes in the same runs; the
 * talker's (read once a frame) the same either way, and the same with
 * 64 KB or 256 KB spans. Spans dealt out one at a time (a shared counter,
 * the threads alternating) read 5-15% slower than contiguous ranges. */
static double bw_probe(const span_list *l) {
    uint64_t *sums = calloc((size_t)l->n + 1, sizeof *sums);
    int *order = malloc(sizeof *order * ((size_t)l->n + 1));
    if (!sums || !order) bdie("out of memory");
    const int threads = qtts_threads_count();
    int u = 0;
    for (int p = 0; p < threads; p++)
        for (int k = 0; k < l->n_mats; k++) {
            const int a = l->mat[k], cnt = l->mat[k + 1] - a;
            for (int i = a + cnt * p / threads; i < a + cnt * (p + 1) / threads; i++) order[u++] = i;
        }
    QTTS_ASSERT(u == l->n);
    qtts_steal steal;
    qtts_steal_init(&steal, l->n, threads);
    bw_job j = {l->s, order, sums, &steal};
    const double t0 = qtts_cli_now();
    qtts_parallel_for(threads, bw_task, &j);
    const double t = qtts_cli_now() - t0;
    volatile uint64_t sink = 0;
    for (int i = 0; i < l->n; i++) sink ^= sums[i];
    (void)sink;
    free(order);
    free(sums);
    return t;
}

/* The threads' round trip (qtts_threads_round_trip_ns), NAN when not
 * measured. Why: the two vCPUs of the EPYC VM sit on one core complex
 * (one shared L3, ~55 ns) or on two (~300 ns), and the x floors moved by up
 * to 30% between the two (docs/PERFORMANCE.md, sixteenth and eighteenth
 * sessions); the number tells the runs apart. */
static double round_trip_ns(void) {
    const double ns = qtts_threads_round_trip_ns();
    return ns < 0 ? NAN : ns;
}

/* ==== arithmetic-peak probes ============================================== */

#define PEAK_ITERS 4000000L

#ifdef BENCH_X86
__attribute__((target("avx2,fma"))) static double fma_avx2(long iters) {
    __m256 a[12];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 s = a[0];
    for (int k = 1; k < 12; k++) s = _mm256_add_ps(s, a[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return (double)out[0] + out[7];
}

__attribute__((target("avx2"))) static double int8_avx2(long iters) {
    __m256i acc[8], w[8];
    const __m256i x = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1),
                  flip = _mm256_set1_epi8(0x15);
    for (int k = 0; k < 8; k++) {
        acc[k] = _mm256_setzero_si256();
        w[k] = _mm256_set1_epi8((char)(k + 1));
    }
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            w[k] = _mm256_xor_si256(w[k], flip);
            acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], x), ones));
        }
    __m256i s = acc[0];
    for (int k = 1; k < 8; k++) s = _mm256_add_epi32(s, acc[k]);
    return (double)_mm256_extract_epi32(s, 0);
}

/* The instructions the avx512 kernels are built on: 16-lane FMAs (the
 * codec's conv tiles, the float matmuls) and VPDPBUSD (the quantized
 * tiles). Enough independent chains to cover the latency on two ports. */
__attribute__((target("avx512f"))) static double fma_avx512(long iters) {
    __m512 a[12];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    __m512 s = a[0];
    for (int k = 1; k < 12; k++) s = _mm512_add_ps(s, a[k]);
    return (double)_mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) static double int8_avx512vnni(long iters) {
    __m512i acc[12];
    const __m512i w = _mm512_set1_epi8(5), x = _mm512_set1_epi8(3);
    for (int k = 0; k < 12; k++) acc[k] = _mm512_set1_epi32(k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) acc[k] = _mm512_dpbusd_epi32(acc[k], w, x);
    __m512i s = acc[0];
    for (int k = 1; k < 12; k++) s = _mm512_add_epi32(s, acc[k]);
    /* the lanes have wrapped; summed as unsigned (_mm512_reduce_add_epi32
     * adds them as int, an overflow UBSan reports) */
    uint32_t lanes[16], sum = 0;
    _mm512_storeu_si512(lanes, s);
    for (int k = 0; k < 16; k++) sum += lanes[k];
    return (double)sum;
}

/* The avxvnni kernels' int8 step (their float work is the avx2 FMA's). */
__attribute__((target("avx2,avxvnni"))) static double int8_avxvnni(long iters) {
    __m256i acc[12];
    const __m256i w = _mm256_set1_epi8(5), x = _mm256_set1_epi8(3);
    for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_epi32(k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], w, x);
    __m256i s = acc[0];
    for (int k = 1; k < 12; k++) s = _mm256_add_epi32(s, acc[k]);
    return (double)_mm256_extract_epi32(s, 0);
}
#endif

/* Portable stand-ins: the compiler's vectorisation of the same chains. */
static double fma_scalar(long iters) {
    float a[12][8];
    for (int k = 0; k < 12; k++)
        for (int l = 0; l < 8; l++) a[k][l] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            for (int l = 0; l < 8; l++) a[k][l] = a[k][l] * 0.999999f + 1e-7f;
    double s = 0;
    for (int k = 0; k < 12; k++) s += a[k][0];
    return s;
}

static double int8_scalar(long iters) {
    int32_t acc[8][8] = {{0}};
    int8_t w[8][32];
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++) w[k][l] = (int8_t)(k + l);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 8; k++)
            for (int l = 0; l < 8; l++) {
                w[k][l] ^= 0x15;
                acc[k][l] += 3 * (w[k][4 * l] + w[k][4 * l + 1] + w[k][4 * l + 2] + w[k][4 * l + 3]);
            }
    double s = 0;
    for (int k = 0; k < 8; k++) s += acc[k][0];
    return s;
}

/* Which probe measures the peak: the widest instructions the active
 * kernels use (qtts_kernels_isa), so that a stage's compute floor is one
 * the kernels could reach; the compiler's vectorisation of the same chains
 * where there is no hand-written probe (scalar, NEON). */
typedef enum { PROBE_PORTABLE, PROBE_AVX2, PROBE_AVXVNNI, PROBE_AVX512 } probe_isa;

static probe_isa pick_probe(void) {
#ifdef BENCH_X86
    const char *isa = qtts_kernels_isa();
    if (!strcmp(isa, "avx512")) return PROBE_AVX512;
    if (!strcmp(isa, "avxvnni")) return PROBE_AVXVNNI;
    if (!strcmp(isa, "avx2")) return PROBE_AVX2;
#endif
    return PROBE_PORTABLE;
}

static const char *probe_name(probe_isa p, bool int8) {
    switch (p) {
    case PROBE_AVX512: return int8 ? "avx512 vpdpbusd" : "avx512 fma";
    case PROBE_AVXVNNI: return int8 ? "avx-vnni vpdpbusd" : "avx2 fma";
    case PROBE_AVX2: return int8 ? "avx2 vpmaddubsw" : "avx2 fma";
    default: return "portable C";
    }
}

/* Operations per iteration of each probe: fp32 FLOP (2 per FMA lane) or
 * int8 OP (2 per multiply-add). */
static double probe_ops_per_iter(probe_isa p, bool int8) {
    switch (p) {
    case PROBE_AVX512: return int8 ? 12.0 * 64 * 2 : 12.0 * 16 * 2;
    case PROBE_AVXVNNI: return int8 ? 12.0 * 32 * 2 : 12.0 * 8 * 2;
    case PROBE_AVX2: return int8 ? 8.0 * 32 * 2 : 12.0 * 8 * 2;
    default: return int8 ? 8.0 * 8 * 4 * 2 : 12.0 * 8 * 2;
    }
}

typedef struct {
    bool int8;
    probe_isa isa;
    long iters;
    double sink[QTTS_MAX_THREADS];
} peak_job;

static void peak_task(void *ctx, int t) {
    peak_job *j = ctx;
    double r;
    switch (j->isa) {
#ifdef BENCH_X86
    case PROBE_AVX512: r = j->int8 ? int8_avx512vnni(j->iters) : fma_avx512(j->iters); break;
    case PROBE_AVXVNNI: r = j->int8 ? int8_avxvnni(j->iters) : fma_avx2(j->iters); break;
    case PROBE_AVX2: r = j->int8 ? int8_avx2(j->iters) : fma_avx2(j->iters); break;
#endif
    default: r = j->int8 ? int8_scalar(j->iters) : fma_scalar(j->iters); break;
    }
    j->sink[t % QTTS_MAX_THREADS] = r;
}

/* Operations per second on every thread (see probe_ops_per_iter). */
static double peak_probe(bool int8) {
    const int th = qtts_threads_count();
    const probe_isa isa = pick_probe();
    /* the portable loops run about 8x slower per iteration */
    peak_job j = {int8, isa, isa == PROBE_PORTABLE ? PEAK_ITERS / 8 : PEAK_ITERS, {0}};
    const double t0 = qtts_cli_now();
    qtts_parallel_for(th, peak_task, &j);
    const double t = qtts_cli_now() - t0;
    return th * (double)j.iters * probe_ops_per_iter(isa, int8) / t;
}

/* ==== what each stage reads and computes per frame ========================= */

static double mat_macs(const qtts_mat *m) { return (double)m->rows * m->cols; }

static double mat_bytes(const qtts_mat *m) {
    return (double)qtts_mat_row_bytes(m->dtype, m->cols) * m->rows;
}

/* f summed over the matrices of every layer of s. */
static double layers_sum(const qtts_stack_weights *s, double (*f)(const qtts_mat *)) {
    double t = 0;
    for (int i = 0; i < s->n_layers; i++) {
        const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(&s->layers[i]);
        for (int k = 0; k < QTTS_LAYER_MATS; k++) t += f(m[k]);
    }
    return t;
}

static double layers_macs(const qtts_stack_weights *s) { return layers_sum(s, mat_macs); }

/* Attention multiply-adds of one row at context ctx (QK and PV). */
static double attn_macs(const qtts_stack_weights *s, double ctx) {
    return (double)s->n_layers * 2.0 * s->n_heads * s->head_dim * ctx;
}

typedef struct {
    double talker_bytes, talker_macs;  /* per frame */
    double cp_bytes, cp_macs;
    double codec_macs;                 /* per frame of audio */
    bool quantized;                    /* talker/CP matrices are Q8_0/Q4_0 */
} stage_cost;

/* Multiply-adds of the codec decoder per frame: its convolutions as they
 * run (qtts_codec_decoder_conv_macs), the quantizer's lookups, the
 * transformer's linear layers and attention, and the upsampling blocks'
 * depthwise k7 convs; element-wise work and the Winograd transforms left
 * out. */
static double codec_macs(const qtts_codec_decoder *d) {
    double t = 2.0 * d->rvq_dim * d->cb_vec + qtts_codec_decoder_conv_macs(d);
    t += mat_macs(&d->in_proj) + mat_macs(&d->out_proj);
    for (int l = 0; l < d->layers; l++) {
        const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(&d->tl[l]);
        for (int k = 0; k < QTTS_LAYER_MATS; k++) t += mat_macs(m[k]);
        t += 2.0 * d->heads * d->head_dim * d->window;
    }
    double r = 1;   /* columns per frame after each upsampling block */
    for (int i = 0; i < d->n_ups; i++) {
        r *= d->upx[i].stride;
        t += (double)d->latent * 7 * r;
    }
    return t;
}

static stage_cost costs(const qtts_talker_weights *w, const qtts_codec_decoder *d, double ctx) {
    stage_cost c = {0};
    const int passes = w->n_groups - 1;
    c.talker_bytes = layers_sum(&w->talker, mat_bytes) + mat_bytes(&w->codec_head);
    c.talker_macs = layers_macs(&w->talker) + mat_macs(&w->codec_head) + attn_macs(&w->talker, ctx);
    const double cl = layers_sum(&w->cp, mat_bytes);
    double heads_b = 0, heads_m = 0;
    for (int j = 0; j < passes; j++) {
        heads_b += mat_bytes(&w->cp_head[j]);
        heads_m += mat_macs(&w->cp_head[j]);
    }
    const double mtp_b = w->has_mtp ? mat_bytes(&w->mtp) : 0, mtp_m = w->has_mtp ? mat_macs(&w->mtp) : 0;
    c.cp_bytes = passes * (cl + mtp_b) + heads_b;
    /* rows: 2 in the first pass, 1 in each other; attention over positions 0..G-1 */
    double cp_attn = 0;
    for (int p = 0; p < w->n_groups; p++) cp_attn += attn_macs(&w->cp, p + 1);
    c.cp_macs = (passes + 1) * (layers_macs(&w->cp) + mtp_m) + heads_m + cp_attn;
    c.codec_macs = codec_macs(d);
    c.quantized = w->talker.layers[0].q.dtype == QTTS_DT_Q8_0 ||
                  w->talker.layers[0].q.dtype == QTTS_DT_Q4_0;
    return c;
}

/* ==== one synthesis ======================================================== */

typedef struct {
    double t_start, t_first;
    size_t samples;
} audio_sink;

static int bench_audio(void *user, const float *pcm, size_t n) {
    audio_sink *a = user;
    (void)pcm;
    if (!a->samples && n) a->t_first = qtts_cli_now();
    a->samples += n;
    return 0;
}

typedef struct {
    double talker_ms, cp_ms, codec_ms, prefill_ms, ref_skip_ms, ttfa_s, total_s, audio_s, rtf;
    int frames, prefill_rows;
    double bw_talker_s, bw_cp_s, fma, int8;  /* probes */
    double rt_ns[2];                          /* round_trip_ns before and after the run */
    double ov_ttfa_s, ov_rtf, ov_ratio;       /* the overlapped run after it, and its RTF / rtf */
    double ov_tcp_ms, ov_codec_ms;            /*   its talker + CP and codec (one thread) ms/frame */
} run_result;

/* v[r] = the double at byte offset off of rr[r]. */
static void field_of(const run_result *rr, int runs, size_t off, double *v) {
    for (int r = 0; r < runs; r++) memcpy(&v[r], (const char *)&rr[r] + off, sizeof(double));
}

/* A progress line's note on the run's overlapped twin. */
static const char *ov_note(const run_result *r, bool overlap) {
    static char b[160];
    if (!overlap) return "";
    snprintf(b, sizeof b,
             "; codec beside generation: talker + CP %.1f, codec %.1f ms/frame, TTFA %.2f s, RTF %.2f",
             r->ov_tcp_ms, r->ov_codec_ms, r->ov_ttfa_s, r->ov_rtf);
    return b;
}

static run_result synth_once(qtts_engine *eng, qtts_session *ses, const qtts_request *base,
                             int frames, uint64_t seed) {
    qtts_request req = *base;
    audio_sink a = {0};
    req.max_new_tokens = frames + 1;
    req.seed = seed;
    req.on_audio = bench_audio;
    req.user = &a;
    qtts_engine_stats_reset(eng);
    qtts_result res;
    qtts_error err;
    a.t_start = qtts_cli_now();
    if (qtts_synthesize(ses, &req, &res, &err)) bdie("%s", err.msg);
    const double t_end = qtts_cli_now();
    qtts_engine_stats s;
    qtts_engine_stats_get(eng, &s);
    run_result r = {0};
    r.frames = res.n_frames;
    r.talker_ms = s.talker_rows ? 1e3 * s.talker_s / (double)s.talker_rows : 0;
    r.cp_ms = s.cp_rows ? 1e3 * s.cp_s / (double)s.cp_rows : 0;
    r.codec_ms = s.codec_frames ? 1e3 * s.codec_s / (double)s.codec_frames : 0;
    r.prefill_ms = 1e3 * s.prefill_s;
    r.ref_skip_ms = 1e3 * s.ref_skip_s;
    r.prefill_rows = (int)s.prefill_rows;
    r.total_s = t_end - a.t_start;
    r.ttfa_s = a.samples ? a.t_first - a.t_start : r.total_s;
    r.audio_s = (double)a.samples / QTTS_SAMPLE_RATE;
    r.rtf = r.audio_s > 0 ? r.total_s / r.audio_s : 0;
    return r;
}

/* ==== output =============================================================== */

static void usage_bench(FILE *f) {
    fputs("usage: qwen3-tts bench -m MODEL_DIR [options]\n"
          "\n"
          "Per-stage milliseconds per frame (talker, code predictor, codec decoder), prefill,\n"
          "time to first audio, RTF and peak RSS, each decode-time stage also as a multiple of\n"
          "its floor on this machine (weight bytes / bandwidth and multiply-adds / peak, from\n"
          "probes run in the same process before each run; CPU backend only, since the\n"
          "probes measure this CPU). Medians over the runs. Where the engine decodes streamed\n"
          "audio beside generation (two or more threads), each timed run (its stages one after\n"
          "the other) is followed by the same request that way, whose TTFA and RTF are shown.\n"
          "\n"
          "  -m, --model DIR          model directory (bf16, or written by 'qwen3-tts quantize')\n"
          "      --quant Q            talker and code predictor as int8 or int4 (quantized at load)\n"
          "      --quant-talker Q, --quant-cp Q   per component\n"
          "      --codec F            codec decoder convolutions: fp32 (default) or bf16 (its floor\n"
          "                           stays the fp32 FMA probe's, so it can come out below 1)\n"
          "      --kv-cache F         the talker's KV cache: f32 or bf16 (default bf16 for int8/int4)\n"
          "  -j, --threads N          threads (default: all cores)\n"
          "      --frames N           frames per run (default 100; fewer if EOS comes first)\n"
          "      --runs N             runs (default 5)\n"
          "      --text TEXT          what to say (default: a 12-word sentence)\n"
          "  -s, --speaker NAME       CustomVoice speaker (default: the first)\n"
          "  -i, --instruct TEXT      VoiceDesign description (default: a calm voice)\n"
          "      --voice FILE         Base models: a voice profile\n"
          "      --backend NAME       cpu (default) or cuda\n"
          "      --stream N           frames per codec decode (default 12; 0 = 300-frame windows)\n"
          "      --stream-first N     frames before the first audio (default 1)\n"
          "      --serial-codec       every push between two frames on all threads (no second run)\n"
          "      --json               JSON on stdout instead of the table\n"
          "  -q, --quiet              no progress lines on stderr (the table or JSON stays)\n"
          "  -h, --help\n",
          f);
}

static long parse_int(const char *flag, const char *s, long lo, long hi) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) bdie("%s: expected an integer in [%ld, %ld]", flag, lo, hi);
    return v;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void cpu_name(char *out, size_t cap) {
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        snprintf(out, cap, "%s", c);
        out[strcspn(out, "\n")] = 0;
        break;
    }
    fclose(f);
}

/* Bytes of the *.safetensors files in dir that the page cache holds
 * (mincore over a read-only mapping, which reads nothing), added to
 * *cached. A file that cannot be mapped counts as not cached. */
static void cached_bytes(const char *dir, uint64_t *cached) {
    DIR *d = opendir(dir);
    if (!d) return;
    const long page = sysconf(_SC_PAGESIZE);
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block */
        struct stat st;
        if (fd < 0) continue;
        if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 || page <= 0) {
            close(fd);
            continue;
        }
        const size_t len = (size_t)st.st_size, pages = (len + (size_t)page - 1) / (size_t)page;
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = m == MAP_FAILED ? NULL : malloc(pages);
        if (vec && !mincore(m, len, vec)) {
            size_t in = 0;
            for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
            *cached += QTTS_MIN((uint64_t)in * (uint64_t)page, (uint64_t)len);
        }
        free(vec);
        if (m != MAP_FAILED) munmap(m, len);
        close(fd);
    }
    closedir(d);
}

/* Bytes of the model's weight files (the directory's and its
 * speech_tokenizer/'s) in the page cache. Taken before and after the open,
 * the difference is about what the open read from disk: an open with a
 * cold cache takes seconds, most of them the disk's. */
static uint64_t model_cached_bytes(const char *model) {
    uint64_t cached = 0;
    char sub[4096];
    cached_bytes(model, &cached);
    if (snprintf(sub, sizeof sub, "%s/speech_tokenizer", model) < (int)sizeof sub)
        cached_bytes(sub, &cached);
    return cached;
}

static int count_words(const char *s) {
    int n = 0;
    bool in = false;
    for (; *s; s++) {
        const bool sp = *s == ' ' || *s == '\t' || *s == '\n';
        if (!sp && !in) n++;
        in = !sp;
    }
    return n;
}

int qtts_cmd_bench(int argc, char **argv) {
    const char *model = NULL, *text = DEFAULT_TEXT, *speaker = NULL, *instruct = NULL;
    const char *voice_path = NULL, *backend = NULL;
    qtts_engine_options eo;
    qtts_engine_options_init(&eo);
    int frames = 100, runs = 5, stream = 12, stream_first = 1;
    bool json = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (bdie("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage_bench(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = NEXT();
        else if (!strcmp(a, "--quant")) eo.quant_talker = eo.quant_cp = NEXT();
        else if (!strcmp(a, "--quant-talker")) eo.quant_talker = NEXT();
        else if (!strcmp(a, "--quant-cp")) eo.quant_cp = NEXT();
        else if (!strcmp(a, "--codec")) eo.codec = NEXT();
        else if (!strcmp(a, "--kv-cache")) eo.kv_cache = NEXT();
        else if (!strcmp(a, "--serial-codec")) eo.serial_codec = true;
        else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) eo.n_threads = (int)parse_int(a, NEXT(), 0, 1024);
        else if (!strcmp(a, "--frames")) frames = (int)parse_int(a, NEXT(), 1, 100000);
        else if (!strcmp(a, "--runs")) runs = (int)parse_int(a, NEXT(), 1, MAX_RUNS);
        else if (!strcmp(a, "--text")) text = NEXT();
        else if (!strcmp(a, "-s") || !strcmp(a, "--speaker")) speaker = NEXT();
        else if (!strcmp(a, "-i") || !strcmp(a, "--instruct")) instruct = NEXT();
        else if (!strcmp(a, "--voice")) voice_path = NEXT();
        else if (!strcmp(a, "--backend")) backend = NEXT();
        else if (!strcmp(a, "--stream")) stream = (int)parse_int(a, NEXT(), 0, 300);
        else if (!strcmp(a, "--stream-first")) stream_first = (int)parse_int(a, NEXT(), 1, 300);
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else bdie("unknown option '%s' (see qwen3-tts bench --help)", a);
#undef NEXT
    }
    if (!model) bdie("-m MODEL_DIR is required (see qwen3-tts bench --help)");
    if (backend) eo.backend = backend;

    qtts_error err;
    qtts_engine *eng = NULL;
    const uint64_t cached_before = model_cached_bytes(model);
    double t_open = qtts_cli_now();
    if (qtts_engine_open(model, &eo, &eng, &err)) bdie("%s", err.msg);
    t_open = qtts_cli_now() - t_open;
    const uint64_t cached_after = model_cached_bytes(model);
    const double open_disk_mb =
        cached_after > cached_before ? (double)(cached_after - cached_before) / 1e6 : 0.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double rss_open_mb = ru.ru_maxrss / 1024.0;
    if (qtts_engine_stats_enable(eng, &err)) bdie("%s", err.msg);

    qtts_model_info info;
    qtts_engine_info(eng, &info);
    qtts_request req;
    qtts_request_init(&req);
    req.text = text;
    req.stream_chunk_frames = stream;
    req.stream_first_frames = stream ? stream_first : 0;
    qtts_voice *voice = NULL;
    if (info.kind == QTTS_KIND_CUSTOM_VOICE) req.speaker = speaker ? speaker : qtts_engine_speaker(eng, 0);
    else if (info.kind == QTTS_KIND_VOICE_DESIGN) req.instruct = instruct ? instruct : "A calm, clear voice.";
    else {
        if (!voice_path) bdie("a Base model needs --voice PROFILE (qwen3-tts voice create)");
        if (qtts_voice_load(eng, voice_path, &voice, &err)) bdie("%s", err.msg);
        req.voice = voice;
    }
    qtts_session *ses = qtts_session_new(eng, &err);
    if (!ses) bdie("%s", err.msg);
    /* every run the same sentence: each prefill computes every row, as a
     * first request does, instead of reusing the last run's prompt */
    qtts_session_set_prompt_reuse(ses, false);

    const qtts_talker_weights *w = qtts_engine_talker(eng);
    const qtts_codec_decoder *dec = qtts_engine_codec(eng);
    span_list talker_sp = {0}, cp_sp = {0};
    spans_add_layers(&talker_sp, &w->talker);
    spans_add_mat(&talker_sp, &w->codec_head);
    for (int j = 0; j < w->n_groups - 1; j++) {   /* one frame's reads, pass by pass */
        if (w->has_mtp) spans_add_mat(&cp_sp, &w->mtp);
        spans_add_layers(&cp_sp, &w->cp);
        spans_add_mat(&cp_sp, &w->cp_head[j]);
    }

    if (!json && !quiet)
        fprintf(stderr, "qwen3-tts: bench: warm-up, then %d runs of %d frames\n", runs, frames);
    synth_once(eng, ses, &req, QTTS_MIN(frames, 4), 1000);   /* warm-up: pages, scratch */

    /* The probes measure this CPU: floors only for the CPU backend. */
    const bool host = !backend || !strcmp(backend, "cpu");
    /* a second synthesis per run with the codec beside generation, where
     * the engine would do that (see the top) */
    const bool overlap = host && (stream || !voice) && !eo.serial_codec && qtts_threads_count() > 1;
    run_result rr[MAX_RUNS];
    double x_talker[MAX_RUNS], x_cp[MAX_RUNS], x_tcp[MAX_RUNS], x_codec[MAX_RUNS];
    stage_cost cost = {0};
    for (int r = 0; r < runs; r++) {
        const double rt0 = round_trip_ns();
        double bw_t = host ? bw_probe(&talker_sp) : NAN, bw_c = host ? bw_probe(&cp_sp) : NAN;
        const double fma = host ? peak_probe(false) : NAN, i8 = host ? peak_probe(true) : NAN;
        qtts_engine_set_serial_codec(eng, true);
        rr[r] = synth_once(eng, ses, &req, frames, (uint64_t)r);
        if (overlap) {
            qtts_engine_set_serial_codec(eng, false);
            const run_result o = synth_once(eng, ses, &req, frames, (uint64_t)r);
            rr[r].ov_ttfa_s = o.ttfa_s;
            rr[r].ov_rtf = o.rtf;
            rr[r].ov_ratio = rr[r].rtf > 0 ? o.rtf / rr[r].rtf : 0;
            rr[r].ov_tcp_ms = o.talker_ms + o.cp_ms;
            rr[r].ov_codec_ms = o.codec_ms;
        }
        rr[r].rt_ns[0] = rt0;
        rr[r].rt_ns[1] = round_trip_ns();
        if (host) {   /* the bandwidth probes again after the run: the mean of the two times */
            bw_t = 0.5 * (bw_t + bw_probe(&talker_sp));
            bw_c = 0.5 * (bw_c + bw_probe(&cp_sp));
        }
        rr[r].bw_talker_s = bw_t;
        rr[r].bw_cp_s = bw_c;
        rr[r].fma = fma;
        rr[r].int8 = i8;
        /* attention at the run's mean talker context */
        cost = costs(w, dec, rr[r].prefill_rows + rr[r].frames / 2.0);
        const double peak = cost.quantized ? i8 : fma;
        const double ft = 1e3 * QTTS_MAX(bw_t, 2 * cost.talker_macs / peak),
                     fc = 1e3 * QTTS_MAX(bw_c, 2 * cost.cp_macs / peak),
                     fd = 1e3 * 2 * cost.codec_macs / fma;
        x_talker[r] = rr[r].talker_ms / ft;
        x_cp[r] = rr[r].cp_ms / fc;
        x_tcp[r] = (rr[r].talker_ms + rr[r].cp_ms) / (ft + fc);
        x_codec[r] = rr[r].codec_ms / fd;
        if (!json && !quiet && host)
            fprintf(stderr,
                    "  run %d: %d frames, talker %.1f + CP %.1f ms/frame (x%.2f floor), "
                    "codec %.1f ms/frame, TTFA %.2f s, RTF %.2f%s\n",
                    r + 1, rr[r].frames, rr[r].talker_ms, rr[r].cp_ms, x_tcp[r], rr[r].codec_ms,
                    rr[r].ttfa_s, rr[r].rtf, ov_note(&rr[r], overlap));
        else if (!json && !quiet)
            fprintf(stderr,
                    "  run %d: %d frames, talker %.1f + CP %.1f ms/frame, codec %.1f ms/frame, "
                    "TTFA %.2f s, RTF %.2f%s\n",
                    r + 1, rr[r].frames, rr[r].talker_ms, rr[r].cp_ms, rr[r].codec_ms,
                    rr[r].ttfa_s, rr[r].rtf, ov_note(&rr[r], overlap));
    }
    getrusage(RUSAGE_SELF, &ru);
    const double rss_peak_mb = ru.ru_maxrss / 1024.0;

    double v[MAX_RUNS];
#define MED(field) (field_of(rr, runs, offsetof(run_result, field), v), median(v, runs))
    const double talker_ms = MED(talker_ms), cp_ms = MED(cp_ms), codec_ms = MED(codec_ms);
    const double prefill_ms = MED(prefill_ms), ttfa = MED(ttfa_s), rtf = MED(rtf);
    const double ref_skip_ms = MED(ref_skip_ms);
    const double audio_s = MED(audio_s), bw_t = MED(bw_talker_s), bw_c = MED(bw_cp_s);
    const double fma = MED(fma), i8 = MED(int8);
    const double ov_ttfa = MED(ov_ttfa_s), ov_rtf = MED(ov_rtf), ov_ratio = MED(ov_ratio);
#undef MED
    double frames_med, prefill_rows;
    {
        double f[MAX_RUNS], p[MAX_RUNS];
        for (int r = 0; r < runs; r++) {
            f[r] = rr[r].frames;
            p[r] = rr[r].prefill_rows;
        }
        frames_med = median(f, runs);
        prefill_rows = median(p, runs);
    }
    const double peak = cost.quantized ? i8 : fma;
    const double ft = 1e3 * QTTS_MAX(bw_t, 2 * cost.talker_macs / peak),
                 fc = 1e3 * QTTS_MAX(bw_c, 2 * cost.cp_macs / peak),
                 fd = 1e3 * 2 * cost.codec_macs / fma;
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    static const char *kinds[] = {"custom_voice", "voice_design", "base"};
    const char *isa = qtts_kernels_isa();
    const int threads = qtts_threads_count();

    /* the threads' round trips: median, least, most (NaN: none measured) */
    double rt_med = NAN, rt_min = NAN, rt_max = NAN;
    {
        double rt[2 * MAX_RUNS];
        int n = 0;
        for (int r = 0; r < runs; r++)
            for (int k = 0; k < 2; k++)
                if (!isnan(rr[r].rt_ns[k])) rt[n++] = rr[r].rt_ns[k];
        if (n) {
            rt_med = median(rt, n);
            rt_min = rt_max = rt[0];
            for (int i = 1; i < n; i++) {
                rt_min = fmin(rt_min, rt[i]);
                rt_max = fmax(rt_max, rt[i]);
            }
        }
    }
    /* the cache the kernels' prefetch placement depends on (qtts_mat.resident) */
    const double llc_mb = (double)qtts_llc_bytes() / (1024.0 * 1024.0);
    const bool cp_resident = w->cp.n_layers > 0 && w->cp.layers[0].q.resident;
    if (json) {
        printf("{\"model\":");
        json_str(model);
        printf(",\"kind\":\"%s\",\"size\":\"%s\",\"quant\":{\"talker\":\"%s\",\"cp\":\"%s\","
               "\"codec\":\"%s\",\"kv_cache\":\"%s\"},",
               kinds[info.kind], info.size, info.quant_talker, info.quant_cp, info.codec,
               info.kv_cache);
        printf("\"machine\":{\"cpu\":");
        json_str(cpu);
        printf(",\"cpus\":%d,\"threads\":%d,\"isa\":\"%s\",\"llc_mb\":%.1f,"
               "\"cp_resident\":%s,",
               qtts_cpu_count(), threads, isa, llc_mb, cp_resident ? "true" : "false");
        if (isnan(rt_med)) printf("\"thread_round_trip_ns\":null},");
        else
            printf("\"thread_round_trip_ns\":{\"median\":%.0f,\"min\":%.0f,\"max\":%.0f}},",
                   rt_med, rt_min, rt_max);
        printf("\"text\":");
        json_str(text);
        printf(",\"words\":%d,\"runs\":%d,\"frames\":%.0f,\"stream_chunk_frames\":%d,"
               "\"stream_first_frames\":%d,\"open_s\":%.3f,",
               count_words(text), runs, frames_med, stream, stream ? stream_first : 0, t_open);
        printf("\"open_disk_mb\":%.1f,", open_disk_mb);
        char b[8][32];
        if (host)
            printf("\"probes\":{\"talker_read_gbs\":%.2f,\"cp_read_gbs\":%.2f,\"fma_gflops\":%.1f,"
                   "\"int8_gops\":%.1f},",
                   cost.talker_bytes / bw_t / 1e9, cost.cp_bytes / bw_c / 1e9, fma / 1e9, i8 / 1e9);
        else printf("\"probes\":null,");
        printf("\"stages\":{");
        printf("\"talker\":{\"ms_per_frame\":%.3f,\"floor_ms\":%s,\"x_floor\":%s,"
               "\"weight_bytes\":%.0f,\"flops\":%.0f},",
               talker_ms, num_or_null(b[0], 32, "%.3f", ft),
               num_or_null(b[1], 32, "%.3f", median(x_talker, runs)), cost.talker_bytes,
               2 * cost.talker_macs);
        printf("\"code_predictor\":{\"ms_per_frame\":%.3f,\"floor_ms\":%s,\"x_floor\":%s,"
               "\"weight_bytes\":%.0f,\"flops\":%.0f},",
               cp_ms, num_or_null(b[2], 32, "%.3f", fc), num_or_null(b[3], 32, "%.3f", median(x_cp, runs)),
               cost.cp_bytes, 2 * cost.cp_macs);
        printf("\"talker_cp\":{\"ms_per_frame\":%.3f,\"floor_ms\":%s,\"x_floor\":%s},",
               talker_ms + cp_ms, num_or_null(b[4], 32, "%.3f", ft + fc),
               num_or_null(b[5], 32, "%.3f", median(x_tcp, runs)));
        printf("\"codec\":{\"ms_per_frame\":%.3f,\"floor_ms\":%s,\"x_floor\":%s,\"flops\":%.0f}},",
               codec_ms, num_or_null(b[6], 32, "%.3f", fd),
               num_or_null(b[7], 32, "%.3f", median(x_codec, runs)), 2 * cost.codec_macs);
        printf("\"prefill_ms\":%.2f,\"prefill_rows\":%.0f,\"ref_skip_ms\":%.2f,\"ttfa_s\":%.3f,"
               "\"rtf\":%.3f,\"codec_overlap\":%s,",
               prefill_ms, prefill_rows, ref_skip_ms, overlap ? ov_ttfa : ttfa, overlap ? ov_rtf : rtf,
               overlap ? "true" : "false");
        if (overlap)
            printf("\"serial_codec\":{\"ttfa_s\":%.3f,\"rtf\":%.3f,\"overlap_rtf_ratio\":%.3f},",
                   ttfa, rtf, ov_ratio);
        printf("\"audio_s\":%.3f,\"peak_rss_mb\":%.1f,\"rss_after_open_mb\":%.1f}\n", audio_s,
               rss_peak_mb, rss_open_mb);
    } else {
        printf("qwen3-tts bench: %s (%s %s), talker %s, code predictor %s, codec %s, KV cache %s, "
               "%s backend\n",
               model, kinds[info.kind], info.size, info.quant_talker, info.quant_cp, info.codec,
               info.kv_cache, backend ? backend : "cpu");
        printf("machine: %s, %d CPUs, %d threads, kernels %s, last-level cache %.0f MB (code "
               "predictor prefetched to %s)",
               cpu, qtts_cpu_count(), threads, isa, llc_mb, cp_resident ? "L1, resident" : "L2");
        if (!isnan(rt_med))
            printf(", threads' round trip %.0f ns (%.0f-%.0f)", rt_med, rt_min, rt_max);
        printf("\n");
        if (host)
            printf("probes (medians): talker weights read at %.1f GB/s, code predictor's at %.1f GB/s; "
                   "fp32 FMA %.0f GFLOP/s (%s), int8 dot %.0f GOP/s (%s)\n",
                   cost.talker_bytes / bw_t / 1e9, cost.cp_bytes / bw_c / 1e9, fma / 1e9,
                   probe_name(pick_probe(), false), i8 / 1e9, probe_name(pick_probe(), true));
        else
            printf("probes: none (they measure this CPU, not the %s device: no floors)\n", backend);
        printf("text: \"%s\" (%d words); %.0f frames per run, %d runs, medians; ", text,
               count_words(text), frames_med, runs);
        if (stream)
            printf("audio streamed: first after %d frame(s), then doubling up to %d per decode\n\n",
                   stream_first, stream);
        else printf("audio in 300-frame windows\n\n");
        printf("%-22s %10s %10s %8s   %s\n", "stage", "ms/frame", "floor ms", "x floor",
               "per frame");
        char b[8][32];
        printf("%-22s %10.2f %10s %8s   %.3f GB weights, %.2f GFLOP\n", "talker", talker_ms,
               num_or_dash(b[0], 32, "%.2f", ft), num_or_dash(b[1], 32, "%.2f", median(x_talker, runs)),
               cost.talker_bytes / 1e9, 2 * cost.talker_macs / 1e9);
        printf("%-22s %10.2f %10s %8s   %.3f GB weights, %.2f GFLOP\n", "code predictor", cp_ms,
               num_or_dash(b[2], 32, "%.2f", fc), num_or_dash(b[3], 32, "%.2f", median(x_cp, runs)),
               cost.cp_bytes / 1e9, 2 * cost.cp_macs / 1e9);
        printf("%-22s %10.2f %10s %8s\n", "talker + CP", talker_ms + cp_ms,
               num_or_dash(b[4], 32, "%.2f", ft + fc), num_or_dash(b[5], 32, "%.2f", median(x_tcp, runs)));
        printf("%-22s %10.2f %10s %8s   %.2f GFLOP\n", "codec decoder", codec_ms,
               num_or_dash(b[6], 32, "%.2f", fd), num_or_dash(b[7], 32, "%.2f", median(x_codec, runs)),
               2 * cost.codec_macs / 1e9);
        printf("\n%-22s %10.1f ms (%.0f rows)\n", "prefill", prefill_ms, prefill_rows);
        if (ref_skip_ms > 0)   /* in-context clone: the decoder brought past the reference */
            printf("%-22s %10.1f ms\n", "reference skip", ref_skip_ms);
        printf("%-22s %10.3f s\n", "time to first audio", overlap ? ov_ttfa : ttfa);
        if (overlap) {
            printf("%-22s %10.3f   (%.2f s of audio per run; the codec beside generation)\n",
                   "RTF", ov_rtf, audio_s);
            printf("%-22s %10.3f   (the timed runs; beside generation: %.3f of it, median of "
                   "the runs)\n", "RTF, codec serial", rtf, ov_ratio);
        } else {
            printf("%-22s %10.3f   (%.2f s of audio per run)\n", "RTF", rtf, audio_s);
        }
        printf("%-22s %10.3f s   (%.0f MB of model files read from disk)\n", "open", t_open,
               open_disk_mb);
        printf("%-22s %10.0f MB (%.0f MB after open)\n", "peak RSS", rss_peak_mb, rss_open_mb);
    }
    free(talker_sp.s);
    free(cp_sp.s);
    free(talker_sp.mat);
    free(cp_sp.mat);
    qtts_session_free(ses);
    qtts_voice_free(voice);
    qtts_engine_close(eng);
    return 0;
}
