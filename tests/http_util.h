/*
 * http_util.h - the small blocking HTTP/1.1 client of the in-process server
 * tests (test_server.c, test_server_clone.c): connect to 127.0.0.1, send,
 * read a response (Content-Length or chunked), headers, OpenAI error bodies.
 *
 * The including file defines `static int g_port;` (the server under test)
 * before including this header.
 */
#ifndef QTTS_TEST_HTTP_UTIL_H
#define QTTS_TEST_HTTP_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/json.h"
#include "server/server.h"

typedef struct {
    int status;
    char head[8192];
    uint8_t *body;
    size_t body_len;
    bool complete;       /* the body ended as framed (length reached / last chunk) */
} resp;

static inline void resp_free(resp *r) {
    free(r->body);
    r->body = NULL;
}

static inline int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 120};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static inline void rst_close(int fd) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

static inline bool send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

/* A buffered reader over the socket. */
typedef struct {
    int fd;
    uint8_t buf[65536];
    size_t pos, len;
    bool eof;
} reader;

static inline bool fill(reader *rd) {
    if (rd->pos < rd->len) return true;
    ssize_t r = recv(rd->fd, rd->buf, sizeof rd->buf, 0);
    if (r <= 0) {
        rd->eof = true;
        return false;
    }
    rd->pos = 0;
    rd->len = (size_t)r;
    return true;
}

static inline bool read_line(reader *rd, char *out, size_t cap) {
    size_t n = 0;
    for (;;) {
        if (!fill(rd)) return false;
        char ch = (char)rd->buf[rd->pos++];
        if (n + 1 < cap) out[n++] = ch;
        if (ch == '\n') break;
    }
    out[n] = 0;
    return true;
}

static inline void append(resp *r, const uint8_t *p, size_t n) {
    r->body = realloc(r->body, r->body_len + n + 1);
    memcpy(r->body + r->body_len, p, n);
    r->body_len += n;
    r->body[r->body_len] = 0;
}

static inline bool read_exact(reader *rd, resp *r, size_t n) {
    while (n) {
        if (!fill(rd)) return false;
        size_t k = QTTS_MIN(n, rd->len - rd->pos);
        append(r, rd->buf + rd->pos, k);
        rd->pos += k;
        n -= k;
    }
    return true;
}

static inline const char *hdr(const resp *r, const char *name, char *out, size_t cap) {
    const char *p = r->head;
    size_t nl = strlen(name);
    while ((p = strstr(p, "\r\n"))) {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            p += nl + 1;
            while (*p == ' ') p++;
            size_t k = strcspn(p, "\r\n");
            if (k >= cap) k = cap - 1;
            memcpy(out, p, k);
            out[k] = 0;
            return out;
        }
    }
    return NULL;
}

/* Reads one response (head and body, skipping 100 Continue). */
static inline bool read_resp(reader *rd, resp *r, bool head_request) {
    memset(r, 0, sizeof *r);
    for (;;) {
        size_t hn = 0;
        char line[4096];
        r->head[0] = 0;
        for (;;) {
            if (!read_line(rd, line, sizeof line)) return false;
            size_t l = strlen(line);
            if (hn + l < sizeof r->head) {
                memcpy(r->head + hn, line, l + 1);
                hn += l;
            }
            if (strcmp(line, "\r\n") == 0) break;
        }
        if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1) return false;
        if (r->status != 100) break;
    }
    r->body = calloc(1, 1);
    if (head_request) return true;
    char v[64];
    if (hdr(r, "Content-Length", v, sizeof v)) {
        r->complete = read_exact(rd, r, strtoull(v, NULL, 10));
    } else if (hdr(r, "Transfer-Encoding", v, sizeof v)) {
        for (;;) {
            char line[64];
            if (!read_line(rd, line, sizeof line)) return true;
            size_t n = strtoull(line, NULL, 16);
            if (n == 0) {
                r->complete = read_line(rd, line, sizeof line) && strcmp(line, "\r\n") == 0;
                return true;
            }
            if (!read_exact(rd, r, n) || !read_line(rd, line, sizeof line)) return true;
        }
    } else {
        while (fill(rd)) {
            append(r, rd->buf + rd->pos, rd->len - rd->pos);
            rd->pos = rd->len;
        }
        r->complete = true;
    }
    return true;
}

/* One request on a fresh connection. */
static inline resp http(const char *method, const char *path, const char *ctype, const char *body,
                 const char *extra) {
    resp r;
    memset(&r, 0, sizeof r);
    int fd = connect_to(g_port);
    if (fd < 0) return r;
    char head[2048];
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%s",
                     method, path, ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "",
                     extra ? extra : "");
    if (body) n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n", bl);
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    if (send_all(fd, head, (size_t)n) && (!body || send_all(fd, body, bl))) read_resp(rd, &r, false);
    free(rd);
    close(fd);
    return r;
}

static inline resp post(const char *path, const char *json) { return http("POST", path, "application/json", json, NULL); }

/* Raw bytes on a fresh connection; the first response. */
static inline resp raw(const char *bytes, size_t n) {
    resp r;
    memset(&r, 0, sizeof r);
    int fd = connect_to(g_port);
    if (fd < 0) return r;
    reader *rd = calloc(1, sizeof *rd);
    rd->fd = fd;
    if (send_all(fd, bytes, n)) read_resp(rd, &r, false);
    free(rd);
    close(fd);
    return r;
}

/* The body is an OpenAI error with this code. */
static inline bool is_error(const resp *r, const char *code) {
    if (!r->body) return false;
    qtts_err e;
    qtts_json *doc = qtts_json_parse((const char *)r->body, r->body_len, NULL, "error body", &e);
    if (!doc) return false;
    const qtts_json *err = qtts_json_get(doc, "error");
    bool ok = err && err->type == QTTS_JSON_OBJECT && qtts_json_get_str(err, "message") &&
              qtts_json_get_str(err, "type") && qtts_json_get(err, "param") && qtts_json_get(err, "code");
    if (ok && code) {
        const char *c = qtts_json_get_str(err, "code");
        ok = c && strcmp(c, code) == 0;
    }
    qtts_json_free(doc);
    return ok;
}

/* The data chunk of a 44-byte-header WAV body. */
static inline bool wav_pcm(const resp *r, const uint8_t **pcm, size_t *n) {
    if (r->body_len < 44 || memcmp(r->body, "RIFF", 4) || memcmp(r->body + 8, "WAVEfmt ", 8) ||
        memcmp(r->body + 36, "data", 4))
        return false;
    *pcm = r->body + 44;
    *n = r->body_len - 44;
    return true;
}

/* ==== reference PCM ==================================================================== */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

/* qtts_audio_cb collecting s16le exactly as the server's worker converts
 * (NaN -> 0, clamp, round to nearest), for byte comparisons. */
static inline int ref_sink(void *user, const float *pcm, size_t n) {
    bytes *b = user;
    if (b->n + 2 * n > b->cap) {
        b->cap = (b->n + 2 * n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    for (size_t i = 0; i < n; i++) {
        float x = pcm[i];
        if (!(x == x)) x = 0;
        x = x > 1 ? 1 : x < -1 ? -1 : x;
        uint16_t v = (uint16_t)(int16_t)lrintf(x * 32767.0f);
        b->p[b->n++] = (uint8_t)v;
        b->p[b->n++] = (uint8_t)(v >> 8);
    }
    return 0;
}

/* ==== an in-process server on 127.0.0.1 (port 0: any free one) ==================== */

/* Starts c on model_dir and waits until the model is loaded; sets g_port. */
static inline qtts_server *start_server_on(qtts_server_config *c, const char *model_dir) {
    c->model_dir = model_dir;
    c->host = "127.0.0.1";
    c->port = 0;
    qtts_server *s;
    qtts_error err;
    if (qtts_server_start(c, &s, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return NULL;
    }
    if (!qtts_server_wait_ready(s, 60)) {
        fprintf(stderr, "server did not become ready\n");
        qtts_server_stop(s);
        qtts_server_wait(s, &err);
        qtts_server_free(s);
        return NULL;
    }
    g_port = qtts_server_port(s);
    return s;
}

/* Drains and frees s; true when it exited 0. */
static inline bool stop_server(qtts_server *s) {
    qtts_server_stop(s);
    qtts_error err;
    int code = qtts_server_wait(s, &err);
    if (code < 128) qtts_server_free(s);
    return code == 0;
}

#endif
