/*
 * qwen3_tts.h - public C API of the qwen3-tts engine.
 *
 *     qtts_engine *eng; qtts_error err;
 *     if (qtts_engine_open("Qwen3-TTS-12Hz-0.6B-CustomVoice", NULL, &eng, &err)) {
 *         fprintf(stderr, "%s\n", err.msg); return 1;
 *     }
 *     qtts_session *s = qtts_session_new(eng, &err);
 *     qtts_request req;
 *     qtts_request_init(&req);
 *     req.text = "Hello there.";
 *     req.speaker = "vivian";
 *     req.on_audio = my_pcm_sink;      // float samples at 24 kHz, mono
 *     req.user = my_state;
 *     if (qtts_synthesize(s, &req, NULL, &err)) fprintf(stderr, "%s\n", err.msg);
 *     qtts_session_free(s);
 *     qtts_engine_close(eng);
 *
 * Thread safety: an engine is immutable after qtts_engine_open and may be
 * shared by any number of threads; a session (KV caches, RNG, scratch) is
 * used by one thread at a time. Library functions never print or exit;
 * every failure returns a non-zero qtts_status and fills a qtts_error with
 * one line naming the problem.
 */
#ifndef QWEN3_TTS_H
#define QWEN3_TTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    QTTS_OK = 0,
    QTTS_ERR_IO,          /* file missing/unreadable, mmap failed */
    QTTS_ERR_FORMAT,      /* malformed file or config (hostile or corrupt input) */
    QTTS_ERR_INVALID,     /* bad argument from the caller/user */
    QTTS_ERR_NOMEM,       /* allocation failed or over budget */
    QTTS_ERR_UNSUPPORTED, /* valid but not implemented here */
    QTTS_ERR_LIMIT,       /* a configured limit was reached */
    QTTS_ERR_NUMERIC,     /* NaN/Inf in activations or output */
    QTTS_ERR_CANCELLED,   /* a callback asked to stop */
} qtts_status;

#define QTTS_ERR_MAX 512
typedef struct {
    qtts_status status;
    char msg[QTTS_ERR_MAX];
} qtts_error;

#define QTTS_SAMPLE_RATE 24000
#define QTTS_NUM_CODEBOOKS 16

typedef struct qtts_engine qtts_engine;
typedef struct qtts_session qtts_session;
typedef struct qtts_voice qtts_voice;

/* The longest reference transcript (bytes of UTF-8) voice cloning takes. */
#define QTTS_MAX_REF_TEXT_BYTES (16u * 1024u)

typedef struct {
    const char *backend;   /* "cpu" (default) */
    int n_threads;         /* 0 = all cores */
    /* Weight format of the linear layers of the talker and of the code
     * predictor (docs/QUANT.md), each on its own: NULL, "" or "none" keep
     * them as stored (bf16 in a Hugging Face model; a quantized model
     * directory's own formats); "int8" (Q8_0) or "int4" (Q4_0) quantize
     * them at load, or check that a quantized model holds that format.
     * Embeddings, norms and the codec stay at full precision. Outputs then
     * differ from the exact bf16/fp32 path (measured error in QUANT.md). */
    const char *quant_talker;
    const char *quant_cp;
    /* The codec decoder's convolutions: NULL, "" or "fp32" exact (the
     * default); "bf16" rounds their weights and inputs to bf16 and sums in
     * fp32, about 1.8x faster (CPU backend, CPUs with bf16 dot products only,
     * x86 AVX512-BF16 or AArch64 BF16:
     * QTTS_ERR_UNSUPPORTED elsewhere). Lossy: docs/QUANT.md. */
    const char *codec;
    /* The talker's KV cache: "f32" or "bf16" (half the bytes: each decode
     * step reads the whole cache, so a long output runs faster, e.g. the
     * 0.6B int4 talker step at 1000 positions ~0.8x, and each session
     * holds half the memory). NULL or "" choose: bf16 where the talker's
     * weights are int8/int4 (already lossy; the cache adds far less error,
     * docs/QUANT.md), f32 for the exact path. bf16 needs the CPU backend. */
    const char *kv_cache;
    /* Scan every float weight (model.safetensors and
     * speech_tokenizer/model.safetensors) for NaN and infinity at open and
     * refuse the model naming the tensor (QTTS_ERR_FORMAT). Reads all the
     * weights once; off by default, when a bad value shows up instead as a
     * QTTS_ERR_NUMERIC failure of the first request it reaches. */
    bool check_weights;
    /* On the CPU backend with two or more threads the codec decodes beside
     * generation: a stream's pushes after the first (the first is the time
     * to first audio), and the 300-frame windows too, through a stream in
     * pushes of 12 frames (held and delivered a window at a time), run on
     * one of the engine's threads while the others go on generating (the
     * talker waits on memory, the codec on arithmetic: side by side they
     * can finish sooner than one after the other on all threads;
     * docs/PERFORMANCE.md). true decodes between two frames on all threads
     * instead. The samples and the calls that deliver them are the same
     * either way; a call may come a few frames later. Sessions with
     * manual decoding, and an in-context clone's windows (held to the
     * end), never decode beside generation. */
    bool serial_codec;
} qtts_engine_options;

void qtts_engine_options_init(qtts_engine_options *o);

/* Opens a model directory exactly as published on Hugging Face
 * (config.json, generation_config.json, model.safetensors or sharded,
 * vocab.json, merges.txt, tokenizer_config.json, speech_tokenizer/).
 * opts may be NULL. */
qtts_status qtts_engine_open(const char *model_dir, const qtts_engine_options *opts,
                             qtts_engine **out, qtts_error *err);
void qtts_engine_close(qtts_engine *e);     /* NULL ok */

typedef enum { QTTS_KIND_CUSTOM_VOICE, QTTS_KIND_VOICE_DESIGN, QTTS_KIND_BASE } qtts_model_kind;

typedef struct {
    qtts_model_kind kind;
    const char *size;          /* "0b6" | "1b7" */
    int n_speakers;            /* CustomVoice preset speakers */
    int n_languages;           /* codec languages (without "auto") */
    int hidden;                /* talker hidden size */
    bool honours_instruct;     /* false for 0.6B CustomVoice and Base */
    const char *quant_talker;  /* weight format as loaded: "none", "int8" or "int4" */
    const char *quant_cp;
    const char *codec;         /* codec decoder convolutions: "fp32" or "bf16" */
    const char *kv_cache;      /* the talker's KV cache: "f32" or "bf16" */
} qtts_model_info;

void qtts_engine_info(const qtts_engine *e, qtts_model_info *info);
const char *qtts_engine_speaker(const qtts_engine *e, int i);   /* lower-case name */
const char *qtts_engine_language(const qtts_engine *e, int i);  /* lower-case name */

/* A session owns per-request state; reusable for many requests in turn. */
qtts_session *qtts_session_new(const qtts_engine *e, qtts_error *err);
void qtts_session_free(qtts_session *s);    /* NULL ok */

typedef enum {
    QTTS_TEXT_MODE_DEFAULT = 0,   /* the reference's per-mode default: non-streaming
                                     for CustomVoice/VoiceDesign, streaming for clone */
    QTTS_TEXT_MODE_STREAMING,     /* text fed one token per frame */
    QTTS_TEXT_MODE_NON_STREAMING, /* whole text in the prompt */
} qtts_text_mode;

/* Return non-zero from a callback to cancel the request (QTTS_ERR_CANCELLED). */
typedef int (*qtts_audio_cb)(void *user, const float *pcm, size_t n_samples);
typedef int (*qtts_frame_cb)(void *user, int frame_index, const int32_t codes[QTTS_NUM_CODEBOOKS]);

/* Sampling fields: a negative value (or -1 for the booleans) means "take
 * generation_config.json's value", exactly as the reference resolves them. */
typedef struct {
    const char *text;           /* UTF-8, required */
    const char *speaker;        /* CustomVoice: a preset speaker (case-insensitive) */
    const char *language;       /* NULL or "auto", or a codec language (case-insensitive) */
    const char *instruct;       /* 1.7B CustomVoice style, VoiceDesign voice description */
    qtts_text_mode text_mode;

    int do_sample;              /* -1 default, 0 greedy, 1 sample */
    int top_k;
    float top_p, temperature, repetition_penalty;
    int subtalker_do_sample;
    int subtalker_top_k;
    float subtalker_top_p, subtalker_temperature;
    int max_new_tokens;         /* codebook-0 draws including EOS; <0 = config */
    uint64_t seed;

    /* Voice cloning (Base models): either a voice profile, or a reference
     * recording (WAV, FLAC, MP3 or Ogg bytes, 1-30 s) with, for in-context
     * cloning, its transcript. Without ref_text (or with x_vector_only) only
     * the speaker embedding is used; ref_text is at most
     * QTTS_MAX_REF_TEXT_BYTES. */
    const qtts_voice *voice;
    const void *ref_audio;
    size_t ref_audio_len;
    const char *ref_text;
    bool x_vector_only;

    qtts_audio_cb on_audio;     /* decoded PCM as it becomes final */
    qtts_frame_cb on_frame;     /* each generated frame's 16 codes */
    void *user;

    /* Low-latency audio. 0 (default): on_audio per completed 300-frame
     * window of the reference's chunked decode (once it is decoded: a few
     * frames after its last where the codec decodes beside generation,
     * qtts_engine_options.serial_codec), the rest at finish. N > 0:
     * the codec decodes frames as they are generated: the first on_audio
     * after stream_first_frames frames (0: 1), then after twice as
     * many frames as the last one carried, up to N per call (a player that
     * starts at the first audio keeps ahead as long as synthesis is faster
     * than real time), the rest at finish. The samples are the same, bit for bit
     * (the decoder is causal and carries its state from push to push,
     * model/codec_decoder.h); each push reads the decoder's weights once,
     * so a small N costs throughput (12 is a good steady-state size).
     * In-context cloning streams too: the decoder is first brought to its
     * state after the reference frames (model/codec_decoder.h,
     * qtts_codec_stream_skip: their samples are not computed; a session
     * keeps that state for the next request with the same reference), and
     * exactly their samples are cut. The reference's one-shot cut,
     * int(ref / total * samples) in double, is that or, for about 4% of
     * lengths, one sample fewer, known only from the final length: such a
     * streamed clone lacks the one-shot result's first sample, and every
     * other sample is the same. Backends without a streaming decoder
     * deliver windows. At most 300 each. */
    int stream_chunk_frames;
    int stream_first_frames;

    /* Tempo: 0 or 1 leaves the audio as generated; otherwise the speech is
     * made speed times faster at the same pitch (0.25-4, OpenAI's `speed`),
     * as it is delivered (streaming included; the samples do not depend on
     * how they were split into calls). Generation is unchanged: same codes,
     * same frames. The changed audio has 16-bit resolution. */
    float speed;
} qtts_request;

void qtts_request_init(qtts_request *r);

typedef struct {
    int n_frames;               /* generated frames (the EOS frame excluded) */
    bool hit_eos;               /* false when max_new_tokens ended it */
    size_t n_samples;           /* PCM samples delivered (after any speed change) */
    double seconds_total;
    char warning[256];          /* non-empty when an input was ignored, e.g. instruct
                                   on a model that does not take one (as the reference) */
    int prompt_rows;            /* talker positions of the prompt */
    int prompt_rows_reused;     /* of them, taken from the session's previous request
                                   instead of computed (qtts_session_set_prompt_reuse) */
    int ref_frames_decoded;     /* a streamed in-context clone: reference frames run
                                   through the codec decoder (0 when the session resumed
                                   from its state after the same reference) */
} qtts_result;

/* Synthesizes req on the idle session s, start to finish (see the
 * incremental API below). result may be NULL. */
qtts_status qtts_synthesize(qtts_session *s, const qtts_request *req, qtts_result *result,
                            qtts_error *err);

/* ---- voice profiles: clone once, reuse many times ----------------------------
 *
 * A profile holds what cloning extracts from a reference recording: the
 * speaker embedding (x-vector), and for in-context cloning the reference
 * codes and transcript, plus the language and the model it was made with.
 * Files are versioned and checksummed; loading one made by an incompatible
 * model (another hidden size or codec) is refused with a clear error.
 * A profile is immutable and may be shared by sessions and threads.
 */
qtts_status qtts_voice_create(const qtts_engine *e, const void *audio, size_t audio_len,
                              const char *ref_text, bool x_vector_only, const char *language,
                              qtts_voice **out, qtts_error *err);
qtts_status qtts_voice_save(const qtts_voice *v, const char *path, qtts_error *err);
qtts_status qtts_voice_load(const qtts_engine *e, const char *path, qtts_voice **out,
                            qtts_error *err);
/* The same from a descriptor the caller opened and still owns (the call
 * reads a duplicate of it), for callers that must not follow a path twice:
 * open once (e.g. openat with O_NOFOLLOW), check, load that file. name
 * names it in messages. */
qtts_status qtts_voice_load_fd(const qtts_engine *e, int fd, const char *name, qtts_voice **out,
                               qtts_error *err);
void qtts_voice_free(qtts_voice *v);        /* NULL ok */

typedef struct {
    int version;                /* file format version */
    bool in_context;            /* has reference codes + transcript */
    int ref_frames;             /* reference codes frames (0 for x-vector only) */
    int xvector_dim;
    const char *ref_text;       /* NULL for x-vector only */
    const char *language;       /* may be NULL ("auto") */
    const char *model_type;     /* "base" */
    const char *model_size;     /* "0b6" | "1b7" */
} qtts_voice_info;

/* Describes a profile; the strings live as long as the profile. */
void qtts_voice_get_info(const qtts_voice *v, qtts_voice_info *info);
/* A 64-bit digest of what the profile holds (embedding, reference codes and
 * transcript, language): two clones of the same recording and transcript
 * have the same one. For cache keys, not against tampering (the file's
 * checksum is that). */
uint64_t qtts_voice_digest(const qtts_voice *v);

/* For the calling thread only: run the engine's parallel work on this
 * thread alone (serial = true) or on the shared thread pool (false, the
 * default). Meant for a thread that runs qtts_voice_create (the speaker
 * and codec encoders) while another thread synthesizes, as a server's
 * connection threads do beside its batch worker: the pool runs one
 * caller's job at a time, so without this the synthesizing thread would
 * compute its share single-threaded whenever the other one held the pool.
 * Results are the same bits either way. */
void qtts_thread_set_serial(bool serial);

/* ---- incremental and batched synthesis (what a server's scheduler uses) ----
 *
 * qtts_synthesize is qtts_session_start + qtts_step_batch on that one
 * session until it is inactive + qtts_session_finish. A scheduler instead
 * keeps up to B started sessions and calls qtts_step_batch on all of them
 * once per frame: each weight is read once for the whole batch, and every
 * session's codes and audio are bit-identical to running it alone (with
 * qtts_synthesize). Sessions may join (start) and leave (finish/cancel)
 * between any two steps. Callbacks of the request fire from inside these
 * calls, on the calling thread: on_frame for each frame, on_audio for each
 * completed 300-frame window or streaming push (from qtts_session_decode
 * instead with manual decoding, below) and, from finish, for the rest. A callback
 * returning non-zero fails only its own session (QTTS_ERR_CANCELLED). The
 * request (and the strings it points to) must stay valid until the session
 * is finished or cancelled. The sessions of one call are used by the
 * calling thread only for its duration.
 *
 * A session is idle, running (qtts_session_active), done (last frame
 * produced) or failed; finish or cancel returns a done or failed session
 * to idle.
 */

/* Validates the request, tokenizes, builds the prompt and runs the prefill
 * (and the first codebook-0 draw). On failure the session is idle again;
 * QTTS_ERR_INVALID if it was not idle. */
qtts_status qtts_session_start(qtts_session *s, const qtts_request *req, qtts_error *err);

/* True from a successful start until the session produced its last frame
 * (EOS or the frame limit) or failed. NULL is not active. */
bool qtts_session_active(const qtts_session *s);

/* One frame for each of the n sessions (all active, distinct, of the same
 * engine). A session that hits EOS/limit becomes inactive; call
 * qtts_session_finish on it. errs (n entries, may be NULL) receives each
 * session's outcome: status QTTS_OK, or the failure that made it inactive
 * (finish then reports the same). One session's failure does not affect
 * the others. The return value is QTTS_OK unless the whole batch failed:
 * QTTS_ERR_INVALID for a bad list (nothing was done; the message is in
 * every errs entry), or an out-of-memory that failed every session of the
 * batch. */
qtts_status qtts_step_batch(qtts_session **sessions, int n, qtts_error *errs);

/* Decodes and delivers the remaining audio of a done session, fills result
 * and returns the session to idle. On a failed session it returns that
 * failure (result then describes the progress up to it) and returns the
 * session to idle. QTTS_ERR_INVALID, with nothing changed, on an idle or
 * still active session. result may be NULL. */
qtts_status qtts_session_finish(qtts_session *s, qtts_result *result, qtts_error *err);

/* Drops an unfinished request (in any state); the session returns to idle.
 * NULL ok. */
void qtts_session_cancel(qtts_session *s);

/* Decoding on the caller's schedule. A step that completes a streaming
 * push or a 300-frame window decodes it (reading the whole codec decoder,
 * tens of ms per frame on a CPU) before it returns. With manual decoding
 * set on a session (it stays set across requests) qtts_step_batch only
 * generates: that audio is left due, and the caller decodes it with
 * qtts_session_decode when it chooses, in pieces if it likes (a server
 * admits a waiting request first). When the last frame is generated the
 * rest of a stream is due too; qtts_session_finish decodes whatever is
 * left. The samples, and their order, are the same bits either way. The
 * setting applies from the next qtts_session_start (a request in flight
 * keeps the mode it started with). */
void qtts_session_set_manual_decode(qtts_session *s, bool manual);

/* Prompt reuse (on by default): a session keeps the prompt rows of its
 * last request beside their KV cache, and the next request's prefill
 * computes only the rows after those they share (the same speaker,
 * language and instruction share the role and codec-prefix rows, and the
 * instruction's or an in-context reference transcript's rows); likewise
 * a streamed in-context clone resumes the codec decoder from its state
 * after the same reference frames (qtts_request.stream_chunk_frames). The
 * output is the same bits either way; only its time to first audio
 * changes. Off: every prefill computes every row and every clone decodes
 * its reference (benchmarks of the cold case). Backends without it (cuda)
 * always compute every row. */
void qtts_session_set_prompt_reuse(qtts_session *s, bool reuse);

/* Frames whose audio is due on a running or done session (0 otherwise). */
int qtts_session_decode_due(const qtts_session *s);

/* Decodes and delivers (on_audio) up to max_frames (<= 0: all) of the due
 * frames; a 300-frame window (requests without stream_chunk_frames) goes
 * whole. A failure fails the request, as in a step (finish reports it);
 * on an already failed session it returns that failure, on an idle one
 * QTTS_ERR_INVALID. err may be NULL. */
qtts_status qtts_session_decode(qtts_session *s, int max_frames, qtts_error *err);

/* Decode a [n_frames, 16] code matrix to PCM (chunked exactly like the
 * reference); the audio goes to on_audio. */
qtts_status qtts_decode_codes(qtts_session *s, const int32_t *codes, int n_frames,
                              qtts_audio_cb on_audio, void *user, qtts_error *err);

const char *qtts_status_str(qtts_status s);

/* Writes mono PCM at sample_rate as a WAV file (path "-" = stdout):
 * 16-bit PCM (clamped to [-1, 1], NaN as 0) or, with float32, IEEE float. */
qtts_status qtts_write_wav(const char *path, const float *pcm, size_t n_samples,
                           int sample_rate, bool float32, qtts_error *err);

/* ---- offline quantization -------------------------------------------------
 *
 * Writes a quantized copy of a model directory: out_dir/model.safetensors
 * holds the talker's and the code predictor's linear layers as Q8_0/Q4_0
 * (the very blocks load-time quantization makes) and every other tensor
 * unchanged, with "__metadata__" marking it quantized (format version,
 * source, per-component formats); the other files are copied, and
 * speech_tokenizer/ is copied or symlinked. qtts_engine_open then loads
 * it directly, without the bf16 weights or any re-quantization. out_dir
 * must not exist yet or be empty. */
typedef struct {
    const char *talker;        /* "int8" or "int4" (or "none") */
    const char *cp;            /* NULL: as talker */
    bool link_codec;           /* symlink speech_tokenizer/ (absolute) instead of copying it */
    int n_threads;             /* for quantizing: 0 = all cores (sets the process-wide pool,
                                  like qtts_engine_open) */
    void (*progress)(void *user, const char *line);   /* may be NULL */
    void *user;
} qtts_quantize_options;

qtts_status qtts_quantize_model(const char *model_dir, const char *out_dir,
                                const qtts_quantize_options *opts, qtts_error *err);

/* Prints every tensor (name, dtype, shape) of the model directory's weight
 * files and the parsed configuration through line(). */
qtts_status qtts_inspect(const char *model_dir, void (*line)(void *user, const char *text),
                         void *user, qtts_error *err);

#ifdef __cplusplus
}
#endif
#endif
