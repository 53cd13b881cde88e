/*
 * ops_llm.cu - the per-row stages of the talker / code-predictor layers and
 * of the codec's transformer: RMSNorm, per-head q/k RMSNorm + RoPE with the
 * KV-cache write, causal GQA attention, and the embedding gathers.
 *
 * Orders (compare talker.c, kernels_ref.c):
 *   - RMSNorm: sum of squares in double, inv = 1/sqrtf((float)(ss/n)+eps),
 *     out = (x*inv)*w. The double sum is a fixed tree here and sequential on
 *     the CPU; both are within ~n*2^-53 of exact, so the fp32 inv agrees
 *     except when the exact value sits that close to a rounding boundary.
 *   - RoPE: a*cos - b*sin, b*cos + a*sin (separate multiplies and adds).
 *   - attention scores: qtts_dot_f32's 8-lane order exactly (8 threads, one
 *     per lane, then ((0+4)+(1+5))+((2+6)+(3+7))), times the scale; softmax
 *     max, exp, sum (double; a tree here), inv = (float)(1/sum), p = e*inv;
 *     output o[d] = sum_j p_j v_j[d] in increasing j, as the CPU.
 */
#include "common.cuh"

/* ---- RMSNorm --------------------------------------------------------------- */

__global__ void k_rmsnorm(const float *x, int ldx, int rs, int ro, const float *w, float *out,
                          int ldo, int D, float eps) {
    __shared__ double sh[32];
    const float *xr = x + ((size_t)blockIdx.x * rs + ro) * ldx;
    float *orow = out + (size_t)blockIdx.x * ldo;
    double ss = 0.0;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        const double v = xr[i];
        ss += v * v;
    }
    ss = cu_block_sum_d(ss, sh);
    const float inv = 1.0f / sqrtf((float)(ss / D) + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) orow[i] = (xr[i] * inv) * w[i];
}

void cu_rmsnorm(cudaStream_t st, const float *x, int ldx, int rs, int ro, const float *w,
                float *out, int ldo, int n, int D, float eps) {
    if (n <= 0) return;
    const int bs = D >= 1024 ? 256 : D >= 256 ? 128 : 64;
    k_rmsnorm<<<n, bs, 0, st>>>(x, ldx, rs, ro, w, out, ldo, D, eps);
}

/* ---- q/k norm + RoPE + KV write ---------------------------------------------- */

__global__ void k_qk_rope(float *q, int ldq, float *k, int ldk, const float *v, const float *qn,
                          const float *kn, int nh, int nkv, int hd, float eps, const float *cos_t,
                          const float *sin_t, const RowMeta *meta, RowMap map, int layer) {
    const int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nwarps = blockDim.x >> 5, half = hd / 2;
    const int pos = meta ? cu_row_pos(map, meta, row) : row;
    const float *c = cos_t + (size_t)pos * half, *s = sin_t + (size_t)pos * half;
    float *kc = NULL, *vc = NULL;
    int cap = 0;
    if (meta) {
        const RowMeta m = meta[cu_row_seq(map, row)];
        kc = m.k;
        vc = m.v;
        cap = m.cap;
    }
    for (int h = warp; h < nh + nkv; h += nwarps) {
        const bool isq = h < nh;
        const int g = h - nh;
        float *hp = isq ? q + (size_t)row * ldq + (size_t)h * hd : k + (size_t)row * ldk + (size_t)g * hd;
        const float *nw = isq ? qn : kn;
        float inv = 1.0f;
        if (nw) {
            double ss = 0.0;
            for (int i = lane; i < hd; i += 32) {
                const double x = hp[i];
                ss += x * x;
            }
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, o);
            ss = __shfl_sync(0xffffffffu, ss, 0);
            inv = 1.0f / sqrtf((float)(ss / hd) + eps);
        }
        float *cache = NULL;
        if (!isq && meta) cache = kc + (((size_t)layer * nkv + g) * cap + pos) * hd;
        for (int i = lane; i < half; i += 32) {
            float a = hp[i], b = hp[i + half];
            if (nw) {
                a = (a * inv) * nw[i];
                b = (b * inv) * nw[i + half];
            }
            const float na = a * c[i] - b * s[i];
            const float nb = b * c[i] + a * s[i];
            hp[i] = na;
            hp[i + half] = nb;
            if (cache) {
                cache[i] = na;
                cache[i + half] = nb;
            }
        }
        if (!isq && meta) {
            const float *vr = v + (size_t)row * ldk + (size_t)g * hd;
            float *vd = vc + (((size_t)layer * nkv + g) * cap + pos) * hd;
            for (int i = lane; i < hd; i += 32) vd[i] = vr[i];
        }
    }
}

void cu_qk_rope(cudaStream_t st, float *q, int ldq, float *k, int ldk, const float *v,
                const float *qn, const float *kn, int nh, int nkv, int hd, float eps,
                const float *cos, const float *sin, const RowMeta *meta, RowMap map, int layer,
                int n) {
    if (n <= 0) return;
    k_qk_rope<<<n, 256, 0, st>>>(q, ldq, k, ldk, v, qn, kn, nh, nkv, hd, eps, cos, sin, meta, map,
                                 layer);
}

/* ---- attention ---------------------------------------------------------------- */

#define ATT_THREADS 128

__global__ void __launch_bounds__(ATT_THREADS)
    k_attn(const float *q, int ldq, const RowMeta *meta, RowMap map, int layer, const float *kb,
           const float *vb, int ldkv, int window, int nh, int nkv, int hd, float scale,
           float *scores, int scap, float *out, int ldo) {
    __shared__ double shd[32];
    __shared__ float shf[32];
    const int h = blockIdx.x, row = blockIdx.y, tid = threadIdx.x;
    const int g = h / (nh / nkv);
    const float *K, *V;
    int pos, lo = 0;
    size_t ks;
    if (meta) {
        const RowMeta m = meta[cu_row_seq(map, row)];
        pos = cu_row_pos(map, meta, row);
        K = m.k + ((size_t)layer * nkv + g) * m.cap * hd;
        V = m.v + ((size_t)layer * nkv + g) * m.cap * hd;
        ks = hd;
    } else {
        pos = row;
        if (window > 0 && pos - window + 1 > 0) lo = pos - window + 1;
        K = kb + (size_t)g * hd;
        V = vb + (size_t)g * hd;
        ks = ldkv;
    }
    const int nk = pos - lo + 1;
    float *S = scores + ((size_t)row * nh + h) * scap;
    const float *qh = q + (size_t)row * ldq + (size_t)h * hd;

    /* scores: 8 threads per key, thread l8 = lane l8 of qtts_dot_f32 */
    {
        const int l8 = tid & 7, grp = tid >> 3;
        const unsigned mask = 0xffu << (tid & 24);
        for (int j = grp; j < nk; j += ATT_THREADS / 8) {
            const float *kj = K + (size_t)(lo + j) * ks;
            float a = 0.0f;
            for (int i = l8; i < hd; i += 8) a = a + qh[i] * kj[i];
            a += __shfl_down_sync(mask, a, 4, 8);
            a += __shfl_down_sync(mask, a, 1, 8);
            a += __shfl_down_sync(mask, a, 2, 8);
            if (l8 == 0) S[j] = a * scale;
        }
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = tid; j < nk; j += ATT_THREADS) m = fmaxf(m, S[j]);
    m = cu_block_max(m, shf);
    double sum = 0.0;
    for (int j = tid; j < nk; j += ATT_THREADS) {
        const float e = cu_expf(S[j] - m);
        S[j] = e;
        sum += (double)e;
    }
    sum = cu_block_sum_d(sum, shd);
    const float inv = (float)(1.0 / sum);
    for (int j = tid; j < nk; j += ATT_THREADS) S[j] = S[j] * inv;
    __syncthreads();
    for (int d = tid; d < hd; d += ATT_THREADS) {
        float o = 0.0f;
        for (int j = 0; j < nk; j++) o = o + S[j] * V[(size_t)(lo + j) * ks + d];
        out[(size_t)row * ldo + (size_t)h * hd + d] = o;
    }
}

void cu_attention(cudaStream_t st, const float *q, int ldq, const RowMeta *meta, RowMap map,
                  int layer, const float *kb, const float *vb, int ldkv, int window, int nh,
                  int nkv, int hd, float scale, float *scores, int scap, float *out, int ldo,
                  int n) {
    if (n <= 0) return;
    k_attn<<<dim3((unsigned)nh, (unsigned)n), ATT_THREADS, 0, st>>>(
        q, ldq, meta, map, layer, kb, vb, ldkv, window, nh, nkv, hd, scale, scores, scap, out, ldo);
}

/* ---- embeddings ------------------------------------------------------------------ */

#define MAX_TABS 32

struct EmbSet {
    DEmb t[MAX_TABS];
};

__device__ __forceinline__ float emb_at(const DEmb &e, int row, int d) {
    if (e.dtype == CU_BF16) return cu_bf16(((const uint16_t *)e.w)[(size_t)row * e.cols + d]);
    return ((const float *)e.w)[(size_t)row * e.cols + d];
}

__global__ void k_step_input(const EmbSet tabs, int G, const int32_t *codes, const float *text,
                             float *x, int H) {
    const int d = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (d >= H) return;
    const int32_t *c = codes + (size_t)r * G;
    float acc = emb_at(tabs.t[0], c[0], d);
    for (int i = 1; i < G; i++) acc = acc + emb_at(tabs.t[i], c[i], d);
    x[(size_t)r * H + d] = acc + text[(size_t)r * H + d];
}

void cu_step_input(cudaStream_t st, const DEmb *tabs, int G, const int32_t *codes,
                   const float *text, float *x, int H, int n) {
    if (n <= 0) return;
    EmbSet s;
    for (int i = 0; i < G && i < MAX_TABS; i++) s.t[i] = tabs[i];
    k_step_input<<<dim3((unsigned)((H + 255) / 256), (unsigned)n), 256, 0, st>>>(s, G, codes,
                                                                                text, x, H);
}

__global__ void k_cp_input0(const float *hidden, const DEmb emb, const int32_t *c0, float *out,
                            int H) {
    const int d = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (d >= H) return;
    out[(size_t)(2 * r) * H + d] = hidden[(size_t)r * H + d];
    out[(size_t)(2 * r + 1) * H + d] = emb_at(emb, c0[r], d);
}

__global__ void k_cp_input(const DEmb emb, const int32_t *codes, int ldc, int j, float *out,
                           int H) {
    const int d = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (d >= H) return;
    out[(size_t)r * H + d] = emb_at(emb, codes[(size_t)r * ldc + j - 1], d);
}

void cu_cp_input0(cudaStream_t st, const float *hidden, const DEmb *emb, const int32_t *c0,
                  float *out, int H, int n) {
    if (n <= 0) return;
    k_cp_input0<<<dim3((unsigned)((H + 255) / 256), (unsigned)n), 256, 0, st>>>(hidden, *emb, c0,
                                                                               out, H);
}

void cu_cp_input(cudaStream_t st, const DEmb *emb, const int32_t *codes, int ldc, int j,
                 float *out, int H, int n) {
    if (n <= 0) return;
    k_cp_input<<<dim3((unsigned)((H + 255) / 256), (unsigned)n), 256, 0, st>>>(*emb, codes, ldc,
                                                                             j, out, H);
}
