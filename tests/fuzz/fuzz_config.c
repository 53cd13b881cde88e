/*
 * fuzz_config.c - libFuzzer harness for the model-directory config reader
 * (config.json, generation_config.json, speech_tokenizer/config.json into
 * a validated qtts_config).
 *
 *     make fuzz-config FUZZ_TIME=60
 *
 * The first byte picks the file that gets the rest of the input (0-2) and
 * the fixture whose other two files stand beside it (bit 2: the Base
 * fixture with its speaker-encoder section, else CustomVoice); the files go
 * to a private temporary directory, so the reader opens and sizes real
 * files. A refusal must carry a message; an accepted config must hold what
 * the model loaders rely on without checking again: sizes and counts in
 * range, every token id inside its vocabulary, names NUL-terminated
 * without control characters, 16 codebooks per frame, sampling parameters
 * finite and in range.
 *
 * Seeds: tests/fuzz/corpus/config (the fixtures' and the released 0.6B
 * CustomVoice model's files, each behind each selector byte).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "io/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const files[3] = {"config.json", "generation_config.json",
                                     "speech_tokenizer/config.json"};
static const char *const fixtures[2] = {"tests/fixtures/models/cv06", "tests/fixtures/models/base06"};
static char *orig[2][3];
static size_t orig_len[2][3];
static char dir[64];

static void put(const char *name, const void *p, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "fuzz_config: cannot write %s\n", path);
        exit(1);
    }
}

/* The temporary directory goes when libFuzzer exits (it calls exit). */
static void cleanup(void) {
    char path[256];
    for (int i = 2; i >= 0; i--) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/speech_tokenizer", dir);
    rmdir(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/qtts_fuzz_config.XXXXXX");
    char sub[128];
    snprintf(sub, sizeof sub, "%s/speech_tokenizer", mkdtemp(dir) ? dir : "");
    if (!dir[0] || mkdir(sub, 0700)) {
        fprintf(stderr, "fuzz_config: cannot make a temporary directory\n");
        exit(1);
    }
    atexit(cleanup);
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 3; i++) {
            char path[256];
            qtts_err err;
            snprintf(path, sizeof path, "%s/%s", fixtures[m], files[i]);
            if (qtts_read_file(path, 1u << 20, &orig[m][i], &orig_len[m][i], &err)) {
                fprintf(stderr, "fuzz_config: %s (run from the repository root)\n", err.msg);
                exit(1);
            }
        }
    return 0;
}

/* 1..63 bytes, NUL-terminated, no control character (C0, DEL, C1). */
static bool name_ok(const char *s) {
    const size_t n = strnlen(s, QTTS_NAME_MAX);
    if (n < 1 || n >= QTTS_NAME_MAX) return false;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
            return false;
    return true;
}

static bool stack_ok(const qtts_stack_config *s) {
    return s->hidden >= 1 && s->hidden <= (1 << 20) && s->inter >= 1 && s->layers >= 1 &&
           s->layers <= 256 && s->heads >= 1 && s->kv_heads >= 1 && s->heads % s->kv_heads == 0 &&
           s->head_dim >= 2 && s->head_dim % 2 == 0 && s->vocab >= 1 && s->rms_eps > 0 &&
           s->rms_eps <= 1 && s->rope_theta > 0 && s->num_code_groups == QTTS_CODE_GROUPS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int which = data[0] % 4 == 3 ? 2 : data[0] % 4, m = (data[0] >> 2) & 1;
    for (int i = 0; i < 3; i++)
        if (i == which) put(files[i], data + 1, size - 1);
        else put(files[i], orig[m][i], orig_len[m][i]);
    qtts_config c;
    qtts_err err;
    memset(&err, 0, sizeof err);
    if (qtts_config_load(dir, &c, &err) != QTTS_OK) {
        if (!err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) __builtin_trap();
        return 0;
    }
    if (!stack_ok(&c.talker) || !stack_ok(&c.cp)) __builtin_trap();
    const int V = c.talker.vocab, TV = c.text_vocab;
    const int codec_ids[] = {c.codec_pad_id,     c.codec_bos_id,       c.codec_eos_id,
                             c.codec_think_id,   c.codec_nothink_id,   c.codec_think_bos_id,
                             c.codec_think_eos_id};
    for (size_t i = 0; i < sizeof codec_ids / sizeof codec_ids[0]; i++)
        if (codec_ids[i] < 0 || codec_ids[i] >= V) __builtin_trap();
    const int text_ids[] = {c.im_start_id, c.im_end_id, c.tts_pad_id, c.tts_bos_id, c.tts_eos_id};
    for (size_t i = 0; i < sizeof text_ids / sizeof text_ids[0]; i++)
        if (text_ids[i] < 0 || text_ids[i] >= TV) __builtin_trap();
    if (c.n_langs < 0 || c.n_langs > QTTS_MAX_LANGS || c.n_speakers < 0 ||
        c.n_speakers > QTTS_MAX_SPEAKERS)
        __builtin_trap();
    for (int i = 0; i < c.n_langs; i++) {
        if (!name_ok(c.langs[i].name) || c.langs[i].id < 0 || c.langs[i].id >= V) __builtin_trap();
        if (qtts_config_find_lang(&c, c.langs[i].name) != &c.langs[i]) __builtin_trap();
    }
    for (int i = 0; i < c.n_speakers; i++) {
        const qtts_speaker *s = &c.speakers[i];
        if (!name_ok(s->name) || s->id < 0 || s->id >= V) __builtin_trap();
        if (s->dialect[0] && !qtts_config_find_lang(&c, s->dialect)) __builtin_trap();
        if (qtts_config_find_speaker(&c, s->name) != s) __builtin_trap();
    }
    if (!(c.gen.temperature > 0) || !(c.gen.subtalker_temperature > 0) || !(c.gen.top_p > 0) ||
        c.gen.top_p > 1 || !(c.gen.subtalker_top_p > 0) || c.gen.subtalker_top_p > 1 ||
        c.gen.top_k < 0 || c.gen.subtalker_top_k < 0 || !(c.gen.repetition_penalty > 0) ||
        c.gen.max_new_tokens < 1)
        __builtin_trap();
    if (c.codec.num_quantizers != QTTS_CODE_GROUPS || c.codec.codebook_size != c.cp.vocab ||
        c.codec.decode_upsample_rate < 1 || c.codec.sliding_window < 1 || c.codec.layers < 1)
        __builtin_trap();
    return 0;
}
