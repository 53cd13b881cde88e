/*
 * quantize.c - qtts_quantize_model: the offline writer of quantized model
 * directories (include/qwen3_tts.h, docs/QUANT.md).
 *
 * The output is the source directory with model.safetensors replaced by a
 * single file in which the quantizable matrices of each component
 * (qtts_talker_quant_part: the talker's and the code predictor's linear
 * layers and heads) are Q8_0/Q4_0 blocks made by qtts_mat_quantize, the
 * very function load-time quantization calls, so a model loaded from it
 * computes bit for bit what `--quant` at load computes. Every other tensor
 * is copied byte for byte. "__metadata__" carries the marker that lets
 * the loader accept the block dtypes (QTTS_ST_QUANT_KEY), the source
 * directory and the per-component formats.
 *
 * Layout: the header is padded with spaces so that the data area starts
 * at a 64-byte file offset; the quantized tensors come first, then the
 * others, each group in name order. A quantized row is stored in the CPU's
 * packed layout (quant.h; format version 2), so the engine maps it and
 * computes with it in place; its byte count is a multiple of 32, so every
 * quantized tensor starts 32-byte aligned (the loader asks for 2).
 *
 * The weights are written to model.safetensors.part, synced and renamed,
 * one tensor in memory at a time (its source pages are released after
 * use). Then the other files are copied (config, tokenizer, ...) and
 * speech_tokenizer/ is copied or symlinked. Finally the result is opened
 * as the engine would open it (header, blocks, talker binding).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/json.h"
#include "base/thread.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/talker.h"

typedef struct {
    char *buf;
    size_t len, cap;
    bool nomem;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->nomem) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = qtts_realloc(b->buf, cap);
        if (!p) {
            b->nomem = true;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->nomem = true;
        return;
    }
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string literal. */
static void sb_str(sbuf *b, const char *s) {
    const size_t n = strlen(s), cap = 6 * n + 3;
    char *tmp = qtts_malloc(cap);
    if (!tmp) {
        b->nomem = true;
        return;
    }
    size_t m = qtts_json_escape(tmp, cap, s, n);
    sb_put(b, tmp, m);
    qtts_free(tmp);
}

static void say(const qtts_quantize_options *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const qtts_quantize_options *o, const char *fmt, ...) {
    if (!o->progress) return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(o->user, line);
}

/* ==== copying the other files ============================================ */

static qtts_status copy_file(const char *src, const char *dst, qtts_err *err) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        qtts_status st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", dst, strerror(errno));
        close(in);
        return st;
    }
    enum { CHUNK = 1 << 20 };
    char *buf = qtts_malloc(CHUNK);
    qtts_status st = buf ? QTTS_OK : qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    while (!st) {
        ssize_t n = read(in, buf, CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = qtts_fail(err, QTTS_ERR_IO, "%s: read error: %s", src, strerror(errno));
            break;
        }
        if (n == 0) break;
        for (ssize_t off = 0; off < n && !st;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) st = qtts_fail(err, QTTS_ERR_IO, "%s: write error: %s", dst, strerror(errno));
            else off += w;
        }
    }
    qtts_free(buf);
    close(in);
    if (close(out) != 0 && !st)
        st = qtts_fail(err, QTTS_ERR_IO, "%s: write error: %s", dst, strerror(errno));
    return st;
}

/* The source's weight files, which the output replaces. */
static bool is_weights_name(const char *n) {
    const size_t len = strlen(n);
    if (strncmp(n, "model", 5)) return false;
    return (len >= 12 && !strcmp(n + len - 12, ".safetensors")) ||
           (len >= 23 && !strcmp(n + len - 23, ".safetensors.index.json"));
}

/* Copy directory src into dst (which exists), following symlinks; at the
 * top level (depth 0) without the weight files, and speech_tokenizer/ as a
 * symlink when link_codec. Hidden entries are skipped. */
static qtts_status copy_tree(const char *src, const char *dst, int depth, bool link_codec,
                             qtts_err *err) {
    if (depth > 4) return qtts_fail(err, QTTS_ERR_LIMIT, "%s: directories nested too deep", src);
    DIR *d = opendir(src);
    if (!d) return qtts_fail(err, QTTS_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    qtts_status st = QTTS_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.') continue;
        if (depth == 0 && is_weights_name(n)) continue;
        char s[PATH_MAX], o[PATH_MAX];
        if (!qtts_path_join(s, sizeof s, src, n) || !qtts_path_join(o, sizeof o, dst, n)) {
            st = qtts_fail(err, QTTS_ERR_INVALID, "%s: path too long", src);
            break;
        }
        struct stat sb;
        if (stat(s, &sb) != 0) {
            st = qtts_fail(err, QTTS_ERR_IO, "%s: %s", s, strerror(errno));
            break;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (depth == 0 && link_codec && !strcmp(n, "speech_tokenizer")) {
                char real[PATH_MAX];
                if (!realpath(s, real) || symlink(real, o) != 0)
                    st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot link to %s: %s", o, s,
                                   strerror(errno));
                continue;
            }
            if (mkdir(o, 0755) != 0) {
                st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", o, strerror(errno));
                break;
            }
            st = copy_tree(s, o, depth + 1, link_codec, err);
        } else if (S_ISREG(sb.st_mode)) {
            st = copy_file(s, o, err);
        }
    }
    closedir(d);
    return st;
}

/* out_dir: created, or an existing empty directory. */
static qtts_status prepare_out(const char *out, qtts_err *err) {
    if (mkdir(out, 0755) == 0) return QTTS_OK;
    if (errno != EEXIST)
        return qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", out, strerror(errno));
    DIR *d = opendir(out);
    if (!d) return qtts_fail(err, QTTS_ERR_INVALID, "%s exists and is not a directory", out);
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    if (!empty)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "%s exists and is not empty (give a new directory)", out);
    return QTTS_OK;
}

/* ==== the weights file =================================================== */

typedef struct {
    const qtts_tensor *t;
    qtts_dtype dt;      /* output dtype */
    uint64_t nbytes;    /* output bytes */
} out_tensor;

static qtts_status write_all(FILE *f, const void *p, size_t n, const char *path, qtts_err *err) {
    if (n && fwrite(p, 1, n, f) != n)
        return qtts_fail(err, QTTS_ERR_IO, "%s: write error: %s", path, strerror(errno));
    return QTTS_OK;
}

static qtts_status write_weights(const qtts_st_set *set, const char *src_dir, const char *path,
                                 const qtts_talker_quant *q, const qtts_quantize_options *o,
                                 qtts_err *err) {
    const size_t n = qtts_st_set_count(set);
    out_tensor *ot = qtts_calloc(n ? n : 1, sizeof *ot);
    if (!ot) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    qtts_status st = QTTS_OK;
    uint64_t in_bytes = 0, out_bytes = 0;
    int n_quant[2] = {0, 0};
    for (size_t i = 0; i < n && !st; i++) {
        const qtts_tensor *t = qtts_st_set_at(set, i);
        const qtts_qpart part = qtts_talker_quant_part(t->name);
        const qtts_quant qq = part == QTTS_QPART_TALKER ? q->talker
                              : part == QTTS_QPART_CP   ? q->cp
                                                        : QTTS_QUANT_NONE;
        ot[i] = (out_tensor){t, t->dtype, t->nbytes};
        in_bytes += t->nbytes;
        if (qq != QTTS_QUANT_NONE) {
            if ((t->dtype != QTTS_DT_BF16 && t->dtype != QTTS_DT_F32) || t->rank != 2 ||
                t->shape[1] % QTTS_QK || t->shape[0] < 1 || t->shape[0] > INT32_MAX ||
                t->shape[1] > INT32_MAX) {
                st = qtts_fail(err, QTTS_ERR_FORMAT,
                               "%s: tensor %s: cannot quantize a %s tensor of rank %d (needs a "
                               "BF16/F32 matrix whose columns are a multiple of %d)",
                               qtts_st_set_path(set), t->name, qtts_dtype_name(t->dtype), t->rank,
                               QTTS_QK);
                break;
            }
            ot[i].dt = qtts_quant_dtype(qq);
            ot[i].nbytes = (uint64_t)t->shape[0] * qtts_packed_row_bytes(ot[i].dt == QTTS_DT_Q4_0, (int)t->shape[1]);
            n_quant[part == QTTS_QPART_CP]++;
        }
        out_bytes += ot[i].nbytes;
    }
    if (!st && !n_quant[0] && !n_quant[1])
        st = qtts_fail(err, QTTS_ERR_FORMAT, "%s: no talker or code-predictor matrix to quantize",
                       qtts_st_set_path(set));
    if (st) {
        qtts_free(ot);
        return st;
    }
    /* Quantized tensors first (stable: name order within each group). */
    for (size_t i = 0, k = 0; i < n; i++)
        if (ot[i].dt != ot[i].t->dtype) {
            out_tensor tmp = ot[i];
            memmove(ot + k + 1, ot + k, (i - k) * sizeof *ot);
            ot[k++] = tmp;
        }

    /* The header. */
    sbuf h = {0};
    char real[PATH_MAX];
    const char *src = realpath(src_dir, real) ? real : src_dir;
    if (!qtts_utf8_valid(src, strlen(src), NULL)) src = "?";
    sb_put(&h, "{\"__metadata__\":{\"format\":\"pt\",", 31);
    sb_str(&h, QTTS_ST_QUANT_KEY);
    sb_put(&h, ":", 1);
    sb_str(&h, QTTS_ST_QUANT_VERSION);
    sb_printf(&h, ",\"qwen3_tts.quant_talker\":\"%s\",\"qwen3_tts.quant_cp\":\"%s\","
                  "\"qwen3_tts.quant_block\":\"%d\",\"qwen3_tts.source\":",
              qtts_quant_name(q->talker), qtts_quant_name(q->cp), QTTS_QK);
    sb_str(&h, src);
    sb_put(&h, "}", 1);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const qtts_tensor *t = ot[i].t;
        sb_put(&h, ",", 1);
        sb_str(&h, t->name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", qtts_dtype_name(ot[i].dt));
        for (int d = 0; d < t->rank; d++) sb_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                  (unsigned long long)(off + ot[i].nbytes));
        off += ot[i].nbytes;
    }
    sb_put(&h, "}", 1);
    while (!h.nomem && (8 + h.len) % 64) sb_put(&h, " ", 1);
    if (h.nomem) {
        qtts_free(h.buf);
        qtts_free(ot);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (header)");
    }

    FILE *f = fopen(path, "wb");
    if (!f) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        qtts_free(h.buf);
        qtts_free(ot);
        return st;
    }
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)h.len >> (8 * b));
    st = write_all(f, len8, 8, path, err);
    if (!st) st = write_all(f, h.buf, h.len, path, err);
    qtts_free(h.buf);
    say(o, "writing %s: %zu tensors, %d talker and %d code-predictor matrices quantized, "
           "%.1f MB -> %.1f MB", path, n, n_quant[0], n_quant[1], in_bytes / 1e6, out_bytes / 1e6);
    uint64_t done = 0;
    int last_pct = 0;
    for (size_t i = 0; i < n && !st; i++) {
        const qtts_tensor *t = ot[i].t;
        if (ot[i].dt != t->dtype) {
            qtts_mat src_m = qtts_mat_from(t), qm;
            if (!(st = qtts_mat_quantize(&src_m, ot[i].dt, &qm, err))) {
                st = write_all(f, qm.data, (size_t)ot[i].nbytes, path, err);
                qtts_mat_free(&qm);
            }
        } else {
            st = write_all(f, t->data, (size_t)t->nbytes, path, err);
        }
        qtts_tensor_release(t);
        done += ot[i].nbytes;
        const int pct = out_bytes ? (int)(100 * done / out_bytes) : 100;
        if (pct / 10 > last_pct / 10) say(o, "  %d%%", pct);
        last_pct = pct;
    }
    if (!st && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        st = qtts_fail(err, QTTS_ERR_IO, "%s: write error: %s", path, strerror(errno));
    /* Drop the file's pages, now clean, from the page cache. Pages cached
     * by write() stayed in small folios (ext4, Linux 6.18), and the engine's
     * mapping of them took 4 KB pages; read back from disk (the check below,
     * or the first open), they come in large folios that map as 2 MB pages.
     * On the EPYC VM the frames then took 0.97 (int4) and 0.93 (int8) of
     * the time (paired runs, docs/PERFORMANCE.md, nineteenth session; fewer
     * TLB misses, most likely: the VM has no counters to show it). Advice
     * only: an error changes nothing. */
    if (!st) (void)posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
    if (fclose(f) != 0 && !st)
        st = qtts_fail(err, QTTS_ERR_IO, "%s: write error: %s", path, strerror(errno));
    if (st) remove(path);
    qtts_free(ot);
    return st;
}

/* ==== the whole directory ================================================ */

qtts_status qtts_quantize_model(const char *model_dir, const char *out_dir,
                                const qtts_quantize_options *opts, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    if (!model_dir || !*model_dir || !out_dir || !*out_dir || !opts)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: a model directory, an output "
                         "directory and options are required");
    qtts_talker_quant q;
    if (!qtts_quant_parse(opts->talker, &q.talker))
        return qtts_fail(err, QTTS_ERR_INVALID, "unknown talker weight format '%.32s' (int8, int4, none)",
                         opts->talker);
    if (!qtts_quant_parse(opts->cp ? opts->cp : opts->talker, &q.cp))
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "unknown code-predictor weight format '%.32s' (int8, int4, none)", opts->cp);
    if (q.talker == QTTS_QUANT_NONE && q.cp == QTTS_QUANT_NONE)
        return qtts_fail(err, QTTS_ERR_INVALID, "quantize: nothing to do (give int8 or int4)");

    qtts_threads_init(opts->n_threads);
    qtts_config cfg;
    qtts_status st = qtts_config_load(model_dir, &cfg, err);
    if (st) return st;
    qtts_st_set *set = NULL;
    if ((st = qtts_st_set_open(model_dir, "model", &set, err))) return st;
    if (qtts_st_set_metadata(set, QTTS_ST_QUANT_KEY)) {
        st = qtts_fail(err, QTTS_ERR_INVALID,
                       "%s is already a quantized model (quantize the bf16 model instead)",
                       model_dir);
        qtts_st_set_close(set);
        return st;
    }
    if ((st = prepare_out(out_dir, err))) {
        qtts_st_set_close(set);
        return st;
    }
    char part[PATH_MAX], final[PATH_MAX];
    if (!qtts_path_join(part, sizeof part, out_dir, "model.safetensors.part") ||
        !qtts_path_join(final, sizeof final, out_dir, "model.safetensors")) {
        qtts_st_set_close(set);
        return qtts_fail(err, QTTS_ERR_INVALID, "%s: path too long", out_dir);
    }
    const double t0 = qtts_now();
    st = write_weights(set, model_dir, part, &q, opts, err);
    qtts_st_set_close(set);
    if (st) return st;
    if (rename(part, final) != 0) {
        st = qtts_fail(err, QTTS_ERR_IO, "%s: cannot rename to %s: %s", part, final,
                       strerror(errno));
        remove(part);
        return st;
    }
    say(opts, "weights written in %.1f s; copying the other files%s", qtts_now() - t0,
        opts->link_codec ? " (speech_tokenizer/ as a symlink)" : "");
    if ((st = copy_tree(model_dir, out_dir, 0, opts->link_codec, err))) return st;

    /* Open the result as the engine does. */
    qtts_config ocfg;
    qtts_talker_weights *w = NULL;
    if ((st = qtts_config_load(out_dir, &ocfg, err))) return st;
    if ((st = qtts_st_set_open(out_dir, "model", &set, err))) return st;
    st = qtts_talker_load_quant(&ocfg, set, &q, &w, err);
    qtts_talker_free(w);
    qtts_st_set_close(set);
    if (!st) say(opts, "done: %s (talker %s, code predictor %s)", out_dir, qtts_quant_name(q.talker),
                 qtts_quant_name(q.cp));
    return st;
}
