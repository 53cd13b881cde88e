/*
 * test_kernels.c - every compiled matmul path this CPU can run against the
 * scalar reference (kernels_ref.c), with the budgets of kernels_impl.h:
 *
 *   F32/BF16  each SIMD path equals, bit for bit, a scalar emulation of
 *             the SIMD order (16 lanes, fmaf, zero padding, fold), and is
 *             within (cols/16 + cols/8 + 8) * 2^-24 * sum|w x| of the
 *             reference (the worst-case rounding of two fp32 sums).
 *   Q8_0/Q4_0 activation quantization and the matmul equal the reference
 *             bit for bit on every path (exact integer partials, one float
 *             order); the reference is within the activation-quantization
 *             bound of the f32 path on the dequantized weights.
 *   all       a row's bits do not depend on n (batched = single-stream),
 *             on the thread count (1, 2, 4) or on the split.
 *
 * The formats: f32 <-> binary16 conversion exhaustively; quantize then
 * dequantize within half a step per element (a whole step where Q4_0
 * clamps its top code); qtts_mat_quantize and qtts_mat_row; the
 * safetensors loader refuses "Q8_0"/"Q4_0" in a file without the
 * quantized-file marker. The relative
 * RMS error of each format on Gaussian weights and of the quantized matmul
 * is printed (docs/QUANT.md quotes it) and bounded loosely.
 *
 * Paths the CPU cannot run (AVX-512 or AVX-VNNI here, say) are reported as
 * skipped, never silently passed.
 */
#include "harness.h"

#include <unistd.h>

#include "base/base.h"
#include "base/thread.h"
#include "kernels/kernels_impl.h"
#include "kernels/quant.h"

#define U 5.9604644775390625e-08   /* 2^-24 */

/* ==== data ================================================================ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float uniform(void) { return (rnd32() >> 8) * (1.0f / 16777216.0f); }   /* [0, 1) */
static float gauss(void) {
    float s = 0;
    for (int i = 0; i < 12; i++) s += uniform();
    return s - 6.0f;
}
/* Gaussian values with a few outliers (like activations), some exact zeros. */
static void fill(float *v, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) {
        float g = gauss() * scale;
        uint32_t k = rnd32() % 64;
        v[i] = k == 0 ? g * 20.0f : k == 1 ? 0.0f : g;
    }
}

/* A plain (unpacked) matrix view of data. */
static qtts_mat mview(const void *data, qtts_dtype dt, int rows, int cols) {
    return (qtts_mat){.data = data, .dtype = dt, .rows = rows, .cols = cols};
}

/* A test matrix: f32 values, the bf16 rounding of them, and views. */
typedef struct {
    int rows, cols;
    float *f;          /* [rows, cols] */
    uint16_t *h;       /* [rows, cols] bf16 */
    float *hf;         /* h as f32 */
} tmat;

static tmat tmat_new(int rows, int cols) {
    tmat m = {rows, cols, qtts_malloc(sizeof(float) * rows * cols),
              qtts_malloc(2 * (size_t)rows * cols), qtts_malloc(sizeof(float) * rows * cols)};
    fill(m.f, (size_t)rows * cols, 0.05f);
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        m.h[i] = qtts_f32_to_bf16(m.f[i]);
        m.hf[i] = qtts_bf16_to_f32(m.h[i]);
    }
    return m;
}
static void tmat_free(tmat *m) {
    qtts_free(m->f);
    qtts_free(m->h);
    qtts_free(m->hf);
}

static const qtts_isa *isas[16];
static int n_isas;

#ifdef QTTS_TEST_ISA_EMU
/* `make check-isa-emu`: the AVX-512 and AVX-VNNI files built on scalar
 * stand-ins for their intrinsics (tests/isa_emu.h); they need AVX2. */
extern const qtts_isa qtts_isa_avx512_emu, qtts_isa_avxvnni_emu;
#endif

static void list_isas(void) {
    const qtts_isa *all[16];
    int n = qtts_isa_compiled(all, 16);
    for (int i = 0; i < n; i++) {
        if (qtts_isa_usable(all[i])) isas[n_isas++] = all[i];
        else printf("  skip %s: this CPU cannot run it\n", all[i]->name);
    }
#ifdef QTTS_TEST_ISA_EMU
    if (qtts_isa_usable(&qtts_isa_avx2)) {
        isas[n_isas++] = &qtts_isa_avx512_emu;
        isas[n_isas++] = &qtts_isa_avxvnni_emu;
        printf("  added avx512 and avx-vnni on emulated intrinsics\n");
    }
#endif
    printf("  paths tested: ");
    for (int i = 0; i < n_isas; i++)
        printf("%s%s%s", i ? ", " : "", isas[i] == qtts_isa_active() ? "*" : "", isas[i]->name);
    printf("  (* = used by qtts_matmul here)\n");
}

static bool bits_equal(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            *at = i;
            return false;
        }
    return true;
}

/* ==== F32 / BF16 ========================================================== */

/* The SIMD order, emulated (kernels_impl.h). */
static float simd_order_dot(const float *w, const float *x, int C) {
    float acc[16] = {0};
    for (int g = 0; g < (C + 15) / 16; g++)
        for (int l = 0; l < 16; l++) {
            int i = 16 * g + l;
            acc[l] = fmaf(i < C ? w[i] : 0.0f, i < C ? x[i] : 0.0f, acc[l]);
        }
    return qtts_fold16(acc);
}

static const int shapes[][2] = {{1, 1},   {3, 5},    {7, 16},   {5, 17},   {13, 31}, {16, 32},
                                {9, 33},  {33, 100}, {4, 255},  {21, 256}, {64, 1024},
                                {6, 3072}, {37, 129}};
static const int ns[] = {1, 2, 3, 4, 5, 7};

static void test_float_paths(void) {
    for (size_t s = 0; s < QTTS_ARRAY_LEN(shapes); s++) {
        const int R = shapes[s][0], C = shapes[s][1], NMAX = 7;
        tmat w = tmat_new(R, C);
        float *x = qtts_malloc(sizeof(float) * NMAX * C), *bias = qtts_malloc(sizeof(float) * R);
        float *y = qtts_malloc(sizeof(float) * NMAX * R), *yr = qtts_malloc(sizeof(float) * NMAX * R);
        fill(x, (size_t)NMAX * C, 1.0f);
        fill(bias, R, 0.1f);
        for (int bf = 0; bf < 2; bf++) {
            const qtts_mat W =
                mview(bf ? (const void *)w.h : w.f, bf ? QTTS_DT_BF16 : QTTS_DT_F32, R, C);
            const float *wf = bf ? w.hf : w.f;
            for (size_t k = 0; k < QTTS_ARRAY_LEN(ns); k++)
                for (int hb = 0; hb < 2; hb++) {
                    const int n = ns[k];
                    const float *b = hb ? bias : NULL;
                    qtts_matmul_isa(&qtts_isa_ref, yr, x, n, &W, b);
                    for (int a = 0; a < n_isas; a++) {
                        if (isas[a] == &qtts_isa_ref) continue;
                        qtts_matmul_isa(isas[a], y, x, n, &W, b);
                        for (int t = 0; t < n; t++)
                            for (int r = 0; r < R; r++) {
                                const float *wr = wf + (size_t)r * C, *xt = x + (size_t)t * C;
                                float o = simd_order_dot(wr, xt, C);
                                if (b) o += b[r];
                                const float got = y[(size_t)t * R + r], ref = yr[(size_t)t * R + r];
                                double mag = 0;
                                for (int i = 0; i < C; i++) mag += fabs((double)wr[i] * xt[i]);
                                const double budget = (C / 16.0 + C / 8.0 + 8) * U * mag +
                                                      2 * U * (fabs(ref) + (b ? fabs(b[r]) : 0));
                                if (memcmp(&got, &o, sizeof o) || !(fabs((double)got - ref) <= budget)) {
                                    CHECK(0, "%s %s [%d,%d] n=%d bias=%d row %d/%d: got %.9g, SIMD order %.9g, "
                                          "ref %.9g (budget %.3g)",
                                          isas[a]->name, bf ? "bf16" : "f32", R, C, n, hb, t, r, got, o, ref,
                                          budget);
                                    goto next_isa;
                                }
                            }
                    next_isa:;
                    }
                }
        }
        tmat_free(&w);
        qtts_free(x);
        qtts_free(bias);
        qtts_free(y);
        qtts_free(yr);
    }
}

/* ==== Q8_0 / Q4_0 ========================================================= */

static void test_quantize_act(void) {
    const int C = 32 * 37;
    float *x = qtts_malloc(sizeof(float) * C);
    int8_t q[32 * 37], q2[32 * 37];
    float d[37], d2[37];
    for (int rep = 0; rep < 20; rep++) {
        fill(x, C, rep < 10 ? 1.0f : 1e-3f);
        for (int i = 0; i < 32; i++) x[5 * 32 + i] = 0.0f;                   /* an all-zero block */
        for (int i = 0; i < 32; i++) x[6 * 32 + i] = (float)(i - 16) * 0.5f; /* exact halves */
        qtts_quantize_act_ref(x, C, q, d);
        for (int b = 0; b < C / 32; b++)
            for (int i = 0; i < 32; i++) {
                double e = fabs((double)x[b * 32 + i] - (double)d[b] * q[b * 32 + i]);
                if (!(e <= d[b] * (0.5 + 1e-5))) {
                    CHECK(0, "reference codes off by %.3g (step %.3g)", e, d[b]);
                    goto done;
                }
            }
        CHECK(d[5] == 0.0f, "zero block scale %g", d[5]);
        for (int a = 0; a < n_isas; a++) {
            memset(q2, 0x55, sizeof q2);
            isas[a]->quantize_act(x, C, q2, d2);
            CHECK(!memcmp(q, q2, sizeof q) && !memcmp(d, d2, sizeof d), "%s: activation codes differ",
                  isas[a]->name);
        }
    }
done:
    qtts_free(x);
}

/* Each path's pack_act against qtts_pack_act, byte for byte, over every
 * byte of the packed row: whole groups, partial last groups (1, 2, 15 and
 * odd numbers of blocks), codes at both ends of the range, and a
 * destination full of stale bytes that must all be overwritten. */
static void test_pack_act(void) {
    static const int cols_list[] = {32, 64, 96, 480, 512, 544, 1024, 1056, 2048, 3072, 32 * 37};
    for (size_t c = 0; c < QTTS_ARRAY_LEN(cols_list); c++) {
        const int C = cols_list[c], nb = C / 32, ng = qtts_packed_groups(C);
        int8_t *q = qtts_malloc((size_t)C);
        float *d = qtts_malloc(sizeof(float) * nb);
        const size_t bytes = qtts_packed_act_bytes(C);
        uint8_t *want = qtts_malloc(bytes), *got = qtts_malloc(bytes);
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < C; i++)
                q[i] = rep == 0 ? (int8_t)(i & 1 ? 127 : -127) : (int8_t)(rnd32() % 255 - 127);
            for (int b = 0; b < nb; b++) d[b] = (float)(rnd32() % 1000) * 1e-3f;
            memset(want, 0xA5, bytes);
            qtts_pack_act(q, d, C, (int8_t *)want, (float *)(want + (size_t)ng * 512),
                          (int32_t *)(want + (size_t)ng * 576));
            for (int a = 0; a < n_isas; a++) {
                memset(got, rep & 1 ? 0x5A : 0xFF, bytes);
                isas[a]->pack_act(q, d, C, (int8_t *)got, (float *)(got + (size_t)ng * 512),
                                  (int32_t *)(got + (size_t)ng * 576));
                CHECK(!memcmp(want, got, bytes), "%s: packed activations differ (cols %d)",
                      isas[a]->name, C);
            }
        }
        qtts_free(q);
        qtts_free(d);
        qtts_free(want);
        qtts_free(got);
    }
}

typedef struct {
    qtts_mat m;        /* owned quantized matrix */
    float *deq;        /* its dequantization [rows, cols] */
} tquant;

static tquant tquant_new(const tmat *w, qtts_dtype dt) {
    tquant q = {{0}, qtts_malloc(sizeof(float) * w->rows * w->cols)};
    const qtts_mat src = mview(w->f, QTTS_DT_F32, w->rows, w->cols);
    qtts_err err = {0};
    QTTS_ASSERT(qtts_mat_quantize(&src, dt, &q.m, &err) == QTTS_OK);
    for (int r = 0; r < w->rows; r++) qtts_mat_row(q.deq + (size_t)r * w->cols, &q.m, r);
    return q;
}
static void tquant_free(tquant *q) {
    qtts_mat_free(&q->m);
    qtts_free(q->deq);
}

/* decode tiles: 8-row blocks up to 2048 columns with 4-row and single-row ends
 * (16, 20, 37 rows), 4-row blocks past it */
static const int qshapes[][2] = {{1, 32},    {3, 64},    {7, 96},   {5, 160},
                                 {16, 256},  {20, 512},  {37, 1024}, {4, 1568},
                                 {12, 2048}, {9, 3072}};

static void test_quant_paths(void) {
    for (size_t s = 0; s < QTTS_ARRAY_LEN(qshapes); s++) {
        const int R = qshapes[s][0], C = qshapes[s][1], NMAX = 7, nb = C / 32;
        tmat w = tmat_new(R, C);
        float *x = qtts_malloc(sizeof(float) * NMAX * C), *bias = qtts_malloc(sizeof(float) * R);
        float *y = qtts_malloc(sizeof(float) * NMAX * R), *yr = qtts_malloc(sizeof(float) * NMAX * R);
        float *yf = qtts_malloc(sizeof(float) * NMAX * R);
        int8_t *xq = qtts_malloc((size_t)NMAX * C);
        float *xd = qtts_malloc(sizeof(float) * NMAX * nb);
        fill(x, (size_t)NMAX * C, 1.0f);
        fill(bias, R, 0.1f);
        for (int t = 0; t < NMAX; t++) qtts_quantize_act_ref(x + (size_t)t * C, C, xq + (size_t)t * C, xd + t * nb);
        for (int f = 0; f < 2; f++) {
            const qtts_dtype dt = f ? QTTS_DT_Q4_0 : QTTS_DT_Q8_0;
            tquant q = tquant_new(&w, dt);
            const qtts_mat Wd = mview(q.deq, QTTS_DT_F32, R, C);
            for (size_t k = 0; k < QTTS_ARRAY_LEN(ns); k++)
                for (int hb = 0; hb < 2; hb++) {
                    const int n = ns[k];
                    const float *b = hb ? bias : NULL;
                    qtts_matmul_isa(&qtts_isa_ref, yr, x, n, &q.m, b);
                    qtts_matmul_isa(&qtts_isa_ref, yf, x, n, &Wd, b);
                    /* the reference against the f32 path on the dequantized weights */
                    for (int t = 0; t < n; t++)
                        for (int r = 0; r < R; r++) {
                            const float *wr = q.deq + (size_t)r * C, *xt = x + (size_t)t * C;
                            double act = 0, mag = 0;
                            for (int i = 0; i < C; i++) {
                                act += fabs(wr[i]) * xd[t * nb + i / 32] * (0.5 + 1e-5);
                                mag += fabs((double)wr[i]) * (fabs(xt[i]) + xd[t * nb + i / 32]);
                            }
                            const double budget = act + (nb + C / 8.0 + 12) * U * mag +
                                                  2 * U * (fabs(yf[(size_t)t * R + r]) + (b ? fabs(b[r]) : 0));
                            const double e = fabs((double)yr[(size_t)t * R + r] - yf[(size_t)t * R + r]);
                            if (!(e <= budget)) {
                                CHECK(0, "%s [%d,%d] n=%d row %d/%d: |q - f32| = %.3g > %.3g",
                                      qtts_dtype_name(dt), R, C, n, t, r, e, budget);
                                goto bitwise;
                            }
                        }
                bitwise:
                    /* the reference table reads the packed layout; the plain-layout
                     * oracle (qtts_dot_q*_ref) must give the same bits */
                    for (int t = 0; t < n; t++)
                        for (int r = 0; r < R; r++) {
                            uint8_t plain[96 * 34];
                            qtts_mat_unpack_row(&q.m, r, plain);
                            float v = (f ? qtts_dot_q4_0_ref : qtts_dot_q8_0_ref)(
                                plain, xq + (size_t)t * C, xd + t * nb, C);
                            if (b) v += b[r];
                            if (memcmp(&v, &yr[(size_t)t * R + r], sizeof v)) {
                                CHECK(0, "%s [%d,%d] n=%d row %d/%d: packed reference %.9g != plain %.9g",
                                      qtts_dtype_name(dt), R, C, n, t, r, yr[(size_t)t * R + r], v);
                                t = n;
                                break;
                            }
                        }
                    for (int a = 0; a < n_isas; a++) {
                        qtts_matmul_isa(isas[a], y, x, n, &q.m, b);
                        size_t at;
                        CHECK(bits_equal(y, yr, (size_t)n * R, &at),
                              "%s %s [%d,%d] n=%d bias=%d: element %zu: %.9g != reference %.9g",
                              isas[a]->name, f ? "q4_0" : "q8_0", R, C, n, hb, at, y[at], yr[at]);
                    }
                }
            tquant_free(&q);
        }
        tmat_free(&w);
        qtts_free(x);
        qtts_free(bias);
        qtts_free(y);
        qtts_free(yr);
        qtts_free(yf);
        qtts_free(xq);
        qtts_free(xd);
    }
}

/* The integer sums at their largest: Q4_0 nibbles all 15 but each block's
 * first (its first weight -8a, the rest +7a; rows of either sign) or all 0
 * (all -8a), Q8_0 codes of 127 and 111 or all 127 in magnitude, against
 * activation codes of +-127. The AVX2 Q4_0 kernel adds a block's byte-pair
 * products in 16 bits (here up to 8 * 2 * 15 * 127 = 30480), so a wrap
 * there would show as a wrong output: every path must give the
 * reference's bits. */
static void test_quant_extremes(void) {
    const int R = 9, C = 1024, ns[] = {1, 3};
    tmat w = tmat_new(R, C);
    float *x = qtts_malloc(sizeof(float) * 3 * C);
    float *y = qtts_malloc(sizeof(float) * 3 * R), *yr = qtts_malloc(sizeof(float) * 3 * R);
    for (int pat = 0; pat < 4; pat++) {
        for (int r = 0; r < R; r++)
            for (int i = 0; i < C; i++) {
                const float a = 0.01f * (float)(r + 1);
                float v = pat & 1 ? -8 * a : (i % 32 == 0 ? -8 * a : 7 * a);
                if (r % 3 == 2) v = -v; /* rows of both signs */
                w.f[(size_t)r * C + i] = v;
            }
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < C; i++) {
                const float s = pat & 2 ? (t == 1 ? 1.0f : -1.0f) : (i & 1 ? -1.0f : 1.0f);
                x[(size_t)t * C + i] = (t == 2 && !(pat & 2)) ? 1.0f : s;
            }
        for (int f = 0; f < 2; f++) {
            const qtts_dtype dt = f ? QTTS_DT_Q4_0 : QTTS_DT_Q8_0;
            tquant q = tquant_new(&w, dt);
            for (size_t k = 0; k < QTTS_ARRAY_LEN(ns); k++) {
                const int n = ns[k];
                qtts_matmul_isa(&qtts_isa_ref, yr, x, n, &q.m, NULL);
                for (int a = 0; a < n_isas; a++) {
                    qtts_matmul_isa(isas[a], y, x, n, &q.m, NULL);
                    size_t at;
                    CHECK(bits_equal(y, yr, (size_t)n * R, &at),
                          "%s %s pattern %d n=%d: element %zu: %.9g != reference %.9g", isas[a]->name,
                          f ? "q4_0" : "q8_0", pat, n, at, y[at], yr[at]);
                }
            }
            tquant_free(&q);
        }
    }
    tmat_free(&w);
    qtts_free(x);
    qtts_free(y);
    qtts_free(yr);
}

/* ==== determinism: n, threads, split ===================================== */

static void test_row_determinism(void) {
    const int R = 301, C = 1024, N = 9;   /* > the parallel threshold, odd row count */
    tmat w = tmat_new(R, C);
    tquant q8 = tquant_new(&w, QTTS_DT_Q8_0), q4 = tquant_new(&w, QTTS_DT_Q4_0);
    const qtts_mat mats[4] = {mview(w.f, QTTS_DT_F32, R, C), mview(w.h, QTTS_DT_BF16, R, C), q8.m,
                              q4.m};
    float *x = qtts_malloc(sizeof(float) * N * C), *bias = qtts_malloc(sizeof(float) * R);
    float *y1 = qtts_malloc(sizeof(float) * N * R), *yb = qtts_malloc(sizeof(float) * N * R);
    fill(x, (size_t)N * C, 1.0f);
    fill(bias, R, 0.1f);
    const int threads[] = {1, 2, 4};
    for (int a = 0; a < n_isas; a++)
        for (int m = 0; m < 4; m++) {
            qtts_threads_init(1);
            for (int t = 0; t < N; t++)
                qtts_matmul_isa(isas[a], y1 + (size_t)t * R, x + (size_t)t * C, 1, &mats[m], bias);
            /* qtts_mat.resident only moves the tiles' prefetches (to L1): the same bits */
            for (int res = 0; res < 2; res++) {
                qtts_mat W = mats[m];
                W.resident = res;
                for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
                    qtts_threads_init(threads[k]);
                    for (int n = 2; n <= N; n += 7 - 2 * (n > 2)) {   /* n = 2, 3, 8, 9 */
                        memset(yb, 0, sizeof(float) * N * R);
                        qtts_matmul_isa(isas[a], yb, x, n, &W, bias);
                        size_t at;
                        CHECK(bits_equal(yb, y1, (size_t)n * R, &at),
                              "%s %s resident=%d: n=%d threads=%d: element %zu differs from the "
                              "n=1 result",
                              isas[a]->name, qtts_dtype_name(W.dtype), res, n, threads[k], at);
                    }
                    memset(yb, 0, sizeof(float) * R);
                    qtts_matmul_isa(isas[a], yb, x, 1, &W, bias);
                    size_t at;
                    CHECK(bits_equal(yb, y1, R, &at),
                          "%s %s resident=%d: n=1 threads=%d: element %zu differs", isas[a]->name,
                          qtts_dtype_name(W.dtype), res, threads[k], at);
                }
            }
        }
    /* the public entry point is the active path */
    qtts_threads_init(2);
    qtts_matmul(yb, x, 3, &mats[1], NULL);
    qtts_matmul_isa(qtts_isa_active(), y1, x, 3, &mats[1], NULL);
    size_t at;
    CHECK(bits_equal(yb, y1, (size_t)3 * R, &at), "qtts_matmul != its active path");
    /* qtts_matmul_multi: the same bits as one qtts_matmul per matrix, for
     * matrices of other row counts (and Q8_0 beside Q4_0), whatever n and
     * the thread count */
    {
        const int R2 = 77, R3 = 16;
        tmat w2 = tmat_new(R2, C), w3 = tmat_new(R3, C);
        tquant q82 = tquant_new(&w2, QTTS_DT_Q8_0), q43 = tquant_new(&w3, QTTS_DT_Q4_0);
        const qtts_mat sets[3][3] = {
            {mview(w.f, QTTS_DT_F32, R, C), mview(w2.f, QTTS_DT_F32, R2, C),
             mview(w3.h, QTTS_DT_BF16, R3, C)},
            {q8.m, q82.m, q43.m},
            {q4.m, q4.m, q82.m},
        };
        float *ys[3], *yr[3];
        for (int m = 0; m < 3; m++) {
            ys[m] = qtts_malloc(sizeof(float) * N * R);
            yr[m] = qtts_malloc(sizeof(float) * N * R);
        }
        for (int set = 0; set < 3; set++)
            for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
                qtts_threads_init(threads[k]);
                for (int count = 1; count <= 3; count++)
                    for (int n = 1; n <= N; n += 4) {   /* n = 1, 5, 9 */
                        const qtts_mat *W[3];
                        for (int m = 0; m < count; m++) {
                            W[m] = &sets[set][m];
                            qtts_matmul(yr[m], x, n, W[m], NULL);
                            memset(ys[m], 0, sizeof(float) * (size_t)n * W[m]->rows);
                        }
                        qtts_matmul_multi(count, ys, x, n, W);
                        for (int m = 0; m < count; m++)
                            CHECK(bits_equal(ys[m], yr[m], (size_t)n * W[m]->rows, &at),
                                  "multi: set %d, %d matrices, n=%d, threads=%d: matrix %d element %zu",
                                  set, count, n, threads[k], m, at);
                    }
            }
        for (int m = 0; m < 3; m++) {
            qtts_free(ys[m]);
            qtts_free(yr[m]);
        }
        tquant_free(&q82);
        tquant_free(&q43);
        tmat_free(&w2);
        tmat_free(&w3);
    }
    /* a matrix with more rows than the split's task table holds at the
     * smallest task size: the plan must widen its tasks, not lose rows */
    {
        const int RL = 20000, CL = 32;
        tmat wl = tmat_new(RL, CL);
        const qtts_mat ml = mview(wl.f, QTTS_DT_F32, RL, CL);
        float *yl1 = qtts_malloc(sizeof(float) * RL), *ylb = qtts_malloc(sizeof(float) * RL);
        qtts_threads_init(1);
        qtts_matmul(yl1, x, 1, &ml, NULL);
        for (size_t k = 1; k < QTTS_ARRAY_LEN(threads); k++) {
            qtts_threads_init(threads[k]);
            memset(ylb, 0, sizeof(float) * RL);
            qtts_matmul(ylb, x, 1, &ml, NULL);
            CHECK(bits_equal(ylb, yl1, RL, &at), "%d rows, threads=%d: element %zu differs", RL,
                  threads[k], at);
        }
        qtts_free(yl1);
        qtts_free(ylb);
        tmat_free(&wl);
    }
    qtts_threads_shutdown();
    tquant_free(&q8);
    tquant_free(&q4);
    tmat_free(&w);
    qtts_free(x);
    qtts_free(bias);
    qtts_free(y1);
    qtts_free(yb);
}

/* qtts_matmul_prefetch_next: a hint never changes a result, whether it
 * names the matrix that comes next, another one, or one freed before the
 * idle threads got to it (prefetches cannot fault; under ASan a plain read
 * of it would be reported). */
static void test_prefetch_hint(void) {
    const int R = 301, C = 1024, N = 3;
    tmat w = tmat_new(R, C), g = tmat_new(R, C);
    tquant q4 = tquant_new(&w, QTTS_DT_Q4_0), gq = tquant_new(&g, QTTS_DT_Q4_0);
    float *x = qtts_malloc(sizeof(float) * N * C);
    float *y1 = qtts_malloc(sizeof(float) * N * R), *yh = qtts_malloc(sizeof(float) * N * R);
    float *up = qtts_malloc(sizeof(float) * N * R);
    fill(x, (size_t)N * C, 1.0f);
    qtts_threads_init(1);
    qtts_matmul(y1, x, N, &q4.m, NULL);
    const int threads[] = {2, 4};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
        qtts_threads_init(threads[k]);
        for (int round = 0; round < 50; round++) {
            /* a matrix that is freed while it is the hint */
            tmat d = tmat_new(R, C);
            tquant dq = tquant_new(&d, QTTS_DT_Q4_0);
            const qtts_mat *const dw[1] = {&dq.m};
            qtts_matmul_prefetch_next(1, dw, false);
            tquant_free(&dq);
            tmat_free(&d);
            memset(yh, 0, sizeof(float) * N * R);
            qtts_matmul(yh, x, N, &q4.m, NULL);
            size_t at;
            CHECK(bits_equal(yh, y1, (size_t)N * R, &at),
                  "threads=%d round %d: a stale hint changed element %zu", threads[k], round, at);
            /* the gate/up form and the plain form of the right matrix */
            const qtts_mat *const gu[2] = {&gq.m, &q4.m};
            qtts_matmul_prefetch_next(2, gu, true);
            qtts_matmul_swiglu(yh, up, x, N, &gq.m, &q4.m);
            const qtts_mat *const one[1] = {&q4.m};
            qtts_matmul_prefetch_next(1, one, false);
            memset(yh, 0, sizeof(float) * N * R);
            qtts_matmul(yh, x, N, &q4.m, NULL);
            CHECK(bits_equal(yh, y1, (size_t)N * R, &at),
                  "threads=%d round %d: a hint changed element %zu", threads[k], round, at);
        }
    }
    qtts_threads_shutdown();
    tquant_free(&q4);
    tquant_free(&gq);
    tmat_free(&w);
    tmat_free(&g);
    qtts_free(x);
    qtts_free(y1);
    qtts_free(yh);
    qtts_free(up);
}

/* qtts_rmsnorm against the same formula with a long double sum (the
 * summation order may move the mean of squares by a few units of 2^-53,
 * so the output may differ from it by a rounding step: 1 float ulp, here
 * 2^-23 relative), in place the same bits as out of place; qtts_rope the
 * bits of its per-element formula. Lengths cover the 8-wide groups and
 * the tails. */
/* qtts_exp: equal to the double-precision exponential rounded to float
 * ((float)exp((double)x), libm's double exp being accurate to an ulp of a
 * double) on every 61st float in [-110, 95] (about 18 million inputs: the
 * subnormal results, the zeros below e^-104 and the infinities above
 * e^88.73 among them), and the special values; lane position and the
 * zero-padded tail do not change a value; softmax and SwiGLU use it. */
/* f against (float)ref((double)x) on every 61st float in [-110, 95], 8
 * at a time: checks (the first few differences named) that none differs
 * and that over 10 million were compared. */
static void sweep_floats(void (*f)(float *, const float *, size_t), double (*ref)(double),
                         const char *name) {
    long n = 0, diff = 0;
    float xs[8], ys[8];
    int nx = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 61) {
        const uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, sizeof x);
        if (!(x > -110.0f && x < 95.0f)) continue;
        xs[nx++] = x;
        if (nx < 8) continue;
        f(ys, xs, 8);
        for (int i = 0; i < 8; i++) {
            const float want = (float)ref((double)xs[i]);
            n++;
            if (memcmp(&ys[i], &want, sizeof want) && diff++ < 5)
                CHECK(0, "%s(%a) = %a, want %a", name, (double)xs[i], (double)ys[i], (double)want);
        }
        nx = 0;
    }
    CHECK(diff == 0 && n > 10000000, "%s: %ld of %ld differ", name, diff, n);
}

/* f(x) bit for bit (float)ref((double)x) on each of the n special values,
 * and NaN for NaN. */
/* The row function vec at every length 1-19 (every lane position and tail)
 * gives each element the bits of the scalar function one. */
static void check_lengths(void (*vec)(float *, const float *, size_t), float (*one)(float),
                          const char *name) {
    float x[19], y[19];
    for (int len = 1; len <= 19; len++) {
        for (int i = 0; i < len; i++) x[i] = (float)(i * 7 % 23) * -0.37f + 3.1f;
        vec(y, x, (size_t)len);
        for (int i = 0; i < len; i++) {
            const float want = one(x[i]);
            CHECK(!memcmp(&y[i], &want, sizeof want), "%s length %d element %d", name, len, i);
        }
    }
}

static float elu_one(float x) { return x > 0.0f ? x : qtts_expm1f(x); }

static void check_values(float (*f)(float), double (*ref)(double), const float *xs, size_t n,
                         const char *name) {
    for (size_t i = 0; i < n; i++) {
        const float got = f(xs[i]), want = (float)ref((double)xs[i]);
        CHECK(!memcmp(&got, &want, sizeof got), "%s(%g) = %a, want %a", name, (double)xs[i],
              (double)got, (double)want);
    }
    CHECK(isnan(f(NAN)), "%s(NaN) = %g", name, (double)f(NAN));
}

static void test_exp(void) {
    sweep_floats(qtts_exp, exp, "exp");
    const float sx[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 88.73f, 89.0f, 1000.0f, -87.33f,
                        -100.0f, -103.9f, -104.0f, -1000.0f, INFINITY, -INFINITY, 1e-30f};
    check_values(qtts_expf, exp, sx, QTTS_ARRAY_LEN(sx), "exp");
    check_lengths(qtts_exp, qtts_expf, "exp");
    /* softmax and SwiGLU are their formulas on qtts_exp */
    float s[37], g[37], up[37], sw[37];
    for (int i = 0; i < 37; i++) {
        s[i] = (float)((i * 13) % 37) * 0.21f - 3.0f;
        g[i] = (float)((i * 5) % 37) * 0.3f - 5.0f;
        up[i] = (float)i * 0.05f - 1.0f;
    }
    /* every length around the 8-lane groups, with the maximum in each
     * position, a -inf, a NaN (skipped by the maximum, NaN everywhere
     * after) and a maximum of +0 or -0 */
    for (int n = 1; n <= 41; n++)
        for (int kind = 0; kind < 5; kind++)
            for (int at = 0; at < n; at += 1 + (kind > 0) * 6) {
                float x[41], want[41];
                for (int i = 0; i < n; i++) x[i] = s[(i * 7 + n) % 37];
                if (kind == 0) x[at] = 9.5f;                      /* the maximum at `at` */
                if (kind == 1) x[at] = -INFINITY;
                if (kind == 2) x[at] = NAN;
                if (kind >= 3)   /* every value negative but a zero at `at` */
                    for (int i = 0; i < n; i++) x[i] = i == at ? (kind == 3 ? 0.0f : -0.0f)
                                                               : -1.0f - fabsf(x[i]);
                float m = -INFINITY;   /* the formula: max, exp, a double sum in order */
                for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
                double sum = 0;
                for (int i = 0; i < n; i++) sum += (want[i] = qtts_expf(x[i] - m));
                for (int i = 0; i < n; i++) want[i] *= (float)(1.0 / sum);
                qtts_softmax(x, n);
                size_t bad;
                CHECK(bits_equal(x, want, (size_t)n, &bad), "softmax n=%d case %d at %d: element %zu",
                      n, kind, at, bad);
            }
    qtts_swiglu(sw, g, up, 37);
    for (int i = 0; i < 37; i++) {
        const float want = g[i] / (1.0f + qtts_expf(-g[i])) * up[i];
        CHECK(!memcmp(&sw[i], &want, sizeof want), "swiglu element %d", i);
    }
    /* SwiGLU (in place too, as the matmul calls it) and SiLU at lengths
     * around the 8-lane groups and the 256-value chunks */
    static const int lens[] = {1, 7, 8, 9, 23, 255, 256, 257, 600};
    for (size_t a = 0; a < QTTS_ARRAY_LEN(lens); a++) {
        const int n = lens[a];
        float *gx = qtts_malloc(sizeof(float) * (size_t)n), *ux = qtts_malloc(sizeof(float) * (size_t)n);
        float *y = qtts_malloc(sizeof(float) * (size_t)n), *want = qtts_malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) {
            gx[i] = (float)((i * 29) % 101) * 0.17f - 8.0f;
            ux[i] = (float)((i * 13) % 31) * 0.1f - 1.5f;
            want[i] = gx[i] / (1.0f + qtts_expf(-gx[i])) * ux[i];
        }
        size_t bad;
        qtts_swiglu(y, gx, ux, (size_t)n);
        CHECK(bits_equal(y, want, (size_t)n, &bad), "swiglu n=%d: element %zu", n, bad);
        qtts_swiglu(gx, gx, ux, (size_t)n);
        CHECK(bits_equal(gx, want, (size_t)n, &bad), "swiglu in place n=%d: element %zu", n, bad);
        for (int i = 0; i < n; i++) {
            gx[i] = (float)((i * 29) % 101) * 0.17f - 8.0f;
            want[i] = gx[i] / (1.0f + qtts_expf(-gx[i]));
        }
        qtts_silu_inplace(gx, (size_t)n);
        CHECK(bits_equal(gx, want, (size_t)n, &bad), "silu n=%d: element %zu", n, bad);
        qtts_free(gx);
        qtts_free(ux);
        qtts_free(y);
        qtts_free(want);
    }
}

/* qtts_expm1: equal to the double-precision e^x - 1 rounded to float
 * ((float)expm1((double)x)) on every 61st float in [-110, 95] and the
 * special values (-0 stays -0, tiny x give x, -inf gives -1); qtts_elu_row
 * is x > 0 ? x : qtts_expm1f(x) at every length and lane position; the
 * exponential shares its code, which test_exp covers. */
static void test_expm1(void) {
    sweep_floats(qtts_expm1, expm1, "expm1");
    const float sx[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, -1e-45f, 0.3f, -0.3f, 0.35f,
                        -0.35f, 1.0f, -1.0f, -17.0f, 88.7f, 89.0f, 1000.0f, -103.9f, -104.0f,
                        -1000.0f, INFINITY, -INFINITY};
    check_values(qtts_expm1f, expm1, sx, QTTS_ARRAY_LEN(sx), "expm1");
    check_lengths(qtts_elu_row, elu_one, "elu");
    float x[19], y[19];
    for (int len = 1; len <= 19; len++) {   /* in place: the same bits */
        for (int i = 0; i < len; i++) x[i] = (float)(i * 7 % 23) * -0.37f + 3.1f;
        qtts_elu_row(y, x, (size_t)len);
        qtts_elu_row(x, x, (size_t)len);
        CHECK(!memcmp(x, y, sizeof(float) * (size_t)len), "elu in place, length %d", len);
    }
    const float z[2] = {-0.0f, NAN};
    float zy[2];
    qtts_elu_row(zy, z, 2);
    CHECK(signbit(zy[0]) && zy[0] == 0.0f && isnan(zy[1]), "elu(-0) = %g, elu(NaN) = %g",
          (double)zy[0], (double)zy[1]);
}

static void test_norm_rope(void) {
    float x[1100], w[1100], out[1100], inpl[1100], cs[600], sn[600], r[1100];
    const int lens[] = {1, 7, 8, 9, 16, 100, 128, 1024, 1031};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(lens); k++) {
        const int n = lens[k];
        fill(x, (size_t)n, 1.0f);
        fill(w, (size_t)n, 1.0f);
        qtts_rmsnorm(out, x, w, n, 1e-6f);
        long double ss = 0;
        for (int i = 0; i < n; i++) ss += (long double)x[i] * x[i];
        const float inv = 1.0f / sqrtf((float)(double)(ss / n) + 1e-6f);
        double worst = 0;
        for (int i = 0; i < n; i++) {
            const float want = (x[i] * inv) * w[i];
            const double e = fabs((double)out[i] - want) / fmax(fabs(want), 1e-30);
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= 0x1p-23, "rmsnorm n=%d: rel error %.3g against a long double sum", n, worst);
        memcpy(inpl, x, sizeof(float) * (size_t)n);
        qtts_rmsnorm(inpl, inpl, w, n, 1e-6f);
        size_t at;
        CHECK(bits_equal(inpl, out, (size_t)n, &at), "rmsnorm n=%d in place: element %zu", n, at);
    }
    const int dims[] = {2, 16, 18, 64, 128, 1030};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(dims); k++) {
        const int d = dims[k], h = d / 2;
        fill(x, (size_t)d, 1.0f);
        fill(cs, (size_t)h, 1.0f);
        fill(sn, (size_t)h, 1.0f);
        for (int i = 0; i < h; i++) {
            r[i] = x[i] * cs[i] - x[i + h] * sn[i];
            r[i + h] = x[i + h] * cs[i] + x[i] * sn[i];
        }
        qtts_rope(x, cs, sn, d);
        size_t at;
        CHECK(bits_equal(x, r, (size_t)d, &at), "rope d=%d: element %zu", d, at);
    }
}

/* A batch large enough that the activation codes go to the heap. */
static void test_large_batch(void) {
    const int R = 40, C = 3072, N = 20;
    tmat w = tmat_new(R, C);
    tquant q = tquant_new(&w, QTTS_DT_Q4_0);
    float *x = qtts_malloc(sizeof(float) * N * C), *y1 = qtts_malloc(sizeof(float) * N * R),
          *yb = qtts_malloc(sizeof(float) * N * R);
    fill(x, (size_t)N * C, 1.0f);
    for (int a = 0; a < n_isas; a++) {
        for (int t = 0; t < N; t++) qtts_matmul_isa(isas[a], y1 + t * R, x + (size_t)t * C, 1, &q.m, NULL);
        qtts_matmul_isa(isas[a], yb, x, N, &q.m, NULL);
        size_t at;
        CHECK(bits_equal(yb, y1, (size_t)N * R, &at), "%s: batch of %d: element %zu", isas[a]->name, N, at);
    }
    tquant_free(&q);
    tmat_free(&w);
    qtts_free(x);
    qtts_free(y1);
    qtts_free(yb);
}

/* ==== formats ============================================================= */

static void test_half_conversion(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = qtts_half_to_f32((qtts_half)h);
        if (f != f) continue;   /* NaN payloads are not preserved */
        if (qtts_f32_to_half(f) != h) bad++;
    }
    CHECK(bad == 0, "%d half values do not round-trip", bad);
    /* ties go to even, overflow goes to infinity, tiny values to subnormals */
    CHECK(qtts_f32_to_half(1.0f + 1.0f / 2048) == 0x3c00, "tie down to even");
    CHECK(qtts_f32_to_half(1.0f + 3.0f / 2048) == 0x3c02, "tie up to even");
    CHECK(qtts_f32_to_half(65504.0f) == 0x7bff && qtts_f32_to_half(65520.0f) == 0x7c00, "overflow");
    CHECK(qtts_f32_to_half(65519.0f) == 0x7bff, "just below overflow");
    CHECK(qtts_f32_to_half(5.9604645e-8f) == 0x0001 && qtts_f32_to_half(2.9802322e-8f) == 0x0000,
          "smallest subnormal, tie to zero");
    CHECK(qtts_f32_to_half(-2.0f) == 0xc000, "sign");
    CHECK(qtts_half_to_f32(qtts_f32_to_half(NAN)) != qtts_half_to_f32(qtts_f32_to_half(NAN)), "NaN");
}

static void test_quantize_roundtrip(void) {
    const int C = 32 * 64;
    float *x = qtts_malloc(sizeof(float) * C), *y = qtts_malloc(sizeof(float) * C);
    uint8_t *buf = qtts_malloc(qtts_mat_row_bytes(QTTS_DT_Q8_0, C));
    for (int rep = 0; rep < 30; rep++) {
        const float scale = rep < 10 ? 0.05f : rep < 20 ? 3.0f : 1e-4f;   /* the last: subnormal scales */
        fill(x, C, scale);
        for (int i = 0; i < 32; i++) x[i] = 0.0f;
        for (int f = 0; f < 2; f++) {
            const bool q4 = f;
            const size_t bb = q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
            if (q4) {
                qtts_quantize_row_q4_0(x, buf, C);
                qtts_dequantize_row_q4_0(buf, y, C);
            } else {
                qtts_quantize_row_q8_0(x, buf, C);
                qtts_dequantize_row_q8_0(buf, y, C);
            }
            for (int b = 0; b < C / 32; b++) {
                qtts_half h;
                memcpy(&h, buf + b * bb, sizeof h);
                const double d = fabs(qtts_half_to_f32(h));
                for (int i = b * 32; i < b * 32 + 32; i++) {
                    const double e = fabs((double)x[i] - y[i]);
                    /* half a step where the code was rounded; Q8_0 can clamp
                     * at 127 when the scale rounded down, Q4_0 clamps its
                     * top code 8 -> 7: a whole step, or |x| - 7d when the
                     * binary16 scale also rounded down (up to 8 * 2^-11 of
                     * a step more; seen at 1.0042 steps) */
                    const double lim = q4 ? fmax(d * (1 + 1e-6), fabs(x[i]) - 7 * d) + 1e-30
                                          : fmax(0.5 * d * (1 + 1e-6), fabs(x[i]) - 127 * d) + 1e-30;
                    if (!(e <= lim)) {
                        CHECK(0, "%s block %d elem %d: |%g - %g| > %g (scale %g)", q4 ? "q4_0" : "q8_0", b,
                              i, x[i], y[i], lim, d);
                        goto next;
                    }
                }
            }
            const int8_t *qs8 = (const int8_t *)(buf + 2);
            if (!q4) CHECK(qs8[0] == 0 && buf[0] == 0 && buf[1] == 0, "zero block");
        next:;
        }
    }
    /* -128 never appears in Q8_0 codes */
    for (int i = 0; i < C; i++) x[i] = i % 32 == 0 ? -1.0f : 0.5f;
    qtts_quantize_row_q8_0(x, buf, C);
    bool no128 = true;
    for (int b = 0; b < C / 32; b++)
        for (int i = 0; i < 32; i++) no128 &= (int8_t)buf[b * 34 + 2 + i] != -128;
    CHECK(no128, "q8_0 code -128");
    qtts_free(x);
    qtts_free(y);
    qtts_free(buf);
}

static void test_mat_quantize(void) {
    tmat w = tmat_new(70, 96);
    qtts_err err = {0};
    qtts_mat q = {0};
    const qtts_mat src_bf = mview(w.h, QTTS_DT_BF16, 70, 96), bad = mview(w.f, QTTS_DT_F32, 70, 95);
    CHECK(qtts_mat_quantize(&src_bf, QTTS_DT_Q8_0, &q, &err) == QTTS_OK, "bf16 source: %s", err.msg);
    CHECK(q.rows == 70 && q.cols == 96 && q.dtype == QTTS_DT_Q8_0 && q.data, "result");
    float row[96], ref[96];
    uint8_t blocks[3 * 34];
    qtts_quantize_row_q8_0(w.hf + 69 * 96, blocks, 96);
    qtts_dequantize_row_q8_0(blocks, ref, 96);
    qtts_mat_row(row, &q, 69);
    CHECK(!memcmp(row, ref, sizeof row), "row 69 = dequantize(quantize(bf16 row))");
    qtts_mat_free(&q);
    CHECK(q.data == NULL, "freed");
    qtts_mat_free(&q);
    CHECK(qtts_mat_quantize(&bad, QTTS_DT_Q4_0, &q, &err) == QTTS_ERR_INVALID && q.data == NULL, "cols 95");
    CHECK(strstr(err.msg, "multiple of 32") != NULL, "message: %s", err.msg);
    CHECK(qtts_mat_quantize(&src_bf, QTTS_DT_BF16, &q, &err) == QTTS_ERR_INVALID, "target bf16");
    CHECK(qtts_mat_row_bytes(QTTS_DT_Q8_0, 1024) == 32 * 34 && qtts_mat_row_bytes(QTTS_DT_Q4_0, 1024) == 32 * 18,
          "row bytes");
    tmat_free(&w);
}

/* The packed layout of quant.h: byte positions, padding, round trips, and
 * qtts_mat_pack of a plain matrix equal to qtts_mat_quantize. */
static void test_packed_layout(void) {
    static const int cols_list[] = {32, 96, 160, 512, 544, 1024, 1568};
    for (size_t c = 0; c < QTTS_ARRAY_LEN(cols_list); c++)
        for (int q4 = 0; q4 < 2; q4++) {
            const int C = cols_list[c], nb = C / 32, ng = qtts_packed_groups(C), K = q4 ? 4 : 8;
            const size_t bb = q4 ? 18 : 34, prb = qtts_packed_row_bytes(q4, C);
            CHECK(prb == (size_t)ng * (64 * K + 32), "packed row bytes");
            uint8_t *plain = qtts_malloc((size_t)nb * bb), *back = qtts_malloc((size_t)nb * bb);
            uint8_t *packed = qtts_malloc(prb);
            for (int i = 0; i < nb * (int)bb; i++) plain[i] = (uint8_t)rnd32();
            if (!q4)   /* -128 is not a Q8_0 code */
                for (int b = 0; b < nb; b++)
                    for (int i = 2; i < 34; i++)
                        if (plain[b * 34 + i] == 0x80) plain[b * 34 + i] = 0x7f;
            qtts_pack_row(plain, packed, C, q4);
            bool pos = true, pad = true;
            for (int b = 0; b < ng * 16; b++) {
                const int g = b / 16, i = b % 16;
                uint16_t h;
                memcpy(&h, packed + (size_t)ng * K * 64 + 2 * b, 2);
                if (b < nb) pos &= !memcmp(&h, plain + b * bb, 2);
                else pad &= h == 0;
                for (int k = 0; k < K; k++)
                    for (int j = 0; j < 4; j++) {
                        const uint8_t got = packed[64 * (K * g + k) + 4 * i + j];
                        if (b < nb) {
                            const uint8_t c0 = plain[b * bb + 2 + 4 * k + j];
                            pos &= got == (q4 ? c0 : (uint8_t)(c0 ^ 0x80));
                        } else {
                            pad &= got == (q4 ? 0x88 : 0x80);   /* code 0 */
                        }
                    }
            }
            CHECK(pos, "cols %d %s: packed byte positions", C, q4 ? "q4_0" : "q8_0");
            CHECK(pad, "cols %d %s: padding blocks are code 0, scale 0", C, q4 ? "q4_0" : "q8_0");
            qtts_unpack_row(packed, back, C, q4);
            CHECK(!memcmp(back, plain, (size_t)nb * bb), "cols %d: unpack(pack(row)) == row", C);
            qtts_free(plain);
            qtts_free(back);
            qtts_free(packed);
        }
    /* a plain file tensor, packed, is what quantizing at load gives */
    tmat w = tmat_new(37, 160);
    for (int q4 = 0; q4 < 2; q4++) {
        const qtts_dtype dt = q4 ? QTTS_DT_Q4_0 : QTTS_DT_Q8_0;
        const qtts_mat src = mview(w.f, QTTS_DT_F32, 37, 160);
        qtts_mat q = {0}, p = {0};
        qtts_err err = {0};
        QTTS_ASSERT(qtts_mat_quantize(&src, dt, &q, &err) == QTTS_OK);
        CHECK(q.packed && qtts_mat_stride(&q) == qtts_packed_row_bytes(q4, 160), "quantized matrix is packed");
        const size_t rb = qtts_mat_row_bytes(dt, 160);
        uint8_t *plain = qtts_malloc(rb * 37);
        for (int r = 0; r < 37; r++) qtts_mat_unpack_row(&q, r, plain + r * rb);
        const qtts_mat view = mview(plain, dt, 37, 160);
        CHECK(qtts_mat_pack(&view, &p, &err) == QTTS_OK && p.packed, "pack: %s", err.msg);
        CHECK(!memcmp(p.data, q.data, qtts_mat_stride(&q) * 37), "%s: pack(plain) == quantize", qtts_dtype_name(dt));
        float a[160], e[160];
        qtts_mat_row(a, &q, 36);
        if (q4) qtts_dequantize_row_q4_0(plain + 36 * rb, e, 160);
        else qtts_dequantize_row_q8_0(plain + 36 * rb, e, 160);
        CHECK(!memcmp(a, e, sizeof a), "%s: qtts_mat_row of a packed matrix", qtts_dtype_name(dt));
        qtts_mat_free(&p);
        CHECK(qtts_mat_pack(&q, &p, &err) == QTTS_ERR_INVALID && p.data == NULL, "packing a packed matrix");
        CHECK(qtts_mat_pack(&src, &p, &err) == QTTS_ERR_INVALID, "packing f32");
        qtts_mat_free(&q);
        qtts_free(plain);
    }
    tmat_free(&w);
}

/* qtts_matmul_swiglu: the bits of qtts_matmul_multi + qtts_swiglu for
 * every format, any n and thread count. */
static void test_matmul_swiglu(void) {
    const int R = 301, C = 1024;
    tmat g = tmat_new(R, C), u = tmat_new(R, C);
    tquant g8 = tquant_new(&g, QTTS_DT_Q8_0), u8 = tquant_new(&u, QTTS_DT_Q8_0);
    tquant g4 = tquant_new(&g, QTTS_DT_Q4_0), u4 = tquant_new(&u, QTTS_DT_Q4_0);
    const qtts_mat pairs[4][2] = {{mview(g.f, QTTS_DT_F32, R, C), mview(u.f, QTTS_DT_F32, R, C)},
                                  {mview(g.h, QTTS_DT_BF16, R, C), mview(u.h, QTTS_DT_BF16, R, C)},
                                  {g8.m, u8.m},
                                  {g4.m, u4.m}};
    const int N = 9;
    float *x = qtts_malloc(sizeof(float) * N * C), *ya = qtts_malloc(sizeof(float) * N * R);
    float *ua = qtts_malloc(sizeof(float) * N * R), *yb = qtts_malloc(sizeof(float) * N * R);
    float *ub = qtts_malloc(sizeof(float) * N * R);
    fill(x, (size_t)N * C, 1.0f);
    const int threads[] = {1, 2};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
        qtts_threads_init(threads[k]);
        for (int m = 0; m < 4; m++)
            for (int n = 1; n <= N; n += 4) {
                float *const y2[2] = {ya, ua};
                const qtts_mat *const W[2] = {&pairs[m][0], &pairs[m][1]};
                qtts_matmul_multi(2, y2, x, n, W);
                qtts_swiglu(ya, ya, ua, (size_t)n * R);
                qtts_matmul_swiglu(yb, ub, x, n, &pairs[m][0], &pairs[m][1]);
                size_t at;
                CHECK(bits_equal(yb, ya, (size_t)n * R, &at), "%s n=%d threads=%d: element %zu",
                      qtts_dtype_name(pairs[m][0].dtype), n, threads[k], at);
            }
    }
    qtts_threads_init(1);
    tmat_free(&g);
    tmat_free(&u);
    tquant_free(&g8);
    tquant_free(&u8);
    tquant_free(&g4);
    tquant_free(&u4);
    qtts_free(x);
    qtts_free(ya);
    qtts_free(ua);
    qtts_free(yb);
    qtts_free(ub);
}

/* Attention's two loops: every path bit for bit equal to the plain loops
 * of the reference table, for head sizes with and without a partial
 * 8-group, row strides wider than a head, position counts around the
 * 4-position blocks and past the prefetch distance, and 1-3 query heads
 * sharing the K/V head (the two-head blocks and an odd one left), with
 * score rows wider than ctx. The output over a context cut in two pieces,
 * the second call continuing the first's sums (acc), has the bits of one
 * call over the whole (the talker's chunked cache relies on it). Calls
 * that name the rows read next (the second piece, or V after K) give the
 * same bits as calls that name none. */
static void test_attention(void) {
    static const int dims[] = {8, 12, 16, 64, 72, 128};
    static const int ctxs[] = {1, 3, 4, 7, 21, 64, 301};
    for (size_t a = 0; a < QTTS_ARRAY_LEN(dims); a++)
        for (size_t c = 0; c < QTTS_ARRAY_LEN(ctxs); c++)
            for (int nh = 1; nh <= 3; nh++) {
                const int d = dims[a], ctx = ctxs[c];
                const size_t ld = (size_t)d + 8 * (a % 2);   /* a strided cache for some */
                const size_t lds = (size_t)ctx + (size_t)(nh - 1) * 5;
                const size_t nsc = lds * nh, no = (size_t)d * nh;
                float *q = qtts_malloc(sizeof(float) * no);
                float *kv = qtts_malloc(sizeof(float) * ld * ctx);
                float *s0 = qtts_calloc(nsc, sizeof(float)), *s1 = qtts_calloc(nsc, sizeof(float));
                float *o0 = qtts_malloc(sizeof(float) * no), *o1 = qtts_malloc(sizeof(float) * no);
                fill(q, no, 1.0f);
                fill(kv, ld * ctx, 1.0f);
                qtts_isa_ref.attn_scores(s0, lds, q, nh, kv, ld, ctx, d, 0.125f, NULL, 0);
                for (int h = 0; h < nh; h++) qtts_softmax(s0 + h * lds, ctx);
                qtts_isa_ref.attn_out(o0, s0, lds, nh, kv, ld, ctx, d, false, NULL, 0);
                const int cut = ctx / 3 + (ctx > 1);   /* pieces [0, cut) and [cut, ctx) */
                for (int i = -1; i < n_isas; i++) {
                    const qtts_isa *isa = i < 0 ? &qtts_isa_ref : isas[i];
                    size_t at;
                    isa->attn_out(o1, s0, lds, nh, kv, ld, cut, d, false, kv + (size_t)cut * ld,
                                  ctx - cut);
                    isa->attn_out(o1, s0 + cut, lds, nh, kv + (size_t)cut * ld, ld, ctx - cut, d,
                                  true, NULL, 0);
                    CHECK(bits_equal(o1, o0, no, &at),
                          "%s: output in two pieces (cut %d) d=%d ctx=%d heads %d: element %zu",
                          isa->name, cut, d, ctx, nh, at);
                }
                for (int i = 0; i < n_isas; i++) {
                    size_t at;
                    isas[i]->attn_scores(s1, lds, q, nh, kv, ld, ctx, d, 0.125f, kv, ctx);
                    for (int h = 0; h < nh; h++) qtts_softmax(s1 + h * lds, ctx);
                    CHECK(bits_equal(s1, s0, nsc, &at),
                          "%s: scores d=%d ctx=%d heads %d: element %zu", isas[i]->name, d, ctx,
                          nh, at);
                    isas[i]->attn_out(o1, s0, lds, nh, kv, ld, ctx, d, false, NULL, 0);
                    CHECK(bits_equal(o1, o0, no, &at),
                          "%s: output d=%d ctx=%d heads %d: element %zu", isas[i]->name, d, ctx,
                          nh, at);
                }
                /* one head at a time gives the same bits as the group */
                for (int h = 0; h < nh; h++) {
                    size_t at;
                    qtts_isa_ref.attn_scores(s1, 0, q + (size_t)h * d, 1, kv, ld, ctx, d, 0.125f,
                                             NULL, 0);
                    qtts_softmax(s1, ctx);
                    CHECK(bits_equal(s1, s0 + h * lds, (size_t)ctx, &at),
                          "one head alone: scores d=%d ctx=%d head %d: element %zu", d, ctx, h, at);
                }
                /* a bf16 cache: every path, the reference's too, gives the fp32
                 * call's bits on the cache rounded to bf16 and widened */
                uint16_t *kv16 = qtts_malloc(sizeof(uint16_t) * ld * ctx);
                float *kvw = qtts_malloc(sizeof(float) * ld * ctx);
                qtts_f32_to_bf16_row(kv16, kv, ld * ctx);
                for (size_t e = 0; e < ld * ctx; e++) kvw[e] = qtts_bf16_to_f32(kv16[e]);
                qtts_isa_ref.attn_scores(s0, lds, q, nh, kvw, ld, ctx, d, 0.125f, NULL, 0);
                for (int h = 0; h < nh; h++) qtts_softmax(s0 + h * lds, ctx);
                qtts_isa_ref.attn_out(o0, s0, lds, nh, kvw, ld, ctx, d, false, NULL, 0);
                for (int i = -1; i < n_isas; i++) {
                    const qtts_isa *isa = i < 0 ? &qtts_isa_ref : isas[i];
                    size_t at;
                    isa->attn_scores_bf16(s1, lds, q, nh, kv16, ld, ctx, d, 0.125f, kv16, ctx);
                    for (int h = 0; h < nh; h++) qtts_softmax(s1 + h * lds, ctx);
                    CHECK(bits_equal(s1, s0, nsc, &at),
                          "%s: bf16 scores d=%d ctx=%d heads %d: element %zu", isa->name, d, ctx,
                          nh, at);
                    isa->attn_out_bf16(o1, s0, lds, nh, kv16, ld, ctx, d, false, NULL, 0);
                    CHECK(bits_equal(o1, o0, no, &at),
                          "%s: bf16 output d=%d ctx=%d heads %d: element %zu", isa->name, d, ctx,
                          nh, at);
                    isa->attn_out_bf16(o1, s0, lds, nh, kv16, ld, cut, d, false,
                                       kv16 + (size_t)cut * ld, ctx - cut);
                    isa->attn_out_bf16(o1, s0 + cut, lds, nh, kv16 + (size_t)cut * ld, ld,
                                       ctx - cut, d, true, NULL, 0);
                    CHECK(bits_equal(o1, o0, no, &at),
                          "%s: bf16 output in two pieces (cut %d) d=%d ctx=%d heads %d: "
                          "element %zu",
                          isa->name, cut, d, ctx, nh, at);
                }
                qtts_free(kv16);
                qtts_free(kvw);
                qtts_free(q);
                qtts_free(kv);
                qtts_free(s0);
                qtts_free(s1);
                qtts_free(o0);
                qtts_free(o1);
            }
}

/* A file without the quantized-file marker (docs/QUANT.md) cannot carry
 * the block dtypes: the loader refuses them as it refuses any unknown
 * dtype. */
static void test_loader_rejects_quant_dtypes(void) {
    const char *names[2] = {QTTS_Q8_0_NAME, QTTS_Q4_0_NAME};
    for (int i = 0; i < 2; i++) {
        char hdr[128], path[64];
        int n = snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"%s\",\"shape\":[1,32],\"data_offsets\":[0,34]}}",
                         names[i]);
        snprintf(path, sizeof path, "/tmp/qtts_test_kernels_%d.safetensors", (int)getpid());
        FILE *f = fopen(path, "wb");
        REQUIRE(f != NULL, "%s", path);
        const uint64_t len = (uint64_t)n;
        uint8_t data[34] = {0};
        fwrite(&len, 8, 1, f);
        fwrite(hdr, 1, (size_t)n, f);
        fwrite(data, 1, sizeof data, f);
        fclose(f);
        qtts_st_file *st = NULL;
        qtts_err err = {0};
        CHECK(qtts_st_open(path, &st, &err) == QTTS_ERR_FORMAT && strstr(err.msg, "unsupported dtype"),
              "%s accepted: %s", names[i], err.msg);
        qtts_st_close(st);
        remove(path);
    }
}

/* Relative RMS error of each format on Gaussian weights, and of the
 * quantized matvec against the exact f32 one, for Gaussian activations
 * without and with outliers (1 in 64 values 20x larger) (docs/QUANT.md). */
static void test_error_report(void) {
    const int R = 256, C = 1024;
    tmat w = tmat_new(R, C);
    for (size_t i = 0; i < (size_t)R * C; i++) w.f[i] = gauss() * 0.02f;
    float *x = qtts_malloc(sizeof(float) * C), *yf = qtts_malloc(sizeof(float) * R),
          *yq = qtts_malloc(sizeof(float) * R);
    const qtts_mat Wf = mview(w.f, QTTS_DT_F32, R, C);
    for (int f = 0; f < 2; f++) {
        tquant q = tquant_new(&w, f ? QTTS_DT_Q4_0 : QTTS_DT_Q8_0);
        double ew = 0, sw = 0;
        for (size_t i = 0; i < (size_t)R * C; i++) {
            ew += ((double)q.deq[i] - w.f[i]) * ((double)q.deq[i] - w.f[i]);
            sw += (double)w.f[i] * w.f[i];
        }
        printf("  %s: weights rel. RMS error %.4f; matvec rel. RMS error, int8 / f32 activations:",
               f ? "q4_0" : "q8_0", sqrt(ew / sw));
        for (int outliers = 0; outliers < 2; outliers++) {
            if (outliers) fill(x, C, 1.0f);
            else
                for (int i = 0; i < C; i++) x[i] = gauss();
            qtts_matmul_isa(&qtts_isa_ref, yf, x, 1, &Wf, NULL);
            /* the quantized matvec, and f32 activations on the dequantized
             * weights (which leaves only the weights' error) */
            const qtts_mat Wd = mview(q.deq, QTTS_DT_F32, R, C);
            double ey = 0, ed = 0, sy = 0;
            qtts_matmul_isa(&qtts_isa_ref, yq, x, 1, &Wd, NULL);
            for (int r = 0; r < R; r++) ed += ((double)yq[r] - yf[r]) * ((double)yq[r] - yf[r]);
            qtts_matmul_isa(&qtts_isa_ref, yq, x, 1, &q.m, NULL);
            for (int r = 0; r < R; r++) {
                ey += ((double)yq[r] - yf[r]) * ((double)yq[r] - yf[r]);
                sy += (double)yf[r] * yf[r];
            }
            const double ry = sqrt(ey / sy);
            printf(" %s %.4f / %.4f", outliers ? "outliers" : "gaussian", ry, sqrt(ed / sy));
            CHECK(ry < (f ? 0.12 : 0.015), "error above the documented range");
        }
        printf("\n");
        CHECK(sqrt(ew / sw) < (f ? 0.10 : 0.006), "weights error above the documented range");
        tquant_free(&q);
    }
    double ew = 0, sw = 0;
    for (size_t i = 0; i < (size_t)R * C; i++) {
        double v = qtts_bf16_to_f32(qtts_f32_to_bf16(w.f[i]));
        ew += (v - w.f[i]) * (v - w.f[i]);
        sw += (double)w.f[i] * w.f[i];
    }
    printf("  bf16: weights rel. RMS error %.4f\n", sqrt(ew / sw));
    tmat_free(&w);
    qtts_free(x);
    qtts_free(yf);
    qtts_free(yq);
}

/* qtts_stream_read is the benchmarks' bandwidth probe: a probe that
 * skipped bytes would report a bandwidth the kernels could never reach.
 * Changing any one byte (block body, block edge, tail) must change the
 * checksum, for lengths around its 2 KB blocks, and it must not depend on
 * anything but the bytes (the same value twice). */
static void test_stream_read(void) {
    const size_t lens[] = {0, 1, 63, 2047, 2048, 2049, 6144 + 17};
    unsigned char *buf = malloc(8192);
    CHECK(buf != NULL, "out of memory");
    if (!buf) return;
    for (size_t i = 0; i < 8192; i++) buf[i] = (unsigned char)(i * 131 + 7);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const size_t n = lens[li];
        const uint64_t base = qtts_stream_read(buf, n);
        CHECK(base == qtts_stream_read(buf, n), "n=%zu: two reads differ", n);
        for (size_t pos = 0; pos < n; pos += (pos < 80 || n - pos < 80) ? 1 : 61) {
            buf[pos] ^= 0x10;
            const uint64_t v = qtts_stream_read(buf, n);
            buf[pos] ^= 0x10;
            CHECK(v != base, "n=%zu: byte %zu does not reach the checksum", n, pos);
        }
    }
    free(buf);
}

/* Lines [*next, ...) of `ahead` that prefetcher f walks over `steps` steps,
 * in order from *next (false if not), recorded through the struct's own
 * pointer step by step; *next moves past them. */
static bool walk_prefetcher(qtts_prefetcher f, size_t steps, const char *ahead, size_t *next) {
    bool in_order = f.p == ahead + 64 * *next;
    for (size_t k = 0; k < steps; k++) {
        const char *before = f.p;
        qtts_prefetch_step(&f);
        in_order &= before == ahead + 64 * *next;
        *next += (size_t)(f.p - before) / 64;
    }
    return in_order && f.p == f.end;
}

/* Which code-predictor sizes get L1 prefetches (qtts_mat_resident_fits):
 * a third of the last-level cache, capped at QTTS_RESIDENT_MAX_BYTES. */
static void test_resident_rule(void) {
    const uint64_t MB = 1ull << 20;
    const struct { uint64_t bytes, llc; bool fits; } cs[] = {
        {45 * MB, 260 * MB, true},    /* 0.6B int4 on the 260 MB L3: gained 6-7% */
        {45 * MB, 480 * MB, true},
        {80 * MB, 260 * MB, false},   /* over the cap */
        {150 * MB, 480 * MB, false},  /* a third of 480 MB, but lost 30% */
        {64 * MB, 192 * MB, true},    /* both bounds, inclusive */
        {64 * MB + 1, 480 * MB, false},
        {11 * MB, 32 * MB, false},    /* over a third of a desktop L3 */
        {10 * MB, 32 * MB, true},
        {1, 0, false},                /* size unknown */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        CHECK(qtts_mat_resident_fits_llc(cs[i].bytes, cs[i].llc) == cs[i].fits,
              "case %zu: %llu bytes, %llu-byte cache", i, (unsigned long long)cs[i].bytes,
              (unsigned long long)cs[i].llc);
    CHECK(qtts_mat_resident_fits(1 * MB) == qtts_mat_resident_fits_llc(1 * MB, qtts_llc_bytes()),
          "qtts_mat_resident_fits uses this machine's cache size");
}

/* The x86 tiles' weight prefetch (qtts_prefetch_begin/tile/step): the
 * tiles of a block, each over its `steps` calls, must together reach every
 * line of the block ahead, once and in order, starting at least
 * QTTS_PREFETCH_AHEAD (to L1: QTTS_PREFETCH_AHEAD_L1) bytes ahead at a
 * block boundary; a prefetcher that
 * stopped short or overlapped would leave lines to demand misses or fetch
 * them twice, with the same results and a silent loss of speed. */
static void test_prefetcher(void) {
    const size_t sizes[] = {64, 100, 1088, 2304, 4352, 8192, 16384, 20000};
    const size_t steps[] = {1, 2, 7, 16, 64, 1000};
    const unsigned parts[] = {1, 2, 3, 23, 92, 400};
    char *block = malloc(65536); /* holds every block ahead and its span */
    CHECK(block != NULL, "out of memory");
    if (!block) return;
    for (int l1 = 0; l1 < 2; l1++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (size_t ki = 0; ki < sizeof steps / sizeof steps[0]; ki++)
                for (size_t pi = 0; pi < sizeof parts / sizeof parts[0]; pi++) {
                    const size_t bytes = sizes[si], n = steps[ki], lines = (bytes + 63) / 64;
                    const size_t want = l1 ? QTTS_PREFETCH_AHEAD_L1 : QTTS_PREFETCH_AHEAD;
                    const unsigned of = parts[pi];
                    const qtts_prefetcher all = qtts_prefetch_begin(block, bytes, n, 0, of, of, l1);
                    const size_t dist = (size_t)(all.p - block);
                    CHECK(all.l1 == l1 && dist % bytes == 0 && dist >= want && dist - bytes < want,
                          "bytes=%zu l1=%d: starts %zu bytes ahead", bytes, l1, dist);
                    /* the second (L1) prefetch of a line trails it to NEAR bytes ahead */
                    CHECK(all.back == dist - QTTS_PREFETCH_NEAR,
                          "bytes=%zu l1=%d: L1 prefetch %zu bytes behind", bytes, l1, all.back);
                    /* the shares 0..of-1, one after the other, walk every line
                     * of the block ahead once, in order, each within its steps */
                    size_t next = 0;
                    bool in_order = true;
                    for (unsigned from = 0; from < of; from++)
                        in_order &= walk_prefetcher(
                            qtts_prefetch_begin(block, bytes, n, from, 1, of, l1), n, all.p, &next);
                    CHECK(in_order && next == lines,
                          "bytes=%zu steps=%zu parts=%u l1=%d: %zu of %zu lines, in order %d", bytes,
                          n, of, l1, next, lines, (int)in_order);
                }
    /* qtts_prefetch_tile's shares follow the tiles' walk (x rows outer, W rows
     * inner) in each x86 kernel's walk of a block of NB W rows: strips of SX x
     * rows, each strip's W rows in tiles of SW then one by one; the x rows past
     * the last strip one at a time, against the whole block if it is full, else
     * row by row. */
    const struct { int NB, SX, SW; } walks[] = {
        {4, 4, 4}, /* AVX-512 quantized */
        {8, 4, 4}, /* AVX-512 float */
        {4, 2, 2}, /* AVX2 / AVX-VNNI quantized */
        {4, 3, 2}, /* AVX2 float */
    };
    for (size_t wi = 0; wi < sizeof walks / sizeof walks[0]; wi++)
        for (int nr = 1; nr <= walks[wi].NB; nr++)
            for (int nx = 1; nx <= 33; nx++) {
                const int NB = walks[wi].NB, SX = walks[wi].SX, SW = walks[wi].SW;
                unsigned done = 0;
                bool contiguous = true;
                for (int t = 0; t < nx;) {
                    const int RX = nx - t >= SX ? SX : 1;
                    for (int r = 0; r < nr;) {
                        const int RW = RX == SX ? (nr - r >= SW ? SW : 1) : (nr == NB ? NB : 1);
                        const qtts_prefetcher f =
                            qtts_prefetch_tile(block, 1088, 16, 0, nr, nx, r, t, RW, RX, false);
                        const qtts_prefetcher g =
                            qtts_prefetch_begin(block, (size_t)nr * 1088, 16, done,
                                                (unsigned)(RW * RX), (unsigned)(nr * nx), false);
                        contiguous &= f.p == g.p && f.end == g.end;
                        done += (unsigned)(RW * RX);
                        r += RW;
                    }
                    t += RX;
                }
                CHECK(contiguous && done == (unsigned)(nr * nx),
                      "walk %zu nr=%d n=%d: tile shares not contiguous", wi, nr, nx);
            }
    free(block);
}

int main(void) {
    list_isas();
    TEST_RUN(test_float_paths);
    TEST_RUN(test_quantize_act);
    TEST_RUN(test_pack_act);
    TEST_RUN(test_packed_layout);
    TEST_RUN(test_attention);
    TEST_RUN(test_norm_rope);
    TEST_RUN(test_exp);
    TEST_RUN(test_expm1);
    TEST_RUN(test_matmul_swiglu);
    TEST_RUN(test_quant_paths);
    TEST_RUN(test_quant_extremes);
    TEST_RUN(test_row_determinism);
    TEST_RUN(test_prefetch_hint);
    TEST_RUN(test_large_batch);
    TEST_RUN(test_half_conversion);
    TEST_RUN(test_quantize_roundtrip);
    TEST_RUN(test_mat_quantize);
    TEST_RUN(test_loader_rejects_quant_dtypes);
    TEST_RUN(test_error_report);
    TEST_RUN(test_stream_read);
    TEST_RUN(test_prefetcher);
    TEST_RUN(test_resident_rule);
    TEST_END();
}
