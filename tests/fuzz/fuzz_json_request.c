/*
 * fuzz_json_request.c - libFuzzer harness for request bodies: the strict
 * JSON reader with the server's limits, then the /v1/audio/speech and
 * /v1/tts validators (src/server/request.c) against a fixed CustomVoice,
 * VoiceDesign or Base model description.
 *
 *     make fuzz-json FUZZ_TIME=60
 *
 * The first byte picks the endpoint, the model kind and whether the
 * server has voice profiles; the rest is the body. It traps when an
 * accepted request breaks what the scheduler relies on (text present,
 * within the limits, valid UTF-8; a frame budget in range; speaker and
 * language among the model's names; on a Base model exactly one voice
 * source: reference audio whose bytes re-encode to the very base64 string
 * sent, or a profile name that passes the name rule; no cloning field
 * anywhere else) or when a refusal is not a well-formed OpenAI error
 * (400/404/503, 404 only as the one voice_not_found body, valid UTF-8
 * message, JSON that parses back).
 *
 * Seeds: tests/fuzz/corpus/json_request.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "server/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The harness links the parsers only (not the engine); this is
 * qtts_request_init from src/engine/engine.c. */
void qtts_request_init(qtts_request *r) {
    memset(r, 0, sizeof *r);
    r->do_sample = r->top_k = r->subtalker_do_sample = r->subtalker_top_k = r->max_new_tokens = -1;
    r->top_p = r->temperature = r->repetition_penalty = r->subtalker_top_p = r->subtalker_temperature = -1;
}

static bool among(const char *s, const char (*names)[QTTS_DESC_NAME_LEN], int n) {
    for (int i = 0; i < n; i++)
        if (s == names[i]) return true;
    return false;
}

/* The body's ref_audio re-encoded from the decoded bytes is the string sent. */
static bool b64_roundtrip(const char *body, size_t len, const uint8_t *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    qtts_json_limits lim = {.max_depth = 16, .max_keys = 64, .max_items = 64, .max_number_len = 40,
                            .max_string_len = len + 1};
    qtts_err jerr;
    qtts_json *doc = qtts_json_parse(body, len, &lim, "body", &jerr);
    const qtts_json *v = doc ? qtts_json_get(doc, "ref_audio") : NULL;
    bool ok = v && v->type == QTTS_JSON_STRING && v->str_len == (n + 2) / 3 * 4;
    for (size_t i = 0, o = 0; ok && i < n; i += 3, o += 4) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {t[x >> 18], t[(x >> 12) & 63], i + 1 < n ? t[(x >> 6) & 63] : '=',
                     i + 2 < n ? t[x & 63] : '='};
        ok = memcmp(v->str + o, q, 4) == 0;
    }
    qtts_json_free(doc);
    return ok;
}

static size_t code_points(const char *s) {
    size_t c = 0;
    for (; *s; s++) c += ((unsigned char)*s & 0xC0) != 0x80;
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static qtts_model_desc d;
    memset(&d, 0, sizeof d);
    d.kind = (qtts_model_kind)((data[0] >> 1) % 3);
    d.honours_instruct = data[0] & 8;
    d.have_voices = data[0] & 32;
    if (d.kind == QTTS_KIND_CUSTOM_VOICE) {
        d.n_speakers = 3;
        strcpy(d.speakers[0], "vivian");
        strcpy(d.speakers[1], "ryan");
        strcpy(d.speakers[2], "uncle_fu");
    }
    d.n_languages = 2;
    strcpy(d.languages[0], "english");
    strcpy(d.languages[1], "chinese");
    strcpy(d.model_id, "qwen3-tts");
    qtts_req_limits lim = {.max_input_chars = 200, .max_instructions_chars = 100, .max_frames = 7500,
                           .have_encoders = data[0] & 16};
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    qtts_speech sp;
    qtts_api_error e;
    bool ok = (data[0] & 1) ? qtts_parse_native_tts(body, len, &d, &lim, &sp, &e)
                            : qtts_parse_openai_speech(body, len, &d, &lim, &sp, &e);
    if (ok) {
        const qtts_request *q = &sp.req;
        if (!q->text || !qtts_utf8_valid(q->text, strlen(q->text), NULL)) __builtin_trap();
        size_t cp = code_points(q->text);
        if (cp == 0 || cp > lim.max_input_chars || cp != sp.input_chars) __builtin_trap();
        if (sp.max_frames < 1 || sp.max_frames > lim.max_frames) __builtin_trap();
        if (q->max_new_tokens != sp.max_frames + 1) __builtin_trap();
        if (q->speaker && !among(q->speaker, d.speakers, d.n_speakers)) __builtin_trap();
        if (q->language && !among(q->language, d.languages, d.n_languages)) __builtin_trap();
        if (d.kind == QTTS_KIND_CUSTOM_VOICE && !q->speaker) __builtin_trap();
        if (q->voice || q->ref_audio) __builtin_trap();   /* the server's to fill */
        if (d.kind == QTTS_KIND_BASE) {
            if (q->speaker || !sp.ref_audio == !sp.voice_name[0]) __builtin_trap();
            if (sp.voice_name[0] && (!d.have_voices || !sp.voice_param ||
                                     !qtts_voice_name_ok(sp.voice_name, strlen(sp.voice_name))))
                __builtin_trap();
            if (sp.ref_audio && !b64_roundtrip(body, len, sp.ref_audio, sp.ref_audio_len)) __builtin_trap();
            if (sp.ref_text && (!sp.ref_audio || !sp.ref_text[0] ||
                                strlen(sp.ref_text) > QTTS_MAX_REF_TEXT_BYTES ||
                                !qtts_utf8_valid(sp.ref_text, strlen(sp.ref_text), NULL)))
                __builtin_trap();
        } else if (sp.ref_audio || sp.ref_text || sp.voice_name[0] || q->x_vector_only) {
            __builtin_trap();
        }
        if (q->instruct && code_points(q->instruct) > lim.max_instructions_chars) __builtin_trap();
        if (q->temperature == 0 || q->subtalker_temperature == 0 || q->repetition_penalty == 0) __builtin_trap();
        if (q->top_p == 0 || q->top_p > 1 || q->subtalker_top_p == 0 || q->subtalker_top_p > 1) __builtin_trap();
        if (!lim.have_encoders && sp.format != QTTS_FMT_WAV && sp.format != QTTS_FMT_PCM) __builtin_trap();
        qtts_speech_free(&sp);
    } else {
        if (!(e.status == 400 || e.status == 404 || e.status == 503) || !e.type || !e.message[0]) __builtin_trap();
        if (e.status == 404) {
            qtts_api_error nf;
            qtts_voice_not_found(&nf, e.param);
            if (d.kind != QTTS_KIND_BASE || !d.have_voices || strcmp(e.message, nf.message) ||
                strcmp(e.code, "voice_not_found"))
                __builtin_trap();
        }
        if (!qtts_utf8_valid(e.message, strlen(e.message), NULL)) __builtin_trap();
        if (!qtts_utf8_valid(e.param, strlen(e.param), NULL)) __builtin_trap();
        char js[4096];
        size_t n = qtts_api_error_json(&e, js, sizeof js);
        if (n >= sizeof js - 1) __builtin_trap();
        qtts_err jerr;
        qtts_json *doc = qtts_json_parse(js, n, NULL, "error", &jerr);
        if (!doc) __builtin_trap();
        const qtts_json *err = qtts_json_get(doc, "error");
        if (!err || !qtts_json_get_str(err, "message")) __builtin_trap();
        qtts_json_free(doc);
    }
    return 0;
}
