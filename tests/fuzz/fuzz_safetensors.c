/*
 * fuzz_safetensors.c - libFuzzer harness for the model-file reader: the
 * input is a whole .safetensors file, handed to qtts_st_open_fd through a
 * memfd (the same fstat / header / offset checks and the same mmap as a
 * file on disk).
 *
 *     make fuzz-st FUZZ_TIME=60
 *
 * A refusal must carry a NUL-terminated message. An accepted file must
 * keep what the loaders rely on (reliability goals rows 1-3): every
 * tensor's bytes lie inside the file after the header, their count is its
 * element count times its dtype size (or the quantized row bytes), rank
 * and dims are in range, names are NUL-terminated, free of control
 * characters and found again by qtts_st_find. The harness then reads the first and the last byte of
 * every tensor (a range outside the mapping faults) and converts small
 * float tensors to f32.
 *
 * Seeds: tests/fuzz/corpus/safetensors (valid files of each dtype, a
 * quantized one, hostile headers), written by tests/fuzz/make_st_seeds.py.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "io/safetensors.h"
#include "kernels/quant.h"
#include "fuzz_memfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes a tensor of this dtype and shape must hold. */
static uint64_t expect_bytes(const qtts_tensor *t) {
    if (t->dtype == QTTS_DT_Q8_0 || t->dtype == QTTS_DT_Q4_0) {
        const int q4 = t->dtype == QTTS_DT_Q4_0;
        if (t->rank < 1) return 0;
        const int64_t cols = t->shape[t->rank - 1];
        const uint64_t rows = cols ? t->numel / (uint64_t)cols : 0;
        if (t->packed) return rows * qtts_packed_row_bytes(q4, (int)cols);
        return t->numel / QTTS_QK * (q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0));
    }
    return t->numel * qtts_dtype_size(t->dtype);
}

typedef struct {
    const uint8_t *p;
    uint64_t n;
} span;

/* By address, empty ranges first among equals. */
static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int fd = fuzz_memfd("fuzz.safetensors", data, size);
    if (fd < 0) return 0;
    qtts_st_file *f = NULL;
    qtts_err err;
    memset(&err, 0, sizeof err);
    if (qtts_st_open_fd(fd, "fuzz.safetensors", &f, &err) != QTTS_OK) {
        if (f || !err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
        return 0;
    }
    /* The data area: after the 8-byte length and the header. */
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)data[i] << (8 * i);
    const uint64_t body = size - 8 - hlen;
    const uint8_t *area = data + 8 + hlen;
    (void)qtts_st_metadata(f, QTTS_ST_QUANT_KEY);
    (void)qtts_st_metadata(f, "format");
    const size_t n = qtts_st_count(f);
    span *sp = n ? qtts_calloc(n, sizeof *sp) : NULL;
    if (n && !sp) {
        qtts_st_close(f);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const qtts_tensor *t = qtts_st_at(f, i);
        if (!t || !t->name || qtts_st_find(f, t->name) != t) __builtin_trap();
        for (const unsigned char *c = (const unsigned char *)t->name; *c; c++)
            if (*c < 0x20 || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
                __builtin_trap();   /* a control character in an accepted name */
        if (i && strcmp(qtts_st_at(f, i - 1)->name, t->name) >= 0) __builtin_trap();
        if (t->rank < 0 || t->rank > QTTS_MAX_RANK) __builtin_trap();
        uint64_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] < 0) __builtin_trap();
            numel *= (uint64_t)t->shape[d];
        }
        if (numel != t->numel || t->nbytes != expect_bytes(t) || t->nbytes > body) __builtin_trap();
        sp[i] = (span){(const uint8_t *)t->data, t->nbytes};
        if (t->nbytes) {
            const volatile uint8_t *p = t->data;
            (void)p[0];
            (void)p[t->nbytes - 1];
        }
        if ((t->dtype == QTTS_DT_F32 || t->dtype == QTTS_DT_F16 || t->dtype == QTTS_DT_BF16) &&
            t->numel && t->numel <= 4096) {
            float *owned = NULL;
            const float *v = qtts_tensor_f32(t, &owned);
            if (v) {
                volatile float s = v[0] + v[t->numel - 1];
                (void)s;
            }
            qtts_free(owned);
        }
    }
    /* In address order the tensors tile the data area exactly (no gap, no
     * overlap, no trailing bytes), and the first one's bytes are the
     * file's first data bytes: every range is where the header said. */
    if (n) qsort(sp, n, sizeof *sp, span_cmp);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && sp[i].p != sp[i - 1].p + sp[i - 1].n) __builtin_trap();
        total += sp[i].n;
    }
    if (total != body) __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (sp[i].n) {
            if (memcmp(sp[i].p, area, sp[i].n < 64 ? sp[i].n : 64)) __builtin_trap();
            break;
        }
    qtts_free(sp);
    qtts_st_close(f);
    return 0;
}
