/*
 * voice.c - voice profiles: build one from reference audio, save it, read
 * it back, describe it. Format and checksum rules are in voice.h.
 */
#include "voice.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "../base/json.h"
#include "../io/audio.h"
#include "../io/safetensors.h"
#include "qwen3_tts.h"

#define MAX_REF_FRAMES (30 * 13 + 1) /* 30 s at 12.5 Hz, rounded up */

void qtts_voice_free(qtts_voice *v) {
    if (!v) return;
    qtts_free(v->xvector);
    qtts_free(v->ref_codes);
    qtts_free(v->ref_text);
    qtts_free(v->language);
    qtts_free(v);
}

void qtts_voice_get_info(const qtts_voice *v, qtts_voice_info *info) {
    memset(info, 0, sizeof *info);
    info->version = QTTS_VOICE_VERSION;
    info->in_context = v->ref_codes != NULL;
    info->ref_frames = v->ref_frames;
    info->xvector_dim = v->dim;
    info->ref_text = v->ref_text;
    info->language = v->language;
    info->model_type = v->model_type;
    info->model_size = v->model_size;
}

/* FNV-1a, 64-bit. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t qtts_voice_digest(const qtts_voice *v) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &v->dim, sizeof v->dim);
    h = fnv(h, v->xvector, sizeof(float) * (size_t)v->dim);
    h = fnv(h, &v->ref_frames, sizeof v->ref_frames);
    if (v->ref_codes) h = fnv(h, v->ref_codes, sizeof(int32_t) * (size_t)v->ref_frames * 16);
    /* strings with their terminator, so that ("ab", "") and ("a", "b") differ */
    h = v->ref_text ? fnv(h, v->ref_text, strlen(v->ref_text) + 1) : fnv(h, "", 0);
    h = v->language ? fnv(h, v->language, strlen(v->language) + 1) : fnv(h, "", 0);
    return h;
}

/* ==== checksum ============================================================ */

static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static bool ready;
    if (!ready) { /* benign race: every thread writes the same values */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* The metadata values in their fixed order, NUL-separated, then the tensors. */
static uint32_t voice_checksum(const char *const *vals, int n_vals, const qtts_voice *v) {
    uint32_t crc = 0;
    for (int i = 0; i < n_vals; i++) crc = crc32_update(crc, vals[i], strlen(vals[i]) + 1);
    crc = crc32_update(crc, v->xvector, sizeof(float) * (size_t)v->dim);
    if (v->ref_codes)
        crc = crc32_update(crc, v->ref_codes, sizeof(int32_t) * (size_t)v->ref_frames * 16);
    return crc;
}

static const char *const meta_keys[] = {"format",        "version",         "mode",
                                        "model_type",    "model_size",      "hidden",
                                        "codebook_size", "num_code_groups", "language",
                                        "ref_text"};
#define N_META ((int)QTTS_ARRAY_LEN(meta_keys))

/* Fills vals[N_META] (pointing into bufs or v) for v. */
static void meta_values(const qtts_voice *v, const char *vals[N_META], char bufs[4][24]) {
    snprintf(bufs[0], sizeof bufs[0], "%d", QTTS_VOICE_VERSION);
    snprintf(bufs[1], sizeof bufs[1], "%d", v->dim);
    snprintf(bufs[2], sizeof bufs[2], "%d", v->codebook_size);
    snprintf(bufs[3], sizeof bufs[3], "%d", v->num_code_groups);
    vals[0] = QTTS_VOICE_FORMAT;
    vals[1] = bufs[0];
    vals[2] = v->ref_codes ? "icl" : "xvector";
    vals[3] = v->model_type;
    vals[4] = v->model_size;
    vals[5] = bufs[1];
    vals[6] = bufs[2];
    vals[7] = bufs[3];
    vals[8] = v->language ? v->language : "";
    vals[9] = v->ref_text ? v->ref_text : "";
}

static const char *model_type_name(qtts_model_type t) {
    return t == QTTS_MODEL_BASE ? "base" : t == QTTS_MODEL_CUSTOM_VOICE ? "custom_voice" : "voice_design";
}

/* ==== build ================================================================ */

qtts_status qtts_voice_build(const qtts_config *cfg, const qtts_spk_enc *spk,
                             const qtts_codec_encoder *enc, const void *audio, size_t len,
                             const char *ref_text, bool x_vector_only, const char *language,
                             qtts_voice **out, qtts_err *err) {
    *out = NULL;
    if (cfg->model_type != QTTS_MODEL_BASE || !spk || !enc)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "voice cloning needs a Base model (this one is %s)",
                         model_type_name(cfg->model_type));
    if (!audio || !len) return qtts_fail(err, QTTS_ERR_INVALID, "no reference audio given");
    bool icl = !x_vector_only && ref_text && *ref_text;
    if (icl && strlen(ref_text) > QTTS_MAX_REF_TEXT_BYTES)
        return qtts_fail(err, QTTS_ERR_LIMIT, "reference text is over the %u-byte limit",
                         QTTS_MAX_REF_TEXT_BYTES);
    if (icl && !qtts_utf8_valid(ref_text, strlen(ref_text), NULL))
        return qtts_fail(err, QTTS_ERR_INVALID, "reference text is not valid UTF-8");
    if (language && (strlen(language) >= QTTS_NAME_MAX || !qtts_utf8_valid(language, strlen(language), NULL)))
        return qtts_fail(err, QTTS_ERR_INVALID, "language name is not valid");

    float *pcm = NULL;
    size_t n = 0;
    qtts_status st = qtts_audio_load(audio, len, NULL, cfg->codec.input_sample_rate, &pcm, &n, err);
    if (st) return st;
    qtts_voice *v = qtts_calloc(1, sizeof *v);
    if (!v) {
        qtts_free(pcm);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    }
    v->dim = qtts_spk_enc_dim(spk);
    snprintf(v->model_type, sizeof v->model_type, "%s", model_type_name(cfg->model_type));
    snprintf(v->model_size, sizeof v->model_size, "%s", cfg->model_size);
    v->codebook_size = cfg->codec.codebook_size;
    v->num_code_groups = cfg->talker.num_code_groups;
    if (!(v->xvector = qtts_malloc(sizeof(float) * (size_t)v->dim))) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = qtts_spk_enc_embed(spk, pcm, n, v->xvector, err))) goto fail;
    if (icl) {
        if ((st = qtts_codec_encode(enc, pcm, n, &v->ref_codes, &v->ref_frames, err))) goto fail;
        if (!(v->ref_text = qtts_strdup(ref_text))) {
            st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (language && *language && !(v->language = qtts_strdup(language))) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    qtts_free(pcm);
    *out = v;
    return QTTS_OK;
fail:
    qtts_free(pcm);
    qtts_voice_free(v);
    return st;
}

/* ==== save ================================================================= */

static bool put(char **p, char *end, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(end - *p) <= n) return false;
    memcpy(*p, s, n + 1);
    *p += n;
    return true;
}

qtts_status qtts_voice_save(const qtts_voice *v, const char *path, qtts_err *err) {
    const char *vals[N_META];
    char bufs[4][24];
    meta_values(v, vals, bufs);
    char checksum[32];
    snprintf(checksum, sizeof checksum, "crc32:%08x", voice_checksum(vals, N_META, v));

    const size_t xv_bytes = sizeof(float) * (size_t)v->dim;
    const size_t rc_bytes = v->ref_codes ? sizeof(int32_t) * (size_t)v->ref_frames * 16 : 0;
    /* JSON escaping at most sextuples a byte (\u00XX). */
    size_t cap = 1024;
    for (int i = 0; i < N_META; i++) cap += strlen(meta_keys[i]) + 6 * strlen(vals[i]) + 8;
    char *hdr = qtts_malloc(cap + 8);
    if (!hdr) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    char *p = hdr, *end = hdr + cap;
    char tmp[256];
    bool ok = put(&p, end, "{\"__metadata__\":{");
    for (int i = 0; ok && i < N_META; i++) {
        ok = put(&p, end, i ? ",\"" : "\"") && put(&p, end, meta_keys[i]) && put(&p, end, "\":");
        size_t need = qtts_json_escape(p, (size_t)(end - p), vals[i], strlen(vals[i]));
        ok = ok && need < (size_t)(end - p);
        if (ok) p += need;
    }
    ok = ok && put(&p, end, ",\"checksum\":\"") && put(&p, end, checksum) && put(&p, end, "\"}");
    snprintf(tmp, sizeof tmp, ",\"xvector\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%zu]}",
             v->dim, xv_bytes);
    ok = ok && put(&p, end, tmp);
    if (v->ref_codes) {
        snprintf(tmp, sizeof tmp,
                 ",\"ref_codes\":{\"dtype\":\"I32\",\"shape\":[%d,16],\"data_offsets\":[%zu,%zu]}",
                 v->ref_frames, xv_bytes, xv_bytes + rc_bytes);
        ok = ok && put(&p, end, tmp);
    }
    ok = ok && put(&p, end, "}");
    if (!ok) {
        qtts_free(hdr);
        return qtts_fail(err, QTTS_ERR_LIMIT, "%s: voice profile header too large", path);
    }
    size_t hlen = (size_t)(p - hdr);
    while (hlen % 8) hdr[hlen++] = ' '; /* align the data area, as safetensors writers do */
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));

    FILE *f = fopen(path, "wb");
    if (!f) {
        qtts_free(hdr);
        return qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    ok = fwrite(n8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen &&
         fwrite(v->xvector, 1, xv_bytes, f) == xv_bytes &&
         (!rc_bytes || fwrite(v->ref_codes, 1, rc_bytes, f) == rc_bytes);
    ok = (fclose(f) == 0) && ok;
    qtts_free(hdr);
    if (!ok) {
        remove(path);
        return qtts_fail(err, QTTS_ERR_IO, "%s: write failed", path);
    }
    return QTTS_OK;
}

/* ==== read ================================================================= */

static bool parse_int(const char *s, int lo, int hi, int *out) {
    if (!s || !*s) return false;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || p - s > 9) return false;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

qtts_status qtts_voice_read(const qtts_config *cfg, const char *path, qtts_voice **out,
                            qtts_err *err) {
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return qtts_voice_read_fd(cfg, fd, path, out, err);
}

qtts_status qtts_voice_read_fd(const qtts_config *cfg, int fd, const char *path, qtts_voice **out,
                               qtts_err *err) {
    *out = NULL;
    qtts_st_file *f = NULL;
    qtts_status st = qtts_st_open_fd(fd, path, &f, err);
    if (st) return st;
    qtts_voice *v = NULL;
    const char *vals[N_META];
    for (int i = 0; i < N_META; i++) {
        vals[i] = qtts_st_metadata(f, meta_keys[i]);
        if (!vals[i]) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: not a voice profile (metadata '%s' missing)",
                           path, meta_keys[i]);
            goto fail;
        }
    }
    if (strcmp(vals[0], QTTS_VOICE_FORMAT) != 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: not a voice profile (format '%.32s')", path, vals[0]);
        goto fail;
    }
    int version, hidden, cbsize, groups;
    if (!parse_int(vals[1], 1, 1000000, &version) || version != QTTS_VOICE_VERSION) {
        st = qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                       "%s: voice profile version '%.16s' is not supported (this build reads %d)",
                       path, vals[1], QTTS_VOICE_VERSION);
        goto fail;
    }
    bool icl = strcmp(vals[2], "icl") == 0;
    if (!icl && strcmp(vals[2], "xvector") != 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: unknown voice profile mode '%.16s'", path, vals[2]);
        goto fail;
    }
    if (!parse_int(vals[5], 1, 1 << 20, &hidden) || !parse_int(vals[6], 1, 1 << 20, &cbsize) ||
        !parse_int(vals[7], 1, 1024, &groups)) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: malformed model fields in the voice profile", path);
        goto fail;
    }
    if (strcmp(vals[3], model_type_name(cfg->model_type)) != 0 || hidden != cfg->talker.hidden ||
        cbsize != cfg->codec.codebook_size || groups != cfg->talker.num_code_groups) {
        st = qtts_fail(err, QTTS_ERR_INVALID,
                       "%s: voice profile was made with a %s %s model (hidden %d); this model is "
                       "%s %s (hidden %d)",
                       path, vals[3], vals[4], hidden, model_type_name(cfg->model_type),
                       cfg->model_size, cfg->talker.hidden);
        goto fail;
    }
    const qtts_tensor *xv = qtts_st_find(f, "xvector");
    const qtts_tensor *rc = qtts_st_find(f, "ref_codes");
    if (!xv || xv->dtype != QTTS_DT_F32 || xv->rank != 1 || xv->shape[0] != hidden) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: tensor xvector must be F32 [%d]", path, hidden);
        goto fail;
    }
    if (icl != (rc != NULL) || (rc && (rc->dtype != QTTS_DT_I32 || rc->rank != 2 ||
                                       rc->shape[1] != groups || rc->shape[0] < 1 ||
                                       rc->shape[0] > MAX_REF_FRAMES))) {
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: tensor ref_codes must be I32 [1..%d, %d] exactly when mode is icl", path,
                       MAX_REF_FRAMES, groups);
        goto fail;
    }
    if (qtts_st_count(f) != (rc ? 2u : 1u)) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: unexpected tensors in the voice profile", path);
        goto fail;
    }
    if (!qtts_utf8_valid(vals[8], strlen(vals[8]), NULL) || strlen(vals[8]) >= QTTS_NAME_MAX ||
        !qtts_utf8_valid(vals[9], strlen(vals[9]), NULL) || strlen(vals[9]) > QTTS_MAX_REF_TEXT_BYTES ||
        icl != (vals[9][0] != 0)) {
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: bad language or ref_text in the voice profile", path);
        goto fail;
    }
    if (!(v = qtts_calloc(1, sizeof *v))) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    v->dim = hidden;
    v->codebook_size = cbsize;
    v->num_code_groups = groups;
    snprintf(v->model_type, sizeof v->model_type, "%s", vals[3]);
    snprintf(v->model_size, sizeof v->model_size, "%.15s", vals[4]);
    v->xvector = qtts_malloc(xv->nbytes);
    if (rc) {
        v->ref_frames = (int)rc->shape[0];
        v->ref_codes = qtts_malloc(rc->nbytes);
        v->ref_text = qtts_strdup(vals[9]);
    }
    if (vals[8][0]) v->language = qtts_strdup(vals[8]);
    if (!v->xvector || (rc && (!v->ref_codes || !v->ref_text)) || (vals[8][0] && !v->language)) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(v->xvector, xv->data, xv->nbytes);
    if (rc) memcpy(v->ref_codes, rc->data, rc->nbytes);
    for (int i = 0; i < v->dim; i++)
        if (!(v->xvector[i] == v->xvector[i]) || v->xvector[i] > 3.4e38f || v->xvector[i] < -3.4e38f) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: non-finite value in xvector", path);
            goto fail;
        }
    for (size_t i = 0; rc && i < (size_t)v->ref_frames * (size_t)groups; i++)
        if (v->ref_codes[i] < 0 || v->ref_codes[i] >= cbsize) {
            st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: reference code %d out of range", path,
                           v->ref_codes[i]);
            goto fail;
        }
    /* The checksum is recomputed from what we parsed, so it also vouches for
     * the values having been read back exactly. */
    const char *cs = qtts_st_metadata(f, "checksum");
    const char *mine[N_META];
    char bufs[4][24];
    meta_values(v, mine, bufs);
    char want[32];
    snprintf(want, sizeof want, "crc32:%08x", voice_checksum(mine, N_META, v));
    if (!cs || strcmp(cs, want) != 0) {
        st = qtts_fail(err, QTTS_ERR_FORMAT,
                       "%s: voice profile checksum mismatch (file corrupted or edited)", path);
        goto fail;
    }
    qtts_st_close(f);
    *out = v;
    return QTTS_OK;
fail:
    qtts_voice_free(v);
    qtts_st_close(f);
    return st;
}
