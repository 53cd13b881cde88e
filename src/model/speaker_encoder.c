/*
 * speaker_encoder.c - log-mel front end and ECAPA-TDNN (dataflow and shapes
 * in speaker_encoder.h).
 *
 * Mel: each frame is windowed, transformed by an iterative radix-2 complex
 * FFT of 1024 points in fp64 (bit-reversal table and twiddles computed
 * once), and only the 513 non-negative bins are used. The filterbank is
 * built exactly as librosa.filters.mel does it: fp64 Slaney mel points and
 * triangle slopes, each weight rounded to fp32, then multiplied in fp64 by
 * the fp64 Slaney norm 2/(f[i+2]-f[i]) and rounded to fp32 again (numpy's
 * in-place float32 *= float64). Each mel row keeps its non-zero bin range,
 * and mel sums run in fp64 over that range.
 *
 * ECAPA: convolutions run on qtts_conv1d_run (the codec decoder's blocked
 * SIMD kernels on the thread pool; the same bits at any thread count). A
 * "same" reflect-padded conv is a causal conv over a copy of the input with
 * the reflected columns written around it: with total padding P =
 * dil*(k-1), left L = P/2, the row [x reflected L | x | x reflected P-L] is
 * passed to the conv starting at column P, whose causal reach of P columns
 * then covers exactly the padded window. 1x1 convs read the input in
 * place. The attention TDNN of the pooling layer sees [h; mu; sigma] where
 * mu and sigma are constant over time, so its weight is split: the h part
 * is a conv, the mu/sigma part a matrix-vector product folded into a
 * per-channel bias. Statistics, SE means and softmax sums use fp64
 * accumulators.
 *
 * Scratch for one call is allocated per call and bounded by
 * QTTS_SPK_MAX_SAMPLES.
 */
#include "speaker_encoder.h"

#include "../kernels/kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ==== log-mel ============================================================== */

struct qtts_logmel {
    float window[QTTS_MEL_NFFT];                     /* periodic Hann */
    float filt[QTTS_MEL_BINS * QTTS_MEL_NFREQ];      /* [128, 513] */
    int lo[QTTS_MEL_BINS], hi[QTTS_MEL_BINS];        /* non-zero range [lo, hi) of each row */
    double cs[QTTS_MEL_NFFT / 2], sn[QTTS_MEL_NFFT / 2]; /* exp(-2πik/N) */
    int16_t rev[QTTS_MEL_NFFT];                      /* bit reversal */
};

/* librosa hz_to_mel / mel_to_hz, Slaney (htk=False), in fp64. */
static const double MEL_F_SP = 200.0 / 3;
static double hz_to_mel(double f) {
    const double min_log_mel = 1000.0 / MEL_F_SP, logstep = log(6.4) / 27.0;
    if (f >= 1000.0) return min_log_mel + log(f / 1000.0) / logstep;
    return f / MEL_F_SP;
}
static double mel_to_hz(double m) {
    const double min_log_mel = 1000.0 / MEL_F_SP, logstep = log(6.4) / 27.0;
    if (m >= min_log_mel) return 1000.0 * exp(logstep * (m - min_log_mel));
    return MEL_F_SP * m;
}

static void build_filters(qtts_logmel *m) {
    enum { NM = QTTS_MEL_BINS, NF = QTTS_MEL_NFREQ };
    double fftf[NF], melf[NM + 2];
    /* np.fft.rfftfreq(n_fft, d=1/sr) */
    const double d = 1.0 / QTTS_MEL_SR, val = 1.0 / (QTTS_MEL_NFFT * d);
    for (int k = 0; k < NF; k++) fftf[k] = k * val;
    /* np.linspace(hz_to_mel(0), hz_to_mel(12000), NM + 2): i*step + start, last = stop */
    const double mmin = hz_to_mel(0.0), mmax = hz_to_mel(QTTS_MEL_SR / 2.0);
    const double step = (mmax - mmin) / (NM + 1);
    for (int i = 0; i < NM + 2; i++) melf[i] = mel_to_hz(i == NM + 1 ? mmax : i * step + mmin);
    for (int i = 0; i < NM; i++) {
        const double fd0 = melf[i + 1] - melf[i], fd1 = melf[i + 2] - melf[i + 1];
        const double enorm = 2.0 / (melf[i + 2] - melf[i]);
        float *row = m->filt + (size_t)i * NF;
        m->lo[i] = NF;
        m->hi[i] = 0;
        for (int k = 0; k < NF; k++) {
            const double lower = -(melf[i] - fftf[k]) / fd0;
            const double upper = (melf[i + 2] - fftf[k]) / fd1;
            double w = lower < upper ? lower : upper;
            if (!(w > 0)) w = 0;
            const float w32 = (float)w;
            row[k] = (float)((double)w32 * enorm);
            if (row[k] != 0.0f) {
                if (k < m->lo[i]) m->lo[i] = k;
                m->hi[i] = k + 1;
            }
        }
        if (m->hi[i] == 0) m->lo[i] = 0;
    }
}

qtts_status qtts_logmel_new(qtts_logmel **out, qtts_err *err) {
    *out = NULL;
    qtts_logmel *m = qtts_calloc(1, sizeof(*m));
    if (!m) return qtts_fail(err, QTTS_ERR_NOMEM, "log-mel: out of memory");
    /* torch.hann_window(1024): 0.5 - 0.5 cos(n * float(2π/N)) in fp32 */
    const float wstep = (float)(2.0 * M_PI / QTTS_MEL_NFFT);
    for (int i = 0; i < QTTS_MEL_NFFT; i++)
        m->window[i] = 0.5f + -0.5f * cosf((float)i * wstep);
    for (int k = 0; k < QTTS_MEL_NFFT / 2; k++) {
        const double a = -2.0 * M_PI * k / QTTS_MEL_NFFT;
        m->cs[k] = cos(a);
        m->sn[k] = sin(a);
    }
    int bits = 0;
    while ((1 << bits) < QTTS_MEL_NFFT) bits++;
    for (int i = 0; i < QTTS_MEL_NFFT; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        m->rev[i] = (int16_t)r;
    }
    build_filters(m);
    *out = m;
    return QTTS_OK;
}

void qtts_logmel_free(qtts_logmel *m) { qtts_free(m); }

const float *qtts_logmel_filters(const qtts_logmel *m) { return m->filt; }

size_t qtts_logmel_frames(size_t n) {
    if (n <= QTTS_MEL_PAD) return 0;
    return (n + 2 * QTTS_MEL_PAD - QTTS_MEL_NFFT) / QTTS_MEL_HOP + 1;
}

/* In-place radix-2 DIT FFT of re/im[N] (input already bit-reversed). */
static void fft_inplace(const qtts_logmel *m, double *re, double *im) {
    enum { N = QTTS_MEL_NFFT };
    for (int len = 2; len <= N; len <<= 1) {
        const int half = len >> 1, tstep = N / len;
        for (int s = 0; s < N; s += len)
            for (int j = 0; j < half; j++) {
                const double wr = m->cs[j * tstep], wi = m->sn[j * tstep];
                const int a = s + j, b = a + half;
                const double xr = re[b] * wr - im[b] * wi, xi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - xr;
                im[b] = im[a] - xi;
                re[a] += xr;
                im[a] += xi;
            }
    }
}

qtts_status qtts_logmel_compute(const qtts_logmel *m, const float *pcm, size_t n, float *out,
                                size_t stride_t, size_t stride_b, qtts_err *err) {
    enum { N = QTTS_MEL_NFFT, P = QTTS_MEL_PAD, NF = QTTS_MEL_NFREQ };
    const size_t T = qtts_logmel_frames(n);
    if (T == 0)
        return qtts_fail(err, QTTS_ERR_INVALID, "log-mel: %zu samples; more than %d needed", n, P);
    if (n > QTTS_SPK_MAX_SAMPLES)
        return qtts_fail(err, QTTS_ERR_INVALID, "log-mel: %zu samples, over the %zu limit", n,
                         QTTS_SPK_MAX_SAMPLES);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i]))
            return qtts_fail(err, QTTS_ERR_INVALID, "log-mel: non-finite sample %zu", i);
    double re[N], im[N], mag[NF];
    for (size_t t = 0; t < T; t++) {
        /* sample j of the frame is padded[t*hop + j]; padded[p] = pcm[p - P]
         * with reflection at both ends */
        for (int j = 0; j < N; j++) {
            const ptrdiff_t p = (ptrdiff_t)(t * QTTS_MEL_HOP) + j - P;
            size_t src;
            if (p < 0) src = (size_t)(-p);
            else if ((size_t)p >= n) src = 2 * (n - 1) - (size_t)p;
            else src = (size_t)p;
            const int r = m->rev[j];
            re[r] = (double)m->window[j] * (double)pcm[src];
            im[r] = 0.0;
        }
        fft_inplace(m, re, im);
        for (int k = 0; k < NF; k++) mag[k] = sqrt(re[k] * re[k] + im[k] * im[k] + 1e-9);
        for (int b = 0; b < QTTS_MEL_BINS; b++) {
            const float *row = m->filt + (size_t)b * NF;
            double s = 0;
            for (int k = m->lo[b]; k < m->hi[b]; k++) s += (double)row[k] * mag[k];
            float v = (float)s;
            if (!(v >= 1e-5f)) v = 1e-5f;
            out[t * stride_t + (size_t)b * stride_b] = logf(v);
        }
    }
    return QTTS_OK;
}

/* ==== ECAPA-TDNN =========================================================== */

typedef struct {
    int C, dil;
    qtts_conv1d tdnn1, tdnn2;        /* [C, C, 1] each */
    qtts_conv1d *res;                /* S-1 convs [C/S, C/S, k] dilated */
    float *se1_w, *se1_b;            /* [SE, C], [SE] */
    float *se2_w, *se2_b;            /* [C, SE], [C] */
} spk_block;

struct qtts_spk_enc {
    int mel, C, C4, A, S, SE, E;
    int K[5], D[5];
    qtts_logmel *lm;
    qtts_conv1d block0;              /* [C, 128, K0] */
    spk_block blk[3];
    qtts_conv1d mfa;                 /* [C4, C4, K4] */
    qtts_conv1d asp_x;               /* [A, C4, 1], the h columns of asp.tdnn, no bias */
    float *asp_stat_w, *asp_b;       /* [A, 2*C4] (mu | sigma columns), [A] */
    qtts_conv1d asp_conv;            /* [C4, A, 1] */
    float *fc_w, *fc_b;              /* [E, 2*C4], [E] */
    size_t min_samples;
};

#define DT_FLOAT ((1u << QTTS_DT_BF16) | (1u << QTTS_DT_F32))
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* "speaker_encoder.<fmt>" with the given shape, converted to a new fp32 array. */
static float *load_f32(const qtts_st_set *st, qtts_err *err, int rank, const int64_t *dims,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static float *load_f32(const qtts_st_set *st, qtts_err *err, int rank, const int64_t *dims,
                       const char *fmt, ...) {
    char name[256] = "speaker_encoder.";
    const size_t pre = strlen(name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name + pre, sizeof(name) - pre, fmt, ap);
    va_end(ap);
    const qtts_tensor *t = qtts_st_expect(st, name, DT_FLOAT, rank, dims, err);
    if (!t) return NULL;
    float *v = qtts_malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    if (!v) {
        qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory for %s", name);
        return NULL;
    }
    qtts_tensor_to_f32(t, v);
    return v;
}

/* Conv1d "<prefix>.weight" [cout, cin, k] + ".bias" [cout], packed. */
static bool load_conv(const qtts_st_set *st, qtts_err *err, qtts_conv1d *c, int cout, int cin,
                      int k, int dil, const char *prefix) {
    float *w = load_f32(st, err, 3, DIMS(cout, cin, k), "%s.weight", prefix);
    float *b = w ? load_f32(st, err, 1, DIMS(cout), "%s.bias", prefix) : NULL;
    bool ok = b && qtts_conv1d_init(c, w, b, cout, cin, k, dil);
    if (b && !ok) qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory packing %s", prefix);
    qtts_free(w);
    qtts_free(b);
    return ok;
}

void qtts_spk_enc_free(qtts_spk_enc *e) {
    if (!e) return;
    qtts_logmel_free(e->lm);
    qtts_conv1d_free(&e->block0);
    for (int b = 0; b < 3; b++) {
        spk_block *k = &e->blk[b];
        qtts_conv1d_free(&k->tdnn1);
        qtts_conv1d_free(&k->tdnn2);
        if (k->res)
            for (int j = 0; j < e->S - 1; j++) qtts_conv1d_free(&k->res[j]);
        qtts_free(k->res);
        qtts_free(k->se1_w);
        qtts_free(k->se1_b);
        qtts_free(k->se2_w);
        qtts_free(k->se2_b);
    }
    qtts_conv1d_free(&e->mfa);
    qtts_conv1d_free(&e->asp_x);
    qtts_free(e->asp_stat_w);
    qtts_free(e->asp_b);
    qtts_conv1d_free(&e->asp_conv);
    qtts_free(e->fc_w);
    qtts_free(e->fc_b);
    qtts_free(e);
}

static qtts_status check_config(qtts_spk_enc *e, const qtts_config *cfg, qtts_err *err) {
    if (!cfg->has_speaker_encoder)
        return qtts_fail(err, QTTS_ERR_INVALID, "speaker encoder: the model has none (not a Base model)");
    if (cfg->spk_mel_dim != QTTS_MEL_BINS)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "speaker_encoder_config.mel_dim: %d; the reference front end makes %d",
                         cfg->spk_mel_dim, QTTS_MEL_BINS);
    if (cfg->spk_sample_rate != QTTS_MEL_SR)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "speaker_encoder_config.sample_rate: %d; only %d supported",
                         cfg->spk_sample_rate, QTTS_MEL_SR);
    const int *ch = cfg->spk_channels;
    if (ch[1] != ch[0] || ch[2] != ch[0] || ch[3] != ch[0])
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speaker_encoder_config.enc_channels: blocks 0-3 must be equal for the "
                         "residual adds (%d %d %d %d)", ch[0], ch[1], ch[2], ch[3]);
    if (ch[4] != 3 * ch[3])
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speaker_encoder_config.enc_channels[4]: %d != 3 * %d (the mfa concat)",
                         ch[4], ch[3]);
    if (ch[0] % cfg->spk_res2net_scale)
        return qtts_fail(err, QTTS_ERR_FORMAT,
                         "speaker_encoder_config.enc_res2net_scale: %d does not divide %d",
                         cfg->spk_res2net_scale, ch[0]);
    e->mel = cfg->spk_mel_dim;
    e->C = ch[0];
    e->C4 = ch[4];
    e->A = cfg->spk_attn_channels;
    e->S = cfg->spk_res2net_scale;
    e->SE = cfg->spk_se_channels;
    e->E = cfg->spk_enc_dim;
    /* Smallest input: T must exceed every reflect pad (right side = the
     * larger half) and the mel needs n > 384. */
    int maxpad = 0;
    for (int i = 0; i < 5; i++) {
        e->K[i] = cfg->spk_kernels[i];
        e->D[i] = cfg->spk_dilations[i];
        const int tot = e->D[i] * (e->K[i] - 1), right = tot - tot / 2;
        if (right > maxpad) maxpad = right;
    }
    size_t min_n = (size_t)QTTS_MEL_HOP * (size_t)(maxpad + 1);
    if (min_n < QTTS_MEL_PAD + 1) min_n = QTTS_MEL_PAD + 1;
    e->min_samples = min_n;
    return QTTS_OK;
}

qtts_status qtts_spk_enc_load(const qtts_st_set *st, const qtts_config *cfg, qtts_spk_enc **out,
                              qtts_err *err) {
    *out = NULL;
    qtts_spk_enc *e = qtts_calloc(1, sizeof(*e));
    if (!e) return qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory");
    qtts_status st_ = check_config(e, cfg, err);
    if (st_) goto fail;
    if ((st_ = qtts_logmel_new(&e->lm, err))) goto fail;
    const int C = e->C, C4 = e->C4, A = e->A, S = e->S, SE = e->SE, E = e->E, w = C / S;
    char p[128];
    if (!load_conv(st, err, &e->block0, C, e->mel, e->K[0], e->D[0], "blocks.0.conv")) goto fail_fmt;
    for (int b = 0; b < 3; b++) {
        spk_block *k = &e->blk[b];
        k->C = C;
        k->dil = e->D[b + 1];
        snprintf(p, sizeof p, "blocks.%d.tdnn1.conv", b + 1);
        if (!load_conv(st, err, &k->tdnn1, C, C, 1, 1, p)) goto fail_fmt;
        snprintf(p, sizeof p, "blocks.%d.tdnn2.conv", b + 1);
        if (!load_conv(st, err, &k->tdnn2, C, C, 1, 1, p)) goto fail_fmt;
        if (S > 1) {
            k->res = qtts_calloc((size_t)(S - 1), sizeof(qtts_conv1d));
            if (!k->res) {
                st_ = qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory");
                goto fail;
            }
        }
        for (int j = 0; j < S - 1; j++) {
            snprintf(p, sizeof p, "blocks.%d.res2net_block.blocks.%d.conv", b + 1, j);
            if (!load_conv(st, err, &k->res[j], w, w, e->K[b + 1], e->D[b + 1], p)) goto fail_fmt;
        }
        if (!(k->se1_w = load_f32(st, err, 3, DIMS(SE, C, 1), "blocks.%d.se_block.conv1.weight", b + 1)) ||
            !(k->se1_b = load_f32(st, err, 1, DIMS(SE), "blocks.%d.se_block.conv1.bias", b + 1)) ||
            !(k->se2_w = load_f32(st, err, 3, DIMS(C, SE, 1), "blocks.%d.se_block.conv2.weight", b + 1)) ||
            !(k->se2_b = load_f32(st, err, 1, DIMS(C), "blocks.%d.se_block.conv2.bias", b + 1)))
            goto fail_fmt;
    }
    if (!load_conv(st, err, &e->mfa, C4, C4, e->K[4], e->D[4], "mfa.conv")) goto fail_fmt;
    {
        /* asp.tdnn.conv.weight [A, 3*C4, 1]: columns [0, C4) multiply h,
         * [C4, 3*C4) the (mu, sigma) that are constant over time. */
        float *tw = load_f32(st, err, 3, DIMS(A, 3 * C4, 1), "asp.tdnn.conv.weight");
        if (!tw) goto fail_fmt;
        float *xw = qtts_malloc(sizeof(float) * (size_t)A * C4);
        e->asp_stat_w = qtts_malloc(sizeof(float) * (size_t)A * 2 * C4);
        bool ok = xw && e->asp_stat_w;
        if (ok) {
            for (int a = 0; a < A; a++) {
                memcpy(xw + (size_t)a * C4, tw + (size_t)a * 3 * C4, sizeof(float) * C4);
                memcpy(e->asp_stat_w + (size_t)a * 2 * C4, tw + (size_t)a * 3 * C4 + C4,
                       sizeof(float) * 2 * C4);
            }
            ok = qtts_conv1d_init(&e->asp_x, xw, NULL, A, C4, 1, 1);
        }
        qtts_free(xw);
        qtts_free(tw);
        if (!ok) {
            st_ = qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory (asp.tdnn)");
            goto fail;
        }
    }
    if (!(e->asp_b = load_f32(st, err, 1, DIMS(A), "asp.tdnn.conv.bias"))) goto fail_fmt;
    if (!load_conv(st, err, &e->asp_conv, C4, A, 1, 1, "asp.conv")) goto fail_fmt;
    if (!(e->fc_w = load_f32(st, err, 3, DIMS(E, 2 * C4, 1), "fc.weight")) ||
        !(e->fc_b = load_f32(st, err, 1, DIMS(E), "fc.bias")))
        goto fail_fmt;
    *out = e;
    return QTTS_OK;
fail_fmt:
    st_ = err ? err->status : QTTS_ERR_FORMAT;
    if (st_ == QTTS_OK) st_ = QTTS_ERR_FORMAT;
fail:
    qtts_spk_enc_free(e);
    return st_;
}

int qtts_spk_enc_dim(const qtts_spk_enc *e) { return e->E; }
const qtts_logmel *qtts_spk_enc_logmel(const qtts_spk_enc *e) { return e->lm; }
size_t qtts_spk_enc_min_samples(const qtts_spk_enc *e) { return e->min_samples; }

/* ---- forward ---------------------------------------------------------------- */

static void relu_rows(float *y, size_t ld, int rows, int T) {
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ld;
        for (int t = 0; t < T; t++) yr[t] = yr[t] > 0.0f ? yr[t] : 0.0f;
    }
}

static void conv_cols(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                      int T, qtts_conv_ws *ws) {
    qtts_conv1d_run(c, y, ldy, x, ldx, T, false, ws);
}

/* y[cout, T] = conv_same_reflect(x[cin, T]) (+ ReLU when relu). pad holds
 * cin * (T + dil*(k-1)) floats. */
static void conv_same(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                      int T, float *pad, bool relu, qtts_conv_ws *ws) {
    const int tot = c->dil * (c->taps - 1);
    if (tot == 0) {
        conv_cols(c, y, ldy, x, ldx, T, ws);
    } else {
        const int L = tot / 2, R = tot - L;
        const size_t ld = (size_t)T + tot;
        for (int ci = 0; ci < c->cin; ci++) {
            const float *xr = x + (size_t)ci * ldx;
            float *row = pad + (size_t)ci * ld;
            for (int i = 0; i < L; i++) row[i] = xr[L - i];
            memcpy(row + L, xr, sizeof(float) * (size_t)T);
            for (int i = 0; i < R; i++) row[L + T + i] = xr[T - 2 - i];
        }
        conv_cols(c, y, ldy, pad + tot, ld, T, ws);
    }
    if (relu) relu_rows(y, ldy, c->cout, T);
}

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One SE-Res2Net block: out[C, T] = SE(TDNN2(Res2Net(TDNN1(x)))) + x. */
static void se_res2net(const qtts_spk_enc *e, const spk_block *k, float *out, const float *x,
                       int T, float *t1, float *r, float *tmp, float *pad, float *mean, float *z,
                       qtts_conv_ws *ws) {
    const int C = k->C, S = e->S, w = C / S;
    const size_t ld = (size_t)T;
    conv_same(&k->tdnn1, t1, ld, x, ld, T, pad, true, ws);
    /* Res2Net: chunk 0 passes through; chunk i >= 1 is TDNN(x_i + y_(i-1)) */
    memcpy(r, t1, sizeof(float) * (size_t)w * T);
    for (int i = 1; i < S; i++) {
        const float *xi = t1 + (size_t)i * w * ld;
        float *yi = r + (size_t)i * w * ld;
        if (i == 1) {
            conv_same(&k->res[0], yi, ld, xi, ld, T, pad, true, ws);
        } else {
            const float *yp = r + (size_t)(i - 1) * w * ld;
            for (size_t j = 0; j < (size_t)w * ld; j++) tmp[j] = xi[j] + yp[j];
            conv_same(&k->res[i - 1], yi, ld, tmp, ld, T, pad, true, ws);
        }
    }
    float *t2 = t1; /* t1 is no longer needed */
    conv_same(&k->tdnn2, t2, ld, r, ld, T, pad, true, ws);
    /* SE: channel means -> conv1 + ReLU -> conv2 + sigmoid -> scale */
    for (int c = 0; c < C; c++) {
        double acc = 0;
        const float *row = t2 + (size_t)c * ld;
        for (int t = 0; t < T; t++) acc += row[t];
        mean[c] = (float)(acc / T);
    }
    for (int j = 0; j < e->SE; j++) {
        double acc = 0;
        for (int c = 0; c < C; c++) acc += (double)k->se1_w[(size_t)j * C + c] * mean[c];
        const float v = (float)acc + k->se1_b[j];
        z[j] = v > 0.0f ? v : 0.0f;
    }
    for (int c = 0; c < C; c++) {
        double acc = 0;
        for (int j = 0; j < e->SE; j++) acc += (double)k->se2_w[(size_t)c * e->SE + j] * z[j];
        const float g = sigmoidf_((float)acc + k->se2_b[c]);
        const float *hr = t2 + (size_t)c * ld, *xr = x + (size_t)c * ld;
        float *orow = out + (size_t)c * ld;
        for (int t = 0; t < T; t++) orow[t] = hr[t] * g + xr[t];
    }
}

/* mu, sigma of each row of h[C, T] under weights wt[C, T] (NULL = 1/T). */
static void weighted_stats(const float *h, const float *wt, int C, int T, float *mu, float *sg) {
    for (int c = 0; c < C; c++) {
        const float *hr = h + (size_t)c * T, *wr = wt ? wt + (size_t)c * T : NULL;
        double m = 0;
        for (int t = 0; t < T; t++) m += (wr ? (double)wr[t] : 1.0 / T) * hr[t];
        const float mf = (float)m;
        double v = 0;
        for (int t = 0; t < T; t++) {
            const double d = (double)hr[t] - mf;
            v += (wr ? (double)wr[t] : 1.0 / T) * d * d;
        }
        if (v < 1e-12) v = 1e-12;
        mu[c] = mf;
        sg[c] = (float)sqrt(v);
    }
}

static qtts_status forward(const qtts_spk_enc *e, const float *mel_cm, size_t T_, float *xvec,
                           qtts_err *err) {
    const int T = (int)T_, C = e->C, C4 = e->C4, A = e->A;
    const size_t ld = (size_t)T;
    /* scratch: h0 [C,T], cat [3C,T] = [C4,T], t1/r/tmp [C,T], m [C4,T],
     * att [A,T], a2 [C4,T], pad [max cin*(T+P)], stats */
    int maxtot = 0;
    for (int i = 0; i < 5; i++)
        if (e->D[i] * (e->K[i] - 1) > maxtot) maxtot = e->D[i] * (e->K[i] - 1);
    int maxcin = e->mel > C4 ? e->mel : C4;
    const size_t n_pad = (size_t)maxcin * (ld + (size_t)maxtot);
    const size_t n_main = (size_t)C * ld * 4 + (size_t)C4 * ld * 3 + (size_t)A * ld;
    float *buf = qtts_malloc(sizeof(float) * (n_main + n_pad));
    /* small vectors: SE mean [C], SE hidden [SE], mu/sigma [C4] x2, asp bias [A],
     * pooled [2*C4] */
    float *vec = qtts_malloc(sizeof(float) * ((size_t)C + e->SE + 4 * (size_t)C4 + A));
    if (!buf || !vec) {
        qtts_free(buf);
        qtts_free(vec);
        return qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory for %zu frames", T_);
    }
    float *h0 = buf, *t1 = h0 + (size_t)C * ld, *r = t1 + (size_t)C * ld, *tmp = r + (size_t)C * ld;
    float *cat = tmp + (size_t)C * ld, *m = cat + (size_t)C4 * ld, *a2 = m + (size_t)C4 * ld;
    float *att = a2 + (size_t)C4 * ld, *pad = att + (size_t)A * ld;
    float *se_mean = vec, *z = se_mean + C, *mu = z + e->SE, *sg = mu + C4, *cst = sg + C4;
    float *pooled = cst + A;   /* [2*C4]: weighted mu then sigma */
    /* the convs' packing buffers, kept across this call's convs (NULL, on
     * allocation failure: each conv then takes a temporary one) */
    qtts_conv_ws *ws = qtts_conv_ws_new();

    conv_same(&e->block0, h0, ld, mel_cm, ld, T, pad, true, ws);
    const float *x = h0;
    for (int b = 0; b < 3; b++) {
        float *o = cat + (size_t)b * C * ld;
        se_res2net(e, &e->blk[b], o, x, T, t1, r, tmp, pad, se_mean, z, ws);
        x = o;
    }
    conv_same(&e->mfa, m, ld, cat, ld, T, pad, true, ws);

    /* attentive statistics pooling */
    weighted_stats(m, NULL, C4, T, mu, sg);
    for (int a = 0; a < A; a++) {
        const float *wr = e->asp_stat_w + (size_t)a * 2 * C4;
        double acc = 0;
        for (int c = 0; c < C4; c++) acc += (double)wr[c] * mu[c] + (double)wr[C4 + c] * sg[c];
        cst[a] = (float)acc + e->asp_b[a];
    }
    conv_cols(&e->asp_x, att, ld, m, ld, T, ws);
    for (int a = 0; a < A; a++) {
        float *row = att + (size_t)a * ld;
        for (int t = 0; t < T; t++) {
            const float v = row[t] + cst[a];
            row[t] = tanhf(v > 0.0f ? v : 0.0f);
        }
    }
    conv_cols(&e->asp_conv, a2, ld, att, ld, T, ws);
    for (int c = 0; c < C4; c++) {
        float *row = a2 + (size_t)c * ld;
        float mx = row[0];
        for (int t = 1; t < T; t++) mx = row[t] > mx ? row[t] : mx;
        double sum = 0;
        for (int t = 0; t < T; t++) {
            row[t] = expf(row[t] - mx);
            sum += row[t];
        }
        const double inv = 1.0 / sum;
        for (int t = 0; t < T; t++) row[t] = (float)(row[t] * inv);
    }
    weighted_stats(m, a2, C4, T, pooled, pooled + C4);
    for (int j = 0; j < e->E; j++) {
        const float *wr = e->fc_w + (size_t)j * 2 * C4;
        double acc = 0;
        for (int c = 0; c < 2 * C4; c++) acc += (double)wr[c] * pooled[c];
        xvec[j] = (float)acc + e->fc_b[j];
    }
    qtts_status st = QTTS_OK;
    for (int j = 0; j < e->E; j++)
        if (!isfinite(xvec[j])) {
            st = qtts_fail(err, QTTS_ERR_NUMERIC, "speaker encoder: non-finite x-vector element %d", j);
            break;
        }
    qtts_conv_ws_free(ws);
    qtts_free(buf);
    qtts_free(vec);
    return st;
}

static qtts_status check_frames(const qtts_spk_enc *e, size_t T, qtts_err *err) {
    const size_t min_T = e->min_samples / QTTS_MEL_HOP;
    if (T < min_T)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "speaker encoder: %zu mel frames; at least %zu needed (%zu samples at 24 kHz)",
                         T, min_T, e->min_samples);
    if (T > QTTS_SPK_MAX_SAMPLES / QTTS_MEL_HOP)
        return qtts_fail(err, QTTS_ERR_INVALID, "speaker encoder: %zu mel frames, over the limit", T);
    return QTTS_OK;
}

qtts_status qtts_spk_enc_embed(const qtts_spk_enc *e, const float *pcm, size_t n, float *xvec,
                               qtts_err *err) {
    if (n < e->min_samples)
        return qtts_fail(err, QTTS_ERR_INVALID,
                         "speaker encoder: %zu samples; at least %zu needed at 24 kHz", n,
                         e->min_samples);
    const size_t T = qtts_logmel_frames(n);
    qtts_status st = check_frames(e, T, err);
    if (st) return st;
    float *mel = qtts_malloc(sizeof(float) * QTTS_MEL_BINS * T);
    if (!mel) return qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory for the mel");
    st = qtts_logmel_compute(e->lm, pcm, n, mel, 1, T, err);   /* channel-major [128, T] */
    if (!st) st = forward(e, mel, T, xvec, err);
    qtts_free(mel);
    return st;
}

qtts_status qtts_spk_enc_embed_mel(const qtts_spk_enc *e, const float *mel, size_t T, float *xvec,
                                   qtts_err *err) {
    qtts_status st = check_frames(e, T, err);
    if (st) return st;
    float *cm = qtts_malloc(sizeof(float) * QTTS_MEL_BINS * T);
    if (!cm) return qtts_fail(err, QTTS_ERR_NOMEM, "speaker encoder: out of memory for the mel");
    for (size_t t = 0; t < T; t++)
        for (int b = 0; b < QTTS_MEL_BINS; b++) cm[(size_t)b * T + t] = mel[t * QTTS_MEL_BINS + b];
    st = forward(e, cm, T, xvec, err);
    qtts_free(cm);
    return st;
}
