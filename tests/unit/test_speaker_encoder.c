/*
 * test_speaker_encoder.c - log-mel front end and ECAPA-TDNN x-vector of the
 * Base models against the official reference.
 *
 * Goldens (tests/fixtures/README.md): every tests/fixtures/golden/<model>/
 * <case>.safetensors holding `xvector` F32 [E] is checked with the tiny
 * model tests/fixtures/models/<model>:
 *   - `ref_audio_24k` F32 [N] (the reference's resampled mono input) against
 *     our decode + resample of inputs.ref_audio from <case>.json:
 *     max abs error <= 1e-6 (bit-exact with the same libsoxr);
 *   - `mel` F32 [T, 128] against qtts_logmel_compute(ref_audio_24k):
 *     max |c - r| / max(|r|, 1) <= 1e-4 (log values near 0 are compared
 *     absolutely);
 *   - `xvector` against qtts_spk_enc_embed(ref_audio_24k), against
 *     qtts_spk_enc_embed_mel(golden mel), and end to end from the WAV:
 *     max |c - r| / max(|r|, 1e-3) <= 1e-4 per element.
 * Golden-free checks: the filterbank against values taken from
 * librosa.filters.mel, the FFT front end against a direct DFT, frame
 * counts, argument errors, determinism (thread counts too), and load errors (no speaker
 * encoder, inconsistent config, mis-shaped tensors).
 * QTTS_TEST_VERBOSE=1 prints every measured error.
 */
#include "harness.h"
#include "base/json.h"
#include "base/thread.h"
#include "io/audio.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/speaker_encoder.h"

#include <dirent.h>
#include <stdint.h>

#define GOLDEN_DIR QTTS_FIXTURES "/golden"
#define MEL_TOL 1e-4
#define XVEC_TOL 1e-4
#define AUDIO_TOL 1e-6

static bool verbose(void) { return getenv("QTTS_TEST_VERBOSE") != NULL; }

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

typedef struct {
    qtts_config cfg;
    qtts_st_set *st;
    qtts_spk_enc *enc;
} model;

static bool model_open(const char *name, model *m, qtts_err *err) {
    char dir[256];
    snprintf(dir, sizeof dir, QTTS_FIXTURES "/models/%s", name);
    memset(m, 0, sizeof *m);
    if (qtts_config_load(dir, &m->cfg, err)) return false;
    if (qtts_st_set_open(dir, "model", &m->st, err)) return false;
    return qtts_spk_enc_load(m->st, &m->cfg, &m->enc, err) == QTTS_OK;
}

static void model_close(model *m) {
    qtts_spk_enc_free(m->enc);
    qtts_st_set_close(m->st);
}

/* ---- front end without goldens ------------------------------------------- */

static void test_filterbank_matches_librosa(void) {
    qtts_logmel *lm = NULL;
    qtts_err err = {0};
    REQUIRE(qtts_logmel_new(&lm, &err) == QTTS_OK, "%s", err.msg);
    const float *F = qtts_logmel_filters(lm);
    /* librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128, fmin=0, fmax=12000) */
    double sum = 0;
    for (int i = 0; i < QTTS_MEL_BINS * QTTS_MEL_NFREQ; i++) sum += F[i];
    CHECK(sum == 0x1.5d671192bbc00p+2, "sum of weights %a", sum);
    const struct { int row, col; double v; } pts[] = {
        {0, 1, 0x1.12d858p-5}, {0, 2, 0x1.18caaep-7}, {0, 3, 0.0},
        {127, 500, 0x1.66e4cp-9}, {127, 511, 0x1.de8654p-13}, {127, 512, 0.0},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(pts); i++)
        CHECK(F[pts[i].row * QTTS_MEL_NFREQ + pts[i].col] == (float)pts[i].v, "F[%d][%d] = %a",
              pts[i].row, pts[i].col, (double)F[pts[i].row * QTTS_MEL_NFREQ + pts[i].col]);
    /* non-zero ranges [lo, hi) of rows 0, 1, 64, 127 */
    const struct { int row, lo, hi; } nz[] = {{0, 1, 3}, {1, 2, 4}, {64, 88, 92}, {127, 485, 512}};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(nz); i++) {
        const float *r = F + nz[i].row * QTTS_MEL_NFREQ;
        int lo = -1, hi = -1;
        for (int k = 0; k < QTTS_MEL_NFREQ; k++)
            if (r[k] != 0) {
                if (lo < 0) lo = k;
                hi = k + 1;
            }
        CHECK(lo == nz[i].lo && hi == nz[i].hi, "row %d non-zero [%d, %d)", nz[i].row, lo, hi);
    }
    qtts_logmel_free(lm);
}

/* Direct definition: reflect pad, periodic Hann (fp64), O(N^2) DFT, mel
 * with the (already checked) filterbank, log clamp. */
static void test_logmel_vs_direct_dft(void) {
    qtts_logmel *lm = NULL;
    qtts_err err = {0};
    REQUIRE(qtts_logmel_new(&lm, &err) == QTTS_OK, "%s", err.msg);
    const size_t n = 3000; /* T = 11 */
    float *x = malloc(sizeof(float) * n);
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++)
        x[i] = 0.3f * frand(&s) + 0.5f * (float)sin(2 * M_PI * 1000.0 * (double)i / 24000);
    const size_t T = qtts_logmel_frames(n);
    CHECK(T == n / 256, "frames %zu", T);
    float *mel = malloc(sizeof(float) * T * QTTS_MEL_BINS);
    REQUIRE(qtts_logmel_compute(lm, x, n, mel, QTTS_MEL_BINS, 1, &err) == QTTS_OK, "%s", err.msg);
    const float *F = qtts_logmel_filters(lm);
    double worst = 0;
    const size_t frames_to_check[] = {0, 1, T / 2, T - 1};
    for (size_t fi = 0; fi < QTTS_ARRAY_LEN(frames_to_check); fi++) {
        const size_t t = frames_to_check[fi];
        double fr[QTTS_MEL_NFFT], mag[QTTS_MEL_NFREQ];
        for (int j = 0; j < QTTS_MEL_NFFT; j++) {
            long p = (long)(t * 256) + j - 384;
            if (p < 0) p = -p;
            if (p >= (long)n) p = 2 * ((long)n - 1) - p;
            fr[j] = (0.5 - 0.5 * cos(2 * M_PI * j / QTTS_MEL_NFFT)) * x[p];
        }
        for (int k = 0; k < QTTS_MEL_NFREQ; k++) {
            double re = 0, im = 0;
            for (int j = 0; j < QTTS_MEL_NFFT; j++) {
                const double a = -2 * M_PI * (double)((long)k * j % QTTS_MEL_NFFT) / QTTS_MEL_NFFT;
                re += fr[j] * cos(a);
                im += fr[j] * sin(a);
            }
            mag[k] = sqrt(re * re + im * im + 1e-9);
        }
        for (int b = 0; b < QTTS_MEL_BINS; b++) {
            double v = 0;
            for (int k = 0; k < QTTS_MEL_NFREQ; k++) v += F[b * QTTS_MEL_NFREQ + k] * mag[k];
            const double want = log(v > 1e-5 ? v : 1e-5);
            const double d = fabs(mel[t * QTTS_MEL_BINS + b] - want) / fmax(fabs(want), 1.0);
            worst = fmax(worst, d);
        }
    }
    CHECK(worst < 2e-6, "log-mel vs direct DFT: %.3g", worst);
    if (verbose()) fprintf(stderr, "  log-mel vs direct DFT: %.3g\n", worst);
    free(mel);
    free(x);
    qtts_logmel_free(lm);
}

static void test_logmel_arguments(void) {
    CHECK(qtts_logmel_frames(0) == 0 && qtts_logmel_frames(384) == 0, "too short");
    CHECK(qtts_logmel_frames(385) == 1 && qtts_logmel_frames(511) == 1, "one frame");
    CHECK(qtts_logmel_frames(512) == 2 && qtts_logmel_frames(48000) == 187, "frames");
    qtts_logmel *lm = NULL;
    qtts_err err = {0};
    REQUIRE(qtts_logmel_new(&lm, &err) == QTTS_OK, "%s", err.msg);
    float x[400] = {0}, out[128];
    CHECK(qtts_logmel_compute(lm, x, 384, out, 128, 1, &err) == QTTS_ERR_INVALID, "384 samples");
    CHECK(qtts_logmel_compute(lm, x, 385, out, 128, 1, &err) == QTTS_OK, "%s", err.msg);
    CHECK(out[0] == logf(1e-5f) && out[127] == logf(1e-5f), "silence floors at log(1e-5)");
    x[390] = NAN;
    CHECK(qtts_logmel_compute(lm, x, 400, out, 128, 1, &err) == QTTS_ERR_INVALID &&
              strstr(err.msg, "non-finite sample 390"), "NaN: %s", err.msg);
    qtts_logmel_free(lm);
}

/* ---- load errors ----------------------------------------------------------- */

static void test_load_errors(void) {
    qtts_err err = {0};
    model m;
    /* a CustomVoice model has no speaker encoder */
    {
        qtts_config cfg;
        qtts_st_set *st = NULL;
        qtts_spk_enc *e = NULL;
        REQUIRE(qtts_config_load(QTTS_FIXTURES "/models/cv06", &cfg, &err) == QTTS_OK, "%s", err.msg);
        REQUIRE(qtts_st_set_open(QTTS_FIXTURES "/models/cv06", "model", &st, &err) == QTTS_OK, "%s",
                err.msg);
        CHECK(qtts_spk_enc_load(st, &cfg, &e, &err) == QTTS_ERR_INVALID && e == NULL, "cv06: %s",
              err.msg);
        qtts_st_set_close(st);
    }
    REQUIRE(model_open("base06", &m, &err), "%s", err.msg);
    const struct {
        const char *what;
        void (*patch)(qtts_config *);
        const char *msg;
    } cases[] = {
        {"se_channels", NULL, "speaker_encoder.blocks.1.se_block.conv1.weight"},
        {"enc_dim", NULL, "speaker_encoder.fc.weight"},
        {"attn", NULL, "speaker_encoder.asp.tdnn.conv.weight"},
        {"kernel", NULL, "speaker_encoder.blocks.1.res2net_block.blocks.0.conv.weight"},
        {"mfa", NULL, "enc_channels[4]"},
        {"residual", NULL, "blocks 0-3 must be equal"},
        {"mel", NULL, "mel_dim"},
        {"rate", NULL, "sample_rate"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cases); i++) {
        qtts_config c = m.cfg;
        switch (i) {
        case 0: c.spk_se_channels += 1; break;
        case 1: c.spk_enc_dim += 1; break;
        case 2: c.spk_attn_channels += 1; break;
        case 3: c.spk_kernels[1] = 5; break;
        case 4: c.spk_channels[4] += 1; break;
        case 5: c.spk_channels[2] += 8; break;
        case 6: c.spk_mel_dim = 80; break;
        case 7: c.spk_sample_rate = 16000; break;
        }
        qtts_spk_enc *e = NULL;
        qtts_status st = qtts_spk_enc_load(m.st, &c, &e, &err);
        CHECK(st != QTTS_OK && e == NULL && strstr(err.msg, cases[i].msg),
              "%s: %s (want \"%s\")", cases[i].what, err.msg, cases[i].msg);
        if (verbose()) fprintf(stderr, "  %-12s -> %s\n", cases[i].what, err.msg);
        qtts_spk_enc_free(e);
    }
    model_close(&m);
}

static void test_embed_arguments_and_determinism(void) {
    qtts_err err = {0};
    model m;
    REQUIRE(model_open("base17", &m, &err), "%s", err.msg);
    const int E = qtts_spk_enc_dim(m.enc);
    CHECK(E == m.cfg.talker.hidden, "E %d", E);
    const size_t min_n = qtts_spk_enc_min_samples(m.enc);
    /* dilation 4, k3: T must exceed 4 -> 5 frames = 1280 samples */
    CHECK(min_n == 1280, "min samples %zu", min_n);
    float *x = malloc(sizeof(float) * 24000);
    uint64_t s = 3;
    for (int i = 0; i < 24000; i++) x[i] = 0.2f * frand(&s);
    float *a = malloc(sizeof(float) * E), *b = malloc(sizeof(float) * E);
    CHECK(qtts_spk_enc_embed(m.enc, x, min_n - 1, a, &err) == QTTS_ERR_INVALID, "too short");
    CHECK(qtts_spk_enc_embed(m.enc, x, min_n, a, &err) == QTTS_OK, "%s", err.msg);
    CHECK(qtts_spk_enc_embed(m.enc, x, 24000, a, &err) == QTTS_OK, "%s", err.msg);
    CHECK(qtts_spk_enc_embed(m.enc, x, 24000, b, &err) == QTTS_OK && !memcmp(a, b, sizeof(float) * E),
          "two runs differ");
    /* the convolutions run on the thread pool: the same bits at any count */
    for (int th = 2; th <= 3; th++) {
        qtts_threads_init(th);
        CHECK(qtts_spk_enc_embed(m.enc, x, 24000, b, &err) == QTTS_OK &&
                  !memcmp(a, b, sizeof(float) * E),
              "%d threads differ from 1", th);
    }
    qtts_threads_init(1);
    CHECK(qtts_spk_enc_embed_mel(m.enc, x, 4, a, &err) == QTTS_ERR_INVALID, "4 mel frames");
    x[100] = INFINITY;
    CHECK(qtts_spk_enc_embed(m.enc, x, 24000, a, &err) == QTTS_ERR_INVALID, "Inf input");
    free(a);
    free(b);
    free(x);
    model_close(&m);
}

/* ---- goldens ---------------------------------------------------------------- */

static float *tensor_f32(const qtts_st_file *g, const char *name, const qtts_tensor **t) {
    *t = qtts_st_find(g, name);
    if (!*t || ((*t)->dtype != QTTS_DT_F32)) return NULL;
    float *v = malloc(sizeof(float) * ((*t)->numel ? (*t)->numel : 1));
    qtts_tensor_to_f32(*t, v);
    return v;
}

static void check_case(model *m, const char *mname, const char *spath, const char *ref_audio,
                       int *n_cases) {
    qtts_err err = {0};
    qtts_st_file *g = NULL;
    if (qtts_st_open(spath, &g, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const qtts_tensor *ta, *tm, *tx;
    float *gaudio = tensor_f32(g, "ref_audio_24k", &ta), *gmel = tensor_f32(g, "mel", &tm),
          *gx = tensor_f32(g, "xvector", &tx);
    const int E = qtts_spk_enc_dim(m->enc);
    if (!gx) goto done; /* not a clone case */
    (*n_cases)++;
    REQUIRE(gaudio && gmel, "%s: ref_audio_24k/mel missing", spath);
    CHECK(tx->rank == 1 && tx->shape[0] == E, "%s: xvector shape", spath);
    const size_t N = (size_t)ta->numel, T = qtts_logmel_frames(N);
    CHECK(tm->rank == 2 && (size_t)tm->shape[0] == T && tm->shape[1] == QTTS_MEL_BINS,
          "%s: mel shape [%lld, %lld] for %zu samples", spath, (long long)tm->shape[0],
          (long long)tm->shape[1], N);
    if (tm->rank != 2 || (size_t)tm->shape[0] != T || tx->shape[0] != E) goto done;

    float *mel = malloc(sizeof(float) * T * QTTS_MEL_BINS), *xv = malloc(sizeof(float) * E);
    /* mel from the golden 24 kHz input */
    CHECK(qtts_logmel_compute(qtts_spk_enc_logmel(m->enc), gaudio, N, mel, QTTS_MEL_BINS, 1, &err) ==
              QTTS_OK, "%s", err.msg);
    size_t at;
    const double e_mel = test_max_rel_err(mel, gmel, T * QTTS_MEL_BINS, 1.0, &at);
    CHECK(e_mel <= MEL_TOL, "%s: log-mel error %.3g at [%zu, %zu]", spath, e_mel, at / 128, at % 128);
    /* x-vector from the golden audio, and from the golden mel */
    CHECK(qtts_spk_enc_embed(m->enc, gaudio, N, xv, &err) == QTTS_OK, "%s", err.msg);
    const double e_x = test_max_rel_err(xv, gx, (size_t)E, 1e-3, &at);
    CHECK(e_x <= XVEC_TOL, "%s: x-vector error %.3g at %zu", spath, e_x, at);
    CHECK(qtts_spk_enc_embed_mel(m->enc, gmel, T, xv, &err) == QTTS_OK, "%s", err.msg);
    const double e_xm = test_max_rel_err(xv, gx, (size_t)E, 1e-3, &at);
    CHECK(e_xm <= XVEC_TOL, "%s: x-vector (golden mel) error %.3g at %zu", spath, e_xm, at);
    /* end to end from the WAV: decode, resample, embed */
    double e_a = -1, e_xw = -1;
    char wpath[512];
    snprintf(wpath, sizeof wpath, QTTS_FIXTURES "/%s", ref_audio);
    char *wb = NULL;
    size_t wl = 0, n = 0;
    float *y = NULL;
    if (qtts_read_file(wpath, 64u << 20, &wb, &wl, &err) == QTTS_OK &&
        qtts_audio_load((const uint8_t *)wb, wl, NULL, QTTS_MEL_SR, &y, &n, &err) == QTTS_OK) {
        CHECK(n == N, "%s: resampled %zu samples, golden %zu", wpath, n, N);
        e_a = test_max_abs_err(y, gaudio, QTTS_MIN(n, N), &at);
        CHECK(e_a <= AUDIO_TOL, "%s: resampled audio error %.3g at %zu", wpath, e_a, at);
        CHECK(qtts_spk_enc_embed(m->enc, y, n, xv, &err) == QTTS_OK, "%s", err.msg);
        e_xw = test_max_rel_err(xv, gx, (size_t)E, 1e-3, &at);
        CHECK(e_xw <= XVEC_TOL, "%s: x-vector from the WAV error %.3g", spath, e_xw);
    } else {
        CHECK(0, "%s: %s", wpath, err.msg);
    }
    if (verbose())
        fprintf(stderr,
                "  %s %s: audio %.3g, log-mel %.3g, x-vector %.3g (golden mel %.3g, from WAV %.3g)\n",
                mname, spath, e_a, e_mel, e_x, e_xm, e_xw);
    qtts_free(y);
    qtts_free(wb);
    free(mel);
    free(xv);
done:
    free(gaudio);
    free(gmel);
    free(gx);
    qtts_st_close(g);
}

static void test_goldens(void) {
    const char *models[] = {"base06", "base17"};
    int n_cases = 0;
    for (size_t mi = 0; mi < QTTS_ARRAY_LEN(models); mi++) {
        char gdir[256];
        snprintf(gdir, sizeof gdir, GOLDEN_DIR "/%s", models[mi]);
        DIR *d = opendir(gdir);
        if (!d) continue;
        model m;
        qtts_err err = {0};
        if (!model_open(models[mi], &m, &err)) {
            CHECK(0, "%s: %s", models[mi], err.msg);
            closedir(d);
            model_close(&m);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            const size_t L = strlen(de->d_name);
            if (L < 6 || strcmp(de->d_name + L - 5, ".json") != 0) continue;
            char jpath[512], spath[512];
            snprintf(jpath, sizeof jpath, "%s/%s", gdir, de->d_name);
            snprintf(spath, sizeof spath, "%s/%.*s.safetensors", gdir, (int)(L - 5), de->d_name);
            char *txt = NULL;
            size_t len = 0;
            if (qtts_read_file(jpath, 4u << 20, &txt, &len, &err)) continue;
            qtts_json *root = qtts_json_parse(txt, len, NULL, jpath, &err);
            const qtts_json *in = root ? qtts_json_get(root, "inputs") : NULL;
            const char *ra = in ? qtts_json_get_str(in, "ref_audio") : NULL;
            if (ra) check_case(&m, models[mi], spath, ra, &n_cases);
            qtts_json_free(root);
            qtts_free(txt);
        }
        closedir(d);
        model_close(&m);
    }
    if (n_cases == 0) fprintf(stderr, "  note: no speaker-encoder goldens found\n");
    else if (verbose()) fprintf(stderr, "  %d golden cases\n", n_cases);
}

int main(void) {
    TEST_RUN(test_filterbank_matches_librosa);
    TEST_RUN(test_logmel_vs_direct_dft);
    TEST_RUN(test_logmel_arguments);
    TEST_RUN(test_load_errors);
    TEST_RUN(test_embed_arguments_and_determinism);
    TEST_RUN(test_goldens);
    TEST_END();
}
