/*
 * talker.c - weight binding and forward passes of the talker and the code
 * predictor (see talker.h for the dataflow and shapes).
 *
 * Forward structure, shared by both stacks (stack_rows):
 *
 *   x[n, D] rows at positions pos0..pos0+n-1 (one request's timeline)
 *   per layer:
 *     h[n,D]   = rmsnorm(x) per row
 *     q[n,qd], k[n,kvd], v[n,kvd] = one qtts_matmul each over the n rows
 *     per row:  qk_norm_rope_row (per-head q/k rmsnorm, rotate-half RoPE),
 *               K/V written to the cache at the row's position
 *     per row:  attend_row (causal GQA over cache positions 0..pos)
 *     x += att[n,qd]·Woᵀ ; x += down(silu(gate(h2)) * up(h2))
 *
 * KV cache layout, per stack: [layer][kv head][position][hd], so one head's
 * keys for consecutive positions are contiguous. The talker prefill runs in
 * chunks of QTTS_TALKER_ROWS rows; a row's result does not depend on the
 * chunking because matmul rows and attend_row are row-independent.
 */
#include "talker.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define QTTS_TALKER_ROWS 16  /* prefill chunk: rows per stack_rows call */

struct qtts_talker_state {
    int max_pos;        /* talker KV capacity (positions) */
    int pos;            /* talker positions filled */
    float *k, *v;       /* [Lt][nkv][max_pos][hd] */
    float *cos, *sin;   /* [max_pos][hd/2] talker RoPE */
    float *cp_k, *cp_v; /* [Lc][nkv][G][hd] */

    /* scratch for up to QTTS_TALKER_ROWS rows of either stack */
    float *x;           /* [rows, Dmax] residual stream */
    float *h;           /* [rows, Dmax] normed / projected rows */
    float *q;           /* [rows, qdmax] */
    float *kk, *vv;     /* [rows, kvdmax] */
    float *att;         /* [rows, qdmax] */
    float *gate, *up;   /* [rows, Imax] */
    float *scores;      /* [max(max_pos, G)] attention scores of one head */
    float *in2;         /* [2, H] CP inputs before the projection */
    float *cp_h;        /* [C] final-normed CP row */
    float *cp_logits;   /* [Vc] */
    void *sample_scratch;
};

bool qtts_all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* ====================================================================== */
/* Loading                                                                 */
/* ====================================================================== */

#define MAT_MASK ((1u << QTTS_DT_BF16) | (1u << QTTS_DT_F32))
#define VEC_MASK ((1u << QTTS_DT_BF16) | (1u << QTTS_DT_F32) | (1u << QTTS_DT_F16))

static bool bind_mat(const qtts_st_set *st, const char *name, int rows, int cols, qtts_mat *out,
                     qtts_err *err) {
    int64_t shape[2] = {rows, cols};
    const qtts_tensor *t = qtts_st_expect(st, name, MAT_MASK, 2, shape, err);
    if (!t) return false;
    *out = qtts_mat_from(t);
    return true;
}

/* A small vector converted to an owned f32 copy. */
static float *load_vec(const qtts_st_set *st, const char *name, int n, qtts_err *err) {
    int64_t shape[1] = {n};
    const qtts_tensor *t = qtts_st_expect(st, name, VEC_MASK, 1, shape, err);
    if (!t) return NULL;
    float *v = qtts_malloc(sizeof(float) * (size_t)n);
    if (!v) {
        qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory loading %s", name);
        return NULL;
    }
    qtts_tensor_to_f32(t, v);
    return v;
}

static qtts_status load_stack(const qtts_st_set *st, const char *prefix,
                              const qtts_stack_config *c, qtts_stack_weights *w, qtts_err *err) {
    char name[256];
    const int D = c->hidden, qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
    w->dim = D;
    w->inter = c->inter;
    w->n_layers = c->layers;
    w->n_heads = c->heads;
    w->n_kv = c->kv_heads;
    w->head_dim = c->head_dim;
    w->eps = c->rms_eps;
    w->theta = c->rope_theta;
    if (c->head_dim % 2 || c->heads % c->kv_heads)
        return qtts_fail(err, QTTS_ERR_FORMAT, "%s: head_dim %d must be even and kv heads %d "
                         "must divide heads %d", prefix, c->head_dim, c->kv_heads, c->heads);
    w->layers = qtts_calloc((size_t)c->layers, sizeof(*w->layers));
    if (!w->layers) return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    for (int l = 0; l < c->layers; l++) {
        qtts_layer_weights *L = &w->layers[l];
        const char *p = prefix;
        if (!bind_mat(st, NAME("%s.layers.%d.self_attn.q_proj.weight", p, l), qd, D, &L->q, err) ||
            !bind_mat(st, NAME("%s.layers.%d.self_attn.k_proj.weight", p, l), kvd, D, &L->k, err) ||
            !bind_mat(st, NAME("%s.layers.%d.self_attn.v_proj.weight", p, l), kvd, D, &L->v, err) ||
            !bind_mat(st, NAME("%s.layers.%d.self_attn.o_proj.weight", p, l), D, qd, &L->o, err) ||
            !bind_mat(st, NAME("%s.layers.%d.mlp.gate_proj.weight", p, l), c->inter, D, &L->gate,
                      err) ||
            !bind_mat(st, NAME("%s.layers.%d.mlp.up_proj.weight", p, l), c->inter, D, &L->up, err) ||
            !bind_mat(st, NAME("%s.layers.%d.mlp.down_proj.weight", p, l), D, c->inter, &L->down,
                      err))
            return err->status;
        if (!(L->attn_norm = load_vec(st, NAME("%s.layers.%d.input_layernorm.weight", p, l), D,
                                      err)) ||
            !(L->mlp_norm = load_vec(
                  st, NAME("%s.layers.%d.post_attention_layernorm.weight", p, l), D, err)) ||
            !(L->q_norm = load_vec(st, NAME("%s.layers.%d.self_attn.q_norm.weight", p, l),
                                   c->head_dim, err)) ||
            !(L->k_norm = load_vec(st, NAME("%s.layers.%d.self_attn.k_norm.weight", p, l),
                                   c->head_dim, err)))
            return err->status;
    }
    if (!(w->norm = load_vec(st, NAME("%s.norm.weight", prefix), D, err)))
        return err->status;
#undef NAME
    return QTTS_OK;
}

static void free_stack(qtts_stack_weights *w) {
    if (w->layers)
        for (int l = 0; l < w->n_layers; l++) {
            qtts_free(w->layers[l].attn_norm);
            qtts_free(w->layers[l].mlp_norm);
            qtts_free(w->layers[l].q_norm);
            qtts_free(w->layers[l].k_norm);
        }
    qtts_free(w->layers);
    qtts_free(w->norm);
}

void qtts_talker_free(qtts_talker_weights *w) {
    if (!w) return;
    free_stack(&w->talker);
    free_stack(&w->cp);
    qtts_free(w->text_fc1_b);
    qtts_free(w->text_fc2_b);
    qtts_free(w->cp_embedding);
    qtts_free(w->cp_head);
    qtts_free(w->mtp_b);
    qtts_free(w->cp_cos);
    qtts_free(w->cp_sin);
    qtts_free(w->p_pad);
    qtts_free(w->p_bos);
    qtts_free(w->p_eos);
    qtts_free(w);
}

qtts_status qtts_talker_load(const qtts_config *cfg, const qtts_st_set *st,
                             qtts_talker_weights **out, qtts_err *err) {
    *out = NULL;
    qtts_err local;
    if (!err) err = &local;
    char name[256];
    const int H = cfg->talker.hidden, T = cfg->text_hidden, V = cfg->talker.vocab;
    const int G = cfg->talker.num_code_groups, C = cfg->cp.hidden, Vc = cfg->cp.vocab;
    if (cfg->cp.num_code_groups != G || G < 2)
        return qtts_fail(err, QTTS_ERR_FORMAT, "config: code predictor num_code_groups %d != "
                         "talker num_code_groups %d (or < 2)", cfg->cp.num_code_groups, G);
    qtts_talker_weights *w = qtts_calloc(1, sizeof(*w));
    if (!w) return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
    w->hidden = H;
    w->text_hidden = T;
    w->text_vocab = cfg->text_vocab;
    w->vocab = V;
    w->n_groups = G;
    w->cp_vocab = Vc;
    qtts_status s;
#define FAIL_IF(cond)                                                          \
    do {                                                                       \
        if (cond) {                                                            \
            s = err->status;                                                   \
            goto fail;                                                         \
        }                                                                      \
    } while (0)
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)

    if ((s = load_stack(st, "talker.model", &cfg->talker, &w->talker, err))) goto fail;
    if ((s = load_stack(st, "talker.code_predictor.model", &cfg->cp, &w->cp, err))) goto fail;

    FAIL_IF(!bind_mat(st, "talker.model.text_embedding.weight", w->text_vocab, T,
                      &w->text_embedding, err));
    FAIL_IF(!bind_mat(st, "talker.text_projection.linear_fc1.weight", T, T, &w->text_fc1, err));
    FAIL_IF(!(w->text_fc1_b = load_vec(st, "talker.text_projection.linear_fc1.bias", T, err)));
    FAIL_IF(!bind_mat(st, "talker.text_projection.linear_fc2.weight", H, T, &w->text_fc2, err));
    FAIL_IF(!(w->text_fc2_b = load_vec(st, "talker.text_projection.linear_fc2.bias", H, err)));
    FAIL_IF(!bind_mat(st, "talker.model.codec_embedding.weight", V, H, &w->codec_embedding, err));
    FAIL_IF(!bind_mat(st, "talker.codec_head.weight", V, H, &w->codec_head, err));

    w->cp_embedding = qtts_calloc((size_t)(G - 1), sizeof(qtts_mat));
    w->cp_head = qtts_calloc((size_t)(G - 1), sizeof(qtts_mat));
    if (!w->cp_embedding || !w->cp_head) {
        s = qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
        goto fail;
    }
    for (int j = 0; j < G - 1; j++) {
        FAIL_IF(!bind_mat(st, NAME("talker.code_predictor.model.codec_embedding.%d.weight", j), Vc,
                          H, &w->cp_embedding[j], err));
        FAIL_IF(!bind_mat(st, NAME("talker.code_predictor.lm_head.%d.weight", j), Vc, C,
                          &w->cp_head[j], err));
    }

    /* small_to_mtp_projection exists iff the CP is narrower/wider than the talker. */
    const char *mtp_w = "talker.code_predictor.small_to_mtp_projection.weight";
    const char *mtp_b = "talker.code_predictor.small_to_mtp_projection.bias";
    bool present = qtts_st_set_find(st, mtp_w) || qtts_st_set_find(st, mtp_b);
    if (C != H) {
        if (!present) {
            s = qtts_fail(err, QTTS_ERR_FORMAT, "model.safetensors: tensor %s missing (code "
                          "predictor hidden %d != talker hidden %d)", mtp_w, C, H);
            goto fail;
        }
        w->has_mtp = true;
        FAIL_IF(!bind_mat(st, mtp_w, C, H, &w->mtp, err));
        FAIL_IF(!(w->mtp_b = load_vec(st, mtp_b, C, err)));
    } else if (present) {
        s = qtts_fail(err, QTTS_ERR_FORMAT, "model.safetensors: small_to_mtp_projection present "
                      "but code predictor hidden == talker hidden (%d)", H);
        goto fail;
    }

    const int half = w->cp.head_dim / 2;
    w->cp_cos = qtts_malloc(sizeof(float) * (size_t)G * half);
    w->cp_sin = qtts_malloc(sizeof(float) * (size_t)G * half);
    w->p_pad = qtts_malloc(sizeof(float) * (size_t)H);
    w->p_bos = qtts_malloc(sizeof(float) * (size_t)H);
    w->p_eos = qtts_malloc(sizeof(float) * (size_t)H);
    if (!w->cp_cos || !w->cp_sin || !w->p_pad || !w->p_bos || !w->p_eos) {
        s = qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
        goto fail;
    }
    qtts_rope_table(w->cp_cos, w->cp_sin, G, w->cp.head_dim, w->cp.theta);
    const int32_t pad = cfg->tts_pad_id, bos = cfg->tts_bos_id, eos = cfg->tts_eos_id;
    if ((s = qtts_talker_text_proj(w, &pad, 1, w->p_pad, err)) ||
        (s = qtts_talker_text_proj(w, &bos, 1, w->p_bos, err)) ||
        (s = qtts_talker_text_proj(w, &eos, 1, w->p_eos, err)))
        goto fail;
#undef NAME
#undef FAIL_IF
    *out = w;
    return QTTS_OK;
fail:
    qtts_talker_free(w);
    return s ? s : QTTS_ERR_FORMAT;
}

/* ====================================================================== */
/* State                                                                   */
/* ====================================================================== */

void qtts_talker_state_free(qtts_talker_state *st) {
    if (!st) return;
    qtts_free(st->k);
    qtts_free(st->v);
    qtts_free(st->cos);
    qtts_free(st->sin);
    qtts_free(st->cp_k);
    qtts_free(st->cp_v);
    qtts_free(st->x);
    qtts_free(st->h);
    qtts_free(st->q);
    qtts_free(st->kk);
    qtts_free(st->vv);
    qtts_free(st->att);
    qtts_free(st->gate);
    qtts_free(st->up);
    qtts_free(st->scores);
    qtts_free(st->in2);
    qtts_free(st->cp_h);
    qtts_free(st->cp_logits);
    qtts_free(st->sample_scratch);
    qtts_free(st);
}

/* n floats, overflow-checked, 64-byte aligned. */
static float *alloc_f(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t n;
    if (!qtts_mul_ok(a, b, &n) || !qtts_mul_ok(n, c, &n) || !qtts_mul_ok(n, d, &n) ||
        !qtts_mul_ok(n, sizeof(float), &n) || n > SIZE_MAX)
        return NULL;
    return qtts_aligned_alloc(n ? (size_t)n : 1);
}

qtts_status qtts_talker_state_new(const qtts_talker_weights *w, int max_pos,
                                  qtts_talker_state **out, qtts_err *err) {
    *out = NULL;
    if (max_pos < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "talker: max positions %d < 1", max_pos);
    qtts_talker_state *st = qtts_calloc(1, sizeof(*st));
    if (!st) return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
    const qtts_stack_weights *t = &w->talker, *c = &w->cp;
    const int R = QTTS_TALKER_ROWS, G = w->n_groups;
    const int D = QTTS_MAX(t->dim, c->dim), I = QTTS_MAX(t->inter, c->inter);
    const int qd = QTTS_MAX(t->n_heads * t->head_dim, c->n_heads * c->head_dim);
    const int kvd = QTTS_MAX(t->n_kv * t->head_dim, c->n_kv * c->head_dim);
    const int V = QTTS_MAX(w->vocab, w->cp_vocab);
    st->max_pos = max_pos;
    st->k = alloc_f(t->n_layers, t->n_kv, max_pos, t->head_dim);
    st->v = alloc_f(t->n_layers, t->n_kv, max_pos, t->head_dim);
    st->cos = alloc_f(max_pos, t->head_dim / 2, 1, 1);
    st->sin = alloc_f(max_pos, t->head_dim / 2, 1, 1);
    st->cp_k = alloc_f(c->n_layers, c->n_kv, G, c->head_dim);
    st->cp_v = alloc_f(c->n_layers, c->n_kv, G, c->head_dim);
    st->x = alloc_f(R, D, 1, 1);
    st->h = alloc_f(R, D, 1, 1);
    st->q = alloc_f(R, qd, 1, 1);
    st->kk = alloc_f(R, kvd, 1, 1);
    st->vv = alloc_f(R, kvd, 1, 1);
    st->att = alloc_f(R, qd, 1, 1);
    st->gate = alloc_f(R, I, 1, 1);
    st->up = alloc_f(R, I, 1, 1);
    st->scores = alloc_f(QTTS_MAX(max_pos, G), 1, 1, 1);
    st->in2 = alloc_f(2, w->hidden, 1, 1);
    st->cp_h = alloc_f(c->dim, 1, 1, 1);
    st->cp_logits = alloc_f(w->cp_vocab, 1, 1, 1);
    st->sample_scratch = qtts_malloc(QTTS_SAMPLE_SCRATCH(V));
    if (!st->k || !st->v || !st->cos || !st->sin || !st->cp_k || !st->cp_v || !st->x || !st->h ||
        !st->q || !st->kk || !st->vv || !st->att || !st->gate || !st->up || !st->scores ||
        !st->in2 || !st->cp_h || !st->cp_logits || !st->sample_scratch) {
        qtts_talker_state_free(st);
        return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory for a state of %d positions",
                         max_pos);
    }
    qtts_rope_table(st->cos, st->sin, max_pos, t->head_dim, t->theta);
    *out = st;
    return QTTS_OK;
}

int qtts_talker_state_max_pos(const qtts_talker_state *st) { return st->max_pos; }
int qtts_talker_state_pos(const qtts_talker_state *st) { return st->pos; }

/* ====================================================================== */
/* Per-row math (shared by single-stream and batched paths)               */
/* ====================================================================== */

/* Per-head q/k RMSNorm, then rotate-half RoPE with this row's cos/sin
 * [hd/2]. q[nh*hd], k[nkv*hd] in place. */
static void qk_norm_rope_row(const qtts_stack_weights *w, const qtts_layer_weights *L, float *q,
                             float *k, const float *cos, const float *sin) {
    const int hd = w->head_dim;
    for (int h = 0; h < w->n_heads; h++) {
        qtts_rmsnorm(q + (size_t)h * hd, q + (size_t)h * hd, L->q_norm, hd, w->eps);
        qtts_rope(q + (size_t)h * hd, cos, sin, hd);
    }
    for (int h = 0; h < w->n_kv; h++) {
        qtts_rmsnorm(k + (size_t)h * hd, k + (size_t)h * hd, L->k_norm, hd, w->eps);
        qtts_rope(k + (size_t)h * hd, cos, sin, hd);
    }
}

/* Causal GQA attention of one query row over cache positions [0, ctx).
 * kc/vc: one layer's cache [nkv][cap][hd]; q[nh*hd] -> out[nh*hd];
 * scores[ctx] scratch. */
static void attend_row(const qtts_stack_weights *w, const float *q, const float *kc,
                       const float *vc, int cap, int ctx, float *out, float *scores) {
    const int hd = w->head_dim, grp = w->n_heads / w->n_kv;
    const float scale = (float)(1.0 / sqrt((double)hd));
    for (int h = 0; h < w->n_heads; h++) {
        const float *qh = q + (size_t)h * hd;
        const float *kh = kc + (size_t)(h / grp) * cap * hd;
        const float *vh = vc + (size_t)(h / grp) * cap * hd;
        for (int j = 0; j < ctx; j++) scores[j] = qtts_dot_f32(qh, kh + (size_t)j * hd, hd) * scale;
        qtts_softmax(scores, ctx);
        float *oh = out + (size_t)h * hd;
        memset(oh, 0, sizeof(float) * (size_t)hd);
        for (int j = 0; j < ctx; j++) {
            const float p = scores[j], *vj = vh + (size_t)j * hd;
            for (int d = 0; d < hd; d++) oh[d] += p * vj[d];
        }
    }
}

/* Run the stack on x[n, D] (rows at positions pos0..pos0+n-1, n <=
 * QTTS_TALKER_ROWS), writing K/V into kc/vc ([layers][nkv][cap][hd]).
 * x is updated in place to the last layer's output (before the final norm). */
static void stack_rows(const qtts_stack_weights *w, float *kc, float *vc, int cap,
                       const float *cos_t, const float *sin_t, int pos0, int n, float *x,
                       qtts_talker_state *st) {
    const int D = w->dim, I = w->inter, hd = w->head_dim, half = hd / 2;
    const int qd = w->n_heads * hd, kvd = w->n_kv * hd;
    const size_t layer_stride = (size_t)w->n_kv * cap * hd;
    for (int l = 0; l < w->n_layers; l++) {
        const qtts_layer_weights *L = &w->layers[l];
        float *kl = kc + l * layer_stride, *vl = vc + l * layer_stride;
        for (int r = 0; r < n; r++)
            qtts_rmsnorm(st->h + (size_t)r * D, x + (size_t)r * D, L->attn_norm, D, w->eps);
        qtts_matmul(st->q, st->h, n, &L->q, NULL);
        qtts_matmul(st->kk, st->h, n, &L->k, NULL);
        qtts_matmul(st->vv, st->h, n, &L->v, NULL);
        for (int r = 0; r < n; r++) {
            const int p = pos0 + r;
            float *kr = st->kk + (size_t)r * kvd, *vr = st->vv + (size_t)r * kvd;
            qk_norm_rope_row(w, L, st->q + (size_t)r * qd, kr, cos_t + (size_t)p * half,
                             sin_t + (size_t)p * half);
            for (int g = 0; g < w->n_kv; g++) {
                memcpy(kl + ((size_t)g * cap + p) * hd, kr + (size_t)g * hd, sizeof(float) * hd);
                memcpy(vl + ((size_t)g * cap + p) * hd, vr + (size_t)g * hd, sizeof(float) * hd);
            }
        }
        for (int r = 0; r < n; r++)
            attend_row(w, st->q + (size_t)r * qd, kl, vl, cap, pos0 + r + 1,
                       st->att + (size_t)r * qd, st->scores);
        qtts_matmul(st->h, st->att, n, &L->o, NULL);
        qtts_add_inplace(x, st->h, (size_t)n * D);

        for (int r = 0; r < n; r++)
            qtts_rmsnorm(st->h + (size_t)r * D, x + (size_t)r * D, L->mlp_norm, D, w->eps);
        qtts_matmul(st->gate, st->h, n, &L->gate, NULL);
        qtts_matmul(st->up, st->h, n, &L->up, NULL);
        qtts_swiglu(st->gate, st->gate, st->up, (size_t)n * I);
        qtts_matmul(st->h, st->gate, n, &L->down, NULL);
        qtts_add_inplace(x, st->h, (size_t)n * D);
    }
}

/* ====================================================================== */
/* Embeddings                                                              */
/* ====================================================================== */

qtts_status qtts_talker_text_proj(const qtts_talker_weights *w, const int32_t *ids, int n,
                                  float *out, qtts_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= w->text_vocab)
            return qtts_fail(err, QTTS_ERR_INVALID, "talker: text token id %d outside [0, %d)",
                             ids[i], w->text_vocab);
    const int T = w->text_hidden, R = QTTS_TALKER_ROWS;
    float *e = alloc_f(R, T, 1, 1), *h = alloc_f(R, T, 1, 1);
    if (!e || !h) {
        qtts_free(e);
        qtts_free(h);
        return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory (text projection)");
    }
    for (int i0 = 0; i0 < n; i0 += R) {
        const int m = QTTS_MIN(R, n - i0);
        for (int r = 0; r < m; r++) qtts_mat_row(e + (size_t)r * T, &w->text_embedding, ids[i0 + r]);
        qtts_matmul(h, e, m, &w->text_fc1, w->text_fc1_b);      /* [m, T] */
        qtts_silu_inplace(h, (size_t)m * T);
        qtts_matmul(out + (size_t)i0 * w->hidden, h, m, &w->text_fc2, w->text_fc2_b);  /* [m, H] */
    }
    qtts_free(e);
    qtts_free(h);
    return QTTS_OK;
}

void qtts_talker_codec_row(const qtts_talker_weights *w, int id, float *out) {
    qtts_mat_row(out, &w->codec_embedding, id);
}

void qtts_talker_codec_sum(const qtts_talker_weights *w, const int32_t *codes, float *out) {
    const int H = w->hidden;
    float row[H];
    qtts_mat_row(out, &w->codec_embedding, codes[0]);
    for (int i = 1; i < w->n_groups; i++) {
        qtts_mat_row(row, &w->cp_embedding[i - 1], codes[i]);
        qtts_add_inplace(out, row, (size_t)H);
    }
}

/* ====================================================================== */
/* Talker                                                                  */
/* ====================================================================== */

/* Final norm of the row xr[H] into hidden, logits = codec_head(hidden). */
static void talker_head(const qtts_talker_weights *w, const float *xr, float *logits,
                        float *hidden) {
    qtts_rmsnorm(hidden, xr, w->talker.norm, w->hidden, w->talker.eps);
    qtts_matmul(logits, hidden, 1, &w->codec_head, NULL);
}

qtts_status qtts_talker_prefill(const qtts_talker_weights *w, qtts_talker_state *st,
                                const float *embeds, int L, float *logits, float *hidden,
                                qtts_err *err) {
    if (L < 1 || L > st->max_pos)
        return qtts_fail(err, QTTS_ERR_LIMIT, "talker: prefill of %d positions does not fit the "
                         "state's %d", L, st->max_pos);
    const int H = w->hidden, R = QTTS_TALKER_ROWS;
    const qtts_stack_weights *t = &w->talker;
    st->pos = 0;
    int last = 0;
    for (int p0 = 0; p0 < L; p0 += R) {
        const int m = QTTS_MIN(R, L - p0);
        memcpy(st->x, embeds + (size_t)p0 * H, sizeof(float) * (size_t)m * H);
        stack_rows(t, st->k, st->v, st->max_pos, st->cos, st->sin, p0, m, st->x, st);
        last = m - 1;
    }
    st->pos = L;
    talker_head(w, st->x + (size_t)last * H, logits, hidden);
    return QTTS_OK;
}

qtts_status qtts_talker_step(const qtts_talker_weights *w, qtts_talker_state *st,
                             const float *x, float *logits, float *hidden, qtts_err *err) {
    if (st->pos >= st->max_pos)
        return qtts_fail(err, QTTS_ERR_LIMIT, "talker: KV cache full (%d positions)", st->max_pos);
    memcpy(st->x, x, sizeof(float) * (size_t)w->hidden);
    stack_rows(&w->talker, st->k, st->v, st->max_pos, st->cos, st->sin, st->pos, 1, st->x, st);
    st->pos++;
    talker_head(w, st->x, logits, hidden);
    return QTTS_OK;
}

/* ====================================================================== */
/* Code predictor                                                          */
/* ====================================================================== */

/* out[n, C] = S(in[n, H]): small_to_mtp_projection or identity. */
static void cp_project(const qtts_talker_weights *w, const float *in, int n, float *out) {
    if (w->has_mtp)
        qtts_matmul(out, in, n, &w->mtp, w->mtp_b);
    else
        memcpy(out, in, sizeof(float) * (size_t)n * w->hidden);
}

/* Norm the CP row xr[C], head j -> st->cp_logits, sample -> returned id. */
static qtts_status cp_head_sample(const qtts_talker_weights *w, qtts_talker_state *st,
                                  const float *xr, int j, const qtts_sampler_params *sp,
                                  qtts_rng *rng, float *logits_out, int *id, qtts_err *err) {
    const int Vc = w->cp_vocab;
    qtts_rmsnorm(st->cp_h, xr, w->cp.norm, w->cp.dim, w->cp.eps);
    qtts_matmul(st->cp_logits, st->cp_h, 1, &w->cp_head[j], NULL);
    if (!qtts_all_finite(st->cp_logits, (size_t)Vc))
        return qtts_fail(err, QTTS_ERR_NUMERIC, "code predictor: non-finite logits at step %d", j);
    if (logits_out) memcpy(logits_out, st->cp_logits, sizeof(float) * (size_t)Vc);
    *id = qtts_sample(st->cp_logits, Vc, sp, rng, st->sample_scratch, NULL);
    return QTTS_OK;
}

qtts_status qtts_cp_frame(const qtts_talker_weights *w, qtts_talker_state *st,
                          const float *hidden, int c0, const qtts_sampler_params *sp,
                          qtts_rng *rng, int32_t *codes_out, float *cp_logits_out,
                          qtts_err *err) {
    const int H = w->hidden, C = w->cp.dim, G = w->n_groups, Vc = w->cp_vocab;
    if (c0 < 0 || c0 >= w->vocab)
        return qtts_fail(err, QTTS_ERR_INVALID, "code predictor: c0 %d outside [0, %d)", c0,
                         w->vocab);
    qtts_status s;
    int id;
    /* positions 0, 1: [S(hidden), S(E(c0))]; the KV cache restarts. */
    memcpy(st->in2, hidden, sizeof(float) * (size_t)H);
    qtts_mat_row(st->in2 + H, &w->codec_embedding, c0);
    cp_project(w, st->in2, 2, st->x);
    stack_rows(&w->cp, st->cp_k, st->cp_v, G, w->cp_cos, w->cp_sin, 0, 2, st->x, st);
    if ((s = cp_head_sample(w, st, st->x + C, 0, sp, rng, cp_logits_out, &id, err))) return s;
    codes_out[0] = id;
    for (int j = 1; j < G - 1; j++) {
        /* codebook j (just predicted) enters through CP embedding j-1 at position j+1 */
        qtts_mat_row(st->in2, &w->cp_embedding[j - 1], codes_out[j - 1]);
        cp_project(w, st->in2, 1, st->x);
        stack_rows(&w->cp, st->cp_k, st->cp_v, G, w->cp_cos, w->cp_sin, j + 1, 1, st->x, st);
        if ((s = cp_head_sample(w, st, st->x, j, sp, rng,
                                cp_logits_out ? cp_logits_out + (size_t)j * Vc : NULL, &id, err)))
            return s;
        codes_out[j] = id;
    }
    return QTTS_OK;
}
