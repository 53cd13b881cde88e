/*
 * encode.c - in-memory audio encoding through libsndfile's virtual I/O;
 * see encode.h.
 */
#include "server/encode.h"

#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ==== WAV header ======================================================================= */

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

void qtts_wav_header_s16(uint8_t h[44], size_t n_samples) {
    uint32_t data, riff;
    if (n_samples == SIZE_MAX) {
        data = riff = 0xFFFFFFFFu;
    } else {
        uint64_t d = (uint64_t)n_samples * 2;
        if (d > 0xFFFFFFFFu - 36) d = 0xFFFFFFFFu - 36;
        data = (uint32_t)d;
        riff = data + 36;
    }
    memcpy(h, "RIFF", 4);
    put32(h + 4, riff);
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16);
    put16(h + 20, 1);
    put16(h + 22, 1);
    put32(h + 24, QTTS_SAMPLE_RATE);
    put32(h + 28, QTTS_SAMPLE_RATE * 2);
    put16(h + 32, 2);
    put16(h + 34, 16);
    memcpy(h + 36, "data", 4);
    put32(h + 40, data);
}

/* ==== libsndfile virtual I/O on a growable buffer ======================================= */

typedef struct {
    uint8_t *p;
    sf_count_t len, cap, pos;
    bool oom;
} membuf;

static sf_count_t vio_len(void *u) { return ((membuf *)u)->len; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u) {
    membuf *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
    sf_count_t np = base + off;
    if (np < 0) return -1;
    m->pos = np;
    return np;
}

static sf_count_t vio_read(void *dst, sf_count_t n, void *u) {
    membuf *m = u;
    if (m->pos >= m->len || n <= 0) return 0;
    sf_count_t k = m->len - m->pos < n ? m->len - m->pos : n;
    memcpy(dst, m->p + m->pos, (size_t)k);
    m->pos += k;
    return k;
}

static sf_count_t vio_write(const void *src, sf_count_t n, void *u) {
    membuf *m = u;
    if (n <= 0) return 0;
    sf_count_t end = m->pos + n;
    if (end > ((sf_count_t)1 << 31)) {   /* 2 GiB: far above any request's budget */
        m->oom = true;
        return 0;
    }
    if (end > m->cap) {
        sf_count_t cap = m->cap ? m->cap : 65536;
        while (cap < end) cap *= 2;
        uint8_t *p = realloc(m->p, (size_t)cap);
        if (!p) {
            m->oom = true;
            return 0;
        }
        m->p = p;
        m->cap = cap;
    }
    if (m->pos > m->len) memset(m->p + m->len, 0, (size_t)(m->pos - m->len));
    memcpy(m->p + m->pos, src, (size_t)n);
    m->pos = end;
    if (end > m->len) m->len = end;
    return n;
}

static sf_count_t vio_tell(void *u) { return ((membuf *)u)->pos; }

static int sf_format_of(qtts_audio_format f) {
    switch (f) {
    case QTTS_FMT_FLAC: return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    case QTTS_FMT_MP3: return SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
    case QTTS_FMT_OPUS: return SF_FORMAT_OGG | SF_FORMAT_OPUS;
    default: return 0;
    }
}

bool qtts_encoders_available(void) {
    static const qtts_audio_format fmts[] = {QTTS_FMT_FLAC, QTTS_FMT_MP3, QTTS_FMT_OPUS};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(fmts); i++) {
        SF_INFO info = {.samplerate = QTTS_SAMPLE_RATE, .channels = 1, .format = sf_format_of(fmts[i])};
        if (!sf_format_check(&info)) return false;
    }
    return true;
}

qtts_status qtts_encode_audio(qtts_audio_format fmt, const uint8_t *s16le, size_t n_samples,
                              uint8_t **out, size_t *out_len, qtts_error *err) {
    *out = NULL;
    *out_len = 0;
    int sf = sf_format_of(fmt);
    if (!sf) return qtts_fail(err, QTTS_ERR_INVALID, "no encoder for %s", qtts_format_name(fmt));
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    membuf m = {0};
    SF_INFO info = {.samplerate = QTTS_SAMPLE_RATE, .channels = 1, .format = sf};
    SNDFILE *f = sf_open_virtual(&vio, SFM_WRITE, &info, &m);
    if (!f) {
        free(m.p);
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "cannot start the %s encoder: %s",
                         qtts_format_name(fmt), sf_strerror(NULL));
    }
    short buf[4096];
    size_t i = 0;
    qtts_status st = QTTS_OK;
    while (i < n_samples && !st) {
        size_t k = n_samples - i < 4096 ? n_samples - i : 4096;
        for (size_t j = 0; j < k; j++)
            buf[j] = (short)(uint16_t)(s16le[2 * (i + j)] | (s16le[2 * (i + j) + 1] << 8));
        if (sf_write_short(f, buf, (sf_count_t)k) != (sf_count_t)k)
            st = qtts_fail(err, m.oom ? QTTS_ERR_NOMEM : QTTS_ERR_IO, "%s encoder: %s",
                           qtts_format_name(fmt), m.oom ? "out of memory" : sf_strerror(f));
        i += k;
    }
    if (sf_close(f) != 0 && !st)
        st = qtts_fail(err, QTTS_ERR_IO, "%s encoder failed to finish", qtts_format_name(fmt));
    if (!st && m.oom) st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory while encoding");
    if (st) {
        free(m.p);
        return st;
    }
    *out = m.p;
    *out_len = (size_t)m.len;
    return QTTS_OK;
}
