/*
 * test_server_clone.c - voice cloning through the HTTP server, in-process
 * on 127.0.0.1 with the tiny Base model (tests/fixtures/models/base06) and
 * the reference recordings of tests/fixtures/audio.
 *
 * What it pins down:
 *   - greedy /v1/tts output with inline base64 reference audio (x-vector
 *     only and in-context, whole and streamed, two at once) and with a
 *     profile of the --voices directory is byte-identical to the same
 *     request through qtts_synthesize in-process;
 *   - an in-context clone at a length where the reference's trim keeps
 *     one sample of the reference frames: sent whole, that trim; streamed,
 *     the same less that first sample (qtts_request.stream_chunk_frames);
 *   - the OpenAI `voice` names a profile (case-insensitively);
 *   - every refusal: bad base64 (alphabet, padding, length, trailing
 *     bits), bad audio (the reader's rule in the message), ref_audio with
 *     voice_profile, ref_text alone, speaker on a Base model, no voice at
 *     all, names outside ^[a-z0-9_-]{1,64}$ and missing names (one
 *     identical 404 body), symlinked and misnamed files (not loaded),
 *     another model's profile and a corrupt one (400 with the reason),
 *     bodies over the clone limit (413); a Base server without --voices;
 *   - the server answers byte-identically afterwards; /health reports the
 *     clone body limit and /v1/audio/voices lists the usable profiles.
 *
 * The HTTP helpers are those of test_server.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "base/base.h"
#include "base/json.h"
#include "qwen3_tts.h"
#include "server/server.h"

#define MODEL QTTS_FIXTURES "/models/base06"
#define MODEL17 QTTS_FIXTURES "/models/base17"
#define AUDIO QTTS_FIXTURES "/audio"

static int g_port;

#include "http_util.h"


/* ==== helpers ===================================================================== */


static char *b64(const uint8_t *in, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *p++ = t[v >> 18], *p++ = t[(v >> 12) & 63], *p++ = t[(v >> 6) & 63], *p++ = t[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        *p++ = t[v >> 18], *p++ = t[(v >> 12) & 63];
        *p++ = i + 1 < n ? t[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = 0;
    return o;
}


/* The response's audio equals ref (wav: after the header; pcm: as is). */
static bool same_audio(const resp *r, const bytes *ref, bool is_wav) {
    const uint8_t *p = r->body;
    size_t n = r->body_len;
    if (is_wav && !wav_pcm(r, &p, &n)) return false;
    return r->status == 200 && r->complete && n == ref->n && ref->n > 0 && memcmp(p, ref->p, n) == 0;
}

static const char *err_field(const resp *r, const char *field, char *out, size_t cap) {
    out[0] = 0;
    qtts_err e;
    qtts_json *doc = r->body ? qtts_json_parse((const char *)r->body, r->body_len, NULL, "body", &e) : NULL;
    const qtts_json *er = doc ? qtts_json_get(doc, "error") : NULL;
    const char *v = er ? qtts_json_get_str(er, field) : NULL;
    if (v) snprintf(out, cap, "%s", v);
    qtts_json_free(doc);
    return out;
}

/* A refusal with this status, error code and param. */
#define EXPECT(r, st, cd, prm)                                                                 \
    do {                                                                                       \
        char p_[64], m_[512];                                                                  \
        CHECK((r).status == (st) && is_error(&(r), cd), "status %d want %d, body %s", (r).status, \
              (st), (r).body ? (const char *)(r).body : "");                                   \
        if (prm) CHECK(strcmp(err_field(&(r), "param", p_, sizeof p_), (const char *)(prm) ? (const char *)(prm) : "") == 0, \
                       "param '%s' want '%s' (%s)", p_, (const char *)(prm),                   \
                       err_field(&(r), "message", m_, sizeof m_));                             \
    } while (0)

/* ==== fixtures: audio, profiles, in-process references ============================ */

static uint8_t *g_wav24, *g_wav16, *g_wav44;
static size_t g_wav24_n, g_wav16_n, g_wav44_n;
static char *g_b64_24, *g_b64_16, *g_b64_44;
static char g_dir[256];
static const char *const REF_TEXT = "This is the reference recording.";
static const char *const TEXT = "And now the cloned voice reads a new line.";
#define FRAMES 16   /* max_frames of every compared request */

typedef struct {
    const uint8_t *audio;
    size_t audio_n;
    const char *ref_text;
    bool xvo;
    const char *profile;   /* a file in g_dir instead of audio */
    int frames;            /* max_frames (0: FRAMES) */
    bytes pcm;
} ref_case;

enum { REF_ICL24, REF_XVO44, REF_XVO16, REF_ALICE, REF_BOB, N_REF };
static ref_case g_refs[N_REF];

static bool synth_ref(qtts_engine *e, qtts_session *s, ref_case *rc) {
    qtts_request q;
    qtts_request_init(&q);
    q.text = TEXT;
    q.do_sample = q.subtalker_do_sample = 0;
    q.max_new_tokens = (rc->frames ? rc->frames : FRAMES) + 1;   /* what the server sends for max_frames */
    q.on_audio = ref_sink;
    q.user = &rc->pcm;
    q.x_vector_only = rc->xvo;
    qtts_voice *v = NULL;
    qtts_error err;
    if (rc->profile) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.voice", g_dir, rc->profile);
        if (qtts_voice_load(e, path, &v, &err)) {
            fprintf(stderr, "load %s: %s\n", path, err.msg);
            return false;
        }
        q.voice = v;
    } else {
        q.ref_audio = rc->audio;
        q.ref_audio_len = rc->audio_n;
        q.ref_text = rc->ref_text;
    }
    bool ok = qtts_synthesize(s, &q, NULL, &err) == QTTS_OK;
    if (!ok) fprintf(stderr, "reference: %s\n", err.msg);
    qtts_voice_free(v);
    return ok;
}

static bool save_profile(qtts_engine *e, const uint8_t *a, size_t n, const char *text, const char *name) {
    qtts_voice *v = NULL;
    qtts_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    bool ok = qtts_voice_create(e, a, n, text, false, NULL, &v, &err) == QTTS_OK &&
              qtts_voice_save(v, path, &err) == QTTS_OK;
    if (!ok) fprintf(stderr, "profile %s: %s\n", name, err.msg);
    qtts_voice_free(v);
    return ok;
}

static void write_file(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

/* The voices directory: alice (in-context, 24 kHz), bob (x-vector, 16 kHz),
 * other (made with base17: another model), corrupt (garbage), Upper.voice
 * (a name outside the rule), link.voice (a symlink to alice) and fifo.voice
 * (a named pipe: opening it for reading must not block the load). */
static bool make_fixtures(void) {
    g_wav24 = read_all(AUDIO "/ref_24k_mono.wav", &g_wav24_n);
    g_wav16 = read_all(AUDIO "/ref_16k_mono.wav", &g_wav16_n);
    g_wav44 = read_all(AUDIO "/ref_44k1_stereo.wav", &g_wav44_n);
    if (!g_wav24 || !g_wav16 || !g_wav44) return false;
    g_b64_24 = b64(g_wav24, g_wav24_n);
    g_b64_16 = b64(g_wav16, g_wav16_n);
    g_b64_44 = b64(g_wav44, g_wav44_n);
    snprintf(g_dir, sizeof g_dir, "/tmp/qtts_test_server_clone_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) return false;

    qtts_engine *e = NULL, *e17 = NULL;
    qtts_error err;
    if (qtts_engine_open(MODEL, NULL, &e, &err) || qtts_engine_open(MODEL17, NULL, &e17, &err)) {
        fprintf(stderr, "engine: %s\n", err.msg);
        qtts_engine_close(e);
        return false;
    }
    bool ok = save_profile(e, g_wav24, g_wav24_n, REF_TEXT, "alice.voice") &&
              save_profile(e, g_wav16, g_wav16_n, NULL, "bob.voice") &&
              save_profile(e17, g_wav24, g_wav24_n, REF_TEXT, "other.voice") &&
              save_profile(e, g_wav16, g_wav16_n, NULL, "Upper.voice");
    write_file("corrupt.voice", "not a voice profile at all, just bytes", 38);
    char target[512], link[512];
    snprintf(target, sizeof target, "%s/alice.voice", g_dir);
    snprintf(link, sizeof link, "%s/link.voice", g_dir);
    ok = ok && symlink(target, link) == 0;
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo.voice", g_dir);
    ok = ok && mkfifo(fifo, 0600) == 0;
    qtts_engine_close(e17);

    g_refs[REF_ICL24] = (ref_case){.audio = g_wav24, .audio_n = g_wav24_n, .ref_text = REF_TEXT};
    g_refs[REF_XVO44] = (ref_case){.audio = g_wav44, .audio_n = g_wav44_n, .ref_text = REF_TEXT, .xvo = true};
    g_refs[REF_XVO16] = (ref_case){.audio = g_wav16, .audio_n = g_wav16_n};
    g_refs[REF_ALICE] = (ref_case){.profile = "alice"};
    g_refs[REF_BOB] = (ref_case){.profile = "bob"};
    qtts_session *s = ok ? qtts_session_new(e, &err) : NULL;
    ok = ok && s;
    for (int i = 0; ok && i < N_REF; i++) ok = synth_ref(e, s, &g_refs[i]);
    qtts_session_free(s);
    qtts_engine_close(e);
    return ok;
}

static void remove_fixtures(void) {
    const char *names[] = {"alice.voice", "bob.voice", "other.voice", "Upper.voice", "corrupt.voice", "link.voice",
                           "fifo.voice"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

/* A /v1/tts body: TEXT, greedy, FRAMES frames, plus more (JSON members). */
static char *clone_body(const char *more) {
    size_t n = strlen(more) + 256;
    char *b = malloc(n);
    snprintf(b, n, "{\"text\":\"%s\",\"greedy\":true,\"max_frames\":%d%s%s}", TEXT, FRAMES,
             *more ? "," : "", more);
    return b;
}

/* ref_audio (base64) + the rest. */
static char *audio_body(const char *b64audio, const char *more) {
    size_t n = strlen(b64audio) + strlen(more) + 64;
    char *m = malloc(n);
    snprintf(m, n, "\"ref_audio\":\"%s\"%s%s", b64audio, *more ? "," : "", more);
    char *b = clone_body(m);
    free(m);
    return b;
}

static resp post_free(char *body) {
    resp r = post("/v1/tts", body);
    free(body);
    return r;
}

/* ==== server lifecycle ============================================================ */

static qtts_server *start_server(qtts_server_config *c) {
    c->threads = 2;
    c->queue_timeout_s = 600;
    c->drain_timeout_s = 600;
    return start_server_on(c, MODEL);
}

/* ==== tests ======================================================================= */

static void test_inline_matches_synthesize(void) {
    resp r = post_free(audio_body(g_b64_24, "\"ref_text\":\"This is the reference recording.\""));
    CHECK(same_audio(&r, &g_refs[REF_ICL24].pcm, true), "in-context, wav: status %d, %zu bytes vs %zu: %s",
          r.status, r.body_len, g_refs[REF_ICL24].pcm.n, r.status != 200 ? (char *)r.body : "");
    resp_free(&r);
    r = post_free(audio_body(g_b64_24, "\"ref_text\":\"This is the reference recording.\",\"stream\":true,"
                                       "\"response_format\":\"pcm\""));
    CHECK(same_audio(&r, &g_refs[REF_ICL24].pcm, false), "in-context, streamed pcm: %d", r.status);
    resp_free(&r);
    /* x_vector_only ignores the transcript; 44.1 kHz stereo is resampled */
    r = post_free(audio_body(g_b64_44, "\"ref_text\":\"This is the reference recording.\",\"x_vector_only\":true,"
                                       "\"stream\":true"));
    CHECK(same_audio(&r, &g_refs[REF_XVO44].pcm, true), "x-vector, streamed wav: %d", r.status);
    resp_free(&r);
    r = post_free(audio_body(g_b64_16, "\"response_format\":\"pcm\""));
    CHECK(same_audio(&r, &g_refs[REF_XVO16].pcm, false), "no transcript: x-vector: %d", r.status);
    resp_free(&r);
}

typedef struct {
    char *body;
    resp r;
} job;

static void *job_thread(void *arg) {
    job *j = arg;
    j->r = post("/v1/tts", j->body);
    return NULL;
}

/* Two clones encode on their connection threads while the worker runs. */
static void test_concurrent_clones(void) {
    job jobs[3] = {{.body = audio_body(g_b64_24, "\"ref_text\":\"This is the reference recording.\"")},
                   {.body = audio_body(g_b64_44, "\"x_vector_only\":true,\"stream\":true")},
                   {.body = clone_body("\"voice_profile\":\"bob\"")}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, job_thread, &jobs[i]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(same_audio(&jobs[0].r, &g_refs[REF_ICL24].pcm, true), "concurrent in-context: %d", jobs[0].r.status);
    CHECK(same_audio(&jobs[1].r, &g_refs[REF_XVO44].pcm, true), "concurrent x-vector: %d", jobs[1].r.status);
    CHECK(same_audio(&jobs[2].r, &g_refs[REF_BOB].pcm, true), "concurrent profile: %d", jobs[2].r.status);
    for (int i = 0; i < 3; i++) {
        resp_free(&jobs[i].r);
        free(jobs[i].body);
    }
}

/* Alice (in-context) at a length F where the reference's trim,
 * int(ref / total * samples), is one sample short of the reference frames'
 * samples: whole, the response is the in-process one-shot; streamed, the
 * engine cuts exactly the reference frames, so the same less its first
 * sample. */
static void test_clone_cut_short(void) {
    qtts_engine *e = NULL;
    qtts_voice *v = NULL;
    qtts_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/alice.voice", g_dir);
    REQUIRE(qtts_engine_open(MODEL, NULL, &e, &err) == QTTS_OK && qtts_voice_load(e, path, &v, &err) == QTTS_OK,
            "%s", err.msg);
    qtts_voice_info vi;
    qtts_voice_get_info(v, &vi);
    const int r = vi.ref_frames;
    const size_t up = g_refs[REF_ALICE].pcm.n / 2 / FRAMES;   /* FRAMES * up samples, or one more */
    int F = 0;
    for (int f = 2; f <= 120 && !F; f++)
        if ((size_t)((double)r / (double)(r + f) * ((double)(r + f) * (double)up)) + 1 == (size_t)r * up) F = f;
    qtts_voice_free(v);
    REQUIRE(F, "no length up to 120 frames with the trim one short for %d reference frames", r);
    ref_case rc = {.profile = "alice", .frames = F};
    qtts_session *ses = qtts_session_new(e, &err);
    CHECK(ses && synth_ref(e, ses, &rc) && rc.pcm.n == 2 * ((size_t)F * up + 1),
          "in-process one-shot: %zu bytes for %d frames", rc.pcm.n, F);
    qtts_session_free(ses);
    qtts_engine_close(e);
    char more[128];
    snprintf(more, sizeof more, "{\"text\":\"%s\",\"greedy\":true,\"max_frames\":%d,\"voice_profile\":\"alice\"",
             TEXT, F);
    char body[512];
    snprintf(body, sizeof body, "%s}", more);
    resp w = post("/v1/tts", body);
    CHECK(same_audio(&w, &rc.pcm, true), "whole: status %d, %zu bytes against %zu", w.status, w.body_len, rc.pcm.n);
    resp_free(&w);
    snprintf(body, sizeof body, "%s,\"stream\":true,\"response_format\":\"pcm\"}", more);
    resp st = post("/v1/tts", body);
    const bytes less = {.p = rc.pcm.p + 2, .n = rc.pcm.n - 2};
    CHECK(same_audio(&st, &less, false), "streamed: status %d, %zu bytes against %zu", st.status, st.body_len,
          less.n);
    resp_free(&st);
    free(rc.pcm.p);
}

static void test_profiles_match_synthesize(void) {
    resp r = post_free(clone_body("\"voice_profile\":\"alice\""));
    CHECK(same_audio(&r, &g_refs[REF_ALICE].pcm, true), "alice: %d %s", r.status, r.status != 200 ? (char *)r.body : "");
    /* a profile reproduces the direct clone it was made from */
    CHECK(same_audio(&r, &g_refs[REF_ICL24].pcm, true), "alice == inline in-context clone");
    resp_free(&r);
    r = post_free(clone_body("\"voice_profile\":\"alice\",\"stream\":true,\"response_format\":\"pcm\""));
    CHECK(same_audio(&r, &g_refs[REF_ALICE].pcm, false), "alice streamed: %d", r.status);
    resp_free(&r);
    r = post_free(clone_body("\"voice_profile\":\"bob\",\"stream\":true"));
    CHECK(same_audio(&r, &g_refs[REF_BOB].pcm, true), "bob streamed: %d", r.status);
    resp_free(&r);

    /* OpenAI: voice names a profile, case-insensitively */
    r = post("/v1/audio/speech", "{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"BoB\",\"response_format\":\"pcm\"}");
    CHECK(r.status == 200 || (r.status == 500 && is_error(&r, "generation_limit")),
          "OpenAI voice=BoB: %d %s", r.status, r.body ? (char *)r.body : "");
    if (getenv("QTTS_TEST_VERBOSE")) fprintf(stderr, "OpenAI voice=BoB: %d, %zu bytes\n", r.status, r.body_len);
    resp_free(&r);

    r = http("GET", "/v1/audio/voices", NULL, NULL, NULL);
    const char *b = (const char *)r.body;
    CHECK(r.status == 200 && strstr(b, "\"model_kind\":\"base\"") &&
              strstr(b, "{\"id\":\"alice\",\"object\":\"voice\",\"type\":\"profile\",\"mode\":\"in_context\"") &&
              strstr(b, "{\"id\":\"bob\",\"object\":\"voice\",\"type\":\"profile\",\"mode\":\"x_vector\"") &&
              !strstr(b, "other") && !strstr(b, "corrupt") && !strstr(b, "Upper") && !strstr(b, "link") &&
              !strstr(b, "fifo") && strstr(b, "\"voice_profiles\":true"),
          "voices: %s", b ? b : "");
    resp_free(&r);
    r = http("GET", "/health", NULL, NULL, NULL);
    CHECK(r.status == 200 && strstr((char *)r.body, "\"max_clone_body_bytes\":2097152") &&
              strstr((char *)r.body, "\"max_body_bytes\":1048576"),
          "health: %s", r.body ? (char *)r.body : "");
    resp_free(&r);
}

static void test_refusals(void) {
    resp r;
    /* base64: a character outside the alphabet, too much padding, a length
     * not a multiple of 4, non-zero bits after the last byte, a space */
    static const char *const bad64[] = {"UklG!kZG", "UklGR===", "UklGRg=", "UklGRh==", "Ukl GRg=="};
    for (size_t i = 0; i < sizeof bad64 / sizeof bad64[0]; i++) {
        r = post_free(audio_body(bad64[i], ""));
        EXPECT(r, 400, "invalid_base64", "ref_audio");
        resp_free(&r);
    }
    r = post_free(audio_body("", ""));
    EXPECT(r, 400, "invalid_value", "ref_audio");
    resp_free(&r);
    r = post_free(clone_body("\"ref_audio\":7"));
    EXPECT(r, 400, "invalid_type", "ref_audio");
    resp_free(&r);

    /* audio: the reader names the rule */
    char m[512];
    char *bad = b64(g_wav24, 40);                    /* inside the fmt chunk */
    r = post_free(audio_body(bad, ""));
    EXPECT(r, 400, "invalid_audio", "ref_audio");
    CHECK(strstr(err_field(&r, "message", m, sizeof m), "WAV"), "names the WAV rule: %s", m);
    resp_free(&r);
    free(bad);
    uint8_t *w = malloc(g_wav24_n);
    memcpy(w, g_wav24, g_wav24_n);
    w[22] = 0;                                      /* 0 channels */
    bad = b64(w, g_wav24_n);
    r = post_free(audio_body(bad, ""));
    EXPECT(r, 400, "invalid_audio", "ref_audio");
    CHECK(strstr(err_field(&r, "message", m, sizeof m), "channel"), "0 channels: %s", m);
    resp_free(&r);
    free(bad);
    free(w);
    bad = b64(g_wav24, 44 + 2 * 2400);               /* 0.1 s */
    r = post_free(audio_body(bad, ""));
    EXPECT(r, 400, "invalid_audio", "ref_audio");
    resp_free(&r);
    free(bad);
    bad = b64((const uint8_t *)"just some text, not audio", 25);
    r = post_free(audio_body(bad, ""));
    CHECK(r.status == 400 && strcmp(err_field(&r, "param", m, sizeof m), "ref_audio") == 0, "not audio: %d", r.status);
    resp_free(&r);
    free(bad);

    /* fields that make no sense together */
    r = post_free(audio_body(g_b64_16, "\"voice_profile\":\"alice\""));
    EXPECT(r, 400, "conflicting_parameters", "voice_profile");
    resp_free(&r);
    r = post_free(clone_body("\"ref_text\":\"hello\",\"voice_profile\":\"alice\""));
    EXPECT(r, 400, "conflicting_parameters", "ref_text");
    resp_free(&r);
    r = post_free(clone_body("\"speaker\":\"vivian\",\"voice_profile\":\"alice\""));
    EXPECT(r, 400, "unsupported_feature", "speaker");
    resp_free(&r);
    r = post_free(clone_body(""));
    EXPECT(r, 400, "missing_parameter", "ref_audio");
    resp_free(&r);
    r = post_free(audio_body(g_b64_16, "\"ref_text\":\"  \""));
    EXPECT(r, 400, "invalid_value", "ref_text");
    resp_free(&r);
    r = post_free(clone_body("\"voice_profile\":\"alice\",\"x_vector_only\":\"yes\""));
    EXPECT(r, 400, "invalid_type", "x_vector_only");
    resp_free(&r);

    /* names: missing and refused give one identical 404 body */
    resp ref = post_free(clone_body("\"voice_profile\":\"nosuch\""));
    EXPECT(ref, 404, "voice_not_found", "voice_profile");
    const char *names[] = {"../alice", "ALICE", "Upper", "upper", "link", "fifo", "alice.voice", "al/ice", "",
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                           "..", "%2e%2e", "a\\tb", "\\u00e9t\\u00e9"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char more[160];
        snprintf(more, sizeof more, "\"voice_profile\":\"%s\"", names[i]);
        r = post_free(clone_body(more));
        CHECK(r.status == 404 && r.body_len == ref.body_len && !memcmp(r.body, ref.body, r.body_len),
              "'%s': %d %s", names[i], r.status, r.body ? (char *)r.body : "");
        resp_free(&r);
    }
    resp_free(&ref);
    ref = post("/v1/audio/speech", "{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"nosuch\"}");
    EXPECT(ref, 404, "voice_not_found", "voice");
    const char *oa[] = {"../../etc/passwd", "Link", "UPPER", "alice/", "a b"};
    for (size_t i = 0; i < sizeof oa / sizeof oa[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"%s\"}", oa[i]);
        r = post("/v1/audio/speech", body);
        CHECK(r.status == 404 && r.body_len == ref.body_len && !memcmp(r.body, ref.body, r.body_len),
              "OpenAI '%s': %d", oa[i], r.status);
        resp_free(&r);
    }
    resp_free(&ref);
    r = post("/v1/audio/speech", "{\"model\":\"tts-1\",\"input\":\"Hi.\"}");
    EXPECT(r, 400, "missing_parameter", "voice");
    resp_free(&r);

    /* profiles the engine refused: another model's, a corrupt one */
    r = post_free(clone_body("\"voice_profile\":\"other\""));
    EXPECT(r, 400, "voice_profile_incompatible", "voice_profile");
    CHECK(strstr(err_field(&r, "message", m, sizeof m), "hidden") && !strstr(m, "/tmp"),
          "says why, not where: %s", m);
    resp_free(&r);
    r = post("/v1/audio/speech", "{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"Other\"}");
    EXPECT(r, 400, "voice_profile_incompatible", "voice");
    resp_free(&r);
    r = post_free(clone_body("\"voice_profile\":\"corrupt\""));
    EXPECT(r, 400, "voice_profile_unusable", "voice_profile");
    resp_free(&r);

    /* bodies: a clone body over 1 MiB is fine, over --max-clone-body 413;
     * the OpenAI endpoint keeps max_body */
    size_t big = 1500000;
    char *pad = malloc(big + 1);
    memset(pad, 'A', big);
    pad[big] = 0;
    r = post_free(audio_body(pad, ""));
    EXPECT(r, 400, "unsupported_audio", "ref_audio");
    resp_free(&r);
    free(pad);
    const char *over = "POST /v1/tts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: 2097153\r\n\r\n";
    r = raw(over, strlen(over));
    EXPECT(r, 413, "body_too_large", NULL);
    resp_free(&r);
    over = "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: 1048577\r\n\r\n";
    r = raw(over, strlen(over));
    EXPECT(r, 413, "body_too_large", NULL);
    resp_free(&r);

    /* still answering, byte-identically */
    r = post_free(audio_body(g_b64_24, "\"ref_text\":\"This is the reference recording.\""));
    CHECK(same_audio(&r, &g_refs[REF_ICL24].pcm, true), "canary after refusals: %d", r.status);
    resp_free(&r);
}

/* A Base server without --voices: cloning needs reference audio. */
static void test_no_voices_dir(void) {
    qtts_server_config c;
    qtts_server_config_init(&c);
    qtts_server *s = start_server(&c);
    REQUIRE(s, "server without --voices");
    char m[512];
    resp r = post_free(clone_body(""));
    EXPECT(r, 400, "missing_parameter", "ref_audio");
    CHECK(strstr(err_field(&r, "message", m, sizeof m), "ref_audio") && strstr(m, "--voices"), "%s", m);
    resp_free(&r);
    r = post_free(clone_body("\"voice_profile\":\"alice\""));
    EXPECT(r, 400, "no_voice_profiles", "voice_profile");
    resp_free(&r);
    r = post("/v1/audio/speech", "{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"alice\"}");
    EXPECT(r, 400, "no_voice_profiles", "voice");
    resp_free(&r);
    const char *over = "POST /v1/tts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: 16777217\r\n\r\n";
    r = raw(over, strlen(over));
    EXPECT(r, 413, "body_too_large", NULL);     /* the default clone limit: 16 MiB */
    resp_free(&r);
    r = http("GET", "/v1/audio/voices", NULL, NULL, NULL);
    CHECK(r.status == 200 && strstr((char *)r.body, "\"voice_profiles\":false"), "voices: %s", (char *)r.body);
    resp_free(&r);
    r = post_free(audio_body(g_b64_16, "\"response_format\":\"pcm\""));
    CHECK(same_audio(&r, &g_refs[REF_XVO16].pcm, false), "inline clone without --voices: %d", r.status);
    resp_free(&r);
    CHECK(stop_server(s), "drain");
}

static void test_bad_voices_dir(void) {
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.model_dir = MODEL;
    c.port = 0;
    c.voices_dir = "/nonexistent/qtts/voices";
    qtts_server *s = NULL;
    qtts_error err;
    CHECK(qtts_server_start(&c, &s, &err) == QTTS_ERR_IO && !s && strstr(err.msg, "--voices"), "%s", err.msg);
}

int main(void) {
    if (!make_fixtures()) {
        remove_fixtures();
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.voices_dir = g_dir;
    c.max_clone_body = 2u << 20;
    qtts_server *s = start_server(&c);
    if (!s) {
        remove_fixtures();
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    TEST_RUN(test_inline_matches_synthesize);
    TEST_RUN(test_profiles_match_synthesize);
    TEST_RUN(test_concurrent_clones);
    TEST_RUN(test_clone_cut_short);
    TEST_RUN(test_refusals);
    CHECK(stop_server(s), "drain");
    TEST_RUN(test_no_voices_dir);
    TEST_RUN(test_bad_voices_dir);
    remove_fixtures();
    for (int i = 0; i < N_REF; i++) free(g_refs[i].pcm.p);
    free(g_wav24), free(g_wav16), free(g_wav44);
    free(g_b64_24), free(g_b64_16), free(g_b64_44);
    TEST_END();
}
