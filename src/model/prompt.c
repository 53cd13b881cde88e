/*
 * prompt.c - prefill rows and trailing-text queue (layouts in prompt.h).
 *
 * Dataflow: the three token lists are projected once, whole
 * (P: [n, H] each); the codec prefix Q [M, H] is gathered from codec
 * embedding rows (+ the speaker row or x-vector); the output rows are then
 * element-wise sums of one text-side row and one codec-side row, written
 * straight into embeds [L, H] and trailing [n_trailing, H].
 */
#include "prompt.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static char *concat3(const char *a, const char *b, const char *c) {
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *s = qtts_malloc(na + nb + nc + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    return s;
}

char *qtts_prompt_text_template(const char *text) {
    return concat3("<|im_start|>assistant\n", text, "<|im_end|>\n<|im_start|>assistant\n");
}
char *qtts_prompt_ref_template(const char *ref_text) {
    return concat3("<|im_start|>assistant\n", ref_text, "<|im_end|>\n");
}
char *qtts_prompt_instruct_template(const char *instruct) {
    return concat3("<|im_start|>user\n", instruct, "<|im_end|>\n");
}

bool qtts_prompt_instruct_honoured(const qtts_config *cfg) {
    if (cfg->model_type == QTTS_MODEL_BASE) return false;
    if (cfg->model_type == QTTS_MODEL_CUSTOM_VOICE && strcmp(cfg->model_size, "0b6") == 0)
        return false;
    return true;
}

void qtts_prompt_free(qtts_prompt *p) {
    if (!p) return;
    qtts_free(p->embeds);
    qtts_free(p->trailing);
    memset(p, 0, sizeof(*p));
}

/* Languages a user may name: "auto" and every non-dialect key (the
 * reference wrapper's list). */
static bool lang_selectable(const qtts_named_id *l) { return !strstr(l->name, "dialect"); }

static qtts_status bad_language(const qtts_config *cfg, const char *lang, qtts_err *err) {
    char list[QTTS_ERR_MAX] = "auto";
    size_t n = strlen(list);
    for (int i = 0; i < cfg->n_langs && n < sizeof list; i++)
        if (lang_selectable(&cfg->langs[i]))
            n += (size_t)snprintf(list + n, sizeof list - n, ", %s", cfg->langs[i].name);
    return qtts_fail(err, QTTS_ERR_INVALID, "unknown language \"%.64s\"; valid: %s", lang, list);
}

static qtts_status bad_speaker(const qtts_config *cfg, const char *spk, qtts_err *err) {
    char list[QTTS_ERR_MAX] = "";
    size_t n = 0;
    for (int i = 0; i < cfg->n_speakers && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "",
                              cfg->speakers[i].name);
    return qtts_fail(err, QTTS_ERR_INVALID, "unknown speaker \"%.64s\"; valid: %s", spk, list);
}

/* Allocate [a, b] floats or NULL (checked). */
static float *rows_alloc(int a, int b) {
    uint64_t n;
    if (a < 0 || b < 0 || !qtts_mul_ok((uint64_t)a, (uint64_t)b, &n) ||
        !qtts_mul_ok(n, sizeof(float), &n) || n > SIZE_MAX)
        return NULL;
    return qtts_aligned_alloc(n ? (size_t)n : 1);
}

/* y[H] = a[H] + b[H] */
static void add_rows(float *y, const float *a, const float *b, int H) {
    for (int i = 0; i < H; i++) y[i] = a[i] + b[i];
}

qtts_status qtts_prompt_build(const qtts_talker_weights *w, const qtts_config *cfg,
                              const qtts_prompt_spec *spec, qtts_prompt *out, qtts_err *err) {
    memset(out, 0, sizeof(*out));
    const int H = w->hidden, G = w->n_groups;
    const bool icl = spec->ref_codes != NULL;

    /* ---- validation ---- */
    if (!spec->input_ids || spec->n_input < 8)
        return qtts_fail(err, QTTS_ERR_INVALID, "prompt: target template has %d tokens (< 8)",
                         spec->n_input);
    if (spec->n_instruct < 0 || (spec->n_instruct > 0 && !spec->instruct_ids))
        return qtts_fail(err, QTTS_ERR_INVALID, "prompt: bad instruct token list");
    const int n_instruct = spec->instruct_ids ? spec->n_instruct : 0;

    const char *lang = spec->language ? spec->language : "auto";
    int lang_id = -1;
    if (strcasecmp(lang, "auto") != 0) {
        const qtts_named_id *l = qtts_config_find_lang(cfg, lang);
        if (!l || !lang_selectable(l)) return bad_language(cfg, lang, err);
        lang_id = l->id;
    }

    const bool has_name = spec->speaker && spec->speaker[0];
    const qtts_speaker *spk = NULL;
    if (has_name) {
        if (cfg->n_speakers == 0)
            return qtts_fail(err, QTTS_ERR_INVALID, "speaker \"%.64s\" given but this model has "
                             "no preset speakers", spec->speaker);
        if (spec->xvector)
            return qtts_fail(err, QTTS_ERR_INVALID, "prompt: both a speaker name and an x-vector");
        if (!(spk = qtts_config_find_speaker(cfg, spec->speaker)))
            return bad_speaker(cfg, spec->speaker, err);
        /* Dialect speakers switch the language tag for Chinese/auto. */
        if (spk->dialect[0] && (lang_id < 0 || strcasecmp(lang, "chinese") == 0)) {
            const qtts_named_id *d = qtts_config_find_lang(cfg, spk->dialect);
            if (!d)
                return qtts_fail(err, QTTS_ERR_FORMAT, "config: speaker %s has dialect %s, which "
                                 "is not in codec_language_id", spk->name, spk->dialect);
            lang_id = d->id;
        }
    }
    if (spec->xvector && cfg->model_type != QTTS_MODEL_BASE)
        return qtts_fail(err, QTTS_ERR_INVALID, "prompt: an x-vector needs a Base model");
    if (icl) {
        if (!spec->xvector)
            return qtts_fail(err, QTTS_ERR_INVALID, "prompt: ICL reference codes need the x-vector");
        if (!spec->ref_ids || spec->n_ref < 5)
            return qtts_fail(err, QTTS_ERR_INVALID, "prompt: ICL needs the reference text template "
                             "(%d tokens < 5)", spec->ref_ids ? spec->n_ref : 0);
        if (spec->ref_frames < 1 || spec->ref_frames > (1 << 20))
            return qtts_fail(err, QTTS_ERR_INVALID, "prompt: %d reference frames", spec->ref_frames);
        for (size_t i = 0; i < (size_t)spec->ref_frames * G; i++)
            if (spec->ref_codes[i] < 0 || spec->ref_codes[i] >= w->cp_vocab)
                return qtts_fail(err, QTTS_ERR_INVALID, "prompt: reference code %d at [%zu, %zu] "
                                 "outside [0, %d)", spec->ref_codes[i], i / G, i % G, w->cp_vocab);
    } else if (spec->ref_ids) {
        return qtts_fail(err, QTTS_ERR_INVALID, "prompt: reference text given without reference "
                         "codes");
    }

    /* ---- sizes ---- */
    const int n_in = spec->n_input;
    const int n_text = n_in - 8;                       /* T = ids[3 : n-5] */
    const int n_reftext = icl ? spec->n_ref - 5 : 0;   /* ref = ref_ids[3 : n-2] */
    const bool has_x = spk != NULL || spec->xvector != NULL;
    const int n_k = lang_id < 0 ? 3 : 4;
    const int M = n_k + (has_x ? 1 : 0) + 2;
    const int a = n_reftext + n_text + 1, b = icl ? spec->ref_frames + 1 : 0;
    int L = n_instruct + 3 + (M - 1), n_trail;
    if (icl && spec->non_streaming) {
        L += a + b;
        n_trail = 1;
    } else if (icl) {
        L += b;
        n_trail = a > b ? a - b : 1;
    } else if (spec->non_streaming) {
        L += n_text + 2;
        n_trail = 1;
    } else {
        L += 1;
        n_trail = QTTS_MAX(n_in - 9, 0) + 1;  /* P(ids[4 : n-5]) + Peos */
    }

    /* ---- text side: P of every token list ---- */
    qtts_status s = QTTS_OK;
    float *p_in = rows_alloc(n_in, H), *p_ins = rows_alloc(n_instruct, H);
    float *p_ref = rows_alloc(icl ? spec->n_ref : 0, H), *q = rows_alloc(M, H);
    float *cx = rows_alloc(b, H);
    out->embeds = rows_alloc(L, H);
    out->trailing = rows_alloc(n_trail, H);
    if (!p_in || !p_ins || !p_ref || !q || !cx || !out->embeds || !out->trailing) {
        s = qtts_fail(err, QTTS_ERR_NOMEM, "prompt: out of memory (%d rows)", L);
        goto done;
    }
    if ((s = qtts_talker_text_proj(w, spec->input_ids, n_in, p_in, err))) goto done;
    if (n_instruct && (s = qtts_talker_text_proj(w, spec->instruct_ids, n_instruct, p_ins, err)))
        goto done;
    if (icl && (s = qtts_talker_text_proj(w, spec->ref_ids, spec->n_ref, p_ref, err))) goto done;

    /* ---- codec prefix Q [M, H] ---- */
    int k_ids[4], m = 0;
    if (lang_id < 0) {
        k_ids[0] = cfg->codec_nothink_id;
        k_ids[1] = cfg->codec_think_bos_id;
        k_ids[2] = cfg->codec_think_eos_id;
    } else {
        k_ids[0] = cfg->codec_think_id;
        k_ids[1] = cfg->codec_think_bos_id;
        k_ids[2] = lang_id;
        k_ids[3] = cfg->codec_think_eos_id;
    }
    for (; m < n_k; m++) qtts_talker_codec_row(w, k_ids[m], q + (size_t)m * H);
    if (spk) qtts_talker_codec_row(w, spk->id, q + (size_t)m++ * H);
    else if (spec->xvector) memcpy(q + (size_t)m++ * H, spec->xvector, sizeof(float) * H);
    qtts_talker_codec_row(w, cfg->codec_pad_id, q + (size_t)m++ * H);
    qtts_talker_codec_row(w, cfg->codec_bos_id, q + (size_t)m++ * H);
    QTTS_ASSERT(m == M);

    /* ---- rows ---- */
    float *row = out->embeds;
#define EMIT_COPY(src) (memcpy(row, (src), sizeof(float) * H), row += H)
#define EMIT_SUM(x, y) (add_rows(row, (x), (y), H), row += H)
    for (int i = 0; i < n_instruct; i++) EMIT_COPY(p_ins + (size_t)i * H);
    for (int i = 0; i < 3; i++) EMIT_COPY(p_in + (size_t)i * H);
    for (int j = 0; j < M - 1; j++) EMIT_SUM(j < M - 2 ? w->p_pad : w->p_bos, q + (size_t)j * H);

    const float *e_pad = q + (size_t)(M - 2) * H, *e_bos = q + (size_t)(M - 1) * H;
    const float *text0 = p_in + (size_t)3 * H;  /* P(T1) */
    if (icl) {
        /* Tx[k]: ref tokens, then target tokens, then Peos. */
#define TX(k) ((k) < n_reftext ? p_ref + (size_t)(3 + (k)) * H                               \
               : (k) < n_reftext + n_text ? text0 + (size_t)((k) - n_reftext) * H : w->p_eos)
        memcpy(cx, e_bos, sizeof(float) * H);
        for (int f = 0; f < spec->ref_frames; f++)
            qtts_talker_codec_sum(w, spec->ref_codes + (size_t)f * G, cx + (size_t)(f + 1) * H);
        if (spec->non_streaming) {
            for (int k = 0; k < a; k++) EMIT_SUM(TX(k), e_pad);
            for (int j = 0; j < b; j++) EMIT_SUM(cx + (size_t)j * H, w->p_pad);
            memcpy(out->trailing, w->p_pad, sizeof(float) * H);
        } else {
            for (int j = 0; j < b; j++) EMIT_SUM(j < a ? TX(j) : w->p_pad, cx + (size_t)j * H);
            if (a > b)
                for (int k = b; k < a; k++)
                    memcpy(out->trailing + (size_t)(k - b) * H, TX(k), sizeof(float) * H);
            else
                memcpy(out->trailing, w->p_pad, sizeof(float) * H);
        }
#undef TX
    } else if (spec->non_streaming) {
        for (int k = 0; k < n_text; k++) EMIT_SUM(text0 + (size_t)k * H, e_pad);
        EMIT_SUM(w->p_eos, e_pad);
        EMIT_SUM(w->p_pad, e_bos);
        memcpy(out->trailing, w->p_pad, sizeof(float) * H);
    } else {
        /* ids[3] rides on the codec bos slot (the <|im_end|> token when the text is empty,
         * as in the reference's slicing). */
        EMIT_SUM(text0, e_bos);
        for (int k = 0; k < n_trail - 1; k++)
            memcpy(out->trailing + (size_t)k * H, p_in + (size_t)(4 + k) * H, sizeof(float) * H);
        memcpy(out->trailing + (size_t)(n_trail - 1) * H, w->p_eos, sizeof(float) * H);
    }
#undef EMIT_COPY
#undef EMIT_SUM
    QTTS_ASSERT(row == out->embeds + (size_t)L * H);
    out->len = L;
    out->n_trailing = n_trail;
done:
    qtts_free(p_in);
    qtts_free(p_ins);
    qtts_free(p_ref);
    qtts_free(q);
    qtts_free(cx);
    if (s) qtts_prompt_free(out);
    return s;
}
