/*
 * codec_decoder.c - 12 Hz speech-tokenizer decoder (see codec_decoder.h for
 * the stage-by-stage dataflow and shapes).
 *
 * Load: every decoder tensor is looked up with its expected shape derived
 * from the config; conv weights are packed into qtts_conv1d (transposed
 * convs as polyphase convs), codebooks are normalised once
 * (embedding_sum / max(cluster_usage, 1e-5)), small vectors are copied to
 * owned fp32 arrays, transformer matrices are viewed in the mapping (copied
 * to fp32 only when the file leaves them unaligned).
 *
 * Run (the next T frames through a causal state): the transformer works
 * time-major [T, C] with kernels.h (matmul, rmsnorm, rope, softmax);
 * everything else works channel-major [C, n] in three equally sized
 * buffers A/B/C that rotate between stages. A buffer that feeds a causal
 * conv holds each row behind P = (taps-1)*dil history columns: the last P
 * input columns of the previous run from the state (zeros in a fresh state,
 * which is the reference's left padding); after the conv reads them, the
 * row's last P columns become the state's history. The transformer's state
 * is its keys and values for the last window-1 positions. Every op is
 * causal and computes each column the same way for any T (kernels.h; the
 * Winograd convs the same way for any number of whole frames), so runs of
 * any size through one state give the bits of one run over all frames:
 * qtts_codec_stream (codec_decoder.h) is built on this, and so is
 * qtts_codec_decode, which streams each reference window in runs of
 * QTTS_CODEC_STREAM_FRAMES.
 *
 * Convolutions run on qtts_conv1d_run (kernels.h: blocked AVX-512/AVX2
 * GEMM over the thread pool), the residual units' 7-tap convs on its
 * Winograd form (qtts_conv_wino_run: F(6,7), 12 products per 6 columns
 * instead of 42, or F(4,7) where a block's frame is too short for it,
 * groups fixed within each frame; not with the bf16 codec), the
 * transposed convs of blocks 2 and 3 on F(4,2) the same way, SnakeBeta on
 * qtts_snake_run (vectorised sine, precomputed exp(alpha) and
 * 1/(exp(beta)+eps) from load time); both give the same bits at every
 * thread count.
 * Largest stage buffer (full size): [96, 1920T + 54] floats ~ 0.74 MB per
 * frame, three of them per run.
 */
#include "codec_decoder.h"

#include "../base/thread.h"

#include <limits.h>
#include <sys/mman.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DT_FLOAT ((1u << QTTS_DT_F32) | (1u << QTTS_DT_F16) | (1u << QTTS_DT_BF16))

static const int k_res_dil[3] = {1, 3, 9};   /* residual-unit dilations */
enum { K_CONV = 7, K_PRE = 3, K_DW = 7 };    /* kernel sizes fixed by the reference */

/* ---- load helpers ------------------------------------------------------ */

static void *own(qtts_codec_decoder *d, size_t bytes) {
    if (d->n_owned == d->cap_owned) {
        int cap = d->cap_owned ? d->cap_owned * 2 : 64;
        void **o = qtts_realloc(d->owned, sizeof(void *) * (size_t)cap);
        if (!o) return NULL;
        d->owned = o;
        d->cap_owned = cap;
    }
    void *p = qtts_aligned_alloc(bytes ? bytes : 1);
    if (p) d->owned[d->n_owned++] = p;
    return p;
}

/* "decoder.<formatted>" looked up with shape dims[rank]; NULL + err on failure. */
static const qtts_tensor *get(const qtts_codec_decoder *d, qtts_err *err, int rank,
                              const int64_t *dims, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static const qtts_tensor *get(const qtts_codec_decoder *d, qtts_err *err, int rank,
                              const int64_t *dims, const char *fmt, ...) {
    char name[256] = "decoder.";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name + 8, sizeof(name) - 8, fmt, ap);
    va_end(ap);
    return qtts_st_expect(d->st, name, DT_FLOAT, rank, dims, err);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static qtts_status nomem(qtts_err *err, const char *what) {
    return qtts_fail(err, QTTS_ERR_NOMEM, "codec decoder: out of memory (%s)", what);
}

/* Owned fp32 copy of a rank-1 [n] tensor. */
static float *load_vec(qtts_codec_decoder *d, qtts_err *err, int64_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static float *load_vec(qtts_codec_decoder *d, qtts_err *err, int64_t n, const char *fmt, ...) {
    char name[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    const qtts_tensor *t = get(d, err, 1, DIMS(n), "%s", name);
    if (!t) return NULL;
    float *v = own(d, sizeof(float) * (size_t)n);
    if (!v) {
        nomem(err, name);
        return NULL;
    }
    qtts_tensor_to_f32(t, v);
    return v;
}

/* t's values as fp32 (qtts_tensor_f32: the mapping itself for the shipped
 * F32 codec, else a copy in *owned for the caller to free). */
static const float *tmp_f32(const qtts_tensor *t, float **owned, qtts_err *err) {
    const float *v = qtts_tensor_f32(t, owned);
    if (!v) nomem(err, t->name);
    return v;
}

/* A [rows, cols] (or [rows, cols, 1]) matrix: a view into the mapping when
 * the dtype and alignment allow it, else an owned fp32 copy. */
static bool load_mat(qtts_codec_decoder *d, qtts_mat *m, qtts_err *err, int rank, int rows,
                     int cols, const char *name) {
    const qtts_tensor *t = rank == 3 ? get(d, err, 3, DIMS(rows, cols, 1), "%s", name)
                                     : get(d, err, 2, DIMS(rows, cols), "%s", name);
    if (!t) return false;
    const uintptr_t addr = (uintptr_t)t->data;
    if ((t->dtype == QTTS_DT_F32 && addr % sizeof(float) == 0) ||
        (t->dtype == QTTS_DT_BF16 && addr % sizeof(uint16_t) == 0)) {
        *m = (qtts_mat){.data = t->data, .dtype = t->dtype, .rows = rows, .cols = cols};
        return true;
    }
    float *v = own(d, sizeof(float) * (size_t)rows * cols);
    if (!v) {
        nomem(err, name);
        return false;
    }
    qtts_tensor_to_f32(t, v);
    *m = (qtts_mat){.data = v, .dtype = QTTS_DT_F32, .rows = rows, .cols = cols};
    return true;
}

/* Conv1d "<prefix>.weight" [cout, cin, taps] + "<prefix>.bias" [cout]. */
static bool load_conv(qtts_codec_decoder *d, qtts_conv1d *c, qtts_err *err, int cout, int cin,
                      int taps, int dil, const char *prefix) {
    const qtts_tensor *w = get(d, err, 3, DIMS(cout, cin, taps), "%s.weight", prefix);
    const qtts_tensor *b = w ? get(d, err, 1, DIMS(cout), "%s.bias", prefix) : NULL;
    if (!b) return false;
    float *wo, *bo = NULL;
    const float *wf = tmp_f32(w, &wo, err), *bf = wf ? tmp_f32(b, &bo, err) : NULL;
    bool ok = bf && qtts_conv1d_init(c, wf, bf, cout, cin, taps, dil);
    if (bf && !ok) nomem(err, w->name);
    qtts_free(wo);
    qtts_free(bo);
    return ok;
}

/* ConvTranspose1d "<prefix>.weight" [cin, cout, k] + bias [cout], stride s. */
static bool load_tconv(qtts_codec_decoder *d, qtts_conv1d *c, qtts_err *err, int cin, int cout,
                       int k, int s, const char *prefix) {
    const qtts_tensor *w = get(d, err, 3, DIMS(cin, cout, k), "%s.weight", prefix);
    const qtts_tensor *b = w ? get(d, err, 1, DIMS(cout), "%s.bias", prefix) : NULL;
    if (!b) return false;
    float *wo, *bo = NULL;
    const float *wf = tmp_f32(w, &wo, err), *bf = wf ? tmp_f32(b, &bo, err) : NULL;
    bool ok = bf && qtts_convtr1d_init(c, wf, bf, cin, cout, k, s);
    if (bf && !ok) nomem(err, w->name);
    qtts_free(wo);
    qtts_free(bo);
    return ok;
}

/* SnakeBeta "<prefix>.alpha"/"<prefix>.beta" [C] -> (exp(alpha), 1/(exp(beta)+1e-9)). */
static bool load_snake(qtts_codec_decoder *d, float **ea, float **ib, qtts_err *err, int ch,
                       const char *prefix) {
    float *a = load_vec(d, err, ch, "%s.alpha", prefix);
    float *b = a ? load_vec(d, err, ch, "%s.beta", prefix) : NULL;
    if (!b) return false;
    qtts_snake_params(a, b, a, b, ch); /* in place: element c only reads c */
    *ea = a;
    *ib = b;
    return true;
}

static qtts_status check_config(qtts_codec_decoder *d, const qtts_config *cfg, qtts_err *err) {
#define c (&cfg->codec)
    d->n_q = c->num_quantizers;
    d->cb_size = c->codebook_size;
    d->rvq_dim = c->codebook_dim;
    d->cb_vec = c->codebook_dim / 2;
    d->latent = c->latent_dim;
    d->dec_dim = c->decoder_dim;
    d->hidden = c->hidden;
    d->inter = c->inter;
    d->heads = c->heads;
    d->kv_heads = c->kv_heads;
    d->head_dim = c->head_dim;
    d->layers = c->layers;
    d->window = c->sliding_window;
    d->rms_eps = c->rms_eps;
    d->rope_theta = c->rope_theta;
    d->n_ups = QTTS_CODEC_MAX_UPS;
    d->n_blocks = QTTS_CODEC_MAX_BLOCKS;
    const int lim = 1 << 20;
#define RANGE(v, lo)                                                                          \
    if ((v) < (lo) || (v) > lim)                                                             \
        return qtts_fail(err, QTTS_ERR_FORMAT, "speech_tokenizer config: %s = %d out of range", \
                         #v, (int)(v));
    RANGE(d->n_q, 2)   /* the reference asserts n_q > n_q_semantic = 1 */
    RANGE(d->cb_size, 1)
    RANGE(d->rvq_dim, 2)
    RANGE(d->latent, 1)
    RANGE(d->dec_dim, 1)
    RANGE(d->hidden, 1)
    RANGE(d->inter, 1)
    RANGE(d->heads, 1)
    RANGE(d->kv_heads, 1)
    RANGE(d->head_dim, 2)
    RANGE(d->layers, 0)
    RANGE(d->window, 1)
#undef RANGE
    if (d->rvq_dim % 2 || d->head_dim % 2 || d->heads % d->kv_heads)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speech_tokenizer config: codebook_dim %d and head_dim %d must be even, "
                         "heads %d a multiple of kv heads %d",
                         d->rvq_dim, d->head_dim, d->heads, d->kv_heads);
    if (d->dec_dim % (1 << d->n_blocks))
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speech_tokenizer config: decoder_dim %d not divisible by %d", d->dec_dim,
                         1 << d->n_blocks);
    int64_t prod = 1;
    for (int i = 0; i < d->n_ups; i++) {
        d->ups[i] = c->upsampling_ratios[i];
        if (d->ups[i] < 1 || d->ups[i] > 64)
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "speech_tokenizer config: upsampling_ratios[%d] = %d out of range", i,
                             d->ups[i]);
        prod *= d->ups[i];
    }
    for (int i = 0; i < d->n_blocks; i++) {
        d->rates[i] = c->upsample_rates[i];
        if (d->rates[i] < 1 || d->rates[i] > 64)
            return qtts_fail(err, QTTS_ERR_FORMAT,
                             "speech_tokenizer config: upsample_rates[%d] = %d out of range", i,
                             d->rates[i]);
        prod *= d->rates[i];
    }
    if (prod != c->decode_upsample_rate)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speech_tokenizer config: decode_upsample_rate %d != product of "
                         "upsampling_ratios and upsample_rates %lld",
                         c->decode_upsample_rate, (long long)prod);
    d->upsample = (int)prod;
    return QTTS_OK;
#undef c
}

/* Where a block's transposed conv runs as F(4,2) (load_weights): input
 * columns a frame and input channels. At full size, bench_codec's convs
 * (2 threads, 24 frames, two calls): block 2 (1920 x 768) 1.86-2.17 ->
 * 1.33-1.60 ms a frame, block 3 (768 x 384) 1.69-2.08 -> 1.42-1.72, block
 * 4 (288 x 192) 1.18-1.43 -> 1.17-1.50. */
#define TCONV_WINO_MIN_FRAME 16
#define TCONV_WINO_MIN_CIN 384

/* d->reach (codec_decoder.h): walking back from the output conv's state,
 * in samples at each stage's rate, how many of a stage's last input
 * samples its last outputs and its state need. A causal conv of kernel k
 * and dilation dil: (k - 1) * dil more than its outputs (the history it
 * keeps is the last (k - 1) * dil of them, so it is covered), in
 * Winograd form what qtts_conv_wino_reach counts (an output's group starts
 * up to m - 1 places of its class before it, and an output other than its
 * group's first depends on inputs from k - 1 places before the group's
 * second); a residual unit adds its conv1's; a 2-tap transposed conv of
 * stride s: ceil(n / s) + 1 input columns for n outputs (the +1 is the
 * column of history it keeps), in F(4,2) form what qtts_conv_wino_reach
 * counts for ceil(n / s); the upsampler's 1-tap ones ceil(n / s); 1x1
 * convs, SnakeBeta, GELU and the per-column layer norm nothing. */
static int conv_reach(const qtts_codec_decoder *d) {
    int64_t n = K_CONV - 1;   /* the output conv's history */
    for (int b = d->n_blocks - 1; b >= 0; b--) {
        const qtts_codec_block *B = &d->blocks[b];
        for (int r = 2; r >= 0; r--) {
            const qtts_conv_wino *w = &B->res[r].wino1;
            n = w->frame ? qtts_conv_wino_reach(w, (int)n)
                         : n + (int64_t)(K_CONV - 1) * B->res[r].dil;
        }
        n = (n + B->stride - 1) / B->stride;
        n = B->tconv_w.frame ? qtts_conv_wino_reach(&B->tconv_w, (int)n) : n + 1;
    }
    n += K_CONV - 1;          /* decoder.0 */
    for (int i = d->n_ups - 1; i >= 0; i--) {
        n += K_DW - 1;        /* the ConvNeXt block's depthwise conv */
        n = (n + d->upx[i].stride - 1) / d->upx[i].stride;
    }
    return (int)n;
}

static qtts_status load_weights(qtts_codec_decoder *d, qtts_err *err) {
    char p[96];
    /* quantizer: codebooks normalised by cluster usage. Every tensor's
     * shape is checked before the table is allocated, so a config whose
     * sizes the file does not have is refused by name, not sized into a
     * huge allocation. */
    const size_t cb_n = (size_t)d->cb_size * d->cb_vec;
    const qtts_tensor *sums[64], *usages[64];
    QTTS_ASSERT(d->n_q <= 64);   /* config: num_quantizers in [1, 64] */
    for (int q = 0; q < d->n_q; q++) {
        const char *grp = q == 0 ? "rvq_first" : "rvq_rest";
        const int li = q == 0 ? 0 : q - 1;
        sums[q] = get(d, err, 2, DIMS(d->cb_size, d->cb_vec),
                      "quantizer.%s.vq.layers.%d._codebook.embedding_sum", grp, li);
        usages[q] = sums[q] ? get(d, err, 1, DIMS(d->cb_size),
                                  "quantizer.%s.vq.layers.%d._codebook.cluster_usage", grp, li)
                            : NULL;
        if (!usages[q]) return err->status;
    }
    d->codebooks = own(d, sizeof(float) * cb_n * d->n_q);
    if (!d->codebooks) return nomem(err, "codebooks");
    for (int q = 0; q < d->n_q; q++) {
        const qtts_tensor *es = sums[q], *cu = usages[q];
        float *usage_owned;
        const float *usage = tmp_f32(cu, &usage_owned, err);
        if (!usage) return err->status;
        float *cb = d->codebooks + cb_n * q;
        qtts_tensor_to_f32(es, cb);
        for (int i = 0; i < d->cb_size; i++) {
            const float u = usage[i] < 1e-5f ? 1e-5f : usage[i]; /* clamp(min=1e-5) */
            for (int j = 0; j < d->cb_vec; j++) cb[(size_t)i * d->cb_vec + j] /= u;
        }
        qtts_free(usage_owned);
    }
    if (!load_mat(d, &d->proj_first, err, 3, d->rvq_dim, d->cb_vec,
                  "quantizer.rvq_first.output_proj.weight") ||
        !load_mat(d, &d->proj_rest, err, 3, d->rvq_dim, d->cb_vec,
                  "quantizer.rvq_rest.output_proj.weight") ||
        !load_conv(d, &d->pre_conv, err, d->latent, d->rvq_dim, K_PRE, 1, "pre_conv.conv"))
        return err->status;

    /* pre_transformer */
    const int qd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim;
    if (!load_mat(d, &d->in_proj, err, 2, d->hidden, d->latent, "pre_transformer.input_proj.weight") ||
        !(d->in_proj_b = load_vec(d, err, d->hidden, "pre_transformer.input_proj.bias")) ||
        !load_mat(d, &d->out_proj, err, 2, d->latent, d->hidden, "pre_transformer.output_proj.weight") ||
        !(d->out_proj_b = load_vec(d, err, d->latent, "pre_transformer.output_proj.bias")) ||
        !(d->final_norm = load_vec(d, err, d->hidden, "pre_transformer.norm.weight")))
        return err->status;
    d->tl = own(d, sizeof(qtts_codec_layer) * (size_t)(d->layers ? d->layers : 1));
    if (!d->tl) return nomem(err, "layers");
    for (int l = 0; l < d->layers; l++) {
        qtts_codec_layer *L = &d->tl[l];
        char n[8][160];
        const char *suf[8] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                              "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", ""};
        for (int i = 0; i < 7; i++)
            snprintf(n[i], sizeof(n[i]), "pre_transformer.layers.%d.%s.weight", l, suf[i]);
        snprintf(p, sizeof(p), "pre_transformer.layers.%d", l);
        if (!load_mat(d, &L->q, err, 2, qd, d->hidden, n[0]) ||
            !load_mat(d, &L->k, err, 2, kvd, d->hidden, n[1]) ||
            !load_mat(d, &L->v, err, 2, kvd, d->hidden, n[2]) ||
            !load_mat(d, &L->o, err, 2, d->hidden, qd, n[3]) ||
            !load_mat(d, &L->gate, err, 2, d->inter, d->hidden, n[4]) ||
            !load_mat(d, &L->up, err, 2, d->inter, d->hidden, n[5]) ||
            !load_mat(d, &L->down, err, 2, d->hidden, d->inter, n[6]) ||
            !(L->in_norm = load_vec(d, err, d->hidden, "%s.input_layernorm.weight", p)) ||
            !(L->post_norm = load_vec(d, err, d->hidden, "%s.post_attention_layernorm.weight", p)) ||
            !(L->attn_scale = load_vec(d, err, d->hidden, "%s.self_attn_layer_scale.scale", p)) ||
            !(L->mlp_scale = load_vec(d, err, d->hidden, "%s.mlp_layer_scale.scale", p)))
            return err->status;
    }

    /* upsample: ConvTranspose (k = stride) + ConvNeXt */
    for (int i = 0; i < d->n_ups; i++) {
        qtts_codec_upsample *U = &d->upx[i];
        const int C = d->latent;
        U->stride = d->ups[i];
        snprintf(p, sizeof(p), "upsample.%d.0.conv", i);
        if (!load_tconv(d, &U->tconv, err, C, C, U->stride, U->stride, p)) return err->status;
        snprintf(p, sizeof(p), "upsample.%d.1", i);
        const qtts_tensor *dw = get(d, err, 3, DIMS(C, 1, K_DW), "%s.dwconv.conv.weight", p);
        if (!dw) return err->status;
        if (!(U->dw_w = own(d, sizeof(float) * (size_t)C * K_DW))) return nomem(err, dw->name);
        qtts_tensor_to_f32(dw, U->dw_w);
        char q1[128], q2[128];
        snprintf(q1, sizeof(q1), "%s.pwconv1", p);
        snprintf(q2, sizeof(q2), "%s.pwconv2", p);
        const qtts_tensor *w1 = get(d, err, 2, DIMS(4 * (int64_t)C, C), "%s.weight", q1);
        const qtts_tensor *w2 = w1 ? get(d, err, 2, DIMS(C, 4 * (int64_t)C), "%s.weight", q2) : NULL;
        if (!w2 || !(U->dw_b = load_vec(d, err, C, "%s.dwconv.conv.bias", p)) ||
            !(U->ln_w = load_vec(d, err, C, "%s.norm.weight", p)) ||
            !(U->ln_b = load_vec(d, err, C, "%s.norm.bias", p)) ||
            !(U->gamma = load_vec(d, err, C, "%s.gamma", p)))
            return err->status;
        float *b1 = load_vec(d, err, 4 * (int64_t)C, "%s.bias", q1);
        float *b2 = b1 ? load_vec(d, err, C, "%s.bias", q2) : NULL;
        if (!b2) return err->status;
        float *o1, *o2 = NULL;
        const float *f1 = tmp_f32(w1, &o1, err), *f2 = f1 ? tmp_f32(w2, &o2, err) : NULL;
        bool ok = f2 && qtts_conv1d_init(&U->pw1, f1, b1, 4 * C, C, 1, 1) &&
                  qtts_conv1d_init(&U->pw2, f2, b2, C, 4 * C, 1, 1);
        qtts_free(o1);
        qtts_free(o2);
        if (!ok) return f2 ? nomem(err, w1->name) : err->status;
    }

    /* decoder */
    if (!load_conv(d, &d->dec0, err, d->dec_dim, d->latent, K_CONV, 1, "decoder.0.conv"))
        return err->status;
    int ch = d->dec_dim;
    for (int b = 0; b < d->n_blocks; b++) {
        qtts_codec_block *B = &d->blocks[b];
        B->cin = ch;
        B->cout = ch / 2;
        B->stride = d->rates[b];
        snprintf(p, sizeof(p), "decoder.%d.block.0", b + 1);
        if (!load_snake(d, &B->ea, &B->ib, err, B->cin, p)) return err->status;
        snprintf(p, sizeof(p), "decoder.%d.block.1.conv", b + 1);
        if (!load_tconv(d, &B->tconv, err, B->cin, B->cout, 2 * B->stride, B->stride, p))
            return err->status;
        for (int r = 0; r < 3; r++) {
            qtts_codec_resunit *R = &B->res[r];
            R->dil = k_res_dil[r];
            char q[128];
            snprintf(p, sizeof(p), "decoder.%d.block.%d", b + 1, r + 2);
            snprintf(q, sizeof(q), "%s.act1", p);
            if (!load_snake(d, &R->ea1, &R->ib1, err, B->cout, q)) return err->status;
            snprintf(q, sizeof(q), "%s.act2", p);
            if (!load_snake(d, &R->ea2, &R->ib2, err, B->cout, q)) return err->status;
            snprintf(q, sizeof(q), "%s.conv1.conv", p);
            if (!load_conv(d, &R->conv1, err, B->cout, B->cout, K_CONV, R->dil, q))
                return err->status;
            snprintf(q, sizeof(q), "%s.conv2.conv", p);
            if (!load_conv(d, &R->conv2, err, B->cout, B->cout, 1, 1, q)) return err->status;
        }
        ch /= 2;
    }
    snprintf(p, sizeof(p), "decoder.%d", d->n_blocks + 1);
    if (!load_snake(d, &d->out_ea, &d->out_ib, err, ch, p)) return err->status;
    snprintf(p, sizeof(p), "decoder.%d.conv", d->n_blocks + 2);
    if (!load_conv(d, &d->dec_out, err, 1, ch, K_CONV, 1, p)) return err->status;
    /* The residual units' k7 convs (72% of a frame's multiply-adds) in the
     * Winograd form: F(6,7), 0.29x the multiply-adds, where the block's
     * frame holds 5 positions or more of every residue class (all but
     * block 1's dilation 9, 32 columns: classes of 4 and 3, which takes
     * F(4,7), 0.36x, reading one more column of history). Columns group
     * within each frame of that block (frame = its columns per codec
     * frame), and a decode runs whole frames, so a stream gets the one-shot
     * bits. */
    int frame = 1;
    for (int i = 0; i < d->n_ups; i++) frame *= d->ups[i];
    for (int b = 0; b < d->n_blocks; b++) {
        /* The transposed conv (2 taps over its input's columns) as F(4,2),
         * 0.625x the multiply-adds for 2.5x the direct weights, where a
         * frame gives its GEMMs 4 groups or more and its input has
         * TCONV_WINO_MIN_CIN channels or more. Not block 1's (4 columns a
         * frame, 6144 x 1536: 189 MB transformed against 75 MB, read for
         * one group a frame); not block 4's (288 x 192), whose transforms
         * cost about what its GEMMs save. */
        qtts_codec_block *Bk = &d->blocks[b];
        if (frame >= TCONV_WINO_MIN_FRAME && Bk->tconv.cin >= TCONV_WINO_MIN_CIN &&
            qtts_conv_wino_applies(&Bk->tconv, frame)) {
            if (!qtts_conv_wino_init(&Bk->tconv_w, &Bk->tconv, frame))
                return nomem(err, "winograd weights");
            QTTS_ASSERT(Bk->tconv_w.left == 1);   /* the column of history it keeps */
        }
        frame *= d->rates[b];
        for (int r = 0; r < 3; r++) {
            qtts_codec_resunit *R = &d->blocks[b].res[r];
            if (qtts_conv_wino_applies(&R->conv1, frame) &&
                !qtts_conv_wino_init(&R->wino1, &R->conv1, frame))
                return nomem(err, "winograd weights");
            R->pad = QTTS_MAX((K_CONV - 1) * R->dil, R->wino1.left);
        }
    }
    d->reach = conv_reach(d);
    return QTTS_OK;
}

qtts_status qtts_codec_decoder_load(const char *model_dir, const qtts_config *cfg,
                                    qtts_codec_decoder **out, qtts_err *err) {
    *out = NULL;
    char dir[4096];
    if (!qtts_path_join(dir, sizeof(dir), model_dir, "speech_tokenizer"))
        return qtts_fail(err, QTTS_ERR_INVALID, "%s: model path too long", model_dir);
    qtts_codec_decoder *d = qtts_calloc(1, sizeof(*d));
    if (!d) return nomem(err, "decoder");
    qtts_status st = check_config(d, cfg, err);
    if (st == QTTS_OK) st = qtts_st_set_open(dir, "model", &d->st, err);
    if (st == QTTS_OK) st = load_weights(d, err);
    if (st != QTTS_OK) {
        qtts_codec_decoder_free(d);
        return st;
    }
    *out = d;
    return QTTS_OK;
}

static double conv_macs(const qtts_conv1d *c) { return (double)c->cout * c->cin * c->taps; }

double qtts_codec_decoder_conv_macs(const qtts_codec_decoder *d) {
    double r = 1, t = conv_macs(&d->pre_conv);   /* r: columns per frame at this stage */
    for (int i = 0; i < d->n_ups; i++) {
        const qtts_codec_upsample *u = &d->upx[i];
        t += conv_macs(&u->tconv) * r;
        r *= u->stride;
        t += (conv_macs(&u->pw1) + conv_macs(&u->pw2)) * r;
    }
    t += conv_macs(&d->dec0) * r;
    for (int b = 0; b < d->n_blocks; b++) {
        const qtts_codec_block *B = &d->blocks[b];
        t += B->tconv_w.frame ? qtts_conv_wino_macs(&B->tconv_w) : conv_macs(&B->tconv) * r;
        r *= B->stride;
        for (int k = 0; k < 3; k++) {
            const qtts_conv_wino *w = &B->res[k].wino1;
            t += w->frame ? qtts_conv_wino_macs(w) : conv_macs(&B->res[k].conv1) * r;
            t += conv_macs(&B->res[k].conv2) * r;
        }
    }
    return t + conv_macs(&d->dec_out) * r;
}

void qtts_codec_decoder_drop_direct(qtts_codec_decoder *d) {
    for (int b = 0; b < d->n_blocks; b++)
        for (int r = 0; r < 3; r++) {
            qtts_codec_resunit *R = &d->blocks[b].res[r];
            if (R->wino1.frame && R->conv1.w) {
                qtts_free(R->conv1.w);
                R->conv1.w = NULL;
            }
        }
    for (int b = 0; b < d->n_blocks; b++) {
        qtts_codec_block *B = &d->blocks[b];
        if (B->tconv_w.frame && B->tconv.w) {
            qtts_free(B->tconv.w);
            B->tconv.w = NULL;
        }
    }
}

qtts_status qtts_codec_decoder_to_bf16(qtts_codec_decoder *d, qtts_err *err) {
    if (!qtts_conv_bf16_usable())
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "codec: bf16 convolutions need a CPU with bf16 dot products (x86 "
                         "AVX512-BF16, AArch64 BF16); this one has none");
    for (int b = 0; b < d->n_blocks; b++) {
        bool dropped = !d->blocks[b].tconv.w && !d->blocks[b].tconv.wb;
        for (int r = 0; r < 3; r++)
            dropped |= !d->blocks[b].res[r].conv1.w && !d->blocks[b].res[r].conv1.wb;
        if (dropped)
            return qtts_fail(err, QTTS_ERR_INVALID,
                             "codec: bf16 needs the direct weights, which were dropped");
    }
    qtts_conv1d *convs[2 + 3 * QTTS_CODEC_MAX_UPS + QTTS_CODEC_MAX_BLOCKS * 7];
    int n = 0;
    convs[n++] = &d->pre_conv;
    for (int i = 0; i < d->n_ups; i++) {
        convs[n++] = &d->upx[i].tconv;
        convs[n++] = &d->upx[i].pw1;
        convs[n++] = &d->upx[i].pw2;
    }
    convs[n++] = &d->dec0;
    for (int b = 0; b < d->n_blocks; b++) {
        convs[n++] = &d->blocks[b].tconv;
        qtts_conv_wino_free(&d->blocks[b].tconv_w);
        for (int r = 0; r < 3; r++) {
            convs[n++] = &d->blocks[b].res[r].conv1;
            convs[n++] = &d->blocks[b].res[r].conv2;
            qtts_conv_wino_free(&d->blocks[b].res[r].wino1);   /* bf16 runs them direct */
        }
    }
    /* dec_out (one output row) has too little work to gain */
    for (int i = 0; i < n; i++)
        if (!convs[i]->wb && !qtts_conv1d_to_bf16(convs[i]))
            return qtts_fail(err, QTTS_ERR_NOMEM, "codec: out of memory (bf16 weights)");
    return QTTS_OK;
}

void qtts_codec_decoder_free(qtts_codec_decoder *d) {
    if (!d) return;
    qtts_conv1d_free(&d->pre_conv);
    for (int i = 0; i < QTTS_CODEC_MAX_UPS; i++) {
        qtts_conv1d_free(&d->upx[i].tconv);
        qtts_conv1d_free(&d->upx[i].pw1);
        qtts_conv1d_free(&d->upx[i].pw2);
    }
    qtts_conv1d_free(&d->dec0);
    for (int b = 0; b < QTTS_CODEC_MAX_BLOCKS; b++) {
        qtts_conv1d_free(&d->blocks[b].tconv);
        qtts_conv_wino_free(&d->blocks[b].tconv_w);
        for (int r = 0; r < 3; r++) {
            qtts_conv1d_free(&d->blocks[b].res[r].conv1);
            qtts_conv1d_free(&d->blocks[b].res[r].conv2);
            qtts_conv_wino_free(&d->blocks[b].res[r].wino1);
        }
    }
    qtts_conv1d_free(&d->dec_out);
    for (int i = 0; i < d->n_owned; i++) qtts_free(d->owned[i]);
    qtts_free(d->owned);
    qtts_st_set_close(d->st);
    qtts_free(d);
}

/* ---- run --------------------------------------------------------------- */

/* Causal state of one decoder instance: what its next frames need from its
 * earlier ones. Every causal conv input keeps its last P columns (in a
 * fresh state zero: the reference's left padding), the transformer the
 * keys and values of its last window-1 positions in each layer. Running
 * frames 0..T-1 in any number of pieces through one state gives the bits
 * of one run over all T (every op is causal and computes each column the
 * same way whatever the piece: kernels.h determinism rules). */
typedef struct {
    int pos;                               /* frames consumed */
    int kv_n;                              /* key/value rows held (<= window-1) */
    float *mem;                            /* everything below, one allocation */
    size_t floats;
    float *pre;                            /* [rvq_dim][K_PRE-1] */
    float *kv;                             /* [layers][k, v][window-1][kv_heads*head_dim] */
    float *dw[QTTS_CODEC_MAX_UPS];         /* [latent][K_DW-1] */
    float *dec0;                           /* [latent][K_CONV-1] */
    float *bt[QTTS_CODEC_MAX_BLOCKS];      /* [cin][1] */
    float *res[QTTS_CODEC_MAX_BLOCKS][3];  /* [cout][(K_CONV-1)*dil] */
    float *out;                            /* [channels][K_CONV-1] */
} causal_state;

static void state_reset(causal_state *st) {
    st->pos = 0;
    st->kv_n = 0;
    memset(st->mem, 0, sizeof(float) * st->floats);
}

static void state_free(causal_state *st) {
    qtts_free(st->mem);
    memset(st, 0, sizeof(*st));
}

/* Carves the state out of one block (sizes only when base is NULL). */
static size_t state_layout(const qtts_codec_decoder *d, causal_state *st, float *base) {
    size_t o = 0;
#define TAKE(ptr, n)                            \
    do {                                        \
        if (base) (ptr) = base + o;             \
        o += (size_t)(n);                       \
    } while (0)
    TAKE(st->pre, (size_t)d->rvq_dim * (K_PRE - 1));
    TAKE(st->kv, (size_t)d->layers * 2 * (d->window - 1) * d->kv_heads * d->head_dim);
    for (int i = 0; i < d->n_ups; i++) TAKE(st->dw[i], (size_t)d->latent * (K_DW - 1));
    TAKE(st->dec0, (size_t)d->latent * (K_CONV - 1));
    for (int b = 0; b < d->n_blocks; b++) {
        const qtts_codec_block *B = &d->blocks[b];
        TAKE(st->bt[b], B->cin);
        for (int r = 0; r < 3; r++) TAKE(st->res[b][r], (size_t)B->cout * B->res[r].pad);
    }
    TAKE(st->out, (size_t)d->dec_out.cin * (K_CONV - 1));
#undef TAKE
    return o;
}

static bool state_init(const qtts_codec_decoder *d, causal_state *st) {
    memset(st, 0, sizeof(*st));
    st->floats = state_layout(d, st, NULL);
    if (!(st->mem = qtts_aligned_alloc(sizeof(float) * (st->floats ? st->floats : 1)))) return false;
    state_layout(d, st, st->mem);
    state_reset(st);
    return true;
}

typedef struct {
    int tmax;                 /* frames the scratch was sized for */
    size_t big_cap;           /* floats in each of big[0..2] */
    float *big[3];            /* channel-major stage buffers */
    float *tm;                /* time-major transformer / quantizer scratch */
    size_t tm_cap;
    qtts_conv_ws *ws;         /* conv packing buffers */
} scratch;

static bool cap_max(size_t *cap, uint64_t rows, uint64_t cols) {
    uint64_t v;
    if (!qtts_mul_ok(rows, cols, &v) || v > SIZE_MAX / sizeof(float)) return false;
    if (v > *cap) *cap = (size_t)v;
    return true;
}

/* Sizes of the stage buffers for T frames per run (mirrors run()). */
static bool scratch_sizes(const qtts_codec_decoder *d, int T, size_t *big, size_t *tm) {
    size_t cap = 0;
    uint64_t n = (uint64_t)T;
    bool ok = cap_max(&cap, d->rvq_dim, n + K_PRE - 1) && cap_max(&cap, d->latent, n);
    for (int i = 0; ok && i < d->n_ups; i++) {
        n *= d->ups[i];
        ok = cap_max(&cap, d->latent, n + K_DW - 1) && cap_max(&cap, 4 * (uint64_t)d->latent, n);
    }
    ok = ok && cap_max(&cap, d->latent, n + K_CONV - 1) && cap_max(&cap, d->dec_dim, n);
    uint64_t ch = d->dec_dim;
    for (int b = 0; ok && b < d->n_blocks; b++) {
        ok = cap_max(&cap, ch, n + 1);
        n *= d->rates[b];
        ch /= 2;
        int pad = 0;   /* the residual units' widest history */
        for (int r = 0; r < 3; r++) pad = QTTS_MAX(pad, d->blocks[b].res[r].pad);
        ok = ok && cap_max(&cap, ch, n + (uint64_t)pad);
    }
    ok = ok && cap_max(&cap, ch, n + K_CONV - 1);
    *big = cap;
    /* time-major: quantizer (s1, s2, y1, y2) or transformer (h, xn, tmp, q, att, k, v, gate,
     * up, cos, sin, scores); k and v also hold the state's window-1 earlier rows */
    const uint64_t qn = 2 * (uint64_t)d->cb_vec + 2 * (uint64_t)d->rvq_dim;
    const uint64_t tn = 3 * (uint64_t)d->hidden + 2 * (uint64_t)d->heads * d->head_dim +
                        2 * (uint64_t)d->inter;
    const uint64_t kvd = (uint64_t)d->kv_heads * d->head_dim;
    const uint64_t extra = 2 * ((uint64_t)d->window - 1 + T) * kvd +
                           (uint64_t)T * d->head_dim + (uint64_t)d->heads * d->window;
    size_t t = 0;
    ok = ok && cap_max(&t, T, QTTS_MAX(qn, tn)) && cap_max(&t, 1, t + extra);
    *tm = t;
    return ok;
}

static void scratch_free(scratch *s) {
    for (int i = 0; i < 3; i++) qtts_free(s->big[i]);
    qtts_free(s->tm);
    qtts_conv_ws_free(s->ws);
    memset(s, 0, sizeof(*s));
}

/* Large stage buffers: ask for huge pages (fewer TLB misses in the convs,
 * whose rows are far apart); an advice only. */
static float *big_alloc(size_t floats) {
    const size_t bytes = sizeof(float) * floats;
    float *p = qtts_aligned_alloc(bytes);
#ifdef MADV_HUGEPAGE
    if (p && bytes >= ((size_t)4 << 20)) {
        const uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        const uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
        if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#endif
    return p;
}

static qtts_status scratch_alloc(const qtts_codec_decoder *d, int T, scratch *s, qtts_err *err) {
    memset(s, 0, sizeof(*s));
    if (!scratch_sizes(d, T, &s->big_cap, &s->tm_cap))
        return qtts_fail(err, QTTS_ERR_LIMIT, "codec decode: %d frames is too long", T);
    for (int i = 0; i < 3; i++) s->big[i] = big_alloc(s->big_cap);
    s->tm = qtts_aligned_alloc(sizeof(float) * s->tm_cap);
    s->ws = qtts_conv_ws_new();
    size_t wino = 0;   /* Winograd scratch, ahead: runs then never allocate */
    for (int b = 0; b < d->n_blocks; b++) {
        if (d->blocks[b].tconv_w.frame)
            wino = QTTS_MAX(wino, qtts_conv_wino_scratch(&d->blocks[b].tconv_w, T));
        for (int r = 0; r < 3; r++)
            if (d->blocks[b].res[r].wino1.frame)
                wino = QTTS_MAX(wino, qtts_conv_wino_scratch(&d->blocks[b].res[r].wino1, T));
    }
    if (!s->big[0] || !s->big[1] || !s->big[2] || !s->tm || !s->ws ||
        !qtts_conv_wino_reserve(s->ws, wino)) {
        scratch_free(s);
        return qtts_fail(err, QTTS_ERR_NOMEM,
                         "codec decode: out of memory for %d frames (%.1f MiB scratch)", T,
                         (3.0 * (double)s->big_cap + (double)s->tm_cap) * 4.0 / 1048576.0);
    }
    s->tmax = T;
    return QTTS_OK;
}

static void emit(const qtts_codec_hook *h, const char *stage, const float *x, int C, int n,
                 size_t ld) {
    if (h && h->fn) h->fn(h->user, stage, x, C, n, ld);
}

/* Rows of buf (stride ld) are [P history columns | n new columns]: fill
 * the history from hist[C][P], then keep the last P columns of each row
 * (the new columns, or for n < P old and new) as the next history. */
static void hist_swap(float *buf, size_t ld, int C, int n, int P, float *hist) {
    if (P == 0) return;
    for (int c = 0; c < C; c++) {
        float *r = buf + (size_t)c * ld, *h = hist + (size_t)c * P;
        memcpy(r, h, sizeof(float) * P);
        memcpy(h, r + n, sizeof(float) * P);
    }
}

/* dst rows: P history columns, then a copy of src[C, n] (row stride lds). */
static void pad_copy(float *dst, int P, const float *src, size_t lds, int C, int n, float *hist) {
    const size_t ld = (size_t)n + P;
    for (int c = 0; c < C; c++) memcpy(dst + (size_t)c * ld + P, src + (size_t)c * lds, sizeof(float) * n);
    hist_swap(dst, ld, C, n, P, hist);
}

/* dst rows: P history columns, then SnakeBeta(src[C, n]). */
static void pad_snake(float *dst, int P, const float *src, size_t lds, const float *ea,
                      const float *ib, int C, int n, float *hist) {
    const size_t ld = (size_t)n + P;
    qtts_snake_run(dst + P, ld, src, lds, ea, ib, C, n);
    hist_swap(dst, ld, C, n, P, hist);
}

/* cos/sin rows for positions p0..p0+n-1, exactly as qtts_rope_table
 * computes them for a table starting at 0. */
static void rope_rows(float *cos_t, float *sin_t, int p0, int n, int d, double theta) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)d);
        for (int p = 0; p < n; p++) {
            float ang = (float)(p0 + p) * inv;
            cos_t[(size_t)p * h + i] = cosf(ang);
            sin_t[(size_t)p * h + i] = sinf(ang);
        }
    }
}

typedef struct {
    const qtts_codec_decoder *d;
    const float *q, *k, *v;   /* [T, qd], [kn + T, kvd] x2 (positions base..) */
    float *att, *sc;          /* [T, qd], [heads, window] */
    int T, p0, base;
    float scale;
} attn_job;

/* One head of the sliding-window causal attention: position p sees keys
 * p-window < j <= p. */
static void attn_head(void *ctx, int hh) {
    const attn_job *a = ctx;
    const qtts_codec_decoder *d = a->d;
    const int D = d->head_dim, W = d->window, qd = d->heads * D, kvd = d->kv_heads * D;
    const int kh = hh / (d->heads / d->kv_heads);
    float *sc = a->sc + (size_t)hh * W;
    for (int i = 0; i < a->T; i++) {
        const int p = a->p0 + i, lo = QTTS_MAX(0, p - W + 1), nk = p - lo + 1;
        const float *qi = a->q + (size_t)i * qd + hh * D;
        const float *kb = a->k + (size_t)(lo - a->base) * kvd + kh * D;
        const float *vb = a->v + (size_t)(lo - a->base) * kvd + kh * D;
        qtts_attn_scores(sc, 0, qi, 1, kb, (size_t)kvd, nk, D, a->scale, NULL, 0);
        qtts_softmax(sc, nk);
        qtts_attn_out(a->att + (size_t)i * qd + hh * D, sc, 0, 1, vb, (size_t)kvd, nk, D, false,
                      NULL, 0);
    }
}

/* pre_transformer over T new positions st->pos.. : x [T, latent] time-major
 * in, out [T, latent] time-major; the state's key/value rows are the
 * earlier positions the sliding window still sees. */
static void transformer(const qtts_codec_decoder *d, float *tm, causal_state *st,
                        const float *x, float *out, int T) {
    const int H = d->hidden, I = d->inter, D = d->head_dim, half = D / 2, W = d->window;
    const int qd = d->heads * D, kvd = d->kv_heads * D;
    const int keep = W - 1, p0 = st->pos, kn = st->kv_n, base = p0 - kn;
    float *h = tm;                          /* [T, H] residual stream */
    float *xn = h + (size_t)T * H;          /* [T, H] */
    float *tmp = xn + (size_t)T * H;        /* [T, H] */
    float *q = tmp + (size_t)T * H;         /* [T, qd] */
    float *att = q + (size_t)T * qd;        /* [T, qd] */
    float *k = att + (size_t)T * qd;        /* [kn + T, kvd] positions base.. */
    float *v = k + (size_t)(keep + T) * kvd;/* [kn + T, kvd] */
    float *gate = v + (size_t)(keep + T) * kvd; /* [T, I] */
    float *up = gate + (size_t)T * I;       /* [T, I] */
    float *cos_t = up + (size_t)T * I;      /* [T, D/2] positions p0.. */
    float *sin_t = cos_t + (size_t)T * half;/* [T, D/2] */
    float *sc = sin_t + (size_t)T * half;   /* [heads, window] scores */
    const float scale = 1.0f / sqrtf((float)D);
    const int total = kn + T, nkeep = QTTS_MIN(keep, total);

    rope_rows(cos_t, sin_t, p0, T, D, d->rope_theta);
    qtts_matmul(h, x, T, &d->in_proj, d->in_proj_b);
    for (int l = 0; l < d->layers; l++) {
        const qtts_codec_layer *L = &d->tl[l];
        float *kc = st->kv + (size_t)l * 2 * keep * kvd, *vc = kc + (size_t)keep * kvd;
        for (int t = 0; t < T; t++)
            qtts_rmsnorm(xn + (size_t)t * H, h + (size_t)t * H, L->in_norm, H, d->rms_eps);
        memcpy(k, kc, sizeof(float) * (size_t)kn * kvd);
        memcpy(v, vc, sizeof(float) * (size_t)kn * kvd);
        float *kt = k + (size_t)kn * kvd, *vt = v + (size_t)kn * kvd;
        qtts_matmul(q, xn, T, &L->q, NULL);
        qtts_matmul(kt, xn, T, &L->k, NULL);
        qtts_matmul(vt, xn, T, &L->v, NULL);
        for (int t = 0; t < T; t++) {
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int hh = 0; hh < d->heads; hh++) qtts_rope(q + (size_t)t * qd + hh * D, c, s, D);
            for (int hh = 0; hh < d->kv_heads; hh++) qtts_rope(kt + (size_t)t * kvd + hh * D, c, s, D);
        }
        /* sliding-window causal attention, heads over the thread pool */
        attn_job aj = {d, q, k, v, att, sc, T, p0, base, scale};
        qtts_parallel_for(d->heads, attn_head, &aj);
        memcpy(kc, k + (size_t)(total - nkeep) * kvd, sizeof(float) * (size_t)nkeep * kvd);
        memcpy(vc, v + (size_t)(total - nkeep) * kvd, sizeof(float) * (size_t)nkeep * kvd);
        qtts_matmul(tmp, att, T, &L->o, NULL);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < H; c++) h[(size_t)t * H + c] += L->attn_scale[c] * tmp[(size_t)t * H + c];
        for (int t = 0; t < T; t++)
            qtts_rmsnorm(xn + (size_t)t * H, h + (size_t)t * H, L->post_norm, H, d->rms_eps);
        qtts_matmul_swiglu(gate, up, xn, T, &L->gate, &L->up);
        qtts_matmul(tmp, gate, T, &L->down, NULL);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < H; c++) h[(size_t)t * H + c] += L->mlp_scale[c] * tmp[(size_t)t * H + c];
    }
    st->kv_n = nkeep;
    for (int t = 0; t < T; t++)
        qtts_rmsnorm(xn + (size_t)t * H, h + (size_t)t * H, d->final_norm, H, d->rms_eps);
    qtts_matmul(out, xn, T, &d->out_proj, d->out_proj_b);
}

static qtts_status check_codes(const qtts_codec_decoder *d, const int32_t *codes, int T,
                               qtts_err *err) {
    for (int t = 0; t < T; t++)
        for (int q = 0; q < d->n_q; q++) {
            const int32_t c = codes[(size_t)t * d->n_q + q];
            if (c < 0 || c >= d->cb_size)
                return qtts_fail(err, QTTS_ERR_INVALID,
                                 "codec decode: code %d at frame %d, codebook %d outside [0, %d)",
                                 (int)c, t, q, d->cb_size);
        }
    return QTTS_OK;
}

/* The quantizer, pre_conv and transformer of the next T frames codes[T,
 * n_q] (already range-checked) through state st: the transformer's output
 * [latent, T] in s->big[0] (big[1], big[2] scratch). st->pos is not moved. */
static void head(const qtts_codec_decoder *d, scratch *s, causal_state *st, const int32_t *codes,
                 int T, const qtts_codec_hook *hook) {
    float *A = s->big[0], *B = s->big[1], *C = s->big[2];
    const int V = d->cb_vec, R = d->rvq_dim, L = d->latent;

    /* quantizer -> A[R, T] behind K_PRE-1 history columns */
    {
        float *s1 = s->tm, *s2 = s1 + (size_t)T * V, *y1 = s2 + (size_t)T * V,
              *y2 = y1 + (size_t)T * R;
        const size_t cb_n = (size_t)d->cb_size * V;
        for (int t = 0; t < T; t++) {
            const int32_t *ct = codes + (size_t)t * d->n_q;
            memcpy(s1 + (size_t)t * V, d->codebooks + (size_t)ct[0] * V, sizeof(float) * V);
            float *r = s2 + (size_t)t * V;
            memcpy(r, d->codebooks + cb_n + (size_t)ct[1] * V, sizeof(float) * V);
            for (int q = 2; q < d->n_q; q++) {
                const float *e = d->codebooks + cb_n * q + (size_t)ct[q] * V;
                for (int j = 0; j < V; j++) r[j] += e[j];
            }
        }
        qtts_matmul(y1, s1, T, &d->proj_first, NULL);
        qtts_matmul(y2, s2, T, &d->proj_rest, NULL);
        qtts_add_inplace(y1, y2, (size_t)T * R);
        const int P = K_PRE - 1;
        qtts_transpose(A + P, (size_t)T + P, y1, R, T, R);
        hist_swap(A, (size_t)T + P, R, T, P, st->pre);
        emit(hook, "quantizer", A + P, R, T, (size_t)T + P);
        qtts_conv1d_run(&d->pre_conv, B, T, A + P, (size_t)T + P, T, false, s->ws);
        emit(hook, "pre_conv", B, L, T, T);
    }

    /* pre_transformer (time-major in A, out in C) -> A[L, T] */
    qtts_transpose(A, L, B, T, L, T);
    transformer(d, s->tm, st, A, C, T);
    qtts_transpose(A, T, C, L, T, L);
    emit(hook, "pre_transformer", A, L, T, T);
}

/* The next T frames codes[T, n_q] (already range-checked) through state
 * st into wav[T * upsample]. */
static qtts_status run(const qtts_codec_decoder *d, scratch *s, causal_state *st,
                       const int32_t *codes, int T, float *wav, const qtts_codec_hook *hook,
                       qtts_err *err) {
    QTTS_ASSERT(T > 0 && T <= s->tmax && st->pos <= INT_MAX - T);
    float *A = s->big[0], *B = s->big[1], *C = s->big[2], *tmp;
#define ROT3()  do { tmp = A; A = C; C = B; B = tmp; } while (0) /* (A,B,C) <- (C,A,B) */
    const int L = d->latent;
    char stage[32];
    head(d, s, st, codes, T, hook);

    /* upsample: x in A [L, n] */
    int n = T;
    for (int i = 0; i < d->n_ups; i++) {
        const qtts_codec_upsample *U = &d->upx[i];
        const int st_ = U->stride;
        qtts_conv1d_run(&U->tconv, B, n, A, n, n, false, s->ws);   /* phases [st*L, n] */
        n *= st_;
        qtts_interleave_phases(C, B, L, n / st_, st_);              /* x = C [L, n] */
        snprintf(stage, sizeof(stage), "upsample.%d.0", i);
        emit(hook, stage, C, L, n, n);
        const int P = K_DW - 1;
        pad_copy(A, P, C, n, L, n, st->dw[i]);
        qtts_dwconv1d_causal(B, n, A + P, (size_t)n + P, U->dw_w, U->dw_b, L, K_DW, 1, n);
        qtts_layernorm_channels(B, n, L, n, U->ln_w, U->ln_b, 1e-6f);
        qtts_conv1d_run(&U->pw1, A, n, B, n, n, false, s->ws);     /* [4L, n] */
        qtts_gelu_erf_inplace(A, (size_t)4 * L * n);
        qtts_conv1d_run(&U->pw2, B, n, A, n, n, false, s->ws);     /* [L, n] */
        for (int c = 0; c < L; c++) {
            float *xr = C + (size_t)c * n;
            const float *yr = B + (size_t)c * n;
            const float g = U->gamma[c];
            for (int t = 0; t < n; t++) xr[t] += g * yr[t];
        }
        ROT3();                                                     /* x = A */
        snprintf(stage, sizeof(stage), "upsample.%d", i);
        emit(hook, stage, A, L, n, n);
    }

    /* decoder.0 -> x = A [dec_dim, n] */
    pad_copy(B, K_CONV - 1, A, n, L, n, st->dec0);
    qtts_conv1d_run(&d->dec0, C, n, B + K_CONV - 1, (size_t)n + K_CONV - 1, n, false, s->ws);
    ROT3();
    emit(hook, "decoder.0", A, d->dec_dim, n, n);

    int ch = d->dec_dim;
    for (int b = 0; b < d->n_blocks; b++) {
        const qtts_codec_block *Bk = &d->blocks[b];
        const int sr = Bk->stride, co = Bk->cout;
        pad_snake(B, 1, A, n, Bk->ea, Bk->ib, ch, n, st->bt[b]);
        /* [sr*co, n] */
        if (!Bk->tconv_w.frame ||
            !qtts_conv_wino_run(&Bk->tconv_w, &Bk->tconv, C, n, B + 1, (size_t)n + 1, n, s->ws)) {
            if (!Bk->tconv.w && !Bk->tconv.wb)   /* as for the residual units below */
                return qtts_fail(err, QTTS_ERR_NOMEM,
                                 "codec decode: no scratch for block %d's Winograd tconv", b);
            qtts_conv1d_run(&Bk->tconv, C, n, B + 1, (size_t)n + 1, n, false, s->ws);
        }
        qtts_interleave_phases(A, C, co, n, sr);                                   /* x = A [co, n*sr] */
        n *= sr;
        ch = co;
        for (int r = 0; r < 3; r++) {
            const qtts_codec_resunit *Ru = &Bk->res[r];
            const int P = Ru->pad;
            pad_snake(B, P, A, n, Ru->ea1, Ru->ib1, ch, n, st->res[b][r]);
            if (!Ru->wino1.frame ||
                !qtts_conv_wino_run(&Ru->wino1, &Ru->conv1, C, n, B + P, (size_t)n + P, n, s->ws)) {
                /* a run of whole frames fails only for want of scratch (reserved
                 * ahead), and after qtts_codec_decoder_drop_direct there is no
                 * direct conv to fall back on */
                if (!Ru->conv1.w && !Ru->conv1.wb)
                    return qtts_fail(err, QTTS_ERR_NOMEM,
                                     "codec decode: no scratch for block %d's Winograd conv", b);
                qtts_conv1d_run(&Ru->conv1, C, n, B + P, (size_t)n + P, n, false, s->ws);
            }
            qtts_snake_run(C, n, C, n, Ru->ea2, Ru->ib2, ch, n);
            qtts_conv1d_run(&Ru->conv2, A, n, C, n, n, true, s->ws);                /* x += ... */
        }
        snprintf(stage, sizeof(stage), "decoder.%d", b + 1);
        emit(hook, stage, A, ch, n, n);
    }

    /* final SnakeBeta + conv to one channel, clamp */
    const int P = K_CONV - 1;
    pad_snake(B, P, A, n, d->out_ea, d->out_ib, ch, n, st->out);
    snprintf(stage, sizeof(stage), "decoder.%d", d->n_blocks + 1);
    emit(hook, stage, B + P, ch, n, (size_t)n + P);
    qtts_conv1d_run(&d->dec_out, wav, n, B + P, (size_t)n + P, n, false, s->ws);
    snprintf(stage, sizeof(stage), "decoder.%d", d->n_blocks + 2);
    emit(hook, stage, wav, 1, n, n);
#undef ROT3
    QTTS_ASSERT(n == T * d->upsample);
    st->pos += T;
    for (int t = 0; t < n; t++) {
        const float x = wav[t];
        if (!isfinite(x))
            return qtts_fail(err, QTTS_ERR_NUMERIC, "codec decode: non-finite sample %d", t);
        wav[t] = x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
    }
    return QTTS_OK;
}

static qtts_status check_args(const qtts_codec_decoder *d, const int32_t *codes, int T,
                              const float *wav_out, qtts_err *err) {
    if (!d || T < 0 || (T > 0 && (!codes || !wav_out)))
        return qtts_fail(err, QTTS_ERR_INVALID, "codec decode: bad arguments (T = %d)", T);
    if ((int64_t)T * d->upsample > INT_MAX / 2)
        return qtts_fail(err, QTTS_ERR_LIMIT, "codec decode: %d frames is too long", T);
    return check_codes(d, codes, T, err);
}

qtts_status qtts_codec_decode_window(const qtts_codec_decoder *d, const int32_t *codes, int T,
                                     float *wav_out, const qtts_codec_hook *hook, qtts_err *err) {
    qtts_status st = check_args(d, codes, T, wav_out, err);
    if (st != QTTS_OK || T == 0) return st;
    /* without a hook, in runs of QTTS_CODEC_STREAM_FRAMES through one state:
     * the same bits in a fraction of the scratch */
    const bool whole = hook && hook->fn;
    const int run_max = whole ? T : QTTS_MIN(T, QTTS_CODEC_STREAM_FRAMES);
    scratch s;
    causal_state cs;
    st = scratch_alloc(d, run_max, &s, err);
    if (st != QTTS_OK) return st;
    if (!state_init(d, &cs)) st = nomem(err, "decoder state");
    for (int f = 0; st == QTTS_OK && f < T; f += run_max) {
        const int m = QTTS_MIN(run_max, T - f);
        st = run(d, &s, &cs, codes + (size_t)f * d->n_q, m, wav_out + (size_t)f * d->upsample,
                 whole ? hook : NULL, err);
    }
    state_free(&cs);
    scratch_free(&s);
    return st;
}

/* ---- streaming ---------------------------------------------------------- */

struct qtts_codec_stream {
    const qtts_codec_decoder *d;
    scratch s;
    causal_state st[2];       /* st[cur]: the window being emitted; the other one
                                 takes the next window's left-context frames */
    int cur;
    int64_t frame;            /* frames pushed */
    float *discard;           /* [tmax * upsample] the context frames' output */
};

qtts_status qtts_codec_stream_new(const qtts_codec_decoder *d, int max_frames,
                                  qtts_codec_stream **out, qtts_err *err) {
    *out = NULL;
    if (!d || max_frames < 0)
        return qtts_fail(err, QTTS_ERR_INVALID, "codec stream: bad arguments");
    if (max_frames == 0) max_frames = QTTS_CODEC_STREAM_FRAMES;
    if ((int64_t)max_frames * d->upsample > INT_MAX / 2)
        return qtts_fail(err, QTTS_ERR_LIMIT, "codec stream: %d frames per run is too many",
                         max_frames);
    qtts_codec_stream *s = qtts_calloc(1, sizeof(*s));
    if (!s) return nomem(err, "codec stream");
    s->d = d;
    qtts_status st = scratch_alloc(d, max_frames, &s->s, err);
    if (st == QTTS_OK &&
        (!state_init(d, &s->st[0]) || !state_init(d, &s->st[1]) ||
         !(s->discard = qtts_aligned_alloc(sizeof(float) * (size_t)max_frames * d->upsample))))
        st = nomem(err, "codec stream state");
    if (st != QTTS_OK) {
        qtts_codec_stream_free(s);
        return st;
    }
    *out = s;
    return QTTS_OK;
}

void qtts_codec_stream_reset(qtts_codec_stream *s) {
    if (!s) return;
    state_reset(&s->st[0]);
    state_reset(&s->st[1]);
    s->cur = 0;
    s->frame = 0;
}

qtts_status qtts_codec_stream_copy(qtts_codec_stream *dst, const qtts_codec_stream *src,
                                   qtts_err *err) {
    if (!dst || !src || dst->d != src->d)
        return qtts_fail(err, QTTS_ERR_INVALID, "codec stream copy: not two streams of one decoder");
    if (dst == src) return QTTS_OK;
    for (int i = 0; i < 2; i++) {
        causal_state *a = &dst->st[i];
        const causal_state *b = &src->st[i];
        memcpy(a->mem, b->mem, sizeof(float) * b->floats);   /* same decoder: same layout */
        a->pos = b->pos;
        a->kv_n = b->kv_n;
    }
    dst->cur = src->cur;
    dst->frame = src->frame;
    return QTTS_OK;
}

int64_t qtts_codec_stream_frames(const qtts_codec_stream *s) { return s ? s->frame : 0; }

void qtts_codec_stream_free(qtts_codec_stream *s) {
    if (!s) return;
    scratch_free(&s->s);
    state_free(&s->st[0]);
    state_free(&s->st[1]);
    qtts_free(s->discard);
    qtts_free(s);
}

/* Frames [w*CHUNK, (w+1)*CHUNK) are emitted from the state of window w,
 * which has first consumed the LEFT_CONTEXT frames before w*CHUNK (none
 * for w = 0); those frames go through both states, the newer one's output
 * discarded. Runs never cross these boundaries. */
qtts_status qtts_codec_stream_push(qtts_codec_stream *s, const int32_t *codes, int n,
                                   float *wav_out, qtts_err *err) {
    if (!s) return qtts_fail(err, QTTS_ERR_INVALID, "codec stream: NULL stream");
    const qtts_codec_decoder *d = s->d;
    qtts_status st = check_args(d, codes, n, wav_out, err);
    if (st != QTTS_OK) return st;
    const size_t U = (size_t)d->upsample;
    while (n > 0) {
        const int64_t f = s->frame, w0 = f / QTTS_CODEC_CHUNK * QTTS_CODEC_CHUNK;
        const int64_t ctx0 = w0 + QTTS_CODEC_CHUNK - QTTS_CODEC_LEFT_CONTEXT;
        const int64_t lim = f < ctx0 ? ctx0 : w0 + QTTS_CODEC_CHUNK;
        const int m = (int)QTTS_MIN((int64_t)QTTS_MIN(n, s->s.tmax), lim - f);
        st = run(d, &s->s, &s->st[s->cur], codes, m, wav_out, NULL, err);
        if (st == QTTS_OK && f >= ctx0)
            st = run(d, &s->s, &s->st[!s->cur], codes, m, s->discard, NULL, err);
        if (st != QTTS_OK) return st;
        s->frame += m;
        codes += (size_t)m * d->n_q;
        wav_out += (size_t)m * U;
        n -= m;
        if (s->frame == w0 + QTTS_CODEC_CHUNK) {
            state_reset(&s->st[s->cur]);
            s->cur = !s->cur;
        }
    }
    return QTTS_OK;
}

qtts_status qtts_codec_stream_skip(qtts_codec_stream *s, const int32_t *codes, int n,
                                   qtts_err *err) {
    if (!s) return qtts_fail(err, QTTS_ERR_INVALID, "codec stream: NULL stream");
    const qtts_codec_decoder *d = s->d;
    qtts_status st = check_args(d, codes, n, s->discard, err);
    if (st != QTTS_OK) return st;
    /* Only the transformer for the frames before the last `reach` of a
     * run that ends before the window's left-context frames (which also
     * go through the next window's state): the convolutions' state after
     * the run depends only on those last frames, whatever it was before
     * them. */
    const int64_t f = s->frame, w0 = f / QTTS_CODEC_CHUNK * QTTS_CODEC_CHUNK;
    const int64_t ctx0 = w0 + QTTS_CODEC_CHUNK - QTTS_CODEC_LEFT_CONTEXT;
    int lead = (int)QTTS_MIN((int64_t)n, ctx0 - f) - d->reach;
    causal_state *cs = &s->st[s->cur];
    while (lead > 0) {
        const int m = QTTS_MIN(lead, s->s.tmax);
        QTTS_ASSERT(cs->pos <= INT_MAX - m);
        head(d, &s->s, cs, codes, m, NULL);
        cs->pos += m;
        s->frame += m;
        codes += (size_t)m * d->n_q;
        n -= m;
        lead -= m;
    }
    /* the rest as pushed, in runs the discard buffer holds */
    while (st == QTTS_OK && n > 0) {
        const int m = QTTS_MIN(n, s->s.tmax);
        st = qtts_codec_stream_push(s, codes, m, s->discard, err);
        codes += (size_t)m * d->n_q;
        n -= m;
    }
    return st;
}

qtts_status qtts_codec_decode(const qtts_codec_decoder *d, const int32_t *codes, int T,
                              float *wav_out, qtts_err *err) {
    qtts_status st = check_args(d, codes, T, wav_out, err);
    if (st != QTTS_OK || T == 0) return st;
    /* the reference's chunked decode, as a stream in runs of up to
     * QTTS_CODEC_STREAM_FRAMES frames: the same bits as decoding each
     * window at once, in a fraction of the memory */
    qtts_codec_stream *s;
    st = qtts_codec_stream_new(d, QTTS_MIN(T, QTTS_CODEC_STREAM_FRAMES), &s, err);
    if (st != QTTS_OK) return st;
    st = qtts_codec_stream_push(s, codes, T, wav_out, err);
    qtts_codec_stream_free(s);
    return st;
}
