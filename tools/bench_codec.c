/*
 * bench_codec.c - codec decoder speed (`make bench-codec`, BENCH_ARGS="..."
 * to pass options). Not a test.
 *
 *   probe    fp32 FMA peak: 16 independent 16-lane FMA chains per thread
 *            (AVX-512 where the CPU has it, else AVX2), in GFLOP/s, run in
 *            the same process so that the kernels are compared with what
 *            this machine gives right now.
 *   decode   qtts_codec_decode_window over --frames frames of random codes:
 *            ms per frame (median of --runs), GFLOP/s (the convolutions'
 *            multiply-adds x 2, counted from the model's shapes) and its
 *            share of the probe, and a per-stage breakdown from the stage
 *            hook (time between consecutive hook calls).
 *   convs    each distinct decoder conv shape on its real weights over the
 *            column count one window of --frames frames gives it: ms per
 *            frame and GFLOP/s (--no-convs skips them).
 *   stream   qtts_codec_stream over --stream-frames frames pushed N frames
 *            at a time for each N of --push: ms per frame, time to the
 *            first push's audio, and a bit-for-bit check against
 *            qtts_codec_decode. Then, for comparison, what decoding each
 *            push as its own window with 25 frames of left context would
 *            give: max |diff| from the reference (--no-stream skips all).
 *
 *   bench_codec [--model DIR] [--frames 24] [--threads 1,2] [--runs 3]
 *               [--no-convs] [--no-stream] [--stream-frames 48]
 *               [--push 1,4,24] [--bf16] [--conv LABEL]
 *
 * --conv LABEL times only the convs whose label contains LABEL (e.g.
 * "decoder.1 res conv1 winograd"), to profile one shape alone.
 *
 * --bf16 runs the decoder with bf16 convolutions (qtts_codec_decoder_to_bf16)
 * and first reports their error against the fp32 decoder on the same codes.
 *
 * --frames 24 is the run size qtts_codec_decode streams in
 * (QTTS_CODEC_STREAM_FRAMES). On a shared machine the cpu-ms figures (CPU
 * time of the process, all threads) are the ones to compare; wall time
 * includes waiting for other tenants.
 *
 * DIR is a model directory with speech_tokenizer/ (default: the first of
 * /work/fullmodels/cv06 and /tmp/cb/full that exists). Weights are the
 * model's; codes are random (values do not change the speed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_util.h"
#include "base/base.h"
#include "base/thread.h"
#include "io/config.h"
#include "kernels/kernels.h"
#include "model/codec_decoder.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MAX_RUNS 64
#define MAX_STAGES 64


/* CPU seconds used by the process (all threads): on a shared machine the
 * one-thread figures are also given per CPU second, which other tenants'
 * load does not inflate. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ==== FMA peak probe ===================================================== */

#define PROBE_ITERS 4000000L

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float probe512(float seed) {
    __m512 a[16], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps(seed + (float)i);
    for (long it = 0; it < PROBE_ITERS; it++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    __m512 s = a[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) static float probe256(float seed) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(seed + (float)i);
    for (long it = 0; it < PROBE_ITERS; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    float o[8];
    _mm256_storeu_ps(o, s);
    return o[0] + o[7];
}
#endif

static double probe_flops_per_call(void) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return 16.0 * 16 * 2 * PROBE_ITERS;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 12.0 * 8 * 2 * PROBE_ITERS;
#endif
    return 0;
}

static volatile float probe_sink;
static void probe_task(void *ctx, int t) {
    (void)ctx;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) probe_sink = probe512((float)t);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        probe_sink = probe256((float)t);
#else
    (void)t;
#endif
}

/* GFLOP/s with the current pool (one probe per thread), median of runs. */
static double probe(int runs, double *per_cpu) {
    const double per = probe_flops_per_call();
    *per_cpu = 0;
    if (per == 0) return 0;
    const int n = qtts_threads_count();
    double g[MAX_RUNS], gc[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        const double t0 = qtts_now(), c0 = cpu_now();
        qtts_parallel_for(n, probe_task, NULL);
        g[r] = per * n / (qtts_now() - t0) / 1e9;
        gc[r] = per * n / (cpu_now() - c0) / 1e9;
    }
    *per_cpu = bench_median(gc, runs);
    return bench_median(g, runs);
}

/* ==== FLOP count ========================================================= */

static double conv_macs(const qtts_conv1d *c, double n) {
    return (double)c->cout * c->cin * c->taps * n;
}

/* Multiply-adds of the convolutions of a T-frame window, as they run. */
static double decoder_macs(const qtts_codec_decoder *d, int T) {
    return qtts_codec_decoder_conv_macs(d) * T;
}

/* ==== stage timing through the hook ====================================== */

typedef struct {
    int n;
    double last, last_cpu;
    char name[MAX_STAGES][32];
    double t[MAX_STAGES], c[MAX_STAGES];
} stage_times;

static void stage_hook(void *user, const char *stage, const float *x, int C, int n, size_t ld) {
    (void)x, (void)C, (void)n, (void)ld;
    stage_times *s = user;
    const double now = qtts_now(), now_cpu = cpu_now();
    if (s->n < MAX_STAGES) {
        snprintf(s->name[s->n], sizeof(s->name[0]), "%s", stage);
        s->t[s->n] = now - s->last;
        s->c[s->n++] = now_cpu - s->last_cpu;
    }
    s->last = qtts_now();
    s->last_cpu = cpu_now();
}

static int32_t *random_codes(const qtts_codec_decoder *d, int T) {
    int32_t *c = malloc(sizeof(int32_t) * (size_t)T * d->n_q);
    for (size_t i = 0; i < (size_t)T * d->n_q; i++) c[i] = (int32_t)(next_rand() % d->cb_size);
    return c;
}

static void bench_decode(const qtts_codec_decoder *d, int T, int runs, double peak,
                         double peak_cpu) {
    int32_t *codes = random_codes(d, T);
    float *wav = qtts_aligned_alloc(sizeof(float) * (size_t)T * d->upsample);
    qtts_err err = {0};
    double tot[MAX_RUNS], tot_cpu[MAX_RUNS];
    static stage_times st[MAX_RUNS];
    for (int r = -1; r < runs; r++) {   /* run -1 warms up */
        stage_times *s = &st[r < 0 ? 0 : r];
        memset(s, 0, sizeof(*s));
        qtts_codec_hook hook = {stage_hook, s};
        const double t0 = qtts_now(), c0 = cpu_now();
        s->last = t0;
        s->last_cpu = c0;
        if (qtts_codec_decode_window(d, codes, T, wav, &hook, &err) != QTTS_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            exit(1);
        }
        if (r >= 0) tot[r] = qtts_now() - t0, tot_cpu[r] = cpu_now() - c0;
    }
    const double sec = bench_median(tot, runs), csec = bench_median(tot_cpu, runs);
    const double flop = 2 * decoder_macs(d, T);
    printf("  decode %d frames: %.1f ms/frame wall (%.3f s per s of audio), %.1f GFLOP/s conv "
           "(%.0f%% of probe); %.1f cpu-ms/frame, %.1f GFLOP per cpu-s (%.0f%% of probe)\n",
           T, sec / T * 1e3, sec / T * 12.5, flop / sec / 1e9,
           peak > 0 ? 100 * flop / sec / 1e9 / peak : 0, csec / T * 1e3, flop / csec / 1e9,
           peak_cpu > 0 ? 100 * flop / csec / 1e9 / peak_cpu : 0);
    printf("    stage                 wall ms/frame  share   cpu-ms/frame  share\n");
    for (int i = 0; i < st[0].n; i++) {
        double v[MAX_RUNS], vc[MAX_RUNS];
        for (int r = 0; r < runs; r++) v[r] = st[r].t[i], vc[r] = st[r].c[i];
        const double m = bench_median(v, runs), mc = bench_median(vc, runs);
        printf("    %-20s %14.2f  %4.1f%%  %13.2f  %4.1f%%\n", st[0].name[i], m / T * 1e3,
               100 * m / sec, mc / T * 1e3, 100 * mc / csec);
    }
    free(codes);
    qtts_free(wav);
}

/* ==== single convolutions ================================================= */

static qtts_conv_ws *ws;
static const char *conv_only;   /* --conv: only the convs whose label holds it */

/* One conv over n columns (frames frames): direct, or through its Winograd
 * form when w is given (GFLOP/s then of the products it does). */
static void bench_conv_w(const char *label, const qtts_conv1d *c, const qtts_conv_wino *w, int n,
                         int frames, int runs, bool accumulate) {
    if (conv_only && !strstr(label, conv_only)) return;
    /* the history the conv reads (the Winograd form's left, where given) */
    const int P = QTTS_MAX((c->taps - 1) * c->dil, w ? w->left : 0);
    const size_t ldx = (size_t)n + P;
    float *x = qtts_aligned_alloc(sizeof(float) * (size_t)c->cin * ldx);
    float *y = qtts_aligned_alloc(sizeof(float) * (size_t)c->cout * n);
    for (size_t i = 0; i < (size_t)c->cin * ldx; i++)
        x[i] = (float)((int)(next_rand() % 2001) - 1000) / 1000.0f;
    for (size_t i = 0; i < (size_t)c->cout * n; i++) y[i] = 0;
    double t[MAX_RUNS], tc[MAX_RUNS];
    for (int r = -1; r < runs; r++) {
        const double t0 = qtts_now(), c0 = cpu_now();
        if (!w || !qtts_conv_wino_run(w, c, y, (size_t)n, x + P, ldx, n, ws))
            qtts_conv1d_run(c, y, (size_t)n, x + P, ldx, n, accumulate, ws);
        if (r >= 0) t[r] = qtts_now() - t0, tc[r] = cpu_now() - c0;
    }
    const double s = bench_median(t, runs), sc = bench_median(tc, runs);
    const double macs = w ? qtts_conv_wino_macs(w) * frames : conv_macs(c, n);
    printf("    %-34s %5d x %5d x %5d  %8.3f ms/frame  %6.1f GFLOP/s  %6.1f per cpu-s\n", label,
           c->cout, c->cin * c->taps, n, s / frames * 1e3, 2 * macs / s / 1e9, 2 * macs / sc / 1e9);
    qtts_free(x);
    qtts_free(y);
}

static void bench_conv(const char *label, const qtts_conv1d *c, int n, int frames, int runs,
                       bool accumulate) {
    bench_conv_w(label, c, NULL, n, frames, runs, accumulate);
}

static void bench_convs(const qtts_codec_decoder *d, int T, int runs) {
    char label[64];
    int n = T;
    bench_conv("pre_conv", &d->pre_conv, n, T, runs, false);
    for (int i = 0; i < d->n_ups; i++) {
        snprintf(label, sizeof(label), "upsample.%d tconv (polyphase)", i);
        bench_conv(label, &d->upx[i].tconv, n, T, runs, false);
        n *= d->upx[i].stride;
        snprintf(label, sizeof(label), "upsample.%d pw1", i);
        bench_conv(label, &d->upx[i].pw1, n, T, runs, false);
        snprintf(label, sizeof(label), "upsample.%d pw2", i);
        bench_conv(label, &d->upx[i].pw2, n, T, runs, false);
    }
    bench_conv("decoder.0", &d->dec0, n, T, runs, false);
    for (int b = 0; b < d->n_blocks; b++) {
        const qtts_codec_block *B = &d->blocks[b];
        snprintf(label, sizeof(label), "decoder.%d tconv (polyphase)", b + 1);
        bench_conv(label, &B->tconv, n, T, runs, false);
        if (B->tconv_w.frame) {   /* as the decoder runs it */
            snprintf(label, sizeof(label), "decoder.%d tconv winograd", b + 1);
            bench_conv_w(label, &B->tconv, &B->tconv_w, n, T, runs, false);
        }
        n *= B->stride;
        snprintf(label, sizeof(label), "decoder.%d res conv1 (x3, dil 1)", b + 1);
        bench_conv(label, &B->res[0].conv1, n, T, runs, false);
        snprintf(label, sizeof(label), "decoder.%d res conv1 (dil 9)", b + 1);
        bench_conv(label, &B->res[2].conv1, n, T, runs, false);
        for (int r = 0; r < 3; r += 2)
            if (B->res[r].wino1.frame) {   /* as the decoder runs them */
                snprintf(label, sizeof(label), "decoder.%d res conv1 winograd (dil %d)", b + 1,
                         B->res[r].dil);
                bench_conv_w(label, &B->res[r].conv1, &B->res[r].wino1, n, T, runs, false);
            }
        snprintf(label, sizeof(label), "decoder.%d res conv2 (x3)", b + 1);
        bench_conv(label, &B->res[0].conv2, n, T, runs, true);
    }
    bench_conv("decoder.6", &d->dec_out, n, T, runs, false);
}

/* ==== streaming ============================================================ */

/* ms per frame (wall and cpu) pushing T frames `push` at a time; the output
 * is checked against want (bit for bit). */
static void bench_stream(const qtts_codec_decoder *d, const int32_t *codes, int T, int push,
                         const float *want, int runs) {
    qtts_codec_stream *s;
    qtts_err err = {0};
    if (qtts_codec_stream_new(d, QTTS_MIN(push, QTTS_CODEC_STREAM_FRAMES), &s, &err) != QTTS_OK) {
        fprintf(stderr, "stream: %s\n", err.msg);
        exit(1);
    }
    const size_t U = (size_t)d->upsample;
    float *wav = qtts_aligned_alloc(sizeof(float) * U * T);
    double t[MAX_RUNS], tc[MAX_RUNS], first = 0;
    for (int r = -1; r < runs; r++) {
        qtts_codec_stream_reset(s);
        const double t0 = qtts_now(), c0 = cpu_now();
        for (int f = 0; f < T; f += push) {
            const int n = QTTS_MIN(push, T - f);
            if (qtts_codec_stream_push(s, codes + (size_t)f * d->n_q, n, wav + f * U, &err) != QTTS_OK) {
                fprintf(stderr, "push: %s\n", err.msg);
                exit(1);
            }
            if (f == 0 && r == 0) first = qtts_now() - t0;
        }
        if (r >= 0) t[r] = qtts_now() - t0, tc[r] = cpu_now() - c0;
    }
    const bool same = memcmp(wav, want, sizeof(float) * U * T) == 0;
    printf("    push %3d: %7.1f ms/frame wall, %7.1f cpu-ms/frame, first push %.0f ms; %s\n", push,
           bench_median(t, runs) / T * 1e3, bench_median(tc, runs) / T * 1e3, first * 1e3,
           same ? "bit-identical to qtts_codec_decode" : "DIFFERS from qtts_codec_decode");
    qtts_free(wav);
    qtts_codec_stream_free(s);
}

/* What decoding each push of n frames from scratch with ctx frames of left
 * context (a window per push) would give instead of the exact stream:
 * max |difference| from the reference decode. */
static void bench_context_mode(const qtts_codec_decoder *d, const int32_t *codes, int T, int n,
                               int ctx, const float *want) {
    const size_t U = (size_t)d->upsample;
    float *w = qtts_aligned_alloc(sizeof(float) * U * (size_t)(n + ctx));
    double e = 0;
    qtts_err err = {0};
    for (int f = 0; f < T; f += n) {
        const int m = QTTS_MIN(n, T - f), c = QTTS_MIN(ctx, f);
        if (qtts_codec_decode_window(d, codes + (size_t)(f - c) * d->n_q, m + c, w, NULL, &err) != QTTS_OK) {
            fprintf(stderr, "decode_window: %s\n", err.msg);
            exit(1);
        }
        for (size_t i = 0; i < (size_t)m * U; i++) {
            const double v = fabs((double)w[c * U + i] - want[f * U + i]);
            if (v > e) e = v;
        }
    }
    printf("    left-context decode (%d frames per window + %d of context): max |diff| %.3g\n", n,
           ctx, e);
    qtts_free(w);
}

/* ==== main ================================================================ */

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

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int main(int argc, char **argv) {
    const char *model = NULL;
    int frames = 24, runs = 3, threads[8] = {1, 2}, n_threads = 2;
    int stream_frames = 48, pushes[8] = {1, 4, 24}, n_pushes = 3;
    bool convs = true, stream = true, bf16 = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--model") && v) model = v, i++;
        else if (!strcmp(a, "--frames") && v) frames = atoi(v), i++;
        else if (!strcmp(a, "--runs") && v) runs = atoi(v), i++;
        else if (!strcmp(a, "--threads") && v) n_threads = parse_list(v, threads, 8), i++;
        else if (!strcmp(a, "--no-convs")) convs = false;
        else if (!strcmp(a, "--no-stream")) stream = false;
        else if (!strcmp(a, "--bf16")) bf16 = true;
        else if (!strcmp(a, "--conv") && v) conv_only = v, i++;
        else if (!strcmp(a, "--stream-frames") && v) stream_frames = atoi(v), i++;
        else if (!strcmp(a, "--push") && v) n_pushes = parse_list(v, pushes, 8), i++;
        else {
            fprintf(stderr, "usage: bench_codec [--model DIR] [--frames N] [--threads 1,2] "
                            "[--runs N] [--no-convs] [--no-stream] [--stream-frames N] "
                            "[--push 1,4,24] [--bf16] [--conv LABEL]\n");
            return 2;
        }
    }
    if (runs < 1) runs = 1;
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    if (frames < 1) frames = 1;
    ws = qtts_conv_ws_new();
    if (!model) model = is_dir("/work/fullmodels/cv06") ? "/work/fullmodels/cv06" : "/tmp/cb/full";
    qtts_config cfg;
    qtts_err err = {0};
    qtts_codec_decoder *d = NULL;
    if (qtts_config_load(model, &cfg, &err) != QTTS_OK ||
        qtts_codec_decoder_load(model, &cfg, &d, &err) != QTTS_OK) {
        fprintf(stderr, "bench_codec: %s: %s\n", model, err.msg);
        return 1;
    }
    if (bf16 && qtts_codec_decoder_to_bf16(d, &err) != QTTS_OK) {
        fprintf(stderr, "bench_codec: %s\n", err.msg);
        return 1;
    }
    if (bf16) { /* the error of the bf16 convs: the same codes through an fp32 decoder */
        qtts_codec_decoder *ref = NULL;
        const int T = 48;
        int32_t *codes = random_codes(d, T);
        float *a = qtts_aligned_alloc(sizeof(float) * (size_t)T * d->upsample),
              *b = qtts_aligned_alloc(sizeof(float) * (size_t)T * d->upsample);
        if (qtts_codec_decoder_load(model, &cfg, &ref, &err) != QTTS_OK ||
            qtts_codec_decode(ref, codes, T, a, &err) != QTTS_OK ||
            qtts_codec_decode(d, codes, T, b, &err) != QTTS_OK) {
            fprintf(stderr, "bench_codec: %s\n", err.msg);
            return 1;
        }
        double sig = 0, noise = 0, worst = 0;
        for (size_t i = 0; i < (size_t)T * d->upsample; i++) {
            sig += (double)a[i] * a[i];
            noise += ((double)b[i] - a[i]) * ((double)b[i] - a[i]);
            worst = fmax(worst, fabs((double)b[i] - a[i]));
        }
        const double n = (double)T * d->upsample;
        printf("bf16 convs against the fp32 decoder, %d frames of random codes: SNR %.1f dB, "
               "rms error %.2e (signal rms %.2e), max |error| %.2e\n",
               T, 10 * log10(sig / fmax(noise, 1e-300)), sqrt(noise / n), sqrt(sig / n), worst);
        qtts_codec_decoder_free(ref);
        qtts_free(a);
        qtts_free(b);
        free(codes);
    }
    printf("codec decoder %s: latent %d, decoder_dim %d, %d samples/frame; conv kernels %s%s\n",
           model, d->latent, d->dec_dim, d->upsample, qtts_conv_isa_name(),
           bf16 ? " (convs bf16)" : "");
    printf("conv work, as run (Winograd for the residual units' k7 convs and the later tconvs%s): %.2f GFLOP "
           "per frame (%.1f GFLOP per s of audio)\n", d->blocks[0].res[0].wino1.frame ? "" : ": off",
           2 * decoder_macs(d, frames) / frames / 1e9, 2 * decoder_macs(d, frames) / frames * 12.5 / 1e9);
    for (int ti = 0; ti < n_threads; ti++) {
        const int nt = qtts_threads_init(threads[ti]);
        double peak_cpu = 0;
        const double peak = probe(3, &peak_cpu);
        printf("\n== %d thread%s: FMA probe %.1f GFLOP/s (%.1f per cpu-s) ==\n", nt,
               nt == 1 ? "" : "s", peak, peak_cpu);
        if (!conv_only) bench_decode(d, frames, runs, peak, peak_cpu);
        if (convs) {
            printf("  convs (one window of %d frames):\n", frames);
            bench_convs(d, frames, runs);
        }
        if (stream && stream_frames > 0) {
            int32_t *codes = random_codes(d, stream_frames);
            float *want = qtts_aligned_alloc(sizeof(float) * (size_t)d->upsample * stream_frames);
            if (qtts_codec_decode(d, codes, stream_frames, want, &err) != QTTS_OK) {
                fprintf(stderr, "decode: %s\n", err.msg);
                return 1;
            }
            printf("  stream over %d frames:\n", stream_frames);
            for (int p = 0; p < n_pushes; p++)
                if (pushes[p] > 0) bench_stream(d, codes, stream_frames, pushes[p], want, runs);
            if (ti == 0) {
                bench_context_mode(d, codes, stream_frames, 4, QTTS_CODEC_LEFT_CONTEXT, want);
                bench_context_mode(d, codes, stream_frames, 16, QTTS_CODEC_LEFT_CONTEXT, want);
            }
            free(codes);
            qtts_free(want);
        }
    }
    qtts_codec_decoder_free(d);
    qtts_conv_ws_free(ws);
    qtts_threads_shutdown();
    return 0;
}
