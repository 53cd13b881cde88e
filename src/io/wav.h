/*
 * wav.h - writing PCM as RIFF/WAVE (16-bit PCM or 32-bit IEEE float, mono
 * or multi-channel interleaved). Conversion to int16 clamps to [-1, 1] and
 * maps NaN to 0, so no float->int conversion is ever out of range.
 */
#ifndef QTTS_WAV_H
#define QTTS_WAV_H

#include <stdio.h>

#include "../base/base.h"

typedef enum { QTTS_WAV_S16, QTTS_WAV_F32 } qtts_wav_format;

/* Converts n floats to int16 (clamped, NaN -> 0). */
void qtts_pcm_to_s16(const float *in, size_t n, int16_t *out);

/* The 44-byte header for n_frames frames of channels channels. */
void qtts_wav_header(uint8_t out[44], size_t n_frames, int channels, int sample_rate,
                     qtts_wav_format fmt);

/* Writes a complete WAV file (path "-" = stdout). */
qtts_status qtts_wav_write(const char *path, const float *pcm, size_t n_frames, int channels,
                           int sample_rate, qtts_wav_format fmt, qtts_err *err);

/* Appends samples to an open stream in the given format (for raw PCM
 * streaming and for WAV bodies written after a header). */
qtts_status qtts_pcm_write(FILE *f, const float *pcm, size_t n, qtts_wav_format fmt,
                           qtts_err *err);

#endif
