/*
 * speaker_encoder.h - the Base models' speaker encoder: 24 kHz mono audio ->
 * log-mel -> ECAPA-TDNN -> x-vector [E] (E = enc_dim = talker hidden), used
 * as a talker input embedding for voice cloning.
 *
 * Log-mel front end (the reference's mel_spectrogram with the arguments of
 * extract_speaker_embedding):
 *   pcm [N] --reflect pad 384 each side--> [N + 768]
 *   frames t = 0..T-1, T = floor((N + 768 - 1024) / 256) + 1 = floor(N / 256):
 *     |rFFT_1024(hann_periodic · x[256t .. 256t+1023])| with sqrt(re²+im²+1e-9)  [513]
 *   mel = F · mag, F = librosa.filters.mel(sr=24000, n_fft=1024, n_mels=128,
 *         fmin=0, fmax=12000) (Slaney scale and area norm)                    [128]
 *   logmel = log(max(mel, 1e-5))                                             [T, 128]
 * N must exceed 384 (reflect padding needs more samples than the pad).
 *
 * ECAPA-TDNN (channel-major [C, T]; every conv has a bias and "same"
 * reflect padding: total dil*(k-1), left half rounded down; TDNN = conv +
 * ReLU); full-size dims C = 512, A = 128, S = 8, SE = 128:
 *   block0   TDNN 128 -> C, k5                                               [C, T]
 *   block b=1..3 (dilation 2,3,4), input x:
 *            TDNN1 C -> C k1; Res2Net: split into S chunks of C/S, y0 = x0,
 *            y1 = TDNN(x1), yi = TDNN(xi + y(i-1)) (C/S -> C/S, k3, dil);
 *            TDNN2 C -> C k1; SE: s = mean_t, g = sigmoid(W2 relu(W1 s)),
 *            out = g ⊙ h + x                                                 [C, T]
 *   mfa      TDNN over concat(block1..3)                                     [3C, T]
 *   asp      mu, sigma over time (weights 1/T, sigma = sqrt(max(var, 1e-12)));
 *            a = conv(tanh(TDNN([h; mu; sigma])))  3C+3C+3C -> A -> 3C;
 *            softmax over time per channel; weighted mu, sigma               [6C]
 *   fc       1x1 conv 6C -> E                                                [E]
 *
 * Weights (prefix "speaker_encoder.", BF16 or F32) are checked against the
 * config's speaker_encoder_config shapes and converted to fp32 at load; all
 * math is fp32 with fp64 for the FFT, the mel sums and the statistics.
 */
#ifndef QTTS_SPEAKER_ENCODER_H
#define QTTS_SPEAKER_ENCODER_H

#include "../base/base.h"
#include "../io/config.h"
#include "../io/safetensors.h"

#define QTTS_MEL_SR 24000
#define QTTS_MEL_NFFT 1024
#define QTTS_MEL_HOP 256
#define QTTS_MEL_BINS 128
#define QTTS_MEL_NFREQ (QTTS_MEL_NFFT / 2 + 1)          /* 513 */
#define QTTS_MEL_PAD ((QTTS_MEL_NFFT - QTTS_MEL_HOP) / 2) /* 384 */

/* The longest input the encoder takes: 10 minutes at 24 kHz (callers cap
 * reference audio far lower; this only bounds the scratch allocation). */
#define QTTS_SPK_MAX_SAMPLES ((size_t)QTTS_MEL_SR * 600)

/* ---- log-mel front end ---------------------------------------------------- */

typedef struct qtts_logmel qtts_logmel;

qtts_status qtts_logmel_new(qtts_logmel **out, qtts_err *err);
void qtts_logmel_free(qtts_logmel *m);   /* NULL ok */

/* The filterbank F [128, 513] row-major (float32, as librosa returns it). */
const float *qtts_logmel_filters(const qtts_logmel *m);

/* Frames for n samples: floor(n / 256), or 0 when n <= 384 (too short). */
size_t qtts_logmel_frames(size_t n);

/* Log-mel of pcm[n] (24 kHz): element (frame t, bin b) is written to
 * out[t * stride_t + b * stride_b], so (128, 1) gives [T, 128] and (1, ld)
 * gives channel-major [128, ld]. QTTS_ERR_INVALID when n is too short or
 * over QTTS_SPK_MAX_SAMPLES, or a sample is not finite. */
qtts_status qtts_logmel_compute(const qtts_logmel *m, const float *pcm, size_t n, float *out,
                                size_t stride_t, size_t stride_b, qtts_err *err);

/* ---- ECAPA-TDNN ----------------------------------------------------------- */

typedef struct qtts_spk_enc qtts_spk_enc;

/* Bind and convert the speaker_encoder.* tensors of st for cfg (which must
 * have has_speaker_encoder, mel_dim 128, sample_rate 24000,
 * enc_channels[0..3] equal, enc_channels[4] = 3 * enc_channels[3]). Every
 * missing or mis-shaped tensor is an error naming it. */
qtts_status qtts_spk_enc_load(const qtts_st_set *st, const qtts_config *cfg, qtts_spk_enc **out,
                              qtts_err *err);
void qtts_spk_enc_free(qtts_spk_enc *e);   /* NULL ok */

int qtts_spk_enc_dim(const qtts_spk_enc *e);          /* E */
const qtts_logmel *qtts_spk_enc_logmel(const qtts_spk_enc *e);

/* Smallest n the encoder accepts: the mel needs n > 384 and every reflect
 * pad of the network must be shorter than T. */
size_t qtts_spk_enc_min_samples(const qtts_spk_enc *e);

/* x-vector xvec[E] of 24 kHz mono pcm[n]. */
qtts_status qtts_spk_enc_embed(const qtts_spk_enc *e, const float *pcm, size_t n, float *xvec,
                               qtts_err *err);

/* The same from a log-mel [T, 128] (time-major), for tests and for callers
 * that already hold the mel. */
qtts_status qtts_spk_enc_embed_mel(const qtts_spk_enc *e, const float *mel, size_t T, float *xvec,
                                   qtts_err *err);

#endif
