/*
 * scheduler.h - the request queue and the one worker thread that owns the
 * engine and its sessions (continuous batching).
 *
 * The worker opens the engine itself (so the server can listen while the
 * model loads), keeps B sessions, and once per frame steps every running
 * request together with qtts_step_batch. Between two steps it admits a
 * queued job into a free slot (prefill, and its first frame in a one-row
 * step when others are running, for its time to first audio) and retires
 * finished, failed and cancelled ones, so a new request joins at the next
 * frame boundary and a finished one frees its slot at once.
 *
 * Threads. Connection threads create jobs, submit them and read their
 * output; they never touch a session or the engine. The worker never
 * touches a socket: audio goes into the job's byte buffer (s16le PCM at
 * 24 kHz) under the job's mutex, and an eventfd tells the connection that
 * something changed. A job is owned by the connection that created it;
 * the worker may use it from a successful submit until it marks it done,
 * and never after, so the owner may free it once qtts_job_done() is true.
 *
 * Cancellation is a flag the worker reads before every step and from the
 * per-frame callback, so a cancelled request costs at most the frame in
 * flight.
 */
#ifndef QTTS_SERVER_SCHEDULER_H
#define QTTS_SERVER_SCHEDULER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qwen3_tts.h"
#include "server/request.h"

typedef struct qtts_sched qtts_sched;

typedef struct qtts_job {
    /* ---- set by the owner before submit, read-only afterwards ---- */
    qtts_request req;             /* callbacks are filled in by submit */
    bool limit_is_error;          /* reaching req.max_new_tokens is a failure */
    size_t out_max;               /* refuse to buffer more bytes than this */

    /* ---- shared; guarded by mu ---- */
    pthread_mutex_t mu;
    uint8_t *out;                 /* s16le PCM not yet taken by the owner */
    size_t out_len, out_cap;
    size_t bytes_total;           /* produced so far */
    bool started;                 /* left the queue (prefill ran or is running) */
    bool done;
    qtts_status status;           /* valid once done */
    qtts_error err;
    bool truncated;               /* ended by the frame limit, not EOS */
    int frames;                   /* frames generated */
    double t_first_audio;         /* qtts_now() of the first audio, 0 before */

    atomic_bool cancel;           /* set by the owner, read by the worker */
    int efd;                      /* eventfd: readable when something changed */

    /* ---- scheduler-private ---- */
    double t_submit;
    int frames_after_cancel;
    struct qtts_job *next;
} qtts_job;

/* Creates the job's eventfd and mutex; false when out of descriptors. */
bool qtts_job_init(qtts_job *j);
void qtts_job_destroy(qtts_job *j);   /* only once done (or never submitted) */

/* Swaps the job's pending bytes out: *buf (owned by the caller, may be
 * reused) receives them; returns whether the job is done. Drains the
 * eventfd first. */
bool qtts_job_take(qtts_job *j, uint8_t **buf, size_t *len, size_t *cap);

typedef struct {
    const char *model_dir;
    int n_threads;                /* engine threads, 0 = all cores */
    int batch;                    /* B: sessions stepped together */
    int queue;                    /* Q: jobs waiting for a slot */
    const char *backend;          /* qtts_engine_options.backend (NULL: cpu) */
    const char *quant;            /* talker and code predictor at load: NULL, "int8", "int4" */
    const char *codec;            /* the codec's convolutions: NULL, "fp32", "bf16" */
    const char *kv_cache;         /* the talker's KV cache: NULL (the engine chooses), "f32", "bf16" */
    bool check_weights;           /* qtts_engine_options.check_weights */
    /* The warm-up request before ready is shaped like a real one: its
     * frame budget (sizes the KV cache) and codec push (0: none). */
    int max_frames, stream_chunk_frames;
    /* Called on the worker thread when the model is loaded (or failed to
     * load), possibly before qtts_sched_new has returned (hence the
     * scheduler argument): the server uses it to wake its accept loop. */
    void (*on_state)(void *user, qtts_sched *s);
    void *user;
} qtts_sched_config;

typedef enum { QTTS_SCHED_LOADING, QTTS_SCHED_READY, QTTS_SCHED_FAILED } qtts_sched_state;

typedef struct {
    qtts_sched_state state;
    int batch, queue_cap;
    int waiting, active;
    uint64_t steps, step_rows;    /* batch occupancy = step_rows / steps */
    uint64_t frames, audio_bytes;
    uint64_t started, completed, failed, cancelled, truncated, frames_after_cancel;
    uint64_t prompt_rows, prompt_rows_reused;   /* finished requests' prompts (prompt reuse) */
    uint64_t ttfa_count;
    double ttfa_sum;
    uint64_t ttfa_buckets[12];    /* cumulative counts for QTTS_TTFA_BOUNDS */
} qtts_sched_stats;

#define QTTS_TTFA_N_BOUNDS 12
extern const double qtts_ttfa_bounds[QTTS_TTFA_N_BOUNDS];

/* Starts the worker, which opens the engine. */
qtts_status qtts_sched_new(const qtts_sched_config *cfg, qtts_sched **out, qtts_error *err);

qtts_sched_state qtts_sched_get_state(qtts_sched *s, qtts_error *load_err);

/* Valid once READY: the engine, for read-only use (names, info). */
const qtts_engine *qtts_sched_engine(qtts_sched *s);

typedef enum {
    QTTS_SUBMIT_OK,
    QTTS_SUBMIT_FULL,       /* Q jobs already waiting */
    QTTS_SUBMIT_NOT_READY,  /* model loading or failed */
    QTTS_SUBMIT_STOPPED,
} qtts_submit_result;

qtts_submit_result qtts_sched_submit(qtts_sched *s, qtts_job *j);

/* Drains the eventfd; returns whether the job is done and, in *started,
 * whether it left the queue. */
bool qtts_job_check(qtts_job *j, bool *started);

/* Removes the job if it is still queued (it is then done, cancelled);
 * returns false, changing nothing, once it has started. */
bool qtts_sched_dequeue(qtts_sched *s, qtts_job *j);

/* Asks for the job to stop. A job still in the queue is removed and done
 * (QTTS_ERR_CANCELLED) on return; a running one is done after the frame in
 * flight. Returns true when the job had not started yet. */
bool qtts_sched_cancel(qtts_sched *s, qtts_job *j);

/* Cancels every queued and running job (drain timeout). */
void qtts_sched_cancel_all(qtts_sched *s);

void qtts_sched_get_stats(qtts_sched *s, qtts_sched_stats *st);

/* Lets the worker finish what is queued and running, then joins it and
 * closes the engine. No submit may follow. */
void qtts_sched_free(qtts_sched *s);

#endif
