/*
 * ops_codec.cu - the codec decoder's channel-major stages on the device
 * (compare kernels/conv_ref.c, conv.c and model/codec_decoder.c):
 *
 *   conv:      a tiled fp32 GEMM over (cout) x (time) with K = taps*cin,
 *              each output one fmaf chain in increasing kk from +0, then
 *              + bias, then y = v or y + v: the bits of qtts_conv1d_run
 *              (conv_impl.h's order); inputs unpadded (a tap before
 *              column 0 reads zero, as the CPU's padding columns hold).
 *   snake:     qtts_snake_ref's operations exactly (Cody-Waite reduction,
 *              the same polynomials, fmaf); |u| > 8192 uses sin() rounded.
 *   dwconv:    sum over taps with separate multiplies and adds, then + bias.
 *   layernorm: per column, double sums over channels in channel order.
 *   gelu:      0.5*x*(1 + erf(x/sqrt2)) with erf rounded from double.
 */
#include "common.cuh"

extern "C" {
#include "../../kernels/conv_impl.h"
}

/* ---- convolution ---------------------------------------------------------------- */

#define CBM 64
#define CBN 64
#define CBK 16

__global__ void __launch_bounds__(256)
    k_conv(const float *__restrict__ wt, const float *__restrict__ bias, int cout, int cin,
           int taps, int dil, const float *__restrict__ x, int ldx, float *y, int ldy, int n,
           int accumulate) {
    __shared__ __align__(16) float As[CBK][CBM];
    __shared__ __align__(16) float Bs[CBK][CBN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * CBM, n0 = blockIdx.x * CBN;
    const int K = taps * cin;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;

    for (int kk0 = 0; kk0 < K; kk0 += CBK) {
        /* A: 16 x 64 weights, 4 per thread; B: 16 x 64 shifted inputs */
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int idx = tid + e * 256, k = idx >> 6, mm = idx & 63;
            const int kk = kk0 + k, co = m0 + mm;
            As[k][mm] = kk < K && co < cout ? wt[(size_t)kk * cout + co] : 0.0f;
            const int tap = kk / cin, ci = kk - tap * cin;
            const int t = n0 + mm - (taps - 1 - tap) * dil;
            Bs[k][mm] = kk < K && t >= 0 && t < n ? x[(size_t)ci * ldx + t] : 0.0f;
        }
        __syncthreads();
        const int kmax = min(CBK, K - kk0);
        for (int k = 0; k < kmax; k++) {
            const float4 a = *(const float4 *)&As[k][ty * 4];
            const float4 b = *(const float4 *)&Bs[k][tx * 4];
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int co = m0 + ty * 4 + i;
        if (co >= cout) continue;
        const float b = bias ? bias[co] : 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int t = n0 + tx * 4 + j;
            if (t >= n) continue;
            const float v = acc[i][j] + b;
            float *yp = y + (size_t)co * ldy + t;
            *yp = accumulate ? *yp + v : v;
        }
    }
}

void cu_conv1d(cudaStream_t st, const float *wt, const float *bias, int cout, int cin, int taps,
               int dil, const float *x, int ldx, float *y, int ldy, int n, bool accumulate) {
    if (n <= 0) return;
    const dim3 grid((unsigned)((n + CBN - 1) / CBN), (unsigned)((cout + CBM - 1) / CBM));
    k_conv<<<grid, 256, 0, st>>>(wt, bias, cout, cin, taps, dil, x, ldx, y, ldy, n,
                                 accumulate ? 1 : 0);
}

/* ---- elementwise stages ---------------------------------------------------------- */

__device__ __forceinline__ float snake_one(float x, float ea, float ib) {
    const float u = ea * x;
    float s2;
    if (fabsf(u) <= QTTS_SNAKE_LIMIT) {
        const float j = rintf(u * QTTS_SNAKE_2_PI);
        float r = fmaf(-j, QTTS_SNAKE_P1, u);
        r = fmaf(-j, QTTS_SNAKE_P2, r);
        r = fmaf(-j, QTTS_SNAKE_P3, r);
        const float z = r * r;
        if (((int)j & 1) == 0) {
            const float p = fmaf(fmaf(QTTS_SNAKE_S3, z, QTTS_SNAKE_S2), z, QTTS_SNAKE_S1);
            const float s = fmaf(r * z, p, r);
            s2 = s * s;
        } else {
            const float p = fmaf(fmaf(QTTS_SNAKE_C3, z, QTTS_SNAKE_C2), z, QTTS_SNAKE_C1);
            const float c = fmaf(z * z, p, fmaf(-0.5f, z, 1.0f));
            s2 = c * c;
        }
    } else {
        const float s = cu_sinf(u);
        s2 = s * s;
    }
    return fmaf(ib, s2, x);
}

__global__ void k_snake(float *y, int ldy, const float *x, int ldx, const float *ea,
                        const float *ib, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (t >= n) return;
    y[(size_t)c * ldy + t] = snake_one(x[(size_t)c * ldx + t], ea[c], ib[c]);
}

void cu_snake(cudaStream_t st, float *y, int ldy, const float *x, int ldx, const float *ea,
              const float *ib, int C, int n) {
    if (n <= 0 || C <= 0) return;
    k_snake<<<dim3((unsigned)((n + 255) / 256), (unsigned)C), 256, 0, st>>>(y, ldy, x, ldx, ea,
                                                                           ib, n);
}

__global__ void k_dwconv(float *y, int ldy, const float *x, int ldx, const float *w,
                         const float *b, int taps, int dil, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (t >= n) return;
    const float *xr = x + (size_t)c * ldx;
    float acc = 0.0f;
    for (int k = 0; k < taps; k++) {
        const int ts = t - (taps - 1 - k) * dil;
        acc = acc + w[(size_t)c * taps + k] * (ts >= 0 ? xr[ts] : 0.0f);
    }
    y[(size_t)c * ldy + t] = acc + (b ? b[c] : 0.0f);
}

void cu_dwconv(cudaStream_t st, float *y, int ldy, const float *x, int ldx, const float *w,
               const float *b, int C, int taps, int dil, int n) {
    if (n <= 0 || C <= 0) return;
    k_dwconv<<<dim3((unsigned)((n + 255) / 256), (unsigned)C), 256, 0, st>>>(y, ldy, x, ldx, w, b,
                                                                            taps, dil, n);
}

__global__ void k_layernorm_ch(float *x, int ld, int C, int n, const float *w, const float *b,
                               float eps) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    double sum = 0.0;
    for (int c = 0; c < C; c++) sum += x[(size_t)c * ld + t];
    const float mean = (float)(sum / C);
    sum = 0.0;
    for (int c = 0; c < C; c++) {
        const double d = (double)x[(size_t)c * ld + t] - (double)mean;
        sum += d * d;
    }
    const float inv = 1.0f / sqrtf((float)(sum / C) + eps);
    for (int c = 0; c < C; c++) {
        float *p = x + (size_t)c * ld + t;
        *p = ((*p - mean) * inv) * w[c] + b[c];
    }
}

void cu_layernorm_ch(cudaStream_t st, float *x, int ld, int C, int n, const float *w,
                     const float *b, float eps) {
    if (n <= 0) return;
    k_layernorm_ch<<<(unsigned)((n + 127) / 128), 128, 0, st>>>(x, ld, C, n, w, b, eps);
}

__global__ void k_gelu(float *x, int64_t count) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + cu_erff(v * 0.70710678118654752f));
}

void cu_gelu(cudaStream_t st, float *x, int64_t count) {
    if (count <= 0) return;
    k_gelu<<<(unsigned)((count + 255) / 256), 256, 0, st>>>(x, count);
}

__global__ void k_gamma_add(float *x, const float *y, const float *g, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (t >= n) return;
    const size_t i = (size_t)c * n + t;
    x[i] = x[i] + g[c] * y[i];
}

void cu_gamma_add(cudaStream_t st, float *x, const float *y, const float *g, int C, int n) {
    if (n <= 0 || C <= 0) return;
    k_gamma_add<<<dim3((unsigned)((n + 255) / 256), (unsigned)C), 256, 0, st>>>(x, y, g, n);
}

__global__ void k_interleave(float *y, const float *ph, int cout, int n, int s) {
    const int m = blockIdx.x * blockDim.x + threadIdx.x, co = blockIdx.y;
    if (m >= n) return;
    for (int p = 0; p < s; p++)
        y[(size_t)co * n * s + (size_t)m * s + p] = ph[((size_t)p * cout + co) * n + m];
}

void cu_interleave(cudaStream_t st, float *y, const float *ph, int cout, int n, int s) {
    if (n <= 0 || cout <= 0) return;
    k_interleave<<<dim3((unsigned)((n + 255) / 256), (unsigned)cout), 256, 0, st>>>(y, ph, cout,
                                                                                   n, s);
}

__global__ void k_transpose(float *out, int ldo, const float *in, int ldi, int rows, int n) {
    __shared__ float tile[32][33];
    const int r0 = blockIdx.y * 32, t0 = blockIdx.x * 32;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int r = r0 + i, t = t0 + threadIdx.x;
        if (r < rows && t < n) tile[i][threadIdx.x] = in[(size_t)r * ldi + t];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int t = t0 + i, r = r0 + threadIdx.x;
        if (r < rows && t < n) out[(size_t)t * ldo + r] = tile[threadIdx.x][i];
    }
}

void cu_transpose(cudaStream_t st, float *out, int ldo, const float *in, int ldi, int rows,
                  int n) {
    if (rows <= 0 || n <= 0) return;
    k_transpose<<<dim3((unsigned)((n + 31) / 32), (unsigned)((rows + 31) / 32)), dim3(32, 8), 0,
                  st>>>(out, ldo, in, ldi, rows, n);
}

__global__ void k_codec_gather(const float *cb, int nq, int cbs, int V, const int32_t *codes,
                               float *s1, float *s2) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (j >= V) return;
    const int32_t *c = codes + (size_t)t * nq;
    const size_t cbn = (size_t)cbs * V;
    s1[(size_t)t * V + j] = cb[(size_t)c[0] * V + j];
    float r = cb[cbn + (size_t)c[1] * V + j];
    for (int q = 2; q < nq; q++) r = r + cb[cbn * q + (size_t)c[q] * V + j];
    s2[(size_t)t * V + j] = r;
}

void cu_codec_gather(cudaStream_t st, const float *cb, int nq, int cbs, int V,
                     const int32_t *codes, float *s1, float *s2, int T) {
    if (T <= 0) return;
    k_codec_gather<<<dim3((unsigned)((V + 127) / 128), (unsigned)T), 128, 0, st>>>(cb, nq, cbs, V,
                                                                                  codes, s1, s2);
}

__global__ void k_clamp(float *x, int n, int *bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    if (!isfinite(v)) {
        atomicMin(bad, i);
        return;
    }
    x[i] = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
}

void cu_clamp(cudaStream_t st, float *x, int n, int *bad) {
    if (n <= 0) return;
    k_clamp<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(x, n, bad);
}
