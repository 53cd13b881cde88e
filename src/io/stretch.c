/*
 * stretch.c - pitch-preserving tempo change through libsonic; see stretch.h.
 */
#include "io/stretch.h"

#include <math.h>
#include <sonic.h>

/* Samples moved per library call: bounds the stack buffers and keeps every
 * count the library takes (int) small. */
#define STRETCH_BLOCK 4096

struct qtts_stretch {
    sonicStream ss;
    int sample_rate;
    float speed;
};

static sonicStream open_stream(int sample_rate, float speed) {
    sonicStream ss = sonicCreateStream(sample_rate, 1);
    if (!ss) return NULL;
    sonicSetSpeed(ss, speed);
    /* pitch search on every sample, not a 4 kHz copy: costs little at one
     * voice and finds periods more exactly */
    sonicSetQuality(ss, 1);
    return ss;
}

qtts_status qtts_stretch_new(int sample_rate, double speed, qtts_stretch **out, qtts_err *err) {
    *out = NULL;
    if (sample_rate < 8000 || sample_rate > 192000)
        return qtts_fail(err, QTTS_ERR_INVALID, "speed change: sample rate %d Hz is outside 8000-192000",
                         sample_rate);
    if (!isfinite(speed) || speed < QTTS_SPEED_MIN || speed > QTTS_SPEED_MAX)
        return qtts_fail(err, QTTS_ERR_INVALID, "speed %g is outside [%g, %g]", speed,
                         QTTS_SPEED_MIN, QTTS_SPEED_MAX);
    qtts_stretch *st = qtts_calloc(1, sizeof *st);
    if (!st) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (speed change)");
    st->sample_rate = sample_rate;
    st->speed = (float)speed;
    if (!(st->ss = open_stream(sample_rate, st->speed))) {
        qtts_free(st);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (speed change)");
    }
    *out = st;
    return QTTS_OK;
}

void qtts_stretch_free(qtts_stretch *st) {
    if (!st) return;
    if (st->ss) sonicDestroyStream(st->ss);
    qtts_free(st);
}

/* Hands every output sample the library holds to cb. */
static qtts_status drain(qtts_stretch *st, qtts_audio_cb cb, void *user, qtts_err *err) {
    short s16[STRETCH_BLOCK];
    float f[STRETCH_BLOCK];
    int got;
    while ((got = sonicReadShortFromStream(st->ss, s16, STRETCH_BLOCK)) > 0) {
        /* the input's scale, so that x * 32767 rounded (the server's and
         * the WAV writer's conversion) gives the library's samples back */
        for (int i = 0; i < got; i++) f[i] = (float)QTTS_MAX(s16[i], -32767) / 32767.0f;
        if (cb && cb(user, f, (size_t)got))
            return qtts_fail(err, QTTS_ERR_CANCELLED, "cancelled by the caller");
    }
    return QTTS_OK;
}

qtts_status qtts_stretch_push(qtts_stretch *st, const float *pcm, size_t n, qtts_audio_cb cb,
                              void *user, qtts_err *err) {
    short s16[STRETCH_BLOCK];
    while (n) {
        const int k = (int)QTTS_MIN(n, (size_t)STRETCH_BLOCK);
        for (int i = 0; i < k; i++) {
            float x = pcm[i];
            x = x > 1.0f ? 1.0f : x < -1.0f ? -1.0f : x; /* NaN fails both: kept, then 0 */
            s16[i] = isnan(x) ? 0 : (short)lrintf(x * 32767.0f);
        }
        if (!sonicWriteShortToStream(st->ss, s16, k))
            return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (speed change)");
        qtts_status s = drain(st, cb, user, err);
        if (s) return s;
        pcm += k;
        n -= (size_t)k;
    }
    return QTTS_OK;
}

qtts_status qtts_stretch_finish(qtts_stretch *st, qtts_audio_cb cb, void *user, qtts_err *err) {
    if (!sonicFlushStream(st->ss))
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (speed change)");
    qtts_status s = drain(st, cb, user, err);
    /* A fresh stream for the next utterance: flushing leaves the pitch
     * tracker's history behind, and an utterance must not depend on the
     * one before it. */
    sonicStream fresh = open_stream(st->sample_rate, st->speed);
    if (!fresh) {
        if (!s) s = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (speed change)");
        return s;
    }
    sonicDestroyStream(st->ss);
    st->ss = fresh;
    return s;
}
