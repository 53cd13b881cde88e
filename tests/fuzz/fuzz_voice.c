/*
 * fuzz_voice.c - libFuzzer harness for voice profiles (`qwen3-tts voice
 * create`, `serve --voices DIR`): the input is a whole profile file, read
 * through a memfd by qtts_voice_read_fd against the tiny Base fixture's
 * config (tests/fixtures/models/base06, loaded once; run from the
 * repository root).
 *
 *     make fuzz-voice FUZZ_TIME=60
 *
 * A refusal must carry a message. An accepted profile must match the
 * model (hidden size, codebook size and count), hold a finite x-vector,
 * and, for in-context cloning, 1..391 frames of reference codes inside the
 * codebook with a transcript; the harness reads every value.
 *
 * Seeds: tests/fuzz/corpus/voice (an in-context and an x-vector profile of
 * the fixture, written by `qwen3-tts voice create`).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/voice.h"
#include "fuzz_memfd.h"
#include "io/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qtts_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qtts_err err;
    if (qtts_config_load("tests/fixtures/models/base06", &cfg, &err) != QTTS_OK) {
        fprintf(stderr, "fuzz_voice: %s (run from the repository root)\n", err.msg);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const int fd = fuzz_memfd("fuzz.voice", data, size);
    if (fd < 0) return 0;
    qtts_voice *v = NULL;
    qtts_err err;
    memset(&err, 0, sizeof err);
    if (qtts_voice_read_fd(&cfg, fd, "fuzz.voice", &v, &err) != QTTS_OK) {
        if (v || !err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
        return 0;
    }
    if (!v || v->dim != cfg.talker.hidden || v->codebook_size != cfg.codec.codebook_size ||
        v->num_code_groups != cfg.talker.num_code_groups || !v->xvector)
        __builtin_trap();
    for (int i = 0; i < v->dim; i++)
        if (!isfinite(v->xvector[i])) __builtin_trap();
    if (v->ref_codes) {
        if (v->ref_frames < 1 || v->ref_frames > 391 || !v->ref_text || !v->ref_text[0])
            __builtin_trap();
        for (size_t i = 0; i < (size_t)v->ref_frames * (size_t)v->num_code_groups; i++)
            if (v->ref_codes[i] < 0 || v->ref_codes[i] >= v->codebook_size) __builtin_trap();
    } else if (v->ref_frames || v->ref_text) {
        __builtin_trap();
    }
    qtts_voice_free(v);
    return 0;
}
