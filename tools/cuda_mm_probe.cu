/*
 * cuda_mm_probe.cu - candidate ways for the device matmul to read its
 * activations, timed against the backend's own k_mm (ops_mm.cu, included
 * below) and checked bit for bit against it. A tool for a GPU session, not a
 * test; `make cuda-mm-probe` builds build-cuda/cuda_mm_probe.
 *
 * Why: on an H200 the BF16 k_mm with one activation row ran at 200-400 GB/s
 * (docs/BACKENDS.md, "Status on a GPU"). In its F32/BF16 loop every x[c]
 * is loaded behind its own branch right before the fma that uses it, so a
 * thread may wait out each load's latency in turn. The candidates keep every
 * thread's fma chain exactly (same lane, same order, same zeros past the
 * end), so their outputs must equal k_mm's bits:
 *
 *   hoist    the eight x values of each weight vector loaded first, with
 *            unconditional loads (index clamped, value zeroed past the end)
 *   perm     x copied once per call into the weights' permuted order
 *            (layout.h, qtts_cu_perm; zeros in the padding) by a small
 *            kernel, then read like the weights: two 16-byte loads per
 *            weight vector and activation row. Timed with and without
 *            that copy. Blocks of 16 rows (as k_mm) or 8.
 *
 * Each matrix is cycled through enough copies (>= 256 MB) that it comes from
 * HBM, not the 60 MB L2, as in a decode step. Shapes: the 0.6B talker's
 * (q/k/v as one 4096-row matrix, o, gate, down); 1 and 8 activation rows.
 *
 *   build-cuda/cuda_mm_probe [--reps N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>

#include "../src/backend/cuda/ops_mm.cu"

#define CK(x)                                                                        \
    do {                                                                             \
        cudaError_t e_ = (x);                                                        \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "cuda_mm_probe: %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The end of both candidates, as k_mm's MM_STORE: row r of activation rows
 * t0.. from the 16-lane fold. */
template <int NT>
__device__ __forceinline__ void probe_store(const MMArgs &a, const float *acc, int t0, int nt,
                                            int r, int l, unsigned mask) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= nt) continue;
        const float v = mm_fold(acc[t], mask);
        if (l == 0) a.o[0].y[(size_t)(t0 + t) * a.o[0].ldy + r] = v;
    }
}

/* The start of both candidates' block loop, as k_mm's: lane l's weights of
 * the MM_UNR weight vectors from b0 of row r (those before nb8). */
template <int DT>
__device__ __forceinline__ void probe_load_w(const DMat &W, int r, int b0, int nb8, int l,
                                             float (*w)[8]) {
#pragma unroll
    for (int q = 0; q < MM_UNR; q++)
        if (b0 + q < nb8) mm_load<DT>(W, r, b0 + q, l, w[q]);
}

/* ---- candidate: hoisted x loads -------------------------------------------- */

template <int DT, int NT>
__global__ void __launch_bounds__(256) k_mm_hoist(const __grid_constant__ MMArgs a) {
    const int grp = threadIdx.x >> 4, l = threadIdx.x & 15;
    const int r = blockIdx.x * MM_ROWS + grp;
    if (r >= a.W[0].rows) return;
    const DMat &W = a.W[0];
    const int t0 = blockIdx.y * NT, nt = min(NT, a.n - t0);
    const unsigned mask = 0xffffu << (threadIdx.x & 16);
    const int cols = W.cols, k16 = qtts_cu_k16(cols), nb8 = qtts_cu_nb8(cols);
    const float *x = a.x + (size_t)t0 * a.ldx;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int b0 = 0; b0 < nb8; b0 += MM_UNR) {
        float w[MM_UNR][8];
        probe_load_w<DT>(W, r, b0, nb8, l, w);
#pragma unroll
        for (int q = 0; q < MM_UNR; q++) {
            const int b = b0 + q;
            const int kmax = b < nb8 ? min(8, k16 - 8 * b) : 0;
            float xv[8][NT];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int c = 16 * (8 * b + j) + l, cc = min(c, cols - 1);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const float v = __ldg(x + (size_t)min(t, nt - 1) * a.ldx + cc);
                    xv[j][t] = c < cols ? v : 0.0f;
                }
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int t = 0; t < NT; t++)
                    if (j < kmax && t < nt) acc[t] = fmaf(w[q][j], xv[j][t], acc[t]);
        }
    }
    probe_store<NT>(a, acc, t0, nt, r, l, mask);
}

/* ---- candidate: x in the weights' permuted order ----------------------------- */

/* xp[t][qtts_cu_perm(c)] = x[t][c]; the padding of each row stays 0 (memset). */
__global__ void k_perm_x(const float *x, int ldx, int cols, float *xp, int64_t ldp) {
    const int t = blockIdx.y;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
        xp[(size_t)t * ldp + qtts_cu_perm(c)] = x[(size_t)t * ldx + c];
}

template <int DT, int NT, int ROWS>
__global__ void __launch_bounds__(ROWS * 16) k_mm_perm(const __grid_constant__ MMArgs a,
                                                       const float *xp, int64_t ldp) {
    const int grp = threadIdx.x >> 4, l = threadIdx.x & 15;
    const int r = blockIdx.x * ROWS + grp;
    if (r >= a.W[0].rows) return;
    const DMat &W = a.W[0];
    const int t0 = blockIdx.y * NT, nt = min(NT, a.n - t0);
    const unsigned mask = 0xffffu << (threadIdx.x & 16);
    const int cols = W.cols, k16 = qtts_cu_k16(cols), nb8 = qtts_cu_nb8(cols);
    const float *xr = xp + (size_t)t0 * ldp + l * 8;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int b0 = 0; b0 < nb8; b0 += MM_UNR) {
        float w[MM_UNR][8];
        probe_load_w<DT>(W, r, b0, nb8, l, w);
#pragma unroll
        for (int q = 0; q < MM_UNR; q++) {
            const int b = b0 + q;
            if (b >= nb8) break;
            const int kmax = min(8, k16 - 8 * b);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= nt) break;
                /* x[16 * (8b + j) + l] for j = 0..7, as the weights: 0 past the end */
                const float4 *p = (const float4 *)(xr + (size_t)t * ldp + (size_t)b * 128);
                const float4 u0 = __ldg(p), u1 = __ldg(p + 1);
                const float xv[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (j < kmax) acc[t] = fmaf(w[q][j], xv[j], acc[t]);
            }
        }
    }
    probe_store<NT>(a, acc, t0, nt, r, l, mask);
}

/* ---- host ---------------------------------------------------------------------- */

static uint32_t g_seed = 12345u;
static float frand(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return ((g_seed >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f;
}

typedef void (*launch_fn)(const MMArgs &a, const float *xp, int64_t ldp, cudaStream_t st);

template <int NT>
static void run_k_mm(const MMArgs &a, const float *, int64_t, cudaStream_t st) {
    const unsigned gx = (unsigned)((a.W[0].rows + MM_ROWS - 1) / MM_ROWS);
    k_mm<CU_BF16, NT><<<dim3(gx, (unsigned)((a.n + NT - 1) / NT)), 256, 0, st>>>(a);
}
template <int NT>
static void run_hoist(const MMArgs &a, const float *, int64_t, cudaStream_t st) {
    const unsigned gx = (unsigned)((a.W[0].rows + MM_ROWS - 1) / MM_ROWS);
    k_mm_hoist<CU_BF16, NT><<<dim3(gx, (unsigned)((a.n + NT - 1) / NT)), 256, 0, st>>>(a);
}
template <int NT, int ROWS, bool COPY>
static void run_perm(const MMArgs &a, const float *xp, int64_t ldp, cudaStream_t st) {
    if (COPY)
        k_perm_x<<<dim3(4, (unsigned)a.n), 256, 0, st>>>(a.x, a.ldx, a.W[0].cols, (float *)xp, ldp);
    const unsigned gx = (unsigned)((a.W[0].rows + ROWS - 1) / ROWS);
    k_mm_perm<CU_BF16, NT, ROWS><<<dim3(gx, (unsigned)((a.n + NT - 1) / NT)), ROWS * 16, 0, st>>>(
        a, xp, ldp);
}

struct Variant {
    const char *name;
    launch_fn one, eight;  /* for n = 1 and n = 8 */
};

int main(int argc, char **argv) {
    int reps = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cuda_mm_probe [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("cuda_mm_probe: %s, %d SMs; BF16 weights, times per launch (median of 5 batches of %d)\n",
           prop.name, prop.multiProcessorCount, reps);
    static const Variant vars[] = {
        {"k_mm (backend)", run_k_mm<1>, run_k_mm<8>},
        {"hoist", run_hoist<1>, run_hoist<8>},
        {"perm, 16 rows + copy", run_perm<1, 16, true>, run_perm<8, 16, true>},
        {"perm, 16 rows", run_perm<1, 16, false>, run_perm<8, 16, false>},
        {"perm, 8 rows", run_perm<1, 8, false>, run_perm<8, 8, false>},
    };
    const int nv = (int)(sizeof vars / sizeof vars[0]);
    static const struct { const char *name; int rows, cols; } shapes[] = {
        {"q/k/v", 4096, 1024}, {"o", 1024, 2048}, {"gate", 3072, 1024}, {"down", 1024, 3072}};
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int fails = 0;
    for (const auto &sh : shapes) {
        const int64_t re = qtts_cu_row_elems(sh.cols);
        const size_t mbytes = (size_t)sh.rows * re * 2;
        const int copies = (int)((256u << 20) / mbytes + 1);
        /* one random matrix in the device layout (zeros in the padding), copied */
        uint16_t *h = (uint16_t *)calloc((size_t)sh.rows * re, 2);
        for (int r = 0; r < sh.rows; r++)
            for (int c = 0; c < sh.cols; c++) {
                float f = frand() * 0.05f;
                uint32_t u;
                memcpy(&u, &f, 4);
                h[(size_t)r * re + qtts_cu_perm(c)] = (uint16_t)(u >> 16);
            }
        uint16_t *wd;
        CK(cudaMalloc((void **)&wd, mbytes * copies));
        for (int k = 0; k < copies; k++)
            CK(cudaMemcpy((char *)wd + mbytes * k, h, mbytes, cudaMemcpyHostToDevice));
        free(h);
        for (int n : {1, 8}) {
            float *xh = (float *)malloc(sizeof(float) * n * sh.cols);
            for (int i = 0; i < n * sh.cols; i++) xh[i] = frand();
            float *xd, *xp, *yd;
            CK(cudaMalloc((void **)&xd, sizeof(float) * n * sh.cols));
            CK(cudaMalloc((void **)&xp, sizeof(float) * n * re));
            CK(cudaMalloc((void **)&yd, sizeof(float) * n * sh.rows));
            CK(cudaMemcpy(xd, xh, sizeof(float) * n * sh.cols, cudaMemcpyHostToDevice));
            CK(cudaMemset(xp, 0, sizeof(float) * n * re));
            /* the permuted copy for the variants timed without it */
            k_perm_x<<<dim3(4, (unsigned)n), 256, 0, st>>>(xd, sh.cols, sh.cols, xp, re);
            float *ref = (float *)malloc(sizeof(float) * n * sh.rows);
            float *got = (float *)malloc(sizeof(float) * n * sh.rows);
            printf("%-6s %4d x %4d, %d row%s: ", sh.name, sh.rows, sh.cols, n, n > 1 ? "s" : " ");
            for (int v = 0; v < nv; v++) {
                MMArgs a;
                memset(&a, 0, sizeof a);
                a.nm = 1;
                a.mode = MM_STORE;
                a.W[0] = DMat{wd, NULL, sh.rows, sh.cols, CU_BF16, re};
                a.o[0] = MMOut{yd, sh.rows, NULL, NULL};
                a.row0[1] = sh.rows;
                a.x = xd;
                a.ldx = sh.cols;
                a.n = n;
                const launch_fn f = n == 1 ? vars[v].one : vars[v].eight;
                CK(cudaMemset(yd, 0xff, sizeof(float) * n * sh.rows));
                f(a, xp, re, st);
                CK(cudaStreamSynchronize(st));
                CK(cudaGetLastError());
                CK(cudaMemcpy(v ? got : ref, yd, sizeof(float) * n * sh.rows, cudaMemcpyDeviceToHost));
                const bool same = !v || !memcmp(ref, got, sizeof(float) * n * sh.rows);
                fails += !same;
                float ms[5];
                for (int m = 0; m < 5; m++) {
                    CK(cudaEventRecord(e0, st));
                    for (int i = 0; i < reps; i++) {
                        a.W[0].w = (const char *)wd + mbytes * (size_t)(i % copies);
                        f(a, xp, re, st);
                    }
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    CK(cudaEventElapsedTime(&ms[m], e0, e1));
                }
                for (int i = 0; i < 5; i++)   /* median of 5 */
                    for (int j = i + 1; j < 5; j++)
                        if (ms[j] < ms[i]) { const float t = ms[i]; ms[i] = ms[j]; ms[j] = t; }
                const double us = 1e3 * ms[2] / reps;
                printf("%s %.1f us (%.0f GB/s)%s%s", vars[v].name, us, mbytes / us / 1e3,
                       same ? "" : " BITS DIFFER", v + 1 < nv ? "; " : "\n");
            }
            free(xh), free(ref), free(got);
            CK(cudaFree(xd));
            CK(cudaFree(xp));
            CK(cudaFree(yd));
        }
        CK(cudaFree(wd));
    }
    printf("%s\n", fails ? "cuda_mm_probe: SOME CANDIDATES CHANGED THE BITS" : "all candidates: same bits as k_mm");
    return fails ? 1 : 0;
}
