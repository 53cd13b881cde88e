/*
 * bench_util.h - small helpers the benchmark tools share (not tests).
 */
#ifndef QTTS_BENCH_UTIL_H
#define QTTS_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0 .. n) (v is left as it was); 0 when n <= 0 or out of
 * memory. */
static inline double bench_median(const double *v, int n) {
    if (n <= 0) return 0;
    double *s = malloc(sizeof(double) * (size_t)n);
    if (!s) return 0;
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    const double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

#endif
