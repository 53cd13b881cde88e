/*
 * base.h - leaf utilities shared by every layer: status codes, error
 * reporting, checked allocation and overflow-checked size arithmetic.
 *
 * Error convention: library functions return qtts_status and, on failure,
 * fill a caller-owned qtts_err with one line of text that names the thing
 * that failed (file, tensor, key) and the rule it broke. Library code never
 * prints and never exits; only app/ does.
 */
#ifndef QTTS_BASE_H
#define QTTS_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "qwen3_tts.h"

/* The status codes and the error struct are part of the public API. */
typedef qtts_error qtts_err;

/* Format a one-line message into err (err may be NULL) and return status. */
qtts_status qtts_fail(qtts_err *err, qtts_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *qtts_status_name(qtts_status s);

#define QTTS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define QTTS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QTTS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Programmer errors only (never for input validation). */
#define QTTS_ASSERT(x)                                                        \
    do {                                                                      \
        if (!(x)) qtts_assert_fail(#x, __FILE__, __LINE__);                   \
    } while (0)
_Noreturn void qtts_assert_fail(const char *expr, const char *file, int line);

/* Allocation: NULL on failure (callers turn it into QTTS_ERR_NOMEM). The
 * aligned variants return 64-byte aligned memory released with qtts_free:
 * qtts_aligned_alloc for memory that is filled whole, or front to back
 * (weights, scratch, the talker's KV cache in chunks of positions); large
 * blocks get transparent huge pages, so memory written a little here and
 * there (a few bytes in each 2 MiB) does not belong in one: each huge page
 * would be zeroed, and count as resident, for its first write. */
void *qtts_malloc(size_t n);
void *qtts_calloc(size_t count, size_t size);
void *qtts_realloc(void *p, size_t n);
void *qtts_aligned_alloc(size_t n);
void qtts_free(void *p);
char *qtts_strdup(const char *s);

/* Allocation failure injection, for tests (SQLite's and curl's OOM
 * method): qtts_alloc_fail_at(n) makes the n-th allocation from now (0 =
 * the next) through the wrappers above fail, once; -1 disarms. Process-
 * wide. qtts_alloc_count() counts the allocations made so far (to size a
 * test's sweep); qtts_alloc_fail_fired() says whether the armed failure
 * has happened. Costs one relaxed atomic load per allocation when unarmed. */
void qtts_alloc_fail_at(long n);
bool qtts_alloc_fail_fired(void);
long qtts_alloc_count(void);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool qtts_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool qtts_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Read a whole (small) file into a NUL-terminated heap buffer. max_bytes
 * bounds the size; larger files are rejected with QTTS_ERR_LIMIT. */
qtts_status qtts_read_file(const char *path, size_t max_bytes, char **out_buf,
                           size_t *out_len, qtts_err *err);

/* Join dir and name into out (bounded); false if it does not fit. */
bool qtts_path_join(char *out, size_t cap, const char *dir, const char *name);

/* Bytes of the control character starting at s (left bytes remain, >= 1):
 * 1 for C0 (< 0x20) or DEL, 2 for C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F),
 * 0 for anything else. The one definition behind every place that refuses
 * or escapes text from a file or a client before it reaches a terminal. */
static inline int qtts_control_len(const char *s, size_t left) {
    const unsigned char c = (unsigned char)s[0];
    if (c < 0x20 || c == 0x7f) return 1;
    if (c == 0xc2 && left >= 2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f)
        return 2;
    return 0;
}

/* Monotonic clock in seconds. */
double qtts_now(void);

/* bf16 <-> f32 (exact upcast; round-to-nearest-even downcast). */
static inline float qtts_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
static inline uint16_t qtts_f32_to_bf16(float f) {
    union { uint32_t u; float f; } v;
    v.f = f;
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40); /* NaN */
    uint32_t lsb = (v.u >> 16) & 1u;
    return (uint16_t)((v.u + 0x7fffu + lsb) >> 16);
}
float qtts_f16_to_f32(uint16_t h);

#endif
