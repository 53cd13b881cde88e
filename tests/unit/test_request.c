/*
 * test_request.c - request body validation (src/server/request.c): every
 * field's type and range, unknown and duplicate keys, JSON limits, UTF-8,
 * the OpenAI error shape, and echoed values staying escaped and short.
 */
#include <string.h>

#include "harness.h"
#include "base/json.h"
#include "server/request.h"

static qtts_model_desc cv_desc(void) {
    qtts_model_desc d;
    memset(&d, 0, sizeof d);
    d.kind = QTTS_KIND_CUSTOM_VOICE;
    d.honours_instruct = false;
    d.n_speakers = 2;
    strcpy(d.speakers[0], "vivian");
    strcpy(d.speakers[1], "ryan");
    d.n_languages = 2;
    strcpy(d.languages[0], "english");
    strcpy(d.languages[1], "chinese");
    strcpy(d.model_id, "qwen3-tts");
    return d;
}

static qtts_req_limits lims(void) {
    qtts_req_limits l = {.max_input_chars = 100, .max_instructions_chars = 50, .max_frames = 1000,
                         .have_encoders = true, .stream_chunk_frames = 12};
    return l;
}

typedef struct {
    bool ok;
    qtts_speech sp;
    qtts_api_error e;
} res;

/* body through the OpenAI or the native parser, for model d with lims(). */
static res parse(bool openai, qtts_model_desc d, const char *body) {
    res r;
    memset(&r, 0, sizeof r);
    qtts_req_limits l = lims();
    r.ok = openai ? qtts_parse_openai_speech(body, strlen(body), &d, &l, &r.sp, &r.e)
                  : qtts_parse_native_tts(body, strlen(body), &d, &l, &r.sp, &r.e);
    return r;
}

static res oa(const char *body) { return parse(true, cv_desc(), body); }
static res nat(const char *body) { return parse(false, cv_desc(), body); }

/* A refusal with this status, param and code (NULL: don't care). */
#define EXPECT_ERR(r, st, prm, cd)                                                          \
    do {                                                                                    \
        CHECK(!(r).ok, "accepted");                                                         \
        CHECK((r).e.status == (st), "status %d want %d (%s)", (r).e.status, (st), (r).e.message); \
        if (prm) CHECK(strcmp((r).e.param, (const char *)(prm) ? (const char *)(prm) : "") == 0, \
                       "param '%s' want '%s'", (r).e.param, (const char *)(prm));                    \
        if (cd) CHECK(strcmp((r).e.code, (const char *)(cd) ? (const char *)(cd) : "") == 0,    \
                      "code '%s' want '%s'", (r).e.code, (const char *)(cd));                   \
        qtts_speech_free(&(r).sp);                                                          \
    } while (0)

static void test_openai_minimal(void) {
    res r = oa("{\"model\":\"tts-1\",\"input\":\"Hello.\",\"voice\":\"Vivian\"}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(strcmp(r.sp.req.text, "Hello.") == 0, "text");
    CHECK(strcmp(r.sp.req.speaker, "vivian") == 0, "canonical speaker");
    CHECK(r.sp.format == QTTS_FMT_WAV && r.sp.stream == QTTS_STREAM_NONE, "defaults");
    CHECK(r.sp.limit_is_error && r.sp.max_frames == 192, "budget %d", r.sp.max_frames);
    CHECK(r.sp.req.max_new_tokens == 193, "max_new_tokens counts the EOS draw");
    CHECK(r.sp.req.do_sample == -1 && r.sp.req.seed == 0, "model's sampling defaults");
    qtts_speech_free(&r.sp);
    r = oa("{\"model\":\"qwen3-tts\",\"input\":\"x\",\"voice\":\"ryan\",\"response_format\":\"pcm\","
           "\"stream_format\":\"sse\",\"speed\":1.0,\"instructions\":\"calm\"}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.format == QTTS_FMT_PCM && r.sp.stream == QTTS_STREAM_SSE, "format/stream");
    CHECK(r.sp.instruct_ignored && r.sp.req.instruct, "0.6B CustomVoice ignores instructions");
    CHECK(r.sp.req.speed == 1.0f, "speed %g", r.sp.req.speed);
    qtts_speech_free(&r.sp);
    /* speed: OpenAI's whole range, ends included */
    const double speeds[] = {0.25, 0.5, 1.5, 4};
    for (int i = 0; i < 4; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":%g}",
                 speeds[i]);
        r = oa(body);
        CHECK(r.ok && r.sp.req.speed == (float)speeds[i], "speed %g: %s", speeds[i], r.e.message);
        qtts_speech_free(&r.sp);
    }
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\"}");
    CHECK(r.ok && r.sp.req.speed == 0, "no speed: unchanged (0), got %g", r.sp.req.speed);
    qtts_speech_free(&r.sp);
    r = oa("{\"model\":\"qwen3-tts\",\"input\":\"x\",\"voice\":\"ryan\",\"response_format\":\"flac\",\"stream_format\":\"audio\"}");
    CHECK(r.ok && r.sp.format == QTTS_FMT_FLAC && r.sp.stream == QTTS_STREAM_AUDIO, "flac");
    qtts_speech_free(&r.sp);
}

static void test_openai_refusals(void) {
    res r;
    r = oa("{\"input\":\"x\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "model", "missing_parameter");
    r = oa("{\"model\":\"whisper-1\",\"input\":\"x\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "model", "model_not_found");
    CHECK(strstr(r.e.message, "qwen3-tts") && strstr(r.e.message, "tts-1"), "lists models: %s", r.e.message);
    r = oa("{\"model\":\"tts-1\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "input", "missing_parameter");
    r = oa("{\"model\":\"tts-1\",\"input\":\"\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "input", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\" \\t\\n\\u3000\\u00a0\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "input", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":5,\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "input", "invalid_type");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"alloy\"}");
    EXPECT_ERR(r, 400, "voice", "invalid_value");
    CHECK(strstr(r.e.message, "vivian, ryan") != NULL, "lists voices: %s", r.e.message);
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\"}");
    EXPECT_ERR(r, 400, "voice", "missing_parameter");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"response_format\":\"aac\"}");
    EXPECT_ERR(r, 400, "response_format", "unsupported_response_format");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":0.1}");
    EXPECT_ERR(r, 400, "speed", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":0.2499}");
    EXPECT_ERR(r, 400, "speed", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":4.001}");
    EXPECT_ERR(r, 400, "speed", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":-1}");
    EXPECT_ERR(r, 400, "speed", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":\"1\"}");
    EXPECT_ERR(r, 400, "speed", "invalid_type");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"stream_format\":\"chunks\"}");
    EXPECT_ERR(r, 400, "stream_format", "invalid_value");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"stream_format\":\"sse\",\"response_format\":\"mp3\"}");
    EXPECT_ERR(r, 400, "response_format", NULL);
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"Voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "Voice", "unknown_parameter");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"voice\":\"vivian\"}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    CHECK(strstr(r.e.message, "duplicate") != NULL, "duplicate key: %s", r.e.message);
    r = oa("[1,2]");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\"} x");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{}");   /* an empty object (no key ever pushed: a UBSan null-offset case once) */
    EXPECT_ERR(r, 400, "model", "missing_parameter");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"seed\":{}}");
    EXPECT_ERR(r, 400, "seed", "invalid_type");
}

static void test_limits_and_utf8(void) {
    char body[2048];
    /* 100 code points (3 bytes each) are fine, 101 are not */
    char text[512] = "";
    for (int i = 0; i < 100; i++) strcat(text, "\xe4\xbd\xa0");
    snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"%s\",\"voice\":\"ryan\"}", text);
    res r = oa(body);
    CHECK(r.ok && r.sp.input_chars == 100, "100 code points: %s", r.e.message);
    CHECK(r.sp.max_frames == 1000, "budget capped at max_frames: %d", r.sp.max_frames);
    qtts_speech_free(&r.sp);
    strcat(text, "a");
    snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"%s\",\"voice\":\"ryan\"}", text);
    r = oa(body);
    EXPECT_ERR(r, 400, "input", "string_above_max_length");
    /* instructions */
    char ins[128];
    memset(ins, 'i', 51);
    ins[51] = 0;
    snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"instructions\":\"%s\"}", ins);
    r = oa(body);
    EXPECT_ERR(r, 400, "instructions", "string_above_max_length");
    /* invalid UTF-8, overlong, surrogate escapes, NUL */
    r = oa("{\"model\":\"tts-1\",\"input\":\"\xc0\xaf\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{\"model\":\"tts-1\",\"input\":\"\xed\xa0\x80\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{\"model\":\"tts-1\",\"input\":\"\\ud800\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{\"model\":\"tts-1\",\"input\":\"a\\u0000b\",\"voice\":\"ryan\"}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    /* depth 17 */
    char deep[256] = "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":";
    for (int i = 0; i < 17; i++) strcat(deep, "[");
    for (int i = 0; i < 17; i++) strcat(deep, "]");
    strcat(deep, "}");
    r = oa(deep);
    EXPECT_ERR(r, 400, "", "invalid_json");
    /* 65 keys */
    size_t n = (size_t)snprintf(body, sizeof body, "{");
    for (int i = 0; i < 65; i++) n += (size_t)snprintf(body + n, sizeof body - n, "%s\"k%d\":1", i ? "," : "", i);
    snprintf(body + n, sizeof body - n, "}");
    r = oa(body);
    EXPECT_ERR(r, 400, "", "invalid_json");
    /* 41-character number */
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":1.0000000000000000000000000000000000000000}");
    EXPECT_ERR(r, 400, "", "invalid_json");
    r = oa("{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"speed\":1e400}");
    EXPECT_ERR(r, 400, "", "invalid_json");
}

static void test_native_fields(void) {
    res r = nat("{\"text\":\"Hello\",\"speaker\":\"RYAN\",\"language\":\"English\",\"greedy\":true,"
                "\"seed\":42,\"max_frames\":50,\"text_mode\":\"streaming\",\"stream\":true,"
                "\"response_format\":\"pcm\",\"top_k\":10,\"top_p\":0.5,\"temperature\":0.7,"
                "\"repetition_penalty\":1.1,\"subtalker_top_k\":5,\"subtalker_top_p\":0.9,"
                "\"subtalker_temperature\":0.8,\"speed\":1.25}");
    REQUIRE(r.ok, "%s", r.e.message);
    qtts_request *q = &r.sp.req;
    CHECK(q->speed == 1.25f, "speed %g", q->speed);
    CHECK(strcmp(q->speaker, "ryan") == 0 && strcmp(q->language, "english") == 0, "names");
    CHECK(q->do_sample == 0 && q->subtalker_do_sample == 0, "greedy");
    CHECK(q->seed == 42 && q->top_k == 10 && q->subtalker_top_k == 5, "ints");
    CHECK(q->top_p == 0.5f && q->temperature == 0.7f && q->repetition_penalty == 1.1f, "floats");
    CHECK(q->text_mode == QTTS_TEXT_MODE_STREAMING, "text mode");
    CHECK(r.sp.max_frames == 50 && !r.sp.limit_is_error && q->max_new_tokens == 51, "client frame cap");
    CHECK(r.sp.stream == QTTS_STREAM_AUDIO && r.sp.format == QTTS_FMT_PCM, "stream");
    qtts_speech_free(&r.sp);

    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"language\":\"klingon\"}");
    EXPECT_ERR(r, 400, "language", "invalid_value");
    CHECK(strstr(r.e.message, "auto, english, chinese") != NULL, "lists languages: %s", r.e.message);
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"seed\":-1}");
    EXPECT_ERR(r, 400, "seed", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"speed\":5}");
    EXPECT_ERR(r, 400, "speed", "invalid_value");
    /* below speed 1 the frame cap shrinks with it (the audio cap counts what is sent) */
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"max_frames\":900,\"speed\":0.5}");
    CHECK(r.ok && r.sp.max_frames == 500 && r.sp.req.max_new_tokens == 501, "speed 0.5: cap %d",
          r.sp.max_frames);
    qtts_speech_free(&r.sp);
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"max_frames\":900,\"speed\":2}");
    CHECK(r.ok && r.sp.max_frames == 900, "speed 2: cap %d", r.sp.max_frames);
    qtts_speech_free(&r.sp);
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"seed\":1.5}");
    EXPECT_ERR(r, 400, "seed", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"seed\":99999999999999999999}");
    EXPECT_ERR(r, 400, "seed", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"max_frames\":1001}");
    EXPECT_ERR(r, 400, "max_frames", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"max_frames\":0}");
    EXPECT_ERR(r, 400, "max_frames", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"temperature\":0}");
    EXPECT_ERR(r, 400, "temperature", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"temperature\":1e-300}");
    EXPECT_ERR(r, 400, "temperature", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"top_p\":1.5}");
    EXPECT_ERR(r, 400, "top_p", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"top_k\":-3}");
    EXPECT_ERR(r, 400, "top_k", "invalid_value");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"greedy\":1}");
    EXPECT_ERR(r, 400, "greedy", "invalid_type");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"text_mode\":\"fast\"}");
    EXPECT_ERR(r, 400, "text_mode", "invalid_value");
    r = nat("{\"text\":\"x\"}");
    EXPECT_ERR(r, 400, "speaker", "missing_parameter");
    /* cloning fields need a Base model */
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"ref_audio\":\"UklGRg==\",\"ref_text\":\"hi\"}");
    EXPECT_ERR(r, 400, "ref_audio", "unsupported_feature");
    CHECK(strstr(r.e.message, "Base") && strstr(r.e.message, "CustomVoice"), "%s", r.e.message);
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"voice_profile\":\"../../etc/passwd\"}");
    EXPECT_ERR(r, 400, "voice_profile", "unsupported_feature");
    CHECK(!strstr(r.e.message, "passwd"), "the value is not echoed");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"x_vector_only\":false}");
    EXPECT_ERR(r, 400, "x_vector_only", "unsupported_feature");
    r = nat("{\"text\":\"x\",\"speaker\":\"ryan\",\"ref_text\":\"hi\"}");
    EXPECT_ERR(r, 400, "ref_text", "unsupported_feature");
}

static void test_other_model_kinds(void) {
    qtts_model_desc d = cv_desc();
    qtts_req_limits l = lims();
    qtts_speech sp;
    qtts_api_error e;
    d.kind = QTTS_KIND_VOICE_DESIGN;
    d.n_speakers = 0;
    const char *b = "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"default\",\"instructions\":\"a deep voice\"}";
    CHECK(qtts_parse_openai_speech(b, strlen(b), &d, &l, &sp, &e), "VoiceDesign: %s", e.message);
    CHECK(sp.req.speaker == NULL && strcmp(sp.req.instruct, "a deep voice") == 0 && !sp.instruct_ignored, "design");
    qtts_speech_free(&sp);
    b = "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\"}";
    CHECK(!qtts_parse_openai_speech(b, strlen(b), &d, &l, &sp, &e) && e.status == 400 &&
              strcmp(e.param, "voice") == 0,
          "VoiceDesign has no preset voices");
    b = "{\"text\":\"x\",\"ref_audio\":\"UklGRg==\"}";
    CHECK(!qtts_parse_native_tts(b, strlen(b), &d, &l, &sp, &e) && e.status == 400 &&
              strcmp(e.param, "ref_audio") == 0 && strcmp(e.code, "unsupported_feature") == 0 &&
              strstr(e.message, "VoiceDesign"),
          "VoiceDesign: no cloning fields: %s", e.message);
    /* encoders missing: flac is refused */
    d = cv_desc();
    l.have_encoders = false;
    b = "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"ryan\",\"response_format\":\"flac\"}";
    CHECK(!qtts_parse_openai_speech(b, strlen(b), &d, &l, &sp, &e) && strcmp(e.code, "unsupported_response_format") == 0 &&
              strstr(e.message, "wav, pcm"),
          "no encoders: %s", e.message);
}

static qtts_model_desc base_desc(bool voices) {
    qtts_model_desc d = cv_desc();
    d.kind = QTTS_KIND_BASE;
    d.n_speakers = 0;
    d.have_voices = voices;
    return d;
}

static res base_nat(const char *body, bool voices) { return parse(false, base_desc(voices), body); }
static res base_oa(const char *body, bool voices) { return parse(true, base_desc(voices), body); }

static void test_clone_fields(void) {
    /* inline audio: strict base64, decoded; ref_text; x_vector_only */
    res r = base_nat("{\"text\":\"Hi\",\"ref_audio\":\"UklGRg==\",\"ref_text\":\"the words\","
                     "\"x_vector_only\":true,\"language\":\"english\"}", false);
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.ref_audio_len == 4 && memcmp(r.sp.ref_audio, "RIFF", 4) == 0,
          "decoded %zu bytes", r.sp.ref_audio_len);
    CHECK(strcmp(r.sp.ref_text, "the words") == 0 && r.sp.req.x_vector_only, "ref_text, x_vector_only");
    CHECK(!r.sp.req.ref_audio && !r.sp.req.voice && !r.sp.voice_name[0], "the server fills the voice");
    qtts_speech_free(&r.sp);
    CHECK(!r.sp.ref_audio, "freed");
    static const struct { const char *b64; size_t n; const char *bytes; } ok_cases[] = {
        {"QQ==", 1, "A"}, {"QUI=", 2, "AB"}, {"QUJD", 3, "ABC"}, {"AAAA", 3, "\0\0\0"},
        {"+/+/", 3, "\xfb\xff\xbf"}, {"QUJDRA==", 4, "ABCD"}, {"QU\\/C", 0, NULL},
    };
    for (size_t i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"text\":\"Hi\",\"ref_audio\":\"%s\"}", ok_cases[i].b64);
        r = base_nat(body, false);
        if (ok_cases[i].bytes) {
            CHECK(r.ok && r.sp.ref_audio_len == ok_cases[i].n &&
                      memcmp(r.sp.ref_audio, ok_cases[i].bytes, ok_cases[i].n) == 0,
                  "'%s': %s", ok_cases[i].b64, r.e.message);
        } else {
            /* JSON's escaped slash is a slash: "QU/C" (canonical) */
            CHECK(r.ok && r.sp.ref_audio_len == 3, "'%s': %s", ok_cases[i].b64, r.e.message);
        }
        qtts_speech_free(&r.sp);
    }
    static const char *const bad_b64[] = {
        "Q", "QQ", "QQ=", "QQ===", "====", "Q===", "QQ=A", "=QQQ", "QR==", "QUJ=x===", "QUK=",
        "QU JD", "QUJD\\n", " QUJD", "QUJD ", "QU-_", "QUJD\\u00e9AAA", "data:audio/wav;base64,QUJD",
        "QUJD====", "QQ==QQ==",
    };
    for (size_t i = 0; i < sizeof bad_b64 / sizeof bad_b64[0]; i++) {
        char body[160];
        snprintf(body, sizeof body, "{\"text\":\"Hi\",\"ref_audio\":\"%s\"}", bad_b64[i]);
        r = base_nat(body, false);
        EXPECT_ERR(r, 400, "ref_audio", "invalid_base64");
    }
    r = base_nat("{\"text\":\"Hi\",\"ref_audio\":\"\"}", false);
    EXPECT_ERR(r, 400, "ref_audio", "invalid_value");
    r = base_nat("{\"text\":\"Hi\",\"ref_audio\":[\"QQ==\"]}", false);
    EXPECT_ERR(r, 400, "ref_audio", "invalid_type");

    /* ref_text */
    r = base_nat("{\"text\":\"Hi\",\"ref_audio\":\"QQ==\",\"ref_text\":\"\"}", false);
    EXPECT_ERR(r, 400, "ref_text", "invalid_value");
    r = base_nat("{\"text\":\"Hi\",\"ref_audio\":\"QQ==\",\"ref_text\":\"a\\u0000b\"}", false);
    CHECK(!r.ok && r.e.status == 400, "NUL in ref_text");
    qtts_speech_free(&r.sp);
    {
        size_t n = QTTS_MAX_REF_TEXT_BYTES + 1;
        char *body = malloc(n + 128);
        int k = snprintf(body, 128, "{\"text\":\"Hi\",\"ref_audio\":\"QQ==\",\"ref_text\":\"");
        memset(body + k, 'a', n);
        strcpy(body + k + n, "\"}");
        r = base_nat(body, false);
        EXPECT_ERR(r, 400, "ref_text", "string_above_max_length");
        free(body);
    }

    /* combinations */
    r = base_nat("{\"text\":\"Hi\",\"ref_audio\":\"QQ==\",\"voice_profile\":\"alice\"}", true);
    EXPECT_ERR(r, 400, "voice_profile", "conflicting_parameters");
    r = base_nat("{\"text\":\"Hi\",\"ref_text\":\"words\"}", true);
    EXPECT_ERR(r, 400, "ref_text", "conflicting_parameters");
    r = base_nat("{\"text\":\"Hi\",\"ref_text\":\"words\",\"voice_profile\":\"alice\"}", true);
    EXPECT_ERR(r, 400, "ref_text", "conflicting_parameters");
    r = base_nat("{\"text\":\"Hi\",\"speaker\":\"vivian\",\"ref_audio\":\"QQ==\"}", true);
    EXPECT_ERR(r, 400, "speaker", "unsupported_feature");
    r = base_nat("{\"text\":\"Hi\"}", true);
    EXPECT_ERR(r, 400, "ref_audio", "missing_parameter");
    CHECK(strstr(r.e.message, "voice_profile") != NULL, "%s", r.e.message);
    r = base_nat("{\"text\":\"Hi\"}", false);
    EXPECT_ERR(r, 400, "ref_audio", "missing_parameter");
    CHECK(strstr(r.e.message, "--voices") != NULL, "%s", r.e.message);
    r = base_nat("{\"text\":\"Hi\",\"x_vector_only\":1,\"ref_audio\":\"QQ==\"}", false);
    EXPECT_ERR(r, 400, "x_vector_only", "invalid_type");

    /* profiles: the name rule, one identical 404 for every refused name */
    r = base_nat("{\"text\":\"Hi\",\"voice_profile\":\"my_voice-2\",\"x_vector_only\":true}", true);
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(strcmp(r.sp.voice_name, "my_voice-2") == 0 && strcmp(r.sp.voice_param, "voice_profile") == 0 &&
              r.sp.req.x_vector_only && !r.sp.ref_audio,
          "profile name");
    qtts_speech_free(&r.sp);
    r = base_nat("{\"text\":\"Hi\",\"voice_profile\":\"alice\"}", false);
    EXPECT_ERR(r, 400, "voice_profile", "no_voice_profiles");
    qtts_api_error nf;
    qtts_voice_not_found(&nf, "voice_profile");
    static const char *const bad_names[] = {
        "", "../alice", "..", ".", "/etc/passwd", "Alice", "ALICE", "al ice", "alice.voice", "al\\\\ice",
        "\\u00e9", "a\\tb", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"text\":\"Hi\",\"voice_profile\":\"%s\"}", bad_names[i]);
        r = base_nat(body, true);
        CHECK(!r.ok && r.e.status == 404 && !strcmp(r.e.message, nf.message) && !strcmp(r.e.code, nf.code) &&
                  !strcmp(r.e.param, "voice_profile"),
              "'%s': %d %s", bad_names[i], r.e.status, r.e.message);
        qtts_speech_free(&r.sp);
    }
    {
        char name[QTTS_VOICE_NAME_MAX + 1];
        memset(name, 'z', QTTS_VOICE_NAME_MAX);
        name[QTTS_VOICE_NAME_MAX] = 0;
        char body[256];
        snprintf(body, sizeof body, "{\"text\":\"Hi\",\"voice_profile\":\"%s\"}", name);
        r = base_nat(body, true);
        CHECK(r.ok && strcmp(r.sp.voice_name, name) == 0, "64-character name: %s", r.e.message);
        qtts_speech_free(&r.sp);
    }

    /* OpenAI: voice is a profile name, lower-cased first */
    r = base_oa("{\"model\":\"tts-1\",\"input\":\"Hi\",\"voice\":\"My_Voice\",\"instructions\":\"calm\"}", true);
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(strcmp(r.sp.voice_name, "my_voice") == 0 && strcmp(r.sp.voice_param, "voice") == 0 &&
              !r.sp.req.speaker && r.sp.instruct_ignored,
          "OpenAI profile");
    qtts_speech_free(&r.sp);
    qtts_voice_not_found(&nf, "voice");
    static const char *const bad_oa[] = {"../x", "a.b", "", "\\u00c9", "a/b",
                                         "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
    for (size_t i = 0; i < sizeof bad_oa / sizeof bad_oa[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"Hi\",\"voice\":\"%s\"}", bad_oa[i]);
        r = base_oa(body, true);
        CHECK(!r.ok && r.e.status == 404 && !strcmp(r.e.message, nf.message) && !strcmp(r.e.param, "voice"),
              "OpenAI '%s': %d %s", bad_oa[i], r.e.status, r.e.message);
        qtts_speech_free(&r.sp);
    }
    r = base_oa("{\"model\":\"tts-1\",\"input\":\"Hi\",\"voice\":\"alice\"}", false);
    EXPECT_ERR(r, 400, "voice", "no_voice_profiles");
    r = base_oa("{\"model\":\"tts-1\",\"input\":\"Hi\"}", false);
    EXPECT_ERR(r, 400, "voice", "missing_parameter");
    CHECK(strstr(r.e.message, "--voices") != NULL, "%s", r.e.message);
    r = base_oa("{\"model\":\"tts-1\",\"input\":\"Hi\",\"voice\":\"alice\",\"ref_audio\":\"QQ==\"}", true);
    EXPECT_ERR(r, 400, "ref_audio", "unknown_parameter");
}

static void test_stream_decode(void) {
    /* every response decodes audio as frames come (the server's chunk
     * setting): a streamed one for its latency, a whole one so that the
     * scheduler can decode it in pieces between other requests' work */
    res r = oa("{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"vivian\",\"stream_format\":\"sse\"}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.req.stream_chunk_frames == 12, "sse: chunk %d", r.sp.req.stream_chunk_frames);
    qtts_speech_free(&r.sp);
    r = oa("{\"model\":\"tts-1\",\"input\":\"Hi.\",\"voice\":\"vivian\",\"stream_format\":\"audio\"}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.req.stream_chunk_frames == 12, "audio: chunk %d", r.sp.req.stream_chunk_frames);
    qtts_speech_free(&r.sp);
    r = nat("{\"text\":\"Hi.\",\"speaker\":\"vivian\",\"stream\":true}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.req.stream_chunk_frames == 12, "native stream: chunk %d", r.sp.req.stream_chunk_frames);
    qtts_speech_free(&r.sp);
    r = nat("{\"text\":\"Hi.\",\"speaker\":\"vivian\"}");
    REQUIRE(r.ok, "%s", r.e.message);
    CHECK(r.sp.req.stream_chunk_frames == 12, "whole: chunk %d", r.sp.req.stream_chunk_frames);
    qtts_speech_free(&r.sp);
}

static void test_error_json_and_echo(void) {
    /* A hostile value is cut to 64 bytes, control characters replaced, and
     * the resulting JSON parses with the message intact. */
    char body[1024], val[300];
    memset(val, 'A', sizeof val);
    memcpy(val, "\\\"<script>\\n", 12);
    val[299] = 0;
    snprintf(body, sizeof body, "{\"model\":\"tts-1\",\"input\":\"x\",\"voice\":\"%s\"}", val);
    res r = oa(body);
    REQUIRE(!r.ok, "accepted");
    char js[2048];
    size_t n = qtts_api_error_json(&r.e, js, sizeof js);
    qtts_err jerr;
    qtts_json *doc = qtts_json_parse(js, n, NULL, "error", &jerr);
    REQUIRE(doc, "error JSON does not parse: %s (%s)", js, jerr.msg);
    const qtts_json *err = qtts_json_get(doc, "error");
    REQUIRE(err && err->type == QTTS_JSON_OBJECT, "shape");
    const char *msg = qtts_json_get_str(err, "message");
    CHECK(msg && strstr(msg, "\"<script>?") && strstr(msg, "...") && strlen(msg) < 400, "echo: %s", msg ? msg : "");
    CHECK(qtts_json_get_str(err, "type") && strcmp(qtts_json_get_str(err, "type"), "invalid_request_error") == 0, "type");
    CHECK(qtts_json_get_str(err, "param") && strcmp(qtts_json_get_str(err, "param"), "voice") == 0, "param");
    CHECK(qtts_json_get_str(err, "code") && strcmp(qtts_json_get_str(err, "code"), "invalid_value") == 0, "code");
    qtts_json_free(doc);
    /* null param and code */
    qtts_api_error e;
    qtts_api_fail(&e, 503, "server_error", NULL, NULL, "busy");
    n = qtts_api_error_json(&e, js, sizeof js);
    CHECK(strcmp(js, "{\"error\":{\"message\":\"busy\",\"type\":\"server_error\",\"param\":null,\"code\":null}}") == 0, "%s", js);
    /* echo cuts at a character boundary */
    char out[32];
    qtts_echo(out, sizeof out, "\xe4\xbd\xa0\xe4\xbd\xa0", 6, 4);
    CHECK(strcmp(out, "\xe4\xbd\xa0...") == 0, "cut at a boundary: %s", out);
    /* frame budget rule */
    CHECK(qtts_frame_budget(1, 7500) == 192 && qtts_frame_budget(100, 7500) == 1200 &&
              qtts_frame_budget(10000, 7500) == 7500,
          "budget");
}

int main(void) {
    TEST_RUN(test_openai_minimal);
    TEST_RUN(test_openai_refusals);
    TEST_RUN(test_limits_and_utf8);
    TEST_RUN(test_native_fields);
    TEST_RUN(test_other_model_kinds);
    TEST_RUN(test_clone_fields);
    TEST_RUN(test_error_json_and_echo);
    TEST_RUN(test_stream_decode);
    TEST_END();
}
