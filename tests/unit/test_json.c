/*
 * test_json.c - the strict JSON reader: valid documents round-trip into the
 * expected tree; each invalid document is rejected with QTTS_ERR_FORMAT and
 * a message "<what>: <rule> at byte <offset>" naming the rule and offset;
 * a vocab.json-sized object parses well under a second.
 */
#include "harness.h"

#include "base/json.h"

#include <stdint.h>
#include <time.h>

static qtts_json_limits req_limits(void) {
    qtts_json_limits l = qtts_json_limits_files();
    l.max_depth = 16;
    l.max_keys = 64;
    return l;
}

static qtts_json *parse_str(const char *s, qtts_err *err) {
    qtts_json_limits l = qtts_json_limits_files();
    return qtts_json_parse(s, strlen(s), &l, "doc", err);
}

static void test_scalars(void) {
    qtts_err err = {0};
    qtts_json *j;

    j = parse_str(" null ", &err);
    REQUIRE(j && j->type == QTTS_JSON_NULL, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("true", &err);
    REQUIRE(j && j->type == QTTS_JSON_BOOL && j->boolean, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("\t\r\nfalse\n", &err);
    REQUIRE(j && j->type == QTTS_JSON_BOOL && !j->boolean, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("-0", &err);
    REQUIRE(j && j->type == QTTS_JSON_NUMBER && j->is_integer && j->fits_int64 && j->integer == 0,
            "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("1.5e3", &err);
    REQUIRE(j && j->type == QTTS_JSON_NUMBER && !j->is_integer && j->number == 1500.0, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("-2.5E-3", &err);
    REQUIRE(j && fabs(j->number + 0.0025) < 1e-15 && !j->is_integer, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("1e-400", &err); /* underflows to 0: finite, accepted */
    REQUIRE(j && j->number == 0.0, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("9223372036854775807", &err);
    REQUIRE(j && j->fits_int64 && j->integer == INT64_MAX, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("-9223372036854775808", &err);
    REQUIRE(j && j->fits_int64 && j->integer == INT64_MIN, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("9223372036854775808", &err);
    REQUIRE(j && j->is_integer && !j->fits_int64 && j->number > 9.2e18, "%s", err.msg);
    qtts_json_free(j);

    j = parse_str("\"hi\"", &err);
    REQUIRE(j && j->type == QTTS_JSON_STRING && j->str_len == 2 && !strcmp(j->str, "hi"), "%s", err.msg);
    qtts_json_free(j);
}

static void test_strings(void) {
    qtts_err err = {0};
    /* escapes, \u BMP, surrogate pair, raw multi-byte UTF-8 at the edges */
    const char *doc = "[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u4e2D\", \"\\ud83d\\ude00\","
                      " \"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\", \"\xef\xbf\xbf\xf4\x8f\xbf\xbf\","
                      " \"\xc2\x80\xe0\xa0\x80\xf0\x90\x80\x80\", \"\"]";
    qtts_json *j = parse_str(doc, &err);
    REQUIRE(j && j->type == QTTS_JSON_ARRAY && j->count == 7, "%s", err.msg);
    CHECK(!strcmp(j->items[0]->str, "a\"b\\c/d\b\f\n\r\t"), "escapes: %s", j->items[0]->str);
    CHECK(!strcmp(j->items[1]->str, "\xc3\xa9\xe4\xb8\xad"), "\\u BMP");
    CHECK(!strcmp(j->items[2]->str, "\xf0\x9f\x98\x80") && j->items[2]->str_len == 4, "surrogate pair");
    CHECK(!strcmp(j->items[3]->str, "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"), "raw UTF-8");
    CHECK(j->items[4]->str_len == 7, "U+FFFF and U+10FFFF accepted");
    CHECK(j->items[5]->str_len == 9, "smallest 2/3/4-byte forms accepted");
    CHECK(j->items[6]->str_len == 0 && j->items[6]->str[0] == 0, "empty string");
    qtts_json_free(j);
}

static void test_containers(void) {
    qtts_err err = {0};
    qtts_json *j = parse_str("{\"b\": [1, 2.5, \"x\", null, true, {}, []], \"a\": {\"k\": -7}, "
                             "\"c\": \"s\", \"flag\": false}",
                             &err);
    REQUIRE(j && j->type == QTTS_JSON_OBJECT && j->count == 4, "%s", err.msg);
    CHECK(!strcmp(j->keys[0], "b") && !strcmp(j->keys[1], "a") && !strcmp(j->keys[3], "flag"),
          "keys in document order");
    const qtts_json *b = qtts_json_get(j, "b");
    REQUIRE(b && b->type == QTTS_JSON_ARRAY && b->count == 7, "array b");
    CHECK(b->items[0]->integer == 1 && b->items[1]->number == 2.5, "numbers");
    CHECK(b->items[5]->type == QTTS_JSON_OBJECT && b->items[5]->count == 0, "empty object");
    CHECK(b->items[6]->type == QTTS_JSON_ARRAY && b->items[6]->count == 0, "empty array");
    int64_t k = 0;
    CHECK(qtts_json_get_int(qtts_json_get(j, "a"), "k", &k) && k == -7, "nested int");
    CHECK(!strcmp(qtts_json_get_str(j, "c"), "s"), "get_str");
    bool flag = true;
    CHECK(qtts_json_get_bool(j, "flag", &flag) && !flag, "get_bool");
    double d;
    CHECK(!qtts_json_get_num(j, "c", &d), "get_num on a string fails");
    CHECK(!qtts_json_get_int(j, "b", &k), "get_int on an array fails");
    CHECK(qtts_json_get(j, "zz") == NULL && qtts_json_get(b, "b") == NULL, "absent / not object");
    CHECK(qtts_json_get_str(j, "b") == NULL, "get_str wrong type");
    qtts_json_free(j);

    /* 1.0 and 1e3 are numbers but not integers */
    j = parse_str("{\"x\": 1.0, \"y\": 1e3}", &err);
    REQUIRE(j, "%s", err.msg);
    CHECK(!qtts_json_get_int(j, "x", &k) && !qtts_json_get_int(j, "y", &k), "not integers");
    CHECK(qtts_json_get_num(j, "y", &d) && d == 1000.0, "get_num");
    qtts_json_free(j);
}

/* An object big enough to get a key index: get() must find every key and
 * miss absent ones, including keys that are prefixes of others. */
static void test_big_object_lookup(void) {
    char buf[8192];
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"k%d\":%d", i ? "," : "", i * 7, i);
    n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"\":-1}");
    qtts_err err = {0};
    qtts_json *j = parse_str(buf, &err);
    REQUIRE(j && j->count == 201 && j->key_index, "%s", err.msg);
    for (int i = 0; i < 200; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i * 7);
        int64_t v = -99;
        CHECK(qtts_json_get_int(j, key, &v) && v == i, "lookup %s -> %lld", key, (long long)v);
    }
    int64_t v;
    CHECK(qtts_json_get_int(j, "", &v) && v == -1, "empty key");
    CHECK(!qtts_json_get(j, "k1") && !qtts_json_get(j, "k") && !qtts_json_get(j, "k14000"), "misses");
    qtts_json_free(j);
}

static void test_depth_limit_edge(void) {
    qtts_json_limits l = req_limits();
    char ok[64], bad[64];
    memset(ok, '[', 16);
    memset(ok + 16, ']', 16);
    ok[32] = 0;
    memset(bad, '[', 17);
    memset(bad + 17, ']', 17);
    bad[34] = 0;
    qtts_err err = {0};
    qtts_json *j = qtts_json_parse(ok, strlen(ok), &l, "req", &err);
    CHECK(j != NULL, "depth 16 accepted: %s", err.msg);
    qtts_json_free(j);
    j = qtts_json_parse(bad, strlen(bad), &l, "req", &err);
    CHECK(!j && strstr(err.msg, "nesting") && strstr(err.msg, "at byte 16"), "depth 17: %s", err.msg);
}

/* 100k nested arrays: rejected at the cap without recursion. */
static void test_deep_nesting_no_stack(void) {
    size_t n = 100000;
    char *s = malloc(2 * n);
    REQUIRE(s, "malloc");
    memset(s, '[', n);
    memset(s + n, ']', n);
    qtts_err err = {0};
    qtts_json *j = qtts_json_parse(s, 2 * n, NULL, "deep", &err);
    CHECK(!j && err.status == QTTS_ERR_FORMAT && strstr(err.msg, "nesting"), "%s", err.msg);
    qtts_json_limits l = qtts_json_limits_files();
    l.max_depth = (int)n;
    j = qtts_json_parse(s, 2 * n, &l, "deep", &err);
    CHECK(j != NULL, "100k nesting with a 100k cap parses iteratively: %s", err.msg);
    qtts_json_free(j);
    free(s);
}

typedef struct {
    const char *name;
    const char *text;
    size_t len;        /* 0: strlen(text) */
    const char *rule;  /* substring the message must contain */
    long offset;       /* expected "at byte N", or -1 to skip */
    int limit;         /* 0 none; 1 max_keys=2; 2 max_items=2; 3 max_string_len=4 */
} bad_case;

static const bad_case bad_cases[] = {
    {"depth", "[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]", 0, "nesting deeper", 16, 0},
    {"depth_obj", "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
                  "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":1}}}}}}}}}}}}}}}}}}", 0, "nesting deeper", 80, 0},
    {"dup_key", "{\"a\":1,\"b\":2,\"a\":3}", 0, "duplicate key", 13, 0},
    {"dup_key_nested", "{\"x\":{\"k\":1,\"k\":{}}}", 0, "duplicate key", 12, 0},
    {"dup_key_big",
     "{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,"
     "\"k3\":10,\"k1\":11}",
     0, "duplicate key", 71, 0},
    {"utf8_lone_continuation", "\"a\x80\"", 0, "invalid UTF-8", 2, 0},
    {"utf8_overlong2", "\"\xc0\xaf\"", 0, "overlong", 1, 0},
    {"utf8_overlong2_c1", "\"\xc1\xbf\"", 0, "overlong", 1, 0},
    {"utf8_overlong3", "\"\xe0\x80\xaf\"", 0, "overlong", 1, 0},
    {"utf8_overlong4", "\"\xf0\x80\x80\xaf\"", 0, "overlong", 1, 0},
    {"utf8_surrogate", "\"\xed\xa0\x80\"", 0, "surrogate", 1, 0},
    {"utf8_above_max", "\"\xf4\x90\x80\x80\"", 0, "above U+10FFFF", 1, 0},
    {"utf8_f5", "\"\xf5\x80\x80\x80\"", 0, "invalid UTF-8", 1, 0},
    {"utf8_ff", "\"\xff\"", 0, "invalid UTF-8", 1, 0},
    {"utf8_truncated", "\"\xe2\x82\"", 0, "truncated UTF-8", 1, 0},
    {"utf8_bad_continuation", "\"\xe2\x28\xa1\"", 0, "truncated UTF-8", 1, 0},
    {"escape_nul", "\"a\\u0000b\"", 0, "\\u0000", 2, 0},
    {"escape_lone_high", "\"\\ud800\"", 0, "unpaired surrogate", 1, 0},
    {"escape_lone_low", "\"\\udc00\"", 0, "unpaired surrogate", 1, 0},
    {"escape_high_then_bmp", "\"\\ud800\\u0041\"", 0, "unpaired surrogate", 1, 0},
    {"escape_high_at_end", "\"x\\ud83d\"", 0, "unpaired surrogate", 2, 0},
    {"escape_bad_hex", "\"\\u12G4\"", 0, "invalid \\u escape", 1, 0},
    {"escape_short_hex", "\"\\u12\"", 0, "invalid \\u escape", 1, 0},
    {"escape_unknown", "\"\\x41\"", 0, "invalid escape", 1, 0},
    {"escape_single_quote", "\"\\'\"", 0, "invalid escape", 1, 0},
    {"leading_zero", "01", 0, "leading zero", 0, 0},
    {"leading_zero_neg", "[-012]", 0, "leading zero", 2, 0},
    {"trailing_garbage", "{} x", 0, "trailing characters", 3, 0},
    {"two_values", "1 2", 0, "trailing characters", 2, 0},
    {"trailing_nul", "{}\0", 3, "trailing characters", 2, 0},
    {"huge_number", "1e400", 0, "out of range", 0, 0},
    {"huge_negative", "[-1.5e999]", 0, "out of range", 1, 0},
    {"long_number", "12345678901234567890123456789012345678901", 0, "number longer", 0, 0},
    {"nan", "NaN", 0, "unexpected character", 0, 0},
    {"infinity", "[Infinity]", 0, "unexpected character", 1, 0},
    {"neg_infinity", "-Infinity", 0, "invalid number", 1, 0},
    {"plus_sign", "+1", 0, "unexpected character", 0, 0},
    {"dot_first", ".5", 0, "unexpected character", 0, 0},
    {"dot_last", "1.", 0, "digit expected after '.'", 2, 0},
    {"exp_empty", "1e+", 0, "digit expected in exponent", 3, 0},
    {"hex_number", "0x10", 0, "trailing characters", 1, 0},
    {"unterminated_string", "[\"abc", 0, "unterminated string", 1, 0},
    {"unterminated_escape", "\"abc\\\"", 0, "unterminated string", 0, 0},
    {"control_char", "\"a\tb\"", 0, "control character", 2, 0},
    {"raw_newline", "\"a\nb\"", 0, "control character", 2, 0},
    {"raw_nul_in_string", "\"a\0b\"", 5, "control character", 2, 0},
    {"trailing_comma_array", "[1,2,]", 0, "unexpected character", 5, 0},
    {"trailing_comma_object", "{\"a\":1,}", 0, "object key must be a string", 7, 0},
    {"missing_colon", "{\"a\" 1}", 0, "expected ':'", 5, 0},
    {"missing_comma", "[1 2]", 0, "expected ',' or ']'", 3, 0},
    {"missing_comma_obj", "{\"a\":1 \"b\":2}", 0, "expected ',' or '}'", 7, 0},
    {"unquoted_key", "{a:1}", 0, "object key must be a string", 1, 0},
    {"number_key", "{1:2}", 0, "object key must be a string", 1, 0},
    {"single_quotes", "'a'", 0, "unexpected character", 0, 0},
    {"empty", "", 0, "unexpected end of input", 0, 0},
    {"whitespace_only", " \n\t ", 0, "unexpected end of input", 4, 0},
    {"unclosed_array", "[1,", 0, "unexpected end of input", 3, 0},
    {"unclosed_object", "{\"a\":1", 0, "unexpected end of input", 6, 0},
    {"bad_literal", "tru", 0, "invalid literal", 0, 0},
    {"bad_literal_case", "True", 0, "unexpected character", 0, 0},
    {"bom", "\xef\xbb\xbf{}", 0, "unexpected character", 0, 0},
    {"mismatched_bracket", "[1}", 0, "expected ',' or ']'", 2, 0},
    {"too_many_keys", "{\"a\":1,\"b\":2,\"c\":3}", 0, "too many keys", 13, 1},
    {"too_many_items", "[1,2,3]", 0, "too many items", 4, 2},
    {"string_too_long", "\"abcde\"", 0, "string longer", 5, 3},
    {"key_too_long", "{\"abcdef\":1}", 0, "string longer", 6, 3},
};

static void test_invalid_documents(void) {
    size_t n = QTTS_ARRAY_LEN(bad_cases);
    CHECK(n >= 25, "at least 25 invalid documents (%zu)", n);
    for (size_t i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        qtts_json_limits l = req_limits();
        if (c->limit == 1) l.max_keys = 2;
        if (c->limit == 2) l.max_items = 2;
        if (c->limit == 3) l.max_string_len = 4;
        qtts_err err = {0};
        size_t len = c->len ? c->len : strlen(c->text);
        qtts_json *j = qtts_json_parse(c->text, len, &l, "input.json", &err);
        if (j) {
            CHECK(0, "%s: accepted", c->name);
            qtts_json_free(j);
            continue;
        }
        CHECK(err.status == QTTS_ERR_FORMAT, "%s: status %s", c->name, qtts_status_name(err.status));
        CHECK(strncmp(err.msg, "input.json: ", 12) == 0, "%s: message names the input: %s", c->name,
              err.msg);
        CHECK(strstr(err.msg, c->rule) != NULL, "%s: rule '%s' not in: %s", c->name, c->rule, err.msg);
        if (c->offset >= 0) {
            char at[48];
            snprintf(at, sizeof at, " at byte %ld", c->offset);
            size_t ml = strlen(err.msg), al = strlen(at);
            CHECK(ml >= al && strcmp(err.msg + ml - al, at) == 0, "%s: expected '%s' in: %s", c->name,
                  at, err.msg);
        }
    }
}

/* Every prefix of a valid document is rejected cleanly (no over-read). */
static void test_truncations(void) {
    const char *doc = "{\"a\": [1, -2.5e-3, \"x\\u00e9\\ud83d\\ude00\xc3\xa9\", true, null], \"b\": {}}";
    size_t n = strlen(doc);
    for (size_t k = 0; k < n; k++) {
        char *cut = malloc(k ? k : 1); /* exact size so ASan catches an over-read */
        memcpy(cut, doc, k);
        qtts_err err = {0};
        qtts_json *j = qtts_json_parse(cut, k, NULL, "cut", &err);
        CHECK(!j && err.status == QTTS_ERR_FORMAT, "prefix %zu accepted", k);
        qtts_json_free(j);
        free(cut);
    }
    qtts_err err = {0};
    qtts_json *j = qtts_json_parse(doc, n, NULL, "full", &err);
    CHECK(j != NULL, "full document: %s", err.msg);
    qtts_json_free(j);
}

static void test_utf8_valid(void) {
    size_t at = 99;
    CHECK(qtts_utf8_valid("abc\xc3\xa9", 5, &at), "valid");
    CHECK(qtts_utf8_valid("a\0b", 3, &at), "NUL allowed");
    CHECK(!qtts_utf8_valid("ab\xed\xbf\xbf", 5, &at) && at == 2, "surrogate at 2 (%zu)", at);
    CHECK(!qtts_utf8_valid("\xc3", 1, &at) && at == 0, "truncated");
    CHECK(!qtts_utf8_valid("x\xf8\x88\x80\x80\x80", 6, &at) && at == 1, "5-byte form");
}

static void test_escape(void) {
    char out[64];
    const char in[] = "a\"b\\c\n\x01\xc3\xa9";
    size_t n = qtts_json_escape(out, sizeof out, in, sizeof in - 1);
    CHECK(!strcmp(out, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"") && n == strlen(out), "escaped: %s", out);
    /* round trip through the parser */
    qtts_err err = {0};
    qtts_json *j = qtts_json_parse(out, n, NULL, "rt", &err);
    REQUIRE(j && j->type == QTTS_JSON_STRING, "%s", err.msg);
    CHECK(j->str_len == sizeof in - 1 && !memcmp(j->str, in, j->str_len), "round trip");
    qtts_json_free(j);
    /* C1 controls (U+0080..U+009F, here CSI U+009B) and DEL are escaped
     * too, so no quoted value can drive a terminal; U+00A0 is not */
    const char c1[] = "x\xc2\x9b" "31m\x7f\xc2\xa0";
    n = qtts_json_escape(out, sizeof out, c1, sizeof c1 - 1);
    CHECK(!strcmp(out, "\"x\\u009b31m\\u007f\xc2\xa0\"") && n == strlen(out), "C1: %s", out);
    j = qtts_json_parse(out, n, NULL, "rt", &err);
    REQUIRE(j && j->type == QTTS_JSON_STRING, "%s", err.msg);
    CHECK(j->str_len == sizeof c1 - 1 && !memcmp(j->str, c1, j->str_len), "C1 round trip");
    qtts_json_free(j);
    /* truncation: like snprintf */
    char small[5];
    n = qtts_json_escape(small, sizeof small, "abcdef", 6);
    CHECK(n == 8 && !strcmp(small, "\"abc"), "truncated: %zu %s", n, small);
    CHECK(qtts_json_escape(NULL, 0, "ab", 2) == 4, "size query");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A vocab.json-shaped object: 151,643 keys mixing ASCII, \u escapes and
 * raw UTF-8, built at test time so CI needs no external file. */
static void test_vocab_sized_object(void) {
    const size_t nkeys = 151643;
    size_t cap = nkeys * 40 + 16, n = 0;
    char *buf = malloc(cap);
    REQUIRE(buf, "malloc");
    buf[n++] = '{';
    for (size_t i = 0; i < nkeys; i++) {
        const char *style = (i % 3 == 0) ? "\\u0120tok%zu" : (i % 3 == 1) ? "\xc4\xa0w%zu" : "t%zu";
        n += (size_t)snprintf(buf + n, cap - n, "%s\"", i ? "," : "");
        n += (size_t)snprintf(buf + n, cap - n, style, i);
        n += (size_t)snprintf(buf + n, cap - n, "\":%zu", i);
    }
    buf[n++] = '}';
    qtts_err err = {0};
    double t0 = now_s();
    qtts_json *j = qtts_json_parse(buf, n, NULL, "vocab", &err);
    double dt = now_s() - t0;
    REQUIRE(j && j->count == nkeys, "%s", err.msg);
    CHECK(dt < 1.0, "parse took %.3f s", dt);
    int64_t v = -1;
    CHECK(qtts_json_get_int(j, "\xc4\xa0w151642", &v) && v == 151642, "lookup last (%lld)", (long long)v);
    CHECK(qtts_json_get_int(j, "t5", &v) && v == 5, "lookup t5");
    CHECK(!qtts_json_get(j, "t6"), "t6 absent");
    qtts_json_free(j);

    /* the same document with one duplicate near the end */
    char *dup = strstr(buf, "\"t151640\"");
    REQUIRE(dup, "find key");
    memcpy(dup, "\"t000005\"", 9); /* t000005 differs from t5: not a duplicate */
    j = qtts_json_parse(buf, n, NULL, "vocab", &err);
    CHECK(j != NULL, "distinct keys accepted: %s", err.msg);
    qtts_json_free(j);
    memcpy(dup, "\"t5\"     ", 9); /* now "t5" appears twice */
    j = qtts_json_parse(buf, n, NULL, "vocab", &err);
    CHECK(!j && strstr(err.msg, "duplicate key"), "duplicate in a big object: %s", err.msg);
    free(buf);
}

/* The real Qwen2 vocabulary, when this machine has it. */
static void test_real_vocab(void) {
    const char *path = "/work/shared/tokenizer/vocab.json";
    char *text = NULL;
    size_t len = 0;
    qtts_err err = {0};
    if (qtts_read_file(path, 64u << 20, &text, &len, &err) != QTTS_OK) {
        printf("test_json: %s not present, real-vocab check skipped\n", path);
        return;
    }
    double t0 = now_s();
    qtts_json *j = qtts_json_parse(text, len, NULL, path, &err);
    double dt = now_s() - t0;
    free(text);
    REQUIRE(j && j->type == QTTS_JSON_OBJECT, "%s", err.msg);
    CHECK(j->count == 151643, "count %zu", j->count);
    CHECK(dt < 1.0, "parse took %.3f s", dt);
    int64_t v = -1;
    CHECK(qtts_json_get_int(j, "!", &v) && v == 0, "\"!\" -> 0");
    CHECK(qtts_json_get_int(j, "\"", &v) && v == 1, "\"\\\"\" -> 1");
    qtts_json_free(j);
}

int main(void) {
    TEST_RUN(test_scalars);
    TEST_RUN(test_strings);
    TEST_RUN(test_containers);
    TEST_RUN(test_big_object_lookup);
    TEST_RUN(test_depth_limit_edge);
    TEST_RUN(test_deep_nesting_no_stack);
    TEST_RUN(test_invalid_documents);
    TEST_RUN(test_truncations);
    TEST_RUN(test_utf8_valid);
    TEST_RUN(test_escape);
    TEST_RUN(test_vocab_sized_object);
    TEST_RUN(test_real_vocab);
    TEST_END();
}
