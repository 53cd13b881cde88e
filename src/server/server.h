/*
 * server.h - the HTTP server: `qwen3-tts serve` (app/main.c) is flags ->
 * qtts_server_config -> qtts_server_start / qtts_server_wait.
 *
 *     qtts_server_config c;
 *     qtts_server_config_init(&c);
 *     c.model_dir = "Qwen3-TTS-12Hz-0.6B-CustomVoice";
 *     c.port = 8080;
 *     c.install_signal_handlers = true;          // SIGINT/SIGTERM drain, SIGUSR1 stats
 *     qtts_server *srv;
 *     if (qtts_server_start(&c, &srv, &err)) ...  // listening; the model loads behind it
 *     int code = qtts_server_wait(srv, &err);    // until drained: exit code for the process
 *     if (code < 128) qtts_server_free(srv);     // 128+sig: aborted by a second signal
 *
 * Endpoints: POST /v1/audio/speech (OpenAI), POST /v1/tts (native), GET
 * /v1/models, /v1/audio/voices, /health (public), /metrics (Prometheus).
 * On a Base model, /v1/tts clones from inline reference audio or a voice
 * profile of voices_dir, and the OpenAI `voice` names a profile.
 * Layering: this code sees the public API (qwen3_tts.h) and base/ only;
 * the engine and its sessions belong to the scheduler's worker thread.
 * Library rules hold: nothing here prints (lines go to cfg.log) or exits.
 */
#ifndef QTTS_SERVER_SERVER_H
#define QTTS_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "qwen3_tts.h"

typedef struct qtts_server qtts_server;

typedef struct {
    const char *model_dir;          /* required */
    const char *host;               /* numeric address to bind; default "127.0.0.1" */
    int port;                       /* default 8080; 0 = any free port (tests) */
    int threads;                    /* engine threads, 0 = all cores */
    int batch;                      /* B: sessions stepped together (default 4) */
    int queue;                      /* Q: requests waiting for a slot (default 16) */
    int max_connections;            /* open connections (default 256); more -> 503 */
    size_t max_body;                /* request body bytes (default 1 MiB) */
    size_t max_clone_body;          /* POST /v1/tts body bytes on a Base model, which may carry
                                       base64 reference audio (default 16 MiB; at least max_body) */
    const char *voices_dir;         /* Base models: a directory of NAME.voice profiles, loaded
                                       once the model is; NULL: none */
    size_t max_input_chars;         /* cap on `input`, before the frame-derived limit (4096) */
    size_t max_instructions_chars;  /* default 4096 */
    double max_audio_seconds;       /* per-request audio cap (default 600 s = 7500 frames) */
    double queue_timeout_s;         /* max wait for a slot (default 30) -> 503 */
    double header_timeout_s;        /* whole request head (default 10) -> 408 */
    double body_timeout_s;          /* whole request body (default 30) -> 408 */
    double idle_timeout_s;          /* keep-alive wait for the next request (default 5) */
    double write_timeout_s;         /* one stalled write (default 10) -> request cancelled */
    double drain_timeout_s;         /* graceful shutdown budget (default 30) */
    const char *backend;            /* engine backend: NULL or "cpu" (default), "cuda" */
    const char *quant;              /* NULL/"none" (the directory's weights), "int8", "int4":
                                       talker and code predictor quantized at load */
    const char *codec;              /* NULL/"fp32" or "bf16": the codec's convolutions
                                       (qtts_engine_options.codec) */
    const char *kv_cache;           /* NULL, "f32" or "bf16": the talker's KV cache
                                       (qtts_engine_options.kv_cache; NULL chooses) */
    bool check_weights;             /* qtts_engine_options.check_weights */
    int stream_chunk_frames;        /* streamed responses: frames per codec decode, the first
                                       audio after 1 frame (default 12; 0 = the reference's
                                       300-frame windows); the samples are the same either way */
    const char *api_key;            /* NULL: no auth; else Bearer, constant-time compare */
    const char *model_name;         /* id in /v1/models; default "qwen3-tts" */
    bool install_signal_handlers;   /* SIGINT/SIGTERM: drain, again: abort; SIGUSR1: stats */
    void (*log)(void *user, const char *line);   /* NULL: silent */
    void *log_user;
} qtts_server_config;

void qtts_server_config_init(qtts_server_config *c);

/* Validates c, binds and listens, starts the accept thread and the worker
 * (which loads the model; /health says "loading" until it is ready). */
qtts_status qtts_server_start(const qtts_server_config *c, qtts_server **out, qtts_error *err);

/* The bound port (useful with port 0). */
int qtts_server_port(const qtts_server *s);

/* Waits until the model is loaded (true) or failed / timed out (false). */
bool qtts_server_wait_ready(qtts_server *s, double timeout_s);

/* Starts a graceful drain: stop accepting, answer new requests 503, finish
 * every accepted request, then qtts_server_wait returns 0. Calling it again
 * aborts at once (wait returns 130). Async-signal-safe. */
void qtts_server_stop(qtts_server *s);

/* Blocks until the server has stopped. Returns the process exit code:
 * 0 drained, 1 failed (model load error, drain timeout; err says which),
 * 128+signal when a second signal aborted the drain (the caller should
 * _exit at once: requests may still be running). */
int qtts_server_wait(qtts_server *s, qtts_error *err);

/* After qtts_server_wait returned < 128. NULL ok. */
void qtts_server_free(qtts_server *s);

#endif
