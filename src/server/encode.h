/*
 * encode.h - s16le PCM -> FLAC, MP3 or Ogg/Opus in memory, through
 * libsndfile (which wraps libFLAC, LAME and libopus), and the streaming
 * WAV header.
 *
 * Encoded formats are produced once the whole utterance is there (the
 * server sends them with Content-Length, or as one chunk of a chunked
 * response); wav and pcm stream as they are generated.
 */
#ifndef QTTS_SERVER_ENCODE_H
#define QTTS_SERVER_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qwen3_tts.h"
#include "server/request.h"

/* True when this libsndfile can write FLAC, MP3 and Ogg/Opus at 24 kHz. */
bool qtts_encoders_available(void);

/* Encodes n_samples mono 24 kHz samples (s16le bytes) as fmt (FLAC, MP3 or
 * OPUS). *out is heap memory the caller frees with free(). */
qtts_status qtts_encode_audio(qtts_audio_format fmt, const uint8_t *s16le, size_t n_samples,
                              uint8_t **out, size_t *out_len, qtts_error *err);

/* 44-byte WAV header for mono s16 24 kHz. n_samples SIZE_MAX writes the
 * 0xFFFFFFFF "unknown length" sizes that streaming readers accept. */
void qtts_wav_header_s16(uint8_t h[44], size_t n_samples);

#endif
