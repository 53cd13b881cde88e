/*
 * test_oom.c - allocation failure injection (reliability goal 18: every
 * allocation is checked; its failure fails that call with
 * QTTS_ERR_NOMEM, and nothing crashes or leaks).
 *
 * qtts_alloc_fail_at(n) fails the n-th allocation from now, once. Each
 * case counts the allocations of one clean run, then repeats the run with
 * the failure armed at a sweep of positions (every one of the first 32,
 * then about 100 spread over the rest) and requires, every time: the call
 * fails with QTTS_ERR_NOMEM and a message, or succeeds (a failure that
 * was handled, e.g. an optional buffer); and after the sweep a clean run
 * gives the same PCM, bit for bit, as before it. The ASan build of this
 * test also checks that no failure path leaks.
 *
 * Cases: opening an engine (tiny CustomVoice and Base models); a session
 * plus a greedy request (windowed, streamed, and streamed with manual
 * decoding); creating a voice from reference audio (speaker and codec
 * encoders).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/base.h"
#include "qwen3_tts.h"

#define CV QTTS_FIXTURES "/models/cv06"
#define BASE QTTS_FIXTURES "/models/base06"
#define REF_WAV QTTS_FIXTURES "/audio/ref_24k_mono.wav"

typedef struct {
    float *p;
    size_t n, cap;
} pcm_buf;

static int sink(void *user, const float *pcm, size_t n) {
    pcm_buf *b = user;
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        float *p = realloc(b->p, cap * sizeof *p);   /* the test's own: not injected */
        if (!p) return 1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, pcm, n * sizeof *pcm);
    b->n += n;
    return 0;
}

/* The positions a sweep over `total` allocations tries. */
static int sweep(long total, long *at, int cap) {
    int n = 0;
    for (long i = 0; i < total && i < 32 && n < cap; i++) at[n++] = i;
    if (total > 32) {
        long step = (total - 32) / 100 + 1;
        for (long i = 32; i < total && n < cap; i += step) at[n++] = i;
    }
    return n;
}

/* One armed run's outcome: false (and a CHECK failure) on a wrong status. */
static bool outcome(qtts_status st, const qtts_error *err, const char *what, long at) {
    if (st == QTTS_OK) return true;
    CHECK(st == QTTS_ERR_NOMEM && err->msg[0], "%s, allocation %ld failing: status %d '%s'", what, at,
          (int)st, err->msg);
    return st == QTTS_ERR_NOMEM;
}

/* The engine options of every test here: one thread. */
static qtts_engine_options one_thread(void) {
    qtts_engine_options o;
    qtts_engine_options_init(&o);
    o.n_threads = 1;
    return o;
}

static void test_engine_open(void) {
    const char *models[] = {CV, BASE};
    for (int m = 0; m < 2; m++) {
        const qtts_engine_options o = one_thread();
        qtts_engine *e;
        qtts_error err;
        long c0 = qtts_alloc_count();
        REQUIRE(qtts_engine_open(models[m], &o, &e, &err) == QTTS_OK, "%s", err.msg);
        long total = qtts_alloc_count() - c0;
        qtts_engine_close(e);
        long at[256];
        int n = sweep(total, at, 256), fired = 0, failed = 0;
        for (int i = 0; i < n; i++) {
            qtts_alloc_fail_at(at[i]);
            qtts_status st = qtts_engine_open(models[m], &o, &e, &err);
            fired += qtts_alloc_fail_fired();
            qtts_alloc_fail_at(-1);
            failed += st != QTTS_OK;
            if (outcome(st, &err, models[m], at[i]) && st == QTTS_OK) qtts_engine_close(e);
        }
        fprintf(stderr, "  open %s: %ld allocations, %d positions tried, %d refused cleanly\n", models[m],
                total, n, failed);
        CHECK(fired == n, "%s: the armed failure fired %d of %d times", models[m], fired, n);
        CHECK(failed > 0, "%s: no allocation failure reached the caller", models[m]);
    }
}

/* mode 0: window delivery; 1: streamed; 2: streamed, decoded manually
 * (qtts_session_decode after each step, as the server does) */
static const char *const modes[] = {"request", "streamed request", "manually decoded request"};

static qtts_status run_request(const qtts_engine *e, int mode, pcm_buf *out, qtts_error *err) {
    qtts_session *s = qtts_session_new(e, err);
    if (!s) return err->status;
    qtts_session_set_manual_decode(s, mode == 2);
    qtts_request q;
    qtts_request_init(&q);
    q.text = "Hello world.";
    q.speaker = "vivian";
    q.do_sample = q.subtalker_do_sample = 0;
    q.max_new_tokens = 20;
    q.stream_chunk_frames = mode ? 4 : 0;
    q.on_audio = sink;
    q.user = out;
    qtts_status st = qtts_synthesize(s, &q, NULL, err);
    qtts_session_free(s);
    return st;
}

static void test_request(void) {
    const qtts_engine_options o = one_thread();
    qtts_engine *e;
    qtts_error err;
    REQUIRE(qtts_engine_open(CV, &o, &e, &err) == QTTS_OK, "%s", err.msg);
    for (int mode = 0; mode < 3; mode++) {
        pcm_buf ref = {0};
        long c0 = qtts_alloc_count();
        REQUIRE(run_request(e, mode, &ref, &err) == QTTS_OK && ref.n > 0, "%s", err.msg);
        long total = qtts_alloc_count() - c0;
        long at[256];
        int n = sweep(total, at, 256), failed = 0;
        for (int i = 0; i < n; i++) {
            pcm_buf got = {0};
            qtts_alloc_fail_at(at[i]);
            qtts_status st = run_request(e, mode, &got, &err);
            qtts_alloc_fail_at(-1);
            failed += st != QTTS_OK;
            if (outcome(st, &err, modes[mode], at[i]) && st == QTTS_OK)
                CHECK(got.n == ref.n && !memcmp(got.p, ref.p, ref.n * sizeof *ref.p),
                      "allocation %ld failing: a request that succeeded differs", at[i]);
            free(got.p);
        }
        pcm_buf after = {0};
        CHECK(run_request(e, mode, &after, &err) == QTTS_OK && after.n == ref.n &&
                  !memcmp(after.p, ref.p, ref.n * sizeof *ref.p),
              "a clean request after the sweep differs: %s", err.msg);
        fprintf(stderr, "  %s: %ld allocations, %d positions tried, %d refused cleanly\n",
                modes[mode], total, n, failed);
        CHECK(failed > 0, "no allocation failure reached the caller");
        free(after.p);
        free(ref.p);
    }
    qtts_engine_close(e);
}

static void test_voice_create(void) {
    const qtts_engine_options o = one_thread();
    qtts_engine *e;
    qtts_error err;
    REQUIRE(qtts_engine_open(BASE, &o, &e, &err) == QTTS_OK, "%s", err.msg);
    FILE *f = fopen(REF_WAV, "rb");
    REQUIRE(f, "cannot open %s", REF_WAV);
    static unsigned char audio[4 << 20];
    size_t alen = fread(audio, 1, sizeof audio, f);
    fclose(f);
    qtts_voice *v;
    long c0 = qtts_alloc_count();
    REQUIRE(qtts_voice_create(e, audio, alen, "This is the reference.", false, NULL, &v, &err) == QTTS_OK,
            "%s", err.msg);
    long total = qtts_alloc_count() - c0;
    qtts_voice_free(v);
    long at[256];
    int n = sweep(total, at, 256), failed = 0;
    for (int i = 0; i < n; i++) {
        v = NULL;
        qtts_alloc_fail_at(at[i]);
        qtts_status st = qtts_voice_create(e, audio, alen, "This is the reference.", false, NULL, &v, &err);
        qtts_alloc_fail_at(-1);
        failed += st != QTTS_OK;
        if (outcome(st, &err, "voice create", at[i])) qtts_voice_free(v);
    }
    fprintf(stderr, "  voice create: %ld allocations, %d positions tried, %d refused cleanly\n", total, n,
            failed);
    CHECK(failed > 0, "no allocation failure reached the caller");
    qtts_engine_close(e);
}

int main(void) {
    TEST_RUN(test_engine_open);
    TEST_RUN(test_request);
    TEST_RUN(test_voice_create);
    TEST_END();
}
