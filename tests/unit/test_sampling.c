/*
 * test_sampling.c - logits processors, warpers, RNG and draw (sampling.h).
 *
 * Constants marked "torch" were produced once with transformers 4.57.3 /
 * torch on CPU (TopPLogitsWarper, torch.sort); the RNG constants come from
 * the published xoshiro256** and splitmix64 algorithms.
 *
 * The official goldens (tests/fixtures/golden/sampler.{safetensors,json},
 * written by tools/reference/make_goldens.py) hold, per parameter set, the
 * processor list HF generate built for the talker or the code predictor,
 * random logits rows with histories, and the scores after every processor.
 * test_golden_* checks that our gating builds the same list, that each
 * stage is bit-identical, that qtts_sample leaves the last stage behind,
 * and that its draws follow the reference probabilities. Statistical checks
 * use fixed seeds, so they are deterministic; their bounds are set so that
 * a correct sampler would fail them with probability below about 1e-4.
 */
#include "harness.h"
#include "base/json.h"
#include "io/safetensors.h"
#include "model/sampling.h"

#include <stdint.h>

#define V_TALKER 3072
#define V_CP 2048

static float scratch_buf[QTTS_SAMPLE_SCRATCH(V_TALKER) / sizeof(float)];

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* A standard-normal-ish value from the RNG (sum of 12 uniforms - 6). */
static float gauss(qtts_rng *r) {
    double s = 0;
    for (int i = 0; i < 12; i++) s += qtts_rng_uniform(r);
    return (float)(s - 6.0);
}

static void random_logits(qtts_rng *r, float *s, int n, float scale) {
    for (int i = 0; i < n; i++) s[i] = gauss(r) * scale;
}

static int argmax_ref(const float *s, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (s[i] > s[b]) b = i;
    return b;
}

/* ---- RNG ---- */

static void test_rng_reference_values(void) {
    static const uint64_t want0[4] = {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull,
                                      0x1a5f849d4933e6e0ull, 0x6aa594f1262d2d2cull};
    static const uint64_t want42[4] = {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull,
                                       0xae17533239e499a1ull, 0xecb8ad4703b360a1ull};
    qtts_rng a, b;
    qtts_rng_seed(&a, 0);
    qtts_rng_seed(&b, 42);
    for (int i = 0; i < 4; i++) {
        uint64_t x = qtts_rng_next(&a), y = qtts_rng_next(&b);
        CHECK(x == want0[i], "seed 0 draw %d: %016llx", i, (unsigned long long)x);
        CHECK(y == want42[i], "seed 42 draw %d: %016llx", i, (unsigned long long)y);
    }
}

static void test_rng_reproducible(void) {
    qtts_rng a, b, c;
    qtts_rng_seed(&a, 12345);
    qtts_rng_seed(&b, 12345);
    qtts_rng_seed(&c, 12346);
    int differ = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t x = qtts_rng_next(&a), y = qtts_rng_next(&b), z = qtts_rng_next(&c);
        REQUIRE(x == y, "same seed diverged at %d", i);
        differ += x != z;
    }
    CHECK(differ > 9990, "neighbouring seeds agree too often (%d differ)", differ);

    /* the whole sampling path is reproducible too */
    float s1[V_CP], s2[V_CP];
    qtts_rng r1, r2, g;
    qtts_rng_seed(&r1, 7);
    qtts_rng_seed(&r2, 7);
    qtts_rng_seed(&g, 99);
    qtts_sampler_params p = {true, 50, 0.95f, 0.9f};
    for (int t = 0; t < 200; t++) {
        random_logits(&g, s1, V_CP, 2.0f);
        memcpy(s2, s1, sizeof s1);
        int x = qtts_sample(s1, V_CP, &p, &r1, scratch_buf, NULL);
        int y = qtts_sample(s2, V_CP, &p, &r2, scratch_buf, NULL);
        REQUIRE(x == y, "trial %d: %d vs %d", t, x, y);
    }
}

static void test_rng_uniform_range(void) {
    qtts_rng r;
    qtts_rng_seed(&r, 2024);
    enum { N = 1000000, BINS = 16 };
    long hist[BINS] = {0};
    double sum = 0, sum2 = 0, lo = 1, hi = 0;
    for (int i = 0; i < N; i++) {
        double u = qtts_rng_uniform(&r);
        REQUIRE(u >= 0.0 && u < 1.0, "draw %d out of range: %.17g", i, u);
        sum += u;
        sum2 += u * u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        hist[(int)(u * BINS)]++;
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    CHECK(fabs(mean - 0.5) < 0.002, "mean %g", mean);           /* sd 2.9e-4 */
    CHECK(fabs(var - 1.0 / 12) < 0.001, "variance %g", var);    /* sd 7.5e-5 */
    CHECK(lo < 1e-5 && hi > 1 - 1e-5, "extremes %g %g", lo, hi);
    double chi = 0, e = (double)N / BINS;
    for (int b = 0; b < BINS; b++) chi += (hist[b] - e) * (hist[b] - e) / e;
    CHECK(chi < 44.3, "uniform chi-square %g (df 15, 1e-4 level 44.3)", chi);
    /* the largest possible draw is still below 1 */
    CHECK((double)(UINT64_MAX >> 11) * 0x1.0p-53 < 1.0, "53-bit scaling reaches 1");
}

/* ---- draw statistics ---- */

/* Draws n tokens from logits[v] with params p and returns the chi-square of
 * the counts against want[v] (cells with want == 0 must never be hit). */
static double draw_chisq(const float *logits, int v, const qtts_sampler_params *p,
                         const double *want, int n, uint64_t seed, int *impossible) {
    long counts[16] = {0};
    float s[16];
    qtts_rng r;
    qtts_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        memcpy(s, logits, sizeof(float) * (size_t)v);
        int t = qtts_sample(s, v, p, &r, scratch_buf, NULL);
        if (t < 0 || t >= v) {
            (*impossible)++;
            continue;
        }
        counts[t]++;
    }
    double chi = 0;
    for (int i = 0; i < v; i++) {
        if (want[i] == 0) {
            *impossible += (int)counts[i];
            continue;
        }
        double e = want[i] * n;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

static const float k_logits10[10] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, -2.0f, 0.25f, -3.0f};

static void test_draw_matches_softmax(void) {
    double want[10], z = 0;
    for (int i = 0; i < 10; i++) z += exp(k_logits10[i]);
    for (int i = 0; i < 10; i++) want[i] = exp(k_logits10[i]) / z;
    qtts_sampler_params p = {true, 0, 1.0f, 1.0f};
    int impossible = 0;
    double chi = draw_chisq(k_logits10, 10, &p, want, 200000, 1, &impossible);
    CHECK(impossible == 0, "%d impossible draws", impossible);
    CHECK(chi < 33.7, "chi-square %g (df 9, 1e-4 level 33.7)", chi);
}

static void test_draw_after_warpers(void) {
    /* T = 0.7, top-k 5 keeps {2, 1.5, 1, 0.5, 0.25}; top-p 0.9 then drops
     * 0.25 (its probability 0.043 <= 0.1, the next cumulative is 0.103). */
    double want[10] = {0}, z = 0;
    const int keep[4] = {0, 6, 1, 2};
    for (int j = 0; j < 4; j++) z += exp(k_logits10[keep[j]] / 0.7);
    for (int j = 0; j < 4; j++) want[keep[j]] = exp(k_logits10[keep[j]] / 0.7) / z;
    qtts_sampler_params p = {true, 5, 0.9f, 0.7f};
    int impossible = 0;
    double chi = draw_chisq(k_logits10, 10, &p, want, 200000, 2, &impossible);
    CHECK(impossible == 0, "%d draws outside the kept set", impossible);
    CHECK(chi < 21.1, "chi-square %g (df 3, 1e-4 level 21.1)", chi);
}

static void test_top_k_ties_are_kept(void) {
    /* two equal maxima with k = 1: both survive and are drawn equally */
    const float l[4] = {1.0f, 3.0f, 3.0f, 2.0f};
    double want[4] = {0, 0.5, 0.5, 0};
    qtts_sampler_params p = {true, 1, 1.0f, 1.0f};
    int impossible = 0;
    double chi = draw_chisq(l, 4, &p, want, 100000, 3, &impossible);
    CHECK(impossible == 0, "%d draws outside the tie", impossible);
    CHECK(chi < 15.2, "chi-square %g (df 1, 1e-4 level 15.1)", chi);
}

/* ---- degenerate warpers reduce to argmax ---- */

static void test_top_k1_and_tiny_top_p_are_argmax(void) {
    qtts_rng g, r;
    qtts_rng_seed(&g, 5);
    qtts_rng_seed(&r, 6);
    static float s[V_TALKER], c[V_TALKER];
    const qtts_sampler_params pk = {true, 1, 1.0f, 0.9f};
    const qtts_sampler_params pp = {true, 0, 1e-6f, 0.9f};
    const qtts_sampler_params pt = {true, 0, 1.0f, 1e-3f};
    for (int t = 0; t < 300; t++) {
        int v = t % 2 ? V_TALKER : V_CP;
        random_logits(&g, s, v, 3.0f);
        int want = argmax_ref(s, v);
        float margin;
        memcpy(c, s, sizeof(float) * (size_t)v);
        int got = qtts_sample(c, v, &pk, &r, scratch_buf, &margin);
        if (margin == 0) continue; /* a tie: any of the maxima is right */
        CHECK(got == want, "top-k 1, trial %d: %d vs argmax %d", t, got, want);
        memcpy(c, s, sizeof(float) * (size_t)v);
        got = qtts_sample(c, v, &pp, &r, scratch_buf, NULL);
        CHECK(got == want, "top-p 1e-6, trial %d: %d vs argmax %d", t, got, want);
        if (margin > 0.05f) { /* exp(-50) per competitor: never drawn */
            memcpy(c, s, sizeof(float) * (size_t)v);
            got = qtts_sample(c, v, &pt, &r, scratch_buf, NULL);
            CHECK(got == want, "temperature 1e-3, trial %d: %d vs argmax %d", t, got, want);
        }
    }
}

/* ---- greedy ---- */

static void test_greedy(void) {
    float s[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
    float c[6];
    memcpy(c, s, sizeof s);
    /* warpers are skipped in greedy mode: top-k 1 / top-p / temperature
     * would not change the argmax here, but the scores must stay intact */
    qtts_sampler_params p = {false, 1, 0.1f, 0.5f};
    float margin = -1;
    int t = qtts_sample(c, 6, &p, NULL, NULL, &margin);
    CHECK(t == 1, "first index on ties: %d", t);
    CHECK(margin == 0.0f, "margin on a tie: %g", margin);
    for (int i = 0; i < 6; i++) CHECK(same_bits(c[i], s[i]), "greedy changed score %d", i);

    float u[4] = {-1.0f, 0.25f, 3.0f, 2.5f};
    t = qtts_sample(u, 4, &p, NULL, NULL, &margin);
    CHECK(t == 2 && margin == 0.5f, "argmax %d margin %g", t, margin);
}

/* ---- non-finite and degenerate inputs ---- */

static void test_single_finite(void) {
    static float s[V_TALKER];
    qtts_rng r;
    qtts_rng_seed(&r, 8);
    const qtts_sampler_params ps[] = {
        {true, 50, 1.0f, 0.9f}, {true, 0, 0.5f, 1.3f}, {true, 1, 1e-6f, 1.0f},
        {true, 0, 1.0f, 1.0f}, {false, 50, 1.0f, 0.9f},
    };
    for (size_t k = 0; k < QTTS_ARRAY_LEN(ps); k++) {
        for (int rep = 0; rep < 50; rep++) {
            int only = (int)(qtts_rng_next(&r) % V_TALKER);
            for (int i = 0; i < V_TALKER; i++) s[i] = -INFINITY;
            s[only] = -123.0f;
            float margin = 0;
            int t = qtts_sample(s, V_TALKER, &ps[k], &r, scratch_buf, &margin);
            CHECK(t == only, "params %zu: got %d want %d", k, t, only);
            CHECK(margin == INFINITY, "margin %g", margin);
        }
    }
}

static void test_all_neg_inf(void) {
    float s[8];
    qtts_rng r;
    qtts_rng_seed(&r, 9);
    const qtts_sampler_params ps[] = {{true, 50, 0.8f, 0.9f}, {false, 0, 1.0f, 1.0f}};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(ps); k++) {
        for (int i = 0; i < 8; i++) s[i] = -INFINITY;
        float margin = 0;
        int t = qtts_sample(s, 8, &ps[k], &r, scratch_buf, &margin);
        CHECK(t == 0, "params %zu: %d", k, t);
        CHECK(margin == INFINITY, "margin %g", margin);
    }
}

static void test_nan_is_neg_inf(void) {
    qtts_rng r;
    qtts_rng_seed(&r, 10);
    const qtts_sampler_params ps[] = {
        {true, 50, 1.0f, 0.9f}, {true, 0, 0.9f, 1.0f}, {true, 0, 1.0f, 1.0f}, {false, 0, 1.0f, 1.0f},
    };
    for (size_t k = 0; k < QTTS_ARRAY_LEN(ps); k++) {
        for (int rep = 0; rep < 200; rep++) {
            float s[8] = {NAN, 0.1f, NAN, -0.2f, 0.3f, NAN, 0.0f, -NAN};
            int t = qtts_sample(s, 8, &ps[k], &r, scratch_buf, NULL);
            CHECK(t == 1 || t == 3 || t == 4 || t == 6, "params %zu: picked NaN slot %d", k, t);
            for (int i = 0; i < 8; i++) CHECK(!isnan(s[i]), "NaN left at %d", i);
        }
        float s[5] = {NAN, NAN, NAN, 7.0f, NAN};
        float margin = 0;
        int t = qtts_sample(s, 5, &ps[k], &r, scratch_buf, &margin);
        CHECK(t == 3 && margin == INFINITY, "params %zu: lone finite among NaN: %d, %g", k, t,
              margin);
    }
    /* the stages and the talker rules rewrite NaN as well */
    float a[4] = {NAN, 1.0f, 2.0f, 3.0f};
    qtts_apply_temperature(a, 4, 0.5f);
    CHECK(a[0] == -INFINITY, "temperature: %g", a[0]);
    float b[4] = {NAN, 1.0f, 2.0f, 3.0f};
    qtts_apply_top_k(b, 4, 2, scratch_buf);
    CHECK(b[0] == -INFINITY && b[1] == -INFINITY && b[2] == 2.0f, "top-k: %g %g %g", b[0], b[1], b[2]);
    float c[4] = {NAN, 1.0f, 2.0f, 3.0f};
    qtts_apply_top_p(c, 4, 0.99f, scratch_buf);
    CHECK(c[0] == -INFINITY && c[3] == 3.0f, "top-p: %g %g", c[0], c[3]);
    static float d[V_TALKER];
    for (int i = 0; i < V_TALKER; i++) d[i] = NAN;
    qtts_talker_rules rules = {1.05f, 2150, 2, 2048, 3072};
    int32_t h[1] = {0};
    qtts_talker_process(d, V_TALKER, h, 1, &rules);
    for (int i = 0; i < V_TALKER; i++) REQUIRE(d[i] == -INFINITY, "talker rules: %d is %g", i, d[i]);
}

static void test_pos_inf(void) {
    /* overflow to +inf (e.g. a tiny temperature) picks the first +inf */
    float s[5] = {1.0f, INFINITY, 3.0f, INFINITY, -INFINITY};
    qtts_rng r;
    qtts_rng_seed(&r, 11);
    qtts_sampler_params p = {true, 2, 0.5f, 1.0f};
    float margin = -1;
    int t = qtts_sample(s, 5, &p, &r, scratch_buf, &margin);
    CHECK(t == 1 && margin == 0.0f, "%d %g", t, margin);
}

static void test_margin(void) {
    float m = -1;
    float a[3] = {1.0f, -INFINITY, 0.25f};
    qtts_sampler_params g = {false, 0, 1.0f, 1.0f};
    qtts_sample(a, 3, &g, NULL, NULL, &m);
    CHECK(m == 0.75f, "%g", m);
    float b[1] = {4.0f};
    qtts_sample(b, 1, &g, NULL, NULL, &m);
    CHECK(m == INFINITY, "%g", m);
    float c[3] = {-1.0f, -3.0f, -1.5f};
    qtts_sample(c, 3, &g, NULL, NULL, &m);
    CHECK(m == 0.5f, "%g", m);
}

/* ---- the stages against the reference ---- */

static void test_temperature_stage(void) {
    float s[5] = {1.0f, -2.5f, 0.0f, 3.1f, -INFINITY};
    const float t = 0.9f;
    float want[5];
    for (int i = 0; i < 5; i++) {
        volatile float x = s[i], y = t; /* one fp32 division, as torch does */
        want[i] = x / y;
    }
    qtts_apply_temperature(s, 5, t);
    for (int i = 0; i < 5; i++) CHECK(same_bits(s[i], want[i]), "%d: %a vs %a", i, s[i], want[i]);
}

static void test_top_k_stage(void) {
    float s[7] = {1.0f, 3.0f, 3.0f, 2.0f, 5.0f, -INFINITY, 0.5f};
    float c[7];
    memcpy(c, s, sizeof s);
    qtts_apply_top_k(c, 7, 2, scratch_buf); /* 2nd largest is 3: both 3s stay */
    const float w2[7] = {-INFINITY, 3.0f, 3.0f, -INFINITY, 5.0f, -INFINITY, -INFINITY};
    for (int i = 0; i < 7; i++) CHECK(same_bits(c[i], w2[i]), "k=2 [%d] %g", i, c[i]);
    memcpy(c, s, sizeof s);
    qtts_apply_top_k(c, 7, 4, scratch_buf);
    const float w4[7] = {-INFINITY, 3.0f, 3.0f, 2.0f, 5.0f, -INFINITY, -INFINITY};
    for (int i = 0; i < 7; i++) CHECK(same_bits(c[i], w4[i]), "k=4 [%d] %g", i, c[i]);
    for (int k = 0; k <= 9; k += 7) { /* 0 = off; k >= vocab keeps all */
        memcpy(c, s, sizeof s);
        qtts_apply_top_k(c, 7, k, scratch_buf);
        for (int i = 0; i < 7; i++) CHECK(same_bits(c[i], s[i]), "k=%d [%d] %g", k, i, c[i]);
    }
    /* k larger than the number of finite entries: nothing else removed */
    memcpy(c, s, sizeof s);
    qtts_apply_top_k(c, 7, 7, scratch_buf);
    for (int i = 0; i < 7; i++) CHECK(same_bits(c[i], s[i]), "k=7 [%d] %g", i, c[i]);

    /* large random rows against a sort-based reference */
    qtts_rng g;
    qtts_rng_seed(&g, 12);
    static float r[V_TALKER], sorted[V_TALKER], out[V_TALKER];
    static int idx[V_TALKER];
    for (int t = 0; t < 40; t++) {
        random_logits(&g, r, V_TALKER, 2.0f);
        if (t % 2) /* bf16-like rounding: many ties */
            for (int i = 0; i < V_TALKER; i++) r[i] = qtts_bf16_to_f32(qtts_f32_to_bf16(r[i]));
        int k = 1 + (int)(qtts_rng_next(&g) % 100);
        memcpy(sorted, r, sizeof r);
        for (int i = 0; i < V_TALKER; i++) idx[i] = i;
        qtts_sort_ascending_like_torch(sorted, idx, V_TALKER);
        float kth = sorted[V_TALKER - k];
        memcpy(out, r, sizeof r);
        qtts_apply_top_k(out, V_TALKER, k, scratch_buf);
        for (int i = 0; i < V_TALKER; i++) {
            float w = r[i] < kth ? -INFINITY : r[i];
            REQUIRE(same_bits(out[i], w), "trial %d k %d [%d]: %g vs %g", t, k, i, out[i], w);
        }
    }
}

/* Top-k's block-maxima shortcut (rows of at least 2k blocks of 16) against
 * the sort-based threshold: row lengths with and without a partial last
 * block, the CP's 2048, k from 1 to past the shortcut's limit, and rows
 * that are mostly -inf (fewer finite entries than k too), all ties, a few
 * +inf, the large values bunched in one block or at the end. */
static void test_top_k_blocks(void) {
    static const int lens[] = {2048, 2049, 2063, 3072, 160, 47};
    static float r[V_TALKER], sorted[V_TALKER], out[V_TALKER];
    static int idx[V_TALKER];
    qtts_rng g;
    qtts_rng_seed(&g, 77);
    for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++)
        for (int kind = 0; kind < 7; kind++)
            for (int k = 1; k <= 130; k += 1 + (k > 8) * 11) {
                const int n = lens[a];
                if (k >= n) continue;
                random_logits(&g, r, n, 2.0f);
                for (int i = 0; i < n; i++) {
                    if (kind == 1 && i % 50) r[i] = -INFINITY;           /* ~n/50 finite */
                    if (kind == 2) r[i] = 0.5f;                           /* all tied */
                    if (kind == 3 && i % 97 == 3) r[i] = INFINITY;
                    if (kind == 4 && i >= 16 && i < 32) r[i] += 20.0f;    /* one block on top */
                    if (kind == 5 && i >= n - 40) r[i] += 20.0f;          /* the tail on top */
                    if (kind == 6) r[i] = (float)((i * 7) % 5);           /* five values, many ties */
                }
                memcpy(sorted, r, sizeof(float) * (size_t)n);
                for (int i = 0; i < n; i++) idx[i] = i;
                qtts_sort_ascending_like_torch(sorted, idx, n);
                const float kth = sorted[n - k];
                memcpy(out, r, sizeof(float) * (size_t)n);
                qtts_apply_top_k(out, n, k, scratch_buf);
                for (int i = 0; i < n; i++) {
                    const float w = r[i] < kth ? -INFINITY : r[i];
                    REQUIRE(same_bits(out[i], w), "n %d kind %d k %d [%d]: %g vs %g", n, kind, k,
                            i, out[i], w);
                }
            }
}

static void test_torch_sort_order(void) {
    /* torch: torch.sort(torch.zeros(20)).indices */
    static const int want20[20] = {10, 19, 18, 17, 16, 15, 14, 13, 12, 11,
                                   0,  9,  8,  7,  6,  5,  4,  3,  2,  1};
    float v[40];
    int ix[40];
    for (int i = 0; i < 20; i++) {
        v[i] = 0.0f;
        ix[i] = i;
    }
    qtts_sort_ascending_like_torch(v, ix, 20);
    for (int i = 0; i < 20; i++) CHECK(ix[i] == want20[i], "zeros[%d]: %d vs %d", i, ix[i], want20[i]);

    /* torch: torch.sort(v40).indices for the mixed-ties row below */
    static const float v40[40] = {1, 1, 2, 2, 1, 0, 2, 0, 2, 2, 2, 1, 0, 2, 2, 1, 1, 0, 2, 2,
                                  2, 2, 2, 2, 1, 0, 1, 0, 0, 1, 2, 2, 2, 2, 2, 1, 0, 2, 1, 1};
    static const int want40[40] = {36, 5,  7,  28, 27, 25, 12, 17, 1,  39, 38, 35, 29, 26,
                                   24, 16, 0,  4,  11, 15, 8,  2,  37, 3,  34, 33, 32, 31,
                                   30, 6,  9,  10, 13, 23, 22, 21, 20, 19, 18, 14};
    memcpy(v, v40, sizeof v40);
    for (int i = 0; i < 40; i++) ix[i] = i;
    qtts_sort_ascending_like_torch(v, ix, 40);
    for (int i = 0; i < 40; i++) CHECK(ix[i] == want40[i], "v40[%d]: %d vs %d", i, ix[i], want40[i]);
    for (int i = 1; i < 40; i++) CHECK(v[i - 1] <= v[i], "not sorted at %d", i);
}

static void test_top_p_stage(void) {
    /* torch: TopPLogitsWarper(0.5)(zeros(20)) removes 10..19 (tie order) */
    float z[20];
    for (int i = 0; i < 20; i++) z[i] = 0.0f;
    qtts_apply_top_p(z, 20, 0.5f, scratch_buf);
    for (int i = 0; i < 20; i++)
        CHECK((z[i] == -INFINITY) == (i >= 10), "zeros p=0.5 [%d] %g", i, z[i]);

    /* torch: TopPLogitsWarper(0.6) on the 40-entry ties row keeps these */
    static const float v40[40] = {1, 1, 2, 2, 1, 0, 2, 0, 2, 2, 2, 1, 0, 2, 2, 1, 1, 0, 2, 2,
                                  2, 2, 2, 2, 1, 0, 1, 0, 0, 1, 2, 2, 2, 2, 2, 1, 0, 2, 1, 1};
    static const int kept40[] = {6, 9, 10, 13, 14, 18, 19, 20, 21, 22, 23, 30, 31, 32, 33, 34};
    float v[40];
    memcpy(v, v40, sizeof v);
    qtts_apply_top_p(v, 40, 0.6f, scratch_buf);
    bool keep[40] = {false};
    for (size_t j = 0; j < QTTS_ARRAY_LEN(kept40); j++) keep[kept40[j]] = true;
    for (int i = 0; i < 40; i++)
        CHECK(keep[i] ? same_bits(v[i], v40[i]) : v[i] == -INFINITY, "v40 p=0.6 [%d] %g", i, v[i]);

    /* torch: with top_p = 0.9 (a Python float) the threshold is fp32(0.1);
     * a probability 2 ulp above it survives. Read as (double)0.9f the
     * threshold would be 3 ulp higher and remove it. */
    float two[2] = {-0x1.193ea6p+1f, 0.0f};
    qtts_apply_top_p(two, 2, 0.9f, scratch_buf);
    CHECK(two[0] == -0x1.193ea6p+1f && two[1] == 0.0f, "threshold from decimal 0.9: %g %g",
          two[0], two[1]);

    /* a clear case by hand: probs 0.0320586 0.0871443 0.2368828 0.6439143 */
    float h[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    qtts_apply_top_p(h, 4, 0.9f, scratch_buf); /* cum 0.032, 0.119: drop only 0 */
    CHECK(h[0] == -INFINITY && h[1] == 1.0f && h[2] == 2.0f && h[3] == 3.0f, "p=0.9: %g %g", h[0],
          h[1]);
    float q[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    qtts_apply_top_p(q, 4, 0.5f, scratch_buf); /* cum 0.356 <= 0.5, 1.0 kept: drop 0,1,2 */
    CHECK(q[0] == -INFINITY && q[1] == -INFINITY && q[2] == -INFINITY && q[3] == 3.0f,
          "p=0.5: %g %g %g", q[0], q[1], q[2]);
    float o[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    qtts_apply_top_p(o, 4, 0.0f, scratch_buf); /* everything but the largest */
    CHECK(o[2] == -INFINITY && o[3] == 3.0f, "p=0: %g %g", o[2], o[3]);
    float inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    qtts_apply_top_p(inf, 3, 0.5f, scratch_buf);
    CHECK(inf[0] == -INFINITY && inf[2] == -INFINITY, "all -inf stays");
}

/* ---- talker rules ---- */

static void test_talker_rules(void) {
    static float s[V_TALKER], orig[V_TALKER];
    qtts_rng g;
    qtts_rng_seed(&g, 13);
    random_logits(&g, orig, V_TALKER, 3.0f);
    orig[5] = 2.0f;
    orig[7] = -1.0f;
    orig[9] = 0.0f;
    orig[2150] = 4.0f;
    const qtts_talker_rules rules = {1.05f, 2150, 2, 2048, 3072};
    const int32_t hist[5] = {5, 7, 5, 9, 5};

    memcpy(s, orig, sizeof s);
    qtts_talker_process(s, V_TALKER, hist, 5, &rules);
    volatile float pen = 1.05f;
    float w5 = 2.0f / pen, w7 = -1.0f * pen;
    CHECK(same_bits(s[5], w5), "positive score divided once: %a vs %a", s[5], w5);
    CHECK(same_bits(s[7], w7), "negative score multiplied once: %a vs %a", s[7], w7);
    CHECK(same_bits(s[9], 0.0f), "zero stays zero: %a", s[9]);
    CHECK(same_bits(s[2150], 4.0f), "eos allowed after 2 tokens: %g", s[2150]);
    for (int i = 0; i < V_TALKER; i++) {
        if (i == 5 || i == 7 || i == 9 || i == 2150) continue;
        if (i >= 2048) CHECK(s[i] == -INFINITY, "suppressed %d: %g", i, s[i]);
        else CHECK(same_bits(s[i], orig[i]), "untouched %d: %g vs %g", i, s[i], orig[i]);
    }

    /* min-new-tokens: EOS is blocked while fewer than 2 tokens exist */
    for (int n = 0; n <= 2; n++) {
        memcpy(s, orig, sizeof s);
        qtts_talker_process(s, V_TALKER, hist, n, &rules);
        CHECK((s[2150] == -INFINITY) == (n < 2), "n_history %d: eos %g", n, s[2150]);
    }

    /* penalty 1 is off; suppression still applies */
    qtts_talker_rules off = rules;
    off.repetition_penalty = 1.0f;
    memcpy(s, orig, sizeof s);
    qtts_talker_process(s, V_TALKER, hist, 5, &off);
    CHECK(same_bits(s[5], 2.0f) && same_bits(s[7], -1.0f), "penalty 1 changed scores");
    CHECK(s[2048] == -INFINITY && s[3071] == -INFINITY && s[2047] == orig[2047], "suppression");

    /* a penalised id inside the suppressed range stays -inf */
    const int32_t h2[2] = {3000, 2150};
    memcpy(s, orig, sizeof s);
    qtts_talker_process(s, V_TALKER, h2, 2, &rules);
    CHECK(s[3000] == -INFINITY, "%g", s[3000]);
    volatile float four = 4.0f;
    CHECK(same_bits(s[2150], four / pen), "eos penalised when repeated: %g", s[2150]);
}


/* ---- official goldens ---- */

typedef struct {
    qtts_st_file *st;
    qtts_json *doc;
    char *text;
} goldens;

/* Python's json.dump writes float('-inf') (e.g. a warper's filter_value)
 * as the non-JSON token -Infinity; blank such tokens outside strings to
 * null so the strict reader accepts the file. */
static void python_json_to_strict(char *t, size_t n) {
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (t[i] == '\\') i++;
            else if (t[i] == '"') in_str = false;
            continue;
        }
        if (t[i] == '"') {
            in_str = true;
            continue;
        }
        size_t len = 0;
        if (n - i >= 9 && memcmp(t + i, "-Infinity", 9) == 0) len = 9;
        else if (n - i >= 8 && memcmp(t + i, "Infinity", 8) == 0) len = 8;
        if (len) {
            memcpy(t + i, "null", 4);
            memset(t + i + 4, ' ', len - 4);
            i += len - 1;
        }
    }
}

static bool golden_open(goldens *g) {
    memset(g, 0, sizeof *g);
    qtts_err err = {0};
    const char *stp = QTTS_FIXTURES "/golden/sampler.safetensors";
    const char *jsp = QTTS_FIXTURES "/golden/sampler.json";
    if (qtts_st_open(stp, &g->st, &err) != QTTS_OK) {
        CHECK(0, "%s", err.msg);
        return false;
    }
    size_t len = 0;
    if (qtts_read_file(jsp, 1 << 24, &g->text, &len, &err) != QTTS_OK) {
        CHECK(0, "%s", err.msg);
        return false;
    }
    python_json_to_strict(g->text, len);
    g->doc = qtts_json_parse(g->text, len, NULL, jsp, &err);
    CHECK(g->doc != NULL, "%s", err.msg);
    return g->doc != NULL;
}

static void golden_close(goldens *g) {
    qtts_json_free(g->doc);
    qtts_free(g->text);
    qtts_st_close(g->st);
}

/* A tensor of the set: name "<set>.<suffix>", dtype and [rows, cols]. */
static const qtts_tensor *gtensor(const goldens *g, const char *set, const char *suffix,
                                  qtts_dtype dt, int64_t rows, int64_t cols) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", set, suffix);
    const qtts_tensor *t = qtts_st_find(g->st, name);
    CHECK(t != NULL, "missing tensor %s", name);
    if (!t) return NULL;
    bool ok = t->dtype == dt && t->rank == (cols ? 2 : 1) && t->shape[0] == rows &&
              (!cols || t->shape[1] == cols);
    CHECK(ok, "tensor %s: dtype %s rank %d", name, qtts_dtype_name(t->dtype), t->rank);
    return ok ? t : NULL;
}

static const qtts_tensor *gstage(const goldens *g, const char *full_name, int64_t rows,
                                 int64_t cols) {
    const qtts_tensor *t = qtts_st_find(g->st, full_name);
    CHECK(t != NULL, "missing tensor %s", full_name);
    if (!t) return NULL;
    bool ok = t->dtype == QTTS_DT_F32 && t->rank == 2 && t->shape[0] == rows && t->shape[1] == cols;
    CHECK(ok, "tensor %s: bad dtype/shape", full_name);
    return ok ? t : NULL;
}

static double param_num(const qtts_json *wp, const char *key, double dflt) {
    double v;
    return qtts_json_get_num(wp, key, &v) ? v : dflt;
}

static bool param_bool(const qtts_json *wp, const char *key, bool dflt) {
    bool v;
    return qtts_json_get_bool(wp, key, &v) ? v : dflt;
}

/* Number of entries whose bits differ; *first gets the first. */
static int bit_diffs(const float *a, const float *b, int n, int *first) {
    int d = 0;
    *first = -1;
    for (int i = 0; i < n; i++) {
        if (!same_bits(a[i], b[i])) {
            if (*first < 0) *first = i;
            d++;
        }
    }
    return d;
}

/* Upper 1e-4 tail of chi-square(df), Wilson-Hilferty. */
static double chisq_crit(int df) {
    const double z = 3.719;
    double a = 2.0 / (9.0 * df);
    double c = 1.0 - a + z * sqrt(a);
    return df * c * c * c;
}

/* Draws n tokens from the softmax of scores[v] through qtts_sample (no
 * warper active) and compares with probs[v]: no draw where probs is 0, and a
 * chi-square over cells with expected count >= 5 (the rest pooled). */
static void check_draws(const char *what, const float *scores, const float *probs, int v, int n,
                        uint64_t seed) {
    static long counts[V_TALKER];
    static float s[V_TALKER];
    memset(counts, 0, sizeof counts);
    qtts_rng r;
    qtts_rng_seed(&r, seed);
    const qtts_sampler_params plain = {true, 0, 1.0f, 1.0f};
    for (int i = 0; i < n; i++) {
        memcpy(s, scores, sizeof(float) * (size_t)v);
        int t = qtts_sample(s, v, &plain, &r, scratch_buf, NULL);
        REQUIRE(t >= 0 && t < v, "%s: id %d", what, t);
        counts[t]++;
    }
    double chi = 0, pooled_e = 0, pooled_o = 0;
    int cells = 0, impossible = 0;
    for (int i = 0; i < v; i++) {
        if (probs[i] == 0.0f) {
            impossible += (int)counts[i];
            continue;
        }
        double e = (double)probs[i] * n;
        if (e < 5) {
            pooled_e += e;
            pooled_o += (double)counts[i];
            continue;
        }
        chi += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (pooled_e >= 5) {
        chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        cells++;
    }
    CHECK(impossible == 0, "%s: %d draws of zero-probability ids", what, impossible);
    if (cells >= 2)
        CHECK(chi < chisq_crit(cells - 1), "%s: chi-square %g over %d cells (limit %g)", what, chi,
              cells, chisq_crit(cells - 1));
}

static void test_golden_sampler(void) {
    goldens g;
    if (!golden_open(&g)) {
        golden_close(&g);
        return;
    }
    const qtts_json *sets = qtts_json_get(g.doc, "sets");
    REQUIRE(sets && sets->type == QTTS_JSON_ARRAY && sets->count > 0, "sampler.json: no sets");
    static float s[V_TALKER], work[V_TALKER];
    int n_sets = 0, n_stage_rows = 0, n_talker = 0, n_cp = 0, n_greedy = 0;

    for (size_t si = 0; si < sets->count; si++) {
        const qtts_json *set = sets->items[si];
        const char *name = qtts_json_get_str(set, "name");
        const char *which = qtts_json_get_str(set, "which");
        int64_t V = 0, N = 0;
        REQUIRE(name && which && qtts_json_get_int(set, "vocab", &V) &&
                    qtts_json_get_int(set, "rows", &N) && V > 0 && V <= V_TALKER && N > 0,
                "set %zu: name/which/vocab/rows", si);
        const bool talker = strcmp(which, "talker") == 0;
        const qtts_json *wp = qtts_json_get(set, "wrapper_params");
        const qtts_json *procs = qtts_json_get(set, "processors");
        const qtts_json *stages = qtts_json_get(set, "stages");
        REQUIRE(wp && procs && stages && procs->type == QTTS_JSON_ARRAY &&
                    stages->type == QTTS_JSON_ARRAY && procs->count == stages->count,
                "%s: wrapper_params/processors/stages", name);

        /* our parameters, from the wrapper's (defaults as the wrapper's) */
        const char *pre = talker ? "" : "subtalker_";
        char key[64];
        qtts_sampler_params sp;
        snprintf(key, sizeof key, "%s%s", pre, talker ? "do_sample" : "dosample");
        sp.do_sample = param_bool(wp, key, true);
        snprintf(key, sizeof key, "%stemperature", pre);
        sp.temperature = (float)param_num(wp, key, 0.9);
        snprintf(key, sizeof key, "%stop_k", pre);
        sp.top_k = (int)param_num(wp, key, 50);
        snprintf(key, sizeof key, "%stop_p", pre);
        sp.top_p = (float)param_num(wp, key, 1.0);
        const float pen = talker ? (float)param_num(wp, "repetition_penalty", 1.05) : 1.0f;
        const qtts_talker_rules rules = {pen, 2150, 2, (int)V - 1024, (int)V};

        /* the processor list our gating implies, against the one HF built */
        const char *want[8];
        int nw = 0;
        if (talker) {
            if (pen != 1.0f) want[nw++] = "RepetitionPenaltyLogitsProcessor";
            want[nw++] = "MinLengthLogitsProcessor";
            want[nw++] = "MinNewTokensLengthLogitsProcessor";
            want[nw++] = "SuppressTokensLogitsProcessor";
        }
        if (sp.do_sample) {
            if (sp.temperature != 1.0f) want[nw++] = "TemperatureLogitsWarper";
            if (sp.top_k != 0) want[nw++] = "TopKLogitsWarper";
            if (sp.top_p < 1.0f) want[nw++] = "TopPLogitsWarper";
        }
        REQUIRE((size_t)nw == procs->count, "%s: HF built %zu processors, we run %d", name,
                procs->count, nw);
        for (int k = 0; k < nw; k++) {
            const char *cls = qtts_json_get_str(procs->items[k], "class");
            REQUIRE(cls && strcmp(cls, want[k]) == 0, "%s: processor %d is %s, we run %s", name, k,
                    cls ? cls : "?", want[k]);
        }

        const qtts_tensor *tl = gtensor(&g, name, "logits", QTTS_DT_F32, N, V);
        const qtts_tensor *thl = gtensor(&g, name, "history_len", QTTS_DT_I64, N, 0);
        const qtts_tensor *tam = gtensor(&g, name, "argmax", QTTS_DT_I64, N, 0);
        char hname[256];
        snprintf(hname, sizeof hname, "%s.history", name); /* [N, longest history] */
        const qtts_tensor *th = qtts_st_find(g.st, hname);
        REQUIRE(tl && thl && tam && th && th->dtype == QTTS_DT_I64 && th->rank == 2 &&
                    th->shape[0] == N,
                "%s: tensors", name);
        const int64_t HL = th->shape[1];
        const qtts_tensor *st[8];
        for (int k = 0; k < nw; k++) {
            st[k] = gstage(&g, stages->items[k]->str, N, V);
            REQUIRE(st[k], "%s: stage %d", name, k);
        }
        const float *logits = tl->data;
        const int64_t *hist64 = th->data, *hlen = thl->data, *amax = tam->data;
        /* The draw distribution: softmax (in double) of the golden's final
         * processed scores, so exactly the tokens the reference left at -inf
         * have probability 0. */
        float *probs = malloc(sizeof(float) * (size_t)(N * V));
        REQUIRE(probs, "oom");
        for (int64_t n = 0; n < N; n++) {
            const float *fin = (const float *)st[nw - 1]->data + n * V;
            double mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < V; i++) mx = fin[i] > mx ? fin[i] : mx;
            for (int64_t i = 0; i < V; i++) sum += isinf(fin[i]) && fin[i] < 0 ? 0 : exp(fin[i] - mx);
            for (int64_t i = 0; i < V; i++)
                probs[n * V + i] = isinf(fin[i]) && fin[i] < 0 ? 0.0f : (float)(exp(fin[i] - mx) / sum);
        }

        for (int64_t n = 0; n < N; n++) {
            int32_t hist[256];
            REQUIRE(hlen[n] >= 0 && hlen[n] <= HL && hlen[n] <= 256, "%s row %lld: history length",
                    name, (long long)n);
            for (int64_t j = 0; j < hlen[n]; j++) hist[j] = (int32_t)hist64[n * HL + j];
            const float *row = logits + n * V;
            char what[128];
            int k = 0, first, d;

            memcpy(s, row, sizeof(float) * (size_t)V);
            if (talker) {
                /* stage by stage: the penalty alone, then + min length, then all */
                if (pen != 1.0f) {
                    qtts_talker_rules only_pen = {pen, 2150, 0, 0, 0};
                    memcpy(work, row, sizeof(float) * (size_t)V);
                    qtts_talker_process(work, (int)V, hist, (int)hlen[n], &only_pen);
                    d = bit_diffs(work, (const float *)st[k]->data + n * V, (int)V, &first);
                    CHECK(d == 0, "%s row %lld %s: %d diffs, first at %d", name, (long long)n,
                          want[k], d, first);
                    k++;
                }
                qtts_talker_rules no_supp = {pen, 2150, 2, 0, 0};
                memcpy(work, row, sizeof(float) * (size_t)V);
                qtts_talker_process(work, (int)V, hist, (int)hlen[n], &no_supp);
                for (int r = 0; r < 2; r++, k++) { /* MinLength and MinNewTokens agree */
                    d = bit_diffs(work, (const float *)st[k]->data + n * V, (int)V, &first);
                    CHECK(d == 0, "%s row %lld %s: %d diffs, first at %d", name, (long long)n,
                          want[k], d, first);
                }
                qtts_talker_process(s, (int)V, hist, (int)hlen[n], &rules);
                d = bit_diffs(s, (const float *)st[k]->data + n * V, (int)V, &first);
                CHECK(d == 0, "%s row %lld %s: %d diffs, first at %d", name, (long long)n, want[k], d,
                      first);
                k++;
            }

            /* each warper on the reference's previous stage */
            for (; k < nw; k++) {
                const float *prev = k ? (const float *)st[k - 1]->data + n * V : row;
                memcpy(work, prev, sizeof(float) * (size_t)V);
                if (strcmp(want[k], "TemperatureLogitsWarper") == 0)
                    qtts_apply_temperature(work, (int)V, sp.temperature);
                else if (strcmp(want[k], "TopKLogitsWarper") == 0)
                    qtts_apply_top_k(work, (int)V, sp.top_k, scratch_buf);
                else
                    qtts_apply_top_p(work, (int)V, sp.top_p, scratch_buf);
                d = bit_diffs(work, (const float *)st[k]->data + n * V, (int)V, &first);
                CHECK(d == 0, "%s row %lld %s: %d diffs, first at %d (%a vs %a)", name, (long long)n,
                      want[k], d, first, first >= 0 ? work[first] : 0.0f,
                      first >= 0 ? ((const float *)st[k]->data)[n * V + first] : 0.0f);
                n_stage_rows++;
            }

            /* qtts_sample on our processed row: greedy = the golden argmax;
             * sampled = leaves exactly the last stage and draws inside it */
            const float *last = nw ? (const float *)st[nw - 1]->data + n * V : row;
            qtts_rng r;
            qtts_rng_seed(&r, (uint64_t)(1000 * si + (size_t)n));
            float margin;
            if (sp.do_sample) {
                /* Greedy on the same processed row: the warpers keep the
                 * maximum, so it must be the golden argmax of the last stage. */
                qtts_sampler_params gsp = sp;
                gsp.do_sample = false;
                memcpy(work, s, sizeof(float) * (size_t)V);
                int gid = qtts_sample(work, (int)V, &gsp, &r, scratch_buf, &margin);
                CHECK(gid == amax[n], "%s row %lld: greedy %d vs argmax %lld", name, (long long)n,
                      gid, (long long)amax[n]);
                n_greedy++;
            }
            int id = qtts_sample(s, (int)V, &sp, &r, scratch_buf, &margin);
            if (!sp.do_sample) {
                CHECK(id == amax[n], "%s row %lld: greedy %d vs argmax %lld", name, (long long)n, id,
                      (long long)amax[n]);
                n_greedy++;
            } else {
                d = bit_diffs(s, last, (int)V, &first);
                CHECK(d == 0, "%s row %lld: qtts_sample left %d diffs to the last stage (first %d)",
                      name, (long long)n, d, first);
                CHECK(probs[n * V + id] > 0.0f, "%s row %lld: drew %d with probability 0", name,
                      (long long)n, id);
                if (n == 1 || n == 6) { /* one plain row and one with ties */
                    snprintf(what, sizeof what, "%s row %lld", name, (long long)n);
                    check_draws(what, last, probs + n * V, (int)V, 20000, 77 + (uint64_t)n);
                }
            }
        }
        free(probs);
        n_sets++;
        if (talker) n_talker++;
        else n_cp++;
    }
    CHECK(n_talker >= 1 && n_cp >= 1 && n_greedy >= 1 && n_stage_rows > 0,
          "goldens cover talker %d, cp %d, greedy rows %d, warper rows %d", n_talker, n_cp, n_greedy,
          n_stage_rows);
    if (getenv("QTTS_TEST_VERBOSE"))
        fprintf(stderr, "  goldens: %d sets, %d warper rows, %d greedy rows\n", n_sets,
                n_stage_rows, n_greedy);
    golden_close(&g);
}

int main(void) {
    TEST_RUN(test_rng_reference_values);
    TEST_RUN(test_rng_reproducible);
    TEST_RUN(test_rng_uniform_range);
    TEST_RUN(test_draw_matches_softmax);
    TEST_RUN(test_draw_after_warpers);
    TEST_RUN(test_top_k_ties_are_kept);
    TEST_RUN(test_top_k1_and_tiny_top_p_are_argmax);
    TEST_RUN(test_greedy);
    TEST_RUN(test_single_finite);
    TEST_RUN(test_all_neg_inf);
    TEST_RUN(test_nan_is_neg_inf);
    TEST_RUN(test_pos_inf);
    TEST_RUN(test_margin);
    TEST_RUN(test_temperature_stage);
    TEST_RUN(test_top_k_stage);
    TEST_RUN(test_top_k_blocks);
    TEST_RUN(test_torch_sort_order);
    TEST_RUN(test_top_p_stage);
    TEST_RUN(test_talker_rules);
    TEST_RUN(test_golden_sampler);
    TEST_END();
}
