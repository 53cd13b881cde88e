/*
 * test_cuda_layout.c - the CUDA backend's layouts and accumulation orders
 * (src/backend/cuda/layout.h) checked on the CPU, no GPU needed.
 *
 * Each check runs, in plain C, the arithmetic one device thread (or group
 * of threads) performs, in the kernel's order, on data laid out with the
 * same layout.h helpers the upload uses, and compares it bit for bit with
 * the CPU kernel the device replaces:
 *   matmul F32/BF16 - a row permuted as uploaded, 16 lane chains of fmaf
 *                     over it, the shuffle fold: the SIMD order of
 *                     kernels_impl.h (compared when this CPU has a SIMD path)
 *   matmul Q8_0/Q4_0 - the thread-per-(block mod 16) walk over the split
 *                     codes/scales of the plain blocks (read back from the
 *                     packed qtts_mat_quantize result): the reference and
 *                     the active CPU path, and qtts_dot_q*_ref
 *   conv            - weights unpacked to [K][cout], one fmaf chain per output
 *                     over kk, zeros before column 0: qtts_conv1d_run
 *   attention dot   - 8 lane chains and the 4/1/2 shuffle combination:
 *                     qtts_dot_f32
 *   top-p           - the sorted-values shortcut of ops_sample.cu (with its
 *                     fallback to sampling.c's sort on a split tie run):
 *                     qtts_apply_top_p's removals, ties included
 * The device kernels are written to perform exactly these operations; the
 * GPU parity suite (make test-cuda) checks the kernels themselves.
 */
#include "harness.h"

#include "backend/cuda/layout.h"
#include "kernels/conv_impl.h"
#include "kernels/kernels_impl.h"
#include "model/sampling.h"

static uint64_t g_rs = 0x2545f4914f6cdd1dull;
static float frand(void) {
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (float)((g_rs >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * s;
}

static const qtts_isa *simd_isa(void) {
    const qtts_isa *all[16];
    int n = qtts_isa_compiled(all, 16);
    for (int i = 0; i < n; i++)
        if (qtts_isa_usable(all[i]) && strcmp(all[i]->name, "scalar") != 0) return all[i];
    return NULL;
}

/* shfl_down within `width` lanes: lane l gets lane l+o when it exists. */
static void shfl_down_add(float *v, int width, int o) {
    float t[32];
    for (int l = 0; l < width; l++) t[l] = l + o < width ? v[l + o] : v[l];
    for (int l = 0; l < width; l++) v[l] = v[l] + t[l];
}

/* ---- matmul F32/BF16 ---------------------------------------------------- */

/* One output of ops_mm.cu's float path on a permuted row wp (F32 values). */
static float mm_emulate(const float *wp, const float *x, int cols) {
    const int k16 = qtts_cu_k16(cols), nb8 = qtts_cu_nb8(cols);
    float lanes[16];
    for (int l = 0; l < 16; l++) {
        float acc = 0.0f;
        for (int b = 0; b < nb8; b++) {
            const float *w8 = wp + (int64_t)b * 128 + l * 8;
            const int kmax = k16 - 8 * b < 8 ? k16 - 8 * b : 8;
            for (int j = 0; j < kmax; j++) {
                const int c = 16 * (8 * b + j) + l;
                acc = fmaf(w8[j], c < cols ? x[c] : 0.0f, acc);
            }
        }
        lanes[l] = acc;
    }
    for (int o = 8; o >= 1; o >>= 1) shfl_down_add(lanes, 16, o);
    return lanes[0];
}

static void test_perm_is_bijection(void) {
    const int cols_list[] = {1, 15, 16, 17, 100, 127, 128, 129, 1024, 1040, 3072};
    for (size_t t = 0; t < QTTS_ARRAY_LEN(cols_list); t++) {
        const int cols = cols_list[t];
        const int64_t n = qtts_cu_row_elems(cols);
        CHECK(n % 128 == 0 && n >= cols && n - cols < 128 + 16, "cols %d: row of %lld", cols, (long long)n);
        char *seen = calloc((size_t)n, 1);
        for (int c = 0; c < cols; c++) {
            const int64_t p = qtts_cu_perm(c);
            CHECK(p >= 0 && p < n && !seen[p], "cols %d: column %d -> %lld", cols, c, (long long)p);
            if (p >= 0 && p < n) seen[p] = 1;
            /* thread l = c % 16 reads its 8 steps of block b contiguously */
            CHECK(p / 128 == (c / 16) / 8 && (p % 128) / 8 == c % 16 && p % 8 == (c / 16) % 8,
                  "cols %d: column %d misplaced", cols, c);
        }
        free(seen);
    }
}

static void test_mm_float_order(void) {
    const qtts_isa *simd = simd_isa();
    if (!simd) {
        printf("  no SIMD matmul path on this CPU: the SIMD order is not compared here\n");
        return;
    }
    const int shapes[][2] = {{5, 3}, {7, 16}, {9, 48}, {33, 100}, {12, 1024}, {6, 1040}, {3, 3000}};
    for (size_t s = 0; s < QTTS_ARRAY_LEN(shapes); s++) {
        const int rows = shapes[s][0], cols = shapes[s][1], n = 3;
        for (int bf = 0; bf < 2; bf++) {
            float *w = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * n * cols);
            uint16_t *wb = malloc(sizeof(uint16_t) * rows * cols);
            fill(w, (size_t)rows * cols, 0.5f);
            fill(x, (size_t)n * cols, 1.0f);
            if (bf)
                for (int i = 0; i < rows * cols; i++) {
                    wb[i] = qtts_f32_to_bf16(w[i]);
                    w[i] = qtts_bf16_to_f32(wb[i]);
                }
            /* the upload's permuted rows (values as the kernel sees them) */
            const int64_t ld = qtts_cu_row_elems(cols);
            float *wp = calloc((size_t)(rows * ld), sizeof(float));
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) wp[r * ld + qtts_cu_perm(c)] = w[(size_t)r * cols + c];
            qtts_mat W = bf ? (qtts_mat){.data = wb, .dtype = QTTS_DT_BF16, .rows = rows, .cols = cols}
                            : (qtts_mat){.data = w, .dtype = QTTS_DT_F32, .rows = rows, .cols = cols};
            float *y = malloc(sizeof(float) * n * rows);
            qtts_matmul_isa(simd, y, x, n, &W, NULL);
            int bad = 0;
            for (int t = 0; t < n; t++)
                for (int r = 0; r < rows; r++) {
                    const float e = mm_emulate(wp + r * ld, x + (size_t)t * cols, cols);
                    bad += memcmp(&e, &y[(size_t)t * rows + r], sizeof e) != 0;
                }
            CHECK(bad == 0, "[%d x %d] %s: %d outputs differ from the %s order", rows, cols,
                  bf ? "BF16" : "F32", bad, simd->name);
            free(w), free(x), free(wb), free(wp), free(y);
        }
    }
}

/* ---- matmul Q8_0 / Q4_0 ------------------------------------------------------ */

/* One output of ops_mm.cu's quantized path on a device row (codes as
 * uploaded, cb bytes per block, scales sc): thread l walks the blocks
 * b = l, l + 16, ..., each one integer dot of its 8 4-byte groups (__dp4a),
 * then the shuffle fold. */
static float mm_quant_emulate(const uint8_t *codes, const float *sc, const int8_t *xq,
                              const float *xd, int nb, int q4) {
    float lanes[16];
    for (int l = 0; l < 16; l++) {
        float acc = 0.0f;
        for (int b = l; b < nb; b += 16) {
            const uint8_t *blk = codes + (size_t)b * (q4 ? 16 : 32);
            int P = 0;
            for (int k = 0; k < 8; k++)     /* group k: elements 4k..4k+3 */
                for (int i = 0; i < 4; i++) {
                    const int e = 4 * k + i;
                    const int code = q4 ? ((e < 16 ? blk[e] : blk[e - 16] >> 4) & 15) - 8
                                        : (int8_t)blk[e];
                    P += code * xq[32 * b + e];
                }
            acc = fmaf((float)P, sc[b] * xd[b], acc);
        }
        lanes[l] = acc;
    }
    for (int o = 8; o >= 1; o >>= 1) shfl_down_add(lanes, 16, o);
    return lanes[0];
}

static void test_mm_quant_order(void) {
    const int shapes[][2] = {{5, 32}, {7, 96}, {4, 1024}, {3, 544}, {6, 2048}, {2, 3072}};
    const int n = 3;
    for (size_t s = 0; s < QTTS_ARRAY_LEN(shapes); s++)
        for (int q4 = 0; q4 < 2; q4++) {
            const int rows = shapes[s][0], cols = shapes[s][1], nb = cols / QTTS_QK;
            float *w = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * n * cols);
            fill(w, (size_t)rows * cols, 0.5f);
            fill(x, (size_t)n * cols, 1.0f);
            if (s == 0)     /* an all-zero weight block and activation block */
                for (int i = 0; i < QTTS_QK; i++) w[i] = x[i] = 0.0f;
            qtts_mat F = {.data = w, .dtype = QTTS_DT_F32, .rows = rows, .cols = cols}, Q;
            qtts_err err = {0};
            REQUIRE(!qtts_mat_quantize(&F, q4 ? QTTS_DT_Q4_0 : QTTS_DT_Q8_0, &Q, &err), "%s", err.msg);
            CHECK(Q.packed, "qtts_mat_quantize returns a packed matrix");
            /* the upload's split of the plain blocks: codes (block qs as
             * stored) and f32 scales */
            const size_t cb = q4 ? QTTS_QK / 2 : QTTS_QK, rb = qtts_mat_row_bytes(Q.dtype, cols);
            uint8_t *plain = malloc(rb), *codes = malloc((size_t)rows * nb * cb);
            float *sc = malloc(sizeof(float) * rows * nb);
            for (int r = 0; r < rows; r++) {
                qtts_mat_unpack_row(&Q, r, plain);
                for (int b = 0; b < nb; b++) {
                    const uint8_t *blk = plain + (size_t)b * (2 + cb);
                    qtts_half h;
                    memcpy(&h, blk, 2);
                    sc[r * nb + b] = qtts_half_to_f32(h);
                    memcpy(codes + ((size_t)r * nb + b) * cb, blk + 2, cb);
                }
            }
            int8_t *xq = malloc((size_t)n * cols);
            float *xd = malloc(sizeof(float) * n * nb), *y = malloc(sizeof(float) * n * rows);
            for (int t = 0; t < n; t++)
                qtts_quantize_act_ref(x + (size_t)t * cols, cols, xq + (size_t)t * cols, xd + (size_t)t * nb);
            const qtts_isa *isas[2] = {&qtts_isa_ref, qtts_isa_active()};
            for (int i = 0; i < 2; i++) {
                if (i == 1 && isas[1] == isas[0]) break;
                qtts_matmul_isa(isas[i], y, x, n, &Q, NULL);
                int bad = 0, bad_ref = 0;
                for (int t = 0; t < n; t++)
                    for (int r = 0; r < rows; r++) {
                        const uint8_t *cr = codes + (size_t)r * nb * cb;
                        const float e = mm_quant_emulate(cr, sc + (size_t)r * nb, xq + (size_t)t * cols,
                                                         xd + (size_t)t * nb, nb, q4);
                        bad += memcmp(&e, &y[(size_t)t * rows + r], sizeof e) != 0;
                        /* and the plain-block oracle of kernels_impl.h */
                        qtts_mat_unpack_row(&Q, r, plain);
                        const float o = (q4 ? qtts_dot_q4_0_ref : qtts_dot_q8_0_ref)(
                            plain, xq + (size_t)t * cols, xd + (size_t)t * nb, cols);
                        bad_ref += memcmp(&e, &o, sizeof e) != 0;
                    }
                CHECK(bad == 0, "[%d x %d] %s: %d outputs differ from the %s path", rows, cols,
                      q4 ? "Q4_0" : "Q8_0", bad, isas[i]->name);
                if (i == 0)
                    CHECK(bad_ref == 0, "[%d x %d] %s: %d outputs differ from qtts_dot_%s_ref", rows,
                          cols, q4 ? "Q4_0" : "Q8_0", bad_ref, q4 ? "q4_0" : "q8_0");
            }
            qtts_mat_free(&Q);
            free(w), free(x), free(plain), free(codes), free(sc), free(xq), free(xd), free(y);
        }
}

/* ---- conv ----------------------------------------------------------------------- */

static void test_conv_order(void) {
    const int cfg[][6] = {{24, 20, 7, 3, 0, 50}, {9, 33, 1, 1, 0, 13}, {12, 40, 16, 1, 8, 21},
                          {17, 64, 3, 1, 0, 7}};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cfg); i++) {
        const int cout = cfg[i][0], cin = cfg[i][1], taps = cfg[i][2], dil = cfg[i][3];
        const int s = cfg[i][4], n = cfg[i][5];
        float *w = malloc(sizeof(float) * cout * cin * taps), *b = malloc(sizeof(float) * cout);
        fill(w, (size_t)cout * cin * taps, 0.3f);
        fill(b, cout, 0.1f);
        qtts_conv1d c;
        REQUIRE(s ? qtts_convtr1d_init(&c, w, b, cin, cout, taps, s)
                  : qtts_conv1d_init(&c, w, b, cout, cin, taps, dil), "init");
        const int K = c.taps * c.cin, P = (c.taps - 1) * c.dil;
        float *wt = malloc(sizeof(float) * (size_t)K * c.cout);
        for (int kk = 0; kk < K; kk++)
            for (int co = 0; co < c.cout; co++)
                wt[qtts_cu_conv_dst(kk, co, c.cout)] = c.w[qtts_cu_conv_src(co, kk, K)];
        float *x = malloc(sizeof(float) * c.cin * n), *xp = calloc((size_t)c.cin * (n + P), sizeof(float));
        fill(x, (size_t)c.cin * n, 1.0f);
        for (int ci = 0; ci < c.cin; ci++)
            memcpy(xp + (size_t)ci * (n + P) + P, x + (size_t)ci * n, sizeof(float) * n);
        float *y = malloc(sizeof(float) * c.cout * n);
        qtts_conv1d_run(&c, y, n, xp + P, (size_t)n + P, n, false, NULL);
        int bad = 0;
        for (int co = 0; co < c.cout; co++)
            for (int t = 0; t < n; t++) {
                float acc = 0.0f;
                for (int kk = 0; kk < K; kk++) {
                    const int tap = kk / c.cin, ci = kk % c.cin, ts = t - (c.taps - 1 - tap) * c.dil;
                    acc = fmaf(wt[(size_t)kk * c.cout + co], ts >= 0 ? x[(size_t)ci * n + ts] : 0.0f, acc);
                }
                const float v = acc + (c.bias ? c.bias[co] : 0.0f);
                bad += memcmp(&v, &y[(size_t)co * n + t], sizeof v) != 0;
            }
        CHECK(bad == 0, "conv %zu: %d outputs differ", i, bad);
        qtts_conv1d_free(&c);
        free(w), free(b), free(wt), free(x), free(xp), free(y);
    }
}

/* ---- attention dot ----------------------------------------------------------------- */

static void test_dot_order(void) {
    const int ns[] = {1, 7, 8, 16, 64, 100, 128};
    int bad = 0;
    for (size_t k = 0; k < QTTS_ARRAY_LEN(ns); k++)
        for (int trial = 0; trial < 50; trial++) {
            const int n = ns[k];
            float a[128], b[128], lanes[8];
            fill(a, n, 2.0f);
            fill(b, n, 2.0f);
            for (int l = 0; l < 8; l++) {
                float acc = 0.0f;
                for (int i = l; i < n; i += 8) acc = acc + a[i] * b[i];
                lanes[l] = acc;
            }
            shfl_down_add(lanes, 8, 4);
            shfl_down_add(lanes, 8, 1);
            shfl_down_add(lanes, 8, 2);
            const float want = qtts_dot_f32(a, b, n);
            bad += memcmp(&lanes[0], &want, sizeof want) != 0;
        }
    CHECK(bad == 0, "%d dot products differ from qtts_dot_f32", bad);
}

/* ---- top-p --------------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ops_sample.cu's top_p_block on s[V] (host expf, the same steps). */
static int top_p_emulate(float *s, int V, float top_p) {
    const float thr = qtts_cu_top_p_threshold(top_p);
    float *sorted = malloc(sizeof(float) * V), *e = malloc(sizeof(float) * V);
    memcpy(sorted, s, sizeof(float) * V);
    qsort(sorted, V, sizeof(float), cmp_float);
    int path = 0;
    const float mx = sorted[V - 1];
    if (isfinite(mx)) {
        double sum = 0.0;
        for (int j = 0; j < V; j++) sum += (double)(e[j] = expf(sorted[j] - mx));
        const float inv = 1.0f / (float)sum;
        double cum = 0.0;
        int J = 0;
        for (int j = 0; j < V - 1; j++) {
            cum += (double)(e[j] * inv);
            if ((float)cum <= thr)
                J = j + 1;
            else
                break;
        }
        if (J > 0 && sorted[J - 1] != sorted[J]) {
            path = 1;
            for (int i = 0; i < V; i++)
                if (s[i] < sorted[J]) s[i] = -INFINITY;
        } else if (J > 0) {
            path = 2;
            int *ix = malloc(sizeof(int) * V);
            for (int i = 0; i < V; i++) sorted[i] = s[i], ix[i] = i;
            qtts_sort_ascending_like_torch(sorted, ix, V);
            for (int j = 0; j < J; j++) s[ix[j]] = -INFINITY;
            free(ix);
        }
    }
    free(sorted), free(e);
    return path;
}

static void test_top_p_shortcut(void) {
    const int V = 2048;
    const float ps[] = {0.0f, 0.3f, 0.8f, 0.9f, 0.95f, 0.999f};
    float *s = malloc(sizeof(float) * V), *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    void *scratch = malloc(QTTS_SAMPLE_SCRATCH(V));
    int paths[3] = {0, 0, 0}, bad = 0;
    for (int trial = 0; trial < 300; trial++) {
        fill(s, V, 6.0f);
        if (trial % 3 == 1)
            for (int i = 0; i < V; i++) s[i] = roundf(s[i]); /* heavy ties */
        if (trial % 4 == 2) qtts_apply_top_k(s, V, 50, scratch); /* -inf entries, as after top-k */
        if (trial % 7 == 3)
            for (int i = 0; i < V; i++) s[i] = (float)(i % 5); /* ties everywhere */
        const float p = ps[trial % QTTS_ARRAY_LEN(ps)];
        memcpy(a, s, sizeof(float) * V);
        memcpy(b, s, sizeof(float) * V);
        qtts_apply_top_p(a, V, p, scratch);
        paths[top_p_emulate(b, V, p)]++;
        bad += memcmp(a, b, sizeof(float) * V) != 0;
    }
    CHECK(bad == 0, "%d of 300 top-p cuts differ from sampling.c", bad);
    CHECK(paths[1] > 0 && paths[2] > 0, "both device paths exercised (%d shortcut, %d exact sort)",
          paths[1], paths[2]);
    free(s), free(a), free(b), free(scratch);
}

int main(void) {
    TEST_RUN(test_perm_is_bijection);
    TEST_RUN(test_mm_float_order);
    TEST_RUN(test_mm_quant_order);
    TEST_RUN(test_conv_order);
    TEST_RUN(test_dot_order);
    TEST_RUN(test_top_p_shortcut);
    TEST_END();
}
