/*
 * test_kernels_conv.c - the blocked convolution and SnakeBeta paths
 * (kernels.h "Blocked convolution", conv_impl.h) on every instruction set
 * this CPU runs:
 *
 *   - each SIMD path bit for bit against the scalar table (the order of
 *     conv_impl.h), over shapes that exercise partial row groups, partial
 *     column tiles, several K blocks, dilation and accumulation;
 *   - the scalar table against a double-precision definition within the
 *     stated bound (K * 2^-24 * sum |w x| + the bias add);
 *   - column independence: a column's bits do not depend on n or on where
 *     the run starts (what makes streamed decoding exact);
 *   - thread-count independence (1, 2 and 3 threads, shared workspace);
 *   - every table also at the other reduction block sizes (kc 64, 128) it
 *     may run at, bit for bit, and the rule that picks kc from the L1;
 *   - SnakeBeta rows against qtts_snake_ref bit for bit (tails, |u| past
 *     the polynomial's range, inf/NaN), and against double sin^2;
 *   - the Winograd F(6,7), F(4,7) and F(2,7) forms of 7-tap convs and
 *     F(4,2) of 2-tap ones: every output within a forward error bound of
 *     the exact sum and near the direct conv's error, the history read
 *     (left) and the reach of the last outputs exact, frame by frame and
 *     at 3 threads the same bits as one call, partial frames refused;
 *   - bf16 convs (where the CPU has bf16 dot products; else only the refusal):
 *     against the double sum of the bf16-rounded weights and inputs
 *     within the fp32 chain's bound, against the fp32 conv within the
 *     bf16 rounding's 2^-7 * sum |w x|, column and thread independence.
 *
 * `make check-conv-emu` builds this with -DQTTS_TEST_CONV_EMU and adds the
 * AVX-512 file compiled on scalar stand-ins (tests/conv_isa_emu.h).
 */
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/thread.h"
#include "kernels/conv_impl.h"

#ifdef QTTS_TEST_CONV_EMU
extern const qtts_conv_isa qtts_conv_isa_avx512_emu;
#endif

static const qtts_conv_isa *isas[16];
static int n_isas;

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static void list_isas(void) {
    n_isas = qtts_conv_isa_usable(isas, 8);
#ifdef QTTS_TEST_CONV_EMU
    for (int i = 0; i < n_isas; i++)
        if (!strcmp(isas[i]->name, "avx2")) {
            isas[n_isas++] = &qtts_conv_isa_avx512_emu;
            printf("  added avx512 on emulated intrinsics\n");
            break;
        }
#endif
    /* Each table again at the other reduction block sizes the conv may
     * run it with (qtts_conv_kc_for): kc must not change a bit. */
    static qtts_conv_isa kc_copies[8];
    static char kc_names[8][40];
    const qtts_conv_isa *base_of[16] = {0};
    const int tables = n_isas;
    int copies = 0;
    for (int i = 0; i < tables; i++)
        for (int kc = 64; kc <= 128; kc *= 2) {
            if (kc == isas[i]->kc || copies == 8) continue;
            kc_copies[copies] = *isas[i];
            kc_copies[copies].kc = kc;
            snprintf(kc_names[copies], sizeof kc_names[copies], "%s(kc %d)", isas[i]->name, kc);
            kc_copies[copies].name = kc_names[copies];
            base_of[n_isas] = isas[i];
            isas[n_isas++] = &kc_copies[copies++];
        }
    /* qtts_conv_isa_active: the first table at this CPU's kc */
    const int active_kc = qtts_conv_isa_active()->kc;
    printf("  paths tested:");
    for (int i = 0; i < n_isas; i++) {
        const bool first = i == 0 || (i >= tables && base_of[i] == isas[0]);
        printf(" %s%s", first && isas[i]->kc == active_kc ? "*" : "", isas[i]->name);
    }
    printf("  (* = used here)\n");
}

/* The kc rule: a direct table on a 48 KB L1 takes the smaller block, any
 * other table (or an unknown or smaller L1) keeps its own. */
static void test_conv_kc_rule(void) {
    const qtts_conv_isa *ref = &qtts_conv_isa_ref;
    CHECK(!ref->direct && qtts_conv_kc_for(ref, 48 << 10) == ref->kc, "scalar table keeps kc");
    for (int i = 0; i < n_isas; i++) {
        const qtts_conv_isa *t = isas[i];
        const int big = qtts_conv_kc_for(t, 48 << 10);
        CHECK(qtts_conv_kc_for(t, 32 << 10) == t->kc, "%s: a 32 KB L1 keeps kc", t->name);
        CHECK(qtts_conv_kc_for(t, -1) == t->kc, "%s: an unknown L1 keeps kc", t->name);
        CHECK(t->direct ? big == 128 : big == t->kc, "%s: kc %d on a 48 KB L1", t->name, big);
    }
    const qtts_conv_isa *a = qtts_conv_isa_active();
    CHECK(a->kc == qtts_conv_kc_for(isas[0], sysconf(_SC_LEVEL1_DCACHE_SIZE)) &&
              !strcmp(a->name, isas[0]->name),
          "the active table is the best one at this CPU's kc");
}

static const qtts_conv_isa *ref_isa(void) { return &qtts_conv_isa_ref; }

typedef struct {
    int cout, cin, taps, dil, n;
    bool bias, accumulate;
} conv_case;

static const conv_case cases[] = {
    {1, 3, 7, 1, 5, true, false},       /* one row, one partial tile */
    {8, 8, 1, 1, 16, true, false},
    {13, 5, 7, 3, 29, true, true},      /* partial row group, accumulate */
    {17, 9, 3, 9, 8, false, false},     /* no bias */
    {24, 16, 7, 1, 61, true, false},
    {4, 2, 7, 1, 100, true, false},     /* rows < 4: the second half skipped */
    {40, 70, 7, 9, 130, true, true},    /* K = 490: two K blocks on every path */
    {96, 300, 2, 1, 100, true, false},  /* K = 600 */
    {5, 600, 1, 1, 50, true, true},     /* 1x1 with three K blocks */
    {72, 33, 7, 3, 250, true, false},   /* several column tiles */
    {9, 300, 2, 1, 40, true, true},     /* a 17-32 column tile over K blocks */
    {11, 80, 7, 1, 20, false, true},    /* a 17-32 column tile, one K block */
    /* n <= QTTS_CONV_NARROW_MAX: the narrow kernels (rows in lanes) where a
     * table has them; 13 groups = chunks of 8, 4 or 2 plus a remainder */
    {104, 37, 7, 3, 1, true, false},
    {104, 40, 2, 1, 2, false, true},
    {99, 21, 3, 9, 3, true, true},      /* partial last group */
    {13, 300, 7, 1, 4, true, false},    /* K = 2100 */
    {104, 16, 7, 1, 5, true, true},
    {30, 50, 1, 1, 6, false, false},
    {104, 33, 3, 3, 7, true, false},
    {57, 64, 7, 1, 8, true, true},
};

typedef struct {
    qtts_conv1d c;
    float *w, *b, *x, *y0;
    size_t ldx;
    int P;
} conv_data;

static bool conv_data_new(conv_data *d, const conv_case *k, uint64_t *seed) {
    memset(d, 0, sizeof(*d));
    /* one more dil than the direct conv's history: the Winograd form may
     * read it (qtts_conv_wino.left) */
    d->P = k->taps * k->dil;
    d->ldx = (size_t)k->n + d->P + 3;
    const size_t nw = (size_t)k->cout * k->cin * k->taps;
    d->w = malloc(sizeof(float) * nw);
    d->b = malloc(sizeof(float) * k->cout);
    d->x = calloc((size_t)k->cin * d->ldx, sizeof(float));
    d->y0 = malloc(sizeof(float) * (size_t)k->cout * (k->n + 2));
    for (size_t i = 0; i < nw; i++) d->w[i] = frand(seed);
    for (int i = 0; i < k->cout; i++) d->b[i] = frand(seed);
    for (int c = 0; c < k->cin; c++)
        for (int t = 0; t < k->n; t++) d->x[c * d->ldx + d->P + t] = frand(seed);
    for (size_t i = 0; i < (size_t)k->cout * (k->n + 2); i++) d->y0[i] = frand(seed);
    return qtts_conv1d_init(&d->c, d->w, k->bias ? d->b : NULL, k->cout, k->cin, k->taps, k->dil);
}

static void conv_data_free(conv_data *d) {
    qtts_conv1d_free(&d->c);
    free(d->w), free(d->b), free(d->x), free(d->y0);
}

/* y[cout, n + 2] (stride n + 2, starting from y0) after the conv on isa. */
static float *run_conv(const qtts_conv_isa *isa, const conv_data *d, const conv_case *k,
                       qtts_conv_ws *ws) {
    const size_t ldy = (size_t)k->n + 2;
    float *y = malloc(sizeof(float) * k->cout * ldy);
    memcpy(y, d->y0, sizeof(float) * k->cout * ldy);
    qtts_conv1d_run_isa(isa, &d->c, y, ldy, d->x + d->P, d->ldx, k->n, k->accumulate, ws);
    return y;
}

static void test_conv_paths(void) {
    uint64_t seed = 1;
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases); ci++) {
        const conv_case *k = &cases[ci];
        conv_data d;
        const bool inited = conv_data_new(&d, k, &seed);
        REQUIRE(inited, "init");
        const size_t ldy = (size_t)k->n + 2;
        float *ref = run_conv(ref_isa(), &d, k, NULL);
        /* scalar table against the exact sum */
        double worst = 0;
        bool untouched = true;
        for (int o = 0; o < k->cout; o++) {
            for (int t = 0; t < k->n; t++) {
                double s = 0, mag = 0;
                for (int c = 0; c < k->cin; c++)
                    for (int j = 0; j < k->taps; j++) {
                        const double p = (double)d.w[(o * k->cin + c) * k->taps + j] *
                                         d.x[c * d.ldx + d.P + t - (k->taps - 1 - j) * k->dil];
                        s += p;
                        mag += fabs(p);
                    }
                const double b = k->bias ? d.b[o] : 0, y0 = k->accumulate ? d.y0[o * ldy + t] : 0;
                const double want = y0 + (s + b);
                const double bound = (k->cin * k->taps + 2) * 0x1p-24 * (mag + fabs(b) + fabs(y0)) + 1e-30;
                worst = fmax(worst, fabs(ref[o * ldy + t] - want) / bound);
            }
            for (int t = k->n; t < k->n + 2; t++) untouched &= ref[o * ldy + t] == d.y0[o * ldy + t];
        }
        CHECK(worst <= 1.0, "case %zu: scalar table off by %.3g of its bound", ci, worst);
        CHECK(untouched, "case %zu: wrote past n", ci);
        for (int i = 0; i < n_isas; i++) {
            float *y = run_conv(isas[i], &d, k, NULL);
            CHECK(memcmp(y, ref, sizeof(float) * k->cout * ldy) == 0,
                  "case %zu: %s differs from the scalar table", ci, isas[i]->name);
            free(y);
        }
        free(ref);
        conv_data_free(&d);
    }
}

/* A column's bits do not depend on n or on where the run starts. */
static void test_conv_columns(void) {
    uint64_t seed = 2;
    const conv_case k = {40, 70, 7, 9, 130, true, false};
    conv_data d;
    const bool inited = conv_data_new(&d, &k, &seed);
    REQUIRE(inited, "init");
    for (int i = 0; i < n_isas; i++) {
        float *full = run_conv(isas[i], &d, &k, NULL);
        const size_t ldy = (size_t)k.n + 2;
        const int cuts[][2] = {{0, 1}, {0, 47}, {5, 60}, {49, 81}, {97, 130}, {20, 27}};
        for (size_t c = 0; c < QTTS_ARRAY_LEN(cuts); c++) {
            const int t0 = cuts[c][0], m = cuts[c][1] - t0;
            float *y = malloc(sizeof(float) * k.cout * m);
            qtts_conv1d_run_isa(isas[i], &d.c, y, (size_t)m, d.x + d.P + t0, d.ldx, m, false, NULL);
            bool same = true;
            for (int o = 0; o < k.cout; o++)
                same &= memcmp(y + (size_t)o * m, full + o * ldy + t0, sizeof(float) * m) == 0;
            CHECK(same, "%s: columns %d..%d alone differ", isas[i]->name, t0, cuts[c][1]);
            free(y);
        }
        free(full);
    }
    conv_data_free(&d);
}

/* Same bits at 1, 2 and 3 threads, with one workspace reused throughout. */
static void test_conv_threads(void) {
    uint64_t seed = 3;
    const conv_case cs[] = {{96, 96, 7, 3, 700, true, true}, {200, 64, 2, 1, 300, true, false},
                            {8, 512, 1, 1, 900, false, true},
                            {203, 512, 3, 1, 4, true, true},   /* narrow, on the pool */
                            {640, 256, 7, 3, 1, true, false}};
    qtts_conv_ws *ws = qtts_conv_ws_new();
    REQUIRE(ws, "workspace");
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cs); ci++) {
        conv_data d;
        const bool inited = conv_data_new(&d, &cs[ci], &seed);
        REQUIRE(inited, "init");
        for (int i = 0; i < n_isas; i++) {
            qtts_threads_init(1);
            float *y1 = run_conv(isas[i], &d, &cs[ci], ws);
            for (int th = 2; th <= 3; th++) {
                qtts_threads_init(th);
                for (int rep = 0; rep < 2; rep++) {
                    float *y = run_conv(isas[i], &d, &cs[ci], ws);
                    CHECK(memcmp(y, y1, sizeof(float) * cs[ci].cout * (cs[ci].n + 2)) == 0,
                          "case %zu: %s at %d threads differs from 1 thread", ci,
                          isas[i]->name, th);
                    free(y);
                }
            }
            free(y1);
        }
        conv_data_free(&d);
    }
    qtts_threads_init(1);
    qtts_conv_ws_free(ws);
}

/* The public entry points take the active table. */
static void test_conv_public(void) {
    uint64_t seed = 4;
    const conv_case k = {13, 5, 7, 3, 29, true, true};
    conv_data d;
    const bool inited = conv_data_new(&d, &k, &seed);
    REQUIRE(inited, "init");
    float *ref = run_conv(qtts_conv_isa_active(), &d, &k, NULL);
    const size_t ldy = (size_t)k.n + 2;
    float *y = malloc(sizeof(float) * k.cout * ldy);
    memcpy(y, d.y0, sizeof(float) * k.cout * ldy);
    qtts_conv1d_run(&d.c, y, ldy, d.x + d.P, d.ldx, k.n, true, NULL);
    CHECK(memcmp(y, ref, sizeof(float) * k.cout * ldy) == 0, "qtts_conv1d_run");
    CHECK(strcmp(qtts_conv_isa_name(), qtts_conv_isa_active()->name) == 0, "name");
    free(y), free(ref);
    conv_data_free(&d);
}

/* qtts_conv1d_run_many: the bits of one qtts_conv1d_run_isa per conv, on
 * every table and at 1-3 threads, for one shape split as a whole (1-tap
 * and dilated 7-tap convs, a conv too small to split alone), and for the
 * sets it runs one by one (few columns, mixed shapes); nothing written
 * past n. */
static void test_conv_many(void) {
    typedef struct {
        int count;
        conv_case k[4];   /* k[i] for i < 4, k[3] for the rest */
    } many_case;
    const many_case mc[] = {
        {8, {{40, 24, 1, 1, 300, false, false}, {40, 24, 1, 1, 300, false, false},
             {40, 24, 1, 1, 300, false, false}, {40, 24, 1, 1, 300, false, false}}},
        {3, {{24, 16, 7, 3, 130, true, false}, {24, 16, 7, 3, 130, true, false},
             {24, 16, 7, 3, 130, true, false}, {24, 16, 7, 3, 130, true, false}}},
        {8, {{8, 8, 1, 1, 64, false, false}, {8, 8, 1, 1, 64, false, false},
             {8, 8, 1, 1, 64, false, false}, {8, 8, 1, 1, 64, false, false}}},
        {2, {{104, 40, 1, 1, 4, false, false}, {104, 40, 1, 1, 4, false, false},
             {104, 40, 1, 1, 4, false, false}, {104, 40, 1, 1, 4, false, false}}},
        {3, {{40, 24, 1, 1, 90, true, false}, {32, 24, 1, 1, 90, true, false},
             {40, 20, 1, 1, 90, true, false}, {40, 24, 1, 1, 90, true, false}}},
        {1, {{72, 33, 7, 3, 250, true, false}}},
    };
    uint64_t seed = 9;
    qtts_conv_ws *ws = qtts_conv_ws_new();
    REQUIRE(ws, "workspace");
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(mc); ci++) {
        const int count = mc[ci].count;
        conv_data d[QTTS_CONV_MANY_MAX];
        const qtts_conv1d *c[QTTS_CONV_MANY_MAX];
        const float *x[QTTS_CONV_MANY_MAX];
        float *y[QTTS_CONV_MANY_MAX], *want[QTTS_CONV_MANY_MAX];
        const conv_case *k[QTTS_CONV_MANY_MAX];
        int P = 0, n = mc[ci].k[0].n;
        for (int i = 0; i < count; i++) {
            k[i] = &mc[ci].k[i < 4 ? i : 3];
            const bool inited = conv_data_new(&d[i], k[i], &seed);
            REQUIRE(inited, "init");
            c[i] = &d[i].c;
            P = QTTS_MAX(P, d[i].P);
        }
        /* one input stride for all: copies of the inputs with P columns of left context */
        const size_t ldx = (size_t)n + P, ldy = (size_t)n + 2;
        float *xs[QTTS_CONV_MANY_MAX];
        for (int i = 0; i < count; i++) {
            xs[i] = calloc((size_t)k[i]->cin * ldx, sizeof(float));
            for (int ch = 0; ch < k[i]->cin; ch++)
                memcpy(xs[i] + ch * ldx + P - d[i].P, d[i].x + ch * d[i].ldx,
                       sizeof(float) * (size_t)(n + d[i].P));
            x[i] = xs[i] + P;
            y[i] = malloc(sizeof(float) * k[i]->cout * ldy);
            want[i] = malloc(sizeof(float) * k[i]->cout * ldy);
        }
        for (int ii = 0; ii < n_isas; ii++) {
            qtts_threads_init(1);
            for (int i = 0; i < count; i++) {
                memcpy(want[i], d[i].y0, sizeof(float) * k[i]->cout * ldy);
                qtts_conv1d_run_isa(isas[ii], c[i], want[i], ldy, x[i], ldx, n, false, ws);
            }
            for (int th = 1; th <= 3; th++) {
                qtts_threads_init(th);
                for (int i = 0; i < count; i++) memcpy(y[i], d[i].y0, sizeof(float) * k[i]->cout * ldy);
                qtts_conv1d_run_many_isa(isas[ii], count, c, y, ldy, x, ldx, n, ws);
                bool same = true;
                for (int i = 0; i < count; i++)
                    same &= memcmp(y[i], want[i], sizeof(float) * k[i]->cout * ldy) == 0;
                CHECK(same, "case %zu: %s at %d threads differs from one conv at a time", ci,
                      isas[ii]->name, th);
            }
        }
        qtts_threads_init(1);
        for (int i = 0; i < count; i++) {
            free(xs[i]), free(y[i]), free(want[i]);
            conv_data_free(&d[i]);
        }
    }
    qtts_conv_ws_free(ws);
}

/* ==== Winograd F(6,7) / F(4,7) / F(2,7) (conv_wino.c) =================== */

typedef struct {
    int cout, cin, dil, frame, frames;
    bool bias;
    int m;                  /* the form it must take: 6 where every residue class
                             * holds 5 positions or more, else 4 where 3 or
                             * more, else 2; 4 for 2 taps */
    int taps;               /* 7, or 2 (F(4,2)) */
} wino_case;

/* y (stride n) of the Winograd form, or NULL when the run refused. */
static float *run_wino(const qtts_conv_wino *w, const conv_data *d, int n, qtts_conv_ws *ws) {
    float *y = calloc((size_t)w->cout * n, sizeof(float));
    if (!qtts_conv_wino_run(w, &d->c, y, (size_t)n, d->x + d->P, d->ldx, n, ws)) {
        free(y);
        return NULL;
    }
    return y;
}

/* The matrices of both forms, written out here independently of
 * conv_wino.c (tools/wino_derive.py derives them). */
static const double BT2[8][8] = {
    {4, 0, -21, 0, 21, 0, -4, 0},  {0, -4, -4, 17, 17, -4, -4, 0},
    {0, 4, -4, -17, 17, 4, -4, 0}, {0, 2, 1, -10, -5, 8, 4, 0},
    {0, -2, 1, 10, -5, -8, 4, 0},  {0, 4, 8, -5, -10, 1, 2, 0},
    {0, -4, 8, 5, -10, -1, 2, 0},  {0, -4, 0, 21, 0, -21, 0, 4}};
static const double G2[8][7] = {
    {1. / 4, 0, 0, 0, 0, 0, 0},
    {1. / 18, 1. / 18, 1. / 18, 1. / 18, 1. / 18, 1. / 18, 1. / 18},
    {1. / 18, -1. / 18, 1. / 18, -1. / 18, 1. / 18, -1. / 18, 1. / 18},
    {1. / 360, 2. / 360, 4. / 360, 8. / 360, 16. / 360, 32. / 360, 64. / 360},
    {1. / 360, -2. / 360, 4. / 360, -8. / 360, 16. / 360, -32. / 360, 64. / 360},
    {64. / 180, 32. / 180, 16. / 180, 8. / 180, 4. / 180, 2. / 180, 1. / 180},
    {64. / 180, -32. / 180, 16. / 180, -8. / 180, 4. / 180, -2. / 180, 1. / 180},
    {0, 0, 0, 0, 0, 0, 1. / 4}};
static const double AT2[2][8] = {{1, 1, 1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, .5, -.5, 1}};
static const double BT4[10][10] = {
    {36, 0, -205, 0, 273, 0, -120, 0, 16, 0},     {0, -36, -36, 169, 169, -104, -104, 16, 16, 0},
    {0, 36, -36, -169, 169, 104, -104, -16, 16, 0}, {0, -18, -9, 98, 49, -112, -56, 32, 16, 0},
    {0, 18, -9, -98, 49, 112, -56, -32, 16, 0},    {0, 36, 72, -61, -122, 29, 58, -4, -8, 0},
    {0, -36, 72, 61, -122, -29, 58, 4, -8, 0},     {0, 12, 8, -63, -42, 63, 42, -12, -8, 0},
    {0, -12, 8, 63, -42, -63, 42, 12, -8, 0},      {0, 36, 0, -205, 0, 273, 0, -120, 0, 16}};
/* row i: point p_i, G_i[k] = p_i^k * GS4[i] (infinity: only k = 6) */
static const double P4[9] = {0, 1, -1, 2, -2, .5, -.5, 1.5, -1.5};
static const double GS4[10] = {1. / 36,   1. / 90,   1. / 90,    1. / 2520, 1. / 2520,
                               2. / 45,   2. / 45,   2. / 315,   2. / 315,  1. / 16};
static const double AT4[4][10] = {{1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
                                  {0, 1, -1, 2, -2, .5, -.5, 1.5, -1.5, 0},
                                  {0, 1, 1, 4, 4, .25, .25, 2.25, 2.25, 0},
                                  {0, 1, -1, 8, -8, .125, -.125, 3.375, -3.375, 1}};

static const double BT6[12][12] = {
    {324, 0, -2421, 0, 5737, 0, -5448, 0, 2064, 0, -256, 0},
    {0, 324, 324, -2097, -2097, 3640, 3640, -1808, -1808, 256, 256, 0},
    {0, -324, 324, 2097, -2097, -3640, 3640, 1808, -1808, -256, 256, 0},
    {0, 162, 81, -1170, -585, 2576, 1288, -2080, -1040, 512, 256, 0},
    {0, -162, 81, 1170, -585, -2576, 1288, 2080, -1040, -512, 256, 0},
    {0, 324, 648, -1125, -2250, 1237, 2474, -500, -1000, 64, 128, 0},
    {0, -324, 648, 1125, -2250, -1237, 2474, 500, -1000, -64, 128, 0},
    {0, -108, -72, 759, 506, -1575, -1050, 1116, 744, -192, -128, 0},
    {0, 108, -72, -759, 506, 1575, -1050, -1116, 744, 192, -128, 0},
    {0, -108, -144, 615, 820, -819, -1092, 360, 480, -48, -64, 0},
    {0, 108, -144, -615, 820, 819, -1092, -360, 480, 48, -64, 0},
    {0, -324, 0, 2421, 0, -5737, 0, 5448, 0, -2064, 0, 256}};
static const double P6[11] = {0, 1, -1, 2, -2, .5, -.5, 1.5, -1.5, .75, -.75};
static const double GS6[12] = {1. / 324,    1. / 630,    1. / 630,          1. / 138600,
                               1. / 138600, 2. / 225,    2. / 225,          2. / 8505,
                               2. / 8505,   8192. / 467775, 8192. / 467775, 1. / 256};

static const double BT42[5][5] = {{2, -1, -2, 1, 0}, {0, 2, 1, -1, 0}, {0, -2, 3, -1, 0},
                                  {0, -1, 0, 1, 0},  {0, 2, -1, -2, 1}};
static const double G42[5][2] = {{.5, 0}, {.5, .5}, {1. / 6, -1. / 6}, {1. / 6, 1. / 3}, {0, 1}};
static const double AT42[4][5] = {{1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 0}, {0, 1, -1, 8, 1}};

/* G[i][k] of F(M,R) */
static double wino_g(int R, int M, int i, int k) {
    if (R == 2) return G42[i][k];
    if (M == 2) return G2[i][k];
    if (i == M + 5) return k == 6 ? (M == 4 ? GS4[9] : GS6[11]) : 0;
    return M == 4 ? pow(P4[i], k) * GS4[i] : pow(P6[i], k) * GS6[i];
}

/* Bᵀ[i][q] of F(M,R) */
static double wino_bt(int R, int M, int i, int q) {
    if (R == 2) return BT42[i][q];
    return M == 6 ? BT6[i][q] : M == 4 ? BT4[i][q] : BT2[i][q];
}

/* Aᵀ[h][i] of F(M,R): p_i^h, 1 for point 0 in row 0 and for infinity in
 * the last row */
static double wino_at(int R, int M, int h, int i) {
    if (R == 2) return AT42[h][i];
    if (M == 2) return AT2[h][i];
    if (M == 4) return AT4[h][i];
    if (i == 11) return h == 5;
    return i == 0 ? h == 0 : pow(P6[i], h);
}

/* Winograd against the exact sum, by case; the worst rms error ratio to
 * the direct conv's of each form in worst[] (F(2,7), F(4,7), F(6,7), F(4,2)). */
static void test_conv_wino(void) {
    uint64_t seed = 11;
    const wino_case cs[] = {
        {16, 12, 1, 32, 3, true, 6, 7},    /* d = 1: groups of 6, the last over columns 26-31 */
        {13, 20, 3, 32, 2, true, 6, 7},    /* partial row group; classes of 11, 11, 10 */
        {24, 9, 9, 160, 2, false, 6, 7},   /* no bias; classes of 18 and 17 */
        {9, 6, 2, 14, 2, true, 6, 7},      /* classes of 7 */
        {10, 8, 5, 31, 2, true, 6, 7},     /* classes of 7 and 6 */
        {7, 10, 3, 18, 3, true, 6, 7},     /* frame = 6d: classes of 6 */
        {12, 9, 3, 17, 2, true, 6, 7},     /* classes of 6, 6, 5: the 5 reads one more */
        {9, 14, 4, 20, 2, false, 6, 7},    /* frame = 5d: every class reads one more */
        {16, 12, 1, 5, 4, true, 6, 7},     /* d = 1, frame 5 */
        {7, 11, 3, 13, 3, true, 4, 7},     /* F(4,7), classes of 5, 4, 4 */
        {8, 10, 1, 4, 5, true, 4, 7},      /* d = 1, frame 4 */
        {11, 9, 9, 35, 2, true, 4, 7},     /* classes of 4 and 3: the 3 reads one more */
        {10, 16, 9, 32, 2, true, 4, 7},    /* the codec's first block at d = 9: the same */
        {8, 40, 9, 20, 5, true, 2, 7},     /* F(2,7), classes of 3 and 2 */
        {5, 7, 3, 6, 3, true, 2, 7},       /* frame = 2d: classes of 2 */
        {6, 5, 3, 7, 4, true, 2, 7},       /* classes of 3, 2, 2 */
        {64, 64, 1, 1920, 2, true, 6, 7},  /* a chunk per frame (6 MB scratch each) */
        {16, 12, 1, 32, 3, true, 4, 2},    /* 2 taps: F(4,2), 8 groups a frame */
        {21, 9, 1, 4, 4, false, 4, 2},     /* one group a frame, no bias */
        {10, 13, 1, 7, 3, true, 4, 2},     /* 7: a last group over columns 3-6 */
        {9, 8, 1, 3, 5, true, 4, 2},       /* 3: the group reads one column more */
        {40, 24, 1, 640, 2, true, 4, 2},
    };
    qtts_conv_ws *ws = qtts_conv_ws_new();
    REQUIRE(ws, "workspace");
    double worst[4] = {0, 0, 0, 0};   /* F(2,7), F(4,7), F(6,7), F(4,2) */
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cs); ci++) {
        const wino_case *k = &cs[ci];
        const int n = k->frame * k->frames;
        const int R = k->taps;
        const conv_case kc = {k->cout, k->cin, R, k->dil, n, k->bias, false};
        conv_data d;
        const bool inited = conv_data_new(&d, &kc, &seed);
        REQUIRE(inited, "init");
        qtts_conv_wino w;
        REQUIRE(qtts_conv_wino_init(&w, &d.c, k->frame), "case %zu: wino init", ci);
        const int M = k->m, N = M + R - 1;
        REQUIRE(w.m == M && w.npt == N && w.taps == R, "case %zu: F(%d,%d), want F(%d,%d)", ci,
                w.m, w.taps, M, R);
        int want_groups = 0;
        for (int r = 0; r < k->dil; r++)   /* ceil(class length / M) per residue class */
            want_groups += ((k->frame - r + k->dil - 1) / k->dil + M - 1) / M;
        CHECK(w.ngroups == want_groups, "case %zu: %d groups, want %d", ci, w.ngroups,
              want_groups);
        /* the leftmost input a group reads: class r's first group starts
         * at its position min(0, len - M), and reads from R - 1 before it */
        int want_left = 0;
        for (int r = 0; r < k->dil; r++) {
            const int len = (k->frame - r + k->dil - 1) / k->dil;
            want_left = QTTS_MAX(want_left, (R - 1 - QTTS_MIN(0, len - M)) * k->dil - r);
        }
        CHECK(w.left == want_left && w.left <= d.P, "case %zu: left %d, want %d", ci, w.left,
              want_left);
        qtts_threads_init(1);
        float *y = run_wino(&w, &d, n, ws);
        REQUIRE(y, "case %zu: run", ci);
        float *yd = calloc((size_t)k->cout * n, sizeof(float));
        qtts_conv1d_run(&d.c, yd, (size_t)n, d.x + d.P, d.ldx, n, false, ws);

        /* against the exact sum: every output within the forward bound
         * (cin + 16) 2^-24 E, E the sum of |every term| of the Winograd
         * computation that gave it (|A| |W_i| |Bᵀ| |s|, W_i = G_i w exact),
         * in the group of M positions of its class that gave it: the
         * (m / M)-th, or for the last len % M of a class the group over its
         * last M. (The longest chain of roundings: the input transform 4,
         * W_i 1, the GEMM's sum cin, the output transform and the bias 6.) */
        const int dl = k->dil;
        double e2w = 0, e2d = 0;
        bool bound_ok = true;
        double *wi = malloc(sizeof(double) * (size_t)N * k->cin);
        REQUIRE(wi, "alloc");
        for (int co = 0; co < k->cout; co++) {
            for (int c = 0; c < k->cin; c++)
                for (int i = 0; i < N; i++) {
                    double s = 0;
                    for (int tap = 0; tap < R; tap++)
                        s += wino_g(R, M, i, tap) * d.w[((size_t)co * k->cin + c) * R + tap];
                    wi[(size_t)c * N + i] = s;
                }
            for (int t = 0; t < n; t++) {
                const int tf = t % k->frame, r = tf % dl, m = tf / dl;
                const int len = (k->frame - r + dl - 1) / dl;
                const int h = m >= len / M * M ? m - (len - M) : m % M;   /* its place in the group */
                const int t0 = t - h * dl;                                /* the group's first */
                double ex = k->bias ? d.b[co] : 0, mag = 0;
                for (int c = 0; c < k->cin; c++)
                    for (int tap = 0; tap < R; tap++)
                        ex += (double)d.w[((size_t)co * k->cin + c) * R + tap] *
                              d.x[c * d.ldx + d.P + t - (R - 1 - tap) * dl];
                const float got = y[(size_t)co * n + t], dir = yd[(size_t)co * n + t];
                for (int c = 0; c < k->cin; c++)
                    for (int i = 0; i < N; i++) {
                        double bs = 0;
                        for (int q = 0; q < N; q++)
                            bs += fabs(wino_bt(R, M, i, q) *
                                       d.x[c * d.ldx + d.P + t0 + (q - R + 1) * dl]);
                        mag += fabs(wino_at(R, M, h, i) * wi[(size_t)c * N + i]) * bs;
                    }
                const double err = fabs(got - ex);
                bound_ok &= err <= (k->cin + 16) * 0x1p-24 * (mag + fabs(ex));
                e2w += err * err;
                e2d += (dir - ex) * (dir - ex);
            }
        }
        free(wi);
        CHECK(bound_ok, "case %zu: an output outside the forward error bound", ci);
        const int form = R == 2 ? 3 : M / 2 - 1;
        if (e2d > 0) worst[form] = fmax(worst[form], sqrt(e2w / e2d));

        /* qtts_conv_wino_reach, exactly: the last nn outputs keep their
         * bits when every input column left of the reach changes, and
         * some of them change with the reach's leftmost column */
        const int nns[] = {1, 2, k->frame - 1, k->frame, k->frame + 1, 2 * k->frame - 1};
        for (size_t a = 0; a < QTTS_ARRAY_LEN(nns); a++) {
            const int nn = nns[a], reach = nn >= 1 && nn <= n ? qtts_conv_wino_reach(&w, nn) : 0;
            if (!reach || reach + 1 > n + d.P) continue;
            const int col = n - reach;   /* the leftmost column the outputs depend on */
            CHECK(reach >= nn + (R - 1) * dl && reach <= nn + (M + R - 3) * dl,
                  "case %zu: reach %d of %d columns", ci, reach, nn);
            for (int side = 0; side < 2; side++) {
                const int c0 = side ? col : col - 1;   /* one left of the reach, or its first */
                for (int c = 0; c < k->cin; c++) d.x[c * d.ldx + d.P + c0] += 1.0f;
                float *yp = run_wino(&w, &d, n, ws);
                for (int c = 0; c < k->cin; c++) d.x[c * d.ldx + d.P + c0] -= 1.0f;
                REQUIRE(yp, "case %zu: run", ci);
                bool same = true;
                for (int co = 0; co < k->cout; co++)
                    same &= !memcmp(yp + (size_t)co * n + n - nn, y + (size_t)co * n + n - nn,
                                    sizeof(float) * nn);
                CHECK(same == !side, "case %zu: the last %d outputs %s with column %d of %d "
                      "(reach %d)", ci, nn, same ? "unchanged" : "changed", c0, n, reach);
                free(yp);
            }
        }

        /* frame by frame (as a stream pushes), and at 3 threads: same bits */
        float *yf = calloc((size_t)k->cout * n, sizeof(float));
        for (int f = 0; f < k->frames; f++) {
            const size_t off = (size_t)f * k->frame;
            REQUIRE(qtts_conv_wino_run(&w, &d.c, yf + off, (size_t)n, d.x + d.P + off, d.ldx,
                                       k->frame, ws),
                    "case %zu: frame %d", ci, f);
        }
        CHECK(memcmp(yf, y, sizeof(float) * k->cout * n) == 0,
              "case %zu: frame by frame differs from one call", ci);
        /* 2 and 3 threads: with frames >= threads each thread runs its own
         * frames alone (conv_wino.c, run_own); also with the tasks on the
         * caller (local serial), where one thread steals every range */
        float *y3 = NULL;
        for (int th = 2; th <= 3; th++)
            for (int serial = 0; serial <= (th == 2); serial++) {
                qtts_threads_init(th);
                qtts_threads_set_local_serial(serial);
                free(y3);
                y3 = run_wino(&w, &d, n, ws);
                qtts_threads_set_local_serial(false);
                REQUIRE(y3, "case %zu: run at %d threads", ci, th);
                CHECK(memcmp(y3, y, sizeof(float) * k->cout * n) == 0,
                      "case %zu: %d threads%s differ", ci, th, serial ? " (on the caller)" : "");
            }
        qtts_threads_init(1);
        /* not whole frames: refused, nothing written */
        if (k->frame > 1) CHECK(!run_wino(&w, &d, n - 1, ws), "case %zu: partial frame run", ci);
        free(y), free(yd), free(yf), free(y3);
        qtts_conv_wino_free(&w);
        qtts_conv_wino_free(&w);   /* idempotent */
        conv_data_free(&d);
    }
    /* The rms error against the exact sum, over the direct conv's. F(2,7):
     * measured 2.1x with 64 input channels and 2.3-4.4x with 5-40 (few
     * terms, few outputs: a noisy ratio); 6x leaves room for that noise.
     * F(4,7) has larger transform coefficients (up to 273 in Bᵀ, 27/8 in
     * Aᵀ), so more rounding: these cases measure 12.8x at worst (a model of
     * the fp32 arithmetic on random data, tools/wino_derive.py, put it near
     * 4 times F(2,7)'s); 25x leaves room for the same noise. F(6,7), with
     * coefficients up to 5737 in Bᵀ and 243/32 in Aᵀ, measures 32.2x (the
     * model: 35-39x, about twice F(4,7)'s); 60x leaves the same room. A
     * transform computed at lower precision (bf16, say) or a wrong
     * coefficient is off by orders of magnitude, and every output is held
     * to the forward bound above either way. F(4,2) (Bᵀ up to 3, Aᵀ up to
     * 8) measures 2.7x (the model: 2.5x); 6x, as F(2,7). */
    printf("  winograd rms error / direct conv's, worst case: F(2,7) %.2f, F(4,7) %.2f, "
           "F(6,7) %.2f, F(4,2) %.2f\n", worst[0], worst[1], worst[2], worst[3]);
    CHECK(worst[0] <= 6.0, "F(2,7) error %.2fx the direct conv's", worst[0]);
    CHECK(worst[1] <= 25.0, "F(4,7) error %.2fx the direct conv's", worst[1]);
    CHECK(worst[2] <= 60.0, "F(6,7) error %.2fx the direct conv's", worst[2]);
    CHECK(worst[3] <= 6.0, "F(4,2) error %.2fx the direct conv's", worst[3]);

    /* other convs are refused */
    uint64_t s2 = 12;
    const conv_case k3 = {8, 8, 3, 1, 16, true, false};
    conv_data d3;
    REQUIRE(conv_data_new(&d3, &k3, &s2), "init");
    qtts_conv_wino w3;
    CHECK(!qtts_conv_wino_applies(&d3.c, 16) && !qtts_conv_wino_init(&w3, &d3.c, 16),
          "3 taps accepted");
    CHECK(w3.frame == 0 && w3.pt[0].w == NULL, "a refused init leaves w empty");
    conv_data_free(&d3);
    const conv_case k7 = {8, 8, 7, 3, 16, true, false};
    REQUIRE(conv_data_new(&d3, &k7, &s2), "init");
    CHECK(qtts_conv_wino_applies(&d3.c, 4096) && !qtts_conv_wino_applies(&d3.c, 4097) &&
              qtts_conv_wino_applies(&d3.c, 6) && !qtts_conv_wino_applies(&d3.c, 5),
          "frame limits (2 dil to 4096)");
    CHECK(!qtts_conv_wino_init(&w3, &d3.c, 4097) && w3.frame == 0, "frame 4097 accepted");
    conv_data_free(&d3);
    const conv_case k2 = {8, 8, 2, 1, 16, true, false}, k2d = {8, 8, 2, 2, 16, true, false};
    REQUIRE(conv_data_new(&d3, &k2, &s2), "init");
    CHECK(qtts_conv_wino_applies(&d3.c, 3) && !qtts_conv_wino_applies(&d3.c, 2) &&
              qtts_conv_wino_applies(&d3.c, 4096) && !qtts_conv_wino_applies(&d3.c, 4097),
          "2-tap frame limits (3 to 4096)");
    conv_data_free(&d3);
    REQUIRE(conv_data_new(&d3, &k2d, &s2), "init");
    CHECK(!qtts_conv_wino_applies(&d3.c, 16), "a 2-tap conv of dilation 2 accepted");
    conv_data_free(&d3);
    qtts_conv_ws_free(ws);
}

/* Many frames of a large frame at 2 threads: each thread's steals hold
 * several of its one-frame chunks (conv_wino.c, run_own); the bits of one
 * thread. */
static void test_conv_wino_own(void) {
    uint64_t seed = 12;
    const int frame = 800, frames = 16, n = frame * frames;
    const conv_case kc = {64, 64, 7, 1, n, true, false};
    conv_data d;
    const bool inited = conv_data_new(&d, &kc, &seed);
    REQUIRE(inited, "init");
    qtts_conv_wino w;
    REQUIRE(qtts_conv_wino_init(&w, &d.c, frame), "wino init");
    qtts_conv_ws *ws = qtts_conv_ws_new();
    REQUIRE(ws, "workspace");
    qtts_threads_init(1);
    float *y1 = run_wino(&w, &d, n, ws);
    qtts_threads_init(2);
    float *y2 = run_wino(&w, &d, n, ws), *y2b = run_wino(&w, &d, n, ws);
    qtts_threads_init(1);
    REQUIRE(y1 && y2 && y2b, "runs");
    CHECK(memcmp(y2, y1, sizeof(float) * kc.cout * n) == 0, "2 threads differ from 1");
    CHECK(memcmp(y2b, y1, sizeof(float) * kc.cout * n) == 0, "a second run differs");
    free(y1), free(y2), free(y2b);
    qtts_conv_ws_free(ws);
    qtts_conv_wino_free(&w);
    conv_data_free(&d);
}

/* bf16 round to nearest even, as the conversion in conv.c and VCVTNE2PS2BF16 */
static double bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static void test_conv_bf16(void) {
    if (!qtts_conv_bf16_usable()) {
        uint64_t seed = 5;
        conv_data d;
        const bool inited = conv_data_new(&d, &cases[0], &seed);
        REQUIRE(inited, "init");
        const float *w = d.c.w;
        CHECK(!qtts_conv1d_to_bf16(&d.c) && d.c.w == w && !d.c.wb, "refused without bf16 dot products");
        conv_data_free(&d);
        fprintf(stderr, "  bf16 convs: this CPU has no bf16 dot products, only the refusal checked\n");
        return;
    }
    uint64_t seed = 5;
    const conv_case extra[] = {{16, 7, 1, 1, 33, true, false},   /* K = 7: odd, one pair half empty */
                               {104, 7, 3, 1, 3, true, false},   /* K = 21, narrow */
                               {99, 9, 1, 1, 6, false, true},    /* K = 9, narrow, partial group */
                               {24, 3, 7, 2, 90, true, true},    /* K = 21 */
                               {8, 257, 1, 1, 20, false, false}, /* K = 257: odd across K blocks */
                               {96, 96, 7, 3, 700, true, true}};
    for (size_t ci = 0; ci < QTTS_ARRAY_LEN(cases) + QTTS_ARRAY_LEN(extra); ci++) {
        const conv_case *k = ci < QTTS_ARRAY_LEN(cases) ? &cases[ci] : &extra[ci - QTTS_ARRAY_LEN(cases)];
        conv_data d;
        const bool inited = conv_data_new(&d, k, &seed);
        REQUIRE(inited, "init");
        REQUIRE(qtts_conv1d_to_bf16(&d.c) && d.c.wb && !d.c.w, "case %zu: conversion", ci);
        const size_t ldy = (size_t)k->n + 2;
        float *y = malloc(sizeof(float) * k->cout * ldy);
        memcpy(y, d.y0, sizeof(float) * k->cout * ldy);
        qtts_conv1d_run(&d.c, y, ldy, d.x + d.P, d.ldx, k->n, k->accumulate, NULL);
        double worst_b = 0, worst_f = 0;
        bool untouched = true;
        for (int o = 0; o < k->cout; o++) {
            for (int t = 0; t < k->n; t++) {
                double sb = 0, magb = 0, sf = 0, magf = 0;
                for (int c = 0; c < k->cin; c++)
                    for (int j = 0; j < k->taps; j++) {
                        const float wv = d.w[(o * k->cin + c) * k->taps + j];
                        const float xv = d.x[c * d.ldx + d.P + t - (k->taps - 1 - j) * k->dil];
                        sb += bf16(wv) * bf16(xv);
                        magb += fabs(bf16(wv) * bf16(xv));
                        sf += (double)wv * xv;
                        magf += fabs((double)wv * xv);
                    }
                const double b = k->bias ? d.b[o] : 0, y0 = k->accumulate ? d.y0[o * ldy + t] : 0;
                const double got = y[o * ldy + t];
                /* the fp32 chain over K products (pairs summed in either
                 * order) plus the bias and accumulate adds */
                const double bound_b =
                    (k->cin * k->taps + 4) * 0x1p-24 * (magb + fabs(b) + fabs(y0)) + 1e-30;
                worst_b = fmax(worst_b, fabs(got - (y0 + (sb + b))) / bound_b);
                /* and the rounding of each weight and input to bf16 (8
                 * significant bits: each within 2^-8 relative) */
                const double bound_f = 0x1.01p-7 * magf + bound_b;
                worst_f = fmax(worst_f, fabs(got - (y0 + (sf + b))) / bound_f);
            }
            for (int t = k->n; t < k->n + 2; t++) untouched &= y[o * ldy + t] == d.y0[o * ldy + t];
        }
        CHECK(worst_b <= 1.0, "case %zu: bf16 conv off the bf16 inputs' sum by %.3g of its bound", ci,
              worst_b);
        CHECK(worst_f <= 1.0, "case %zu: bf16 conv off the fp32 sum by %.3g of its bound", ci, worst_f);
        CHECK(untouched, "case %zu: wrote past n", ci);
        /* a column's bits do not depend on where the run starts or on n */
        const int t0 = k->n / 3, m = k->n - t0;
        float *part = malloc(sizeof(float) * k->cout * m);
        qtts_conv1d_run(&d.c, part, (size_t)m, d.x + d.P + t0, d.ldx, m, false, NULL);
        bool same = true;
        for (int o = 0; o < k->cout && !k->accumulate; o++)
            same &= memcmp(part + (size_t)o * m, y + o * ldy + t0, sizeof(float) * m) == 0;
        CHECK(same, "case %zu: columns %d.. alone differ", ci, t0);
        /* 1 and 7 columns alone (the narrow kernel where the table has one)
         * against the same columns of the tiles' run */
        for (int w = 1; w <= 7 && k->n > QTTS_CONV_NARROW_MAX && !k->accumulate; w += 6) {
            float *few = malloc(sizeof(float) * k->cout * w);
            qtts_conv1d_run(&d.c, few, (size_t)w, d.x + d.P + t0, d.ldx, w, false, NULL);
            bool same_few = true;
            for (int o = 0; o < k->cout; o++)
                same_few &= memcmp(few + (size_t)o * w, y + o * ldy + t0, sizeof(float) * w) == 0;
            CHECK(same_few, "case %zu: %d columns alone differ from the tiles'", ci, w);
            free(few);
        }
        /* nor on the thread count */
        qtts_threads_init(2);
        float *y2 = malloc(sizeof(float) * k->cout * ldy);
        memcpy(y2, d.y0, sizeof(float) * k->cout * ldy);
        qtts_conv1d_run(&d.c, y2, ldy, d.x + d.P, d.ldx, k->n, k->accumulate, NULL);
        CHECK(memcmp(y2, y, sizeof(float) * k->cout * ldy) == 0, "case %zu: 2 threads differ", ci);
        qtts_threads_init(1);
        free(part), free(y2), free(y);
        conv_data_free(&d);
    }
}

static void test_snake(void) {
    enum { N = 37, C = 6 };
    uint64_t seed = 5;
    float x[C][N], ea[C], ib[C];
    for (int c = 0; c < C; c++) {
        ea[c] = expf(2.0f * frand(&seed));
        ib[c] = 1.0f / (expf(frand(&seed)) + 1e-9f);
        for (int t = 0; t < N; t++) x[c][t] = 12.0f * frand(&seed);
    }
    /* the polynomial's edges, its range limit and the libm fallback */
    x[0][0] = 0.0f, x[0][1] = -0.0f, x[0][2] = 1e-30f, x[0][3] = 3.0f * 1.5707963f;
    x[1][0] = 9000.0f, x[1][1] = -1e6f, x[1][2] = 8191.99f, x[1][3] = 1e30f;
    x[2][5] = INFINITY, x[2][6] = -INFINITY, x[2][7] = NAN;
    ea[1] = 1.0f;
    /* against double precision (finite values) */
    double e = 0;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < N; t++) {
            const float v = qtts_snake_ref(x[c][t], ea[c], ib[c]);
            if (!isfinite(x[c][t])) {
                CHECK(isnan(v) || isinf(x[c][t]), "snake(%g) = %g", x[c][t], v);
                continue;
            }
            const double u = (double)ea[c] * x[c][t], s = sin(u);
            const double want = x[c][t] + (double)ib[c] * s * s;
            /* the argument u is rounded to fp32 first: sin' = cos */
            const double tol = 4 * 0x1p-24 * (fabs(want) + ib[c] * (1 + fabs(u)));
            e = fmax(e, fabs(v - want) / tol);
        }
    CHECK(e <= 1.0, "snake ref off by %.3g of its bound", e);
    /* every path, every row length (tails), bit for bit */
    for (int i = 0; i < n_isas; i++)
        for (int n = 0; n <= N; n++) {
            float y[C][N + 1];
            for (int c = 0; c < C; c++) y[c][n] = 7.0f;
            qtts_snake_run_isa(isas[i], &y[0][0], N + 1, &x[0][0], N, ea, ib, C, n);
            bool same = true;
            for (int c = 0; c < C; c++) {
                for (int t = 0; t < n; t++) {
                    const float r = qtts_snake_ref(x[c][t], ea[c], ib[c]);
                    same &= memcmp(&y[c][t], &r, 4) == 0 || (isnan(r) && isnan(y[c][t]));
                }
                same &= y[c][n] == 7.0f;
            }
            CHECK(same, "%s: snake rows of %d differ from qtts_snake_ref", isas[i]->name, n);
        }
    /* in place, through the public entry */
    float z[C][N];
    memcpy(z, x, sizeof(z));
    qtts_snake_run(&z[0][0], N, &z[0][0], N, ea, ib, C, N);
    bool same = true;
    for (int c = 0; c < C; c++)
        for (int t = 0; t < N; t++) {
            const float r = qtts_snake_ref(x[c][t], ea[c], ib[c]);
            same &= memcmp(&z[c][t], &r, 4) == 0 || (isnan(r) && isnan(z[c][t]));
        }
    CHECK(same, "in-place qtts_snake_run");
}

/* Large rows through the pool: same bits at any thread count. */
static void test_snake_threads(void) {
    const int C = 64, n = 1000;
    uint64_t seed = 6;
    float *x = malloc(sizeof(float) * C * n), *y1 = malloc(sizeof(float) * C * n),
          *y2 = malloc(sizeof(float) * C * n), ea[64], ib[64];
    for (int i = 0; i < C * n; i++) x[i] = 5.0f * frand(&seed);
    for (int c = 0; c < C; c++) ea[c] = 1.0f + frand(&seed), ib[c] = 0.5f;
    qtts_threads_init(1);
    qtts_snake_run(y1, n, x, n, ea, ib, C, n);
    qtts_threads_init(2);
    qtts_snake_run(y2, n, x, n, ea, ib, C, n);
    qtts_threads_init(1);
    CHECK(memcmp(y1, y2, sizeof(float) * C * n) == 0, "snake at 2 threads differs");
    free(x), free(y1), free(y2);
}

int main(void) {
    list_isas();
    TEST_RUN(test_conv_paths);
    TEST_RUN(test_conv_columns);
    TEST_RUN(test_conv_threads);
    TEST_RUN(test_conv_public);
    TEST_RUN(test_conv_many);
    TEST_RUN(test_conv_kc_rule);
    TEST_RUN(test_conv_wino);
    TEST_RUN(test_conv_wino_own);
    TEST_RUN(test_conv_bf16);
    TEST_RUN(test_snake);
    TEST_RUN(test_snake_threads);
    qtts_threads_shutdown();
    TEST_END();
}
