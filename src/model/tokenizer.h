/*
 * tokenizer.h - the Qwen2 byte-level BPE text tokenizer, bit-exact with the
 * official reference (HF `tokenizers` Qwen2TokenizerFast converted from
 * vocab.json + merges.txt, as transformers 4.57.3 builds it).
 *
 * encode(text) runs, in this order (spec §4.1):
 *   1. validate UTF-8 (invalid input is an error, never replaced);
 *   2. split on the added tokens of tokenizer_config.json (literal, leftmost
 *      then longest match, on the raw text): "<|im_end|>" or "<tts_pad>"
 *      inside user text become those ids;
 *   3. NFC-normalize each remaining segment (Unicode 9.0 semantics, as the
 *      reference's normalizer);
 *   4. pre-tokenize each segment with the Qwen2 regex (or, as an option, the
 *      "Mistral-fixed" regex transformers 4.57.3 substitutes when it loads a
 *      model from a local directory with fix_mistral_regex=True);
 *   5. map each piece's bytes to GPT-2 byte-level symbols and apply the BPE
 *      merges by rank.
 * No BOS/EOS or chat template is added; callers tokenize whole templates.
 *
 * A loaded tokenizer is immutable: encode/decode/lookups may run from any
 * number of threads at once.
 */
#ifndef QTTS_TOKENIZER_H
#define QTTS_TOKENIZER_H

#include "../base/base.h"

typedef struct qtts_tokenizer qtts_tokenizer;

/* Pre-tokenizer regex. */
typedef enum {
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
     *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
     * Qwen2TokenizerFast's own; what loading by hub id gives. Default. */
    QTTS_PRETOK_QWEN2 = 0,
    /* [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
     * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
     * \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
     * What the official wrapper gets when it loads the model from a local
     * directory under transformers 4.57.3 (spec §4.1, §14.1). Differs on
     * camelCase ("iPhone"), combining marks and contractions. */
    QTTS_PRETOK_MISTRAL_FIXED = 1,
} qtts_pretok;

typedef struct {
    qtts_pretok pretok;
} qtts_tokenize_opts;

/* Limits enforced on hostile inputs. */
#define QTTS_TOKENIZER_MAX_ID (1 << 21)          /* ids in vocab.json / added tokens */
#define QTTS_TOKENIZER_MAX_ADDED 4096            /* entries of added_tokens_decoder */
#define QTTS_TOKENIZER_MAX_ADDED_LEN 1024        /* bytes of one added token */
#define QTTS_TOKENIZER_MAX_TEXT ((size_t)1 << 30) /* bytes of text per encode call */

/* Load <model_dir>/vocab.json, merges.txt and tokenizer_config.json (any
 * may be a symlink). Everything is validated: vocab ids are distinct
 * integers below QTTS_TOKENIZER_MAX_ID and all 256 byte-level symbols are
 * present; every merge line has two fields whose tokens and concatenation
 * are in the vocabulary (a repeated merge keeps its first rank, as the
 * reference); added_tokens_decoder maps distinct decimal ids (not in
 * vocab.json) to distinct non-empty contents, with lstrip/rstrip/
 * single_word/normalized false (others are QTTS_ERR_UNSUPPORTED). */
qtts_status qtts_tokenizer_load(const char *model_dir, qtts_tokenizer **out, qtts_err *err);
void qtts_tokenizer_free(qtts_tokenizer *tok);

/* Encode text[0..len) (need not be NUL-terminated; NUL bytes are ordinary
 * characters) with the default options (QTTS_PRETOK_QWEN2). On success
 * *ids_out is a non-NULL array of *n_out ids (0 for empty text) that the
 * caller frees with qtts_free. Invalid UTF-8 fails with QTTS_ERR_INVALID and
 * a message naming the byte offset and the defect. */
qtts_status qtts_tokenizer_encode(const qtts_tokenizer *tok, const char *text, size_t len,
                                  int32_t **ids_out, size_t *n_out, qtts_err *err);
/* The same with explicit options (opts NULL = defaults). */
qtts_status qtts_tokenizer_encode_ex(const qtts_tokenizer *tok, const char *text, size_t len,
                                     const qtts_tokenize_opts *opts, int32_t **ids_out,
                                     size_t *n_out, qtts_err *err);

/* Ids back to text, as the reference's decode(skip_special_tokens=False):
 * added tokens appear as their content, byte-level symbols become bytes,
 * and byte sequences that are not valid UTF-8 (an id sequence cut inside a
 * character) become U+FFFD per maximal invalid subpart. An id that names no
 * token is QTTS_ERR_INVALID. *text_out is NUL-terminated, caller frees with
 * qtts_free; *len_out (may be NULL) excludes the NUL. For inspection and
 * tests; the engine never needs it. */
qtts_status qtts_tokenizer_decode(const qtts_tokenizer *tok, const int32_t *ids, size_t n,
                                  char **text_out, size_t *len_out, qtts_err *err);

/* Id of an added token by content ("<tts_pad>") or else of a vocabulary
 * entry by its vocab.json spelling ("Ġhello"); -1 when there is none. */
int32_t qtts_tokenizer_token_id(const qtts_tokenizer *tok, const char *token);

/* One more than the largest id (vocabulary or added token): every id
 * encode can return is below it (151676 for Qwen3-TTS). */
int32_t qtts_tokenizer_vocab_size(const qtts_tokenizer *tok);

#endif
