/*
 * ops_sample.cu - the code predictor's draw on the device: qtts_sample()
 * of model/sampling.c for one row per block, in the same processing order
 * and on the same xoshiro256** stream, so that a frame's codes match the
 * CPU's draw for draw:
 *
 *   finiteness check (the CPU's QTTS_ERR_NUMERIC), first argmax, then when
 *   sampling: s / t (IEEE division), mx = s[argmax], top-k (the k-th
 *   largest value with multiplicity; entries below it -> -inf), top-p,
 *   draw: w_i = exp(s_i - mx) (0 for -inf), sum in double in index order,
 *   target = u * sum with u = (next() >> 11) * 2^-53, the first index whose
 *   running double sum exceeds the target.
 *
 * The sums are order-dependent, so they run sequentially on one thread
 * over the entries that are not zero (a zero adds nothing to a double sum
 * of non-negative terms): about k entries with top-k, the vocabulary
 * without it.
 *
 * Top-p: the CPU sorts like torch (libstdc++ introsort, ties in that
 * algorithm's order). The sorted values do not depend on how ties are
 * ordered, so a bitonic sort gives the same cumulative sums and the same
 * cut; only when the cut falls inside a run of equal values does the order
 * of indices within the run decide which are removed. Then (rarely) one
 * thread redoes the sort exactly as sampling.c does (a port of its
 * introsort) and applies that cut.
 */
#include <limits.h>

#include "common.cuh"

#define SB 1024  /* threads per row */

__device__ __forceinline__ uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

__device__ uint64_t rng_next(uint64_t *s) {
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* First index of the largest value among s[0..V) (0 when all are -inf). */
__device__ int block_argmax(const float *s, int V, float *shv, int *shi) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (s[i] > bv) bv = s[i], bi = i;
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_down_sync(0xffffffffu, bv, o);
        const int oi = __shfl_down_sync(0xffffffffu, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) shv[w] = bv, shi[w] = bi;
    __syncthreads();
    if (w == 0) {
        bv = l < nw ? shv[l] : -INFINITY;
        bi = l < nw ? shi[l] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_down_sync(0xffffffffu, bv, o);
            const int oi = __shfl_down_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
        if (l == 0) shi[0] = bi == INT_MAX ? 0 : bi;
    }
    __syncthreads();
    return shi[0];
}

/* Bitonic sort of key[0..P) (P a power of two), descending or ascending. */
__device__ void block_bitonic(float *key, int P, bool descending) {
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < P; i += blockDim.x) {
                const int ixj = i ^ j;
                if (ixj > i) {
                    const float a = key[i], b = key[ixj];
                    const bool first = (i & k) == 0; /* this pair's half sorts the requested way */
                    const bool swap = (first == descending) ? a < b : a > b;
                    if (swap) key[i] = b, key[ixj] = a;
                }
            }
            __syncthreads();
        }
}

/* ---- the exact introsort of sampling.c (libstdc++ std::sort on (value,
 * index) pairs, comparator value <), one thread. The recursion becomes an
 * explicit stack: the subranges it sorts are disjoint, so the order in
 * which they are visited does not change the result. */

struct Pairs {
    float *v;
    int *ix;
};

__device__ __forceinline__ bool pless(Pairs p, int a, int b) { return p.v[a] < p.v[b]; }
__device__ __forceinline__ void pswap(Pairs p, int a, int b) {
    const float tv = p.v[a];
    p.v[a] = p.v[b];
    p.v[b] = tv;
    const int ti = p.ix[a];
    p.ix[a] = p.ix[b];
    p.ix[b] = ti;
}
__device__ __forceinline__ void pmove(Pairs p, int dst, int src) {
    p.v[dst] = p.v[src];
    p.ix[dst] = p.ix[src];
}

__device__ void std_push_heap(Pairs p, int first, int hole, int top, float val, int vix) {
    int parent = (hole - 1) / 2;
    while (hole > top && p.v[first + parent] < val) {
        pmove(p, first + hole, first + parent);
        hole = parent;
        parent = (hole - 1) / 2;
    }
    p.v[first + hole] = val;
    p.ix[first + hole] = vix;
}

__device__ void std_adjust_heap(Pairs p, int first, int hole, int len, float val, int vix) {
    const int top = hole;
    int child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (pless(p, first + child, first + child - 1)) child--;
        pmove(p, first + hole, first + child);
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        pmove(p, first + hole, first + child - 1);
        hole = child - 1;
    }
    std_push_heap(p, first, hole, top, val, vix);
}

__device__ void std_heap_sort(Pairs p, int first, int last) {
    const int len = last - first;
    if (len >= 2)
        for (int parent = (len - 2) / 2;; parent--) {
            std_adjust_heap(p, first, parent, len, p.v[first + parent], p.ix[first + parent]);
            if (parent == 0) break;
        }
    while (last - first > 1) {
        --last;
        const float val = p.v[last];
        const int vix = p.ix[last];
        pmove(p, last, first);
        std_adjust_heap(p, first, 0, last - first, val, vix);
    }
}

__device__ void std_move_median_to_first(Pairs p, int result, int a, int b, int c) {
    if (pless(p, a, b)) {
        if (pless(p, b, c)) pswap(p, result, b);
        else if (pless(p, a, c)) pswap(p, result, c);
        else pswap(p, result, a);
    } else if (pless(p, a, c)) {
        pswap(p, result, a);
    } else if (pless(p, b, c)) {
        pswap(p, result, c);
    } else {
        pswap(p, result, b);
    }
}

__device__ int std_unguarded_partition(Pairs p, int first, int last, int pivot) {
    for (;;) {
        while (pless(p, first, pivot)) ++first;
        --last;
        while (pless(p, pivot, last)) --last;
        if (!(first < last)) return first;
        pswap(p, first, last);
        ++first;
    }
}

#define STD_SORT_THRESHOLD 16

/* stk: 3 * 64 ints of scratch (shared memory: only one thread sorts). */
__device__ void std_introsort(Pairs p, int n, int *stk) {
    int depth0 = 0;
    for (int m = n; m >>= 1;) depth0++;
    int sp = 0;
    stk[0] = 0, stk[1] = n, stk[2] = 2 * depth0, sp = 1;
    while (sp > 0) {
        sp--;
        int first = stk[3 * sp], last = stk[3 * sp + 1], depth = stk[3 * sp + 2];
        while (last - first > STD_SORT_THRESHOLD) {
            if (depth == 0) {
                std_heap_sort(p, first, last);
                break;
            }
            --depth;
            const int mid = first + (last - first) / 2;
            std_move_median_to_first(p, first, first + 1, mid, last - 1);
            const int cut = std_unguarded_partition(p, first + 1, last, first);
            stk[3 * sp] = cut, stk[3 * sp + 1] = last, stk[3 * sp + 2] = depth, sp++;
            last = cut;
        }
    }
}

__device__ void std_unguarded_linear_insert(Pairs p, int last) {
    const float val = p.v[last];
    const int vix = p.ix[last];
    int next = last - 1;
    while (val < p.v[next]) {
        pmove(p, last, next);
        last = next;
        --next;
    }
    p.v[last] = val;
    p.ix[last] = vix;
}

__device__ void std_insertion_sort(Pairs p, int first, int last) {
    if (first == last) return;
    for (int i = first + 1; i != last; ++i) {
        if (pless(p, i, first)) {
            const float val = p.v[i];
            const int vix = p.ix[i];
            for (int j = i; j > first; j--) pmove(p, j, j - 1);
            p.v[first] = val;
            p.ix[first] = vix;
        } else {
            std_unguarded_linear_insert(p, i);
        }
    }
}

__device__ void std_sort(Pairs p, int n, int *stk) {
    if (n <= 0) return;
    std_introsort(p, n, stk);
    if (n > STD_SORT_THRESHOLD) {
        std_insertion_sort(p, 0, STD_SORT_THRESHOLD);
        for (int i = STD_SORT_THRESHOLD; i < n; i++) std_unguarded_linear_insert(p, i);
    } else {
        std_insertion_sort(p, 0, n);
    }
}

/* sampling.c's top_p_ on s[0..V): key[P] and ix[P] are scratch. */
__device__ void top_p_block(float *s, float *key, int *ix, int V, int P, float thr, int *shint) {
    const int tid = threadIdx.x;
    float *sorted = (float *)ix; /* the sorted values, kept while key holds the exps */
    for (int i = tid; i < P; i += blockDim.x) key[i] = i < V ? s[i] : INFINITY;
    __syncthreads();
    block_bitonic(key, P, false); /* ascending; the padding sorts last */
    const float mx = key[V - 1];
    if (!isfinite(mx)) return; /* torch's softmax is NaN there: nothing removed */
    __syncthreads(); /* every thread has read key[V - 1] before its owner overwrites it */
    for (int i = tid; i < V; i += blockDim.x) {
        sorted[i] = key[i];
        key[i] = cu_expf(key[i] - mx);
    }
    __syncthreads();
    if (tid == 0) {
        double sum = 0.0;
        for (int j = 0; j < V; j++) sum += (double)key[j];
        const float inv = 1.0f / (float)sum;
        double cum = 0.0;
        int J = 0; /* removed: sorted positions [0, J) */
        for (int j = 0; j < V - 1; j++) {
            cum += (double)(key[j] * inv);
            if ((float)cum <= thr)
                J = j + 1;
            else
                break; /* cum never decreases: the removed positions are a prefix */
        }
        shint[0] = J;
        /* does the cut split a run of equal values? */
        shint[1] = J > 0 && sorted[J - 1] == sorted[J];
    }
    __syncthreads();
    const int J = shint[0];
    if (J == 0) return;
    if (!shint[1]) {
        /* positions < J hold exactly the values below the one at J */
        const float cut = sorted[J];
        __syncthreads();
        for (int i = tid; i < V; i += blockDim.x)
            if (s[i] < cut) s[i] = -INFINITY;
        __syncthreads();
        return;
    }
    /* torch's order within the run decides which of its members go */
    __syncthreads();
    __shared__ int stk[3 * 64];
    if (tid == 0) {
        for (int i = 0; i < V; i++) key[i] = s[i], ix[i] = i;
        Pairs p = {key, ix};
        std_sort(p, V, stk);
        for (int j = 0; j < J; j++) s[ix[j]] = -INFINITY;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(SB)
    k_cp_sample(const float *logits, int64_t ldl, int V, int P, const SampParams *sps,
                uint64_t *rng, int32_t *codes, int ldc, int j, int32_t *fail) {
    extern __shared__ float smem[];
    float *s = smem;                 /* [V] scores */
    float *key = s + V;              /* [P] */
    int *ix = (int *)(key + P);      /* [P] */
    __shared__ float shv[32];
    __shared__ int shi[32];
    __shared__ int shint[4];
    const int row = blockIdx.x, tid = threadIdx.x;
    int32_t *code = codes + (size_t)row * ldc + j;
    if (fail[row] >= 0) {
        if (tid == 0) *code = 0;
        return;
    }
    const float *lg = logits + (size_t)row * ldl;
    if (tid == 0) shint[0] = 0;
    __syncthreads();
    int bad = 0;
    for (int i = tid; i < V; i += SB) {
        const float v = lg[i];
        s[i] = v;
        if (!isfinite(v)) bad = 1;
    }
    if (bad) shint[0] = 1;
    __syncthreads();
    if (shint[0]) {
        if (tid == 0) fail[row] = j, *code = 0;
        return;
    }
    const int top = block_argmax(s, V, shv, shi);
    const SampParams sp = sps[row];
    if (!sp.do_sample) {
        if (tid == 0) *code = top;
        return;
    }
    if (sp.temperature != 1.0f) {
        for (int i = tid; i < V; i += SB) s[i] = s[i] / sp.temperature;
        __syncthreads();
    }
    const float mx = s[top];
    if (sp.top_k != 0 && sp.top_k < V) {
        for (int i = tid; i < P; i += SB) key[i] = i < V ? s[i] : -INFINITY;
        __syncthreads();
        block_bitonic(key, P, true);
        const float kth = key[sp.top_k - 1];
        for (int i = tid; i < V; i += SB)
            if (s[i] < kth) s[i] = -INFINITY;
        __syncthreads();
    }
    if (sp.top_p < 1.0f) top_p_block(s, key, ix, V, P, sp.top_p_thr, shint);
    if (!isfinite(mx)) { /* all -inf: 0; else the first +inf */
        const int a = block_argmax(s, V, shv, shi);
        if (tid == 0) *code = a;
        return;
    }
    /* weights, compacted in index order: thread tid owns [tid*per, (tid+1)*per) */
    const int per = (V + SB - 1) / SB, i0 = tid * per, i1 = min(V, i0 + per);
    int cnt = 0;
    for (int i = i0; i < i1; i++) {
        const float e = s[i] == -INFINITY ? 0.0f : cu_expf(s[i] - mx);
        key[i] = e;
        cnt += e != 0.0f;
    }
    /* exclusive scan of cnt over the block */
    const int lane = tid & 31, w = tid >> 5;
    int inc = cnt;
    for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += t;
    }
    __syncthreads();
    if (lane == 31) shi[w] = inc;
    __syncthreads();
    if (w == 0) {
        int v = shi[lane], vi = v;
        for (int o = 1; o < 32; o <<= 1) {
            const int t = __shfl_up_sync(0xffffffffu, vi, o);
            if (lane >= o) vi += t;
        }
        shi[lane] = vi - v; /* exclusive offset of warp `lane` */
        if (lane == 31) shint[2] = vi;
    }
    __syncthreads();
    int off = shi[w] + inc - cnt;
    float *cw = s; /* s is no longer needed: compacted weights */
    __syncthreads();
    for (int i = i0; i < i1; i++)
        if (key[i] != 0.0f) cw[off] = key[i], ix[off] = i, off++;
    __syncthreads();
    if (tid == 0) {
        const int M = shint[2];
        double sum = 0.0;
        for (int m = 0; m < M; m++) sum += (double)cw[m];
        uint64_t st[4];
        uint64_t *g = rng + (size_t)row * 4;
        st[0] = g[0], st[1] = g[1], st[2] = g[2], st[3] = g[3];
        const double u = (double)(rng_next(st) >> 11) * 0x1.0p-53;
        g[0] = st[0], g[1] = st[1], g[2] = st[2], g[3] = st[3];
        const double target = u * sum;
        double acc = 0.0;
        int pick = -1, last = 0;
        for (int m = 0; m < M; m++) {
            acc += (double)cw[m];
            last = ix[m];
            if (target < acc) {
                pick = ix[m];
                break;
            }
        }
        *code = pick >= 0 ? pick : last;
    }
}

static int next_pow2(int v) {
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

static size_t sample_smem(int V) { return (size_t)V * 4 + (size_t)next_pow2(V) * 8; }

qtts_status cu_sample_init(int V, qtts_err *err) {
    const size_t bytes = sample_smem(V);
    if (V < 1 || bytes > 200 * 1024)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED,
                         "CUDA: code predictor vocabulary %d is too large for the device sampler", V);
    cudaError_t e = cudaFuncSetAttribute(k_cp_sample, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes);
    if (e != cudaSuccess)
        return qtts_fail(err, QTTS_ERR_UNSUPPORTED, "CUDA: sampler setup: %s", cudaGetErrorString(e));
    return QTTS_OK;
}

void cu_cp_sample(cudaStream_t st, const float *logits, int64_t ldl, int V,
                  const SampParams *sp, uint64_t *rng, int32_t *codes, int ldc, int j,
                  int32_t *fail, int n) {
    if (n <= 0) return;
    k_cp_sample<<<n, SB, sample_smem(V), st>>>(logits, ldl, V, next_pow2(V), sp, rng, codes, ldc,
                                               j, fail);
}
