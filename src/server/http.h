/*
 * http.h - a strict, non-allocating HTTP/1.1 request-head parser and the
 * few response writers the server needs.
 *
 * The parser works like picohttpparser: it never allocates, never copies
 * and never writes to the input; every string it returns is a view
 * (pointer + length) into the caller's buffer, valid while that buffer is.
 * It is called again from the start whenever more bytes arrived (the head
 * is at most HTTP_MAX_HEAD bytes, so this stays cheap) and answers
 *
 *     > 0            the head is complete; the value is its length in bytes
 *                    (request line + header lines + the empty line);
 *     HTTP_PARTIAL   everything so far is a valid prefix, read more;
 *     HTTP_BAD       the request is refused: *status is the HTTP status to
 *                    answer with and *why a fixed string (never user bytes).
 *
 * What it refuses (each a request-smuggling or DoS vector somewhere):
 *   - a head over HTTP_MAX_HEAD bytes, or over HTTP_MAX_HEADERS header
 *     lines: 431, decided as soon as the buffer is that long, whether or
 *     not a line end has arrived;
 *   - bare LF or bare CR anywhere, NUL or other control bytes, obs-fold
 *     (a header line starting with SP/HTAB), whitespace before the colon,
 *     a header name that is not a token: 400;
 *   - Content-Length that is not 1-15 ASCII digits, or appears twice (even
 *     with equal values): 400; Content-Length together with
 *     Transfer-Encoding: 400; Transfer-Encoding alone: 501 (request bodies
 *     are never chunked here);
 *   - a missing or duplicated Host on HTTP/1.1, a duplicated Content-Type,
 *     Authorization or Expect: 400; an Expect other than 100-continue: 417;
 *   - a request target that is not origin-form ("/..."), a method that is
 *     not a token, a version other than HTTP/1.0 and HTTP/1.1 (505).
 * Up to four empty lines (CRLF) before the request line are skipped, as
 * RFC 9112 section 2.2 asks.
 */
#ifndef QTTS_SERVER_HTTP_H
#define QTTS_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD 16384          /* request line + headers, bytes */
#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_METHOD 16
#define HTTP_MAX_CONTENT_LENGTH 999999999999999LL   /* 15 digits */

#define HTTP_PARTIAL (-2)
#define HTTP_BAD (-1)

/* A non-owning view into the caller's buffer (not NUL-terminated). */
typedef struct {
    const char *p;
    size_t n;
} http_str;

typedef struct {
    http_str name, value;      /* value without leading/trailing SP/HTAB */
} http_header;

typedef struct {
    http_str method;
    http_str target;           /* as sent: path [ "?" query ] */
    http_str path;             /* target up to '?' */
    http_str query;            /* after '?', empty if none */
    int minor_version;         /* HTTP/1.<minor>: 0 or 1 */
    http_header headers[HTTP_MAX_HEADERS];
    int n_headers;

    /* Interpreted headers. */
    int64_t content_length;    /* -1 when absent */
    bool keep_alive;           /* 1.1 default on, 1.0 default off; Connection overrides */
    bool expect_continue;      /* Expect: 100-continue */
    http_str content_type;     /* media type only ("application/json"), parameters dropped */
    http_str authorization;    /* raw value, empty when absent */
} http_request;

int http_parse_request(const char *buf, size_t len, http_request *req, int *status,
                       const char **why);

/* Case-insensitive ASCII comparisons of a view. */
bool http_str_eq(http_str s, const char *lit);          /* exact, case-sensitive */
bool http_str_ieq(http_str s, const char *lit);         /* ASCII case-insensitive */

/* First header of that name (case-insensitive), or NULL. */
const http_header *http_find_header(const http_request *req, const char *name);

/* Reason phrase of a status code ("Unknown" for codes not used here). */
const char *http_reason(int status);

/* Writes a response head into buf (NUL-terminated) and returns its length,
 * or 0 when it does not fit. body_len >= 0 gives Content-Length;
 * HTTP_BODY_CHUNKED sends Transfer-Encoding: chunked; HTTP_BODY_CLOSE sends
 * neither (the body ends when the connection closes; HTTP/1.0 streaming).
 * extra, when not NULL, is inserted verbatim and must be complete
 * "Name: value\r\n" lines. */
#define HTTP_BODY_CHUNKED (-1)
#define HTTP_BODY_CLOSE (-2)
size_t http_write_head(char *buf, size_t cap, int status, const char *content_type,
                       int64_t body_len, bool keep_alive, const char *extra);

/* The line that starts a chunk of n bytes ("<hex>\r\n"); returns its length
 * (at most 18 bytes plus the NUL). n must be > 0: "0\r\n\r\n" ends the body. */
size_t http_chunk_head(char buf[20], size_t n);

#endif
