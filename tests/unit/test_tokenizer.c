/*
 * test_tokenizer.c - the Qwen2 BPE tokenizer against goldens of the official
 * reference, plus its input validation.
 *
 * Goldens (tests/fixtures/tokenizer, see its README.md):
 *   tokenize_cases.jsonl   20 multilingual cases ({"text","ids"})
 *   hf_edge_cases.jsonl    edge cases and random strings encoded by HF
 *                          tokenizers itself; "ids" (Qwen2 regex) and, where
 *                          it differs, "ids_mistral" (Mistral-fixed regex)
 *   ../golden/tokenizer_corpus.jsonl  (when present) "ids" for Qwen2 and
 *                          "ids_local" where the Mistral-fixed regex differs
 * Every line must match exactly, for both pre-tokenizers.
 *
 * The hostile-file tests build tiny model directories under /tmp: a 256-
 * symbol byte-level vocabulary plus a few merges, then break one thing at a
 * time.
 */
#include "harness.h"

#include <stdint.h>
#include <unistd.h>
#include <utf8proc.h>

#include "base/json.h"
#include "model/tokenizer.h"

#define TOKDIR QTTS_FIXTURES "/tokenizer"

static qtts_tokenizer *tok;

/* ---- helpers ---- */

static bool enc(const char *s, size_t len, qtts_pretok v, int32_t **ids, size_t *n) {
    qtts_err err = {0};
    qtts_tokenize_opts o = {v};
    qtts_status st = qtts_tokenizer_encode_ex(tok, s, len, &o, ids, n, &err);
    if (st != QTTS_OK) fprintf(stderr, "  encode failed: %s\n", err.msg);
    return st == QTTS_OK;
}

/* Encode s (NUL-terminated) and compare with want[0..nw). */
static bool enc_is(const char *s, qtts_pretok v, const int32_t *want, size_t nw) {
    int32_t *ids;
    size_t n;
    if (!enc(s, strlen(s), v, &ids, &n)) return false;
    bool ok = n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "  \"%s\": got", s);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    qtts_free(ids);
    return ok;
}

static bool same_ids(const char *a, const char *b) {
    int32_t *x, *y;
    size_t nx, ny;
    if (!enc(a, strlen(a), QTTS_PRETOK_QWEN2, &x, &nx)) return false;
    if (!enc(b, strlen(b), QTTS_PRETOK_QWEN2, &y, &ny)) {
        qtts_free(x);
        return false;
    }
    bool ok = nx == ny && memcmp(x, y, nx * sizeof *x) == 0;
    qtts_free(x);
    qtts_free(y);
    return ok;
}

static char *decode_all(const int32_t *ids, size_t n, size_t *len) {
    qtts_err err = {0};
    char *s = NULL;
    if (qtts_tokenizer_decode(tok, ids, n, &s, len, &err) != QTTS_OK)
        fprintf(stderr, "  decode failed: %s\n", err.msg);
    return s;
}

static void print_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(stderr, "%02x", (unsigned char)s[i]);
}

/* Check every line of a {"text", ids...} JSONL file: the field `qwen2` must
 * match the Qwen2 regex; the field `mistral` (or `qwen2` when absent) the
 * Mistral-fixed regex. Returns the number of lines checked (-1: unreadable). */
static long check_jsonl(const char *path, const char *qwen2, const char *mistral) {
    char *buf;
    size_t len;
    qtts_err err = {0};
    if (qtts_read_file(path, (size_t)1 << 30, &buf, &len, &err) != QTTS_OK) {
        CHECK(0, "%s", err.msg);
        return -1;
    }
    qtts_json_limits lim = qtts_json_limits_files();
    long lines = 0, bad = 0;
    for (size_t p = 0, line_no = 1; p < len; line_no++) {
        size_t e = p;
        while (e < len && buf[e] != '\n') e++;
        if (e == p) {
            p = e + 1;
            continue;
        }
        qtts_json *d = qtts_json_parse(buf + p, e - p, &lim, path, &err);
        p = e + 1;
        CHECK(d, "line %zu: %s", line_no, err.msg);
        if (!d) continue;
        const qtts_json *text = qtts_json_get(d, "text");
        CHECK(text && text->type == QTTS_JSON_STRING, "line %zu: no text", line_no);
        for (int v = 0; v < 2 && text && text->type == QTTS_JSON_STRING; v++) {
            const qtts_json *want = qtts_json_get(d, v ? mistral : qwen2);
            if (!want) want = qtts_json_get(d, qwen2);
            CHECK(want && want->type == QTTS_JSON_ARRAY, "line %zu: no ids", line_no);
            if (!want || want->type != QTTS_JSON_ARRAY) break;
            int32_t *ids;
            size_t n;
            bool ok = enc(text->str, text->str_len, v ? QTTS_PRETOK_MISTRAL_FIXED : QTTS_PRETOK_QWEN2,
                          &ids, &n);
            ok = ok && n == want->count;
            for (size_t i = 0; ok && i < n; i++) ok = ids[i] == want->items[i]->integer;
            if (!ok && bad++ < 5) {
                fprintf(stderr, "  %s line %zu (%s): text hex ", path, line_no, v ? "mistral" : "qwen2");
                print_hex(text->str, text->str_len);
                fprintf(stderr, "\n   want");
                for (size_t i = 0; i < want->count; i++) fprintf(stderr, " %lld", (long long)want->items[i]->integer);
                fprintf(stderr, "\n   got ");
                for (size_t i = 0; ok && i < n; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            qtts_free(ids);
        }
        lines++;
        qtts_json_free(d);
    }
    qtts_free(buf);
    CHECK(bad == 0, "%s: %ld of %ld encodings differ from the reference", path, bad, 2 * lines);
    return lines;
}

/* ---- goldens ---- */

static void test_load_and_lookups(void) {
    REQUIRE(tok, "tokenizer not loaded");
    CHECK(qtts_tokenizer_vocab_size(tok) == 151676, "vocab size %d", qtts_tokenizer_vocab_size(tok));
    static const struct { const char *s; int32_t id; } known[] = {
        {"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645},
        {"<|audio_start|>", 151669}, {"<|audio_end|>", 151670}, {"<tts_pad>", 151671},
        {"<tts_text_bos>", 151672}, {"<tts_text_eod>", 151673}, {"<tts_text_bos_single>", 151674},
        {"<|audio_pad|>", 151675}, {"assistant", 77091}, {"user", 872}, {"\xC4\x8A", 198},
        {"\xC4\xA0", 220}, {"!", 0}, {"no such token", -1}, {"", -1},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(known); i++)
        CHECK(qtts_tokenizer_token_id(tok, known[i].s) == known[i].id, "%s -> %d, want %d", known[i].s,
              qtts_tokenizer_token_id(tok, known[i].s), known[i].id);
}

static void test_tokenize_cases(void) {
    REQUIRE(tok, "tokenizer not loaded");
    long n = check_jsonl(TOKDIR "/tokenize_cases.jsonl", "ids", "ids");
    CHECK(n == 20, "%ld cases, want 20", n);
}

static void test_hf_edge_cases(void) {
    REQUIRE(tok, "tokenizer not loaded");
    long n = check_jsonl(TOKDIR "/hf_edge_cases.jsonl", "ids", "ids_mistral");
    CHECK(n >= 1400, "%ld cases", n);
}

static void test_golden_corpus(void) {
    REQUIRE(tok, "tokenizer not loaded");
    const char *path = QTTS_FIXTURES "/golden/tokenizer_corpus.jsonl";
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "  note: %s not present, skipped\n", path);
        return;
    }
    long n = check_jsonl(path, "ids", "ids_local");
    CHECK(n > 0, "%s: no cases", path);
}

/* ---- behaviour ---- */

static void test_special_tokens_in_text(void) {
    REQUIRE(tok, "tokenizer not loaded");
    for (int v = 0; v < 2; v++) {
        qtts_pretok p = (qtts_pretok)v;
        CHECK(enc_is("a<tts_pad>b", p, (int32_t[]){64, 151671, 65}, 3), "inside text");
        CHECK(enc_is("<tts_pad><tts_pad>", p, (int32_t[]){151671, 151671}, 2), "adjacent");
        /* longest match: <tts_text_bos_single> vs its prefix <tts_text_bos> */
        CHECK(enc_is("<tts_text_bos_single>", p, (int32_t[]){151674}, 1), "longest");
        CHECK(enc_is("<tts_text_bos>_single>", p, (int32_t[]){151672, 19487, 29}, 3), "prefix");
        CHECK(enc_is("<tts_pad", p, (int32_t[]){62752, 2576, 30290}, 3), "incomplete: plain text");
        CHECK(enc_is("<|im_start|>assistant\n", p, (int32_t[]){151644, 77091, 198}, 3), "role");
        CHECK(enc_is("\n<|im_end|>\n", p, (int32_t[]){198, 151645, 198}, 3), "newlines around");
    }
    /* case matters, and special-looking text is not special */
    int32_t *ids;
    size_t n;
    REQUIRE(enc("<|IM_END|>", 10, QTTS_PRETOK_QWEN2, &ids, &n), "encode");
    for (size_t i = 0; i < n; i++) CHECK(ids[i] < 151643, "id %d from <|IM_END|>", ids[i]);
    qtts_free(ids);
}

static void test_nfc(void) {
    REQUIRE(tok, "tokenizer not loaded");
    CHECK(enc_is("e\xCC\x81", QTTS_PRETOK_QWEN2, (int32_t[]){963}, 1), "e + U+0301 = é");
    CHECK(same_ids("e\xCC\x81", "\xC3\xA9"), "e + U+0301 vs é");
    CHECK(same_ids("Cafe\xCC\x81 cre\xCC\x80me", "Caf\xC3\xA9 cr\xC3\xA8me"), "words");
    CHECK(same_ids("\xE2\x84\xAB", "\xC3\x85"), "U+212B ANGSTROM SIGN = U+00C5");
    CHECK(same_ids("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"), "Hangul L V T = 각");
    /* canonical reordering of marks known to Unicode 9.0 */
    CHECK(same_ids("a\xCC\x81\xCC\xA3", "a\xCC\xA3\xCC\x81"), "U+0301 U+0323 reorder");
    /* U+1DF6 (Unicode 10.0, ccc 232) is inert to the reference's Unicode 9.0
     * normalizer: no reordering before U+0323 (ccc 220), unlike current NFC */
    CHECK(enc_is("a\xE1\xB7\xB6\xCC\xA3", QTTS_PRETOK_QWEN2, (int32_t[]){64, 157, 115, 114, 136, 96}, 6),
          "a U+1DF6 U+0323 kept in order");
    CHECK(enc_is("a\xCC\xA3\xE1\xB7\xB6", QTTS_PRETOK_QWEN2, (int32_t[]){20229, 157, 115, 114}, 4),
          "a U+0323 U+1DF6 composes");
    /* a special token is not normalized and blocks composition across it */
    int32_t *ids;
    size_t n;
    REQUIRE(enc("e<tts_pad>\xCC\x81", 12, QTTS_PRETOK_QWEN2, &ids, &n), "encode");
    CHECK(n >= 3 && ids[0] == 68 && ids[1] == 151671, "e <tts_pad> U+0301");
    qtts_free(ids);
}

static void test_regex_details(void) {
    REQUIRE(tok, "tokenizer not loaded");
    const qtts_pretok Q = QTTS_PRETOK_QWEN2, M = QTTS_PRETOK_MISTRAL_FIXED;
    /* camelCase: one piece for Qwen2, split before the capital for Mistral */
    CHECK(enc_is("iPhone", Q, (int32_t[]){44740}, 1), "iPhone qwen2");
    CHECK(enc_is("iPhone", M, (int32_t[]){72, 6939}, 2), "iPhone mistral");
    for (int v = 0; v < 2; v++) {
        qtts_pretok p = (qtts_pretok)v;
        /* \s+(?!\S) gives the last space to the next word: a | "  " | " b" */
        CHECK(enc_is("a   b", p, (int32_t[]){64, 256, 293}, 3), "a   b");
        CHECK(enc_is("a   ", p, (int32_t[]){64, 262}, 2), "trailing spaces: one piece");
        /* \s*[\r\n]+ ends after the last newline of the run */
        CHECK(enc_is("a \n\n b", p, (int32_t[]){64, 4710, 293}, 3), "a \\n\\n b");
        CHECK(enc_is("x\r\n\r\ny", p, (int32_t[]){87, 871, 88}, 3), "CRLF CRLF");
        CHECK(enc_is("\t\tx", p, (int32_t[]){197, 10225}, 2), "tab prefix");
        CHECK(enc_is(" !!!\n\n", p, (int32_t[]){11015, 2219}, 2), "punctuation + newlines");
        CHECK(enc_is("12345", p, (int32_t[]){16, 17, 18, 19, 20}, 5), "digits one by one");
        /* \s is Unicode White_Space: U+3000 and U+00A0 are, U+200B and U+180E are not */
        CHECK(enc_is("x\xE3\x80\x80\xE3\x80\x80y", p, (int32_t[]){87, 22441, 22441, 88}, 4), "U+3000");
        CHECK(enc_is("x\xC2\xA0y", p, (int32_t[]){87, 4102, 88}, 3), "U+00A0 as prefix");
        CHECK(enc_is("x\xE2\x80\x8By", p, (int32_t[]){87, 15692, 88}, 3), "U+200B");
        CHECK(enc_is("x\xE1\xA0\x8Ey", p, (int32_t[]){87, 123970, 236, 88}, 4), "U+180E");
        /* contractions are case-insensitive; U+017F folds to s */
        CHECK(enc_is("DON'T", p, (int32_t[]){84641, 17323}, 2), "DON'T");
        CHECK(enc_is("x'\xC5\xBF", p, (int32_t[]){87, 6, 144815}, 3), "x'\\u017f");
    }
    /* empty and NUL */
    int32_t *ids = NULL;
    size_t n = 99;
    REQUIRE(enc("", 0, Q, &ids, &n), "empty");
    CHECK(n == 0 && ids != NULL, "empty text: %zu ids", n);
    qtts_free(ids);
    qtts_err err = {0};
    CHECK(qtts_tokenizer_encode(tok, NULL, 0, &ids, &n, &err) == QTTS_OK && n == 0, "NULL, 0");
    qtts_free(ids);
    REQUIRE(enc("a\0b", 3, Q, &ids, &n), "NUL");
    CHECK(n == 3 && ids[0] == 64 && ids[1] == 188 && ids[2] == 65, "a NUL b");
    qtts_free(ids);
    qtts_tokenize_opts bad = {(qtts_pretok)7};
    CHECK(qtts_tokenizer_encode_ex(tok, "a", 1, &bad, &ids, &n, &err) == QTTS_ERR_INVALID, "bad enum");
}

static void test_invalid_utf8(void) {
    REQUIRE(tok, "tokenizer not loaded");
    static const struct { const char *s; size_t at; const char *why; } cases[] = {
        {"\x80", 0, "continuation"},
        {"ab\xBF", 2, "continuation"},
        {"a\xC0\xAF", 1, "overlong"},
        {"a\xC1\xBF", 1, "overlong"},
        {"\xE0\x80\xAF", 0, "overlong"},
        {"x\xF0\x8F\xBF\xBF", 1, "overlong"},
        {"\xED\xA0\x80", 0, "surrogate"},
        {"\xED\xBF\xBF", 0, "surrogate"},
        {"\xF4\x90\x80\x80", 0, "above U+10FFFF"},
        {"\xF5\x80\x80\x80", 0, "never occurs"},
        {"\xFF", 0, "never occurs"},
        {"ok \xE4\xBD", 3, "truncated"},
        {"\xF0\x9F\x98", 0, "truncated"},
        {"\xE4\x41\x42", 0, "missing continuation"},
        {"\xF0\x9F\x98\x41", 0, "missing continuation"},
        {"<tts_pad>\x80", 9, "continuation"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(cases); i++) {
        qtts_err err = {0};
        int32_t *ids = (int32_t *)1;
        size_t n = 99;
        qtts_status st = qtts_tokenizer_encode(tok, cases[i].s, strlen(cases[i].s), &ids, &n, &err);
        char at[32];
        snprintf(at, sizeof at, "at byte %zu", cases[i].at);
        CHECK(st == QTTS_ERR_INVALID && ids == NULL && n == 0, "case %zu: status %d", i, (int)st);
        CHECK(strstr(err.msg, "invalid UTF-8") && strstr(err.msg, at) && strstr(err.msg, cases[i].why),
              "case %zu: message \"%s\"", i, err.msg);
    }
}

static const char *const roundtrip_texts[] = {
    "Hello, world!", "  two  spaces  ", "tabs\tand\nnewlines\r\n", "Cafe\xCC\x81 na\xC3\xAFve",
    "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok",
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", "it's 3.14 o'clock", "A\xCC\x8A\xE2\x84\xAB",
    "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "x\0y", "",
};

static void test_roundtrip(void) {
    REQUIRE(tok, "tokenizer not loaded");
    for (size_t i = 0; i < QTTS_ARRAY_LEN(roundtrip_texts); i++) {
        const char *s = roundtrip_texts[i];
        size_t len = strlen(s) + (i == 10 ? 2 : 0); /* "x\0y" */
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &nfc,
                                           UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        CHECK(nl >= 0, "utf8proc");
        for (int v = 0; v < 2 && nl >= 0; v++) {
            int32_t *ids;
            size_t n, dl = 0;
            if (!enc(s, len, (qtts_pretok)v, &ids, &n)) continue;
            char *d = decode_all(ids, n, &dl);
            CHECK(d && dl == (size_t)nl && memcmp(d, nfc, dl) == 0, "text %zu: decode(encode(x)) != NFC(x)", i);
            qtts_free(d);
            qtts_free(ids);
        }
        free(nfc);
    }
    /* the tokenize_cases texts as well (they contain special tokens; those decode as themselves) */
    char *buf;
    size_t len;
    qtts_err err = {0};
    REQUIRE(qtts_read_file(TOKDIR "/tokenize_cases.jsonl", 1 << 20, &buf, &len, &err) == QTTS_OK, "%s", err.msg);
    qtts_json_limits lim = qtts_json_limits_files();
    for (size_t p = 0; p < len;) {
        size_t e = p;
        while (e < len && buf[e] != '\n') e++;
        qtts_json *j = e > p ? qtts_json_parse(buf + p, e - p, &lim, "case", &err) : NULL;
        p = e + 1;
        const char *t = j ? qtts_json_get_str(j, "text") : NULL;
        if (t) {
            const qtts_json *tj = qtts_json_get(j, "text");
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t nl = utf8proc_map((const utf8proc_uint8_t *)t, (utf8proc_ssize_t)tj->str_len,
                                               &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            int32_t *ids;
            size_t n, dl = 0;
            if (nl >= 0 && enc(t, tj->str_len, QTTS_PRETOK_QWEN2, &ids, &n)) {
                char *d = decode_all(ids, n, &dl);
                CHECK(d && dl == (size_t)nl && memcmp(d, nfc, dl) == 0, "case \"%s\" does not round-trip", t);
                qtts_free(d);
                qtts_free(ids);
            }
            free(nfc);
        }
        qtts_json_free(j);
    }
    qtts_free(buf);
}

static void test_decode(void) {
    REQUIRE(tok, "tokenizer not loaded");
    /* bytes F0 9F of a 4-byte character, then 'a': one U+FFFD for the cut
     * sequence (from_utf8_lossy's maximal subpart), then "a" */
    int32_t f0 = qtts_tokenizer_token_id(tok, "\xC3\xB0");   /* byte 0xF0 is symbol U+00F0 */
    int32_t x9f = qtts_tokenizer_token_id(tok, "\xC5\x81");  /* byte 0x9F is symbol U+0141 */
    REQUIRE(f0 >= 0 && x9f >= 0, "byte symbols");
    int32_t ids[] = {f0, x9f, 64};
    size_t len = 0;
    char *s = decode_all(ids, 3, &len);
    CHECK(s && len == 4 && memcmp(s, "\xEF\xBF\xBD" "a", 4) == 0, "lossy decode");
    qtts_free(s);
    int32_t sp[] = {151644, 77091, 198, 151671};
    s = decode_all(sp, 4, &len);
    CHECK(s && strcmp(s, "<|im_start|>assistant\n<tts_pad>") == 0, "special tokens decode as content");
    qtts_free(s);
    qtts_err err = {0};
    int32_t badid[] = {1, 151676};
    s = (char *)1;
    CHECK(qtts_tokenizer_decode(tok, badid, 2, &s, &len, &err) == QTTS_ERR_INVALID && s == NULL,
          "out-of-range id");
    CHECK(strstr(err.msg, "151676") != NULL, "message: %s", err.msg);
    s = NULL;
    CHECK(qtts_tokenizer_decode(tok, NULL, 0, &s, &len, &err) == QTTS_OK && s && len == 0 && !*s, "empty");
    qtts_free(s);
}

/* ---- hostile files ---- */

static char tmpdir[64];

static bool write_file(const char *name, const char *data, size_t len) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static uint32_t byte_sym(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    int n = 0;
    for (int k = 0; k < b; k++)
        if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

/* vocab.json: the 256 byte symbols (id = byte) then `extra` tokens
 * (NUL-separated list) with ids 256...; skip_byte drops one symbol. */
static bool write_vocab(const char *extra, int skip_byte, const char *raw_tail) {
    static char out[65536];
    size_t o = 0;
    out[o++] = '{';
    int id = 0; /* dense even when a byte is skipped */
    for (int b = 0; b < 256; b++, id++) {
        if (b == skip_byte) {
            id--;
            continue;
        }
        uint32_t c = byte_sym(b);
        char u[4];
        int k = (int)utf8proc_encode_char((utf8proc_int32_t)c, (utf8proc_uint8_t *)u);
        o += qtts_json_escape(out + o, sizeof out - o, u, (size_t)k);
        o += (size_t)snprintf(out + o, sizeof out - o, ":%d,", id);
    }
    for (const char *e = extra; e && *e; e += strlen(e) + 1, id++) {
        o += qtts_json_escape(out + o, sizeof out - o, e, strlen(e));
        o += (size_t)snprintf(out + o, sizeof out - o, ":%d,", id);
    }
    if (raw_tail) o += (size_t)snprintf(out + o, sizeof out - o, "%s,", raw_tail);
    out[o - 1] = '}';
    return write_file("vocab.json", out, o);
}

#define CFG_ENTRY(id, content, more) \
    "\"" id "\":{\"content\":\"" content "\",\"special\":true,\"normalized\":false" more "}"

static bool write_config(const char *entries) {
    char buf[8192];
    int n = snprintf(buf, sizeof buf, "{\"model_max_length\":131072,\"added_tokens_decoder\":{%s}}", entries);
    return write_file("tokenizer_config.json", buf, (size_t)n);
}

static bool write_merges(const char *text) { return write_file("merges.txt", text, strlen(text)); }

/* Load tmpdir; expect status st and (when not OK) a message containing want. */
static qtts_tokenizer *load_expect(qtts_status st, const char *want, const char *what) {
    qtts_tokenizer *t = (qtts_tokenizer *)1;
    qtts_err err = {0};
    qtts_status got = qtts_tokenizer_load(tmpdir, &t, &err);
    CHECK(got == st, "%s: status %s, want %s (%s)", what, qtts_status_name(got), qtts_status_name(st), err.msg);
    if (got != QTTS_OK) {
        CHECK(t == NULL, "%s: out not cleared", what);
        CHECK(!want || strstr(err.msg, want), "%s: message \"%s\" lacks \"%s\"", what, err.msg, want);
        return NULL;
    }
    return t;
}

/* A valid tiny model: ids 256 ab, 257 bc, 258 abc, 259 aa; merges "b c",
 * "a b", "ab c", a repeated "b c" (keeps rank 0), "a a"; added 260 <x>, 261 <xy>. */
#define TINY_EXTRA "ab\0bc\0abc\0aa\0"
#define TINY_MERGES "#version: 0.2\nb c\na b\nab c\nb c\na a\n"
#define TINY_ADDED CFG_ENTRY("260", "<x>", "") "," CFG_ENTRY("261", "<xy>", "")

static void tiny_valid(void) {
    write_vocab(TINY_EXTRA, -1, NULL);
    write_merges(TINY_MERGES);
    write_config(TINY_ADDED);
}

static void test_tiny_model(void) {
    tiny_valid();
    qtts_tokenizer *t = load_expect(QTTS_OK, NULL, "tiny");
    REQUIRE(t, "tiny model did not load");
    CHECK(qtts_tokenizer_vocab_size(t) == 262, "size %d", qtts_tokenizer_vocab_size(t));
    qtts_tokenizer *save = tok;
    tok = t;
    /* "b c" has rank 0: "abc" -> a, bc (not ab, c -> abc) */
    CHECK(enc_is("abc", QTTS_PRETOK_QWEN2, (int32_t[]){'a', 257}, 2), "rank order");
    CHECK(enc_is("ab", QTTS_PRETOK_QWEN2, (int32_t[]){256}, 1), "ab");
    /* the repeated "b c" did not move it after "ab c": "abbc" -> ab, bc */
    CHECK(enc_is("abbc", QTTS_PRETOK_QWEN2, (int32_t[]){256, 257}, 2), "abbc");
    /* equal rank: the leftmost pair first */
    CHECK(enc_is("aaa", QTTS_PRETOK_QWEN2, (int32_t[]){259, 'a'}, 2), "aaa");
    CHECK(enc_is("aaaaa", QTTS_PRETOK_QWEN2, (int32_t[]){259, 259, 'a'}, 3), "aaaaa");
    CHECK(enc_is("<xy><x>z<x", QTTS_PRETOK_QWEN2, (int32_t[]){261, 260, 'z', '<', 'x'}, 5), "added");
    CHECK(qtts_tokenizer_token_id(t, "<xy>") == 261 && qtts_tokenizer_token_id(t, "bc") == 257, "lookup");
    tok = save;
    qtts_tokenizer_free(t);
    /* CRLF and CR line ends, blank lines and surrounding whitespace are fine */
    write_merges("#version: 0.2\r\nb c\r\r\n  a b \t\nab c");
    t = load_expect(QTTS_OK, NULL, "crlf");
    qtts_tokenizer_free(t);
    /* no #version line */
    write_merges("b c\na b\n");
    t = load_expect(QTTS_OK, NULL, "no version");
    qtts_tokenizer_free(t);
}

static void test_symlinked_files(void) {
    char real[4096], link[256];
    const char *files[] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", tmpdir, files[i]);
        unlink(link);
        REQUIRE(realpath(TOKDIR, real), "realpath");
        strncat(real, "/", sizeof real - strlen(real) - 1);
        strncat(real, files[i], sizeof real - strlen(real) - 1);
        REQUIRE(symlink(real, link) == 0, "symlink %s", link);
    }
    double t0 = qtts_now();
    qtts_tokenizer *t = load_expect(QTTS_OK, NULL, "symlinks");
    fprintf(stderr, "  load of the Qwen vocabulary: %.3f s\n", qtts_now() - t0);
    CHECK(t && qtts_tokenizer_vocab_size(t) == 151676, "symlinked load");
    qtts_tokenizer_free(t);
    for (int i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", tmpdir, files[i]);
        unlink(link);
    }
}

static void test_hostile_vocab(void) {
    tiny_valid();
    char path[256];
    snprintf(path, sizeof path, "%s/vocab.json", tmpdir);
    unlink(path);
    load_expect(QTTS_ERR_IO, "vocab.json", "missing vocab");
    write_file("vocab.json", "[1,2]", 5);
    load_expect(QTTS_ERR_FORMAT, "object", "array");
    write_file("vocab.json", "{\"a\":0", 6);
    load_expect(QTTS_ERR_FORMAT, "vocab.json", "truncated JSON");
    write_vocab(TINY_EXTRA, -1, "\"zz\":-1");
    load_expect(QTTS_ERR_FORMAT, "zz", "negative id");
    write_vocab(TINY_EXTRA, -1, "\"zz\":1.5");
    load_expect(QTTS_ERR_FORMAT, "zz", "fractional id");
    write_vocab(TINY_EXTRA, -1, "\"zz\":\"3\"");
    load_expect(QTTS_ERR_FORMAT, "zz", "string id");
    write_vocab(TINY_EXTRA, -1, "\"zz\":99999999999999999999999");
    load_expect(QTTS_ERR_FORMAT, "zz", "huge id");
    write_vocab(TINY_EXTRA, -1, "\"zz\":5000");
    load_expect(QTTS_ERR_FORMAT, "0..260", "sparse id");
    write_vocab(TINY_EXTRA, -1, "\"zz\":3");
    load_expect(QTTS_ERR_FORMAT, "id 3", "duplicate id");
    write_vocab(TINY_EXTRA, -1, "\"\":260");
    load_expect(QTTS_ERR_FORMAT, "empty token", "empty token");
    write_vocab("ab\0bc\0abc\0ab\0", -1, NULL);
    load_expect(QTTS_ERR_FORMAT, "vocab.json", "duplicate token");
    write_vocab(TINY_EXTRA "zq\0", 0x20, NULL); /* no symbol for the space byte */
    load_expect(QTTS_ERR_FORMAT, "byte 0x20", "missing byte symbol");
}

static void test_hostile_merges(void) {
    tiny_valid();
    char path[256];
    snprintf(path, sizeof path, "%s/merges.txt", tmpdir);
    unlink(path);
    load_expect(QTTS_ERR_IO, "merges.txt", "missing merges");
    write_merges("a b c\n");
    load_expect(QTTS_ERR_FORMAT, "line 1", "three fields");
    write_merges("#version: 0.2\na b\nabc\n");
    load_expect(QTTS_ERR_FORMAT, "line 3", "one field");
    write_merges("a b\nq\xC3\xA9 b\n");
    load_expect(QTTS_ERR_FORMAT, "not in vocab", "unknown token");
    write_merges("a c\n");
    load_expect(QTTS_ERR_FORMAT, "merged token \"ac\"", "unknown merged token");
    write_merges("a b\n\xC3\n");
    load_expect(QTTS_ERR_FORMAT, "invalid UTF-8", "bad UTF-8");
    write_merges("a b\n#version: 0.2\n"); /* only the first line may be the header */
    load_expect(QTTS_ERR_FORMAT, "line 2", "late header");
    /* Lines are looked up in batches: the first bad line is still the one
     * named, whatever comes after it in its batch, and line numbers run on
     * across batches (a repeated pair is allowed). */
    write_merges("a c\nq r s\n");
    load_expect(QTTS_ERR_FORMAT, "line 1: merged token \"ac\"", "unknown token before a bad line");
    char many[1024] = "";
    for (int i = 0; i < 70; i++) strcat(many, i == 45 ? "a\n" : "a b\n");
    write_merges(many);
    load_expect(QTTS_ERR_FORMAT, "line 46", "a bad line in the second batch");
    many[0] = 0;
    for (int i = 0; i < 70; i++) strcat(many, i == 66 ? "b zz\n" : i % 2 ? "a b\n" : "b c\n");
    write_merges(many);
    load_expect(QTTS_ERR_FORMAT, "line 67: merge token \"zz\"", "an unknown token in the third batch");
}

static void test_hostile_config(void) {
    tiny_valid();
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmpdir);
    unlink(path);
    load_expect(QTTS_ERR_IO, "tokenizer_config.json", "missing config");
    write_file("tokenizer_config.json", "{}", 2);
    load_expect(QTTS_ERR_FORMAT, "added_tokens_decoder", "no added tokens");
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\":[]}", 27);
    load_expect(QTTS_ERR_FORMAT, "added_tokens_decoder", "array");
    static const struct { const char *entries; qtts_status st; const char *want; } bad[] = {
        {CFG_ENTRY("0x104", "<x>", ""), QTTS_ERR_FORMAT, "decimal"},
        {CFG_ENTRY("0260", "<x>", ""), QTTS_ERR_FORMAT, "decimal"},
        {CFG_ENTRY("-260", "<x>", ""), QTTS_ERR_FORMAT, "decimal"},
        {CFG_ENTRY("", "<x>", ""), QTTS_ERR_FORMAT, "decimal"},
        {CFG_ENTRY("99999999999", "<x>", ""), QTTS_ERR_FORMAT, "decimal"},
        {CFG_ENTRY("261", "<x>", ""), QTTS_ERR_FORMAT, "outside 260..260"},
        {CFG_ENTRY("12", "<x>", ""), QTTS_ERR_FORMAT, "outside"},
        {CFG_ENTRY("260", "<x>", "") "," CFG_ENTRY("262", "<y>", ""), QTTS_ERR_FORMAT, "outside 260..261"},
        {CFG_ENTRY("260", "<x>", "") "," CFG_ENTRY("261", "<x>", ""), QTTS_ERR_FORMAT, "twice"},
        {CFG_ENTRY("260", "", ""), QTTS_ERR_FORMAT, "content"},
        {"\"260\":{\"special\":true}", QTTS_ERR_FORMAT, "content"},
        {"\"260\":{\"content\":7}", QTTS_ERR_FORMAT, "content"},
        {"\"260\":\"<x>\"", QTTS_ERR_FORMAT, "content"},
        {CFG_ENTRY("260", "<x>", ",\"lstrip\":true"), QTTS_ERR_UNSUPPORTED, "lstrip"},
        {CFG_ENTRY("260", "<x>", ",\"rstrip\":true"), QTTS_ERR_UNSUPPORTED, "rstrip"},
        {CFG_ENTRY("260", "<x>", ",\"single_word\":true"), QTTS_ERR_UNSUPPORTED, "single_word"},
        {"\"260\":{\"content\":\"<x>\",\"special\":true,\"normalized\":true}", QTTS_ERR_UNSUPPORTED, "normalized"},
        {"\"260\":{\"content\":\"<x>\",\"special\":false}", QTTS_ERR_UNSUPPORTED, "normalized"},
        {"\"260\":{\"content\":\"<x>\",\"special\":\"yes\"}", QTTS_ERR_FORMAT, "booleans"},
        {CFG_ENTRY("260", "<x>", ",\"lstrip\":0"), QTTS_ERR_FORMAT, "booleans"},
        {CFG_ENTRY("260", "ab", ""), QTTS_ERR_FORMAT, "vocab.json entry"},
    };
    for (size_t i = 0; i < QTTS_ARRAY_LEN(bad); i++) {
        char what[32];
        snprintf(what, sizeof what, "config case %zu", i);
        write_config(bad[i].entries);
        load_expect(bad[i].st, bad[i].want, what);
    }
    /* a non-special token with normalized:false is fine */
    write_config("\"260\":{\"content\":\"<x>\",\"special\":false,\"normalized\":false}");
    qtts_tokenizer_free(load_expect(QTTS_OK, NULL, "non-special"));
}

int main(void) {
    qtts_err err = {0};
    double t0 = qtts_now();
    if (qtts_tokenizer_load(TOKDIR, &tok, &err) != QTTS_OK) {
        fprintf(stderr, "cannot load %s: %s\n", TOKDIR, err.msg);
        tok = NULL;
    } else {
        fprintf(stderr, "  tokenizer load: %.3f s\n", qtts_now() - t0);
    }
    TEST_RUN(test_load_and_lookups);
    TEST_RUN(test_tokenize_cases);
    TEST_RUN(test_hf_edge_cases);
    TEST_RUN(test_golden_corpus);
    TEST_RUN(test_special_tokens_in_text);
    TEST_RUN(test_nfc);
    TEST_RUN(test_regex_details);
    TEST_RUN(test_invalid_utf8);
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_decode);

    snprintf(tmpdir, sizeof tmpdir, "/tmp/qtts_tok_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    TEST_RUN(test_tiny_model);
    TEST_RUN(test_symlinked_files);
    TEST_RUN(test_hostile_vocab);
    TEST_RUN(test_hostile_merges);
    TEST_RUN(test_hostile_config);
    const char *files[] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    qtts_tokenizer_free(tok);
    TEST_END();
}
