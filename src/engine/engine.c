/*
 * engine.c - the public API (include/qwen3_tts.h) on top of the stages.
 *
 * The engine is the only code that knows every stage:
 *
 *   text --tokenizer--> template ids --prompt--> prefill rows [L,H] + trailing text rows
 *        --generate (talker + code predictor + sampling)--> frames [F,16]
 *        --codec decoder (300-frame windows, 25 frames of left context)--> PCM 24 kHz
 *
 * The talker, code predictor and codec decoder run on a backend
 * (backend/backend.h; "cpu" today); the host side here and in
 * model/generate.c does tokenization, prompt rows and the sampling rules.
 *
 * qtts_engine holds what is loaded once and never changes (config, mapped
 * weights, tokenizer, the codec decoder); qtts_session holds one request's
 * mutable state (the talker/code-predictor KV caches, the prompt, the
 * generation state of model/generate.h, the frame buffer and decode
 * scratch) and is reused across requests.
 *
 * A request is incremental: qtts_session_start (validation, prompt,
 * prefill, first draw), then one frame per qtts_step_batch (the sessions of
 * a batch share each weight read: qtts_gen_step_batch over the backend's
 * batched stages), then qtts_session_finish. qtts_synthesize is that loop
 * on one session.
 *
 * Audio is delivered while generation runs: as soon as a 300-frame window of
 * the reference's chunked decode is complete it is decoded (per session)
 * and handed to on_audio, and the rest follows at finish, so the
 * concatenated output is exactly the reference's whole-utterance decode.
 * A request with a speed other than 1 passes that audio through its own
 * tempo change (io/stretch.h) on the way out (deliver()).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/thread.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/stretch.h"
#include "io/wav.h"
#include "backend/backend.h"
#include "model/codec_decoder.h"
#include "model/generate.h"
#include "model/prompt.h"
#include "model/talker.h"
#include "model/tokenizer.h"
#include "engine_internal.h"
#include "voice.h"

/* The config reader refuses any other codebook count, so every frame the
 * engine stores and hands out holds exactly the public API's 16 codes. */
_Static_assert(QTTS_CODE_GROUPS == QTTS_NUM_CODEBOOKS, "codes per frame");

/* Text longer than this is refused before tokenization (about 30 minutes of
 * speech); callers with tighter budgets (the server) check their own. */
#define QTTS_MAX_TEXT_BYTES (64u * 1024u)
#define QTTS_MAX_INSTRUCT_BYTES (16u * 1024u)

struct qtts_engine {
    char *dir;
    qtts_config cfg;
    qtts_st_set *weights;          /* model.safetensors (mapped) */
    qtts_tokenizer *tok;
    qtts_talker_weights *talker;
    qtts_codec_decoder *codec;
    qtts_spk_enc *spk;             /* Base models: speaker encoder (x-vector) */
    qtts_codec_encoder *cenc;      /* Base models: codec encoder (reference codes) */
    qtts_backend *backend;         /* runs the decode-time stages */
    bool codec_bf16;               /* the codec's convs run in bf16 (options.codec) */
    bool serial_codec;             /* options.serial_codec */
    int n_threads;
    qtts_engine_stats *stats;      /* bench only (engine_internal.h); NULL normally */
};

/* A session's request: idle -> (start) running -> done | failed -> (finish
 * or cancel) idle. */
typedef enum { SES_IDLE, SES_RUNNING, SES_DONE, SES_FAILED } ses_state;

struct qtts_session {
    const qtts_engine *eng;
    qtts_seq *seq;                 /* the backend's per-sequence state (KV caches) */
    int32_t *frames;               /* [cap_frames, 16] codes generated so far */
    int cap_frames;
    float *wav;                    /* decode scratch, one window */
    size_t cap_wav;
    qtts_codec_stream *cs;         /* streaming decode (stream_chunk_frames), kept across */
    int cs_max;                    /*   requests; its frames per run */
    /* A streamed in-context clone decodes its reference frames first (their
     * samples are cut). The stream's state after them is kept here with
     * their codes, so that the next streamed request with the same
     * reference (a saved voice, or the same audio sent again) resumes from
     * it instead of decoding them again. */
    qtts_codec_stream *ref_cs;
    int32_t *ref_key;              /* [ref_key_frames, 16] */
    int ref_key_frames;
    /* A push decoding on a worker lent by the pool (stream_run) while this
     * thread generates: its codes (a copy, as frames[] may move), its
     * frame count, outcome and time. The frames count as decoded from the
     * launch; their samples (in wav) are delivered by push_collect. */
    bool push_out;
    int push_n, push_cap;
    int32_t *push_codes;
    qtts_status push_st;
    qtts_err push_err;
    double push_s;

    /* the request in flight, from qtts_session_start to finish/cancel */
    ses_state state;
    const qtts_request *req;       /* the caller's, borrowed */
    qtts_voice *own_voice;         /* cloned from req->ref_audio for this request */
    int ref_frames;                /* in-context cloning: reference frames before frames[0..] */
    size_t skip_samples;           /* in-context cloning: samples still to cut from the front */
    bool hold_audio;               /* decode only at finish (see qtts_session_start) */
    bool overlap;                  /* pushes go to a lent worker: a stream's after the */
                                   /*   first, all of bg's (stream_run) */
    /* Window delivery decoded through the stream beside generation
     * (qtts_session_start): pushes of BG_PUSH frames, their samples kept
     * in win until a whole window (or the request) is done. */
    bool bg;
    float *win;
    size_t win_n, win_cap;         /* samples held, capacity */
    int stream_n, stream_first;    /* streaming: largest push, frames before the first */
    int stream_next;               /*   frames the next push waits for */
    qtts_stretch *stretch;         /* the request's speed change (NULL at speed 1) */
    qtts_prompt prompt;
    qtts_gen gen;                  /* generation state; its on_frame is on_gen_frame */
    int n_frames;                  /* frames stored in frames[] (reference frames included) */
    int decoded;                   /* frames already decoded and delivered */
    bool manual_decode;            /* the request in flight: the caller decodes */
    bool manual_setting;           /*   (qtts_session_decode); taken at each start */
    bool no_prompt_reuse;          /* qtts_session_set_prompt_reuse(false) */
    int prompt_rows, prompt_reused; /* this request's prompt (qtts_result) */
    int ref_decoded;               /* reference frames this request decoded (qtts_result) */
    int due;                       /* manual: frames from `decoded` whose audio is due */
    size_t n_samples;
    double t0;
    char warning[256];             /* for qtts_result.warning */
    qtts_status cb_status;         /* a failure inside on_gen_frame (memory, decode, */
    qtts_err cb_err;               /*   a callback asking to stop) */
    qtts_err err;                  /* SES_FAILED: what ended the request */
};

/* The codec decoder keeps owned, packed copies of its convolutions and
 * views into its mapping for the rest (the matrices of qtts_codec_decoder).
 * The mapped pages read only to make the copies would otherwise stay
 * resident for the engine's lifetime: drop every tensor's pages but the
 * viewed ones. (Always safe: a page dropped from this private read-only
 * mapping is read back from the file if anything touches it again.) */
static void release_codec_pages(const qtts_codec_decoder *d) {
    const void *views[8 * 64 + 4];
    int nv = 0;
    views[nv++] = d->proj_first.data;
    views[nv++] = d->proj_rest.data;
    views[nv++] = d->in_proj.data;
    views[nv++] = d->out_proj.data;
    for (int l = 0; l < d->layers && l < 64; l++) {
        const qtts_codec_layer *L = &d->tl[l];
        const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(L);
        for (int k = 0; k < QTTS_LAYER_MATS; k++) views[nv++] = m[k]->data;
    }
    if (d->layers > 64) return;   /* not the shipped codec: leave it as it is */
    for (size_t i = 0; i < qtts_st_set_count(d->st); i++) {
        const qtts_tensor *t = qtts_st_set_at(d->st, i);
        bool viewed = false;
        for (int k = 0; k < nv && !viewed; k++) viewed = views[k] == t->data;
        if (!viewed) qtts_tensor_release(t);
    }
}

void qtts_engine_options_init(qtts_engine_options *o) {
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
}

/* options.check_weights: both weight files scanned before anything is
 * loaded from them (the pages read stay cached for the load). */
static qtts_status check_weights(const char *dir, qtts_err *err) {
    char sub[4096];
    if (!qtts_path_join(sub, sizeof sub, dir, "speech_tokenizer"))
        return qtts_fail(err, QTTS_ERR_INVALID, "%s: model directory path too long", dir);
    const char *const dirs[2] = {dir, sub};
    for (int i = 0; i < 2; i++) {
        qtts_st_set *s = NULL;
        qtts_status st = qtts_st_set_open(dirs[i], "model", &s, err);
        if (!st) st = qtts_st_set_check_finite(s, err);
        qtts_st_set_close(s);
        if (st) return st;
    }
    return QTTS_OK;
}

qtts_status qtts_engine_open(const char *dir, const qtts_engine_options *opts, qtts_engine **out,
                             qtts_err *err) {
    *out = NULL;
    qtts_engine_options defaults;
    if (!opts) {
        qtts_engine_options_init(&defaults);
        opts = &defaults;
    }
    if (!dir || !*dir) return qtts_fail(err, QTTS_ERR_INVALID, "no model directory given");
    qtts_talker_quant quant;
    if (!qtts_quant_parse(opts->quant_talker, &quant.talker))
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown talker weight format '%.32s' (none, int8, int4)",
                         opts->quant_talker);
    if (!qtts_quant_parse(opts->quant_cp, &quant.cp))
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "unknown code-predictor weight format '%.32s' (none, int8, int4)",
                         opts->quant_cp);
    const bool codec_bf16 = opts->codec && !strcmp(opts->codec, "bf16");
    if (opts->codec && *opts->codec && !codec_bf16 && strcmp(opts->codec, "fp32"))
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown codec format '%.32s' (fp32, bf16)",
                         opts->codec);
    if (codec_bf16 && opts->backend && strcmp(opts->backend, "cpu"))
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "the bf16 codec is a CPU option; backend '%.32s' decodes on its own",
                         opts->backend);
    const bool kv_auto = !opts->kv_cache || !*opts->kv_cache;
    const bool kv_bf16 = !kv_auto && !strcmp(opts->kv_cache, "bf16");
    if (!kv_auto && !kv_bf16 && strcmp(opts->kv_cache, "f32"))
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown KV cache format '%.32s' (f32, bf16)",
                         opts->kv_cache);
    const bool cpu = !opts->backend || !strcmp(opts->backend, "cpu");
    if (kv_bf16 && !cpu)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "the bf16 KV cache is a CPU option; backend '%.32s' keeps its own",
                         opts->backend);
    qtts_engine *e = qtts_calloc(1, sizeof *e);
    if (!e) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    qtts_status st;
    e->n_threads = qtts_threads_init(opts->n_threads);   /* the kernels' process-wide pool */
    if (!(e->dir = qtts_strdup(dir))) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = qtts_config_load(dir, &e->cfg, err))) goto fail;
    if (opts->check_weights && (st = check_weights(dir, err))) goto fail;
    if ((st = qtts_tokenizer_load(dir, &e->tok, err))) goto fail;
    /* The codec first: its load-time peak (mapped pages + packed copies)
     * is over before the talker's weights are read (a quantized file's
     * blocks are all checked at open) or quantized. */
    if ((st = qtts_codec_decoder_load(dir, &e->cfg, &e->codec, err))) goto fail;
    release_codec_pages(e->codec);
    if (codec_bf16 && (st = qtts_codec_decoder_to_bf16(e->codec, err))) goto fail;
    /* the CPU decoder runs its k7 convs in Winograd form only; other
     * backends upload the direct weights (a GPU runs those convs direct) */
    if (!codec_bf16 && cpu) qtts_codec_decoder_drop_direct(e->codec);
    e->codec_bf16 = codec_bf16;
    e->serial_codec = opts->serial_codec;
    if ((st = qtts_st_set_open(dir, "model", &e->weights, err))) goto fail;
    if ((st = qtts_talker_load_quant(&e->cfg, e->weights, &quant, &e->talker, err))) goto fail;
    /* before any state: each session's cache takes this format */
    if (kv_bf16 || (kv_auto && cpu && e->talker->quant.talker != QTTS_QUANT_NONE))
        e->talker->kv = QTTS_KV_BF16;
    if (e->cfg.model_type == QTTS_MODEL_BASE) {
        if ((st = qtts_spk_enc_load(e->weights, &e->cfg, &e->spk, err))) goto fail;
        if ((st = qtts_codec_encoder_load(dir, &e->cfg, &e->cenc, err))) goto fail;
    }
    if ((st = qtts_backend_open(opts->backend, e->talker, e->codec, &e->backend, err))) goto fail;
    *out = e;
    return QTTS_OK;
fail:
    qtts_engine_close(e);
    return st;
}

void qtts_engine_close(qtts_engine *e) {
    if (!e) return;
    qtts_backend_close(e->backend);
    qtts_free(e->stats);
    qtts_codec_encoder_free(e->cenc);
    qtts_spk_enc_free(e->spk);
    qtts_codec_decoder_free(e->codec);
    qtts_talker_free(e->talker);
    qtts_tokenizer_free(e->tok);
    qtts_st_set_close(e->weights);
    qtts_free(e->dir);
    qtts_free(e);
}

void qtts_engine_info(const qtts_engine *e, qtts_model_info *info) {
    memset(info, 0, sizeof *info);
    const qtts_config *c = &e->cfg;
    info->kind = c->model_type == QTTS_MODEL_CUSTOM_VOICE   ? QTTS_KIND_CUSTOM_VOICE
                 : c->model_type == QTTS_MODEL_VOICE_DESIGN ? QTTS_KIND_VOICE_DESIGN
                                                            : QTTS_KIND_BASE;
    info->size = c->model_size;
    info->n_speakers = c->n_speakers;
    info->n_languages = 0;
    for (int i = 0; i < c->n_langs; i++)
        if (!strstr(c->langs[i].name, "dialect")) info->n_languages++;
    info->hidden = c->talker.hidden;
    info->honours_instruct = qtts_prompt_instruct_honoured(c);
    info->quant_talker = qtts_quant_name(e->talker->quant.talker);
    info->quant_cp = qtts_quant_name(e->talker->quant.cp);
    info->codec = e->codec_bf16 ? "bf16" : "fp32";
    info->kv_cache = e->talker->kv == QTTS_KV_BF16 ? "bf16" : "f32";
}

/* ==== bench hooks (engine_internal.h) ==================================== */

qtts_status qtts_engine_stats_enable(qtts_engine *e, qtts_err *err) {
    if (e->stats) return QTTS_OK;
    qtts_engine_stats *st = qtts_calloc(1, sizeof *st);
    if (!st) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    qtts_backend *t;
    qtts_status s = qtts_backend_timed(e->backend, st, &t, err);
    if (s) {
        qtts_free(st);
        return s;
    }
    e->backend = t;
    e->stats = st;
    return QTTS_OK;
}

void qtts_engine_stats_get(const qtts_engine *e, qtts_engine_stats *out) {
    if (e->stats) *out = *e->stats;
    else memset(out, 0, sizeof *out);
}

void qtts_engine_set_serial_codec(qtts_engine *e, bool serial) { e->serial_codec = serial; }

void qtts_engine_stats_reset(qtts_engine *e) {
    if (e->stats) memset(e->stats, 0, sizeof *e->stats);
}

const qtts_talker_weights *qtts_engine_talker(const qtts_engine *e) { return e->talker; }
const qtts_codec_decoder *qtts_engine_codec(const qtts_engine *e) { return e->codec; }

const char *qtts_engine_speaker(const qtts_engine *e, int i) {
    return i >= 0 && i < e->cfg.n_speakers ? e->cfg.speakers[i].name : NULL;
}

/* The user-facing languages are the codec languages minus the dialect keys
 * (which are reached through a dialect speaker), as the reference lists them. */
const char *qtts_engine_language(const qtts_engine *e, int i) {
    for (int k = 0; k < e->cfg.n_langs; k++) {
        if (strstr(e->cfg.langs[k].name, "dialect")) continue;
        if (i-- == 0) return e->cfg.langs[k].name;
    }
    return NULL;
}

/* ==== sessions ========================================================== */

qtts_session *qtts_session_new(const qtts_engine *e, qtts_err *err) {
    qtts_session *s = qtts_calloc(1, sizeof *s);
    if (!s) {
        qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->eng = e;
    return s;
}

static void session_reset(qtts_session *s);

void qtts_session_free(qtts_session *s) {
    if (!s) return;
    session_reset(s);
    s->eng->backend->ops->seq_free(s->eng->backend, s->seq);
    qtts_codec_stream_free(s->cs);
    qtts_codec_stream_free(s->ref_cs);
    qtts_free(s->ref_key);
    qtts_free(s->push_codes);
    qtts_free(s->win);
    qtts_free(s->frames);
    qtts_free(s->wav);
    qtts_free(s);
}

/* Make sure the sequence state holds max_pos positions (KV memory is
 * reserved up front but only touched as positions fill). */
static qtts_status ensure_seq(qtts_session *s, int max_pos, qtts_err *err) {
    qtts_backend *be = s->eng->backend;
    if (s->seq && be->ops->seq_max_pos(be, s->seq) >= max_pos) return QTTS_OK;
    be->ops->seq_free(be, s->seq);
    s->seq = NULL;
    return be->ops->seq_new(be, max_pos, &s->seq, err);
}

static qtts_status ensure_wav(qtts_session *s, size_t n, qtts_err *err) {
    if (n <= s->cap_wav) return QTTS_OK;
    float *p = qtts_realloc(s->wav, n * sizeof(float));
    if (!p) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (%zu audio samples)", n);
    s->wav = p;
    s->cap_wav = n;
    return QTTS_OK;
}

/* ==== chunked decode, delivered incrementally ============================ */

/* Decodes window [start, end) of frames[] exactly as the reference's
 * chunked_decode does (25 frames of left context when start > 25, else
 * all frames from 0) into s->wav; *pcm, *n_pcm: the samples it keeps,
 * after dropping up to *skip samples from the front (the in-context clone
 * trim; skip may be NULL). */
static qtts_status decode_chunk(qtts_session *s, const int32_t *frames, int start, int end,
                                size_t *skip, const float **pcm_out, size_t *n_pcm, qtts_err *err) {
    const qtts_codec_decoder *d = s->eng->codec;
    const int up = d->upsample;
    int ctx = start - QTTS_CODEC_LEFT_CONTEXT > 0 ? QTTS_CODEC_LEFT_CONTEXT : start;
    int T = end - start + ctx;
    qtts_status st = ensure_wav(s, (size_t)T * up, err);
    if (st) return st;
    qtts_backend *be = s->eng->backend;
    qtts_engine_stats *stats = s->eng->stats;
    const double t0 = stats ? qtts_now() : 0;
    st = be->ops->codec_decode_window(be, frames + (size_t)(start - ctx) * QTTS_NUM_CODEBOOKS, T,
                                      s->wav, err);
    if (stats) {
        stats->codec_s += qtts_now() - t0;
        stats->codec_calls++;
        stats->codec_frames += end - start;
        stats->codec_frames_run += T;
    }
    if (st) return st;
    size_t n = (size_t)(end - start) * up;
    const float *pcm = s->wav + (size_t)ctx * up;
    if (!qtts_all_finite(pcm, n))
        return qtts_fail(err, QTTS_ERR_NUMERIC, "the codec decoder produced non-finite samples");
    if (skip && *skip) {
        size_t k = QTTS_MIN(*skip, n);
        pcm += k;
        n -= k;
        *skip -= k;
    }
    *pcm_out = pcm;
    *n_pcm = n;
    return QTTS_OK;
}

/* The request's audio as it leaves the session: counted, then to on_audio. */
static int emit_audio(void *user, const float *pcm, size_t n) {
    qtts_session *s = user;
    s->n_samples += n;
    return s->req->on_audio ? s->req->on_audio(s->req->user, pcm, n) : 0;
}

/* Final samples of the request, in order: through the speed change when
 * the request has one, then emit_audio. */
static qtts_status deliver(qtts_session *s, const float *pcm, size_t n, qtts_err *err) {
    if (!n) return QTTS_OK;
    if (s->stretch) return qtts_stretch_push(s->stretch, pcm, n, emit_audio, s, err);
    if (emit_audio(s, pcm, n)) return qtts_fail(err, QTTS_ERR_CANCELLED, "cancelled by the caller");
    return QTTS_OK;
}

/* Decodes window [start, end) of the session's frames and delivers it. */
static qtts_status decode_deliver(qtts_session *s, int start, int end, qtts_err *err) {
    const float *pcm;
    size_t n;
    qtts_status st = decode_chunk(s, s->frames, start, end, &s->skip_samples, &pcm, &n, err);
    return st ? st : deliver(s, pcm, n, err);
}

/* Frames per push of a window delivery decoded through the stream beside
 * generation (s->bg): the streaming default, and a divisor of the window
 * (QTTS_CODEC_CHUNK), so that every window ends with a push. */
#define BG_PUSH 12
_Static_assert(QTTS_CODEC_CHUNK % BG_PUSH == 0, "pushes must divide the window");

/* Whether the engine's backend decodes through a codec stream (the CPU
 * backend; the others decode windows). */
static bool has_stream_decoder(const qtts_engine *e) { return !strcmp(e->backend->ops->name, "cpu"); }

/* The session's stream at frame 0, with runs of at least `run` frames
 * (kept across requests, regrown when a request needs longer runs). */
static qtts_status stream_ready(qtts_session *s, int run, qtts_err *err) {
    if (s->cs && s->cs_max < run) {
        qtts_codec_stream_free(s->cs);
        s->cs = NULL;
    }
    if (!s->cs) {
        qtts_status st = qtts_codec_stream_new(s->eng->codec, run, &s->cs, err);
        if (st) return st;
        s->cs_max = run;
    }
    qtts_codec_stream_reset(s->cs);
    return QTTS_OK;
}

/* Window delivery through the stream (bg): the held samples go out. */
static qtts_status win_flush(qtts_session *s, qtts_err *err) {
    const size_t n = s->win_n;
    s->win_n = 0;
    return deliver(s, s->win, n, err);
}

/* The samples of a push of n frames (in wav) after it ran: checked, up
 * to skip_samples cut from the front, delivered. */
static qtts_status stream_deliver(qtts_session *s, int n, qtts_err *err) {
    const size_t ns = (size_t)n * s->eng->codec->upsample;
    if (!qtts_all_finite(s->wav, ns))
        return qtts_fail(err, QTTS_ERR_NUMERIC, "the codec decoder produced non-finite samples");
    const size_t k = QTTS_MIN(s->skip_samples, ns);
    s->skip_samples -= k;
    if (!s->bg) return deliver(s, s->wav + k, ns - k, err);
    /* window delivery: held until the window is whole (pushes divide it) */
    if (s->win_n + ns - k > s->win_cap) {
        const size_t cap = QTTS_MAX(s->win_n + ns - k, 2 * s->win_cap);
        float *p = qtts_realloc(s->win, cap * sizeof(float));
        if (!p) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (%zu audio samples)", cap);
        s->win = p;
        s->win_cap = cap;
    }
    memcpy(s->win + s->win_n, s->wav + k, (ns - k) * sizeof(float));
    s->win_n += ns - k;
    return s->decoded % QTTS_CODEC_CHUNK ? QTTS_OK : win_flush(s, err);
}

static void add_codec_stats(qtts_session *s, int n, double secs) {
    qtts_engine_stats *stats = s->eng->stats;
    if (!stats) return;
    stats->codec_s += secs;
    stats->codec_calls++;
    stats->codec_frames += n;
    stats->codec_frames_run += n;
}

/* The lent worker's job: the push of stream_run. */
static void push_task(void *ctx, int task) {
    (void)task;
    qtts_session *s = ctx;
    const double t0 = qtts_now();
    s->push_st = qtts_codec_stream_push(s->cs, s->push_codes, s->push_n, s->wav, &s->push_err);
    s->push_s = qtts_now() - t0;
}

/* Waits for the push on the lent worker, if one is out, and delivers its
 * samples. Every use of the stream or of wav comes after this. */
static qtts_status push_collect(qtts_session *s, qtts_err *err) {
    if (!s->push_out) return QTTS_OK;
    qtts_threads_lend_wait();
    s->push_out = false;
    add_codec_stats(s, s->push_n, s->push_s);
    if (s->push_st) {
        if (err) *err = s->push_err;
        return s->push_st;
    }
    return stream_deliver(s, s->push_n, err);
}

/* Streaming: decodes frames [decoded, decoded + n) through the session's
 * stream and delivers their samples (after up to skip_samples cut from the
 * front). With overlap, a push after the first is handed to a worker lent
 * by the pool and this returns at once: generation goes on with the
 * pool's other threads while it decodes, and push_collect delivers its
 * samples (at the next frame that finds it done, or before anything else
 * uses the stream). The first push runs here on every thread: its samples
 * are the time to first audio. */
static qtts_status stream_run(qtts_session *s, int n, qtts_err *err) {
    qtts_status st = push_collect(s, err);
    if (st) return st;
    if ((st = ensure_wav(s, (size_t)n * s->eng->codec->upsample, err))) return st;
    const int32_t *codes = s->frames + (size_t)s->decoded * QTTS_NUM_CODEBOOKS;
    if (s->overlap && (s->decoded > s->ref_frames || s->bg)) {
        const size_t bytes = sizeof(int32_t) * (size_t)n * QTTS_NUM_CODEBOOKS;
        if (n > s->push_cap) {   /* without memory for the copy, the push runs here */
            int32_t *p = qtts_realloc(s->push_codes, bytes);
            if (p) s->push_codes = p, s->push_cap = n;
        }
        if (n <= s->push_cap) {
            memcpy(s->push_codes, codes, bytes);
            s->push_n = n;
            if (qtts_threads_lend(push_task, s)) {
                s->push_out = true;
                s->decoded += n;
                return QTTS_OK;
            }
        }
    }
    const double t0 = qtts_now();
    st = qtts_codec_stream_push(s->cs, codes, n, s->wav, err);
    add_codec_stats(s, n, qtts_now() - t0);
    if (st) return st;
    s->decoded += n;
    return stream_deliver(s, n, err);
}

/* Keeps the stream's state after the reference frames (see ref_cs). Without
 * memory for it nothing is kept: the next request decodes its reference. */
static void keep_reference_state(qtts_session *s) {
    qtts_err e;
    if (s->no_prompt_reuse) return;
    if (!s->ref_cs && qtts_codec_stream_new(s->eng->codec, 1, &s->ref_cs, &e)) return;
    const size_t bytes = sizeof(int32_t) * (size_t)s->ref_frames * QTTS_NUM_CODEBOOKS;
    int32_t *key = qtts_realloc(s->ref_key, bytes);
    if (!key) return;
    s->ref_key = key;
    s->ref_key_frames = 0;
    if (qtts_codec_stream_copy(s->ref_cs, s->cs, &e)) return;
    memcpy(key, s->frames, bytes);
    s->ref_key_frames = s->ref_frames;
}

/* Frames [decoded, decoded + n) through the session's stream without
 * their samples, which are all cut (qtts_codec_stream_skip: the
 * convolutions run only on the last few). */
static qtts_status stream_skip(qtts_session *s, int n, qtts_err *err) {
    qtts_engine_stats *stats = s->eng->stats;
    const double t0 = stats ? qtts_now() : 0;
    const qtts_status st =
        qtts_codec_stream_skip(s->cs, s->frames + (size_t)s->decoded * QTTS_NUM_CODEBOOKS, n, err);
    if (stats) {
        stats->ref_skip_s += qtts_now() - t0;
        stats->ref_skip_frames += n;
    }
    if (st) return st;
    s->decoded += n;
    const size_t up = (size_t)s->eng->codec->upsample;
    QTTS_ASSERT(s->skip_samples >= (size_t)n * up);
    s->skip_samples -= (size_t)n * up;
    return QTTS_OK;
}

/* stream_run, after an in-context clone's reference frames, whose samples
 * are all cut: the stream skips them and keeps its state after them. */
static qtts_status stream_push(qtts_session *s, int n, qtts_err *err) {
    qtts_status st = push_collect(s, err);
    if (st) return st;
    if (s->decoded < s->ref_frames) {
        const int m = QTTS_MIN(n, s->ref_frames - s->decoded);
        st = stream_skip(s, m, err);
        if (st) return st;
        if (s->decoded == s->ref_frames) keep_reference_state(s);
        n -= m;
    }
    return n > 0 ? stream_run(s, n, err) : QTTS_OK;
}

/* An in-context clone held to the end, on the CPU: the reference's cut
 * (skip_samples) from a stream that skips the frames before the one
 * holding the first sample kept, then decodes the rest in windows' worth:
 * the samples of decoding every window, in less work. */
static qtts_status finish_held_clone(qtts_session *s, qtts_err *err) {
    /* runs of 12 frames, the size the CLI and the server stream with, so
     * their sessions reuse the stream they have */
    qtts_status st = stream_ready(s, 12, err);
    if (st) return st;
    const size_t up = (size_t)s->eng->codec->upsample;
    st = stream_skip(s, (int)QTTS_MIN(s->skip_samples / up, (size_t)s->n_frames), err);
    while (!st && s->decoded < s->n_frames)
        st = stream_run(s, QTTS_MIN(QTTS_CODEC_CHUNK, s->n_frames - s->decoded), err);
    return st;
}

/* A streamed in-context clone (set up after the stream's reset): resumes
 * from the state kept after the same reference frames (unless prompt reuse
 * is off), or has them decoded with the first push, their samples cut. */
static void stream_reference(qtts_session *s) {
    qtts_err e;
    const size_t bytes = sizeof(int32_t) * (size_t)s->ref_frames * QTTS_NUM_CODEBOOKS;
    if (!s->no_prompt_reuse && s->ref_cs && s->ref_key_frames == s->ref_frames &&
        !memcmp(s->ref_key, s->frames, bytes) &&
        qtts_codec_stream_copy(s->cs, s->ref_cs, &e) == QTTS_OK) {
        s->decoded = s->ref_frames;
        return;
    }
    s->skip_samples = (size_t)s->ref_frames * s->eng->codec->upsample;
    s->due = s->ref_frames;
    s->ref_decoded = s->ref_frames;
}

qtts_status qtts_decode_codes(qtts_session *s, const int32_t *codes, int n_frames,
                              qtts_audio_cb on_audio, void *user, qtts_err *err) {
    if (!codes || n_frames <= 0) return qtts_fail(err, QTTS_ERR_INVALID, "no codes to decode");
    const int cb = s->eng->cfg.codec.codebook_size;
    for (size_t i = 0; i < (size_t)n_frames * QTTS_NUM_CODEBOOKS; i++)
        if (codes[i] < 0 || codes[i] >= cb)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "code %d at frame %zu, codebook %zu is outside [0, %d)", codes[i],
                             i / QTTS_NUM_CODEBOOKS, i % QTTS_NUM_CODEBOOKS, cb);
    for (int start = 0; start < n_frames; start += QTTS_CODEC_CHUNK) {
        int end = QTTS_MIN(start + QTTS_CODEC_CHUNK, n_frames);
        const float *pcm;
        size_t n;
        qtts_status st = decode_chunk(s, codes, start, end, NULL, &pcm, &n, err);
        if (st) return st;
        if (on_audio && on_audio(user, pcm, n))
            return qtts_fail(err, QTTS_ERR_CANCELLED, "cancelled by the caller");
    }
    return QTTS_OK;
}

/* ==== synthesis =========================================================== */

void qtts_request_init(qtts_request *r) {
    memset(r, 0, sizeof *r);
    r->do_sample = -1;
    r->top_k = -1;
    r->top_p = -1;
    r->temperature = -1;
    r->repetition_penalty = -1;
    r->subtalker_do_sample = -1;
    r->subtalker_top_k = -1;
    r->subtalker_top_p = -1;
    r->subtalker_temperature = -1;
    r->max_new_tokens = -1;
}

/* Decodes and delivers up to max_frames (<= 0: all) of the session's due
 * frames: a stream's push, or whole 300-frame windows. */
static qtts_status decode_due_audio(qtts_session *s, int max_frames, qtts_err *err) {
    qtts_status st = QTTS_OK;
    if (s->stream_n || s->bg) {
        int n = max_frames > 0 && max_frames < s->due ? max_frames : s->due;
        /* an in-context clone's reference frames go in one piece: skipped,
         * they cost about as much as the last few alone */
        n = QTTS_MAX(n, QTTS_MIN(s->due, s->ref_frames - s->decoded));
        if (n > 0 && !(st = stream_push(s, n, err))) s->due -= n;
    } else {
        for (; !st && s->due >= QTTS_CODEC_CHUNK; s->due -= QTTS_CODEC_CHUNK) {
            st = decode_deliver(s, s->decoded, s->decoded + QTTS_CODEC_CHUNK, err);
            s->decoded += QTTS_CODEC_CHUNK;
        }
    }
    return st;
}

/* The generation's frame callback: store the frame, pass it to on_frame,
 * decode the audio that falls due (unless decoding is manual). A failure is
 * kept in s->cb_status / s->cb_err (the generation reports CANCELLED). */
static int on_gen_frame(void *user, int frame, const int32_t *codes) {
    qtts_session *s = user;
    const qtts_request *req = s->req;
    const int at = s->ref_frames + frame;
    if (at >= s->cap_frames) {
        int cap = s->cap_frames ? s->cap_frames * 2 : 512;
        while (cap <= at) cap *= 2;
        int32_t *p = qtts_realloc(s->frames, (size_t)cap * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
        if (!p) {
            s->cb_status = qtts_fail(&s->cb_err, QTTS_ERR_NOMEM, "out of memory (frames)");
            return 1;
        }
        s->frames = p;
        s->cap_frames = cap;
    }
    memcpy(s->frames + (size_t)at * QTTS_NUM_CODEBOOKS, codes,
           QTTS_NUM_CODEBOOKS * sizeof(int32_t));
    s->n_frames = at + 1;
    /* a push done on the lent worker: its samples go out now */
    if (s->push_out && qtts_threads_lend_done() &&
        (s->cb_status = push_collect(s, &s->cb_err)))
        return 1;
    if (req->on_frame && req->on_frame(req->user, frame, codes)) {
        s->cb_status = qtts_fail(&s->cb_err, QTTS_ERR_CANCELLED, "cancelled by the caller");
        return 1;
    }
    /* Audio falls due: a push of first, 2 first, 4 first, ... frames, at
     * most stream_n, or a completed window. It is decoded here, or with
     * manual decoding by the caller (qtts_session_decode). */
    if (s->stream_n) {
        const int pending = s->n_frames - s->decoded - s->due;
        if (pending >= s->stream_next) {
            s->stream_next = QTTS_MIN(s->stream_n, 2 * pending);
            s->due += pending;
        }
    } else if (s->bg) {
        if (s->n_frames - s->decoded - s->due == BG_PUSH) s->due += BG_PUSH;
    } else if (!s->hold_audio && s->n_frames - s->decoded - s->due == QTTS_CODEC_CHUNK) {
        s->due += QTTS_CODEC_CHUNK;
    }
    if (!s->manual_decode && s->due && (s->cb_status = decode_due_audio(s, 0, &s->cb_err)))
        return 1;
    return 0;
}

static bool blank(const char *s) {
    for (; *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

static qtts_status tokenize_template(const qtts_engine *e, char *tmpl, int32_t **ids, int *n,
                                     qtts_err *err) {
    if (!tmpl) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    size_t nn = 0;
    qtts_status st = qtts_tokenizer_encode(e->tok, tmpl, strlen(tmpl), ids, &nn, err);
    qtts_free(tmpl);
    *n = (int)nn;
    return st;
}

/* Overlay the request's sampling choices on the model defaults. */
static qtts_status gen_params_from_request(const qtts_engine *e, const qtts_request *q,
                                           qtts_gen_params *gp, qtts_err *err) {
    qtts_gen_params_default(&e->cfg, gp);
    if (q->do_sample >= 0) gp->talker.do_sample = q->do_sample != 0;
    if (q->top_k >= 0) gp->talker.top_k = q->top_k;
    if (q->top_p >= 0) gp->talker.top_p = q->top_p;
    if (q->temperature >= 0) gp->talker.temperature = q->temperature;
    if (q->repetition_penalty >= 0) gp->rules.repetition_penalty = q->repetition_penalty;
    if (q->subtalker_do_sample >= 0) gp->cp.do_sample = q->subtalker_do_sample != 0;
    if (q->subtalker_top_k >= 0) gp->cp.top_k = q->subtalker_top_k;
    if (q->subtalker_top_p >= 0) gp->cp.top_p = q->subtalker_top_p;
    if (q->subtalker_temperature >= 0) gp->cp.temperature = q->subtalker_temperature;
    if (q->max_new_tokens >= 0) gp->max_new_tokens = q->max_new_tokens;
    gp->seed = q->seed;
    if (!(gp->talker.temperature > 0) || !(gp->cp.temperature > 0))
        return qtts_fail(err, QTTS_ERR_INVALID, "temperature must be > 0");
    if (!(gp->talker.top_p > 0 && gp->talker.top_p <= 1) || !(gp->cp.top_p > 0 && gp->cp.top_p <= 1))
        return qtts_fail(err, QTTS_ERR_INVALID, "top_p must be in (0, 1]");
    if (!(gp->rules.repetition_penalty > 0))
        return qtts_fail(err, QTTS_ERR_INVALID, "repetition_penalty must be > 0");
    if (gp->max_new_tokens < 1 || gp->max_new_tokens > (1 << 20))
        return qtts_fail(err, QTTS_ERR_INVALID, "max_new_tokens must be in [1, %d]", 1 << 20);
    return QTTS_OK;
}

/* Drops the request in flight (if any); the session is idle again. */
static void session_reset(qtts_session *s) {
    if (s->push_out) {   /* its samples are dropped with the request */
        qtts_threads_lend_wait();
        s->push_out = false;
    }
    s->overlap = s->bg = false;
    s->win_n = 0;
    qtts_gen_end(&s->gen);
    qtts_prompt_free(&s->prompt);
    memset(&s->prompt, 0, sizeof s->prompt);
    qtts_voice_free(s->own_voice);
    s->own_voice = NULL;
    s->ref_frames = 0;
    s->skip_samples = 0;
    s->hold_audio = false;
    s->stream_n = s->stream_first = s->stream_next = 0;
    s->due = 0;
    qtts_stretch_free(s->stretch);
    s->stretch = NULL;
    s->req = NULL;
    s->state = SES_IDLE;
}

qtts_status qtts_session_start(qtts_session *s, const qtts_request *req, qtts_err *err) {
    const qtts_engine *e = s->eng;
    const qtts_config *cfg = &e->cfg;
    if (s->state != SES_IDLE)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "the session already has a request (finish or cancel it first)");
    s->warning[0] = 0;
    s->manual_decode = s->manual_setting;
    if (!req || !req->text) return qtts_fail(err, QTTS_ERR_INVALID, "no text given");
    size_t text_len = strlen(req->text);
    if (text_len > QTTS_MAX_TEXT_BYTES)
        return qtts_fail(err, QTTS_ERR_LIMIT, "text is %zu bytes, over the %u-byte limit", text_len,
                         QTTS_MAX_TEXT_BYTES);
    if (blank(req->text)) return qtts_fail(err, QTTS_ERR_INVALID, "text is empty");
    if (req->stream_chunk_frames < 0 || req->stream_chunk_frames > QTTS_CODEC_CHUNK ||
        req->stream_first_frames < 0 || req->stream_first_frames > QTTS_CODEC_CHUNK)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "stream_chunk_frames and stream_first_frames must be in [0, %d]",
                         QTTS_CODEC_CHUNK);
    if (req->speed != 0 && !(req->speed >= QTTS_SPEED_MIN && req->speed <= QTTS_SPEED_MAX))
        return qtts_fail(err, QTTS_ERR_INVALID, "speed %g is outside [%g, %g] (0 or 1: unchanged)",
                         req->speed, QTTS_SPEED_MIN, QTTS_SPEED_MAX);

    const char *instruct = req->instruct && *req->instruct ? req->instruct : NULL;
    if (instruct && strlen(instruct) > QTTS_MAX_INSTRUCT_BYTES)
        return qtts_fail(err, QTTS_ERR_LIMIT, "instruct is over the %u-byte limit",
                         QTTS_MAX_INSTRUCT_BYTES);
    const char *speaker = req->speaker && *req->speaker ? req->speaker : NULL;
    bool non_streaming;
    switch (cfg->model_type) {
    case QTTS_MODEL_CUSTOM_VOICE:
        if (!speaker) {
            char list[QTTS_ERR_MAX / 2] = "";
            for (int i = 0; i < cfg->n_speakers; i++) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", cfg->speakers[i].name);
            }
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "this CustomVoice model needs a speaker (one of: %s)", list);
        }
        /* The reference drops instruct on the 0.6B CustomVoice model. */
        if (instruct && !qtts_prompt_instruct_honoured(cfg)) {
            snprintf(s->warning, sizeof s->warning,
                     "this model ignores instruct (as the reference does); it was not used");
            instruct = NULL;
        }
        non_streaming = true;
        break;
    case QTTS_MODEL_VOICE_DESIGN:
        if (speaker)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "VoiceDesign models have no preset speakers; describe the voice "
                             "with instruct instead");
        non_streaming = true;
        break;
    case QTTS_MODEL_BASE:
    default:
        if (speaker)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "Base models have no preset speakers; clone a voice with reference "
                             "audio or a voice profile");
        if (!req->voice && !req->ref_audio)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "Base models need a voice to clone: reference audio or a voice profile");
        if (req->voice && req->ref_audio)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "give either reference audio or a voice profile, not both");
        /* The reference's voice-clone call takes no instruct. */
        if (instruct) {
            snprintf(s->warning, sizeof s->warning,
                     "Base models take no instruct (as the reference); it was not used");
            instruct = NULL;
        }
        non_streaming = false; /* the reference's default for voice cloning */
        break;
    }
    if (cfg->model_type != QTTS_MODEL_BASE && (req->voice || req->ref_audio || req->ref_text))
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "voice cloning (reference audio, ref_text or a voice profile) needs a "
                         "Base model");
    if (req->text_mode == QTTS_TEXT_MODE_STREAMING) non_streaming = false;
    if (req->text_mode == QTTS_TEXT_MODE_NON_STREAMING) non_streaming = true;

    qtts_gen_params gp;
    qtts_status st = gen_params_from_request(e, req, &gp, err);
    if (st) return st;

    s->t0 = qtts_now();
    s->req = req;
    s->n_frames = s->decoded = 0;
    s->ref_decoded = 0;
    s->n_samples = 0;
    s->cb_status = QTTS_OK;
    int32_t *ids = NULL, *instr_ids = NULL, *ref_ids = NULL;
    int n_ids = 0, n_instr = 0, n_ref = 0;
    const qtts_voice *voice = req->voice;
    const char *language = req->language;
    if (cfg->model_type == QTTS_MODEL_BASE && !voice) {
        st = qtts_voice_build(cfg, e->spk, e->cenc, req->ref_audio, req->ref_audio_len,
                              req->ref_text, req->x_vector_only, NULL, &s->own_voice, err);
        if (st) goto done;
        voice = s->own_voice;
    }
    if (voice && (!language || !*language)) language = voice->language;
    st = tokenize_template(e, qtts_prompt_text_template(req->text), &ids, &n_ids, err);
    if (st) goto done;
    if (instruct) {
        st = tokenize_template(e, qtts_prompt_instruct_template(instruct), &instr_ids, &n_instr, err);
        if (st) goto done;
    }
    const bool icl = voice && voice->ref_codes && !req->x_vector_only;
    const bool stream = req->stream_chunk_frames && has_stream_decoder(e);
    if (icl) {
        st = tokenize_template(e, qtts_prompt_ref_template(voice->ref_text), &ref_ids, &n_ref, err);
        if (st) goto done;
    }
    qtts_prompt_spec spec = {
        .input_ids = ids,
        .n_input = n_ids,
        .instruct_ids = instr_ids,
        .n_instruct = n_instr,
        .ref_ids = ref_ids,
        .n_ref = n_ref,
        .language = language,
        .speaker = speaker,
        .xvector = voice ? voice->xvector : NULL,
        .ref_codes = icl ? voice->ref_codes : NULL,
        .ref_frames = icl ? voice->ref_frames : 0,
        .non_streaming = non_streaming,
    };
    if (icl) {
        /* The reference decodes concat(ref_codes, generated) with the chunk
         * windows counted from the reference's first frame, then cuts
         * int(ref / total * n_samples) samples (in double). That cut depends
         * on the final length, so the audio is decoded at finish, unless it
         * is streamed: then exactly the reference frames' samples are cut
         * (stream_reference; qtts_request.stream_chunk_frames says how that
         * differs). */
        int need = voice->ref_frames;
        if (need > s->cap_frames) {
            int32_t *p = qtts_realloc(s->frames, (size_t)need * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
            if (!p) {
                st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (reference frames)");
                goto done;
            }
            s->frames = p;
            s->cap_frames = need;
        }
        memcpy(s->frames, voice->ref_codes, (size_t)need * QTTS_NUM_CODEBOOKS * sizeof(int32_t));
        s->ref_frames = s->n_frames = need;
        s->hold_audio = !stream;
    }
    /* the codec may decode beside generation (qtts_engine_options.serial_codec) */
    const bool beside = !e->serial_codec && !s->manual_decode && e->n_threads > 1;
    if (stream) {
        const int n = req->stream_chunk_frames;
        const int first = req->stream_first_frames ? req->stream_first_frames : 1;
        if ((st = stream_ready(s, QTTS_MAX(n, first), err))) goto done;
        s->stream_n = n;
        s->stream_first = s->stream_next = first;
        s->overlap = beside;
        if (s->ref_frames) stream_reference(s);
    } else if (beside && !s->hold_audio && has_stream_decoder(e) &&
               stream_ready(s, BG_PUSH, &(qtts_err){0}) == QTTS_OK) {
        /* window delivery, decoded beside generation through the stream:
         * the same samples as the windows' (the stream reproduces their
         * left context), in the same calls; without a stream, the windows */
        s->bg = s->overlap = true;
    }
    if (req->speed != 0 && req->speed != 1) {
        st = qtts_stretch_new(cfg->codec.output_sample_rate, req->speed, &s->stretch, err);
        if (st) goto done;
    }
    st = qtts_prompt_build(e->talker, cfg, &spec, &s->prompt, err);
    if (st) goto done;
    st = ensure_seq(s, s->prompt.len + gp.max_new_tokens, err);
    if (st) goto done;
    if (s->no_prompt_reuse && e->backend->ops->seq_forget)
        e->backend->ops->seq_forget(e->backend, s->seq);
    st = qtts_gen_begin(&s->gen, e->backend, s->seq, e->talker, &s->prompt, &gp, on_gen_frame, s,
                        NULL, err);
    if (st) goto done;
    s->prompt_rows = s->prompt.len;
    const qtts_backend_ops *ops = e->backend->ops;
    s->prompt_reused = ops->seq_reused ? ops->seq_reused(e->backend, s->seq) : 0;
    s->state = qtts_gen_active(&s->gen) ? SES_RUNNING : SES_DONE;
done:
    qtts_free(ids);
    qtts_free(instr_ids);
    qtts_free(ref_ids);
    if (st) session_reset(s);
    return st;
}

bool qtts_session_active(const qtts_session *s) { return s && s->state == SES_RUNNING; }

/* After a step: the session's new state from its generation's. */
static void session_after_step(qtts_session *s, const qtts_err *gen_err) {
    if (s->gen.status) {
        s->state = SES_FAILED;
        s->err = s->cb_status ? s->cb_err : *gen_err;
    } else if (!qtts_gen_active(&s->gen)) {
        s->state = SES_DONE;
        /* a stream's last frames are due at once (finish would decode them
         * in one piece); a window is decoded whole, at finish */
        if (s->manual_decode && s->stream_n) s->due = s->n_frames - s->decoded;
    }
}

qtts_status qtts_step_batch(qtts_session **sessions, int n, qtts_err *errs) {
    qtts_err whole = {0};
    if (n < 1 || !sessions) return QTTS_ERR_INVALID;
    for (int i = 0; i < n; i++) {
        const char *why = NULL;
        if (!sessions[i])
            why = "is NULL";
        else if (sessions[i]->state != SES_RUNNING)
            why = "is not generating (start it, or finish it after its last frame)";
        else if (sessions[i]->eng != sessions[0]->eng)
            why = "belongs to another engine";
        for (int j = 0; j < i && !why; j++)
            if (sessions[j] == sessions[i]) why = "appears twice";
        if (why) {
            qtts_fail(&whole, QTTS_ERR_INVALID, "step_batch: session %d %s; nothing was done", i,
                      why);
            for (int j = 0; errs && j < n; j++) errs[j] = whole;
            return QTTS_ERR_INVALID;
        }
    }
    qtts_gen **gens = qtts_calloc((size_t)n, sizeof *gens);
    qtts_err *e = qtts_calloc((size_t)n, sizeof *e);
    qtts_status st;
    if (!gens || !e) {
        st = qtts_fail(&whole, QTTS_ERR_NOMEM, "step_batch: out of memory");
        for (int i = 0; i < n; i++) {
            sessions[i]->state = SES_FAILED;
            sessions[i]->err = whole;
        }
    } else {
        for (int i = 0; i < n; i++) {
            gens[i] = &sessions[i]->gen;
            sessions[i]->cb_status = QTTS_OK;
        }
        st = qtts_gen_step_batch(gens, n, e, &whole);
        for (int i = 0; i < n; i++) session_after_step(sessions[i], &e[i]);
    }
    for (int i = 0; errs && i < n; i++) {
        if (sessions[i]->state == SES_FAILED) {
            errs[i] = sessions[i]->err;
        } else {
            errs[i].status = QTTS_OK;
            errs[i].msg[0] = 0;
        }
    }
    qtts_free(gens);
    qtts_free(e);
    return st;
}

static void fill_result(const qtts_session *s, qtts_result *r) {
    r->n_frames = s->gen.r.n_frames;
    r->hit_eos = s->gen.r.stopped_by_eos;
    r->n_samples = s->n_samples;
    r->seconds_total = qtts_now() - s->t0;
    snprintf(r->warning, sizeof r->warning, "%s", s->warning);
    r->prompt_rows = s->prompt_rows;
    r->prompt_rows_reused = s->prompt_reused;
    r->ref_frames_decoded = s->ref_decoded;
}

qtts_status qtts_session_finish(qtts_session *s, qtts_result *result, qtts_err *err) {
    if (result) memset(result, 0, sizeof *result);
    qtts_status st = QTTS_OK;
    switch (s->state) {
    case SES_IDLE:
        return qtts_fail(err, QTTS_ERR_INVALID, "the session has no request to finish");
    case SES_RUNNING:
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "the session is still generating (step it to its last frame, or "
                         "cancel it)");
    case SES_FAILED:
        st = s->err.status ? s->err.status : QTTS_ERR_INVALID;
        if (err) *err = s->err;
        break;
    case SES_DONE:
        s->overlap = false;   /* nothing left to overlap */
        st = push_collect(s, err);
        if (st) break;
        if (s->ref_frames && !s->stream_n) {
            const int total = s->n_frames;
            const double n_all = (double)total * s->eng->codec->upsample;
            s->skip_samples = (size_t)((double)s->ref_frames / (double)QTTS_MAX(total, 1) * n_all);
            if (has_stream_decoder(s->eng)) st = finish_held_clone(s, err);
        }
        if ((s->stream_n || s->bg) && s->n_frames > s->decoded)
            st = stream_push(s, s->n_frames - s->decoded, err);
        if (!st && s->bg && s->win_n) st = win_flush(s, err);
        for (int start = s->decoded; !st && start < s->n_frames; start += QTTS_CODEC_CHUNK) {
            int end = QTTS_MIN(start + QTTS_CODEC_CHUNK, s->n_frames);
            st = decode_deliver(s, start, end, err);
            s->decoded = end;
        }
        if (!st && s->stretch) st = qtts_stretch_finish(s->stretch, emit_audio, s, err);
        break;
    }
    if (result) fill_result(s, result);
    session_reset(s);
    return st;
}

void qtts_session_cancel(qtts_session *s) {
    if (s) session_reset(s);
}

void qtts_session_set_manual_decode(qtts_session *s, bool manual) { s->manual_setting = manual; }

void qtts_session_set_prompt_reuse(qtts_session *s, bool reuse) { s->no_prompt_reuse = !reuse; }

int qtts_session_decode_due(const qtts_session *s) {
    return s && (s->state == SES_RUNNING || s->state == SES_DONE) ? s->due : 0;
}

qtts_status qtts_session_decode(qtts_session *s, int max_frames, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    switch (s->state) {
    case SES_IDLE:
        return qtts_fail(err, QTTS_ERR_INVALID, "the session has no request to decode");
    case SES_FAILED:
        *err = s->err;
        return s->err.status ? s->err.status : QTTS_ERR_INVALID;
    default:
        break;
    }
    const qtts_status st = decode_due_audio(s, max_frames, err);
    if (st) {   /* like a failure inside a step: the request has failed */
        s->state = SES_FAILED;
        s->err = *err;
        s->err.status = st;
    }
    return st;
}

qtts_status qtts_synthesize(qtts_session *s, const qtts_request *req, qtts_result *result,
                            qtts_err *err) {
    if (result) memset(result, 0, sizeof *result);
    qtts_status st = qtts_session_start(s, req, err);
    if (st) {
        if (result) snprintf(result->warning, sizeof result->warning, "%s", s->warning);
        return st;
    }
    while (qtts_session_active(s)) {
        if ((st = qtts_step_batch(&s, 1, NULL)) && qtts_session_active(s)) {
            qtts_session_cancel(s);
            return qtts_fail(err, st, "step failed (%s)", qtts_status_str(st));
        }
        if (qtts_session_decode_due(s)) qtts_session_decode(s, 0, NULL);   /* failure: finish */
    }
    return qtts_session_finish(s, result, err);
}

/* ==== misc ================================================================= */

qtts_status qtts_write_wav(const char *path, const float *pcm, size_t n, int sample_rate,
                           bool float32, qtts_err *err) {
    return qtts_wav_write(path, pcm, n, 1, sample_rate, float32 ? QTTS_WAV_F32 : QTTS_WAV_S16, err);
}

static void emitf(void (*line)(void *, const char *), void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emitf(void (*line)(void *, const char *), void *user, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    line(user, buf);
}

static void list_set(const qtts_st_set *set, const char *label,
                     void (*line)(void *, const char *), void *user) {
    size_t n = qtts_st_set_count(set);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += qtts_st_set_at(set, i)->nbytes;
    const char *qv = qtts_st_set_metadata(set, QTTS_ST_QUANT_KEY);
    emitf(line, user, "%s: %zu tensors, %.1f MB%s%s%s", label, n, bytes / 1e6,
          qv ? " (quantized model file, format version " : "", qv ? qv : "",
          !qv ? "" : !strcmp(qv, QTTS_ST_QUANT_VERSION) ? ": packed rows, used in place)"
                                                      : ": plain blocks, repacked at load)");
    for (size_t i = 0; i < n; i++) {
        const qtts_tensor *t = qtts_st_set_at(set, i);
        char shape[160] = "";
        for (int d = 0; d < t->rank; d++) {
            size_t l = strlen(shape);
            snprintf(shape + l, sizeof shape - l, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        }
        emitf(line, user, "  %-72s %-5s [%s]", t->name, qtts_dtype_name(t->dtype), shape);
    }
}

qtts_status qtts_inspect(const char *dir, void (*line)(void *, const char *), void *user,
                         qtts_err *err) {
    qtts_config cfg;
    qtts_status st = qtts_config_load(dir, &cfg, err);
    if (st) return st;
    static const char *kinds[] = {"custom_voice", "voice_design", "base"};
    emitf(line, user, "model: %s, type %s, size %s", dir, kinds[cfg.model_type], cfg.model_size);
    emitf(line, user, "talker: hidden %d, inter %d, layers %d, heads %d/%d x %d, text %d->%d",
          cfg.talker.hidden, cfg.talker.inter, cfg.talker.layers, cfg.talker.heads,
          cfg.talker.kv_heads, cfg.talker.head_dim, cfg.text_vocab, cfg.text_hidden);
    emitf(line, user, "code predictor: hidden %d, inter %d, layers %d, heads %d/%d x %d",
          cfg.cp.hidden, cfg.cp.inter, cfg.cp.layers, cfg.cp.heads, cfg.cp.kv_heads,
          cfg.cp.head_dim);
    for (int i = 0; i < cfg.n_speakers; i++)
        emitf(line, user, "speaker %s (codec id %d)%s%s", cfg.speakers[i].name,
              cfg.speakers[i].id, cfg.speakers[i].dialect[0] ? ", dialect " : "",
              cfg.speakers[i].dialect);
    for (int i = 0; i < cfg.n_langs; i++)
        emitf(line, user, "language %s (codec id %d)", cfg.langs[i].name, cfg.langs[i].id);
    qtts_st_set *set = NULL;
    if ((st = qtts_st_set_open(dir, "model", &set, err))) return st;
    list_set(set, "model.safetensors", line, user);
    qtts_st_set_close(set);
    char sub[4096];
    if (!qtts_path_join(sub, sizeof sub, dir, "speech_tokenizer"))
        return qtts_fail(err, QTTS_ERR_INVALID, "model path too long");
    if ((st = qtts_st_set_open(sub, "model", &set, err))) return st;
    list_set(set, "speech_tokenizer/model.safetensors", line, user);
    qtts_st_set_close(set);
    return QTTS_OK;
}

/* ==== voice profiles ======================================================= */

qtts_status qtts_voice_create(const qtts_engine *e, const void *audio, size_t audio_len,
                              const char *ref_text, bool x_vector_only, const char *language,
                              qtts_voice **out, qtts_err *err) {
    *out = NULL;
    if (language && *language && strcasecmp(language, "auto") != 0 &&
        !qtts_config_find_lang(&e->cfg, language))
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown language '%.64s'", language);
    return qtts_voice_build(&e->cfg, e->spk, e->cenc, audio, audio_len, ref_text, x_vector_only,
                            language && strcasecmp(language, "auto") != 0 ? language : NULL, out,
                            err);
}

qtts_status qtts_voice_load(const qtts_engine *e, const char *path, qtts_voice **out,
                            qtts_err *err) {
    return qtts_voice_read(&e->cfg, path, out, err);
}

qtts_status qtts_voice_load_fd(const qtts_engine *e, int fd, const char *name, qtts_voice **out,
                               qtts_err *err) {
    *out = NULL;
    const int dup_fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (dup_fd < 0)
        return qtts_fail(err, QTTS_ERR_IO, "%s: bad file descriptor: %s", name ? name : "voice",
                         strerror(errno));
    return qtts_voice_read_fd(&e->cfg, dup_fd, name ? name : "voice", out, err);
}

void qtts_thread_set_serial(bool serial) { qtts_threads_set_local_serial(serial); }
