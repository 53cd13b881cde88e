/*
 * codec_encoder.c - 12 Hz speech-tokenizer encoder (see codec_encoder.h for
 * the stage-by-stage dataflow and shapes).
 *
 * Load: every encoder tensor the forward pass reads is looked up with the
 * shape the config implies; conv weights are packed into qtts_conv1d
 * (strided ones in the phase-packed form of encoder_kernels.h), codebooks
 * are normalised once (embed_sum / max(cluster_usage, 1e-5), fp32, as the
 * reference's `embed` property) together with their squared norms,
 * transformer matrices are viewed in the mapping (copied to fp32 only when
 * the file leaves them unaligned).
 *
 * Run, in three phases that each allocate (sized from n) and free their
 * own scratch:
 *  1. SEANet over chunks of N = chunk_frames * hop samples, every conv on
 *     qtts_conv1d_run (blocked SIMD on the thread pool) and the ELUs split
 *     over the pool too, so the output does not depend on the chunk size
 *     or the thread count. Each conv owns an input buffer [Cin, P + N_i]
 *     whose first P = (taps-1)*dil columns carry the tail of the previous
 *     chunk's input (zeros before the first chunk: the causal padding);
 *     after a chunk the tail is moved to the front. Strided convs keep
 *     their history in phase-packed columns. The last chunk may be short;
 *     its strided convs see zeros past the end
 *     (the reference's right padding to a whole number of strides). Stage
 *     activations live in one buffer X [C_i, N_i] (the down conv reads its
 *     own packed copy, so it can write the next stage's x over X); the
 *     residual branch's middle activation lives in Hb. The final conv's
 *     output is transposed into the time-major [T, hidden] result.
 *  2. Transformer, time-major [T, hidden], full causal attention over all
 *     T positions (the reference's sdpa/eager path applies no window; its
 *     heads on the pool); the MLP runs in blocks of MLP_ROWS rows to bound
 *     its [rows, inter] buffer.
 *  3. Downsample (phase-packed k4 s2 conv with replicate padding on both
 *     sides) -> [hidden, F], transposed to [F, hidden]; input projections;
 *     residual VQ with qtts_vq_nearest, one quantizer at a time over all
 *     frames (frames on the pool; each codebook read while it is cached).
 *
 * Peak memory is the transformer's ~7 [T, hidden]-sized arrays: about
 * 14 KiB per 25 Hz frame at full size (~200 MiB at the 600 s limit); the
 * SEANet needs ~15 MiB at the default chunk.
 */
#include "codec_encoder.h"

#include "../base/thread.h"
#include "../kernels/encoder_kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DT_FLOAT ((1u << QTTS_DT_F32) | (1u << QTTS_DT_F16) | (1u << QTTS_DT_BF16))
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define CB_EPS 1e-5f          /* cluster_usage clamp of the reference codebook */
#define DS_KERNEL 4           /* downsample conv: kernel 2 * (25 Hz / 12.5 Hz), stride 2 */
#define DS_STRIDE 2
#define MLP_ROWS 64           /* transformer MLP row block */

/* ---- load helpers ------------------------------------------------------ */

static qtts_status nomem(qtts_err *err, const char *what) {
    return qtts_fail(err, QTTS_ERR_NOMEM, "codec encoder: out of memory (%s)", what);
}

static void *own(qtts_codec_encoder *e, size_t bytes) {
    if (e->n_owned == e->cap_owned) {
        int cap = e->cap_owned ? e->cap_owned * 2 : 64;
        void **o = qtts_realloc(e->owned, sizeof(void *) * (size_t)cap);
        if (!o) return NULL;
        e->owned = o;
        e->cap_owned = cap;
    }
    void *p = qtts_aligned_alloc(bytes ? bytes : 1);
    if (p) e->owned[e->n_owned++] = p;
    return p;
}

/* "encoder.<formatted>" with shape dims[rank]; NULL + err on failure. */
static const qtts_tensor *get(const qtts_codec_encoder *e, qtts_err *err, int rank,
                              const int64_t *dims, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static const qtts_tensor *get(const qtts_codec_encoder *e, qtts_err *err, int rank,
                              const int64_t *dims, const char *fmt, ...) {
    char name[256] = "encoder.";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name + 8, sizeof(name) - 8, fmt, ap);
    va_end(ap);
    const qtts_tensor *t = qtts_st_expect(e->st, name, DT_FLOAT, rank, dims, err);
    if (!t && strlen(name) > 64) { /* the reader quotes at most 64 bytes of a name */
        char m[sizeof err->msg];
        memcpy(m, err->msg, sizeof m);
        qtts_fail(err, err->status, "%s (tensor %s)", m, name);
    }
    return t;
}

/* t's values as fp32 (qtts_tensor_f32: a view of an aligned F32 tensor, else a
 * copy in *owned for the caller to free). */
static const float *tmp_f32(const qtts_tensor *t, float **owned, qtts_err *err) {
    const float *v = qtts_tensor_f32(t, owned);
    if (!v) nomem(err, t->name);
    return v;
}

/* Owned fp32 copy of the rank-1 [n] tensor "encoder.<name>". */
static float *load_vec(qtts_codec_encoder *e, qtts_err *err, int64_t n, const char *name) {
    const qtts_tensor *t = get(e, err, 1, DIMS(n), "%s", name);
    if (!t) return NULL;
    float *v = own(e, sizeof(float) * (size_t)n);
    if (!v) {
        nomem(err, t->name);
        return NULL;
    }
    qtts_tensor_to_f32(t, v);
    return v;
}

/* A [rows, cols] (rank 2) or [rows, cols, 1] (rank 3) matrix: a view into
 * the mapping when dtype and alignment allow it, else an owned fp32 copy. */
static bool load_mat(qtts_codec_encoder *e, qtts_mat *m, qtts_err *err, int rank, int rows,
                     int cols, const char *name) {
    const qtts_tensor *t = rank == 3 ? get(e, err, 3, DIMS(rows, cols, 1), "%s", name)
                                     : get(e, err, 2, DIMS(rows, cols), "%s", name);
    if (!t) return false;
    const uintptr_t addr = (uintptr_t)t->data;
    if ((t->dtype == QTTS_DT_F32 && addr % sizeof(float) == 0) ||
        (t->dtype == QTTS_DT_BF16 && addr % sizeof(uint16_t) == 0)) {
        *m = (qtts_mat){.data = t->data, .dtype = t->dtype, .rows = rows, .cols = cols};
        return true;
    }
    float *v = own(e, sizeof(float) * (size_t)rows * cols);
    if (!v) {
        nomem(err, t->name);
        return false;
    }
    qtts_tensor_to_f32(t, v);
    *m = (qtts_mat){.data = v, .dtype = QTTS_DT_F32, .rows = rows, .cols = cols};
    return true;
}

/* Conv1d "<prefix>.weight" [cout, cin, k] (+ "<prefix>.bias" [cout] when
 * has_bias), packed as a causal conv (stride 1, dilation dil) or, when
 * stride > 1, in the phase-packed strided form. */
static bool load_conv(qtts_codec_encoder *e, qtts_conv1d *c, qtts_err *err, int cout, int cin,
                      int k, int dil, int stride, bool has_bias, const char *prefix) {
    const qtts_tensor *w = get(e, err, 3, DIMS(cout, cin, k), "%s.weight", prefix);
    if (!w) return false;
    const qtts_tensor *b = has_bias ? get(e, err, 1, DIMS(cout), "%s.bias", prefix) : NULL;
    if (has_bias && !b) return false;
    float *wo, *bo = NULL;
    const float *wf = tmp_f32(w, &wo, err), *bf = NULL;
    bool ok = wf != NULL;
    if (ok && b) ok = (bf = tmp_f32(b, &bo, err)) != NULL;
    if (ok) {
        ok = stride > 1 ? qtts_conv1d_strided_init(c, wf, bf, cout, cin, k, stride)
                        : qtts_conv1d_init(c, wf, bf, cout, cin, k, dil);
        if (!ok) nomem(err, w->name);
    }
    qtts_free(wo);
    qtts_free(bo);
    return ok;
}

/* Codebook "quantizer.<group>.layers.<l>.codebook": normalised vectors into
 * cb[cb_size, cb_dim] and their squared norms into sq[cb_size]. */
static bool load_codebook(qtts_codec_encoder *e, qtts_err *err, const char *group, int l, float *cb,
                          float *sq) {
    char p[160];
    snprintf(p, sizeof p, "quantizer.%s.layers.%d.codebook", group, l);
    const int n = e->cb_size, dim = e->cb_dim;
    const qtts_tensor *es = get(e, err, 2, DIMS(n, dim), "%s.embed_sum", p);
    const qtts_tensor *cu = es ? get(e, err, 1, DIMS(n), "%s.cluster_usage", p) : NULL;
    if (!cu) return false;
    float *usage_owned;
    const float *usage = tmp_f32(cu, &usage_owned, err);
    if (!usage) return false;
    qtts_tensor_to_f32(es, cb);
    for (int j = 0; j < n; j++) {
        const float u = usage[j] < CB_EPS ? CB_EPS : usage[j]; /* clamp(min=eps); NaN stays */
        float *row = cb + (size_t)j * dim;
        for (int d = 0; d < dim; d++) row[d] = row[d] / u;
        sq[j] = qtts_vq_sqnorm(row, dim);
    }
    qtts_free(usage_owned);
    return true;
}

void qtts_codec_encoder_free(qtts_codec_encoder *e) {
    if (!e) return;
    qtts_conv1d_free(&e->conv_in);
    if (e->stages) {
        for (int i = 0; i < e->n_stages; i++) {
            qtts_enc_stage *s = &e->stages[i];
            if (s->res)
                for (int j = 0; j < e->n_res; j++) {
                    qtts_conv1d_free(&s->res[j].conv1);
                    qtts_conv1d_free(&s->res[j].conv2);
                }
            qtts_free(s->res);
            qtts_conv1d_free(&s->down);
        }
        qtts_free(e->stages);
    }
    qtts_conv1d_free(&e->conv_out);
    qtts_conv1d_free(&e->downsample);
    qtts_free(e->tl);
    for (int i = 0; i < e->n_owned; i++) qtts_free(e->owned[i]);
    qtts_free(e->owned);
    qtts_st_set_close(e->st);
    qtts_free(e);
}

static qtts_status load_seanet(qtts_codec_encoder *e, const qtts_codec_enc_config *c,
                               qtts_err *err) {
    char p[128];
    int idx = 0; /* index into encoder.encoder.layers, as MimiEncoder numbers its modules */
    if (!load_conv(e, &e->conv_in, err, e->filters, 1, e->kernel, 1, 1, true,
                   "encoder.layers.0.conv"))
        return err->status;
    idx++;
    e->n_stages = c->n_ratios;
    e->stages = qtts_calloc((size_t)e->n_stages, sizeof(qtts_enc_stage));
    if (!e->stages) return nomem(err, "SEANet stages");
    int C = e->filters;
    for (int i = 0; i < e->n_stages; i++) {
        qtts_enc_stage *s = &e->stages[i];
        s->cin = C;
        s->stride = c->ratios[c->n_ratios - 1 - i];
        s->kernel = 2 * s->stride;
        s->res = qtts_calloc((size_t)(e->n_res ? e->n_res : 1), sizeof(qtts_enc_resblock));
        if (!s->res) return nomem(err, "SEANet residual blocks");
        int dil = 1;
        for (int j = 0; j < e->n_res; j++, idx++) {
            const int hid = C / e->compress;
            snprintf(p, sizeof p, "encoder.layers.%d.block.1.conv", idx);
            if (!load_conv(e, &s->res[j].conv1, err, hid, C, e->res_kernel, dil, 1, true, p))
                return err->status;
            snprintf(p, sizeof p, "encoder.layers.%d.block.3.conv", idx);
            if (!load_conv(e, &s->res[j].conv2, err, C, hid, 1, 1, 1, true, p)) return err->status;
            dil *= e->dil_growth;
        }
        idx++; /* ELU */
        snprintf(p, sizeof p, "encoder.layers.%d.conv", idx++);
        if (!load_conv(e, &s->down, err, 2 * C, C, s->kernel, 1, s->stride, true, p))
            return err->status;
        C *= 2;
    }
    idx++; /* ELU */
    snprintf(p, sizeof p, "encoder.layers.%d.conv", idx);
    if (!load_conv(e, &e->conv_out, err, e->hidden, C, e->last_kernel, 1, 1, true, p))
        return err->status;
    return QTTS_OK;
}

static qtts_status load_transformer(qtts_codec_encoder *e, qtts_err *err) {
    const int H = e->hidden, qd = e->heads * e->head_dim, kvd = e->kv_heads * e->head_dim;
    e->tl = qtts_calloc((size_t)e->layers, sizeof(qtts_enc_layer));
    if (!e->tl) return nomem(err, "transformer layers");
    char p[128], n[192];
    for (int l = 0; l < e->layers; l++) {
        qtts_enc_layer *L = &e->tl[l];
        snprintf(p, sizeof p, "encoder_transformer.layers.%d", l);
#define VEC(field, suffix)                                                   \
    do {                                                                     \
        snprintf(n, sizeof n, "%s.%s", p, suffix);                           \
        if (!(L->field = load_vec(e, err, H, n))) return err->status;        \
    } while (0)
#define MAT(field, rows, cols, suffix)                                       \
    do {                                                                     \
        snprintf(n, sizeof n, "%s.%s", p, suffix);                           \
        if (!load_mat(e, &L->field, err, 2, rows, cols, n)) return err->status; \
    } while (0)
        VEC(ln1_w, "input_layernorm.weight");
        VEC(ln1_b, "input_layernorm.bias");
        MAT(q, qd, H, "self_attn.q_proj.weight");
        MAT(k, kvd, H, "self_attn.k_proj.weight");
        MAT(v, kvd, H, "self_attn.v_proj.weight");
        MAT(o, H, qd, "self_attn.o_proj.weight");
        VEC(attn_scale, "self_attn_layer_scale.scale");
        VEC(ln2_w, "post_attention_layernorm.weight");
        VEC(ln2_b, "post_attention_layernorm.bias");
        MAT(fc1, e->inter, H, "mlp.fc1.weight");
        MAT(fc2, H, e->inter, "mlp.fc2.weight");
        VEC(mlp_scale, "mlp_layer_scale.scale");
#undef VEC
#undef MAT
    }
    return QTTS_OK;
}

static qtts_status load_quantizer(qtts_codec_encoder *e, qtts_err *err) {
    static const char *const groups[2] = {"semantic_residual_vector_quantizer",
                                          "acoustic_residual_vector_quantizer"};
    qtts_mat *proj[2] = {&e->proj_sem, &e->proj_ac};
    char n[160];
    for (int g = 0; g < 2; g++) {
        if (g == 1 && e->n_ac == 0) break;
        /* Mimi only has input projections when the widths differ */
        if (e->cb_dim != e->hidden) {
            snprintf(n, sizeof n, "quantizer.%s.input_proj.weight", groups[g]);
            if (!load_mat(e, proj[g], err, 3, e->cb_dim, e->hidden, n)) return err->status;
        }
    }
    const size_t cbn = (size_t)e->cb_size * e->cb_dim;
    e->codebooks = own(e, sizeof(float) * cbn * (size_t)e->n_out);
    e->cb_sq = own(e, sizeof(float) * (size_t)e->cb_size * (size_t)e->n_out);
    if (!e->codebooks || !e->cb_sq) return nomem(err, "codebooks");
    for (int q = 0; q < e->n_out; q++) {
        const bool sem = q < e->n_sem;
        if (!load_codebook(e, err, groups[sem ? 0 : 1], sem ? q : q - e->n_sem,
                           e->codebooks + cbn * q, e->cb_sq + (size_t)e->cb_size * q))
            return err->status;
    }
    return QTTS_OK;
}

qtts_status qtts_codec_encoder_load(const char *model_dir, const qtts_config *cfg,
                                    qtts_codec_encoder **out, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    *out = NULL;
    const qtts_codec_enc_config *c = &cfg->codec_enc;
    qtts_codec_encoder *e = qtts_calloc(1, sizeof(*e));
    if (!e) return nomem(err, "encoder");
    e->sample_rate = c->sampling_rate;
    e->hop = c->hop;
    e->frame_samples = DS_STRIDE * c->hop;
    e->hidden = c->hidden;
    e->filters = c->num_filters;
    e->n_res = c->num_residual_layers;
    e->compress = c->compress;
    e->kernel = c->kernel_size;
    e->last_kernel = c->last_kernel_size;
    e->res_kernel = c->residual_kernel_size;
    e->dil_growth = c->dilation_growth_rate;
    e->layers = c->layers;
    e->heads = c->heads;
    e->kv_heads = c->kv_heads;
    e->head_dim = c->head_dim;
    e->inter = c->inter;
    e->norm_eps = c->norm_eps;
    e->rope_theta = c->rope_theta;
    e->cb_size = c->codebook_size;
    e->cb_dim = c->codebook_dim;
    e->n_out = cfg->codec.encoder_valid_num_quantizers;
    e->n_sem = QTTS_MIN(c->num_semantic_quantizers, e->n_out);
    e->n_ac = e->n_out - e->n_sem;
    e->max_samples = (size_t)QTTS_CODEC_ENC_MAX_SECONDS * (size_t)c->sampling_rate;
    e->chunk_frames = QTTS_CODEC_ENC_CHUNK_FRAMES;
    QTTS_ASSERT(e->n_out >= 1 && e->n_ac <= c->num_quantizers - c->num_semantic_quantizers);
    QTTS_ASSERT(e->frame_samples == cfg->codec.encode_downsample_rate);

    char dir[4096];
    qtts_status st = QTTS_OK;
    if (!qtts_path_join(dir, sizeof dir, model_dir, "speech_tokenizer"))
        st = qtts_fail(err, QTTS_ERR_INVALID, "%s: model directory path too long", model_dir);
    if (!st) st = qtts_st_set_open(dir, "model", &e->st, err);
    if (!st) st = load_seanet(e, c, err);
    if (!st) st = load_transformer(e, err);
    if (!st && !load_conv(e, &e->downsample, err, e->hidden, e->hidden, DS_KERNEL, 1, DS_STRIDE,
                          false, "downsample.conv"))
        st = err->status;
    if (!st) st = load_quantizer(e, err);
    if (st) {
        qtts_codec_encoder_free(e);
        return st;
    }
    *out = e;
    return QTTS_OK;
}

/* ---- run ---------------------------------------------------------------- */

/* Allocation of count floats with an overflow-checked size; NULL on failure. */
static float *falloc(uint64_t count) {
    uint64_t bytes;
    if (!qtts_mul_ok(count ? count : 1, sizeof(float), &bytes) || bytes > SIZE_MAX) return NULL;
    return qtts_aligned_alloc((size_t)bytes);
}

static void emit(const qtts_codec_enc_hook *h, const char *stage, const float *x, int C, int n,
                 size_t ld) {
    if (h && h->fn) h->fn(h->user, stage, x, C, n, ld);
}

/* Emit a time-major [n, C] array as channel-major [C, n]. */
static qtts_status emit_tm(const qtts_codec_enc_hook *h, const char *stage, const float *x, int C,
                           int n, qtts_err *err) {
    if (!h || !h->fn) return QTTS_OK;
    float *t = falloc((uint64_t)C * n);
    if (!t) return nomem(err, "stage hook");
    qtts_transpose(t, (size_t)n, x, (size_t)C, n, C);
    h->fn(h->user, stage, t, C, n, (size_t)n);
    qtts_free(t);
    return QTTS_OK;
}

/* Move the last P of the (P + n) columns of each row to the front. */
static void keep_tail(float *buf, size_t ld, int rows, int P, int n) {
    if (P == 0 || n == 0) return;
    for (int r = 0; r < rows; r++) {
        float *row = buf + (size_t)r * ld;
        memmove(row, row + n, sizeof(float) * (size_t)P);
    }
}

/* One conv's input buffer: rows x (P + cap) with P history columns. */
typedef struct {
    float *buf;
    int rows, P, cap;
    size_t ld;
} hist_buf;

static bool hist_alloc(hist_buf *h, int rows, int P, int cap) {
    h->rows = rows;
    h->P = P;
    h->cap = cap;
    h->ld = (size_t)P + (size_t)cap;
    h->buf = falloc((uint64_t)rows * h->ld);
    if (h->buf) memset(h->buf, 0, sizeof(float) * (size_t)rows * h->ld);
    return h->buf != NULL;
}

static inline float *hist_cur(const hist_buf *h) { return h->buf + h->P; }

/* Phase 1: SEANet over wav[n] into out_tm [T, hidden] (T = ceil(n / hop)). */
static qtts_status run_seanet(const qtts_codec_encoder *e, const float *wav, size_t n, int T,
                              float *out_tm, qtts_err *err) {
    const int S = e->n_stages, cf = QTTS_MIN(QTTS_MAX(e->chunk_frames, 1), T);
    const int N0 = cf * e->hop;
    int stride_prod = 1;
    /* buffers: conv_in input, per stage (residual inputs, packed down
     * input), conv_out input; X (stage activations), Hb (residual middle),
     * Y (final conv output) */
    const int n_hist = 2 + S * (e->n_res + 1);
    hist_buf *hb = qtts_calloc((size_t)n_hist, sizeof(hist_buf));
    if (!hb) return nomem(err, "SEANet buffers");
    uint64_t x_cap = (uint64_t)e->filters * N0, h_cap = 1;
    bool ok = hist_alloc(&hb[0], 1, e->conv_in.taps - 1, N0);
    int bi = 1, C = e->filters, Ni = N0;
    for (int i = 0; ok && i < S; i++) {
        const qtts_enc_stage *s = &e->stages[i];
        for (int j = 0; ok && j < e->n_res; j++) {
            const qtts_conv1d *c1 = &s->res[j].conv1;
            ok = hist_alloc(&hb[bi++], C, (c1->taps - 1) * c1->dil, Ni);
            h_cap = QTTS_MAX(h_cap, (uint64_t)c1->cout * Ni);
        }
        const int m = Ni / s->stride; /* N0 is a multiple of hop */
        ok = ok && hist_alloc(&hb[bi++], C * s->stride, s->down.taps - 1, m);
        C *= 2;
        Ni = m;
        stride_prod *= s->stride;
        x_cap = QTTS_MAX(x_cap, (uint64_t)C * Ni);
    }
    QTTS_ASSERT(!ok || stride_prod == e->hop);
    ok = ok && hist_alloc(&hb[bi++], C, e->conv_out.taps - 1, Ni);
    float *X = ok ? falloc(x_cap) : NULL, *Hb = X ? falloc(h_cap) : NULL;
    float *Y = Hb ? falloc((uint64_t)e->hidden * Ni) : NULL;
    qtts_conv_ws *ws = Y ? qtts_conv_ws_new() : NULL;
    qtts_status st = QTTS_OK;
    if (!ws) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "codec encoder: out of memory for the SEANet buffers");
        goto done;
    }

    int t_out = 0;
    for (size_t pos = 0; pos < n; pos += (size_t)N0) {
        const int n0 = (int)QTTS_MIN((size_t)N0, n - pos);
        const bool last = pos + (size_t)N0 >= n;
        /* layers.0 */
        memcpy(hist_cur(&hb[0]), wav + pos, sizeof(float) * (size_t)n0);
        qtts_conv1d_run(&e->conv_in, X, (size_t)n0, hist_cur(&hb[0]), hb[0].ld, n0, false, ws);
        if (!last) keep_tail(hb[0].buf, hb[0].ld, 1, hb[0].P, n0);
        int ni = n0;
        bi = 1;
        for (int i = 0; i < S; i++) {
            const qtts_enc_stage *s = &e->stages[i];
            const int Ci = s->cin;
            /* X [Ci, ni] (row stride ni) */
            for (int j = 0; j < e->n_res; j++) {
                const qtts_enc_resblock *rb = &s->res[j];
                hist_buf *h = &hb[bi++];
                qtts_elu(hist_cur(h), h->ld, X, (size_t)ni, Ci, ni);
                qtts_conv1d_run(&rb->conv1, Hb, (size_t)ni, hist_cur(h), h->ld, ni, false, ws);
                if (!last) keep_tail(h->buf, h->ld, h->rows, h->P, ni);
                qtts_elu(Hb, (size_t)ni, Hb, (size_t)ni, rb->conv1.cout, ni);
                qtts_conv1d_run(&rb->conv2, X, (size_t)ni, Hb, (size_t)ni, ni, true, ws);
            }
            hist_buf *h = &hb[bi++];
            const int m = (ni + s->stride - 1) / s->stride;
            qtts_elu(X, (size_t)ni, X, (size_t)ni, Ci, ni);   /* X is free after the pack */
            qtts_phase_pack(hist_cur(h), h->ld, X, (size_t)ni, Ci, ni, s->stride, false, false);
            qtts_conv1d_run(&s->down, X, (size_t)m, hist_cur(h), h->ld, m, false, ws);
            if (!last) keep_tail(h->buf, h->ld, h->rows, h->P, m);
            ni = m;
        }
        hist_buf *h = &hb[bi++];
        qtts_elu(hist_cur(h), h->ld, X, (size_t)ni, h->rows, ni);
        qtts_conv1d_run(&e->conv_out, Y, (size_t)ni, hist_cur(h), h->ld, ni, false, ws);
        if (!last) keep_tail(h->buf, h->ld, h->rows, h->P, ni);
        QTTS_ASSERT(t_out + ni <= T);
        qtts_transpose(out_tm + (size_t)t_out * e->hidden, (size_t)e->hidden, Y, (size_t)ni,
                       e->hidden, ni);
        t_out += ni;
    }
    QTTS_ASSERT(t_out == T);

done:
    for (int i = 0; i < n_hist; i++) qtts_free(hb[i].buf);
    qtts_free(hb);
    qtts_free(X);
    qtts_free(Hb);
    qtts_free(Y);
    qtts_conv_ws_free(ws);
    return st;
}

/* Causal attention of one head over the transformer's T positions (query
 * i sees keys 0..i): heads write disjoint slices of att and use their own
 * row of scores, so they are tasks of the thread pool. */
typedef struct {
    const qtts_codec_encoder *e;
    const float *q, *k, *v;   /* [T, qd], [T, kvd], [T, kvd] */
    float *att, *sc;          /* [T, qd], [heads, T] */
    int T;
    float scale;
} enc_attn_job;

static void enc_attn_head(void *ctx, int hh) {
    const enc_attn_job *a = ctx;
    const qtts_codec_encoder *e = a->e;
    const int D = e->head_dim, qd = e->heads * D, kvd = e->kv_heads * D;
    const int kh = hh / (e->heads / e->kv_heads);
    float *sc = a->sc + (size_t)hh * a->T;
    for (int i = 0; i < a->T; i++) {
        const float *qi = a->q + (size_t)i * qd + hh * D;
        qtts_attn_scores(sc, 0, qi, 1, a->k + kh * D, (size_t)kvd, i + 1, D, a->scale, NULL, 0);
        qtts_softmax(sc, i + 1);
        qtts_attn_out(a->att + (size_t)i * qd + hh * D, sc, 0, 1, a->v + kh * D, (size_t)kvd,
                      i + 1, D, false, NULL, 0);
    }
}

/* GELU of one row of the MLP's [rows, inter] activations (rows are pool
 * tasks; erff one value at a time is a quarter of the transformer's time
 * on one thread). */
typedef struct {
    float *x;
    int cols;
} gelu_job;

static void gelu_row(void *ctx, int r) {
    const gelu_job *g = ctx;
    qtts_gelu_erf_inplace(g->x + (size_t)r * g->cols, (size_t)g->cols);
}

/* Phase 2: the transformer, in place on x [T, hidden]. */
static qtts_status run_transformer(const qtts_codec_encoder *e, float *x, int T, qtts_err *err) {
    const int H = e->hidden, I = e->inter, D = e->head_dim, half = D / 2;
    const int qd = e->heads * D, kvd = e->kv_heads * D;
    const int mb = QTTS_MIN(T, MLP_ROWS);
    const uint64_t total = (uint64_t)T * (2u * H + 2u * qd + 2u * kvd + 2u * half +
                                          (uint64_t)e->heads) +
                           (uint64_t)mb * I;
    float *buf = falloc(total);
    if (!buf)
        return qtts_fail(err, QTTS_ERR_NOMEM,
                         "codec encoder: out of memory for the transformer (%d frames, %.1f MiB)",
                         T, (double)total * 4.0 / 1048576.0);
    float *xn = buf;                            /* [T, H] */
    float *tmp = xn + (size_t)T * H;            /* [T, H] */
    float *q = tmp + (size_t)T * H;             /* [T, qd] */
    float *att = q + (size_t)T * qd;            /* [T, qd] */
    float *k = att + (size_t)T * qd;            /* [T, kvd] */
    float *v = k + (size_t)T * kvd;             /* [T, kvd] */
    float *cos_t = v + (size_t)T * kvd;         /* [T, half] */
    float *sin_t = cos_t + (size_t)T * half;    /* [T, half] */
    float *sc = sin_t + (size_t)T * half;       /* [heads, T] scores */
    float *mlp = sc + (size_t)T * e->heads;     /* [mb, I] */
    const float scale = 1.0f / sqrtf((float)D);

    qtts_rope_table(cos_t, sin_t, T, D, e->rope_theta);
    for (int l = 0; l < e->layers; l++) {
        const qtts_enc_layer *L = &e->tl[l];
        for (int t = 0; t < T; t++)
            qtts_layernorm(xn + (size_t)t * H, x + (size_t)t * H, L->ln1_w, L->ln1_b, H,
                           e->norm_eps);
        qtts_matmul(q, xn, T, &L->q, NULL);
        qtts_matmul(k, xn, T, &L->k, NULL);
        qtts_matmul(v, xn, T, &L->v, NULL);
        for (int t = 0; t < T; t++) {
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int hh = 0; hh < e->heads; hh++) qtts_rope(q + (size_t)t * qd + hh * D, c, s, D);
            for (int hh = 0; hh < e->kv_heads; hh++) qtts_rope(k + (size_t)t * kvd + hh * D, c, s, D);
        }
        enc_attn_job aj = {e, q, k, v, att, sc, T, scale};
        qtts_parallel_for(e->heads, enc_attn_head, &aj);
        qtts_matmul(tmp, att, T, &L->o, NULL);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < H; c++) x[(size_t)t * H + c] += L->attn_scale[c] * tmp[(size_t)t * H + c];
        for (int t = 0; t < T; t++)
            qtts_layernorm(xn + (size_t)t * H, x + (size_t)t * H, L->ln2_w, L->ln2_b, H,
                           e->norm_eps);
        for (int t0 = 0; t0 < T; t0 += mb) {
            const int rows = QTTS_MIN(mb, T - t0);
            qtts_matmul(mlp, xn + (size_t)t0 * H, rows, &L->fc1, NULL);
            gelu_job gj = {mlp, I};
            qtts_parallel_for(rows, gelu_row, &gj);
            qtts_matmul(tmp + (size_t)t0 * H, mlp, rows, &L->fc2, NULL);
        }
        for (int t = 0; t < T; t++)
            for (int c = 0; c < H; c++) x[(size_t)t * H + c] += L->mlp_scale[c] * tmp[(size_t)t * H + c];
    }
    qtts_free(buf);
    return QTTS_OK;
}

/* Phase 3a: downsample x [T, hidden] (time-major) into emb [F, hidden]
 * (time-major). The conv pads both sides by replicating the edge frame. */
static qtts_status run_downsample(const qtts_codec_encoder *e, const float *x, int T, int F,
                                  float *emb, const qtts_codec_enc_hook *hook, qtts_err *err) {
    const int H = e->hidden, Q = e->downsample.taps - 1;
    const size_t ldx = (size_t)Q + F;
    float *xc = falloc((uint64_t)H * T), *X = xc ? falloc((uint64_t)H * DS_STRIDE * ldx) : NULL;
    float *y = X ? falloc((uint64_t)H * F) : NULL;
    qtts_status st = QTTS_OK;
    if (!y) {
        st = nomem(err, "downsample");
        goto done;
    }
    qtts_transpose(xc, (size_t)T, x, (size_t)H, T, H); /* [H, T] */
    for (int r = 0; r < H * DS_STRIDE; r++)
        for (int c = 0; c < Q; c++) X[(size_t)r * ldx + c] = xc[(size_t)(r / DS_STRIDE) * T];
    qtts_phase_pack(X + Q, ldx, xc, (size_t)T, H, T, DS_STRIDE, false, true);
    qtts_conv1d_run(&e->downsample, y, (size_t)F, X + Q, ldx, F, false, NULL);
    emit(hook, "downsample", y, H, F, (size_t)F);
    qtts_transpose(emb, (size_t)H, y, (size_t)F, H, F);
done:
    qtts_free(xc);
    qtts_free(X);
    qtts_free(y);
    return st;
}

/* Quantizer q of every frame: the frames are independent, so blocks of
 * VQ_ROWS frames are tasks of the thread pool, and the codebook (2 MB at
 * full size) stays in the caches while every frame reads it, where a
 * frame-by-frame walk through all 16 codebooks read them from memory for
 * each frame. */
#define VQ_ROWS 8
typedef struct {
    const qtts_codec_encoder *e;
    float *r;          /* [F, cb_dim] residuals */
    int32_t *codes;    /* [F, n_out] */
    int F, q;
} vq_job;

static void vq_block(void *ctx, int t) {
    const vq_job *j = ctx;
    const qtts_codec_encoder *e = j->e;
    const int V = e->cb_dim, f0 = t * VQ_ROWS, n = QTTS_MIN(VQ_ROWS, j->F - f0);
    const float *cb = e->codebooks + (size_t)e->cb_size * V * j->q;
    int idx[VQ_ROWS];
    qtts_vq_nearest_rows(j->r + (size_t)f0 * V, n, cb, e->cb_sq + (size_t)e->cb_size * j->q,
                         e->cb_size, V, idx);
    for (int i = 0; i < n; i++) {
        float *rf = j->r + (size_t)(f0 + i) * V;
        j->codes[(size_t)(f0 + i) * e->n_out + j->q] = idx[i];
        const float *c = cb + (size_t)idx[i] * V;
        for (int d = 0; d < V; d++) rf[d] = rf[d] - c[d];
    }
}

/* Phase 3b: split residual VQ of emb [F, hidden] into codes [F, n_out]. */
static qtts_status run_quantizer(const qtts_codec_encoder *e, const float *emb, int F,
                                 int32_t *codes, qtts_err *err) {
    const int V = e->cb_dim;
    float *r = falloc((uint64_t)F * V);
    if (!r) return nomem(err, "quantizer");
    for (int g = 0; g < 2; g++) {
        const int q0 = g ? e->n_sem : 0, nq = g ? e->n_ac : e->n_sem;
        if (nq == 0) continue;
        const qtts_mat *proj = g ? &e->proj_ac : &e->proj_sem;
        if (proj->data)
            qtts_matmul(r, emb, F, proj, NULL);
        else
            memcpy(r, emb, sizeof(float) * (size_t)F * V);
        for (int q = q0; q < q0 + nq; q++) {
            vq_job j = {e, r, codes, F, q};
            qtts_parallel_for((F + VQ_ROWS - 1) / VQ_ROWS, vq_block, &j);
        }
    }
    qtts_free(r);
    return QTTS_OK;
}

qtts_status qtts_codec_encode_hooked(const qtts_codec_encoder *e, const float *wav, size_t n,
                                     int32_t **codes_out, int *frames_out,
                                     const qtts_codec_enc_hook *hook, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    if (!e || !codes_out || !frames_out || (!wav && n))
        return qtts_fail(err, QTTS_ERR_INVALID, "codec encode: NULL argument");
    if (n == 0) return qtts_fail(err, QTTS_ERR_INVALID, "codec encode: empty audio");
    if (n > e->max_samples)
        return qtts_fail(err, QTTS_ERR_LIMIT,
                         "codec encode: %zu samples exceed the limit of %zu (%d s at %d Hz)", n,
                         e->max_samples, QTTS_CODEC_ENC_MAX_SECONDS, e->sample_rate);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(wav[i]))
            return qtts_fail(err, QTTS_ERR_INVALID, "codec encode: sample %zu is not finite", i);

    const int T = (int)((n + (size_t)e->hop - 1) / (size_t)e->hop);
    const int F = (T + DS_STRIDE - 1) / DS_STRIDE;
    const int H = e->hidden;
    float *x = falloc((uint64_t)T * H), *emb = x ? falloc((uint64_t)F * H) : NULL;
    int32_t *codes = emb ? qtts_malloc(sizeof(int32_t) * (size_t)F * (size_t)e->n_out) : NULL;
    qtts_status st = QTTS_OK;
    if (!codes) {
        st = qtts_fail(err, QTTS_ERR_NOMEM, "codec encode: out of memory for %zu samples", n);
        goto fail;
    }
    if ((st = run_seanet(e, wav, n, T, x, err))) goto fail;
    if ((st = emit_tm(hook, "encoder", x, H, T, err))) goto fail;
    if ((st = run_transformer(e, x, T, err))) goto fail;
    if ((st = emit_tm(hook, "encoder_transformer", x, H, T, err))) goto fail;
    if ((st = run_downsample(e, x, T, F, emb, hook, err))) goto fail;
    if ((st = run_quantizer(e, emb, F, codes, err))) goto fail;
    qtts_free(x);
    qtts_free(emb);
    *codes_out = codes;
    *frames_out = F;
    return QTTS_OK;

fail:
    qtts_free(x);
    qtts_free(emb);
    qtts_free(codes);
    return st;
}
