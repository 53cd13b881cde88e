/*
 * safetensors.c - mmap'd, bounds-checked safetensors reader.
 *
 * File layout: u64 little-endian N, then N bytes of JSON header, then the
 * data area. The header maps tensor names to {dtype, shape, data_offsets},
 * offsets being [begin, end) relative to the start of the data area, plus
 * an optional "__metadata__" object of strings.
 *
 * qtts_st_open validates in this order (reliability goals rows 1-4):
 *   1. fstat: regular file, size >= 8;
 *   2. N <= 100,000,000, N >= 2, 8 + N <= size (checked add), all from an
 *      8-byte pread, so nothing is allocated or mapped from a bogus N;
 *   3. map the file PROT_READ/MAP_PRIVATE; header[0] == '{'; header is
 *      valid UTF-8; header is strict JSON (json.h: duplicate keys rejected)
 *      within the caps below (tensor count, array and string sizes);
 *   4. per entry, in document order: a name (and a __metadata__ key)
 *      without control characters; exactly the fields dtype/shape/
 *      data_offsets; dtype in the whitelist; rank <= 8; dims and offsets
 *      non-negative integers < 2^53; begin <= end; numel and nbytes by
 *      checked multiplication; end - begin == nbytes;
 *   5. sorted by (begin, end), the ranges tile [0, data size) exactly: each
 *      begins where the previous ended (no overlap, no gap) and the last
 *      ends at EOF (no trailing bytes; a short file is "truncated").
 * The fd stays open and the mapping lives until qtts_st_close. Tensor
 * names are copied out of the JSON tree into one block; the tree is freed.
 *
 * Data pointers are not aligned beyond what the file provides (writers pad
 * the header to 8 bytes, but nothing requires it); qtts_tensor_to_f32 uses
 * memcpy and callers reading in place must do the same or check alignment.
 *
 * A set (qtts_st_set) is one file or the shards of an index.json; its
 * tensors are merged into one name-sorted array that remembers each
 * tensor's file, so errors can name it.
 */
#include "safetensors.h"

#include "../base/json.h"
#include "../base/thread.h"
#include "../kernels/quant.h"

#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull   /* the reference reader's HeaderTooLarge */
#define ST_MAX_INT ((uint64_t)1 << 53) /* dims and offsets must be below this */
#define ST_MAX_SHARDS 256
#define ST_MAX_INDEX_BYTES (8u << 20)
/* Parse-time caps for the header JSON. A hostile 100 MB header could
 * otherwise describe millions of tensors and cost gigabytes of parse tree;
 * each entry costs about 1 KB parsed, so 16384 tensors stay near 16 MB.
 * Real files hold hundreds (Qwen3-TTS: at most 496). Shapes need at most
 * QTTS_MAX_RANK items, so arrays are capped just above it, which keeps the
 * explicit "rank N exceeds" message for slightly-too-long shapes. */
#define ST_MAX_TENSORS 16384
#define ST_MAX_ARRAY 16
#define ST_MAX_STRING (64u << 10)

struct qtts_st_file {
    char *path;
    int fd;
    void *map;
    size_t map_len;
    size_t n_tensors;
    qtts_tensor *tensors; /* sorted by name */
    char *names;          /* one block holding every name */
    size_t n_meta;
    char **meta;          /* [2 * n_meta]: key, value, key, value, ... (owned) */
};

static const struct {
    const char *name;
    qtts_dtype dt;
    size_t size;
} dtype_table[] = {
    {"F32", QTTS_DT_F32, 4}, {"F16", QTTS_DT_F16, 2}, {"BF16", QTTS_DT_BF16, 2},
    {"I64", QTTS_DT_I64, 8}, {"I32", QTTS_DT_I32, 4}, {"I8", QTTS_DT_I8, 1},
    {"U8", QTTS_DT_U8, 1},
};

/* The block formats: accepted only in a marked quantized model file. */
static const struct {
    const char *name;
    qtts_dtype dt;
    size_t block;   /* bytes per 32 elements */
} quant_table[] = {
    {QTTS_Q8_0_NAME, QTTS_DT_Q8_0, sizeof(qtts_block_q8_0)},
    {QTTS_Q4_0_NAME, QTTS_DT_Q4_0, sizeof(qtts_block_q4_0)},
};

const char *qtts_dtype_name(qtts_dtype dt) {
    for (size_t i = 0; i < QTTS_ARRAY_LEN(dtype_table); i++)
        if (dtype_table[i].dt == dt) return dtype_table[i].name;
    for (size_t i = 0; i < QTTS_ARRAY_LEN(quant_table); i++)
        if (quant_table[i].dt == dt) return quant_table[i].name;
    return "?";
}

size_t qtts_dtype_size(qtts_dtype dt) {
    for (size_t i = 0; i < QTTS_ARRAY_LEN(dtype_table); i++)
        if (dtype_table[i].dt == dt) return dtype_table[i].size;
    return 0;
}

/* A tensor name or JSON value quoted for an error message, truncated to
 * 64 bytes of input (row 9: fixed templates plus escaped, short values). */
#define QBUF 420 /* 64 input bytes escaped (6 each at worst) + quotes + "..." */
static const char *quote(char *buf, size_t cap, const char *s, size_t len) {
    size_t cut = len;
    if (cut > 64) {
        cut = 64; /* back off to a UTF-8 boundary */
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    }
    size_t n = qtts_json_escape(buf, cap, s, cut);
    if (cut < len && n + 4 <= cap) memcpy(buf + n, "...", 4);
    return buf;
}

/* ==== one file ========================================================== */

void qtts_st_close(qtts_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_len);
    if (f->fd >= 0) close(f->fd);
    qtts_free(f->tensors);
    qtts_free(f->names);
    for (size_t i = 0; i < 2 * f->n_meta; i++) qtts_free(f->meta[i]);
    qtts_free(f->meta);
    qtts_free(f->path);
    qtts_free(f);
}

const char *qtts_st_metadata(const qtts_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

/* A JSON number that is an integer in [0, 2^53). */
static bool st_uint(const qtts_json *v, uint64_t *out) {
    if (!v || v->type != QTTS_JSON_NUMBER || !v->is_integer || !v->fits_int64) return false;
    if (v->integer < 0 || (uint64_t)v->integer >= ST_MAX_INT) return false;
    *out = (uint64_t)v->integer;
    return true;
}

typedef struct {
    uint64_t begin, end;
    size_t idx; /* into the tensor array */
} st_range;

static int range_cmp(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* A control character (C0, DEL, or C1 as UTF-8 C2 80..C2 9F) in s[0..len):
 * no tensor name or metadata key has one, and printed to a terminal (by
 * inspect, in error messages) one could drive it. */
static bool has_control(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (qtts_control_len(s + i, len - i)) return true;
    return false;
}

static int tensor_name_cmp(const void *a, const void *b) {
    return strcmp(((const qtts_tensor *)a)->name, ((const qtts_tensor *)b)->name);
}

/* Validate one header entry (name k, value v) into *t. Offsets are
 * relative to the data area; *begin and *end receive them. quant: the file
 * is a marked quantized model file (Q8_0/Q4_0 allowed). */
static qtts_status check_entry(const char *path, const char *k, size_t klen, const qtts_json *v,
                               uint64_t data_len, bool quant, bool packed, qtts_tensor *t,
                               uint64_t *begin, uint64_t *end, qtts_err *err) {
    char qn[QBUF];
    quote(qn, QBUF, k, klen);
    if (has_control(k, klen))
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: name contains a control character",
                         path, qn);
    if (v->type != QTTS_JSON_OBJECT)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: entry must be an object, not %s",
                         path, qn, qtts_json_type_name(v->type));
    for (size_t i = 0; i < v->count; i++) {
        const char *f = v->keys[i];
        if (strcmp(f, "dtype") && strcmp(f, "shape") && strcmp(f, "data_offsets")) {
            char qf[QBUF];
            return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: unexpected field %s", path, qn,
                             quote(qf, QBUF, f, v->key_lens[i]));
        }
    }
    const qtts_json *jd = qtts_json_get(v, "dtype"), *js = qtts_json_get(v, "shape"),
                    *jo = qtts_json_get(v, "data_offsets");
    if (!jd || !js || !jo)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: missing field %s", path, qn,
                         !jd ? "dtype" : !js ? "shape" : "data_offsets");

    if (jd->type != QTTS_JSON_STRING)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: dtype must be a string", path, qn);
    size_t di = 0, qi = 0;
    while (di < QTTS_ARRAY_LEN(dtype_table) && strcmp(jd->str, dtype_table[di].name)) di++;
    while (qi < QTTS_ARRAY_LEN(quant_table) && strcmp(jd->str, quant_table[qi].name)) qi++;
    const bool is_quant = di == QTTS_ARRAY_LEN(dtype_table) && qi < QTTS_ARRAY_LEN(quant_table);
    if (di == QTTS_ARRAY_LEN(dtype_table) && (!is_quant || !quant)) {
        char qd[QBUF];
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: unsupported dtype %s (allowed: F32 F16 BF16 I64 I32 I8 U8%s)",
                         path, qn, quote(qd, QBUF, jd->str, jd->str_len),
                         quant ? " Q8_0 Q4_0"
                               : "; Q8_0 and Q4_0 only in a quantized model file written by "
                                 "'qwen3-tts quantize'");
    }
    t->dtype = is_quant ? quant_table[qi].dt : dtype_table[di].dt;

    if (js->type != QTTS_JSON_ARRAY)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: shape must be an array", path, qn);
    if (js->count > QTTS_MAX_RANK)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: rank %zu exceeds the maximum %d",
                         path, qn, js->count, QTTS_MAX_RANK);
    t->rank = (int)js->count;
    for (size_t i = 0; i < js->count; i++) {
        uint64_t d;
        if (!st_uint(js->items[i], &d))
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "%s: tensor %s: shape dim %zu is not an integer in [0, 2^53)", path, qn, i);
        t->shape[i] = (int64_t)d;
    }

    if (jo->type != QTTS_JSON_ARRAY || jo->count != 2)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: data_offsets must be an array of 2 integers", path, qn);
    if (!st_uint(jo->items[0], begin) || !st_uint(jo->items[1], end))
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: data_offsets must be integers in [0, 2^53)", path, qn);
    if (*end < *begin)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: data_offsets end %llu < begin %llu", path, qn,
                         (unsigned long long)*end, (unsigned long long)*begin);

    uint64_t numel = 1, nbytes;
    for (int i = 0; i < t->rank; i++)
        if (!qtts_mul_ok(numel, (uint64_t)t->shape[i], &numel))
            return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: element count overflows", path, qn);
    if (is_quant) {
        /* [rows, cols] in blocks of 32 consecutive elements of a row. */
        if (t->rank != 2 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[1] % QTTS_QK)
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "%s: tensor %s: a %s tensor must have shape [rows, cols] with rows "
                             "and cols > 0 and cols a multiple of %d",
                             path, qn, quant_table[qi].name, QTTS_QK);
        const bool overflow =
            packed ? (uint64_t)t->shape[1] > INT32_MAX ||
                         !qtts_mul_ok((uint64_t)t->shape[0],
                                      qtts_packed_row_bytes(t->dtype == QTTS_DT_Q4_0,
                                                            (int)QTTS_MIN(t->shape[1], INT32_MAX)),
                                      &nbytes)
                   : !qtts_mul_ok(numel / QTTS_QK, quant_table[qi].block, &nbytes);
        if (overflow)
            return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: byte size overflows", path, qn);
        t->packed = packed;
    } else if (!qtts_mul_ok(numel, dtype_table[di].size, &nbytes))
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: byte size overflows", path, qn);
    if (nbytes != *end - *begin)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: byte count mismatch: shape and dtype need %llu bytes, "
                         "data_offsets span %llu",
                         path, qn, (unsigned long long)nbytes, (unsigned long long)(*end - *begin));
    if (*end > data_len)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: data_offsets end %llu beyond the %llu-byte data area "
                         "(file truncated: corrupted or incomplete)",
                         path, qn, (unsigned long long)*end, (unsigned long long)data_len);
    t->numel = numel;
    t->nbytes = nbytes;
    return QTTS_OK;
}

/* ==== block contents of quantized tensors ================================ */

/* Every byte of x equal to 0x80: the high bit of each such byte's lane. */
static inline uint64_t bytes_0x80(uint64_t x) {
    const uint64_t y = x ^ 0x8080808080808080ull; /* 0x80 -> 0x00 */
    return (y - 0x0101010101010101ull) & ~y & 0x8080808080808080ull;
}

/* Every zero byte of x: the high bit of each such byte's lane. */
static inline uint64_t bytes_0x00(uint64_t x) {
    return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* A scan of rows [task * per_task, ...) of one tensor; a bad block is
 * reported as (row, block in the row). */
typedef struct {
    const unsigned char *data;
    const qtts_tensor *t;
    size_t rows, per_task;
    bool q8;
    _Atomic size_t bad_nonfinite, bad_code; /* (row * blocks per row + block) + 1, or 0 */
} block_scan;

static bool nonfinite_half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return (h & 0x7c00u) == 0x7c00u;
}

/* Plain rows: cols/32 blocks of scale + codes. */
static void scan_plain(block_scan *j, size_t r, size_t nb) {
    const size_t bb = j->q8 ? sizeof(qtts_block_q8_0) : sizeof(qtts_block_q4_0);
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *p = j->data + (r * nb + b) * bb;
        if (nonfinite_half(p)) {
            atomic_store_explicit(&j->bad_nonfinite, r * nb + b + 1, memory_order_relaxed);
            return;
        }
        if (j->q8) {
            uint64_t w[4];
            memcpy(w, p + 2, 32);
            if (bytes_0x80(w[0]) | bytes_0x80(w[1]) | bytes_0x80(w[2]) | bytes_0x80(w[3])) {
                atomic_store_explicit(&j->bad_code, r * nb + b + 1, memory_order_relaxed);
                return;
            }
        }
    }
}

/* Packed rows (quant.h): the codes of ng groups, then ng * 16 scales;
 * Q8_0 codes are stored as code + 128, so -128 is a zero byte. Padding
 * blocks are checked like the others. */
static void scan_packed(block_scan *j, size_t r) {
    const int cols = (int)j->t->shape[1], ng = qtts_packed_groups(cols);
    const int K = qtts_packed_vectors(!j->q8);
    const size_t nbp = (size_t)ng * QTTS_PACK_BLOCKS;   /* blocks per row, padding included */
    const unsigned char *row = j->data + r * qtts_packed_row_bytes(!j->q8, cols);
    const unsigned char *scales = row + (size_t)ng * K * 64;
    for (size_t b = 0; b < nbp; b++)
        if (nonfinite_half(scales + 2 * b)) {
            atomic_store_explicit(&j->bad_nonfinite, r * nbp + b + 1, memory_order_relaxed);
            return;
        }
    if (!j->q8) return;
    for (size_t o = 0; o < (size_t)ng * K * 64; o += 8) {
        uint64_t w;
        memcpy(&w, row + o, 8);
        const uint64_t z = bytes_0x00(w);
        if (z) {
            const size_t byte = o + (size_t)__builtin_ctzll(z) / 8;
            const size_t b = byte / ((size_t)K * 64) * QTTS_PACK_BLOCKS + byte % 64 / 4;
            atomic_store_explicit(&j->bad_code, r * nbp + b + 1, memory_order_relaxed);
            return;
        }
    }
}

static void scan_task(void *ctx, int task) {
    block_scan *j = ctx;
    const size_t r0 = (size_t)task * j->per_task, r1 = QTTS_MIN(r0 + j->per_task, j->rows);
    const size_t nb = (size_t)j->t->shape[1] / QTTS_QK;
    for (size_t r = r0; r < r1; r++) {
        if (j->t->packed) scan_packed(j, r);
        else scan_plain(j, r, nb);
        if (atomic_load_explicit(&j->bad_nonfinite, memory_order_relaxed) ||
            atomic_load_explicit(&j->bad_code, memory_order_relaxed))
            return;
    }
}

/* A Q8_0/Q4_0 tensor's blocks: 2-byte aligned (the mapping is page
 * aligned, so this is the file offset), finite scales, and no Q8_0 code
 * -128 (the SIMD dot products negate codes). Other dtypes pass. */
static qtts_status check_blocks(const char *path, const qtts_tensor *t, qtts_err *err) {
    if (t->dtype != QTTS_DT_Q8_0 && t->dtype != QTTS_DT_Q4_0) return QTTS_OK;
    if ((uintptr_t)t->data & 1) {
        char qn[QBUF];
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: tensor %s: %s data starts at an odd file offset (blocks must be "
                         "2-byte aligned)", path, quote(qn, QBUF, t->name, strlen(t->name)),
                         qtts_dtype_name(t->dtype));
    }
    const size_t cols = (size_t)t->shape[1];
    const size_t per_row = t->packed ? (size_t)qtts_packed_groups((int)cols) * QTTS_PACK_BLOCKS
                                     : cols / QTTS_QK;
    block_scan j = {.data = t->data,
                    .t = t,
                    .rows = (size_t)t->shape[0],
                    /* ~16k blocks a task, and never more than 2^20 tasks */
                    .per_task = QTTS_MAX(16384 / per_row, (size_t)t->shape[0] / (1u << 20)) + 1,
                    .q8 = t->dtype == QTTS_DT_Q8_0};
    atomic_init(&j.bad_nonfinite, 0);
    atomic_init(&j.bad_code, 0);
    const size_t tasks = (j.rows + j.per_task - 1) / j.per_task;
    if (tasks > 1)
        qtts_parallel_for((int)tasks, scan_task, &j);
    else if (tasks)
        scan_task(&j, 0);
    const size_t bad_nf = atomic_load(&j.bad_nonfinite), bad_c = atomic_load(&j.bad_code);
    if (bad_nf || bad_c) {
        char qn[QBUF];
        const size_t b = (bad_nf ? bad_nf : bad_c) - 1;
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: %s block %zu of row %zu %s", path,
                         quote(qn, QBUF, t->name, strlen(t->name)), qtts_dtype_name(t->dtype),
                         b % per_row, b / per_row,
                         bad_nf ? "has a non-finite scale"
                                : "holds the code -128 (valid codes are -127..127)");
    }
    return QTTS_OK;
}

/* Everything after the header is read: validate the JSON header and build
 * the tensor table. */
static qtts_status parse_header(qtts_st_file *f, const char *hdr, size_t n, qtts_err *err) {
    const char *path = f->path;
    if (hdr[0] != '{')
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: header does not start with '{'", path);
    size_t bad;
    if (!qtts_utf8_valid(hdr, n, &bad))
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: header is not valid UTF-8 (byte %zu of the header)",
                         path, bad);
    qtts_json_limits lim = qtts_json_limits_files();
    lim.max_depth = 3; /* root { entry { shape [ ] } } */
    lim.max_keys = ST_MAX_TENSORS + 1; /* + __metadata__ */
    lim.max_items = ST_MAX_ARRAY;
    lim.max_string_len = ST_MAX_STRING;
    char what[600];
    snprintf(what, sizeof what, "%s: header JSON", path);
    qtts_err jerr = {0};
    qtts_json *doc = qtts_json_parse(hdr, n, &lim, what, &jerr);
    if (!doc) {
        if (err) *err = jerr;
        return jerr.status ? jerr.status : QTTS_ERR_FORMAT;
    }
    qtts_status st = QTTS_OK;
    st_range *ranges = NULL;
    if (doc->type != QTTS_JSON_OBJECT) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: header must be a JSON object", path);
        goto out;
    }
    size_t count = 0, name_bytes = 0;
    for (size_t i = 0; i < doc->count; i++) {
        if (strcmp(doc->keys[i], "__metadata__") == 0) {
            const qtts_json *m = doc->items[i];
            bool ok = m->type == QTTS_JSON_OBJECT;
            for (size_t j = 0; ok && j < m->count; j++) ok = m->items[j]->type == QTTS_JSON_STRING;
            if (!ok) {
                st = qtts_fail(err, QTTS_ERR_FORMAT,
                               "%s: __metadata__ must be an object of string values", path);
                goto out;
            }
            f->meta = qtts_calloc(2 * m->count + 1, sizeof *f->meta);
            if (!f->meta) {
                st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory for metadata", path);
                goto out;
            }
            for (size_t j = 0; j < m->count; j++, f->n_meta++) {
                if (has_control(m->keys[j], m->key_lens[j])) {
                    char qk[QBUF];
                    st = qtts_fail(err, QTTS_ERR_FORMAT,
                                   "%s: __metadata__ key %s contains a control character", path,
                                   quote(qk, QBUF, m->keys[j], m->key_lens[j]));
                    goto out;
                }
                f->meta[2 * j] = qtts_strdup(m->keys[j]);
                f->meta[2 * j + 1] = qtts_strdup(m->items[j]->str);
                if (!f->meta[2 * j] || !f->meta[2 * j + 1]) {
                    f->n_meta++; /* so close() frees the partial pair */
                    st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory for metadata", path);
                    goto out;
                }
            }
            continue;
        }
        count++;
        name_bytes += doc->key_lens[i] + 1; /* bounded by N: cannot overflow */
    }
    const char *qv = qtts_st_metadata(f, QTTS_ST_QUANT_KEY);
    if (qv && strcmp(qv, QTTS_ST_QUANT_VERSION) && strcmp(qv, QTTS_ST_QUANT_VERSION_PLAIN)) {
        char qq[QBUF];
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: quantized model format version %s is not supported (this build reads "
                       "versions %s and %s; quantize the model again with this build)",
                       path, quote(qq, QBUF, qv, strlen(qv)), QTTS_ST_QUANT_VERSION_PLAIN,
                       QTTS_ST_QUANT_VERSION);
        goto out;
    }
    const bool quant = qv != NULL, packed = quant && !strcmp(qv, QTTS_ST_QUANT_VERSION);
    f->tensors = qtts_calloc(count, sizeof *f->tensors);
    f->names = qtts_malloc(name_bytes);
    ranges = qtts_malloc((count ? count : 1) * sizeof *ranges);
    if (!f->tensors || !f->names || !ranges) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory for %zu tensors", path, count);
        goto out;
    }
    uint64_t data_len = (uint64_t)f->map_len - 8 - n;
    const unsigned char *data = (const unsigned char *)f->map + 8 + n;
    char *np = f->names;
    size_t k = 0;
    for (size_t i = 0; i < doc->count; i++) {
        if (strcmp(doc->keys[i], "__metadata__") == 0) continue;
        qtts_tensor *t = &f->tensors[k];
        uint64_t b = 0, e = 0;
        st = check_entry(path, doc->keys[i], doc->key_lens[i], doc->items[i], data_len, quant,
                         packed, t, &b, &e, err);
        if (st) goto out;
        memcpy(np, doc->keys[i], doc->key_lens[i] + 1);
        t->name = np;
        np += doc->key_lens[i] + 1;
        t->data = data + b;
        ranges[k] = (st_range){b, e, k};
        k++;
    }

    /* Tiling: sorted by offset, each range starts where the last ended. */
    qsort(ranges, count, sizeof *ranges, range_cmp);
    uint64_t pos = 0;
    for (size_t i = 0; i < count; i++) {
        char qn[QBUF];
        const char *nm = f->tensors[ranges[i].idx].name;
        if (ranges[i].begin != pos) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] %s",
                           path, quote(qn, QBUF, nm, strlen(nm)),
                           (unsigned long long)ranges[i].begin, (unsigned long long)ranges[i].end,
                           ranges[i].begin < pos ? "overlap the previous tensor"
                                                 : "leave a gap after the previous tensor");
            goto out;
        }
        pos = ranges[i].end;
    }
    if (pos != data_len) {
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: %llu trailing bytes after the last tensor (data area must end at EOF)",
                       path, (unsigned long long)(data_len - pos));
        goto out;
    }
    for (size_t i = 0; quant && i < count; i++)
        if ((st = check_blocks(path, &f->tensors[i], err))) goto out;
    qsort(f->tensors, count, sizeof *f->tensors, tensor_name_cmp);
    f->n_tensors = count;
out:
    qtts_free(ranges);
    qtts_json_free(doc);
    return st;
}

qtts_status qtts_st_open(const char *path, qtts_st_file **out, qtts_err *err) {
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return qtts_st_open_fd(fd, path, out, err);
}

qtts_status qtts_st_open_fd(int fd, const char *path, qtts_st_file **out, qtts_err *err) {
    *out = NULL;
    qtts_st_file *f = qtts_calloc(1, sizeof *f);
    if (!f || !(f->path = qtts_strdup(path))) {
        qtts_free(f);
        close(fd);
        return qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
    }
    f->fd = fd;
    qtts_status st;
    struct stat sb;
    if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: file is %llu bytes, shorter than the 8-byte header length "
                       "(file truncated: corrupted or incomplete)",
                       path, (unsigned long long)size);
        goto fail;
    }
    unsigned char lenbuf[8];
    if (pread(f->fd, lenbuf, 8, 0) != 8) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot read the header length", path);
        goto fail;
    }
    uint64_t n = 0, hdr_end;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i];
    if (n > ST_MAX_HEADER) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: header length %llu too large (limit %llu)", path,
                       (unsigned long long)n, ST_MAX_HEADER);
        goto fail;
    }
    if (n < 2) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: header length %llu too small (minimum 2)", path,
                       (unsigned long long)n);
        goto fail;
    }
    if (!qtts_add_ok(n, 8, &hdr_end) || hdr_end > size) {
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: header length %llu exceeds the file size %llu "
                       "(file truncated: corrupted or incomplete)",
                       path, (unsigned long long)n, (unsigned long long)size);
        goto fail;
    }
    if (size > SIZE_MAX) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: file too large to map", path);
        goto fail;
    }
    f->map_len = (size_t)size;
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        st = qtts_fail(err, QTTS_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        goto fail;
    }
    st = parse_header(f, (const char *)f->map + 8, (size_t)n, err);
    if (st) goto fail;
    *out = f;
    return QTTS_OK;
fail:
    qtts_st_close(f);
    return st;
}

size_t qtts_st_count(const qtts_st_file *f) { return f->n_tensors; }

const qtts_tensor *qtts_st_at(const qtts_st_file *f, size_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const char *qtts_st_path(const qtts_st_file *f) { return f->path; }

static ptrdiff_t find_sorted(const qtts_tensor *const *v, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->name, name);
        if (c == 0) return (ptrdiff_t)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

const qtts_tensor *qtts_st_find(const qtts_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ==== sets of files ===================================================== */

struct qtts_st_set {
    char *path;              /* the .safetensors or .index.json that was opened */
    size_t n_files;
    qtts_st_file **files;
    size_t n;                /* tensors over all files */
    const qtts_tensor **all; /* sorted by name */
    uint32_t *file_of;       /* all[i] lives in files[file_of[i]] */
};

void qtts_st_set_close(qtts_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) qtts_st_close(s->files[i]);
    qtts_free(s->files);
    qtts_free(s->all);
    qtts_free(s->file_of);
    qtts_free(s->path);
    qtts_free(s);
}

typedef struct {
    const qtts_tensor *t;
    uint32_t file;
} set_ent;

static int set_ent_cmp(const void *a, const void *b) {
    const set_ent *x = a, *y = b;
    int c = strcmp(x->t->name, y->t->name);
    if (c) return c;
    return x->file < y->file ? -1 : x->file > y->file;
}

/* Merge the tensors of every file into s->all, rejecting a name that
 * appears in two files. */
static qtts_status set_merge(qtts_st_set *s, qtts_err *err) {
    size_t total = 0;
    for (size_t i = 0; i < s->n_files; i++) total += qtts_st_count(s->files[i]);
    set_ent *e = qtts_malloc((total ? total : 1) * sizeof *e);
    s->all = qtts_malloc((total ? total : 1) * sizeof *s->all);
    s->file_of = qtts_malloc((total ? total : 1) * sizeof *s->file_of);
    if (!e || !s->all || !s->file_of) {
        qtts_free(e);
        return qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", s->path);
    }
    size_t k = 0;
    for (size_t i = 0; i < s->n_files; i++)
        for (size_t j = 0; j < qtts_st_count(s->files[i]); j++)
            e[k++] = (set_ent){qtts_st_at(s->files[i], j), (uint32_t)i};
    qsort(e, total, sizeof *e, set_ent_cmp);
    for (size_t i = 0; i < total; i++) {
        if (i && strcmp(e[i].t->name, e[i - 1].t->name) == 0) {
            char qn[QBUF];
            qtts_status st = qtts_fail(
                err, QTTS_ERR_FORMAT, "%s: tensor %s: duplicate tensor in shards %s and %s", s->path,
                quote(qn, QBUF, e[i].t->name, strlen(e[i].t->name)),
                qtts_st_path(s->files[e[i - 1].file]), qtts_st_path(s->files[e[i].file]));
            qtts_free(e);
            return st;
        }
        s->all[i] = e[i].t;
        s->file_of[i] = e[i].file;
    }
    s->n = total;
    qtts_free(e);
    return QTTS_OK;
}

/* A shard name from an index: a plain file name inside dir. */
static bool shard_name_ok(const char *s, size_t len) {
    if (len == 0 || len > 255) return false;
    if (strchr(s, '/') || strchr(s, '\\') || strstr(s, "..")) return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

static qtts_status open_index(qtts_st_set *s, const char *dir, qtts_err *err) {
    char *text = NULL;
    size_t len = 0;
    qtts_status st = qtts_read_file(s->path, ST_MAX_INDEX_BYTES, &text, &len, err);
    if (st) return st;
    qtts_json *doc = qtts_json_parse(text, len, NULL, s->path, err);
    qtts_free(text);
    if (!doc) return err->status;
    const qtts_json *wm = qtts_json_get(doc, "weight_map");
    const char **shard_names = NULL;
    uint32_t *entry_shard = NULL; /* weight_map entry i -> shard index */
    if (doc->type != QTTS_JSON_OBJECT || !wm || wm->type != QTTS_JSON_OBJECT) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: weight_map: missing or not an object", s->path);
        goto out;
    }
    shard_names = qtts_malloc((wm->count ? wm->count : 1) * sizeof *shard_names);
    entry_shard = qtts_malloc((wm->count ? wm->count : 1) * sizeof *entry_shard);
    s->files = qtts_calloc(ST_MAX_SHARDS, sizeof *s->files);
    if (!shard_names || !entry_shard || !s->files) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", s->path);
        goto out;
    }
    /* Distinct shard names, in order of first appearance. */
    for (size_t i = 0; i < wm->count; i++) {
        const qtts_json *v = wm->items[i];
        char qn[QBUF], qv[QBUF];
        if (v->type != QTTS_JSON_STRING) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: weight_map.%s: shard name must be a string",
                           s->path, quote(qn, QBUF, wm->keys[i], wm->key_lens[i]));
            goto out;
        }
        if (!shard_name_ok(v->str, v->str_len)) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: weight_map.%s: shard name %s must be a plain file name "
                           "(no '/', '\\' or '..')",
                           s->path, quote(qn, QBUF, wm->keys[i], wm->key_lens[i]),
                           quote(qv, QBUF, v->str, v->str_len));
            goto out;
        }
        /* Consecutive entries usually name the same shard. */
        size_t j = i && strcmp(shard_names[entry_shard[i - 1]], v->str) == 0 ? entry_shard[i - 1] : 0;
        while (j < s->n_files && strcmp(shard_names[j], v->str)) j++;
        if (j == s->n_files) {
            if (s->n_files == ST_MAX_SHARDS) {
                st = qtts_fail(err, QTTS_ERR_LIMIT, "%s: more than %d shards", s->path, ST_MAX_SHARDS);
                goto out;
            }
            shard_names[s->n_files++] = v->str;
        }
        entry_shard[i] = (uint32_t)j;
    }
    size_t n_names = s->n_files;
    s->n_files = 0;
    for (size_t j = 0; j < n_names; j++) {
        char p[4096];
        if (!qtts_path_join(p, sizeof p, dir, shard_names[j])) {
            st = qtts_fail(err, QTTS_ERR_INVALID, "%s: shard path too long", s->path);
            goto out;
        }
        st = qtts_st_open(p, &s->files[s->n_files], err);
        if (st) goto out;
        s->n_files++;
    }
    if ((st = set_merge(s, err))) goto out;
    /* The index and the shards must agree exactly. */
    for (size_t i = 0; i < wm->count; i++) {
        ptrdiff_t at = find_sorted(s->all, s->n, wm->keys[i]);
        const char *want = wm->items[i]->str;
        if (at < 0 || s->file_of[at] != entry_shard[i]) {
            char qn[QBUF], qv[QBUF];
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: listed in shard %s but missing from it",
                           s->path, quote(qn, QBUF, wm->keys[i], wm->key_lens[i]),
                           quote(qv, QBUF, want, wm->items[i]->str_len));
            goto out;
        }
    }
    if (s->n != wm->count) {
        for (size_t i = 0; i < s->n; i++) {
            if (!qtts_json_get(wm, s->all[i]->name)) {
                char qn[QBUF];
                st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: in shard %s but not in the index",
                               s->path, quote(qn, QBUF, s->all[i]->name, strlen(s->all[i]->name)),
                               qtts_st_path(s->files[s->file_of[i]]));
                goto out;
            }
        }
    }
out:
    qtts_free(entry_shard);
    qtts_free(shard_names);
    qtts_json_free(doc);
    return st;
}

qtts_status qtts_st_set_open(const char *dir, const char *stem, qtts_st_set **out, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local; /* statuses are read back from err below */
    *out = NULL;
    qtts_st_set *s = qtts_calloc(1, sizeof *s);
    if (!s) return qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", dir);
    char single[4096], index[4096], name[512];
    qtts_status st;
    if ((size_t)snprintf(name, sizeof name, "%s.safetensors", stem) >= sizeof name ||
        !qtts_path_join(single, sizeof single, dir, name) ||
        (size_t)snprintf(name, sizeof name, "%s.safetensors.index.json", stem) >= sizeof name ||
        !qtts_path_join(index, sizeof index, dir, name)) {
        st = qtts_fail(err, QTTS_ERR_INVALID, "%s: model path too long", dir);
        goto fail;
    }
    /* Like transformers: a single file wins over an index. */
    bool use_index = access(single, F_OK) != 0 && access(index, F_OK) == 0;
    if (!(s->path = qtts_strdup(use_index ? index : single))) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    if (use_index) {
        st = open_index(s, dir, err);
    } else {
        s->files = qtts_calloc(1, sizeof *s->files);
        if (!s->files) {
            st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        st = qtts_st_open(single, &s->files[0], err);
        if (!st) {
            s->n_files = 1;
            st = set_merge(s, err);
        }
    }
    if (st) goto fail;
    *out = s;
    return QTTS_OK;
fail:
    qtts_st_set_close(s);
    return st;
}

const qtts_tensor *qtts_st_set_find(const qtts_st_set *s, const char *name) {
    ptrdiff_t i = find_sorted(s->all, s->n, name);
    return i < 0 ? NULL : s->all[i];
}

size_t qtts_st_set_count(const qtts_st_set *s) { return s->n; }

const qtts_tensor *qtts_st_set_at(const qtts_st_set *s, size_t i) {
    return i < s->n ? s->all[i] : NULL;
}

const char *qtts_st_set_path(const qtts_st_set *s) { return s->path; }

const char *qtts_st_set_metadata(const qtts_st_set *s, const char *key) {
    return s->n_files ? qtts_st_metadata(s->files[0], key) : NULL;
}

void qtts_tensor_release(const qtts_tensor *t) {
#ifdef MADV_DONTNEED
    const long ps = sysconf(_SC_PAGESIZE);
    if (!t || !t->data || ps <= 0) return;
    const uintptr_t a = (uintptr_t)t->data, e = a + (uintptr_t)t->nbytes;
    const uintptr_t lo = (a + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps,
                    hi = e / (uintptr_t)ps * (uintptr_t)ps;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)t;
#endif
}

static void fmt_shape(char *buf, size_t cap, int rank, const int64_t *shape) {
    size_t n = 0;
    n += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

const qtts_tensor *qtts_st_expect(const qtts_st_set *s, const char *name, unsigned dtype_mask,
                                  int rank, const int64_t *shape, qtts_err *err) {
    char qn[QBUF];
    ptrdiff_t i = find_sorted(s->all, s->n, name);
    if (i < 0) {
        qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: missing", s->path,
                  quote(qn, QBUF, name, strlen(name)));
        return NULL;
    }
    const qtts_tensor *t = s->all[i];
    const char *file = qtts_st_path(s->files[s->file_of[i]]);
    if (dtype_mask && !(dtype_mask & (1u << t->dtype))) {
        char want[64] = "";
        size_t n = 0;
        for (size_t d = 0; d < QTTS_ARRAY_LEN(dtype_table); d++)
            if (dtype_mask & (1u << dtype_table[d].dt))
                n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", n ? "|" : "",
                                      dtype_table[d].name);
        for (size_t d = 0; d < QTTS_ARRAY_LEN(quant_table); d++)
            if (dtype_mask & (1u << quant_table[d].dt))
                n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", n ? "|" : "",
                                      quant_table[d].name);
        qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: dtype %s != expected %s", file,
                  quote(qn, QBUF, name, strlen(name)), qtts_dtype_name(t->dtype), want);
        return NULL;
    }
    bool same = t->rank == rank;
    for (int d = 0; same && d < rank; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char have[200], want[200];
        fmt_shape(have, sizeof have, t->rank, t->shape);
        fmt_shape(want, sizeof want, rank < 0 ? 0 : QTTS_MIN(rank, QTTS_MAX_RANK), shape);
        qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: shape %s != expected %s", file,
                  quote(qn, QBUF, name, strlen(name)), have, want);
        return NULL;
    }
    return t;
}

const float *qtts_tensor_f32(const qtts_tensor *t, float **owned) {
    *owned = NULL;
    if (t->dtype == QTTS_DT_F32 && (uintptr_t)t->data % sizeof(float) == 0) return t->data;
    float *v = qtts_malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    if (!v) return NULL;
    qtts_tensor_to_f32(t, v);
    return *owned = v;
}

/* Index of the first non-finite element of a float tensor, or -1. The
 * test is on the exponent bits (all ones: infinity or NaN), so nothing is
 * converted; elements are read bytewise (the data need not be aligned). */
static int64_t first_non_finite(const qtts_tensor *t) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case QTTS_DT_F32:
        for (uint64_t i = 0; i < t->numel; i++)
            if ((p[4 * i + 3] & 0x7f) == 0x7f && (p[4 * i + 2] & 0x80)) return (int64_t)i;
        return -1;
    case QTTS_DT_BF16:
        for (uint64_t i = 0; i < t->numel; i++)
            if ((p[2 * i + 1] & 0x7f) == 0x7f && (p[2 * i] & 0x80)) return (int64_t)i;
        return -1;
    case QTTS_DT_F16:
        for (uint64_t i = 0; i < t->numel; i++)
            if (nonfinite_half(p + 2 * i)) return (int64_t)i;
        return -1;
    default:
        return -1;   /* integers; Q8_0/Q4_0 scales are checked at open */
    }
}

qtts_status qtts_st_set_check_finite(const qtts_st_set *s, qtts_err *err) {
    for (size_t i = 0; i < s->n; i++) {
        const qtts_tensor *t = s->all[i];
        const int64_t at = first_non_finite(t);
        if (at < 0) continue;
        float v;
        if (t->dtype == QTTS_DT_F32) {
            memcpy(&v, (const unsigned char *)t->data + 4 * at, 4);
        } else {
            uint16_t h;
            memcpy(&h, (const unsigned char *)t->data + 2 * at, 2);
            v = t->dtype == QTTS_DT_BF16 ? qtts_bf16_to_f32(h) : qtts_f16_to_f32(h);
        }
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor %s: non-finite value (%s) at element %lld",
                         qtts_st_path(s->files[s->file_of[i]]), t->name,
                         v != v ? "nan" : v > 0 ? "+inf" : "-inf", (long long)at);
    }
    return QTTS_OK;
}

void qtts_tensor_to_f32(const qtts_tensor *t, float *out) {
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case QTTS_DT_F32:
        memcpy(out, p, (size_t)t->numel * sizeof(float));
        break;
    case QTTS_DT_BF16:
    case QTTS_DT_F16:
        for (uint64_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == QTTS_DT_BF16 ? qtts_bf16_to_f32(h) : qtts_f16_to_f32(h);
        }
        break;
    default:
        QTTS_ASSERT(!"qtts_tensor_to_f32: not a float dtype");
    }
}
