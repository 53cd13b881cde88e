/*
 * request.c - request body validation for /v1/audio/speech and /v1/tts;
 * see request.h.
 *
 * Each endpoint is a table of known fields; a body is parsed with the
 * request limits (depth 16, 64 keys, 64 items, numbers of at most 40
 * characters), every key is looked up in the table (unknown -> 400 naming
 * it), and each value is checked for its type and range in one place.
 * Checks happen in document-independent order (text first, then voice,
 * then the rest) so the same body always gets the same answer.
 */
#include "server/request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/json.h"
#include "io/stretch.h"

const char *const qtts_model_aliases[] = {"tts-1", "tts-1-hd", "gpt-4o-mini-tts", NULL};

/* ==== errors =================================================================== */

bool qtts_api_fail(qtts_api_error *e, int status, const char *type, const char *param,
                   const char *code, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* snprintf may cut inside a multi-byte character: trim to a boundary. */
    size_t n = strlen(e->message);
    size_t bad;
    while (n > 0 && !qtts_utf8_valid(e->message, n, &bad)) e->message[--n] = 0;
    n = strlen(e->param);
    while (n > 0 && !qtts_utf8_valid(e->param, n, &bad)) e->param[--n] = 0;
    return false;
}

size_t qtts_api_error_json(const qtts_api_error *e, char *out, size_t cap) {
    char msg[sizeof e->message * 6 + 8], param[sizeof e->param * 6 + 8], code[sizeof e->code * 6 + 8];
    qtts_json_escape(msg, sizeof msg, e->message, strlen(e->message));
    if (e->param[0]) qtts_json_escape(param, sizeof param, e->param, strlen(e->param));
    else strcpy(param, "null");
    if (e->code[0]) qtts_json_escape(code, sizeof code, e->code, strlen(e->code));
    else strcpy(code, "null");
    int n = snprintf(out, cap, "{\"error\":{\"message\":%s,\"type\":\"%s\",\"param\":%s,\"code\":%s}}",
                     msg, e->type ? e->type : "server_error", param, code);
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

void qtts_echo(char *out, size_t cap, const char *s, size_t len, size_t max_src) {
    if (cap == 0) return;
    bool cut = len > max_src;
    size_t n = cut ? max_src : len;
    /* back up to a character boundary */
    while (cut && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (cut)
        for (const char *d = "..."; *d && o + 1 < cap; d++) out[o++] = *d;
    out[o] = 0;
    size_t bad;
    while (o > 0 && !qtts_utf8_valid(out, o, &bad)) out[--o] = 0;
}

#define INVALID "invalid_request_error"

/* ==== small helpers ================================================================ */

static size_t code_points(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ASCII whitespace and the common Unicode spaces (NBSP, U+2000-U+200B,
 * U+3000, U+FEFF). The string is valid UTF-8. */
static bool blank(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || (c >= '\t' && c <= '\r')) { i++; continue; }
        if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0xA0) { i += 2; continue; }
        if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
            (unsigned char)s[i + 2] <= 0x8B) { i += 3; continue; }
        if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
            (unsigned char)s[i + 2] == 0x80) { i += 3; continue; }
        if (c == 0xEF && i + 2 < n && (unsigned char)s[i + 1] == 0xBB &&
            (unsigned char)s[i + 2] == 0xBF) { i += 3; continue; }
        return false;
    }
    return true;
}

static bool ieq(const char *a, size_t an, const char *b) {
    size_t bn = strlen(b);
    if (an != bn) return false;
    for (size_t i = 0; i < an; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x + 32);
        if (y >= 'A' && y <= 'Z') y = (char)(y + 32);
        if (x != y) return false;
    }
    return true;
}

/* "a, b, c" of names into out. */
static void join_names(char *out, size_t cap, const char (*names)[QTTS_DESC_NAME_LEN], int n,
                       const char *first) {
    size_t o = 0;
    out[0] = 0;
    if (first) o += (size_t)snprintf(out, cap, "%s", first);
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", names[i]);
}

static const char *kind_name(qtts_model_kind k) {
    return k == QTTS_KIND_CUSTOM_VOICE ? "CustomVoice" : k == QTTS_KIND_VOICE_DESIGN ? "VoiceDesign" : "Base";
}

bool qtts_voice_name_ok(const char *s, size_t n) {
    if (n < 1 || n > QTTS_VOICE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    }
    return true;
}

bool qtts_voice_not_found(qtts_api_error *e, const char *param) {
    return qtts_api_fail(e, 404, INVALID, param, "voice_not_found",
                         "no such voice profile (names are 1-64 of a-z, 0-9, '_' and '-'; "
                         "GET /v1/audio/voices lists them)");
}

/* Strict RFC 4648 base64 (the standard alphabet, '=' padding to a multiple
 * of 4, no whitespace, no data: prefix, zero bits after the last byte so
 * every byte string has exactly one encoding) into a new buffer. */
static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static bool b64_decode(const char *key, const char *s, size_t n, uint8_t **out, size_t *out_len,
                       qtts_api_error *e) {
    *out = NULL;
    *out_len = 0;
    if (n == 0) return qtts_api_fail(e, 400, INVALID, key, "invalid_value", "'%s' is empty", key);
    if (n % 4)
        return qtts_api_fail(e, 400, INVALID, key, "invalid_base64",
                             "'%s' is not valid base64: its length (%zu) is not a multiple of 4", key, n);
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < n - pad; i++)
        if (b64_value((unsigned char)s[i]) < 0)
            return qtts_api_fail(e, 400, INVALID, key, "invalid_base64",
                                 "'%s' is not valid base64: %s at offset %zu (standard alphabet "
                                 "A-Z a-z 0-9 + /, '=' only as final padding, no whitespace or "
                                 "data: prefix)",
                                 key, s[i] == '=' ? "padding" : "a character outside the alphabet", i);
    /* Leftover bits of the last group must be zero (canonical encoding). */
    int last = pad ? b64_value((unsigned char)s[n - pad - 1]) : 0;
    if ((pad == 2 && (last & 15)) || (pad == 1 && (last & 3)))
        return qtts_api_fail(e, 400, INVALID, key, "invalid_base64",
                             "'%s' is not valid base64: non-zero bits after the last byte", key);
    uint64_t groups3;
    if (!qtts_mul_ok(n / 4, 3, &groups3) || groups3 < pad || groups3 - pad > SIZE_MAX - 1)
        return qtts_api_fail(e, 400, INVALID, key, "invalid_base64", "'%s' is too large", key);
    size_t len = (size_t)(groups3 - pad);
    uint8_t *b = qtts_malloc(len ? len : 1);
    if (!b)
        return qtts_api_fail(e, 503, "server_error", NULL, "out_of_memory",
                             "out of memory while decoding '%s'", key);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            int x = s[i + k] == '=' ? 0 : b64_value((unsigned char)s[i + k]);
            v = v << 6 | (uint32_t)x;
        }
        uint8_t t[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        for (int k = 0; k < 3 && o < len; k++) b[o++] = t[k];
    }
    *out = b;
    *out_len = len;
    return true;
}

/* The document's value for key, type-checked (NULL when absent). */
static bool get_typed(const qtts_json *doc, const char *key, qtts_json_type t, const qtts_json **v,
                      qtts_api_error *e) {
    *v = qtts_json_get(doc, key);
    if (!*v) return true;
    if ((*v)->type != t)
        return qtts_api_fail(e, 400, INVALID, key, "invalid_type", "'%s' must be a %s, not a %s",
                             key, qtts_json_type_name(t), qtts_json_type_name((*v)->type));
    return true;
}

static bool get_string(const qtts_json *doc, const char *key, const qtts_json **v,
                       qtts_api_error *e) {
    return get_typed(doc, key, QTTS_JSON_STRING, v, e);
}

static bool get_number(const qtts_json *doc, const char *key, double lo, double hi, bool lo_open,
                       double *out, bool *present, qtts_api_error *e) {
    const qtts_json *v;
    *present = false;
    if (!get_typed(doc, key, QTTS_JSON_NUMBER, &v, e)) return false;
    if (!v) return true;
    double x = v->number;
    if (!(x <= hi) || !(lo_open ? x > lo : x >= lo))
        return qtts_api_fail(e, 400, INVALID, key, "invalid_value", "'%s' must be in %c%g, %g]",
                             key, lo_open ? '(' : '[', lo, hi);
    *out = x;
    *present = true;
    return true;
}

static bool get_integer(const qtts_json *doc, const char *key, int64_t lo, int64_t hi, int64_t *out,
                        bool *present, qtts_api_error *e) {
    const qtts_json *v;
    *present = false;
    if (!get_typed(doc, key, QTTS_JSON_NUMBER, &v, e)) return false;
    if (!v) return true;
    if (!v->is_integer || !v->fits_int64 || v->integer < lo || v->integer > hi)
        return qtts_api_fail(e, 400, INVALID, key, "invalid_value",
                             "'%s' must be an integer in [%lld, %lld]", key, (long long)lo,
                             (long long)hi);
    *out = v->integer;
    *present = true;
    return true;
}

static bool get_bool(const qtts_json *doc, const char *key, bool *out, bool *present,
                     qtts_api_error *e) {
    const qtts_json *v;
    *present = false;
    if (!get_typed(doc, key, QTTS_JSON_BOOL, &v, e)) return false;
    if (!v) return true;
    *out = v->boolean;
    *present = true;
    return true;
}

/* Parse the body as one JSON object and refuse keys outside allowed[]. */
static bool parse_object(const char *body, size_t len, const char *const *allowed,
                         qtts_json **out, qtts_api_error *e) {
    *out = NULL;
    qtts_json_limits lim = {
        .max_depth = 16,
        .max_keys = 64,
        .max_items = 64,
        .max_number_len = 40,
        /* The body limit bounds every string; a Base model's body may
         * carry megabytes of base64 audio in one. */
        .max_string_len = QTTS_MAX((size_t)1 << 20, len),
    };
    qtts_err jerr;
    qtts_json *doc = qtts_json_parse(body, len, &lim, "request body", &jerr);
    if (!doc) {
        if (jerr.status == QTTS_ERR_NOMEM)
            return qtts_api_fail(e, 503, "server_error", NULL, "out_of_memory",
                                 "out of memory while parsing the request");
        /* The parser's message is a fixed rule plus a byte offset. */
        return qtts_api_fail(e, 400, INVALID, NULL, "invalid_json", "%s", jerr.msg);
    }
    if (doc->type != QTTS_JSON_OBJECT) {
        qtts_json_free(doc);
        return qtts_api_fail(e, 400, INVALID, NULL, "invalid_json",
                             "the request body must be a JSON object");
    }
    for (size_t i = 0; i < doc->count; i++) {
        bool known = false;
        for (const char *const *a = allowed; *a; a++)
            if (doc->key_lens[i] == strlen(*a) && memcmp(doc->keys[i], *a, doc->key_lens[i]) == 0) {
                known = true;
                break;
            }
        if (!known) {
            char name[80];
            qtts_echo(name, sizeof name, doc->keys[i], doc->key_lens[i], 64);
            qtts_api_fail(e, 400, INVALID, name, "unknown_parameter", "unknown parameter '%s'",
                          name);
            qtts_json_free(doc);
            return false;
        }
    }
    *out = doc;
    return true;
}

int qtts_frame_budget(size_t text_bytes, int max_frames) {
    uint64_t b = 12u * (uint64_t)text_bytes;
    if (b < 192) b = 192;
    if (b > (uint64_t)max_frames) b = (uint64_t)max_frames;
    return (int)b;
}

const char *qtts_format_name(qtts_audio_format f) {
    switch (f) {
    case QTTS_FMT_WAV: return "wav";
    case QTTS_FMT_PCM: return "pcm";
    case QTTS_FMT_FLAC: return "flac";
    case QTTS_FMT_MP3: return "mp3";
    case QTTS_FMT_OPUS: return "opus";
    }
    return "?";
}

const char *qtts_format_mime(qtts_audio_format f) {
    switch (f) {
    case QTTS_FMT_WAV: return "audio/wav";
    case QTTS_FMT_PCM: return "audio/pcm";
    case QTTS_FMT_FLAC: return "audio/flac";
    case QTTS_FMT_MP3: return "audio/mpeg";
    case QTTS_FMT_OPUS: return "audio/ogg";
    }
    return "application/octet-stream";
}

/* ==== shared field checks ============================================================ */

static bool check_text(const qtts_json *doc, const char *key, const qtts_req_limits *lim,
                       qtts_speech *out, qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, key, &v, e)) return false;
    if (!v) return qtts_api_fail(e, 400, INVALID, key, "missing_parameter", "'%s' is required", key);
    size_t cp = code_points(v->str, v->str_len);
    if (cp == 0 || blank(v->str, v->str_len))
        return qtts_api_fail(e, 400, INVALID, key, "invalid_value", "'%s' is empty", key);
    if (cp > lim->max_input_chars)
        return qtts_api_fail(e, 400, INVALID, key, "string_above_max_length",
                             "'%s' is %zu characters, over the limit of %zu", key, cp,
                             lim->max_input_chars);
    out->req.text = v->str;
    out->input_chars = cp;
    return true;
}

static bool check_instruct(const qtts_json *doc, const char *key, const qtts_model_desc *m,
                           const qtts_req_limits *lim, qtts_speech *out, qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, key, &v, e)) return false;
    if (!v || v->str_len == 0) return true;
    size_t cp = code_points(v->str, v->str_len);
    if (cp > lim->max_instructions_chars)
        return qtts_api_fail(e, 400, INVALID, key, "string_above_max_length",
                             "'%s' is %zu characters, over the limit of %zu", key, cp,
                             lim->max_instructions_chars);
    out->req.instruct = v->str;
    if ((m->kind == QTTS_KIND_CUSTOM_VOICE && !m->honours_instruct) || m->kind == QTTS_KIND_BASE)
        out->instruct_ignored = true;
    return true;
}

/* A profile name from key (lower-cased first when fold is set, as the
 * OpenAI voice is matched case-insensitively like preset speakers) into
 * out->voice_name. Names outside the rule get the same 404 as missing
 * ones; the server looks the valid ones up. */
static bool take_profile(const qtts_json *v, const char *key, bool fold, const qtts_model_desc *m,
                         qtts_speech *out, qtts_api_error *e) {
    if (!m->have_voices)
        return qtts_api_fail(e, 400, INVALID, key, "no_voice_profiles",
                             "this server has no voice profiles (start it with --voices DIR); clone "
                             "from reference audio with POST /v1/tts 'ref_audio' instead");
    if (!qtts_voice_name_ok(v->str, v->str_len)) {
        bool ok = fold && v->str_len >= 1 && v->str_len <= QTTS_VOICE_NAME_MAX;
        char low[QTTS_VOICE_NAME_MAX + 1];
        for (size_t i = 0; ok && i < v->str_len; i++) {
            char c = v->str[i];
            low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        if (!ok || !qtts_voice_name_ok(low, v->str_len)) return qtts_voice_not_found(e, key);
        memcpy(out->voice_name, low, v->str_len);
    } else {
        memcpy(out->voice_name, v->str, v->str_len);
    }
    out->voice_name[v->str_len] = 0;
    out->voice_param = key;
    return true;
}

/* The voice/speaker: a preset speaker of a CustomVoice model, "default"
 * (or absent) for a VoiceDesign model whose voice the instructions
 * describe, a voice profile on a Base model (OpenAI `voice` only; the
 * native `speaker` is refused there). Matched case-insensitively;
 * canonical name stored. */
static bool check_voice(const qtts_json *doc, const char *key, bool required,
                        const qtts_model_desc *m, qtts_speech *out, qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, key, &v, e)) return false;
    if (m->kind == QTTS_KIND_BASE) {
        if (strcmp(key, "speaker") == 0) {
            if (!v) return true;
            return qtts_api_fail(e, 400, INVALID, key, "unsupported_feature",
                                 "Base models have no preset speakers; clone a voice with "
                                 "'ref_audio' (and 'ref_text') or 'voice_profile'");
        }
        if (!v)
            return qtts_api_fail(e, 400, INVALID, key, "missing_parameter",
                                 m->have_voices
                                     ? "'%s' is required: the name of a voice profile (GET "
                                       "/v1/audio/voices lists them); this Base model clones voices"
                                     : "'%s' is required, but this Base model clones voices and "
                                       "the server has no voice profiles (start it with --voices "
                                       "DIR); or clone from reference audio with POST /v1/tts",
                                 key);
        return take_profile(v, key, true, m, out, e);
    }
    char list[QTTS_DESC_MAX_NAMES * (QTTS_DESC_NAME_LEN + 2)];
    if (m->kind == QTTS_KIND_VOICE_DESIGN) {
        if (v && !ieq(v->str, v->str_len, "default")) {
            char val[80];
            qtts_echo(val, sizeof val, v->str, v->str_len, 64);
            return qtts_api_fail(e, 400, INVALID, key, "invalid_value",
                                 "invalid voice '%s'; this VoiceDesign model takes 'default' and "
                                 "a voice description in the instructions",
                                 val);
        }
        return true;
    }
    join_names(list, sizeof list, m->speakers, m->n_speakers, NULL);
    if (!v) {
        if (!required) return true;
        return qtts_api_fail(e, 400, INVALID, key, "missing_parameter",
                             "'%s' is required; supported: %s", key, list);
    }
    for (int i = 0; i < m->n_speakers; i++)
        if (ieq(v->str, v->str_len, m->speakers[i])) {
            out->req.speaker = m->speakers[i];
            return true;
        }
    char val[80];
    qtts_echo(val, sizeof val, v->str, v->str_len, 64);
    return qtts_api_fail(e, 400, INVALID, key, "invalid_value", "invalid voice '%s'; supported: %s",
                         val, list);
}

static bool check_model(const qtts_json *doc, bool required, const qtts_model_desc *m,
                        qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, "model", &v, e)) return false;
    char list[256];
    snprintf(list, sizeof list, "%s", m->model_id);
    for (int i = 0; qtts_model_aliases[i]; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, ", %s", qtts_model_aliases[i]);
    }
    if (!v) {
        if (!required) return true;
        return qtts_api_fail(e, 400, INVALID, "model", "missing_parameter",
                             "'model' is required; supported: %s", list);
    }
    if (v->str_len == strlen(m->model_id) && memcmp(v->str, m->model_id, v->str_len) == 0)
        return true;
    for (int i = 0; qtts_model_aliases[i]; i++)
        if (v->str_len == strlen(qtts_model_aliases[i]) &&
            memcmp(v->str, qtts_model_aliases[i], v->str_len) == 0)
            return true;
    char val[80];
    qtts_echo(val, sizeof val, v->str, v->str_len, 64);
    return qtts_api_fail(e, 400, INVALID, "model", "model_not_found",
                         "unknown model '%s'; supported: %s", val, list);
}

static bool check_format(const qtts_json *doc, const char *key, const qtts_req_limits *lim,
                         qtts_speech *out, qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, key, &v, e)) return false;
    out->format = QTTS_FMT_WAV;    /* OpenAI's default is mp3; wav needs no encoder */
    if (!v) return true;
    static const struct { const char *name; qtts_audio_format f; bool encoded; } tab[] = {
        {"wav", QTTS_FMT_WAV, false},  {"pcm", QTTS_FMT_PCM, false},
        {"flac", QTTS_FMT_FLAC, true}, {"mp3", QTTS_FMT_MP3, true},
        {"opus", QTTS_FMT_OPUS, true},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(tab); i++)
        if (ieq(v->str, v->str_len, tab[i].name)) {
            if (tab[i].encoded && !lim->have_encoders) break;
            out->format = tab[i].f;
            return true;
        }
    char val[80];
    qtts_echo(val, sizeof val, v->str, v->str_len, 64);
    return qtts_api_fail(e, 400, INVALID, key, "unsupported_response_format",
                         "unsupported response_format '%s'; supported: %s", val,
                         lim->have_encoders ? "wav, pcm, flac, mp3, opus" : "wav, pcm");
}

/* Sampling and generation fields shared by the native endpoint. */
static bool check_sampling(const qtts_json *doc, const qtts_req_limits *lim, qtts_speech *out,
                           qtts_api_error *e) {
    qtts_request *r = &out->req;
    bool p, b;
    double x;
    int64_t k;
    if (!get_bool(doc, "greedy", &b, &p, e)) return false;
    if (p && b) r->do_sample = r->subtalker_do_sample = 0;
    if (!get_bool(doc, "do_sample", &b, &p, e)) return false;
    if (p) r->do_sample = b;
    if (!get_bool(doc, "subtalker_do_sample", &b, &p, e)) return false;
    if (p) r->subtalker_do_sample = b;
    if (!get_integer(doc, "top_k", 0, 1 << 20, &k, &p, e)) return false;
    if (p) r->top_k = (int)k;
    if (!get_integer(doc, "subtalker_top_k", 0, 1 << 20, &k, &p, e)) return false;
    if (p) r->subtalker_top_k = (int)k;
    if (!get_number(doc, "top_p", 0, 1, true, &x, &p, e)) return false;
    if (p) r->top_p = (float)x;
    if (!get_number(doc, "subtalker_top_p", 0, 1, true, &x, &p, e)) return false;
    if (p) r->subtalker_top_p = (float)x;
    if (!get_number(doc, "temperature", 0, 100, true, &x, &p, e)) return false;
    if (p && !((float)x > 0))
        return qtts_api_fail(e, 400, INVALID, "temperature", "invalid_value",
                             "'temperature' must be in (0, 100]");
    if (p) r->temperature = (float)x;
    if (!get_number(doc, "subtalker_temperature", 0, 100, true, &x, &p, e)) return false;
    if (p && !((float)x > 0))
        return qtts_api_fail(e, 400, INVALID, "subtalker_temperature", "invalid_value",
                             "'subtalker_temperature' must be in (0, 100]");
    if (p) r->subtalker_temperature = (float)x;
    if (!get_number(doc, "repetition_penalty", 0, 100, true, &x, &p, e)) return false;
    if (p && !((float)x > 0))
        return qtts_api_fail(e, 400, INVALID, "repetition_penalty", "invalid_value",
                             "'repetition_penalty' must be in (0, 100]");
    if (p) r->repetition_penalty = (float)x;
    if (!get_integer(doc, "seed", 0, INT64_MAX, &k, &p, e)) return false;
    if (p) r->seed = (uint64_t)k;
    if (!get_integer(doc, "max_frames", 1, lim->max_frames, &k, &p, e)) return false;
    if (p) {
        out->max_frames = (int)k;
        out->limit_is_error = false;
    }
    const qtts_json *v;
    if (!get_string(doc, "text_mode", &v, e)) return false;
    if (v) {
        if (ieq(v->str, v->str_len, "default")) r->text_mode = QTTS_TEXT_MODE_DEFAULT;
        else if (ieq(v->str, v->str_len, "streaming")) r->text_mode = QTTS_TEXT_MODE_STREAMING;
        else if (ieq(v->str, v->str_len, "non_streaming")) r->text_mode = QTTS_TEXT_MODE_NON_STREAMING;
        else {
            char val[80];
            qtts_echo(val, sizeof val, v->str, v->str_len, 64);
            return qtts_api_fail(e, 400, INVALID, "text_mode", "invalid_value",
                                 "invalid text_mode '%s'; supported: default, streaming, "
                                 "non_streaming",
                                 val);
        }
    }
    return true;
}

static bool check_language(const qtts_json *doc, const qtts_model_desc *m, qtts_speech *out,
                           qtts_api_error *e) {
    const qtts_json *v;
    if (!get_string(doc, "language", &v, e)) return false;
    if (!v || ieq(v->str, v->str_len, "auto")) return true;
    for (int i = 0; i < m->n_languages; i++)
        if (ieq(v->str, v->str_len, m->languages[i])) {
            out->req.language = m->languages[i];
            return true;
        }
    char list[QTTS_DESC_MAX_NAMES * (QTTS_DESC_NAME_LEN + 2)], val[80];
    join_names(list, sizeof list, m->languages, m->n_languages, "auto");
    qtts_echo(val, sizeof val, v->str, v->str_len, 64);
    return qtts_api_fail(e, 400, INVALID, "language", "invalid_value",
                         "invalid language '%s'; supported: %s", val, list);
}

/* `speed`: tempo at the same pitch, OpenAI's range (io/stretch.h). */
static bool check_speed(const qtts_json *doc, qtts_speech *out, qtts_api_error *e) {
    double speed;
    bool p;
    if (!get_number(doc, "speed", QTTS_SPEED_MIN, QTTS_SPEED_MAX, false, &speed, &p, e)) return false;
    if (p) out->req.speed = (float)speed;
    return true;
}

static void speech_init(qtts_speech *out) {
    memset(out, 0, sizeof *out);
    qtts_request_init(&out->req);
    out->format = QTTS_FMT_WAV;
    out->stream = QTTS_STREAM_NONE;
    out->limit_is_error = true;
}

static bool finish(qtts_json *doc, bool ok, const qtts_req_limits *lim, qtts_speech *out) {
    if (!ok) {
        qtts_json_free(doc);
        qtts_free(out->ref_audio);
        memset(out, 0, sizeof *out);
        return false;
    }
    out->doc_ = doc;
    if (out->limit_is_error) out->max_frames = qtts_frame_budget(strlen(out->req.text), lim->max_frames);
    /* Below speed 1 the audio sent is 1/speed times the audio generated: the
     * frame cap shrinks so that it stays within the audio cap (and the
     * response buffer within the bound it has at speed 1). */
    if (out->req.speed > 0 && out->req.speed < 1) {
        const int cap = QTTS_MAX(1, (int)floor(lim->max_frames * (double)out->req.speed));
        if (out->max_frames > cap) out->max_frames = cap;
    }
    /* max_new_tokens counts codebook-0 draws including the EOS draw. */
    out->req.max_new_tokens = out->max_frames + 1;
    /* Audio is decoded as frames are generated (the same samples as the
     * window delivery). A streamed response needs it for its latency; a
     * whole one too, for the others': the scheduler then decodes its
     * audio in pieces between other work, not in 300-frame windows and a
     * tail at finish (seconds of codec work that every stream would wait
     * for). */
    out->req.stream_chunk_frames = lim->stream_chunk_frames;
    return true;
}

/* ==== POST /v1/audio/speech ============================================================ */

static bool openai_fields(const qtts_json *doc, const qtts_model_desc *m, const qtts_req_limits *lim,
                          qtts_speech *out, qtts_api_error *e) {
    if (!check_model(doc, true, m, e)) return false;
    if (!check_text(doc, "input", lim, out, e)) return false;
    if (!check_voice(doc, "voice", true, m, out, e)) return false;
    if (!check_instruct(doc, "instructions", m, lim, out, e)) return false;
    if (!check_format(doc, "response_format", lim, out, e)) return false;
    if (!check_speed(doc, out, e)) return false;
    const qtts_json *v;
    if (!get_string(doc, "stream_format", &v, e)) return false;
    if (v) {
        if (ieq(v->str, v->str_len, "audio")) out->stream = QTTS_STREAM_AUDIO;
        else if (ieq(v->str, v->str_len, "sse")) out->stream = QTTS_STREAM_SSE;
        else {
            char val[80];
            qtts_echo(val, sizeof val, v->str, v->str_len, 64);
            return qtts_api_fail(e, 400, INVALID, "stream_format", "invalid_value",
                                 "invalid stream_format '%s'; supported: audio, sse", val);
        }
    }
    if (out->stream == QTTS_STREAM_SSE && out->format != QTTS_FMT_PCM && out->format != QTTS_FMT_WAV)
        return qtts_api_fail(e, 400, INVALID, "response_format", "unsupported_response_format",
                             "stream_format 'sse' carries wav or pcm audio");
    return true;
}

bool qtts_parse_openai_speech(const char *body, size_t len, const qtts_model_desc *m,
                              const qtts_req_limits *lim, qtts_speech *out, qtts_api_error *e) {
    static const char *const allowed[] = {"model", "input", "voice", "instructions",
                                          "response_format", "speed", "stream_format", NULL};
    speech_init(out);
    qtts_json *doc;
    if (!parse_object(body, len, allowed, &doc, e)) return finish(NULL, false, lim, out);
    return finish(doc, openai_fields(doc, m, lim, out, e), lim, out);
}

/* ==== POST /v1/tts (native) ============================================================= */

/* The cloning fields of /v1/tts. Only a Base model takes them, and it
 * needs exactly one voice source: ref_audio (with ref_text for in-context
 * cloning) or voice_profile. */
static bool check_clone(const qtts_json *doc, const qtts_model_desc *m, qtts_speech *out,
                        qtts_api_error *e) {
    static const char *const clone_fields[] = {"ref_audio", "ref_text", "voice_profile",
                                               "x_vector_only", NULL};
    if (m->kind != QTTS_KIND_BASE) {
        for (const char *const *c = clone_fields; *c; c++)
            if (qtts_json_get(doc, *c))
                return qtts_api_fail(e, 400, INVALID, *c, "unsupported_feature",
                                     "'%s' is for voice cloning, which needs a Base model; this "
                                     "is a %s model",
                                     *c, kind_name(m->kind));
        return true;
    }
    const qtts_json *audio, *text, *profile;
    bool xvo = false, p = false;
    if (!get_string(doc, "ref_audio", &audio, e) || !get_string(doc, "ref_text", &text, e) ||
        !get_string(doc, "voice_profile", &profile, e) || !get_bool(doc, "x_vector_only", &xvo, &p, e))
        return false;
    if (audio && profile)
        return qtts_api_fail(e, 400, INVALID, "voice_profile", "conflicting_parameters",
                             "give either 'ref_audio' or 'voice_profile', not both");
    if (text && !audio)
        return qtts_api_fail(e, 400, INVALID, "ref_text", "conflicting_parameters",
                             "'ref_text' is the transcript of 'ref_audio' and needs it (a voice "
                             "profile carries its own)");
    if (!audio && !profile)
        return qtts_api_fail(e, 400, INVALID, "ref_audio", "missing_parameter",
                             m->have_voices
                                 ? "this Base model clones a voice: give 'ref_audio' (base64 audio "
                                   "bytes, with 'ref_text' for in-context cloning) or 'voice_profile'"
                                 : "this Base model clones a voice: give 'ref_audio' (base64 audio "
                                   "bytes, with 'ref_text' for in-context cloning); the server has "
                                   "no voice profiles (--voices)");
    out->req.x_vector_only = p && xvo;
    if (profile) return take_profile(profile, "voice_profile", false, m, out, e);
    if (text) {
        if (text->str_len > QTTS_MAX_REF_TEXT_BYTES)
            return qtts_api_fail(e, 400, INVALID, "ref_text", "string_above_max_length",
                                 "'ref_text' is %zu bytes, over the limit of %u", text->str_len,
                                 QTTS_MAX_REF_TEXT_BYTES);
        if (blank(text->str, text->str_len))
            return qtts_api_fail(e, 400, INVALID, "ref_text", "invalid_value",
                                 "'ref_text' is empty; omit it (or set 'x_vector_only') to clone "
                                 "from the speaker embedding alone");
        if (memchr(text->str, 0, text->str_len))
            return qtts_api_fail(e, 400, INVALID, "ref_text", "invalid_value",
                                 "'ref_text' contains a NUL character");
        out->ref_text = text->str;
    }
    return b64_decode("ref_audio", audio->str, audio->str_len, &out->ref_audio, &out->ref_audio_len, e);
}

static bool native_fields(const qtts_json *doc, const qtts_model_desc *m, const qtts_req_limits *lim,
                          qtts_speech *out, qtts_api_error *e) {
    if (!check_model(doc, false, m, e)) return false;
    if (!check_text(doc, "text", lim, out, e)) return false;
    if (!check_voice(doc, "speaker", m->kind == QTTS_KIND_CUSTOM_VOICE, m, out, e)) return false;
    if (!check_clone(doc, m, out, e)) return false;
    if (!check_language(doc, m, out, e)) return false;
    if (!check_instruct(doc, "instruct", m, lim, out, e)) return false;
    if (!check_format(doc, "response_format", lim, out, e)) return false;
    if (!check_sampling(doc, lim, out, e)) return false;
    if (!check_speed(doc, out, e)) return false;
    bool stream, p;
    if (!get_bool(doc, "stream", &stream, &p, e)) return false;
    if (p && stream) out->stream = QTTS_STREAM_AUDIO;
    return true;
}

bool qtts_parse_native_tts(const char *body, size_t len, const qtts_model_desc *m,
                           const qtts_req_limits *lim, qtts_speech *out, qtts_api_error *e) {
    static const char *const allowed[] = {
        "model", "text", "speaker", "language", "instruct", "text_mode", "response_format",
        "stream", "seed", "greedy", "do_sample", "top_k", "top_p", "temperature",
        "repetition_penalty", "subtalker_do_sample", "subtalker_top_k", "subtalker_top_p",
        "subtalker_temperature", "max_frames", "ref_audio", "ref_text", "voice_profile",
        "x_vector_only", "speed", NULL};
    speech_init(out);
    qtts_json *doc;
    if (!parse_object(body, len, allowed, &doc, e)) return finish(NULL, false, lim, out);
    return finish(doc, native_fields(doc, m, lim, out, e), lim, out);
}

void qtts_speech_drop_audio(qtts_speech *s) {
    qtts_free(s->ref_audio);
    s->ref_audio = NULL;
    s->ref_audio_len = 0;
}

void qtts_speech_free(qtts_speech *s) {
    if (!s) return;
    qtts_speech_drop_audio(s);
    qtts_json_free(s->doc_);
    s->doc_ = NULL;
}
