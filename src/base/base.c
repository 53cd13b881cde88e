/* base.c - error formatting, checked allocation, small file helpers. */

#include "base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

qtts_status qtts_fail(qtts_err *err, qtts_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *qtts_status_str(qtts_status s) { return qtts_status_name(s); }

const char *qtts_status_name(qtts_status s) {
    switch (s) {
    case QTTS_OK: return "ok";
    case QTTS_ERR_IO: return "io_error";
    case QTTS_ERR_FORMAT: return "format_error";
    case QTTS_ERR_INVALID: return "invalid_argument";
    case QTTS_ERR_NOMEM: return "out_of_memory";
    case QTTS_ERR_UNSUPPORTED: return "unsupported";
    case QTTS_ERR_LIMIT: return "limit_exceeded";
    case QTTS_ERR_NUMERIC: return "numerical_error";
    case QTTS_ERR_CANCELLED: return "cancelled";
    }
    return "unknown";
}

void qtts_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "qtts: internal assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

static atomic_long g_fail_at = -1, g_alloc_count;
static atomic_bool g_fail_fired;

void qtts_alloc_fail_at(long n) {
    atomic_store(&g_fail_fired, false);
    atomic_store(&g_fail_at, n < 0 ? -1 : n);
}
bool qtts_alloc_fail_fired(void) { return atomic_load(&g_fail_fired); }
long qtts_alloc_count(void) { return atomic_load_explicit(&g_alloc_count, memory_order_relaxed); }

/* true: this allocation is the injected failure. */
static bool injected(void) {
    atomic_fetch_add_explicit(&g_alloc_count, 1, memory_order_relaxed);
    if (atomic_load_explicit(&g_fail_at, memory_order_relaxed) < 0) return false;
    if (atomic_fetch_sub(&g_fail_at, 1) != 0) return false;
    atomic_store(&g_fail_fired, true);
    return true;
}

void *qtts_malloc(size_t n) { return injected() ? NULL : malloc(n ? n : 1); }
void *qtts_calloc(size_t c, size_t s) { return injected() ? NULL : calloc(c ? c : 1, s ? s : 1); }
void *qtts_realloc(void *p, size_t n) { return injected() ? NULL : realloc(p, n ? n : 1); }
/* Large blocks (packed weights, scratch) are 2 MiB aligned and asked to be
 * backed by transparent huge pages where the kernel is in "madvise" mode:
 * a 2 MiB fault instead of 512 small ones, and fewer TLB misses for the
 * kernels that stream them. A refusal (no THP) is harmless. */
#define QTTS_HUGE_MIN (4u << 20)
#define QTTS_HUGE_ALIGN (2u << 20)
void *qtts_aligned_alloc(size_t n) {
    void *p = NULL;
    if (injected()) return NULL;
    if (n >= QTTS_HUGE_MIN) {
        if (posix_memalign(&p, QTTS_HUGE_ALIGN, n) != 0) return NULL;
        (void)madvise(p, n & ~(size_t)(QTTS_HUGE_ALIGN - 1), MADV_HUGEPAGE);
        return p;
    }
    if (posix_memalign(&p, 64, n ? n : 64) != 0) return NULL;
    return p;
}
void qtts_free(void *p) { free(p); }
char *qtts_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = qtts_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

qtts_status qtts_read_file(const char *path, size_t max_bytes, char **out_buf,
                           size_t *out_len, qtts_err *err) {
    *out_buf = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return qtts_fail(err, QTTS_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return qtts_fail(err, QTTS_ERR_LIMIT, "%s: file is %lld bytes, over the %zu-byte limit",
                         path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return qtts_fail(err, QTTS_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *out_buf = buf;
    if (out_len) *out_len = n;
    return QTTS_OK;
}

bool qtts_path_join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap;
}

double qtts_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float qtts_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            man &= 0x3ff;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    union { uint32_t u; float f; } v = {.u = u};
    return v.f;
}
