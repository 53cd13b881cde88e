/*
 * tokenizer.c - Qwen2 byte-level BPE, bit-exact with the reference (HF
 * `tokenizers` 0.22, Qwen2TokenizerFast converted from vocab.json +
 * merges.txt by transformers 4.57.3). Pipeline in tokenizer.h.
 *
 * Load.
 *   vocab.json goes through the strict JSON reader. Token strings keep their
 *   vocab.json spelling (byte-level symbols, as UTF-8) in one arena, with an
 *   id -> string table and an open-addressing hash string -> id. The ids must
 *   be exactly 0..N-1: the reference numbers added tokens N, N+1, ... in id
 *   order whatever ids tokenizer_config.json writes, so we accept the file's
 *   added ids only when they are exactly those (otherwise our ids would
 *   silently differ from the reference's).
 *   merges.txt is read the way the slow Qwen2Tokenizer reads it (the fast
 *   one is converted from it): universal newlines, Python str.strip() /
 *   str.split() whitespace, "#version:" skipped on the first line only, empty
 *   lines skipped, a repeated pair keeps its first position (dict key order),
 *   rank = position among distinct pairs. Each merge becomes
 *   (left id, right id) -> (rank, merged id) in a second hash.
 *
 * Encode. Added tokens are found on the raw text (leftmost, then longest).
 *   Each segment between them is NFC-normalized, cut into pieces by the
 *   pre-tokenizer scanner, and each piece's bytes go through BPE.
 *
 *   NFC: the reference's normalizer knows Unicode 9.0 only; later
 *   characters are inert to it. libutf8proc is therefore applied only to
 *   maximal runs of code points that are normalization-relevant in Unicode
 *   9.0, everything else is copied (see tokenizer_unicode.c).
 *
 *   BPE is the reference's algorithm (tokenizers/src/models/bpe/word.rs): a
 *   min-heap of candidate merges ordered by (rank, position of the left
 *   symbol); a popped entry is applied only if its left symbol is alive, has
 *   a right neighbour, and that pair still merges to the entry's id; after a
 *   merge the pairs with both new neighbours are pushed. No cache: encoding
 *   is cheap next to the model, and this keeps the tokenizer immutable.
 *
 * Decode maps ids to their strings, byte-level symbols back to bytes (a token
 * with any other character is taken as its raw UTF-8, as the reference's
 * ByteLevel decoder), then repairs invalid UTF-8 as Rust's from_utf8_lossy.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "../base/json.h"
#include "tokenizer_unicode.h"

#define VOCAB_FILE_MAX ((size_t)64 << 20)
#define MERGES_FILE_MAX ((size_t)64 << 20)
#define MERGE_BATCH 32     /* merges.txt lines looked up together */
#define VOCAB_AHEAD 16     /* vocab.json keys a slot is prefetched ahead */
#define CONFIG_FILE_MAX ((size_t)16 << 20)

/* ------------------------------------------------------------------ */
/* UTF-8                                                               */

enum {
    U8_OK = 0,
    U8_CONT,      /* continuation byte where a character must start */
    U8_OVERLONG,
    U8_SURROGATE,
    U8_TOO_BIG,   /* above U+10FFFF */
    U8_BAD_BYTE,  /* 0xF5..0xFF never occur */
    U8_MISSING,   /* a lead byte not followed by enough continuation bytes */
    U8_TRUNCATED, /* the same, cut by the end of the text */
};

static const char *u8_why(int e) {
    switch (e) {
    case U8_CONT: return "unexpected continuation byte";
    case U8_OVERLONG: return "overlong encoding";
    case U8_SURROGATE: return "encoded surrogate (U+D800..U+DFFF)";
    case U8_TOO_BIG: return "code point above U+10FFFF";
    case U8_BAD_BYTE: return "byte that never occurs in UTF-8";
    case U8_MISSING: return "missing continuation byte";
    case U8_TRUNCATED: return "sequence truncated by the end of the text";
    }
    return "ok";
}

/* Check the sequence at s[i..n). Returns U8_OK with *adv = its length, or
 * an error with *adv = the length of its maximal invalid subpart (>= 1, the
 * unit Unicode and from_utf8_lossy replace by one U+FFFD). */
static int u8_check(const uint8_t *s, size_t n, size_t i, size_t *adv) {
    uint8_t b = s[i];
    *adv = 1;
    if (b < 0x80) return U8_OK;
    if (b < 0xC0) return U8_CONT;
    if (b < 0xC2) return U8_OVERLONG;
    if (b > 0xF4) return U8_BAD_BYTE;
    size_t need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    int e2 = U8_MISSING;          /* what a second byte outside it means */
    if (b == 0xE0) lo = 0xA0, e2 = U8_OVERLONG;
    else if (b == 0xED) hi = 0x9F, e2 = U8_SURROGATE;
    else if (b == 0xF0) lo = 0x90, e2 = U8_OVERLONG;
    else if (b == 0xF4) hi = 0x8F, e2 = U8_TOO_BIG;
    for (size_t k = 1; k < need; k++) {
        if (i + k >= n) return U8_TRUNCATED;
        uint8_t c = s[i + k];
        bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
        if (!ok) return (k == 1 && c >= 0x80 && c <= 0xBF) ? e2 : U8_MISSING;
        *adv = k + 1;
    }
    *adv = need;
    return U8_OK;
}

/* Decode one code point of already-validated UTF-8 at s[*i], advancing *i. */
static uint32_t u8_next(const uint8_t *s, size_t *i) {
    uint32_t b = s[*i];
    if (b < 0x80) { *i += 1; return b; }
    if (b < 0xE0) { uint32_t c = ((b & 0x1F) << 6) | (s[*i + 1] & 0x3F); *i += 2; return c; }
    if (b < 0xF0) {
        uint32_t c = ((b & 0x0F) << 12) | ((uint32_t)(s[*i + 1] & 0x3F) << 6) | (s[*i + 2] & 0x3F);
        *i += 3;
        return c;
    }
    uint32_t c = ((b & 0x07) << 18) | ((uint32_t)(s[*i + 1] & 0x3F) << 12) |
                 ((uint32_t)(s[*i + 2] & 0x3F) << 6) | (s[*i + 3] & 0x3F);
    *i += 4;
    return c;
}

static size_t u8_put(uint8_t *o, uint32_t c) {
    if (c < 0x80) { o[0] = (uint8_t)c; return 1; }
    if (c < 0x800) { o[0] = (uint8_t)(0xC0 | (c >> 6)); o[1] = (uint8_t)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (c >> 12));
        o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (c >> 18));
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* Validate all of s; on failure the offset and reason. */
static int u8_validate(const uint8_t *s, size_t n, size_t *bad_at) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        size_t adv;
        int e = u8_check(s, n, i, &adv);
        if (e != U8_OK) { *bad_at = i; return e; }
        i += adv;
    }
    return U8_OK;
}

/* Quote a (valid UTF-8) token for an error message, at most ~48 bytes. */
static const char *quote(char *buf, size_t cap, const char *s, size_t len) {
    size_t cut = len;
    if (cut > 48) {
        cut = 48;
        while (cut > 0 && ((uint8_t)s[cut] & 0xC0) == 0x80) cut--;
    }
    size_t w = qtts_json_escape(buf, cap, s, cut);
    if (cut < len && w + 4 < cap) strcat(buf, "...");
    return buf;
}

/* ------------------------------------------------------------------ */
/* GPT-2 byte-level alphabet                                           */

/* Bytes 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF stand for themselves; the other
 * 68 map, in byte order, to U+0100..U+0143. */
static uint32_t byte_to_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int k = 0; k < b; k++)
        if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

/* ------------------------------------------------------------------ */
/* The tokenizer                                                       */

typedef struct {
    uint64_t key; /* (left << 32 | right); UINT64_MAX = empty */
    uint32_t rank;
    int32_t id;
} merge_slot;

typedef struct {
    int32_t id;    /* -1 = empty */
    uint32_t hash; /* high bits of the string's hash */
    uint32_t off, len; /* the string in the arena (a copy: one cache miss less) */
} vocab_slot;

typedef struct {
    uint32_t off, len; /* content in the arena */
    int32_t id;
} added_tok;

struct qtts_tokenizer {
    int32_t n_vocab;    /* vocab.json entries: ids 0..n_vocab-1 */
    int32_t n_ids;      /* n_vocab + added tokens */
    char *arena;        /* every token string, NUL-terminated */
    size_t arena_len, arena_cap;
    uint32_t *tok_off;  /* [n_ids] string of each id */
    uint32_t *tok_len;
    vocab_slot *vhash;  /* vocab string -> id */
    size_t vmask;
    merge_slot *mhash;
    size_t mmask, n_merges;
    int32_t byte_id[256];
    uint16_t u2b[0x144]; /* byte-level symbol -> byte + 1; 0 = not a symbol */
    added_tok *added;    /* sorted by first byte, then longest first */
    size_t n_added;
    uint16_t added_lo[256], added_hi[256]; /* added[lo..hi) start with that byte */
};

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return hash_u64(h);
}
static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* hv: hash_bytes(s, n) */
static int32_t vocab_find_h(const qtts_tokenizer *t, const char *s, size_t n, uint64_t hv) {
    uint32_t tag = (uint32_t)(hv >> 32);
    for (size_t h = (size_t)hv & t->vmask;; h = (h + 1) & t->vmask) {
        const vocab_slot *v = &t->vhash[h];
        if (v->id < 0) return -1;
        if (v->hash == tag && v->len == n && memcmp(t->arena + v->off, s, n) == 0) return v->id;
    }
}

static int32_t vocab_find(const qtts_tokenizer *t, const char *s, size_t n) {
    return vocab_find_h(t, s, n, hash_bytes(s, n));
}

static const merge_slot *merge_find(const qtts_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t h = (size_t)hash_u64(key) & t->mmask;
    for (;;) {
        const merge_slot *m = &t->mhash[h];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
        h = (h + 1) & t->mmask;
    }
}

/* Append a string to the arena; its offset in *off. */
static bool arena_add(qtts_tokenizer *t, const char *s, size_t n, uint32_t *off) {
    if (n > UINT32_MAX || t->arena_len + n + 1 > UINT32_MAX) return false;
    if (t->arena_len + n + 1 > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 4096;
        while (cap < t->arena_len + n + 1) cap *= 2;
        char *a = qtts_realloc(t->arena, cap);
        if (!a) return false;
        t->arena = a;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = 0;
    *off = (uint32_t)t->arena_len;
    t->arena_len += n + 1;
    return true;
}

void qtts_tokenizer_free(qtts_tokenizer *t) {
    if (!t) return;
    qtts_free(t->arena);
    qtts_free(t->tok_off);
    qtts_free(t->tok_len);
    qtts_free(t->vhash);
    qtts_free(t->mhash);
    qtts_free(t->added);
    qtts_free(t);
}

/* ---- vocab.json ---- */

static qtts_status load_vocab(qtts_tokenizer *t, const char *path, qtts_err *err) {
    char *text = NULL, q1[128], q2[128];
    size_t len = 0;
    qtts_status st = qtts_read_file(path, VOCAB_FILE_MAX, &text, &len, err);
    if (st != QTTS_OK) return st;
    qtts_json_limits lim = qtts_json_limits_files();
    qtts_json *doc = qtts_json_parse(text, len, &lim, path, err);
    qtts_free(text);
    if (!doc) return err ? err->status : QTTS_ERR_FORMAT;
    if (doc->type != QTTS_JSON_OBJECT || doc->count == 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: expected a non-empty object of token -> id", path);
        goto out;
    }
    if (doc->count >= QTTS_TOKENIZER_MAX_ID) {
        st = qtts_fail(err, QTTS_ERR_LIMIT, "%s: %zu entries, over the limit of %d", path,
                       doc->count, QTTS_TOKENIZER_MAX_ID - 1);
        goto out;
    }
    size_t n = doc->count;
    t->n_vocab = (int32_t)n;
    t->tok_off = qtts_malloc(n * sizeof *t->tok_off);
    t->tok_len = qtts_malloc(n * sizeof *t->tok_len);
    t->vmask = pow2_at_least(2 * n) - 1;
    t->vhash = qtts_malloc((t->vmask + 1) * sizeof *t->vhash);
    if (!t->tok_off || !t->tok_len || !t->vhash) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i <= t->vmask; i++) t->vhash[i].id = -1;
    for (size_t i = 0; i < n; i++) t->tok_len[i] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        const qtts_json *v = doc->items[i];
        const char *key = doc->keys[i];
        size_t klen = doc->key_lens[i];
        /* the slot of a key some way ahead (the table is read at random;
         * see load_merges) */
        if (i + VOCAB_AHEAD < n)
            __builtin_prefetch(&t->vhash[(size_t)hash_bytes(doc->keys[i + VOCAB_AHEAD],
                                                            doc->key_lens[i + VOCAB_AHEAD]) &
                                         t->vmask]);
        if (klen == 0) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: empty token string", path);
            goto out;
        }
        if (v->type != QTTS_JSON_NUMBER || !v->is_integer || v->integer < 0 ||
            v->integer >= (int64_t)n || (double)v->integer != v->number) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: token %s: id must be an integer in 0..%zu (the ids must be "
                           "exactly 0..entries-1)",
                           path, quote(q1, sizeof q1, key, klen), n - 1);
            goto out;
        }
        int32_t id = (int32_t)v->integer;
        if (t->tok_len[id] != UINT32_MAX) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: id %d is given to both %s and %s", path, id,
                           quote(q1, sizeof q1, t->arena + t->tok_off[id], t->tok_len[id]),
                           quote(q2, sizeof q2, key, klen));
            goto out;
        }
        if (!arena_add(t, key, klen, &t->tok_off[id])) {
            st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        t->tok_len[id] = (uint32_t)klen;
        uint64_t hv = hash_bytes(key, klen);
        uint32_t tag = (uint32_t)(hv >> 32);
        size_t h = (size_t)hv & t->vmask;
        for (; t->vhash[h].id >= 0; h = (h + 1) & t->vmask) {
            const vocab_slot *o = &t->vhash[h];
            if (o->hash == tag && o->len == klen && memcmp(t->arena + o->off, key, klen) == 0) {
                st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: token %s appears twice", path,
                               quote(q1, sizeof q1, key, klen)); /* the JSON reader rejects it first */
                goto out;
            }
        }
        t->vhash[h] = (vocab_slot){id, tag, t->tok_off[id], (uint32_t)klen};
    }
    /* n distinct ids in 0..n-1: dense. Now the byte alphabet. */
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        uint32_t cp = byte_to_cp(b);
        t->u2b[cp] = (uint16_t)(b + 1);
        t->byte_id[b] = vocab_find(t, (const char *)u, u8_put(u, cp));
        if (t->byte_id[b] < 0) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: no entry for the byte-level symbol U+%04X of byte 0x%02X", path,
                           (unsigned)cp, (unsigned)b);
            goto out;
        }
    }
out:
    qtts_json_free(doc);
    return st;
}

/* ---- merges.txt ---- */

/* Python str.isspace() (what str.strip()/str.split() remove). */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Whether the character at s[*i] is Python whitespace; advances *i past it. */
static inline bool space_at(const uint8_t *s, size_t *i) {
    if (s[*i] < 0x80) {
        uint8_t b = s[(*i)++];
        return (b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x20);
    }
    return py_space(u8_next(s, i));
}

static qtts_status load_merges(qtts_tokenizer *t, const char *path, qtts_err *err) {
    char *text = NULL, q1[128];
    size_t len = 0, bad;
    qtts_status st = qtts_read_file(path, MERGES_FILE_MAX, &text, &len, err);
    if (st != QTTS_OK) return st;
    const uint8_t *s = (const uint8_t *)text;
    int e = u8_validate(s, len, &bad);
    if (e != U8_OK) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu: %s", path, bad,
                       u8_why(e));
        goto out;
    }
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++) n_lines += s[i] == '\n' || s[i] == '\r';
    t->mmask = pow2_at_least(2 * n_lines) - 1;
    t->mhash = qtts_malloc((t->mmask + 1) * sizeof *t->mhash);
    if (!t->mhash) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i <= t->mmask; i++) t->mhash[i].key = UINT64_MAX;
    char *cat = qtts_malloc(len + 1); /* scratch for "left" + "right" */
    if (!cat) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    /* Lines go in batches: parse a batch and prefetch the vocab slots of
     * its tokens, look the tokens up, prefetch the merge slots, insert.
     * The tables (8 MB each for 151k entries) are read at random, one cache
     * miss per probe; a line at a time, those misses came one after
     * another (half of the tokenizer's load). The order of the work on
     * each table, and so every table and error, is a line's at a time. */
    struct {
        size_t off[3], len[3];   /* the two tokens in s, the merged one in cat */
        uint64_t hv[3];
        size_t line_no;
    } b[MERGE_BATCH];
    size_t p = 0, line_no = 0;
    while (p < len) {
        int nb = 0, bad_nf = 0;   /* bad_nf: fields of a malformed line that ends the batch */
        size_t cl = 0;
        while (p < len && nb < MERGE_BATCH && !bad_nf) {
            size_t e_ = p;
            while (e_ < len && s[e_] != '\n' && s[e_] != '\r') e_++;
            size_t next = e_ < len ? e_ + 1 + (s[e_] == '\r' && e_ + 1 < len && s[e_ + 1] == '\n') : len;
            line_no++;
            /* split [p, e_) into fields on Python whitespace (strip is implied) */
            size_t fs[3], fe[3];
            int nf = 0;
            size_t i = p;
            while (i < e_ && nf < 3) {
                size_t j = i;
                if (space_at(s, &j)) { i = j; continue; }
                fs[nf] = i;
                while (i < e_) {
                    j = i;
                    if (space_at(s, &j)) break;
                    i = j;
                }
                fe[nf++] = i;
            }
            p = next;
            if (nf == 0 || (line_no == 1 && fe[0] - fs[0] >= 9 && memcmp(s + fs[0], "#version:", 9) == 0))
                continue;
            if (nf != 2) {
                bad_nf = nf;
                break;
            }
            b[nb].line_no = line_no;
            b[nb].off[2] = cl;
            for (int k = 0; k < 2; k++) {
                b[nb].off[k] = fs[k];
                b[nb].len[k] = fe[k] - fs[k];
                memcpy(cat + cl, s + fs[k], fe[k] - fs[k]);
                cl += fe[k] - fs[k];
            }
            b[nb].len[2] = cl - b[nb].off[2];
            for (int k = 0; k < 3; k++) {
                const char *tk = k < 2 ? (const char *)s + b[nb].off[k] : cat + b[nb].off[2];
                b[nb].hv[k] = hash_bytes(tk, b[nb].len[k]);
                __builtin_prefetch(&t->vhash[(size_t)b[nb].hv[k] & t->vmask]);
            }
            nb++;
        }
        int32_t ids[MERGE_BATCH][3];
        for (int m = 0; m < nb; m++)
            for (int k = 0; k < 3; k++) {
                const char *tk = k < 2 ? (const char *)s + b[m].off[k] : cat + b[m].off[2];
                ids[m][k] = vocab_find_h(t, tk, b[m].len[k], b[m].hv[k]);
                if (ids[m][k] >= 0) continue;
                qtts_fail(err, QTTS_ERR_FORMAT, "%s: line %zu: %s token %s is not in vocab.json",
                          path, b[m].line_no, k < 2 ? "merge" : "merged",
                          quote(q1, sizeof q1, tk, b[m].len[k]));
                qtts_free(cat);
                st = QTTS_ERR_FORMAT;
                goto out;
            }
        uint64_t key[MERGE_BATCH];
        for (int m = 0; m < nb; m++) {
            key[m] = (uint64_t)(uint32_t)ids[m][0] << 32 | (uint32_t)ids[m][1];
            __builtin_prefetch(&t->mhash[(size_t)hash_u64(key[m]) & t->mmask]);
        }
        for (int m = 0; m < nb; m++) {
            size_t h = (size_t)hash_u64(key[m]) & t->mmask;
            while (t->mhash[h].key != UINT64_MAX && t->mhash[h].key != key[m]) h = (h + 1) & t->mmask;
            if (t->mhash[h].key == UINT64_MAX) { /* a repeated pair keeps its first rank */
                t->mhash[h].key = key[m];
                t->mhash[h].rank = (uint32_t)t->n_merges++;
                t->mhash[h].id = ids[m][2];
            }
        }
        if (bad_nf) {
            qtts_free(cat);
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: line %zu: expected two tokens, found %s",
                           path, line_no, bad_nf == 1 ? "one" : "more");
            goto out;
        }
    }
    qtts_free(cat);
out:
    qtts_free(text);
    return st;
}

/* ---- tokenizer_config.json: added_tokens_decoder ---- */

/* Order for matching: by first byte, then longest first. */
static bool added_before(const char *arena, const added_tok *x, const added_tok *y) {
    uint8_t a = (uint8_t)arena[x->off], b = (uint8_t)arena[y->off];
    return a != b ? a < b : x->len > y->len;
}

/* An optional boolean member; *bad when present with another type. */
static void opt_bool(const qtts_json *o, const char *key, bool dflt, bool *out, bool *bad) {
    const qtts_json *v = qtts_json_get(o, key);
    *out = dflt;
    if (!v) return;
    if (v->type != QTTS_JSON_BOOL) *bad = true;
    else *out = v->boolean;
}

static qtts_status load_added(qtts_tokenizer *t, const char *path, qtts_err *err) {
    char *text = NULL, q1[128];
    size_t len = 0;
    qtts_status st = qtts_read_file(path, CONFIG_FILE_MAX, &text, &len, err);
    if (st != QTTS_OK) return st;
    qtts_json_limits lim = qtts_json_limits_files();
    qtts_json *doc = qtts_json_parse(text, len, &lim, path, err);
    qtts_free(text);
    if (!doc) return err ? err->status : QTTS_ERR_FORMAT;
    const qtts_json *atd = doc->type == QTTS_JSON_OBJECT ? qtts_json_get(doc, "added_tokens_decoder") : NULL;
    if (!atd || atd->type != QTTS_JSON_OBJECT || atd->count == 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: no non-empty added_tokens_decoder object", path);
        goto out;
    }
    size_t n = atd->count;
    if (n > QTTS_TOKENIZER_MAX_ADDED ||
        (size_t)t->n_vocab + n >= (size_t)QTTS_TOKENIZER_MAX_ID) {
        st = qtts_fail(err, QTTS_ERR_LIMIT, "%s: %zu added tokens, over the limit", path, n);
        goto out;
    }
    t->n_ids = t->n_vocab + (int32_t)n;
    uint32_t *off = qtts_realloc(t->tok_off, (size_t)t->n_ids * sizeof *off);
    if (off) t->tok_off = off;
    uint32_t *ln = qtts_realloc(t->tok_len, (size_t)t->n_ids * sizeof *ln);
    if (ln) t->tok_len = ln;
    t->added = qtts_calloc(n, sizeof *t->added);
    if (!off || !ln || !t->added) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (int32_t i = t->n_vocab; i < t->n_ids; i++) t->tok_len[i] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *key = atd->keys[i];
        size_t klen = atd->key_lens[i];
        int64_t id = 0;
        bool key_ok = klen > 0 && klen <= 9 && !(klen > 1 && key[0] == '0');
        for (size_t k = 0; key_ok && k < klen; k++) {
            if (key[k] < '0' || key[k] > '9') key_ok = false;
            else id = id * 10 + (key[k] - '0');
        }
        if (!key_ok) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: added_tokens_decoder key %s is not a decimal token id", path,
                           quote(q1, sizeof q1, key, klen));
            goto out;
        }
        if (id < t->n_vocab || id >= t->n_ids) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: added token id %lld is outside %d..%d (the reference numbers "
                           "added tokens right after the %d vocab.json entries)",
                           path, (long long)id, t->n_vocab, t->n_ids - 1, t->n_vocab);
            goto out;
        }
        if (t->tok_len[id] != UINT32_MAX) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: added token id %lld appears twice", path,
                           (long long)id);
            goto out;
        }
        const qtts_json *o = atd->items[i];
        const qtts_json *c = o->type == QTTS_JSON_OBJECT ? qtts_json_get(o, "content") : NULL;
        if (!c || c->type != QTTS_JSON_STRING || c->str_len == 0 ||
            c->str_len > QTTS_TOKENIZER_MAX_ADDED_LEN) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: added token %lld: content must be a string of 1..%d bytes", path,
                           (long long)id, QTTS_TOKENIZER_MAX_ADDED_LEN);
            goto out;
        }
        bool bad = false, special = false, lstrip = false, rstrip = false, single_word = false,
             normalized = false;
        opt_bool(o, "special", false, &special, &bad);
        opt_bool(o, "lstrip", false, &lstrip, &bad);
        opt_bool(o, "rstrip", false, &rstrip, &bad);
        opt_bool(o, "single_word", false, &single_word, &bad);
        opt_bool(o, "normalized", !special, &normalized, &bad);
        if (bad) {
            st = qtts_fail(err, QTTS_ERR_FORMAT,
                           "%s: added token %lld: special/lstrip/rstrip/single_word/normalized "
                           "must be booleans",
                           path, (long long)id);
            goto out;
        }
        if (lstrip || rstrip || single_word || normalized) {
            st = qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                           "%s: added token %s: lstrip, rstrip, single_word and normalized must "
                           "be false (normalized defaults to !special)",
                           path, quote(q1, sizeof q1, c->str, c->str_len));
            goto out;
        }
        if (vocab_find(t, c->str, c->str_len) >= 0) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: added token %s is also a vocab.json entry",
                           path, quote(q1, sizeof q1, c->str, c->str_len));
            goto out;
        }
        for (size_t k = 0; k < i; k++) {
            const added_tok *a = &t->added[k];
            if (a->len == c->str_len && memcmp(t->arena + a->off, c->str, a->len) == 0) {
                st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: added token %s appears twice", path,
                               quote(q1, sizeof q1, c->str, c->str_len));
                goto out;
            }
        }
        added_tok *a = &t->added[i];
        if (!arena_add(t, c->str, c->str_len, &a->off)) {
            st = qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        a->len = (uint32_t)c->str_len;
        a->id = (int32_t)id;
        t->tok_off[id] = a->off;
        t->tok_len[id] = a->len;
    }
    t->n_added = n;
    /* n distinct ids in n_vocab..n_ids-1: all present. */
    for (size_t i = 1; i < n; i++) { /* insertion sort; n is small */
        added_tok a = t->added[i];
        size_t k = i;
        for (; k > 0 && added_before(t->arena, &a, &t->added[k - 1]); k--) t->added[k] = t->added[k - 1];
        t->added[k] = a;
    }
    memset(t->added_lo, 0, sizeof t->added_lo);
    memset(t->added_hi, 0, sizeof t->added_hi);
    for (size_t i = n; i-- > 0;) {
        uint8_t b = (uint8_t)t->arena[t->added[i].off];
        t->added_lo[b] = (uint16_t)i;
        if (!t->added_hi[b]) t->added_hi[b] = (uint16_t)(i + 1);
    }
out:
    qtts_json_free(doc);
    return st;
}

qtts_status qtts_tokenizer_load(const char *model_dir, qtts_tokenizer **out, qtts_err *err) {
    if (!out) return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer: out is NULL");
    *out = NULL;
    if (!model_dir) return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer: model_dir is NULL");
    char path[4096];
    qtts_tokenizer *t = qtts_calloc(1, sizeof *t);
    if (!t) return qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
    static const char *const files[3] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    qtts_status st = QTTS_OK;
    for (int k = 0; k < 3 && st == QTTS_OK; k++) {
        if (!qtts_path_join(path, sizeof path, model_dir, files[k])) {
            st = qtts_fail(err, QTTS_ERR_INVALID, "tokenizer: model directory path too long");
            break;
        }
        st = k == 0 ? load_vocab(t, path, err) : k == 1 ? load_merges(t, path, err)
                                                        : load_added(t, path, err);
    }
    if (st != QTTS_OK) {
        qtts_tokenizer_free(t);
        return st;
    }
    *out = t;
    return QTTS_OK;
}

int32_t qtts_tokenizer_vocab_size(const qtts_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t qtts_tokenizer_token_id(const qtts_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t n = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && memcmp(t->arena + t->added[i].off, token, n) == 0)
            return t->added[i].id;
    return vocab_find(t, token, n);
}

/* ------------------------------------------------------------------ */
/* Encoding                                                            */

typedef struct {
    uint32_t rank, pos;
    int32_t id;
} heap_ent;

typedef struct {
    int32_t *ids;
    size_t n_ids, cap_ids;
    uint8_t *nfc; /* normalized segment */
    size_t nfc_len, cap_nfc;
    uint32_t *cp; /* its code points, classes and byte offsets (n + 1) */
    uint8_t *cl;
    size_t *off;
    size_t cap_cp, cap_cl, cap_off;
    int32_t *sym, *prev, *next; /* BPE symbols of one piece */
    size_t cap_sym, cap_prev, cap_next;
    heap_ent *heap;
    size_t cap_heap;
} enc_ctx;

static void ctx_free(enc_ctx *c) {
    qtts_free(c->nfc);
    qtts_free(c->cp);
    qtts_free(c->cl);
    qtts_free(c->off);
    qtts_free(c->sym);
    qtts_free(c->prev);
    qtts_free(c->next);
    qtts_free(c->heap);
}

/* Grow *p to hold at least n elements of size sz. */
static bool grow(void **p, size_t *cap, size_t n, size_t sz) {
    if (n <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < n) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    uint64_t bytes;
    if (!qtts_mul_ok(c, sz, &bytes) || bytes > SIZE_MAX) return false;
    void *q = qtts_realloc(*p, (size_t)bytes);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool push_id(enc_ctx *c, int32_t id) {
    if (!grow((void **)&c->ids, &c->cap_ids, c->n_ids + 1, sizeof *c->ids)) return false;
    c->ids[c->n_ids++] = id;
    return true;
}

static bool nfc_append(enc_ctx *c, const uint8_t *s, size_t n) {
    if (!grow((void **)&c->nfc, &c->cap_nfc, c->nfc_len + n, 1)) return false;
    memcpy(c->nfc + c->nfc_len, s, n);
    c->nfc_len += n;
    return true;
}

/* NFC of one run of Unicode-9.0-relevant code points. */
static qtts_status nfc_run(enc_ctx *c, const uint8_t *s, size_t n, bool ascii, qtts_err *err) {
    if (n == 0) return QTTS_OK;
    if (ascii) /* ASCII never changes under NFC when followed by no mark */
        return nfc_append(c, s, n) ? QTTS_OK : qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t k = utf8proc_map(s, (utf8proc_ssize_t)n, &r, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (k < 0) {
        if (k == UTF8PROC_ERROR_NOMEM) return qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
        return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer: NFC failed: %s", utf8proc_errmsg(k));
    }
    bool ok = nfc_append(c, r, (size_t)k);
    free(r); /* allocated by utf8proc */
    return ok ? QTTS_OK : qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
}

/* NFC as the reference computes it (see the file comment): libutf8proc on
 * maximal runs of code points relevant in Unicode 9.0, the others copied. A
 * run of ASCII letters ends at the next inert code point, so when the run
 * holds no non-ASCII byte it is already normalized. */
static qtts_status nfc_segment(enc_ctx *c, const uint8_t *s, size_t n, const uint8_t **out,
                               size_t *out_n, qtts_err *err) {
    size_t i = 0;
    while (i < n && s[i] < 0x80) i++;
    if (i == n) {
        *out = s;
        *out_n = n;
        return QTTS_OK;
    }
    c->nfc_len = 0;
    size_t run = 0, p = 0;
    bool run_ascii = true;
    while (p < n) {
        size_t q = p;
        uint32_t cp = u8_next(s, &q);
        if (qtts_uc_nfc9_relevant(cp)) {
            run_ascii = run_ascii && cp < 0x80;
            p = q;
            continue;
        }
        qtts_status st = nfc_run(c, s + run, p - run, run_ascii, err);
        if (st != QTTS_OK) return st;
        if (!nfc_append(c, s + p, q - p)) return qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
        p = run = q;
        run_ascii = true;
    }
    qtts_status st = nfc_run(c, s + run, n - run, run_ascii, err);
    if (st != QTTS_OK) return st;
    *out = c->nfc;
    *out_n = c->nfc_len;
    return QTTS_OK;
}

/*
 * Pre-tokenizer scanners. Both regexes are run by the reference as
 * Oniguruma find_iter: at each position the alternatives are tried left to
 * right, each with backtracking quantifiers (greedy, giving back one
 * character at a time), and the first alternative that matches wins even if
 * a later one would be longer. Every code point starts a match of some
 * alternative, so the matches tile the segment and each match is one piece.
 * The scanners below return the end of the match at i, reproducing those
 * semantics alternative by alternative (cl[] = classes, see
 * tokenizer_unicode.h; \s is Unicode White_Space).
 *
 * Qwen2:
 *  1 (?i:'s|'t|'re|'ve|'m|'ll|'d)  case-insensitive per Unicode case folding,
 *    so U+017F LATIN SMALL LETTER LONG S also matches 's' (the reference
 *    matches "'ſ"; no other code point folds to one of these letters).
 *  2 [^\r\n\p{L}\p{N}]?\p{L}+  the optional prefix is tried first: one
 *    non-letter/digit/CR/LF character (a space, a tab, punctuation...)
 *    glued to the letters that follow it.
 *  3 \p{N}  a single digit: numbers split into single digits.
 *  4 " ?[^\s\p{L}\p{N}]+[\r\n]*"  punctuation run, with one optional
 *    leading space and trailing CR/LF.
 *  5 \s*[\r\n]+  \s* first takes the whole whitespace run, then gives back
 *    until [\r\n]+ can match, so the match ends right after the LAST CR/LF
 *    of the whitespace run starting at i (fails if the run has none).
 *  6 \s+(?!\S)  the whole whitespace run if it reaches the end of the
 *    segment; otherwise it gives back one character (whose successor is
 *    then whitespace), so it matches all but the last, when that leaves at
 *    least one. Hence "a   b" -> "a", "  ", " b".
 *  7 \s+  reached only by a single whitespace character before a non-space.
 */
static inline bool is_L(uint8_t c) { return c >= QTTS_UC_LU && c <= QTTS_UC_LO; }
static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
/* [^\r\n\p{L}\p{N}] */
static inline bool is_pre(uint32_t cp, uint8_t c) { return !is_L(c) && c != QTTS_UC_N && !is_crlf(cp); }
/* [^\s\p{L}\p{N}] */
static inline bool is_punct(uint8_t c) { return !is_L(c) && c != QTTS_UC_N && c != QTTS_UC_WS; }

/* Alternatives 5-7, shared by both regexes; cl[i] is whitespace. */
static size_t scan_space(const uint32_t *cp, const uint8_t *cl, size_t n, size_t i) {
    size_t j = i;
    while (j < n && cl[j] == QTTS_UC_WS) j++;
    for (size_t k = j; k-- > i;)
        if (is_crlf(cp[k])) return k + 1; /* 5 */
    if (j == n) return n;                 /* 6 at the end */
    if (j - i >= 2) return j - 1;         /* 6 */
    return j;                             /* 7 */
}

/* ' ?[^\s\p{L}\p{N}]+[\r\n]*' (Qwen2) or the same with [\r\n/]* (Mistral:
 * the '/' can never apply, since '/' is already in the run before it). Returns
 * i when it does not match. */
static size_t scan_punct(const uint32_t *cp, const uint8_t *cl, size_t n, size_t i, bool slash) {
    size_t s = i + (cp[i] == ' ');
    if (s >= n || !is_punct(cl[s])) return i; /* without the space: ' ' is \s, no match */
    while (s < n && is_punct(cl[s])) s++;
    while (s < n && (is_crlf(cp[s]) || (slash && cp[s] == '/'))) s++;
    return s;
}

static size_t scan_qwen2(const uint32_t *cp, const uint8_t *cl, size_t n, size_t i) {
    uint32_t c0 = cp[i];
    if (c0 == '\'' && i + 1 < n) { /* 1 */
        uint32_t c1 = cp[i + 1], c2 = i + 2 < n ? cp[i + 2] : 0;
        if (c1 == 's' || c1 == 'S' || c1 == 0x17F || c1 == 't' || c1 == 'T' || c1 == 'm' ||
            c1 == 'M' || c1 == 'd' || c1 == 'D')
            return i + 2;
        if ((c1 == 'r' || c1 == 'R' || c1 == 'v' || c1 == 'V') && (c2 == 'e' || c2 == 'E')) return i + 3;
        if ((c1 == 'l' || c1 == 'L') && (c2 == 'l' || c2 == 'L')) return i + 3;
    }
    size_t s = i + is_pre(c0, cl[i]); /* 2; is_pre(c0) implies c0 is no letter */
    if (s < n && is_L(cl[s])) {
        while (s < n && is_L(cl[s])) s++;
        return s;
    }
    if (cl[i] == QTTS_UC_N) return i + 1; /* 3 */
    size_t e = scan_punct(cp, cl, n, i, false); /* 4 */
    if (e > i) return e;
    if (cl[i] == QTTS_UC_WS) return scan_space(cp, cl, n, i);
    return i + 1; /* not reached: every class is covered above */
}

/*
 * Mistral-fixed (U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
 * P = [^\r\n\p{L}\p{N}]; Lm, Lo and marks are in both U and W, and a mark is
 * also in P since it is no letter):
 *  A P?U*W+  with P taken first if possible; U* takes its whole run, then
 *    gives back one at a time until W+ can start; W+ then runs to the end
 *    of its W run. "iPhone": at 'i' U* is empty, W+ = "i"; at 'P', U* = "P",
 *    W+ = "hone".
 *  B P?U+W*  (for a run of upper-case letters that no lower-case follows)
 *  C \p{N}   D ' '?[^\s\p{L}\p{N}]+[\r\n/]*   then 5-7 as in Qwen2.
 * No contraction alternative: "'s" is P + letters under A.
 */
static inline bool is_U(uint8_t c) {
    return c == QTTS_UC_LU || c == QTTS_UC_LT || c == QTTS_UC_LM || c == QTTS_UC_LO || c == QTTS_UC_M;
}
static inline bool is_W(uint8_t c) {
    return c == QTTS_UC_LL || c == QTTS_UC_LM || c == QTTS_UC_LO || c == QTTS_UC_M;
}

static size_t scan_mistral(const uint32_t *cp, const uint8_t *cl, size_t n, size_t i) {
    bool pre = is_pre(cp[i], cl[i]);
    for (int with_p = pre ? 1 : 0; with_p >= 0; with_p--) { /* A */
        size_t s = i + (size_t)with_p, j = s;
        while (j < n && is_U(cl[j])) j++;
        for (size_t k = j + 1; k-- > s;) { /* U* = [s, k), then W+ from k */
            if (k < n && is_W(cl[k])) {
                while (k < n && is_W(cl[k])) k++;
                return k;
            }
        }
    }
    for (int with_p = pre ? 1 : 0; with_p >= 0; with_p--) { /* B */
        size_t s = i + (size_t)with_p, j = s;
        while (j < n && is_U(cl[j])) j++;
        if (j > s) {
            while (j < n && is_W(cl[j])) j++;
            return j;
        }
    }
    if (cl[i] == QTTS_UC_N) return i + 1; /* C */
    size_t e = scan_punct(cp, cl, n, i, true); /* D */
    if (e > i) return e;
    if (cl[i] == QTTS_UC_WS) return scan_space(cp, cl, n, i);
    return i + 1; /* not reached */
}

/* Binary min-heap on (rank, pos). */
static bool heap_less(const heap_ent *a, const heap_ent *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], e = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= *n) break;
        size_t m = l + 1 < *n && heap_less(&h[l + 1], &h[l]) ? l + 1 : l;
        if (!heap_less(&h[m], &e)) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = e;
    return top;
}

static bool bpe_piece(const qtts_tokenizer *t, enc_ctx *c, const uint8_t *p, size_t n) {
    if (n == 1) return push_id(c, t->byte_id[p[0]]);
    /* each merge pushes at most two entries: n-1 + 2(n-1) in all */
    if (!grow((void **)&c->sym, &c->cap_sym, n, sizeof *c->sym) ||
        !grow((void **)&c->prev, &c->cap_prev, n, sizeof *c->prev) ||
        !grow((void **)&c->next, &c->cap_next, n, sizeof *c->next) ||
        !grow((void **)&c->heap, &c->cap_heap, 3 * n, sizeof *c->heap))
        return false;
    int32_t *sym = c->sym, *prev = c->prev, *next = c->next;
    heap_ent *h = c->heap;
    size_t hn = 0;
    for (size_t k = 0; k < n; k++) {
        sym[k] = t->byte_id[p[k]];
        prev[k] = (int32_t)k - 1;
        next[k] = k + 1 < n ? (int32_t)k + 1 : -1;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        const merge_slot *m = merge_find(t, sym[k], sym[k + 1]);
        if (m) heap_push(h, &hn, (heap_ent){m->rank, (uint32_t)k, m->id});
    }
    while (hn > 0) {
        heap_ent e = heap_pop(h, &hn);
        int32_t pos = (int32_t)e.pos;
        if (sym[pos] < 0) continue; /* merged into its left neighbour */
        int32_t r = next[pos];
        if (r < 0) continue;
        const merge_slot *m = merge_find(t, sym[pos], sym[r]);
        if (!m || m->id != e.id) continue; /* stale entry */
        sym[pos] = e.id;
        sym[r] = -1;
        int32_t nx = next[r];
        next[pos] = nx;
        if (nx >= 0) prev[nx] = pos;
        if (prev[pos] >= 0) {
            m = merge_find(t, sym[prev[pos]], sym[pos]);
            if (m) heap_push(h, &hn, (heap_ent){m->rank, (uint32_t)prev[pos], m->id});
        }
        if (nx >= 0) {
            m = merge_find(t, sym[pos], sym[nx]);
            if (m) heap_push(h, &hn, (heap_ent){m->rank, (uint32_t)pos, m->id});
        }
    }
    for (int32_t k = 0; k >= 0; k = next[k])
        if (!push_id(c, sym[k])) return false;
    return true;
}

static qtts_status encode_segment(const qtts_tokenizer *t, enc_ctx *c, const uint8_t *s, size_t n,
                                  qtts_pretok pretok, qtts_err *err) {
    if (n == 0) return QTTS_OK;
    const uint8_t *u = s;
    size_t un = 0;
    qtts_status st = nfc_segment(c, s, n, &u, &un, err);
    if (st != QTTS_OK) return st;
    if (!grow((void **)&c->cp, &c->cap_cp, un + 1, sizeof *c->cp) ||
        !grow((void **)&c->cl, &c->cap_cl, un + 1, sizeof *c->cl) ||
        !grow((void **)&c->off, &c->cap_off, un + 1, sizeof *c->off))
        goto nomem;
    size_t nc = 0;
    for (size_t p = 0; p < un;) {
        c->off[nc] = p;
        uint32_t cp = u8_next(u, &p);
        c->cp[nc] = cp;
        c->cl[nc] = (uint8_t)(cp < 0x80 ? (cp == ' ' || (cp >= 9 && cp <= 13)) ? QTTS_UC_WS
                                          : (cp >= '0' && cp <= '9')        ? QTTS_UC_N
                                          : (cp >= 'a' && cp <= 'z')        ? QTTS_UC_LL
                                          : (cp >= 'A' && cp <= 'Z')        ? QTTS_UC_LU
                                                                            : QTTS_UC_OTHER
                                        : qtts_uc_class(cp));
        nc++;
    }
    c->off[nc] = un;
    for (size_t i = 0; i < nc;) {
        size_t j = pretok == QTTS_PRETOK_MISTRAL_FIXED ? scan_mistral(c->cp, c->cl, nc, i)
                                                       : scan_qwen2(c->cp, c->cl, nc, i);
        if (!bpe_piece(t, c, u + c->off[i], c->off[j] - c->off[i])) goto nomem;
        i = j;
    }
    return QTTS_OK;
nomem:
    return qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer: out of memory");
}

qtts_status qtts_tokenizer_encode_ex(const qtts_tokenizer *t, const char *text, size_t len,
                                     const qtts_tokenize_opts *opts, int32_t **ids_out,
                                     size_t *n_out, qtts_err *err) {
    if (ids_out) *ids_out = NULL;
    if (n_out) *n_out = 0;
    if (!t || !ids_out || !n_out || (!text && len))
        return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer_encode: NULL argument");
    qtts_pretok pretok = opts ? opts->pretok : QTTS_PRETOK_QWEN2;
    if (pretok != QTTS_PRETOK_QWEN2 && pretok != QTTS_PRETOK_MISTRAL_FIXED)
        return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer_encode: unknown pre-tokenizer %d", (int)pretok);
    if (len > QTTS_TOKENIZER_MAX_TEXT)
        return qtts_fail(err, QTTS_ERR_LIMIT, "tokenizer_encode: text is %zu bytes, over the %zu-byte limit",
                         len, QTTS_TOKENIZER_MAX_TEXT);
    const uint8_t *s = (const uint8_t *)text;
    size_t bad;
    int e = u8_validate(s, len, &bad);
    if (e != U8_OK)
        return qtts_fail(err, QTTS_ERR_INVALID, "text: invalid UTF-8 at byte %zu (0x%02X): %s", bad,
                         (unsigned)s[bad], u8_why(e));
    enc_ctx c;
    memset(&c, 0, sizeof c);
    qtts_status st = QTTS_OK;
    if (!grow((void **)&c.ids, &c.cap_ids, 16 + QTTS_MIN(len / 3, (size_t)1 << 20), sizeof *c.ids))
        goto nomem;
    size_t seg = 0, i = 0;
    while (i < len) {
        const added_tok *hit = NULL;
        for (size_t k = t->added_lo[s[i]]; k < t->added_hi[s[i]]; k++) {
            const added_tok *a = &t->added[k];
            if (a->len <= len - i && memcmp(t->arena + a->off, s + i, a->len) == 0) {
                hit = a; /* longest first */
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        st = encode_segment(t, &c, s + seg, i - seg, pretok, err);
        if (st != QTTS_OK) goto fail;
        if (!push_id(&c, hit->id)) goto nomem;
        i += hit->len;
        seg = i;
    }
    st = encode_segment(t, &c, s + seg, len - seg, pretok, err);
    if (st != QTTS_OK) goto fail;
    *ids_out = c.ids;
    *n_out = c.n_ids;
    c.ids = NULL;
    ctx_free(&c);
    return QTTS_OK;
nomem:
    st = qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer_encode: out of memory");
fail:
    qtts_free(c.ids);
    ctx_free(&c);
    return st;
}

qtts_status qtts_tokenizer_encode(const qtts_tokenizer *t, const char *text, size_t len,
                                  int32_t **ids_out, size_t *n_out, qtts_err *err) {
    return qtts_tokenizer_encode_ex(t, text, len, NULL, ids_out, n_out, err);
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */

qtts_status qtts_tokenizer_decode(const qtts_tokenizer *t, const int32_t *ids, size_t n,
                                  char **text_out, size_t *len_out, qtts_err *err) {
    if (text_out) *text_out = NULL;
    if (len_out) *len_out = 0;
    if (!t || !text_out || (!ids && n))
        return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids)
            return qtts_fail(err, QTTS_ERR_INVALID, "tokenizer_decode: id %d (index %zu) names no token",
                             (int)ids[i], i);
        total += t->tok_len[ids[i]];
    }
    /* raw bytes never outgrow the token strings; U+FFFD (3 bytes) replaces >= 1 byte */
    uint64_t cap;
    if (!qtts_mul_ok(total, 3, &cap) || cap + 1 > SIZE_MAX)
        return qtts_fail(err, QTTS_ERR_LIMIT, "tokenizer_decode: output too large");
    uint8_t *raw = qtts_malloc(total + 1), *o = qtts_malloc((size_t)cap + 1);
    if (!raw || !o) {
        qtts_free(raw);
        qtts_free(o);
        return qtts_fail(err, QTTS_ERR_NOMEM, "tokenizer_decode: out of memory");
    }
    size_t rn = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *s = (const uint8_t *)t->arena + t->tok_off[ids[i]];
        size_t sl = t->tok_len[ids[i]], start = rn;
        bool mapped = true;
        for (size_t p = 0; p < sl && mapped;) {
            uint32_t cp = u8_next(s, &p);
            if (cp < 0x144 && t->u2b[cp]) raw[rn++] = (uint8_t)(t->u2b[cp] - 1);
            else mapped = false;
        }
        if (!mapped) { /* not all byte-level symbols: the token's own UTF-8 */
            rn = start;
            memcpy(raw + rn, s, sl);
            rn += sl;
        }
    }
    size_t on = 0;
    for (size_t p = 0; p < rn;) {
        size_t adv;
        if (u8_check(raw, rn, p, &adv) == U8_OK) {
            memcpy(o + on, raw + p, adv);
            on += adv;
        } else {
            on += u8_put(o + on, 0xFFFD);
        }
        p += adv;
    }
    o[on] = 0;
    qtts_free(raw);
    *text_out = (char *)o;
    if (len_out) *len_out = on;
    return QTTS_OK;
}
