/*
 * bench_backend.c - per-frame timings of a backend's decode-time stages on
 * a model directory (not a test; make bench-cuda builds it with the CUDA
 * backend):
 *
 *   bench_backend MODEL_DIR [--backend NAME] [--frames N] [--prompt L]
 *                 [--batch B] [--window T] [--greedy] [--threads N] [--kv f32|bf16]
 *
 * A prefill of L random rows, then N frames of talker step + code-predictor
 * frame (sampled with the model's defaults unless --greedy) for B sequences
 * at once (B > 1: the batched stages), then codec-decoder windows of T
 * frames. Prints milliseconds per frame of each stage (median of the
 * frames after the first, which includes one-time setup such as graph
 * capture; and the mean of all frames, the statistic qwen3-tts bench
 * reports) and the decoder's milliseconds per frame of audio. --kv bf16:
 * the talker's KV cache in bf16 (CPU backend).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "backend/backend.h"
#include "base/thread.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/codec_decoder.h"
#include "model/generate.h"
#include "model/talker.h"


static void die(const char *what, const qtts_err *err) {
    fprintf(stderr, "bench_backend: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *backend = "cpu";
    int frames = 50, L = 100, B = 1, T = 100, threads = 0;
    bool greedy = false, kv_bf16 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc) frames = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--greedy")) greedy = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) kv_bf16 = !strcmp(argv[++i], "bf16");
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else {
            fprintf(stderr, "usage: bench_backend MODEL_DIR [--backend NAME] [--frames N] "
                            "[--prompt L] [--batch B] [--window T] [--greedy] [--threads N] "
                            "[--kv f32|bf16]\n");
            return 2;
        }
    }
    qtts_threads_init(threads);   /* the CPU kernels' pool (0: all cores), as the engine does */
    if (!dir || frames < 2 || L < 1 || B < 1 || B > 256 || T < 0) {
        fprintf(stderr, "bench_backend: bad arguments (see the usage in tools/bench_backend.c)\n");
        return 2;
    }
    qtts_err err = {0};
    qtts_config cfg;
    qtts_st_set *st = NULL;
    qtts_talker_weights *w = NULL;
    qtts_codec_decoder *codec = NULL;
    qtts_backend *be = NULL;
    double t0 = qtts_now();
    if (qtts_config_load(dir, &cfg, &err) || qtts_st_set_open(dir, "model", &st, &err) ||
        qtts_talker_load(&cfg, st, &w, &err) || qtts_codec_decoder_load(dir, &cfg, &codec, &err))
        die("load", &err);
    if (kv_bf16) w->kv = QTTS_KV_BF16;
    const double t_load = qtts_now() - t0;
    t0 = qtts_now();
    if (qtts_backend_open(backend, w, codec, &be, &err)) die("backend", &err);
    printf("model %s: load %.2f s, backend '%s' open %.2f s\n", dir, t_load, backend,
           qtts_now() - t0);

    const int H = w->hidden, V = w->vocab, G = w->n_groups;
    qtts_gen_params gp;
    qtts_gen_params_default(&cfg, &gp);
    if (greedy) gp.cp.do_sample = false;
    qtts_seq **seqs = calloc((size_t)B, sizeof *seqs);
    float *emb = malloc(sizeof(float) * (size_t)L * H), *text = calloc((size_t)H, sizeof(float));
    float *logits = malloc(sizeof(float) * (size_t)B * V), *hidden = malloc(sizeof(float) * (size_t)B * H);
    int32_t *codes = calloc((size_t)B * G, sizeof(int32_t));
    qtts_rng *rng = calloc((size_t)B, sizeof *rng);
    qtts_step_item *si = calloc((size_t)B, sizeof *si);
    qtts_cp_item *ci = calloc((size_t)B, sizeof *ci);
    qtts_err *errs = calloc((size_t)B, sizeof *errs);
    double *t_step = malloc(sizeof(double) * frames), *t_cp = malloc(sizeof(double) * frames);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)L * H; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        emb[i] = (float)((double)(x >> 11) * 0x1.0p-53 - 0.5) * 0.2f;
    }
    t0 = qtts_now();
    for (int b = 0; b < B; b++) {
        if (be->ops->seq_new(be, L + frames + 1, &seqs[b], &err)) die("sequence", &err);
        if (be->ops->prefill(be, seqs[b], emb, L, logits + (size_t)b * V, hidden + (size_t)b * H, &err))
            die("prefill", &err);
        qtts_rng_seed(&rng[b], (uint64_t)b);
    }
    printf("prefill: %d rows x %d sequences: %.2f ms per sequence\n", L, B,
           (qtts_now() - t0) * 1e3 / B);

    const double rt0 = qtts_threads_round_trip_ns();
    for (int f = 0; f < frames; f++) {
        for (int b = 0; b < B; b++) {
            codes[(size_t)b * G] = (f * 131 + b * 17) % 2048;
            ci[b] = (qtts_cp_item){.seq = seqs[b], .hidden = hidden + (size_t)b * H,
                                   .c0 = codes[(size_t)b * G], .sp = &gp.cp, .rng = &rng[b],
                                   .codes_out = codes + (size_t)b * G + 1, .err = &errs[b]};
        }
        t0 = qtts_now();
        qtts_status s = B == 1 ? be->ops->cp_frame(be, seqs[0], hidden, codes[0], &gp.cp, &rng[0],
                                                   codes + 1, NULL, &err)
                               : be->ops->cp_frame_batch(be, ci, B, &err);
        t_cp[f] = qtts_now() - t0;
        if (s) die("code predictor", &err);
        for (int b = 0; b < B; b++)
            si[b] = (qtts_step_item){.seq = seqs[b], .codes = codes + (size_t)b * G, .text_row = text,
                                     .logits = logits + (size_t)b * V,
                                     .hidden = hidden + (size_t)b * H, .err = &errs[b]};
        t0 = qtts_now();
        s = B == 1 ? be->ops->step(be, seqs[0], codes, text, logits, hidden, &err)
                   : be->ops->step_batch(be, si, B, &err);
        t_step[f] = qtts_now() - t0;
        if (s) die("talker step", &err);
    }
    /* where the threads sat (base/thread.h): ab_pairs.py tells rounds apart by it */
    const double rt1 = qtts_threads_round_trip_ns();
    if (rt0 >= 0 && rt1 >= 0)
        printf("threads' round trip: %.0f ns before the frames, %.0f ns after\n", rt0, rt1);
    const double first = (t_cp[0] + t_step[0]) * 1e3;
    double mean = 0;   /* over every frame, as qwen3-tts bench reports its stages */
    for (int f = 0; f < frames; f++) mean += (t_cp[f] + t_step[f]) * 1e3 / frames;
    const double ms_cp = bench_median(t_cp + 1, frames - 1) * 1e3;
    const double ms_step = bench_median(t_step + 1, frames - 1) * 1e3;
    printf("frame (batch %d): talker step %.3f ms, code predictor %.3f ms, total %.3f ms "
           "(%.3f ms per sequence-frame; first frame %.1f ms; mean of all frames %.3f ms)\n",
           B, ms_step, ms_cp, ms_step + ms_cp, (ms_step + ms_cp) / B, first, mean);

    if (T > 0) {
        int32_t *wc = malloc(sizeof(int32_t) * (size_t)T * codec->n_q);
        float *wav = malloc(sizeof(float) * (size_t)T * codec->upsample);
        for (int i = 0; i < T * codec->n_q; i++) wc[i] = (i * 7919) % codec->cb_size;
        double tw[5];
        for (int r = 0; r < 5; r++) {
            t0 = qtts_now();
            if (be->ops->codec_decode_window(be, wc, T, wav, &err)) die("codec", &err);
            tw[r] = qtts_now() - t0;
        }
        const double ms = bench_median(tw + 1, 4) * 1e3;
        printf("codec window of %d frames: %.2f ms (%.3f ms per frame of audio)\n", T, ms, ms / T);
        free(wc);
        free(wav);
    }
    for (int b = 0; b < B; b++) be->ops->seq_free(be, seqs[b]);
    qtts_backend_close(be);
    qtts_codec_decoder_free(codec);
    qtts_talker_free(w);
    qtts_st_set_close(st);
    free(seqs), free(emb), free(text), free(logits), free(hidden), free(codes), free(rng);
    free(si), free(ci), free(errs), free(t_step), free(t_cp);
    return 0;
}
