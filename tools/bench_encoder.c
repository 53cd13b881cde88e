/*
 * bench_encoder.c - speed of the voice-cloning encoders of a Base model
 * (`make bench-encoder`, BENCH_ARGS="..." to pass options). Not a test.
 *
 *   x-vector   qtts_spk_enc_embed: log-mel + ECAPA-TDNN speaker encoder
 *   codes      qtts_codec_encode: SEANet + transformer + downsample + RVQ,
 *              with the time to each stage from the stage hook (SEANet,
 *              transformer, downsample, then the quantizer to the end)
 *
 * on --seconds S of a deterministic test signal (a chirp under noise; the
 * values do not change the speed), for each thread count of --threads:
 * median of --runs calls, in ms and in ms per second of audio. These are
 * what an in-context clone from a recording costs before its prefill
 * (`synth --ref-audio`, the server's inline `ref_audio`, `voice create`).
 *
 *   bench_encoder --model DIR [--seconds 10] [--threads 1,2] [--runs 3] [--chunk F]
 *
 * --chunk: the SEANet's chunk in 25 Hz frames (qtts_codec_encoder.chunk_frames;
 * the output does not depend on it, only the speed and the scratch size).
 *
 * DIR: a Base model directory (speech_tokenizer/ included).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "base/base.h"
#include "base/thread.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/codec_encoder.h"
#include "model/speaker_encoder.h"

#define MAX_RUNS 64


static void die(const char *what, const qtts_err *err) {
    fprintf(stderr, "bench_encoder: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* Seconds from the start of the call to each hook stage. */
enum { ST_SEANET, ST_TRANSFORMER, ST_DOWNSAMPLE, N_ST };
static const char *const st_name[N_ST] = {"encoder", "encoder_transformer", "downsample"};
typedef struct {
    double t0, at[N_ST];
} stage_times;

static void on_stage(void *user, const char *stage, const float *x, int channels, int frames,
                     size_t ld) {
    (void)x, (void)channels, (void)frames, (void)ld;
    stage_times *s = user;
    for (int i = 0; i < N_ST; i++)
        if (!strcmp(stage, st_name[i])) s->at[i] = qtts_now() - s->t0;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_encoder --model DIR [--seconds 10] [--threads 1,2] [--runs 3] "
                    "[--chunk F]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *model = NULL, *threads_arg = "1,2";
    double seconds = 10;
    int runs = 3, chunk = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--model")) model = argv[++i];
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads_arg = argv[++i];
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunk")) chunk = atoi(argv[++i]);
        else usage();
    }
    if (!model || !(seconds > 0 && seconds <= 600) || runs < 1 || runs > MAX_RUNS || chunk < 0)
        usage();

    qtts_err err = {0};
    qtts_config cfg;
    qtts_st_set *st = NULL;
    qtts_spk_enc *spk = NULL;
    qtts_codec_encoder *enc = NULL;
    if (qtts_config_load(model, &cfg, &err)) die(model, &err);
    if (cfg.model_type != QTTS_MODEL_BASE) {
        fprintf(stderr, "bench_encoder: %s is not a Base model (no encoders)\n", model);
        return 1;
    }
    const double t_load = qtts_now();
    if (qtts_st_set_open(model, "model", &st, &err)) die("model.safetensors", &err);
    if (qtts_spk_enc_load(st, &cfg, &spk, &err)) die("speaker encoder", &err);
    if (qtts_codec_encoder_load(model, &cfg, &enc, &err)) die("codec encoder", &err);
    if (chunk) enc->chunk_frames = chunk;
    printf("encoders of %s: loaded in %.2f s; SEANet chunk %d frames\n", model,
           qtts_now() - t_load, enc->chunk_frames);

    const size_t n = (size_t)(seconds * 24000);
    float *wav = malloc(sizeof(float) * n);
    float *xvec = malloc(sizeof(float) * (size_t)qtts_spk_enc_dim(spk));
    if (!wav || !xvec) die("out of memory", NULL);
    uint32_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        const double t = (double)i / 24000;
        r = r * 1664525u + 1013904223u;
        wav[i] = (float)(0.3 * sin(2 * M_PI * (150 + 40 * t) * t) +
                         0.05 * ((double)(r >> 8) / 16777216.0 - 0.5));
    }
    printf("signal: %.2f s at 24 kHz; median of %d runs (one warm-up first)\n\n", seconds, runs);
    printf("%-8s %12s %12s %10s %12s %10s %10s %10s\n", "threads", "x-vector ms", "codes ms",
           "ms / s", "SEANet", "transf.", "downs.", "RVQ");

    for (const char *p = threads_arg; *p;) {
        const int th = atoi(p);
        if (th < 1) usage();
        qtts_threads_init(th);
        double tx[MAX_RUNS], tc[MAX_RUNS], ts[N_ST + 1][MAX_RUNS];
        for (int k = -1; k < runs; k++) {
            double t0 = qtts_now();
            if (qtts_spk_enc_embed(spk, wav, n, xvec, &err)) die("x-vector", &err);
            const double dx = qtts_now() - t0;
            stage_times s = {.t0 = qtts_now()};
            qtts_codec_enc_hook hook = {on_stage, &s};
            int32_t *codes = NULL;
            int F = 0;
            if (qtts_codec_encode_hooked(enc, wav, n, &codes, &F, &hook, &err)) die("codes", &err);
            const double dc = qtts_now() - s.t0;
            qtts_free(codes);
            if (k < 0) continue;
            tx[k] = 1e3 * dx;
            tc[k] = 1e3 * dc;
            double prev = 0;
            for (int i = 0; i < N_ST; i++) {
                ts[i][k] = 1e3 * (s.at[i] - prev);
                prev = s.at[i];
            }
            ts[N_ST][k] = 1e3 * (dc - prev);
        }
        const double mx = bench_median(tx, runs), mc = bench_median(tc, runs);
        printf("%-8d %12.1f %12.1f %10.1f %12.1f %10.1f %10.1f %10.1f\n", th, mx, mc,
               (mx + mc) / seconds, bench_median(ts[0], runs), bench_median(ts[1], runs),
               bench_median(ts[2], runs), bench_median(ts[3], runs));
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    free(wav);
    free(xvec);
    qtts_codec_encoder_free(enc);
    qtts_spk_enc_free(spk);
    qtts_st_set_close(st);
    qtts_threads_shutdown();
    return 0;
}
