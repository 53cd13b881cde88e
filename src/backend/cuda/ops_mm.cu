/*
 * ops_mm.cu - the device matmul: y[n, rows] = x[n, cols] · Wᵀ in the CPU's
 * accumulation orders (layout.h), so each output has the bits of
 * qtts_matmul on a SIMD CPU (F32/BF16) or of every CPU path (Q8_0/Q4_0).
 *
 * A block of 256 threads computes 16 output rows (16 threads per row, one
 * per lane of the order; for Q8_0/Q4_0 thread l owns the whole blocks
 * b = l mod 16 of the row) for up to NT activation rows; blockIdx.y walks
 * the activation rows in groups of NT. The result of output (t, r) does not
 * depend on n, NT, the grid or the other rows, which is what makes a
 * batched step bit-identical to a single one.
 *
 * Up to three matrices that read the same x (q/k/v, gate/up) share one
 * launch; MM_SWIGLU computes gate and up rows in one thread group and
 * writes silu(g) * u (the CPU's qtts_swiglu on the two matmul outputs).
 */
#include <string.h>

#include "common.cuh"

#define MM_ROWS 16  /* output rows per block */
#define MM_UNR 4    /* weight blocks loaded ahead */

struct MMArgs {
    DMat W[3];
    MMOut o[3];
    int row0[4];
    int nm, mode;
    const float *x;
    int ldx;
    const int8_t *xq;
    const float *xd;
    int n;
};

template <int DT>
__device__ __forceinline__ void mm_load(const DMat &W, int r, int b, int l, float w[8]) {
    if (DT == CU_BF16) {
        const uint16_t *p = (const uint16_t *)W.w + (size_t)r * W.ldw + (size_t)b * 128 + l * 8;
        const uint4 v = __ldg((const uint4 *)p);
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = __uint_as_float(u[i] << 16);
            w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        }
    } else {
        const float *p = (const float *)W.w + (size_t)r * W.ldw + (size_t)b * 128 + l * 8;
        const float4 a = __ldg((const float4 *)p), c = __ldg((const float4 *)p + 1);
        w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
        w[4] = c.x, w[5] = c.y, w[6] = c.z, w[7] = c.w;
    }
}

/* Block b's 32 signed codes of a quantized device row (layout.h) as 8
 * 4-byte groups, group k = elements 4k..4k+3: Q8_0 two 16-byte loads of
 * its 32 code bytes; Q4_0 one of its 16 bytes, low nibbles elements 0..15
 * and high nibbles 16..31, each code - 8. */
template <int DT>
__device__ __forceinline__ void mm_qload(const uint8_t *row, int b, int w[8]) {
    if (DT == CU_Q8_0) {
        const uint4 *p = (const uint4 *)(row + (size_t)b * QTTS_QK);
        const uint4 v0 = __ldg(p), v1 = __ldg(p + 1);
        w[0] = (int)v0.x, w[1] = (int)v0.y, w[2] = (int)v0.z, w[3] = (int)v0.w;
        w[4] = (int)v1.x, w[5] = (int)v1.y, w[6] = (int)v1.z, w[7] = (int)v1.w;
    } else {
        const uint4 v = __ldg((const uint4 *)(row + (size_t)b * (QTTS_QK / 2)));
        const unsigned q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            w[k] = (int)__vsub4(q[k] & 0x0f0f0f0fu, 0x08080808u);
            w[4 + k] = (int)__vsub4((q[k] >> 4) & 0x0f0f0f0fu, 0x08080808u);
        }
    }
}

/* The 16-lane fold of kernels_impl.h across the 16 threads of a row group;
 * the result is valid in lane 0 of the group. */
__device__ __forceinline__ float mm_fold(float v, unsigned mask) {
    v += __shfl_down_sync(mask, v, 8, 16);
    v += __shfl_down_sync(mask, v, 4, 16);
    v += __shfl_down_sync(mask, v, 2, 16);
    v += __shfl_down_sync(mask, v, 1, 16);
    return v;
}

__device__ __forceinline__ void mm_store(const MMOut &o, int mode, int t, int r, float v) {
    float *y = o.y + (size_t)t * o.ldy + r;
    if (o.bias) v = v + o.bias[r];
    if (mode == MM_STORE)
        *y = v;
    else if (mode == MM_ADD)
        *y = *y + v;
    else
        *y = *y + o.scale[r] * v;
}

template <int DT, int NT>
__global__ void __launch_bounds__(256) k_mm(const __grid_constant__ MMArgs a) {
    const int grp = threadIdx.x >> 4, l = threadIdx.x & 15;
    const int grow = blockIdx.x * MM_ROWS + grp;
    const bool swiglu = a.mode == MM_SWIGLU;
    const int total = swiglu ? a.W[0].rows : a.row0[a.nm];
    if (grow >= total) return; /* the whole group of 16 leaves together */
    int m = 0;
    if (!swiglu)
        while (m + 1 < a.nm && grow >= a.row0[m + 1]) m++;
    const DMat &W = a.W[m];
    const int r = grow - (swiglu ? 0 : a.row0[m]);
    const int t0 = blockIdx.y * NT, nt = min(NT, a.n - t0);
    const unsigned mask = 0xffffu << (threadIdx.x & 16);
    const int cols = W.cols;

    float acc[NT], acc2[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = acc2[t] = 0.0f;

    if (DT == CU_F32 || DT == CU_BF16) {
        const int k16 = qtts_cu_k16(cols), nb8 = qtts_cu_nb8(cols);
        const float *x = a.x + (size_t)t0 * a.ldx;
        for (int b0 = 0; b0 < nb8; b0 += MM_UNR) {
            float w[MM_UNR][8], u[MM_UNR][8];
#pragma unroll
            for (int q = 0; q < MM_UNR; q++)
                if (b0 + q < nb8) {
                    mm_load<DT>(W, r, b0 + q, l, w[q]);
                    if (swiglu) mm_load<DT>(a.W[1], r, b0 + q, l, u[q]);
                }
#pragma unroll
            for (int q = 0; q < MM_UNR; q++) {
                const int b = b0 + q;
                const int kmax = b < nb8 ? min(8, k16 - 8 * b) : 0;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int c = 16 * (8 * b + j) + l;
#pragma unroll
                    for (int t = 0; t < NT; t++) {
                        if (j < kmax && t < nt) {
                            const float xv = c < cols ? __ldg(x + (size_t)t * a.ldx + c) : 0.0f;
                            acc[t] = fmaf(w[q][j], xv, acc[t]);
                            if (swiglu) acc2[t] = fmaf(u[q][j], xv, acc2[t]);
                        }
                    }
                }
            }
        }
    } else {
        /* quantized: thread l owns the blocks b = l, l + 16, ... (layout.h) */
        const int nb = cols / QTTS_QK;
        const uint8_t *wr = (const uint8_t *)W.w + (size_t)r * W.ldw;
        const uint8_t *ur = swiglu ? (const uint8_t *)a.W[1].w + (size_t)r * a.W[1].ldw : wr;
        const float *sw = W.scale + (size_t)r * nb;
        const float *su = swiglu ? a.W[1].scale + (size_t)r * nb : sw;
        const int8_t *xq = a.xq + (size_t)t0 * cols;
        const float *xd = a.xd + (size_t)t0 * nb;
        for (int b = l; b < nb; b += 16) {
            int w[8], u[8];
            mm_qload<DT>(wr, b, w);
            if (swiglu) mm_qload<DT>(ur, b, u);
            const float dw = __ldg(sw + b), du = __ldg(su + b);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= nt) continue;
                const uint4 *xp = (const uint4 *)(xq + (size_t)t * cols + (size_t)b * QTTS_QK);
                const uint4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
                const int xv[8] = {(int)x0.x, (int)x0.y, (int)x0.z, (int)x0.w,
                                   (int)x1.x, (int)x1.y, (int)x1.z, (int)x1.w};
                const float dx = __ldg(xd + (size_t)t * nb + b);
                int pw = 0, pu = 0;
#pragma unroll
                for (int k = 0; k < 8; k++) pw = __dp4a(w[k], xv[k], pw);
                acc[t] = fmaf((float)pw, dw * dx, acc[t]);
                if (swiglu) {
#pragma unroll
                    for (int k = 0; k < 8; k++) pu = __dp4a(u[k], xv[k], pu);
                    acc2[t] = fmaf((float)pu, du * dx, acc2[t]);
                }
            }
        }
    }

#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= nt) continue;
        const float v = mm_fold(acc[t], mask);
        if (swiglu) {
            const float u = mm_fold(acc2[t], mask);
            if (l == 0) a.o[0].y[(size_t)(t0 + t) * a.o[0].ldy + r] = v / (1.0f + cu_expf(-v)) * u;
        } else if (l == 0) {
            mm_store(a.o[m], a.mode, t0 + t, r, v);
        }
    }
}

/* Activation quantization (qtts_quantize_act_ref): one warp per block of 32. */
__global__ void k_quant_act(const float *x, int ldx, int cols, int8_t *xq, float *xd) {
    const int nb = cols / QTTS_QK, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int b = blockIdx.x * 8 + w, t = blockIdx.y;
    if (b >= nb) return;
    const float v = x[(size_t)t * ldx + (size_t)b * QTTS_QK + lane];
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float dx = amax / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
    const float q = rintf(v * id);
    xq[(size_t)t * cols + (size_t)b * QTTS_QK + lane] = (int8_t)(fabsf(q) <= 127.0f ? q : 0.0f);
    if (lane == 0) xd[(size_t)t * nb + b] = dx;
}

template <int DT>
static void mm_launch(cudaStream_t st, const MMArgs &a, int total) {
    const unsigned gx = (unsigned)((total + MM_ROWS - 1) / MM_ROWS);
    if (a.n == 1)
        k_mm<DT, 1><<<dim3(gx, 1), 256, 0, st>>>(a);
    else
        k_mm<DT, 8><<<dim3(gx, (unsigned)((a.n + 7) / 8)), 256, 0, st>>>(a);
}

void cu_matmul(cudaStream_t st, const DMat *W, const MMOut *o, int nm, int mode, const float *x,
               int ldx, int n, int8_t *xq, float *xd) {
    if (n <= 0 || nm <= 0) return;
    /* matrices of different formats: one launch each (never for MM_SWIGLU,
     * whose two matrices the upload gives one format) */
    if (mode != MM_SWIGLU)
        for (int i = 1; i < nm; i++)
            if (W[i].dtype != W[0].dtype) {
                for (int k = 0; k < nm; k++) cu_matmul(st, &W[k], &o[k], 1, mode, x, ldx, n, xq, xd);
                return;
            }
    MMArgs a;
    memset(&a, 0, sizeof a);
    a.nm = mode == MM_SWIGLU ? 2 : nm;
    a.mode = mode;
    a.row0[0] = 0;
    for (int i = 0; i < a.nm; i++) {
        a.W[i] = W[i];
        a.o[i] = o[mode == MM_SWIGLU ? 0 : i];
        a.row0[i + 1] = a.row0[i] + W[i].rows;
    }
    a.x = x;
    a.ldx = ldx;
    a.n = n;
    const int dt = W[0].dtype;
    if (dt == CU_Q8_0 || dt == CU_Q4_0) {
        const int nb = W[0].cols / QTTS_QK;
        k_quant_act<<<dim3((unsigned)((nb + 7) / 8), (unsigned)n), 256, 0, st>>>(x, ldx, W[0].cols,
                                                                               xq, xd);
        a.xq = xq;
        a.xd = xd;
    }
    const int total = mode == MM_SWIGLU ? W[0].rows : a.row0[a.nm];
    switch (dt) {
    case CU_F32: mm_launch<CU_F32>(st, a, total); break;
    case CU_BF16: mm_launch<CU_BF16>(st, a, total); break;
    case CU_Q8_0: mm_launch<CU_Q8_0>(st, a, total); break;
    default: mm_launch<CU_Q4_0>(st, a, total); break;
    }
}
