/*
 * test_cuda_ops.c - the CUDA backend against the CPU (make test-cuda; a GPU).
 *
 * Op by op (src/backend/cuda/cuda_test.h), each on random data against the
 * CPU kernel it replaces:
 *   matmul F32/BF16  bit for bit against the SIMD order (kernels_impl.h)
 *                    when this CPU has a SIMD path, else within its budget
 *                    of the scalar order; Q8_0/Q4_0 bit for bit (every CPU
 *                    path has the same bits); the fused SwiGLU matmul
 *   rmsnorm, q/k norm + RoPE, attention   within a few ulps (the device
 *                    sums doubles in a tree, exp is rounded from double)
 *   conv (plain, dilated, transposed as polyphase, accumulate), layernorm
 *                    over channels, SnakeBeta   bit for bit
 *   CP sampling      the same ids and RNG state as qtts_sample (greedy,
 *                    temperature, top-k, top-p including tied values)
 * Backend stages on the tiny cv06 model against the CPU backend: prefill,
 * step, CP frame (greedy and sampled: same codes and RNG stream), batched
 * step and CP frame bit-identical to single-stream ones, graphs on and off
 * identical, the codec window; the projection path on cv17. End to end:
 * greedy generation from every golden's reference prefill embeddings (all
 * five tiny models; cv06 must have goldens) gives the golden's codes.
 *
 * Without a CUDA device it prints a SKIP line and exits 0; any other
 * failure to start is a failure.
 */
#include "harness.h"

#include <dirent.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_test.h"
#include "base/json.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/conv_impl.h"
#include "kernels/kernels_impl.h"
#include "model/codec_decoder.h"
#include "model/generate.h"
#include "model/sampling.h"
#include "model/talker.h"

#define MODELS QTTS_FIXTURES "/models"
#define GOLDENS QTTS_FIXTURES "/golden"

static const char *const k_models[] = {"cv06", "cv17", "vd17", "base06", "base17"};

/* ---- helpers ---------------------------------------------------------- */

static uint64_t g_rs = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (float)((g_rs >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
}
static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static size_t bits_differ(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

/* Largest |a - b| / max(|b|, floor). */
static double max_rel(const float *a, const float *b, size_t n, double floor_) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), floor_);
        if (!(d <= w)) w = d;
    }
    return w;
}

static double max_absd(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= w)) w = d;
    }
    return w;
}

/* The first usable SIMD matmul table (they all share one order), or NULL. */
static const qtts_isa *simd_isa(void) {
    const qtts_isa *all[16];
    int n = qtts_isa_compiled(all, 16);
    for (int i = 0; i < n; i++)
        if (qtts_isa_usable(all[i]) && strcmp(all[i]->name, "scalar") != 0) return all[i];
    return NULL;
}

/* A random [rows, cols] matrix of format dt (data owned by *keep). */
static qtts_mat make_mat(qtts_dtype dt, int rows, int cols, void **keep) {
    const size_t n = (size_t)rows * cols;
    float *f = falloc(n);
    fill(f, n, 0.5f);
    qtts_mat m = {.data = f, .dtype = QTTS_DT_F32, .rows = rows, .cols = cols};
    if (dt == QTTS_DT_F32) {
        *keep = f;
        return m;
    }
    if (dt == QTTS_DT_BF16) {
        uint16_t *h = malloc(sizeof(uint16_t) * (n ? n : 1));
        for (size_t i = 0; i < n; i++) h[i] = qtts_f32_to_bf16(f[i]);
        free(f);
        *keep = h;
        return (qtts_mat){.data = h, .dtype = QTTS_DT_BF16, .rows = rows, .cols = cols};
    }
    qtts_mat q;
    qtts_err err = {0};
    if (qtts_mat_quantize(&m, dt, &q, &err)) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        exit(1);
    }
    free(f);
    *keep = NULL;
    return q; /* packed, as the loader's */
}

/* The plain (file-layout) view of packed quantized matrix q, as a file
 * tensor gives it (data owned by *keep). */
static qtts_mat plain_view(const qtts_mat *q, void **keep) {
    const size_t rb = qtts_mat_row_bytes(q->dtype, q->cols);
    uint8_t *p = malloc(rb * (size_t)q->rows + 1);
    for (int r = 0; r < q->rows; r++) qtts_mat_unpack_row(q, r, p + rb * (size_t)r);
    *keep = p;
    return (qtts_mat){.data = p, .dtype = q->dtype, .rows = q->rows, .cols = q->cols, .packed = false};
}

static void free_mat(qtts_mat *m, void *keep) {
    if (keep) free(keep);
    else qtts_mat_free(m);
}

/* ---- matmul --------------------------------------------------------------- */

static void test_matmul(void) {
    const qtts_isa *simd = simd_isa();
    if (!simd) printf("  matmul: no SIMD path on this CPU: F32/BF16 compared within the budget\n");
    const qtts_dtype dts[4] = {QTTS_DT_F32, QTTS_DT_BF16, QTTS_DT_Q8_0, QTTS_DT_Q4_0};
    const int fshapes[][2] = {{7, 16}, {33, 48}, {64, 100}, {130, 1024}, {17, 1040}, {5, 3}};
    const int qshapes[][2] = {{7, 32}, {33, 96}, {130, 1024}, {9, 544}, {20, 3072}};
    const int ns[] = {1, 3, 8, 13};
    qtts_err err = {0};
    for (int d = 0; d < 4; d++) {
        const bool quant = d >= 2;
        const int nshapes = quant ? 5 : 6;
        for (int s = 0; s < nshapes; s++) {
            const int rows = quant ? qshapes[s][0] : fshapes[s][0];
            const int cols = quant ? qshapes[s][1] : fshapes[s][1];
            void *keep;
            qtts_mat W = make_mat(dts[d], rows, cols, &keep);
            for (int ni = 0; ni < 4; ni++)
                for (int wb = 0; wb < 2; wb++) {
                    const int n = ns[ni];
                    float *x = falloc((size_t)n * cols), *b = falloc(rows);
                    float *yg = falloc((size_t)n * rows), *yc = falloc((size_t)n * rows);
                    fill(x, (size_t)n * cols, 1.0f);
                    fill(b, rows, 0.1f);
                    qtts_status st = qtts_cuda_test_matmul(&W, x, n, wb ? b : NULL, yg, &err);
                    CHECK(st == QTTS_OK, "matmul: %s", err.msg);
                    if (st == QTTS_OK) {
                        const bool exact = quant || simd;
                        qtts_matmul_isa(quant ? qtts_isa_active() : simd ? simd : &qtts_isa_ref, yc,
                                        x, n, &W, wb ? b : NULL);
                        if (exact) {
                            size_t nd = bits_differ(yg, yc, (size_t)n * rows);
                            CHECK(nd == 0, "matmul dtype %d [%d x %d] n=%d bias=%d: %zu of %d "
                                  "outputs differ (max |d| %.3g)", d, rows, cols, n, wb, nd,
                                  n * rows, max_absd(yg, yc, (size_t)n * rows));
                        } else {
                            /* the budget of kernels_impl.h, on sum |w x| <= cols * 0.5 */
                            const double tol = (cols / 16.0 + cols / 8.0 + 8) * 0x1p-24 * cols * 0.5;
                            double e = max_absd(yg, yc, (size_t)n * rows);
                            CHECK(e <= tol, "matmul dtype %d [%d x %d] n=%d: |d| %.3g > %.3g", d,
                                  rows, cols, n, e, tol);
                        }
                    }
                    free(x), free(b), free(yg), free(yc);
                }
            if (quant) {
                /* a plain view (a file tensor) uploads to the same device matrix */
                void *pk;
                const qtts_mat V = plain_view(&W, &pk);
                const int n = 3;
                float *x = falloc((size_t)n * cols), *yp = falloc((size_t)n * rows);
                float *yv = falloc((size_t)n * rows);
                fill(x, (size_t)n * cols, 1.0f);
                qtts_status st = qtts_cuda_test_matmul(&W, x, n, NULL, yp, &err);
                if (st == QTTS_OK) st = qtts_cuda_test_matmul(&V, x, n, NULL, yv, &err);
                CHECK(st == QTTS_OK, "matmul (plain view): %s", err.msg);
                if (st == QTTS_OK)
                    CHECK(bits_differ(yp, yv, (size_t)n * rows) == 0,
                          "matmul dtype %d [%d x %d]: the plain view differs from the packed matrix",
                          d, rows, cols);
                free(pk), free(x), free(yp), free(yv);
            }
            free_mat(&W, keep);
        }
    }
}

static void test_swiglu(void) {
    const qtts_isa *simd = simd_isa();
    qtts_err err = {0};
    const qtts_dtype dts[3] = {QTTS_DT_BF16, QTTS_DT_F32, QTTS_DT_Q8_0};
    for (int d = 0; d < 3; d++) {
        const int rows = 96, cols = 64, n = 5;
        void *k1, *k2;
        qtts_mat g = make_mat(dts[d], rows, cols, &k1), u = make_mat(dts[d], rows, cols, &k2);
        float *x = falloc((size_t)n * cols), *yg = falloc((size_t)n * rows);
        float *gc = falloc((size_t)n * rows), *uc = falloc((size_t)n * rows);
        fill(x, (size_t)n * cols, 1.0f);
        qtts_status st = qtts_cuda_test_swiglu(&g, &u, x, n, yg, &err);
        CHECK(st == QTTS_OK, "swiglu: %s", err.msg);
        const qtts_isa *isa = d == 2 || !simd ? qtts_isa_active() : simd;
        qtts_matmul_isa(isa, gc, x, n, &g, NULL);
        qtts_matmul_isa(isa, uc, x, n, &u, NULL);
        qtts_swiglu(gc, gc, uc, (size_t)n * rows);
        if (st == QTTS_OK) {
            double e = max_rel(yg, gc, (size_t)n * rows, 1e-3);
            CHECK(e <= (simd || d == 2 ? 4e-7 : 1e-4), "swiglu dtype %d: rel %.3g", d, e);
        }
        free_mat(&g, k1), free_mat(&u, k2);
        free(x), free(yg), free(gc), free(uc);
    }
}

/* ---- norms, RoPE, attention ------------------------------------------------ */

static void test_rmsnorm(void) {
    qtts_err err = {0};
    const int Ds[] = {16, 1024, 2048, 100};
    for (int i = 0; i < 4; i++) {
        const int D = Ds[i], n = 6;
        float *x = falloc((size_t)n * D), *w = falloc(D), *og = falloc((size_t)n * D);
        float *oc = falloc((size_t)n * D);
        fill(x, (size_t)n * D, 3.0f);
        fill(w, D, 1.0f);
        qtts_status st = qtts_cuda_test_rmsnorm(x, w, n, D, 1e-6f, og, &err);
        CHECK(st == QTTS_OK, "rmsnorm: %s", err.msg);
        for (int r = 0; r < n; r++) qtts_rmsnorm(oc + (size_t)r * D, x + (size_t)r * D, w, D, 1e-6f);
        if (st == QTTS_OK) {
            double e = max_rel(og, oc, (size_t)n * D, 1e-6);
            CHECK(e <= 2.5e-7, "rmsnorm D=%d: rel %.3g (%zu values differ)", D, e,
                  bits_differ(og, oc, (size_t)n * D));
        }
        free(x), free(w), free(og), free(oc);
    }
}

static void test_qk_rope(void) {
    qtts_err err = {0};
    const int cfg[][3] = {{16, 8, 128}, {4, 2, 8}, {16, 16, 64}};
    for (int c = 0; c < 3; c++) {
        const int nh = cfg[c][0], nkv = cfg[c][1], hd = cfg[c][2], pos = 37;
        float *q = falloc((size_t)nh * hd), *k = falloc((size_t)nkv * hd);
        float *qn = falloc(hd), *kn = falloc(hd), *cs = falloc((size_t)64 * hd / 2);
        float *sn = falloc((size_t)64 * hd / 2);
        fill(q, (size_t)nh * hd, 2.0f);
        fill(k, (size_t)nkv * hd, 2.0f);
        fill(qn, hd, 1.0f);
        fill(kn, hd, 1.0f);
        qtts_rope_table(cs, sn, 64, hd, 1000000.0);
        float *qg = falloc((size_t)nh * hd), *kg = falloc((size_t)nkv * hd);
        memcpy(qg, q, sizeof(float) * nh * hd);
        memcpy(kg, k, sizeof(float) * nkv * hd);
        const float *cr = cs + (size_t)pos * hd / 2, *sr = sn + (size_t)pos * hd / 2;
        for (int norm = 0; norm < 2; norm++) {
            memcpy(qg, q, sizeof(float) * nh * hd);
            memcpy(kg, k, sizeof(float) * nkv * hd);
            qtts_status st = qtts_cuda_test_qk_rope(qg, kg, norm ? qn : NULL, norm ? kn : NULL, nh,
                                                    nkv, hd, 1e-6f, cr, sr, &err);
            CHECK(st == QTTS_OK, "qk_rope: %s", err.msg);
            float *qc = falloc((size_t)nh * hd), *kc = falloc((size_t)nkv * hd);
            memcpy(qc, q, sizeof(float) * nh * hd);
            memcpy(kc, k, sizeof(float) * nkv * hd);
            for (int h = 0; h < nh; h++) {
                if (norm) qtts_rmsnorm(qc + (size_t)h * hd, qc + (size_t)h * hd, qn, hd, 1e-6f);
                qtts_rope(qc + (size_t)h * hd, cr, sr, hd);
            }
            for (int h = 0; h < nkv; h++) {
                if (norm) qtts_rmsnorm(kc + (size_t)h * hd, kc + (size_t)h * hd, kn, hd, 1e-6f);
                qtts_rope(kc + (size_t)h * hd, cr, sr, hd);
            }
            if (st == QTTS_OK) {
                double eq = max_absd(qg, qc, (size_t)nh * hd), ek = max_absd(kg, kc, (size_t)nkv * hd);
                CHECK(eq <= 4e-6 && ek <= 4e-6, "qk_rope %d/%d/%d norm %d: |dq| %.3g |dk| %.3g", nh,
                      nkv, hd, norm, eq, ek);
                if (!norm)
                    CHECK(bits_differ(qg, qc, (size_t)nh * hd) == 0 &&
                              bits_differ(kg, kc, (size_t)nkv * hd) == 0,
                          "RoPE alone is not bit-exact");
            }
            free(qc), free(kc);
        }
        free(q), free(k), free(qn), free(kn), free(cs), free(sn), free(qg), free(kg);
    }
}

/* talker.c's attend_row, restated: scores by qtts_dot_f32, qtts_softmax,
 * o[d] += p * v[d] in order. */
static void attend_ref(const float *q, const float *kc, const float *vc, int nh, int nkv, int hd,
                       int ctx, float scale, float *out) {
    float *sc = falloc(ctx);
    const int grp = nh / nkv;
    for (int h = 0; h < nh; h++) {
        const float *kh = kc + (size_t)(h / grp) * ctx * hd, *vh = vc + (size_t)(h / grp) * ctx * hd;
        for (int j = 0; j < ctx; j++) sc[j] = qtts_dot_f32(q + (size_t)h * hd, kh + (size_t)j * hd, hd) * scale;
        qtts_softmax(sc, ctx);
        float *o = out + (size_t)h * hd;
        memset(o, 0, sizeof(float) * hd);
        for (int j = 0; j < ctx; j++)
            for (int d = 0; d < hd; d++) o[d] += sc[j] * vh[(size_t)j * hd + d];
    }
    free(sc);
}

static void test_attention(void) {
    qtts_err err = {0};
    const int cfg[][4] = {{4, 2, 64, 1}, {4, 2, 64, 17}, {16, 8, 128, 300}, {4, 4, 8, 16}};
    for (int c = 0; c < 4; c++) {
        const int nh = cfg[c][0], nkv = cfg[c][1], hd = cfg[c][2], ctx = cfg[c][3];
        const float scale = (float)(1.0 / sqrt((double)hd));
        float *q = falloc((size_t)nh * hd), *kc = falloc((size_t)nkv * ctx * hd);
        float *vc = falloc((size_t)nkv * ctx * hd), *og = falloc((size_t)nh * hd);
        float *oc = falloc((size_t)nh * hd);
        fill(q, (size_t)nh * hd, 1.0f);
        fill(kc, (size_t)nkv * ctx * hd, 1.0f);
        fill(vc, (size_t)nkv * ctx * hd, 1.0f);
        qtts_status st = qtts_cuda_test_attention(q, kc, vc, nh, nkv, hd, ctx, scale, og, &err);
        CHECK(st == QTTS_OK, "attention: %s", err.msg);
        attend_ref(q, kc, vc, nh, nkv, hd, ctx, scale, oc);
        if (st == QTTS_OK) {
            double e = max_absd(og, oc, (size_t)nh * hd);
            CHECK(e <= 1e-6, "attention %d/%d/%d ctx %d: |d| %.3g (%zu values differ)", nh, nkv,
                  hd, ctx, e, bits_differ(og, oc, (size_t)nh * hd));
        }
        free(q), free(kc), free(vc), free(og), free(oc);
    }
}

/* ---- codec ops --------------------------------------------------------------- */

/* y = conv(x) on the CPU with the causal padding the CPU kernels expect. */
static void conv_cpu(const qtts_conv1d *c, const float *x, int n, bool acc, float *y) {
    const int P = (c->taps - 1) * c->dil;
    float *xp = falloc((size_t)c->cin * (n + P));
    for (int ci = 0; ci < c->cin; ci++)
        memcpy(xp + (size_t)ci * (n + P) + P, x + (size_t)ci * n, sizeof(float) * n);
    qtts_conv1d_run(c, y, n, xp + P, (size_t)n + P, n, acc, NULL);
    free(xp);
}

static void test_conv(void) {
    qtts_err err = {0};
    /* cout, cin, taps, dil, transposed stride (0 = plain), n */
    const int cfg[][6] = {{24, 20, 7, 3, 0, 50}, {96, 33, 1, 1, 0, 130}, {17, 64, 3, 1, 0, 7},
                          {12, 40, 16, 1, 8, 21}, {8, 16, 2, 1, 2, 65}, {1, 24, 7, 1, 0, 300}};
    for (int i = 0; i < 6; i++) {
        const int cout = cfg[i][0], cin = cfg[i][1], taps = cfg[i][2], dil = cfg[i][3];
        const int s = cfg[i][4], n = cfg[i][5];
        qtts_conv1d c;
        const size_t wn = (size_t)cout * cin * taps;
        float *w = falloc(wn), *b = falloc((size_t)cout * (s ? s : 1));
        fill(w, wn, 0.3f);
        fill(b, cout, 0.1f);
        bool ok = s ? qtts_convtr1d_init(&c, w, b, cin, cout, taps, s)
                    : qtts_conv1d_init(&c, w, i == 1 ? NULL : b, cout, cin, taps, dil);
        CHECK(ok, "conv init");
        if (!ok) continue;
        float *x = falloc((size_t)c.cin * n);
        fill(x, (size_t)c.cin * n, 1.0f);
        for (int acc = 0; acc < 2; acc++) {
            float *yg = falloc((size_t)c.cout * n), *yc = falloc((size_t)c.cout * n);
            fill(yg, (size_t)c.cout * n, 1.0f);
            memcpy(yc, yg, sizeof(float) * c.cout * n);
            qtts_status st = qtts_cuda_test_conv(&c, x, n, acc, yg, &err);
            CHECK(st == QTTS_OK, "conv: %s", err.msg);
            conv_cpu(&c, x, n, acc, yc);
            if (st == QTTS_OK) {
                size_t nd = bits_differ(yg, yc, (size_t)c.cout * n);
                CHECK(nd == 0, "conv %d (acc %d): %zu of %d outputs differ (max |d| %.3g)", i, acc,
                      nd, c.cout * n, max_absd(yg, yc, (size_t)c.cout * n));
            }
            free(yg), free(yc);
        }
        qtts_conv1d_free(&c);
        free(w), free(b), free(x);
    }
}

static void test_snake_layernorm(void) {
    qtts_err err = {0};
    const int C = 48, n = 333;
    float *x = falloc((size_t)C * n), *ea = falloc(C), *ib = falloc(C), *a = falloc(C);
    float *bt = falloc(C), *yg = falloc((size_t)C * n), *yc = falloc((size_t)C * n);
    fill(x, (size_t)C * n, 4.0f);
    fill(a, C, 1.0f);
    fill(bt, C, 1.0f);
    qtts_snake_params(ea, ib, a, bt, C);
    qtts_status st = qtts_cuda_test_snake(x, ea, ib, C, n, yg, &err);
    CHECK(st == QTTS_OK, "snake: %s", err.msg);
    for (int c = 0; c < C; c++)
        for (int t = 0; t < n; t++)
            yc[(size_t)c * n + t] = qtts_snake_ref(x[(size_t)c * n + t], ea[c], ib[c]);
    if (st == QTTS_OK)
        CHECK(bits_differ(yg, yc, (size_t)C * n) == 0, "snake: %zu values differ",
              bits_differ(yg, yc, (size_t)C * n));

    float *w = falloc(C), *b = falloc(C);
    fill(w, C, 1.0f);
    fill(b, C, 0.5f);
    memcpy(yg, x, sizeof(float) * C * n);
    memcpy(yc, x, sizeof(float) * C * n);
    st = qtts_cuda_test_layernorm_ch(yg, C, n, w, b, 1e-6f, &err);
    CHECK(st == QTTS_OK, "layernorm: %s", err.msg);
    qtts_layernorm_channels(yc, n, C, n, w, b, 1e-6f);
    if (st == QTTS_OK)
        CHECK(bits_differ(yg, yc, (size_t)C * n) == 0, "layernorm: %zu values differ",
              bits_differ(yg, yc, (size_t)C * n));
    free(x), free(ea), free(ib), free(a), free(bt), free(yg), free(yc), free(w), free(b);
}

/* ---- CP sampling ---------------------------------------------------------------- */

static void test_sample(void) {
    qtts_err err = {0};
    const int V = 2048;
    const qtts_sampler_params ps[] = {
        {false, 50, 1.0f, 0.9f}, {true, 50, 1.0f, 0.9f},  {true, 0, 1.0f, 1.0f},
        {true, 50, 0.8f, 0.9f},  {true, 0, 0.95f, 0.7f},  {true, 1, 1.0f, 1.0f},
        {true, 3000, 0.5f, 1.3f}, {true, 10, 0.0f, 1.0f},
    };
    float *lg = falloc(V), *sc = falloc(V);
    void *scratch = malloc(QTTS_SAMPLE_SCRATCH(V));
    for (size_t p = 0; p < QTTS_ARRAY_LEN(ps); p++)
        for (int trial = 0; trial < 24; trial++) {
            fill(lg, V, 6.0f);
            if (trial % 3 == 1) /* coarse values: many ties, also at the top-p cut */
                for (int i = 0; i < V; i++) lg[i] = roundf(lg[i] * 2.0f) / 2.0f;
            if (trial % 3 == 2) /* a few dominant values */
                for (int i = 0; i < V; i += 97) lg[i] = 12.0f;
            qtts_rng rg, rc;
            qtts_rng_seed(&rg, 1000 + trial);
            rc = rg;
            int code = -1;
            qtts_status st = qtts_cuda_test_sample(lg, V, &ps[p], &rg, &code, &err);
            CHECK(st == QTTS_OK, "sample: %s", err.msg);
            memcpy(sc, lg, sizeof(float) * V);
            const int want = qtts_sample(sc, V, &ps[p], &rc, scratch, NULL);
            CHECK(code == want, "sample params %zu trial %d: device %d, CPU %d", p, trial, code, want);
            CHECK(memcmp(&rg, &rc, sizeof rg) == 0, "sample params %zu trial %d: RNG state differs",
                  p, trial);
        }
    /* a non-finite logit is the CPU's QTTS_ERR_NUMERIC */
    fill(lg, V, 1.0f);
    lg[77] = NAN;
    int code;
    qtts_rng r;
    qtts_rng_seed(&r, 1);
    CHECK(qtts_cuda_test_sample(lg, V, &ps[1], &r, &code, &err) == QTTS_ERR_NUMERIC,
          "NaN logit accepted");
    free(lg), free(sc), free(scratch);
}

/* ---- backend stages on cv06 -------------------------------------------------------- */

typedef struct {
    qtts_config cfg;
    qtts_st_set *st;
    qtts_talker_weights *w;
    qtts_codec_decoder *codec;
    qtts_backend *cpu, *gpu;
} model;

static model g_m;     /* cv06 with its codec, on both backends */
static bool g_model_ok;

/* Model `name` on the CPU and CUDA backends (with its codec if with_codec). */
static bool model_open(const char *name, bool with_codec, model *m) {
    char dir[256];
    qtts_err err = {0};
    memset(m, 0, sizeof *m);
    snprintf(dir, sizeof dir, "%s/%s", MODELS, name);
    if (qtts_config_load(dir, &m->cfg, &err) || qtts_st_set_open(dir, "model", &m->st, &err) ||
        qtts_talker_load(&m->cfg, m->st, &m->w, &err) ||
        (with_codec && qtts_codec_decoder_load(dir, &m->cfg, &m->codec, &err)) ||
        qtts_backend_open("cpu", m->w, m->codec, &m->cpu, &err) ||
        qtts_backend_open("cuda", m->w, m->codec, &m->gpu, &err)) {
        CHECK(0, "open %s: %s", dir, err.msg);
        return false;
    }
    return true;
}

static void model_close(model *m) {
    qtts_backend_close(m->gpu);
    qtts_backend_close(m->cpu);
    qtts_codec_decoder_free(m->codec);
    qtts_talker_free(m->w);
    qtts_st_set_close(m->st);
    memset(m, 0, sizeof *m);
}

static void test_open_model(void) { g_model_ok = model_open("cv06", true, &g_m); }

static void rand_codes(int32_t *codes, const qtts_talker_weights *w) {
    codes[0] = (int32_t)((frand() + 1.0f) * 0.5f * (w->vocab - 1));
    for (int i = 1; i < w->n_groups; i++)
        codes[i] = (int32_t)((frand() + 1.0f) * 0.5f * (w->cp_vocab - 1));
}

static void test_prefill_step(void) {
    if (!g_model_ok) return;
    const qtts_talker_weights *w = g_m.w;
    const int H = w->hidden, V = w->vocab, G = w->n_groups, L = 150, steps = 12;
    qtts_err err = {0};
    qtts_seq *sc = NULL, *sg = NULL;
    REQUIRE(!g_m.cpu->ops->seq_new(g_m.cpu, L + steps, &sc, &err), "%s", err.msg);
    REQUIRE(!g_m.gpu->ops->seq_new(g_m.gpu, L + steps, &sg, &err), "%s", err.msg);
    float *emb = falloc((size_t)L * H), *lc = falloc(V), *lg = falloc(V), *hc = falloc(H);
    float *hg = falloc(H), *text = falloc(H);
    fill(emb, (size_t)L * H, 0.2f);
    CHECK(!g_m.cpu->ops->prefill(g_m.cpu, sc, emb, L, lc, hc, &err), "%s", err.msg);
    CHECK(!g_m.gpu->ops->prefill(g_m.gpu, sg, emb, L, lg, hg, &err), "%s", err.msg);
    CHECK(max_absd(lg, lc, V) <= 1e-4 && max_absd(hg, hc, H) <= 1e-4,
          "prefill: logits |d| %.3g, hidden |d| %.3g", max_absd(lg, lc, V), max_absd(hg, hc, H));
    int32_t codes[64];
    for (int k = 0; k < steps; k++) {
        rand_codes(codes, w);
        fill(text, H, 0.2f);
        CHECK(!g_m.cpu->ops->step(g_m.cpu, sc, codes, text, lc, hc, &err), "%s", err.msg);
        CHECK(!g_m.gpu->ops->step(g_m.gpu, sg, codes, text, lg, hg, &err), "%s", err.msg);
        CHECK(max_absd(lg, lc, V) <= 1e-4 && max_absd(hg, hc, H) <= 1e-4,
              "step %d: logits |d| %.3g, hidden |d| %.3g", k, max_absd(lg, lc, V), max_absd(hg, hc, H));
    }
    /* the cache is full now: the CPU's limit */
    rand_codes(codes, w);
    CHECK(g_m.gpu->ops->step(g_m.gpu, sg, codes, text, lg, hg, &err) == QTTS_ERR_LIMIT,
          "step past max_pos accepted");
    CHECK(g_m.gpu->ops->prefill(g_m.gpu, sg, emb, L + steps + 1, lg, hg, &err) == QTTS_ERR_LIMIT,
          "prefill past max_pos accepted");
    (void)G;
    g_m.cpu->ops->seq_free(g_m.cpu, sc);
    g_m.gpu->ops->seq_free(g_m.gpu, sg);
    free(emb), free(lc), free(lg), free(hc), free(hg), free(text);
}

static void test_cp_frame(void) {
    if (!g_model_ok) return;
    const qtts_talker_weights *w = g_m.w;
    const int H = w->hidden, G = w->n_groups, Vc = w->cp_vocab;
    qtts_err err = {0};
    qtts_seq *sc = NULL, *sg = NULL;
    REQUIRE(!g_m.cpu->ops->seq_new(g_m.cpu, 8, &sc, &err), "%s", err.msg);
    REQUIRE(!g_m.gpu->ops->seq_new(g_m.gpu, 8, &sg, &err), "%s", err.msg);
    float *hid = falloc(H), *lc = falloc((size_t)(G - 1) * Vc), *lg = falloc((size_t)(G - 1) * Vc);
    const qtts_sampler_params ps[] = {{false, 50, 1.0f, 0.9f}, {true, 50, 1.0f, 0.9f},
                                      {true, 0, 0.9f, 1.0f}};
    int32_t cc[64], cg[64];
    for (size_t p = 0; p < QTTS_ARRAY_LEN(ps); p++)
        for (int trial = 0; trial < 6; trial++) {
            fill(hid, H, 1.0f);
            const int c0 = trial * 397 % w->vocab;
            qtts_rng rc, rg;
            qtts_rng_seed(&rc, 42 + trial);
            rg = rc;
            CHECK(!g_m.cpu->ops->cp_frame(g_m.cpu, sc, hid, c0, &ps[p], &rc, cc, lc, &err), "%s", err.msg);
            CHECK(!g_m.gpu->ops->cp_frame(g_m.gpu, sg, hid, c0, &ps[p], &rg, cg, lg, &err), "%s", err.msg);
            CHECK(memcmp(cc, cg, sizeof(int32_t) * (G - 1)) == 0, "cp_frame params %zu trial %d: codes differ",
                  p, trial);
            CHECK(memcmp(&rc, &rg, sizeof rc) == 0, "cp_frame params %zu trial %d: RNG differs", p, trial);
            CHECK(max_absd(lg, lc, (size_t)(G - 1) * Vc) <= 1e-4, "cp_frame logits |d| %.3g",
                  max_absd(lg, lc, (size_t)(G - 1) * Vc));
        }
    qtts_rng r;
    qtts_rng_seed(&r, 1);
    CHECK(g_m.gpu->ops->cp_frame(g_m.gpu, sg, hid, w->vocab, &ps[0], &r, cg, NULL, &err) ==
              QTTS_ERR_INVALID, "c0 out of range accepted");
    g_m.cpu->ops->seq_free(g_m.cpu, sc);
    g_m.gpu->ops->seq_free(g_m.gpu, sg);
    free(hid), free(lc), free(lg);
}

/* Batched stages: each sequence bit-identical to running it alone. */
static void test_batch_identity(void) {
    if (!g_model_ok) return;
    const qtts_talker_weights *w = g_m.w;
    qtts_backend *be = g_m.gpu;
    const int H = w->hidden, V = w->vocab, G = w->n_groups, N = 5, L0 = 9;
    qtts_err err = {0}, errs[5];
    qtts_seq *a[5], *b[5];
    float *emb = falloc((size_t)(L0 + N) * H), *lg = falloc(V), *hg = falloc(H);
    for (int i = 0; i < N; i++) {
        REQUIRE(!be->ops->seq_new(be, 64, &a[i], &err) && !be->ops->seq_new(be, 64, &b[i], &err),
                "%s", err.msg);
        fill(emb, (size_t)(L0 + i) * H, 0.2f);
        CHECK(!be->ops->prefill(be, a[i], emb, L0 + i, lg, hg, &err), "%s", err.msg);
        CHECK(!be->ops->prefill(be, b[i], emb, L0 + i, lg, hg, &err), "%s", err.msg);
    }
    int32_t codes[5][64];
    float text[5][256], hid[5][256];
    REQUIRE(H <= 256 && G <= 64, "model too large for this test");
    float *l1 = falloc((size_t)N * V), *h1 = falloc((size_t)N * H), *l2 = falloc((size_t)N * V);
    float *h2 = falloc((size_t)N * H);
    for (int frame = 0; frame < 3; frame++) {
        qtts_step_item it[5];
        for (int i = 0; i < N; i++) {
            rand_codes(codes[i], w);
            fill(text[i], H, 0.2f);
            CHECK(!be->ops->step(be, a[i], codes[i], text[i], l1 + (size_t)i * V, h1 + (size_t)i * H, &err),
                  "%s", err.msg);
            memset(&it[i], 0, sizeof it[i]);
            it[i].seq = b[i];
            it[i].codes = codes[i];
            it[i].text_row = text[i];
            it[i].logits = l2 + (size_t)i * V;
            it[i].hidden = h2 + (size_t)i * H;
            it[i].err = &errs[i];
        }
        CHECK(!be->ops->step_batch(be, it, N, &err), "%s", err.msg);
        for (int i = 0; i < N; i++) CHECK(it[i].status == QTTS_OK, "%s", errs[i].msg);
        CHECK(bits_differ(l1, l2, (size_t)N * V) == 0 && bits_differ(h1, h2, (size_t)N * H) == 0,
              "frame %d: batched step differs from single steps", frame);

        qtts_cp_item ci[5];
        int32_t c1[5][64], c2[5][64];
        qtts_rng r1[5], r2[5];
        const qtts_sampler_params sp[5] = {{true, 50, 1.0f, 0.9f}, {false, 50, 1.0f, 1.0f},
                                           {true, 0, 0.9f, 1.1f}, {true, 5, 1.0f, 0.7f},
                                           {true, 50, 1.0f, 0.9f}};
        for (int i = 0; i < N; i++) {
            memcpy(hid[i], h1 + (size_t)i * H, sizeof(float) * H);
            qtts_rng_seed(&r1[i], 7 * frame + i);
            r2[i] = r1[i];
            const int c0 = (frame * 31 + i * 101) % V;
            CHECK(!be->ops->cp_frame(be, a[i], hid[i], c0, &sp[i], &r1[i], c1[i], NULL, &err), "%s",
                  err.msg);
            memset(&ci[i], 0, sizeof ci[i]);
            ci[i].seq = b[i];
            ci[i].hidden = hid[i];
            ci[i].c0 = c0;
            ci[i].sp = &sp[i];
            ci[i].rng = &r2[i];
            ci[i].codes_out = c2[i];
            ci[i].err = &errs[i];
        }
        CHECK(!be->ops->cp_frame_batch(be, ci, N, &err), "%s", err.msg);
        for (int i = 0; i < N; i++) {
            CHECK(ci[i].status == QTTS_OK, "%s", errs[i].msg);
            CHECK(memcmp(c1[i], c2[i], sizeof(int32_t) * (G - 1)) == 0 &&
                      memcmp(&r1[i], &r2[i], sizeof r1[i]) == 0,
                  "frame %d sequence %d: batched CP frame differs from the single one", frame, i);
        }
    }
    for (int i = 0; i < N; i++) be->ops->seq_free(be, a[i]), be->ops->seq_free(be, b[i]);
    free(emb), free(lg), free(hg), free(l1), free(h1), free(l2), free(h2);
}

/* The same steps with CUDA graphs off give the same bits, and the graphs
 * were in fact captured. */
static void test_graphs_off(void) {
    if (!g_model_ok) return;
    const qtts_talker_weights *w = g_m.w;
    qtts_err err = {0};
    qtts_backend *ng = NULL;
    qtts_status st = qtts_backend_open("cuda", g_m.w, NULL, &ng, &err);
    REQUIRE(st == QTTS_OK, "%s", err.msg);
    qtts_cuda_test_set_graphs(ng, false);
    qtts_backend *bes[2] = {g_m.gpu, ng};
    const int H = w->hidden, V = w->vocab, G = w->n_groups, L = 20;
    float *emb = falloc((size_t)L * H), *text = falloc(H), *lg[2], *hg[2];
    int32_t codes[64], cps[2][64];
    fill(emb, (size_t)L * H, 0.2f);
    fill(text, H, 0.2f);
    rand_codes(codes, w);
    const qtts_sampler_params sp = {true, 50, 1.0f, 0.9f};
    for (int k = 0; k < 2; k++) {
        qtts_seq *s = NULL;
        lg[k] = falloc(V), hg[k] = falloc(H);
        REQUIRE(!bes[k]->ops->seq_new(bes[k], 40, &s, &err), "%s", err.msg);
        CHECK(!bes[k]->ops->prefill(bes[k], s, emb, L, lg[k], hg[k], &err), "%s", err.msg);
        for (int j = 0; j < 3; j++)
            CHECK(!bes[k]->ops->step(bes[k], s, codes, text, lg[k], hg[k], &err), "%s", err.msg);
        qtts_rng r;
        qtts_rng_seed(&r, 5);
        CHECK(!bes[k]->ops->cp_frame(bes[k], s, hg[k], 17, &sp, &r, cps[k], NULL, &err), "%s", err.msg);
        bes[k]->ops->seq_free(bes[k], s);
    }
    CHECK(bits_differ(lg[0], lg[1], V) == 0 && bits_differ(hg[0], hg[1], H) == 0 &&
              memcmp(cps[0], cps[1], sizeof(int32_t) * (G - 1)) == 0,
          "graphs on and off differ");
    /* a failed capture falls back to direct launches silently: then this
     * test would compare direct launches with themselves */
    CHECK(qtts_cuda_test_graphs_on(g_m.gpu), "graph capture failed: direct launches were used");
    qtts_backend_close(ng);
    free(emb), free(text), free(lg[0]), free(lg[1]), free(hg[0]), free(hg[1]);
}

static void test_codec_window(void) {
    if (!g_model_ok) return;
    const qtts_codec_decoder *d = g_m.codec;
    qtts_err err = {0};
    const int Ts[] = {1, 7, 40};
    for (int i = 0; i < 3; i++) {
        const int T = Ts[i];
        int32_t *codes = malloc(sizeof(int32_t) * (size_t)T * d->n_q);
        for (int k = 0; k < T * d->n_q; k++) codes[k] = (int32_t)((frand() + 1.0f) * 0.5f * (d->cb_size - 1));
        const size_t ns = (size_t)T * d->upsample;
        float *wc = falloc(ns), *wg = falloc(ns);
        CHECK(!g_m.cpu->ops->codec_decode_window(g_m.cpu, codes, T, wc, &err), "%s", err.msg);
        CHECK(!g_m.gpu->ops->codec_decode_window(g_m.gpu, codes, T, wg, &err), "%s", err.msg);
        CHECK(max_absd(wg, wc, ns) <= 1e-4, "codec window T=%d: |d| %.3g (%zu of %zu samples differ)",
              T, max_absd(wg, wc, ns), bits_differ(wg, wc, ns), ns);
        free(codes), free(wc), free(wg);
    }
    int32_t bad[16] = {0};
    bad[3] = d->cb_size;
    float wav[4096];
    CHECK(g_m.gpu->ops->codec_decode_window(g_m.gpu, bad, 1, wav, &err) == QTTS_ERR_INVALID,
          "bad code accepted");
}

/* ---- end to end: the cv06 goldens ---------------------------------------------------- */

typedef struct {
    int32_t *codes;
    int cap, G, n;
} sink;

static int on_frame(void *user, int frame, const int32_t *codes) {
    sink *s = user;
    if (frame != s->n || frame >= s->cap) return 1;
    memcpy(s->codes + (size_t)frame * s->G, codes, sizeof(int32_t) * s->G);
    s->n++;
    return 0;
}

static int g_goldens;

/* Greedy generation on the CUDA backend from the golden's reference prefill
 * embeddings and trailing text: the golden's codes, frame for frame. */
static void golden_case(model *m, const char *mname, const char *name) {
    char path[512];
    qtts_err err = {0};
    const qtts_talker_weights *w = m->w;
    const int G = w->n_groups;
    snprintf(path, sizeof path, "%s/%s/%s.json", GOLDENS, mname, name);
    char *text = NULL;
    size_t tlen;
    if (qtts_read_file(path, 1 << 22, &text, &tlen, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    qtts_json_limits lim = qtts_json_limits_files();
    qtts_json *doc = qtts_json_parse(text, tlen, &lim, path, &err);
    qtts_free(text);
    if (!doc) {
        CHECK(0, "%s", err.msg);
        return;
    }
    int64_t max_new = 0;
    qtts_json_get_int(qtts_json_get(doc, "inputs"), "max_new_tokens", &max_new);
    qtts_json_free(doc);
    snprintf(path, sizeof path, "%s/%s/%s.safetensors", GOLDENS, mname, name);
    qtts_st_file *gf = NULL;
    if (qtts_st_open(path, &gf, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const qtts_tensor *pe = qtts_st_find(gf, "prefill_embeds"), *tr = qtts_st_find(gf, "trailing_text");
    const qtts_tensor *gc = qtts_st_find(gf, "codes");
    if (!pe || !tr || !gc || pe->dtype != QTTS_DT_F32 || tr->dtype != QTTS_DT_F32 ||
        gc->dtype != QTTS_DT_I64 || gc->rank != 2 || gc->shape[1] != G || max_new < 1) {
        CHECK(0, "%s/%s: golden incomplete", mname, name);
        qtts_st_close(gf);
        return;
    }
    g_goldens++;
    qtts_prompt p = {(int)pe->shape[0], (float *)pe->data, (int)tr->shape[0], (float *)tr->data};
    qtts_gen_params gp;
    qtts_gen_params_default(&m->cfg, &gp);
    gp.talker.do_sample = gp.cp.do_sample = false;
    gp.max_new_tokens = (int)max_new;
    const int cap = gp.max_new_tokens;
    sink s = {malloc(sizeof(int32_t) * (size_t)cap * G), cap, G, 0};
    qtts_seq *seq = NULL;
    qtts_status st = m->gpu->ops->seq_new(m->gpu, p.len + gp.max_new_tokens, &seq, &err);
    CHECK(st == QTTS_OK, "%s/%s: %s", mname, name, err.msg);
    qtts_gen_result r;
    if (!st) st = qtts_generate(m->gpu, seq, w, &p, &gp, on_frame, &s, NULL, &r, &err);
    CHECK(st == QTTS_OK, "%s/%s: generate: %s", mname, name, err.msg);
    const int F = (int)gc->shape[0];
    CHECK(s.n == F, "%s/%s: %d frames, golden %d", mname, name, s.n, F);
    int first = -1;
    for (int f = 0; f < QTTS_MIN(F, s.n) && first < 0; f++)
        for (int g = 0; g < G; g++)
            if (s.codes[(size_t)f * G + g] != ((const int64_t *)gc->data)[(size_t)f * G + g]) {
                first = f;
                break;
            }
    CHECK(first < 0, "%s/%s: codes differ from the golden from frame %d", mname, name, first);
    if (seq) m->gpu->ops->seq_free(m->gpu, seq);
    free(s.codes);
    qtts_st_close(gf);
}

/* Every golden of every tiny model (cv06 is required to have some). */
static void test_goldens(void) {
    for (size_t k = 0; k < QTTS_ARRAY_LEN(k_models); k++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", GOLDENS, k_models[k]);
        DIR *d = opendir(dir);
        if (!d) {
            CHECK(k != 0, "no golden directory %s", dir);
            continue;
        }
        model m;
        const bool own = k != 0;
        if (own && !model_open(k_models[k], false, &m)) {
            closedir(d);
            continue;
        }
        if (!own && !g_model_ok) {
            closedir(d);
            continue;
        }
        const int before = g_goldens;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
                golden_case(own ? &m : &g_m, k_models[k], name);
            }
        }
        closedir(d);
        if (own) model_close(&m);
        CHECK(k != 0 || g_goldens > before, "no golden cases under %s", dir);
        printf("  goldens: %s: %d cases\n", k_models[k], g_goldens - before);
    }
}

/* cv17: a talker wider than the code predictor (small_to_mtp_projection). */
static void test_projection_model(void) {
    model m;
    if (!model_open("cv17", false, &m)) return;
    const qtts_talker_weights *w = m.w;
    const int H = w->hidden, V = w->vocab, G = w->n_groups, Vc = w->cp_vocab, L = 23;
    CHECK(w->has_mtp, "cv17 is expected to have the projection");
    qtts_err err = {0};
    qtts_seq *sc = NULL, *sg = NULL;
    if (m.cpu->ops->seq_new(m.cpu, 40, &sc, &err) || m.gpu->ops->seq_new(m.gpu, 40, &sg, &err)) {
        CHECK(0, "%s", err.msg);
        model_close(&m);
        return;
    }
    float *emb = falloc((size_t)L * H), *lc = falloc(V), *lg = falloc(V), *hc = falloc(H);
    float *hg = falloc(H), *text = falloc(H), *pc = falloc((size_t)(G - 1) * Vc);
    float *pg = falloc((size_t)(G - 1) * Vc);
    fill(emb, (size_t)L * H, 0.2f);
    CHECK(!m.cpu->ops->prefill(m.cpu, sc, emb, L, lc, hc, &err), "%s", err.msg);
    CHECK(!m.gpu->ops->prefill(m.gpu, sg, emb, L, lg, hg, &err), "%s", err.msg);
    const qtts_sampler_params sp = {true, 50, 1.0f, 0.9f};
    int32_t codes[64], cc[64], cg[64];
    for (int k = 0; k < 4; k++) {
        CHECK(max_absd(lg, lc, V) <= 1e-4 && max_absd(hg, hc, H) <= 1e-4, "cv17 step %d: |d| %.3g",
              k, max_absd(lg, lc, V));
        qtts_rng rc, rg;
        qtts_rng_seed(&rc, 100 + k);
        rg = rc;
        const int c0 = (k * 613) % V;
        CHECK(!m.cpu->ops->cp_frame(m.cpu, sc, hc, c0, &sp, &rc, cc, pc, &err), "%s", err.msg);
        CHECK(!m.gpu->ops->cp_frame(m.gpu, sg, hc, c0, &sp, &rg, cg, pg, &err), "%s", err.msg);
        CHECK(memcmp(cc, cg, sizeof(int32_t) * (G - 1)) == 0 && memcmp(&rc, &rg, sizeof rc) == 0,
              "cv17 frame %d: CP codes or RNG differ", k);
        CHECK(max_absd(pg, pc, (size_t)(G - 1) * Vc) <= 1e-4, "cv17 CP logits |d| %.3g",
              max_absd(pg, pc, (size_t)(G - 1) * Vc));
        codes[0] = c0;
        memcpy(codes + 1, cc, sizeof(int32_t) * (G - 1));
        fill(text, H, 0.2f);
        CHECK(!m.cpu->ops->step(m.cpu, sc, codes, text, lc, hc, &err), "%s", err.msg);
        CHECK(!m.gpu->ops->step(m.gpu, sg, codes, text, lg, hg, &err), "%s", err.msg);
    }
    m.cpu->ops->seq_free(m.cpu, sc);
    m.gpu->ops->seq_free(m.gpu, sg);
    free(emb), free(lc), free(lg), free(hc), free(hg), free(text), free(pc), free(pg);
    model_close(&m);
}

/* The tests in order; `model`: needs the cv06 model that test_open_model
 * opens. Tests named on the command line run alone (e.g. under
 * compute-sanitizer's slower tools); none named: all. */
static const struct {
    const char *name;
    void (*fn)(void);
    bool model;
} k_tests[] = {
    {"test_matmul", test_matmul, false},
    {"test_swiglu", test_swiglu, false},
    {"test_rmsnorm", test_rmsnorm, false},
    {"test_qk_rope", test_qk_rope, false},
    {"test_attention", test_attention, false},
    {"test_conv", test_conv, false},
    {"test_snake_layernorm", test_snake_layernorm, false},
    {"test_sample", test_sample, false},
    {"test_prefill_step", test_prefill_step, true},
    {"test_cp_frame", test_cp_frame, true},
    {"test_batch_identity", test_batch_identity, true},
    {"test_graphs_off", test_graphs_off, true},
    {"test_codec_window", test_codec_window, true},
    {"test_projection_model", test_projection_model, false},
    {"test_goldens", test_goldens, true},
};

int main(int argc, char **argv) {
    bool run[QTTS_ARRAY_LEN(k_tests)];
    for (size_t k = 0; k < QTTS_ARRAY_LEN(k_tests); k++) run[k] = argc < 2;
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < QTTS_ARRAY_LEN(k_tests) && strcmp(argv[i], k_tests[k].name)) k++;
        if (k == QTTS_ARRAY_LEN(k_tests)) {
            fprintf(stderr, "test_cuda_ops: no test named '%s'; the tests:", argv[i]);
            for (k = 0; k < QTTS_ARRAY_LEN(k_tests); k++) fprintf(stderr, " %s", k_tests[k].name);
            fprintf(stderr, "\n");
            return 2;
        }
        run[k] = true;
    }
    char desc[256];
    qtts_err err = {0};
    qtts_status st = qtts_cuda_probe(desc, sizeof desc, &err);
    if (st == QTTS_ERR_UNSUPPORTED && strncmp(err.msg, "no CUDA device", 14) == 0) {
        printf("test_cuda_ops: SKIP: %s; the CUDA tests need a GPU\n", err.msg);
        return 0;
    }
    if (st) {
        fprintf(stderr, "test_cuda_ops: cannot start: %s\n", err.msg);
        return 1;
    }
    printf("test_cuda_ops: %s; CPU matmul path %s\n", desc, qtts_isa_active()->name);
    bool opened = false;
    for (size_t k = 0; k < QTTS_ARRAY_LEN(k_tests); k++) {
        if (!run[k]) continue;
        if (k_tests[k].model && !opened) {
            TEST_RUN(test_open_model);
            opened = true;
        }
        TEST_RUN_NAMED(k_tests[k].name, k_tests[k].fn);
    }
    if (g_model_ok) model_close(&g_m);
    TEST_END();
}
