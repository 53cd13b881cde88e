/* codes_file.c - see codes_file.h. */
#include "codes_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_FRAMES 1000000

double qtts_cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int qtts_codes_write_frame(FILE *f, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    for (int i = 0; i < QTTS_NUM_CODEBOOKS; i++)
        if (fprintf(f, i ? " %d" : "%d", (int)codes[i]) < 0) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

/* A byte of the file for a message: 'c' when printable ASCII, else its
 * value (a control byte printed raw could drive the terminal). */
static const char *show_byte(char c, char buf[8]) {
    const unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f) snprintf(buf, 8, "'%c'", c);
    else snprintf(buf, 8, "0x%02x", u);
    return buf;
}

int qtts_codes_read(const char *path, int32_t **out, int *n_out, char *msg, size_t msglen) {
    *out = NULL;
    *n_out = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        snprintf(msg, msglen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int32_t *codes = NULL;
    size_t n = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        if (len > 4096) {
            snprintf(msg, msglen, "%s:%zu: line too long", path, lineno);
            rc = -1;
            break;
        }
        if ((size_t)len != strlen(line)) {
            snprintf(msg, msglen, "%s:%zu: NUL byte in line", path, lineno);
            rc = -1;
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (*p == 0 || *p == '#') continue;
        if (n >= MAX_FRAMES) {
            snprintf(msg, msglen, "%s:%zu: more than %d frames", path, lineno, MAX_FRAMES);
            rc = -1;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            int32_t *nc = realloc(codes, cap * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
            if (!nc) {
                snprintf(msg, msglen, "%s: out of memory", path);
                rc = -1;
                break;
            }
            codes = nc;
        }
        int k = 0;
        char shown[8];
        while (1) {
            while (*p == ' ' || *p == '\t') p++;
            if (*p == '\n' || *p == '\r' || *p == 0) break;
            if (*p < '0' || *p > '9') {
                snprintf(msg, msglen, "%s:%zu: expected a non-negative integer, found %s", path,
                         lineno, show_byte(*p, shown));
                rc = -1;
                goto done;
            }
            long v = 0;
            int digits = 0;
            while (*p >= '0' && *p <= '9') {
                v = v * 10 + (*p++ - '0');
                if (++digits > 6 || v > 65535) {
                    snprintf(msg, msglen, "%s:%zu: code out of range (max 65535)", path, lineno);
                    rc = -1;
                    goto done;
                }
            }
            if (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
                snprintf(msg, msglen, "%s:%zu: unexpected character %s after a number", path,
                         lineno, show_byte(*p, shown));
                rc = -1;
                goto done;
            }
            if (k == QTTS_NUM_CODEBOOKS) {
                snprintf(msg, msglen, "%s:%zu: more than %d codes on the line", path, lineno,
                         QTTS_NUM_CODEBOOKS);
                rc = -1;
                goto done;
            }
            codes[n * QTTS_NUM_CODEBOOKS + k++] = (int32_t)v;
        }
        if (k != QTTS_NUM_CODEBOOKS) {
            snprintf(msg, msglen, "%s:%zu: expected %d codes, found %d", path, lineno,
                     QTTS_NUM_CODEBOOKS, k);
            rc = -1;
            break;
        }
        n++;
    }
    if (!rc && ferror(f)) {
        snprintf(msg, msglen, "%s: read error", path);
        rc = -1;
    }
    if (!rc && n == 0) {
        snprintf(msg, msglen, "%s: no frames in the file", path);
        rc = -1;
    }
done:
    free(line);
    if (f != stdin) fclose(f);
    if (rc) {
        free(codes);
        return rc;
    }
    *out = codes;
    *n_out = (int)n;
    return 0;
}
