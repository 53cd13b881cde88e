/*
 * fuzz_tokenizer.c - libFuzzer harness for the text tokenizer, which sees
 * every request's text and instructions as the client sent them: added
 * token matching, NFC normalization, the pre-tokenizer scanners and BPE,
 * with the real Qwen3-TTS vocabulary (tests/fixtures/tokenizer, loaded
 * once; run from the repository root).
 *
 *     make fuzz-tokenizer FUZZ_TIME=60
 *
 * The first byte picks the pre-tokenizer; the rest is the text, any bytes.
 * Invalid UTF-8 must be refused with a message. Accepted text must give ids
 * below the vocabulary size that decode, and decoding is a fixed point:
 * the decoded text is the normalized input, so encoding it again gives the
 * very same ids.
 *
 * Seeds: tests/fuzz/corpus/tokenizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qtts_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qtts_err err;
    if (qtts_tokenizer_load("tests/fixtures/tokenizer", &tok, &err) != QTTS_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root)\n", err.msg);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const qtts_tokenize_opts opts = {.pretok = data[0] & 1 ? QTTS_PRETOK_MISTRAL_FIXED
                                                           : QTTS_PRETOK_QWEN2};
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    int32_t *ids = NULL, *ids2 = NULL;
    size_t n = 0, n2 = 0, tlen = 0;
    char *back = NULL;
    qtts_err err;
    memset(&err, 0, sizeof err);
    if (qtts_tokenizer_encode_ex(tok, text, len, &opts, &ids, &n, &err) != QTTS_OK) {
        if (ids || !err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
        return 0;
    }
    if (!ids || (len && !n)) __builtin_trap();
    const int32_t V = qtts_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) __builtin_trap();
    if (qtts_tokenizer_decode(tok, ids, n, &back, &tlen, &err) != QTTS_OK) __builtin_trap();
    if (strlen(back) != tlen) {
        /* NUL bytes in the input come back as NUL bytes: compare by length */
        if (!memchr(text, '\0', len)) __builtin_trap();
    }
    if (qtts_tokenizer_encode_ex(tok, back, tlen, &opts, &ids2, &n2, &err) != QTTS_OK ||
        n2 != n || memcmp(ids, ids2, n * sizeof *ids))
        __builtin_trap();
    qtts_free(ids);
    qtts_free(ids2);
    qtts_free(back);
    return 0;
}
