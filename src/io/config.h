/*
 * config.h - the model directory's JSON files turned into validated structs.
 *
 * Reads <dir>/config.json, <dir>/generation_config.json and
 * <dir>/speech_tokenizer/config.json exactly as published on Hugging Face.
 * Every value the engine uses must be present in the file (the Python class
 * defaults differ from the shipped values, so a missing key is an error,
 * never a silent default) and is range-checked here, once: sizes in
 * [1, 1<<20], head_dim*heads consistent, ids inside their vocabularies,
 * kv heads dividing heads, etc. Unknown keys are ignored (real files carry
 * dozens of legacy generation fields). Across files, the codec's
 * num_quantizers must equal num_code_groups and its codebook_size the code
 * predictor's vocab_size. Language and speaker names must be unique
 * ignoring ASCII case. Errors read "<path>: <key path>: <rule>", e.g.
 * "<dir>/config.json: talker_config.head_dim: missing".
 */
#ifndef QTTS_CONFIG_H
#define QTTS_CONFIG_H

#include "../base/base.h"

#define QTTS_MAX_LANGS 32
#define QTTS_MAX_SPEAKERS 64
#define QTTS_NAME_MAX 64
/* Codebooks per frame (num_code_groups) of every 12 Hz model: frames are
 * stored, passed and decoded as 16 codes each (qwen3_tts.h's
 * QTTS_NUM_CODEBOOKS), so a config with another count is refused. */
#define QTTS_CODE_GROUPS 16

typedef enum { QTTS_MODEL_CUSTOM_VOICE, QTTS_MODEL_VOICE_DESIGN, QTTS_MODEL_BASE } qtts_model_type;

/* A decoder-only transformer stack (talker or code predictor). */
typedef struct {
    int hidden;         /* hidden_size */
    int inter;          /* intermediate_size */
    int layers;         /* num_hidden_layers */
    int heads;          /* num_attention_heads */
    int kv_heads;       /* num_key_value_heads */
    int head_dim;       /* head_dim (explicit in the JSON) */
    float rms_eps;      /* rms_norm_eps */
    double rope_theta;  /* rope_theta */
    int vocab;          /* vocab_size */
    int num_code_groups;
} qtts_stack_config;

typedef struct {
    char name[QTTS_NAME_MAX]; /* lower-case key as in the JSON */
    int id;                   /* codec token id */
} qtts_named_id;

typedef struct {
    char name[QTTS_NAME_MAX];
    int id;                              /* spk_id */
    char dialect[QTTS_NAME_MAX];         /* spk_is_dialect value, "" when false */
} qtts_speaker;

/* speech_tokenizer/config.json: encoder_config, the Mimi encoder that
 * turns reference audio into codes (read by read_codec_encoder in
 * config.c). Only the keys the reference's encode path uses are read;
 * all of them are required. Refused as unsupported: audio_channels != 1,
 * use_causal_conv false, pad_mode other than "constant",
 * use_conv_shortcut true, hidden_act other than "gelu", attention_bias
 * true, use_streaming true, a non-null rope_scaling, and a frame rate
 * that is not half the SEANet rate (the downsample conv is k4 s2).
 * sliding_window is not read: the reference's default (sdpa/eager)
 * attention ignores it (spec 14.2). */
#define QTTS_ENC_MAX_RATIOS 8
typedef struct {
    int sampling_rate;                /* sampling_rate, == input_sample_rate */
    double frame_rate;                /* _frame_rate: sampling_rate / (2 * hop) */
    int hidden;                       /* hidden_size: SEANet output, transformer width */
    int num_filters;                  /* channels after the first conv */
    int num_residual_layers;          /* residual blocks per SEANet stage */
    int n_ratios;
    int ratios[QTTS_ENC_MAX_RATIOS];  /* upsampling_ratios, file order (applied reversed) */
    int hop;                          /* product of ratios: samples per SEANet frame */
    int kernel_size, last_kernel_size, residual_kernel_size;
    int dilation_growth_rate, compress;
    int layers, heads, kv_heads, head_dim, inter;
    float norm_eps;
    double rope_theta;
    int codebook_size, codebook_dim;  /* codebook_dim == vector_quantization_hidden_dimension */
    int num_quantizers, num_semantic_quantizers;
} qtts_codec_enc_config;

typedef struct {
    /* top level */
    qtts_model_type model_type;          /* tts_model_type */
    char model_size[16];                 /* tts_model_size: "0b6" | "1b7" */
    int im_start_id, im_end_id, tts_pad_id, tts_bos_id, tts_eos_id;

    /* talker_config */
    qtts_stack_config talker;
    int text_vocab;                      /* text_vocab_size */
    int text_hidden;                     /* text_hidden_size */
    int codec_pad_id, codec_bos_id, codec_eos_id;
    int codec_think_id, codec_nothink_id, codec_think_bos_id, codec_think_eos_id;
    int n_langs;
    qtts_named_id langs[QTTS_MAX_LANGS];        /* codec_language_id, file order */
    int n_speakers;
    qtts_speaker speakers[QTTS_MAX_SPEAKERS];   /* spk_id + spk_is_dialect */

    /* talker_config.code_predictor_config */
    qtts_stack_config cp;

    /* speaker_encoder_config (Base only; has_speaker_encoder false otherwise).
     * The object must be present; missing fields in it take the reference's
     * class defaults, which is how the shipped files are meant to be read
     * (they carry only enc_dim and sample_rate). enc_dim must equal
     * talker.hidden. */
    bool has_speaker_encoder;
    int spk_enc_dim, spk_sample_rate, spk_mel_dim;
    int spk_channels[5], spk_kernels[5], spk_dilations[5];
    int spk_attn_channels, spk_res2net_scale, spk_se_channels;

    /* generation_config.json */
    struct {
        bool do_sample;
        int top_k;
        float top_p, temperature, repetition_penalty;
        bool subtalker_do_sample;
        int subtalker_top_k;
        float subtalker_top_p, subtalker_temperature;
        int max_new_tokens;
    } gen;

    /* speech_tokenizer/config.json: decoder_config (+ top-level rates) */
    struct {
        int codebook_size, codebook_dim, latent_dim, decoder_dim;
        int hidden, inter, head_dim, heads, kv_heads, layers;
        int num_quantizers, num_semantic_quantizers;
        float rms_eps, layer_scale_init;
        double rope_theta;
        int sliding_window;
        int upsample_rates[4];     /* decoder blocks, e.g. 8,5,4,3 */
        int upsampling_ratios[2];  /* pre-decoder transposed convs, e.g. 2,2 */
        int decode_upsample_rate;  /* 1920 */
        int output_sample_rate;    /* 24000 */
        int input_sample_rate;
        int encode_downsample_rate;
        int encoder_valid_num_quantizers;
    } codec;

    qtts_codec_enc_config codec_enc;  /* speech_tokenizer/config.json: encoder_config */
} qtts_config;

/* Load and validate all three files under dir. */
qtts_status qtts_config_load(const char *dir, qtts_config *cfg, qtts_err *err);

/* Case-insensitive lookups; NULL when absent. */
const qtts_named_id *qtts_config_find_lang(const qtts_config *cfg, const char *name);
const qtts_speaker *qtts_config_find_speaker(const qtts_config *cfg, const char *name);

#endif
