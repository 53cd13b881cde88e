/*
 * test_codec_decoder.c - the 12 Hz speech-tokenizer decoder against the
 * official reference, plus its conv kernels against direct definitions.
 *
 * Goldens (tests/fixtures/README.md): every tests/fixtures/golden/<model>/
 * <case>.safetensors that holds `codes` I64 [F, 16] is decoded with the
 * tiny model tests/fixtures/models/<model>; each `codec.<stage>` F32 [C, n]
 * it holds is compared with the stage hook's output (normalised error
 * max|c - ref| / max(1, max|ref|) <= 1e-4), and `wav` F32 [F*1920] with
 * max abs error <= 1e-4. golden/codec_chunked.safetensors (`codes`, `wav`,
 * > 300 frames) checks the 300/25 chunked decode. The decoder is causal, so
 * T = 1 is checked against the first 1920 samples of a golden waveform.
 * bf16 convolutions (qtts_codec_decoder_to_bf16, where the CPU has them;
 * else their refusal): within a stated error of the fp32 decoder, and
 * streamed pushes still the one-shot bits.
 * Set QTTS_TEST_VERBOSE=1 to print every measured error.
 */
#include "harness.h"
#include "base/thread.h"
#include "model/codec_decoder.h"

#include <dirent.h>
#include <stdint.h>

#define GOLDEN_DIR QTTS_FIXTURES "/golden"
#define CHUNKED_GOLDEN GOLDEN_DIR "/codec_chunked.safetensors"
#define DEFAULT_MODEL QTTS_FIXTURES "/models/cv06"
#define WAV_TOL 1e-4
#define STAGE_TOL 1e-4

static bool verbose(void) { return getenv("QTTS_TEST_VERBOSE") != NULL; }

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

/* ---- kernels against direct definitions ---------------------------------- */

static void test_conv1d_kernel(void) {
    const struct { int cout, cin, taps, dil, n; } cases[] = {
        {1, 3, 7, 1, 5}, {8, 8, 1, 1, 16}, {13, 5, 7, 3, 29}, {17, 9, 3, 9, 8}, {24, 16, 7, 1, 61},
    };
    uint64_t seed = 1;
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases); ci++) {
        const int co = cases[ci].cout, cin = cases[ci].cin, K = cases[ci].taps,
                  dil = cases[ci].dil, n = cases[ci].n, P = (K - 1) * dil;
        const size_t ldx = (size_t)n + P + 3, ldy = (size_t)n + 2;
        float *w = malloc(sizeof(float) * co * cin * K), *b = malloc(sizeof(float) * co);
        float *x = calloc((size_t)cin * ldx, sizeof(float)), *y = malloc(sizeof(float) * co * ldy);
        double *ref = malloc(sizeof(double) * co * n);
        for (int i = 0; i < co * cin * K; i++) w[i] = frand(&seed);
        for (int i = 0; i < co; i++) b[i] = frand(&seed);
        for (int c = 0; c < cin; c++)
            for (int t = 0; t < n; t++) x[c * ldx + P + t] = frand(&seed);
        for (int o = 0; o < co; o++)
            for (int t = 0; t < n; t++) {
                double s = b[o];
                for (int c = 0; c < cin; c++)
                    for (int k = 0; k < K; k++) {
                        int ti = t - (K - 1 - k) * dil;
                        if (ti >= 0) s += (double)w[(o * cin + c) * K + k] * x[c * ldx + P + ti];
                    }
                ref[o * n + t] = s;
            }
        qtts_conv1d cv;
        const bool inited = qtts_conv1d_init(&cv, w, b, co, cin, K, dil);
        REQUIRE(inited, "init");
        for (size_t i = 0; i < (size_t)co * ldy; i++) y[i] = 0.5f;
        qtts_conv1d_causal(&cv, y, ldy, x + P, ldx, n, false);
        double e = 0, ea = 0;
        for (int o = 0; o < co; o++)
            for (int t = 0; t < n; t++) e = fmax(e, fabs(y[o * ldy + t] - ref[o * n + t]));
        qtts_conv1d_causal(&cv, y, ldy, x + P, ldx, n, true); /* y = y + conv = 2 conv */
        for (int o = 0; o < co; o++)
            for (int t = 0; t < n; t++) ea = fmax(ea, fabs(y[o * ldy + t] - 2 * ref[o * n + t]));
        CHECK(e < 1e-5 && ea < 2e-5, "case %zu: conv err %g, accumulate err %g", ci, e, ea);
        CHECK(y[n] == 0.5f, "case %zu: wrote past n", ci);
        qtts_conv1d_free(&cv);
        free(w), free(b), free(x), free(y), free(ref);
    }
}

static void test_convtr1d_kernel(void) {
    /* torch ConvTranspose1d(cin, cout, k, stride s), output trimmed to n*s;
     * couts that are whole blocks of 8 take the packing by channel block
     * (all phases at once), the others the packing by polyphase block */
    const struct { int cin, cout, k, s, n; } cases[] = {
        {3, 5, 2, 2, 7}, {4, 9, 16, 8, 5}, {6, 3, 10, 5, 9}, {2, 1, 6, 3, 11},
        {3, 8, 4, 2, 6}, {5, 16, 16, 8, 4}, {7, 24, 6, 3, 5},
    };
    uint64_t seed = 7;
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases); ci++) {
        const int cin = cases[ci].cin, co = cases[ci].cout, k = cases[ci].k, s = cases[ci].s,
                  n = cases[ci].n, taps = k / s, P = taps - 1, N = n * s;
        float *w = malloc(sizeof(float) * cin * co * k), *b = malloc(sizeof(float) * co);
        float *x = calloc((size_t)cin * (n + P), sizeof(float));
        float *ph = malloc(sizeof(float) * s * co * n), *y = malloc(sizeof(float) * co * N);
        double *ref = calloc((size_t)co * ((n - 1) * s + k), sizeof(double));
        for (int i = 0; i < cin * co * k; i++) w[i] = frand(&seed);
        for (int i = 0; i < co; i++) b[i] = frand(&seed);
        for (int c = 0; c < cin; c++)
            for (int t = 0; t < n; t++) x[c * (n + P) + P + t] = frand(&seed);
        const int L = (n - 1) * s + k;
        for (int o = 0; o < co; o++) {
            for (int t = 0; t < L; t++) ref[o * L + t] = b[o];
            for (int c = 0; c < cin; c++)
                for (int t = 0; t < n; t++)
                    for (int j = 0; j < k; j++)
                        ref[o * L + t * s + j] +=
                            (double)w[(c * co + o) * k + j] * x[c * (n + P) + P + t];
        }
        qtts_conv1d cv;
        const bool inited = qtts_convtr1d_init(&cv, w, b, cin, co, k, s);
        REQUIRE(inited, "init");
        CHECK(cv.cout == s * co && cv.taps == taps, "polyphase shape");
        qtts_conv1d_causal(&cv, ph, n, x + P, (size_t)n + P, n, false);
        qtts_interleave_phases(y, ph, co, n, s);
        double e = 0;
        for (int o = 0; o < co; o++)
            for (int t = 0; t < N; t++) e = fmax(e, fabs(y[o * N + t] - ref[o * L + t]));
        CHECK(e < 1e-5, "case %zu: transposed conv err %g", ci, e);
        qtts_conv1d_free(&cv);
        qtts_conv1d_free(&cv); /* idempotent */
        free(w), free(b), free(x), free(ph), free(y), free(ref);
    }
}

static void test_elementwise_kernels(void) {
    uint64_t seed = 3;
    enum { C = 5, N = 300, K = 7, D = 2, P = (K - 1) * D };
    float x[C][N + P], y[C][N], w[C][K], b[C], a[C], be[C], ea[C], ib[C];
    memset(x, 0, sizeof(x));
    for (int c = 0; c < C; c++) {
        for (int t = 0; t < N; t++) x[c][P + t] = 3 * frand(&seed);
        for (int k = 0; k < K; k++) w[c][k] = frand(&seed);
        b[c] = frand(&seed);
        a[c] = frand(&seed);
        be[c] = frand(&seed);
    }
    /* depthwise causal conv */
    qtts_dwconv1d_causal(&y[0][0], N, &x[0][P], N + P, &w[0][0], b, C, K, D, N);
    double e = 0;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < N; t++) {
            double s = b[c];
            for (int k = 0; k < K; k++) {
                int ti = t - (K - 1 - k) * D;
                if (ti >= 0) s += (double)w[c][k] * x[c][P + ti];
            }
            e = fmax(e, fabs(y[c][t] - s));
        }
    CHECK(e < 1e-5, "dwconv err %g", e);
    /* SnakeBeta: x + 1/(exp(beta)+1e-9) * sin(exp(alpha) x)^2 */
    qtts_snake_params(ea, ib, a, be, C);
    qtts_snake_beta(&y[0][0], N, &x[0][P], N + P, ea, ib, C, N);
    e = 0;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < N; t++) {
            double xv = x[c][P + t], sv = sin(exp((double)a[c]) * xv);
            e = fmax(e, fabs(y[c][t] - (xv + sv * sv / (exp((double)be[c]) + 1e-9))));
        }
    CHECK(e < 1e-5, "snake err %g", e);
    /* LayerNorm over channels of each column */
    for (int c = 0; c < C; c++) memcpy(y[c], &x[c][P], sizeof(float) * N);
    qtts_layernorm_channels(&y[0][0], N, C, N, a, b, 1e-6f);
    e = 0;
    for (int t = 0; t < N; t++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c][P + t];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c][P + t] - m) * (x[c][P + t] - m);
        v /= C;
        for (int c = 0; c < C; c++)
            e = fmax(e, fabs(y[c][t] - ((x[c][P + t] - m) / sqrt(v + 1e-6) * a[c] + b[c])));
    }
    CHECK(e < 1e-5, "layernorm err %g", e);
    /* transpose with strides */
    float tt[N][C + 1];
    qtts_transpose(&tt[0][0], C + 1, &x[0][P], N + P, C, N);
    bool same = true;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < N; t++) same &= tt[t][c] == x[c][P + t];
    CHECK(same, "transpose");
}

/* ---- model helpers ----------------------------------------------------- */

static char cached_dir[512];
static qtts_codec_decoder *cached;

/* A decoder of its own (the caller frees it), or NULL with the reason
 * printed. */
static qtts_codec_decoder *load_copy(const char *dir) {
    qtts_codec_decoder *d = NULL;
    qtts_config cfg;
    qtts_err err = {0};
    if (qtts_config_load(dir, &cfg, &err) != QTTS_OK ||
        qtts_codec_decoder_load(dir, &cfg, &d, &err) != QTTS_OK) {
        fprintf(stderr, "  load %s: %s\n", dir, err.msg);
        return NULL;
    }
    return d;
}

static qtts_codec_decoder *load_model(const char *dir) {
    if (cached && strcmp(cached_dir, dir) == 0) return cached;
    qtts_codec_decoder_free(cached);
    if ((cached = load_copy(dir))) snprintf(cached_dir, sizeof(cached_dir), "%s", dir);
    return cached;
}

static float *tensor_f32(const qtts_st_file *g, const char *name, size_t *n) {
    const qtts_tensor *t = qtts_st_find(g, name);
    if (!t || t->dtype != QTTS_DT_F32) return NULL;
    float *v = malloc(sizeof(float) * (t->numel ? t->numel : 1));
    qtts_tensor_to_f32(t, v);
    *n = t->numel;
    return v;
}

/* `name` I64 [F, Q] -> int32; NULL if absent or malformed. */
static int32_t *golden_codes(const qtts_st_file *g, const char *name, int Q, int *T) {
    const qtts_tensor *t = qtts_st_find(g, name);
    if (!t || t->dtype != QTTS_DT_I64 || t->rank != 2 || t->shape[1] != Q) return NULL;
    *T = (int)t->shape[0];
    int32_t *c = malloc(sizeof(int32_t) * (t->numel ? t->numel : 1));
    for (uint64_t i = 0; i < t->numel; i++) {
        int64_t v;
        memcpy(&v, (const char *)t->data + 8 * i, 8);
        c[i] = (int32_t)v;
    }
    return c;
}

typedef struct {
    const qtts_st_file *g;
    const char *label;
    int compared, failed;
} stage_cmp;

static void stage_hook(void *user, const char *stage, const float *x, int C, int n, size_t ld) {
    stage_cmp *s = user;
    char name[64];
    snprintf(name, sizeof(name), "codec.%s", stage);
    const qtts_tensor *t = qtts_st_find(s->g, name);
    if (!t) return;
    s->compared++;
    if (t->dtype != QTTS_DT_F32 || t->rank != 2 || t->shape[0] != C || t->shape[1] != n) {
        fprintf(stderr, "  %s %s: golden shape [%lld, %lld] != [%d, %d]\n", s->label, name,
                (long long)t->shape[0], (long long)(t->rank > 1 ? t->shape[1] : -1), C, n);
        s->failed++;
        return;
    }
    float *ref = malloc(sizeof(float) * t->numel);
    qtts_tensor_to_f32(t, ref);
    double emax = 0, rmax = 0;
    for (int c = 0; c < C; c++)
        for (int i = 0; i < n; i++) {
            const double r = ref[(size_t)c * n + i], e = fabs(x[(size_t)c * ld + i] - r);
            if (!(e <= emax)) emax = e;
            rmax = fmax(rmax, fabs(r));
        }
    const double norm = emax / fmax(1.0, rmax);
    if (verbose())
        fprintf(stderr, "  %s %-22s max abs %.3g  max|ref| %.3g  normalised %.3g\n", s->label,
                name, emax, rmax, norm);
    if (!(norm <= STAGE_TOL)) {
        fprintf(stderr, "  %s %s: normalised error %.3g > %g\n", s->label, name, norm, STAGE_TOL);
        s->failed++;
    }
    free(ref);
}

/* Decode one golden case. Voice-clone ICL cases (`wav_untrimmed` present)
 * decode concat(ref_codes, codes), compared with `wav_untrimmed`, and `wav`
 * is its tail after the reference's cut int(ref_len / total_len * samples). */
static void check_golden(const char *model_dir, const char *path, const char *label) {
    qtts_codec_decoder *d = load_model(model_dir);
    REQUIRE(d, "%s: model %s did not load", label, model_dir);
    qtts_st_file *g;
    qtts_err err = {0};
    const qtts_status st = qtts_st_open(path, &g, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);
    const size_t U = (size_t)d->upsample, Q = (size_t)d->n_q;
    int T = 0, Tr = 0;
    int32_t *codes = golden_codes(g, "codes", d->n_q, &T);
    size_t nw = 0, nu = 0;
    float *ref = tensor_f32(g, "wav", &nw);
    float *untrimmed = tensor_f32(g, "wav_untrimmed", &nu);
    int32_t *ref_codes = untrimmed ? golden_codes(g, "ref_codes", d->n_q, &Tr) : NULL;
    int32_t *all = NULL;
    int Ta = T;
    const float *want = ref;
    if (untrimmed && ref_codes && codes) {
        Ta = Tr + T;
        all = malloc(sizeof(int32_t) * Q * Ta);
        memcpy(all, ref_codes, sizeof(int32_t) * Q * Tr);
        memcpy(all + Q * Tr, codes, sizeof(int32_t) * Q * T);
        want = untrimmed;
    }
    const size_t n = (size_t)Ta * U;
    const size_t cut = all ? (size_t)((double)Tr / (double)QTTS_MAX(Ta, 1) * (double)n) : 0;
    const int32_t *seq = all ? all : codes;
    CHECK(codes && T > 0, "%s: no codes [F, %zu]", label, Q);
    CHECK(!untrimmed || (ref_codes && nu == n), "%s: ICL case without ref_codes [F, %zu] or "
          "with %zu untrimmed samples", label, Q, nu);
    CHECK(ref && nw == n - cut, "%s: wav has %zu samples, want %zu", label, nw, n - cut);
    if (seq && T > 0 && ref && nw == n - cut && (!untrimmed || nu == n)) {
        float *wav = malloc(sizeof(float) * n);
        const double t0 = qtts_now();
        CHECK(qtts_codec_decode(d, seq, Ta, wav, &err) == QTTS_OK, "%s: %s", label, err.msg);
        const double dt = qtts_now() - t0;
        size_t at = 0;
        const double e = test_max_abs_err(wav, want, n, &at);
        if (verbose())
            fprintf(stderr, "  %s %s (%d frames, %.2fs) max abs %.3g at %zu\n", label,
                    all ? "wav_untrimmed" : "wav", Ta, dt, e, at);
        CHECK(e <= WAV_TOL, "%s: wav max abs error %.3g at sample %zu", label, e, at);
        if (all) {
            const double et = test_max_abs_err(wav + cut, ref, nw, &at);
            CHECK(et <= WAV_TOL, "%s: trimmed wav max abs error %.3g at %zu", label, et, at);
        }
        if (Ta <= QTTS_CODEC_CHUNK) {
            /* one window: the stage hooks see the reference's single forward */
            stage_cmp sc = {g, label, 0, 0};
            qtts_codec_hook hook = {stage_hook, &sc};
            float *w2 = malloc(sizeof(float) * n);
            CHECK(qtts_codec_decode_window(d, seq, Ta, w2, &hook, &err) == QTTS_OK, "%s: %s",
                  label, err.msg);
            CHECK(memcmp(w2, wav, sizeof(float) * n) == 0,
                  "%s: decode and decode_window differ for one window", label);
            CHECK(sc.failed == 0, "%s: %d of %d stages off", label, sc.failed, sc.compared);
            if (verbose() && sc.compared)
                fprintf(stderr, "  %s: %d stages compared\n", label, sc.compared);
            /* causality: frame 0 alone gives the first frame's samples */
            CHECK(qtts_codec_decode(d, seq, 1, w2, &err) == QTTS_OK, "%s", err.msg);
            const double e1 = test_max_abs_err(w2, want, U, NULL);
            CHECK(e1 <= WAV_TOL, "%s: T=1 max abs error %.3g", label, e1);
            CHECK(memcmp(w2, wav, sizeof(float) * U) == 0,
                  "%s: T=1 differs from the first frame of the full decode", label);
            free(w2);
        }
        free(wav);
    }
    free(all);
    free(codes);
    free(ref_codes);
    free(ref);
    free(untrimmed);
    qtts_st_close(g);
}

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

/* Sorted names in dir that end in suffix (directories when suffix is NULL). */
static int list_dir(const char *dir, const char *suffix, char names[][256], int cap) {
    DIR *dd = opendir(dir);
    if (!dd) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)) && n < cap) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        DIR *sub = opendir(p);
        const bool is_dir = sub != NULL;
        if (sub) closedir(sub);
        if (suffix ? (!is_dir && has_suffix(e->d_name, suffix)) : is_dir)
            snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(dd);
    qsort(names, n, sizeof(names[0]), cmp_str);
    return n;
}

/* ---- tests --------------------------------------------------------------- */

static void test_golden_cases(void) {
    static char models[64][256], cases[256][256];
    const int nm = list_dir(GOLDEN_DIR, NULL, models, 64);
    REQUIRE(nm > 0, "no golden model directories under %s", GOLDEN_DIR);
    int ncases = 0;
    for (int m = 0; m < nm; m++) {
        char gdir[512], mdir[512];
        snprintf(gdir, sizeof(gdir), "%s/%.255s", GOLDEN_DIR, models[m]);
        snprintf(mdir, sizeof(mdir), "%s/models/%.255s", QTTS_FIXTURES, models[m]);
        const int nc = list_dir(gdir, ".safetensors", cases, 256);
        for (int c = 0; c < nc; c++) {
            char path[1024], label[520];
            snprintf(path, sizeof(path), "%.511s/%.255s", gdir, cases[c]);
            qtts_st_file *g;
            qtts_err err = {0};
            if (qtts_st_open(path, &g, &err) != QTTS_OK) {
                CHECK(false, "%s", err.msg);
                continue;
            }
            const bool has_codes = qtts_st_find(g, "codes") != NULL;
            qtts_st_close(g);
            if (!has_codes) continue;
            snprintf(label, sizeof(label), "%.255s/%.255s", models[m], cases[c]);
            check_golden(mdir, path, label);
            ncases++;
        }
    }
    CHECK(ncases > 0, "no golden case holds codes");
}

static void test_chunked(void) {
    qtts_codec_decoder *d = load_model(DEFAULT_MODEL);
    REQUIRE(d, "model");
    qtts_st_file *g;
    qtts_err err = {0};
    const qtts_status st = qtts_st_open(CHUNKED_GOLDEN, &g, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);
    int T = 0;
    int32_t *codes = golden_codes(g, "codes", d->n_q, &T);
    size_t nw = 0;
    float *ref = tensor_f32(g, "wav", &nw);
    CHECK(codes && T > QTTS_CODEC_CHUNK, "chunked golden: want > %d frames of codes",
          QTTS_CODEC_CHUNK);
    CHECK(ref && nw == (size_t)T * d->upsample, "chunked golden: wav size");
    if (codes && ref && T > QTTS_CODEC_CHUNK && nw == (size_t)T * d->upsample) {
        float *wav = malloc(sizeof(float) * nw);
        CHECK(qtts_codec_decode(d, codes, T, wav, &err) == QTTS_OK, "%s", err.msg);
        size_t at = 0;
        const double e = test_max_abs_err(wav, ref, nw, &at);
        if (verbose()) fprintf(stderr, "  chunked (%d frames) wav max abs %.3g at %zu\n", T, e, at);
        CHECK(e <= WAV_TOL, "chunked: wav max abs error %.3g at sample %zu", e, at);
        /* the loop's windows: [0, 300) fresh, then [start-25, start+300) keeping
         * the samples after the 25 context frames */
        float *one = malloc(sizeof(float) * nw);
        const size_t U = (size_t)d->upsample;
        for (int start = 0; start < T; start += QTTS_CODEC_CHUNK) {
            const int end = QTTS_MIN(start + QTTS_CODEC_CHUNK, T);
            const int ctx = start > QTTS_CODEC_LEFT_CONTEXT ? QTTS_CODEC_LEFT_CONTEXT : start;
            CHECK(qtts_codec_decode_window(d, codes + (size_t)(start - ctx) * d->n_q,
                                           end - start + ctx, one, NULL, &err) == QTTS_OK,
                  "%s", err.msg);
            CHECK(memcmp(one + ctx * U, wav + start * U, sizeof(float) * U * (end - start)) == 0,
                  "window at frame %d differs from the chunked decode", start);
        }
        free(one);
        free(wav);
    }
    free(codes);
    free(ref);
    qtts_st_close(g);
}

static void no_hook(void *user, const char *stage, const float *x, int C, int n, size_t ld) {
    (void)user, (void)stage, (void)x, (void)C, (void)n, (void)ld;
}

/* The reference chunked decode over codes[T, n_q], one decode_window per
 * window (a fresh state and, with a hook, one run over the whole window):
 * the stream's independent oracle. */
static float *windows_decode(const qtts_codec_decoder *d, const int32_t *codes, int T) {
    const qtts_codec_hook whole = {no_hook, NULL};
    const size_t U = (size_t)d->upsample;
    float *wav = malloc(sizeof(float) * U * T);
    float *one = malloc(sizeof(float) * U * (QTTS_CODEC_CHUNK + QTTS_CODEC_LEFT_CONTEXT));
    qtts_err err = {0};
    for (int start = 0; start < T; start += QTTS_CODEC_CHUNK) {
        const int end = QTTS_MIN(start + QTTS_CODEC_CHUNK, T);
        const int ctx = start > QTTS_CODEC_LEFT_CONTEXT ? QTTS_CODEC_LEFT_CONTEXT : start;
        if (qtts_codec_decode_window(d, codes + (size_t)(start - ctx) * d->n_q, end - start + ctx,
                                     one, &whole, &err) != QTTS_OK) {
            fprintf(stderr, "  decode_window: %s\n", err.msg);
            free(one), free(wav);
            return NULL;
        }
        memcpy(wav + start * U, one + ctx * U, sizeof(float) * U * (end - start));
    }
    free(one);
    return wav;
}

/* Pushes of the given sizes (cycled) through a stream with runs of at most
 * max_frames; true if the output is bit for bit want. */
static bool stream_matches(const qtts_codec_decoder *d, const int32_t *codes, int T,
                           const float *want, int max_frames, const int *sizes, int n_sizes,
                           qtts_codec_stream *reuse) {
    const size_t U = (size_t)d->upsample;
    qtts_codec_stream *s = reuse;
    qtts_err err = {0};
    if (!s && qtts_codec_stream_new(d, max_frames, &s, &err) != QTTS_OK) {
        fprintf(stderr, "  stream_new: %s\n", err.msg);
        return false;
    }
    float *wav = malloc(sizeof(float) * U * T);
    bool ok = true;
    for (int f = 0, k = 0; ok && f < T; k++) {
        const int n = QTTS_MIN(sizes[k % n_sizes], T - f);
        ok = qtts_codec_stream_push(s, codes + (size_t)f * d->n_q, n, wav + f * U, &err) == QTTS_OK;
        if (!ok) fprintf(stderr, "  push: %s\n", err.msg);
        f += n;
        ok = ok && qtts_codec_stream_frames(s) == f;
    }
    ok = ok && memcmp(wav, want, sizeof(float) * U * T) == 0;
    free(wav);
    if (!reuse) qtts_codec_stream_free(s);
    return ok;
}

/* Streaming equals the chunked decode bit for bit, across the window
 * restarts at 300 and 600 and their 25-frame left contexts, for pushes of
 * 1 frame, of odd sizes, of everything at once, with runs split by a
 * small max_frames, at 1 and 2 threads; reset starts over; bad codes leave
 * the stream as it was. */
static void test_stream(void) {
    qtts_codec_decoder *d = load_model(DEFAULT_MODEL);
    REQUIRE(d, "model");
    const int T = 2 * QTTS_CODEC_CHUNK + 40, Q = d->n_q;
    int32_t *codes = malloc(sizeof(int32_t) * T * Q);
    uint64_t seed = 11;
    for (int i = 0; i < T * Q; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (int32_t)((seed >> 33) % (uint64_t)d->cb_size);
    }
    float *want = windows_decode(d, codes, T);
    REQUIRE(want, "reference decode");
    float *dec = malloc(sizeof(float) * (size_t)d->upsample * T);
    qtts_err err = {0};
    CHECK(qtts_codec_decode(d, codes, T, dec, &err) == QTTS_OK, "%s", err.msg);
    CHECK(memcmp(dec, want, sizeof(float) * (size_t)d->upsample * T) == 0,
          "qtts_codec_decode differs from the per-window decode");
    free(dec);
    const int one[] = {1}, odd[] = {3, 1, 7, 24, 2, 50, 13}, all[] = {T}, big[] = {37, 290, 5};
    CHECK(stream_matches(d, codes, T, want, 0, one, 1, NULL), "pushes of 1 frame");
    CHECK(stream_matches(d, codes, T, want, 16, odd, 7, NULL), "pushes of odd sizes");
    CHECK(stream_matches(d, codes, T, want, 5, all, 1, NULL), "one push, runs of 5");
    CHECK(stream_matches(d, codes, T, want, 300, big, 3, NULL), "large pushes");
    /* the same bits on the thread pool (convs, snake, attention heads, matmuls) */
    qtts_threads_init(2);
    float *dec2 = malloc(sizeof(float) * (size_t)d->upsample * T);
    CHECK(qtts_codec_decode(d, codes, T, dec2, &err) == QTTS_OK, "%s", err.msg);
    CHECK(memcmp(dec2, want, sizeof(float) * (size_t)d->upsample * T) == 0,
          "decode at 2 threads differs from 1 thread");
    CHECK(stream_matches(d, codes, T, want, 16, odd, 7, NULL), "pushes at 2 threads");
    qtts_threads_init(1);
    free(dec2);
    /* reset, and bad codes in the middle of a stream */
    qtts_codec_stream *s = NULL;
    REQUIRE(qtts_codec_stream_new(d, 8, &s, &err) == QTTS_OK, "%s", err.msg);
    CHECK(stream_matches(d, codes, QTTS_CODEC_CHUNK + 10, want, 8, odd, 7, s), "first use");
    qtts_codec_stream_reset(s);
    CHECK(qtts_codec_stream_frames(s) == 0, "reset");
    float *w = malloc(sizeof(float) * (size_t)d->upsample * 4);
    int32_t *bad = malloc(sizeof(int32_t) * 4 * Q);
    memcpy(bad, codes, sizeof(int32_t) * 4 * Q);
    bad[2 * Q + 3] = d->cb_size;
    CHECK(qtts_codec_stream_push(s, bad, 4, w, &err) == QTTS_ERR_INVALID, "bad code accepted");
    CHECK(qtts_codec_stream_frames(s) == 0, "a rejected push moved the stream");
    CHECK(qtts_codec_stream_push(s, codes, 0, w, &err) == QTTS_OK, "n = 0");
    CHECK(qtts_codec_stream_push(s, codes, -1, w, &err) == QTTS_ERR_INVALID, "n = -1 accepted");
    CHECK(stream_matches(d, codes, T, want, 8, odd, 7, s), "after reset");
    qtts_codec_stream_free(s);
    qtts_codec_stream_free(NULL);
    CHECK(qtts_codec_stream_new(d, -1, &s, &err) == QTTS_ERR_INVALID && s == NULL,
          "max_frames = -1 accepted");
    free(w), free(bad), free(want), free(codes);
}

/* codes for T frames from a seed */
static int32_t *random_codes(const qtts_codec_decoder *d, int T, uint64_t seed) {
    int32_t *codes = malloc(sizeof(int32_t) * (size_t)T * d->n_q);
    for (int i = 0; i < T * d->n_q; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (int32_t)((seed >> 33) % (uint64_t)d->cb_size);
    }
    return codes;
}

/* Push `pre` frames, skip `n`, push the rest in pieces of 7 (runs of at
 * most max_frames): true if what was pushed after the skip is want's bits. */
static bool skip_matches(const qtts_codec_decoder *d, const int32_t *codes, int T, const float *want,
                         int pre, int n, int max_frames) {
    const size_t U = (size_t)d->upsample;
    qtts_codec_stream *s = NULL;
    qtts_err err = {0};
    float *wav = malloc(sizeof(float) * U * T);
    bool ok = qtts_codec_stream_new(d, max_frames, &s, &err) == QTTS_OK &&
              qtts_codec_stream_push(s, codes, pre, wav, &err) == QTTS_OK &&
              qtts_codec_stream_skip(s, codes + (size_t)pre * d->n_q, n, &err) == QTTS_OK &&
              qtts_codec_stream_frames(s) == pre + n;
    for (int f = pre + n; ok && f < T; f += 7) {
        const int m = QTTS_MIN(7, T - f);
        ok = qtts_codec_stream_push(s, codes + (size_t)f * d->n_q, m, wav + f * U, &err) == QTTS_OK;
    }
    if (!ok && err.msg[0]) fprintf(stderr, "  skip: %s\n", err.msg);
    ok = ok && !memcmp(wav, want, sizeof(float) * U * pre) &&
         !memcmp(wav + (size_t)(pre + n) * U, want + (size_t)(pre + n) * U,
                 sizeof(float) * U * (size_t)(T - pre - n));
    free(wav);
    qtts_codec_stream_free(s);
    return ok;
}

/* qtts_codec_stream_skip leaves the state a push leaves: the frames after
 * it are the chunked decode's bits, for skips shorter and longer than the
 * reach, from frame 0 and from the middle of a stream, up to and across a
 * window's left-context frames and restart, in runs split by a small
 * max_frames. With the reach one frame short, they are not (the reach is
 * tight and the check can fail). qtts_codec_stream_copy: a copy continues
 * as the original, between streams of other run sizes; not across
 * decoders. */
static void test_stream_skip(void) {
    qtts_codec_decoder *d = load_model(DEFAULT_MODEL);
    REQUIRE(d, "model");
    const int T = QTTS_CODEC_CHUNK + 60, R = d->reach, ctx0 = QTTS_CODEC_CHUNK - QTTS_CODEC_LEFT_CONTEXT;
    REQUIRE(R >= 2 && R < 40, "reach %d", R);
    int32_t *codes = random_codes(d, T, 29);
    float *want = windows_decode(d, codes, T);
    REQUIRE(want, "reference decode");
    const int cases[][3] = {{0, 1, 0},  {0, R - 1, 0}, {0, R, 0},        {0, R + 1, 0},
                            {0, 40, 0}, {0, 40, 5},    {13, 50, 8},      {0, ctx0 - 1, 0},
                            {0, ctx0, 0}, {0, ctx0 + 10, 12}, {5, QTTS_CODEC_CHUNK + 3, 0},
                            {ctx0 - 20, 30, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(skip_matches(d, codes, T, want, cases[i][0], cases[i][1], cases[i][2]),
              "push %d, skip %d, runs of %d", cases[i][0], cases[i][1], cases[i][2]);
    d->reach = R - 1;
    CHECK(!skip_matches(d, codes, T, want, 0, 40, 0), "skip 40 with the reach one frame short");
    d->reach = R;

    qtts_err err = {0};
    qtts_codec_stream *a = NULL, *b = NULL, *c = NULL;
    qtts_codec_decoder *d2 = load_copy(DEFAULT_MODEL);   /* a second instance (load_model's is cached) */
    REQUIRE(d2, "second instance");
    const size_t U = (size_t)d->upsample;
    float *wa = malloc(sizeof(float) * U * T), *wb = malloc(sizeof(float) * U * T);
    REQUIRE(d2 && !qtts_codec_stream_new(d, 16, &a, &err) && !qtts_codec_stream_new(d, 3, &b, &err) &&
                !qtts_codec_stream_new(d2, 16, &c, &err),
            "streams: %s", err.msg);
    const int at = ctx0 + 5;   /* both window states in use */
    CHECK(!qtts_codec_stream_push(a, codes, at, wa, &err), "%s", err.msg);
    CHECK(qtts_codec_stream_copy(b, a, &err) == QTTS_OK && qtts_codec_stream_frames(b) == at, "copy");
    CHECK(qtts_codec_stream_copy(c, a, &err) == QTTS_ERR_INVALID, "copy across decoders accepted");
    CHECK(!qtts_codec_stream_push(b, codes + (size_t)at * d->n_q, T - at, wb + at * U, &err), "%s",
          err.msg);
    CHECK(!memcmp(wb + at * U, want + at * U, sizeof(float) * U * (size_t)(T - at)),
          "the copy continues otherwise than the original");
    qtts_codec_stream_free(a), qtts_codec_stream_free(b), qtts_codec_stream_free(c);
    qtts_codec_decoder_free(d2);
    free(wa), free(wb), free(want), free(codes);
}

static void test_bf16(void) {
    /* its own copy: the cached one stays fp32 for the other tests */
    const qtts_codec_decoder *ref = load_model(DEFAULT_MODEL);
    qtts_codec_decoder *d = load_copy(DEFAULT_MODEL);
    qtts_err err = {0};
    REQUIRE(ref && d, "model");
    const int T = QTTS_CODEC_CHUNK + 40, Q = d->n_q;
    int32_t *codes = malloc(sizeof(int32_t) * T * Q);
    uint64_t seed = 12;
    for (int i = 0; i < T * Q; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        codes[i] = (int32_t)((seed >> 33) % (uint64_t)d->cb_size);
    }
    const size_t n = (size_t)d->upsample * T;
    float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    REQUIRE(qtts_codec_decode(ref, codes, T, want, &err) == QTTS_OK, "%s", err.msg);
    const qtts_status st = qtts_codec_decoder_to_bf16(d, &err);
    if (st == QTTS_ERR_UNSUPPORTED) {
        CHECK(strstr(err.msg, "bf16 dot products") != NULL, "message: %s", err.msg);
        CHECK(qtts_codec_decode(d, codes, T, got, &err) == QTTS_OK && !memcmp(got, want, sizeof(float) * n),
              "a refused conversion changed the decoder");
        fprintf(stderr, "  bf16 codec: this CPU has no bf16 dot products, only the refusal checked\n");
    } else {
        REQUIRE(st == QTTS_OK, "%s", err.msg);
        REQUIRE(qtts_codec_decode(d, codes, T, got, &err) == QTTS_OK, "%s", err.msg);
        double sig = 0, noise = 0;
        for (size_t i = 0; i < n; i++) {
            sig += (double)want[i] * want[i];
            noise += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        }
        /* Each conv input and weight is within 2^-8 relative of its fp32
         * value (kernels.h), about 4e-3 rms at the first convs; this random
         * model's decoder blocks grow it to about 2e-2 at the output
         * (measured; random weights amplify errors, docs/QUANT.md). 0.05
         * leaves room for other CPUs' pair sums and fails on any real
         * mistake (a swapped or misplaced pair is O(1)). */
        const double rel = sqrt(noise / sig);
        if (verbose()) fprintf(stderr, "  bf16 codec: relative rms error %.3g\n", rel);
        CHECK(rel > 0 && rel <= 0.05, "bf16 decode off the fp32 one by %.3g rms (relative)", rel);
        const int odd[] = {3, 1, 7, 24, 2, 50, 13};
        CHECK(stream_matches(d, codes, T, got, 16, odd, 7, NULL), "bf16: pushes of odd sizes");
        qtts_threads_init(2);
        CHECK(stream_matches(d, codes, T, got, 16, odd, 7, NULL), "bf16: pushes at 2 threads");
        qtts_threads_init(1);
    }
    free(codes), free(want), free(got);
    qtts_codec_decoder_free(d);
}

/* qtts_codec_decoder_drop_direct: the Winograd convs' direct weights go,
 * their bias stays, the decode and a stream keep their bits, and a bf16
 * conversion after it is refused with the decoder unchanged. */
static void test_drop_direct(void) {
    const qtts_codec_decoder *ref = load_model(DEFAULT_MODEL);
    qtts_codec_decoder *d = load_copy(DEFAULT_MODEL);
    qtts_err err = {0};
    REQUIRE(ref && d, "model");
    qtts_codec_decoder_drop_direct(d);
    int dropped = 0;
    for (int b = 0; b < d->n_blocks; b++)
        for (int r = 0; r < 3; r++) {
            const qtts_codec_resunit *R = &d->blocks[b].res[r];
            CHECK(!R->wino1.frame || (!R->conv1.w && R->conv1.bias),
                  "block %d unit %d: direct weights kept or bias dropped", b, r);
            CHECK(R->wino1.frame || R->conv1.w, "block %d unit %d: a direct-only conv dropped", b, r);
            dropped += R->wino1.frame != 0;
        }
    CHECK(dropped > 0, "the fixture has no Winograd conv");
    const int T = QTTS_CODEC_CHUNK + 10;
    int32_t *codes = random_codes(d, T, 41);
    const size_t n = (size_t)d->upsample * T;
    float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    REQUIRE(qtts_codec_decode(ref, codes, T, want, &err) == QTTS_OK, "%s", err.msg);
    CHECK(qtts_codec_decode(d, codes, T, got, &err) == QTTS_OK &&
              !memcmp(got, want, sizeof(float) * n),
          "decode without the direct weights differs");
    const int odd[] = {3, 1, 7, 24};
    CHECK(stream_matches(d, codes, T, want, 16, odd, 4, NULL), "pushes without the direct weights");
    const qtts_status st = qtts_codec_decoder_to_bf16(d, &err);
    CHECK(st == QTTS_ERR_UNSUPPORTED || (st == QTTS_ERR_INVALID && strstr(err.msg, "dropped")),
          "bf16 after the drop: status %d (%s)", (int)st, err.msg);
    CHECK(qtts_codec_decode(d, codes, T, got, &err) == QTTS_OK &&
              !memcmp(got, want, sizeof(float) * n),
          "a refused bf16 conversion changed the decoder");
    qtts_codec_decoder_drop_direct(d);   /* again: nothing left to drop */
    free(codes), free(want), free(got);
    qtts_codec_decoder_free(d);
}

static void test_bad_codes(void) {
    qtts_codec_decoder *d = load_model(DEFAULT_MODEL);
    REQUIRE(d, "model");
    const int T = 3, Q = d->n_q;
    int32_t *codes = calloc((size_t)T * Q, sizeof(int32_t));
    float *wav = malloc(sizeof(float) * T * d->upsample);
    const int32_t bad[] = {-1, d->cb_size, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(bad); i++) {
        codes[(size_t)2 * Q + 5] = bad[i];
        qtts_err err = {0};
        CHECK(qtts_codec_decode(d, codes, T, wav, &err) == QTTS_ERR_INVALID && err.msg[0],
              "code %d accepted by decode", (int)bad[i]);
        CHECK(strstr(err.msg, "frame 2") && strstr(err.msg, "codebook 5"),
              "message does not locate the code: %s", err.msg);
        memset(&err, 0, sizeof(err));
        CHECK(qtts_codec_decode_window(d, codes, T, wav, NULL, &err) == QTTS_ERR_INVALID,
              "code %d accepted by decode_window", (int)bad[i]);
    }
    qtts_err err = {0};
    codes[(size_t)2 * Q + 5] = d->cb_size - 1;
    CHECK(qtts_codec_decode(d, codes, T, wav, &err) == QTTS_OK, "%s", err.msg);
    CHECK(qtts_codec_decode(d, codes, -1, wav, &err) == QTTS_ERR_INVALID, "T = -1 accepted");
    CHECK(qtts_codec_decode(d, NULL, T, wav, &err) == QTTS_ERR_INVALID, "NULL codes accepted");
    free(codes);
    free(wav);
}

static void test_t0_t1(void) {
    qtts_codec_decoder *d = load_model(DEFAULT_MODEL);
    REQUIRE(d, "model");
    qtts_err err = {0};
    CHECK(qtts_codec_decode(d, NULL, 0, NULL, &err) == QTTS_OK, "T=0: %s", err.msg);
    CHECK(qtts_codec_decode_window(d, NULL, 0, NULL, NULL, &err) == QTTS_OK, "T=0: %s", err.msg);
    int32_t codes[64];
    REQUIRE(d->n_q <= 64, "n_q");
    for (int q = 0; q < d->n_q; q++) codes[q] = (q * 131 + 7) % d->cb_size;
    float *wav = malloc(sizeof(float) * (d->upsample + 1));
    wav[d->upsample] = 42.0f;
    CHECK(qtts_codec_decode(d, codes, 1, wav, &err) == QTTS_OK, "T=1: %s", err.msg);
    bool ok = true;
    for (int i = 0; i < d->upsample; i++) ok &= wav[i] >= -1.0f && wav[i] <= 1.0f;
    CHECK(ok, "T=1: samples outside [-1, 1]");
    CHECK(wav[d->upsample] == 42.0f, "T=1: wrote past T*upsample");
    free(wav);
    /* T = 1 against the reference: the causal prefix check in each golden case */
}

static void test_load_errors(void) {
    qtts_config cfg;
    qtts_err err = {0};
    const qtts_status st = qtts_config_load(DEFAULT_MODEL, &cfg, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);
    qtts_codec_decoder *d = (qtts_codec_decoder *)1;
    CHECK(qtts_codec_decoder_load(QTTS_FIXTURES "/no_such_model", &cfg, &d, &err) != QTTS_OK &&
              d == NULL,
          "missing directory accepted");
    /* a config that disagrees with the file: the error names the tensor */
    qtts_config bad = cfg;
    bad.codec.latent_dim += 8;
    CHECK(qtts_codec_decoder_load(DEFAULT_MODEL, &bad, &d, &err) == QTTS_ERR_FORMAT,
          "latent_dim mismatch accepted");
    CHECK(strstr(err.msg, "decoder.") != NULL, "error does not name a tensor: %s", err.msg);
    bad = cfg;
    bad.codec.num_quantizers += 1;
    CHECK(qtts_codec_decoder_load(DEFAULT_MODEL, &bad, &d, &err) != QTTS_OK &&
              strstr(err.msg, "rvq_rest.vq.layers"),
          "extra quantizer accepted: %s", err.msg);
    /* a codebook size the file does not have is refused by the shape
     * check, before the codebook table (here 16 * 2048 * 2^19 floats, 64
     * GiB) is sized from it */
    bad = cfg;
    bad.codec.codebook_dim = 1 << 20;
    CHECK(qtts_codec_decoder_load(DEFAULT_MODEL, &bad, &d, &err) == QTTS_ERR_FORMAT &&
              strstr(err.msg, "_codebook.embedding_sum"),
          "huge codebook_dim not refused by shape: %s", err.msg);
    bad = cfg;
    bad.codec.upsample_rates[0] += 1;
    CHECK(qtts_codec_decoder_load(DEFAULT_MODEL, &bad, &d, &err) == QTTS_ERR_FORMAT,
          "rates inconsistent with decode_upsample_rate accepted");
}

int main(void) {
    TEST_RUN(test_conv1d_kernel);
    TEST_RUN(test_convtr1d_kernel);
    TEST_RUN(test_elementwise_kernels);
    TEST_RUN(test_load_errors);
    TEST_RUN(test_bad_codes);
    TEST_RUN(test_t0_t1);
    TEST_RUN(test_golden_cases);
    TEST_RUN(test_chunked);
    TEST_RUN(test_stream);
    TEST_RUN(test_stream_skip);
    TEST_RUN(test_bf16);
    TEST_RUN(test_drop_direct);
    qtts_codec_decoder_free(cached);
    qtts_threads_shutdown();
    TEST_END();
}
