/*
 * http.c - the strict HTTP/1.1 request-head parser and response writers;
 * see http.h for the contract and the list of refused inputs.
 *
 * The parser is a single forward scan. Each step either consumes bytes it
 * fully understands, stops with HTTP_PARTIAL when the buffer ends inside
 * the step, or stops with HTTP_BAD. Because it never looks past len and
 * never writes, a buffer placed right before an unreadable page can be fed
 * to it (tests/unit/test_http.c does) to catch a one-byte over-read.
 */
#include "server/http.h"

#include <stdio.h>
#include <string.h>

/* ==== character classes (RFC 9110 section 5.6.2) ========================= */

static bool is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

/* field-value bytes: VCHAR, obs-text, SP, HTAB */
static bool is_value_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

/* request-target bytes: visible ASCII only */
static bool is_target_char(unsigned char c) { return c > 0x20 && c < 0x7f; }

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

bool http_str_eq(http_str s, const char *lit) {
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

bool http_str_ieq(http_str s, const char *lit) {
    size_t n = strlen(lit);
    if (s.n != n) return false;
    for (size_t i = 0; i < n; i++)
        if (lower(s.p[i]) != lower(lit[i])) return false;
    return true;
}

const http_header *http_find_header(const http_request *req, const char *name) {
    for (int i = 0; i < req->n_headers; i++)
        if (http_str_ieq(req->headers[i].name, name)) return &req->headers[i];
    return NULL;
}

/* ==== the parser ============================================================ */

#define BAD(code, text)                                                       \
    do {                                                                      \
        *status = (code);                                                     \
        *why = (text);                                                        \
        return HTTP_BAD;                                                      \
    } while (0)

/* Line end at buf[i]: 1 = CRLF found (i advanced past it), 0 = need more
 * bytes, -1 = bare CR or bare LF. */
static int line_end(const char *buf, size_t len, size_t *i) {
    if (buf[*i] == '\n') return -1;
    if (buf[*i] != '\r') return -1;
    if (*i + 1 >= len) return 0;
    if (buf[*i + 1] != '\n') return -1;
    *i += 2;
    return 1;
}

/* Comma-separated token list: does it contain tok (case-insensitive)? */
static bool list_has(http_str v, const char *tok) {
    size_t i = 0;
    while (i < v.n) {
        while (i < v.n && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ',')) i++;
        size_t s = i;
        while (i < v.n && v.p[i] != ',') i++;
        size_t e = i;
        while (e > s && (v.p[e - 1] == ' ' || v.p[e - 1] == '\t')) e--;
        if (e > s && http_str_ieq((http_str){v.p + s, e - s}, tok)) return true;
    }
    return false;
}

/* Interpret the headers that decide framing and routing. */
static int analyze(http_request *r, int *status, const char **why) {
    int n_cl = 0, n_te = 0, n_host = 0, n_ct = 0, n_auth = 0, n_expect = 0;
    r->content_length = -1;
    r->keep_alive = r->minor_version == 1;
    r->expect_continue = false;
    r->content_type = (http_str){"", 0};
    r->authorization = (http_str){"", 0};
    for (int i = 0; i < r->n_headers; i++) {
        http_str name = r->headers[i].name, v = r->headers[i].value;
        if (http_str_ieq(name, "content-length")) {
            if (++n_cl > 1) BAD(400, "duplicate Content-Length");
            if (v.n == 0 || v.n > 15) BAD(400, "malformed Content-Length");
            int64_t x = 0;
            for (size_t k = 0; k < v.n; k++) {
                if (v.p[k] < '0' || v.p[k] > '9') BAD(400, "malformed Content-Length");
                x = x * 10 + (v.p[k] - '0');
            }
            r->content_length = x;
        } else if (http_str_ieq(name, "transfer-encoding")) {
            n_te++;
        } else if (http_str_ieq(name, "host")) {
            if (++n_host > 1) BAD(400, "duplicate Host");
        } else if (http_str_ieq(name, "content-type")) {
            if (++n_ct > 1) BAD(400, "duplicate Content-Type");
            size_t e = 0;
            while (e < v.n && v.p[e] != ';') e++;
            while (e > 0 && (v.p[e - 1] == ' ' || v.p[e - 1] == '\t')) e--;
            r->content_type = (http_str){v.p, e};
        } else if (http_str_ieq(name, "authorization")) {
            if (++n_auth > 1) BAD(400, "duplicate Authorization");
            r->authorization = v;
        } else if (http_str_ieq(name, "expect")) {
            if (++n_expect > 1) BAD(400, "duplicate Expect");
            if (!http_str_ieq(v, "100-continue")) BAD(417, "unsupported Expect");
            r->expect_continue = true;
        } else if (http_str_ieq(name, "connection")) {
            if (list_has(v, "close")) r->keep_alive = false;
            else if (list_has(v, "keep-alive")) r->keep_alive = true;
        }
    }
    if (n_te && n_cl) BAD(400, "both Content-Length and Transfer-Encoding");
    if (n_te) BAD(501, "Transfer-Encoding on a request is not supported");
    if (r->minor_version == 1 && n_host == 0) BAD(400, "missing Host");
    /* A connection that said "close" anywhere stays closed. */
    for (int i = 0; i < r->n_headers; i++)
        if (http_str_ieq(r->headers[i].name, "connection") && list_has(r->headers[i].value, "close"))
            r->keep_alive = false;
    return 0;
}

int http_parse_request(const char *buf, size_t len, http_request *r, int *status,
                       const char **why) {
    *status = 0;
    *why = "";
    r->n_headers = 0;
    /* Past the cap nothing else matters: the answer is 431 whether or not
     * the head would have ended later. */
    size_t lim = len > HTTP_MAX_HEAD ? HTTP_MAX_HEAD : len;
    size_t i = 0;
    int rc;

    /* Empty lines before the request line. */
    for (int k = 0; k < 4 && i < lim && (buf[i] == '\r' || buf[i] == '\n'); k++) {
        if ((rc = line_end(buf, lim, &i)) < 0) BAD(400, "bare CR or LF");
        if (rc == 0) goto partial;
    }

    /* method SP */
    size_t s = i;
    while (i < lim && is_tchar((unsigned char)buf[i])) i++;
    if (i == lim) {
        if (i - s > HTTP_MAX_METHOD) BAD(400, "method too long");
        goto partial;
    }
    if (i == s || buf[i] != ' ') BAD(400, "malformed request line");
    if (i - s > HTTP_MAX_METHOD) BAD(400, "method too long");
    r->method = (http_str){buf + s, i - s};
    i++;

    /* request-target SP */
    s = i;
    while (i < lim && is_target_char((unsigned char)buf[i])) i++;
    if (i == lim) goto partial;
    if (i == s || buf[i] != ' ') BAD(400, "malformed request target");
    if (buf[s] != '/') BAD(400, "request target is not origin-form");
    r->target = (http_str){buf + s, i - s};
    {
        size_t q = 0;
        while (q < r->target.n && r->target.p[q] != '?') q++;
        r->path = (http_str){r->target.p, q};
        r->query = q < r->target.n ? (http_str){r->target.p + q + 1, r->target.n - q - 1}
                                   : (http_str){r->target.p + r->target.n, 0};
    }
    i++;

    /* HTTP-version CRLF */
    static const char ver[] = "HTTP/1.";
    for (size_t k = 0; k < 7; k++, i++) {
        if (i == lim) goto partial;
        if (buf[i] != ver[k]) {
            /* "HTTP/<d>.<d>" with another version is 505, anything else 400 */
            if (k >= 5 && buf[i] >= '0' && buf[i] <= '9') BAD(505, "HTTP version not supported");
            BAD(400, "malformed HTTP version");
        }
    }
    if (i == lim) goto partial;
    if (buf[i] != '0' && buf[i] != '1') {
        if (buf[i] >= '2' && buf[i] <= '9') BAD(505, "HTTP version not supported");
        BAD(400, "malformed HTTP version");
    }
    r->minor_version = buf[i] - '0';
    i++;
    if (i == lim) goto partial;
    if ((rc = line_end(buf, lim, &i)) < 0) BAD(400, "bad request line ending");
    if (rc == 0) goto partial;

    /* header lines, then an empty line */
    for (;;) {
        if (i == lim) goto partial;
        if (buf[i] == '\r' || buf[i] == '\n') {
            if ((rc = line_end(buf, lim, &i)) < 0) BAD(400, "bare CR or LF");
            if (rc == 0) goto partial;
            break;
        }
        if (buf[i] == ' ' || buf[i] == '\t') BAD(400, "obsolete line folding");
        if (r->n_headers == HTTP_MAX_HEADERS) BAD(431, "too many header fields");
        s = i;
        while (i < lim && is_tchar((unsigned char)buf[i])) i++;
        if (i == lim) goto partial;
        if (buf[i] != ':') BAD(400, "malformed header name");
        if (i == s) BAD(400, "empty header name");
        http_header *h = &r->headers[r->n_headers];
        h->name = (http_str){buf + s, i - s};
        i++;
        while (i < lim && (buf[i] == ' ' || buf[i] == '\t')) i++;
        s = i;
        while (i < lim && is_value_char((unsigned char)buf[i])) i++;
        if (i == lim) goto partial;
        size_t e = i;
        while (e > s && (buf[e - 1] == ' ' || buf[e - 1] == '\t')) e--;
        h->value = (http_str){buf + s, e - s};
        if (buf[i] != '\r' && buf[i] != '\n') BAD(400, "control character in a header value");
        if ((rc = line_end(buf, lim, &i)) < 0) BAD(400, "bare CR or LF");
        if (rc == 0) goto partial;
        r->n_headers++;
    }
    if (analyze(r, status, why)) return HTTP_BAD;
    return (int)i;

partial:
    if (len >= HTTP_MAX_HEAD) BAD(431, "request head too large");
    return HTTP_PARTIAL;
}

/* ==== response writers ======================================================= */

const char *http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

size_t http_write_head(char *buf, size_t cap, int status, const char *content_type,
                       int64_t body_len, bool keep_alive, const char *extra) {
    char len_line[64] = "";
    if (body_len >= 0)
        snprintf(len_line, sizeof len_line, "Content-Length: %lld\r\n", (long long)body_len);
    else if (body_len == HTTP_BODY_CHUNKED)
        snprintf(len_line, sizeof len_line, "Transfer-Encoding: chunked\r\n");
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\n"
                     "Server: qwen3-tts\r\n"
                     "%s%s%s"
                     "%s"
                     "Connection: %s\r\n"
                     "%s"
                     "\r\n",
                     status, http_reason(status), content_type ? "Content-Type: " : "",
                     content_type ? content_type : "", content_type ? "\r\n" : "", len_line,
                     keep_alive ? "keep-alive" : "close", extra ? extra : "");
    if (n < 0 || (size_t)n >= cap) return 0;
    return (size_t)n;
}

size_t http_chunk_head(char buf[20], size_t n) {
    int k = snprintf(buf, 20, "%zx\r\n", n);
    return k < 0 ? 0 : (size_t)k;
}
