/*
 * test_server.c - the HTTP server end to end, in-process on 127.0.0.1 with
 * an ephemeral port and the tiny CustomVoice model (tests/fixtures/models/
 * cv06), plus the built binary for signals.
 *
 * What it pins down:
 *   - every endpoint and every error status, in OpenAI's error shape;
 *   - wav/pcm/flac/mp3/opus bodies; streamed (chunked, SSE) audio equal to
 *     the whole-body audio;
 *   - greedy output byte-identical to qtts_synthesize and to the CLI, alone
 *     and inside a batch of concurrent requests;
 *   - a client that disconnects (RST) before or during its stream gets its
 *     job cancelled within a few frames (qtts_cancelled_total);
 *   - queue full -> 503 + Retry-After, queue timeout -> 503, auth -> 401,
 *     slow head -> 408, too many connections -> 503;
 *   - a run of bad requests leaves a canary request byte-identical;
 *   - graceful shutdown finishes the request in flight; SIGTERM drains and
 *     exits 0; a second signal aborts with 128+SIGTERM.
 *
 * Texts/speakers below were picked for their greedy lengths on cv06
 * (serena "A": 482 frames, enough for a 300-frame audio window mid-run).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "base/base.h"
#include "base/json.h"
#include "qwen3_tts.h"
#include "server/server.h"

#ifndef QTTS_BIN
#define QTTS_BIN "build/qwen3-tts"
#endif

#define MODEL QTTS_FIXTURES "/models/cv06"

static int g_port;

#include "http_util.h"

/* A /metrics value (first sample line starting with name). */
static double metric(const char *name) {
    resp r = http("GET", "/metrics", NULL, NULL, NULL);
    double v = -1;
    if (r.status == 200) {
        const char *p = (const char *)r.body;
        size_t nl = strlen(name);
        while ((p = strstr(p, name))) {
            if ((p == (const char *)r.body || p[-1] == '\n') && (p[nl] == ' ' || p[nl] == '{')) {
                const char *sp = strchr(p, ' ');
                if (sp) v = strtod(sp + 1, NULL);
                break;
            }
            p += nl;
        }
    }
    resp_free(&r);
    return v;
}

static bool wait_metric_at_least(const char *name, double want, double timeout_s) {
    double end = qtts_now() + timeout_s;
    while (qtts_now() < end) {
        if (metric(name) >= want) return true;
        usleep(5000);
    }
    return false;
}

/* ==== reference audio (in-process qtts_synthesize, the CLI's path) =============== */


typedef struct {
    const char *text, *speaker;
    bytes pcm;        /* greedy s16le */
    float speed;      /* 0: unchanged */
} ref_case;

static ref_case g_refs[] = {
    {"Hello world.", "vivian", {0}, 0},
    {"Hi.", "vivian", {0}, 0},
    {"Hi.", "eric", {0}, 0},
    {"A", "vivian", {0}, 0},
    {"Good morning, everyone.", "ryan", {0}, 0},
    {"Good morning, everyone.", "eric", {0}, 0},
    {"A", "serena", {0}, 0},   /* the long request of send_long() */
    {"Good morning, everyone.", "ryan", {0}, 2.0f},
};
#define LONG_REF 6
#define SPEED_REF 7         /* g_refs[4] at speed 2 */
#define N_REFS ((int)(sizeof g_refs / sizeof g_refs[0]))

/* Seconds the long request took in make_refs (this build, this machine):
 * the queue-timeout test sizes its timeout from it, since a fixed one
 * races the engine's speed. */
static double g_long_s;

static bool make_refs(void) {
    qtts_engine *e;
    qtts_error err;
    if (qtts_engine_open(MODEL, NULL, &e, &err)) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return false;
    }
    qtts_session *s = qtts_session_new(e, &err);
    bool ok = s != NULL;
    for (int i = 0; ok && i < N_REFS; i++) {
        qtts_request q;
        qtts_request_init(&q);
        q.text = g_refs[i].text;
        q.speaker = g_refs[i].speaker;
        q.do_sample = q.subtalker_do_sample = 0;
        q.speed = g_refs[i].speed;
        q.on_audio = ref_sink;
        q.user = &g_refs[i].pcm;
        double t0 = qtts_now();
        ok = qtts_synthesize(s, &q, NULL, &err) == QTTS_OK;
        if (i == LONG_REF) g_long_s = qtts_now() - t0;
        if (!ok) fprintf(stderr, "reference: %s\n", err.msg);
    }
    qtts_session_free(s);
    qtts_engine_close(e);
    return ok;
}

static char *tts_body(const char *text, const char *speaker, const char *more) {
    static __thread char b[1024];
    snprintf(b, sizeof b, "{\"text\":\"%s\",\"speaker\":\"%s\",\"greedy\":true%s%s}", text, speaker,
             more ? "," : "", more ? more : "");
    return b;
}


static qtts_server *start_server(qtts_server_config *c) { return start_server_on(c, MODEL); }

/* ==== tests: main server (B=4, Q=16) ========================================================== */

static void test_get_endpoints(void) {
    resp r = http("GET", "/health", NULL, NULL, NULL);
    CHECK(r.status == 200, "health %d", r.status);
    CHECK(r.body && strstr((char *)r.body, "\"status\":\"ok\"") && strstr((char *)r.body, "\"max_input_chars\":"),
          "health body %s", r.body ? (char *)r.body : "");
    resp_free(&r);
    r = http("GET", "/v1/models", NULL, NULL, NULL);
    CHECK(r.status == 200 && strstr((char *)r.body, "\"id\":\"qwen3-tts\"") && strstr((char *)r.body, "\"object\":\"list\""),
          "models %d", r.status);
    resp_free(&r);
    r = http("GET", "/v1/audio/voices", NULL, NULL, NULL);
    CHECK(r.status == 200 && strstr((char *)r.body, "\"id\":\"vivian\"") && strstr((char *)r.body, "\"english\""),
          "voices %d", r.status);
    resp_free(&r);
    r = http("GET", "/metrics", NULL, NULL, NULL);
    char v[128];
    CHECK(r.status == 200 && hdr(&r, "Content-Type", v, sizeof v) && strstr(v, "text/plain"), "metrics %d", r.status);
    CHECK(strstr((char *)r.body, "qtts_requests_total{endpoint=\"/health\",code=\"200\"}") &&
              strstr((char *)r.body, "# TYPE qtts_time_to_first_audio_seconds histogram") &&
              strstr((char *)r.body, "qtts_batch_size 4"),
          "metrics body");
    resp_free(&r);
}

static void test_error_statuses(void) {
    struct {
        const char *method, *path, *ctype, *body;
        int status;
        const char *code;
    } cases[] = {
        {"GET", "/nope", NULL, NULL, 404, "not_found"},
        {"GET", "/v1/audio/speech", NULL, NULL, 405, "method_not_allowed"},
        {"POST", "/health", "application/json", "{}", 405, "method_not_allowed"},
        {"POST", "/v1/audio/speech", "application/json", "{", 400, "invalid_json"},
        {"POST", "/v1/audio/speech", "application/json", "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"foo\":1}", 400, "unknown_parameter"},
        {"POST", "/v1/audio/speech", "application/json", "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"nobody\"}", 400, "invalid_value"},
        {"POST", "/v1/audio/speech", "application/json", "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":4.5}", 400, "invalid_value"},
        {"POST", "/v1/audio/speech", "application/json", "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"response_format\":\"aac\"}", 400, "unsupported_response_format"},
        {"POST", "/v1/audio/speech", "text/plain", "hello", 415, "unsupported_media_type"},
        {"POST", "/v1/tts", "application/json", "{\"text\":\"x\",\"speaker\":\"ryan\",\"ref_audio\":\"AAAA\"}", 400, "unsupported_feature"},
        {"POST", "/v1/tts", "application/json", "{\"text\":\"   \",\"speaker\":\"ryan\"}", 400, "invalid_value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        resp r = http(cases[i].method, cases[i].path, cases[i].ctype, cases[i].body, NULL);
        CHECK(r.status == cases[i].status && is_error(&r, cases[i].code), "case %zu: %d %s", i, r.status,
              r.body ? (char *)r.body : "");
        resp_free(&r);
    }
    /* framing-level refusals, sent raw */
    struct {
        const char *raw;
        int status;
    } raws[] = {
        {"POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n\r\n", 411},
        {"POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n", 413},
        {"POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 400},
        {"POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
        {"POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400},
        {"GET /health HTTP/1.1\nHost: a\n\n", 400},
        {"GET /health HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"GET /health HTTP/1.1\r\n\r\n", 400},
        {"GET /health HTTP/1.1\r\nHost: a\r\nExpect: x\r\n\r\n", 417},
    };
    for (size_t i = 0; i < sizeof raws / sizeof raws[0]; i++) {
        resp r = raw(raws[i].raw, strlen(raws[i].raw));
        CHECK(r.status == raws[i].status && is_error(&r, NULL), "raw %zu: %d", i, r.status);
        resp_free(&r);
    }
    /* 431: a head over 16 KiB, and 65 header lines */
    char *big = malloc(20000);
    size_t n = (size_t)snprintf(big, 20000, "GET /health HTTP/1.1\r\nHost: a\r\nX-Big: ");
    memset(big + n, 'b', 20000 - n);
    resp r = raw(big, 20000);
    CHECK(r.status == 431, "big head: %d", r.status);
    resp_free(&r);
    n = (size_t)snprintf(big, 20000, "GET /health HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < 70; i++) n += (size_t)snprintf(big + n, 20000 - n, "X-%d: v\r\n", i);
    n += (size_t)snprintf(big + n, 20000 - n, "\r\n");
    r = raw(big, n);
    CHECK(r.status == 431, "many headers: %d", r.status);
    resp_free(&r);
    free(big);
}

static const char *const QUICK_OA =
    "{\"model\":\"qwen3-tts\",\"input\":\"The quick brown fox jumps over the lazy dog.\",\"voice\":\"vivian\"%s}";

static resp oa_req(const char *more) {
    char b[512];
    snprintf(b, sizeof b, QUICK_OA, more ? more : "");
    return post("/v1/audio/speech", b);
}

/* Decodes the SSE body into the concatenated audio; true when it ends with
 * speech.audio.done. */
static bool sse_audio(const resp *r, bytes *out) {
    static const int8_t dec[256] = {
        ['A'] = 0,  ['B'] = 1,  ['C'] = 2,  ['D'] = 3,  ['E'] = 4,  ['F'] = 5,  ['G'] = 6,  ['H'] = 7,
        ['I'] = 8,  ['J'] = 9,  ['K'] = 10, ['L'] = 11, ['M'] = 12, ['N'] = 13, ['O'] = 14, ['P'] = 15,
        ['Q'] = 16, ['R'] = 17, ['S'] = 18, ['T'] = 19, ['U'] = 20, ['V'] = 21, ['W'] = 22, ['X'] = 23,
        ['Y'] = 24, ['Z'] = 25, ['a'] = 26, ['b'] = 27, ['c'] = 28, ['d'] = 29, ['e'] = 30, ['f'] = 31,
        ['g'] = 32, ['h'] = 33, ['i'] = 34, ['j'] = 35, ['k'] = 36, ['l'] = 37, ['m'] = 38, ['n'] = 39,
        ['o'] = 40, ['p'] = 41, ['q'] = 42, ['r'] = 43, ['s'] = 44, ['t'] = 45, ['u'] = 46, ['v'] = 47,
        ['w'] = 48, ['x'] = 49, ['y'] = 50, ['z'] = 51, ['0'] = 52, ['1'] = 53, ['2'] = 54, ['3'] = 55,
        ['4'] = 56, ['5'] = 57, ['6'] = 58, ['7'] = 59, ['8'] = 60, ['9'] = 61, ['+'] = 62, ['/'] = 63};
    const char *p = (const char *)r->body;
    bool done = false;
    while (p && *p) {
        const char *e = strstr(p, "\n\n");
        if (!e) return false;
        if (strncmp(p, "data: {\"type\":\"speech.audio.delta\",\"audio\":\"", 44) == 0) {
            const char *s = p + 44;
            const char *q = strchr(s, '"');
            uint32_t acc = 0;
            int bits = 0;
            for (; s < q && *s != '='; s++) {
                acc = acc << 6 | (uint32_t)dec[(unsigned char)*s];
                bits += 6;
                if (bits >= 8) {
                    bits -= 8;
                    uint8_t byte = (uint8_t)(acc >> bits);
                    if (out->n + 1 > out->cap) {
                        out->cap = out->cap ? out->cap * 2 : 65536;
                        out->p = realloc(out->p, out->cap);
                    }
                    out->p[out->n++] = byte;
                }
            }
        } else if (strncmp(p, "data: {\"type\":\"speech.audio.done\"", 33) == 0) {
            done = true;
        } else {
            return false;
        }
        p = e + 2;
    }
    return done;
}

static void test_speech_formats(void) {
    resp w = oa_req(NULL);
    const uint8_t *pcm;
    size_t n;
    REQUIRE(w.status == 200, "wav %d %s", w.status, w.body ? (char *)w.body : "");
    char v[64];
    CHECK(hdr(&w, "Content-Type", v, sizeof v) && strcmp(v, "audio/wav") == 0, "ctype %s", v);
    REQUIRE(wav_pcm(&w, &pcm, &n) && n > 0, "wav body");
    uint32_t riff = w.body[4] | w.body[5] << 8 | w.body[6] << 16 | (uint32_t)w.body[7] << 24;
    uint32_t data = w.body[40] | w.body[41] << 8 | w.body[42] << 16 | (uint32_t)w.body[43] << 24;
    CHECK(data == n && riff == n + 36, "sizes %u %u %zu", riff, data, n);
    CHECK(hdr(&w, "X-Audio-Frames", v, sizeof v) && (size_t)atoi(v) * 1920 * 2 == n, "frames header");

    resp p = oa_req(",\"response_format\":\"pcm\"");
    CHECK(p.status == 200 && p.body_len == n && memcmp(p.body, pcm, n) == 0, "pcm == wav data (seed 0 is deterministic)");
    resp_free(&p);

    static const struct {
        const char *fmt;
        const char *magic;
    } enc[] = {{"flac", "fLaC"}, {"opus", "OggS"}, {"mp3", NULL}};
    for (size_t i = 0; i < 3; i++) {
        char more[64];
        snprintf(more, sizeof more, ",\"response_format\":\"%s\"", enc[i].fmt);
        resp e = oa_req(more);
        CHECK(e.status == 200 && e.body_len > 16, "%s: %d", enc[i].fmt, e.status);
        if (e.status == 200 && enc[i].magic) CHECK(memcmp(e.body, enc[i].magic, 4) == 0, "%s magic", enc[i].fmt);
        if (e.status == 200 && !enc[i].magic)
            CHECK(memcmp(e.body, "ID3", 3) == 0 || (e.body[0] == 0xFF && (e.body[1] & 0xE0) == 0xE0), "mp3 sync");
        resp_free(&e);
    }

    /* stream_format=audio: chunked, streaming WAV header, same samples */
    resp s = oa_req(",\"stream_format\":\"audio\"");
    CHECK(s.status == 200 && s.complete && hdr(&s, "Transfer-Encoding", v, sizeof v), "chunked %d", s.status);
    CHECK(s.body_len == n + 44 && memcmp(s.body, "RIFF\xff\xff\xff\xff", 8) == 0 &&
              memcmp(s.body + 40, "\xff\xff\xff\xff", 4) == 0 && memcmp(s.body + 44, pcm, n) == 0,
          "streamed wav == whole wav (%zu vs %zu)", s.body_len, n + 44);
    resp_free(&s);
    s = oa_req(",\"stream_format\":\"audio\",\"response_format\":\"pcm\"");
    CHECK(s.status == 200 && s.complete && s.body_len == n && memcmp(s.body, pcm, n) == 0, "streamed pcm");
    resp_free(&s);

    /* SSE: base64 deltas of pcm, then speech.audio.done */
    s = oa_req(",\"stream_format\":\"sse\",\"response_format\":\"pcm\"");
    bytes b = {0};
    CHECK(s.status == 200 && hdr(&s, "Content-Type", v, sizeof v) && strcmp(v, "text/event-stream") == 0, "sse head");
    CHECK(sse_audio(&s, &b) && b.n == n && memcmp(b.p, pcm, n) == 0, "sse audio == pcm (%zu vs %zu)", b.n, n);
    CHECK(strstr((char *)s.body, "\"usage\":{\"input_tokens\":"), "usage");
    free(b.p);
    resp_free(&s);
    resp_free(&w);
}

/* speed: the in-process engine's audio, whole and streamed, through both
 * endpoints; the same frames as at speed 1, about half the samples. */
static void test_speed(void) {
    const ref_case *one = &g_refs[4], *two = &g_refs[SPEED_REF];
    CHECK(fabs((double)two->pcm.n - one->pcm.n / 2.0) <= 0.05 * one->pcm.n / 2.0,
          "speed 2: %zu bytes for %zu at speed 1", two->pcm.n, one->pcm.n);
    const char *bodies[] = {
        "{\"text\":\"Good morning, everyone.\",\"speaker\":\"ryan\",\"greedy\":true,\"speed\":2}",
        "{\"text\":\"Good morning, everyone.\",\"speaker\":\"ryan\",\"greedy\":true,\"speed\":2,"
        "\"stream\":true,\"response_format\":\"pcm\"}",
    };
    char f1[32] = "", f2[32] = "";
    for (int i = 0; i < 2; i++) {
        resp r = post("/v1/tts", bodies[i]);
        const uint8_t *pcm = r.body;
        size_t n = r.body_len;
        REQUIRE(r.status == 200 && (i == 1 || wav_pcm(&r, &pcm, &n)), "status %d %s", r.status,
                r.body ? (char *)r.body : "");
        CHECK(n == two->pcm.n && memcmp(pcm, two->pcm.p, n) == 0,
              "%s: server audio at speed 2 differs from qtts_synthesize (%zu vs %zu bytes)",
              i ? "streamed" : "whole", n, two->pcm.n);
        if (i == 0) hdr(&r, "X-Audio-Frames", f2, sizeof f2);
        resp_free(&r);
    }
    resp r = post("/v1/tts", tts_body(one->text, one->speaker, NULL));
    hdr(&r, "X-Audio-Frames", f1, sizeof f1);
    CHECK(f1[0] && !strcmp(f1, f2), "frames at speed 1 '%s', at speed 2 '%s'", f1, f2);
    resp_free(&r);
    /* OpenAI's endpoint takes it too (its sampling is the model's, so only
     * the length is compared with its own speed-1 answer) */
    resp a = oa_req(NULL), b = oa_req(",\"speed\":0.5");
    CHECK(a.status == 200 && b.status == 200, "openai speed: %d %d", a.status, b.status);
    if (a.status == 200 && b.status == 200)
        CHECK(fabs((double)(b.body_len - 44) - 2.0 * (a.body_len - 44)) <= 0.05 * 2.0 * (a.body_len - 44),
              "speed 0.5: %zu bytes for %zu", b.body_len, a.body_len);
    resp_free(&a);
    resp_free(&b);
}

static void test_greedy_matches_synthesize_and_cli(void) {
    for (int i = 0; i < 2; i++) {
        resp r = post("/v1/tts", tts_body(g_refs[i].text, g_refs[i].speaker, NULL));
        const uint8_t *pcm;
        size_t n;
        REQUIRE(r.status == 200 && wav_pcm(&r, &pcm, &n), "status %d", r.status);
        CHECK(n == g_refs[i].pcm.n && memcmp(pcm, g_refs[i].pcm.p, n) == 0,
              "'%s': server audio differs from qtts_synthesize (%zu vs %zu bytes)", g_refs[i].text, n,
              g_refs[i].pcm.n);
        /* the CLI (when this build has it: make test builds it, test-some may not) */
        struct stat st;
        if (i == 0 && stat(QTTS_BIN, &st) == 0) {
            char out[64], cmd[1024];
            snprintf(out, sizeof out, "/tmp/qtts_test_server_%d.wav", (int)getpid());
            snprintf(cmd, sizeof cmd, "'%s' synth -m '%s' -s %s --greedy --text '%s' -o %s -q", QTTS_BIN, MODEL,
                     g_refs[i].speaker, g_refs[i].text, out);
            CHECK(system(cmd) == 0, "cli failed");
            FILE *f = fopen(out, "rb");
            uint8_t *file = malloc(r.body_len + 1);
            size_t got = f ? fread(file, 1, r.body_len + 1, f) : 0;
            if (f) fclose(f);
            CHECK(got == r.body_len && memcmp(file, r.body, got) == 0, "server WAV != CLI WAV byte for byte");
            free(file);
            unlink(out);
        }
        resp_free(&r);
    }
}

typedef struct {
    int ref;
    resp r;
    pthread_barrier_t *bar;
} job_arg;

static void *job_thread(void *arg) {
    job_arg *a = arg;
    if (a->bar) pthread_barrier_wait(a->bar);
    char more[64] = "";
    if (g_refs[a->ref].speed) snprintf(more, sizeof more, "\"speed\":%g", g_refs[a->ref].speed);
    a->r = post("/v1/tts", tts_body(g_refs[a->ref].text, g_refs[a->ref].speaker, more[0] ? more : NULL));
    return NULL;
}

static void test_batch_byte_identical(void) {
    /* Six concurrent greedy requests on four slots (one with a speed
     * change): the others join as slots free. Each must equal its solo
     * reference. */
    enum { N = 6 };
    int which[N] = {1, 2, 3, 4, 5, SPEED_REF};
    job_arg a[N];
    pthread_t th[N];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, N);
    double steps0 = metric("qtts_batch_steps_total"), rows0 = metric("qtts_batch_step_rows_total");
    for (int i = 0; i < N; i++) {
        a[i] = (job_arg){.ref = which[i], .bar = &bar};
        pthread_create(&th[i], NULL, job_thread, &a[i]);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < N; i++) {
        const uint8_t *pcm;
        size_t n;
        ref_case *rc = &g_refs[a[i].ref];
        CHECK(a[i].r.status == 200 && wav_pcm(&a[i].r, &pcm, &n) && n == rc->pcm.n && memcmp(pcm, rc->pcm.p, n) == 0,
              "'%s'/%s in a batch differs from alone (status %d)", rc->text, rc->speaker, a[i].r.status);
        resp_free(&a[i].r);
    }
    double steps = metric("qtts_batch_steps_total") - steps0, rows = metric("qtts_batch_step_rows_total") - rows0;
    fprintf(stderr, "  batch occupancy over the run: %.2f rows/step (%g steps)\n", steps > 0 ? rows / steps : 0, steps);
    CHECK(rows > steps, "requests were stepped together");
}

/* Two voices in turn, one request at a time: each request goes back to the
 * slot its voice used last, whose session then computes only the prompt's
 * last row (the same request again), and the audio is still the solo
 * reference's. With the first free slot every time, all four would share
 * one session and the repeats would reuse only the voices' common rows. */
static void test_prompt_reuse_slots(void) {
    const int order[] = {4, 5, 4, 5};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(order); i++) {
        const ref_case *rc = &g_refs[order[i]];
        const double rows0 = metric("qtts_prompt_rows_total");
        const double reused0 = metric("qtts_prompt_rows_reused_total");
        resp r = post("/v1/tts", tts_body(rc->text, rc->speaker, NULL));
        const uint8_t *pcm;
        size_t n;
        CHECK(r.status == 200 && wav_pcm(&r, &pcm, &n) && n == rc->pcm.n &&
                  memcmp(pcm, rc->pcm.p, n) == 0,
              "request %zu ('%s'/%s) differs from alone (status %d)", i, rc->text, rc->speaker,
              r.status);
        resp_free(&r);
        const double rows = metric("qtts_prompt_rows_total") - rows0;
        const double reused = metric("qtts_prompt_rows_reused_total") - reused0;
        CHECK(rows > 1 && reused <= rows - 1, "request %zu: %g of %g rows reused", i, reused, rows);
        if (i >= 2)
            CHECK(reused == rows - 1, "request %zu (%s again): %g of %g prompt rows reused", i,
                  rc->speaker, reused, rows);
    }
}

static void test_keep_alive_and_pipelining(void) {
    int fd = connect_to(g_port);
    REQUIRE(fd >= 0, "connect");
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    const char *body = tts_body("Hello world.", "vivian", NULL);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET /health HTTP/1.1\r\nHost: a\r\n\r\n"
                     "POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s"
                     "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n",
                     strlen(body), body);
    REQUIRE(send_all(fd, req, (size_t)n), "send");
    resp r1, r2, r3;
    CHECK(read_resp(rd, &r1, false) && r1.status == 200, "first");
    CHECK(read_resp(rd, &r2, false) && r2.status == 200 && r2.body_len == g_refs[0].pcm.n + 44, "second");
    CHECK(read_resp(rd, &r3, false) && r3.status == 200 && strstr((char *)r3.body, "qwen3-tts"), "third");
    resp_free(&r1);
    resp_free(&r2);
    resp_free(&r3);
    /* Expect: 100-continue */
    n = snprintf(req, sizeof req,
                 "POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                 "Content-Length: %zu\r\n\r\n",
                 strlen(body));
    send_all(fd, req, (size_t)n);
    char line[256];
    CHECK(read_line(rd, line, sizeof line) && strncmp(line, "HTTP/1.1 100", 12) == 0, "100 Continue: %s", line);
    read_line(rd, line, sizeof line);
    send_all(fd, body, strlen(body));
    CHECK(read_resp(rd, &r1, false) && r1.status == 200, "after 100");
    resp_free(&r1);
    free(rd);
    close(fd);
}

static void test_half_close_completes(void) {
    int fd = connect_to(g_port);
    REQUIRE(fd >= 0, "connect");
    const char *body = tts_body("Hello world.", "vivian", NULL);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, req, (size_t)n);
    shutdown(fd, SHUT_WR);
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    resp r;
    CHECK(read_resp(rd, &r, false) && r.status == 200 && r.body_len == g_refs[0].pcm.n + 44,
          "half-closed client still gets its audio (%d)", r.status);
    resp_free(&r);
    free(rd);
    close(fd);
}

/* Sends a long greedy request (serena "A": 482 frames) and returns the socket. */
static int send_long(const char *more) {
    int fd = connect_to(g_port);
    if (fd < 0) return -1;
    char body[512];
    snprintf(body, sizeof body, "{\"text\":\"A\",\"speaker\":\"serena\",\"greedy\":true,\"max_frames\":1000%s%s}",
             more ? "," : "", more ? more : "");
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST /v1/tts HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, req, (size_t)n);
    return fd;
}

static void test_disconnect_cancels(void) {
    double c0 = metric("qtts_cancelled_total"), w0 = metric("qtts_frames_after_cancel_total");
    double f0 = metric("qtts_frames_total");
    int fd = send_long(NULL);
    REQUIRE(fd >= 0, "connect");
    /* wait until it is generating, then reset the connection */
    REQUIRE(wait_metric_at_least("qtts_frames_total", f0 + 5, 30), "no frames");
    rst_close(fd);
    CHECK(wait_metric_at_least("qtts_cancelled_total", c0 + 1, 10), "RST did not cancel");
    double wasted = metric("qtts_frames_after_cancel_total") - w0;
    CHECK(wasted <= 3, "%g frames computed after the cancel", wasted);
    double f1 = metric("qtts_frames_total");
    usleep(200000);
    CHECK(metric("qtts_frames_total") == f1, "frames still being generated after cancel");
    CHECK(metric("qtts_batch_active") == 0, "slot freed");
}

static void test_disconnect_mid_stream(void) {
    /* streamed responses get audio from the first frame on, so the first
     * chunk arrives long before the long request ends */
    double c0 = metric("qtts_cancelled_total");
    int fd = send_long("\"stream\":true,\"response_format\":\"pcm\"");
    REQUIRE(fd >= 0, "connect");
    /* the first audio arrives mid-run */
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    char line[512];
    bool got_head = read_line(rd, line, sizeof line) && strncmp(line, "HTTP/1.1 200", 12) == 0;
    while (got_head && read_line(rd, line, sizeof line) && strcmp(line, "\r\n") != 0) {
    }
    bool got_chunk = got_head && read_line(rd, line, sizeof line) && strtoul(line, NULL, 16) > 0;
    CHECK(got_head && got_chunk, "streaming started: %s", line);
    free(rd);
    rst_close(fd);
    CHECK(wait_metric_at_least("qtts_cancelled_total", c0 + 1, 10), "mid-stream RST did not cancel");
    CHECK(metric("qtts_batch_active") == 0, "slot freed");
}

static void test_bad_matrix_then_canary(void) {
    static const char *bad[] = {
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"seed\":-5}",
        "{\"text\":\"x\",\"speaker\":\"../../etc/passwd\"}",
        "{\"text\":\"\xff\xfe\",\"speaker\":\"ryan\"}",
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"max_frames\":99999999}",
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"temperature\":-1}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"top_k\":1e309}",
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"language\":\"file:///etc/passwd\"}",
        "null",
        "{\"text\":\"x\",\"speaker\":\"ryan\",\"x_vector_only\":true}",
    };
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            resp r = post("/v1/tts", bad[i]);
            CHECK(r.status == 400 && is_error(&r, NULL), "bad %zu: %d", i, r.status);
            resp_free(&r);
        }
    resp r = post("/v1/tts", tts_body(g_refs[0].text, g_refs[0].speaker, NULL));
    const uint8_t *pcm;
    size_t n;
    CHECK(r.status == 200 && wav_pcm(&r, &pcm, &n) && n == g_refs[0].pcm.n && memcmp(pcm, g_refs[0].pcm.p, n) == 0,
          "canary changed after the bad-input matrix");
    resp_free(&r);
}

static void *long_ok_thread(void *arg) {
    job_arg *a = arg;
    a->r = post("/v1/tts", tts_body(g_refs[a->ref].text, g_refs[a->ref].speaker, NULL));
    return NULL;
}

/* Allocation failure injection (reliability goal 18) through the server:
 * one allocation fails, at each of the positions a request makes (the
 * connection thread's parsing and buffers, the worker's session start and
 * steps); the request gets 200 with the right audio or a 503 out_of_memory
 * / out_of_resources, and the next request is the canary, byte for byte. */
static void test_alloc_failure(void) {
    const char *body = tts_body(g_refs[0].text, g_refs[0].speaker, NULL);
    long c0 = qtts_alloc_count();
    resp r = post("/v1/tts", body);
    long total = qtts_alloc_count() - c0;
    resp_free(&r);
    int refused = 0, tried = 0;
    for (long at = 0; at < total + 8; at += total > 120 ? total / 120 : 1, tried++) {
        qtts_alloc_fail_at(at);
        r = post("/v1/tts", body);
        qtts_alloc_fail_at(-1);
        const uint8_t *pcm;
        size_t n;
        bool ok = r.status == 200 && wav_pcm(&r, &pcm, &n) && n == g_refs[0].pcm.n &&
                  memcmp(pcm, g_refs[0].pcm.p, n) == 0;
        bool oom = r.status == 503 && (is_error(&r, "out_of_memory") || is_error(&r, "out_of_resources"));
        CHECK(ok || oom, "allocation %ld failing: status %d %.200s", at, r.status,
              r.body && r.status != 200 ? (char *)r.body : "");
        refused += oom;
        resp_free(&r);
    }
    fprintf(stderr, "  allocation failures: %d positions over ~%ld allocations, %d answered 503\n", tried,
            total, refused);
    CHECK(refused > 0, "no injected failure reached a client");
    r = post("/v1/tts", body);
    const uint8_t *pcm;
    size_t n;
    CHECK(r.status == 200 && wav_pcm(&r, &pcm, &n) && n == g_refs[0].pcm.n && memcmp(pcm, g_refs[0].pcm.p, n) == 0,
          "canary after the failures: %d", r.status);
    resp_free(&r);
}

static void test_graceful_shutdown(qtts_server *s) {
    job_arg a = {.ref = 1};
    pthread_t th;
    double f0 = metric("qtts_frames_total");
    pthread_create(&th, NULL, long_ok_thread, &a);
    CHECK(wait_metric_at_least("qtts_frames_total", f0 + 3, 30), "request did not start");
    qtts_server_stop(s);
    /* the listener closes; the request in flight completes */
    bool refused = false;
    for (int i = 0; i < 100 && !refused; i++) {
        int fd = connect_to(g_port);
        if (fd < 0) refused = true;
        else {
            resp r;
            reader *rd = calloc(1, sizeof *rd);
            rd->fd = fd;
            send_all(fd, "GET /health HTTP/1.1\r\nHost: a\r\n\r\n", 34);
            if (read_resp(rd, &r, false)) {
                CHECK(r.status == 503 || r.status == 200, "during drain: %d", r.status);
                resp_free(&r);
            }
            free(rd);
            close(fd);
            usleep(10000);
        }
    }
    CHECK(refused, "still accepting after stop");
    pthread_join(th, NULL);
    const uint8_t *pcm;
    size_t n;
    CHECK(a.r.status == 200 && wav_pcm(&a.r, &pcm, &n) && n == g_refs[1].pcm.n, "in-flight request finished: %d",
          a.r.status);
    resp_free(&a.r);
    qtts_error err;
    int code = qtts_server_wait(s, &err);
    CHECK(code == 0, "exit code %d", code);
    if (code < 128) qtts_server_free(s);
}

/* ==== tests: a small, strict server (B=1, Q=1, API key, short timeouts) ========================= */

static void test_auth(void) {
    resp r = http("GET", "/health", NULL, NULL, NULL);
    CHECK(r.status == 200, "health is public: %d", r.status);
    resp_free(&r);
    r = http("GET", "/metrics", NULL, NULL, NULL);
    CHECK(r.status == 401 && is_error(&r, "invalid_api_key"), "metrics needs the key: %d", r.status);
    resp_free(&r);
    r = http("GET", "/v1/models", NULL, NULL, "Authorization: Bearer wrong\r\n");
    CHECK(r.status == 401, "wrong key: %d", r.status);
    resp_free(&r);
    r = http("GET", "/v1/models", NULL, NULL, "Authorization: Bearer sekret-\r\n");
    CHECK(r.status == 401, "longer key: %d", r.status);
    resp_free(&r);
    r = http("GET", "/v1/models", NULL, NULL, "Authorization: Bearer sekre\r\n");
    CHECK(r.status == 401, "prefix of the key: %d", r.status);
    resp_free(&r);
    r = http("GET", "/v1/models", NULL, NULL, "Authorization: bearer sekret\r\n");
    CHECK(r.status == 200, "right key: %d", r.status);
    resp_free(&r);
    r = http("POST", "/v1/audio/speech", "application/json", "{}", NULL);
    CHECK(r.status == 401 && is_error(&r, NULL), "speech needs the key: %d", r.status);
    char v[64];
    CHECK(hdr(&r, "WWW-Authenticate", v, sizeof v) != NULL, "WWW-Authenticate");
    resp_free(&r);
}

static void test_header_timeout(void) {
    int fd = connect_to(g_port);
    REQUIRE(fd >= 0, "connect");
    send_all(fd, "GET /health HTTP/1.1\r\nHost: a\r\n", 31);   /* never finished */
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    resp r;
    double t0 = qtts_now();
    CHECK(read_resp(rd, &r, false) && r.status == 408, "slow head: %d", r.status);
    CHECK(qtts_now() - t0 < 10, "took %.1f s", qtts_now() - t0);
    resp_free(&r);
    free(rd);
    close(fd);
}

static void test_queue_full_and_timeout(void) {
    /* A runs (B=1), B waits (Q=1), C is refused; B then times out in the queue. */
    int a = send_long(NULL);
    REQUIRE(a >= 0, "connect");
    REQUIRE(wait_metric_at_least("qtts_batch_active", 1, 30), "A not running");
    int b = send_long(NULL);
    REQUIRE(wait_metric_at_least("qtts_queue_waiting", 1, 10), "B not queued");
    resp c = post("/v1/tts", tts_body("Hello world.", "vivian", NULL));
    char v[32];
    CHECK(c.status == 503 && is_error(&c, "queue_full") && hdr(&c, "Retry-After", v, sizeof v), "queue full: %d",
          c.status);
    resp_free(&c);
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = b;
    resp rb;
    CHECK(read_resp(rd, &rb, false) && rb.status == 503 && is_error(&rb, "queue_timeout"), "queue timeout: %d", rb.status);
    resp_free(&rb);
    free(rd);
    close(b);
    rst_close(a);
    CHECK(wait_metric_at_least("qtts_cancelled_total", 2, 10), "cancelled: A (RST) and B (timeout)");
}

/* Whether the server refused fd at accept (it then answers 503 and
 * closes), without waiting. */
static bool refused_at_accept(int fd) {
    char b[16] = {0};
    return recv(fd, b, sizeof b - 1, MSG_DONTWAIT | MSG_PEEK) > 0 && strstr(b, " 503") != NULL;
}

static void test_connection_cap(void) {
    /* max_connections 4: a fifth concurrent connection is answered 503.
     * An earlier request's connection stays counted until its thread has
     * torn it down, a moment after the client read its answer; on a loaded
     * machine one of the four held here could then be refused at accept,
     * and every later ask would find room (CI saw that once). A round in
     * which the server refused a held connection is run again, up to three
     * times; a round without one must end in the 503. */
    bool capped = false, refused = true;
    for (int round = 0; round < 3 && refused && !capped; round++) {
        int fds[4];
        for (int i = 0; i < 4; i++) {
            fds[i] = connect_to(g_port);
            CHECK(fds[i] >= 0, "connect %d", i);
        }
        /* The server counts a connection once its accept loop has taken it,
         * which on a loaded machine can lag the client's connect: ask until
         * the four are counted (a fifth is then refused), for up to 5 s. */
        resp r = {0};
        double end = qtts_now() + 5;
        do {
            usleep(20000);
            resp_free(&r);
            r = http("GET", "/health", NULL, NULL, NULL);
        } while (r.status == 200 && qtts_now() < end);
        capped = r.status == 503 && is_error(&r, "too_many_connections");
        refused = false;
        for (int i = 0; i < 4; i++) refused |= fds[i] >= 0 && refused_at_accept(fds[i]);
        if (!capped) fprintf(stderr, "  connection cap round %d: %d%s\n", round, r.status,
                             refused ? ", a held connection was refused" : "");
        resp_free(&r);
        for (int i = 0; i < 4; i++)
            if (fds[i] >= 0) close(fds[i]);
        end = qtts_now() + 5;
        do {
            r = http("GET", "/health", NULL, NULL, NULL);
            int st = r.status;
            resp_free(&r);
            if (st == 200) break;
            usleep(20000);
        } while (qtts_now() < end);
        CHECK(qtts_now() < end, "connections not released");
    }
    CHECK(capped, "a fifth connection was not refused over the cap");
}

/* serve --quant: an unknown format is refused at start; a known one
 * reaches the engine's loader (the tiny model's 16-column matrices cannot
 * take 32-element blocks, and the loader's message says so: quantized
 * serving itself is the engine's, covered by test_quant_model). /health
 * reports the weights the main server loaded. */
static void test_quant_server(void) {
    resp r = http("GET", "/health", NULL, NULL, NULL);
    CHECK(r.status == 200 && r.body &&
              strstr((char *)r.body, "\"weights\":{\"talker\":\"none\",\"code_predictor\":\"none\","
                                     "\"codec\":\"fp32\",\"kv_cache\":\"f32\"}"),
          "health: %s", r.body ? (char *)r.body : "");
    resp_free(&r);
}

static void test_quant_refused(void) {
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.threads = 2;
    c.model_dir = MODEL;
    c.host = "127.0.0.1";
    c.port = 0;
    c.quant = "int9";
    qtts_server *s;
    qtts_error err;
    CHECK(qtts_server_start(&c, &s, &err) == QTTS_ERR_INVALID && strstr(err.msg, "int9"), "bad quant: %s", err.msg);
    c.quant = NULL;
    c.codec = "fp16";
    CHECK(qtts_server_start(&c, &s, &err) == QTTS_ERR_INVALID && strstr(err.msg, "fp16"), "bad codec: %s", err.msg);
    c.codec = NULL;
    c.kv_cache = "fp8";
    CHECK(qtts_server_start(&c, &s, &err) == QTTS_ERR_INVALID && strstr(err.msg, "fp8"),
          "bad KV cache: %s", err.msg);
    c.kv_cache = NULL;
    c.quant = "int8";
    REQUIRE(qtts_server_start(&c, &s, &err) == QTTS_OK, "start: %s", err.msg);
    CHECK(!qtts_server_wait_ready(s, 30), "became ready");
    int code = qtts_server_wait(s, &err);
    CHECK(code == 1 && strstr(err.msg, "multiple of 32"), "exit %d: %s", code, err.msg);
    if (code < 128) qtts_server_free(s);
}

static void test_model_load_failure(void) {
    /* the listener comes up first; a model that fails to load ends the
     * server with exit code 1 and the loader's message */
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.model_dir = QTTS_FIXTURES "/no-such-model";
    c.host = "127.0.0.1";
    c.port = 0;
    qtts_server *s;
    qtts_error err;
    REQUIRE(qtts_server_start(&c, &s, &err) == QTTS_OK, "start: %s", err.msg);
    CHECK(!qtts_server_wait_ready(s, 30), "became ready without a model");
    int code = qtts_server_wait(s, &err);
    CHECK(code == 1 && strstr(err.msg, "no-such-model"), "exit %d: %s", code, err.msg);
    if (code < 128) qtts_server_free(s);
}

/* ==== the binary: signals ======================================================================= */

typedef struct {
    pid_t pid;
    int err_fd;
    int port;
} child;

static bool spawn_server(child *c) {
    int p[2];
    if (pipe(p) != 0) return false;
    c->pid = fork();
    if (c->pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(QTTS_BIN, QTTS_BIN, "serve", "-m", MODEL, "--port", "0", "--drain-timeout", "60", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    c->err_fd = p[0];
    /* read stderr until "ready on port N" */
    char buf[4096];
    size_t n = 0;
    double end = qtts_now() + 60;
    while (qtts_now() < end && n < sizeof buf - 1) {
        struct pollfd pf = {.fd = c->err_fd, .events = POLLIN};
        if (poll(&pf, 1, 200) <= 0) continue;
        ssize_t r = read(c->err_fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
        buf[n] = 0;
        const char *m = strstr(buf, "ready on port ");
        if (m && strchr(m, '\n')) {
            c->port = atoi(m + 14);
            return c->port > 0;
        }
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    return false;
}

static int wait_exit(child *c, double timeout_s) {
    double end = qtts_now() + timeout_s;
    int st;
    while (qtts_now() < end) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            close(c->err_fd);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        char drain[4096];
        ssize_t k = read(c->err_fd, drain, sizeof drain);   /* keep the pipe from filling */
        (void)k;
        usleep(20000);
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    close(c->err_fd);
    return -1;
}

static void test_sigterm_drains(void) {
    struct stat st;
    if (stat(QTTS_BIN, &st) != 0) {
        fprintf(stderr, "  (skipped: %s not built)\n", QTTS_BIN);
        return;
    }
    child c;
    REQUIRE(spawn_server(&c), "server did not start");
    fcntl(c.err_fd, F_SETFL, O_NONBLOCK);
    g_port = c.port;
    job_arg a = {.ref = 1};
    pthread_t th;
    pthread_create(&th, NULL, long_ok_thread, &a);
    CHECK(wait_metric_at_least("qtts_frames_total", 3, 30), "request did not start");
    kill(c.pid, SIGUSR1);   /* stats, not death */
    usleep(20000);
    kill(c.pid, SIGTERM);
    pthread_join(th, NULL);
    CHECK(a.r.status == 200 && a.r.body_len == g_refs[1].pcm.n + 44, "in-flight request completed: %d", a.r.status);
    resp_free(&a.r);
    CHECK(wait_exit(&c, 30) == 0, "exit code after drain");

    /* a second signal aborts */
    REQUIRE(spawn_server(&c), "server did not start again");
    fcntl(c.err_fd, F_SETFL, O_NONBLOCK);
    g_port = c.port;
    int fd = send_long(NULL);
    CHECK(wait_metric_at_least("qtts_frames_total", 3, 30), "request did not start");
    kill(c.pid, SIGTERM);
    usleep(100000);
    kill(c.pid, SIGTERM);
    double t0 = qtts_now();
    int code = wait_exit(&c, 10);
    CHECK(code == 128 + SIGTERM, "second SIGTERM: exit %d", code);
    CHECK(qtts_now() - t0 < 2, "abort took %.2f s", qtts_now() - t0);
    close(fd);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    if (!make_refs()) {
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    qtts_server_config c;
    qtts_server_config_init(&c);
    c.threads = 2;
    c.queue_timeout_s = 600;   /* sanitizer builds on a loaded machine are slow */
    c.drain_timeout_s = 600;
    qtts_server *s = start_server(&c);
    if (!s) {
        printf("%s: 0 passed, 1 failed\n", __FILE__);
        return 1;
    }
    TEST_RUN(test_get_endpoints);
    TEST_RUN(test_error_statuses);
    TEST_RUN(test_speech_formats);
    TEST_RUN(test_greedy_matches_synthesize_and_cli);
    TEST_RUN(test_speed);
    TEST_RUN(test_batch_byte_identical);
    TEST_RUN(test_prompt_reuse_slots);
    TEST_RUN(test_keep_alive_and_pipelining);
    TEST_RUN(test_half_close_completes);
    TEST_RUN(test_disconnect_cancels);
    TEST_RUN(test_disconnect_mid_stream);
    TEST_RUN(test_bad_matrix_then_canary);
    TEST_RUN(test_alloc_failure);
    TEST_RUN(test_quant_server);
    test_cur_name_ = "test_graceful_shutdown";
    test_cur_failed_ = 0;
    test_graceful_shutdown(s);
    if (test_cur_failed_) test_failed_++, fprintf(stderr, "not ok test_graceful_shutdown\n");
    else test_passed_++;

    qtts_server_config_init(&c);
    c.threads = 2;
    c.batch = 1;
    c.queue = 1;
    c.api_key = "sekret";
    c.header_timeout_s = 5;
    c.queue_timeout_s = 1.0;
    c.max_connections = 4;
    s = start_server(&c);
    if (!s) {
        test_failed_++;
    } else {
        TEST_RUN(test_auth);
        TEST_RUN(test_header_timeout);
        TEST_RUN(test_connection_cap);
        CHECK(stop_server(s), "strict server drain");
    }

    /* queue tests need /metrics without a key: a B=1 Q=1 server without one */
    qtts_server_config_init(&c);
    c.threads = 2;
    c.batch = 1;
    c.queue = 1;
    /* B must still be queued when C is posted (a few ms after B is sent)
     * and time out while A runs: a third of A's run leaves room on both
     * sides on a fast and on a sanitizer build alike. */
    c.queue_timeout_s = QTTS_MIN(0.3, g_long_s / 3);
    fprintf(stderr, "  queue timeout %.3f s (the long request took %.3f s)\n", c.queue_timeout_s, g_long_s);
    s = start_server(&c);
    if (!s) {
        test_failed_++;
    } else {
        TEST_RUN(test_queue_full_and_timeout);
        if (!stop_server(s)) test_failed_++;
    }

    TEST_RUN(test_quant_refused);
    TEST_RUN(test_model_load_failure);
    TEST_RUN(test_sigterm_drains);
    for (int i = 0; i < N_REFS; i++) free(g_refs[i].pcm.p);
    TEST_END();
}
