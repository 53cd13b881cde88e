/*
 * kernels.h - CPU math used by every model stage. Plain C ABI, no model
 * knowledge. All activations are fp32; weights are read in their stored
 * format straight from the mmap (BF16 upcast exactly on use, F32 as is);
 * quantized ones (Q8_0/Q4_0, quant.h) in the CPU's packed rows, mapped
 * from a quantized model file or an owned copy made at load.
 *
 * Determinism rule: a row of a matmul is computed by exactly the same code
 * (same accumulation order) whether it is alone or one of many rows, and
 * whichever thread computes it, so a batched step gives bit-identical
 * results to a single-stream step at any thread count. Different
 * instruction sets may round differently: kernels_impl.h states each
 * path's order and the error budget against the scalar reference.
 *
 * kernels_ref.c is the scalar reference: the oracle for every optimised
 * path (kernels_avx2.c, kernels_avx512.c, kernels_neon.c; kernels.c picks
 * one at run time and splits matmul rows over the thread pool,
 * base/thread.h).
 */
#ifndef QTTS_KERNELS_H
#define QTTS_KERNELS_H

#include "../base/base.h"
#include "../io/safetensors.h"
#include "quant.h"

/* A 2-D weight matrix [rows, cols] (PyTorch Linear layout: y = x·Wᵀ),
 * row-major. A view (not owned), except what qtts_mat_quantize returns. */
typedef struct {
    const void *data;
    qtts_dtype dtype;   /* QTTS_DT_F32, QTTS_DT_BF16, QTTS_DT_Q8_0 or QTTS_DT_Q4_0 */
    int rows, cols;     /* logical elements; cols % 32 == 0 for Q8_0/Q4_0 */
    /* Q8_0/Q4_0: rows in the CPU's packed layout (quant.h), the only one
     * qtts_matmul takes; false: the file's plain blocks (a tensor view,
     * for qtts_mat_pack, writers and uploads). */
    bool packed;
    /* Speed only: the rows are read again within a step and stay in the
     * last-level cache in between (qtts_mat_resident_fits), so the x86
     * tiles prefetch them to L1 rather than L2 (kernels_impl.h). */
    bool resident;
} qtts_mat;

/* The seven matrices of a transformer layer L (a pointer to any struct with
 * these qtts_mat fields: the talker's and code predictor's layers, the
 * codec decoder's), in a fixed order, as an array initializer:
 *     const qtts_mat *m[QTTS_LAYER_MATS] = QTTS_LAYER_MAT_LIST(L); */
#define QTTS_LAYER_MATS 7
#define QTTS_LAYER_MAT_LIST(L) {&(L)->q, &(L)->k, &(L)->v, &(L)->o, &(L)->gate, &(L)->up, &(L)->down}

/* Whether matrices totalling `bytes`, all read once per pass of a loop
 * (the code predictor's layers, 15 passes a frame), stay in the last-level
 * cache between passes, so that L1 prefetches pay: at most a third of it
 * (qtts_llc_bytes), so that the other reads of the step (the talker's
 * weights) leave them there, and at most QTTS_RESIDENT_MAX_BYTES. What was
 * measured (code predictor time, L1 against L2 prefetches):
 *  - 260 MB L3: 45 MB (0.6B int4) and 80 MB (int8) gained 6-7% and 4%,
 *    160 MB (bf16) lost 2%.
 *  - 480 MB L3 (as sysfs reports it; the probe read 150 MB at barely
 *    more than DRAM speed, so a guest sees less of it): 45 MB about even
 *    (0-2% lost), 80 MB lost 5%, 150 MB lost 30%.
 * A share of the reported size alone took the 150 MB there; the cap keeps
 * what gained on both hosts. False when the cache size is unknown. */
#define QTTS_RESIDENT_MAX_BYTES (64ull << 20)
bool qtts_mat_resident_fits(uint64_t bytes);
/* The same rule for a last-level cache of llc bytes (0: unknown). */
bool qtts_mat_resident_fits_llc(uint64_t bytes, uint64_t llc);

/* View a tensor as a matrix: rank-2 [rows, cols], or rank-3 [rows, cols, 1]
 * (1x1 convs). Asserts on programmer error; shapes are checked at load. */
qtts_mat qtts_mat_from(const qtts_tensor *t);

/* y[n, W.rows] = x[n, W.cols] · Wᵀ (+ bias[W.rows] if bias != NULL).
 * Rows of W are split over the process-wide thread pool. For Q8_0/Q4_0
 * weights each row of x is first quantized to int8 per 32-element block
 * (kernels_impl.h); F32/BF16 weights use x as is. y must not alias x. */
void qtts_matmul(float *y, const float *x, int n, const qtts_mat *W, const float *bias);

/* Up to QTTS_MATMUL_MAX matmuls of the same x (q/k/v, gate/up), no bias:
 * y[i] = x · W[i]ᵀ, as one split over the pool (one wait instead of one
 * per matrix, and x quantized once). The same bits as qtts_matmul on each.
 * All W[i] have x's cols; quantized and float weights may not be mixed. */
#define QTTS_MATMUL_MAX 3
void qtts_matmul_multi(int count, float *const *y, const float *x, int n, const qtts_mat *const *W);

/* The gate/up pair of a SwiGLU MLP as one split over the pool: each task
 * computes its rows of both matrices and then y = silu(gate) * up on
 * them, so the SwiGLU runs in parallel too. y[n, rows] gets the result,
 * up[n, rows] is scratch. The same bits as qtts_matmul_multi on
 * {gate, up} followed by qtts_swiglu. */
void qtts_matmul_swiglu(float *y, float *up, const float *x, int n, const qtts_mat *gate,
                        const qtts_mat *upw);

/* Hint: the next qtts_matmul, qtts_matmul_multi (count, W) or
 * qtts_matmul_swiglu (swiglu true, W = {gate, up}) this thread calls will
 * read W. Threads of the pool that would wait until then prefetch the
 * rows they will likely take into their L2 (kernels.c). Speed only: the
 * results never depend on it, and a wrong or stale hint costs only the
 * bandwidth of the prefetch. */
void qtts_matmul_prefetch_next(int count, const qtts_mat *const *W, bool swiglu);

/* One row of W as f32 (embedding lookup): out[W.cols] = W[row]
 * (dequantized for Q8_0/Q4_0). */
void qtts_mat_row(float *out, const qtts_mat *W, int row);

/* Bytes of one row of cols elements in a matrix of dtype dt, plain layout
 * (as in files). */
size_t qtts_mat_row_bytes(qtts_dtype dt, int cols);
/* Bytes from one row of m to the next (packed or plain). Inline: the
 * kernels ask for it once per tile. */
static inline size_t qtts_mat_stride(const qtts_mat *m) {
    return m->packed ? qtts_packed_row_bytes(m->dtype == QTTS_DT_Q4_0, m->cols)
                     : qtts_mat_row_bytes(m->dtype, m->cols);
}

/* Load-time quantization: *dst = src (F32 or BF16) in format q (QTTS_DT_Q8_0
 * or QTTS_DT_Q4_0), packed, with its own memory (release with
 * qtts_mat_free). Fails with QTTS_ERR_INVALID if src.cols % 32 != 0 or the
 * formats do not apply, QTTS_ERR_NOMEM on allocation failure; *dst is then
 * zeroed. */
qtts_status qtts_mat_quantize(const qtts_mat *src, qtts_dtype q, qtts_mat *dst, qtts_err *err);

/* *dst = a packed copy of the plain Q8_0/Q4_0 matrix src (a file tensor),
 * with its own memory; the same failures as qtts_mat_quantize. */
qtts_status qtts_mat_pack(const qtts_mat *src, qtts_mat *dst, qtts_err *err);

/* Row `row` of the packed matrix m in the plain layout
 * (qtts_mat_row_bytes(m->dtype, m->cols) bytes at plain). */
void qtts_mat_unpack_row(const qtts_mat *m, int row, void *plain);

/* Frees the memory of a matrix returned by qtts_mat_quantize or
 * qtts_mat_pack and zeroes it (NULL and zeroed matrices are fine). Never
 * call it on a view. */
void qtts_mat_free(qtts_mat *m);

/* The instruction set qtts_matmul runs on here: "avx512", "avx-vnni",
 * "avx2", "neon-dotprod", "neon" or "scalar". */
const char *qtts_kernels_isa(void);

/* out = x / sqrt(mean(x²) + eps) * w  (n elements; out may alias x). The
 * mean is summed in double, in a fixed order (kernels_ref.c). */
void qtts_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* LayerNorm with weight and bias (biased variance, like torch). */
void qtts_layernorm(float *out, const float *x, const float *w, const float *b, int n,
                    float eps);

/* Rotate-half ("NeoX") RoPE on one head of dim d, given the cos/sin row of
 * the position: cos/sin hold d/2 values; pairs are (i, i + d/2). */
void qtts_rope(float *x, const float *cos, const float *sin, int d);

/* cos/sin tables for positions [0, n_pos): inv_freq[i] = 1/theta^(2i/d)
 * in fp32 (exponent float(2i)/d, fp32 pow), angle = float(p)*inv_freq[i]
 * in fp32 — exactly the reference's rotary embedding. Each table is
 * [n_pos, d/2]. */
void qtts_rope_table(float *cos, float *sin, int n_pos, int d, double theta);

/* y[i] = e^x[i] for n floats (y == x allowed): the double-precision
 * exponential rounded once to float, i.e. the correctly rounded value but
 * on inputs within ~1e-16 (relative) of a halfway point between two floats
 * (kernels_ref.c). The same bits on every CPU and register width; glibc's
 * expf and the CUDA backend's (float)exp((double)x) agree with it but on
 * such inputs. 1.7 ns a value on one AVX-512 core, against 3.0 ns for
 * glibc's expf. */
void qtts_exp(float *y, const float *x, size_t n);
float qtts_expf(float x);

/* y[i] = e^x[i] - 1 the same way (the double-precision value rounded once;
 * exact for tiny x, -0 stays -0): the ELU of the codec encoder. */
void qtts_expm1(float *y, const float *x, size_t n);
float qtts_expm1f(float x);
/* y[i] = x[i] > 0 ? x[i] : qtts_expm1f(x[i]) (ELU, alpha 1; y == x allowed). */
void qtts_elu_row(float *y, const float *x, size_t n);

/* In-place softmax over n values: x - max, qtts_exp, a double sum in index
 * order, times the fp32 reciprocal. */
void qtts_softmax(float *x, int n);

/* silu(x) = x / (1 + e^-x), e^-x by qtts_exp */
void qtts_silu_inplace(float *x, size_t n);
void qtts_gelu_erf_inplace(float *x, size_t n);   /* exact GELU: 0.5x(1+erf(x/√2)) */

/* y[i] = silu(gate[i]) * up[i] */
void qtts_swiglu(float *y, const float *gate, const float *up, size_t n);

/* y += x */
void qtts_add_inplace(float *y, const float *x, size_t n);

/* Streams n bytes at p once, as fast as this code knows how to read
 * memory (16-byte loads; every 2 KB block prefetches, all at once, the
 * block two ahead), and returns a checksum so the reads cannot be
 * optimised away. The benchmarks' memory floor: a weight kernel is judged
 * against reading its bytes this way. */
uint64_t qtts_stream_read(const void *p, size_t n);

/* Dot product in the scalar reference's 8-lane order (kernels_ref.c); the
 * same bits on every machine, independent of the matmul's SIMD path. */
float qtts_dot_f32(const float *a, const float *b, int n);

/* Attention of nh query heads sharing one K/V head (grouped-query
 * attention: K and V are read once for all of them) over ctx positions,
 * in the scalar order on every path (the same bits as the loops they
 * replace; attn_impl.h). Head h's query is q + h*d, its scores row
 * scores + h*lds, its probabilities p + h*ldp, its output out + h*d:
 * scores[h*lds + j] = qtts_dot_f32(q + h*d, k + j*ldk, d) * scale for
 * j < ctx, and out[h*d + i] = sum_{j < ctx} p[h*ldp + j] * v[j*ldv + i]
 * (i < d), increasing j, a multiply then an add per term, from 0; with
 * acc, from out's values instead, so that calls over consecutive pieces of
 * a context (each piece's p and v) give the bits of one call over all.
 * next (NULL for none) is where the caller reads next_rows rows of the
 * same format and stride right after this call: the next piece of the
 * context, or V's first rows after K's last piece. The SIMD paths
 * prefetch them as the call nears its end, so that a context in pieces
 * streams like one; nothing is read from them, and no result changes. */
void qtts_attn_scores(float *scores, size_t lds, const float *q, int nh, const float *k,
                      size_t ldk, int ctx, int d, float scale, const void *next, int next_rows);
void qtts_attn_out(float *out, const float *p, size_t ldp, int nh, const float *v, size_t ldv,
                   int ctx, int d, bool acc, const void *next, int next_rows);

/* The same over a bf16 K/V cache (the talker's, when the engine asks for
 * one: half the bytes that every decode step reads). Each value is
 * widened exactly, so the results are the fp32 calls' bits on the widened
 * cache. qtts_f32_to_bf16_row rounds a row into such a cache (to nearest
 * even, qtts_f32_to_bf16). */
void qtts_attn_scores_bf16(float *scores, size_t lds, const float *q, int nh, const uint16_t *k,
                           size_t ldk, int ctx, int d, float scale, const void *next,
                           int next_rows);
void qtts_attn_out_bf16(float *out, const float *p, size_t ldp, int nh, const uint16_t *v,
                        size_t ldv, int ctx, int d, bool acc, const void *next, int next_rows);
void qtts_f32_to_bf16_row(uint16_t *dst, const float *src, size_t n);
void qtts_bf16_to_f32_row(float *dst, const uint16_t *src, size_t n);   /* exact */

/* The calls above prefetch each row a fixed distance ahead of the row they
 * read, so the first qtts_attn_cold_rows(bf16) rows of a call whose caller
 * named nothing before it are read at the memory's latency.
 * qtts_attn_prefetch_rows brings rows [0, n) of a head (d elements each,
 * row j at p + j*ld elements, fp32 or bf16) to L2 without waiting for
 * them; a caller issues it for those rows ahead of other work. */
int qtts_attn_cold_rows(bool bf16);
void qtts_attn_prefetch_rows(const void *p, size_t ld, int n, int d, bool bf16);

/* ==== 1-D convolution kernels (conv_ref.c) ================================
 * Activations here are channel-major: a [C, n] tensor is C rows of n time
 * samples, row r at x + r*ld (ld >= n). A causal conv reads (taps-1)*dil
 * columns left of column 0 of each input row: the caller keeps them zero
 * (the causal left padding), so every input buffer is allocated with that
 * many leading columns per row.
 *
 * A conv is a sum over taps of [cout, cin] x [cin, n] products on shifted
 * views of the input; weights are packed once at load so that the inner
 * loop walks them contiguously in blocks of QTTS_CONV_MR output channels.
 * Accumulation is fp32 in a fixed order (tap-major, then input channel),
 * independent of n and of where a column sits in the buffer. */
#define QTTS_CONV_MR 8

typedef struct {
    int cout, cin, taps, dil;
    float *w;     /* packed [ceil(cout/MR)][taps][cin][MR], zero rows past cout; owned
                   * (NULL once converted to bf16) */
    float *bias;  /* [cout] owned, or NULL for no bias */
    /* bf16 form (qtts_conv1d_to_bf16): packed [ceil(cout/MR)][ceil(K/2)][MR]
     * words, K = taps*cin, each the bf16 weights of reduction rows 2p (low
     * half) and 2p+1 (high half, 0 past K); owned, or NULL */
    uint32_t *wb;
} qtts_conv1d;

/* Pack a torch Conv1d weight w[cout, cin, taps] (+ bias[cout] or NULL)
 * with dilation dil. false on allocation failure (c is then empty). */
bool qtts_conv1d_init(qtts_conv1d *c, const float *w, const float *bias, int cout, int cin,
                      int taps, int dil);

/* A conv of this shape whose packed weights c->w (layout above, rows past
 * cout included) the caller writes; no bias. false on allocation failure
 * (c is then empty). */
bool qtts_conv1d_alloc(qtts_conv1d *c, int cout, int cin, int taps, int dil);

/* Pack a torch ConvTranspose1d weight w[cin, cout, k] with stride s
 * (k % s == 0) whose output is trimmed to exactly n*s samples (k - s
 * dropped on the right) as an equivalent polyphase causal conv with s*cout
 * outputs and k/s taps: phase p, channel co is output row p*cout + co, and
 * y[co, m*s + p] = bias[co] + sum_q w[:, co, p + q*s]ᵀ x[:, m - q].
 * Run it with qtts_conv1d_causal, then qtts_interleave_phases. */
bool qtts_convtr1d_init(qtts_conv1d *c, const float *w, const float *bias, int cin, int cout,
                        int k, int s);

void qtts_conv1d_free(qtts_conv1d *c);   /* NULL-safe, idempotent */

/* y[cout, n] = (accumulate ? y : 0) + (bias + sum_k W_k · x[:, t - (taps-1-k)*dil]).
 * x: [cin, n] with row stride ldx and (taps-1)*dil readable zero columns
 * before each row; y: row stride ldy; y and x must not overlap. */
void qtts_conv1d_causal(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                        int n, bool accumulate);

/* y[cout, n*s] (contiguous) from phases ph[s*cout, n] (contiguous):
 * y[co, m*s + p] = ph[p*cout + co, m]. */
void qtts_interleave_phases(float *y, const float *ph, int cout, int n, int s);

/* Depthwise causal conv: y[c, t] = bias[c] + sum_k w[c, k] x[c, t - (taps-1-k)*dil]
 * (torch weight [C, 1, taps]); same padding contract as qtts_conv1d_causal. */
void qtts_dwconv1d_causal(float *y, size_t ldy, const float *x, size_t ldx, const float *w,
                          const float *bias, int channels, int taps, int dil, int n);

/* SnakeBeta parameters from the stored log-scale alpha/beta[C]:
 * ea = exp(alpha), ib = 1 / (exp(beta) + 1e-9), all fp32. */
void qtts_snake_params(float *ea, float *ib, const float *alpha, const float *beta, int channels);

/* y[c, t] = x + ib[c] * sin(ea[c] * x)^2  (y may alias x when ldy == ldx). */
void qtts_snake_beta(float *y, size_t ldy, const float *x, size_t ldx, const float *ea,
                     const float *ib, int channels, int n);

/* LayerNorm over channels of each column of a channel-major [C, n] tensor,
 * in place: biased variance, then (x - mean) * rsqrt(var + eps) * w + b. */
void qtts_layernorm_channels(float *x, size_t ld, int channels, int n, const float *w,
                             const float *b, float eps);

/* out[n, rows] = in[rows, n]ᵀ with the given row strides. */
void qtts_transpose(float *out, size_t ldo, const float *in, size_t ldi, int rows, int n);
/* ==== Blocked convolution (conv.c, conv_<isa>.c) ==========================
 * The codec decoder's fast path over the same packed qtts_conv1d: a
 * register-blocked GEMM (AVX-512, AVX2 or scalar, picked at run time)
 * split over the process-wide thread pool. Same contract as
 * qtts_conv1d_causal, but each output is one fused-multiply-add chain over
 * (tap, input channel), then + bias (conv_impl.h): the same bits on every
 * instruction set and at every thread count, for any n and column
 * position; not the bits of qtts_conv1d_causal (within the fp32 rounding
 * of either).
 *
 * A workspace holds the per-thread packing buffers between calls; one
 * workspace serves one conv at a time. ws may be NULL (a temporary one). */
typedef struct qtts_conv_ws qtts_conv_ws;
qtts_conv_ws *qtts_conv_ws_new(void);       /* NULL on allocation failure */
void qtts_conv_ws_free(qtts_conv_ws *ws);   /* NULL ok */

void qtts_conv1d_run(const qtts_conv1d *c, float *y, size_t ldy, const float *x, size_t ldx,
                     int n, bool accumulate, qtts_conv_ws *ws);

/* count convs of one shape (cout, cin, taps; fp32 weights) on inputs of n
 * columns, y[i] = conv c[i] of x[i] (accumulate false), as one split over
 * the pool: the same bits as count qtts_conv1d_run calls, with one wait
 * for the pool instead of count (the Winograd form's 8, 10 or 12 GEMMs). Convs
 * of other shapes or formats, or too small to split, run one by one. */
#define QTTS_CONV_MANY_MAX 12
void qtts_conv1d_run_many(int count, const qtts_conv1d *const *c, float *const *y, size_t ldy,
                          const float *const *x, size_t ldx, int n, qtts_conv_ws *ws);

/* SnakeBeta like qtts_snake_beta (y may alias x when ldy == ldx), with a
 * vectorised sine (conv_impl.h: within a few units of 2^-24 of sin^2),
 * rows split over the thread pool; same bits on every path. */
void qtts_snake_run(float *y, size_t ldy, const float *x, size_t ldx, const float *ea,
                    const float *ib, int channels, int n);

/* The instruction set of qtts_conv1d_run: "avx512", "avx2", "neon" or "scalar". */
const char *qtts_conv_isa_name(void);

/* bf16 convolutions, where the CPU has bf16 dot products (x86 AVX512-BF16,
 * AArch64 FEAT_BF16):
 * the weights rounded to bf16 once (half the bytes), each panel of inputs
 * rounded to bf16 as it is packed, products summed in fp32 two reduction
 * rows per instruction (VDPBF16PS; about twice the multiply-adds of fp32
 * FMA per cycle). Lossy: each weight and input within 2^-8 relative (8
 * significant bits), so each output within about 2^-7 * sum |w x| of the
 * fp32 conv (typically far less: the roundings are unbiased); the sum
 * order of a pair is the CPU's, so bits may differ between CPU models. On
 * one machine every output is still one fixed chain, whatever n, column
 * position or thread count (streamed == one-shot, batched == alone).
 * qtts_conv1d_to_bf16 converts c in place (frees the fp32 weights; false,
 * with c unchanged, on allocation failure or when the CPU cannot run
 * bf16); qtts_conv1d_run then takes the bf16 path for it. */
bool qtts_conv_bf16_usable(void);
bool qtts_conv1d_to_bf16(qtts_conv1d *c);

/* Winograd form of a 7-tap conv (conv_wino.c): F(6,7), six outputs from
 * twelve products per input channel instead of 42 (0.29x the
 * multiply-adds of the blocked conv), where every residue class of a
 * frame mod the dilation holds five positions or more (frame >= 5 dil);
 * else F(4,7), four outputs from ten instead of 28 (0.36x), where it
 * holds three or more; else F(2,7), two outputs from eight instead of
 * fourteen (0.57x). A little more where a class's length is not a
 * multiple of the group. A class one position short of a group reads one
 * more of its positions before the frame: the input needs `left` readable
 * columns before column 0 of each row (6 dil, or up to 7 dil), not the
 * direct conv's 6 dil. A 2-tap conv of dilation 1 (the polyphase form of
 * a transposed conv, qtts_convtr1d_init) takes F(4,2): four outputs from
 * five products instead of eight (0.625x), where the frame holds three
 * columns or more.
 * Outputs group within
 * frames of `frame` columns, the same way in every frame, so a call must
 * cover whole frames (column 0 a frame's first). The bits depend on
 * neither the instruction set nor the thread count nor how many frames a
 * call covers; they are not qtts_conv1d_run's (the rounding of the
 * transforms: F(2,7) 2-4 times that of the direct sum, F(4,7) 3-4 times
 * F(2,7)'s, F(6,7) about twice F(4,7)'s). Transformed weights: npt/7 of
 * the conv's. */
#define QTTS_CONV_WINO_MAX_POINTS 12
typedef struct {
    int cout, cin, taps, dil, frame;
    int m, npt;                   /* outputs per group (6, 4 or 2), products per group
                                   * (m + taps - 1) */
    int left;                     /* input columns read before column 0 of a row */
    qtts_conv1d pt[QTTS_CONV_WINO_MAX_POINTS];   /* point i < npt: [cout, cin] 1-tap conv */
    int ngroups;                  /* groups per frame */
} qtts_conv_wino;

/* Whether c has the form: fp32 weights, 7 taps and a frame of 2 dil to
 * 4096 columns, or 2 taps, dilation 1 and a frame of 3 to 4096. */
bool qtts_conv_wino_applies(const qtts_conv1d *c, int frame);
/* From such a conv c (which must outlive w: its bias serves every column);
 * false (w empty) for other convs or on allocation failure. */
bool qtts_conv_wino_init(qtts_conv_wino *w, const qtts_conv1d *c, int frame);
void qtts_conv_wino_free(qtts_conv_wino *w);   /* NULL-safe, idempotent */
/* qtts_conv1d_run(c, ..., accumulate = false) by the Winograd form, x
 * with w->left readable columns before each row (zero at a stream's
 * start, as the direct conv's 6 dil); false, with nothing written, when n
 * is not a whole number of frames, ws is NULL or its scratch cannot grow
 * (the caller then runs qtts_conv1d_run). */
bool qtts_conv_wino_run(const qtts_conv_wino *w, const qtts_conv1d *c, float *y, size_t ldy,
                        const float *x, size_t ldx, int n, qtts_conv_ws *ws);
/* Floats of workspace scratch a run over up to `frames` frames takes;
 * qtts_conv_wino_reserve grows ws to that ahead (false on allocation
 * failure), so that such runs never fail. (With two or more threads a run
 * first tries each thread's own workspace in ws, allocated on its first
 * use, and takes this scratch where that cannot be had: the same bits.) */
size_t qtts_conv_wino_scratch(const qtts_conv_wino *w, int frames);
/* Input columns before the end of a run of whole frames whose values the
 * bits of its last n output columns depend on (the direct conv's: n +
 * (taps - 1) dil; the groups make it up to (m - 2) dil more). */
int qtts_conv_wino_reach(const qtts_conv_wino *w, int n);
/* Multiply-adds of a run per frame (npt per group and channel pair). */
double qtts_conv_wino_macs(const qtts_conv_wino *w);
bool qtts_conv_wino_reserve(qtts_conv_ws *ws, size_t floats);
/* ==== end of 1-D convolution kernels ===================================== */

#endif
