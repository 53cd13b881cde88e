/*
 * test_codec_encoder.c - the 12 Hz speech-tokenizer encoder (audio ->
 * reference codes) against the official reference, its kernels against
 * direct definitions, its input guards and its encoder_config reading.
 *
 * Goldens (tests/fixtures/README.md): every tests/fixtures/golden/<model>/
 * <case>.safetensors holding `ref_audio_24k` F32 [n] and `ref_codes` I64
 * [F, 16] is encoded with the tiny model tests/fixtures/models/<model>;
 * the codes must be identical (the test reports how many differ).
 * Inline expectations: codes the reference (Qwen3TTSTokenizer.encode,
 * fp32, CPU) returned with models/base06 for silence and for inputs shorter
 * than one 1920-sample frame, made by lcg_noise below (numpy float32
 * reproduces it bit for bit). Chunking the SEANet or the thread count must not change a single
 * bit of its output. Set QTTS_TEST_VERBOSE=1 to print per-case results.
 */
#include "harness.h"
#include "base/thread.h"
#include "kernels/encoder_kernels.h"
#include "model/codec_encoder.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLDEN_DIR QTTS_FIXTURES "/golden"
#define BASE06 QTTS_FIXTURES "/models/base06"
#define REAL_DIR QTTS_FIXTURES "/real_configs/0.6b-customvoice"

static bool verbose(void) { return getenv("QTTS_TEST_VERBOSE") != NULL; }

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

/* Deterministic test signal: 32-bit LCG, top 24 bits centred, times 0.3. */
static void lcg_noise(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed;
    const float scale = 0.3f / 8388608.0f;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int32_t)(s >> 8) - (1 << 23)) * scale;
    }
}

static qtts_codec_encoder *load_encoder(const char *dir, qtts_err *err) {
    qtts_config cfg;
    qtts_codec_encoder *e = NULL;
    if (qtts_config_load(dir, &cfg, err) != QTTS_OK) return NULL;
    if (qtts_codec_encoder_load(dir, &cfg, &e, err) != QTTS_OK) return NULL;
    return e;
}

/* ---- kernels against direct definitions ---------------------------------- */

static void test_strided_conv_kernel(void) {
    const struct { int cout, cin, k, s, n; } cases[] = {
        {8, 4, 8, 4, 37}, {16, 8, 10, 5, 50}, {5, 3, 4, 2, 9}, {9, 2, 7, 3, 20}, {3, 5, 3, 3, 1},
        {12, 6, 16, 8, 8},
    };
    uint64_t seed = 7;
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases); ci++) {
        const int co = cases[ci].cout, cin = cases[ci].cin, K = cases[ci].k, s = cases[ci].s,
                  n = cases[ci].n, m = (n + s - 1) / s, taps = qtts_conv1d_strided_taps(K, s);
        const int Q = taps - 1;
        const size_t ldX = (size_t)Q + m + 2;
        float *w = malloc(sizeof(float) * co * cin * K), *b = malloc(sizeof(float) * co);
        float *x = malloc(sizeof(float) * cin * n), *y = malloc(sizeof(float) * co * m);
        float *X = calloc((size_t)cin * s * ldX, sizeof(float));
        for (int i = 0; i < co * cin * K; i++) w[i] = frand(&seed);
        for (int i = 0; i < co; i++) b[i] = frand(&seed);
        for (int i = 0; i < cin * n; i++) x[i] = frand(&seed);
        qtts_conv1d cv;
        const bool inited = qtts_conv1d_strided_init(&cv, w, b, co, cin, K, s);
        REQUIRE(inited, "init");
        qtts_phase_pack(X + Q, ldX, x, (size_t)n, cin, n, s, true, false);
        qtts_conv1d_causal(&cv, y, (size_t)m, X + Q, ldX, m, false);
        /* torch: left pad K - s zeros, right pad to a whole stride, conv(ELU(x)) */
        double e = 0;
        for (int o = 0; o < co; o++)
            for (int t = 0; t < m; t++) {
                double acc = b[o];
                for (int c = 0; c < cin; c++)
                    for (int j = 0; j < K; j++) {
                        const int i = t * s + j - (K - s);
                        if (i < 0 || i >= n) continue;
                        const double v = x[c * n + i];
                        acc += (double)w[(o * cin + c) * K + j] * (v > 0 ? v : expm1(v));
                    }
                e = fmax(e, fabs(acc - y[o * m + t]));
            }
        CHECK(e < 1e-5, "case %zu (k%d s%d n%d): max err %g", ci, K, s, n, e);
        qtts_conv1d_free(&cv);
        free(w), free(b), free(x), free(y), free(X);
    }
}

static void test_phase_pack_replicate(void) {
    const float x[2 * 5] = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
    float X[4 * 3];
    qtts_phase_pack(X, 3, x, 5, 2, 5, 2, false, true);
    const float want[4 * 3] = {1, 3, 5, 2, 4, 5, -1, -3, -5, -2, -4, -5};
    CHECK(!memcmp(X, want, sizeof want), "replicate pack mismatch");
    float y[2 * 5];
    qtts_elu(y, 5, x, 5, 2, 5);
    CHECK(y[0] == 1.0f && y[4] == 5.0f && y[5] == (float)expm1(-1.0) &&
              y[9] == (float)expm1(-5.0),
          "elu");
}

/* qtts_elu over many rows (split over the thread pool) and in place: each
 * row is qtts_elu_row's, whatever the thread count. */
static void test_elu_rows(void) {
    enum { C = 37, N = 3001, LD = 3010 };
    float *x = malloc(sizeof(float) * C * LD), *y = malloc(sizeof(float) * C * LD),
          *want = malloc(sizeof(float) * N);
    uint64_t seed = 11;
    for (int i = 0; i < C * LD; i++) x[i] = 4.0f * frand(&seed);
    const int threads[] = {1, 2, 3};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
        qtts_threads_init(threads[k]);
        qtts_elu(y, LD, x, LD, C, N);
        int bad = 0;
        for (int c = 0; c < C; c++) {
            qtts_elu_row(want, x + (size_t)c * LD, N);
            bad += memcmp(want, y + (size_t)c * LD, sizeof(float) * N) != 0;
        }
        CHECK(bad == 0, "%d threads: %d rows differ from qtts_elu_row", threads[k], bad);
    }
    memcpy(y, x, sizeof(float) * C * LD);
    qtts_elu(y, LD, y, LD, C, N);
    qtts_elu_row(want, x + (size_t)5 * LD, N);
    CHECK(!memcmp(want, y + (size_t)5 * LD, sizeof(float) * N), "in place");
    qtts_threads_init(2);
    free(x);
    free(y);
    free(want);
}

static void test_vq_nearest(void) {
    enum { N = 300, D = 6 };
    float cb[N * D], sq[N], r[D];
    uint64_t seed = 3;
    for (int i = 0; i < N * D; i++) cb[i] = frand(&seed);
    /* duplicates of the codeword nearest to 0: the lowest index must win */
    memcpy(cb + 17 * D, cb + 250 * D, sizeof(float) * D);
    memcpy(cb + 120 * D, cb + 250 * D, sizeof(float) * D);
    for (int j = 0; j < N; j++) sq[j] = qtts_vq_sqnorm(cb + j * D, D);
    for (int d = 0; d < D; d++) r[d] = cb[250 * D + d];
    CHECK(qtts_vq_nearest(r, cb, sq, N, D) == 17, "tie -> %d", qtts_vq_nearest(r, cb, sq, N, D));
    int agree = 0;
    for (int trial = 0; trial < 200; trial++) {
        for (int d = 0; d < D; d++) r[d] = 1.5f * frand(&seed);
        int best = 0;
        double bd = INFINITY;
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += ((double)r[d] - cb[j * D + d]) * ((double)r[d] - cb[j * D + d]);
            if (s < bd) bd = s, best = j;
        }
        agree += qtts_vq_nearest(r, cb, sq, N, D) == best;
    }
    CHECK(agree == 200, "%d of 200 random queries agree with the exact nearest codeword", agree);
    /* several rows per pass: each row's answer is its own (19 rows: two
     * passes of 8 and a tail; 300 codewords: a full block of 256 and a
     * partial one), the tie included */
    float rows[19 * D];
    for (int i = 0; i < 19 * D; i++) rows[i] = 1.5f * frand(&seed);
    memcpy(rows + 11 * D, cb + 250 * D, sizeof(float) * D);
    int idx[19];
    for (int nr = 1; nr <= 19; nr += 6) {
        qtts_vq_nearest_rows(rows, nr, cb, sq, N, D, idx);
        int same = 0;
        for (int i = 0; i < nr; i++) same += idx[i] == qtts_vq_nearest(rows + i * D, cb, sq, N, D);
        CHECK(same == nr, "%d rows: %d agree with one row at a time", nr, same);
    }
    CHECK(idx[11] == 17, "tie in a batch -> %d", idx[11]);
}

/* ---- goldens -------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

static void test_goldens(void) {
    static const char *const models[] = {"base06", "base17"};
    int n_cases = 0, n_diff_total = 0;
    for (size_t mi = 0; mi < QTTS_ARRAY_LEN(models); mi++) {
        char dir[512], mdir[512];
        snprintf(dir, sizeof dir, "%s/%s", GOLDEN_DIR, models[mi]);
        snprintf(mdir, sizeof mdir, "%s/models/%s", QTTS_FIXTURES, models[mi]);
        DIR *d = opendir(dir);
        if (!d) continue;
        qtts_codec_encoder *enc = NULL;
        struct dirent *de;
        char names[64][256];
        int nn = 0;
        while ((de = readdir(d)) && nn < 64) {
            const size_t l = strlen(de->d_name);
            if (l > 12 && l < 256 && !strcmp(de->d_name + l - 12, ".safetensors"))
                snprintf(names[nn++], sizeof names[0], "%s", de->d_name);
        }
        closedir(d);
        qsort(names, (size_t)nn, sizeof names[0], cmp_name);
        for (int i = 0; i < nn; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%.500s/%.255s", dir, names[i]);
            qtts_err err = {0};
            qtts_st_file *f = NULL;
            if (qtts_st_open(path, &f, &err) != QTTS_OK) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            const qtts_tensor *a = qtts_st_find(f, "ref_audio_24k"), *c = qtts_st_find(f, "ref_codes");
            if (!a || !c) {
                qtts_st_close(f);
                continue;
            }
            if (!enc && !(enc = load_encoder(mdir, &err))) {
                CHECK(0, "%s: %s", mdir, err.msg);
                qtts_st_close(f);
                break;
            }
            n_cases++;
            CHECK(a->dtype == QTTS_DT_F32 && a->rank == 1 && c->dtype == QTTS_DT_I64 && c->rank == 2 &&
                      c->shape[1] == enc->n_out,
                  "%s: unexpected golden layout", path);
            int32_t *codes = NULL;
            int F = 0;
            const double t0 = qtts_now();
            qtts_status st = qtts_codec_encode(enc, a->data, (size_t)a->numel, &codes, &F, &err);
            CHECK(st == QTTS_OK, "%s: %s", path, err.msg);
            if (st == QTTS_OK) {
                CHECK(F == c->shape[0], "%s: %d frames, golden %lld", path, F, (long long)c->shape[0]);
                const int64_t *rc = c->data;
                int diff = 0, first = -1;
                const int nf = (int)QTTS_MIN((int64_t)F, c->shape[0]);
                for (int k = 0; k < nf * enc->n_out; k++)
                    if (codes[k] != rc[k]) {
                        if (first < 0) first = k;
                        diff++;
                    }
                n_diff_total += diff;
                CHECK(diff == 0, "%s/%s: %d of %d codes differ (first at frame %d, codebook %d: %d vs %lld)",
                      models[mi], names[i], diff, nf * enc->n_out, first / enc->n_out,
                      first % enc->n_out, first < 0 ? 0 : codes[first], first < 0 ? 0LL : (long long)rc[first]);
                if (verbose())
                    fprintf(stderr, "  %s/%s: %lld samples -> %d frames, %d codes differ (%.2fs)\n",
                            models[mi], names[i], (long long)a->numel, F, diff, qtts_now() - t0);
            }
            qtts_free(codes);
            qtts_st_close(f);
        }
        qtts_codec_encoder_free(enc);
    }
    CHECK(n_cases > 0, "no golden holds ref_audio_24k + ref_codes");
    if (verbose()) fprintf(stderr, "  %d golden cases, %d codes differ in total\n", n_cases, n_diff_total);
}

/* ---- inline reference expectations ------------------------------------------ */

static const int32_t k_short1[] = {647, 1031, 282, 165, 383, 2038, 1552, 1434, 955, 1337, 2010, 52, 174, 1778, 714, 160};
static const int32_t k_short1000[] = {1667, 897, 719, 881, 27, 2038, 854, 1817, 1763, 1286, 796, 1237, 1232, 1579, 460, 1278};
static const int32_t k_short1919[] = {1528, 1137, 278, 1373, 919, 1489, 56, 1434, 1375, 1286, 2010, 1754, 7, 1579, 460, 160};
static const int32_t k_edge1921[] = {
    497, 1459, 1620, 1727, 989, 1641, 361, 1817, 1267, 1253, 1163, 1580, 1247, 1778, 136, 1369,
    1834, 1151, 1195, 1264, 218, 282, 1552, 1434, 1763, 1353, 1200, 1566, 174, 1579, 1567, 1278};
static const int32_t k_silence[] = {
    1534, 1031, 77, 871, 1317, 282, 1552, 1434, 955, 1476, 1124, 1991, 492, 1778, 714, 1278,
    1534, 892, 1130, 233, 1902, 620, 1552, 1434, 1267, 1253, 1200, 1237, 7, 1714, 1852, 1110,
    1323, 771, 1386, 1264, 1902, 282, 361, 1817, 1267, 1253, 769, 1580, 981, 1498, 203, 160,
    1437, 664, 818, 881, 27, 282, 200, 1434, 1375, 1519, 53, 1057, 285, 1714, 460, 1059,
    1346, 771, 574, 335, 27, 1928, 1552, 1434, 1267, 620, 2010, 1580, 2000, 1579, 460, 160};

static void check_case(qtts_codec_encoder *enc, const char *name, const float *x, size_t n,
                       const int32_t *want, int want_frames) {
    int32_t *codes = NULL;
    int F = -1;
    qtts_err err = {0};
    qtts_status st = qtts_codec_encode(enc, x, n, &codes, &F, &err);
    CHECK(st == QTTS_OK, "%s: %s", name, err.msg);
    if (st != QTTS_OK) return;
    CHECK(F == want_frames, "%s: %d frames, want %d", name, F, want_frames);
    int diff = 0;
    for (int i = 0; F == want_frames && i < F * enc->n_out; i++) diff += codes[i] != want[i];
    CHECK(diff == 0, "%s: %d codes differ from the reference", name, diff);
    qtts_free(codes);
}

static void test_silence_and_short(void) {
    qtts_err err = {0};
    qtts_codec_encoder *enc = load_encoder(BASE06, &err);
    REQUIRE(enc, "%s", err.msg);
    float *x = calloc(9600, sizeof(float));
    check_case(enc, "silence 9600", x, 9600, k_silence, 5);
    lcg_noise(x, 1, 1);
    check_case(enc, "noise 1", x, 1, k_short1, 1);
    lcg_noise(x, 1000, 2);
    check_case(enc, "noise 1000", x, 1000, k_short1000, 1);
    lcg_noise(x, 1919, 3);
    check_case(enc, "noise 1919", x, 1919, k_short1919, 1);
    lcg_noise(x, 1921, 4);
    check_case(enc, "noise 1921", x, 1921, k_edge1921, 2);
    free(x);
    qtts_codec_encoder_free(enc);
}

/* ---- chunking ------------------------------------------------------------- */

typedef struct {
    float *seanet;
    size_t n;
} capture;

static void capture_hook(void *user, const char *stage, const float *x, int C, int n, size_t ld) {
    capture *c = user;
    if (strcmp(stage, "encoder") || c->seanet) return;
    c->n = (size_t)C * n;
    c->seanet = malloc(sizeof(float) * c->n);
    for (int r = 0; r < C; r++) memcpy(c->seanet + (size_t)r * n, x + (size_t)r * ld, sizeof(float) * n);
}

static void test_chunking_is_exact(void) {
    qtts_err err = {0};
    qtts_codec_encoder *enc = load_encoder(BASE06, &err);
    REQUIRE(enc, "%s", err.msg);
    const size_t n = 3 * 24000 + 777; /* not a whole number of frames */
    float *x = malloc(sizeof(float) * n);
    lcg_noise(x, n, 99);
    for (size_t i = 0; i < n; i++) x[i] += 0.4f * sinf((float)i * 0.05f);
    /* chunk sizes (frames per SEANet pass) at one thread, then on the pool */
    static const struct {
        int chunk, threads;
    } cases[] = {{1000, 1}, {1, 1}, {2, 1}, {3, 1}, {7, 1}, {16, 1}, {1000, 2}, {7, 3}};
    int32_t *ref_codes = NULL;
    capture ref = {0};
    int refF = 0;
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases); ci++) {
        const int chunk = cases[ci].chunk;
        qtts_threads_init(cases[ci].threads);
        enc->chunk_frames = chunk;
        capture cap = {0};
        qtts_codec_enc_hook hook = {capture_hook, &cap};
        int32_t *codes = NULL;
        int F = 0;
        qtts_status st = qtts_codec_encode_hooked(enc, x, n, &codes, &F, &hook, &err);
        CHECK(st == QTTS_OK && cap.seanet, "chunk %d, %d threads: %s", chunk, cases[ci].threads, err.msg);
        if (st == QTTS_OK && ci == 0) {
            ref_codes = codes, ref = cap, refF = F;
            CHECK(F == (int)((n + 1919) / 1920), "frames %d", F);
            continue;
        }
        if (st == QTTS_OK && cap.seanet) {
            CHECK(F == refF && cap.n == ref.n && !memcmp(cap.seanet, ref.seanet, sizeof(float) * ref.n),
                  "chunk %d, %d threads: SEANet output not bit-identical to one pass", chunk,
                  cases[ci].threads);
            CHECK(F == refF && !memcmp(codes, ref_codes, sizeof(int32_t) * (size_t)F * enc->n_out),
                  "chunk %d, %d threads: codes differ", chunk, cases[ci].threads);
        }
        qtts_free(codes);
        free(cap.seanet);
    }
    qtts_threads_init(2);
    qtts_free(ref_codes);
    free(ref.seanet);
    free(x);
    qtts_codec_encoder_free(enc);
}

/* ---- guards ---------------------------------------------------------------- */

static void test_input_guards(void) {
    qtts_err err = {0};
    qtts_codec_encoder *enc = load_encoder(BASE06, &err);
    REQUIRE(enc, "%s", err.msg);
    int32_t *codes = (int32_t *)(uintptr_t)1;
    int F = -7;
    float x[4] = {0.1f, 0.2f, 0.3f, 0.4f};

    CHECK(qtts_codec_encode(enc, x, 0, &codes, &F, &err) == QTTS_ERR_INVALID, "empty: %s", err.msg);
    CHECK(strstr(err.msg, "empty") != NULL, "empty message: %s", err.msg);
    x[2] = NAN;
    CHECK(qtts_codec_encode(enc, x, 4, &codes, &F, &err) == QTTS_ERR_INVALID, "NaN: %s", err.msg);
    CHECK(strstr(err.msg, "sample 2") != NULL, "NaN message: %s", err.msg);
    x[2] = INFINITY;
    CHECK(qtts_codec_encode(enc, x, 4, &codes, &F, &err) == QTTS_ERR_INVALID, "inf: %s", err.msg);
    CHECK(qtts_codec_encode(enc, NULL, 4, &codes, &F, &err) == QTTS_ERR_INVALID, "NULL wav");
    CHECK(qtts_codec_encode(enc, x, 4, NULL, &F, &err) == QTTS_ERR_INVALID, "NULL out");

    /* max-length guard: one sample over the limit is refused before any work */
    CHECK(enc->max_samples == (size_t)QTTS_CODEC_ENC_MAX_SECONDS * 24000, "max %zu", enc->max_samples);
    const size_t big = enc->max_samples + 1;
    float *huge = calloc(big, sizeof(float));
    REQUIRE(huge, "calloc");
    const double t0 = qtts_now();
    CHECK(qtts_codec_encode(enc, huge, big, &codes, &F, &err) == QTTS_ERR_LIMIT, "over limit: %s", err.msg);
    CHECK(qtts_now() - t0 < 1.0, "the limit check did work first");
    CHECK(strstr(err.msg, "limit") != NULL, "limit message: %s", err.msg);
    CHECK(codes == (int32_t *)(uintptr_t)1 && F == -7, "outputs touched on error");
    free(huge);
    qtts_codec_encoder_free(enc);
}

/* ---- loading ----------------------------------------------------------------- */

static void test_load_errors(void) {
    qtts_config cfg;
    qtts_err err = {0};
    REQUIRE(qtts_config_load(BASE06, &cfg, &err) == QTTS_OK, "%s", err.msg);
    qtts_codec_encoder *e = NULL;

    qtts_config bad = cfg;
    bad.codec_enc.hidden = 16;
    CHECK(qtts_codec_encoder_load(BASE06, &bad, &e, &err) == QTTS_ERR_FORMAT && !e, "hidden 16 accepted");
    CHECK(strstr(err.msg, "encoder.encoder.layers.14.conv.weight") != NULL, "message: %s", err.msg);

    bad = cfg;
    bad.codec_enc.codebook_dim = 8;
    CHECK(qtts_codec_encoder_load(BASE06, &bad, &e, &err) == QTTS_ERR_FORMAT && !e, "codebook_dim 8 accepted");
    CHECK(strstr(err.msg, "(tensor encoder.quantizer.semantic_residual_vector_quantizer.input_proj.weight)"),
          "message: %s", err.msg);

    bad = cfg;
    bad.codec_enc.layers = 3; /* the file has 2 */
    CHECK(qtts_codec_encoder_load(BASE06, &bad, &e, &err) != QTTS_OK && !e, "3 layers accepted");
    CHECK(strstr(err.msg, "encoder.encoder_transformer.layers.2.input_layernorm.weight") != NULL,
          "message: %s", err.msg);

    CHECK(qtts_codec_encoder_load(QTTS_FIXTURES "/no_such_model", &cfg, &e, &err) != QTTS_OK && !e,
          "missing directory accepted");

    REQUIRE(qtts_codec_encoder_load(BASE06, &cfg, &e, &err) == QTTS_OK, "%s", err.msg);
    CHECK(e->hop == 960 && e->frame_samples == 1920 && e->n_out == 16 && e->n_sem == 1 && e->n_ac == 15,
          "dims hop %d frame %d n_out %d", e->hop, e->frame_samples, e->n_out);
    qtts_codec_encoder_free(e);
}

/* ---- encoder_config -------------------------------------------------------- */

static char g_dir[64];
static char *real_text[3];
static const char *const cfg_files[3] = {"config.json", "generation_config.json",
                                         "speech_tokenizer/config.json"};

static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len;
    qtts_err err = {0};
    if (qtts_read_file(path, 1 << 20, &buf, &len, &err) != QTTS_OK) return NULL;
    return buf;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

/* text with the nth (1-based) occurrence of find replaced by repl; NULL if absent. */
static char *replace_nth(const char *text, const char *find, const char *repl, int nth) {
    const char *at = text;
    for (int i = 0; i < nth; i++) {
        at = strstr(i ? at + 1 : at, find);
        if (!at) return NULL;
    }
    size_t pre = (size_t)(at - text), fl = strlen(find), rl = strlen(repl), tl = strlen(text);
    char *out = malloc(tl - fl + rl + 1);
    memcpy(out, text, pre);
    memcpy(out + pre, repl, rl);
    memcpy(out + pre + rl, at + fl, tl - pre - fl + 1);
    return out;
}

static void test_real_encoder_config(void) {
    qtts_config c;
    qtts_err err = {0};
    REQUIRE(qtts_config_load(REAL_DIR, &c, &err) == QTTS_OK, "%s", err.msg);
    const qtts_codec_enc_config *E = &c.codec_enc;
    CHECK(E->sampling_rate == 24000 && E->frame_rate == 12.5 && E->hop == 960, "rates");
    CHECK(E->hidden == 512 && E->num_filters == 64 && E->num_residual_layers == 1, "seanet dims");
    CHECK(E->n_ratios == 4 && E->ratios[0] == 8 && E->ratios[1] == 6 && E->ratios[2] == 5 &&
              E->ratios[3] == 4,
          "ratios");
    CHECK(E->kernel_size == 7 && E->last_kernel_size == 3 && E->residual_kernel_size == 3 &&
              E->dilation_growth_rate == 2 && E->compress == 2,
          "kernels");
    CHECK(E->layers == 8 && E->heads == 8 && E->kv_heads == 8 && E->head_dim == 64 && E->inter == 2048,
          "transformer");
    CHECK(E->norm_eps == 1e-5f && E->rope_theta == 10000.0, "eps/theta");
    CHECK(E->codebook_size == 2048 && E->codebook_dim == 256 && E->num_quantizers == 32 &&
              E->num_semantic_quantizers == 1,
          "quantizer");
}

static void test_bad_encoder_configs(void) {
    static const struct {
        const char *name, *find, *repl;
        int nth;
        const char *expect;
        qtts_status status;
    } bad[] = {
        {"pad_mode", "\"pad_mode\": \"constant\"", "\"pad_mode\": \"reflect\"", 1,
         "encoder_config.pad_mode: only \"constant\" is supported", QTTS_ERR_UNSUPPORTED},
        {"no_frame_rate", "\"_frame_rate\"", "\"frame_rate_x\"", 1, "encoder_config._frame_rate: missing",
         QTTS_ERR_FORMAT},
        {"ratios", "\"upsampling_ratios\": [\n      8,", "\"upsampling_ratios\": [\n      16,", 1,
         "encoder_config._frame_rate: 12.5 must be half of", QTTS_ERR_UNSUPPORTED},
        {"causal", "\"use_causal_conv\": true", "\"use_causal_conv\": false", 1,
         "encoder_config.use_causal_conv: only true is supported", QTTS_ERR_UNSUPPORTED},
        {"shortcut", "\"use_conv_shortcut\": false", "\"use_conv_shortcut\": true", 1,
         "encoder_config.use_conv_shortcut: only false is supported", QTTS_ERR_UNSUPPORTED},
        {"act", "\"hidden_act\": \"gelu\"", "\"hidden_act\": \"relu\"", 1,
         "encoder_config.hidden_act: only \"gelu\" is supported", QTTS_ERR_UNSUPPORTED},
        {"streaming", "\"use_streaming\": false", "\"use_streaming\": true", 1,
         "encoder_config.use_streaming: only false is supported", QTTS_ERR_UNSUPPORTED},
        {"vq_dim", "\"vector_quantization_hidden_dimension\": 256",
         "\"vector_quantization_hidden_dimension\": 128", 1,
         "encoder_config.vector_quantization_hidden_dimension: 128 != codebook_dim 256", QTTS_ERR_FORMAT},
        {"enc_codebook", "\"codebook_size\": 2048", "\"codebook_size\": 1024", 2,
         "encoder_config.codebook_size: 1024 != decoder_config.codebook_size 2048", QTTS_ERR_FORMAT},
        {"valid_nq", "\"encoder_valid_num_quantizers\": 16", "\"encoder_valid_num_quantizers\": 8", 1,
         "encoder_valid_num_quantizers: 8 != decoder_config.num_quantizers 16", QTTS_ERR_FORMAT},
        {"stereo", "\"audio_channels\": 1", "\"audio_channels\": 2", 1,
         "encoder_config.audio_channels: only mono (1) is supported", QTTS_ERR_UNSUPPORTED},
        {"heads", "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 3", 1,
         "encoder_config.num_key_value_heads: 3 does not divide num_attention_heads 8", QTTS_ERR_FORMAT},
        {"no_encoder", "\"encoder_config\"", "\"encoder_config_x\"", 1, "encoder_config: missing",
         QTTS_ERR_FORMAT},
        {"downsample_rate", "\"encode_downsample_rate\": 1920", "\"encode_downsample_rate\": 960", 1,
         "encode_downsample_rate: 960 != 2 * prod(encoder_config.upsampling_ratios) = 1920", QTTS_ERR_FORMAT},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(bad); i++) {
        char *t = replace_nth(real_text[2], bad[i].find, bad[i].repl, bad[i].nth);
        if (!t) {
            CHECK(0, "%s: fixture has no occurrence %d of %s", bad[i].name, bad[i].nth, bad[i].find);
            continue;
        }
        char dir[256], p[512];
        snprintf(dir, sizeof dir, "%s/%s", g_dir, bad[i].name);
        mkdir(dir, 0700);
        snprintf(p, sizeof p, "%s/speech_tokenizer", dir);
        mkdir(p, 0700);
        for (int f = 0; f < 3; f++) {
            snprintf(p, sizeof p, "%s/%s", dir, cfg_files[f]);
            CHECK(write_text(p, f == 2 ? t : real_text[f]), "write %s", p);
        }
        free(t);
        qtts_config c;
        qtts_err err = {0};
        qtts_status st = qtts_config_load(dir, &c, &err);
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s/%s: ", dir, cfg_files[2]);
        CHECK(st == bad[i].status, "%s: status %s, want %s (%s)", bad[i].name, qtts_status_name(st),
              qtts_status_name(bad[i].status), err.msg);
        CHECK(!strncmp(err.msg, prefix, strlen(prefix)), "%s: message does not start with %s: %s",
              bad[i].name, prefix, err.msg);
        CHECK(strstr(err.msg, bad[i].expect) != NULL, "%s: '%s' not in: %s", bad[i].name, bad[i].expect,
              err.msg);
        if (verbose()) fprintf(stderr, "  %s -> %s\n", bad[i].name, err.msg);
        for (int f = 0; f < 3; f++) {
            snprintf(p, sizeof p, "%s/%s", dir, cfg_files[f]);
            unlink(p);
        }
        snprintf(p, sizeof p, "%s/speech_tokenizer", dir);
        rmdir(p);
        rmdir(dir);
    }
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/qtts_enc_XXXXXX");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 2;
    }
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", REAL_DIR, cfg_files[i]);
        if (!(real_text[i] = slurp(p))) {
            fprintf(stderr, "cannot read fixture %s\n", p);
            return 2;
        }
    }
    TEST_RUN(test_strided_conv_kernel);
    TEST_RUN(test_phase_pack_replicate);
    TEST_RUN(test_elu_rows);
    TEST_RUN(test_vq_nearest);
    TEST_RUN(test_real_encoder_config);
    TEST_RUN(test_bad_encoder_configs);
    TEST_RUN(test_load_errors);
    TEST_RUN(test_input_guards);
    TEST_RUN(test_silence_and_short);
    TEST_RUN(test_chunking_is_exact);
    TEST_RUN(test_goldens);
    for (int i = 0; i < 3; i++) qtts_free(real_text[i]);
    rmdir(g_dir);
    TEST_END();
}
