/*
 * codec_decoder.h - the 12 Hz speech-tokenizer decoder: audio codes
 * [T, Q] (Q = num_quantizers = 16, values 0..codebook_size-1) -> 24 kHz
 * mono waveform [T * U] (U = decode_upsample_rate = 1920), fp32.
 *
 * Dataflow of one window (full-size dims; channel-major [C, n] unless
 * noted; every stage name is the reference's module name and the stage
 * hook sees exactly that module's output):
 *
 *   codes [T, 16]
 *   quantizer       cb_q = embedding_sum_q / max(cluster_usage_q, 1e-5) (at load)
 *                   s1 = cb_0[c0], s2 = cb_1[c1] + ... + cb_15[c15]        [T, 256]
 *                   z = proj_first·s1 + proj_rest·s2                       [512, T]
 *                   (split 1 + 15 as the reference hardcodes it, whatever
 *                   num_semantic_quantizers says)
 *   pre_conv        causal conv k3                                         [1024, T]
 *   pre_transformer (time-major [T, .]) input_proj 1024->512, 8 x {RMSNorm,
 *                   MHA 16x64 RoPE, sliding window 72, LayerScale; RMSNorm,
 *                   SwiGLU 512->1024->512, LayerScale}, RMSNorm,
 *                   output_proj 512->1024                                  [1024, T]
 *   upsample.i.0    i = 0,1: ConvTranspose k2 s2                            [1024, 2^(i+1) T]
 *   upsample.i      ConvNeXt: dwconv k7, LayerNorm, 1024->4096, GELU,
 *                   4096->1024, gamma, + input                             [1024, 2^(i+1) T]
 *   decoder.0       causal conv k7                                         [1536, 4T]
 *   decoder.1..4    SnakeBeta, ConvTranspose k2r s r (trimmed to n*r), 3
 *                   residual units (dilation 1,3,9; their k7 convs run in
 *                   Winograd form, F(4,7) or F(2,7), kernels.h), r = 8,5,4,3;
 *                   channels 1536 -> 768 -> 384 -> 192 -> 96               [96, 1920T]
 *   decoder.5       SnakeBeta                                              [96, 1920T]
 *   decoder.6       causal conv k7 96->1                                   [1, 1920T]
 *   clamp(-1, 1)    -> wav [1920T]
 *
 * qtts_codec_decode runs the reference's chunked decode: windows of 300
 * frames, each decoded from scratch with up to 25 frames of left context
 * whose samples are dropped (positions and conv padding restart per window).
 * qtts_codec_stream gives the same samples push by push.
 */
#ifndef QTTS_CODEC_DECODER_H
#define QTTS_CODEC_DECODER_H

#include "../base/base.h"
#include "../io/config.h"
#include "../io/safetensors.h"
#include "../kernels/kernels.h"

#define QTTS_CODEC_CHUNK 300        /* frames per chunked-decode window */
#define QTTS_CODEC_LEFT_CONTEXT 25  /* frames of left context per window */
#define QTTS_CODEC_MAX_UPS 2        /* upsampling_ratios entries */
#define QTTS_CODEC_MAX_BLOCKS 4     /* upsample_rates entries */

typedef struct {
    qtts_mat q, k, v, o;            /* [H*D, hidden] x3, [hidden, H*D] */
    qtts_mat gate, up, down;        /* [inter, hidden] x2, [hidden, inter] */
    float *in_norm, *post_norm;     /* [hidden] */
    float *attn_scale, *mlp_scale;  /* [hidden] LayerScale */
} qtts_codec_layer;

typedef struct {
    int stride;
    qtts_conv1d tconv;              /* polyphase [stride*latent, latent], 1 tap */
    float *dw_w, *dw_b;             /* [latent, 7], [latent] */
    float *ln_w, *ln_b;             /* [latent] */
    qtts_conv1d pw1, pw2;           /* 1x1: [4*latent, latent], [latent, 4*latent] */
    float *gamma;                   /* [latent] */
} qtts_codec_upsample;

typedef struct {
    int dil;
    float *ea1, *ib1, *ea2, *ib2;   /* SnakeBeta act1/act2 [C] */
    qtts_conv1d conv1, conv2;       /* [C, C, 7] dilated, [C, C, 1] */
    /* conv1 in Winograd form (kernels.h), grouping within each frame's
     * columns; empty (frame 0) for the bf16 codec */
    qtts_conv_wino wino1;
    /* columns of history before conv1's input: 6 dil, or the Winograd
     * form's left where larger (kept after a bf16 conversion frees it, so
     * that the state's layout never changes) */
    int pad;
} qtts_codec_resunit;

typedef struct {
    int cin, cout, stride;
    float *ea, *ib;                 /* SnakeBeta [cin] */
    qtts_conv1d tconv;              /* polyphase [stride*cout, cin], 2 taps */
    /* tconv as Winograd F(4,2) (kernels.h) where its frame holds 16 input
     * columns or more and its input 384 channels or more (blocks 2 and 3
     * at full size); else, and for the bf16 codec, empty (frame 0) */
    qtts_conv_wino tconv_w;
    qtts_codec_resunit res[3];
} qtts_codec_block;

typedef struct qtts_codec_decoder {
    /* dimensions (from the parsed config, checked against the file) */
    int n_q, cb_size, cb_vec;       /* 16, 2048, codebook_dim/2 = 256 */
    int rvq_dim, latent, dec_dim;   /* codebook_dim 512, 1024, 1536 */
    int hidden, inter, heads, kv_heads, head_dim, layers, window;
    float rms_eps;
    double rope_theta;
    int n_ups, ups[QTTS_CODEC_MAX_UPS];
    int n_blocks, rates[QTTS_CODEC_MAX_BLOCKS];
    int upsample;                   /* samples per frame, 1920 */
    int reach;                      /* frames back from the last whose transformer output
                                       the convolutions' state depends on (11 with the
                                       Winograd convs) */

    qtts_st_set *st;                /* owns the mapping the qtts_mat views point into */

    float *codebooks;               /* [n_q, cb_size, cb_vec] normalised */
    qtts_mat proj_first, proj_rest; /* [rvq_dim, cb_vec] */
    qtts_conv1d pre_conv;           /* [latent, rvq_dim, 3] */

    qtts_mat in_proj, out_proj;     /* [hidden, latent], [latent, hidden] */
    float *in_proj_b, *out_proj_b;  /* [hidden], [latent] */
    qtts_codec_layer *tl;           /* [layers] */
    float *final_norm;              /* [hidden] */

    qtts_codec_upsample upx[QTTS_CODEC_MAX_UPS];
    qtts_conv1d dec0;               /* [dec_dim, latent, 7] */
    qtts_codec_block blocks[QTTS_CODEC_MAX_BLOCKS];
    float *out_ea, *out_ib;         /* decoder.5 SnakeBeta [dec_dim >> n_blocks] */
    qtts_conv1d dec_out;            /* decoder.6 [1, dec_dim >> n_blocks, 7] */

    void **owned;                   /* every owned small array, freed at the end */
    int n_owned, cap_owned;
} qtts_codec_decoder;

/* Load <model_dir>/speech_tokenizer/model.safetensors (or its sharded
 * index) against cfg->codec. Every decoder tensor is shape-checked; errors
 * name the tensor. encoder.* tensors are ignored. */
qtts_status qtts_codec_decoder_load(const char *model_dir, const qtts_config *cfg,
                                    qtts_codec_decoder **out, qtts_err *err);
void qtts_codec_decoder_free(qtts_codec_decoder *d);   /* NULL ok */

/* Every convolution of the decoder to bf16 (kernels.h, "bf16
 * convolutions": half the weight memory, about 1.5x the decode speed, a
 * lossy approximation of the fp32 decoder; docs/QUANT.md measures it). The
 * transformer and the quantizer stay fp32. QTTS_ERR_UNSUPPORTED when the
 * CPU has no bf16 dot products, NOMEM; either way d still decodes (a
 * failed conversion leaves some convs fp32, all exact as before).
 * QTTS_ERR_INVALID, d unchanged, after qtts_codec_decoder_drop_direct. */
qtts_status qtts_codec_decoder_to_bf16(qtts_codec_decoder *d, qtts_err *err);

/* Frees the direct (packed fp32) weights of every residual k7 conv and
 * transposed conv that has its Winograd form (their bias stays: the
 * Winograd form adds it). The fp32 decoder runs those convs only in that
 * form (whole frames, its scratch reserved ahead), so the copy is dead
 * weight: 66 + 15 MB at full size.
 * For a decoder that stays fp32; qtts_codec_decoder_to_bf16 needs them. */
void qtts_codec_decoder_drop_direct(qtts_codec_decoder *d);

/* Per-stage observer (tests, debugging): called with each stage's output
 * as channel-major [channels, frames] with row stride ld. Stage names:
 * "quantizer", "pre_conv", "pre_transformer", "upsample.<i>.0" (the
 * transposed conv), "upsample.<i>" (after the ConvNeXt block), "decoder.<i>"
 * (decoder.<last> is the final conv's output before the clamp). The data
 * is only valid during the call. */
typedef void (*qtts_codec_hook_fn)(void *user, const char *stage, const float *x, int channels,
                                   int frames, size_t ld);
typedef struct {
    qtts_codec_hook_fn fn;
    void *user;
} qtts_codec_hook;

/* Multiply-adds of the decoder's blocked convolutions per frame, as they
 * run (a conv with its Winograd form counted at its products: 12 per 6
 * columns for F(6,7), 10 per 4 for F(4,7), 8 per 2 for F(2,7), 5 per 4
 * for F(4,2)); the quantizer, the transformer, the depthwise convs, the
 * transforms and the element-wise work left out. For benchmarks' FLOP
 * rates and floors. */
double qtts_codec_decoder_conv_macs(const qtts_codec_decoder *d);

/* Samples per frame (1920). */
static inline int qtts_codec_samples_per_frame(const qtts_codec_decoder *d) { return d->upsample; }

/* One fresh full-decoder run over codes[T, n_q] (row-major): positions
 * start at 0 and convolutions see zeros before frame 0. wav_out receives
 * T * upsample samples, clamped to [-1, 1]. hook may be NULL. T = 0 is a
 * no-op. Codes outside [0, codebook_size) are QTTS_ERR_INVALID. With a
 * hook the T frames go through at once (each stage seen whole); without
 * one, in runs of QTTS_CODEC_STREAM_FRAMES (the same samples, bit for bit,
 * with scratch for one run: see streaming below). */
qtts_status qtts_codec_decode_window(const qtts_codec_decoder *d, const int32_t *codes, int T,
                                     float *wav_out, const qtts_codec_hook *hook, qtts_err *err);

/* The reference's decode: chunked_decode(chunk 300, left context 25) over
 * codes[T, n_q]; wav_out receives T * upsample samples. Runs as a stream
 * (below) over all T frames: the same bits, scratch for at most
 * QTTS_CODEC_STREAM_FRAMES frames. */
qtts_status qtts_codec_decode(const qtts_codec_decoder *d, const int32_t *codes, int T,
                              float *wav_out, qtts_err *err);

/* ---- streaming ------------------------------------------------------------
 * A stream decodes frames as they arrive and returns each push's audio at
 * once: the concatenated output of any sequence of pushes is bit for bit
 * qtts_codec_decode of all the frames (the reference's 300/25 chunked
 * decode), with no look-ahead and no extra latency.
 *
 * How: the decoder is causal, so a window's samples for frame t depend only
 * on the window's frames <= t. The stream keeps the window's causal state
 * (the last (taps-1)*dilation input columns of every conv, the transformer's
 * keys and values for its 72-position sliding window, the position) and
 * carries it from push to push; each column is computed by the same code
 * whatever the push size (kernels.h determinism rules), so pushes of any
 * size give the bits of one run. For the window restart every 300 frames,
 * the 25 frames before it also go through a fresh second state (its output
 * dropped), which then continues as the new window: the reference's left
 * context, at the same 25/300 extra cost.
 *
 * Cost: a push reads every decoder weight once (~0.45 GB in fp32 at full
 * size), so pushes of a few frames or more amortise that; compute per frame
 * is the same as a one-shot decode. A push longer than max_frames is run in
 * pieces (same bits). */
#define QTTS_CODEC_STREAM_FRAMES 24  /* default frames per run */

typedef struct qtts_codec_stream qtts_codec_stream;

/* A stream over decoder d (which must outlive it), with scratch for runs
 * of max_frames frames (0: QTTS_CODEC_STREAM_FRAMES); scratch is ~2.3 MB
 * per frame at full size. */
qtts_status qtts_codec_stream_new(const qtts_codec_decoder *d, int max_frames,
                                  qtts_codec_stream **out, qtts_err *err);

/* Decode the next n frames codes[n, n_q]; wav_out receives their n *
 * upsample samples. n = 0 is a no-op. Bad codes are QTTS_ERR_INVALID and
 * leave the stream as it was; any other error leaves it undefined until
 * qtts_codec_stream_reset. */
qtts_status qtts_codec_stream_push(qtts_codec_stream *s, const int32_t *codes, int n,
                                   float *wav_out, qtts_err *err);

/* Advances over the next n frames whose audio is not wanted (a reference
 * clip before the frames to hear): afterwards the stream is in the state
 * qtts_codec_stream_push of the same codes leaves, bit for bit. Faster:
 * the convolutions, nearly all of the work, run only on the last
 * d->reach frames of a run of frames that stays clear of a window's
 * left-context frames; the quantizer and the transformer on all of them
 * (the convolutions' state after frame t depends only on the transformer's
 * outputs at frames t - reach + 1 .. t, and every op computes a column
 * the same way whatever surrounds it). Errors as for push. */
qtts_status qtts_codec_stream_skip(qtts_codec_stream *s, const int32_t *codes, int n,
                                   qtts_err *err);

/* Back to frame 0 (a new utterance), keeping the scratch. */
void qtts_codec_stream_reset(qtts_codec_stream *s);
/* dst takes src's position and causal state, so that it decodes the next
 * frames exactly as src would (the same bits): a snapshot of a stream
 * after a prefix of codes, to resume from later. Both must be streams of
 * the same decoder; their frames per run may differ. QTTS_ERR_INVALID
 * otherwise, dst unchanged. */
qtts_status qtts_codec_stream_copy(qtts_codec_stream *dst, const qtts_codec_stream *src,
                                   qtts_err *err);
int64_t qtts_codec_stream_frames(const qtts_codec_stream *s);   /* frames pushed */
void qtts_codec_stream_free(qtts_codec_stream *s);               /* NULL ok */

#endif
