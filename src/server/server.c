/*
 * server.c - listener, connections, routes, metrics and shutdown; see
 * server.h.
 *
 * Threads
 *   accept thread   polls the listening socket and a self-pipe (signals,
 *                   stop requests, "model loaded"); owns start-up and drain.
 *   connection      one thread per open connection (at most
 *                   max_connections, small stacks): reads and parses the
 *                   request with total deadlines, validates it, submits a
 *                   job, then relays the job's audio to the socket. It
 *                   never touches a session or the engine.
 *   worker          scheduler.c: owns the engine, steps the batch, never
 *                   touches a socket.
 *
 * A connection waiting for its job polls the job's eventfd and its own
 * socket at once, so an RST (POLLERR/POLLHUP) or a failed write cancels the
 * job immediately: the worker drops it before its next frame. A FIN alone
 * is a legal half-close (the client may still read): the request goes on,
 * and a client that really closed is caught by the next write.
 *
 * Every socket is non-blocking; sends use MSG_NOSIGNAL and SIGPIPE is
 * ignored. Signal handlers only write one byte to the self-pipe.
 *
 * Voice cloning (Base models). A request's voice is either a profile of
 * the --voices directory or reference audio inline. Profiles are read
 * once, by the worker when the model has loaded and before the server
 * answers: every NAME.voice whose NAME passes the name rule and that is a
 * regular file (fstatat AT_SYMLINK_NOFOLLOW on the directory fd opened at
 * start), into a sorted table that requests search by name. No request
 * field is ever used as a path, a profile added later needs a restart,
 * and a missing name and one the rule refuses get the same 404. A profile
 * the engine refused at load (another model's, or corrupt) is a 400 that
 * says why; its name is the operator's, not the client's guess.
 *
 * Inline reference audio becomes a qtts_voice on the connection thread,
 * before the job is submitted, so the batch worker never stalls for the
 * speaker and codec encoders (a second or more of compute for 30 s of
 * audio at full size) and the job reaches the worker as an ordinary
 * profile request. The encoders only read the engine (immutable after
 * open) and allocate their own scratch; what they share with the worker is
 * the process-wide thread pool the codec encoder's matmuls run on, which
 * serves one caller at a time. So the connection thread runs them with
 * qtts_thread_set_serial (its tasks on itself: the worker keeps the whole
 * pool for the batch, and the results are the same bits), and at most
 * CLONE_ENCODERS requests encode at once (more wait, up to the queue
 * timeout) so concurrent clones cannot take every core. The connection
 * owns that voice and frees it once its job is done.
 *
 * Shutdown: the first SIGINT/SIGTERM (or qtts_server_stop) closes the
 * listener, makes /health and new requests answer 503 "draining", wakes
 * idle keep-alive connections so they close, and waits until every
 * accepted request has completed (at most drain_timeout_s, after which the
 * rest are cancelled and the exit code is 1). A second signal aborts.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/json.h"
#include "server/encode.h"
#include "server/http.h"
#include "server/request.h"
#include "server/scheduler.h"

#define SAMPLES_PER_FRAME 1920            /* 24 kHz / 12.5 Hz */
#define CONN_STACK (512 * 1024)   /* the audio encoders run on it too */
#define SSE_PIECE 49152                   /* raw bytes per SSE delta (64 KiB base64) */
#define CLONE_ENCODERS 2                  /* reference audio encoded at once */
#define MAX_VOICES 1024                   /* profiles read from --voices */

enum { PHASE_LOADING, PHASE_READY, PHASE_DRAINING, PHASE_FAILED };

/* Routes, for the per-endpoint request counters. */
enum { EP_SPEECH, EP_TTS, EP_HEALTH, EP_METRICS, EP_MODELS, EP_VOICES, EP_OTHER, EP_N };
static const char *const ep_names[EP_N] = {"/v1/audio/speech", "/v1/tts", "/health", "/metrics",
                                           "/v1/models", "/v1/audio/voices", "other"};
static const int status_codes[] = {200, 400, 401, 404, 405, 408, 411, 413, 415,
                                   417, 431, 500, 501, 503, 505};
#define N_CODES ((int)(sizeof status_codes / sizeof status_codes[0]))

/* One NAME.voice of the --voices directory. */
typedef struct {
    char name[QTTS_VOICE_NAME_MAX + 1];
    qtts_voice *v;              /* NULL: the engine refused it (why) */
    bool foreign;               /* refused as made with another model */
    char why[256];
} voice_entry;

struct qtts_server {
    qtts_server_config cfg;
    char *model_dir, *host, *api_key, *model_name, *voices_dir, *backend;
    const char *quant_talker, *quant_cp, *codec, *kv_cache;   /* the loaded formats; set once
                                                               * before READY */
    int voices_fd;                   /* the --voices directory until it is read; -1 */
    voice_entry *voices;             /* sorted by name; written once before READY */
    int n_voices, n_usable_voices;
    atomic_bool base_model;          /* set once before READY */
    pthread_mutex_t enc_mu;          /* guards enc_busy (inline reference audio encodes) */
    pthread_cond_t enc_cv;
    int enc_busy;
    int listen_fd;
    int port;
    int pipe_rd, pipe_wr;            /* self-pipe: signals, stop, state changes */
    int stop_rd, stop_wr;            /* written once at drain: wakes idle connections */
    pthread_t accept_thread;
    qtts_sched *sched;
    qtts_req_limits limits;
    qtts_model_desc desc;            /* written once before phase becomes READY */
    atomic_int phase;
    int exit_code;
    qtts_error exit_err;

    pthread_mutex_t mu;              /* guards n_conns */
    pthread_cond_t cv;
    int n_conns;

    /* counters */
    atomic_uint_fast64_t req_count[EP_N][N_CODES + 1];
    atomic_uint_fast64_t conns_total, conns_rejected, queue_full, queue_timeouts, disconnects,
        write_timeouts, err_generation_limit, err_numeric, err_oom, err_internal;
};

static void count(atomic_uint_fast64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }
static uint64_t get(atomic_uint_fast64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

static void logf_(qtts_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(qtts_server *s, const char *fmt, ...) {
    if (!s->cfg.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->cfg.log(s->cfg.log_user, line);
}

/* ==== configuration ==================================================================== */

void qtts_server_config_init(qtts_server_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->batch = 4;
    c->queue = 16;
    c->max_connections = 256;
    c->max_body = 1u << 20;
    c->max_clone_body = 16u << 20;
    c->max_input_chars = 4096;
    c->max_instructions_chars = 4096;
    c->max_audio_seconds = 600;
    c->queue_timeout_s = 30;
    c->header_timeout_s = 10;
    c->body_timeout_s = 30;
    c->idle_timeout_s = 5;
    c->write_timeout_s = 10;
    c->drain_timeout_s = 30;
    c->stream_chunk_frames = 12;
    c->model_name = "qwen3-tts";
}

static bool name_ok(const char *n) {
    size_t l = strlen(n);
    if (l == 0 || l >= QTTS_DESC_NAME_LEN) return false;
    for (size_t i = 0; i < l; i++) {
        char ch = n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.'))
            return false;
    }
    return true;
}

/* ==== the self-pipe and signals ========================================================== */

static volatile sig_atomic_t g_sig_fd = -1;

static void on_signal(int sig) {
    int saved = errno;
    if (g_sig_fd >= 0) {
        unsigned char b = (unsigned char)sig;
        ssize_t r = write(g_sig_fd, &b, 1);
        (void)r;
    }
    errno = saved;
}

static void poke(qtts_server *s, unsigned char what) {
    ssize_t r = write(s->pipe_wr, &what, 1);
    (void)r;
}

#define POKE_STOP 'S'
#define POKE_STATE 'R'

void qtts_server_stop(qtts_server *s) { poke(s, POKE_STOP); }

/* ==== model description (worker thread, once) ============================================ */

static void lower_copy(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
    dst[i] = 0;
}

static int voice_cmp(const void *a, const void *b) {
    return strcmp(((const voice_entry *)a)->name, ((const voice_entry *)b)->name);
}

/* Reads the --voices directory into s->voices (worker thread, once, before
 * READY; see the top of the file). */
static void load_voices(qtts_server *s, const qtts_engine *eng) {
    DIR *d = fdopendir(s->voices_fd);   /* takes the descriptor */
    if (!d) {
        logf_(s, "voices: cannot read %s: %s", s->voices_dir, strerror(errno));
        close(s->voices_fd);
        s->voices_fd = -1;
        return;
    }
    int dfd = dirfd(d);
    voice_entry *tab = NULL;
    int n = 0, cap = 0, usable = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *fn = de->d_name;
        size_t l = strlen(fn);
        if (l <= 6 || strcmp(fn + l - 6, ".voice") != 0) continue;
        if (!qtts_voice_name_ok(fn, l - 6)) {
            logf_(s, "voices: skipping '%.80s': names are 1-64 of a-z, 0-9, '_' and '-'", fn);
            continue;
        }
        /* Opened once, without following a link and without blocking on
         * a FIFO; that descriptor is what gets checked and loaded. */
        const int vfd = openat(dfd, fn, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (vfd < 0 || fstat(vfd, &st) != 0 || !S_ISREG(st.st_mode)) {
            logf_(s, "voices: skipping '%s': not a regular file", fn);
            if (vfd >= 0) close(vfd);
            continue;
        }
        if (n == MAX_VOICES) {
            logf_(s, "voices: more than %d profiles; the rest are not loaded", MAX_VOICES);
            close(vfd);
            break;
        }
        if (n == cap) {
            int nc = cap ? 2 * cap : 16;
            voice_entry *t = qtts_realloc(tab, sizeof *t * (size_t)nc);
            if (!t) {
                logf_(s, "voices: out of memory; the rest are not loaded");
                close(vfd);
                break;
            }
            tab = t;
            cap = nc;
        }
        voice_entry *ve = &tab[n++];
        memset(ve, 0, sizeof *ve);
        memcpy(ve->name, fn, l - 6);
        char path[PATH_MAX];
        qtts_error err;
        if (!qtts_path_join(path, sizeof path, s->voices_dir, fn)) {
            snprintf(ve->why, sizeof ve->why, "the profile's path is too long");
        } else if (qtts_voice_load_fd(eng, vfd, path, &ve->v, &err)) {
            const size_t pl = strlen(path);
            /* The engine's message names the file: the client gets the rest. */
            const char *m = err.msg;
            if (strncmp(m, path, pl) == 0 && m[pl] == ':' && m[pl + 1] == ' ') m += pl + 2;
            ve->foreign = err.status == QTTS_ERR_INVALID;
            qtts_echo(ve->why, sizeof ve->why, m, strlen(m), 240);
        }
        close(vfd);
        if (ve->v) usable++;
        else logf_(s, "voices: %s refused: %s", ve->name, ve->why);
    }
    closedir(d);
    s->voices_fd = -1;
    if (n) qsort(tab, (size_t)n, sizeof *tab, voice_cmp);
    s->voices = tab;
    s->n_voices = n;
    s->n_usable_voices = usable;
    logf_(s, "voices: %d profile(s) from %s", usable, s->voices_dir);
}

static const voice_entry *find_voice(const qtts_server *s, const char *name) {
    if (!s->n_voices) return NULL;
    voice_entry key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return bsearch(&key, s->voices, (size_t)s->n_voices, sizeof key, voice_cmp);
}

static void on_sched_state(void *user, qtts_sched *sched) {
    qtts_server *s = user;
    qtts_error e;
    if (qtts_sched_get_state(sched, &e) == QTTS_SCHED_READY) {
        const qtts_engine *eng = qtts_sched_engine(sched);
        qtts_model_info info;
        qtts_engine_info(eng, &info);
        qtts_model_desc *d = &s->desc;
        d->kind = info.kind;
        d->honours_instruct = info.honours_instruct;
        d->n_speakers = QTTS_MIN(info.n_speakers, QTTS_DESC_MAX_NAMES);
        for (int i = 0; i < d->n_speakers; i++)
            lower_copy(d->speakers[i], QTTS_DESC_NAME_LEN, qtts_engine_speaker(eng, i));
        d->n_languages = QTTS_MIN(info.n_languages, QTTS_DESC_MAX_NAMES);
        for (int i = 0; i < d->n_languages; i++)
            lower_copy(d->languages[i], QTTS_DESC_NAME_LEN, qtts_engine_language(eng, i));
        snprintf(d->model_id, sizeof d->model_id, "%s", s->model_name);
        if (info.kind == QTTS_KIND_BASE && s->voices_fd >= 0) {
            d->have_voices = true;
            load_voices(s, eng);
        } else if (s->voices_fd >= 0) {
            logf_(s, "--voices %s is not used: voice profiles are for Base models", s->voices_dir);
        }
        atomic_store(&s->base_model, info.kind == QTTS_KIND_BASE);
        s->quant_talker = info.quant_talker;   /* static strings */
        s->quant_cp = info.quant_cp;
        s->codec = info.codec;
        s->kv_cache = info.kv_cache;
        int expect = PHASE_LOADING;
        atomic_compare_exchange_strong(&s->phase, &expect, PHASE_READY);
    } else {
        int expect = PHASE_LOADING;
        atomic_compare_exchange_strong(&s->phase, &expect, PHASE_FAILED);
    }
    poke(s, POKE_STATE);
}

/* ==== socket I/O with deadlines =========================================================== */

typedef struct {
    qtts_server *srv;
    int fd;
    char buf[HTTP_MAX_HEAD];
    size_t len;                 /* bytes in buf (head of the next request, maybe more) */
    bool peer_fin;              /* read side closed by the client */
    bool broken;                /* RST or a failed/stalled write */
    bool http10;                /* the current request is HTTP/1.0 */
    int n_requests;
} conn;

static int ms_until(double deadline) {
    double d = deadline - qtts_now();
    if (d <= 0) return 0;
    if (d > 3600) return 3600 * 1000;
    return (int)ceil(d * 1000);
}

/* Reads what is available into buf[len..cap). 1: got bytes, 0: deadline,
 * -1: EOF or error, -2: the server is draining (watch_stop only). */
static int read_some(conn *c, char *buf, size_t cap, size_t *len, double deadline, bool watch_stop) {
    for (;;) {
        ssize_t r = recv(c->fd, buf + *len, cap - *len, 0);
        if (r > 0) {
            *len += (size_t)r;
            return 1;
        }
        if (r == 0) {
            c->peer_fin = true;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            c->broken = true;
            return -1;
        }
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->srv->stop_rd, .events = POLLIN}};
        int ms = ms_until(deadline);
        if (ms == 0) return 0;
        int n = poll(p, watch_stop ? 2 : 1, ms);
        if (n < 0 && errno != EINTR) return -1;
        if (watch_stop && (p[1].revents & POLLIN)) return -2;
        if (n == 0 && ms_until(deadline) == 0) return 0;
    }
}

/* Sends all of data; a write that makes no progress for write_timeout_s,
 * EPIPE or ECONNRESET marks the connection broken. */
static bool send_all(conn *c, const void *data, size_t n) {
    if (c->broken) return false;
    const char *p = data;
    double stall = qtts_now() + c->srv->cfg.write_timeout_s;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            stall = qtts_now() + c->srv->cfg.write_timeout_s;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            c->broken = true;
            count(&c->srv->disconnects);
            return false;
        }
        struct pollfd pf = {.fd = c->fd, .events = POLLOUT};
        int ms = ms_until(stall);
        if (ms == 0 || poll(&pf, 1, ms) == 0) {
            if (qtts_now() < stall) continue;
            c->broken = true;
            count(&c->srv->write_timeouts);
            return false;
        }
        if (pf.revents & (POLLERR | POLLHUP) && !(pf.revents & POLLOUT)) {
            c->broken = true;
            count(&c->srv->disconnects);
            return false;
        }
    }
    return true;
}

/* ==== responses ============================================================================ */

static void count_status(qtts_server *s, int ep, int status) {
    int k = N_CODES;
    for (int i = 0; i < N_CODES; i++)
        if (status_codes[i] == status) k = i;
    count(&s->req_count[ep][k]);
}

static bool send_response(conn *c, int ep, int status, const char *ctype, const void *body,
                          size_t len, bool keep_alive, const char *extra) {
    char head[1024];
    size_t hn = http_write_head(head, sizeof head, status, ctype, (int64_t)len, keep_alive, extra);
    count_status(c->srv, ep, status);
    if (!hn) return false;
    if (!send_all(c, head, hn)) return false;
    return len == 0 || send_all(c, body, len);
}

static bool send_error(conn *c, int ep, const qtts_api_error *e, bool keep_alive) {
    char body[4096];
    size_t n = qtts_api_error_json(e, body, sizeof body);
    const char *extra = NULL;
    if (e->status == 503) extra = "Retry-After: 1\r\n";
    else if (e->status == 401) extra = "WWW-Authenticate: Bearer\r\n";
    else if (e->status == 405) extra = "Allow: GET, POST\r\n";
    return send_response(c, ep, e->status, "application/json", body, n, keep_alive, extra);
}

static bool fail(conn *c, int ep, bool keep_alive, int status, const char *type, const char *param,
                 const char *code, const char *msg) {
    qtts_api_error e;
    qtts_api_fail(&e, status, type, param, code, "%s", msg);
    return send_error(c, ep, &e, keep_alive);
}

/* ==== constant-time key check ================================================================ */

static bool auth_ok(qtts_server *s, http_str authz) {
    if (!s->api_key) return true;
    static const char prefix[] = "Bearer ";
    if (authz.n < 7) return false;
    for (int i = 0; i < 7; i++) {
        char ch = authz.p[i];
        if ((ch | (i < 6 ? 0x20 : 0)) != (prefix[i] | (i < 6 ? 0x20 : 0))) return false;
    }
    const unsigned char *a = (const unsigned char *)authz.p + 7;
    size_t an = authz.n - 7, kn = strlen(s->api_key);
    const unsigned char *k = (const unsigned char *)s->api_key;
    /* Touch max(an, kn) bytes whatever they hold; the length is compared in
     * the same accumulator. */
    size_t n = an > kn ? an : kn;
    size_t diff = an ^ kn;
    for (size_t i = 0; i < n; i++) {
        unsigned x = i < an ? a[i] : 0, y = i < kn ? k[i] : 0;
        diff |= x ^ y;
    }
    return diff == 0;
}

/* ==== GET endpoints ======================================================================== */

static const char *phase_name(int p) {
    switch (p) {
    case PHASE_LOADING: return "loading";
    case PHASE_READY: return "ok";
    case PHASE_DRAINING: return "draining";
    default: return "error";
    }
}

static const char *kind_name(qtts_model_kind k) {
    return k == QTTS_KIND_CUSTOM_VOICE ? "custom_voice" : k == QTTS_KIND_VOICE_DESIGN ? "voice_design" : "base";
}

static bool get_health(conn *c, bool keep_alive) {
    qtts_server *s = c->srv;
    int ph = atomic_load(&s->phase);
    qtts_sched_stats st;
    qtts_sched_get_stats(s->sched, &st);
    const bool loaded = ph == PHASE_READY || ph == PHASE_DRAINING;
    char body[2048];
    int n = snprintf(body, sizeof body,
                     "{\"status\":\"%s\",\"model_loaded\":%s,"
                     "\"weights\":{\"talker\":\"%s\",\"code_predictor\":\"%s\",\"codec\":\"%s\","
                     "\"kv_cache\":\"%s\"},"
                     "\"queue\":{\"waiting\":%d,\"active\":%d},"
                     "\"limits\":{\"batch_size\":%d,\"queue_length\":%d,\"max_connections\":%d,"
                     "\"max_body_bytes\":%zu,\"max_clone_body_bytes\":%zu,\"max_input_chars\":%zu,"
                     "\"max_instructions_chars\":%zu,\"max_audio_seconds\":%g,\"max_frames\":%d,"
                     "\"queue_timeout_s\":%g,\"header_timeout_s\":%g,\"body_timeout_s\":%g,"
                     "\"idle_timeout_s\":%g,\"write_timeout_s\":%g,\"drain_timeout_s\":%g,"
                     "\"stream_chunk_frames\":%d}}",
                     phase_name(ph), ph == PHASE_READY || ph == PHASE_DRAINING ? "true" : "false",
                     loaded ? s->quant_talker : "none", loaded ? s->quant_cp : "none",
                     loaded ? s->codec : "none", loaded ? s->kv_cache : "none", st.waiting, st.active, st.batch, st.queue_cap,
                     s->cfg.max_connections, s->cfg.max_body,
                     QTTS_MAX(s->cfg.max_body, s->cfg.max_clone_body), s->limits.max_input_chars,
                     s->limits.max_instructions_chars, s->cfg.max_audio_seconds,
                     s->limits.max_frames, s->cfg.queue_timeout_s, s->cfg.header_timeout_s,
                     s->cfg.body_timeout_s, s->cfg.idle_timeout_s, s->cfg.write_timeout_s,
                     s->cfg.drain_timeout_s, s->cfg.stream_chunk_frames);
    int status = ph == PHASE_READY ? 200 : 503;
    return send_response(c, EP_HEALTH, status, "application/json", body,
                         (size_t)QTTS_MIN(n, (int)sizeof body - 1), keep_alive,
                         status == 503 ? "Retry-After: 1\r\n" : NULL);
}

/* Appends to a bounded text buffer. */
typedef struct {
    char *p;
    size_t n, cap;
} tbuf;

static void tb(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb(tbuf *b, const char *fmt, ...) {
    if (b->n >= b->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n = QTTS_MIN(b->n + (size_t)k, b->cap - 1);
}

static bool get_metrics(conn *c, bool keep_alive) {
    qtts_server *s = c->srv;
    qtts_sched_stats st;
    qtts_sched_get_stats(s->sched, &st);
    char *mem = qtts_malloc(32768);
    if (!mem) return fail(c, EP_METRICS, false, 503, "server_error", NULL, "out_of_memory", "out of memory");
    tbuf b = {mem, 0, 32768};
    tb(&b, "# HELP qtts_requests_total HTTP requests answered, by endpoint and status.\n"
           "# TYPE qtts_requests_total counter\n");
    for (int e = 0; e < EP_N; e++) {
        const char *name = ep_names[e];
        for (int k = 0; k <= N_CODES; k++) {
            uint64_t v = get(&s->req_count[e][k]);
            if (!v) continue;
            if (k < N_CODES)
                tb(&b, "qtts_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n", name,
                   status_codes[k], (unsigned long long)v);
            else
                tb(&b, "qtts_requests_total{endpoint=\"%s\",code=\"other\"} %llu\n", name,
                   (unsigned long long)v);
        }
    }
    int ph = atomic_load(&s->phase);
    pthread_mutex_lock(&s->mu);
    int n_conns = s->n_conns;
    pthread_mutex_unlock(&s->mu);
#define G(name, help, type, fmt, val) tb(&b, "# HELP " name " " help "\n# TYPE " name " " type "\n" name " " fmt "\n", val)
    G("qtts_ready", "1 when the model is loaded and the server accepts requests.", "gauge", "%d", ph == PHASE_READY);
    G("qtts_draining", "1 while shutting down.", "gauge", "%d", ph == PHASE_DRAINING);
    G("qtts_queue_waiting", "Requests waiting for a batch slot.", "gauge", "%d", st.waiting);
    G("qtts_queue_capacity", "Queue length limit.", "gauge", "%d", st.queue_cap);
    G("qtts_batch_active", "Requests in the batch now.", "gauge", "%d", st.active);
    G("qtts_batch_size", "Batch slots.", "gauge", "%d", st.batch);
    G("qtts_batch_steps_total", "Batched decode steps (one frame for every active request).", "counter", "%llu", (unsigned long long)st.steps);
    G("qtts_batch_step_rows_total", "Sum of batch occupancy over steps (divide by steps for the mean).", "counter", "%llu", (unsigned long long)st.step_rows);
    G("qtts_frames_total", "Codec frames generated (12.5 per second of audio).", "counter", "%llu", (unsigned long long)st.frames);
    G("qtts_audio_seconds_total", "Seconds of audio produced.", "counter", "%.3f", (double)st.audio_bytes / 2.0 / QTTS_SAMPLE_RATE);
    G("qtts_jobs_started_total", "Requests admitted to the batch.", "counter", "%llu", (unsigned long long)st.started);
    G("qtts_jobs_completed_total", "Requests that finished generating.", "counter", "%llu", (unsigned long long)st.completed);
    G("qtts_jobs_failed_total", "Requests that failed in the engine.", "counter", "%llu", (unsigned long long)st.failed);
    G("qtts_cancelled_total", "Requests cancelled (client gone, stalled, queue timeout, shutdown).", "counter", "%llu", (unsigned long long)st.cancelled);
    G("qtts_frames_after_cancel_total", "Frames computed after a cancel was requested.", "counter", "%llu", (unsigned long long)st.frames_after_cancel);
    G("qtts_prompt_rows_total", "Prompt rows (talker positions) of finished requests.", "counter", "%llu", (unsigned long long)st.prompt_rows);
    G("qtts_prompt_rows_reused_total", "Of them, rows a session kept from its previous request instead of computing.", "counter", "%llu", (unsigned long long)st.prompt_rows_reused);
    G("qtts_truncated_total", "Requests that reached their frame budget without EOS.", "counter", "%llu", (unsigned long long)st.truncated);
    G("qtts_rejected_queue_full_total", "Requests refused with 503 because the queue was full.", "counter", "%llu", (unsigned long long)get(&s->queue_full));
    G("qtts_queue_timeouts_total", "Requests refused with 503 after waiting queue_timeout.", "counter", "%llu", (unsigned long long)get(&s->queue_timeouts));
    G("qtts_client_disconnects_total", "Connections lost while a response was pending.", "counter", "%llu", (unsigned long long)get(&s->disconnects));
    G("qtts_write_timeouts_total", "Responses abandoned because the client stopped reading.", "counter", "%llu", (unsigned long long)get(&s->write_timeouts));
    G("qtts_connections_open", "Open client connections.", "gauge", "%d", n_conns);
    G("qtts_connections_total", "Accepted connections.", "counter", "%llu", (unsigned long long)get(&s->conns_total));
    G("qtts_connections_rejected_total", "Connections refused at accept (over max_connections, or out of memory or threads).", "counter", "%llu", (unsigned long long)get(&s->conns_rejected));
#undef G
    tb(&b, "# HELP qtts_errors_total Failed requests by error type.\n# TYPE qtts_errors_total counter\n");
    tb(&b, "qtts_errors_total{type=\"generation_limit\"} %llu\n", (unsigned long long)get(&s->err_generation_limit));
    tb(&b, "qtts_errors_total{type=\"numerical_error\"} %llu\n", (unsigned long long)get(&s->err_numeric));
    tb(&b, "qtts_errors_total{type=\"out_of_memory\"} %llu\n", (unsigned long long)get(&s->err_oom));
    tb(&b, "qtts_errors_total{type=\"internal\"} %llu\n", (unsigned long long)get(&s->err_internal));
    tb(&b, "# HELP qtts_time_to_first_audio_seconds Time from submit to the first audio samples.\n"
           "# TYPE qtts_time_to_first_audio_seconds histogram\n");
    for (int i = 0; i < QTTS_TTFA_N_BOUNDS; i++)
        tb(&b, "qtts_time_to_first_audio_seconds_bucket{le=\"%g\"} %llu\n", qtts_ttfa_bounds[i],
           (unsigned long long)st.ttfa_buckets[i]);
    tb(&b, "qtts_time_to_first_audio_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)st.ttfa_count);
    tb(&b, "qtts_time_to_first_audio_seconds_sum %.6f\n", st.ttfa_sum);
    tb(&b, "qtts_time_to_first_audio_seconds_count %llu\n", (unsigned long long)st.ttfa_count);
    bool ok = send_response(c, EP_METRICS, 200, "text/plain; version=0.0.4", b.p, b.n, keep_alive, NULL);
    qtts_free(mem);
    return ok;
}

static bool not_ready(conn *c, int ep, bool keep_alive) {
    int ph = atomic_load(&c->srv->phase);
    if (ph == PHASE_READY) return false;
    const char *code = ph == PHASE_LOADING ? "model_loading" : ph == PHASE_DRAINING ? "draining" : "model_failed";
    const char *msg = ph == PHASE_LOADING    ? "the model is still loading; retry shortly"
                      : ph == PHASE_DRAINING ? "the server is shutting down"
                                             : "the model failed to load";
    fail(c, ep, keep_alive, 503, "server_error", NULL, code, msg);
    return true;
}

static bool get_models(conn *c, bool keep_alive) {
    qtts_server *s = c->srv;
    char body[2048];
    tbuf b = {body, 0, sizeof body};
    int ph = atomic_load(&s->phase);
    bool ready = ph == PHASE_READY || ph == PHASE_DRAINING;
    tb(&b, "{\"object\":\"list\",\"data\":[");
    tb(&b, "{\"id\":\"%s\",\"object\":\"model\",\"created\":0,\"owned_by\":\"qwen3-tts\"", s->model_name);
    if (ready) tb(&b, ",\"kind\":\"%s\"", kind_name(s->desc.kind));
    tb(&b, "}");
    for (int i = 0; qtts_model_aliases[i]; i++)
        tb(&b, ",{\"id\":\"%s\",\"object\":\"model\",\"created\":0,\"owned_by\":\"qwen3-tts\"}",
           qtts_model_aliases[i]);
    tb(&b, "]}");
    return send_response(c, EP_MODELS, 200, "application/json", body, b.n, keep_alive, NULL);
}

static bool get_voices(conn *c, bool keep_alive) {
    qtts_server *s = c->srv;
    if (not_ready(c, EP_VOICES, keep_alive)) return keep_alive;
    /* Profiles: a name, a mode and a language name (ours, or the file's,
     * valid UTF-8 of < 64 bytes, escaped) each. */
    size_t cap = 8192 + (size_t)s->n_voices * 512;
    char *body = qtts_malloc(cap);
    if (!body) return fail(c, EP_VOICES, false, 503, "server_error", NULL, "out_of_memory", "out of memory");
    tbuf b = {body, 0, cap};
    const qtts_model_desc *d = &s->desc;
    tb(&b, "{\"object\":\"list\",\"model_kind\":\"%s\",\"data\":[", kind_name(d->kind));
    if (d->kind == QTTS_KIND_VOICE_DESIGN)
        tb(&b, "{\"id\":\"default\",\"object\":\"voice\",\"type\":\"designed\"}");
    for (int i = 0; i < d->n_speakers; i++)
        tb(&b, "%s{\"id\":\"%s\",\"object\":\"voice\",\"type\":\"preset\"}", i ? "," : "", d->speakers[i]);
    bool first = true;
    for (int i = 0; d->kind == QTTS_KIND_BASE && i < s->n_voices; i++) {
        const voice_entry *ve = &s->voices[i];
        if (!ve->v) continue;
        qtts_voice_info vi;
        qtts_voice_get_info(ve->v, &vi);
        char lang[6 * 64 + 8] = "null";
        if (vi.language) qtts_json_escape(lang, sizeof lang, vi.language, strlen(vi.language));
        tb(&b, "%s{\"id\":\"%s\",\"object\":\"voice\",\"type\":\"profile\",\"mode\":\"%s\","
               "\"language\":%s}",
           first ? "" : ",", ve->name, vi.in_context ? "in_context" : "x_vector", lang);
        first = false;
    }
    tb(&b, "],\"languages\":[\"auto\"");
    for (int i = 0; i < d->n_languages; i++) tb(&b, ",\"%s\"", d->languages[i]);
    tb(&b, "],\"instructions\":%s", d->kind == QTTS_KIND_VOICE_DESIGN || d->honours_instruct ? "true" : "false");
    if (d->kind == QTTS_KIND_BASE)
        tb(&b, ",\"cloning\":{\"ref_audio\":true,\"voice_profiles\":%s}", d->have_voices ? "true" : "false");
    tb(&b, "}");
    bool ok = send_response(c, EP_VOICES, 200, "application/json", body, b.n, keep_alive, NULL);
    qtts_free(body);
    return ok;
}

/* ==== synthesis responses ===================================================================== */

static const char b64tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t base64(char *out, const uint8_t *in, size_t n) {
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64tab[v >> 18];
        out[o++] = b64tab[(v >> 12) & 63];
        out[o++] = b64tab[(v >> 6) & 63];
        out[o++] = b64tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = b64tab[v >> 18];
        out[o++] = b64tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    return o;
}

/* The body of one streamed piece: a chunk (chunked) or raw bytes. */
static bool send_piece(conn *c, bool chunked, const void *p, size_t n) {
    if (n == 0) return true;
    if (chunked) {
        char h[20];
        size_t hn = http_chunk_head(h, n);
        if (!send_all(c, h, hn)) return false;
    }
    if (!send_all(c, p, n)) return false;
    return !chunked || send_all(c, "\r\n", 2);
}

typedef struct {
    conn *c;
    qtts_speech *sp;
    qtts_job *job;
    int ep;
    bool keep_alive;
    bool chunked;
    bool head_sent;
    char sse_buf[SSE_PIECE / 3 * 4 + 128];
} relay;

static bool sse_event(relay *r, const char *text, size_t n) { return send_piece(r->c, r->chunked, text, n); }

static bool stream_bytes(relay *r, const uint8_t *p, size_t n) {
    if (r->sp->stream != QTTS_STREAM_SSE) return send_piece(r->c, r->chunked, p, n);
    while (n > 0) {
        size_t k = QTTS_MIN(n, (size_t)SSE_PIECE);
        size_t o = (size_t)snprintf(r->sse_buf, sizeof r->sse_buf,
                                    "data: {\"type\":\"speech.audio.delta\",\"audio\":\"");
        o += base64(r->sse_buf + o, p, k);
        memcpy(r->sse_buf + o, "\"}\n\n", 4);
        o += 4;
        if (!sse_event(r, r->sse_buf, o)) return false;
        p += k;
        n -= k;
    }
    return true;
}

static bool stream_head(relay *r) {
    if (r->head_sent) return true;
    r->head_sent = true;
    conn *c = r->c;
    const char *ctype = r->sp->stream == QTTS_STREAM_SSE ? "text/event-stream" : qtts_format_mime(r->sp->format);
    char head[512];
    const char *extra = r->sp->stream == QTTS_STREAM_SSE ? "Cache-Control: no-cache\r\n" : NULL;
    size_t hn = http_write_head(head, sizeof head, 200, ctype,
                                r->chunked ? HTTP_BODY_CHUNKED : HTTP_BODY_CLOSE, r->keep_alive, extra);
    count_status(c->srv, r->ep, 200);
    if (!send_all(c, head, hn)) return false;
    if (r->sp->format == QTTS_FMT_WAV) {
        uint8_t h[44];
        qtts_wav_header_s16(h, SIZE_MAX);
        return stream_bytes(r, h, 44);
    }
    return true;
}

/* Maps a finished job to an API error; false when it succeeded. */
static bool job_error(qtts_server *s, const qtts_job *j, const qtts_speech *sp, qtts_api_error *e) {
    if (j->status == QTTS_OK) {
        if (j->truncated && sp->limit_is_error) {
            count(&s->err_generation_limit);
            qtts_api_fail(e, 500, "server_error", NULL, "generation_limit",
                          "generation reached the frame budget (%d frames) without ending; "
                          "retrying may help",
                          sp->max_frames);
            return true;
        }
        return false;
    }
    char msg[256];
    qtts_echo(msg, sizeof msg, j->err.msg, strlen(j->err.msg), 200);
    switch (j->status) {
    case QTTS_ERR_INVALID:
    case QTTS_ERR_LIMIT:
        qtts_api_fail(e, 400, "invalid_request_error", NULL, "invalid_value", "%s", msg);
        break;
    case QTTS_ERR_UNSUPPORTED:
        qtts_api_fail(e, 400, "invalid_request_error", NULL, "unsupported", "%s", msg);
        break;
    case QTTS_ERR_NOMEM:
        count(&s->err_oom);
        qtts_api_fail(e, 503, "server_error", NULL, "out_of_memory", "%s", msg);
        break;
    case QTTS_ERR_NUMERIC:
        count(&s->err_numeric);
        qtts_api_fail(e, 500, "server_error", NULL, "numerical_error", "%s", msg);
        break;
    case QTTS_ERR_CANCELLED:
        qtts_api_fail(e, 503, "server_error", NULL, "cancelled", "%s", msg);
        break;
    default:
        count(&s->err_internal);
        qtts_api_fail(e, 500, "server_error", NULL, "internal_error", "%s", msg);
        break;
    }
    return true;
}

/* Waits for the job and relays its audio. Returns whether the connection
 * may serve another request. The job is done on return. */
static bool relay_job(conn *c, qtts_speech *sp, qtts_job *j, int ep, bool keep_alive) {
    qtts_server *s = c->srv;
    relay *r = qtts_calloc(1, sizeof *r);
    if (!r) {
        qtts_sched_cancel(s->sched, j);
        while (!qtts_job_check(j, NULL)) poll(&(struct pollfd){.fd = j->efd, .events = POLLIN}, 1, 1000);
        fail(c, ep, false, 503, "server_error", NULL, "out_of_memory", "out of memory");
        return false;
    }
    r->c = c;
    r->sp = sp;
    r->job = j;
    r->ep = ep;
    r->keep_alive = keep_alive;
    bool streaming = sp->stream != QTTS_STREAM_NONE;
    bool encoded = sp->format != QTTS_FMT_WAV && sp->format != QTTS_FMT_PCM;
    r->chunked = streaming && !c->http10;   /* HTTP/1.0 streams end with the connection */
    uint8_t *tmp = NULL, *acc = NULL;
    size_t tmp_len = 0, tmp_cap = 0, acc_len = 0, acc_cap = 0;
    double queue_deadline = j->t_submit + s->cfg.queue_timeout_s;
    bool timed_out = false, cancelled = false;

    for (;;) {
        bool started;
        bool done = qtts_job_check(j, &started);
        if (streaming && !encoded && !cancelled) {
            /* relay what is there */
            qtts_job_take(j, &tmp, &tmp_len, &tmp_cap);
            if (tmp_len > 0 && (!stream_head(r) || !stream_bytes(r, tmp, tmp_len))) {
                qtts_sched_cancel(s->sched, j);
                cancelled = true;
            }
            tmp_len = 0;
        }
        if (done) break;
        if (!started && !cancelled && qtts_now() >= queue_deadline) {
            if (qtts_sched_dequeue(s->sched, j)) {
                timed_out = true;
                break;
            }
        }
        struct pollfd p[2] = {{.fd = j->efd, .events = POLLIN},
                              {.fd = c->fd, .events = (short)(c->peer_fin ? 0 : POLLRDHUP)}};
        int ms = started ? 1000 : QTTS_MAX(ms_until(queue_deadline), 1);
        int n = poll(p, cancelled || c->broken ? 1 : 2, ms);
        if (n < 0 && errno != EINTR) break;
        if (!cancelled && !c->broken && (p[1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
            c->broken = true;
            count(&s->disconnects);
        }
        if (!cancelled && !c->broken && (p[1].revents & POLLRDHUP)) c->peer_fin = true;
        if (c->broken && !cancelled) {
            qtts_sched_cancel(s->sched, j);
            cancelled = true;
        }
    }
    bool ok = !c->broken;
    qtts_api_error e;
    if (timed_out) {
        count(&s->queue_timeouts);
        qtts_api_fail(&e, 503, "server_error", NULL, "queue_timeout",
                      "no batch slot became free within the queue timeout; retry later");
        ok = send_error(c, ep, &e, keep_alive) && keep_alive;
        goto out;
    }
    if (c->broken) {
        ok = false;
        goto out;
    }
    /* The job is done: take the rest. */
    qtts_job_take(j, &acc, &acc_len, &acc_cap);
    bool failed = job_error(s, j, sp, &e);
    if (r->head_sent) {
        /* Mid-stream: send what remains, then end the stream; a failure
         * ends an SSE stream with an error event and a raw stream without
         * its terminating chunk (the client sees a truncated body). */
        if (!failed && !stream_bytes(r, acc, acc_len)) {
            ok = false;
            goto out;
        }
        if (sp->stream == QTTS_STREAM_SSE) {
            char ev[2048];
            size_t n;
            if (failed) {
                memcpy(ev, "event: error\ndata: ", 19);
                n = 19 + qtts_api_error_json(&e, ev + 19, sizeof ev - 24);
                memcpy(ev + n, "\n\n", 2);
                n += 2;
            } else {
                int fr;
                pthread_mutex_lock(&j->mu);
                fr = j->frames;
                pthread_mutex_unlock(&j->mu);
                n = (size_t)snprintf(ev, sizeof ev,
                                     "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":%zu,"
                                     "\"output_tokens\":%d,\"total_tokens\":%zu}}\n\n",
                                     sp->input_chars, fr, sp->input_chars + (size_t)fr);
            }
            if (!sse_event(r, ev, n)) {
                ok = false;
                goto out;
            }
        } else if (failed) {
            ok = false;
            goto out;
        }
        if (r->chunked) ok = send_all(c, "0\r\n\r\n", 5) && keep_alive;
        else ok = false;
        goto out;
    }
    if (failed) {
        ok = send_error(c, ep, &e, keep_alive) && keep_alive;
        goto out;
    }
    /* Whole body at once (non-streaming, or nothing was streamed yet). */
    {
        size_t n_samples = acc_len / 2;
        uint8_t *enc = NULL;
        size_t enc_len = 0;
        if (encoded) {
            qtts_error ee;
            qtts_status est = qtts_encode_audio(sp->format, acc, n_samples, &enc, &enc_len, &ee);
            if (est) {
                count(&s->err_internal);
                qtts_api_fail(&e, est == QTTS_ERR_NOMEM ? 503 : 500, "server_error", NULL,
                              "encoder_error", "encoding the audio failed");
                ok = send_error(c, ep, &e, keep_alive) && keep_alive;
                goto out;
            }
        }
        if (streaming) {
            /* encoded formats stream as one piece once complete */
            if (!stream_head(r)) {
                free(enc);
                ok = false;
                goto out;
            }
            ok = encoded ? stream_bytes(r, enc, enc_len) : stream_bytes(r, acc, acc_len);
            free(enc);
            if (!ok) goto out;
            if (sp->stream == QTTS_STREAM_SSE) {
                char ev[256];
                int fr = j->frames;
                size_t n = (size_t)snprintf(ev, sizeof ev,
                                            "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":%zu,"
                                            "\"output_tokens\":%d,\"total_tokens\":%zu}}\n\n",
                                            sp->input_chars, fr, sp->input_chars + (size_t)fr);
                if (!sse_event(r, ev, n)) {
                    ok = false;
                    goto out;
                }
            }
            ok = r->chunked ? send_all(c, "0\r\n\r\n", 5) && keep_alive : false;
            goto out;
        }
        char extra[128];
        snprintf(extra, sizeof extra, "X-Audio-Frames: %d\r\n", j->frames);
        char head[512];
        uint8_t wav[44];
        size_t body_len = encoded ? enc_len : acc_len + (sp->format == QTTS_FMT_WAV ? 44 : 0);
        size_t hn = http_write_head(head, sizeof head, 200, qtts_format_mime(sp->format),
                                    (int64_t)body_len, keep_alive, extra);
        count_status(s, ep, 200);
        ok = send_all(c, head, hn);
        if (ok && encoded) ok = send_all(c, enc, enc_len);
        if (ok && !encoded && sp->format == QTTS_FMT_WAV) {
            qtts_wav_header_s16(wav, n_samples);
            ok = send_all(c, wav, 44);
        }
        if (ok && !encoded && acc_len) ok = send_all(c, acc, acc_len);
        free(enc);
        ok = ok && keep_alive;
    }
out:
    qtts_free(tmp);
    qtts_free(acc);
    qtts_free(r);
    return ok;
}

/* ==== one request ================================================================================ */

static bool read_body(conn *c, char *body, size_t need, size_t have, double deadline, int ep) {
    size_t got = have;
    while (got < need) {
        int r = read_some(c, body, need, &got, deadline, false);
        if (r == 0) {
            fail(c, ep, false, 408, "invalid_request_error", NULL, "timeout", "the request body did not arrive in time");
            return false;
        }
        if (r < 0) return false;
    }
    return true;
}

/* Waits for one of the CLONE_ENCODERS encoding slots, up to the queue
 * timeout. */
static bool enc_acquire(qtts_server *s) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    double t = (double)until.tv_sec + until.tv_nsec * 1e-9 + s->cfg.queue_timeout_s;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_nsec = 999999999L;
    pthread_mutex_lock(&s->enc_mu);
    int rc = 0;
    while (s->enc_busy >= CLONE_ENCODERS && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->enc_cv, &s->enc_mu, &until);
    bool ok = s->enc_busy < CLONE_ENCODERS;
    if (ok) s->enc_busy++;
    pthread_mutex_unlock(&s->enc_mu);
    return ok;
}

static void enc_release(qtts_server *s) {
    pthread_mutex_lock(&s->enc_mu);
    s->enc_busy--;
    pthread_cond_signal(&s->enc_cv);
    pthread_mutex_unlock(&s->enc_mu);
}

/* An in-context clone sent whole keeps the reference's own trim, which
 * needs the final length: its audio is decoded at finish. Streamed, the
 * engine cuts exactly the reference frames' samples instead (at most the
 * one-shot result's first sample less; qtts_request.stream_chunk_frames). */
static void clone_decode_mode(qtts_speech *sp) {
    qtts_voice_info vi;
    qtts_voice_get_info(sp->req.voice, &vi);
    if (vi.in_context && !sp->req.x_vector_only && sp->stream == QTTS_STREAM_NONE)
        sp->req.stream_chunk_frames = 0;
}

/* Sets sp->req.voice from the profile sp names, or to a voice encoded
 * from sp's reference audio (*own, which the caller frees once the job is
 * done), and how its audio is decoded (clone_decode_mode). false + e on
 * refusal. */
static bool resolve_voice(qtts_server *s, qtts_speech *sp, qtts_voice **own, qtts_api_error *e) {
    *own = NULL;
    if (sp->voice_name[0]) {
        const voice_entry *ve = find_voice(s, sp->voice_name);
        if (!ve) return qtts_voice_not_found(e, sp->voice_param);
        if (!ve->v) {
            char why[256];
            qtts_echo(why, sizeof why, ve->why, strlen(ve->why), 200);
            return qtts_api_fail(e, 400, "invalid_request_error", sp->voice_param,
                                 ve->foreign ? "voice_profile_incompatible" : "voice_profile_unusable",
                                 "voice profile '%s' cannot be used with this model: %s",
                                 ve->name, why);
        }
        sp->req.voice = ve->v;
        clone_decode_mode(sp);
        return true;
    }
    if (!enc_acquire(s)) {
        count(&s->queue_timeouts);
        return qtts_api_fail(e, 503, "server_error", NULL, "queue_timeout",
                             "too many reference recordings are being encoded; retry later");
    }
    qtts_error err;
    qtts_thread_set_serial(true);
    qtts_status st = qtts_voice_create(qtts_sched_engine(s->sched), sp->ref_audio, sp->ref_audio_len,
                                       sp->ref_text, sp->req.x_vector_only, NULL, own, &err);
    qtts_thread_set_serial(false);
    enc_release(s);
    qtts_speech_drop_audio(sp);
    if (st == QTTS_OK) {
        sp->req.voice = *own;
        clone_decode_mode(sp);
        return true;
    }
    char msg[400];
    qtts_echo(msg, sizeof msg, err.msg, strlen(err.msg), 380);
    if (st == QTTS_ERR_NOMEM) {
        count(&s->err_oom);
        return qtts_api_fail(e, 503, "server_error", NULL, "out_of_memory", "%s", msg);
    }
    /* The audio reader's messages name the rule that failed. */
    return qtts_api_fail(e, 400, "invalid_request_error", "ref_audio",
                         st == QTTS_ERR_UNSUPPORTED ? "unsupported_audio" : "invalid_audio",
                         "'ref_audio': %s", msg);
}

static bool post_speech(conn *c, const http_request *hr, size_t head_len, int ep) {
    qtts_server *s = c->srv;
    bool keep_alive = hr->keep_alive;
    int64_t cl = hr->content_length;
    const char *type = "invalid_request_error";
    if (cl < 0) {
        fail(c, ep, false, 411, type, NULL, "length_required",
             "a request body with Content-Length is required");
        return false;
    }
    /* A Base model's /v1/tts body may carry base64 reference audio. While
     * the model loads the kind is unknown: the larger limit lets such a
     * request reach the 503 below rather than a misleading 413. */
    size_t limit = s->cfg.max_body;
    if (ep == EP_TTS && (atomic_load(&s->base_model) || atomic_load(&s->phase) == PHASE_LOADING))
        limit = QTTS_MAX(limit, s->cfg.max_clone_body);
    if ((uint64_t)cl > limit) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is over the limit of %zu bytes", limit);
        fail(c, ep, false, 413, type, NULL, "body_too_large", msg);
        return false;
    }
    if (!http_str_ieq(hr->content_type, "application/json")) {
        fail(c, ep, false, 415, type, NULL, "unsupported_media_type",
             "Content-Type must be application/json");
        return false;
    }
    /* A refusal before the body is read closes the connection (the body
     * would otherwise be taken for the next request). */
    if (not_ready(c, ep, false)) return false;
    if (hr->expect_continue && !send_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25)) return false;

    size_t need = (size_t)cl;
    char *body = qtts_malloc(need + 1);
    if (!body) {
        fail(c, ep, false, 503, "server_error", NULL, "out_of_memory", "out of memory");
        return false;
    }
    size_t extra = c->len - head_len;
    size_t have = QTTS_MIN(extra, need);
    memcpy(body, c->buf + head_len, have);
    /* keep pipelined bytes after the body for the next request */
    memmove(c->buf, c->buf + head_len + have, extra - have);
    c->len = extra - have;
    if (!read_body(c, body, need, have, qtts_now() + s->cfg.body_timeout_s, ep)) {
        qtts_free(body);
        return false;
    }
    body[need] = 0;

    qtts_speech sp;
    qtts_api_error e;
    bool ok = ep == EP_SPEECH ? qtts_parse_openai_speech(body, need, &s->desc, &s->limits, &sp, &e)
                              : qtts_parse_native_tts(body, need, &s->desc, &s->limits, &sp, &e);
    qtts_free(body);
    if (!ok) return send_error(c, ep, &e, keep_alive) && keep_alive;
    if (sp.stream != QTTS_STREAM_NONE && hr->minor_version == 0) keep_alive = false;
    /* The voice: a profile of the table, or one encoded from the inline
     * reference audio that this connection owns until its job is done. */
    qtts_voice *own_voice = NULL;
    if (sp.voice_name[0] || sp.ref_audio) {
        if (!resolve_voice(s, &sp, &own_voice, &e)) {
            qtts_speech_free(&sp);
            return send_error(c, ep, &e, keep_alive) && keep_alive;
        }
    }

    qtts_job *j = qtts_malloc(sizeof *j);
    if (!j || !qtts_job_init(j)) {
        qtts_free(j);
        qtts_voice_free(own_voice);
        qtts_speech_free(&sp);
        fail(c, ep, false, 503, "server_error", NULL, "out_of_resources",
             "cannot create a request (out of memory or descriptors)");
        return false;
    }
    j->req = sp.req;
    j->limit_is_error = sp.limit_is_error;
    /* 16-bit samples of the frame budget, 1/speed as many after a tempo
     * change (one frame of slack for its rounding) */
    const double stretch = sp.req.speed > 0 ? 1.0 / sp.req.speed : 1.0;
    j->out_max = (size_t)ceil(((double)sp.max_frames + 3) * SAMPLES_PER_FRAME * stretch) * 2;
    qtts_submit_result sr = qtts_sched_submit(s->sched, j);
    if (sr != QTTS_SUBMIT_OK) {
        qtts_job_destroy(j);
        qtts_free(j);
        qtts_voice_free(own_voice);
        qtts_speech_free(&sp);
        if (sr == QTTS_SUBMIT_FULL) {
            count(&s->queue_full);
            return fail(c, ep, keep_alive, 503, "server_error", NULL, "queue_full",
                        "the request queue is full; retry later") && keep_alive;
        }
        if (!not_ready(c, ep, keep_alive))
            fail(c, ep, keep_alive, 503, "server_error", NULL, "draining", "the server is shutting down");
        return keep_alive;
    }
    double t0 = qtts_now();
    c->http10 = hr->minor_version == 0;
    bool more = relay_job(c, &sp, j, ep, keep_alive);
    int frames = j->frames;
    qtts_job_destroy(j);
    qtts_free(j);
    qtts_voice_free(own_voice);   /* the job is done: the worker no longer reads it */
    logf_(s, "%s %d frames %.2f s%s", ep == EP_SPEECH ? "/v1/audio/speech" : "/v1/tts", frames,
          qtts_now() - t0, c->broken ? " (client gone)" : "");
    qtts_speech_free(&sp);
    return more;
}

/* Serves one request on c. Returns whether to keep the connection. */
static bool serve_one(conn *c) {
    qtts_server *s = c->srv;
    /* Wait for the first byte: keep-alive idle time, or the header deadline
     * on a fresh connection. Idle connections close when draining. */
    if (c->len == 0) {
        double idle = qtts_now() + (c->n_requests ? s->cfg.idle_timeout_s : s->cfg.header_timeout_s);
        int r = read_some(c, c->buf, sizeof c->buf, &c->len, idle, true);
        if (r <= 0) return false;
    }
    double deadline = qtts_now() + s->cfg.header_timeout_s;
    http_request hr;
    int status = 0;
    const char *why = "";
    int n;
    size_t scanned = 0;
    for (;;) {
        /* Only a new line end (or the cap) can change the answer. */
        bool newline = memchr(c->buf + scanned, '\n', c->len - scanned) != NULL;
        if (newline || c->len >= sizeof c->buf) {
            n = http_parse_request(c->buf, c->len, &hr, &status, &why);
            if (n != HTTP_PARTIAL) break;
        }
        scanned = c->len;
        int r = read_some(c, c->buf, sizeof c->buf, &c->len, deadline, false);
        if (r == 0) {
            fail(c, EP_OTHER, false, 408, "invalid_request_error", NULL, "timeout",
                 "the request head did not arrive in time");
            return false;
        }
        if (r < 0) return false;
    }
    if (n == HTTP_BAD) {
        fail(c, EP_OTHER, false, status, "invalid_request_error", NULL, "bad_request", why);
        return false;
    }
    c->n_requests++;
    bool keep_alive = hr.keep_alive && atomic_load(&s->phase) != PHASE_DRAINING;
    /* A GET body is never read: such a connection closes after the answer. */
    bool body_pending = hr.content_length > 0;
    bool get = http_str_eq(hr.method, "GET");
    bool post = http_str_eq(hr.method, "POST");
    int ep = EP_OTHER;
    bool need_auth = true;
    if (http_str_eq(hr.path, "/health")) ep = EP_HEALTH, need_auth = false;
    else if (http_str_eq(hr.path, "/metrics")) ep = EP_METRICS;
    else if (http_str_eq(hr.path, "/v1/models")) ep = EP_MODELS;
    else if (http_str_eq(hr.path, "/v1/audio/voices")) ep = EP_VOICES;
    else if (http_str_eq(hr.path, "/v1/audio/speech")) ep = EP_SPEECH;
    else if (http_str_eq(hr.path, "/v1/tts")) ep = EP_TTS;
    if (ep == EP_OTHER) {
        fail(c, ep, keep_alive && !body_pending, 404, "invalid_request_error", NULL, "not_found", "no such endpoint");
        goto consumed;
    }
    bool is_post_ep = ep == EP_SPEECH || ep == EP_TTS;
    if ((is_post_ep && !post) || (!is_post_ep && !get)) {
        fail(c, ep, keep_alive && !body_pending, 405, "invalid_request_error", NULL, "method_not_allowed",
             is_post_ep ? "this endpoint takes POST" : "this endpoint takes GET");
        goto consumed;
    }
    if (need_auth && !auth_ok(s, hr.authorization)) {
        fail(c, ep, keep_alive && !body_pending, 401, "authentication_error", NULL, "invalid_api_key",
             "missing or invalid API key (Authorization: Bearer ...)");
        goto consumed;
    }
    if (is_post_ep) {
        hr.keep_alive = keep_alive;
        return post_speech(c, &hr, (size_t)n, ep);
    }
    keep_alive = keep_alive && !body_pending;
    switch (ep) {
    case EP_HEALTH: get_health(c, keep_alive); break;
    case EP_METRICS: get_metrics(c, keep_alive); break;
    case EP_MODELS: get_models(c, keep_alive); break;
    case EP_VOICES: get_voices(c, keep_alive); break;
    }
    if (!keep_alive || c->broken) return false;
    memmove(c->buf, c->buf + n, c->len - (size_t)n);
    c->len -= (size_t)n;
    return true;
consumed:
    if (!keep_alive || body_pending || c->broken) return false;
    memmove(c->buf, c->buf + n, c->len - (size_t)n);
    c->len -= (size_t)n;
    return true;
}

static void *conn_main(void *arg) {
    conn *c = arg;
    qtts_server *s = c->srv;
    while (!c->broken && serve_one(c)) {
    }
    /* Let the client see our FIN before the socket goes (no RST for bytes
     * it sent that we did not read). */
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    qtts_free(c);
    pthread_mutex_lock(&s->mu);
    s->n_conns--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ==== accept loop and drain =========================================================================== */

/* A connection refused at accept: over the cap (full), or its thread or
 * state could not be created (out of memory or threads). */
static void reject_conn(qtts_server *s, int fd, bool full) {
    static const char body_full[] =
        "{\"error\":{\"message\":\"too many open connections; retry later\",\"type\":\"server_error\","
        "\"param\":null,\"code\":\"too_many_connections\"}}";
    static const char body_res[] =
        "{\"error\":{\"message\":\"cannot take a connection now (out of memory or threads); retry "
        "later\",\"type\":\"server_error\",\"param\":null,\"code\":\"out_of_resources\"}}";
    const char *body = full ? body_full : body_res;
    const size_t body_len = full ? sizeof body_full - 1 : sizeof body_res - 1;
    char head[256];
    size_t hn = http_write_head(head, sizeof head, 503, "application/json", (int64_t)body_len, false,
                                "Retry-After: 1\r\n");
    ssize_t w = send(fd, head, hn, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == (ssize_t)hn) w = send(fd, body, body_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    /* Closing with the client's request unread would send an RST, which
     * can reach the client before it has read the 503: read what it sent
     * (a bounded 20 ms, so excess connections cannot stall the accept
     * loop), then close. */
    shutdown(fd, SHUT_WR);
    char sink[4096];
    const double until = qtts_now() + 0.02;
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
        if (r > 0) continue;
        const int ms = (int)((until - qtts_now()) * 1000);
        if (ms <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) break;
    }
    close(fd);
    count(&s->conns_rejected);
    count_status(s, EP_OTHER, 503);
}

static void accept_ready(qtts_server *s) {
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors or memory: the listener stays readable, so
             * back off instead of spinning (signals wait in the pipe). */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                usleep(50000);
            return;
        }
        pthread_mutex_lock(&s->mu);
        bool full = s->n_conns >= s->cfg.max_connections;
        if (!full) s->n_conns++;
        pthread_mutex_unlock(&s->mu);
        if (full) {
            reject_conn(s, fd, true);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = qtts_calloc(1, sizeof *c);
        pthread_attr_t at;
        pthread_t th;
        bool started = false;
        if (c && pthread_attr_init(&at) == 0) {
            c->srv = s;
            c->fd = fd;
            pthread_attr_setstacksize(&at, CONN_STACK);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            started = pthread_create(&th, &at, conn_main, c) == 0;
            pthread_attr_destroy(&at);
        }
        if (!started) {
            qtts_free(c);
            pthread_mutex_lock(&s->mu);
            s->n_conns--;
            pthread_mutex_unlock(&s->mu);
            reject_conn(s, fd, false);
            continue;
        }
        count(&s->conns_total);
    }
}

static void log_stats(qtts_server *s) {
    qtts_sched_stats st;
    qtts_sched_get_stats(s->sched, &st);
    pthread_mutex_lock(&s->mu);
    int nc = s->n_conns;
    pthread_mutex_unlock(&s->mu);
    logf_(s, "stats: %s, %d connections, queue %d/%d, batch %d/%d, %llu completed, %llu failed, "
             "%llu cancelled, %llu frames",
          phase_name(atomic_load(&s->phase)), nc, st.waiting, st.queue_cap, st.active, st.batch,
          (unsigned long long)st.completed, (unsigned long long)st.failed,
          (unsigned long long)st.cancelled, (unsigned long long)st.frames);
}

static void *accept_main(void *arg) {
    qtts_server *s = arg;
    bool draining = false, cancelled_all = false;
    double drain_deadline = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->pipe_rd, .events = POLLIN}, {.fd = s->listen_fd, .events = POLLIN}};
        int np = s->listen_fd >= 0 ? 2 : 1;
        int ms = draining ? 50 : -1;
        int n = poll(p, (nfds_t)np, ms);
        if (n < 0 && errno != EINTR) break;
        if (p[0].revents & POLLIN) {
            unsigned char b[64];
            ssize_t k = read(s->pipe_rd, b, sizeof b);
            for (ssize_t i = 0; i < k; i++) {
                int what = b[i];
                if (what == POKE_STATE) {
                    int ph = atomic_load(&s->phase);
                    if (ph == PHASE_READY) logf_(s, "model loaded; ready on port %d", s->port);
                    if (ph == PHASE_FAILED) {
                        qtts_sched_get_state(s->sched, &s->exit_err);
                        s->exit_code = 1;
                        logf_(s, "model failed to load: %s", s->exit_err.msg);
                        if (!draining) {
                            draining = true;
                            drain_deadline = qtts_now() + s->cfg.drain_timeout_s;
                        }
                    }
                } else if (what == SIGUSR1) {
                    log_stats(s);
                } else if (what == POKE_STOP || what == SIGINT || what == SIGTERM) {
                    if (draining) {
                        s->exit_code = 128 + (what == POKE_STOP ? SIGINT : what);
                        logf_(s, "second stop request: aborting");
                        return NULL;
                    }
                    draining = true;
                    drain_deadline = qtts_now() + s->cfg.drain_timeout_s;
                    logf_(s, "draining: finishing accepted requests (up to %g s)", s->cfg.drain_timeout_s);
                }
            }
        }
        if (draining && s->listen_fd >= 0) {
            close(s->listen_fd);
            s->listen_fd = -1;
            int ph = atomic_load(&s->phase);
            if (ph != PHASE_FAILED) atomic_store(&s->phase, PHASE_DRAINING);
            unsigned char x = 1;
            ssize_t w = write(s->stop_wr, &x, 1);
            (void)w;
            continue;
        }
        if (!draining && np == 2 && (p[1].revents & POLLIN)) accept_ready(s);
        if (draining) {
            pthread_mutex_lock(&s->mu);
            int nc = s->n_conns;
            pthread_mutex_unlock(&s->mu);
            if (nc == 0) break;
            if (!cancelled_all && qtts_now() > drain_deadline) {
                logf_(s, "drain timeout: cancelling %d remaining connection(s)", nc);
                qtts_sched_cancel_all(s->sched);
                cancelled_all = true;
                s->exit_code = 1;
                qtts_fail(&s->exit_err, QTTS_ERR_LIMIT, "drain timeout: requests were cancelled");
            }
        }
    }
    return NULL;
}

/* ==== start / wait / free ============================================================================== */

static qtts_status open_listener(qtts_server *s, qtts_error *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int rc = getaddrinfo(s->host, port, &hints, &ai);
    if (rc) return qtts_fail(err, QTTS_ERR_INVALID, "--host %s: not a numeric address (%s)", s->host, gai_strerror(rc));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return qtts_fail(err, QTTS_ERR_IO, "socket: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        int e = errno;
        freeaddrinfo(ai);
        close(fd);
        return qtts_fail(err, QTTS_ERR_IO, "cannot bind %s port %d: %s", s->host, s->cfg.port, strerror(e));
    }
    freeaddrinfo(ai);
    if (listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return qtts_fail(err, QTTS_ERR_IO, "listen: %s", strerror(e));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    return QTTS_OK;
}

static void server_release(qtts_server *s) {
    if (s->listen_fd >= 0) close(s->listen_fd);
    int fds[] = {s->pipe_rd, s->pipe_wr, s->stop_rd, s->stop_wr};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(fds); i++)
        if (fds[i] >= 0) close(fds[i]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->enc_cv);
    pthread_mutex_destroy(&s->enc_mu);
    if (s->voices_fd >= 0) close(s->voices_fd);
    for (int i = 0; i < s->n_voices; i++) qtts_voice_free(s->voices[i].v);
    qtts_free(s->voices);
    qtts_free(s->voices_dir);
    qtts_free(s->model_dir);
    qtts_free(s->host);
    qtts_free(s->api_key);
    qtts_free(s->model_name);
    qtts_free(s->backend);
    qtts_free(s);
}

qtts_status qtts_server_start(const qtts_server_config *cfg, qtts_server **out, qtts_error *err) {
    *out = NULL;
    const qtts_server_config *c = cfg;
    if (!c->model_dir || !*c->model_dir) return qtts_fail(err, QTTS_ERR_INVALID, "no model directory given");
    if (c->port < 0 || c->port > 65535) return qtts_fail(err, QTTS_ERR_INVALID, "port must be in [0, 65535]");
    if (c->batch < 1 || c->batch > 64) return qtts_fail(err, QTTS_ERR_INVALID, "batch must be in [1, 64]");
    if (c->queue < 0 || c->queue > 4096) return qtts_fail(err, QTTS_ERR_INVALID, "queue must be in [0, 4096]");
    if (c->max_connections < 1 || c->max_connections > 65536)
        return qtts_fail(err, QTTS_ERR_INVALID, "max connections must be in [1, 65536]");
    if (c->max_body < 64 || c->max_body > (64u << 20))
        return qtts_fail(err, QTTS_ERR_INVALID, "max body must be in [64 B, 64 MiB]");
    if (c->max_clone_body < 64 || c->max_clone_body > (64u << 20))
        return qtts_fail(err, QTTS_ERR_INVALID, "max clone body must be in [64 B, 64 MiB]");
    if (c->voices_dir && (!*c->voices_dir || strlen(c->voices_dir) > 3000))
        return qtts_fail(err, QTTS_ERR_INVALID, "the voices directory name must be 1-3000 bytes");
    if (c->max_input_chars < 1 || c->max_input_chars > 65536 || c->max_instructions_chars > 65536)
        return qtts_fail(err, QTTS_ERR_INVALID, "text limits must be in [1, 65536] characters");
    if (!(c->max_audio_seconds >= 1 && c->max_audio_seconds <= 7200))
        return qtts_fail(err, QTTS_ERR_INVALID, "max audio seconds must be in [1, 7200]");
    if (c->stream_chunk_frames < 0 || c->stream_chunk_frames > 300)
        return qtts_fail(err, QTTS_ERR_INVALID, "stream chunk frames must be in [0, 300]");
    double tmo[] = {c->queue_timeout_s, c->header_timeout_s, c->body_timeout_s, c->idle_timeout_s,
                    c->write_timeout_s, c->drain_timeout_s};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(tmo); i++)
        if (!(tmo[i] > 0 && tmo[i] <= 3600)) return qtts_fail(err, QTTS_ERR_INVALID, "timeouts must be in (0, 3600] s");
    const char *mn = c->model_name ? c->model_name : "qwen3-tts";
    if (!name_ok(mn)) return qtts_fail(err, QTTS_ERR_INVALID, "model name must be 1-47 of [A-Za-z0-9._-]");
    /* The weight format is one of a fixed set: the worker gets our static
     * copy, so the caller's string need not outlive the call. */
    static const char *const quants[] = {"none", "int8", "int4"};
    const char *quant = NULL;
    for (size_t i = 0; c->quant && i < QTTS_ARRAY_LEN(quants); i++)
        if (!strcmp(c->quant, quants[i])) quant = quants[i];
    if (c->quant && !quant)
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown weight format '%.32s' (none, int8, int4)", c->quant);
    static const char *const codecs[] = {"fp32", "bf16"};
    const char *codec = NULL;
    for (size_t i = 0; c->codec && i < QTTS_ARRAY_LEN(codecs); i++)
        if (!strcmp(c->codec, codecs[i])) codec = codecs[i];
    if (c->codec && !codec)
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown codec format '%.32s' (fp32, bf16)", c->codec);
    static const char *const kvs[] = {"f32", "bf16"};
    const char *kv = NULL;
    for (size_t i = 0; c->kv_cache && i < QTTS_ARRAY_LEN(kvs); i++)
        if (!strcmp(c->kv_cache, kvs[i])) kv = kvs[i];
    if (c->kv_cache && !kv)
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown KV cache format '%.32s' (f32, bf16)",
                         c->kv_cache);
    if (c->backend && (!*c->backend || strlen(c->backend) > 32))
        return qtts_fail(err, QTTS_ERR_INVALID, "the backend name must be 1-32 bytes");
    if (c->api_key && (!*c->api_key || strlen(c->api_key) > 4096))
        return qtts_fail(err, QTTS_ERR_INVALID, "the API key must be 1-4096 bytes");

    signal(SIGPIPE, SIG_IGN);
    qtts_server *s = qtts_calloc(1, sizeof *s);
    if (!s) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    s->cfg = *c;
    s->listen_fd = s->pipe_rd = s->pipe_wr = s->stop_rd = s->stop_wr = s->voices_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->enc_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->enc_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->base_model, false);
    atomic_init(&s->phase, PHASE_LOADING);
    s->model_dir = qtts_strdup(c->model_dir);
    s->host = qtts_strdup(c->host ? c->host : "127.0.0.1");
    s->model_name = qtts_strdup(mn);
    s->api_key = c->api_key ? qtts_strdup(c->api_key) : NULL;
    s->voices_dir = c->voices_dir ? qtts_strdup(c->voices_dir) : NULL;
    s->backend = c->backend ? qtts_strdup(c->backend) : NULL;
    qtts_status st;
    if (!s->model_dir || !s->host || !s->model_name || (c->api_key && !s->api_key) ||
        (c->voices_dir && !s->voices_dir) || (c->backend && !s->backend)) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    s->cfg.voices_dir = s->voices_dir;
    /* Opened now so that a wrong --voices fails at start; read once the
     * model is loaded (profiles need it). */
    if (s->voices_dir &&
        (s->voices_fd = open(s->voices_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        st = qtts_fail(err, QTTS_ERR_IO, "--voices %.3000s: cannot open the directory: %s",
                       s->voices_dir, strerror(errno));
        goto fail;
    }
    s->cfg.model_dir = s->model_dir;
    s->cfg.host = s->host;
    s->cfg.model_name = s->model_name;
    s->cfg.api_key = s->api_key;
    int pf[2], sf[2];
    if (pipe2(pf, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(sf, O_CLOEXEC | O_NONBLOCK) != 0) {
        st = qtts_fail(err, QTTS_ERR_IO, "pipe: %s", strerror(errno));
        goto fail;
    }
    s->pipe_rd = pf[0], s->pipe_wr = pf[1], s->stop_rd = sf[0], s->stop_wr = sf[1];

    int max_frames = (int)floor(c->max_audio_seconds * 12.5);
    s->limits.max_frames = max_frames;
    /* The text limit follows from the frame budget: at most a quarter of a
     * frame's worth... i.e. 4 frames (0.32 s) of speech per character is a
     * generous ceiling, so longer texts are refused at the door rather than
     * cut off at the end of their budget. */
    s->limits.max_input_chars = QTTS_MIN(c->max_input_chars, (size_t)QTTS_MAX(max_frames / 4, 1));
    s->limits.max_instructions_chars = c->max_instructions_chars;
    s->limits.have_encoders = qtts_encoders_available();
    s->limits.stream_chunk_frames = c->stream_chunk_frames;

    if ((st = open_listener(s, err))) goto fail;
    qtts_sched_config sc = {.model_dir = s->model_dir, .n_threads = c->threads, .batch = c->batch,
                            .queue = c->queue, .backend = s->backend, .quant = quant, .codec = codec,
                            .kv_cache = kv,
                            .check_weights = c->check_weights, .on_state = on_sched_state, .user = s,
                            .max_frames = s->limits.max_frames,
                            .stream_chunk_frames = s->limits.stream_chunk_frames};
    if ((st = qtts_sched_new(&sc, &s->sched, err))) goto fail;
    if (c->install_signal_handlers) {
        g_sig_fd = s->pipe_wr;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
        signal(SIGHUP, SIG_IGN);
    }
    int rc = pthread_create(&s->accept_thread, NULL, accept_main, s);
    if (rc) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "cannot start the accept thread: %s", strerror(rc));
        qtts_sched_free(s->sched);
        goto fail;
    }
    logf_(s, "listening on %s port %d (batch %d, queue %d); loading %s", s->host, s->port, c->batch,
          c->queue, s->model_dir);
    *out = s;
    return QTTS_OK;
fail:
    server_release(s);
    return st;
}

int qtts_server_port(const qtts_server *s) { return s->port; }

bool qtts_server_wait_ready(qtts_server *s, double timeout_s) {
    double end = qtts_now() + timeout_s;
    while (qtts_now() < end) {
        int ph = atomic_load(&s->phase);
        if (ph == PHASE_READY) return true;
        if (ph != PHASE_LOADING) return false;
        usleep(10000);
    }
    return false;
}

int qtts_server_wait(qtts_server *s, qtts_error *err) {
    pthread_join(s->accept_thread, NULL);
    if (s->exit_code >= 128) return s->exit_code;
    qtts_sched_free(s->sched);
    s->sched = NULL;
    if (s->exit_code && err) *err = s->exit_err;
    if (g_sig_fd == s->pipe_wr) g_sig_fd = -1;
    return s->exit_code;
}

void qtts_server_free(qtts_server *s) {
    if (!s) return;
    if (g_sig_fd == s->pipe_wr) g_sig_fd = -1;
    server_release(s);
}
