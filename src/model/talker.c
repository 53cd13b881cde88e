/*
 * talker.c - weight binding and forward passes of the talker and the code
 * predictor (see talker.h for the dataflow and shapes).
 *
 * Forward structure, shared by both stacks (stack_rows):
 *
 *   x[n, D] rows, each with its own row_ctx: the KV cache it belongs to,
 *   its position and its RoPE row. The rows of one call are consecutive
 *   positions of one request (a prefill chunk, the CP's first pass), or
 *   one position of each of n requests (a batched step or CP pass).
 *   per layer:
 *     h[n,D]   = rmsnorm(x) per row
 *     q[n,qd], k[n,kvd], v[n,kvd] = one qtts_matmul_multi over the n rows
 *     per KV head group, on the thread pool (attn_group):
 *       per row: q/k rmsnorm per head, rotate-half RoPE, K/V written to the
 *                row's cache at the row's position
 *       per row: causal GQA over the row's cache, positions 0..pos
 *     x += att[n,qd]·Woᵀ ; x += down(silu(gate(h2)) * up(h2)), gate/up and
 *     the SwiGLU one split over the pool (qtts_matmul_swiglu)
 *
 * KV cache layout, per stack: [chunk][layer][kv head][position in chunk][hd]
 * (row_ctx.chunk positions a chunk), so one head's keys for the positions
 * of a chunk are contiguous, and a request touches its cache densely, chunk
 * by chunk, whatever its capacity. The talker's chunks are QTTS_KV_CHUNK
 * positions, and its cache is on huge pages where the kernel gives them;
 * the code predictor's cache is one chunk of its G positions. The talker prefill runs in
 * chunks of QTTS_TALKER_ROWS rows. A row's result depends neither on the
 * chunking nor on which other rows (of this or other requests) share the
 * call, because matmul rows and everything per row are row-independent:
 * a batch of n requests gives each one exactly the bits it gets alone.
 */
#include "talker.h"

#include "../base/thread.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Prefill chunk: rows per stack_rows call. Each chunk reads every weight
 * once, so a typical prompt (a 12-word sentence is ~25 rows) is one chunk. */
#define QTTS_TALKER_ROWS 32

/* Positions per chunk of the talker's KV cache (a cache of fewer positions
 * is one chunk). Why chunks: in one [layer][kv head][capacity][hd] block, a
 * request writes a few positions into each of 2 x 224 regions of ~2 MB
 * (0.6B, 8192 positions), which only small pages suit (a huge page per
 * region is 900 MB zeroed), and then every 4 KB of K/V the attention reads
 * misses the TLB: on the Intel host the talker's attention took 1.04-1.09 ms
 * a step at 23-123 positions that way, against 0.82-0.86 ms on huge pages
 * (0.6B int4, bf16 cache). A chunk of 128 positions is 7.3 MB of bf16 keys
 * (0.6B and 1.7B), so a request's first chunk touches about what small
 * pages held at 123 positions, and contexts up to 128 positions (10 s of
 * audio) read each head in one piece. */
#define QTTS_KV_CHUNK 128

/* Where one row of a stack_rows call lives. */
typedef struct {
    void *k, *v;             /* its request's cache of this stack (layout above) */
    bool bf16;               /* that cache holds bf16 values (else fp32) */
    int cap;                 /* positions in that cache */
    int chunk;               /* positions per chunk of that cache */
    int pos;                 /* K/V go to this position; attention covers [0, pos] */
    const float *cos, *sin;  /* RoPE tables [> pos][hd/2] */
    float *scores;           /* [nkv][grp][cap] attention scratch of its request: a slice per KV
                              * head, a row per query head of its group */
} row_ctx;

/* Activations of up to cap rows of either stack. A state starts with
 * QTTS_TALKER_ROWS rows; a batched call grows the scratch of its first
 * job's state to the batch's row count. */
typedef struct {
    int cap;
    float *x;           /* [cap, Dmax] residual stream */
    float *h;           /* [cap, Dmax] normed / projected rows */
    float *q, *att;     /* [cap, qdmax] */
    float *kk, *vv;     /* [cap, kvdmax] */
    float *gate, *up;   /* [cap, Imax] */
    float *in;          /* [cap, H] CP inputs before the projection */
    float *head;        /* [cap, max(H, C)] final-normed rows */
    float *logits;      /* [cap, max(V, Vc)] head outputs */
    row_ctx *rc;        /* [cap] */
    int *idx;           /* [cap] job index of each row of a batched call */
    float *kvw;         /* a prefill over a bf16 cache: [nkv][2][kvw_pos][hd], one layer's K
                         * and V widened to fp32 for a chunk's rows (NULL otherwise) */
    int kvw_pos;
} row_scratch;

struct qtts_talker_state {
    int max_pos;        /* talker KV capacity (positions) */
    int kv_chunk;       /* positions per chunk of that cache (the layout above) */
    int pos;            /* talker positions filled */
    void *k, *v;        /* [max_pos/kv_chunk][Lt][nkv][kv_chunk][hd], fp32 or bf16 (kv_bf16) */
    bool kv_bf16;
    float *cos, *sin;   /* [max_pos][hd/2] talker RoPE */
    float *cp_k, *cp_v; /* [Lc][nkv][G][hd] */
    float *scores;      /* [max(nh_t*max_pos, nh_c*G)] attention scores, a row per query head */
    void *sample_scratch;
    row_scratch rs;
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
#define QMAT_MASK (MAT_MASK | (1u << QTTS_DT_Q8_0) | (1u << QTTS_DT_Q4_0))
#define VEC_MASK ((1u << QTTS_DT_BF16) | (1u << QTTS_DT_F32) | (1u << QTTS_DT_F16))

bool qtts_quant_parse(const char *s, qtts_quant *out) {
    if (!s || !*s || !strcasecmp(s, "none") || !strcasecmp(s, "bf16")) *out = QTTS_QUANT_NONE;
    else if (!strcasecmp(s, "int8") || !strcasecmp(s, "q8_0")) *out = QTTS_QUANT_INT8;
    else if (!strcasecmp(s, "int4") || !strcasecmp(s, "q4_0")) *out = QTTS_QUANT_INT4;
    else return false;
    return true;
}

const char *qtts_quant_name(qtts_quant q) {
    return q == QTTS_QUANT_INT8 ? "int8" : q == QTTS_QUANT_INT4 ? "int4" : "none";
}

qtts_dtype qtts_quant_dtype(qtts_quant q) {
    return q == QTTS_QUANT_INT8 ? QTTS_DT_Q8_0 : q == QTTS_QUANT_INT4 ? QTTS_DT_Q4_0 : QTTS_DT_F32;
}

/* s starts with "<prefix><decimal digits>" followed by one of the
 * suffixes (NULL-terminated list), and nothing else. */
static bool match_indexed(const char *s, const char *prefix, const char *const *suffixes) {
    const size_t n = strlen(prefix);
    if (strncmp(s, prefix, n)) return false;
    s += n;
    if (*s < '0' || *s > '9') return false;
    while (*s >= '0' && *s <= '9') s++;
    for (; *suffixes; suffixes++)
        if (!strcmp(s, *suffixes)) return true;
    return false;
}

static const char *const layer_mats[] = {
    ".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight",
    ".self_attn.o_proj.weight", ".mlp.gate_proj.weight", ".mlp.up_proj.weight",
    ".mlp.down_proj.weight", NULL};

qtts_qpart qtts_talker_quant_part(const char *name) {
    static const char *const head[] = {".weight", NULL};
    if (match_indexed(name, "talker.model.layers.", layer_mats) ||
        !strcmp(name, "talker.codec_head.weight"))
        return QTTS_QPART_TALKER;
    if (match_indexed(name, "talker.code_predictor.model.layers.", layer_mats) ||
        match_indexed(name, "talker.code_predictor.lm_head.", head) ||
        !strcmp(name, "talker.code_predictor.small_to_mtp_projection.weight"))
        return QTTS_QPART_CP;
    return QTTS_QPART_NONE;
}

/* What binding needs besides the set: the weights (for the list of owned
 * matrices) and the formats asked for. */
typedef struct {
    const qtts_st_set *st;
    qtts_talker_weights *w;
    qtts_talker_quant q;
} binder;

static bool own(qtts_talker_weights *w, void *p) {
    if (w->n_owned == w->cap_owned) {
        int cap = w->cap_owned ? 2 * w->cap_owned : 256;
        void **n = qtts_realloc(w->owned, sizeof *n * (size_t)cap);
        if (!n) return false;
        w->owned = n;
        w->cap_owned = cap;
    }
    w->owned[w->n_owned++] = p;
    return true;
}

/* Bind matrix `name` [rows, cols]. A matrix of a quantizable component
 * (qtts_talker_quant_part) may be stored Q8_0/Q4_0 if it is the format
 * asked for, or none was (packed rows are used in place, plain ones
 * repacked), or is quantized here when a format was asked for; mapped
 * pages that were copied are then dropped. */
static bool bind_mat(const binder *b, const char *name, int rows, int cols, qtts_mat *out,
                     qtts_err *err) {
    int64_t shape[2] = {rows, cols};
    const qtts_qpart part = qtts_talker_quant_part(name);
    const qtts_tensor *t =
        qtts_st_expect(b->st, name, part == QTTS_QPART_NONE ? MAT_MASK : QMAT_MASK, 2, shape, err);
    if (!t) return false;
    *out = qtts_mat_from(t);
    const qtts_quant q = part == QTTS_QPART_TALKER ? b->q.talker
                         : part == QTTS_QPART_CP   ? b->q.cp
                                                   : QTTS_QUANT_NONE;
    const bool stored_q = t->dtype == QTTS_DT_Q8_0 || t->dtype == QTTS_DT_Q4_0;
    if (q == QTTS_QUANT_NONE && !stored_q) return true;
    if (stored_q && t->packed && (q == QTTS_QUANT_NONE || t->dtype == qtts_quant_dtype(q)))
        return true;   /* a packed file tensor (format version 2) is used in place */
    const qtts_dtype want = stored_q ? t->dtype : qtts_quant_dtype(q);
    if (stored_q && q != QTTS_QUANT_NONE && t->dtype != qtts_quant_dtype(q)) {
        qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                  "%s: tensor %s is stored as %s; it cannot be loaded as %s (quantize the "
                  "bf16 model instead)", qtts_st_set_path(b->st), name, qtts_dtype_name(t->dtype),
                  qtts_quant_name(q));
        return false;
    }
    /* quantized weights are computed with in the CPU's packed layout
     * (quant.h): a plain stored Q8_0/Q4_0 tensor (format version 1) is
     * repacked, bf16/f32 ones are quantized straight into it; the mapped
     * pages are dropped either way */
    qtts_mat src = *out;
    qtts_err qerr;
    if (stored_q ? qtts_mat_pack(&src, out, &qerr) : qtts_mat_quantize(&src, want, out, &qerr)) {
        qtts_fail(err, qerr.status, "%s: tensor %s: %s", qtts_st_set_path(b->st), name, qerr.msg);
        return false;
    }
    if (!own(b->w, (void *)out->data)) {
        qtts_mat_free(out);
        qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
        return false;
    }
    qtts_tensor_release(t);
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

static qtts_status load_stack(const binder *b, const char *prefix, const qtts_stack_config *c,
                              qtts_stack_weights *w, qtts_err *err) {
    const qtts_st_set *st = b->st;
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
        if (!bind_mat(b, NAME("%s.layers.%d.self_attn.q_proj.weight", p, l), qd, D, &L->q, err) ||
            !bind_mat(b, NAME("%s.layers.%d.self_attn.k_proj.weight", p, l), kvd, D, &L->k, err) ||
            !bind_mat(b, NAME("%s.layers.%d.self_attn.v_proj.weight", p, l), kvd, D, &L->v, err) ||
            !bind_mat(b, NAME("%s.layers.%d.self_attn.o_proj.weight", p, l), D, qd, &L->o, err) ||
            !bind_mat(b, NAME("%s.layers.%d.mlp.gate_proj.weight", p, l), c->inter, D, &L->gate,
                      err) ||
            !bind_mat(b, NAME("%s.layers.%d.mlp.up_proj.weight", p, l), c->inter, D, &L->up, err) ||
            !bind_mat(b, NAME("%s.layers.%d.mlp.down_proj.weight", p, l), D, c->inter, &L->down,
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

/* The code predictor's layers are read in each of its 15 passes of a
 * frame: marked resident (qtts_mat.resident) when they are small enough to
 * stay in the last-level cache between passes (qtts_mat_resident_fits). */
static void mark_resident(qtts_stack_weights *w) {
    uint64_t bytes = 0;
    for (int l = 0; l < w->n_layers; l++) {
        const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(&w->layers[l]);
        for (int i = 0; i < QTTS_LAYER_MATS; i++)
            bytes += (uint64_t)m[i]->rows * qtts_mat_stride(m[i]);
    }
    const bool fits = qtts_mat_resident_fits(bytes);
    for (int l = 0; l < w->n_layers; l++) {
        qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(&w->layers[l]);
        for (int i = 0; i < QTTS_LAYER_MATS; i++) m[i]->resident = fits;
    }
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
    for (int i = 0; i < w->n_owned; i++) qtts_free(w->owned[i]);
    qtts_free(w->owned);
    qtts_free(w);
}

static qtts_quant quant_of(const qtts_mat *m) {
    return m->dtype == QTTS_DT_Q8_0   ? QTTS_QUANT_INT8
           : m->dtype == QTTS_DT_Q4_0 ? QTTS_QUANT_INT4
                                      : QTTS_QUANT_NONE;
}

qtts_status qtts_talker_load(const qtts_config *cfg, const qtts_st_set *st,
                             qtts_talker_weights **out, qtts_err *err) {
    return qtts_talker_load_quant(cfg, st, NULL, out, err);
}

qtts_status qtts_talker_load_quant(const qtts_config *cfg, const qtts_st_set *st,
                                   const qtts_talker_quant *quant, qtts_talker_weights **out,
                                   qtts_err *err) {
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
    const binder bd = {st, w, quant ? *quant : (qtts_talker_quant){0}};
    const binder *b = &bd;
    qtts_status s;
#define FAIL_IF(cond)                                                          \
    do {                                                                       \
        if (cond) {                                                            \
            s = err->status;                                                   \
            goto fail;                                                         \
        }                                                                      \
    } while (0)
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)

    if ((s = load_stack(b, "talker.model", &cfg->talker, &w->talker, err))) goto fail;
    if ((s = load_stack(b, "talker.code_predictor.model", &cfg->cp, &w->cp, err))) goto fail;

    FAIL_IF(!bind_mat(b, "talker.model.text_embedding.weight", w->text_vocab, T,
                      &w->text_embedding, err));
    FAIL_IF(!bind_mat(b, "talker.text_projection.linear_fc1.weight", T, T, &w->text_fc1, err));
    FAIL_IF(!(w->text_fc1_b = load_vec(st, "talker.text_projection.linear_fc1.bias", T, err)));
    FAIL_IF(!bind_mat(b, "talker.text_projection.linear_fc2.weight", H, T, &w->text_fc2, err));
    FAIL_IF(!(w->text_fc2_b = load_vec(st, "talker.text_projection.linear_fc2.bias", H, err)));
    FAIL_IF(!bind_mat(b, "talker.model.codec_embedding.weight", V, H, &w->codec_embedding, err));
    FAIL_IF(!bind_mat(b, "talker.codec_head.weight", V, H, &w->codec_head, err));

    w->cp_embedding = qtts_calloc((size_t)(G - 1), sizeof(qtts_mat));
    w->cp_head = qtts_calloc((size_t)(G - 1), sizeof(qtts_mat));
    if (!w->cp_embedding || !w->cp_head) {
        s = qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
        goto fail;
    }
    for (int j = 0; j < G - 1; j++) {
        FAIL_IF(!bind_mat(b, NAME("talker.code_predictor.model.codec_embedding.%d.weight", j), Vc,
                          H, &w->cp_embedding[j], err));
        FAIL_IF(!bind_mat(b, NAME("talker.code_predictor.lm_head.%d.weight", j), Vc, C,
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
        FAIL_IF(!bind_mat(b, mtp_w, C, H, &w->mtp, err));
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
    w->quant.talker = quant_of(&w->talker.layers[0].q);
    w->quant.cp = quant_of(&w->cp.layers[0].q);
    mark_resident(&w->cp);
    *out = w;
    return QTTS_OK;
fail:
    qtts_talker_free(w);
    return s ? s : QTTS_ERR_FORMAT;
}

/* ====================================================================== */
/* State                                                                   */
/* ====================================================================== */

/* n floats, overflow-checked, 64-byte aligned. */
/* Bytes of a*b*c*d floats (at least 1), or 0 on overflow. */
static size_t floats_bytes(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t n;
    if (!qtts_mul_ok(a, b, &n) || !qtts_mul_ok(n, c, &n) || !qtts_mul_ok(n, d, &n) ||
        !qtts_mul_ok(n, sizeof(float), &n) || n > SIZE_MAX)
        return 0;
    return n ? (size_t)n : 1;
}

static float *alloc_f(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    const size_t n = floats_bytes(a, b, c, d);
    return n ? qtts_aligned_alloc(n) : NULL;
}

/* The talker's KV cache: max_pos positions in whole chunks of `chunk`
 * [layers a][kv heads b][chunk][hd d], written chunk by chunk (huge pages
 * where the kernel gives them: base.h). bf16: half the bytes of fp32 (a
 * count of floats rounded up). */
static void *alloc_kv(uint64_t a, uint64_t b, int max_pos, int chunk, uint64_t d, bool bf16) {
    const uint64_t chunks = ((uint64_t)max_pos + (uint64_t)chunk - 1) / (uint64_t)chunk;
    const size_t n = floats_bytes(chunks * a, b, (uint64_t)chunk, bf16 ? (d + 1) / 2 : d);
    return n ? qtts_aligned_alloc(n) : NULL;
}

static void rows_free(row_scratch *s) {
    qtts_free(s->x);
    qtts_free(s->h);
    qtts_free(s->q);
    qtts_free(s->att);
    qtts_free(s->kk);
    qtts_free(s->vv);
    qtts_free(s->gate);
    qtts_free(s->up);
    qtts_free(s->in);
    qtts_free(s->head);
    qtts_free(s->logits);
    qtts_free(s->rc);
    qtts_free(s->idx);
    memset(s, 0, sizeof *s);
}

/* Make s hold at least rows rows (contents are not kept). */
static bool rows_reserve(const qtts_talker_weights *w, row_scratch *s, int rows) {
    if (rows <= s->cap) return true;
    const qtts_stack_weights *t = &w->talker, *c = &w->cp;
    const int D = QTTS_MAX(t->dim, c->dim), I = QTTS_MAX(t->inter, c->inter);
    const int qd = QTTS_MAX(t->n_heads * t->head_dim, c->n_heads * c->head_dim);
    const int kvd = QTTS_MAX(t->n_kv * t->head_dim, c->n_kv * c->head_dim);
    const int V = QTTS_MAX(w->vocab, w->cp_vocab);
    row_scratch n = {.cap = rows};
    n.x = alloc_f(rows, D, 1, 1);
    n.h = alloc_f(rows, D, 1, 1);
    n.q = alloc_f(rows, qd, 1, 1);
    n.att = alloc_f(rows, qd, 1, 1);
    n.kk = alloc_f(rows, kvd, 1, 1);
    n.vv = alloc_f(rows, kvd, 1, 1);
    n.gate = alloc_f(rows, I, 1, 1);
    n.up = alloc_f(rows, I, 1, 1);
    n.in = alloc_f(rows, w->hidden, 1, 1);
    n.head = alloc_f(rows, D, 1, 1);
    n.logits = alloc_f(rows, V, 1, 1);
    n.rc = qtts_calloc((size_t)rows, sizeof *n.rc);
    n.idx = qtts_calloc((size_t)rows, sizeof *n.idx);
    if (!n.x || !n.h || !n.q || !n.att || !n.kk || !n.vv || !n.gate || !n.up || !n.in ||
        !n.head || !n.logits || !n.rc || !n.idx) {
        rows_free(&n);
        return false;
    }
    rows_free(s);
    *s = n;
    return true;
}

void qtts_talker_state_free(qtts_talker_state *st) {
    if (!st) return;
    qtts_free(st->k);
    qtts_free(st->v);
    qtts_free(st->cos);
    qtts_free(st->sin);
    qtts_free(st->cp_k);
    qtts_free(st->cp_v);
    qtts_free(st->scores);
    qtts_free(st->sample_scratch);
    rows_free(&st->rs);
    qtts_free(st);
}

qtts_status qtts_talker_state_new(const qtts_talker_weights *w, int max_pos,
                                  qtts_talker_state **out, qtts_err *err) {
    return qtts_talker_state_new_chunked(w, max_pos, QTTS_KV_CHUNK, out, err);
}

qtts_status qtts_talker_state_new_chunked(const qtts_talker_weights *w, int max_pos, int chunk,
                                          qtts_talker_state **out, qtts_err *err) {
    *out = NULL;
    if (max_pos < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "talker: max positions %d < 1", max_pos);
    if (chunk < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "talker: KV chunk of %d positions < 1", chunk);
    qtts_talker_state *st = qtts_calloc(1, sizeof(*st));
    if (!st) return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory");
    const qtts_stack_weights *t = &w->talker, *c = &w->cp;
    const int G = w->n_groups;
    const int V = QTTS_MAX(w->vocab, w->cp_vocab);
    st->max_pos = max_pos;
    st->kv_bf16 = w->kv == QTTS_KV_BF16;
    st->kv_chunk = chunk = QTTS_MIN(max_pos, chunk);
    st->k = alloc_kv(t->n_layers, t->n_kv, max_pos, chunk, t->head_dim, st->kv_bf16);
    st->v = alloc_kv(t->n_layers, t->n_kv, max_pos, chunk, t->head_dim, st->kv_bf16);
    st->cos = alloc_f(max_pos, t->head_dim / 2, 1, 1);
    st->sin = alloc_f(max_pos, t->head_dim / 2, 1, 1);
    st->cp_k = alloc_f(c->n_layers, c->n_kv, G, c->head_dim);
    st->cp_v = alloc_f(c->n_layers, c->n_kv, G, c->head_dim);
    st->scores =
        alloc_f(QTTS_MAX((uint64_t)t->n_heads * max_pos, (uint64_t)c->n_heads * G), 1, 1, 1);
    st->sample_scratch = qtts_malloc(QTTS_SAMPLE_SCRATCH(V));
    if (!st->k || !st->v || !st->cos || !st->sin || !st->cp_k || !st->cp_v || !st->scores ||
        !st->sample_scratch || !rows_reserve(w, &st->rs, QTTS_TALKER_ROWS)) {
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

/* RMSNorm (weight nw[hd]) then rotate-half RoPE with one row's cos/sin
 * [hd/2], of nh heads x[nh*hd] in place. */
static void norm_rope_heads(float *x, int nh, const float *nw, int hd, float eps,
                            const float *cos, const float *sin) {
    for (int h = 0; h < nh; h++) {
        qtts_rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, nw, hd, eps);
        qtts_rope(x + (size_t)h * hd, cos, sin, hd);
    }
}

/* Element offset i of a KV cache of either format. */
static void *kv_at(const void *p, size_t i, bool bf16) {
    return bf16 ? (void *)((const uint16_t *)p + i) : (void *)((const float *)p + i);
}

/* Elements of one chunk of row c's cache of stack w: every (layer, kv
 * head) region's `chunk` positions (the layout at the top of this file). */
static size_t kv_chunk_elems(const qtts_stack_weights *w, const row_ctx *c) {
    return (size_t)w->n_layers * (size_t)w->n_kv * (size_t)c->chunk * (size_t)w->head_dim;
}

/* Element offset of position p of KV head g of `layer` in row c's cache of
 * stack w. */
static size_t kv_off(const qtts_stack_weights *w, const row_ctx *c, int layer, int g, int p) {
    const size_t ch = (size_t)c->chunk, region = (size_t)layer * (size_t)w->n_kv + (size_t)g;
    return (size_t)p / ch * kv_chunk_elems(w, c) +
           (region * ch + (size_t)p % ch) * (size_t)w->head_dim;
}

/* One row x[hd] into a KV cache at element offset i. */
static void kv_store(void *cache, size_t i, const float *x, int hd, bool bf16) {
    if (bf16) qtts_f32_to_bf16_row((uint16_t *)cache + i, x, (size_t)hd);
    else memcpy((float *)cache + i, x, sizeof(float) * (size_t)hd);
}

/* Causal attention of nh query heads q[nh*hd] that share one KV head over
 * positions [0, ctx) -> out[nh*hd]; scores[nh*ctx] scratch. The head's K/V
 * rows (fp32 or bf16) come in chunks of `chunk` contiguous [hd] rows, chunk
 * i at kc/vc + i * chunk_stride elements; each chunk is one kernel call,
 * the output's sums continued across them, so the bits are those of one
 * call over contiguous rows (kernels.h). Each call names the rows read
 * after it (K's next chunk; after K's last, V's first; V's next chunk),
 * so that its prefetch runs on into them (attn_impl.h). */
static void attend_heads(const float *q, int nh, const void *kc, const void *vc, bool bf16,
                         int ctx, int chunk, size_t chunk_stride, int hd, float *out,
                         float *scores) {
    const float scale = (float)(1.0 / sqrt((double)hd));
    for (int j0 = 0; j0 < ctx; j0 += chunk) {
        const int m = QTTS_MIN(chunk, ctx - j0), c = j0 / chunk;
        const bool last = j0 + m == ctx;
        const void *k = kv_at(kc, (size_t)c * chunk_stride, bf16);
        float *s = scores + j0;
        /* what is read next: K's next chunk, or V's first after K's last */
        const void *nx = last ? vc : kv_at(kc, (size_t)(c + 1) * chunk_stride, bf16);
        const int nn = QTTS_MIN(chunk, last ? ctx : ctx - j0 - m);
        if (bf16) qtts_attn_scores_bf16(s, (size_t)ctx, q, nh, k, (size_t)hd, m, hd, scale, nx, nn);
        else qtts_attn_scores(s, (size_t)ctx, q, nh, k, (size_t)hd, m, hd, scale, nx, nn);
    }
    for (int h = 0; h < nh; h++) qtts_softmax(scores + (size_t)h * ctx, ctx);
    for (int j0 = 0; j0 < ctx; j0 += chunk) {
        const int m = QTTS_MIN(chunk, ctx - j0), c = j0 / chunk;
        const bool last = j0 + m == ctx;
        const void *v = kv_at(vc, (size_t)c * chunk_stride, bf16);
        const float *p = scores + j0;
        const bool acc = j0 > 0;   /* continue the sums of the chunks before */
        const void *nx = last ? NULL : kv_at(vc, (size_t)(c + 1) * chunk_stride, bf16);
        const int nn = last ? 0 : QTTS_MIN(chunk, ctx - j0 - m);
        if (bf16) qtts_attn_out_bf16(out, p, (size_t)ctx, nh, v, (size_t)hd, m, hd, acc, nx, nn);
        else qtts_attn_out(out, p, (size_t)ctx, nh, v, (size_t)hd, m, hd, acc, nx, nn);
    }
}

/* Rows [0, min(pos, cold rows)) of KV head g of `layer` in row c's caches,
 * K's and then V's, to L2 (qtts_attn_cold_rows): the rows the attention
 * calls read before their own prefetch reaches them. */
static void kv_prefetch_cold(const qtts_stack_weights *w, const row_ctx *c, int layer, int g) {
    const int n = QTTS_MIN(c->pos, qtts_attn_cold_rows(c->bf16)), hd = w->head_dim;
    for (int kv = 0; kv < 2; kv++)
        for (int p0 = 0; p0 < n; p0 += c->chunk)
            qtts_attn_prefetch_rows(kv_at(kv ? c->v : c->k, kv_off(w, c, layer, g, p0), c->bf16),
                                    (size_t)hd, QTTS_MIN(c->chunk, n - p0), hd, c->bf16);
}

/* One layer's attention of a stack_rows call, after the q/k/v matmul. */
typedef struct {
    const qtts_stack_weights *w;
    const qtts_layer_weights *L;
    const row_ctx *rc;
    int n, layer;
    float *q, *kk, *vv, *att; /* [n, qd], [n, kvd], [n, kvd], [n, qd] */
    float *kvw;               /* row_scratch.kvw: the rows are one request's prefill chunk */
    int kvw_pos;
    int parts;                /* tasks: the KV head groups split evenly (attn_part) */
} attn_job;

/* KV head group g of every row: q/k norm + RoPE of its q heads and k head,
 * K/V of head g into each row's cache, then the attention of its q heads.
 * Groups touch disjoint heads, cache regions and score slices, so they run
 * in parallel; within the group the rows go in order, since a row attends
 * to the K/V of the earlier rows of its request in the same call. */
static void attn_group(void *ctx, int g) {
    const attn_job *a = ctx;
    const qtts_stack_weights *w = a->w;
    const int hd = w->head_dim, half = hd / 2, grp = w->n_heads / w->n_kv;
    const int qd = w->n_heads * hd, kvd = w->n_kv * hd;
    /* Each row's first cached rows of head g are fetched while the norms, RoPE and stores
     * below run: a head's attention otherwise began with them at DRAM latency (the caches
     * are cold after a layer's weights have streamed through). Consecutive rows of one
     * request (a prefill chunk) share their cache, so the last of them stands for all.
     * 0.6B int4 at 23-123 positions on an AMD EPYC (Zen 4) host: the attention took ~0.8 of
     * its time in the code predictor, ~0.9 in the talker, the frame ~0.986
     * (docs/PERFORMANCE.md). A prefill over a bf16 cache reads a widened copy instead
     * (below). */
    if (!a->kvw)
        for (int r = 0; r < a->n; r++)
            if (r + 1 == a->n || a->rc[r + 1].k != a->rc[r].k)
                kv_prefetch_cold(w, &a->rc[r], a->layer, g);
    for (int r = 0; r < a->n; r++) {
        const row_ctx *c = &a->rc[r];
        const size_t at = kv_off(w, c, a->layer, g, c->pos);   /* head g, this row's position */
        float *qg = a->q + (size_t)r * qd + (size_t)g * grp * hd;
        float *kr = a->kk + (size_t)r * kvd + (size_t)g * hd;
        const float *cs = c->cos + (size_t)c->pos * half, *sn = c->sin + (size_t)c->pos * half;
        norm_rope_heads(qg, grp, a->L->q_norm, hd, w->eps, cs, sn);
        norm_rope_heads(kr, 1, a->L->k_norm, hd, w->eps, cs, sn);
        kv_store(c->k, at, kr, hd, c->bf16);
        kv_store(c->v, at, a->vv + (size_t)r * kvd + (size_t)g * hd, hd, c->bf16);
    }
    if (a->kvw) {
        /* A prefill chunk over a bf16 cache: the rows read the same positions, so head g's K
         * and V up to the last row are widened once, and the rows run the fp32 kernels on
         * that copy (the bf16 kernels' bits: widening is exact). Attention in a prefill runs
         * from the caches, where widening in every row's loads cost ~30% more time. */
        const row_ctx *c = &a->rc[a->n - 1];
        const int P = c->pos + 1;
        float *kw = a->kvw + (size_t)g * 2 * a->kvw_pos * hd, *vw = kw + (size_t)a->kvw_pos * hd;
        QTTS_ASSERT(c->bf16 && c->pos < a->kvw_pos && a->rc[0].k == c->k);
        for (int p0 = 0; p0 < P; p0 += c->chunk) {
            const size_t m = (size_t)QTTS_MIN(c->chunk, P - p0) * hd;
            const size_t o = kv_off(w, c, a->layer, g, p0);
            qtts_bf16_to_f32_row(kw + (size_t)p0 * hd, (const uint16_t *)c->k + o, m);
            qtts_bf16_to_f32_row(vw + (size_t)p0 * hd, (const uint16_t *)c->v + o, m);
        }
        for (int r = 0; r < a->n; r++) {
            const size_t q0 = (size_t)r * qd + (size_t)g * grp * hd;
            const int P_r = a->rc[r].pos + 1;
            attend_heads(a->q + q0, grp, kw, vw, false, P_r, P_r, 0, hd, a->att + q0,
                         c->scores + (size_t)g * grp * c->cap);
        }
        return;
    }
    for (int r = 0; r < a->n; r++) {
        const row_ctx *c = &a->rc[r];
        const size_t head = kv_off(w, c, a->layer, g, 0);
        const size_t q0 = (size_t)r * qd + (size_t)g * grp * hd;
        attend_heads(a->q + q0, grp, kv_at(c->k, head, c->bf16), kv_at(c->v, head, c->bf16),
                     c->bf16, c->pos + 1, c->chunk, kv_chunk_elems(w, c), hd, a->att + q0,
                     c->scores + (size_t)g * grp * c->cap);
    }
}

/* Task p of a.parts: KV head groups [p * nkv / parts, (p + 1) * nkv / parts).
 * The groups cost the same, so one task per thread balances them; a task
 * per group claimed one by one cost the code predictor's attention (at
 * most 17 positions) ~17% more in the pool's shared counters. */
static void attn_part(void *ctx, int p) {
    const attn_job *a = ctx;
    const int nkv = a->w->n_kv;
    for (int g = p * nkv / a->parts; g < (p + 1) * nkv / a->parts; g++) attn_group(ctx, g);
}

/* Prefetch hints (qtts_matmul_prefetch_next) for the matmul that follows. */
static void hint_qkv(const qtts_layer_weights *L) {
    const qtts_mat *const W[3] = {&L->q, &L->k, &L->v};
    qtts_matmul_prefetch_next(3, W, false);
}

static void hint_gate_up(const qtts_layer_weights *L) {
    const qtts_mat *const W[2] = {&L->gate, &L->up};
    qtts_matmul_prefetch_next(2, W, true);
}

static void hint_one(const qtts_mat *W) { qtts_matmul_prefetch_next(1, &W, false); }

/* Run the stack on x[n, D], row r described by rc[r] (n <= s->cap; two
 * rows of one request must be at increasing positions). x is updated in
 * place to the last layer's output (before the final norm). `after` is
 * the matmul that follows the stack (a prefetch hint), or NULL. Each
 * matmul is preceded by the hint of the one after it. */
static void stack_rows(const qtts_stack_weights *w, const row_ctx *rc, int n, float *x,
                       row_scratch *s, const qtts_mat *after) {
    const int D = w->dim;
    for (int l = 0; l < w->n_layers; l++) {
        const qtts_layer_weights *L = &w->layers[l];
        for (int r = 0; r < n; r++)
            qtts_rmsnorm(s->h + (size_t)r * D, x + (size_t)r * D, L->attn_norm, D, w->eps);
        {
            float *const y[3] = {s->q, s->kk, s->vv};
            const qtts_mat *const W[3] = {&L->q, &L->k, &L->v};
            hint_one(&L->o);
            qtts_matmul_multi(3, y, s->h, n, W);
        }
        attn_job aj = {w, L, rc, n, l, s->q, s->kk, s->vv, s->att, s->kvw, s->kvw_pos,
                       QTTS_MIN(w->n_kv, qtts_threads_count())};
        qtts_parallel_for(aj.parts, attn_part, &aj);
        hint_gate_up(L);
        qtts_matmul(s->h, s->att, n, &L->o, NULL);
        qtts_add_inplace(x, s->h, (size_t)n * D);

        for (int r = 0; r < n; r++)
            qtts_rmsnorm(s->h + (size_t)r * D, x + (size_t)r * D, L->mlp_norm, D, w->eps);
        hint_one(&L->down);
        qtts_matmul_swiglu(s->gate, s->up, s->h, n, &L->gate, &L->up);
        if (l + 1 < w->n_layers) hint_qkv(&w->layers[l + 1]);
        else if (after) hint_one(after);
        qtts_matmul(s->h, s->gate, n, &L->down, NULL);
        qtts_add_inplace(x, s->h, (size_t)n * D);
    }
}

/* The talker row of st at position pos. */
static row_ctx talker_row(qtts_talker_state *st, int pos) {
    return (row_ctx){st->k,   st->v,   st->kv_bf16, st->max_pos, st->kv_chunk,
                     pos,     st->cos, st->sin,     st->scores};
}

/* The CP row of st at position pos (its cache holds the G positions of a frame). */
static row_ctx cp_row(const qtts_talker_weights *w, qtts_talker_state *st, int pos) {
    return (row_ctx){st->cp_k,   st->cp_v,   false,     w->n_groups, w->n_groups,
                     pos,        w->cp_cos,  w->cp_sin, st->scores};
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

/* Final norm of the m rows of s->x (stride H) into s->head [m, H], then
 * s->logits[m, V] = codec_head(s->head). */
static void talker_heads(const qtts_talker_weights *w, row_scratch *s, int m) {
    const int H = w->hidden;
    for (int r = 0; r < m; r++)
        qtts_rmsnorm(s->head + (size_t)r * H, s->x + (size_t)r * H, w->talker.norm, H,
                     w->talker.eps);
    /* a step's codec head is followed by the code predictor */
    if (w->has_mtp) hint_one(&w->mtp);
    else hint_qkv(&w->cp.layers[0]);
    qtts_matmul(s->logits, s->head, m, &w->codec_head, NULL);
}

qtts_status qtts_talker_prefill(const qtts_talker_weights *w, qtts_talker_state *st,
                                const float *embeds, int L, float *logits, float *hidden,
                                qtts_err *err) {
    return qtts_talker_prefill_from(w, st, embeds, L, 0, logits, hidden, err);
}

qtts_status qtts_talker_prefill_from(const qtts_talker_weights *w, qtts_talker_state *st,
                                     const float *embeds, int L, int from, float *logits,
                                     float *hidden, qtts_err *err) {
    if (L < 1 || L > st->max_pos)
        return qtts_fail(err, QTTS_ERR_LIMIT, "talker: prefill of %d positions does not fit the "
                         "state's %d", L, st->max_pos);
    QTTS_ASSERT(from >= 0 && from < L);
    const int H = w->hidden, R = QTTS_TALKER_ROWS;
    row_scratch *s = &st->rs;
    /* over a bf16 cache, a widened copy for the chunks (attn_group); without the memory
     * (nkv * 2 * L * hd floats, freed below) the rows widen as they load instead */
    const qtts_stack_weights *t = &w->talker;
    float *kvw = st->kv_bf16 && L - from > 1 ? alloc_f(t->n_kv, 2, L, t->head_dim) : NULL;
    s->kvw = kvw;
    s->kvw_pos = L;
    st->pos = from;
    int last = 0;
    for (int p0 = from; p0 < L; p0 += R) {
        const int m = QTTS_MIN(R, L - p0);
        memcpy(s->x, embeds + (size_t)p0 * H, sizeof(float) * (size_t)m * H);
        for (int r = 0; r < m; r++) s->rc[r] = talker_row(st, p0 + r);
        /* (the hint is exact for the last chunk; prefill is compute-bound) */
        stack_rows(&w->talker, s->rc, m, s->x, s, &w->codec_head);
        last = m - 1;
    }
    s->kvw = NULL;
    qtts_free(kvw);
    st->pos = L;
    if (last) memmove(s->x, s->x + (size_t)last * H, sizeof(float) * (size_t)H);
    talker_heads(w, s, 1);
    memcpy(logits, s->logits, sizeof(float) * (size_t)w->vocab);
    memcpy(hidden, s->head, sizeof(float) * (size_t)H);
    return QTTS_OK;
}

qtts_status qtts_talker_step_batch(const qtts_talker_weights *w, qtts_talker_step_job *jobs,
                                   int n, qtts_err *err) {
    if (n < 1) return QTTS_OK;
    row_scratch *s = &jobs[0].st->rs;
    if (!rows_reserve(w, s, n))
        return qtts_fail(err, QTTS_ERR_NOMEM, "talker: out of memory for a batch of %d", n);
    const int H = w->hidden, V = w->vocab;
    int m = 0;
    for (int i = 0; i < n; i++) {
        qtts_talker_step_job *j = &jobs[i];
        if (j->st->pos >= j->st->max_pos) {
            j->status = qtts_fail(j->err, QTTS_ERR_LIMIT, "talker: KV cache full (%d positions)",
                                  j->st->max_pos);
            continue;
        }
        j->status = QTTS_OK;
        memcpy(s->x + (size_t)m * H, j->x, sizeof(float) * (size_t)H);
        s->rc[m] = talker_row(j->st, j->st->pos);
        s->idx[m++] = i;
    }
    if (!m) return QTTS_OK;
    stack_rows(&w->talker, s->rc, m, s->x, s, &w->codec_head);
    talker_heads(w, s, m);
    for (int r = 0; r < m; r++) {
        qtts_talker_step_job *j = &jobs[s->idx[r]];
        j->st->pos++;
        memcpy(j->logits, s->logits + (size_t)r * V, sizeof(float) * (size_t)V);
        memcpy(j->hidden, s->head + (size_t)r * H, sizeof(float) * (size_t)H);
    }
    return QTTS_OK;
}

qtts_status qtts_talker_step(const qtts_talker_weights *w, qtts_talker_state *st,
                             const float *x, float *logits, float *hidden, qtts_err *err) {
    qtts_talker_step_job j = {.st = st, .x = x, .logits = logits, .hidden = hidden, .err = err};
    qtts_status s = qtts_talker_step_batch(w, &j, 1, err);
    return s ? s : j.status;
}

/* ====================================================================== */
/* Code predictor                                                          */
/* ====================================================================== */

/* out[n, C] = S(in[n, H]): small_to_mtp_projection or identity. */
static void cp_project(const qtts_talker_weights *w, const float *in, int n, float *out) {
    if (w->has_mtp) {
        hint_qkv(&w->cp.layers[0]);
        qtts_matmul(out, in, n, &w->mtp, w->mtp_b);
    } else {
        memcpy(out, in, sizeof(float) * (size_t)n * w->hidden);
    }
}

/* CP step j for the m live jobs of s->idx, whose rows sit at
 * s->x + (r * stride + off) * C: final norm, head j, then per job the
 * finiteness check, the logits copy and the draw into codes_out[j]. A job
 * with non-finite logits fails and leaves the set; returns the new count. */
static int cp_heads(const qtts_talker_weights *w, row_scratch *s, qtts_cp_job *jobs, int m,
                    int j, int stride, int off) {
    const int C = w->cp.dim, Vc = w->cp_vocab;
    for (int r = 0; r < m; r++)
        qtts_rmsnorm(s->head + (size_t)r * C, s->x + ((size_t)r * stride + off) * C, w->cp.norm,
                     C, w->cp.eps);
    /* the next pass of the frame, or the talker's next step */
    if (j + 2 < w->n_groups) {
        if (w->has_mtp) hint_one(&w->mtp);
        else hint_qkv(&w->cp.layers[0]);
    } else {
        hint_qkv(&w->talker.layers[0]);
    }
    qtts_matmul(s->logits, s->head, m, &w->cp_head[j], NULL);
    int kept = 0;
    for (int r = 0; r < m; r++) {
        qtts_cp_job *job = &jobs[s->idx[r]];
        float *lg = s->logits + (size_t)r * Vc;
        if (!qtts_all_finite(lg, (size_t)Vc)) {
            job->status = qtts_fail(job->err, QTTS_ERR_NUMERIC,
                                    "code predictor: non-finite logits at step %d", j);
            continue;
        }
        if (job->cp_logits_out)
            memcpy(job->cp_logits_out + (size_t)j * Vc, lg, sizeof(float) * (size_t)Vc);
        job->codes_out[j] = qtts_sample(lg, Vc, job->sp, job->rng, job->st->sample_scratch, NULL);
        s->idx[kept++] = s->idx[r];
    }
    return kept;
}

qtts_status qtts_cp_frame_batch(const qtts_talker_weights *w, qtts_cp_job *jobs, int n,
                                qtts_err *err) {
    if (n < 1) return QTTS_OK;
    const int H = w->hidden, G = w->n_groups;
    row_scratch *s = &jobs[0].st->rs;
    if (!rows_reserve(w, s, 2 * n))
        return qtts_fail(err, QTTS_ERR_NOMEM, "code predictor: out of memory for a batch of %d", n);
    int m = 0;
    for (int i = 0; i < n; i++) {
        qtts_cp_job *j = &jobs[i];
        if (j->c0 < 0 || j->c0 >= w->vocab) {
            j->status = qtts_fail(j->err, QTTS_ERR_INVALID, "code predictor: c0 %d outside [0, %d)",
                                  j->c0, w->vocab);
            continue;
        }
        j->status = QTTS_OK;
        s->idx[m++] = i;
    }
    /* positions 0, 1 of every frame: [S(hidden), S(E(c0))]; the CP KV caches restart. */
    for (int r = 0; r < m; r++) {
        qtts_cp_job *j = &jobs[s->idx[r]];
        memcpy(s->in + (size_t)2 * r * H, j->hidden, sizeof(float) * (size_t)H);
        qtts_mat_row(s->in + (size_t)(2 * r + 1) * H, &w->codec_embedding, j->c0);
        s->rc[2 * r] = cp_row(w, j->st, 0);
        s->rc[2 * r + 1] = cp_row(w, j->st, 1);
    }
    if (m) {
        cp_project(w, s->in, 2 * m, s->x);
        stack_rows(&w->cp, s->rc, 2 * m, s->x, s, &w->cp_head[0]);
        m = cp_heads(w, s, jobs, m, 0, 2, 1);
    }
    for (int step = 1; step < G - 1 && m; step++) {
        /* codebook `step` (just predicted) enters through CP embedding step-1 at position step+1 */
        for (int r = 0; r < m; r++) {
            qtts_cp_job *j = &jobs[s->idx[r]];
            qtts_mat_row(s->in + (size_t)r * H, &w->cp_embedding[step - 1], j->codes_out[step - 1]);
            s->rc[r] = cp_row(w, j->st, step + 1);
        }
        cp_project(w, s->in, m, s->x);
        stack_rows(&w->cp, s->rc, m, s->x, s, &w->cp_head[step]);
        m = cp_heads(w, s, jobs, m, step, 1, 0);
    }
    return QTTS_OK;
}

qtts_status qtts_cp_frame(const qtts_talker_weights *w, qtts_talker_state *st,
                          const float *hidden, int c0, const qtts_sampler_params *sp,
                          qtts_rng *rng, int32_t *codes_out, float *cp_logits_out,
                          qtts_err *err) {
    qtts_cp_job j = {.st = st, .hidden = hidden, .c0 = c0, .sp = sp, .rng = rng,
                     .codes_out = codes_out, .cp_logits_out = cp_logits_out, .err = err};
    qtts_status s = qtts_cp_frame_batch(w, &j, 1, err);
    return s ? s : j.status;
}
