/*
 * config.c - config.json, generation_config.json and
 * speech_tokenizer/config.json read into a validated qtts_config.
 *
 * Every field the engine uses is required: a missing key, a value of the
 * wrong JSON type, or a value out of range is an error whose message names
 * the file and the key path, e.g.
 *   ".../config.json: talker_config.head_dim: missing"
 *   ".../config.json: talker_config.num_key_value_heads: 3 does not divide num_attention_heads 16"
 * The one exception is speaker_encoder_config (Base models only): the
 * shipped files carry just enc_dim and sample_rate and the reference fills
 * the rest from its class defaults, so absent fields take those defaults
 * (spec 2.5); the object itself must be present.
 *
 * The readers below use a sticky error: each get_* call is a no-op once an
 * error is recorded and returns 0, so a section is read straight through
 * and checked once at its end. Integers must be JSON integer literals;
 * float fields accept any finite number.
 *
 * Limits: sizes in [1, 1<<20]; layers <= 256; heads <= 1024; every id
 * inside its vocabulary; names 1..63 bytes without control characters,
 * unique ignoring ASCII case (lookups ignore case); at most QTTS_MAX_LANGS
 * languages and QTTS_MAX_SPEAKERS speakers.
 * Semantics the engine does not implement are refused rather than ignored:
 * num_code_groups other than QTTS_CODE_GROUPS, hidden_act other than silu,
 * rope_scaling other than the default M-RoPE (whose sections must sum to
 * head_dim/2); for the codec's encoder_config see config.h. Across files,
 * the codec must consume num_code_groups codes from codebooks of the code
 * predictor's vocabulary size.
 */
#include "config.h"

#include "../base/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_SIZE (1 << 20)
#define MAX_LAYERS 256
#define MAX_HEADS 1024
#define MAX_CONFIG_BYTES (1u << 20) /* real files are ~5 KB */

typedef struct {
    const char *file; /* path, for messages */
    qtts_err *err;
    qtts_status st;   /* first failure; later calls do nothing */
} rd;

/* Key names come from the file: at most 64 bytes of them are quoted, with
 * control characters (C0, DEL, C1: each of their bytes) replaced by '?',
 * so a message stays one short line and cannot drive a terminal. */
static void clean_key(char *out, size_t cap, const char *key) {
    size_t n = 0;
    for (; n < 64 && n + 4 < cap && key[n]; n++) {
        const int c = qtts_control_len(key + n, strlen(key + n));
        if (c == 2 && n + 1 < 64 && n + 5 < cap) {
            out[n++] = '?';
            out[n] = '?';
            continue;
        }
        out[n] = c == 1 ? '?' : key[n];
    }
    /* do not end inside a UTF-8 sequence */
    if (key[n]) {
        while (n > 0 && ((unsigned char)key[n] & 0xC0) == 0x80) n--;
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = 0;
}

static void rfail(rd *r, qtts_status st, const char *prefix, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void rfail(rd *r, qtts_status st, const char *prefix, const char *key, const char *fmt, ...) {
    if (r->st) return;
    char detail[256], k[80];
    clean_key(k, sizeof k, key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    r->st = st;
    qtts_fail(r->err, st, "%s: %s%s%s: %s", r->file, prefix ? prefix : "", prefix ? "." : "", k,
              detail);
}

/* Required member `key` of obj with the given type; NULL (and error) else. */
static const qtts_json *get_typed(rd *r, const qtts_json *obj, const char *prefix, const char *key,
                                  qtts_json_type t) {
    if (r->st) return NULL;
    const qtts_json *v = qtts_json_get(obj, key);
    if (!v) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "missing");
        return NULL;
    }
    if (v->type != t) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "must be %s %s, not %s",
              t == QTTS_JSON_ARRAY || t == QTTS_JSON_OBJECT ? "an" : "a", qtts_json_type_name(t),
              qtts_json_type_name(v->type));
        return NULL;
    }
    return v;
}

static bool int_in(rd *r, const qtts_json *v, const char *prefix, const char *key, int64_t lo,
                   int64_t hi, int *out) {
    if (!v->is_integer || !v->fits_int64) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "must be an integer");
        return false;
    }
    if (v->integer < lo || v->integer > hi) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "%lld out of range [%lld, %lld]",
              (long long)v->integer, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int)v->integer;
    return true;
}

static int get_int(rd *r, const qtts_json *obj, const char *prefix, const char *key, int64_t lo,
                   int64_t hi) {
    const qtts_json *v = get_typed(r, obj, prefix, key, QTTS_JSON_NUMBER);
    int out = 0;
    if (v && !int_in(r, v, prefix, key, lo, hi, &out)) out = 0;
    return out;
}

/* A finite number in (lo, hi] when lo_open, else [lo, hi]. */
static double get_num(rd *r, const qtts_json *obj, const char *prefix, const char *key, double lo,
                      double hi, bool lo_open) {
    const qtts_json *v = get_typed(r, obj, prefix, key, QTTS_JSON_NUMBER);
    if (!v) return 0;
    double x = v->number;
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "%g out of range %c%g, %g]", x, lo_open ? '(' : '[',
              lo, hi);
        return 0;
    }
    return x;
}

static bool get_bool(rd *r, const qtts_json *obj, const char *prefix, const char *key) {
    const qtts_json *v = get_typed(r, obj, prefix, key, QTTS_JSON_BOOL);
    return v && v->boolean;
}

/* An integer array of exactly n entries, each in [lo, hi]. */
static void get_int_array(rd *r, const qtts_json *obj, const char *prefix, const char *key, size_t n,
                          int64_t lo, int64_t hi, int *out) {
    const qtts_json *a = get_typed(r, obj, prefix, key, QTTS_JSON_ARRAY);
    if (!a) return;
    if (a->count != n) {
        rfail(r, QTTS_ERR_FORMAT, prefix, key, "must have %zu entries, not %zu", n, a->count);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s[%zu]", key, i);
        if (a->items[i]->type != QTTS_JSON_NUMBER) {
            rfail(r, QTTS_ERR_FORMAT, prefix, k, "must be an integer");
            return;
        }
        if (!int_in(r, a->items[i], prefix, k, lo, hi, &out[i])) return;
    }
}

/* A short name (language, speaker, dialect): 1..63 bytes, no control
 * characters. The JSON parser already guarantees valid UTF-8. */
static bool name_ok(rd *r, const char *prefix, const char *what, const char *s, size_t len) {
    if (len == 0 || len >= QTTS_NAME_MAX) {
        rfail(r, QTTS_ERR_FORMAT, prefix, what, "name of %zu bytes (must be 1..%d)", len,
              QTTS_NAME_MAX - 1);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (qtts_control_len(s + i, len - i)) {
            rfail(r, QTTS_ERR_FORMAT, prefix, what, "name contains a control character");
            return false;
        }
    }
    return true;
}

/* rope_scaling must be absent, null, or the M-RoPE object of the shipped
 * talker: rope type "default" (when given), "interleaved" a boolean (when
 * given), mrope_section integers summing to head_dim/2. For TTS all three
 * position rows are equal, so this is plain 1-D RoPE; any other scaling
 * type would change the math and is refused. */
static void check_rope_scaling(rd *r, const qtts_json *obj, const char *prefix, int head_dim) {
    if (r->st) return;
    const qtts_json *rs = qtts_json_get(obj, "rope_scaling");
    if (!rs || rs->type == QTTS_JSON_NULL) return;
    char p[96];
    snprintf(p, sizeof p, "%s.rope_scaling", prefix);
    if (rs->type != QTTS_JSON_OBJECT) {
        rfail(r, QTTS_ERR_FORMAT, prefix, "rope_scaling", "must be an object or null, not %s",
              qtts_json_type_name(rs->type));
        return;
    }
    static const char *const type_keys[] = {"rope_type", "type"};
    for (size_t i = 0; i < 2; i++) {
        const qtts_json *t = qtts_json_get(rs, type_keys[i]);
        if (!t) continue;
        if (t->type != QTTS_JSON_STRING || strcmp(t->str, "default") != 0) {
            rfail(r, QTTS_ERR_UNSUPPORTED, p, type_keys[i], "only \"default\" is supported");
            return;
        }
    }
    const qtts_json *il = qtts_json_get(rs, "interleaved");
    if (il && il->type != QTTS_JSON_BOOL) {
        rfail(r, QTTS_ERR_FORMAT, p, "interleaved", "must be a boolean");
        return;
    }
    const qtts_json *ms = get_typed(r, rs, p, "mrope_section", QTTS_JSON_ARRAY);
    if (!ms) return;
    if (ms->count == 0 || ms->count > 8) {
        rfail(r, QTTS_ERR_FORMAT, p, "mrope_section", "must have 1..8 entries, not %zu", ms->count);
        return;
    }
    int64_t sum = 0;
    for (size_t i = 0; i < ms->count; i++) {
        int s = 0;
        char k[64];
        snprintf(k, sizeof k, "mrope_section[%zu]", i);
        if (ms->items[i]->type != QTTS_JSON_NUMBER) {
            rfail(r, QTTS_ERR_FORMAT, p, k, "must be an integer");
            return;
        }
        if (!int_in(r, ms->items[i], p, k, 0, MAX_SIZE, &s)) return;
        sum += s;
    }
    if (sum != head_dim / 2)
        rfail(r, QTTS_ERR_FORMAT, p, "mrope_section", "sums to %lld, must be head_dim/2 = %d",
              (long long)sum, head_dim / 2);
}

/* The fields shared by the talker and the code predictor. */
static void read_stack(rd *r, const qtts_json *o, const char *prefix, qtts_stack_config *s) {
    s->hidden = get_int(r, o, prefix, "hidden_size", 1, MAX_SIZE);
    s->inter = get_int(r, o, prefix, "intermediate_size", 1, MAX_SIZE);
    s->layers = get_int(r, o, prefix, "num_hidden_layers", 1, MAX_LAYERS);
    s->heads = get_int(r, o, prefix, "num_attention_heads", 1, MAX_HEADS);
    s->kv_heads = get_int(r, o, prefix, "num_key_value_heads", 1, MAX_HEADS);
    s->head_dim = get_int(r, o, prefix, "head_dim", 2, MAX_SIZE);
    s->rms_eps = (float)get_num(r, o, prefix, "rms_norm_eps", 0, 1, true);
    s->rope_theta = get_num(r, o, prefix, "rope_theta", 0, 1e12, true);
    s->vocab = get_int(r, o, prefix, "vocab_size", 1, MAX_SIZE);
    s->num_code_groups = get_int(r, o, prefix, "num_code_groups", 2, 64);
    if (!r->st && s->num_code_groups != QTTS_CODE_GROUPS)
        rfail(r, QTTS_ERR_UNSUPPORTED, prefix, "num_code_groups",
              "%d is not supported (the 12 Hz models have %d codebooks per frame)",
              s->num_code_groups, QTTS_CODE_GROUPS);
    const qtts_json *act = get_typed(r, o, prefix, "hidden_act", QTTS_JSON_STRING);
    if (act && strcmp(act->str, "silu") != 0)
        rfail(r, QTTS_ERR_UNSUPPORTED, prefix, "hidden_act", "only \"silu\" is supported");
    if (r->st) return;
    if (s->head_dim % 2)
        rfail(r, QTTS_ERR_FORMAT, prefix, "head_dim", "%d must be even (RoPE rotates pairs)",
              s->head_dim);
    else if (s->heads % s->kv_heads)
        rfail(r, QTTS_ERR_FORMAT, prefix, "num_key_value_heads", "%d does not divide num_attention_heads %d",
              s->kv_heads, s->heads);
    else if ((int64_t)s->heads * s->head_dim > MAX_SIZE)
        rfail(r, QTTS_ERR_FORMAT, prefix, "head_dim", "num_attention_heads*head_dim = %lld exceeds %d",
              (long long)s->heads * s->head_dim, MAX_SIZE);
    check_rope_scaling(r, o, prefix, s->head_dim);
}

static int find_name(const qtts_named_id *v, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcasecmp(v[i].name, name) == 0) return i;
    return -1;
}

static int find_speaker_idx(const qtts_speaker *v, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcasecmp(v[i].name, name) == 0) return i;
    return -1;
}

/* codec_language_id, spk_id and spk_is_dialect (talker_config). */
static void read_names(rd *r, const qtts_json *tc, qtts_config *c) {
    const char *P = "talker_config";
    const qtts_json *langs = get_typed(r, tc, P, "codec_language_id", QTTS_JSON_OBJECT);
    const qtts_json *spk = get_typed(r, tc, P, "spk_id", QTTS_JSON_OBJECT);
    const qtts_json *dia = get_typed(r, tc, P, "spk_is_dialect", QTTS_JSON_OBJECT);
    if (r->st) return;
    if (langs->count > QTTS_MAX_LANGS) {
        rfail(r, QTTS_ERR_LIMIT, P, "codec_language_id", "%zu entries, more than %d", langs->count,
              QTTS_MAX_LANGS);
        return;
    }
    if (spk->count > QTTS_MAX_SPEAKERS) {
        rfail(r, QTTS_ERR_LIMIT, P, "spk_id", "%zu entries, more than %d", spk->count, QTTS_MAX_SPEAKERS);
        return;
    }
    const char *PL = "talker_config.codec_language_id", *PS = "talker_config.spk_id",
               *PD = "talker_config.spk_is_dialect";
    for (size_t i = 0; i < langs->count; i++) {
        const char *k = langs->keys[i];
        if (!name_ok(r, PL, k, k, langs->key_lens[i])) return;
        if (find_name(c->langs, c->n_langs, k) >= 0) {
            rfail(r, QTTS_ERR_FORMAT, PL, k, "duplicate name (names are case-insensitive)");
            return;
        }
        qtts_named_id *l = &c->langs[c->n_langs];
        if (langs->items[i]->type != QTTS_JSON_NUMBER) {
            rfail(r, QTTS_ERR_FORMAT, PL, k, "must be an integer");
            return;
        }
        if (!int_in(r, langs->items[i], PL, k, 0, c->talker.vocab - 1, &l->id)) return;
        memcpy(l->name, k, langs->key_lens[i] + 1);
        c->n_langs++;
    }
    for (size_t i = 0; i < spk->count; i++) {
        const char *k = spk->keys[i];
        if (!name_ok(r, PS, k, k, spk->key_lens[i])) return;
        if (find_speaker_idx(c->speakers, c->n_speakers, k) >= 0) {
            rfail(r, QTTS_ERR_FORMAT, PS, k, "duplicate name (names are case-insensitive)");
            return;
        }
        qtts_speaker *s = &c->speakers[c->n_speakers];
        if (spk->items[i]->type != QTTS_JSON_NUMBER) {
            rfail(r, QTTS_ERR_FORMAT, PS, k, "must be an integer");
            return;
        }
        if (!int_in(r, spk->items[i], PS, k, 0, c->talker.vocab - 1, &s->id)) return;
        memcpy(s->name, k, spk->key_lens[i] + 1);
        /* Every speaker has a spk_is_dialect entry: false, or the name of a
         * dialect in codec_language_id (the reference indexes it directly). */
        const qtts_json *d = qtts_json_get(dia, k);
        if (!d) {
            rfail(r, QTTS_ERR_FORMAT, PD, k, "missing");
            return;
        }
        if (d->type == QTTS_JSON_STRING) {
            if (!name_ok(r, PD, k, d->str, d->str_len)) return;
            if (find_name(c->langs, c->n_langs, d->str) < 0) {
                rfail(r, QTTS_ERR_FORMAT, PD, k, "dialect is not a key of codec_language_id");
                return;
            }
            memcpy(s->dialect, d->str, d->str_len + 1);
        } else if (d->type != QTTS_JSON_BOOL || d->boolean) {
            rfail(r, QTTS_ERR_FORMAT, PD, k, "must be false or a dialect name");
            return;
        }
        c->n_speakers++;
    }
    for (size_t i = 0; i < dia->count; i++) {
        if (!qtts_json_get(spk, dia->keys[i])) {
            rfail(r, QTTS_ERR_FORMAT, PD, dia->keys[i], "not a key of spk_id");
            return;
        }
    }
}

/* speaker_encoder_config (Base): class defaults for absent fields. */
static void read_speaker_encoder(rd *r, const qtts_json *root, qtts_config *c) {
    const char *P = "speaker_encoder_config";
    const qtts_json *se = get_typed(r, root, NULL, P, QTTS_JSON_OBJECT);
    if (!se) return;
    static const int def_ch[5] = {512, 512, 512, 512, 1536}, def_k[5] = {5, 3, 3, 3, 1},
                     def_d[5] = {1, 2, 3, 4, 1};
    c->has_speaker_encoder = true;
#define OPT_INT(field, key, def, lo, hi) \
    c->field = qtts_json_get(se, key) ? get_int(r, se, P, key, lo, hi) : (def)
    OPT_INT(spk_enc_dim, "enc_dim", 1024, 1, MAX_SIZE);
    OPT_INT(spk_sample_rate, "sample_rate", 24000, 8000, 192000);
    OPT_INT(spk_mel_dim, "mel_dim", 128, 1, 4096);
    OPT_INT(spk_attn_channels, "enc_attention_channels", 128, 1, 1 << 16);
    OPT_INT(spk_res2net_scale, "enc_res2net_scale", 8, 1, 64);
    OPT_INT(spk_se_channels, "enc_se_channels", 128, 1, 1 << 16);
#undef OPT_INT
#define OPT_ARR(field, key, def, lo, hi)                                    \
    do {                                                                    \
        if (qtts_json_get(se, key)) get_int_array(r, se, P, key, 5, lo, hi, c->field); \
        else memcpy(c->field, def, sizeof c->field);                        \
    } while (0)
    OPT_ARR(spk_channels, "enc_channels", def_ch, 1, 1 << 16);
    OPT_ARR(spk_kernels, "enc_kernel_sizes", def_k, 1, 63);
    OPT_ARR(spk_dilations, "enc_dilations", def_d, 1, 64);
#undef OPT_ARR
    if (r->st) return;
    for (int b = 1; b <= 3; b++)
        if (c->spk_channels[b] % c->spk_res2net_scale) {
            rfail(r, QTTS_ERR_FORMAT, P, "enc_res2net_scale",
                  "%d does not divide enc_channels[%d] = %d", c->spk_res2net_scale, b,
                  c->spk_channels[b]);
            return;
        }
    /* The x-vector is fed to the talker as an input embedding. */
    if (c->spk_enc_dim != c->talker.hidden)
        rfail(r, QTTS_ERR_FORMAT, P, "enc_dim", "%d != talker_config.hidden_size %d", c->spk_enc_dim,
              c->talker.hidden);
}

static void read_main(rd *r, const qtts_json *root, qtts_config *c) {
    const qtts_json *t = get_typed(r, root, NULL, "tts_model_type", QTTS_JSON_STRING);
    if (t) {
        if (!strcmp(t->str, "custom_voice")) c->model_type = QTTS_MODEL_CUSTOM_VOICE;
        else if (!strcmp(t->str, "voice_design")) c->model_type = QTTS_MODEL_VOICE_DESIGN;
        else if (!strcmp(t->str, "base")) c->model_type = QTTS_MODEL_BASE;
        else rfail(r, QTTS_ERR_UNSUPPORTED, NULL, "tts_model_type",
                   "must be one of custom_voice, voice_design, base");
    }
    const qtts_json *sz = get_typed(r, root, NULL, "tts_model_size", QTTS_JSON_STRING);
    if (sz) {
        if (strcmp(sz->str, "0b6") && strcmp(sz->str, "1b7"))
            rfail(r, QTTS_ERR_UNSUPPORTED, NULL, "tts_model_size", "must be one of 0b6, 1b7");
        else
            memcpy(c->model_size, sz->str, sz->str_len + 1);
    }

    const char *P = "talker_config", *PC = "talker_config.code_predictor_config";
    const qtts_json *tc = get_typed(r, root, NULL, P, QTTS_JSON_OBJECT);
    read_stack(r, tc, P, &c->talker);
    c->text_vocab = get_int(r, tc, P, "text_vocab_size", 1, MAX_SIZE);
    c->text_hidden = get_int(r, tc, P, "text_hidden_size", 1, MAX_SIZE);
    if (r->st) return;

    int cv = c->talker.vocab - 1, tv = c->text_vocab - 1;
    c->codec_pad_id = get_int(r, tc, P, "codec_pad_id", 0, cv);
    c->codec_bos_id = get_int(r, tc, P, "codec_bos_id", 0, cv);
    c->codec_eos_id = get_int(r, tc, P, "codec_eos_token_id", 0, cv);
    c->codec_think_id = get_int(r, tc, P, "codec_think_id", 0, cv);
    c->codec_nothink_id = get_int(r, tc, P, "codec_nothink_id", 0, cv);
    c->codec_think_bos_id = get_int(r, tc, P, "codec_think_bos_id", 0, cv);
    c->codec_think_eos_id = get_int(r, tc, P, "codec_think_eos_id", 0, cv);
    c->im_start_id = get_int(r, root, NULL, "im_start_token_id", 0, tv);
    c->im_end_id = get_int(r, root, NULL, "im_end_token_id", 0, tv);
    c->tts_pad_id = get_int(r, root, NULL, "tts_pad_token_id", 0, tv);
    c->tts_bos_id = get_int(r, root, NULL, "tts_bos_token_id", 0, tv);
    c->tts_eos_id = get_int(r, root, NULL, "tts_eos_token_id", 0, tv);
    read_names(r, tc, c);

    const qtts_json *cp = get_typed(r, tc, P, "code_predictor_config", QTTS_JSON_OBJECT);
    read_stack(r, cp, PC, &c->cp);
    if (r->st) return;
    if (c->cp.num_code_groups != c->talker.num_code_groups)
        rfail(r, QTTS_ERR_FORMAT, PC, "num_code_groups", "%d != talker_config.num_code_groups %d",
              c->cp.num_code_groups, c->talker.num_code_groups);

    if (c->model_type == QTTS_MODEL_BASE) read_speaker_encoder(r, root, c);
}

static void read_generation(rd *r, const qtts_json *g, qtts_config *c) {
    c->gen.do_sample = get_bool(r, g, NULL, "do_sample");
    c->gen.top_k = get_int(r, g, NULL, "top_k", 0, MAX_SIZE);
    c->gen.top_p = (float)get_num(r, g, NULL, "top_p", 0, 1, true);
    c->gen.temperature = (float)get_num(r, g, NULL, "temperature", 0, 100, true);
    c->gen.repetition_penalty = (float)get_num(r, g, NULL, "repetition_penalty", 0, 100, true);
    c->gen.subtalker_do_sample = get_bool(r, g, NULL, "subtalker_dosample");
    c->gen.subtalker_top_k = get_int(r, g, NULL, "subtalker_top_k", 0, MAX_SIZE);
    c->gen.subtalker_top_p = (float)get_num(r, g, NULL, "subtalker_top_p", 0, 1, true);
    c->gen.subtalker_temperature = (float)get_num(r, g, NULL, "subtalker_temperature", 0, 100, true);
    c->gen.max_new_tokens = get_int(r, g, NULL, "max_new_tokens", 1, MAX_SIZE);
}

static void read_codec(rd *r, const qtts_json *root, qtts_config *c) {
    const char *P = "decoder_config";
    const qtts_json *d = get_typed(r, root, NULL, P, QTTS_JSON_OBJECT);
    c->codec.codebook_size = get_int(r, d, P, "codebook_size", 1, MAX_SIZE);
    c->codec.codebook_dim = get_int(r, d, P, "codebook_dim", 2, MAX_SIZE);
    c->codec.latent_dim = get_int(r, d, P, "latent_dim", 1, MAX_SIZE);
    c->codec.decoder_dim = get_int(r, d, P, "decoder_dim", 1, MAX_SIZE);
    c->codec.hidden = get_int(r, d, P, "hidden_size", 1, MAX_SIZE);
    c->codec.inter = get_int(r, d, P, "intermediate_size", 1, MAX_SIZE);
    c->codec.head_dim = get_int(r, d, P, "head_dim", 2, MAX_SIZE);
    c->codec.heads = get_int(r, d, P, "num_attention_heads", 1, MAX_HEADS);
    c->codec.kv_heads = get_int(r, d, P, "num_key_value_heads", 1, MAX_HEADS);
    c->codec.layers = get_int(r, d, P, "num_hidden_layers", 1, MAX_LAYERS);
    c->codec.num_quantizers = get_int(r, d, P, "num_quantizers", 1, 64);
    c->codec.num_semantic_quantizers = get_int(r, d, P, "num_semantic_quantizers", 1, 64);
    c->codec.rms_eps = (float)get_num(r, d, P, "rms_norm_eps", 0, 1, true);
    c->codec.layer_scale_init = (float)get_num(r, d, P, "layer_scale_initial_scale", 0, 100, true);
    c->codec.rope_theta = get_num(r, d, P, "rope_theta", 0, 1e12, true);
    c->codec.sliding_window = get_int(r, d, P, "sliding_window", 1, MAX_SIZE);
    get_int_array(r, d, P, "upsample_rates", 4, 1, 64, c->codec.upsample_rates);
    get_int_array(r, d, P, "upsampling_ratios", 2, 1, 64, c->codec.upsampling_ratios);
    c->codec.decode_upsample_rate = get_int(r, root, NULL, "decode_upsample_rate", 1, MAX_SIZE);
    c->codec.output_sample_rate = get_int(r, root, NULL, "output_sample_rate", 8000, 192000);
    c->codec.input_sample_rate = get_int(r, root, NULL, "input_sample_rate", 8000, 192000);
    c->codec.encode_downsample_rate = get_int(r, root, NULL, "encode_downsample_rate", 1, MAX_SIZE);
    c->codec.encoder_valid_num_quantizers =
        get_int(r, root, NULL, "encoder_valid_num_quantizers", 1, 64);
    if (r->st) return;

    if (c->codec.codebook_dim % 2)
        rfail(r, QTTS_ERR_FORMAT, P, "codebook_dim", "%d must be even (codebook vectors are codebook_dim/2)",
              c->codec.codebook_dim);
    else if (c->codec.heads % c->codec.kv_heads)
        rfail(r, QTTS_ERR_FORMAT, P, "num_key_value_heads", "%d does not divide num_attention_heads %d",
              c->codec.kv_heads, c->codec.heads);
    else if ((int64_t)c->codec.heads * c->codec.head_dim > MAX_SIZE)
        rfail(r, QTTS_ERR_FORMAT, P, "head_dim", "num_attention_heads*head_dim exceeds %d", MAX_SIZE);
    else if (c->codec.num_semantic_quantizers >= c->codec.num_quantizers)
        rfail(r, QTTS_ERR_FORMAT, P, "num_semantic_quantizers", "%d must be below num_quantizers %d",
              c->codec.num_semantic_quantizers, c->codec.num_quantizers);
    else if (c->codec.decoder_dim % 16)
        rfail(r, QTTS_ERR_FORMAT, P, "decoder_dim",
              "%d must be divisible by 16 (halved by each of the 4 decoder blocks)", c->codec.decoder_dim);
    if (r->st) return;
    int64_t up = 1;
    for (int i = 0; i < 4; i++) up *= c->codec.upsample_rates[i];
    for (int i = 0; i < 2; i++) up *= c->codec.upsampling_ratios[i];
    if (up != c->codec.decode_upsample_rate)
        rfail(r, QTTS_ERR_FORMAT, NULL, "decode_upsample_rate",
              "%d != product of upsample_rates and upsampling_ratios (%lld)",
              c->codec.decode_upsample_rate, (long long)up);
}

/* ---- speech_tokenizer/config.json: encoder_config ----------------------
 * The Mimi encoder (reference audio -> codes). Every key read here is used
 * by the reference's encode path and required; semantics the encoder does
 * not implement are refused (see config.h). Limits keep every derived size
 * small: at most QTTS_ENC_MAX_RATIOS strides, residual dilations and
 * channel counts bounded so no product overflows an int. */
#define ENC_MAX_KERNEL 63
#define ENC_MAX_DILATION 4096

/* A string member that must equal `want`; anything else is refused. */
static void require_str(rd *r, const qtts_json *o, const char *prefix, const char *key,
                        const char *want) {
    const qtts_json *v = get_typed(r, o, prefix, key, QTTS_JSON_STRING);
    if (v && strcmp(v->str, want) != 0)
        rfail(r, QTTS_ERR_UNSUPPORTED, prefix, key, "only \"%s\" is supported", want);
}

/* A boolean member that must equal `want`; the other value is refused. */
static void require_bool(rd *r, const qtts_json *o, const char *prefix, const char *key, bool want) {
    const qtts_json *v = get_typed(r, o, prefix, key, QTTS_JSON_BOOL);
    if (v && v->boolean != want)
        rfail(r, QTTS_ERR_UNSUPPORTED, prefix, key, "only %s is supported", want ? "true" : "false");
}

static void read_codec_encoder(rd *r, const qtts_json *root, qtts_config *c) {
    const char *P = "encoder_config";
    const qtts_json *e = get_typed(r, root, NULL, P, QTTS_JSON_OBJECT);
    if (!e) return;
    qtts_codec_enc_config *E = &c->codec_enc;

    E->sampling_rate = get_int(r, e, P, "sampling_rate", 8000, 192000);
    E->frame_rate = get_num(r, e, P, "_frame_rate", 0, 192000, true);
    if (get_int(r, e, P, "audio_channels", 1, MAX_SIZE) > 1)
        rfail(r, QTTS_ERR_UNSUPPORTED, P, "audio_channels", "only mono (1) is supported");
    E->hidden = get_int(r, e, P, "hidden_size", 1, MAX_SIZE);
    E->num_filters = get_int(r, e, P, "num_filters", 1, MAX_SIZE);
    E->num_residual_layers = get_int(r, e, P, "num_residual_layers", 0, 8);
    const qtts_json *ra = get_typed(r, e, P, "upsampling_ratios", QTTS_JSON_ARRAY);
    if (ra && (ra->count < 1 || ra->count > QTTS_ENC_MAX_RATIOS))
        rfail(r, QTTS_ERR_FORMAT, P, "upsampling_ratios", "must have 1..%d entries, not %zu",
              QTTS_ENC_MAX_RATIOS, ra->count);
    if (ra && !r->st) {
        E->n_ratios = (int)ra->count;
        get_int_array(r, e, P, "upsampling_ratios", ra->count, 1, 64, E->ratios);
    }
    E->kernel_size = get_int(r, e, P, "kernel_size", 1, ENC_MAX_KERNEL);
    E->last_kernel_size = get_int(r, e, P, "last_kernel_size", 1, ENC_MAX_KERNEL);
    E->residual_kernel_size = get_int(r, e, P, "residual_kernel_size", 1, ENC_MAX_KERNEL);
    E->dilation_growth_rate = get_int(r, e, P, "dilation_growth_rate", 1, 64);
    E->compress = get_int(r, e, P, "compress", 1, 64);
    require_bool(r, e, P, "use_causal_conv", true);
    require_str(r, e, P, "pad_mode", "constant");
    require_bool(r, e, P, "use_conv_shortcut", false);

    E->layers = get_int(r, e, P, "num_hidden_layers", 1, MAX_LAYERS);
    E->heads = get_int(r, e, P, "num_attention_heads", 1, MAX_HEADS);
    E->kv_heads = get_int(r, e, P, "num_key_value_heads", 1, MAX_HEADS);
    E->head_dim = get_int(r, e, P, "head_dim", 2, MAX_SIZE);
    E->inter = get_int(r, e, P, "intermediate_size", 1, MAX_SIZE);
    E->norm_eps = (float)get_num(r, e, P, "norm_eps", 0, 1, true);
    E->rope_theta = get_num(r, e, P, "rope_theta", 0, 1e12, true);
    require_str(r, e, P, "hidden_act", "gelu");
    require_bool(r, e, P, "attention_bias", false);
    require_bool(r, e, P, "use_streaming", false);
    const qtts_json *rs = r->st ? NULL : qtts_json_get(e, "rope_scaling");
    if (rs && rs->type != QTTS_JSON_NULL)
        rfail(r, QTTS_ERR_UNSUPPORTED, P, "rope_scaling", "only null (default RoPE) is supported");

    E->codebook_size = get_int(r, e, P, "codebook_size", 1, MAX_SIZE);
    E->codebook_dim = get_int(r, e, P, "codebook_dim", 1, MAX_SIZE);
    const int vq_hidden = get_int(r, e, P, "vector_quantization_hidden_dimension", 1, MAX_SIZE);
    E->num_quantizers = get_int(r, e, P, "num_quantizers", 2, 64);
    E->num_semantic_quantizers = get_int(r, e, P, "num_semantic_quantizers", 1, 64);
    if (r->st) return;

    /* shapes */
    if (vq_hidden != E->codebook_dim) {
        rfail(r, QTTS_ERR_FORMAT, P, "vector_quantization_hidden_dimension",
              "%d != codebook_dim %d (the quantizer input is compared with codebook vectors)",
              vq_hidden, E->codebook_dim);
        return;
    }
    if (E->num_semantic_quantizers >= E->num_quantizers) {
        rfail(r, QTTS_ERR_FORMAT, P, "num_semantic_quantizers", "%d must be below num_quantizers %d",
              E->num_semantic_quantizers, E->num_quantizers);
        return;
    }
    if (E->head_dim % 2) {
        rfail(r, QTTS_ERR_FORMAT, P, "head_dim", "%d must be even (RoPE rotates pairs)", E->head_dim);
        return;
    }
    if (E->heads % E->kv_heads) {
        rfail(r, QTTS_ERR_FORMAT, P, "num_key_value_heads", "%d does not divide num_attention_heads %d",
              E->kv_heads, E->heads);
        return;
    }
    if ((int64_t)E->heads * E->head_dim > MAX_SIZE) {
        rfail(r, QTTS_ERR_FORMAT, P, "head_dim", "num_attention_heads*head_dim exceeds %d", MAX_SIZE);
        return;
    }
    if (E->num_filters < E->compress) {
        rfail(r, QTTS_ERR_FORMAT, P, "compress", "%d exceeds num_filters %d (residual blocks would have no channels)",
              E->compress, E->num_filters);
        return;
    }
    if (((int64_t)E->num_filters << E->n_ratios) > MAX_SIZE) {
        rfail(r, QTTS_ERR_FORMAT, P, "num_filters", "%d doubled %d times exceeds %d", E->num_filters,
              E->n_ratios, MAX_SIZE);
        return;
    }
    int64_t dil = 1;
    for (int j = 1; j < E->num_residual_layers; j++) dil *= E->dilation_growth_rate;
    if (dil * (E->residual_kernel_size - 1) > ENC_MAX_DILATION) {
        rfail(r, QTTS_ERR_FORMAT, P, "dilation_growth_rate",
              "residual receptive field %lld exceeds %d", (long long)(dil * (E->residual_kernel_size - 1)),
              ENC_MAX_DILATION);
        return;
    }

    /* rates: hop = product of ratios; the downsample halves the SEANet rate */
    int64_t hop = 1;
    for (int i = 0; i < E->n_ratios; i++) hop *= E->ratios[i];
    if (hop > MAX_SIZE) {
        rfail(r, QTTS_ERR_FORMAT, P, "upsampling_ratios", "product %lld exceeds %d", (long long)hop, MAX_SIZE);
        return;
    }
    E->hop = (int)hop;
    if (E->sampling_rate != c->codec.input_sample_rate) {
        rfail(r, QTTS_ERR_FORMAT, P, "sampling_rate", "%d != input_sample_rate %d", E->sampling_rate,
              c->codec.input_sample_rate);
        return;
    }
    if (E->sampling_rate % E->hop || (double)(E->sampling_rate / E->hop) != 2.0 * E->frame_rate) {
        rfail(r, QTTS_ERR_UNSUPPORTED, P, "_frame_rate",
              "%g must be half of sampling_rate / prod(upsampling_ratios) = %d / %d", E->frame_rate,
              E->sampling_rate, E->hop);
        return;
    }
    if ((int64_t)c->codec.encode_downsample_rate != 2 * hop) {
        rfail(r, QTTS_ERR_FORMAT, NULL, "encode_downsample_rate", "%d != 2 * prod(encoder_config.upsampling_ratios) = %lld",
              c->codec.encode_downsample_rate, (long long)(2 * hop));
        return;
    }

    if (c->codec.encoder_valid_num_quantizers > E->num_quantizers)
        rfail(r, QTTS_ERR_FORMAT, NULL, "encoder_valid_num_quantizers", "%d exceeds encoder_config.num_quantizers %d",
              c->codec.encoder_valid_num_quantizers, E->num_quantizers);
}

/* Read and parse the JSON object at path; NULL with err set on failure. */
static qtts_json *load_json(const char *path, qtts_err *err) {
    char *text = NULL;
    size_t len = 0;
    if (qtts_read_file(path, MAX_CONFIG_BYTES, &text, &len, err)) return NULL;
    qtts_json *doc = qtts_json_parse(text, len, NULL, path, err);
    qtts_free(text);
    if (doc && doc->type != QTTS_JSON_OBJECT) {
        qtts_fail(err, QTTS_ERR_FORMAT, "%s: top level must be a JSON object", path);
        qtts_json_free(doc);
        return NULL;
    }
    return doc;
}

qtts_status qtts_config_load(const char *dir, qtts_config *cfg, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local; /* statuses are read back from err below */
    memset(cfg, 0, sizeof *cfg);
    static const char *const files[3] = {"config.json", "generation_config.json",
                                         "speech_tokenizer/config.json"};
    qtts_config c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        char path[4096];
        if (!qtts_path_join(path, sizeof path, dir, files[i]))
            return qtts_fail(err, QTTS_ERR_INVALID, "%s: model directory path too long", dir);
        qtts_json *doc = load_json(path, err);
        if (!doc) return err->status;
        rd r = {.file = path, .err = err};
        if (i == 0) read_main(&r, doc, &c);
        else if (i == 1) read_generation(&r, doc, &c);
        else {
            read_codec(&r, doc, &c);
            read_codec_encoder(&r, doc, &c);
        }
        qtts_json_free(doc);
        if (r.st) return r.st;
    }
    /* The talker emits one code per codebook; the decoder consumes them. */
    char path[4096];
    qtts_path_join(path, sizeof path, dir, files[2]);
    if (c.codec.num_quantizers != c.talker.num_code_groups)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: decoder_config.num_quantizers: %d != talker_config.num_code_groups %d",
                         path, c.codec.num_quantizers, c.talker.num_code_groups);
    if (c.codec.codebook_size != c.cp.vocab)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: decoder_config.codebook_size: %d != code_predictor_config.vocab_size %d",
                         path, c.codec.codebook_size, c.cp.vocab);
    /* Reference codes from the encoder sit next to generated ones. */
    if (c.codec.encoder_valid_num_quantizers != c.codec.num_quantizers)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: encoder_valid_num_quantizers: %d != decoder_config.num_quantizers %d",
                         path, c.codec.encoder_valid_num_quantizers, c.codec.num_quantizers);
    if (c.codec_enc.codebook_size != c.codec.codebook_size)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "%s: encoder_config.codebook_size: %d != decoder_config.codebook_size %d",
                         path, c.codec_enc.codebook_size, c.codec.codebook_size);
    *cfg = c;
    return QTTS_OK;
}

const qtts_named_id *qtts_config_find_lang(const qtts_config *cfg, const char *name) {
    if (!name) return NULL;
    int i = find_name(cfg->langs, cfg->n_langs, name);
    return i < 0 ? NULL : &cfg->langs[i];
}

const qtts_speaker *qtts_config_find_speaker(const qtts_config *cfg, const char *name) {
    if (!name) return NULL;
    int i = find_speaker_idx(cfg->speakers, cfg->n_speakers, name);
    return i < 0 ? NULL : &cfg->speakers[i];
}
