/*
 * kernels_ref.c - scalar reference implementations of kernels.h, and the
 * "scalar" ISA table (kernels_impl.h) used where no SIMD path runs.
 *
 * F32/BF16 dot products accumulate in 8 independent fp32 lanes (then
 * summed pairwise): cheap for the compiler to vectorise and a fixed,
 * documented order, so every caller sees the same bits for the same
 * inputs. The quantized dots follow the 16-lane order that every SIMD
 * path reproduces bit for bit (kernels_impl.h).
 */
#include "kernels_impl.h"

#include <math.h>
#include <string.h>

qtts_mat qtts_mat_from(const qtts_tensor *t) {
    QTTS_ASSERT(t && (t->dtype == QTTS_DT_F32 || t->dtype == QTTS_DT_BF16 ||
                      t->dtype == QTTS_DT_Q8_0 || t->dtype == QTTS_DT_Q4_0));
    QTTS_ASSERT(t->rank == 2 || (t->rank == 3 && t->shape[2] == 1));
    qtts_mat m = {.data = t->data, .dtype = t->dtype, .rows = (int)t->shape[0],
                  .cols = (int)t->shape[1], .packed = t->packed};
    QTTS_ASSERT(m.dtype == QTTS_DT_F32 || m.dtype == QTTS_DT_BF16 || m.cols % QTTS_QK == 0);
    return m;
}

static inline float reduce8(const float a[8]) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

float qtts_dot_f32(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += a[i] * b[i];
    return reduce8(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += qtts_bf16_to_f32(w[i + l]) * x[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += qtts_bf16_to_f32(w[i]) * x[i];
    return reduce8(acc);
}

/* ==== matmul row kernels (the "scalar" table) =========================== */

static void mm_f32(const qtts_mm_job *j, int r0, int r1) {
    const int R = j->W->rows, C = j->W->cols;
    const float *w = j->W->data;
    for (int t = 0; t < j->n; t++)
        for (int r = r0; r < r1; r++) {
            float v = qtts_dot_f32(w + (size_t)r * C, j->x + (size_t)t * C, C);
            j->y[(size_t)t * R + r] = j->bias ? v + j->bias[r] : v;
        }
}

static void mm_bf16(const qtts_mm_job *j, int r0, int r1) {
    const int R = j->W->rows, C = j->W->cols;
    const uint16_t *w = j->W->data;
    for (int t = 0; t < j->n; t++)
        for (int r = r0; r < r1; r++) {
            float v = dot_bf16(w + (size_t)r * C, j->x + (size_t)t * C, C);
            j->y[(size_t)t * R + r] = j->bias ? v + j->bias[r] : v;
        }
}

/* Block b's signed code e (0..31) of a plain row. */
static inline int plain_code(const uint8_t *blk, int e, bool q4) {
    if (!q4) return ((const int8_t *)(blk + offsetof(qtts_block_q8_0, qs)))[e];
    const uint8_t *qs = blk + offsetof(qtts_block_q4_0, qs);
    return (e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4)) - 8;
}

static float dot_plain(const void *w, const int8_t *xq, const float *xd, int cols, bool q4) {
    const size_t bb = q4 ? sizeof(qtts_block_q4_0) : sizeof(qtts_block_q8_0);
    float acc[16] = {0};
    for (int b = 0; b < cols / QTTS_QK; b++) {
        const uint8_t *blk = (const uint8_t *)w + b * bb;
        int p = 0;
        for (int e = 0; e < QTTS_QK; e++) p += plain_code(blk, e, q4) * xq[b * QTTS_QK + e];
        acc[b % 16] = fmaf((float)p, qtts_block_scale(blk) * xd[b], acc[b % 16]);
    }
    return qtts_fold16(acc);
}

float qtts_dot_q8_0_ref(const void *w, const int8_t *xq, const float *xd, int cols) {
    return dot_plain(w, xq, xd, cols, false);
}

float qtts_dot_q4_0_ref(const void *w, const int8_t *xq, const float *xd, int cols) {
    return dot_plain(w, xq, xd, cols, true);
}

/* The same order read straight from the packed layouts of quant.h and
 * qtts_mm_job: lane i of group g is block 16g + i; padding blocks have
 * scale 0 and add nothing, so they are skipped. */
static float dot_packed(const uint8_t *w, const int8_t *xq, const float *xd, int cols, bool q4) {
    const int nb = cols / QTTS_QK, ng = qtts_packed_groups(cols), K = qtts_packed_vectors(q4);
    const uint8_t *scales = w + (size_t)ng * K * 64;
    float acc[16] = {0};
    for (int b = 0; b < nb; b++) {
        const int g = b / 16, i = b % 16;
        const uint8_t *cw = w + (size_t)g * K * 64 + 4 * i;
        const int8_t *cx = xq + (size_t)g * 512 + 4 * i;
        int p = 0;
        for (int k = 0; k < K; k++)
            for (int j = 0; j < 4; j++) {
                const uint8_t c = cw[64 * k + j];
                if (q4)
                    p += ((c & 15) - 8) * cx[64 * k + j] + ((c >> 4) - 8) * cx[64 * (k + 4) + j];
                else
                    p += ((int)c - 128) * cx[64 * k + j];
            }
        acc[i] = fmaf((float)p, qtts_block_scale(scales + 2 * b) * xd[b], acc[i]);
    }
    return qtts_fold16(acc);
}

static void mm_quant(const qtts_mm_job *j, int r0, int r1, bool q4) {
    const int R = j->W->rows, C = j->W->cols, ng = qtts_packed_groups(C);
    const size_t rb = qtts_mat_stride(j->W);
    for (int t = 0; t < j->n; t++)
        for (int r = r0; r < r1; r++) {
            float v = dot_packed((const uint8_t *)j->W->data + (size_t)r * rb,
                                 j->xq + (size_t)t * ng * 512, j->xd + (size_t)t * ng * 16, C, q4);
            j->y[(size_t)t * R + r] = j->bias ? v + j->bias[r] : v;
        }
}

static void mm_q8_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, false); }
static void mm_q4_0(const qtts_mm_job *j, int r0, int r1) { mm_quant(j, r0, r1, true); }

/* ==== attention (the orders of kernels.h, as plain loops; no prefetch, so
 * next is unused) ========================================================= */

static void attn_scores_ref(float *scores, size_t lds, const float *q, int nh, const float *k,
                            size_t ldk, int ctx, int d, float scale, const void *next,
                            int next_rows) {
    for (int h = 0; h < nh; h++)
        for (int j = 0; j < ctx; j++)
            scores[h * lds + j] = qtts_dot_f32(q + (size_t)h * d, k + (size_t)j * ldk, d) * scale;
}

static void attn_out_ref(float *out, const float *p, size_t ldp, int nh, const float *v,
                         size_t ldv, int ctx, int d, bool acc, const void *next, int next_rows) {
    for (int h = 0; h < nh; h++) {
        float *o = out + (size_t)h * d;
        if (!acc)
            for (int i = 0; i < d; i++) o[i] = 0.0f;
        for (int j = 0; j < ctx; j++)
            for (int i = 0; i < d; i++) o[i] += p[h * ldp + j] * v[(size_t)j * ldv + i];
    }
}

static void attn_scores_bf16_ref(float *scores, size_t lds, const float *q, int nh,
                                 const uint16_t *k, size_t ldk, int ctx, int d, float scale,
                                 const void *next, int next_rows) {
    for (int h = 0; h < nh; h++)
        for (int j = 0; j < ctx; j++)
            scores[h * lds + j] = dot_bf16(k + (size_t)j * ldk, q + (size_t)h * d, d) * scale;
}

static void attn_out_bf16_ref(float *out, const float *p, size_t ldp, int nh, const uint16_t *v,
                              size_t ldv, int ctx, int d, bool acc, const void *next,
                              int next_rows) {
    for (int h = 0; h < nh; h++) {
        float *o = out + (size_t)h * d;
        if (!acc)
            for (int i = 0; i < d; i++) o[i] = 0.0f;
        for (int j = 0; j < ctx; j++)
            for (int i = 0; i < d; i++)
                o[i] += p[h * ldp + j] * qtts_bf16_to_f32(v[(size_t)j * ldv + i]);
    }
}

const qtts_isa qtts_isa_ref = {
    .name = "scalar",
    .mm_f32 = mm_f32,
    .mm_bf16 = mm_bf16,
    .mm_q8_0 = mm_q8_0,
    .mm_q4_0 = mm_q4_0,
    .quantize_act = qtts_quantize_act_ref,
    .pack_act = qtts_pack_act,
    .attn_scores = attn_scores_ref,
    .attn_out = attn_out_ref,
    .attn_scores_bf16 = attn_scores_bf16_ref,
    .attn_out_bf16 = attn_out_bf16_ref,
};

void qtts_mat_row(float *out, const qtts_mat *W, int row) {
    QTTS_ASSERT(row >= 0 && row < W->rows);
    const void *src = (const uint8_t *)W->data + (size_t)row * qtts_mat_stride(W);
    if (W->packed) {   /* block by block through the plain layout */
        const bool q4 = W->dtype == QTTS_DT_Q4_0;
        uint8_t blk[sizeof(qtts_block_q8_0)];
        for (int b = 0; b < W->cols / QTTS_QK; b++) {
            qtts_unpack_block(src, W->cols, q4, b, blk);
            if (q4) qtts_dequantize_row_q4_0(blk, out + b * QTTS_QK, QTTS_QK);
            else qtts_dequantize_row_q8_0(blk, out + b * QTTS_QK, QTTS_QK);
        }
        return;
    }
    switch (W->dtype) {
    case QTTS_DT_BF16:
        for (int i = 0; i < W->cols; i++) out[i] = qtts_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case QTTS_DT_F32: memcpy(out, src, sizeof(float) * W->cols); break;
    case QTTS_DT_Q8_0: qtts_dequantize_row_q8_0(src, out, W->cols); break;
    case QTTS_DT_Q4_0: qtts_dequantize_row_q4_0(src, out, W->cols); break;
    default: QTTS_ASSERT(!"qtts_mat_row: not a matrix dtype");
    }
}

/* Vectors of the element-wise loops below: 8 floats or doubles, whatever
 * registers the target has (GCC splits them), with the scalar code's
 * operations per element, so the same bits on every target. */
typedef float ref_v8f __attribute__((vector_size(32), aligned(4)));
typedef float ref_v4f __attribute__((vector_size(16), aligned(4)));
typedef double ref_v4d __attribute__((vector_size(32)));

/* (a macro: a function returning a 32-byte vector would change the ABI
 * on targets without AVX) */
#define LOAD8F(v, p) memcpy(&(v), (p), sizeof(ref_v8f))

/* The element-wise loops on these vectors that run per row of every
 * decode step (norms, RoPE, residual adds, exponentials) are built for
 * AVX-512, AVX2 and the baseline and picked at load (ifunc) on x86-64: the
 * same operations on wider registers, so the same bits. Not under
 * ThreadSanitizer, which does not run ifunc resolvers. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define REF_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define REF_WIDE
#endif

/* The sum of squares in double, in 8 lanes (lane l sums the elements
 * i = l mod 8 of the whole groups of 8), folded ((0+4)+(1+5))+((2+6)+(3+7)),
 * then the last n mod 8 in order. A float's square is exact in double, so
 * only this order fixes the bits; it keeps the sum far closer to exact than
 * the reference's fp32 reduction. The multiplies by inv and w are per
 * element. */
REF_WIDE void qtts_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    /* lanes 0-3 and 4-7 as two 4-double vectors: GCC 12 keeps one
     * 8-double vector (two ymm on AVX2) on the stack, a round trip per step */
    ref_v4d lo = {0}, hi = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        ref_v4f a, b;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 4, sizeof b);
        const ref_v4d da = __builtin_convertvector(a, ref_v4d), db = __builtin_convertvector(b, ref_v4d);
        lo += da * da;
        hi += db * db;
    }
    double ss = ((lo[0] + hi[0]) + (lo[1] + hi[1])) + ((lo[2] + hi[2]) + (lo[3] + hi[3]));
    for (int j = i; j < n; j++) ss += (double)x[j] * x[j];
    const float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (i = 0; i + 8 <= n; i += 8) {
        ref_v8f v, wv;
        LOAD8F(v, x + i);
        LOAD8F(wv, w + i);
        v = (v * inv) * wv;
        memcpy(out + i, &v, sizeof v);
    }
    for (; i < n; i++) out[i] = (x[i] * inv) * w[i];
}

void qtts_layernorm(float *out, const float *x, const float *w, const float *b, int n,
                    float eps) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= n;
    float inv = 1.0f / sqrtf((float)var + eps);
    for (int i = 0; i < n; i++) out[i] = ((x[i] - (float)mean) * inv) * w[i] + b[i];
}

REF_WIDE void qtts_rope(float *x, const float *cos, const float *sin, int d) {
    const int h = d / 2;
    int i = 0;
    for (; i + 8 <= h; i += 8) {
        ref_v8f a, b, c, s;
        LOAD8F(a, x + i);
        LOAD8F(b, x + i + h);
        LOAD8F(c, cos + i);
        LOAD8F(s, sin + i);
        const ref_v8f lo = a * c - b * s, hi = b * c + a * s;
        memcpy(x + i, &lo, sizeof lo);
        memcpy(x + i + h, &hi, sizeof hi);
    }
    for (; i < h; i++) {
        float a = x[i], b = x[i + h];
        x[i] = a * cos[i] - b * sin[i];
        x[i + h] = b * cos[i] + a * sin[i];
    }
}

void qtts_rope_table(float *cos_t, float *sin_t, int n_pos, int d, double theta) {
    const int h = d / 2;
    for (int i = 0; i < h; i++) {
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)d);
        for (int p = 0; p < n_pos; p++) {
            float ang = (float)p * inv;
            cos_t[(size_t)p * h + i] = cosf(ang);
            sin_t[(size_t)p * h + i] = sinf(ang);
        }
    }
}

/* ==== exp (kernels.h, qtts_exp) ===========================================
 *
 * e^x = 2^k e^r with k = round(x / ln2) (the 1.5 * 2^52 shift: adding it
 * rounds to an integer), r = x - k ln2 with ln2 in two parts (k * LN2_HI is
 * exact, |r| <= 0.35), e^r by its Taylor polynomial of degree 13 in Horner
 * form (truncation below 4e-18), times 2^k built in the exponent field
 * (exact: k stays in [-151, 129], normal doubles), then rounded once to
 * float, which also makes the subnormals, the zeros below e^-104 and the
 * infinities above e^88.73. x is clamped to [-104, 89] first; a NaN stays
 * NaN. The double result is within a few 1e-16 of e^x, so the float is the
 * correctly rounded e^x but for inputs that close to a halfway point
 * between two floats.
 *
 * Only IEEE conversions, adds and multiplies, in a fixed order (no
 * contraction: -ffp-contract=off), so 8 lanes at a time in any register
 * width give the same bits, on every machine. */
typedef double exp_v8d __attribute__((vector_size(64)));
typedef float exp_v8f __attribute__((vector_size(32)));
typedef int32_t exp_v8i __attribute__((vector_size(32)));
typedef uint64_t exp_v8u __attribute__((vector_size(64)));

/* The shared part of exp8 and expm1_8: x clamped to [-104, 89] (a NaN
 * stays NaN), k = round(x / ln2) in the low bits of *t, *kd = k as a
 * double, and *em = e^r - 1 for r = x - k ln2: r times the Taylor
 * polynomial of (e^r - 1) / r, degree 12, in Horner form. (Vectors by
 * pointer: passing or returning them by value is an ABI note or warning
 * in the baseline build.) */
static inline __attribute__((always_inline)) void exp_core(const exp_v8f *xin, exp_v8d *t,
                                                           exp_v8d *kd, exp_v8d *em) {
    exp_v8f x = *xin;
    const exp_v8f hi = {89, 89, 89, 89, 89, 89, 89, 89};
    const exp_v8f lo = {-104, -104, -104, -104, -104, -104, -104, -104};
    exp_v8i m = x > hi;   /* false for NaN: it passes through */
    x = (exp_v8f)(((exp_v8i)x & ~m) | ((exp_v8i)hi & m));
    m = x < lo;
    x = (exp_v8f)(((exp_v8i)x & ~m) | ((exp_v8i)lo & m));
    const exp_v8d xd = __builtin_convertvector(x, exp_v8d);
    const double shift = 0x1.8p52;
    *t = xd * 0x1.71547652b82fep0 + shift;   /* 1/ln2 */
    *kd = *t - shift;
    const exp_v8d r = (xd - *kd * 0x1.62e42fee00000p-1) - *kd * 0x1.a39ef35793c76p-33;
    exp_v8d p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0;   /* 1/13!, 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    *em = p * r;
}

/* *s = 2^k as a double, k from exp_core's t (exact: k stays in [-151,
 * 129]); unsigned, so a NaN's garbage k wraps without UB. */
static inline __attribute__((always_inline)) void exp_scale(const exp_v8d *t, exp_v8d *s) {
    const double shift = 0x1.8p52;
    const exp_v8d shiftv = {shift, shift, shift, shift, shift, shift, shift, shift};
    const exp_v8u k = (exp_v8u)*t - (exp_v8u)shiftv;
    *s = (exp_v8d)((k + 1023) << 52);
}

/* *v = e^*v lane by lane (in place: a 32-byte vector return is an ABI
 * warning in the baseline build). */
static inline __attribute__((always_inline)) void exp8(exp_v8f *v) {
    exp_v8d t, kd, em, s;
    exp_core(v, &t, &kd, &em);
    exp_scale(&t, &s);
    *v = __builtin_convertvector((em + 1.0) * s, exp_v8f);
}

/* *v = e^*v - 1: 2^k (e^r - 1) + (2^k - 1), both terms exact or within an
 * ulp of a double, so no cancellation reaches the float; k = 0 takes
 * e^r - 1 itself (keeps the sign of -0 and the relative accuracy of tiny
 * inputs). */
static inline __attribute__((always_inline)) void expm1_8(exp_v8f *v) {
    exp_v8d t, kd, em, s;
    exp_core(v, &t, &kd, &em);
    exp_scale(&t, &s);
    const exp_v8u zero = (exp_v8u)(kd == 0.0);
    const exp_v8d y = (exp_v8d)(((exp_v8u)em & zero) | ((exp_v8u)(em * s + (s - 1.0)) & ~zero));
    *v = __builtin_convertvector(y, exp_v8f);
}

/* The lane operations of qtts_exp, qtts_expm1 and qtts_elu_row. */
enum { OP_EXP, OP_EXPM1, OP_ELU };

static inline __attribute__((always_inline)) void op8(exp_v8f *v, const int op) {
    if (op == OP_EXP) {
        exp8(v);
        return;
    }
    exp_v8f e = *v;
    expm1_8(&e);
    if (op == OP_ELU) {
        const exp_v8f zero = {0};
        const exp_v8i pos = *v > zero;
        e = (exp_v8f)(((exp_v8i)*v & pos) | ((exp_v8i)e & ~pos));
    }
    *v = e;
}

/* y[i] = op(x[i]) 8 lanes at a time; the tail in the same lanes,
 * zero-padded (each lane's value is its own). */
static inline __attribute__((always_inline)) void map8(float *y, const float *x, size_t n,
                                                       const int op) {
    size_t i = 0;
    /* two vectors per step: two independent polynomial chains in flight */
    for (; i + 16 <= n; i += 16) {
        exp_v8f v, w;
        memcpy(&v, x + i, sizeof v);
        memcpy(&w, x + i + 8, sizeof w);
        op8(&v, op);
        op8(&w, op);
        memcpy(y + i, &v, sizeof v);
        memcpy(y + i + 8, &w, sizeof w);
    }
    for (; i + 8 <= n; i += 8) {
        exp_v8f v;
        memcpy(&v, x + i, sizeof v);
        op8(&v, op);
        memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        exp_v8f v = {0};
        memcpy(&v, x + i, sizeof(float) * (n - i));
        op8(&v, op);
        memcpy(y + i, &v, sizeof(float) * (n - i));
    }
}

REF_WIDE void qtts_exp(float *y, const float *x, size_t n) { map8(y, x, n, OP_EXP); }
REF_WIDE void qtts_expm1(float *y, const float *x, size_t n) { map8(y, x, n, OP_EXPM1); }
REF_WIDE void qtts_elu_row(float *y, const float *x, size_t n) { map8(y, x, n, OP_ELU); }

float qtts_expf(float x) {
    float y;
    qtts_exp(&y, &x, 1);
    return y;
}

float qtts_expm1f(float x) {
    float y;
    qtts_expm1(&y, &x, 1);
    return y;
}

/* The maximum of x[0, n) (-inf when empty; NaNs are skipped, as in the
 * loop m = x[i] > m ? x[i] : m), 8 lanes at a time. The order of a
 * maximum does not change its value, except that +0 and -0 may trade
 * places; the softmax only subtracts it, and x - (+0) and x - (-0) have
 * the same exponential. */
static inline __attribute__((always_inline)) float max8(const float *x, size_t n) {
    const exp_v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                          -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    exp_v8f mv = ninf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        exp_v8f v;
        memcpy(&v, x + i, sizeof v);
        const exp_v8i gt = v > mv;
        mv = (exp_v8f)(((exp_v8i)v & gt) | ((exp_v8i)mv & ~gt));
    }
    float m = -INFINITY;
    for (int l = 0; l < 8; l++) m = mv[l] > m ? mv[l] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* x[i] = (x[i] - sub) * mul in place, 8 lanes at a time (GCC leaves the
 * plain loop scalar here); a term of 0 or a factor of 1 is exact, so each
 * caller's single operation keeps its bits. */
static inline __attribute__((always_inline)) void scale_shift8(float *x, size_t n, float mul,
                                                               float sub) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        exp_v8f v;
        memcpy(&v, x + i, sizeof v);
        v = (v - sub) * mul;
        memcpy(x + i, &v, sizeof v);
    }
    for (; i < n; i++) x[i] = (x[i] - sub) * mul;
}

/* Built per ISA like qtts_exp: the maximum, the subtraction and the final
 * scaling are lane-wise (the same bits at any width); the sum stays one
 * double chain in index order. */
REF_WIDE void qtts_softmax(float *x, int n) {
    if (n <= 0) return;
    const size_t N = (size_t)n;
    scale_shift8(x, N, 1.0f, max8(x, N));
    map8(x, x, N, OP_EXP);
    double s = 0;
    for (size_t i = 0; i < N; i++) s += x[i];
    scale_shift8(x, N, (float)(1.0 / s), 0.0f);
}

/* y[i] = x[i] / (1 + e^-x[i]) * (up ? up[i] : 1), 256 at a time through a
 * stack buffer of the exponentials; 8 lanes at a time (GCC leaves the plain
 * loops scalar), each lane the same IEEE operations in the same order. */
static inline __attribute__((always_inline)) void silu_mul(float *y, const float *x,
                                                           const float *up, size_t n) {
    float e[256];
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        const size_t m = n - i0 < 256 ? n - i0 : 256;
        size_t j = 0;
        for (; j + 8 <= m; j += 8) {
            exp_v8f v;
            memcpy(&v, x + i0 + j, sizeof v);
            v = -v;
            memcpy(e + j, &v, sizeof v);
        }
        for (; j < m; j++) e[j] = -x[i0 + j];
        map8(e, e, m, OP_EXP);
        for (j = 0; j + 8 <= m; j += 8) {
            exp_v8f v, ev, u;
            memcpy(&v, x + i0 + j, sizeof v);
            memcpy(&ev, e + j, sizeof ev);
            v = v / (1.0f + ev);
            if (up) {
                memcpy(&u, up + i0 + j, sizeof u);
                v = v * u;
            }
            memcpy(y + i0 + j, &v, sizeof v);
        }
        for (; j < m; j++)
            y[i0 + j] = up ? x[i0 + j] / (1.0f + e[j]) * up[i0 + j] : x[i0 + j] / (1.0f + e[j]);
    }
}

REF_WIDE void qtts_silu_inplace(float *x, size_t n) { silu_mul(x, x, NULL, n); }

void qtts_gelu_erf_inplace(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

REF_WIDE void qtts_swiglu(float *y, const float *gate, const float *up, size_t n) {
    silu_mul(y, gate, up, n);
}

/* 8 lanes at a time (GCC leaves the plain loop scalar at -O2). */
REF_WIDE void qtts_add_inplace(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        ref_v8f a, b;
        LOAD8F(a, y + i);
        LOAD8F(b, x + i);
        a += b;
        memcpy(y + i, &a, sizeof a);
    }
    for (; i < n; i++) y[i] += x[i];
}
