/*
 * test_http.c - the strict HTTP/1.1 request-head parser (src/server/http.c).
 *
 * Every input is also fed to the parser in every prefix length, from a
 * buffer that ends right before a PROT_NONE page (picohttpparser's trick),
 * so a one-byte over-read faults and a prefix of a valid head is never
 * refused (nor a prefix of a bad one accepted).
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "server/http.h"

/* ==== guard page ============================================================ */

static char *guard_base;
static size_t guard_page;

static void guard_init(void) {
    guard_page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = 8 * guard_page;   /* 7 readable pages (> HTTP_MAX_HEAD + slack), then a guard */
    guard_base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard_base == MAP_FAILED) {
        fprintf(stderr, "mmap failed\n");
        exit(1);
    }
    mprotect(guard_base + 7 * guard_page, guard_page, PROT_NONE);
}

/* Copies s so that its last byte is the last readable byte. */
static const char *at_guard(const char *s, size_t n) {
    char *p = guard_base + 7 * guard_page - n;
    memcpy(p, s, n);
    return p;
}

typedef struct {
    int rc, status;
    const char *why;
    http_request req;
} parsed;

static parsed parse_n(const char *s, size_t n) {
    parsed p;
    memset(&p, 0, sizeof p);
    p.rc = http_parse_request(at_guard(s, n), n, &p.req, &p.status, &p.why);
    return p;
}

static parsed parse(const char *s) { return parse_n(s, strlen(s)); }

/* A complete valid head: every shorter prefix is PARTIAL. */
static void check_prefixes_partial(const char *s, size_t head_len) {
    for (size_t n = 0; n < head_len; n++) {
        parsed p = parse_n(s, n);
        CHECK(p.rc == HTTP_PARTIAL, "prefix %zu of %zu: rc %d (%s)", n, head_len, p.rc, p.why);
    }
}

/* A bad head: no prefix is accepted, and the whole is refused with status. */
static void expect_bad(const char *s, int status) {
    size_t n = strlen(s);
    for (size_t k = 0; k < n; k++) {
        parsed p = parse_n(s, k);
        CHECK(p.rc <= 0, "prefix %zu accepted", k);
    }
    parsed p = parse_n(s, n);
    CHECK(p.rc == HTTP_BAD && p.status == status, "'%.60s': rc %d status %d (%s), want %d", s, p.rc,
          p.status, p.why, status);
}

/* ==== tests ================================================================== */

static void test_simple_get(void) {
    const char *s = "GET /health?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\n\r\n";
    parsed p = parse(s);
    REQUIRE(p.rc == (int)strlen(s), "rc %d (%s)", p.rc, p.why);
    CHECK(http_str_eq(p.req.method, "GET"), "method");
    CHECK(http_str_eq(p.req.path, "/health"), "path");
    CHECK(http_str_eq(p.req.query, "x=1"), "query");
    CHECK(http_str_eq(p.req.target, "/health?x=1"), "target");
    CHECK(p.req.minor_version == 1, "version");
    CHECK(p.req.n_headers == 2, "headers %d", p.req.n_headers);
    CHECK(http_str_eq(p.req.headers[1].value, "t"), "value");
    CHECK(p.req.keep_alive, "1.1 keeps alive by default");
    CHECK(p.req.content_length == -1, "no content length");
    const http_header *h = http_find_header(&p.req, "user-agent");
    CHECK(h && http_str_eq(h->value, "t"), "find header case-insensitively");
    check_prefixes_partial(s, strlen(s));
}

static void test_post_with_body_after_head(void) {
    const char *s = "POST /v1/audio/speech HTTP/1.1\r\nHost: a\r\nContent-Type: Application/JSON; charset=utf-8\r\n"
                    "Content-Length: 7\r\nAuthorization: Bearer k\r\nExpect: 100-continue\r\n\r\n{\"a\":1}";
    parsed p = parse(s);
    size_t head = strlen(s) - 7;
    REQUIRE(p.rc == (int)head, "rc %d (%s)", p.rc, p.why);
    CHECK(p.req.content_length == 7, "cl");
    CHECK(http_str_ieq(p.req.content_type, "application/json"), "media type without parameters");
    CHECK(http_str_eq(p.req.authorization, "Bearer k"), "authorization");
    CHECK(p.req.expect_continue, "expect");
    check_prefixes_partial(s, head);
}

static void test_value_whitespace_trimmed(void) {
    parsed p = parse("GET / HTTP/1.1\r\nHost:\t  a b  \t\r\nX-Empty:\r\n\r\n");
    REQUIRE(p.rc > 0, "rc %d (%s)", p.rc, p.why);
    CHECK(http_str_eq(p.req.headers[0].value, "a b"), "trimmed value '%.*s'", (int)p.req.headers[0].value.n,
          p.req.headers[0].value.p);
    CHECK(p.req.headers[1].value.n == 0, "empty value");
}

static void test_http10_and_connection(void) {
    parsed p = parse("GET / HTTP/1.0\r\n\r\n");
    REQUIRE(p.rc > 0, "1.0 without Host: rc %d (%s)", p.rc, p.why);
    CHECK(!p.req.keep_alive && p.req.minor_version == 0, "1.0 closes by default");
    p = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    CHECK(p.rc > 0 && p.req.keep_alive, "1.0 keep-alive");
    p = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, close\r\n\r\n");
    CHECK(p.rc > 0 && !p.req.keep_alive, "close in a list");
    p = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n");
    CHECK(p.rc > 0 && !p.req.keep_alive, "close anywhere wins");
}

static void test_leading_empty_lines(void) {
    parsed p = parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(p.rc > 0, "two leading CRLFs skipped: %d (%s)", p.rc, p.why);
    expect_bad("\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
}

static void test_smuggling_framing(void) {
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", 501);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n", 400);
    expect_bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400);
}

static void test_content_length_syntax(void) {
    static const char *bad[] = {"-2", "+5", "0x10", "1e3", "5 5", "", "12a", "1.0",
                                "9999999999999999" /* 16 digits */, "18446744073709551615"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char s[256];
        snprintf(s, sizeof s, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %s\r\n\r\n", bad[i]);
        expect_bad(s, 400);
    }
    parsed p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 000123\r\n\r\n");
    CHECK(p.rc > 0 && p.req.content_length == 123, "leading zeros are digits");
    p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999\r\n\r\n");
    CHECK(p.rc > 0 && p.req.content_length == HTTP_MAX_CONTENT_LENGTH, "15 digits");
}

static void test_bare_cr_lf(void) {
    expect_bad("GET / HTTP/1.1\nHost: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\n\n", 400);
    expect_bad("GET / HTTP/1.1\rHost: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\n\rX", 400);
    expect_bad("GET / HTTP/1.1\n\n", 400);
}

static void test_obs_fold_and_names(void) {
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\n: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost a\r\n\r\n", 400);
}

static void test_control_bytes(void) {
    static const char s1[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
    parsed p = parse_n(s1, sizeof s1 - 1);
    CHECK(p.rc == HTTP_BAD && p.status == 400, "NUL in a value");
    static const char s2[] = "GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n";
    p = parse_n(s2, sizeof s2 - 1);
    CHECK(p.rc == HTTP_BAD && p.status == 400, "NUL in the target");
    expect_bad("GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", 400);
    expect_bad("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET /a\x80 HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    /* obs-text in a value is allowed (it is the application's to judge) */
    p = parse("GET / HTTP/1.1\r\nHost: a\r\nX-U: \xc3\xa9\r\n\r\n");
    CHECK(p.rc > 0, "obs-text value");
}

static void test_request_line(void) {
    expect_bad("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400);
    expect_bad(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET / HTTX/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
    expect_bad("GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505);
    expect_bad("GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400);
    expect_bad("GET / http/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("GETGETGETGETGETGETGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_bad("G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400);
}

static void test_host_rules(void) {
    expect_bad("GET / HTTP/1.1\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nContent-Type: a/b\r\nContent-Type: a/b\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: x\r\nAuthorization: y\r\n\r\n", 400);
    expect_bad("GET / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", 417);
}

static void test_header_caps(void) {
    /* exactly 64 header lines are fine, 65 are 431 */
    char s[8192];
    size_t n = (size_t)snprintf(s, sizeof s, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < HTTP_MAX_HEADERS; i++) n += (size_t)snprintf(s + n, sizeof s - n, "X-%d: v\r\n", i);
    memcpy(s + n, "\r\n", 3);
    parsed p = parse(s);
    CHECK(p.rc > 0 && p.req.n_headers == HTTP_MAX_HEADERS, "64 headers: rc %d", p.rc);
    n += (size_t)snprintf(s + n, sizeof s - n, "X-last: v\r\n\r\n");
    p = parse(s);
    CHECK(p.rc == HTTP_BAD && p.status == 431, "65 headers: rc %d status %d", p.rc, p.status);

    /* a head of HTTP_MAX_HEAD bytes without an end: 431 at once, no newline needed */
    static char big[HTTP_MAX_HEAD + 16];
    memcpy(big, "GET /", 5);
    memset(big + 5, 'a', sizeof big - 5);
    p = parse_n(big, HTTP_MAX_HEAD);
    CHECK(p.rc == HTTP_BAD && p.status == 431, "long line: rc %d status %d", p.rc, p.status);
    p = parse_n(big, HTTP_MAX_HEAD - 1);
    CHECK(p.rc == HTTP_PARTIAL, "one byte under the cap is still partial");
    /* a long header value */
    n = (size_t)snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    memset(big + n, 'v', sizeof big - n);
    p = parse_n(big, sizeof big);
    CHECK(p.rc == HTTP_BAD && p.status == 431, "long value: rc %d status %d", p.rc, p.status);
    /* a complete head that fits within the cap, followed by body bytes past the cap */
    n = (size_t)snprintf(big, sizeof big, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999\r\n\r\n");
    memset(big + n, '{', sizeof big - n);
    p = parse_n(big, sizeof big);
    CHECK(p.rc == (int)n, "body bytes beyond the cap do not matter: rc %d", p.rc);
}

static void test_write_head(void) {
    char b[512];
    size_t n = http_write_head(b, sizeof b, 200, "audio/wav", 44, true, NULL);
    CHECK(n > 0 && strstr(b, "HTTP/1.1 200 OK\r\n") == b, "status line");
    CHECK(strstr(b, "Content-Length: 44\r\n") && strstr(b, "Connection: keep-alive\r\n"), "%s", b);
    CHECK(n >= 4 && memcmp(b + n - 4, "\r\n\r\n", 4) == 0, "ends with an empty line");
    n = http_write_head(b, sizeof b, 503, "application/json", HTTP_BODY_CHUNKED, false, "Retry-After: 1\r\n");
    CHECK(strstr(b, "Transfer-Encoding: chunked\r\n") && strstr(b, "Retry-After: 1\r\n") &&
              strstr(b, "Connection: close\r\n") && !strstr(b, "Content-Length"),
          "%s", b);
    n = http_write_head(b, sizeof b, 200, NULL, HTTP_BODY_CLOSE, false, NULL);
    CHECK(!strstr(b, "Content-Length") && !strstr(b, "Transfer-Encoding"), "close-delimited");
    CHECK(http_write_head(b, 10, 200, NULL, 0, false, NULL) == 0, "too small a buffer");
    char h[20];
    CHECK(http_chunk_head(h, 255) == 4 && memcmp(h, "ff\r\n", 4) == 0, "chunk head");
    CHECK(strcmp(http_reason(431), "Request Header Fields Too Large") == 0, "reason");
}

/* Every single-byte mutation of a valid request: the parser either
 * accepts, asks for more, or refuses - and never reads past the end. */
static void test_mutation_sweep(void) {
    const char *base = "POST /v1/tts HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n";
    size_t n = strlen(base);
    char s[256];
    static const unsigned char subst[] = {0, '\r', '\n', ' ', '\t', ':', 0x7f, 0x80, 0xff, 'A', '-', '0'};
    int accepted = 0, refused = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(s, base, n);
            s[i] = (char)subst[k];
            parsed p = parse_n(s, n);
            CHECK(p.rc == HTTP_BAD || p.rc == HTTP_PARTIAL || (p.rc > 0 && p.rc <= (int)n),
                  "mutation %zu/%zu: rc %d", i, k, p.rc);
            if (p.rc == HTTP_BAD) {
                CHECK(p.status >= 400 && p.status < 600 && p.why && *p.why, "status %d", p.status);
                refused++;
            } else {
                accepted++;
            }
            /* truncations of the mutant */
            for (size_t t = 0; t < n; t += 7) parse_n(s, t);
        }
    CHECK(accepted > 0 && refused > 0, "accepted %d refused %d", accepted, refused);
}

int main(void) {
    guard_init();
    TEST_RUN(test_simple_get);
    TEST_RUN(test_post_with_body_after_head);
    TEST_RUN(test_value_whitespace_trimmed);
    TEST_RUN(test_http10_and_connection);
    TEST_RUN(test_leading_empty_lines);
    TEST_RUN(test_smuggling_framing);
    TEST_RUN(test_content_length_syntax);
    TEST_RUN(test_bare_cr_lf);
    TEST_RUN(test_obs_fold_and_names);
    TEST_RUN(test_control_bytes);
    TEST_RUN(test_request_line);
    TEST_RUN(test_host_rules);
    TEST_RUN(test_header_caps);
    TEST_RUN(test_write_head);
    TEST_RUN(test_mutation_sweep);
    TEST_END();
}
