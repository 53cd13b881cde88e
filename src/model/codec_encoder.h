/*
 * codec_encoder.h - the 12 Hz speech-tokenizer encoder: 24 kHz mono fp32
 * audio [n] -> reference codes [F, Q] (F = ceil(n / 1920), Q =
 * encoder_valid_num_quantizers = 16, values 0..codebook_size-1), the codes
 * the reference's Qwen3TTSTokenizerV2Model.encode returns for one
 * unpadded waveform.
 *
 * Dataflow (full-size dims; channel-major [C, n] unless noted; the stage
 * names are the reference's module names, "encoder." prefix dropped):
 *
 *   wav [n]
 *   encoder (SEANet; causal convs, zero left padding k-s, zero right
 *            padding up to a whole number of strides):
 *     layers.0          conv 1->64 k7                               [64, n]
 *     per stage (r, C) = (4, 64), (5, 128), (6, 256), (8, 512):
 *       residual block  x + conv_k1(ELU(conv_k3(ELU(x))))  C->C/2->C
 *       ELU, conv C->2C, kernel 2r, stride r                        [2C, n/r...]
 *     ELU, layers.14    conv 1024->512 k3                           [512, T]
 *                       T = ceil(n / 960) (25 Hz)
 *   encoder_transformer (time-major [T, 512]): 8 x {LayerNorm, MHA 8x64
 *            RoPE causal (no window), LayerScale; LayerNorm,
 *            fc2(GELU(fc1)) 512->2048->512, LayerScale}             [T, 512]
 *   downsample          conv k4 s2, no bias, replicate padding     [512, F]
 *   quantizer           semantic: r = input_proj_s(e) (512->256);
 *                       acoustic: r = input_proj_a(e); each layer
 *                       code = argmin_j dist(r, cb_j), r -= cb_code,
 *                       cb = embed_sum / max(cluster_usage, 1e-5)
 *   codes [F, Q] = [semantic_0, acoustic_0 .. acoustic_{Q-2}]
 *
 * The SEANet runs over the audio in chunks of chunk_frames * 960 samples,
 * each conv carrying the last (taps-1)*dil input columns of the previous
 * chunk as its left padding; every output column is computed by the same
 * code whatever the chunking, so the result is bit-identical to one pass
 * and the big activations stay O(chunk), not O(n). The transformer and
 * everything after it hold all T frames.
 */
#ifndef QTTS_CODEC_ENCODER_H
#define QTTS_CODEC_ENCODER_H

#include "../base/base.h"
#include "../io/config.h"
#include "../io/safetensors.h"
#include "../kernels/kernels.h"

#define QTTS_CODEC_ENC_MAX_SECONDS 600   /* input length limit */
#define QTTS_CODEC_ENC_CHUNK_FRAMES 16   /* default SEANet chunk, in 25 Hz frames */

typedef struct {
    qtts_conv1d conv1;              /* block.1: C -> C/compress, residual_kernel_size, dilated */
    qtts_conv1d conv2;              /* block.3: C/compress -> C, k1 */
} qtts_enc_resblock;

typedef struct {
    int cin, stride, kernel;        /* C, r, 2r */
    qtts_enc_resblock *res;         /* [num_residual_layers] */
    qtts_conv1d down;               /* strided C -> 2C, phase-packed (encoder_kernels.h) */
} qtts_enc_stage;

typedef struct {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;   /* [hidden] */
    qtts_mat q, k, v, o;                    /* [H*D, hidden] q, [KV*D, hidden] k/v, [hidden, H*D] o */
    qtts_mat fc1, fc2;                      /* [inter, hidden], [hidden, inter] */
    float *attn_scale, *mlp_scale;          /* LayerScale [hidden] */
} qtts_enc_layer;

typedef struct qtts_codec_encoder {
    /* dimensions (from the parsed config, checked against the file) */
    int sample_rate;                /* 24000 */
    int hop;                        /* samples per SEANet frame, 960 */
    int frame_samples;              /* samples per code frame, 1920 */
    int hidden, filters, n_res, compress;
    int kernel, last_kernel, res_kernel, dil_growth;
    int layers, heads, kv_heads, head_dim, inter;
    float norm_eps;
    double rope_theta;
    int cb_size, cb_dim;            /* 2048, 256 */
    int n_sem;                      /* semantic codebooks used (<= num_semantic_quantizers) */
    int n_ac;                       /* acoustic codebooks used */
    int n_out;                      /* codes per frame: n_sem + n_ac = 16 */
    size_t max_samples;             /* QTTS_CODEC_ENC_MAX_SECONDS * sample_rate */

    /* SEANet chunk length in 25 Hz frames (>= 1). Results do not depend on
     * it; tests may change it between calls. */
    int chunk_frames;

    qtts_st_set *st;                /* owns the mapping the qtts_mat views point into */

    qtts_conv1d conv_in;            /* layers.0: 1 -> filters, kernel */
    int n_stages;
    qtts_enc_stage *stages;         /* [n_stages], strides = reversed upsampling_ratios */
    qtts_conv1d conv_out;           /* last: filters << n_stages -> hidden, last_kernel */

    qtts_enc_layer *tl;             /* [layers] */
    qtts_conv1d downsample;         /* phase-packed k4 s2, no bias */

    qtts_mat proj_sem, proj_ac;     /* input_proj [cb_dim, hidden]; data NULL = identity */
    float *codebooks;               /* [n_out, cb_size, cb_dim] normalised, semantic first */
    float *cb_sq;                   /* [n_out, cb_size] squared norms */

    void **owned;                   /* every owned small array, freed at the end */
    int n_owned, cap_owned;
} qtts_codec_encoder;

/* Load the encoder.* tensors of <model_dir>/speech_tokenizer/model.safetensors
 * (or its sharded index) against cfg->codec_enc / cfg->codec. Every tensor
 * the encoder uses is shape-checked; errors name the tensor. decoder.*
 * tensors and the unused acoustic codebooks are ignored. */
qtts_status qtts_codec_encoder_load(const char *model_dir, const qtts_config *cfg,
                                    qtts_codec_encoder **out, qtts_err *err);
void qtts_codec_encoder_free(qtts_codec_encoder *e);   /* NULL ok */

/* Per-stage observer (tests, debugging): called with each stage's output as
 * channel-major [channels, frames] with row stride ld, valid only during
 * the call. Stages: "encoder" (SEANet, [hidden, T]), "encoder_transformer"
 * ([hidden, T]), "downsample" ([hidden, F]). */
typedef void (*qtts_codec_enc_hook_fn)(void *user, const char *stage, const float *x,
                                       int channels, int frames, size_t ld);
typedef struct {
    qtts_codec_enc_hook_fn fn;
    void *user;
} qtts_codec_enc_hook;

/* Encode wav24k[n] (mono, at cfg sampling_rate, no normalisation: the
 * samples the reference feeds its model). On success *codes_out is a
 * qtts_malloc'd [*frames_out, n_out] row-major array (caller qtts_free's
 * it) and *frames_out = ceil(n / frame_samples). Errors: n == 0 or a
 * non-finite sample -> QTTS_ERR_INVALID; n > max_samples -> QTTS_ERR_LIMIT;
 * allocation failure -> QTTS_ERR_NOMEM. Outputs are untouched on error.
 * hook may be NULL. */
qtts_status qtts_codec_encode_hooked(const qtts_codec_encoder *enc, const float *wav24k, size_t n,
                                     int32_t **codes_out, int *frames_out,
                                     const qtts_codec_enc_hook *hook, qtts_err *err);

static inline qtts_status qtts_codec_encode(const qtts_codec_encoder *enc, const float *wav24k,
                                            size_t n, int32_t **codes_out, int *frames_out,
                                            qtts_err *err) {
    return qtts_codec_encode_hooked(enc, wav24k, n, codes_out, frames_out, NULL, err);
}

#endif
