/*
 * common.cuh - shared by the CUDA backend's translation units: the C
 * headers of the engine, device-side helpers, the device weight and row
 * descriptors, and the kernel launchers of ops_*.cu (all on one stream).
 *
 * Arithmetic rule (mirrors the CPU's -ffp-contract=off): the .cu files are
 * compiled with --fmad=false, so a*b+c is a multiply and an add unless the
 * code writes fmaf(); divisions and square roots are IEEE (no fast math).
 * exp/erf/sin of the CPU code are computed here as the double-precision
 * function rounded to fp32, i.e. correctly rounded up to a double
 * rounding. The CPU's softmax and SwiGLU exponential (qtts_exp) is that
 * same function, so the two agree but for inputs within ~1e-16 of a
 * halfway point; its erf/sin (and the sampler's expf) are glibc's, equal
 * to these except on a tiny fraction of inputs (glibc's are not correctly
 * rounded everywhere).
 */
#ifndef QTTS_CUDA_COMMON_CUH
#define QTTS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* base.h is C11: its _Noreturn is C++'s [[noreturn]]. */
#define _Noreturn [[noreturn]]
extern "C" {
#include "../backend.h"
#include "../../kernels/quant.h"
}
#undef _Noreturn

#include "layout.h"

/* ---- device helpers ---------------------------------------------------- */

__device__ __forceinline__ float cu_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float cu_expf(float x) { return (float)exp((double)x); }
__device__ __forceinline__ float cu_erff(float x) { return (float)erf((double)x); }
__device__ __forceinline__ float cu_sinf(float x) { return (float)sin((double)x); }

/* Sum of a double over the block (fixed tree, the same for every launch);
 * sh must hold 32 doubles. Every thread gets the result. */
__device__ __forceinline__ double cu_block_sum_d(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = l < nw ? sh[l] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (l == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

/* Maximum of a float over the block (non-NaN inputs); sh holds 32 floats. */
__device__ __forceinline__ float cu_block_max(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = l < nw ? sh[l] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
        if (l == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

/* ---- device descriptors -------------------------------------------------- */

enum { CU_F32 = 0, CU_BF16 = 1, CU_Q8_0 = 2, CU_Q4_0 = 3 };

/* A matmul weight on the device (layout.h). */
struct DMat {
    const void *w;       /* F32/BF16: permuted rows; Q8_0: int8 codes; Q4_0: packed nibbles */
    const float *scale;  /* Q8_0/Q4_0: [rows][cols/32] */
    int rows, cols, dtype;
    int64_t ldw;         /* elements (F32/BF16) or bytes (Q8_0/Q4_0) per row */
};

/* An embedding table (rows gathered, never multiplied): original layout. */
struct DEmb {
    const void *w;
    int rows, cols, dtype; /* CU_F32 or CU_BF16 */
};

/* One sequence's KV cache of one stack: [layers][nkv][cap][hd]. */
struct RowMeta {
    float *k, *v;
    int cap;   /* positions per (layer, kv head) */
    int pos;   /* the position of this sequence's row (talker step) */
};

/* Row r of a stack call belongs to sequence r / rps, at position
 * meta[seq].pos when use_meta_pos, else pos0 + r % rps. */
struct RowMap {
    int rps, pos0, use_meta_pos;
};

__device__ __forceinline__ int cu_row_seq(RowMap m, int r) { return r / m.rps; }
__device__ __forceinline__ int cu_row_pos(RowMap m, const RowMeta *meta, int r) {
    return m.use_meta_pos ? meta[r / m.rps].pos : m.pos0 + r % m.rps;
}

/* Sampler parameters of one CP row (qtts_sampler_params + the top-p
 * threshold computed on the host exactly as sampling.c does). */
struct SampParams {
    int do_sample, top_k;
    float top_p, temperature, top_p_thr;
};

/* ---- launchers (ops_*.cu); all asynchronous on stream st --------------- */

enum { MM_STORE = 0, MM_ADD = 1, MM_ADD_SCALED = 2, MM_SWIGLU = 3 };

struct MMOut {
    float *y;
    int ldy;
    const float *bias;   /* [rows] or NULL */
    const float *scale;  /* MM_ADD_SCALED: [rows] */
};

/* y = x[n, cols] · Wᵀ for up to 3 matrices sharing x (same cols):
 * MM_STORE y = v (+bias); MM_ADD y += v; MM_ADD_SCALED y += scale*v;
 * MM_SWIGLU (W[0] = gate, W[1] = up): y0 = silu(g) * u.
 * xq/xd: scratch for the quantized activations ([n][cols] int8,
 * [n][cols/32] f32), used only when a matrix is Q8_0/Q4_0. */
void cu_matmul(cudaStream_t st, const DMat *W, const MMOut *o, int nm, int mode, const float *x,
               int ldx, int n, int8_t *xq, float *xd);

/* out[r] = rmsnorm(x[r*rs + ro]) for r < n (row stride ld of x, ldo of out). */
void cu_rmsnorm(cudaStream_t st, const float *x, int ldx, int rs, int ro, const float *w,
                float *out, int ldo, int n, int D, float eps);

/* Per-head RMSNorm (q_norm/k_norm; NULL = none) and rotate-half RoPE of
 * q[n][ldq] (nh heads) and k[n][ldk] (nkv heads), hd = head dim, table
 * rows cos/sin[pos][hd/2]; positions from (meta, map), or the row index
 * when meta is NULL. With meta, K (after RoPE) and V (v[n][ldk]) go to the
 * row's cache at layer `layer` and its position. */
void cu_qk_rope(cudaStream_t st, float *q, int ldq, float *k, int ldk, const float *v,
                const float *qn, const float *kn, int nh, int nkv, int hd, float eps,
                const float *cos, const float *sin, const RowMeta *meta, RowMap map, int layer,
                int n);

/* Causal GQA attention of n rows. With meta: K/V from the row's cache at
 * layer `layer` (positions 0..pos). Without: time-major kb/vb [T][ldkv]
 * (row r at position r, keys from max(0, r - window + 1)). out[n][ldo].
 * scores: [n][nh][scap] scratch, scap >= the longest context. */
void cu_attention(cudaStream_t st, const float *q, int ldq, const RowMeta *meta, RowMap map,
                  int layer, const float *kb, const float *vb, int ldkv, int window, int nh,
                  int nkv, int hd, float scale, float *scores, int scap, float *out, int ldo,
                  int n);

/* x[r] = E0[codes[r*G]] + sum_{i>0} Ei[codes[r*G+i]] + text[r] (talker step input). */
void cu_step_input(cudaStream_t st, const DEmb *tabs, int G, const int32_t *codes,
                   const float *text, float *x, int H, int n);

/* CP inputs. Pass 0: out[2r] = hidden[r], out[2r+1] = emb[c0[r]]. Pass j:
 * out[r] = emb[codes[r*ldc + j - 1]]. out rows of H floats. */
void cu_cp_input0(cudaStream_t st, const float *hidden, const DEmb *emb, const int32_t *c0,
                  float *out, int H, int n);
void cu_cp_input(cudaStream_t st, const DEmb *emb, const int32_t *codes, int ldc, int j,
                 float *out, int H, int n);

/* One CP draw per row: logits[r*ldl + ...][V] -> codes[r*ldc + j], with
 * sp[r], rng[r*4..] (xoshiro256** state), fail[r] (-1 = none yet; set to
 * j on non-finite logits, after which the row draws nothing). */
void cu_cp_sample(cudaStream_t st, const float *logits, int64_t ldl, int V,
                  const SampParams *sp, uint64_t *rng, int32_t *codes, int ldc, int j,
                  int32_t *fail, int n);
qtts_status cu_sample_init(int V, qtts_err *err);  /* once per process/device */

/* ---- codec ops (ops_codec.cu) ---- */

/* y[cout][n] (row stride ldy) = (accumulate ? y : 0) + conv(x[cin][n], ldx):
 * wt[K][cout] (K = taps*cin), bias[cout] or NULL, causal with dilation. */
void cu_conv1d(cudaStream_t st, const float *wt, const float *bias, int cout, int cin, int taps,
               int dil, const float *x, int ldx, float *y, int ldy, int n, bool accumulate);
void cu_snake(cudaStream_t st, float *y, int ldy, const float *x, int ldx, const float *ea,
              const float *ib, int C, int n);
void cu_dwconv(cudaStream_t st, float *y, int ldy, const float *x, int ldx, const float *w,
               const float *b, int C, int taps, int dil, int n);
void cu_layernorm_ch(cudaStream_t st, float *x, int ld, int C, int n, const float *w,
                     const float *b, float eps);
void cu_gelu(cudaStream_t st, float *x, int64_t count);
/* x[c][t] += g[c] * y[c][t] */
void cu_gamma_add(cudaStream_t st, float *x, const float *y, const float *g, int C, int n);
void cu_interleave(cudaStream_t st, float *y, const float *ph, int cout, int n, int s);
void cu_transpose(cudaStream_t st, float *out, int ldo, const float *in, int ldi, int rows,
                  int n);
/* s1[t] = cb[0][c0], s2[t] = cb[1][c1] + ... (codebooks [nq][cbs][V]). */
void cu_codec_gather(cudaStream_t st, const float *cb, int nq, int cbs, int V,
                     const int32_t *codes, float *s1, float *s2, int T);
/* clamp to [-1, 1]; *bad = smallest index of a non-finite sample (init INT_MAX). */
void cu_clamp(cudaStream_t st, float *x, int n, int *bad);

#endif
