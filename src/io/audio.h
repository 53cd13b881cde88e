/*
 * audio.h - reference audio for voice cloning: bytes -> float mono -> 24 kHz.
 *
 * Input is a memory buffer from an untrusted client. Two decoders:
 *
 *  - RIFF/WAVE (bytes start with "RIFF"): our own bounds-checked walker,
 *    qtts_wav_parse. Rules, each failure a one-line message starting
 *    "WAV: " that names the rule:
 *      * header: >= 12 bytes, "RIFF" then "WAVE" ("RIFX" big-endian and
 *        "RF64" are refused as unsupported). The RIFF size field is not
 *        trusted (0, too small, too large and 0xFFFFFFFF all accepted): the
 *        walk is bounded by the buffer alone.
 *      * chunks: at most QTTS_WAV_MAX_CHUNKS chunk headers are read; every
 *        chunk size is clamped to the bytes left; an odd-sized chunk is
 *        followed by a pad byte, which is skipped; the walk stops at the
 *        first "data" chunk, so every step advances >= 8 bytes and the loop
 *        always ends.
 *      * "fmt ": exactly one, before "data", size >= 16 after clamping.
 *        Format tag 1 (PCM: 8-bit unsigned, 16/24/32-bit signed little
 *        endian), 3 (IEEE float, 32-bit), or 0xFFFE EXTENSIBLE with size
 *        >= 40, cbSize >= 22, valid bits <= container bits and the PCM or
 *        IEEE-float sub-format GUID. Anything else is unsupported.
 *      * 1-2 channels, 8000-48000 Hz, block_align == channels*bits/8 (so
 *        never 0).
 *      * "data": size clamped to the bytes left; 0xFFFFFFFF (a streaming
 *        writer's "unknown") means "to the end of the buffer". A trailing
 *        partial frame is ignored. At least one frame.
 *      * decoded size frames*channels*4 bytes <= max_decoded_bytes
 *        (default 12 MiB), checked before any allocation.
 *      * float samples must be finite.
 *    Scaling is libsndfile's (what the reference's soundfile/librosa
 *    loaders return): u8 (x-128)/128, s16 x/2^15, s24 x/2^23,
 *    s32 float(x)/2^31, float as is. Stereo becomes mono as
 *    float32(l + r) * 0.5, numpy's float32 mean over the channel axis.
 *
 *  - Anything else goes to libsndfile, but only when the magic bytes say
 *    FLAC ("fLaC"), Ogg ("OggS": Vorbis, Opus) or MP3 ("ID3" or an MPEG
 *    frame sync), and the format libsndfile reports must agree. The same
 *    channel, rate, size and finiteness limits apply; the decoded size is
 *    enforced while reading, not taken from the header.
 *
 * Duration limits (default 1-30 s) are checked by qtts_audio_decode, not by
 * the parser, so the parser (and its fuzzer) sees every length.
 *
 * Resampling reproduces librosa.resample(y, orig_sr, target_sr) with its
 * default res_type "soxr_hq": python-soxr's one-call path on float32
 * (libsoxr, SOXR_HQ, no extra flags, input fed in chunks of
 * 48000*in/out samples into an output buffer of n*out/in + 1, then a
 * flush), followed by librosa's fix_length to ceil(n * out/in) samples
 * (zero-padded or cut). With the same libsoxr build this is bit-exact.
 *
 * All outputs are heap buffers released with qtts_free.
 */
#ifndef QTTS_AUDIO_H
#define QTTS_AUDIO_H

#include "../base/base.h"

#define QTTS_WAV_MAX_CHUNKS 64
#define QTTS_AUDIO_MIN_RATE 8000
#define QTTS_AUDIO_MAX_RATE 48000
#define QTTS_AUDIO_MAX_CHANNELS 2
#define QTTS_AUDIO_MAX_DECODED ((size_t)12 << 20)   /* 12 MiB of float samples */

typedef enum {
    QTTS_AUDIO_WAV_PCM,      /* RIFF, integer PCM */
    QTTS_AUDIO_WAV_FLOAT,    /* RIFF, IEEE float */
    QTTS_AUDIO_FLAC,
    QTTS_AUDIO_OGG,          /* Vorbis or Opus */
    QTTS_AUDIO_MP3,
} qtts_audio_container;

typedef struct {
    float *samples;          /* [n] mono float32, owned (qtts_free) */
    size_t n;                /* frames */
    int sample_rate;         /* Hz, as stored in the file */
    int channels;            /* channels in the file (averaged into samples) */
    int bits;                /* bits per stored sample; 0 when the codec has none */
    qtts_audio_container container;
} qtts_audio;

typedef struct {
    double min_seconds;       /* default 1.0; 0 disables */
    double max_seconds;       /* default 30.0; 0 disables */
    size_t max_decoded_bytes; /* default QTTS_AUDIO_MAX_DECODED */
    bool allow_compressed;    /* default true: FLAC/Ogg/MP3 through libsndfile */
} qtts_audio_limits;

void qtts_audio_limits_init(qtts_audio_limits *l);

void qtts_audio_free(qtts_audio *a);   /* frees samples, zeroes *a; NULL ok */

/* Strict RIFF/WAVE decode of buf[0, len) (rules above). max_decoded_bytes
 * of 0 means QTTS_AUDIO_MAX_DECODED. No duration check. On failure *out is
 * zeroed and err says which rule broke (QTTS_ERR_FORMAT: malformed;
 * QTTS_ERR_UNSUPPORTED: well-formed but outside what we take;
 * QTTS_ERR_LIMIT: over the decoded-size cap; QTTS_ERR_NOMEM). */
qtts_status qtts_wav_parse(const uint8_t *buf, size_t len, size_t max_decoded_bytes,
                           qtts_audio *out, qtts_err *err);

/* Any supported format (RIFF via qtts_wav_parse, else libsndfile when
 * lim->allow_compressed), then the duration check (QTTS_ERR_LIMIT).
 * lim may be NULL for the defaults. */
qtts_status qtts_audio_decode(const uint8_t *buf, size_t len, const qtts_audio_limits *lim,
                              qtts_audio *out, qtts_err *err);

/* Output length of qtts_resample: ceil(n * sr_out / sr_in) computed as
 * librosa does (double ratio), or n when the rates are equal. */
size_t qtts_resample_len(size_t n, int sr_in, int sr_out);

/* librosa.resample(x, orig_sr=sr_in, target_sr=sr_out) (soxr_hq). Rates in
 * [1000, 384000]. When the rates are equal the input is copied. *out gets
 * qtts_resample_len(n, ...) samples. */
qtts_status qtts_resample(const float *in, size_t n, int sr_in, int sr_out, float **out,
                          size_t *n_out, qtts_err *err);

/* decode + duration check + resample to sr_out (24000 for the speaker
 * encoder): the whole path from client bytes to model input. */
qtts_status qtts_audio_load(const uint8_t *buf, size_t len, const qtts_audio_limits *lim,
                            int sr_out, float **out, size_t *n_out, qtts_err *err);

#endif
