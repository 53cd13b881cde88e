/*
 * test_overlap.c - streamed audio decoded beside generation
 * (qtts_engine_options.serial_codec false, the default on two threads:
 * each push after the first runs on a worker lent by the pool while the
 * caller generates the next frames).
 *
 *   - the same codes and samples, in the same calls of the same sizes, as
 *     with every push between two frames (serial_codec true);
 *   - every on_audio on the thread that synthesizes;
 *   - some push delivered frames after it fell due (it ran while the
 *     frames after it were generated), where serial pushes all come when
 *     due: the overlap happens, it is not only allowed;
 *   - a callback that cancels from such a delivery fails the request there,
 *     and the session then runs the same request to the same bits;
 *   - an in-context clone (its reference frames skipped in the first push)
 *     to the same bits;
 *   - window delivery (stream_chunk_frames 0) decodes through the stream
 *     beside generation too: the same samples in the same 300-frame calls
 *     as the windows decoded between frames, past a window restart, the
 *     first window's call later than its 300th frame.
 *
 * Small enough to run under ThreadSanitizer (`make test-tsan`): the lent
 * worker and the caller share the session's stream and samples.
 */
#include <pthread.h>

#include "harness.h"
#include "qwen3_tts.h"

#define MODELS QTTS_FIXTURES "/models"
#define SPF 1920
#define MAX_CALLS 256
#define MAX_FRAMES 512

typedef struct {
    float *pcm;
    size_t n;
    int frames;
    int32_t codes[MAX_FRAMES * QTTS_NUM_CODEBOOKS];
    int calls;
    size_t sizes[MAX_CALLS];
    int at_frame[MAX_CALLS];   /* frames generated when each call came */
    int cancel_at;             /* cancel on this call (1-based), 0 = never */
    pthread_t thread;          /* the synthesizing thread */
    int other_thread;          /* calls from any other */
} sink;

static int on_frame(void *user, int k, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    sink *s = user;
    (void)k;
    if (s->frames < MAX_FRAMES)
        memcpy(s->codes + (size_t)s->frames * QTTS_NUM_CODEBOOKS, codes,
               sizeof(int32_t) * QTTS_NUM_CODEBOOKS);
    s->frames++;
    return 0;
}

static int on_audio(void *user, const float *pcm, size_t n) {
    sink *s = user;
    if (s->calls < MAX_CALLS) s->sizes[s->calls] = n, s->at_frame[s->calls] = s->frames;
    s->calls++;
    if (!pthread_equal(pthread_self(), s->thread)) s->other_thread++;
    s->pcm = realloc(s->pcm, sizeof(float) * (s->n + n));
    memcpy(s->pcm + s->n, pcm, sizeof(float) * n);
    s->n += n;
    return s->cancel_at && s->calls == s->cancel_at;
}

/* r streamed in pushes of up to `chunk` frames, the first after one
 * (chunk 0: the 300-frame windows). */
static qtts_status run_chunk(qtts_session *ses, qtts_request r, int chunk, sink *out,
                             int cancel_at, qtts_error *err) {
    memset(out, 0, sizeof *out);
    out->thread = pthread_self();
    out->cancel_at = cancel_at;
    r.stream_chunk_frames = chunk;
    r.stream_first_frames = chunk ? 1 : 0;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = out;
    return qtts_synthesize(ses, &r, NULL, err);
}

static qtts_status run(qtts_session *ses, qtts_request r, sink *out, int cancel_at,
                       qtts_error *err) {
    return run_chunk(ses, r, 12, out, cancel_at, err);
}

static bool same(const sink *a, const sink *b) {
    return a->n == b->n && a->frames == b->frames && a->frames <= MAX_FRAMES &&
           !memcmp(a->pcm, b->pcm, sizeof(float) * a->n) &&
           !memcmp(a->codes, b->codes, sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)a->frames) &&
           a->calls == b->calls && a->calls <= MAX_CALLS &&
           !memcmp(a->sizes, b->sizes, sizeof(size_t) * (size_t)a->calls);
}

/* Calls but the last (finish's) that came after more frames than all the
 * calls so far carried: a push decoded while later frames were generated. */
static int late_calls(const sink *s) {
    size_t delivered = 0;
    int late = 0;
    for (int i = 0; i < s->calls - 1 && i < MAX_CALLS; i++) {
        delivered += s->sizes[i];
        if ((size_t)s->at_frame[i] * SPF > delivered) late++;
    }
    return late;
}

static qtts_engine *open_engine(const char *dir, bool serial, qtts_error *err) {
    qtts_engine_options o;
    qtts_engine_options_init(&o);
    o.n_threads = 2;
    o.serial_codec = serial;
    qtts_engine *e = NULL;
    return qtts_engine_open(dir, &o, &e, err) ? NULL : e;
}

/* The same model opened twice on two threads: serial (every push between
 * frames) and beside generation, a session on each. */
typedef struct {
    qtts_engine *ser, *ov;
    qtts_session *ss, *so;
} pair;

static bool pair_open(pair *p, const char *dir, qtts_error *err) {
    memset(p, 0, sizeof *p);
    p->ser = open_engine(dir, true, err);
    p->ov = p->ser ? open_engine(dir, false, err) : NULL;
    p->ss = p->ov ? qtts_session_new(p->ser, err) : NULL;
    p->so = p->ss ? qtts_session_new(p->ov, err) : NULL;
    return p->so != NULL;
}

static void pair_close(pair *p) {
    qtts_session_free(p->ss);
    qtts_session_free(p->so);
    qtts_engine_close(p->ser);
    qtts_engine_close(p->ov);
}

static void test_custom_voice(void) {
    qtts_error err = {0};
    pair p;
    REQUIRE(pair_open(&p, MODELS "/cv06", &err), "%s", err.msg);
    qtts_session *ss = p.ss, *so = p.so;
    qtts_request r;
    qtts_request_init(&r);
    r.text = "A request long enough for a few pushes beside the generation.";
    r.speaker = "vivian";
    r.do_sample = 1;
    r.seed = 11;
    r.max_new_tokens = 70;
    sink a, b;
    REQUIRE(!run(ss, r, &a, 0, &err), "serial: %s", err.msg);
    CHECK(a.frames > 30 && late_calls(&a) == 0 && !a.other_thread,
          "serial: %d frames, %d late calls, %d calls off the thread", a.frames, late_calls(&a),
          a.other_thread);
    REQUIRE(!run(so, r, &b, 0, &err), "beside: %s", err.msg);
    CHECK(same(&a, &b), "beside generation: %zu vs %zu samples, %d vs %d frames, %d vs %d calls",
          b.n, a.n, b.frames, a.frames, b.calls, a.calls);
    CHECK(late_calls(&b) > 0 && !b.other_thread,
          "beside generation: %d late calls of %d, %d off the thread", late_calls(&b), b.calls,
          b.other_thread);
    free(b.pcm);

    /* cancels from the second to the fourth call: the request fails there */
    for (int at = 2; at <= 4; at++) {
        sink c;
        const qtts_status st = run(so, r, &c, at, &err);
        CHECK(st == QTTS_ERR_CANCELLED && c.calls == at && c.frames < r.max_new_tokens,
              "cancel at call %d: %d (%s), %d calls, %d frames", at, st, err.msg, c.calls,
              c.frames);
        free(c.pcm);
    }
    REQUIRE(!run(so, r, &b, 0, &err), "after the cancels: %s", err.msg);
    CHECK(same(&a, &b), "after the cancels: %zu vs %zu samples", b.n, a.n);
    free(a.pcm);
    free(b.pcm);
    pair_close(&p);
}

static void test_clone(void) {
    static unsigned char wav[1 << 21];
    FILE *f = fopen(QTTS_FIXTURES "/audio/ref_24k_mono.wav", "rb");
    REQUIRE(f, "reference audio");
    const size_t wl = fread(wav, 1, sizeof wav, f);
    fclose(f);
    qtts_error err = {0};
    pair p;
    REQUIRE(pair_open(&p, MODELS "/base06", &err), "%s", err.msg);
    qtts_session *ss = p.ss, *so = p.so;
    qtts_request r;
    qtts_request_init(&r);
    r.text = "Cloned voice, streamed beside generation.";
    r.ref_audio = wav;
    r.ref_audio_len = wl;
    r.ref_text = "This is the reference transcript.";
    r.do_sample = 0;
    r.subtalker_do_sample = 0;
    r.max_new_tokens = 40;
    sink a, b;
    REQUIRE(!run(ss, r, &a, 0, &err), "serial: %s", err.msg);
    CHECK(!run(so, r, &b, 0, &err) && same(&a, &b) && !b.other_thread && a.calls > 2,
          "clone beside generation: %zu vs %zu samples, %d calls (%s)", b.n, a.n, a.calls, err.msg);
    free(a.pcm);
    free(b.pcm);
    pair_close(&p);
}

static void test_windows(void) {
    qtts_error err = {0};
    pair p;
    REQUIRE(pair_open(&p, MODELS "/cv06", &err), "%s", err.msg);
    qtts_session *ss = p.ss, *so = p.so;
    qtts_request r;
    qtts_request_init(&r);
    r.text = "A longer request that goes past the first decode window of three hundred "
             "frames, so the window restart with its left context is streamed too.";
    r.speaker = "vivian";
    r.do_sample = 1;
    r.seed = 7;
    r.max_new_tokens = 340;
    sink a, b;
    REQUIRE(!run_chunk(ss, r, 0, &a, 0, &err), "serial: %s", err.msg);
    CHECK(a.frames > 300 && a.calls == 2 && a.at_frame[0] == 300 && !a.other_thread,
          "serial windows: %d frames, %d calls, the first at frame %d", a.frames, a.calls,
          a.at_frame[0]);
    REQUIRE(!run_chunk(so, r, 0, &b, 0, &err), "beside: %s", err.msg);
    CHECK(same(&a, &b) && b.at_frame[0] > 300 && !b.other_thread,
          "windows beside generation: %zu vs %zu samples, %d calls, the first at frame %d", b.n,
          a.n, b.calls, b.at_frame[0]);
    free(a.pcm);
    free(b.pcm);
    /* a short request: one window, at the end, the same */
    r.max_new_tokens = 30;
    REQUIRE(!run_chunk(ss, r, 0, &a, 0, &err), "serial short: %s", err.msg);
    CHECK(!run_chunk(so, r, 0, &b, 0, &err) && same(&a, &b) && b.calls == 1,
          "short window beside generation: %zu vs %zu samples, %d calls (%s)", b.n, a.n, b.calls,
          err.msg);
    free(a.pcm);
    free(b.pcm);
    pair_close(&p);
}

int main(void) {
    TEST_RUN(test_custom_voice);
    TEST_RUN(test_clone);
    TEST_RUN(test_windows);
    TEST_END();
}
