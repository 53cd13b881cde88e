/*
 * fuzz_http.c - libFuzzer harness for the HTTP/1.1 request-head parser
 * (src/server/http.c) and its limit logic.
 *
 *     make fuzz-http FUZZ_TIME=60
 *
 * Besides crashes and sanitizer reports, it traps when an answer breaks
 * the parser's contract: a complete head longer than the input or the cap,
 * a view outside the head, a refusal without a 4xx/5xx status and a
 * reason, a prefix of an accepted head not answered "partial", or the same
 * input answered differently twice. libFuzzer hands over an exact-size
 * heap copy, so ASan also catches a one-byte over-read.
 *
 * Seeds: tests/fuzz/corpus/http (valid requests and every smuggling /
 * framing case of tests/unit/test_http.c); dictionary tests/fuzz/http.dict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *base, int len, http_str s) {
    if (s.n == 0) return;
    if (s.p < base || s.p + s.n > base + len) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    http_request r;
    int status;
    const char *why;
    int rc = http_parse_request(buf, size, &r, &status, &why);
    if (rc == HTTP_BAD) {
        if (status < 400 || status > 599 || !why || !*why) __builtin_trap();
    } else if (rc == HTTP_PARTIAL) {
        if (size >= HTTP_MAX_HEAD) __builtin_trap();
    } else {
        if (rc <= 0 || (size_t)rc > size || rc > HTTP_MAX_HEAD) __builtin_trap();
        if (r.n_headers < 0 || r.n_headers > HTTP_MAX_HEADERS) __builtin_trap();
        if (r.minor_version != 0 && r.minor_version != 1) __builtin_trap();
        if (r.content_length < -1 || r.content_length > HTTP_MAX_CONTENT_LENGTH) __builtin_trap();
        if (r.path.n == 0 || r.path.p[0] != '/') __builtin_trap();
        inside(buf, rc, r.method);
        inside(buf, rc, r.target);
        inside(buf, rc, r.path);
        inside(buf, rc, r.query);
        inside(buf, rc, r.content_type);
        inside(buf, rc, r.authorization);
        for (int i = 0; i < r.n_headers; i++) {
            inside(buf, rc, r.headers[i].name);
            inside(buf, rc, r.headers[i].value);
        }
        /* a prefix of an accepted head is incomplete, never refused */
        size_t cuts[2] = {(size_t)rc - 1, (size_t)rc / 2};
        for (int k = 0; k < 2; k++) {
            char *p = malloc(cuts[k] ? cuts[k] : 1);
            memcpy(p, buf, cuts[k]);
            http_request r2;
            int st2;
            const char *w2;
            if (http_parse_request(p, cuts[k], &r2, &st2, &w2) != HTTP_PARTIAL) __builtin_trap();
            free(p);
        }
        /* the response writers on what was parsed */
        char head[1024];
        http_write_head(head, sizeof head, 200, "audio/wav", r.content_length, r.keep_alive, NULL);
        char ch[20];
        if (r.content_length > 0) http_chunk_head(ch, (size_t)r.content_length);
    }
    /* deterministic */
    http_request r3;
    int st3 = 0;
    const char *w3;
    int rc3 = http_parse_request(buf, size, &r3, &st3, &w3);
    if (rc3 != rc || (rc == HTTP_BAD && st3 != status)) __builtin_trap();
    return 0;
}
