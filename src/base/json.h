/*
 * json.h - a strict, bounded JSON reader (RFC 8259) producing a read-only
 * tree, plus a tiny string escaper for writers.
 *
 * Used for config.json, generation_config.json, vocab.json (151k keys),
 * safetensors headers, and later the server's request bodies. Everything it
 * parses is treated as hostile: the parser is iterative or depth-capped,
 * validates UTF-8 in strings (no overlongs, surrogates, or code points above
 * U+10FFFF; \u escapes must pair surrogates correctly and \u0000 is
 * rejected), rejects duplicate keys in an object, trailing garbage, leading
 * zeros, NaN/Infinity, and numbers longer than limits.max_number_len chars.
 *
 * Memory: one arena per document; qtts_json_free releases everything.
 * Node pointers stay valid until then.
 */
#ifndef QTTS_JSON_H
#define QTTS_JSON_H

#include "base.h"

typedef enum {
    QTTS_JSON_NULL,
    QTTS_JSON_BOOL,
    QTTS_JSON_NUMBER,
    QTTS_JSON_STRING,
    QTTS_JSON_ARRAY,
    QTTS_JSON_OBJECT,
} qtts_json_type;

typedef struct qtts_json qtts_json;
struct qtts_json {
    qtts_json_type type;
    bool boolean;
    bool is_integer;       /* number written without fraction/exponent */
    bool fits_int64;       /* is_integer and the exact value fits int64 */
    double number;         /* value of a NUMBER (always set, finite) */
    int64_t integer;       /* exact value when fits_int64, else 0 */
    const char *str;       /* STRING: NUL-terminated UTF-8 (no embedded NUL) */
    size_t str_len;
    /* ARRAY/OBJECT: children in document order. For OBJECT, keys[i] names
     * items[i]. */
    size_t count;
    qtts_json **items;
    const char **keys;
    size_t *key_lens;
    /* OBJECT with more than 8 keys: positions 0..count-1 ordered by key
     * bytes (memcmp, shorter first on a tie), used by qtts_json_get for a
     * binary search; NULL for smaller objects. */
    const uint32_t *key_index;
};

typedef struct {
    int max_depth;          /* nesting of arrays/objects; e.g. 16 for requests */
    size_t max_keys;        /* per object */
    size_t max_items;       /* per array */
    size_t max_number_len;  /* characters in one number literal, e.g. 40 */
    size_t max_string_len;  /* bytes in one decoded string */
} qtts_json_limits;

/* Limits suited to model files (config.json, vocab.json, safetensors
 * headers): depth 32, 1<<20 keys, 1<<24 items, numbers 40 chars, strings 1 MiB. */
qtts_json_limits qtts_json_limits_files(void);

/* Parse text[0..len). On failure returns NULL and writes to err a message
 * "<what>: <rule> at byte <offset>" (what: e.g. a file name) with status
 * QTTS_ERR_FORMAT (QTTS_ERR_NOMEM when memory ran out). The caller frees the
 * result with qtts_json_free. lim NULL means qtts_json_limits_files().
 * Number literals are capped at 63 characters whatever max_number_len says. */
qtts_json *qtts_json_parse(const char *text, size_t len, const qtts_json_limits *lim,
                           const char *what, qtts_err *err);
void qtts_json_free(qtts_json *doc);

/* Lookups (NULL/false when absent or of another type). get() is a linear
 * scan for objects of up to 8 keys and a binary search above that.
 * get_int() needs an integer literal that fits int64 (1.0 and 1e3 are not
 * integers); get_num() accepts any number. */
const qtts_json *qtts_json_get(const qtts_json *obj, const char *key);
const char *qtts_json_get_str(const qtts_json *obj, const char *key);
bool qtts_json_get_int(const qtts_json *obj, const char *key, int64_t *out);
bool qtts_json_get_num(const qtts_json *obj, const char *key, double *out);
bool qtts_json_get_bool(const qtts_json *obj, const char *key, bool *out);

/* "null", "boolean", "number", "string", "array", "object". */
const char *qtts_json_type_name(qtts_json_type t);

/* Strict UTF-8 check (same rules as JSON strings, NUL bytes allowed).
 * On failure *bad_at (may be NULL) gets the offset of the first bad byte. */
bool qtts_utf8_valid(const char *s, size_t len, size_t *bad_at);

/* Append s (len bytes of valid UTF-8) as a quoted, escaped JSON string to
 * out (cap bytes, NUL-terminated). Every control character is escaped: C0
 * and DEL as JSON requires, and the C1 range U+0080..U+009F too, so the
 * result is also safe to print on a terminal (at most 6 bytes per input
 * byte). Returns the number of bytes that would have been written (like
 * snprintf). */
size_t qtts_json_escape(char *out, size_t cap, const char *s, size_t len);

#endif
