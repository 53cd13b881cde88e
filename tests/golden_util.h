/*
 * golden_util.h - helpers shared by the end-to-end tests that run the
 * public API against the official goldens (test_engine.c, test_clone.c):
 * a sink that collects a request's frames and PCM, and golden-JSON access.
 */
#ifndef QTTS_TEST_GOLDEN_UTIL_H
#define QTTS_TEST_GOLDEN_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3_tts.h"
#include "base/json.h"

#define GOLDEN QTTS_FIXTURES "/golden"
#define MODELS QTTS_FIXTURES "/models"

/* Frames [n_frames, 16] and PCM [n] of one request (request.user). */
typedef struct {
    int32_t *codes;
    int n_frames, cap;
    float *pcm;
    size_t n, pcm_cap;
} collect;

/* qtts_frame_cb: frames must arrive in order. */
static int on_frame(void *user, int idx, const int32_t codes[QTTS_NUM_CODEBOOKS]) {
    collect *c = user;
    if (idx != c->n_frames) return 1;
    if (c->n_frames == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->codes = realloc(c->codes, (size_t)c->cap * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
        if (!c->codes) return 1;
    }
    memcpy(c->codes + (size_t)c->n_frames * QTTS_NUM_CODEBOOKS, codes,
           QTTS_NUM_CODEBOOKS * sizeof(int32_t));
    c->n_frames++;
    return 0;
}

/* qtts_audio_cb */
static int on_audio(void *user, const float *pcm, size_t n) {
    collect *c = user;
    if (c->n + n > c->pcm_cap) {
        c->pcm_cap = (c->n + n) * 2;
        c->pcm = realloc(c->pcm, c->pcm_cap * sizeof(float));
        if (!c->pcm) return 1;
    }
    memcpy(c->pcm + c->n, pcm, n * sizeof(float));
    c->n += n;
    return 0;
}

static inline void collect_free(collect *c) {
    free(c->codes);
    free(c->pcm);
    memset(c, 0, sizeof *c);
}


static inline qtts_json *load_json(const char *path) {
    size_t n;
    char *buf = read_all(path, &n);
    if (!buf) return NULL;
    qtts_json_limits lim = qtts_json_limits_files();
    qtts_err err;
    qtts_json *doc = qtts_json_parse(buf, n, &lim, path, &err);
    free(buf);
    return doc;
}

/* A string member, or NULL when absent or null. */
static inline const char *jstr(const qtts_json *o, const char *key) {
    const qtts_json *v = qtts_json_get(o, key);
    return v && v->type == QTTS_JSON_STRING ? v->str : NULL;
}

#endif
