/*
 * test_safetensors.c - the safetensors reader against a valid file, the
 * hostile files of reliability goals rows 1-4, shard indexes, and the tiny
 * HF-layout models under tests/fixtures/models.
 *
 * Every file is written at test time into a mkdtemp directory under /tmp.
 * A hostile file must be rejected with the expected status and a one-line
 * message that names the file and contains a keyword of the broken rule.
 * Robustness sweeps open every truncation and many single-byte mutations of
 * the valid file: each either fails cleanly or yields tensors whose bytes
 * can all be read.
 *
 * The tiny-model check derives every tensor name and shape of spec 3.2/3.3
 * from the parsed configs and requires the files to hold exactly those.
 */
#include "harness.h"

#include "base/json.h"
#include "io/config.h"
#include "io/safetensors.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static void path_of(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

/* 8-byte little-endian N, then hdr_len header bytes, then data (zeros when
 * data is NULL). */
static void write_st_n(const char *path, uint64_t n, const char *hdr, size_t hdr_len,
                       const void *data, size_t data_len) {
    size_t total = 8 + hdr_len + data_len;
    unsigned char *buf = calloc(1, total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, hdr, hdr_len);
    if (data) memcpy(buf + 8 + hdr_len, data, data_len);
    write_bytes(path, buf, total);
    free(buf);
}

static void write_st(const char *path, const char *hdr, const void *data, size_t data_len) {
    write_st_n(path, strlen(hdr), hdr, strlen(hdr), data, data_len);
}

/* ==== the valid file ==================================================== */

/* Data area, in offset order:
 *   [0,24)  w.f32   F32  [2,3]  0, 1.5, 3, ... 7.5
 *   [24,32) b.bf16  BF16 [4]    1, -2, 0.5, 3
 *   [32,36) h.f16   F16  [2]    1, -2
 *   [36,44) ids.i64 I64  []     42 (rank 0: one element)
 *   [44,44) empty   F32  [0,5]
 *   [44,47) u8      U8   [3]    7, 8, 9
 * The header lists them out of offset order. */
static const char valid_header[] =
    "{\"u8\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[44,47]},"
    "\"ids.i64\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[36,44]},"
    "\"w.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[44,44]},"
    "\"h.f16\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
    "\"__metadata__\":{\"format\":\"pt\",\"note\":\"\\u00e9\"},"
    "\"b.bf16\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}";

static size_t valid_data(unsigned char *d) {
    for (int i = 0; i < 6; i++) {
        float v = 1.5f * (float)i;
        memcpy(d + 4 * i, &v, 4);
    }
    const float bf[4] = {1, -2, 0.5f, 3};
    for (int i = 0; i < 4; i++) {
        uint16_t h = qtts_f32_to_bf16(bf[i]);
        memcpy(d + 24 + 2 * i, &h, 2);
    }
    const uint16_t hf[2] = {0x3c00, 0xc000};
    memcpy(d + 32, hf, 4);
    int64_t id = 42;
    memcpy(d + 36, &id, 8);
    d[44] = 7, d[45] = 8, d[46] = 9;
    return 47;
}

/* Writes the valid file (header padded to 8 bytes like writers do). */
static size_t write_valid(const char *path, unsigned char *out_file, size_t cap) {
    char hdr[1024];
    size_t hl = strlen(valid_header);
    memcpy(hdr, valid_header, hl);
    while (hl % 8) hdr[hl++] = ' ';
    unsigned char data[64];
    size_t dl = valid_data(data);
    write_st_n(path, hl, hdr, hl, data, dl);
    size_t total = 8 + hl + dl;
    if (out_file && total <= cap) {
        for (int i = 0; i < 8; i++) out_file[i] = (unsigned char)((uint64_t)hl >> (8 * i));
        memcpy(out_file + 8, hdr, hl);
        memcpy(out_file + 8 + hl, data, dl);
    }
    return total;
}

static void test_valid_roundtrip(void) {
    char p[256];
    path_of(p, sizeof p, "valid.safetensors");
    write_valid(p, NULL, 0);
    qtts_st_file *f = NULL;
    qtts_err err = {0};
    qtts_status st_ = qtts_st_open(p, &f, &err);
    REQUIRE(st_ == QTTS_OK, "%s", err.msg); /* REQUIRE evaluates its condition twice */
    CHECK(qtts_st_count(f) == 6, "count %zu", qtts_st_count(f));
    CHECK(!strcmp(qtts_st_path(f), p), "path");
    /* sorted by name */
    for (size_t i = 1; i < qtts_st_count(f); i++)
        CHECK(strcmp(qtts_st_at(f, i - 1)->name, qtts_st_at(f, i)->name) < 0, "order at %zu", i);
    CHECK(qtts_st_at(f, 6) == NULL, "at out of range");

    const qtts_tensor *w = qtts_st_find(f, "w.f32");
    REQUIRE(w && w->dtype == QTTS_DT_F32 && w->rank == 2 && w->shape[0] == 2 && w->shape[1] == 3 &&
                w->numel == 6 && w->nbytes == 24,
            "w.f32 metadata");
    float fv[6];
    qtts_tensor_to_f32(w, fv);
    for (int i = 0; i < 6; i++) CHECK(fv[i] == 1.5f * (float)i, "w[%d] = %g", i, fv[i]);

    const qtts_tensor *b = qtts_st_find(f, "b.bf16");
    REQUIRE(b && b->dtype == QTTS_DT_BF16 && b->numel == 4, "b.bf16");
    qtts_tensor_to_f32(b, fv);
    CHECK(fv[0] == 1 && fv[1] == -2 && fv[2] == 0.5f && fv[3] == 3, "bf16 values");

    const qtts_tensor *h = qtts_st_find(f, "h.f16");
    REQUIRE(h && h->dtype == QTTS_DT_F16, "h.f16");
    qtts_tensor_to_f32(h, fv);
    CHECK(fv[0] == 1 && fv[1] == -2, "f16 values");

    const qtts_tensor *id = qtts_st_find(f, "ids.i64");
    REQUIRE(id && id->rank == 0 && id->numel == 1 && id->nbytes == 8, "scalar");
    int64_t v;
    memcpy(&v, id->data, 8);
    CHECK(v == 42, "i64 %lld", (long long)v);

    const qtts_tensor *e = qtts_st_find(f, "empty");
    CHECK(e && e->numel == 0 && e->nbytes == 0 && e->rank == 2, "zero-size tensor");
    const qtts_tensor *u = qtts_st_find(f, "u8");
    CHECK(u && u->dtype == QTTS_DT_U8 && ((const unsigned char *)u->data)[2] == 9, "u8");
    CHECK(qtts_st_find(f, "__metadata__") == NULL && qtts_st_find(f, "nope") == NULL, "absent");
    CHECK(!strcmp(qtts_dtype_name(QTTS_DT_BF16), "BF16") && qtts_dtype_size(QTTS_DT_I64) == 8,
          "dtype helpers");
    qtts_st_close(f);
    qtts_st_close(NULL);
}

static void test_zero_tensor_files(void) {
    const char *hdrs[] = {"{}", "{\"__metadata__\":{}}", "{\"__metadata__\":{\"a\":\"b\"}}   "};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(hdrs); i++) {
        char p[256];
        path_of(p, sizeof p, "zero.safetensors");
        write_st(p, hdrs[i], NULL, 0);
        qtts_st_file *f = NULL;
        qtts_err err = {0};
        CHECK(qtts_st_open(p, &f, &err) == QTTS_OK && qtts_st_count(f) == 0, "%s: %s", hdrs[i], err.msg);
        qtts_st_close(f);
    }
}

static void test_unsorted_and_zero_size_reuse_accepted(void) {
    /* offsets listed in reverse; two zero-size tensors at the same offset
     * as the start of a real tensor (the reference reader accepts this) */
    const char *hdr = "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                      "\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                      "\"z2\":{\"dtype\":\"I8\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    float d[3] = {1, 2, 3};
    char p[256];
    path_of(p, sizeof p, "unsorted.safetensors");
    write_st(p, hdr, d, sizeof d);
    qtts_st_file *f = NULL;
    qtts_err err = {0};
    qtts_status st_ = qtts_st_open(p, &f, &err);
    REQUIRE(st_ == QTTS_OK, "%s", err.msg); /* REQUIRE evaluates its condition twice */
    float v;
    qtts_tensor_to_f32(qtts_st_find(f, "c"), &v);
    CHECK(v == 3, "c = %g", v);
    qtts_tensor_to_f32(qtts_st_find(f, "a"), &v);
    CHECK(v == 1, "a = %g", v);
    qtts_st_close(f);
}

/* ==== hostile files ===================================================== */

typedef struct {
    const char *name;
    const char *header;  /* NULL: write `short_len` raw bytes instead */
    uint64_t n;          /* header length to declare; 0 = strlen(header) */
    size_t data_len;     /* zero bytes after the header */
    const char *keyword; /* must appear in the message */
    qtts_status status;
} st_case;

/* one U8 [1] tensor named name (JSON source text) */
#define T1x(name) "{\"" name "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"
#define T1(dt, shape, b, e) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}}"

static const st_case st_cases[] = {
    {"n_huge", "{}", UINT64_MAX, 0, "too large", QTTS_ERR_FORMAT},
    {"n_4gb_on_1kb", "{}", 4000000000ull, 1024, "too large", QTTS_ERR_FORMAT},
    {"n_just_over_cap", "{}", 100000001ull, 0, "too large", QTTS_ERR_FORMAT},
    {"n_past_eof", "{}", 1000, 0, "exceeds the file size", QTTS_ERR_FORMAT},
    {"n_past_eof_by_one", "{}", 3, 0, "exceeds the file size", QTTS_ERR_FORMAT},
    {"n_one", "{}", 1, 0, "too small", QTTS_ERR_FORMAT},
    {"n_zero", "{}", 0, 0, "too small", QTTS_ERR_FORMAT}, /* N = 0: see test_hostile_files */
    {"first_byte_space", " {}", 0, 0, "does not start with '{'", QTTS_ERR_FORMAT},
    {"first_byte_bracket", "[]", 0, 0, "does not start with '{'", QTTS_ERR_FORMAT},
    {"header_not_utf8", "{\"t\xff\":{}}", 0, 0, "not valid UTF-8", QTTS_ERR_FORMAT},
    {"header_overlong_utf8", "{\"\xc0\xaf\":{}}", 0, 0, "not valid UTF-8", QTTS_ERR_FORMAT},
    {"header_invalid_json", "{\"t\":}", 0, 0, "header JSON", QTTS_ERR_FORMAT},
    {"header_trailing_garbage", "{} x", 0, 0, "trailing characters", QTTS_ERR_FORMAT},
    {"header_unterminated", "{\"t", 0, 0, "unterminated string", QTTS_ERR_FORMAT},
    {"duplicate_keys",
     "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     0, 2, "duplicate key", QTTS_ERR_FORMAT},
    {"duplicate_field", "{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
     0, 1, "duplicate key", QTTS_ERR_FORMAT},
    {"negative_offset", T1("U8", "[4]", "-4", "0"), 0, 4, "[0, 2^53)", QTTS_ERR_FORMAT},
    {"negative_end", T1("U8", "[0]", "0", "-1"), 0, 0, "[0, 2^53)", QTTS_ERR_FORMAT},
    {"end_before_begin", T1("U8", "[4]", "8", "4"), 0, 8, "< begin", QTTS_ERR_FORMAT},
    {"overlap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     0, 12, "overlap", QTTS_ERR_FORMAT},
    {"overlap_same_range",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     0, 8, "overlap", QTTS_ERR_FORMAT},
    {"zero_size_inside_tensor",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
     0, 8, "overlap", QTTS_ERR_FORMAT},
    {"gap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
     0, 20, "gap", QTTS_ERR_FORMAT},
    {"gap_at_start", T1("U8", "[4]", "4", "8"), 0, 8, "gap", QTTS_ERR_FORMAT},
    {"trailing_bytes", T1("U8", "[4]", "0", "4"), 0, 5, "trailing bytes", QTTS_ERR_FORMAT},
    {"trailing_bytes_no_tensors", "{}", 0, 16, "trailing bytes", QTTS_ERR_FORMAT},
    {"numel_overflow", T1("U8", "[4294967296,4294967296,4294967296]", "0", "0"), 0, 0,
     "element count overflows", QTTS_ERR_FORMAT},
    {"numel_wraps_to_zero", T1("F32", "[67108864,67108864,4096]", "0", "0"), 0, 0,
     "element count overflows", QTTS_ERR_FORMAT},
    {"nbytes_overflow", T1("F32", "[2147483648,2147483648]", "0", "0"), 0, 0, "byte size overflows",
     QTTS_ERR_FORMAT},
    {"unknown_dtype", T1("F64", "[1]", "0", "8"), 0, 8, "unsupported dtype", QTTS_ERR_FORMAT},
    {"lowercase_dtype", T1("bf16", "[1]", "0", "2"), 0, 2, "unsupported dtype", QTTS_ERR_FORMAT},
    {"dtype_not_string", "{\"t\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     "dtype must be a string", QTTS_ERR_FORMAT},
    {"rank_9", T1("U8", "[1,1,1,1,1,1,1,1,1]", "0", "1"), 0, 1, "rank 9", QTTS_ERR_FORMAT},
    {"rank_17", T1("U8", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "0", "1"), 0, 1, "too many items",
     QTTS_ERR_FORMAT},
    {"byte_count_mismatch", T1("F32", "[3]", "0", "8"), 0, 8, "byte count mismatch", QTTS_ERR_FORMAT},
    {"byte_count_mismatch_big", T1("F32", "[3]", "0", "16"), 0, 16, "byte count mismatch",
     QTTS_ERR_FORMAT},
    {"truncated_data", T1("F32", "[4]", "0", "16"), 0, 8, "truncated", QTTS_ERR_FORMAT},
    {"offset_2p53", T1("U8", "[4]", "9007199254740992", "9007199254740996"), 0, 0, "[0, 2^53)",
     QTTS_ERR_FORMAT},
    {"offset_huge", T1("U8", "[0]", "18446744073709551615", "18446744073709551615"), 0, 0,
     "[0, 2^53)", QTTS_ERR_FORMAT},
    {"dim_2p53", T1("U8", "[9007199254740992]", "0", "0"), 0, 0, "not an integer in [0, 2^53)",
     QTTS_ERR_FORMAT},
    {"dim_float", T1("U8", "[2.0]", "0", "2"), 0, 2, "not an integer", QTTS_ERR_FORMAT},
    {"dim_exponent", T1("U8", "[2e0]", "0", "2"), 0, 2, "not an integer", QTTS_ERR_FORMAT},
    {"dim_string", T1("U8", "[\"2\"]", "0", "2"), 0, 2, "not an integer", QTTS_ERR_FORMAT},
    {"dim_negative", T1("U8", "[-2]", "0", "0"), 0, 0, "not an integer", QTTS_ERR_FORMAT},
    {"dim_bool", T1("U8", "[true]", "0", "1"), 0, 1, "not an integer", QTTS_ERR_FORMAT},
    {"offset_float", T1("U8", "[2]", "0.0", "2"), 0, 2, "[0, 2^53)", QTTS_ERR_FORMAT},
    {"shape_nested", T1("U8", "[[2]]", "0", "2"), 0, 2, "nesting", QTTS_ERR_FORMAT},
    {"shape_not_array", T1("U8", "2", "0", "2"), 0, 2, "shape must be an array", QTTS_ERR_FORMAT},
    {"offsets_three", "{\"t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1,2]}}", 0, 2,
     "array of 2 integers", QTTS_ERR_FORMAT},
    {"offsets_not_array", "{\"t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":\"0-2\"}}", 0, 2,
     "array of 2 integers", QTTS_ERR_FORMAT},
    {"extra_field", "{\"t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2],\"x\":1}}", 0, 2,
     "unexpected field", QTTS_ERR_FORMAT},
    {"missing_field", "{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,2]}}", 0, 2, "missing field shape",
     QTTS_ERR_FORMAT},
    {"entry_not_object", "{\"t\":[0,2]}", 0, 2, "entry must be an object", QTTS_ERR_FORMAT},
    {"metadata_number_value", "{\"__metadata__\":{\"a\":1}}", 0, 0, "__metadata__", QTTS_ERR_FORMAT},
    {"metadata_nested", "{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, 0, "__metadata__",
     QTTS_ERR_FORMAT},
    {"metadata_string", "{\"__metadata__\":\"pt\"}", 0, 0, "__metadata__", QTTS_ERR_FORMAT},
    {"metadata_null", "{\"__metadata__\":null}", 0, 0, "__metadata__", QTTS_ERR_FORMAT},
    {"header_huge_number", T1("U8", "[1e400]", "0", "1"), 0, 1, "out of range", QTTS_ERR_FORMAT},
    {"header_nul_byte", "{\"t\0\":1}", 9, 0, "control character", QTTS_ERR_FORMAT},
    /* names that would drive a terminal when listed (inspect) or quoted */
    {"name_escape", T1x("a\\u001b[31m"), 0, 1, "name contains a control character", QTTS_ERR_FORMAT},
    {"name_bell", T1x("a\\u0007"), 0, 1, "name contains a control character", QTTS_ERR_FORMAT},
    {"name_del", T1x("a\\u007f"), 0, 1, "name contains a control character", QTTS_ERR_FORMAT},
    {"name_c1_csi", T1x("a\xc2\x9b" "31m"), 0, 1, "name contains a control character", QTTS_ERR_FORMAT},
    {"metadata_key_newline", "{\"__metadata__\":{\"a\\nb\":\"x\"}}", 0, 0,
     "__metadata__ key \"a\\nb\" contains a control character", QTTS_ERR_FORMAT},
};

static void check_reject(const char *path, qtts_status want, const char *keyword, const char *label) {
    qtts_st_file *f = NULL;
    qtts_err err = {0};
    qtts_status st = qtts_st_open(path, &f, &err);
    CHECK(st == want, "%s: status %s, want %s (%s)", label, qtts_status_name(st), qtts_status_name(want),
          err.msg);
    CHECK(f == NULL, "%s: handle returned on failure", label);
    CHECK(strstr(err.msg, path) == err.msg, "%s: message does not start with the path: %s", label,
          err.msg);
    CHECK(strstr(err.msg, keyword) != NULL, "%s: keyword '%s' not in: %s", label, keyword, err.msg);
    CHECK(strchr(err.msg, '\n') == NULL, "%s: multi-line message", label);
    if (getenv("QTTS_TEST_VERBOSE")) fprintf(stderr, "  %s -> %s\n", label, err.msg);
    qtts_st_close(f);
}

static void test_hostile_files(void) {
    size_t n = QTTS_ARRAY_LEN(st_cases);
    CHECK(n >= 20, "at least 20 hostile files (%zu)", n);
    for (size_t i = 0; i < n; i++) {
        const st_case *c = &st_cases[i];
        char p[256];
        snprintf(p, sizeof p, "%s/%s.safetensors", g_dir, c->name);
        /* Two cases need what the table cannot say: a header with an
         * embedded NUL (its length is given as n), and a declared N of 0. */
        bool nul = !strcmp(c->name, "header_nul_byte");
        size_t hl = nul ? (size_t)c->n : strlen(c->header);
        uint64_t n_decl = !strcmp(c->name, "n_zero") ? 0 : c->n ? c->n : hl;
        write_st_n(p, n_decl, c->header, hl, NULL, c->data_len);
        check_reject(p, c->status, c->keyword, c->name);
    }
}

/* 16384 tensors (plus __metadata__) is the cap; one more is refused while
 * parsing, before the tree grows further. */
static void test_tensor_count_cap(void) {
    for (int n = 16384; n <= 16385; n++) {
        size_t cap = (size_t)n * 64 + 64, len = 0;
        char *h = malloc(cap);
        REQUIRE(h, "malloc");
        len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(h + len, cap - len,
                                    ",\"t%05d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", i);
        len += (size_t)snprintf(h + len, cap - len, "}");
        char p[256];
        path_of(p, sizeof p, "many.safetensors");
        write_st(p, h, NULL, 0);
        free(h);
        if (n == 16384) {
            qtts_st_file *f = NULL;
            qtts_err err = {0};
            qtts_status st = qtts_st_open(p, &f, &err);
            CHECK(st == QTTS_OK && qtts_st_count(f) == 16384, "16384 tensors: %s", err.msg);
            qtts_st_close(f);
        } else {
            check_reject(p, QTTS_ERR_FORMAT, "too many keys", "16385 tensors");
        }
    }
}

static void test_short_and_odd_files(void) {
    char p[256];
    for (size_t len = 0; len < 8; len++) {
        path_of(p, sizeof p, "short.safetensors");
        write_bytes(p, "\x02\0\0\0\0\0\0", len);
        check_reject(p, QTTS_ERR_FORMAT, "shorter than the 8-byte", "short file");
    }
    path_of(p, sizeof p, "does-not-exist.safetensors");
    check_reject(p, QTTS_ERR_IO, "cannot open", "missing file");
    check_reject(g_dir, QTTS_ERR_IO, "not a regular file", "directory");
}

/* Every proper prefix of the valid file is rejected; the whole file opens.
 * The file is cut shorter one byte at a time. */
static void test_truncations(void) {
    unsigned char file[2048];
    char p[256];
    path_of(p, sizeof p, "trunc.safetensors");
    size_t total = write_valid(p, file, sizeof file);
    for (size_t len = total; len-- > 0;) {
        if (truncate(p, (off_t)len) != 0) {
            CHECK(0, "truncate");
            break;
        }
        qtts_st_file *f = NULL;
        qtts_err err = {0};
        qtts_status st = qtts_st_open(p, &f, &err);
        CHECK(st == QTTS_ERR_FORMAT && !f && strstr(err.msg, p), "prefix %zu: %s", len, err.msg);
        qtts_st_close(f);
    }
    write_bytes(p, file, total);
    qtts_st_file *f = NULL;
    qtts_err err = {0};
    CHECK(qtts_st_open(p, &f, &err) == QTTS_OK, "full file: %s", err.msg);
    qtts_st_close(f);
}

/* Single-byte mutations of the whole valid file: no crash, and every
 * accepted variant's tensors lie inside the file (read every byte). The
 * byte is patched in place with pwrite (rewriting whole files thousands of
 * times is slow on a journaling file system). */
static void test_mutations(void) {
    unsigned char file[2048];
    char p[256];
    path_of(p, sizeof p, "mut.safetensors");
    size_t total = write_valid(p, file, sizeof file);
    int fd = open(p, O_WRONLY);
    REQUIRE(fd >= 0, "open %s", p);
    static const unsigned char vals[] = {0x00, 0xff, '"', '9', '{', ',', 0x80, '-'};
    size_t accepted = 0, rejected = 0;
    for (size_t pos = 0; pos < total; pos++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            if (file[pos] == vals[k]) continue;
            if (pwrite(fd, &vals[k], 1, (off_t)pos) != 1) {
                CHECK(0, "pwrite");
                continue;
            }
            qtts_st_file *f = NULL;
            qtts_err err = {0};
            if (qtts_st_open(p, &f, &err) == QTTS_OK) {
                accepted++;
                unsigned sum = 0;
                for (size_t i = 0; i < qtts_st_count(f); i++) {
                    const qtts_tensor *t = qtts_st_at(f, i);
                    const unsigned char *d = t->data;
                    for (uint64_t b = 0; b < t->nbytes; b++) sum += d[b];
                    CHECK(t->nbytes <= total, "tensor larger than the file");
                }
                (void)sum;
                qtts_st_close(f);
            } else {
                rejected++;
                CHECK(strstr(err.msg, p) == err.msg && err.status != QTTS_OK, "message: %s", err.msg);
            }
        }
        if (pwrite(fd, &file[pos], 1, (off_t)pos) != 1) CHECK(0, "pwrite restore");
    }
    close(fd);
    CHECK(rejected > 0 && accepted > 0, "mutations: %zu accepted, %zu rejected", accepted, rejected);
}

/* ==== sets and shard indexes ============================================ */

static void make_dir(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_dir, name);
    mkdir(out, 0700);
}

static void write_in(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_bytes(p, text, strlen(text));
}

static void write_st_in(const char *dir, const char *name, const char *hdr, const void *data, size_t dl) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_st(p, hdr, data, dl);
}

#define SHARD_A                                                                   \
    "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"            \
    "\"y\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}"
#define SHARD_B "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"

static void test_set_single_and_expect(void) {
    char d[256];
    make_dir(d, sizeof d, "single");
    unsigned char data[16] = {0};
    write_st_in(d, "model.safetensors", SHARD_A, data, 16);
    qtts_st_set *s = NULL;
    qtts_err err = {0};
    qtts_status st_ = qtts_st_set_open(d, "model", &s, &err);
    REQUIRE(st_ == QTTS_OK, "%s", err.msg); /* REQUIRE evaluates its condition twice */
    CHECK(qtts_st_set_count(s) == 2 && !strcmp(qtts_st_set_at(s, 0)->name, "x") &&
              !strcmp(qtts_st_set_at(s, 1)->name, "y") && qtts_st_set_at(s, 2) == NULL,
          "set listing");
    CHECK(strstr(qtts_st_set_path(s), "single/model.safetensors") != NULL, "set path");

    const int64_t sx[1] = {2}, sy[2] = {2, 2}, bad[2] = {2, 3};
    CHECK(qtts_st_expect(s, "x", 1u << QTTS_DT_F32, 1, sx, &err) != NULL, "expect x: %s", err.msg);
    CHECK(qtts_st_expect(s, "y", 0, 2, sy, &err) != NULL, "expect y any dtype: %s", err.msg);
    CHECK(qtts_st_expect(s, "y", (1u << QTTS_DT_BF16) | (1u << QTTS_DT_F32), 2, sy, &err) != NULL,
          "expect y mask");

    CHECK(!qtts_st_expect(s, "y", 1u << QTTS_DT_F32, 2, sy, &err) &&
              strstr(err.msg, "single/model.safetensors: tensor \"y\": dtype BF16 != expected F32"),
          "dtype mismatch: %s", err.msg);
    CHECK(!qtts_st_expect(s, "y", 0, 2, bad, &err) &&
              strstr(err.msg, "model.safetensors: tensor \"y\": shape [2,2] != expected [2,3]"),
          "shape mismatch: %s", err.msg);
    CHECK(!qtts_st_expect(s, "y", 0, 1, sx, &err) && strstr(err.msg, "shape [2,2] != expected [2]"),
          "rank mismatch: %s", err.msg);
    CHECK(!qtts_st_expect(s, "w", 0, 1, sx, &err) &&
              strstr(err.msg, "model.safetensors: tensor \"w\": missing"),
          "missing: %s", err.msg);
    qtts_st_set_close(s);
    qtts_st_set_close(NULL);

    make_dir(d, sizeof d, "empty_dir");
    CHECK(qtts_st_set_open(d, "model", &s, &err) == QTTS_ERR_IO && !s && strstr(err.msg, "model.safetensors"),
          "no files: %s", err.msg);
}

/* qtts_st_set_check_finite: each float dtype's NaN and infinities are
 * found and named; the largest finite values, subnormals and integer
 * tensors (any bits) are not flagged. */
#define FIN_HDR                                                                    \
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"              \
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]},"             \
    "\"c\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[18,24]},"              \
    "\"d\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[24,32]}}"

static void test_check_finite(void) {
    /* a: FLT_MAX, -FLT_MAX, the smallest subnormal; b: bf16 max, -max, 1;
     * c: half max (65504), -max, a subnormal; d: int32 0x7f800000 twice */
    const unsigned char clean[32] = {0xff, 0xff, 0x7f, 0x7f, 0xff, 0xff, 0x7f, 0xff, 1, 0, 0, 0,
                                     0x7f, 0x7f, 0x7f, 0xff, 0x80, 0x3f,
                                     0xff, 0x7b, 0xff, 0xfb, 1, 0,
                                     0, 0, 0x80, 0x7f, 0, 0, 0x80, 0x7f};
    static const struct {
        int at;              /* byte to change */
        unsigned char v[4];
        int n;
        const char *want;
    } bad[] = {
        {4, {0, 0, 0xc0, 0x7f}, 4, "tensor a: non-finite value (nan) at element 1"},
        {8, {0, 0, 0x80, 0x7f}, 4, "tensor a: non-finite value (+inf) at element 2"},
        {12, {0x80, 0xff}, 2, "tensor b: non-finite value (-inf) at element 0"},
        {16, {0xc1, 0x7f}, 2, "tensor b: non-finite value (nan) at element 2"},
        {20, {0x00, 0x7c}, 2, "tensor c: non-finite value (+inf) at element 1"},
        {22, {0x01, 0xfe}, 2, "tensor c: non-finite value (nan) at element 2"},
    };
    char d[256];
    make_dir(d, sizeof d, "finite");
    qtts_err err = {0};
    qtts_st_set *s = NULL;
    write_st_in(d, "model.safetensors", FIN_HDR, clean, sizeof clean);
    qtts_status st_ = qtts_st_set_open(d, "model", &s, &err);
    REQUIRE(st_ == QTTS_OK, "%s", err.msg);
    CHECK(qtts_st_set_check_finite(s, &err) == QTTS_OK, "clean file flagged: %s", err.msg);
    qtts_st_set_close(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char data[32];
        memcpy(data, clean, sizeof data);
        memcpy(data + bad[i].at, bad[i].v, (size_t)bad[i].n);
        write_st_in(d, "model.safetensors", FIN_HDR, data, sizeof data);
        s = NULL;
        st_ = qtts_st_set_open(d, "model", &s, &err);
        REQUIRE(st_ == QTTS_OK, "%s", err.msg);
        CHECK(qtts_st_set_check_finite(s, &err) == QTTS_ERR_FORMAT && strstr(err.msg, bad[i].want) &&
                  strstr(err.msg, "finite/model.safetensors"),
              "case %zu: %s", i, err.msg);
        qtts_st_set_close(s);
    }
}

static void test_set_shards(void) {
    char d[256];
    make_dir(d, sizeof d, "sharded");
    unsigned char data[16] = {0};
    float zf = 5;
    write_st_in(d, "model-00001-of-00002.safetensors", SHARD_A, data, 16);
    write_st_in(d, "model-00002-of-00002.safetensors", SHARD_B, &zf, 4);
    write_in(d, "model.safetensors.index.json",
             "{\"metadata\":{\"total_size\":20},\"weight_map\":{"
             "\"x\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00002-of-00002.safetensors\","
             "\"y\":\"model-00001-of-00002.safetensors\"}}");
    qtts_st_set *s = NULL;
    qtts_err err = {0};
    qtts_status st_ = qtts_st_set_open(d, "model", &s, &err);
    REQUIRE(st_ == QTTS_OK, "%s", err.msg); /* REQUIRE evaluates its condition twice */
    CHECK(qtts_st_set_count(s) == 3, "count");
    const qtts_tensor *z = qtts_st_set_find(s, "z");
    float v = 0;
    REQUIRE(z, "z found");
    qtts_tensor_to_f32(z, &v);
    CHECK(v == 5, "z value");
    const int64_t one[1] = {1}, two[1] = {2};
    CHECK(qtts_st_expect(s, "z", 1u << QTTS_DT_F32, 1, one, &err) != NULL, "expect z");
    /* mismatch names the shard that holds the tensor */
    CHECK(!qtts_st_expect(s, "z", 0, 1, two, &err) && strstr(err.msg, "model-00002-of-00002.safetensors: tensor"),
          "shard named: %s", err.msg);
    CHECK(!qtts_st_expect(s, "q", 0, 1, two, &err) && strstr(err.msg, "model.safetensors.index.json: tensor"),
          "missing names the index: %s", err.msg);
    qtts_st_set_close(s);
}

typedef struct {
    const char *name;
    const char *index;
    const char *keyword;
    qtts_status status;
} index_case;

#define WM(body) "{\"weight_map\":{" body "}}"
#define A_ "\"a.safetensors\""
#define B_ "\"b.safetensors\""

static const index_case index_cases[] = {
    {"dotdot", WM("\"x\":\"../x.safetensors\""), "plain file name", QTTS_ERR_FORMAT},
    {"dotdot_only", WM("\"x\":\"..\""), "plain file name", QTTS_ERR_FORMAT},
    {"slash", WM("\"x\":\"sub/a.safetensors\""), "plain file name", QTTS_ERR_FORMAT},
    {"absolute", WM("\"x\":\"/etc/passwd\""), "plain file name", QTTS_ERR_FORMAT},
    {"backslash", WM("\"x\":\"..\\\\a.safetensors\""), "plain file name", QTTS_ERR_FORMAT},
    {"empty_name", WM("\"x\":\"\""), "plain file name", QTTS_ERR_FORMAT},
    {"not_string", WM("\"x\":1"), "must be a string", QTTS_ERR_FORMAT},
    {"no_weight_map", "{\"metadata\":{}}", "weight_map", QTTS_ERR_FORMAT},
    {"weight_map_array", "{\"weight_map\":[]}", "weight_map", QTTS_ERR_FORMAT},
    {"invalid_json", "{\"weight_map\":{\"x\":" A_ ",}}", "object key must be a string", QTTS_ERR_FORMAT},
    {"duplicate_key", WM("\"x\":" A_ ",\"x\":" B_), "duplicate key", QTTS_ERR_FORMAT},
    {"dup_tensor_across_shards", WM("\"x\":" A_ ",\"y\":" A_ ",\"z\":" B_), "duplicate tensor",
     QTTS_ERR_FORMAT},
    {"missing_from_shard", WM("\"x\":" A_ ",\"y\":" A_ ",\"w\":" A_), "missing from it", QTTS_ERR_FORMAT},
    {"wrong_shard", WM("\"x\":" B_ ",\"y\":" A_), "missing from it", QTTS_ERR_FORMAT},
    {"not_in_index", WM("\"x\":" A_), "not in the index", QTTS_ERR_FORMAT},
    {"missing_shard_file", WM("\"x\":\"nope.safetensors\""), "nope.safetensors: cannot open", QTTS_ERR_IO},
    {"hostile_shard", WM("\"x\":\"bad.safetensors\""), "bad.safetensors: header length", QTTS_ERR_FORMAT},
};

static void test_index_rejections(void) {
    for (size_t i = 0; i < QTTS_ARRAY_LEN(index_cases); i++) {
        const index_case *c = &index_cases[i];
        char d[256], idx[512];
        make_dir(d, sizeof d, c->name);
        unsigned char data[16] = {0};
        write_st_in(d, "a.safetensors", SHARD_A, data, 16);
        /* b holds y again for the cross-shard duplicate case */
        if (!strcmp(c->name, "dup_tensor_across_shards"))
            write_st_in(d, "b.safetensors",
                        "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        data, 8);
        else
            write_st_in(d, "b.safetensors", SHARD_B, data, 4);
        snprintf(idx, sizeof idx, "%s/bad.safetensors", d);
        write_st_n(idx, 1u << 30, "{}", 2, NULL, 0);
        write_in(d, "model.safetensors.index.json", c->index);
        snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", d);
        qtts_st_set *s = NULL;
        qtts_err err = {0};
        qtts_status st = qtts_st_set_open(d, "model", &s, &err);
        CHECK(st == c->status && !s, "%s: status %s (%s)", c->name, qtts_status_name(st), err.msg);
        CHECK(strstr(err.msg, d) == err.msg, "%s: message does not name the file: %s", c->name, err.msg);
        CHECK(strstr(err.msg, c->keyword) != NULL, "%s: keyword '%s' not in: %s", c->name, c->keyword,
              err.msg);
        if (getenv("QTTS_TEST_VERBOSE")) fprintf(stderr, "  %s -> %s\n", c->name, err.msg);
        qtts_st_set_close(s);
    }
}

/* ==== tiny HF-layout models ============================================= */

typedef struct {
    char name[192];
    int rank;
    int64_t shape[4];
} expected_tensor;

typedef struct {
    expected_tensor *v;
    size_t n, cap;
} expected_list;

static void ex_add(expected_list *l, int rank, int64_t a, int64_t b, int64_t c, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void ex_add(expected_list *l, int rank, int64_t a, int64_t b, int64_t c, const char *fmt, ...) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    expected_tensor *e = &l->v[l->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
    e->rank = rank;
    e->shape[0] = a, e->shape[1] = b, e->shape[2] = c;
}
#define E1(l, a, ...) ex_add(l, 1, a, 0, 0, __VA_ARGS__)
#define E2(l, a, b, ...) ex_add(l, 2, a, b, 0, __VA_ARGS__)
#define E3(l, a, b, c, ...) ex_add(l, 3, a, b, c, __VA_ARGS__)

/* One decoder layer of the talker / code predictor (spec 3.2). */
static void ex_stack_layers(expected_list *l, const char *prefix, const qtts_stack_config *s) {
    int64_t H = s->hidden, I = s->inter, q = (int64_t)s->heads * s->head_dim,
            kv = (int64_t)s->kv_heads * s->head_dim;
    for (int i = 0; i < s->layers; i++) {
        E1(l, H, "%smodel.layers.%d.input_layernorm.weight", prefix, i);
        E2(l, q, H, "%smodel.layers.%d.self_attn.q_proj.weight", prefix, i);
        E2(l, kv, H, "%smodel.layers.%d.self_attn.k_proj.weight", prefix, i);
        E2(l, kv, H, "%smodel.layers.%d.self_attn.v_proj.weight", prefix, i);
        E2(l, H, q, "%smodel.layers.%d.self_attn.o_proj.weight", prefix, i);
        E1(l, s->head_dim, "%smodel.layers.%d.self_attn.q_norm.weight", prefix, i);
        E1(l, s->head_dim, "%smodel.layers.%d.self_attn.k_norm.weight", prefix, i);
        E1(l, H, "%smodel.layers.%d.post_attention_layernorm.weight", prefix, i);
        E2(l, I, H, "%smodel.layers.%d.mlp.gate_proj.weight", prefix, i);
        E2(l, I, H, "%smodel.layers.%d.mlp.up_proj.weight", prefix, i);
        E2(l, H, I, "%smodel.layers.%d.mlp.down_proj.weight", prefix, i);
    }
    E1(l, H, "%smodel.norm.weight", prefix);
}

/* model.safetensors: talker, code predictor, speaker encoder (Base). */
static void ex_main(expected_list *l, const qtts_config *c) {
    int64_t H = c->talker.hidden, TH = c->text_hidden, C = c->cp.hidden;
    int G = c->talker.num_code_groups;
    E2(l, c->text_vocab, TH, "talker.model.text_embedding.weight");
    E2(l, TH, TH, "talker.text_projection.linear_fc1.weight");
    E1(l, TH, "talker.text_projection.linear_fc1.bias");
    E2(l, H, TH, "talker.text_projection.linear_fc2.weight");
    E1(l, H, "talker.text_projection.linear_fc2.bias");
    E2(l, c->talker.vocab, H, "talker.model.codec_embedding.weight");
    ex_stack_layers(l, "talker.", &c->talker);
    E2(l, c->talker.vocab, H, "talker.codec_head.weight");

    const char *P = "talker.code_predictor.";
    for (int g = 0; g < G - 1; g++) {
        E2(l, c->cp.vocab, H, "%smodel.codec_embedding.%d.weight", P, g);
        E2(l, c->cp.vocab, C, "%slm_head.%d.weight", P, g);
    }
    if (C != H) {
        E2(l, C, H, "%ssmall_to_mtp_projection.weight", P);
        E1(l, C, "%ssmall_to_mtp_projection.bias", P);
    }
    ex_stack_layers(l, P, &c->cp);

    if (c->has_speaker_encoder) {
        const int *ch = c->spk_channels, *k = c->spk_kernels;
        int sc = c->spk_res2net_scale, se = c->spk_se_channels, at = c->spk_attn_channels;
        const char *S = "speaker_encoder.";
        E3(l, ch[0], c->spk_mel_dim, k[0], "%sblocks.0.conv.weight", S);
        E1(l, ch[0], "%sblocks.0.conv.bias", S);
        for (int b = 1; b <= 3; b++) {
            E3(l, ch[b], ch[b - 1], 1, "%sblocks.%d.tdnn1.conv.weight", S, b);
            E1(l, ch[b], "%sblocks.%d.tdnn1.conv.bias", S, b);
            for (int r = 0; r < sc - 1; r++) {
                E3(l, ch[b] / sc, ch[b] / sc, k[b], "%sblocks.%d.res2net_block.blocks.%d.conv.weight", S, b, r);
                E1(l, ch[b] / sc, "%sblocks.%d.res2net_block.blocks.%d.conv.bias", S, b, r);
            }
            E3(l, ch[b], ch[b], 1, "%sblocks.%d.tdnn2.conv.weight", S, b);
            E1(l, ch[b], "%sblocks.%d.tdnn2.conv.bias", S, b);
            E3(l, se, ch[b], 1, "%sblocks.%d.se_block.conv1.weight", S, b);
            E1(l, se, "%sblocks.%d.se_block.conv1.bias", S, b);
            E3(l, ch[b], se, 1, "%sblocks.%d.se_block.conv2.weight", S, b);
            E1(l, ch[b], "%sblocks.%d.se_block.conv2.bias", S, b);
        }
        E3(l, ch[4], ch[1] + ch[2] + ch[3], k[4], "%smfa.conv.weight", S);
        E1(l, ch[4], "%smfa.conv.bias", S);
        E3(l, at, (int64_t)ch[4] * 3, 1, "%sasp.tdnn.conv.weight", S);
        E1(l, at, "%sasp.tdnn.conv.bias", S);
        E3(l, ch[4], at, 1, "%sasp.conv.weight", S);
        E1(l, ch[4], "%sasp.conv.bias", S);
        E3(l, c->spk_enc_dim, (int64_t)ch[4] * 2, 1, "%sfc.weight", S);
        E1(l, c->spk_enc_dim, "%sfc.bias", S);
    }
}

/* speech_tokenizer/model.safetensors, decoder part (spec 3.3). */
static void ex_codec_decoder(expected_list *l, const qtts_config *c) {
    int64_t cs = c->codec.codebook_size, cd = c->codec.codebook_dim, half = cd / 2,
            L = c->codec.latent_dim, D = c->codec.decoder_dim, Hc = c->codec.hidden,
            q = (int64_t)c->codec.heads * c->codec.head_dim, kv = (int64_t)c->codec.kv_heads * c->codec.head_dim;
    int nsem = c->codec.num_semantic_quantizers, nrest = c->codec.num_quantizers - nsem;
    const char *Q = "decoder.quantizer.";
    for (int i = 0; i < nsem + nrest; i++) {
        const char *grp = i < nsem ? "rvq_first" : "rvq_rest";
        int j = i < nsem ? i : i - nsem;
        E2(l, cs, half, "%s%s.vq.layers.%d._codebook.embedding_sum", Q, grp, j);
        E1(l, cs, "%s%s.vq.layers.%d._codebook.cluster_usage", Q, grp, j);
    }
    for (int g = 0; g < 2; g++) {
        const char *grp = g ? "rvq_rest" : "rvq_first";
        E3(l, cd, half, 1, "%s%s.output_proj.weight", Q, grp);
        E3(l, half, cd, 1, "%s%s.input_proj.weight", Q, grp);
    }
    E3(l, L, cd, 3, "decoder.pre_conv.conv.weight");
    E1(l, L, "decoder.pre_conv.conv.bias");
    const char *T = "decoder.pre_transformer.";
    E2(l, Hc, L, "%sinput_proj.weight", T);
    E1(l, Hc, "%sinput_proj.bias", T);
    for (int i = 0; i < c->codec.layers; i++) {
        E1(l, Hc, "%slayers.%d.input_layernorm.weight", T, i);
        E2(l, q, Hc, "%slayers.%d.self_attn.q_proj.weight", T, i);
        E2(l, kv, Hc, "%slayers.%d.self_attn.k_proj.weight", T, i);
        E2(l, kv, Hc, "%slayers.%d.self_attn.v_proj.weight", T, i);
        E2(l, Hc, q, "%slayers.%d.self_attn.o_proj.weight", T, i);
        E1(l, Hc, "%slayers.%d.self_attn_layer_scale.scale", T, i);
        E1(l, Hc, "%slayers.%d.post_attention_layernorm.weight", T, i);
        E2(l, c->codec.inter, Hc, "%slayers.%d.mlp.gate_proj.weight", T, i);
        E2(l, c->codec.inter, Hc, "%slayers.%d.mlp.up_proj.weight", T, i);
        E2(l, Hc, c->codec.inter, "%slayers.%d.mlp.down_proj.weight", T, i);
        E1(l, Hc, "%slayers.%d.mlp_layer_scale.scale", T, i);
    }
    E1(l, Hc, "%snorm.weight", T);
    E2(l, L, Hc, "%soutput_proj.weight", T);
    E1(l, L, "%soutput_proj.bias", T);
    for (int u = 0; u < 2; u++) {
        E3(l, L, L, c->codec.upsampling_ratios[u], "decoder.upsample.%d.0.conv.weight", u);
        E1(l, L, "decoder.upsample.%d.0.conv.bias", u);
        E3(l, L, 1, 7, "decoder.upsample.%d.1.dwconv.conv.weight", u);
        E1(l, L, "decoder.upsample.%d.1.dwconv.conv.bias", u);
        E1(l, L, "decoder.upsample.%d.1.norm.weight", u);
        E1(l, L, "decoder.upsample.%d.1.norm.bias", u);
        E2(l, 4 * L, L, "decoder.upsample.%d.1.pwconv1.weight", u);
        E1(l, 4 * L, "decoder.upsample.%d.1.pwconv1.bias", u);
        E2(l, L, 4 * L, "decoder.upsample.%d.1.pwconv2.weight", u);
        E1(l, L, "decoder.upsample.%d.1.pwconv2.bias", u);
        E1(l, L, "decoder.upsample.%d.1.gamma", u);
    }
    E3(l, D, L, 7, "decoder.decoder.0.conv.weight");
    E1(l, D, "decoder.decoder.0.conv.bias");
    for (int b = 1; b <= 4; b++) {
        int64_t cin = D >> (b - 1), cout = D >> b, r = c->codec.upsample_rates[b - 1];
        E1(l, cin, "decoder.decoder.%d.block.0.alpha", b);
        E1(l, cin, "decoder.decoder.%d.block.0.beta", b);
        E3(l, cin, cout, 2 * r, "decoder.decoder.%d.block.1.conv.weight", b);
        E1(l, cout, "decoder.decoder.%d.block.1.conv.bias", b);
        for (int u = 2; u <= 4; u++) {
            E1(l, cout, "decoder.decoder.%d.block.%d.act1.alpha", b, u);
            E1(l, cout, "decoder.decoder.%d.block.%d.act1.beta", b, u);
            E1(l, cout, "decoder.decoder.%d.block.%d.act2.alpha", b, u);
            E1(l, cout, "decoder.decoder.%d.block.%d.act2.beta", b, u);
            E3(l, cout, cout, 7, "decoder.decoder.%d.block.%d.conv1.conv.weight", b, u);
            E1(l, cout, "decoder.decoder.%d.block.%d.conv1.conv.bias", b, u);
            E3(l, cout, cout, 1, "decoder.decoder.%d.block.%d.conv2.conv.weight", b, u);
            E1(l, cout, "decoder.decoder.%d.block.%d.conv2.conv.bias", b, u);
        }
    }
    E1(l, D / 16, "decoder.decoder.5.alpha");
    E1(l, D / 16, "decoder.decoder.5.beta");
    E3(l, 1, D / 16, 7, "decoder.decoder.6.conv.weight");
    E1(l, 1, "decoder.decoder.6.conv.bias");
}

static int64_t jint(const qtts_json *o, const char *k) {
    int64_t v = -1;
    if (!qtts_json_get_int(o, k, &v)) {
        double d;
        if (qtts_json_get_num(o, k, &d)) v = (int64_t)d;
    }
    return v;
}

/* speech_tokenizer/model.safetensors, encoder part (Mimi minus decoder;
 * spec 3.3), derived from encoder_config, which qtts_config does not keep. */
static bool ex_codec_encoder(expected_list *l, const char *cfg_path) {
    char *text = NULL;
    size_t len;
    qtts_err err = {0};
    if (qtts_read_file(cfg_path, 1 << 20, &text, &len, &err)) return false;
    qtts_json *doc = qtts_json_parse(text, len, NULL, cfg_path, &err);
    free(text);
    const qtts_json *e = qtts_json_get(doc, "encoder_config");
    const qtts_json *ratios = qtts_json_get(e, "upsampling_ratios");
    if (!e || !ratios || ratios->count != 4 || jint(e, "num_residual_layers") != 1) {
        qtts_json_free(doc);
        return false;
    }
    int64_t F = jint(e, "num_filters"), comp = jint(e, "compress"), Hd = jint(e, "hidden_size"),
            q = jint(e, "num_attention_heads") * jint(e, "head_dim"),
            kv = jint(e, "num_key_value_heads") * jint(e, "head_dim"), I = jint(e, "intermediate_size"),
            cs = jint(e, "codebook_size"), cd = jint(e, "codebook_dim"),
            vqh = jint(e, "vector_quantization_hidden_dimension"), nq = jint(e, "num_quantizers"),
            nsem = jint(e, "num_semantic_quantizers"), hop = 1;
    double frame_rate = 0;
    qtts_json_get_num(e, "_frame_rate", &frame_rate);
    const char *S = "encoder.encoder.layers.";
    E3(l, F, jint(e, "audio_channels"), jint(e, "kernel_size"), "%s0.conv.weight", S);
    E1(l, F, "%s0.conv.bias", S);
    for (int s = 0; s < 4; s++) {
        int64_t C = F << s, r = ratios->items[3 - s]->integer;
        hop *= r;
        E3(l, C / comp, C, jint(e, "residual_kernel_size"), "%s%d.block.1.conv.weight", S, 1 + 3 * s);
        E1(l, C / comp, "%s%d.block.1.conv.bias", S, 1 + 3 * s);
        E3(l, C, C / comp, 1, "%s%d.block.3.conv.weight", S, 1 + 3 * s);
        E1(l, C, "%s%d.block.3.conv.bias", S, 1 + 3 * s);
        E3(l, 2 * C, C, 2 * r, "%s%d.conv.weight", S, 3 + 3 * s);
        E1(l, 2 * C, "%s%d.conv.bias", S, 3 + 3 * s);
    }
    E3(l, Hd, F << 4, jint(e, "last_kernel_size"), "%s14.conv.weight", S);
    E1(l, Hd, "%s14.conv.bias", S);
    const char *T = "encoder.encoder_transformer.layers.";
    for (int i = 0; i < jint(e, "num_hidden_layers"); i++) {
        E1(l, Hd, "%s%d.input_layernorm.weight", T, i);
        E1(l, Hd, "%s%d.input_layernorm.bias", T, i);
        E1(l, Hd, "%s%d.post_attention_layernorm.weight", T, i);
        E1(l, Hd, "%s%d.post_attention_layernorm.bias", T, i);
        E2(l, q, Hd, "%s%d.self_attn.q_proj.weight", T, i);
        E2(l, kv, Hd, "%s%d.self_attn.k_proj.weight", T, i);
        E2(l, kv, Hd, "%s%d.self_attn.v_proj.weight", T, i);
        E2(l, Hd, q, "%s%d.self_attn.o_proj.weight", T, i);
        E2(l, I, Hd, "%s%d.mlp.fc1.weight", T, i);
        E2(l, Hd, I, "%s%d.mlp.fc2.weight", T, i);
        E1(l, Hd, "%s%d.self_attn_layer_scale.scale", T, i);
        E1(l, Hd, "%s%d.mlp_layer_scale.scale", T, i);
    }
    /* Downsampling from the SEANet frame rate to _frame_rate: kernel 2*stride. */
    int64_t stride = frame_rate > 0 ? (int64_t)((double)jint(e, "sampling_rate") / (double)hop / frame_rate + 0.5) : 0;
    E3(l, Hd, Hd, 2 * stride, "encoder.downsample.conv.weight");
    for (int g = 0; g < 2; g++) {
        const char *grp = g ? "acoustic" : "semantic";
        int64_t n = g ? nq - nsem : nsem;
        E3(l, vqh, Hd, 1, "encoder.quantizer.%s_residual_vector_quantizer.input_proj.weight", grp);
        E3(l, Hd, vqh, 1, "encoder.quantizer.%s_residual_vector_quantizer.output_proj.weight", grp);
        for (int i = 0; i < n; i++) {
            E1(l, cs, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook.cluster_usage", grp, i);
            E2(l, cs, cd, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook.embed_sum", grp, i);
            E1(l, 1, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook.initialized", grp, i);
        }
    }
    qtts_json_free(doc);
    return true;
}

/* The set must hold exactly the expected tensors, all of dtype `dt`. */
static void check_exact(const char *label, const qtts_st_set *s, const expected_list *l, qtts_dtype dt) {
    size_t bad = 0;
    for (size_t i = 0; i < l->n; i++) {
        qtts_err err = {0};
        if (!qtts_st_expect(s, l->v[i].name, 1u << dt, l->v[i].rank, l->v[i].shape, &err)) {
            if (bad++ < 10) CHECK(0, "%s: %s", label, err.msg);
        }
    }
    CHECK(bad == 0, "%s: %zu of %zu expected tensors wrong", label, bad, l->n);
    CHECK(qtts_st_set_count(s) == l->n, "%s: file has %zu tensors, spec derives %zu", label,
          qtts_st_set_count(s), l->n);
    /* name the extras, if any */
    for (size_t i = 0, shown = 0; i < qtts_st_set_count(s) && shown < 10; i++) {
        const char *nm = qtts_st_set_at(s, i)->name;
        bool found = false;
        for (size_t j = 0; j < l->n && !found; j++) found = !strcmp(l->v[j].name, nm);
        if (!found) {
            CHECK(0, "%s: unexpected tensor %s", label, nm);
            shown++;
        }
    }
}

static const char *const tiny_models[] = {"cv06", "cv17", "vd17", "base06", "base17"};

static void test_tiny_models(void) {
    for (size_t m = 0; m < QTTS_ARRAY_LEN(tiny_models); m++) {
        char dir[256], st_dir[300], cfgp[320];
        snprintf(dir, sizeof dir, "%s/models/%s", QTTS_FIXTURES, tiny_models[m]);
        struct stat sb;
        if (stat(dir, &sb) != 0) {
            printf("test_safetensors: %s absent, tiny-model tensor check skipped\n", dir);
            continue;
        }
        qtts_config c;
        qtts_err err = {0};
        if (qtts_config_load(dir, &c, &err) != QTTS_OK) {
            CHECK(0, "%s: config: %s", dir, err.msg);
            continue;
        }
        qtts_st_set *s = NULL;
        if (qtts_st_set_open(dir, "model", &s, &err) != QTTS_OK) {
            CHECK(0, "%s: weights: %s", dir, err.msg);
            continue;
        }
        expected_list l = {0};
        ex_main(&l, &c);
        check_exact(dir, s, &l, QTTS_DT_BF16);
        /* explicit variant facts */
        bool mtp = qtts_st_set_find(s, "talker.code_predictor.small_to_mtp_projection.weight") != NULL;
        CHECK(mtp == (c.cp.hidden != c.talker.hidden), "%s: small_to_mtp_projection presence", dir);
        if (!strcmp(c.model_size, "0b6"))
            CHECK(!mtp, "%s: a 0.6B-like model has no small_to_mtp_projection", dir);
        size_t n_spk = 0;
        for (size_t i = 0; i < qtts_st_set_count(s); i++)
            n_spk += strncmp(qtts_st_set_at(s, i)->name, "speaker_encoder.", 16) == 0;
        CHECK(n_spk == (c.model_type == QTTS_MODEL_BASE ? 76u : 0u), "%s: %zu speaker_encoder tensors",
              dir, n_spk);
        qtts_st_set_close(s);
        free(l.v);

        snprintf(st_dir, sizeof st_dir, "%s/speech_tokenizer", dir);
        snprintf(cfgp, sizeof cfgp, "%s/config.json", st_dir);
        if (qtts_st_set_open(st_dir, "model", &s, &err) != QTTS_OK) {
            CHECK(0, "%s: codec weights: %s", st_dir, err.msg);
            continue;
        }
        expected_list lc = {0};
        ex_codec_decoder(&lc, &c);
        CHECK(ex_codec_encoder(&lc, cfgp), "%s: encoder_config unreadable", cfgp);
        check_exact(st_dir, s, &lc, QTTS_DT_F32);
        qtts_st_set_close(s);
        free(lc.v);
    }
}

/* ==== driver ============================================================ */

static void remove_tree(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    strcpy(g_dir, "/tmp/qtts_st_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    TEST_RUN(test_valid_roundtrip);
    TEST_RUN(test_zero_tensor_files);
    TEST_RUN(test_unsorted_and_zero_size_reuse_accepted);
    TEST_RUN(test_hostile_files);
    TEST_RUN(test_tensor_count_cap);
    TEST_RUN(test_short_and_odd_files);
    TEST_RUN(test_truncations);
    TEST_RUN(test_mutations);
    TEST_RUN(test_set_single_and_expect);
    TEST_RUN(test_check_finite);
    TEST_RUN(test_set_shards);
    TEST_RUN(test_index_rejections);
    TEST_RUN(test_tiny_models);
    remove_tree(g_dir);
    TEST_END();
}
