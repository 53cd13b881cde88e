/*
 * backend_cuda.cu - backend.h on an NVIDIA GPU.
 *
 * At open the talker, code predictor and codec-decoder weights are copied
 * to the device (matmul weights in the permuted layouts of layout.h, in
 * their stored format: BF16, F32, Q8_0 or Q4_0; embeddings as they are;
 * norms and biases f32; conv weights unpacked to [taps*cin][cout]). A
 * qtts_seq holds the sequence's KV caches on the device (f32, like the
 * CPU's). Activations live in backend-owned device scratch for up to
 * ROWS_CAP rows.
 *
 * Stages, all enqueued on one stream and synchronised once:
 *   prefill   chunks of ROWS_CAP positions, then the last row's head.
 *   step      codec-embedding sum + text row -> 28 layers -> norm -> head;
 *             logits and hidden come back (the host samples codebook 0).
 *   cp_frame  the whole 15-pass loop: embed -> (projection) -> layers ->
 *             norm -> head -> draw, x15, the draws on the device
 *             (ops_sample.cu, the CPU's sampler order and RNG stream), the
 *             codes and the RNG state come back once.
 *   batched   the same stage for n sequences: every matmul runs over all
 *             rows, attention and sampling per row with the row's own
 *             cache, position, parameters and RNG. A row's bits do not
 *             depend on the batch (ops_mm.cu), so a batch gives each
 *             sequence exactly its single-stream result.
 *   codec     one decoder window on the device (ops_codec.cu), then the
 *             waveform comes back.
 * Step and CP frame are captured once per batch size as CUDA graphs whose
 * inputs and outputs are pinned host buffers copied by graph nodes; a
 * replay is one launch (qtts_cuda_test_set_graphs turns them off so the
 * tests can compare). Positions beyond the current capacity reallocate the score
 * scratch and RoPE table and drop the graphs.
 *
 * Device faults and launch failures are reported as QTTS_ERR_IO ("CUDA:
 * <what>: <runtime message>"); allocation failures as QTTS_ERR_NOMEM with
 * the size; no device as QTTS_ERR_UNSUPPORTED. One mutex serialises the
 * backend's calls (the device runs one stage at a time anyway).
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "cuda_test.h"

#define ROWS_CAP 128   /* rows of one stack call (prefill chunk, CP pass 0 = 2 per sequence) */
#define BATCH_CAP 64   /* sequences of one batched call (larger batches are split) */
#define MIB (1.0 / 1048576.0)

/* ==== errors ============================================================ */

static qtts_status cu_fail(qtts_err *err, cudaError_t e, const char *what) {
    if (e == cudaErrorMemoryAllocation)
        return qtts_fail(err, QTTS_ERR_NOMEM, "CUDA: out of device memory (%s)", what);
    return qtts_fail(err, QTTS_ERR_IO, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

#define CU_TRY(call, what)                                                    \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) return cu_fail(err, e_, what);                 \
    } while (0)

/* ==== device allocations ================================================== */

struct DevPool {
    void **p;
    int n, cap;
    size_t bytes;
};

static void *pool_alloc(DevPool *pool, size_t bytes, const char *what, qtts_err *err) {
    if (pool->n == pool->cap) {
        const int cap = pool->cap ? 2 * pool->cap : 256;
        void **np = (void **)qtts_realloc(pool->p, sizeof(void *) * (size_t)cap);
        if (!np) {
            qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
            return NULL;
        }
        pool->p = np;
        pool->cap = cap;
    }
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        qtts_fail(err, QTTS_ERR_NOMEM,
                  "CUDA: out of device memory allocating %.1f MiB for %s (%.1f MiB free of %.1f "
                  "MiB; %.1f MiB already held by this backend)",
                  bytes * MIB, what, fr * MIB, tot * MIB, pool->bytes * MIB);
        return NULL;
    }
    pool->p[pool->n++] = d;
    pool->bytes += bytes;
    return d;
}

static void pool_free(DevPool *pool) {
    for (int i = 0; i < pool->n; i++) cudaFree(pool->p[i]);
    qtts_free(pool->p);
    memset(pool, 0, sizeof *pool);
}

static float *pool_upload_f32(DevPool *pool, const float *h, size_t n, const char *what,
                              qtts_err *err) {
    float *d = (float *)pool_alloc(pool, n * sizeof(float), what, err);
    if (d && cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
        cu_fail(err, cudaGetLastError(), what);
        return NULL;
    }
    return d;
}

/* ==== uploads ============================================================== */

static size_t mat_dev_bytes(const qtts_mat *m, bool force_f32) {
    switch (m->dtype) {
    case QTTS_DT_BF16:
        return (size_t)m->rows * (size_t)qtts_cu_row_elems(m->cols) * (force_f32 ? 4 : 2);
    case QTTS_DT_F32: return (size_t)m->rows * (size_t)qtts_cu_row_elems(m->cols) * 4;
    case QTTS_DT_Q8_0: return (size_t)m->rows * m->cols + (size_t)m->rows * (m->cols / 32) * 4;
    case QTTS_DT_Q4_0: return (size_t)m->rows * m->cols / 2 + (size_t)m->rows * (m->cols / 32) * 4;
    default: return 0;
    }
}

/* A matmul weight in the layout of layout.h. force_f32 stores a BF16
 * matrix as F32 (same values, same products: the same results). */
static qtts_status upload_mat(DevPool *pool, const qtts_mat *m, bool force_f32, const char *what,
                              DMat *out, qtts_err *err) {
    memset(out, 0, sizeof *out);
    out->rows = m->rows;
    out->cols = m->cols;
    const size_t rows = (size_t)m->rows;
    if (m->dtype == QTTS_DT_F32 || m->dtype == QTTS_DT_BF16) {
        const bool f32 = m->dtype == QTTS_DT_F32 || force_f32;
        const int64_t ld = qtts_cu_row_elems(m->cols);
        const size_t es = f32 ? 4 : 2, bytes = rows * (size_t)ld * es;
        void *h = qtts_calloc(1, bytes ? bytes : 1);
        if (!h) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory staging %s", what);
        for (size_t r = 0; r < rows; r++)
            for (int c = 0; c < m->cols; c++) {
                const size_t src = r * (size_t)m->cols + (size_t)c;
                const size_t dst = r * (size_t)ld + (size_t)qtts_cu_perm(c);
                if (m->dtype == QTTS_DT_F32)
                    ((float *)h)[dst] = ((const float *)m->data)[src];
                else if (f32)
                    ((float *)h)[dst] = qtts_bf16_to_f32(((const uint16_t *)m->data)[src]);
                else
                    ((uint16_t *)h)[dst] = ((const uint16_t *)m->data)[src];
            }
        void *d = pool_alloc(pool, bytes, what, err);
        cudaError_t e = d ? cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) : cudaSuccess;
        qtts_free(h);
        if (!d) return err->status;
        if (e != cudaSuccess) return cu_fail(err, e, what);
        out->w = d;
        out->dtype = f32 ? CU_F32 : CU_BF16;
        out->ldw = ld;
        return QTTS_OK;
    }
    if (m->dtype != QTTS_DT_Q8_0 && m->dtype != QTTS_DT_Q4_0)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "CUDA: %s: weight format not supported", what);
    const bool q8 = m->dtype == QTTS_DT_Q8_0;
    const int nb = m->cols / QTTS_QK;
    const size_t cb = q8 ? QTTS_QK : QTTS_QK / 2; /* code bytes per block */
    /* rows in the file's plain blocks: as they are, or read back from the
     * CPU's packed layout */
    const size_t rb = qtts_mat_row_bytes(m->dtype, m->cols), stride = qtts_mat_stride(m);
    uint8_t *codes = (uint8_t *)qtts_malloc(rows * nb * cb + 1);
    float *sc = (float *)qtts_malloc(sizeof(float) * rows * nb + 1);
    uint8_t *plain = m->packed ? (uint8_t *)qtts_malloc(rb + 1) : NULL;
    if (!codes || !sc || (m->packed && !plain)) {
        qtts_free(codes);
        qtts_free(sc);
        qtts_free(plain);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory staging %s", what);
    }
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)m->data + r * stride;
        if (m->packed) {
            qtts_mat_unpack_row(m, (int)r, plain);
            row = plain;
        }
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = row + (size_t)b * (2 + cb);
            qtts_half hh;
            memcpy(&hh, blk, 2);
            sc[r * nb + b] = qtts_half_to_f32(hh);
            memcpy(codes + (r * nb + b) * cb, blk + 2, cb);
        }
    }
    qtts_free(plain);
    void *dc = pool_alloc(pool, rows * nb * cb, what, err);
    void *ds = dc ? pool_alloc(pool, sizeof(float) * rows * nb, what, err) : NULL;
    cudaError_t e = cudaSuccess;
    if (ds) {
        e = cudaMemcpy(dc, codes, rows * nb * cb, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(ds, sc, sizeof(float) * rows * nb, cudaMemcpyHostToDevice);
    }
    qtts_free(codes);
    qtts_free(sc);
    if (!ds) return err->status;
    if (e != cudaSuccess) return cu_fail(err, e, what);
    out->w = dc;
    out->scale = (const float *)ds;
    out->dtype = q8 ? CU_Q8_0 : CU_Q4_0;
    out->ldw = (int64_t)(nb * cb);
    return QTTS_OK;
}

/* An embedding table: F32/BF16 rows as stored (quantized ones, which the
 * loader never produces, are dequantized to f32). */
static qtts_status upload_emb(DevPool *pool, const qtts_mat *m, const char *what, DEmb *out,
                              qtts_err *err) {
    out->rows = m->rows;
    out->cols = m->cols;
    const size_t n = (size_t)m->rows * m->cols;
    if (m->dtype == QTTS_DT_F32 || m->dtype == QTTS_DT_BF16) {
        const size_t bytes = n * (m->dtype == QTTS_DT_F32 ? 4 : 2);
        void *d = pool_alloc(pool, bytes, what, err);
        if (!d) return err->status;
        CU_TRY(cudaMemcpy(d, m->data, bytes, cudaMemcpyHostToDevice), what);
        out->w = d;
        out->dtype = m->dtype == QTTS_DT_F32 ? CU_F32 : CU_BF16;
        return QTTS_OK;
    }
    float *h = (float *)qtts_malloc(sizeof(float) * n + 1);
    if (!h) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory staging %s", what);
    for (int r = 0; r < m->rows; r++) qtts_mat_row(h + (size_t)r * m->cols, m, r);
    out->w = pool_upload_f32(pool, h, n, what, err);
    qtts_free(h);
    out->dtype = CU_F32;
    return out->w ? QTTS_OK : err->status;
}

struct DConv {
    float *wt, *bias;
    int cout, cin, taps, dil;
};

static qtts_status upload_conv(DevPool *pool, const qtts_conv1d *c, const char *what, DConv *out,
                               qtts_err *err) {
    out->cout = c->cout;
    out->cin = c->cin;
    out->taps = c->taps;
    out->dil = c->dil;
    out->bias = NULL;
    if (!c->w) /* dropped (qtts_codec_decoder_drop_direct): the engine does so for the CPU backend only */
        return qtts_fail(err, QTTS_ERR_INVALID, "%s: no fp32 weights to upload", what);
    const int K = c->taps * c->cin;
    const size_t n = (size_t)K * c->cout;
    float *h = (float *)qtts_malloc(sizeof(float) * n + 1);
    if (!h) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory staging %s", what);
    for (int kk = 0; kk < K; kk++)
        for (int co = 0; co < c->cout; co++)
            h[qtts_cu_conv_dst(kk, co, c->cout)] = c->w[qtts_cu_conv_src(co, kk, K)];
    out->wt = pool_upload_f32(pool, h, n, what, err);
    qtts_free(h);
    if (!out->wt) return err->status;
    if (c->bias && !(out->bias = pool_upload_f32(pool, c->bias, (size_t)c->cout, what, err)))
        return err->status;
    return QTTS_OK;
}

static void run_conv(cudaStream_t st, const DConv *c, const float *x, int ldx, float *y, int ldy,
                     int n, bool accumulate) {
    cu_conv1d(st, c->wt, c->bias, c->cout, c->cin, c->taps, c->dil, x, ldx, y, ldy, n, accumulate);
}

static SampParams samp_params(const qtts_sampler_params *p) {
    SampParams s;
    s.do_sample = p->do_sample ? 1 : 0;
    s.top_k = p->top_k;
    s.top_p = p->top_p;
    s.temperature = p->temperature;
    s.top_p_thr = p->top_p < 1.0f ? qtts_cu_top_p_threshold(p->top_p) : 0.0f;
    return s;
}

/* ==== the backend ========================================================= */

struct DLayer {
    DMat q, k, v, o, gate, up, down;
    float *attn_norm, *mlp_norm, *q_norm, *k_norm;
};

struct DStack {
    int dim, inter, n_layers, n_heads, n_kv, head_dim;
    float eps, scale;
    double theta;
    DLayer *layers; /* host array of device descriptors */
    float *norm;
};

struct DCodecLayer {
    DMat q, k, v, o, gate, up, down;
    float *in_norm, *post_norm, *attn_scale, *mlp_scale;
};

struct DCodec {
    const qtts_codec_decoder *h;
    float *codebooks;
    DMat proj_first, proj_rest, in_proj, out_proj;
    float *in_proj_b, *out_proj_b, *final_norm;
    DConv pre_conv;
    DCodecLayer *tl;
    struct {
        DConv tconv, pw1, pw2;
        float *dw_w, *dw_b, *ln_w, *ln_b, *gamma;
    } up[QTTS_CODEC_MAX_UPS];
    DConv dec0;
    struct {
        DConv tconv;
        float *ea, *ib;
        struct {
            DConv conv1, conv2;
            float *ea1, *ib1, *ea2, *ib2;
        } res[3];
    } blocks[QTTS_CODEC_MAX_BLOCKS];
    float *out_ea, *out_ib;
    DConv dec_out;
    /* window scratch (grown to tcap frames) */
    DevPool run;
    int tcap;
    size_t big_cap;
    float *big[3];
    float *s1, *s2, *tin, *tout, *th, *txn, *tq, *tk, *tv, *tatt, *tact, *tsc;
    float *rcos, *rsin;
    int8_t *xq;
    float *xd;
    int32_t *codes;
    int *bad;
};

struct cuda_backend {
    qtts_backend base;
    const qtts_talker_weights *w;
    pthread_mutex_t mu;
    int dev;
    char devname[256];
    cudaStream_t st;
    bool use_graphs;
    DevPool pool;       /* weights and fixed scratch */
    DevPool dyn;        /* position-dependent scratch (scores, RoPE table) */

    DStack talker, cp;
    DEmb tabs[64];      /* [0] talker codec embedding, [i] CP embedding i-1 */
    DMat codec_head, *cp_head, mtp;
    float *mtp_b, *cp_cos, *cp_sin;
    bool has_mtp;
    DCodec codec;
    bool have_codec;

    /* fixed scratch for ROWS_CAP rows */
    float *x, *h, *q, *kk, *vv, *att, *act, *in, *head;
    int8_t *xq;
    float *xd;
    /* position-dependent */
    int S;              /* positions covered by scores / RoPE table */
    float *scores, *tcos, *tsin;
    int max_heads;

    /* step i/o (pinned host + device) */
    RowMeta *meta_h, *meta_d;
    int32_t *codes_h, *codes_d;
    float *text_h, *text_d, *logits_h, *logits_d, *hidden_h, *hidden_d;
    /* cp i/o */
    RowMeta *cmeta_h, *cmeta_d;
    float *chid_h, *chid_d;
    int32_t *c0_h, *c0_d, *ccodes_h, *ccodes_d, *fail_h, *fail_d;
    SampParams *sp_h, *sp_d;
    uint64_t *rng_h, *rng_d;
    float *cplog_d;
    void *pinned;

    cudaGraphExec_t step_g[BATCH_CAP + 1], cp_g[BATCH_CAP + 1];
};

struct qtts_seq {
    int max_pos, pos;
    float *k, *v, *cp_k, *cp_v;
};

static void drop_graphs(cuda_backend *b) {
    for (int i = 0; i <= BATCH_CAP; i++) {
        if (b->step_g[i]) cudaGraphExecDestroy(b->step_g[i]);
        if (b->cp_g[i]) cudaGraphExecDestroy(b->cp_g[i]);
        b->step_g[i] = b->cp_g[i] = NULL;
    }
}

/* Score scratch and talker RoPE table for `need` positions. */
static qtts_status ensure_positions(cuda_backend *b, int need, qtts_err *err) {
    if (need <= b->S) return QTTS_OK;
    int S = b->S ? b->S : 256;
    while (S < need) S = S > (1 << 29) ? need : 2 * S;
    CU_TRY(cudaStreamSynchronize(b->st), "synchronize");
    drop_graphs(b);
    pool_free(&b->dyn);
    b->S = 0;
    b->scores = b->tcos = b->tsin = NULL;
    const int half = b->talker.head_dim / 2;
    float *c = (float *)qtts_malloc(sizeof(float) * (size_t)S * half + 1);
    float *s = (float *)qtts_malloc(sizeof(float) * (size_t)S * half + 1);
    if (!c || !s) {
        qtts_free(c);
        qtts_free(s);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (RoPE table of %d positions)", S);
    }
    qtts_rope_table(c, s, S, b->talker.head_dim, b->talker.theta);
    b->tcos = pool_upload_f32(&b->dyn, c, (size_t)S * half, "talker RoPE table", err);
    b->tsin = b->tcos ? pool_upload_f32(&b->dyn, s, (size_t)S * half, "talker RoPE table", err) : NULL;
    qtts_free(c);
    qtts_free(s);
    if (!b->tsin) return err->status;
    b->scores = (float *)pool_alloc(&b->dyn, sizeof(float) * (size_t)ROWS_CAP * b->max_heads * S,
                                    "attention scores", err);
    if (!b->scores) return err->status;
    b->S = S;
    return QTTS_OK;
}

/* ==== loading =============================================================== */

static qtts_status upload_stack(cuda_backend *b, const qtts_stack_weights *s, const char *name,
                                DStack *d, qtts_err *err) {
    d->dim = s->dim;
    d->inter = s->inter;
    d->n_layers = s->n_layers;
    d->n_heads = s->n_heads;
    d->n_kv = s->n_kv;
    d->head_dim = s->head_dim;
    d->eps = s->eps;
    d->theta = s->theta;
    d->scale = (float)(1.0 / sqrt((double)s->head_dim));
    d->layers = (DLayer *)qtts_calloc((size_t)(s->n_layers ? s->n_layers : 1), sizeof(DLayer));
    if (!d->layers) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    char what[128];
    DevPool *P = &b->pool;
    for (int l = 0; l < s->n_layers; l++) {
        const qtts_layer_weights *L = &s->layers[l];
        DLayer *D = &d->layers[l];
        const bool q_gu = L->gate.dtype == QTTS_DT_Q8_0 || L->gate.dtype == QTTS_DT_Q4_0 ||
                          L->up.dtype == QTTS_DT_Q8_0 || L->up.dtype == QTTS_DT_Q4_0;
        if (L->gate.dtype != L->up.dtype && q_gu)
            return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                             "CUDA: %s layer %d: gate and up projections in different formats", name, l);
        const bool gu_f32 = L->gate.dtype != L->up.dtype;
        snprintf(what, sizeof what, "%s layer %d weights", name, l);
        qtts_status st;
        if ((st = upload_mat(P, &L->q, false, what, &D->q, err)) ||
            (st = upload_mat(P, &L->k, false, what, &D->k, err)) ||
            (st = upload_mat(P, &L->v, false, what, &D->v, err)) ||
            (st = upload_mat(P, &L->o, false, what, &D->o, err)) ||
            (st = upload_mat(P, &L->gate, gu_f32, what, &D->gate, err)) ||
            (st = upload_mat(P, &L->up, gu_f32, what, &D->up, err)) ||
            (st = upload_mat(P, &L->down, false, what, &D->down, err)))
            return st;
        if (!(D->attn_norm = pool_upload_f32(P, L->attn_norm, (size_t)s->dim, what, err)) ||
            !(D->mlp_norm = pool_upload_f32(P, L->mlp_norm, (size_t)s->dim, what, err)) ||
            !(D->q_norm = pool_upload_f32(P, L->q_norm, (size_t)s->head_dim, what, err)) ||
            !(D->k_norm = pool_upload_f32(P, L->k_norm, (size_t)s->head_dim, what, err)))
            return err->status;
    }
    snprintf(what, sizeof what, "%s final norm", name);
    if (!(d->norm = pool_upload_f32(P, s->norm, (size_t)s->dim, what, err))) return err->status;
    return QTTS_OK;
}

static qtts_status upload_codec(cuda_backend *b, const qtts_codec_decoder *h, qtts_err *err) {
    DCodec *c = &b->codec;
    DevPool *P = &b->pool;
    c->h = h;
    char what[128];
    qtts_status st;
    const size_t cbn = (size_t)h->n_q * h->cb_size * h->cb_vec;
    if (!(c->codebooks = pool_upload_f32(P, h->codebooks, cbn, "codec codebooks", err)))
        return err->status;
    if ((st = upload_mat(P, &h->proj_first, false, "codec quantizer", &c->proj_first, err)) ||
        (st = upload_mat(P, &h->proj_rest, false, "codec quantizer", &c->proj_rest, err)) ||
        (st = upload_conv(P, &h->pre_conv, "codec pre_conv", &c->pre_conv, err)) ||
        (st = upload_mat(P, &h->in_proj, false, "codec transformer", &c->in_proj, err)) ||
        (st = upload_mat(P, &h->out_proj, false, "codec transformer", &c->out_proj, err)))
        return st;
    if (!(c->in_proj_b = pool_upload_f32(P, h->in_proj_b, (size_t)h->hidden, "codec", err)) ||
        !(c->out_proj_b = pool_upload_f32(P, h->out_proj_b, (size_t)h->latent, "codec", err)) ||
        !(c->final_norm = pool_upload_f32(P, h->final_norm, (size_t)h->hidden, "codec", err)))
        return err->status;
    c->tl = (DCodecLayer *)qtts_calloc((size_t)(h->layers ? h->layers : 1), sizeof(DCodecLayer));
    if (!c->tl) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    for (int l = 0; l < h->layers; l++) {
        const qtts_codec_layer *L = &h->tl[l];
        DCodecLayer *D = &c->tl[l];
        snprintf(what, sizeof what, "codec transformer layer %d", l);
        const bool gu_f32 = L->gate.dtype != L->up.dtype;
        if ((st = upload_mat(P, &L->q, false, what, &D->q, err)) ||
            (st = upload_mat(P, &L->k, false, what, &D->k, err)) ||
            (st = upload_mat(P, &L->v, false, what, &D->v, err)) ||
            (st = upload_mat(P, &L->o, false, what, &D->o, err)) ||
            (st = upload_mat(P, &L->gate, gu_f32, what, &D->gate, err)) ||
            (st = upload_mat(P, &L->up, gu_f32, what, &D->up, err)) ||
            (st = upload_mat(P, &L->down, false, what, &D->down, err)))
            return st;
        if (!(D->in_norm = pool_upload_f32(P, L->in_norm, (size_t)h->hidden, what, err)) ||
            !(D->post_norm = pool_upload_f32(P, L->post_norm, (size_t)h->hidden, what, err)) ||
            !(D->attn_scale = pool_upload_f32(P, L->attn_scale, (size_t)h->hidden, what, err)) ||
            !(D->mlp_scale = pool_upload_f32(P, L->mlp_scale, (size_t)h->hidden, what, err)))
            return err->status;
    }
    for (int i = 0; i < h->n_ups; i++) {
        const qtts_codec_upsample *U = &h->upx[i];
        snprintf(what, sizeof what, "codec upsample.%d", i);
        const size_t L = (size_t)h->latent;
        if ((st = upload_conv(P, &U->tconv, what, &c->up[i].tconv, err)) ||
            (st = upload_conv(P, &U->pw1, what, &c->up[i].pw1, err)) ||
            (st = upload_conv(P, &U->pw2, what, &c->up[i].pw2, err)))
            return st;
        if (!(c->up[i].dw_w = pool_upload_f32(P, U->dw_w, L * 7, what, err)) ||
            !(c->up[i].dw_b = pool_upload_f32(P, U->dw_b, L, what, err)) ||
            !(c->up[i].ln_w = pool_upload_f32(P, U->ln_w, L, what, err)) ||
            !(c->up[i].ln_b = pool_upload_f32(P, U->ln_b, L, what, err)) ||
            !(c->up[i].gamma = pool_upload_f32(P, U->gamma, L, what, err)))
            return err->status;
    }
    if ((st = upload_conv(P, &h->dec0, "codec decoder.0", &c->dec0, err))) return st;
    for (int bk = 0; bk < h->n_blocks; bk++) {
        const qtts_codec_block *B = &h->blocks[bk];
        snprintf(what, sizeof what, "codec decoder.%d", bk + 1);
        if ((st = upload_conv(P, &B->tconv, what, &c->blocks[bk].tconv, err))) return st;
        if (!(c->blocks[bk].ea = pool_upload_f32(P, B->ea, (size_t)B->cin, what, err)) ||
            !(c->blocks[bk].ib = pool_upload_f32(P, B->ib, (size_t)B->cin, what, err)))
            return err->status;
        for (int r = 0; r < 3; r++) {
            const qtts_codec_resunit *R = &B->res[r];
            if ((st = upload_conv(P, &R->conv1, what, &c->blocks[bk].res[r].conv1, err)) ||
                (st = upload_conv(P, &R->conv2, what, &c->blocks[bk].res[r].conv2, err)))
                return st;
            const size_t C = (size_t)B->cout;
            if (!(c->blocks[bk].res[r].ea1 = pool_upload_f32(P, R->ea1, C, what, err)) ||
                !(c->blocks[bk].res[r].ib1 = pool_upload_f32(P, R->ib1, C, what, err)) ||
                !(c->blocks[bk].res[r].ea2 = pool_upload_f32(P, R->ea2, C, what, err)) ||
                !(c->blocks[bk].res[r].ib2 = pool_upload_f32(P, R->ib2, C, what, err)))
                return err->status;
        }
    }
    const size_t ch = (size_t)(h->dec_dim >> h->n_blocks);
    if (!(c->out_ea = pool_upload_f32(P, h->out_ea, ch, "codec output", err)) ||
        !(c->out_ib = pool_upload_f32(P, h->out_ib, ch, "codec output", err)))
        return err->status;
    return upload_conv(P, &h->dec_out, "codec output conv", &c->dec_out, err);
}

/* Device bytes the weights will take (to fail early with a clear message). */
static size_t weights_bytes(const qtts_talker_weights *w, const qtts_codec_decoder *h) {
    size_t t = 0;
    const qtts_stack_weights *st[2] = {&w->talker, &w->cp};
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < st[s]->n_layers; l++) {
            const qtts_layer_weights *L = &st[s]->layers[l];
            const bool f = L->gate.dtype != L->up.dtype;
            t += mat_dev_bytes(&L->q, false) + mat_dev_bytes(&L->k, false) +
                 mat_dev_bytes(&L->v, false) + mat_dev_bytes(&L->o, false) +
                 mat_dev_bytes(&L->gate, f) + mat_dev_bytes(&L->up, f) +
                 mat_dev_bytes(&L->down, false);
        }
    t += mat_dev_bytes(&w->codec_head, false) + mat_dev_bytes(&w->codec_embedding, false);
    for (int j = 0; j < w->n_groups - 1; j++)
        t += mat_dev_bytes(&w->cp_head[j], false) + mat_dev_bytes(&w->cp_embedding[j], false);
    if (w->has_mtp) t += mat_dev_bytes(&w->mtp, false);
    if (h) {
        t += (size_t)h->n_q * h->cb_size * h->cb_vec * 4;
        for (int l = 0; l < h->layers; l++) {
            const qtts_codec_layer *L = &h->tl[l];
            t += mat_dev_bytes(&L->q, false) + mat_dev_bytes(&L->k, false) +
                 mat_dev_bytes(&L->v, false) + mat_dev_bytes(&L->o, false) +
                 mat_dev_bytes(&L->gate, true) + mat_dev_bytes(&L->up, true) +
                 mat_dev_bytes(&L->down, false);
        }
        const qtts_conv1d *cv[64];
        int n = 0;
        cv[n++] = &h->pre_conv;
        cv[n++] = &h->dec0;
        cv[n++] = &h->dec_out;
        for (int i = 0; i < h->n_ups; i++) {
            cv[n++] = &h->upx[i].tconv;
            cv[n++] = &h->upx[i].pw1;
            cv[n++] = &h->upx[i].pw2;
        }
        for (int bk = 0; bk < h->n_blocks; bk++) {
            cv[n++] = &h->blocks[bk].tconv;
            for (int r = 0; r < 3; r++) {
                cv[n++] = &h->blocks[bk].res[r].conv1;
                cv[n++] = &h->blocks[bk].res[r].conv2;
            }
        }
        for (int i = 0; i < n; i++) t += (size_t)cv[i]->cout * cv[i]->cin * cv[i]->taps * 4;
    }
    return t;
}

/* ==== stages ================================================================ */

static void run_stack(cuda_backend *b, const DStack *s, int n, const RowMeta *meta, RowMap map,
                      const float *cos_t, const float *sin_t) {
    cudaStream_t st = b->st;
    const int D = s->dim, hd = s->head_dim, nh = s->n_heads, nkv = s->n_kv;
    const int qd = nh * hd, kvd = nkv * hd, I = s->inter;
    for (int l = 0; l < s->n_layers; l++) {
        const DLayer *L = &s->layers[l];
        cu_rmsnorm(st, b->x, D, 1, 0, L->attn_norm, b->h, D, n, D, s->eps);
        const DMat qkv[3] = {L->q, L->k, L->v};
        const MMOut oqkv[3] = {{b->q, qd, NULL, NULL}, {b->kk, kvd, NULL, NULL},
                               {b->vv, kvd, NULL, NULL}};
        cu_matmul(st, qkv, oqkv, 3, MM_STORE, b->h, D, n, b->xq, b->xd);
        cu_qk_rope(st, b->q, qd, b->kk, kvd, b->vv, L->q_norm, L->k_norm, nh, nkv, hd, s->eps,
                   cos_t, sin_t, meta, map, l, n);
        cu_attention(st, b->q, qd, meta, map, l, NULL, NULL, 0, 0, nh, nkv, hd, s->scale,
                     b->scores, b->S, b->att, qd, n);
        const MMOut ox = {b->x, D, NULL, NULL};
        cu_matmul(st, &L->o, &ox, 1, MM_ADD, b->att, qd, n, b->xq, b->xd);
        cu_rmsnorm(st, b->x, D, 1, 0, L->mlp_norm, b->h, D, n, D, s->eps);
        const DMat gu[2] = {L->gate, L->up};
        const MMOut oa = {b->act, I, NULL, NULL};
        cu_matmul(st, gu, &oa, 2, MM_SWIGLU, b->h, D, n, b->xq, b->xd);
        cu_matmul(st, &L->down, &ox, 1, MM_ADD, b->act, I, n, b->xq, b->xd);
    }
}

/* The talker step of n rows whose inputs sit in the pinned step buffers. */
static void enqueue_step(cuda_backend *b, int n) {
    const qtts_talker_weights *w = b->w;
    const int H = w->hidden, G = w->n_groups, V = w->vocab;
    cudaStream_t st = b->st;
    cudaMemcpyAsync(b->meta_d, b->meta_h, sizeof(RowMeta) * n, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->codes_d, b->codes_h, sizeof(int32_t) * n * G, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->text_d, b->text_h, sizeof(float) * n * H, cudaMemcpyHostToDevice, st);
    cu_step_input(st, b->tabs, G, b->codes_d, b->text_d, b->x, H, n);
    RowMap map = {1, 0, 1};
    run_stack(b, &b->talker, n, b->meta_d, map, b->tcos, b->tsin);
    cu_rmsnorm(st, b->x, H, 1, 0, b->talker.norm, b->hidden_d, H, n, H, b->talker.eps);
    const MMOut ol = {b->logits_d, V, NULL, NULL};
    cu_matmul(st, &b->codec_head, &ol, 1, MM_STORE, b->hidden_d, H, n, b->xq, b->xd);
    cudaMemcpyAsync(b->logits_h, b->logits_d, sizeof(float) * n * V, cudaMemcpyDeviceToHost, st);
    cudaMemcpyAsync(b->hidden_h, b->hidden_d, sizeof(float) * n * H, cudaMemcpyDeviceToHost, st);
}

/* The code-predictor frame of n rows (pinned CP buffers). */
static void enqueue_cp(cuda_backend *b, int n) {
    const qtts_talker_weights *w = b->w;
    const int H = w->hidden, G = w->n_groups, Vc = w->cp_vocab, C = b->cp.dim;
    const int64_t ldl = (int64_t)(G - 1) * Vc;
    cudaStream_t st = b->st;
    cudaMemcpyAsync(b->cmeta_d, b->cmeta_h, sizeof(RowMeta) * n, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->chid_d, b->chid_h, sizeof(float) * n * H, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->c0_d, b->c0_h, sizeof(int32_t) * n, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->sp_d, b->sp_h, sizeof(SampParams) * n, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(b->rng_d, b->rng_h, sizeof(uint64_t) * 4 * n, cudaMemcpyHostToDevice, st);
    cudaMemsetAsync(b->fail_d, 0xff, sizeof(int32_t) * n, st);
    float *dst = b->has_mtp ? b->in : b->x;
    const MMOut op = {b->x, C, b->mtp_b, NULL};
    for (int j = 0; j < G - 1; j++) {
        const int rows = j == 0 ? 2 * n : n;
        if (j == 0)
            cu_cp_input0(st, b->chid_d, &b->tabs[0], b->c0_d, dst, H, n);
        else
            cu_cp_input(st, &b->tabs[j], b->ccodes_d, G - 1, j, dst, H, n);
        if (b->has_mtp) cu_matmul(st, &b->mtp, &op, 1, MM_STORE, b->in, H, rows, b->xq, b->xd);
        RowMap map;
        map.rps = j == 0 ? 2 : 1;
        map.pos0 = j == 0 ? 0 : j + 1;
        map.use_meta_pos = 0;
        run_stack(b, &b->cp, rows, b->cmeta_d, map, b->cp_cos, b->cp_sin);
        cu_rmsnorm(st, b->x, C, j == 0 ? 2 : 1, j == 0 ? 1 : 0, b->cp.norm, b->head, C, n, C,
                   b->cp.eps);
        const MMOut ol = {b->cplog_d + (size_t)j * Vc, (int)ldl, NULL, NULL};
        cu_matmul(st, &b->cp_head[j], &ol, 1, MM_STORE, b->head, C, n, b->xq, b->xd);
        cu_cp_sample(st, b->cplog_d + (size_t)j * Vc, ldl, Vc, b->sp_d, b->rng_d, b->ccodes_d,
                     G - 1, j, b->fail_d, n);
    }
    cudaMemcpyAsync(b->ccodes_h, b->ccodes_d, sizeof(int32_t) * n * (G - 1),
                    cudaMemcpyDeviceToHost, st);
    cudaMemcpyAsync(b->rng_h, b->rng_d, sizeof(uint64_t) * 4 * n, cudaMemcpyDeviceToHost, st);
    cudaMemcpyAsync(b->fail_h, b->fail_d, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, st);
}

typedef void (*enqueue_fn)(cuda_backend *b, int n);

/* Run fn(b, n) as the cached graph *slot (captured on first use) or
 * directly, then wait for it. */
static qtts_status execute(cuda_backend *b, cudaGraphExec_t *slot, enqueue_fn fn, int n,
                           const char *what, qtts_err *err) {
    if (b->use_graphs && slot) {
        if (!*slot) {
            cudaGraph_t g = NULL;
            cudaError_t e = cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal);
            if (e == cudaSuccess) {
                fn(b, n);
                e = cudaStreamEndCapture(b->st, &g);
            }
            if (e == cudaSuccess && g) e = cudaGraphInstantiate(slot, g, 0);
            if (g) cudaGraphDestroy(g);
            if (e != cudaSuccess || !*slot) {
                /* capture not possible here: run without graphs from now on */
                cudaGetLastError();
                *slot = NULL;
                b->use_graphs = false;
            }
        }
        if (*slot) {
            CU_TRY(cudaGraphLaunch(*slot, b->st), what);
            CU_TRY(cudaStreamSynchronize(b->st), what);
            return QTTS_OK;
        }
    }
    fn(b, n);
    CU_TRY(cudaGetLastError(), what);
    CU_TRY(cudaStreamSynchronize(b->st), what);
    return QTTS_OK;
}

/* ==== backend ops ============================================================ */

struct Lock {
    cuda_backend *b;
    explicit Lock(cuda_backend *be) : b(be) {
        pthread_mutex_lock(&b->mu);
        cudaSetDevice(b->dev);
    }
    ~Lock() { pthread_mutex_unlock(&b->mu); }
};

static void free_seq(qtts_seq *s) {
    if (!s) return;
    cudaFree(s->k);
    cudaFree(s->v);
    cudaFree(s->cp_k);
    cudaFree(s->cp_v);
    qtts_free(s);
}

static qtts_status cuda_seq_new(qtts_backend *be, int max_pos, qtts_seq **out, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)be;
    Lock lk(b);
    *out = NULL;
    if (max_pos < 1)
        return qtts_fail(err, QTTS_ERR_INVALID, "CUDA: a sequence needs at least one position");
    qtts_status st = ensure_positions(b, max_pos, err);
    if (st) return st;
    const DStack *t = &b->talker, *c = &b->cp;
    uint64_t tb, cb;
    if (!qtts_mul_ok((uint64_t)t->n_layers * t->n_kv * t->head_dim * 4, (uint64_t)max_pos, &tb))
        return qtts_fail(err, QTTS_ERR_LIMIT, "CUDA: %d positions is too many", max_pos);
    cb = (uint64_t)c->n_layers * c->n_kv * c->head_dim * 4 * b->w->n_groups;
    qtts_seq *s = (qtts_seq *)qtts_calloc(1, sizeof *s);
    if (!s) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    s->max_pos = max_pos;
    cudaError_t e = cudaMalloc((void **)&s->k, tb ? tb : 16);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->v, tb ? tb : 16);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->cp_k, cb ? cb : 16);
    if (e == cudaSuccess) e = cudaMalloc((void **)&s->cp_v, cb ? cb : 16);
    if (e != cudaSuccess) {
        cudaGetLastError();
        free_seq(s);
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return qtts_fail(err, QTTS_ERR_NOMEM,
                         "CUDA: out of device memory for a sequence of %d positions (%.1f MiB of "
                         "KV cache; %.1f MiB free of %.1f MiB)",
                         max_pos, (2.0 * tb + 2.0 * cb) * MIB, fr * MIB, tot * MIB);
    }
    *out = s;
    return QTTS_OK;
}

static void cuda_seq_free(qtts_backend *be, qtts_seq *s) {
    if (!s) return;
    cuda_backend *b = (cuda_backend *)be;
    Lock lk(b);
    cudaStreamSynchronize(b->st);
    free_seq(s);
}

static int cuda_seq_max_pos(const qtts_backend *be, const qtts_seq *s) {
    (void)be;
    return s->max_pos;
}

static qtts_status cuda_prefill(qtts_backend *be, qtts_seq *s, const float *embeds, int L,
                                float *logits, float *hidden, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)be;
    Lock lk(b);
    if (L < 1 || L > s->max_pos)
        return qtts_fail(err, QTTS_ERR_LIMIT, "talker: prefill of %d positions does not fit the "
                         "state's %d", L, s->max_pos);
    const qtts_talker_weights *w = b->w;
    const int H = w->hidden, V = w->vocab;
    cudaStream_t st = b->st;
    s->pos = 0;
    b->meta_h[0].k = s->k;
    b->meta_h[0].v = s->v;
    b->meta_h[0].cap = s->max_pos;
    b->meta_h[0].pos = 0;
    CU_TRY(cudaMemcpyAsync(b->meta_d, b->meta_h, sizeof(RowMeta), cudaMemcpyHostToDevice, st),
           "prefill");
    int m = 0;
    for (int p0 = 0; p0 < L; p0 += ROWS_CAP) {
        m = QTTS_MIN(ROWS_CAP, L - p0);
        CU_TRY(cudaMemcpyAsync(b->x, embeds + (size_t)p0 * H, sizeof(float) * (size_t)m * H,
                               cudaMemcpyHostToDevice, st),
               "prefill");
        RowMap map = {m, p0, 0};
        run_stack(b, &b->talker, m, b->meta_d, map, b->tcos, b->tsin);
    }
    cu_rmsnorm(st, b->x, H, 1, m - 1, b->talker.norm, b->hidden_d, H, 1, H, b->talker.eps);
    const MMOut ol = {b->logits_d, V, NULL, NULL};
    cu_matmul(st, &b->codec_head, &ol, 1, MM_STORE, b->hidden_d, H, 1, b->xq, b->xd);
    CU_TRY(cudaGetLastError(), "prefill");
    CU_TRY(cudaMemcpyAsync(logits, b->logits_d, sizeof(float) * V, cudaMemcpyDeviceToHost, st),
           "prefill");
    CU_TRY(cudaMemcpyAsync(hidden, b->hidden_d, sizeof(float) * H, cudaMemcpyDeviceToHost, st),
           "prefill");
    CU_TRY(cudaStreamSynchronize(st), "prefill");
    s->pos = L;
    return QTTS_OK;
}

static qtts_status cuda_step_batch(qtts_backend *be, qtts_step_item *items, int n,
                                   qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)be;
    Lock lk(b);
    const qtts_talker_weights *w = b->w;
    const int H = w->hidden, G = w->n_groups, V = w->vocab, Vc = w->cp_vocab;
    int idx[BATCH_CAP];
    for (int i0 = 0; i0 < n; i0 += BATCH_CAP) {
        const int i1 = QTTS_MIN(n, i0 + BATCH_CAP);
        int m = 0;
        for (int i = i0; i < i1; i++) {
            qtts_step_item *it = &items[i];
            qtts_seq *s = it->seq;
            if (s->pos >= s->max_pos) {
                it->status = qtts_fail(it->err, QTTS_ERR_LIMIT, "talker: KV cache full (%d positions)",
                                       s->max_pos);
                continue;
            }
            bool ok = it->codes[0] >= 0 && it->codes[0] < V;
            for (int g = 1; g < G && ok; g++) ok = it->codes[g] >= 0 && it->codes[g] < Vc;
            if (!ok) {
                it->status = qtts_fail(it->err, QTTS_ERR_INVALID,
                                       "talker step: a code of the previous frame is out of range");
                continue;
            }
            it->status = QTTS_OK;
            b->meta_h[m].k = s->k;
            b->meta_h[m].v = s->v;
            b->meta_h[m].cap = s->max_pos;
            b->meta_h[m].pos = s->pos;
            memcpy(b->codes_h + (size_t)m * G, it->codes, sizeof(int32_t) * G);
            memcpy(b->text_h + (size_t)m * H, it->text_row, sizeof(float) * H);
            idx[m++] = i;
        }
        if (!m) continue;
        qtts_status st = execute(b, &b->step_g[m], enqueue_step, m, "talker step", err);
        if (st) return st;
        for (int r = 0; r < m; r++) {
            qtts_step_item *it = &items[idx[r]];
            memcpy(it->logits, b->logits_h + (size_t)r * V, sizeof(float) * V);
            memcpy(it->hidden, b->hidden_h + (size_t)r * H, sizeof(float) * H);
            it->seq->pos++;
        }
    }
    return QTTS_OK;
}

static qtts_status cuda_step(qtts_backend *be, qtts_seq *s, const int32_t *codes,
                             const float *text_row, float *logits, float *hidden, qtts_err *err) {
    qtts_step_item it;
    memset(&it, 0, sizeof it);
    it.seq = s;
    it.codes = codes;
    it.text_row = text_row;
    it.logits = logits;
    it.hidden = hidden;
    it.err = err;
    qtts_status st = cuda_step_batch(be, &it, 1, err);
    return st ? st : it.status;
}

static qtts_status cuda_cp_frame_batch(qtts_backend *be, qtts_cp_item *items, int n,
                                       qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)be;
    Lock lk(b);
    const qtts_talker_weights *w = b->w;
    const int H = w->hidden, G = w->n_groups, V = w->vocab, Vc = w->cp_vocab;
    int idx[BATCH_CAP];
    for (int i0 = 0; i0 < n; i0 += BATCH_CAP) {
        const int i1 = QTTS_MIN(n, i0 + BATCH_CAP);
        int m = 0;
        for (int i = i0; i < i1; i++) {
            qtts_cp_item *it = &items[i];
            if (it->c0 < 0 || it->c0 >= V) {
                it->status = qtts_fail(it->err, QTTS_ERR_INVALID,
                                       "code predictor: c0 %d outside [0, %d)", it->c0, V);
                continue;
            }
            it->status = QTTS_OK;
            b->cmeta_h[m].k = it->seq->cp_k;
            b->cmeta_h[m].v = it->seq->cp_v;
            b->cmeta_h[m].cap = G;
            b->cmeta_h[m].pos = 0;
            memcpy(b->chid_h + (size_t)m * H, it->hidden, sizeof(float) * H);
            b->c0_h[m] = it->c0;
            b->sp_h[m] = samp_params(it->sp);
            if (it->rng)
                memcpy(b->rng_h + (size_t)m * 4, it->rng->s, sizeof(uint64_t) * 4);
            else
                memset(b->rng_h + (size_t)m * 4, 0, sizeof(uint64_t) * 4);
            idx[m++] = i;
        }
        if (!m) continue;
        qtts_status st = execute(b, &b->cp_g[m], enqueue_cp, m, "code predictor", err);
        if (st) return st;
        for (int r = 0; r < m; r++) {
            qtts_cp_item *it = &items[idx[r]];
            const int f = b->fail_h[r], steps = f >= 0 ? f : G - 1;
            memcpy(it->codes_out, b->ccodes_h + (size_t)r * (G - 1), sizeof(int32_t) * steps);
            if (it->rng) memcpy(it->rng->s, b->rng_h + (size_t)r * 4, sizeof(uint64_t) * 4);
            if (it->cp_logits && steps > 0)
                CU_TRY(cudaMemcpy(it->cp_logits, b->cplog_d + (size_t)r * (G - 1) * Vc,
                                  sizeof(float) * (size_t)steps * Vc, cudaMemcpyDeviceToHost),
                       "code predictor logits");
            if (f >= 0)
                it->status = qtts_fail(it->err, QTTS_ERR_NUMERIC,
                                       "code predictor: non-finite logits at step %d", f);
        }
    }
    return QTTS_OK;
}

static qtts_status cuda_cp_frame(qtts_backend *be, qtts_seq *s, const float *hidden, int c0,
                                 const qtts_sampler_params *sp, qtts_rng *rng, int32_t *codes_out,
                                 float *cp_logits, qtts_err *err) {
    qtts_cp_item it;
    memset(&it, 0, sizeof it);
    it.seq = s;
    it.hidden = hidden;
    it.c0 = c0;
    it.sp = sp;
    it.rng = rng;
    it.codes_out = codes_out;
    it.cp_logits = cp_logits;
    it.err = err;
    qtts_status st = cuda_cp_frame_batch(be, &it, 1, err);
    return st ? st : it.status;
}

/* ==== codec decoder ============================================================ */

static bool cap_max(size_t *cap, uint64_t a, uint64_t b) {
    uint64_t v;
    if (!qtts_mul_ok(a, b, &v) || v > ((uint64_t)1 << 40)) return false;
    if (v > *cap) *cap = (size_t)v;
    return true;
}

static qtts_status codec_reserve(cuda_backend *b, int T, qtts_err *err) {
    DCodec *c = &b->codec;
    const qtts_codec_decoder *h = c->h;
    if (T <= c->tcap) return QTTS_OK;
    const int cap = (T + 63) / 64 * 64;
    CU_TRY(cudaStreamSynchronize(b->st), "codec decode");
    pool_free(&c->run);
    c->tcap = 0;
    size_t big = 0;
    uint64_t n = (uint64_t)cap;
    bool ok = cap_max(&big, h->rvq_dim, n) && cap_max(&big, h->latent, n);
    for (int i = 0; ok && i < h->n_ups; i++) {
        n *= (uint64_t)h->ups[i];
        ok = cap_max(&big, 4 * (uint64_t)h->latent, n);
    }
    ok = ok && cap_max(&big, h->dec_dim, n);
    uint64_t ch = (uint64_t)h->dec_dim;
    for (int i = 0; ok && i < h->n_blocks; i++) {
        ok = cap_max(&big, ch, n);
        n *= (uint64_t)h->rates[i];
        ch /= 2;
        ok = ok && cap_max(&big, ch, n);
    }
    if (!ok) return qtts_fail(err, QTTS_ERR_LIMIT, "codec decode: %d frames is too long", T);
    DevPool *P = &c->run;
    const size_t U = (size_t)cap;
    const int qd = h->heads * h->head_dim, kvd = h->kv_heads * h->head_dim;
    const int maxc = QTTS_MAX(QTTS_MAX(h->cb_vec, h->latent), QTTS_MAX(QTTS_MAX(h->hidden, qd), h->inter));
    const char *what = "codec decoder scratch";
    for (int i = 0; i < 3; i++)
        if (!(c->big[i] = (float *)pool_alloc(P, sizeof(float) * big, what, err))) return err->status;
#define TM(ptr, count)                                                                   \
    if (!(c->ptr = (float *)pool_alloc(P, sizeof(float) * (size_t)(count), what, err))) \
        return err->status;
    TM(s1, U * h->cb_vec);
    TM(s2, U * h->cb_vec);
    TM(tin, U * QTTS_MAX(h->rvq_dim, h->latent));
    TM(tout, U * h->latent);
    TM(th, U * h->hidden);
    TM(txn, U * h->hidden);
    TM(tq, U * qd);
    TM(tatt, U * qd);
    TM(tk, U * kvd);
    TM(tv, U * kvd);
    TM(tact, U * h->inter);
    TM(tsc, U * h->heads * h->window);
    TM(xd, U * (maxc / 32 + 1));
#undef TM
    if (!(c->xq = (int8_t *)pool_alloc(P, U * maxc, what, err)) ||
        !(c->codes = (int32_t *)pool_alloc(P, sizeof(int32_t) * U * h->n_q, what, err)) ||
        !(c->bad = (int *)pool_alloc(P, sizeof(int), what, err)))
        return err->status;
    const int half = h->head_dim / 2;
    float *rc = (float *)qtts_malloc(sizeof(float) * U * half + 1);
    float *rs = (float *)qtts_malloc(sizeof(float) * U * half + 1);
    if (!rc || !rs) {
        qtts_free(rc);
        qtts_free(rs);
        return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory (codec RoPE table)");
    }
    qtts_rope_table(rc, rs, cap, h->head_dim, h->rope_theta);
    c->rcos = pool_upload_f32(P, rc, U * half, what, err);
    c->rsin = c->rcos ? pool_upload_f32(P, rs, U * half, what, err) : NULL;
    qtts_free(rc);
    qtts_free(rs);
    if (!c->rsin) return err->status;
    c->big_cap = big;
    c->tcap = cap;
    return QTTS_OK;
}

/* The pre-transformer on time-major tin[T][latent] -> tout[T][latent]. */
static void codec_transformer(cuda_backend *b, int T) {
    DCodec *c = &b->codec;
    const qtts_codec_decoder *h = c->h;
    cudaStream_t st = b->st;
    const int Hh = h->hidden, D = h->head_dim, qd = h->heads * D, kvd = h->kv_heads * D;
    const MMOut oin = {c->th, Hh, c->in_proj_b, NULL};
    cu_matmul(st, &c->in_proj, &oin, 1, MM_STORE, c->tin, h->latent, T, c->xq, c->xd);
    RowMap map = {1, 0, 0};
    const float scale = 1.0f / sqrtf((float)D);
    for (int l = 0; l < h->layers; l++) {
        const DCodecLayer *L = &c->tl[l];
        cu_rmsnorm(st, c->th, Hh, 1, 0, L->in_norm, c->txn, Hh, T, Hh, h->rms_eps);
        const DMat qkv[3] = {L->q, L->k, L->v};
        const MMOut o3[3] = {{c->tq, qd, NULL, NULL}, {c->tk, kvd, NULL, NULL}, {c->tv, kvd, NULL, NULL}};
        cu_matmul(st, qkv, o3, 3, MM_STORE, c->txn, Hh, T, c->xq, c->xd);
        cu_qk_rope(st, c->tq, qd, c->tk, kvd, NULL, NULL, NULL, h->heads, h->kv_heads, D,
                   h->rms_eps, c->rcos, c->rsin, NULL, map, 0, T);
        cu_attention(st, c->tq, qd, NULL, map, 0, c->tk, c->tv, kvd, h->window, h->heads,
                     h->kv_heads, D, scale, c->tsc, h->window, c->tatt, qd, T);
        const MMOut oa = {c->th, Hh, NULL, L->attn_scale};
        cu_matmul(st, &L->o, &oa, 1, MM_ADD_SCALED, c->tatt, qd, T, c->xq, c->xd);
        cu_rmsnorm(st, c->th, Hh, 1, 0, L->post_norm, c->txn, Hh, T, Hh, h->rms_eps);
        const DMat gu[2] = {L->gate, L->up};
        const MMOut og = {c->tact, h->inter, NULL, NULL};
        cu_matmul(st, gu, &og, 2, MM_SWIGLU, c->txn, Hh, T, c->xq, c->xd);
        const MMOut om = {c->th, Hh, NULL, L->mlp_scale};
        cu_matmul(st, &L->down, &om, 1, MM_ADD_SCALED, c->tact, h->inter, T, c->xq, c->xd);
    }
    cu_rmsnorm(st, c->th, Hh, 1, 0, c->final_norm, c->txn, Hh, T, Hh, h->rms_eps);
    const MMOut oo = {c->tout, h->latent, c->out_proj_b, NULL};
    cu_matmul(st, &c->out_proj, &oo, 1, MM_STORE, c->txn, Hh, T, c->xq, c->xd);
}

/* One window (codes already on the device): the waveform [T * upsample]
 * ends in the returned buffer. */
static float *codec_enqueue(cuda_backend *b, int T) {
    DCodec *c = &b->codec;
    const qtts_codec_decoder *h = c->h;
    cudaStream_t st = b->st;
    const int R = h->rvq_dim, L = h->latent;
    float *A = c->big[0], *B = c->big[1], *C = c->big[2], *t;

    /* quantizer -> pre_conv */
    cu_codec_gather(st, c->codebooks, h->n_q, h->cb_size, h->cb_vec, c->codes, c->s1, c->s2, T);
    const MMOut o1 = {c->tin, R, NULL, NULL};
    cu_matmul(st, &c->proj_first, &o1, 1, MM_STORE, c->s1, h->cb_vec, T, c->xq, c->xd);
    cu_matmul(st, &c->proj_rest, &o1, 1, MM_ADD, c->s2, h->cb_vec, T, c->xq, c->xd);
    cu_transpose(st, A, T, c->tin, R, T, R);
    run_conv(st, &c->pre_conv, A, T, B, T, T, false);
    /* pre_transformer */
    cu_transpose(st, c->tin, L, B, T, L, T);
    codec_transformer(b, T);
    cu_transpose(st, A, T, c->tout, L, T, L);

    /* upsample: x in A */
    int n = T;
    for (int i = 0; i < h->n_ups; i++) {
        const int s = h->ups[i];
        run_conv(st, &c->up[i].tconv, A, n, B, n, n, false); /* phases [s*L, n] */
        cu_interleave(st, C, B, L, n, s);                    /* x = C [L, n*s] */
        n *= s;
        cu_dwconv(st, B, n, C, n, c->up[i].dw_w, c->up[i].dw_b, L, 7, 1, n);
        cu_layernorm_ch(st, B, n, L, n, c->up[i].ln_w, c->up[i].ln_b, 1e-6f);
        run_conv(st, &c->up[i].pw1, B, n, A, n, n, false);   /* [4L, n] */
        cu_gelu(st, A, (int64_t)4 * L * n);
        run_conv(st, &c->up[i].pw2, A, n, B, n, n, false);   /* [L, n] */
        cu_gamma_add(st, C, B, c->up[i].gamma, L, n);
        t = A, A = C, C = t; /* x = A */
    }
    /* decoder.0 -> x = B */
    run_conv(st, &c->dec0, A, n, B, n, n, false);
    t = A, A = B, B = t; /* x = A */
    int ch = h->dec_dim;
    for (int bk = 0; bk < h->n_blocks; bk++) {
        const int s = h->rates[bk], co = ch / 2;
        cu_snake(st, B, n, A, n, c->blocks[bk].ea, c->blocks[bk].ib, ch, n);
        run_conv(st, &c->blocks[bk].tconv, B, n, C, n, n, false); /* [s*co, n] */
        cu_interleave(st, A, C, co, n, s);                        /* x = A [co, n*s] */
        n *= s;
        ch = co;
        for (int r = 0; r < 3; r++) {
            cu_snake(st, B, n, A, n, c->blocks[bk].res[r].ea1, c->blocks[bk].res[r].ib1, ch, n);
            run_conv(st, &c->blocks[bk].res[r].conv1, B, n, C, n, n, false);
            cu_snake(st, C, n, C, n, c->blocks[bk].res[r].ea2, c->blocks[bk].res[r].ib2, ch, n);
            run_conv(st, &c->blocks[bk].res[r].conv2, C, n, A, n, n, true);
        }
    }
    cu_snake(st, B, n, A, n, c->out_ea, c->out_ib, ch, n);
    run_conv(st, &c->dec_out, B, n, C, n, n, false);
    cudaMemsetAsync(c->bad, 0x7f, sizeof(int), st);
    cu_clamp(st, C, n, c->bad);
    return C;
}

static qtts_status cuda_codec_decode_window(qtts_backend *be, const int32_t *codes, int T,
                                            float *wav, qtts_err *err) {
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)be;
    if (!b->have_codec)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "CUDA backend: opened without a codec decoder");
    const qtts_codec_decoder *h = b->codec.h;
    if (T < 0 || (T > 0 && (!codes || !wav)))
        return qtts_fail(err, QTTS_ERR_INVALID, "codec decode: bad arguments (T = %d)", T);
    if ((int64_t)T * h->upsample > INT32_MAX / 2)
        return qtts_fail(err, QTTS_ERR_LIMIT, "codec decode: %d frames is too long", T);
    for (int t = 0; t < T; t++)
        for (int q = 0; q < h->n_q; q++) {
            const int32_t cd = codes[(size_t)t * h->n_q + q];
            if (cd < 0 || cd >= h->cb_size)
                return qtts_fail(err, QTTS_ERR_INVALID,
                                 "codec decode: code %d at frame %d, codebook %d outside [0, %d)",
                                 (int)cd, t, q, h->cb_size);
        }
    if (T == 0) return QTTS_OK;
    Lock lk(b);
    qtts_status st = codec_reserve(b, T, err);
    if (st) return st;
    CU_TRY(cudaMemcpyAsync(b->codec.codes, codes, sizeof(int32_t) * (size_t)T * h->n_q,
                           cudaMemcpyHostToDevice, b->st),
           "codec decode");
    float *y = codec_enqueue(b, T);
    CU_TRY(cudaGetLastError(), "codec decode");
    const size_t ns = (size_t)T * h->upsample;
    int bad = 0;
    CU_TRY(cudaMemcpyAsync(wav, y, sizeof(float) * ns, cudaMemcpyDeviceToHost, b->st), "codec decode");
    CU_TRY(cudaMemcpyAsync(&bad, b->codec.bad, sizeof(int), cudaMemcpyDeviceToHost, b->st),
           "codec decode");
    CU_TRY(cudaStreamSynchronize(b->st), "codec decode");
    if (bad != 0x7f7f7f7f)
        return qtts_fail(err, QTTS_ERR_NUMERIC, "codec decode: non-finite sample %d", bad);
    return QTTS_OK;
}

/* ==== open / close ============================================================= */

static void cuda_destroy(qtts_backend *be) {
    cuda_backend *b = (cuda_backend *)be;
    if (b->st) {
        cudaSetDevice(b->dev);
        cudaStreamSynchronize(b->st);
    }
    drop_graphs(b);
    pool_free(&b->codec.run);
    pool_free(&b->dyn);
    pool_free(&b->pool);
    if (b->pinned) cudaFreeHost(b->pinned);
    if (b->st) cudaStreamDestroy(b->st);
    qtts_free(b->talker.layers);
    qtts_free(b->cp.layers);
    qtts_free(b->codec.tl);
    qtts_free(b->cp_head);
    pthread_mutex_destroy(&b->mu);
    qtts_free(b);
}

static const qtts_backend_ops cuda_ops = {
    "cuda",
    cuda_destroy,
    cuda_seq_new,
    cuda_seq_free,
    cuda_seq_max_pos,
    cuda_prefill,
    cuda_step,
    cuda_cp_frame,
    cuda_step_batch,
    cuda_cp_frame_batch,
    cuda_codec_decode_window,
};

__global__ void k_probe(int *x) { *x = 42; }

/* Select device 0 (on a multi-GPU machine, CUDA_VISIBLE_DEVICES chooses
 * which one that is) and check that this build's kernels run on it. */
static qtts_status select_device(int *dev, char *desc, size_t cap, qtts_err *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver) {
        /* no driver at all (no GPU here), or one older than this build's runtime */
        cudaGetLastError();
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!drv) return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "no CUDA device (no NVIDIA driver installed)");
        dlclose(drv);
        int rt = 0;
        cudaRuntimeGetVersion(&rt);
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "CUDA: the NVIDIA driver is older than this build's CUDA runtime %d.%d; "
                         "update the driver or build with an older CUDA toolkit",
                         rt / 1000, rt % 1000 / 10);
    }
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "no CUDA device (%s)",
                         e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
    }
    const int d = 0;
    CU_TRY(cudaSetDevice(d), "select device");
    cudaDeviceProp p;
    CU_TRY(cudaGetDeviceProperties(&p, d), "device properties");
    snprintf(desc, cap, "%.200s (compute capability %d.%d, %.0f MiB)", p.name, p.major, p.minor,
             p.totalGlobalMem * MIB);
    int *probe = NULL, got = 0;
    e = cudaMalloc((void **)&probe, sizeof(int));
    if (e == cudaSuccess) {
        k_probe<<<1, 1>>>(probe);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaMemcpy(&got, probe, sizeof(int), cudaMemcpyDeviceToHost);
        cudaFree(probe);
    }
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
        e == cudaErrorUnsupportedPtxVersion)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "CUDA: this build has no kernels for %s; rebuild with CUDA_ARCH set for it "
                         "(see docs/BACKENDS.md)",
                         desc);
    if (e != cudaSuccess) return cu_fail(err, e, "device check");
    if (got != 42) return qtts_fail(err, QTTS_ERR_IO, "CUDA: device check failed on %s", desc);
    *dev = d;
    return QTTS_OK;
}

static qtts_status open_impl(cuda_backend *b, const qtts_talker_weights *w,
                             const qtts_codec_decoder *codec, qtts_err *err) {
    qtts_status st;
    if ((st = select_device(&b->dev, b->devname, sizeof b->devname, err))) return st;
    b->use_graphs = true;
    const int H = w->hidden, G = w->n_groups, V = w->vocab, Vc = w->cp_vocab;
    if (G < 2 || G > 64)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "CUDA: %d codebooks per frame not supported", G);

    size_t fr = 0, tot = 0;
    CU_TRY(cudaMemGetInfo(&fr, &tot), "memory info");
    const size_t need = weights_bytes(w, codec);
    if (need > fr)
        return qtts_fail(err, QTTS_ERR_NOMEM,
                         "CUDA: the model needs about %.1f MiB of device memory for its weights, "
                         "%s has %.1f MiB free",
                         need * MIB, b->devname, fr * MIB);
    CU_TRY(cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking), "create stream");
    if ((st = cu_sample_init(Vc, err))) return st;

    /* weights */
    if ((st = upload_stack(b, &w->talker, "talker", &b->talker, err)) ||
        (st = upload_stack(b, &w->cp, "code predictor", &b->cp, err)))
        return st;
    if ((st = upload_emb(&b->pool, &w->codec_embedding, "codec embedding", &b->tabs[0], err)))
        return st;
    b->cp_head = (DMat *)qtts_calloc((size_t)G, sizeof(DMat));
    if (!b->cp_head) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    for (int j = 0; j < G - 1; j++)
        if ((st = upload_emb(&b->pool, &w->cp_embedding[j], "code predictor embedding",
                             &b->tabs[j + 1], err)) ||
            (st = upload_mat(&b->pool, &w->cp_head[j], false, "code predictor head", &b->cp_head[j],
                             err)))
            return st;
    if ((st = upload_mat(&b->pool, &w->codec_head, false, "codec head", &b->codec_head, err)))
        return st;
    b->has_mtp = w->has_mtp;
    if (w->has_mtp &&
        ((st = upload_mat(&b->pool, &w->mtp, false, "small_to_mtp_projection", &b->mtp, err)) ||
         !(b->mtp_b = pool_upload_f32(&b->pool, w->mtp_b, (size_t)b->cp.dim, "mtp bias", err))))
        return err->status;
    const int hdc = b->cp.head_dim;
    if (!(b->cp_cos = pool_upload_f32(&b->pool, w->cp_cos, (size_t)G * hdc / 2, "CP RoPE", err)) ||
        !(b->cp_sin = pool_upload_f32(&b->pool, w->cp_sin, (size_t)G * hdc / 2, "CP RoPE", err)))
        return err->status;
    if (codec) {
        if ((st = upload_codec(b, codec, err))) return st;
        b->have_codec = true;
    }

    /* scratch for ROWS_CAP rows */
    const DStack *t = &b->talker, *c = &b->cp;
    const int D = QTTS_MAX(t->dim, c->dim), I = QTTS_MAX(t->inter, c->inter);
    const int qd = QTTS_MAX(t->n_heads * t->head_dim, c->n_heads * c->head_dim);
    const int kvd = QTTS_MAX(t->n_kv * t->head_dim, c->n_kv * c->head_dim);
    const int maxc = QTTS_MAX(QTTS_MAX(D, qd), QTTS_MAX(I, H));
    b->max_heads = QTTS_MAX(t->n_heads, c->n_heads);
    const size_t R = ROWS_CAP;
    DevPool *P = &b->pool;
    const char *what = "activation scratch";
#define SC(ptr, count)                                                                   \
    if (!(b->ptr = (float *)pool_alloc(P, sizeof(float) * (size_t)(count), what, err))) \
        return err->status;
    SC(x, R * D);
    SC(h, R * D);
    SC(q, R * qd);
    SC(kk, R * kvd);
    SC(vv, R * kvd);
    SC(att, R * qd);
    SC(act, R * I);
    SC(in, R * H);
    SC(head, R * D);
    SC(xd, R * (maxc / 32 + 1));
    SC(text_d, BATCH_CAP * H);
    SC(logits_d, BATCH_CAP * V);
    SC(hidden_d, BATCH_CAP * H);
    SC(chid_d, BATCH_CAP * H);
    SC(cplog_d, (size_t)BATCH_CAP * (G - 1) * Vc);
#undef SC
    if (!(b->xq = (int8_t *)pool_alloc(P, R * maxc, what, err)) ||
        !(b->meta_d = (RowMeta *)pool_alloc(P, sizeof(RowMeta) * BATCH_CAP, what, err)) ||
        !(b->cmeta_d = (RowMeta *)pool_alloc(P, sizeof(RowMeta) * BATCH_CAP, what, err)) ||
        !(b->codes_d = (int32_t *)pool_alloc(P, sizeof(int32_t) * BATCH_CAP * G, what, err)) ||
        !(b->c0_d = (int32_t *)pool_alloc(P, sizeof(int32_t) * BATCH_CAP, what, err)) ||
        !(b->ccodes_d = (int32_t *)pool_alloc(P, sizeof(int32_t) * BATCH_CAP * (G - 1), what, err)) ||
        !(b->fail_d = (int32_t *)pool_alloc(P, sizeof(int32_t) * BATCH_CAP, what, err)) ||
        !(b->sp_d = (SampParams *)pool_alloc(P, sizeof(SampParams) * BATCH_CAP, what, err)) ||
        !(b->rng_d = (uint64_t *)pool_alloc(P, sizeof(uint64_t) * 4 * BATCH_CAP, what, err)))
        return err->status;

    /* pinned host buffers, carved from one block (256-byte aligned pieces) */
    size_t sizes[13] = {
        sizeof(RowMeta) * BATCH_CAP, sizeof(int32_t) * BATCH_CAP * G, sizeof(float) * BATCH_CAP * H,
        sizeof(float) * BATCH_CAP * V, sizeof(float) * BATCH_CAP * H, sizeof(RowMeta) * BATCH_CAP,
        sizeof(float) * BATCH_CAP * H, sizeof(int32_t) * BATCH_CAP,
        sizeof(int32_t) * BATCH_CAP * (G - 1), sizeof(int32_t) * BATCH_CAP,
        sizeof(SampParams) * BATCH_CAP, sizeof(uint64_t) * 4 * BATCH_CAP, 0};
    size_t total = 0, off[13];
    for (int i = 0; i < 13; i++) {
        off[i] = total;
        total += (sizes[i] + 255) / 256 * 256;
    }
    CU_TRY(cudaMallocHost(&b->pinned, total), "pinned host buffers");
    char *pb = (char *)b->pinned;
    b->meta_h = (RowMeta *)(pb + off[0]);
    b->codes_h = (int32_t *)(pb + off[1]);
    b->text_h = (float *)(pb + off[2]);
    b->logits_h = (float *)(pb + off[3]);
    b->hidden_h = (float *)(pb + off[4]);
    b->cmeta_h = (RowMeta *)(pb + off[5]);
    b->chid_h = (float *)(pb + off[6]);
    b->c0_h = (int32_t *)(pb + off[7]);
    b->ccodes_h = (int32_t *)(pb + off[8]);
    b->fail_h = (int32_t *)(pb + off[9]);
    b->sp_h = (SampParams *)(pb + off[10]);
    b->rng_h = (uint64_t *)(pb + off[11]);
    memset(b->pinned, 0, total);
    if ((st = ensure_positions(b, QTTS_MAX(256, G), err))) return st;
    CU_TRY(cudaDeviceSynchronize(), "upload");
    return QTTS_OK;
}

extern "C" qtts_status qtts_backend_cuda_open(const qtts_talker_weights *talker,
                                              const qtts_codec_decoder *codec, qtts_backend **out,
                                              qtts_err *err) {
    *out = NULL;
    qtts_err local;
    if (!err) err = &local;
    cuda_backend *b = (cuda_backend *)qtts_calloc(1, sizeof *b);
    if (!b) return qtts_fail(err, QTTS_ERR_NOMEM, "out of memory");
    b->base.ops = &cuda_ops;
    b->w = talker;
    pthread_mutex_init(&b->mu, NULL);
    qtts_status st = open_impl(b, talker, codec, err);
    if (st) {
        cuda_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return QTTS_OK;
}

/* ==== single ops for the parity tests (cuda_test.h) ============================ */

static pthread_mutex_t test_mu = PTHREAD_MUTEX_INITIALIZER;
static int test_dev = -1;
static cudaStream_t test_st;

extern "C" void qtts_cuda_test_set_graphs(qtts_backend *be, bool on) {
    ((cuda_backend *)be)->use_graphs = on;
}

extern "C" bool qtts_cuda_test_graphs_on(const qtts_backend *be) {
    return ((const cuda_backend *)be)->use_graphs;
}

extern "C" qtts_status qtts_cuda_probe(char *desc, size_t cap, qtts_err *err) {
    int d;
    char local[256];
    return select_device(&d, desc ? desc : local, desc ? cap : sizeof local, err);
}

/* A test op: device, stream and a pool that the op's allocations go to. */
struct TestOp {
    DevPool pool;
    qtts_err *err;
    qtts_status st;
    qtts_err local;
    explicit TestOp(qtts_err *e) : err(e ? e : &local), st(QTTS_OK) {
        memset(&pool, 0, sizeof pool);
        pthread_mutex_lock(&test_mu);
        if (test_dev < 0) {
            char desc[256];
            int d;
            st = select_device(&d, desc, sizeof desc, err);
            if (!st && cudaStreamCreate(&test_st) != cudaSuccess)
                st = cu_fail(err, cudaGetLastError(), "create stream");
            if (!st) test_dev = d;
        } else {
            cudaSetDevice(test_dev);
        }
    }
    ~TestOp() {
        pool_free(&pool);
        pthread_mutex_unlock(&test_mu);
    }
    float *up(const float *h, size_t n) {
        if (st) return NULL;
        float *d = pool_upload_f32(&pool, h, n ? n : 1, "test input", err);
        if (!d) st = err->status;
        return d;
    }
    void *alloc(size_t bytes) {
        if (st) return NULL;
        void *d = pool_alloc(&pool, bytes, "test buffer", err);
        if (!d) st = err->status;
        return d;
    }
    qtts_status finish(void *host, const void *dev, size_t bytes) {
        if (st) return st;
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaStreamSynchronize(test_st);
        if (e == cudaSuccess && host) e = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
        return e == cudaSuccess ? QTTS_OK : (st = cu_fail(err, e, "test op"));
    }
};

static qtts_status test_mm(const qtts_mat *W, const qtts_mat *U, const float *x, int n,
                           const float *bias, float *y, qtts_err *err) {
    TestOp op(err);
    if (op.st) return op.st;
    DMat d[2];
    const bool f = U && U->dtype != W->dtype;
    if ((op.st = upload_mat(&op.pool, W, f, "test matrix", &d[0], err))) return op.st;
    if (U && (op.st = upload_mat(&op.pool, U, f, "test matrix", &d[1], err))) return op.st;
    float *xd = op.up(x, (size_t)n * W->cols);
    float *bd = bias ? op.up(bias, (size_t)W->rows) : NULL;
    float *yd = (float *)op.alloc(sizeof(float) * (size_t)n * W->rows);
    int8_t *q = (int8_t *)op.alloc((size_t)n * W->cols);
    float *qd = (float *)op.alloc(sizeof(float) * ((size_t)n * W->cols / 32 + 1));
    if (op.st) return op.st;
    const MMOut o = {yd, W->rows, bd, NULL};
    cu_matmul(test_st, d, &o, U ? 2 : 1, U ? MM_SWIGLU : MM_STORE, xd, W->cols, n, q, qd);
    return op.finish(y, yd, sizeof(float) * (size_t)n * W->rows);
}

extern "C" qtts_status qtts_cuda_test_matmul(const qtts_mat *W, const float *x, int n,
                                             const float *bias, float *y, qtts_err *err) {
    return test_mm(W, NULL, x, n, bias, y, err);
}

extern "C" qtts_status qtts_cuda_test_swiglu(const qtts_mat *gate, const qtts_mat *up,
                                             const float *x, int n, float *y, qtts_err *err) {
    return test_mm(gate, up, x, n, NULL, y, err);
}

extern "C" qtts_status qtts_cuda_test_rmsnorm(const float *x, const float *w, int n, int D,
                                              float eps, float *out, qtts_err *err) {
    TestOp op(err);
    float *xd = op.up(x, (size_t)n * D), *wd = op.up(w, (size_t)D);
    float *od = (float *)op.alloc(sizeof(float) * (size_t)n * D);
    if (op.st) return op.st;
    cu_rmsnorm(test_st, xd, D, 1, 0, wd, od, D, n, D, eps);
    return op.finish(out, od, sizeof(float) * (size_t)n * D);
}

extern "C" qtts_status qtts_cuda_test_qk_rope(float *q, float *k, const float *qn,
                                              const float *kn, int nh, int nkv, int hd, float eps,
                                              const float *cos_row, const float *sin_row,
                                              qtts_err *err) {
    TestOp op(err);
    float *qd = op.up(q, (size_t)nh * hd), *kd = op.up(k, (size_t)nkv * hd);
    float *qnd = qn ? op.up(qn, (size_t)hd) : NULL, *knd = kn ? op.up(kn, (size_t)hd) : NULL;
    float *cd = op.up(cos_row, (size_t)hd / 2), *sd = op.up(sin_row, (size_t)hd / 2);
    if (op.st) return op.st;
    RowMap map = {1, 0, 0};
    cu_qk_rope(test_st, qd, nh * hd, kd, nkv * hd, NULL, qnd, knd, nh, nkv, hd, eps, cd, sd, NULL,
               map, 0, 1);
    qtts_status s = op.finish(q, qd, sizeof(float) * (size_t)nh * hd);
    return s ? s : op.finish(k, kd, sizeof(float) * (size_t)nkv * hd);
}

extern "C" qtts_status qtts_cuda_test_attention(const float *q, const float *kc, const float *vc,
                                                int nh, int nkv, int hd, int ctx, float scale,
                                                float *out, qtts_err *err) {
    TestOp op(err);
    float *qd = op.up(q, (size_t)nh * hd);
    float *kd = op.up(kc, (size_t)nkv * ctx * hd), *vd = op.up(vc, (size_t)nkv * ctx * hd);
    float *sc = (float *)op.alloc(sizeof(float) * (size_t)nh * ctx);
    float *od = (float *)op.alloc(sizeof(float) * (size_t)nh * hd);
    RowMeta *md = (RowMeta *)op.alloc(sizeof(RowMeta));
    if (op.st) return op.st;
    RowMeta m;
    m.k = kd;
    m.v = vd;
    m.cap = ctx;
    m.pos = ctx - 1;
    if (cudaMemcpy(md, &m, sizeof m, cudaMemcpyHostToDevice) != cudaSuccess)
        return cu_fail(err, cudaGetLastError(), "test op");
    RowMap map = {1, 0, 1};
    cu_attention(test_st, qd, nh * hd, md, map, 0, NULL, NULL, 0, 0, nh, nkv, hd, scale, sc, ctx,
                 od, nh * hd, 1);
    return op.finish(out, od, sizeof(float) * (size_t)nh * hd);
}

extern "C" qtts_status qtts_cuda_test_conv(const qtts_conv1d *c, const float *x, int n,
                                           bool accumulate, float *y, qtts_err *err) {
    TestOp op(err);
    DConv d;
    if ((op.st = upload_conv(&op.pool, c, "test conv", &d, err))) return op.st;
    float *xd = op.up(x, (size_t)c->cin * n);
    float *yd = op.up(y, (size_t)c->cout * n);
    if (op.st) return op.st;
    run_conv(test_st, &d, xd, n, yd, n, n, accumulate);
    return op.finish(y, yd, sizeof(float) * (size_t)c->cout * n);
}

extern "C" qtts_status qtts_cuda_test_snake(const float *x, const float *ea, const float *ib,
                                            int C, int n, float *y, qtts_err *err) {
    TestOp op(err);
    float *xd = op.up(x, (size_t)C * n), *ad = op.up(ea, (size_t)C), *bd = op.up(ib, (size_t)C);
    float *yd = (float *)op.alloc(sizeof(float) * (size_t)C * n);
    if (op.st) return op.st;
    cu_snake(test_st, yd, n, xd, n, ad, bd, C, n);
    return op.finish(y, yd, sizeof(float) * (size_t)C * n);
}

extern "C" qtts_status qtts_cuda_test_layernorm_ch(float *x, int C, int n, const float *w,
                                                   const float *b, float eps, qtts_err *err) {
    TestOp op(err);
    float *xd = op.up(x, (size_t)C * n), *wd = op.up(w, (size_t)C), *bd = op.up(b, (size_t)C);
    if (op.st) return op.st;
    cu_layernorm_ch(test_st, xd, n, C, n, wd, bd, eps);
    return op.finish(x, xd, sizeof(float) * (size_t)C * n);
}

extern "C" qtts_status qtts_cuda_test_sample(const float *logits, int V,
                                             const qtts_sampler_params *sp, qtts_rng *rng,
                                             int *code, qtts_err *err) {
    TestOp op(err);
    if (op.st) return op.st;
    if ((op.st = cu_sample_init(V, err))) return op.st;
    float *ld = op.up(logits, (size_t)V);
    SampParams p = samp_params(sp);
    SampParams *pd = (SampParams *)op.alloc(sizeof p);
    uint64_t *rd = (uint64_t *)op.alloc(sizeof(uint64_t) * 4);
    int32_t *cd = (int32_t *)op.alloc(sizeof(int32_t) * 2);
    if (op.st) return op.st;
    uint64_t s0[4] = {0, 0, 0, 0};
    if (rng) memcpy(s0, rng->s, sizeof s0);
    const int32_t init[2] = {0, -1};
    if (cudaMemcpy(pd, &p, sizeof p, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(rd, s0, sizeof s0, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(cd, init, sizeof init, cudaMemcpyHostToDevice) != cudaSuccess)
        return cu_fail(err, cudaGetLastError(), "test op");
    /* codes[0] = the draw, codes[1] = fail flag */
    cu_cp_sample(test_st, ld, V, V, pd, rd, cd, 1, 0, cd + 1, 1);
    int32_t out[2];
    qtts_status s = op.finish(out, cd, sizeof out);
    if (!s) s = op.finish(s0, rd, sizeof s0);
    if (s) return s;
    if (rng) memcpy(rng->s, s0, sizeof s0);
    if (out[1] >= 0) return qtts_fail(err, QTTS_ERR_NUMERIC, "code predictor: non-finite logits");
    *code = out[0];
    return QTTS_OK;
}
