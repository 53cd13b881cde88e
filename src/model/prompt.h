/*
 * prompt.h - the talker's prefill embedding matrix and trailing-text queue
 * for every prompt layout of the reference (spec §4).
 *
 * Inputs are token ids of whole chat templates (tokenized once, then
 * sliced, so a text starting with "\n" merges with the role newline exactly
 * as in the reference):
 *   input_ids    "<|im_start|>assistant\n" + text + "<|im_end|>\n<|im_start|>assistant\n"
 *                role = ids[0:3], text T = ids[3:n-5]
 *   instruct_ids "<|im_start|>user\n" + instruct + "<|im_end|>\n"   (used whole)
 *   ref_ids      "<|im_start|>assistant\n" + ref_text + "<|im_end|>\n"  ref = ids[3:n-2]
 *
 * Output rows (H wide; P = text projection, E = codec embedding, X = speaker):
 *   [P(instruct) ...] [P(role) x3]
 *   codec prefix K = (lang ? [think, think_bos, lang, think_eos]
 *                          : [nothink, think_bos, think_eos]) + [X] + [pad, bos]
 *   rows Ppad+Q[j] for j < M-2, Pbos+Q[M-2]          (M = |Q|)
 *   then one of:
 *     streaming:     P(T1)+E(bos)                     R = [P(T2..Tn), Peos]
 *     non-streaming: P(Tk)+E(pad) k=1..n, Peos+E(pad), Ppad+E(bos)    R = [Ppad]
 *     ICL (ref codes [F,16] + ref ids): Tx = [P(ref), P(T), Peos] (a rows),
 *        Cx = [E(bos), codec_sum(ref_codes[f])] (b = F+1 rows)
 *        non-streaming: Tx+E(pad), Cx+Ppad              R = [Ppad]
 *        streaming: a > b: Tx[:b]+Cx, R = Tx[b:];  else (Tx padded with Ppad)+Cx, R = [Ppad]
 */
#ifndef QTTS_PROMPT_H
#define QTTS_PROMPT_H

#include "talker.h"

typedef struct {
    const int32_t *input_ids;     /* [n_input] target template tokens (required, n >= 8) */
    int n_input;
    const int32_t *instruct_ids;  /* [n_instruct] instruct template tokens; NULL = none */
    int n_instruct;
    const int32_t *ref_ids;       /* [n_ref] reference template tokens (ICL only, n >= 5) */
    int n_ref;
    const char *language;         /* "auto" (or NULL) or a codec_language_id key, any case */
    const char *speaker;          /* CustomVoice preset name (any case); NULL/"" = none */
    const float *xvector;         /* [H] Base clone speaker vector; NULL = none */
    const int32_t *ref_codes;     /* [ref_frames, G] ICL reference codes; NULL = not ICL */
    int ref_frames;
    bool non_streaming;           /* all text in the prefill (wrapper default for CV/VD) */
} qtts_prompt_spec;

typedef struct {
    int len;           /* L prefill rows */
    float *embeds;     /* [L, H] */
    int n_trailing;    /* >= 1 */
    float *trailing;   /* [n_trailing, H]: added to decode step k's input while k < n_trailing,
                          then Ppad */
} qtts_prompt;

/* Build the prompt. Errors (QTTS_ERR_INVALID): unknown language or speaker
 * (the message lists the valid ones), a speaker on a model without preset
 * speakers, an x-vector on a non-Base model, both speaker and x-vector, ICL
 * without x-vector or ref_ids, ids or codes out of range, templates too
 * short. out is zeroed on failure. */
qtts_status qtts_prompt_build(const qtts_talker_weights *w, const qtts_config *cfg,
                              const qtts_prompt_spec *spec, qtts_prompt *out, qtts_err *err);
void qtts_prompt_free(qtts_prompt *p);  /* NULL ok; frees the arrays, not p */

/* Whether the official wrapper honours an instruct for this model: false for
 * the 0.6B CustomVoice model (its wrapper drops it) and for Base (clone has
 * no instruct). The engine decides whether to drop and warn. */
bool qtts_prompt_instruct_honoured(const qtts_config *cfg);

/* The chat templates above as new heap strings (qtts_free; NULL on OOM). */
char *qtts_prompt_text_template(const char *text);
char *qtts_prompt_ref_template(const char *ref_text);
char *qtts_prompt_instruct_template(const char *instruct);

#endif
