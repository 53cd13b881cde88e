/*
 * scheduler.c - request queue + the batch worker; see scheduler.h.
 *
 * Worker loop, once per frame:
 *
 *     wait until a job is queued or running (or stop)
 *     admit a queued job into a free slot -> qtts_session_start (prefill),
 *                                            then its first frame alone and
 *                                            its first audio
 *     retire cancelled slots              -> qtts_session_cancel
 *     qtts_step_batch(all running slots)  -> one frame each (no decoding)
 *     decode the audio that fell due      -> qtts_session_decode: first
 *                                            audio first, then pieces,
 *                                            until a queued job could be
 *                                            admitted
 *     retire finished/failed slots        -> qtts_session_finish
 *
 * The sessions decode manually (qtts_session_set_manual_decode): a step
 * that completes another stream's 12-frame push would otherwise decode it
 * before returning (~0.4 s on 2 cores), and a request arriving then would
 * wait for that, and for every other push in the same step, before its
 * prefill. Decoding in pieces between admissions keeps its wait to about
 * one piece; the streams already playing get their next chunk one
 * admission later. The audio is the same bits either way.
 *
 * The mutex guards the queue, the slot count and the load state; it is
 * never held across engine work. Each job has its own mutex for its output
 * buffer, so a connection draining audio never waits for a frame.
 */
#include "server/scheduler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/base.h"
#include "io/wav.h"

#define MAX_BATCH 64
/* Frames of due audio decoded at a time while a slot is free, so that a
 * request arriving then is admitted after at most one piece. A push
 * reads every codec weight, so 4-frame pushes cost ~5% more per frame
 * than 12-frame ones on a CPU (docs/PERFORMANCE.md); with every slot
 * busy nobody can be admitted, and pushes go whole. A stream's first
 * push (one frame) is never split. */
#define DECODE_PIECE 4

const double qtts_ttfa_bounds[QTTS_TTFA_N_BOUNDS] = {0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                                     5,    10,  20,   30,  60, 120};

struct qtts_sched {
    qtts_sched_config cfg;
    char *model_dir;
    pthread_t thread;
    bool thread_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    qtts_job *qhead, *qtail;
    int qlen, n_active;
    bool stopping, cancel_all;
    qtts_sched_state state;
    qtts_error load_err;
    qtts_engine *eng;
    int batch;

    /* counters: written by the worker, read by anyone (relaxed atomics) */
    atomic_uint_fast64_t steps, step_rows, frames, audio_bytes, started, completed, failed,
        cancelled, truncated, frames_after_cancel, prompt_rows, prompt_rows_reused;
    /* time-to-first-audio histogram, under mu */
    uint64_t ttfa_count, ttfa_buckets[QTTS_TTFA_N_BOUNDS];
    double ttfa_sum;
};

static void bump(atomic_uint_fast64_t *c, uint64_t n) {
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}
static uint64_t peek(atomic_uint_fast64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

/* ==== jobs ======================================================================== */

bool qtts_job_init(qtts_job *j) {
    memset(j, 0, sizeof *j);
    j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (j->efd < 0) return false;
    pthread_mutex_init(&j->mu, NULL);
    atomic_init(&j->cancel, false);
    qtts_request_init(&j->req);
    return true;
}

void qtts_job_destroy(qtts_job *j) {
    if (j->efd >= 0) close(j->efd);
    j->efd = -1;
    pthread_mutex_destroy(&j->mu);
    qtts_free(j->out);
    j->out = NULL;
}

static void job_notify(qtts_job *j) {
    uint64_t one = 1;
    /* Nonblocking: fails only if the counter would overflow, when the
     * reader is certainly going to wake anyway. */
    ssize_t r = write(j->efd, &one, sizeof one);
    (void)r;
}

bool qtts_job_take(qtts_job *j, uint8_t **buf, size_t *len, size_t *cap) {
    uint64_t v;
    ssize_t r = read(j->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&j->mu);
    /* Swap buffers: the worker keeps appending to the caller's old one. */
    uint8_t *b = j->out;
    size_t n = j->out_len, c = j->out_cap;
    j->out = *buf;
    j->out_cap = *cap;
    j->out_len = 0;
    *buf = b;
    *len = n;
    *cap = c;
    bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    return done;
}

/* Marks j done; the worker must not touch j afterwards. */
static void job_complete(qtts_sched *s, qtts_job *j, qtts_status st, const qtts_error *err,
                         bool truncated, bool was_running) {
    if (st == QTTS_ERR_CANCELLED) bump(&s->cancelled, 1);
    else if (st) bump(&s->failed, 1);
    else bump(&s->completed, 1);
    if (truncated) bump(&s->truncated, 1);
    bump(&s->frames_after_cancel, (uint64_t)j->frames_after_cancel);
    if (was_running) {
        pthread_mutex_lock(&s->mu);
        s->n_active--;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&j->mu);
    j->status = st;
    if (st && err) j->err = *err;
    else if (st) snprintf(j->err.msg, sizeof j->err.msg, "%s", qtts_status_str(st));
    j->err.status = st;
    j->truncated = truncated;
    j->done = true;
    /* Notify before unlocking: the owner may destroy j (closing the
     * eventfd, whose number can then be reused) as soon as it sees done
     * under the lock. */
    job_notify(j);
    pthread_mutex_unlock(&j->mu);
}

/* ==== engine callbacks (worker thread) ============================================ */

typedef struct {
    qtts_sched *s;
    qtts_job *j;
    bool overflow;      /* out_max reached or out of memory */
    bool first_pushed;  /* its first audio has been decoded */
} job_ctx;

/* The job's callbacks need the scheduler too; jobs carry a pointer to a
 * context that lives in the worker's slot table. */
static int on_frame(void *user, int idx, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    (void)codes;
    job_ctx *c = user;
    qtts_job *j = c->j;
    if (atomic_load_explicit(&j->cancel, memory_order_relaxed)) {
        j->frames_after_cancel++;
        return 1;
    }
    bump(&c->s->frames, 1);
    pthread_mutex_lock(&j->mu);
    j->frames = idx + 1;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int on_audio(void *user, const float *pcm, size_t n) {
    job_ctx *c = user;
    qtts_job *j = c->j;
    if (atomic_load_explicit(&j->cancel, memory_order_relaxed)) return 1;
    if (n == 0) return 0;
    bool first = false;
    double now = qtts_now();
    pthread_mutex_lock(&j->mu);
    size_t need = j->out_len + 2 * n;
    if (need > j->out_max || need < j->out_len) {
        pthread_mutex_unlock(&j->mu);
        c->overflow = true;
        return 1;
    }
    if (need > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap : 65536;
        while (cap < need) cap *= 2;
        uint8_t *p = qtts_realloc(j->out, cap);
        if (!p) {
            pthread_mutex_unlock(&j->mu);
            c->overflow = true;
            return 1;
        }
        j->out = p;
        j->out_cap = cap;
    }
    uint8_t *o = j->out + j->out_len;
    for (size_t i = 0; i < n; i++) {
        float x = pcm[i];
        if (!(x == x)) x = 0.0f;
        if (x > 1.0f) x = 1.0f;
        if (x < -1.0f) x = -1.0f;
        uint16_t v = (uint16_t)(int16_t)lrintf(x * 32767.0f);
        o[2 * i] = (uint8_t)v;
        o[2 * i + 1] = (uint8_t)(v >> 8);
    }
    j->out_len = need;
    j->bytes_total += 2 * n;
    if (j->t_first_audio == 0) {
        j->t_first_audio = now;
        first = true;
    }
    pthread_mutex_unlock(&j->mu);
    bump(&c->s->audio_bytes, 2 * n);
    if (first) {
        qtts_sched *s = c->s;
        double dt = now - j->t_submit;
        pthread_mutex_lock(&s->mu);
        s->ttfa_count++;
        s->ttfa_sum += dt;
        for (int b = 0; b < QTTS_TTFA_N_BOUNDS; b++)
            if (dt <= qtts_ttfa_bounds[b]) s->ttfa_buckets[b]++;
        pthread_mutex_unlock(&s->mu);
    }
    job_notify(j);
    return 0;
}

/* Final status of a job whose engine call returned st. */
static qtts_status job_status(const job_ctx *c, qtts_status st, qtts_error *err) {
    if (c->overflow) {
        snprintf(err->msg, sizeof err->msg, "the response is larger than this server buffers");
        return err->status = QTTS_ERR_NOMEM;
    }
    if (atomic_load(&c->j->cancel)) {
        snprintf(err->msg, sizeof err->msg, "cancelled");
        return err->status = QTTS_ERR_CANCELLED;
    }
    return st;
}

/* Retires slot k's done or failed session: finish delivers the rest of
 * its audio (or returns its failure) and completes the job. */
static void finish_slot(qtts_sched *s, qtts_session **ses, job_ctx *ctx, bool *busy, int k) {
    qtts_error e2 = {0};
    qtts_result res = {0};
    qtts_status st = qtts_session_finish(ses[k], &res, &e2);
    bump(&s->prompt_rows, (uint64_t)res.prompt_rows);
    bump(&s->prompt_rows_reused, (uint64_t)res.prompt_rows_reused);
    st = job_status(&ctx[k], st, &e2);
    busy[k] = false;
    job_complete(s, ctx[k].j, st, &e2, !st && !res.hit_eos, true);
}

/* Done, and nothing left due: finish it (only a stream's tail shorter
 * than a push, or a partial window, is decoded there). */
static bool retirable(qtts_session *ses) {
    return !qtts_session_active(ses) && !qtts_session_decode_due(ses);
}

/* Decodes up to max frames (0: all) of slot k's due audio; retires the
 * slot if that failed, or if it was the last. */
static void decode_slot(qtts_sched *s, qtts_session **ses, job_ctx *ctx, bool *busy, int k,
                        int max) {
    qtts_error e2 = {0};
    if (qtts_session_decode(ses[k], max, &e2) || retirable(ses[k])) finish_slot(s, ses, ctx, busy, k);
}

/* Slot k's first audio, whole and at once, if it is due and not yet
 * decoded: it is what the request's time to first audio waits for. */
static void decode_first(qtts_sched *s, qtts_session **ses, job_ctx *ctx, bool *busy, int k) {
    if (busy[k] && !ctx[k].first_pushed && qtts_session_decode_due(ses[k])) {
        ctx[k].first_pushed = true;
        decode_slot(s, ses, ctx, busy, k, 0);
    }
}

/* Whether a slot is free, and whether a queued job waits for one. */
static bool slot_free(qtts_sched *s, bool *waiting) {
    pthread_mutex_lock(&s->mu);
    const bool room = s->n_active < s->batch;
    *waiting = room && s->qhead;
    pthread_mutex_unlock(&s->mu);
    return room;
}

/* The audio that fell due in the step: each stream's first audio at once,
 * then the rest round robin from *rr, DECODE_PIECE frames at a time while
 * a slot is free, until none is due or a queued job could take the free
 * slot (the rest waits for the next round). */
static void decode_due(qtts_sched *s, qtts_session **ses, job_ctx *ctx, bool *busy, int B,
                       int *rr) {
    for (int k = 0; k < B; k++) decode_first(s, ses, ctx, busy, k);
    for (;;) {
        int k = -1;
        for (int i = 0; i < B && k < 0; i++) {
            const int c = (*rr + i) % B;
            if (busy[c] && qtts_session_decode_due(ses[c])) k = c;
        }
        bool waiting;
        const bool room = slot_free(s, &waiting);
        if (k < 0 || waiting) return;
        decode_slot(s, ses, ctx, busy, k, room ? DECODE_PIECE : 0);
        *rr = (k + 1) % B;
    }
}

/* One frame for the sessions of slots idx[0..n) (qtts_step_batch), then
 * the retirement of those that failed, or finished with no audio due. */
static void step_slots(qtts_sched *s, qtts_session **ses, job_ctx *ctx, bool *busy,
                       const int *idx, int n) {
    qtts_session *run[MAX_BATCH];
    for (int i = 0; i < n; i++) run[i] = ses[idx[i]];
    qtts_error errs[MAX_BATCH];
    memset(errs, 0, sizeof(errs[0]) * (size_t)n);
    qtts_status bst = qtts_step_batch(run, n, errs);
    bump(&s->steps, 1);
    bump(&s->step_rows, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        qtts_status s2 = bst ? bst : errs[i].status;
        if (s2) {
            qtts_error e2 = bst ? (qtts_error){.status = bst} : errs[i];
            if (bst) snprintf(e2.msg, sizeof e2.msg, "batch step failed: %s", qtts_status_str(bst));
            qtts_session_cancel(ses[k]);
            s2 = job_status(&ctx[k], s2, &e2);
            busy[k] = false;
            job_complete(s, ctx[k].j, s2, &e2, false, true);
        } else if (retirable(ses[k])) {
            finish_slot(s, ses, ctx, busy, k);
        }
    }
}

/* ==== slot choice ================================================================== */

/* What a request's prompt starts with, as far as the scheduler can tell
 * before it is built: its voice. A session keeps its last prompt's rows and
 * computes only the rows after those the next prompt shares (prompt reuse:
 * the role and codec prefix of a speaker and language, an instruction),
 * and a streamed in-context clone resumes the codec decoder from its state
 * after the same reference frames; so a new request goes to a free slot
 * whose last request had the same voice,
 * else to the free slot used longest ago (keeping recent voices around). */
typedef struct {
    char *speaker, *language, *instruct;
    bool has_voice;
    uint64_t voice;            /* qtts_voice_digest: a profile, or the same recording sent again */
    qtts_text_mode text_mode;
    bool set;
    uint64_t used;             /* admission stamp */
} slot_key;

static bool str_same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static bool key_same(const slot_key *k, const qtts_request *r) {
    return k->set && str_same(k->speaker, r->speaker) && str_same(k->language, r->language) &&
           str_same(k->instruct, r->instruct) && k->has_voice == (r->voice != NULL) &&
           (!r->voice || k->voice == qtts_voice_digest(r->voice)) &&
           k->text_mode == r->text_mode && !r->ref_audio;
}

static void key_clear(slot_key *k) {
    qtts_free(k->speaker), qtts_free(k->language), qtts_free(k->instruct);
    k->speaker = k->language = k->instruct = NULL;
    k->set = false;
}

static void key_set(slot_key *k, const qtts_request *r, uint64_t stamp) {
    key_clear(k);
    k->used = stamp;
    if (r->ref_audio) return;   /* a voice encoded for this request only */
    k->speaker = r->speaker ? qtts_strdup(r->speaker) : NULL;
    k->language = r->language ? qtts_strdup(r->language) : NULL;
    k->instruct = r->instruct ? qtts_strdup(r->instruct) : NULL;
    k->has_voice = r->voice != NULL;
    k->voice = r->voice ? qtts_voice_digest(r->voice) : 0;
    k->text_mode = r->text_mode;
    /* out of memory: no preference next time, nothing else lost */
    k->set = (!r->speaker || k->speaker) && (!r->language || k->language) &&
             (!r->instruct || k->instruct);
}

static int pick_slot(const bool *busy, const slot_key *keys, int B, const qtts_request *r) {
    int best = -1;
    for (int k = 0; k < B; k++) {
        if (busy[k]) continue;
        if (key_same(&keys[k], r)) return k;
        if (best < 0 || keys[k].used < keys[best].used) best = k;
    }
    return best;
}

/* ==== the worker =================================================================== */

/* A request on session 0 before the server reports ready, stopped after two
 * frames: the first real request then finds the weights mapped (the
 * model's files are mmap'd, and the first touch of every page faults:
 * 0.25-0.6 s of a first request's time to first audio on the 0.6B int8
 * model, 0.17 s after) and the session's KV cache and codec stream sized
 * as a real request's (the same frame budget and push). Not counted in the
 * metrics. A Base model clones a recording made up here, in context, so
 * that its speaker and codec encoders are warm too. */
static int stop_after_2(void *user, int frame, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    (void)user, (void)codes;
    return frame >= 1;
}

/* 1.5 s of a 150 Hz tone with four overtones, as a 24 kHz 16-bit WAV file
 * (little-endian, as WAV is); NULL without memory. */
static uint8_t *warm_recording(size_t *len) {
    enum { RATE = 24000, N = RATE * 3 / 2 };
    uint8_t *w = qtts_malloc(44 + 2 * (size_t)N);
    if (!w) return NULL;
    qtts_wav_header(w, N, 1, RATE, QTTS_WAV_S16);
    for (int i = 0; i < N; i++) {
        double x = 0;
        for (int h = 1; h <= 5; h++) x += 0.15 / h * sin(2 * M_PI * 150 * h * i / RATE);
        const uint16_t v = (uint16_t)(int16_t)lrint(x * 32767);
        w[44 + 2 * i] = (uint8_t)v;
        w[45 + 2 * i] = (uint8_t)(v >> 8);
    }
    *len = 44 + 2 * (size_t)N;
    return w;
}

static void warm_up(const qtts_sched_config *cfg, qtts_engine *eng, qtts_session *ses) {
    qtts_model_info info;
    qtts_engine_info(eng, &info);
    qtts_request req;
    qtts_request_init(&req);
    req.text = "Hello.";
    uint8_t *wav = NULL;
    if (info.kind == QTTS_KIND_CUSTOM_VOICE) {
        req.speaker = qtts_engine_speaker(eng, 0);
    } else if (info.kind == QTTS_KIND_VOICE_DESIGN) {
        req.instruct = "A calm, clear voice.";
    } else {
        if (!(wav = warm_recording(&req.ref_audio_len))) return;
        req.ref_audio = wav;
        req.ref_text = "Hello there.";
    }
    req.do_sample = 0;
    req.subtalker_do_sample = 0;
    req.max_new_tokens = cfg->max_frames > 0 ? cfg->max_frames + 1 : 2;
    req.on_frame = stop_after_2;
    req.stream_chunk_frames = cfg->stream_chunk_frames;
    qtts_result res;
    qtts_error err = {0};
    /* ends cancelled by stop_after_2; any other failure shows on a real request */
    (void)qtts_synthesize(ses, &req, &res, &err);
    qtts_free(wav);
}

static void *worker(void *arg) {
    qtts_sched *s = arg;
    qtts_session *ses[MAX_BATCH] = {0};
    job_ctx ctx[MAX_BATCH];
    bool busy[MAX_BATCH] = {0};
    qtts_error err = {0};
    qtts_engine_options eo;
    qtts_engine_options_init(&eo);
    eo.n_threads = s->cfg.n_threads;
    if (s->cfg.backend) eo.backend = s->cfg.backend;
    eo.quant_talker = eo.quant_cp = s->cfg.quant;
    eo.codec = s->cfg.codec;
    eo.kv_cache = s->cfg.kv_cache;
    eo.check_weights = s->cfg.check_weights;
    qtts_engine *eng = NULL;
    qtts_status st = qtts_engine_open(s->model_dir, &eo, &eng, &err);
    int B = 0;
    if (!st) {
        B = s->cfg.batch;
        for (int i = 0; i < B && !st; i++) {
            if (!(ses[i] = qtts_session_new(eng, &err))) st = err.status ? err.status : QTTS_ERR_NOMEM;
            else qtts_session_set_manual_decode(ses[i], true);
        }
    }
    if (!st) warm_up(&s->cfg, eng, ses[0]);
    pthread_mutex_lock(&s->mu);
    if (st) {
        s->state = QTTS_SCHED_FAILED;
        s->load_err = err;
    } else {
        s->state = QTTS_SCHED_READY;
        s->eng = eng;
        s->batch = B;
    }
    pthread_mutex_unlock(&s->mu);
    if (s->cfg.on_state) s->cfg.on_state(s->cfg.user, s);

    int rr = 0;   /* decode_due's round robin */
    slot_key keys[MAX_BATCH] = {0};
    uint64_t stamp = 0;
    for (;;) {
        qtts_job *admit[MAX_BATCH];
        int n_admit = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->n_active && !s->qhead && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->n_active && !s->qhead) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        bool cancel_all = s->cancel_all;
        s->cancel_all = false;
        /* One new request per step: its prefill, then a step of the whole
         * batch, which gives it its first frame (and audio) before the
         * next one's prefill. Requests that arrive together then get
         * their first audio one step apart instead of all after every
         * prefill; the batch's own frames wait for one prefill per step
         * either way. */
        while (s->qhead && s->n_active + n_admit < B && n_admit < 1) {
            qtts_job *j = s->qhead;
            s->qhead = j->next;
            if (!s->qhead) s->qtail = NULL;
            s->qlen--;
            j->next = NULL;
            admit[n_admit++] = j;
        }
        s->n_active += n_admit;
        pthread_mutex_unlock(&s->mu);

        if (cancel_all)
            for (int i = 0; i < B; i++)
                if (busy[i]) atomic_store(&ctx[i].j->cancel, true);

        /* admit: prefill into a free slot */
        for (int a = 0; a < n_admit; a++) {
            qtts_job *j = admit[a];
            const int k = pick_slot(busy, keys, B, &j->req);
            ctx[k] = (job_ctx){.s = s, .j = j};
            pthread_mutex_lock(&j->mu);
            j->started = true;
            pthread_mutex_unlock(&j->mu);
            j->req.on_audio = on_audio;
            j->req.on_frame = on_frame;
            j->req.user = &ctx[k];
            bump(&s->started, 1);
            if (atomic_load(&j->cancel)) {
                qtts_error ce = {.status = QTTS_ERR_CANCELLED};
                snprintf(ce.msg, sizeof ce.msg, "cancelled");
                job_complete(s, j, QTTS_ERR_CANCELLED, &ce, false, true);
                continue;
            }
            qtts_error e2 = {0};
            qtts_status s2 = qtts_session_start(ses[k], &j->req, &e2);
            if (s2) {
                s2 = job_status(&ctx[k], s2, &e2);
                job_complete(s, j, s2, &e2, false, true);
                continue;
            }
            busy[k] = true;
            key_set(&keys[k], &j->req, ++stamp);
            /* Its first frame in a step of its own when others are running,
             * and its first audio at once: it waits for one one-row step
             * and a one-frame decode, not for a step of the whole batch.
             * The others lose that one-row step (same bits either way). */
            bool others = false;
            for (int i = 0; i < B && !others; i++) others = busy[i] && i != k;
            if (others) {
                step_slots(s, ses, ctx, busy, &k, 1);
                decode_first(s, ses, ctx, busy, k);
            }
        }
        /* retire cancelled and finished slots, then step the running ones */
        int idx[MAX_BATCH], n = 0;
        for (int k = 0; k < B; k++) {
            if (!busy[k]) continue;
            if (atomic_load(&ctx[k].j->cancel)) {
                qtts_error e2 = {0};
                qtts_session_cancel(ses[k]);
                qtts_status s2 = job_status(&ctx[k], QTTS_OK, &e2);
                busy[k] = false;
                job_complete(s, ctx[k].j, s2, &e2, false, true);
            } else if (qtts_session_active(ses[k])) {
                idx[n++] = k;
            } else if (retirable(ses[k])) {
                finish_slot(s, ses, ctx, busy, k);
            }   /* else done with audio due: decode_due drains it */
        }
        if (n > 0) step_slots(s, ses, ctx, busy, idx, n);
        decode_due(s, ses, ctx, busy, B, &rr);
    }
    for (int i = 0; i < MAX_BATCH; i++) qtts_session_free(ses[i]), key_clear(&keys[i]);
    pthread_mutex_lock(&s->mu);
    s->eng = NULL;
    pthread_mutex_unlock(&s->mu);
    qtts_engine_close(eng);
    return NULL;
}

/* ==== public ======================================================================= */

qtts_status qtts_sched_new(const qtts_sched_config *cfg, qtts_sched **out, qtts_error *err) {
    *out = NULL;
    if (cfg->batch < 1 || cfg->batch > MAX_BATCH || cfg->queue < 0)
        return qtts_fail(err, QTTS_ERR_INVALID, "batch must be in [1, %d] and queue >= 0", MAX_BATCH);
    qtts_sched *s = qtts_calloc(1, sizeof *s);
    if (!s) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    if (!(s->model_dir = qtts_strdup(cfg->model_dir))) {
        qtts_free(s);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    }
    s->cfg.model_dir = s->model_dir;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->state = QTTS_SCHED_LOADING;
    int rc = pthread_create(&s->thread, NULL, worker, s);
    if (rc) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        qtts_free(s->model_dir);
        qtts_free(s);
        return qtts_fail(err, QTTS_ERR_NOMEM, "cannot start the worker thread: %s", strerror(rc));
    }
    s->thread_started = true;
    *out = s;
    return QTTS_OK;
}

qtts_sched_state qtts_sched_get_state(qtts_sched *s, qtts_error *load_err) {
    pthread_mutex_lock(&s->mu);
    qtts_sched_state st = s->state;
    if (load_err) *load_err = s->load_err;
    pthread_mutex_unlock(&s->mu);
    return st;
}

const qtts_engine *qtts_sched_engine(qtts_sched *s) {
    pthread_mutex_lock(&s->mu);
    const qtts_engine *e = s->eng;
    pthread_mutex_unlock(&s->mu);
    return e;
}

qtts_submit_result qtts_sched_submit(qtts_sched *s, qtts_job *j) {
    pthread_mutex_lock(&s->mu);
    qtts_submit_result r = QTTS_SUBMIT_OK;
    if (s->state != QTTS_SCHED_READY) r = QTTS_SUBMIT_NOT_READY;
    else if (s->stopping) r = QTTS_SUBMIT_STOPPED;
    else if (s->qlen >= s->cfg.queue) r = QTTS_SUBMIT_FULL;
    if (r == QTTS_SUBMIT_OK) {
        j->t_submit = qtts_now();
        j->next = NULL;
        if (s->qtail) s->qtail->next = j;
        else s->qhead = j;
        s->qtail = j;
        s->qlen++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

bool qtts_job_check(qtts_job *j, bool *started) {
    uint64_t v;
    ssize_t r = read(j->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&j->mu);
    bool done = j->done;
    if (started) *started = j->started;
    pthread_mutex_unlock(&j->mu);
    return done;
}

static bool unlink_queued(qtts_sched *s, qtts_job *j, bool set_cancel) {
    if (set_cancel) atomic_store(&j->cancel, true);
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (qtts_job **pp = &s->qhead, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        if (*pp != j) continue;
        *pp = j->next;
        if (s->qtail == j) s->qtail = prev;
        s->qlen--;
        found = true;
        break;
    }
    pthread_mutex_unlock(&s->mu);
    if (found) {
        qtts_error e = {.status = QTTS_ERR_CANCELLED};
        snprintf(e.msg, sizeof e.msg, "cancelled while queued");
        job_complete(s, j, QTTS_ERR_CANCELLED, &e, false, false);
    }
    return found;
}

bool qtts_sched_cancel(qtts_sched *s, qtts_job *j) { return unlink_queued(s, j, true); }
bool qtts_sched_dequeue(qtts_sched *s, qtts_job *j) { return unlink_queued(s, j, false); }

void qtts_sched_cancel_all(qtts_sched *s) {
    pthread_mutex_lock(&s->mu);
    qtts_job *q = s->qhead;
    s->qhead = s->qtail = NULL;
    s->qlen = 0;
    s->cancel_all = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    while (q) {
        qtts_job *next = q->next;
        atomic_store(&q->cancel, true);
        qtts_error e = {.status = QTTS_ERR_CANCELLED};
        snprintf(e.msg, sizeof e.msg, "cancelled: the server is shutting down");
        job_complete(s, q, QTTS_ERR_CANCELLED, &e, false, false);
        q = next;
    }
}

void qtts_sched_get_stats(qtts_sched *s, qtts_sched_stats *st) {
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    st->state = s->state;
    st->batch = s->state == QTTS_SCHED_READY ? s->batch : s->cfg.batch;
    st->queue_cap = s->cfg.queue;
    st->waiting = s->qlen;
    st->active = s->n_active;
    st->ttfa_count = s->ttfa_count;
    st->ttfa_sum = s->ttfa_sum;
    memcpy(st->ttfa_buckets, s->ttfa_buckets, sizeof st->ttfa_buckets);
    pthread_mutex_unlock(&s->mu);
    st->steps = peek(&s->steps);
    st->step_rows = peek(&s->step_rows);
    st->frames = peek(&s->frames);
    st->audio_bytes = peek(&s->audio_bytes);
    st->started = peek(&s->started);
    st->completed = peek(&s->completed);
    st->failed = peek(&s->failed);
    st->cancelled = peek(&s->cancelled);
    st->truncated = peek(&s->truncated);
    st->frames_after_cancel = peek(&s->frames_after_cancel);
    st->prompt_rows = peek(&s->prompt_rows);
    st->prompt_rows_reused = peek(&s->prompt_rows_reused);
}

void qtts_sched_free(qtts_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started) pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    qtts_free(s->model_dir);
    qtts_free(s);
}
