/*
 * test_stream.c - low-latency audio (qtts_request.stream_chunk_frames):
 * the codec decodes frames as they are generated, and the samples are the
 * window delivery's bit for bit.
 *
 *   - cv06 and cv17, greedy golden texts and a sampled request that runs
 *     past the 300-frame window restart: for (chunk, first) in a few
 *     settings the concatenated PCM and the codes memcmp-equal the default
 *     (window) delivery; the first on_audio comes when exactly `first`
 *     frames exist (1 by default) and carries first * 1920
 *     samples; every later one but the last carries twice the frames of
 *     the one before, at most chunk;
 *   - a session switches between streaming and window requests and
 *     between chunk sizes (the stream is reset and regrown);
 *   - in-context cloning (base06) streams too: the first audio after the
 *     first frame, the window delivery's samples less at most its first
 *     one (test_clone.c has when), the reference frames decoded once per
 *     session and reference;
 *   - out-of-range settings are refused before anything runs; a callback
 *     that cancels from a streamed push fails the request;
 *   - speed (tempo at the same pitch): the same codes as without it, 1/speed
 *     of the samples, exactly the plain audio through io/stretch.h in one
 *     piece, streamed == window delivery bit for bit (past a window restart
 *     too), result.n_samples counts what was delivered; in-context
 *     cloning too; out-of-range speeds refused; cancelling from a callback
 *     fed by the tempo change works;
 *   - manual decoding (qtts_session_set_manual_decode): no audio from
 *     inside a step, the due count follows the push schedule (and the
 *     window's), decoding it whole, in pieces or later gives the same bits
 *     (past a window restart too); the setting applies from the next
 *     start; synthesize on a manual session; a cancel from a manual
 *     decode fails the request.
 */
#include "harness.h"
#include "qwen3_tts.h"
#include "io/stretch.h"

#define MODELS QTTS_FIXTURES "/models"
#define SPF 1920

/* A sampled cv06 request that runs past the 300-frame window restart
 * (the tests that use it check that it does). */
#define LONG_TEXT                                                                   \
    "A longer request that goes past the first decode window of three hundred " \
    "frames, so the window restart with its left context is streamed too."
#define LONG_SEED 7
#define LONG_MAX_TOKENS 340

typedef struct {
    float *pcm;
    size_t n, cap;
    int32_t *codes;
    int frames, cap_frames;
    int calls;
    int frames_at_first;     /* frames generated when the first audio arrived */
    size_t sizes[4096];      /* samples per call */
    int cancel_at;           /* cancel on this audio call (1-based), 0 = never */
} sink;

static int on_frame(void *user, int k, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    sink *s = user;
    if (s->frames == s->cap_frames) {
        s->cap_frames = s->cap_frames ? 2 * s->cap_frames : 256;
        s->codes = realloc(s->codes, sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)s->cap_frames);
    }
    memcpy(s->codes + (size_t)s->frames * QTTS_NUM_CODEBOOKS, codes,
           sizeof(int32_t) * QTTS_NUM_CODEBOOKS);
    s->frames++;
    (void)k;
    return 0;
}

static int on_audio(void *user, const float *pcm, size_t n) {
    sink *s = user;
    if (!s->calls) s->frames_at_first = s->frames;
    if (s->calls < 4096) s->sizes[s->calls] = n;
    s->calls++;
    if (s->n + n > s->cap) {
        s->cap = (s->n + n) * 2;
        s->pcm = realloc(s->pcm, sizeof(float) * s->cap);
    }
    memcpy(s->pcm + s->n, pcm, sizeof(float) * n);
    s->n += n;
    return s->cancel_at && s->calls == s->cancel_at;
}

static void sink_free(sink *s) {
    free(s->pcm);
    free(s->codes);
    memset(s, 0, sizeof *s);
}

static qtts_status run(qtts_session *ses, qtts_request r, int chunk, int first, sink *out,
                       qtts_error *err) {
    memset(out, 0, sizeof *out);
    r.stream_chunk_frames = chunk;
    r.stream_first_frames = first;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = out;
    return qtts_synthesize(ses, &r, NULL, err);
}

static bool same(const sink *a, const sink *b) {
    return a->n == b->n && a->frames == b->frames && !memcmp(a->pcm, b->pcm, sizeof(float) * a->n) &&
           !memcmp(a->codes, b->codes, sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)a->frames);
}

/* The streamed delivery's shape: first push after `first` frames, then
 * `chunk` frames per push, the remainder last. */
static void check_shape(const sink *s, int chunk, int first, const char *what) {
    const int f = first ? first : 1;
    if (s->frames <= f) {
        CHECK(s->calls == 1 && s->sizes[0] == (size_t)s->frames * SPF, "%s: one call", what);
        return;
    }
    CHECK(s->frames_at_first == f && s->sizes[0] == (size_t)f * SPF,
          "%s: first audio at frame %d with %zu samples (want %d)", what, s->frames_at_first,
          s->sizes[0], f);
    /* then pushes of twice the last one, at most chunk, and the rest at finish */
    int left = s->frames - f, last = f, i = 1;
    for (; left > 0 && i < s->calls && i < 4096; i++) {
        int want = last * 2 < chunk ? last * 2 : chunk;
        if (want > left) want = left;   /* the remainder, from finish */
        CHECK(s->sizes[i] == (size_t)want * SPF, "%s: call %d: %zu samples, want %d frames", what, i,
              s->sizes[i], want);
        left -= want;
        last = want;
    }
    CHECK(left == 0 && i == s->calls, "%s: %d calls, %d frames left", what, s->calls, left);
}

/* The fixture model dir on two threads; NULL (err says why) if it fails. */
static qtts_engine *open_two_threads(const char *dir, qtts_error *err) {
    qtts_engine_options o;
    qtts_engine_options_init(&o);
    o.n_threads = 2;
    qtts_engine *e = NULL;
    return qtts_engine_open(dir, &o, &e, err) ? NULL : e;
}

/* r streamed in pushes of 4 frames with a callback that cancels on its
 * second call: the request fails CANCELLED there, before its frame cap. */
static void check_cancel(qtts_session *ses, qtts_request r) {
    qtts_error err = {0};
    sink c = {0};
    c.cancel_at = 2;
    r.stream_chunk_frames = 4;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = &c;
    const qtts_status st = qtts_synthesize(ses, &r, NULL, &err);
    CHECK(st == QTTS_ERR_CANCELLED && c.calls == 2 && c.frames < r.max_new_tokens,
          "cancel: %d (%s), %d calls, %d frames", st, err.msg, c.calls, c.frames);
    sink_free(&c);
}

static void check_model(const char *name, const char *text, const char *speaker, bool long_run) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", MODELS, name);
    qtts_error err = {0};
    qtts_engine *e = open_two_threads(dir, &err);
    REQUIRE(e, "%s: %s", name, err.msg);
    qtts_session *ses = qtts_session_new(e, &err);
    qtts_request r;
    qtts_request_init(&r);
    r.text = text;
    r.speaker = speaker;
    if (long_run) {
        r.do_sample = 1;
        r.seed = LONG_SEED;
        r.max_new_tokens = LONG_MAX_TOKENS;
    } else {
        r.do_sample = 0;
        r.subtalker_do_sample = 0;
        r.max_new_tokens = 40;
    }
    sink ref;
    REQUIRE(!run(ses, r, 0, 0, &ref, &err), "%s: %s", name, err.msg);
    if (long_run) CHECK(ref.frames > 300, "%s: only %d frames (want a window restart)", name, ref.frames);
    static const int settings[][2] = {{1, 0}, {2, 1}, {12, 0}, {12, 3}, {7, 5}, {300, 0}, {5, 40}};
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        sink s;
        char what[96];
        snprintf(what, sizeof what, "%s chunk %d first %d", name, settings[i][0], settings[i][1]);
        CHECK(!run(ses, r, settings[i][0], settings[i][1], &s, &err), "%s: %s", what, err.msg);
        CHECK(same(&s, &ref), "%s: %zu vs %zu samples, %d vs %d frames", what, s.n, ref.n, s.frames,
              ref.frames);
        check_shape(&s, settings[i][0], settings[i][1], what);
        sink_free(&s);
        /* a window request in between: the session goes back and forth */
        if (i == 2) {
            sink w;
            CHECK(!run(ses, r, 0, 0, &w, &err) && same(&w, &ref), "%s: window after stream", name);
            sink_free(&w);
        }
    }
    sink_free(&ref);
    qtts_session_free(ses);
    qtts_engine_close(e);
}

static void test_stream_exact(void) {
    check_model("cv06", "Hello! This is a short test of the speech engine.", "vivian", false);
    check_model("cv17", "Guten Tag, wie geht es Ihnen heute?", "ryan", false);
    check_model("cv06", LONG_TEXT, "vivian", true);
}

/* A greedy in-context cloning request on the fixture recording (read
 * once); false if it cannot be read. */
static bool clone_request(qtts_request *r, const char *text, int max_new_tokens) {
    static unsigned char wav[1 << 21];
    static size_t wl;
    if (!wl) {
        FILE *f = fopen(QTTS_FIXTURES "/audio/ref_24k_mono.wav", "rb");
        if (!f) return false;
        wl = fread(wav, 1, sizeof wav, f);
        fclose(f);
    }
    qtts_request_init(r);
    r->text = text;
    r->ref_audio = wav;
    r->ref_audio_len = wl;
    r->ref_text = "This is the reference transcript.";
    r->do_sample = 0;
    r->subtalker_do_sample = 0;
    r->max_new_tokens = max_new_tokens;
    return wl > 0;
}

static void test_stream_clone_and_limits(void) {
    qtts_error err = {0};
    qtts_engine *e = open_two_threads(MODELS "/base06", &err);
    REQUIRE(e, "%s", err.msg);
    qtts_session *ses = qtts_session_new(e, &err);
    qtts_request r;
    REQUIRE(clone_request(&r, "Cloned voice, streamed or not.", 20), "reference audio");
    sink a, b;
    REQUIRE(!run(ses, r, 0, 0, &a, &err), "%s", err.msg);
    CHECK(!run(ses, r, 3, 1, &b, &err), "%s", err.msg);
    const size_t cut = a.n - b.n;   /* 0 or 1: the reference's trim against the stream's */
    CHECK(b.frames == a.frames && !memcmp(a.codes, b.codes, sizeof(int32_t) * 16 * (size_t)a.frames) &&
              a.n >= b.n && cut <= 1 && !memcmp(a.pcm + cut, b.pcm, sizeof(float) * b.n) && b.calls > 1 &&
              b.frames_at_first == 1,
          "in-context clone: %d calls, first at %d of %d frames, %zu samples against %zu", b.calls,
          b.frames_at_first, b.frames, b.n, a.n);
    sink_free(&a);
    sink_free(&b);

    /* limits, refused before anything runs */
    clone_request(&r, "x", -1);
    static const int bad[][2] = {{-1, 0}, {301, 0}, {4, -1}, {4, 301}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(run(ses, r, bad[i][0], bad[i][1], &a, &err) == QTTS_ERR_INVALID && !a.frames,
              "chunk %d first %d: %s", bad[i][0], bad[i][1], err.msg);
        sink_free(&a);
    }
    qtts_session_free(ses);
    qtts_engine_close(e);

    /* a callback that cancels from a streamed push */
    REQUIRE((e = open_two_threads(MODELS "/cv06", &err)), "%s", err.msg);
    ses = qtts_session_new(e, &err);
    qtts_request_init(&r);
    r.text = "Hello! This is a short test of the speech engine.";
    r.speaker = "vivian";
    r.do_sample = 0;
    r.subtalker_do_sample = 0;
    r.max_new_tokens = 30;
    check_cancel(ses, r);
    /* and the session is usable again */
    sink d;
    CHECK(!run(ses, r, 4, 0, &d, &err) && d.frames > 0, "after cancel: %s", err.msg);
    sink_free(&d);
    qtts_session_free(ses);
    qtts_engine_close(e);
}

static void test_speed(void) {
    qtts_error err = {0};
    qtts_engine *e = open_two_threads(MODELS "/cv06", &err);
    REQUIRE(e, "%s", err.msg);
    qtts_session *ses = qtts_session_new(e, &err);
    qtts_request r;
    qtts_request_init(&r);
    r.text = "A longer request that goes past the first decode window, at another speed.";
    r.speaker = "vivian";
    r.do_sample = 1;
    r.seed = 3;
    r.max_new_tokens = 320;
    sink plain;
    REQUIRE(!run(ses, r, 0, 0, &plain, &err), "%s", err.msg);
    CHECK(plain.frames > 300, "only %d frames (want a window restart)", plain.frames);
    const float speeds[] = {0.5f, 3.0f};
    for (int i = 0; i < 2; i++) {
        r.speed = speeds[i];
        sink w, st;
        qtts_result res;
        memset(&w, 0, sizeof w);
        r.on_audio = on_audio;
        r.on_frame = on_frame;
        r.user = &w;
        CHECK(!qtts_synthesize(ses, &r, &res, &err), "speed %g: %s", speeds[i], err.msg);
        CHECK(res.n_samples == w.n, "speed %g: result says %zu samples, %zu delivered", speeds[i],
              res.n_samples, w.n);
        CHECK(w.frames == plain.frames &&
                  !memcmp(w.codes, plain.codes, sizeof(int32_t) * QTTS_NUM_CODEBOOKS * (size_t)w.frames),
              "speed %g: the codes changed", speeds[i]);
        const double want = (double)plain.n / speeds[i];
        CHECK(fabs((double)w.n - want) <= 0.03 * want, "speed %g: %zu samples, want ~%.0f", speeds[i],
              w.n, want);
        /* exactly the plain audio through the tempo change in one piece */
        qtts_stretch *ts = NULL;
        sink direct = {0};
        REQUIRE(!qtts_stretch_new(24000, speeds[i], &ts, &err), "%s", err.msg);
        CHECK(!qtts_stretch_push(ts, plain.pcm, plain.n, on_audio, &direct, &err) &&
                  !qtts_stretch_finish(ts, on_audio, &direct, &err),
              "%s", err.msg);
        CHECK(direct.n == w.n && !memcmp(direct.pcm, w.pcm, sizeof(float) * w.n),
              "speed %g: %zu samples, the plain audio stretched in one piece %zu", speeds[i], w.n,
              direct.n);
        qtts_stretch_free(ts);
        sink_free(&direct);
        static const int settings[][2] = {{1, 0}, {12, 0}};
        for (int k = 0; k < 2; k++) {
            CHECK(!run(ses, r, settings[k][0], settings[k][1], &st, &err), "%s", err.msg);
            CHECK(same(&st, &w), "speed %g chunk %d: streamed %zu samples, window %zu", speeds[i],
                  settings[k][0], st.n, w.n);
            sink_free(&st);
        }
        sink_free(&w);
    }
    sink_free(&plain);

    /* refused before anything runs */
    const float bad[] = {5.0f, 0.2f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 5; i++) {
        r.speed = bad[i];
        sink b;
        CHECK(run(ses, r, 0, 0, &b, &err) == QTTS_ERR_INVALID && !b.frames && strstr(err.msg, "speed"),
              "speed %g: %s", bad[i], err.msg);
        sink_free(&b);
    }
    /* a callback fed by the tempo change cancels */
    r.speed = 2.0f;
    r.max_new_tokens = 60;
    check_cancel(ses, r);
    qtts_session_free(ses);
    qtts_engine_close(e);

    /* in-context cloning: trimmed, then changed */
    REQUIRE((e = open_two_threads(MODELS "/base06", &err)), "%s", err.msg);
    ses = qtts_session_new(e, &err);
    REQUIRE(clone_request(&r, "Cloned voice, a little faster.", 40), "reference audio");
    sink a, b;
    REQUIRE(!run(ses, r, 0, 0, &a, &err), "%s", err.msg);
    r.speed = 1.25f;
    CHECK(!run(ses, r, 0, 0, &b, &err), "%s", err.msg);
    CHECK(b.frames == a.frames && fabs((double)b.n - a.n / 1.25) <= 0.03 * a.n / 1.25,
          "clone at 1.25: %zu samples for %zu, %d/%d frames", b.n, a.n, b.frames, a.frames);
    sink c;   /* streamed: the reference frames' samples cut before the tempo change */
    CHECK(!run(ses, r, 3, 1, &c, &err), "%s", err.msg);
    CHECK(c.frames == a.frames && c.calls > 1 && fabs((double)c.n - a.n / 1.25) <= 0.03 * a.n / 1.25,
          "streamed clone at 1.25: %zu samples for %zu, %d calls", c.n, a.n, c.calls);
    sink_free(&c);
    sink_free(&a);
    sink_free(&b);
    qtts_session_free(ses);
    qtts_engine_close(e);
}

/* r with manual decoding: nothing is decoded inside a step; after each
 * step the due frames are checked against the push schedule (first, then
 * twice the last push, at most chunk; a 300-frame window without chunk) and
 * then, by a fixed pseudo-random policy, decoded whole, in pieces of 1-5
 * frames, or left for later steps. At the last frame the rest of a stream
 * is due; what is left goes in pieces, then finish. */
static qtts_status run_manual(qtts_session *ses, qtts_request r, int chunk, int first,
                              uint32_t seed, sink *out, qtts_error *err) {
    memset(out, 0, sizeof *out);
    r.stream_chunk_frames = chunk;
    r.stream_first_frames = first;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = out;
    qtts_session_set_manual_decode(ses, true);
    qtts_status st = qtts_session_start(ses, &r, err);
    /* the setting applies from the next start: this request stays manual */
    qtts_session_set_manual_decode(ses, false);
    int scheduled = 0, next = first ? first : 1;   /* frames made due so far; next push size */
    uint32_t x = seed;
    while (!st && qtts_session_active(ses)) {
        const int calls = out->calls, due = qtts_session_decode_due(ses);
        CHECK(qtts_step_batch(&ses, 1, NULL) == QTTS_OK, "step");
        CHECK(out->calls == calls, "frame %d: audio from inside a manual step", out->frames);
        const int now = qtts_session_decode_due(ses);
        if (!qtts_session_active(ses)) {
            const int undecoded = out->frames - (int)(out->n / SPF);
            CHECK(!chunk || now == undecoded, "last frame: %d due, %d undecoded", now, undecoded);
            break;
        }
        if (chunk && out->frames - scheduled >= next) {   /* a push fell due */
            CHECK(now == due + out->frames - scheduled, "frame %d: %d due, want %d", out->frames,
                  now, due + out->frames - scheduled);
            next = 2 * (out->frames - scheduled) < chunk ? 2 * (out->frames - scheduled) : chunk;
            scheduled = out->frames;
        } else if (!chunk && out->frames - scheduled == 300) {
            CHECK(now == due + 300, "frame %d: %d due, want a window", out->frames, now);
            scheduled = out->frames;
        } else {
            CHECK(now == due, "frame %d: %d due, want %d", out->frames, now, due);
        }
        x = x * 1664525u + 1013904223u;
        const int policy = (int)(x >> 28) % 4;   /* 0 leave, 1 all, 2-3 a piece */
        if (policy && now) {
            const size_t n0 = out->n;
            const int piece = policy == 1 ? 0 : 1 + (int)(x >> 8) % 5;
            st = qtts_session_decode(ses, piece, err);
            const int want = !chunk ? now / 300 * 300 : piece && piece < now ? piece : now;
            CHECK(st || out->n - n0 == (size_t)want * SPF, "decoded %zu samples, want %d frames",
                  out->n - n0, want);
        }
    }
    while (!st && qtts_session_decode_due(ses)) st = qtts_session_decode(ses, 3, err);
    qtts_status fst = qtts_session_finish(ses, NULL, err);
    return st ? st : fst;
}

static void test_manual_decode(void) {
    qtts_error err = {0};
    qtts_engine *e = open_two_threads(MODELS "/cv06", &err);
    REQUIRE(e, "%s", err.msg);
    qtts_session *ses = qtts_session_new(e, &err);
    qtts_request r;
    qtts_request_init(&r);
    r.text = LONG_TEXT;
    r.speaker = "vivian";
    r.do_sample = 1;
    r.seed = LONG_SEED;
    r.max_new_tokens = LONG_MAX_TOKENS;
    sink ref;
    REQUIRE(!run(ses, r, 0, 0, &ref, &err), "%s", err.msg);
    CHECK(ref.frames > 300, "only %d frames (want a window restart)", ref.frames);
    static const int settings[][2] = {{12, 0}, {4, 2}, {1, 0}, {0, 0}};
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        for (uint32_t seed = 1; seed <= 2; seed++) {
            sink m;
            CHECK(!run_manual(ses, r, settings[i][0], settings[i][1], seed, &m, &err), "%s", err.msg);
            CHECK(same(&m, &ref), "manual chunk %d first %d seed %u: %zu vs %zu samples",
                  settings[i][0], settings[i][1], seed, m.n, ref.n);
            sink_free(&m);
        }
    }
    /* qtts_synthesize on a manual session decodes after each step: the
     * same pushes as without it */
    sink m;
    qtts_session_set_manual_decode(ses, true);
    CHECK(!run(ses, r, 12, 0, &m, &err) && same(&m, &ref), "synthesize, manual: %s", err.msg);
    check_shape(&m, 12, 0, "synthesize, manual");
    sink_free(&m);

    /* a decode on an idle session is refused; a callback that cancels
     * from a manual decode fails the request, which finish reports */
    CHECK(qtts_session_decode(ses, 0, &err) == QTTS_ERR_INVALID, "idle: %s", err.msg);
    memset(&m, 0, sizeof m);
    m.cancel_at = 2;
    r.stream_chunk_frames = 4;
    r.on_audio = on_audio;
    r.on_frame = on_frame;
    r.user = &m;
    REQUIRE(!qtts_session_start(ses, &r, &err), "%s", err.msg);
    qtts_status st = QTTS_OK;
    while (!st && qtts_session_active(ses)) {
        CHECK(qtts_step_batch(&ses, 1, NULL) == QTTS_OK, "step");
        if (qtts_session_decode_due(ses)) st = qtts_session_decode(ses, 0, &err);
    }
    CHECK(st == QTTS_ERR_CANCELLED && m.calls == 2 && !qtts_session_active(ses) &&
              !qtts_session_decode_due(ses),
          "cancel: %d (%s), %d calls", st, err.msg, m.calls);
    CHECK(qtts_session_decode(ses, 0, &err) == QTTS_ERR_CANCELLED, "decode after: %s", err.msg);
    CHECK(qtts_session_finish(ses, NULL, &err) == QTTS_ERR_CANCELLED, "finish: %s", err.msg);
    sink_free(&m);
    qtts_session_set_manual_decode(ses, false);
    r.max_new_tokens = 20;
    CHECK(!run(ses, r, 4, 0, &m, &err) && m.frames > 0, "after cancel: %s", err.msg);
    sink_free(&m);
    sink_free(&ref);
    qtts_session_free(ses);
    qtts_engine_close(e);
}

int main(void) {
    TEST_RUN(test_stream_exact);
    TEST_RUN(test_stream_clone_and_limits);
    TEST_RUN(test_speed);
    TEST_RUN(test_manual_decode);
    TEST_END();
}
