/*
 * request.h - JSON request bodies -> validated synthesis parameters, and the
 * OpenAI-shaped error every refusal turns into.
 *
 * This layer is pure: no sockets, no engine, no threads. It knows the
 * loaded model only through qtts_model_desc (names copied out of the engine
 * once it is loaded) and the limits only through qtts_req_limits, so the
 * libFuzzer harness (tests/fuzz/fuzz_json_request.c) drives it directly.
 *
 * Every field is typed and range-checked here; the scheduler and the engine
 * never see a raw client number. Unknown fields, duplicate keys, invalid
 * UTF-8, nesting over 16, more than 64 keys and numbers over 40 characters
 * are refused with 400 naming the field. Error messages are fixed templates;
 * a client value is only ever echoed JSON-escaped and cut to 64 bytes.
 * No field is ever used as a path or a URL.
 */
#ifndef QTTS_SERVER_REQUEST_H
#define QTTS_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qwen3_tts.h"

/* ==== errors ================================================================ */

typedef struct {
    int status;              /* HTTP status */
    const char *type;        /* "invalid_request_error", "server_error", ... (static) */
    char param[48];          /* the offending field, "" for none */
    char code[48];           /* machine-readable code, "" for none */
    char message[480];       /* fixed template + escaped, truncated values */
} qtts_api_error;

/* Fills e and returns false (so validators can `return api_fail(...)`). */
bool qtts_api_fail(qtts_api_error *e, int status, const char *type, const char *param,
                   const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Writes {"error":{"message","type","param","code"}} into out (cap bytes,
 * NUL-terminated); returns the length, truncated output still valid JSON
 * only when it fits (the buffers used are sized for the longest message). */
size_t qtts_api_error_json(const qtts_api_error *e, char *out, size_t cap);

/* Copies at most max_src bytes of the valid UTF-8 string s into out (cap
 * bytes, NUL-terminated), cut at a character boundary with "..." appended
 * when cut and control characters shown as '?'. Used for echoing client
 * values inside messages; qtts_api_error_json escapes the whole message. */
void qtts_echo(char *out, size_t cap, const char *s, size_t len, size_t max_src);

/* ==== what the validator knows ============================================== */

#define QTTS_DESC_MAX_NAMES 64
#define QTTS_DESC_NAME_LEN 48

typedef struct {
    qtts_model_kind kind;
    bool honours_instruct;
    int n_speakers;
    char speakers[QTTS_DESC_MAX_NAMES][QTTS_DESC_NAME_LEN];   /* lower-case */
    int n_languages;
    char languages[QTTS_DESC_MAX_NAMES][QTTS_DESC_NAME_LEN];  /* lower-case, without "auto" */
    char model_id[QTTS_DESC_NAME_LEN];   /* the id /v1/models lists first */
    bool have_voices;                    /* Base: the server has a --voices directory */
} qtts_model_desc;

/* Voice profile names: ^[a-z0-9_-]{1,64}$ (the file is NAME.voice in the
 * server's --voices directory; the name itself is never a path). */
#define QTTS_VOICE_NAME_MAX 64
bool qtts_voice_name_ok(const char *s, size_t n);

/* The one 404 every unusable profile name gets, whether it is missing or
 * refused by the name rule: the body does not depend on the name, so it
 * tells a client nothing about which files exist. param: "voice" or
 * "voice_profile". Returns false. */
bool qtts_voice_not_found(qtts_api_error *e, const char *param);

typedef struct {
    size_t max_input_chars;         /* code points of `input`/`text` (<= 4096 by default) */
    size_t max_instructions_chars;  /* code points of `instructions`/`instruct` */
    int max_frames;                 /* per-request frame cap (time cap x 12.5) */
    bool have_encoders;             /* flac/mp3/opus through libsndfile */
    int stream_chunk_frames;        /* streamed responses: qtts_request.stream_chunk_frames */
} qtts_req_limits;

typedef enum {
    QTTS_FMT_WAV,
    QTTS_FMT_PCM,
    QTTS_FMT_FLAC,
    QTTS_FMT_MP3,
    QTTS_FMT_OPUS,
} qtts_audio_format;

typedef enum {
    QTTS_STREAM_NONE,     /* one response with Content-Length */
    QTTS_STREAM_AUDIO,    /* chunked transfer encoding, audio bytes as they come */
    QTTS_STREAM_SSE,      /* text/event-stream, base64 audio deltas */
} qtts_stream_mode;

/* A validated request. Strings point into the parsed document and live
 * until qtts_speech_free. */
typedef struct {
    qtts_request req;           /* callbacks unset; text/speaker/... point into doc */
    qtts_audio_format format;
    qtts_stream_mode stream;
    int max_frames;             /* the frame budget (>= 1) */
    bool limit_is_error;        /* true unless the client chose the frame limit itself */
    size_t input_chars;         /* code points of the text */
    bool instruct_ignored;      /* the model does not take instructions */
    /* Voice cloning (Base models only; req.x_vector_only is set as given).
     * At most one of ref_audio and voice_name is set; req.voice and
     * req.ref_audio are left for the server to fill (it turns ref_audio
     * into a qtts_voice itself, or looks voice_name up). */
    uint8_t *ref_audio;         /* decoded base64 bytes (owned), NULL for none */
    size_t ref_audio_len;
    const char *ref_text;       /* the transcript of ref_audio, NULL for none */
    char voice_name[QTTS_VOICE_NAME_MAX + 1];   /* a profile name, "" for none */
    const char *voice_param;    /* the field voice_name came from (static) */
    void *doc_;                 /* the parsed JSON (private) */
} qtts_speech;

/* Frame budget for a text of text_bytes UTF-8 bytes (an upper bound on its
 * token count): min(max_frames, max(192, 12 x text_bytes)). */
int qtts_frame_budget(size_t text_bytes, int max_frames);

/* POST /v1/audio/speech (OpenAI). On a Base model `voice` names a voice
 * profile (lower-cased first). false + e on refusal. */
bool qtts_parse_openai_speech(const char *body, size_t len, const qtts_model_desc *m,
                              const qtts_req_limits *lim, qtts_speech *out, qtts_api_error *e);

/* POST /v1/tts (native: every engine parameter, and on a Base model the
 * cloning fields: ref_audio (strict RFC 4648 base64 of an audio file's
 * bytes), ref_text, x_vector_only, voice_profile). */
bool qtts_parse_native_tts(const char *body, size_t len, const qtts_model_desc *m,
                           const qtts_req_limits *lim, qtts_speech *out, qtts_api_error *e);

void qtts_speech_free(qtts_speech *s);   /* NULL ok; safe on a zeroed struct */

/* Frees the decoded reference audio early (once it has been encoded). */
void qtts_speech_drop_audio(qtts_speech *s);

/* The OpenAI model names accepted besides the served id. */
extern const char *const qtts_model_aliases[];

const char *qtts_format_name(qtts_audio_format f);
const char *qtts_format_mime(qtts_audio_format f);

#endif
