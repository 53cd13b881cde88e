/* wav.c - WAV writing; see wav.h. Little-endian byte order is written
 * explicitly so the output is right on any host. */
#include "wav.h"

#include <errno.h>
#include <math.h>
#include <string.h>

void qtts_pcm_to_s16(const float *in, size_t n, int16_t *out) {
    for (size_t i = 0; i < n; i++) {
        float x = in[i];
        if (!(x == x)) x = 0.0f;
        if (x > 1.0f) x = 1.0f;
        if (x < -1.0f) x = -1.0f;
        out[i] = (int16_t)lrintf(x * 32767.0f);
    }
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

void qtts_wav_header(uint8_t h[44], size_t n_frames, int channels, int sample_rate,
                     qtts_wav_format fmt) {
    const uint32_t bps = fmt == QTTS_WAV_F32 ? 4 : 2;
    uint64_t data = (uint64_t)n_frames * (uint64_t)channels * bps;
    if (data > 0xffffffffu - 36) data = 0xffffffffu - 36; /* cap; streaming readers cope */
    memcpy(h, "RIFF", 4);
    put_u32(h + 4, (uint32_t)(36 + data));
    memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, 16);
    put_u16(h + 20, fmt == QTTS_WAV_F32 ? 3 : 1);
    put_u16(h + 22, (uint16_t)channels);
    put_u32(h + 24, (uint32_t)sample_rate);
    put_u32(h + 28, (uint32_t)(sample_rate * channels * bps));
    put_u16(h + 32, (uint16_t)(channels * bps));
    put_u16(h + 34, (uint16_t)(bps * 8));
    memcpy(h + 36, "data", 4);
    put_u32(h + 40, (uint32_t)data);
}

qtts_status qtts_pcm_write(FILE *f, const float *pcm, size_t n, qtts_wav_format fmt,
                           qtts_err *err) {
    uint8_t buf[4096];
    size_t i = 0;
    while (i < n) {
        size_t len = 0;
        if (fmt == QTTS_WAV_F32) {
            size_t m = QTTS_MIN(n - i, sizeof buf / 4);
            for (size_t j = 0; j < m; j++) {
                float x = pcm[i + j];
                uint32_t u;
                memcpy(&u, &x, 4);
                put_u32(buf + 4 * j, u);
            }
            len = 4 * m;
            i += m;
        } else {
            int16_t s[2048];
            size_t m = QTTS_MIN(n - i, sizeof s / sizeof s[0]);
            qtts_pcm_to_s16(pcm + i, m, s);
            for (size_t j = 0; j < m; j++) put_u16(buf + 2 * j, (uint16_t)s[j]);
            len = 2 * m;
            i += m;
        }
        if (fwrite(buf, 1, len, f) != len)
            return qtts_fail(err, QTTS_ERR_IO, "write failed: %s", strerror(errno));
    }
    return QTTS_OK;
}

qtts_status qtts_wav_write(const char *path, const float *pcm, size_t n_frames, int channels,
                           int sample_rate, qtts_wav_format fmt, qtts_err *err) {
    bool is_stdout = strcmp(path, "-") == 0;
    FILE *f = is_stdout ? stdout : fopen(path, "wb");
    if (!f) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    uint8_t h[44];
    qtts_wav_header(h, n_frames, channels, sample_rate, fmt);
    qtts_status st = QTTS_OK;
    if (fwrite(h, 1, 44, f) != 44)
        st = qtts_fail(err, QTTS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (!st) st = qtts_pcm_write(f, pcm, n_frames * (size_t)channels, fmt, err);
    if (is_stdout) {
        if (fflush(f) != 0 && !st) st = qtts_fail(err, QTTS_ERR_IO, "stdout: write failed");
    } else if (fclose(f) != 0 && !st) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return st;
}
