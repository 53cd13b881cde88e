/*
 * json.c - strict, bounded RFC 8259 reader.
 *
 * Design
 *  - Iterative: one explicit frame stack (capped at limits.max_depth) instead
 *    of recursion, so hostile nesting can never exhaust the C stack.
 *  - Children of the open containers accumulate on a shared scratch stack
 *    (values, plus keys for objects). When a container closes, its slice of
 *    the scratch stack is copied into the arena as items[]/keys[] and popped.
 *  - Everything the tree points to (nodes, strings, child arrays, the key
 *    index) lives in one arena of chained blocks. The root node is embedded
 *    in the document handle that owns the arena, so qtts_json_free(root)
 *    finds and releases everything.
 *  - Duplicate keys: objects with at most SMALL_OBJECT keys are checked
 *    pairwise. Larger ones (vocab.json has 151,643 keys) get a key index:
 *    the key positions merge-sorted by (bytes, position). Duplicates are
 *    then neighbours, the check is O(n log n) whatever the keys are (no
 *    hash that crafted collisions could degrade), and the same index serves
 *    qtts_json_get by binary search.
 *  - Limits (depth, keys, items, number length, string length) are checked
 *    as the bytes are consumed, before anything sized by them is allocated.
 *  - Numbers: integers without fraction/exponent are accumulated exactly in
 *    int64 (fits_int64 says whether they fit) and converted to double
 *    directly below 2^53; every other number goes through strtod_l in the
 *    "C" locale, so a caller's setlocale() cannot change how "0.5" reads.
 *    Non-finite results are rejected.
 *
 * Errors read "<what>: <rule> at byte <offset>", the offset being that of
 * the first byte that breaks the rule.
 */
#include "json.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_OBJECT 8          /* objects with more keys get a sorted key index */
#define ARENA_BLOCK (64 * 1024) /* minimum arena block payload */

/* ==== arena ============================================================ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_block;

typedef struct {
    arena_block *head; /* block being filled; older blocks follow via next */
} arena;

static void *arena_alloc(arena *a, size_t n) {
    if (n > SIZE_MAX / 2) return NULL;
    n = n ? (n + 15u) & ~(size_t)15u : 16;
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        if (cap > SIZE_MAX - sizeof(arena_block)) return NULL;
        b = qtts_malloc(sizeof(arena_block) + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free_all(arena_block *b) {
    while (b) {
        arena_block *next = b->next;
        qtts_free(b);
        b = next;
    }
}

/* The document handle: the root node is embedded so qtts_json_free(root)
 * can find the arena (container_of). */
typedef struct {
    arena a;
    qtts_json root;
} json_doc;

/* ==== UTF-8 ============================================================= */

/* Length of the valid UTF-8 sequence starting at s[0] (n bytes available),
 * or 0 if invalid. *why gets a rule name on failure. Follows Unicode table
 * 3-7: no overlongs, no surrogates (U+D800..DFFF), nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n, const char **why) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0xC2) {
        *why = c >= 0xC0 ? "overlong UTF-8 sequence" : "invalid UTF-8 byte";
        return 0;
    } else if (c < 0xE0) {
        len = 2;
    } else if (c < 0xF0) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong below U+0800 */
        else if (c == 0xED) hi = 0x9F; /* surrogates U+D800..DFFF */
    } else if (c < 0xF5) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong below U+10000 */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        *why = "invalid UTF-8 byte";
        return 0;
    }
    if (n < len) {
        *why = "truncated UTF-8 sequence";
        return 0;
    }
    if (s[1] < lo || s[1] > hi) {
        if (s[1] >= 0x80 && s[1] <= 0xBF)
            *why = (c == 0xED) ? "UTF-8 encoded surrogate"
                   : (c == 0xF4) ? "UTF-8 code point above U+10FFFF"
                                 : "overlong UTF-8 sequence";
        else
            *why = "truncated UTF-8 sequence";
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) {
            *why = "truncated UTF-8 sequence";
            return 0;
        }
    }
    return len;
}

bool qtts_utf8_valid(const char *s, size_t len, size_t *bad_at) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        const char *why = NULL;
        size_t k = utf8_seq(p + i, len - i, &why);
        if (!k) {
            if (bad_at) *bad_at = i;
            return false;
        }
        i += k;
    }
    return true;
}

/* ==== parser state ====================================================== */

typedef struct {
    qtts_json *node;  /* the open container */
    size_t val_start; /* its first child on the value scratch stack */
    size_t key_start; /* its first key on the key scratch stack (objects) */
} frame;

typedef struct {
    const char *ptr;
    size_t len;
    size_t off; /* byte offset, for duplicate-key errors */
} key_ref;

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    const qtts_json_limits *lim;
    const char *what;
    qtts_err *err;
    bool failed;
    arena *a;

    frame *frames;
    int depth;

    qtts_json **vals;
    size_t nvals, capvals;
    key_ref *keys;
    size_t nkeys, capkeys;
} parser;

static qtts_json *fail_at(parser *p, size_t off, const char *rule) {
    if (!p->failed) {
        p->failed = true;
        qtts_fail(p->err, QTTS_ERR_FORMAT, "%s: %s at byte %zu", p->what, rule, off);
    }
    return NULL;
}

static qtts_json *fail_nomem(parser *p) {
    if (!p->failed) {
        p->failed = true;
        qtts_fail(p->err, QTTS_ERR_NOMEM, "%s: out of memory at byte %zu", p->what, p->pos);
    }
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static qtts_json *new_node(parser *p, qtts_json_type t) {
    qtts_json *n = arena_alloc(p->a, sizeof *n);
    if (!n) return fail_nomem(p);
    memset(n, 0, sizeof *n);
    n->type = t;
    return n;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at s[pos..pos+4), or -1. */
static long hex4(parser *p, size_t pos) {
    if (p->len - pos < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[pos + (size_t)i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(unsigned char *o, unsigned long cp) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parse the string whose opening quote is at p->pos. On success the decoded
 * bytes (NUL-terminated, in the arena) go to *out and *out_len, and p->pos is past
 * the closing quote.
 *
 * Pass 1 finds the closing quote, so the output buffer can be sized by the
 * raw span (decoding never grows the text: an escape of k bytes yields at
 * most k bytes), capped at max_string_len + 1. Pass 2 validates and decodes,
 * failing as soon as the decoded length would exceed max_string_len. */
static bool parse_string(parser *p, const char **out, size_t *out_len) {
    size_t start = p->pos + 1, i = start;
    while (i < p->len && p->s[i] != '"') {
        if (p->s[i] == '\\') i++; /* skip the escaped byte (validated below) */
        i++;
    }
    if (i >= p->len) {
        fail_at(p, p->pos, "unterminated string");
        return false;
    }
    size_t raw = i - start, end = i;
    size_t cap = QTTS_MIN(raw, p->lim->max_string_len) + 1;
    unsigned char *buf = arena_alloc(p->a, cap);
    if (!buf) {
        fail_nomem(p);
        return false;
    }
    size_t o = 0;
    i = start;
    while (i < end) {
        unsigned char c = p->s[i];
        unsigned char tmp[4];
        size_t adv, nout;
        const unsigned char *src;
        if (c == '\\') {
            unsigned char e = p->s[i + 1];
            unsigned long cp;
            src = tmp;
            switch (e) {
            case '"': case '\\': case '/': tmp[0] = e; nout = 1; adv = 2; break;
            case 'b': tmp[0] = '\b'; nout = 1; adv = 2; break;
            case 'f': tmp[0] = '\f'; nout = 1; adv = 2; break;
            case 'n': tmp[0] = '\n'; nout = 1; adv = 2; break;
            case 'r': tmp[0] = '\r'; nout = 1; adv = 2; break;
            case 't': tmp[0] = '\t'; nout = 1; adv = 2; break;
            case 'u': {
                long h = hex4(p, i + 2);
                if (h < 0) {
                    fail_at(p, i, "invalid \\u escape");
                    return false;
                }
                adv = 6;
                if (h == 0) {
                    fail_at(p, i, "\\u0000 not allowed in strings");
                    return false;
                }
                if (h >= 0xDC00 && h <= 0xDFFF) {
                    fail_at(p, i, "unpaired surrogate escape");
                    return false;
                }
                if (h >= 0xD800 && h <= 0xDBFF) {
                    long lo = -1;
                    if (i + 7 < end && p->s[i + 6] == '\\' && p->s[i + 7] == 'u')
                        lo = hex4(p, i + 8);
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        fail_at(p, i, "unpaired surrogate escape");
                        return false;
                    }
                    cp = 0x10000 + (((unsigned long)h - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
                    adv = 12;
                } else {
                    cp = (unsigned long)h;
                }
                nout = put_utf8(tmp, cp);
                break;
            }
            default:
                fail_at(p, i, "invalid escape in string");
                return false;
            }
        } else if (c < 0x20) {
            fail_at(p, i, "control character in string");
            return false;
        } else if (c < 0x80) {
            src = p->s + i;
            nout = adv = 1;
        } else {
            const char *why = "invalid UTF-8";
            adv = utf8_seq(p->s + i, end - i, &why);
            if (!adv) {
                fail_at(p, i, why);
                return false;
            }
            src = p->s + i;
            nout = adv;
        }
        if (o + nout > p->lim->max_string_len) {
            fail_at(p, i, "string longer than the limit");
            return false;
        }
        memcpy(buf + o, src, nout);
        o += nout;
        i += adv;
    }
    buf[o] = 0;
    *out = (const char *)buf;
    *out_len = o;
    p->pos = end + 1;
    return true;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

/* Grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static qtts_json *parse_number(parser *p) {
    size_t start = p->pos, i = start, max = p->lim->max_number_len;
    const unsigned char *s = p->s;
#define DIGIT(k) ((k) < p->len && s[k] >= '0' && s[k] <= '9')
    bool neg = false, is_int = true;
    if (s[i] == '-') {
        neg = true;
        i++;
    }
    if (!DIGIT(i)) return fail_at(p, i, "invalid number");
    if (s[i] == '0' && DIGIT(i + 1)) return fail_at(p, i, "leading zero in number");
    while (DIGIT(i)) i++;
    if (i < p->len && s[i] == '.') {
        is_int = false;
        i++;
        if (!DIGIT(i)) return fail_at(p, i, "invalid number: digit expected after '.'");
        while (DIGIT(i)) i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        is_int = false;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (!DIGIT(i)) return fail_at(p, i, "invalid number: digit expected in exponent");
        while (DIGIT(i)) i++;
    }
#undef DIGIT
    size_t n = i - start;
    if (n > max || n > 63) return fail_at(p, start, "number longer than the limit");

    /* Integers: exact accumulation toward the sign, so INT64_MIN fits. */
    int64_t acc = 0;
    bool fits = is_int;
    for (size_t k = start + (neg ? 1 : 0); k < i && fits; k++) {
        int d = s[k] - '0';
        fits = !__builtin_mul_overflow(acc, 10, &acc) &&
               !(neg ? __builtin_sub_overflow(acc, d, &acc) : __builtin_add_overflow(acc, d, &acc));
    }
    double v;
    if (fits && acc > -((int64_t)1 << 53) && acc < ((int64_t)1 << 53) && !(neg && acc == 0)) {
        v = (double)acc; /* exact; "-0" goes through strtod for its sign */
    } else {
        char buf[64];
        memcpy(buf, s + start, n);
        buf[n] = 0;
        pthread_once(&c_locale_once, make_c_locale);
        char *endp;
        v = c_locale ? strtod_l(buf, &endp, c_locale) : strtod(buf, &endp);
        if (endp != buf + n) return fail_at(p, start, "invalid number");
        if (!isfinite(v)) return fail_at(p, start, "number out of range");
    }

    qtts_json *node = new_node(p, QTTS_JSON_NUMBER);
    if (!node) return NULL;
    node->number = v;
    node->is_integer = is_int;
    node->fits_int64 = fits;
    node->integer = fits ? acc : 0;
    p->pos = i;
    return node;
}

static bool match_lit(parser *p, const char *lit) {
    size_t n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0) return false;
    p->pos += n;
    return true;
}

static bool push_val(parser *p, qtts_json *v) {
    if (p->nvals == p->capvals) {
        size_t nc = p->capvals ? p->capvals * 2 : 64;
        qtts_json **nv = qtts_realloc(p->vals, nc * sizeof *nv);
        if (!nv) return false;
        p->vals = nv;
        p->capvals = nc;
    }
    p->vals[p->nvals++] = v;
    return true;
}

static bool push_key(parser *p, key_ref k) {
    if (p->nkeys == p->capkeys) {
        size_t nc = p->capkeys ? p->capkeys * 2 : 64;
        key_ref *nk = qtts_realloc(p->keys, nc * sizeof *nk);
        if (!nk) return false;
        p->keys = nk;
        p->capkeys = nc;
    }
    p->keys[p->nkeys++] = k;
    return true;
}

/* Key order used by the index: memcmp order, a proper prefix first. */
static int key_cmp(const char *a, size_t alen, const char *b, size_t blen) {
    int c = memcmp(a, b, QTTS_MIN(alen, blen));
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

/* Sort entry. qsort has no context argument and the parser is reentrant, so
 * the key travels with its position. `prefix` holds the first 8 key bytes
 * big-endian, zero padded, so most comparisons finish on one integer
 * compare without touching the key text (keys contain no NUL, so equal
 * prefixes of keys of at most 8 bytes mean equal keys). */
typedef struct {
    uint64_t prefix;
    const char *ptr;
    uint32_t len;
    uint32_t idx;
} sort_ent;

static uint64_t key_prefix(const char *s, size_t len) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v = (v << 8) | (i < len ? (unsigned char)s[i] : 0u);
    return v;
}

static inline int sort_ent_cmp(const sort_ent *a, const sort_ent *b) {
    if (a->prefix != b->prefix) return a->prefix < b->prefix ? -1 : 1;
    if (a->len > 8 && b->len > 8) {
        int c = key_cmp(a->ptr + 8, a->len - 8u, b->ptr + 8, b->len - 8u);
        if (c) return c;
    } else if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Bottom-up merge sort of v[0..n) using tmp[0..n): O(n log n) whatever the
 * input, with the comparison inlined (qsort's indirect calls and generic
 * element moves cost several times more on vocab.json). */
static void sort_ents(sort_ent *v, sort_ent *tmp, size_t n) {
    sort_ent *src = v, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = QTTS_MIN(lo + w, n), hi = QTTS_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = sort_ent_cmp(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        sort_ent *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
}

/* Close the object on top of the frame stack: move its keys and values into
 * the arena, reject duplicate keys, and build the key index when large. */
static qtts_json *close_object(parser *p) {
    frame *f = &p->frames[p->depth - 1];
    qtts_json *o = f->node;
    size_t n = p->nvals - f->val_start;
    QTTS_ASSERT(n == p->nkeys - f->key_start);
    key_ref *kr = n ? p->keys + f->key_start : NULL;   /* keys is NULL before the first key */

    if (n <= SMALL_OBJECT) {
        for (size_t j = 1; j < n; j++)
            for (size_t i = 0; i < j; i++)
                if (kr[i].len == kr[j].len && memcmp(kr[i].ptr, kr[j].ptr, kr[j].len) == 0)
                    return fail_at(p, kr[j].off, "duplicate key");
    }
    if (n) {
        o->items = arena_alloc(p->a, n * sizeof *o->items);
        o->keys = arena_alloc(p->a, n * sizeof *o->keys);
        o->key_lens = arena_alloc(p->a, n * sizeof *o->key_lens);
        if (!o->items || !o->keys || !o->key_lens) return fail_nomem(p);
        memcpy(o->items, p->vals + f->val_start, n * sizeof *o->items);
        for (size_t i = 0; i < n; i++) {
            o->keys[i] = kr[i].ptr;
            o->key_lens[i] = kr[i].len;
        }
    }
    o->count = n;
    if (n > SMALL_OBJECT) {
        /* max_keys is checked against size_t but indices and lengths in
         * sort_ent are 32-bit. */
        if (n > UINT32_MAX) return fail_at(p, kr[n - 1].off, "too many keys in object");
        for (size_t i = 0; i < n; i++)
            if (kr[i].len > UINT32_MAX) return fail_at(p, kr[i].off, "string longer than the limit");
        sort_ent *se = qtts_malloc(2 * n * sizeof *se); /* entries + merge buffer */
        uint32_t *index = arena_alloc(p->a, n * sizeof *index);
        if (!se || !index) {
            qtts_free(se);
            return fail_nomem(p);
        }
        for (size_t i = 0; i < n; i++)
            se[i] = (sort_ent){key_prefix(kr[i].ptr, kr[i].len), kr[i].ptr, (uint32_t)kr[i].len,
                               (uint32_t)i};
        sort_ents(se, se + n, n);
        /* Report the duplicate that appears first in the document: the
         * smallest second occurrence among equal neighbours. */
        size_t dup = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            index[i] = se[i].idx;
            if (i && se[i].len == se[i - 1].len && memcmp(se[i].ptr, se[i - 1].ptr, se[i].len) == 0 &&
                se[i].idx < dup)
                dup = se[i].idx;
        }
        qtts_free(se);
        if (dup != SIZE_MAX) return fail_at(p, kr[dup].off, "duplicate key");
        o->key_index = index;
    }
    p->nvals = f->val_start;
    p->nkeys = f->key_start;
    p->depth--;
    return o;
}

static qtts_json *close_array(parser *p) {
    frame *f = &p->frames[p->depth - 1];
    qtts_json *a = f->node;
    size_t n = p->nvals - f->val_start;
    if (n) {
        a->items = arena_alloc(p->a, n * sizeof *a->items);
        if (!a->items) return fail_nomem(p);
        memcpy(a->items, p->vals + f->val_start, n * sizeof *a->items);
    }
    a->count = n;
    p->nvals = f->val_start;
    p->depth--;
    return a;
}

static qtts_json *open_container(parser *p, qtts_json_type t) {
    if (p->depth >= p->lim->max_depth) return fail_at(p, p->pos, "nesting deeper than the limit");
    qtts_json *n = new_node(p, t);
    if (!n) return NULL;
    p->frames[p->depth++] = (frame){n, p->nvals, p->nkeys};
    p->pos++; /* past '{' or '[' */
    return n;
}

/* Parse "key" : at p->pos (after whitespace), leaving p->pos at the value. */
static bool parse_key(parser *p) {
    skip_ws(p);
    if (p->pos >= p->len) {
        fail_at(p, p->pos, "unexpected end of input");
        return false;
    }
    if (p->s[p->pos] != '"') {
        fail_at(p, p->pos, "object key must be a string");
        return false;
    }
    frame *f = &p->frames[p->depth - 1];
    if (p->nkeys - f->key_start >= p->lim->max_keys) {
        fail_at(p, p->pos, "too many keys in object");
        return false;
    }
    key_ref k = {.off = p->pos};
    if (!parse_string(p, &k.ptr, &k.len)) return false;
    if (!push_key(p, k)) {
        fail_nomem(p);
        return false;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
        fail_at(p, p->pos, "unexpected end of input");
        return false;
    }
    if (p->s[p->pos] != ':') {
        fail_at(p, p->pos, "expected ':' after object key");
        return false;
    }
    p->pos++;
    return true;
}

/* The main loop. State "want value": parse one value; a container opens a
 * frame and, unless immediately closed, loops back for its first element.
 * State "have value v": attach v to the open container, then read ',' (next
 * element) or the closing bracket (v becomes the container). */
static qtts_json *parse_document(parser *p) {
    qtts_json *v;
want_value:
    skip_ws(p);
    if (p->pos >= p->len) return fail_at(p, p->pos, "unexpected end of input");
    switch (p->s[p->pos]) {
    case '{':
        if (!open_container(p, QTTS_JSON_OBJECT)) return NULL;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            if (!(v = close_object(p))) return NULL;
            goto have_value;
        }
        if (!parse_key(p)) return NULL;
        goto want_value;
    case '[':
        if (!open_container(p, QTTS_JSON_ARRAY)) return NULL;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            if (!(v = close_array(p))) return NULL;
            goto have_value;
        }
        if (p->lim->max_items == 0) return fail_at(p, p->pos, "too many items in array");
        goto want_value;
    case '"':
        if (!(v = new_node(p, QTTS_JSON_STRING))) return NULL;
        if (!parse_string(p, &v->str, &v->str_len)) return NULL;
        goto have_value;
    case 't':
    case 'f':
    case 'n': {
        qtts_json_type t = p->s[p->pos] == 'n' ? QTTS_JSON_NULL : QTTS_JSON_BOOL;
        bool b = p->s[p->pos] == 't';
        size_t at = p->pos;
        if (!match_lit(p, b ? "true" : t == QTTS_JSON_NULL ? "null" : "false"))
            return fail_at(p, at, "invalid literal");
        if (!(v = new_node(p, t))) return NULL;
        v->boolean = b;
        goto have_value;
    }
    default:
        if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9')) {
            if (!(v = parse_number(p))) return NULL;
            goto have_value;
        }
        return fail_at(p, p->pos, "unexpected character");
    }

have_value:
    if (p->depth == 0) {
        skip_ws(p);
        if (p->pos != p->len) return fail_at(p, p->pos, "trailing characters after JSON value");
        return v;
    }
    {
        frame *f = &p->frames[p->depth - 1];
        bool is_obj = f->node->type == QTTS_JSON_OBJECT;
        if (!push_val(p, v)) return fail_nomem(p);
        skip_ws(p);
        if (p->pos >= p->len) return fail_at(p, p->pos, "unexpected end of input");
        unsigned char c = p->s[p->pos];
        if (c == ',') {
            /* the comma announces one more item: refuse it here */
            if (!is_obj && p->nvals - f->val_start >= p->lim->max_items)
                return fail_at(p, p->pos, "too many items in array");
            p->pos++;
            if (is_obj && !parse_key(p)) return NULL;
            goto want_value;
        }
        if (is_obj && c == '}') {
            p->pos++;
            if (!(v = close_object(p))) return NULL;
            goto have_value;
        }
        if (!is_obj && c == ']') {
            p->pos++;
            if (!(v = close_array(p))) return NULL;
            goto have_value;
        }
        return fail_at(p, p->pos, is_obj ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
    }
}

/* ==== public API ======================================================== */

qtts_json_limits qtts_json_limits_files(void) {
    return (qtts_json_limits){
        .max_depth = 32,
        .max_keys = (size_t)1 << 20,
        .max_items = (size_t)1 << 24,
        .max_number_len = 40,
        .max_string_len = (size_t)1 << 20,
    };
}

qtts_json *qtts_json_parse(const char *text, size_t len, const qtts_json_limits *lim,
                           const char *what, qtts_err *err) {
    qtts_json_limits deflim = qtts_json_limits_files();
    if (!lim) lim = &deflim;
    if (!what) what = "json";
    if (lim->max_depth < 0 || lim->max_depth > 100000) {
        qtts_fail(err, QTTS_ERR_INVALID, "%s: max_depth %d out of range", what, lim->max_depth);
        return NULL;
    }
    if (!text && len) {
        qtts_fail(err, QTTS_ERR_INVALID, "%s: NULL text", what);
        return NULL;
    }
    json_doc *doc = qtts_calloc(1, sizeof *doc);
    if (!doc) {
        qtts_fail(err, QTTS_ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    parser p = {
        .s = (const unsigned char *)(text ? text : ""),
        .len = len,
        .lim = lim,
        .what = what,
        .err = err,
        .a = &doc->a,
    };
    p.frames = qtts_malloc(((size_t)lim->max_depth + 1) * sizeof *p.frames);
    qtts_json *root = p.frames ? parse_document(&p) : fail_nomem(&p);
    qtts_free(p.frames);
    qtts_free(p.vals);
    qtts_free(p.keys);
    if (!root) {
        arena_free_all(doc->a.head);
        qtts_free(doc);
        return NULL;
    }
    doc->root = *root; /* children point at arena nodes, never at the root */
    return &doc->root;
}

void qtts_json_free(qtts_json *root) {
    if (!root) return;
    json_doc *doc = (json_doc *)((char *)root - offsetof(json_doc, root));
    arena_free_all(doc->a.head);
    qtts_free(doc);
}

const qtts_json *qtts_json_get(const qtts_json *obj, const char *key) {
    if (!obj || obj->type != QTTS_JSON_OBJECT || !key) return NULL;
    size_t klen = strlen(key);
    if (obj->key_index) {
        size_t lo = 0, hi = obj->count;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            uint32_t i = obj->key_index[mid];
            int c = key_cmp(obj->keys[i], obj->key_lens[i], key, klen);
            if (c == 0) return obj->items[i];
            if (c < 0) lo = mid + 1;
            else hi = mid;
        }
        return NULL;
    }
    for (size_t i = 0; i < obj->count; i++)
        if (obj->key_lens[i] == klen && memcmp(obj->keys[i], key, klen) == 0) return obj->items[i];
    return NULL;
}

const char *qtts_json_get_str(const qtts_json *obj, const char *key) {
    const qtts_json *v = qtts_json_get(obj, key);
    return v && v->type == QTTS_JSON_STRING ? v->str : NULL;
}

bool qtts_json_get_int(const qtts_json *obj, const char *key, int64_t *out) {
    const qtts_json *v = qtts_json_get(obj, key);
    if (!v || v->type != QTTS_JSON_NUMBER || !v->is_integer || !v->fits_int64) return false;
    *out = v->integer;
    return true;
}

bool qtts_json_get_num(const qtts_json *obj, const char *key, double *out) {
    const qtts_json *v = qtts_json_get(obj, key);
    if (!v || v->type != QTTS_JSON_NUMBER) return false;
    *out = v->number;
    return true;
}

bool qtts_json_get_bool(const qtts_json *obj, const char *key, bool *out) {
    const qtts_json *v = qtts_json_get(obj, key);
    if (!v || v->type != QTTS_JSON_BOOL) return false;
    *out = v->boolean;
    return true;
}

const char *qtts_json_type_name(qtts_json_type t) {
    switch (t) {
    case QTTS_JSON_NULL: return "null";
    case QTTS_JSON_BOOL: return "boolean";
    case QTTS_JSON_NUMBER: return "number";
    case QTTS_JSON_STRING: return "string";
    case QTTS_JSON_ARRAY: return "array";
    case QTTS_JSON_OBJECT: return "object";
    }
    return "unknown";
}

size_t qtts_json_escape(char *out, size_t cap, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
#define PUT(ch)                                \
    do {                                       \
        if (n + 1 < cap) out[n] = (char)(ch);  \
        n++;                                   \
    } while (0)
    PUT('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': PUT('\\'); PUT('"'); break;
        case '\\': PUT('\\'); PUT('\\'); break;
        case '\n': PUT('\\'); PUT('n'); break;
        case '\r': PUT('\\'); PUT('r'); break;
        case '\t': PUT('\\'); PUT('t'); break;
        case '\b': PUT('\\'); PUT('b'); break;
        case '\f': PUT('\\'); PUT('f'); break;
        default: {
            const int cl = qtts_control_len(s + i, len - i);
            if (cl) {   /* C0 or DEL: the byte; C1: its code point, U+0080..U+009F */
                if (cl == 2) c = (unsigned char)s[++i];
                PUT('\\'); PUT('u'); PUT('0'); PUT('0');
                PUT(hex[c >> 4]); PUT(hex[c & 15]);
            } else {
                PUT(c);
            }
        }
        }
    }
    PUT('"');
#undef PUT
    if (cap) out[n < cap ? n : cap - 1] = 0;
    return n;
}
