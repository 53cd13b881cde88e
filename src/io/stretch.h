/*
 * stretch.h - pitch-preserving tempo change of mono speech.
 *
 * What the OpenAI API calls `speed`: the same voice at the same pitch,
 * spoken faster (speed > 1) or slower (< 1). Resampling would shift the
 * pitch with the tempo, so this works pitch period by pitch period
 * instead: libsonic (Debian's libsonic0, Apache-2.0), made for exactly
 * this (espeak-ng and Android's TTS use it) and good to 4x and beyond.
 *
 * Streaming: push audio as it is produced, finish at the end of the
 * utterance. Output is a function of the input samples alone, not of how
 * they were split into pushes (the stretcher keeps its unfinished pitch
 * periods from push to push; tests/unit/test_stretch.c checks it), so a
 * streamed response carries the same samples as a whole one.
 *
 * The library works on 16-bit samples: input is clamped to [-1, 1] and
 * rounded to 1/32767 (NaN as 0), output is a multiple of 1/32767 in
 * [-1, 1], so a 16-bit writer gets the library's samples exactly. Every
 * format the server sends is 16-bit (or lossy) anyway; a float32 WAV from
 * the CLI with a speed other than 1 has 16-bit resolution.
 */
#ifndef QTTS_IO_STRETCH_H
#define QTTS_IO_STRETCH_H

#include <stddef.h>

#include "base/base.h"

/* The accepted range (OpenAI's for `speed`). */
#define QTTS_SPEED_MIN 0.25
#define QTTS_SPEED_MAX 4.0

typedef struct qtts_stretch qtts_stretch;

/* A stretcher for mono audio at sample_rate (8000-192000 Hz) changing the
 * tempo by speed (QTTS_SPEED_MIN..QTTS_SPEED_MAX, finite): INVALID
 * otherwise, NOMEM when the library cannot allocate. */
qtts_status qtts_stretch_new(int sample_rate, double speed, qtts_stretch **out, qtts_err *err);
void qtts_stretch_free(qtts_stretch *st);   /* NULL ok */

/* Feeds n samples; whatever output is ready goes to cb (zero or more
 * calls). cb returning non-zero stops the push: QTTS_ERR_CANCELLED. */
qtts_status qtts_stretch_push(qtts_stretch *st, const float *pcm, size_t n, qtts_audio_cb cb,
                              void *user, qtts_err *err);

/* End of the utterance: the remaining output goes to cb. The stretcher is
 * then empty again, ready for another utterance at the same speed. */
qtts_status qtts_stretch_finish(qtts_stretch *st, qtts_audio_cb cb, void *user, qtts_err *err);

#endif
