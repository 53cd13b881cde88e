/*
 * voice.h - voice profiles (engine-internal side of the qtts_voice API).
 *
 * A profile is what voice cloning extracts from a reference recording:
 *   xvector   [E] f32      speaker embedding from the ECAPA speaker encoder
 *   ref_codes [F, 16] i32  reference codes from the codec encoder (in-context only)
 *   ref_text              transcript of the reference (in-context only)
 *   language              the language the profile was made for (NULL = auto)
 *   model identity        tts_model_type/size, hidden size, codebook size
 *
 * File format (version 1): a safetensors file, so it is read by the same
 * hardened loader as model weights. Tensors "xvector" (F32 [E]) and, for
 * in-context profiles, "ref_codes" (I32 [F, 16]); "__metadata__" holds
 *   format "qwen3-tts-voice", version "1", mode "icl" | "xvector",
 *   model_type, model_size, hidden, codebook_size, num_code_groups,
 *   language (may be ""), ref_text (may be ""), checksum "crc32:xxxxxxxx".
 * The checksum covers every other metadata value (in the order above) and
 * the tensor bytes, so a profile edited or corrupted by hand is refused.
 */
#ifndef QTTS_VOICE_H
#define QTTS_VOICE_H

#include "../base/base.h"
#include "../io/config.h"
#include "../model/codec_encoder.h"
#include "../model/speaker_encoder.h"

#define QTTS_VOICE_FORMAT "qwen3-tts-voice"
#define QTTS_VOICE_VERSION 1

struct qtts_voice {
    int dim;                /* E */
    float *xvector;         /* [E] */
    int ref_frames;         /* F (0 = x-vector only) */
    int32_t *ref_codes;     /* [F, 16] or NULL */
    char *ref_text;         /* NULL for x-vector only */
    char *language;         /* NULL = auto */
    char model_type[16];
    char model_size[16];
    int codebook_size;
    int num_code_groups;
};

/* Clone from audio bytes (any format qtts_audio_load takes). in-context
 * when ref_text is non-empty and !x_vector_only. */
qtts_status qtts_voice_build(const qtts_config *cfg, const qtts_spk_enc *spk,
                             const qtts_codec_encoder *enc, const void *audio, size_t len,
                             const char *ref_text, bool x_vector_only, const char *language,
                             qtts_voice **out, qtts_err *err);

/* Read a profile file and check it against cfg (model type, hidden size,
 * codebook size and groups). */
qtts_status qtts_voice_read(const qtts_config *cfg, const char *path, qtts_voice **out,
                            qtts_err *err);
/* The same from a descriptor it takes (closed before it returns, whatever
 * the result); path names the file in messages. */
qtts_status qtts_voice_read_fd(const qtts_config *cfg, int fd, const char *path, qtts_voice **out,
                               qtts_err *err);

#endif
