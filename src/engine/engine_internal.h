/*
 * engine_internal.h - hooks into an open engine for the benchmark
 * (app/bench.c) and tests; not part of the public API.
 *
 * Stage statistics: qtts_engine_stats_enable wraps the engine's backend in
 * a timing decorator (src/engine/stats.c) that adds the wall time of every
 * prefill, talker step and code-predictor frame to a counter block, and
 * makes the engine time its codec decodes. Without it the normal path
 * carries no timers (one pointer test per decoded window). Enable it right
 * after qtts_engine_open, before any session exists; the counters are
 * plain (not atomic): read them from the thread that synthesizes.
 */
#ifndef QTTS_ENGINE_INTERNAL_H
#define QTTS_ENGINE_INTERNAL_H

#include "backend/backend.h"
#include "model/codec_decoder.h"
#include "model/talker.h"
#include "qwen3_tts.h"

typedef struct {
    double prefill_s;          /* backend prefill calls */
    int64_t prefills, prefill_rows;
    double talker_s;           /* talker steps (single and batched) */
    int64_t talker_calls, talker_rows;
    double cp_s;               /* code-predictor frames (single and batched) */
    int64_t cp_calls, cp_rows;
    double codec_s;            /* codec decoding, in the engine */
    int64_t codec_calls;
    int64_t codec_frames;      /* frames of audio delivered by those calls */
    int64_t codec_frames_run;  /* frames run through the decoder (left context included) */
    double ref_skip_s;         /* in-context clones: skipping the reference frames */
    int64_t ref_skip_frames;   /*   (qtts_codec_stream_skip), not in codec_s */
} qtts_engine_stats;

qtts_status qtts_engine_stats_enable(qtts_engine *e, qtts_error *err);
void qtts_engine_stats_get(const qtts_engine *e, qtts_engine_stats *out);  /* zeros if off */
void qtts_engine_stats_reset(qtts_engine *e);

/* The engine's serial_codec (qtts_engine_options) from the next request
 * on, for the benchmark to time the stages (serial) and the same request
 * as users get it; not while a session runs. */
void qtts_engine_set_serial_codec(qtts_engine *e, bool serial);

/* The loaded stages (read-only views). */
const qtts_talker_weights *qtts_engine_talker(const qtts_engine *e);
const qtts_codec_decoder *qtts_engine_codec(const qtts_engine *e);

/* A backend that forwards to inner (which it then owns and destroys)
 * and adds the time of each stage to *stats. */
qtts_status qtts_backend_timed(qtts_backend *inner, qtts_engine_stats *stats, qtts_backend **out,
                               qtts_error *err);

#endif
