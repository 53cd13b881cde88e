/*
 * backend.h - the seam between the generation loop and the hardware.
 *
 * A backend runs whole decode-time stages, never single ops: the talker
 * prefill, one talker decode step, the 15-pass code-predictor loop of a
 * frame, and a codec-decoder window. That granularity is the design rule
 * for GPU backends: weights, KV caches and activations stay resident on the
 * device, a step is encoded once and synchronised once (the host needs the
 * codebook-0 logits to apply the reference's sampling rules), and the whole
 * code-predictor loop runs on the device with one sync per frame. Per-op
 * offload was measured elsewhere to be slower than the CPU.
 *
 * The host keeps everything that is cheap and request-shaped: tokenization,
 * prompt rows (text projection, codec embedding rows), the codebook-0
 * sampling rules, and the frame bookkeeping (model/generate.c).
 *
 * Batching: step_batch and cp_frame_batch advance several sequences at
 * once (a server's scheduler keeps many requests in flight): each weight is
 * read once for the whole batch, while attention, sampling and every other
 * per-sequence stage use each sequence's own state, position, sampler
 * parameters and RNG. A sequence's outputs are bit-identical to the
 * single-sequence call, whatever else shares the batch; a sequence that
 * fails (its item's status) does not affect the others.
 *
 * Ownership: a backend borrows the loaded weights (which outlive it); a
 * qtts_seq is one sequence's mutable state on the backend (KV caches,
 * scratch) and belongs to one session. A batched call uses the sequences
 * it is given (and only those) on the calling thread.
 *
 * Only backend.c knows which backends are compiled in.
 */
#ifndef QTTS_BACKEND_H
#define QTTS_BACKEND_H

#include "../base/base.h"
#include "../model/codec_decoder.h"
#include "../model/sampling.h"
#include "../model/talker.h"

typedef struct qtts_backend qtts_backend;
typedef struct qtts_seq qtts_seq;

/* One sequence's part of step_batch: step's arguments and its own result. */
typedef struct {
    qtts_seq *seq;
    const int32_t *codes;     /* [G] the previous frame */
    const float *text_row;    /* [H] */
    float *logits, *hidden;   /* out: [V], [H] */
    qtts_status status;       /* out: QTTS_OK or this sequence's failure */
    qtts_err *err;            /* out: its message when status != QTTS_OK; may be NULL */
} qtts_step_item;

/* One sequence's part of cp_frame_batch: cp_frame's arguments and its own result. */
typedef struct {
    qtts_seq *seq;
    const float *hidden;      /* [H] */
    int c0;
    const qtts_sampler_params *sp;
    qtts_rng *rng;
    int32_t *codes_out;       /* out: [G-1] */
    float *cp_logits;         /* out: [G-1, Vc] raw logits, or NULL */
    qtts_status status;       /* out */
    qtts_err *err;            /* out; may be NULL */
} qtts_cp_item;

typedef struct {
    const char *name;
    void (*destroy)(qtts_backend *be);

    /* A sequence whose talker KV cache holds max_pos positions. */
    qtts_status (*seq_new)(qtts_backend *be, int max_pos, qtts_seq **out, qtts_err *err);
    void (*seq_free)(qtts_backend *be, qtts_seq *s);  /* NULL ok */
    int (*seq_max_pos)(const qtts_backend *be, const qtts_seq *s);

    /* Reset s and run the talker over embeds[L, H] (positions 0..L-1);
     * logits[V] and hidden[H] (final-normed) of the last position. A
     * backend may skip the leading rows that are bit-identical to those
     * of s's previous prefill, whose KV s still holds (the CPU backend
     * does): the results are the same bits, only sooner. */
    qtts_status (*prefill)(qtts_backend *be, qtts_seq *s, const float *embeds, int L,
                           float *logits, float *hidden, qtts_err *err);

    /* One decode step: the talker input is the sum of the previous frame's
     * G codec embeddings (codes[G], unprojected) plus text_row[H]. */
    qtts_status (*step)(qtts_backend *be, qtts_seq *s, const int32_t *codes,
                        const float *text_row, float *logits, float *hidden, qtts_err *err);

    /* Codebooks 1..G-1 of a frame from the talker hidden[H] and c0.
     * cp_logits, if not NULL, receives the raw logits [G-1, Vc]. */
    qtts_status (*cp_frame)(qtts_backend *be, qtts_seq *s, const float *hidden, int c0,
                            const qtts_sampler_params *sp, qtts_rng *rng, int32_t *codes_out,
                            float *cp_logits, qtts_err *err);

    /* step for n distinct sequences as one batch: the n talker inputs go
     * through each layer's matmuls as n rows, attention per row against
     * the row's own KV cache and position. A failed item does not advance.
     * Non-zero return: nothing was done for any item (out of memory). */
    qtts_status (*step_batch)(qtts_backend *be, qtts_step_item *items, int n, qtts_err *err);

    /* cp_frame for n distinct sequences as one batch: each of the G-1
     * code-predictor passes is one batched pass over the live sequences,
     * each drawing with its own sampler parameters and RNG. A failed item
     * leaves the batch at that pass. Non-zero return: nothing was done. */
    qtts_status (*cp_frame_batch)(qtts_backend *be, qtts_cp_item *items, int n, qtts_err *err);

    /* One fresh codec-decoder run over codes[T, G]: wav[T * upsample]. */
    qtts_status (*codec_decode_window)(qtts_backend *be, const int32_t *codes, int T,
                                       float *wav, qtts_err *err);

    /* Optional ops, last (a table initialized in order, as backend_cuda.cu's,
     * leaves them NULL). */
    /* Optional (NULL: nothing is reused): the next prefill of s computes
     * every row (a benchmark of cold prefills). */
    void (*seq_forget)(qtts_backend *be, qtts_seq *s);
    /* Optional (NULL: 0): rows the last prefill of s took from the one
     * before instead of computing them. */
    int (*seq_reused)(const qtts_backend *be, const qtts_seq *s);
} qtts_backend_ops;

/* Implementations embed this as their first member. */
struct qtts_backend {
    const qtts_backend_ops *ops;
};

/* Opens backend `name` ("cpu") over loaded weights; QTTS_ERR_UNSUPPORTED
 * names the backends this build has when `name` is not one of them. */
qtts_status qtts_backend_open(const char *name, const qtts_talker_weights *talker,
                              const qtts_codec_decoder *codec, qtts_backend **out, qtts_err *err);
void qtts_backend_close(qtts_backend *be);  /* NULL ok */

/* Comma-separated names of the compiled-in backends. */
const char *qtts_backend_names(void);

#endif
