/*
 * harness.h - the tiny test framework every tests/unit/test_*.c uses.
 *
 * Each test file is its own executable with a main() that calls
 * TEST_RUN(fn) for each test function and ends with TEST_END(), which
 * prints "<file>: N passed, N failed" and exits non-zero on any failure.
 * A test function counts as one pass or one failure; CHECK records a
 * failure with its location and a message but lets the function go on.
 * tests/run.sh adds the per-file counts into the final
 * "N passed, N failed" line.
 *
 * Fixtures: QTTS_FIXTURES (set by the Makefile to tests/fixtures) is the
 * root of the committed tiny models and goldens.
 */
#ifndef QTTS_TEST_HARNESS_H
#define QTTS_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef QTTS_FIXTURES
#define QTTS_FIXTURES "tests/fixtures"
#endif

static int test_passed_, test_failed_, test_cur_failed_;
static const char *test_cur_name_;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: ", test_cur_name_, __FILE__, \
                    __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            test_cur_failed_++;                                               \
        }                                                                     \
    } while (0)

/* Like CHECK, but stops the current test function (the condition is
 * evaluated once). */
#define REQUIRE(cond, ...)                                                    \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: ", test_cur_name_, __FILE__, \
                    __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            test_cur_failed_++;                                               \
            return;                                                           \
        }                                                                     \
    } while (0)

#define TEST_RUN(fn) TEST_RUN_NAMED(#fn, fn)

/* TEST_RUN of a function reached through a pointer (a table of tests). */
#define TEST_RUN_NAMED(name, fn)                                              \
    do {                                                                      \
        test_cur_name_ = (name);                                              \
        test_cur_failed_ = 0;                                                 \
        (fn)();                                                               \
        if (test_cur_failed_) {                                               \
            test_failed_++;                                                   \
            fprintf(stderr, "not ok %s\n", test_cur_name_);                   \
        } else {                                                              \
            test_passed_++;                                                   \
            if (getenv("QTTS_TEST_VERBOSE")) fprintf(stderr, "ok %s\n", test_cur_name_); \
        }                                                                     \
    } while (0)

#define TEST_END()                                                            \
    do {                                                                      \
        printf("%s: %d passed, %d failed\n", __FILE__, test_passed_, test_failed_); \
        return test_failed_ ? 1 : 0;                                          \
    } while (0)

/* A whole file, NUL-terminated (NULL if unreadable); *len its size
 * without the NUL. Caller frees. */
static inline void *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

/* Largest |a-b| / max(|b|, floor) over n elements; index of the worst in *at. */
static inline double test_max_rel_err(const float *a, const float *b, size_t n, double floor_,
                                      size_t *at) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        double r = d / (s > floor_ ? s : floor_);
        if (!(r <= worst)) { worst = r; wi = i; } /* NaN propagates as worst */
    }
    if (at) *at = wi;
    return worst;
}

static inline double test_max_abs_err(const float *a, const float *b, size_t n, size_t *at) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) { worst = d; wi = i; }
    }
    if (at) *at = wi;
    return worst;
}

#endif
