/*
 * kernels.c - qtts_matmul: instruction-set dispatch and the thread split.
 *
 * The ISA table is chosen once, at first use, from CPUID/XGETBV (x86) or
 * the auxiliary vector (arm64): the first table in `compiled` whose
 * features the CPU and OS provide. The checks below are the only ISA
 * conditionals outside kernels_impl.h.
 *
 * A matmul is cut into chunks of whole output rows (all n rows of x for
 * each): each thread takes chunks from its own contiguous range of rows
 * and then from the others' (qtts_steal); qtts_matmul_multi puts the rows
 * of its matrices in one split, and qtts_matmul_swiglu gives each chunk
 * the same rows of both of its matrices and their SwiGLU. Because
 * every row is computed by the same code whatever its task, the result does
 * not depend on the number of threads or on the split. For quantized
 * weights the rows of x are quantized and packed once, on the calling
 * thread, before the split.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../base/thread.h"
#include "kernels_impl.h"

#if QTTS_ISA_X86
#include <cpuid.h>
#endif
#if QTTS_ISA_ARM64
#include <sys/auxv.h>
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

static const qtts_isa *const compiled[] = {
#if QTTS_ISA_X86
    &qtts_isa_avx512,
    &qtts_isa_avxvnni,
    &qtts_isa_avx2,
#endif
#if QTTS_ISA_ARM64
    &qtts_isa_neondot,
    &qtts_isa_neon,
#endif
    &qtts_isa_ref,
};

int qtts_isa_compiled(const qtts_isa **out, int cap) {
    int n = (int)QTTS_ARRAY_LEN(compiled);
    for (int i = 0; i < n && i < cap; i++) out[i] = compiled[i];
    return n;
}

#if QTTS_ISA_X86
typedef struct {
    bool avx2, avxvnni, avx512, avx512bf16;
} x86_features;

static x86_features x86_detect(void) {
    x86_features f = {0};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
               f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    unsigned xlo, xhi;
    __asm__ __volatile__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const bool os_ymm = (xlo & 0x06u) == 0x06u, os_zmm = (xlo & 0xe6u) == 0xe6u;
    if (!os_ymm || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30),
               avx512vl = b & (1u << 31), avx512vnni = c & (1u << 11);
    f.avx2 = avx2 && fma && f16c;
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512bw && avx512vl && avx512vnni;
    unsigned a1 = 0;
    if (__get_cpuid_count(7, 1, &a1, &b, &c, &d)) {
        f.avxvnni = f.avx2 && (a1 & (1u << 4));
        f.avx512bf16 = f.avx512 && (a1 & (1u << 5));
    }
    return f;
}
#endif

bool qtts_isa_usable(const qtts_isa *isa) {
    if (isa == &qtts_isa_ref) return true;
#if QTTS_ISA_X86
    const x86_features f = x86_detect();
    if (isa == &qtts_isa_avx512) return f.avx512;
    if (isa == &qtts_isa_avxvnni) return f.avxvnni;
    if (isa == &qtts_isa_avx2) return f.avx2;
#endif
#if QTTS_ISA_ARM64
    if (isa == &qtts_isa_neon) return true;
    if (isa == &qtts_isa_neondot) return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
    return false;
}

bool qtts_cpu_avx512bf16(void) {
#if QTTS_ISA_X86
    return x86_detect().avx512bf16;
#else
    return false;
#endif
}

bool qtts_cpu_arm_bf16(void) {
#if QTTS_ISA_ARM64
    return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#else
    return false;
#endif
}

static const qtts_isa *active;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

static void pick_active(void) {
    for (size_t i = 0; i < QTTS_ARRAY_LEN(compiled); i++)
        if (qtts_isa_usable(compiled[i])) {
            active = compiled[i];
            return;
        }
}

const qtts_isa *qtts_isa_active(void) {
    pthread_once(&active_once, pick_active);
    return active;
}

const char *qtts_kernels_isa(void) { return qtts_isa_active()->name; }

bool qtts_mat_resident_fits_llc(uint64_t bytes, uint64_t llc) {
    return llc > 0 && bytes <= llc / 3 && bytes <= QTTS_RESIDENT_MAX_BYTES;
}

bool qtts_mat_resident_fits(uint64_t bytes) {
    return qtts_mat_resident_fits_llc(bytes, qtts_llc_bytes());
}

/* ==== the row split ====================================================== */

/* Below this many multiply-adds a matmul runs on the caller alone. */
#define MIN_PARALLEL_MACS (64 * 1024)
/* The split's unit: whole groups of the kernels' row tiles. */
#define TASK_ROWS 16

/* The jobs of one split. Their rows, job after job, in units of TASK_ROWS
 * (a job's last unit may be short), are cut into one contiguous home range
 * per thread (qtts_steal): each thread streams its own span of the weights
 * front to back, so its tile prefetches run on into the rows it takes next
 * and the hardware prefetchers keep their streams. Rows claimed from one
 * shared counter (guided sizes, the two threads alternating) restarted
 * every thread's stream at each of its ~10 tasks a matmul: on the Intel
 * host `bench_kernels` read DRAM at 74-88% of the probe that way and at
 * 86-96% with the same rows in two fixed halves. Stealing keeps what the
 * shared counter gave: a thread slowed by another tenant leaves the rest
 * of its range to the others. */
typedef struct {
    const qtts_mm_job *job[QTTS_MATMUL_MAX];
    qtts_mm_fn fn[QTTS_MATMUL_MAX];
    bool swiglu;   /* two jobs, gate and up: a chunk does both for its rows and their SwiGLU */
    int tasked;    /* jobs whose rows make the units (swiglu: gate's alone) */
    int ustart[QTTS_MATMUL_MAX + 1];   /* job m's units: [ustart[m], ustart[m + 1]) */
    qtts_steal steal;
} mm_split;

/* y0[t, r] = silu(y0[t, r]) * y1[t, r] for rows [r0, r1) of every x row:
 * qtts_swiglu (kernels_ref.c) on each row's range, so the same bits. */
static void swiglu_rows(const mm_split *s, int r0, int r1) {
    const int R = s->job[0]->W->rows;
    for (int t = 0; t < s->job[0]->n; t++) {
        float *g = s->job[0]->y + (size_t)t * R;
        const float *u = s->job[1]->y + (size_t)t * R;
        qtts_swiglu(g + r0, g + r0, u + r0, (size_t)(r1 - r0));
    }
}

/* Sets the units of the first `tasked` jobs of s; returns their count. */
static int plan_units(mm_split *s, int tasked) {
    s->tasked = tasked;
    s->ustart[0] = 0;
    for (int m = 0; m < tasked; m++) {
        const int R = s->job[m]->W->rows;
        s->ustart[m + 1] = s->ustart[m] + (R + TASK_ROWS - 1) / TASK_ROWS;
    }
    return s->ustart[tasked];
}

/* Job m's rows [*r0, *r1) in units [a, b); false when they hold none of its. */
static bool unit_rows(const mm_split *s, int m, int a, int b, int *r0, int *r1) {
    const int u0 = QTTS_MAX(a, s->ustart[m]), u1 = QTTS_MIN(b, s->ustart[m + 1]);
    if (u0 >= u1) return false;
    *r0 = (u0 - s->ustart[m]) * TASK_ROWS;
    *r1 = QTTS_MIN(s->job[m]->W->rows, (u1 - s->ustart[m]) * TASK_ROWS);
    return true;
}

/* A SwiGLU split walks its rows in pieces of SWIGLU_ROWS, each piece's
 * gate rows, then its up rows, so that both matrices stream side by side
 * and each tile's prefetch (8 KB ahead in its own matrix) runs on into the
 * rows the thread takes next. Whole chunks of gate rows and then of up
 * rows (up to a quarter of a home range, ~200 KB at 0.6B int4) restarted
 * each stream cold at every switch: `ab_pairs` on the Intel host, 0.6B
 * int4, talker step and code predictor 0.98 (16-row pieces) and 0.98 /
 * 0.97 (8-row pieces, the AVX-512 decode block).
 * The SwiGLU of a chunk's rows runs once, after its last piece (its
 * outputs are still in L1): qtts_swiglu on 8 elements at a time ran one
 * exponential vector per call, the polynomial's latency unhidden, at
 * ~6.6 ns an element in the engine against ~1.5 on a few hundred (EPYC
 * host, 0.6B int4: 3.5% of `bench_backend`'s samples). */
#define SWIGLU_ROWS 8

/* Every row of units [a, b). */
static void run_units(const mm_split *s, int a, int b) {
    for (int m = 0; m < s->tasked; m++) {
        int r0, r1;
        if (!unit_rows(s, m, a, b, &r0, &r1)) continue;
        if (!s->swiglu) {
            s->fn[m](s->job[m], r0, r1);
            continue;
        }
        for (int r = r0; r < r1; r += SWIGLU_ROWS) {
            const int e = QTTS_MIN(r1, r + SWIGLU_ROWS);
            s->fn[0](s->job[0], r, e);
            s->fn[1](s->job[1], r, e);
        }
        swiglu_rows(s, r0, r1);
    }
}

static void mm_task(void *ctx, int p) {
    mm_split *s = ctx;
    int a, b;
    while (qtts_steal_next(&s->steal, p, &a, &b)) run_units(s, a, b);
}

/* swiglu: jobs[0] and jobs[1] have the same rows; the units cover
 * jobs[0]'s rows and do jobs[1]'s and the SwiGLU of the same rows. */
static void run_split(int count, const qtts_mm_job *const *jobs, const qtts_mm_fn *fns,
                      bool swiglu) {
    const int threads = qtts_threads_count();
    double macs = 0;
    for (int m = 0; m < count; m++)
        macs += (double)jobs[m]->n * jobs[m]->W->rows * jobs[m]->W->cols;
    mm_split s;
    s.swiglu = swiglu;
    for (int m = 0; m < count; m++) {
        s.job[m] = jobs[m];
        s.fn[m] = fns[m];
    }
    const int units = plan_units(&s, swiglu ? 1 : count);
    if (threads == 1 || macs < MIN_PARALLEL_MACS) {
        run_units(&s, 0, units);
        return;
    }
    qtts_steal_init(&s.steal, units, threads);
    qtts_parallel_for(threads, mm_task, &s);
}

/* ==== prefetching the next matmul's weights ==============================
 *
 * Between the matmuls of a decode step the pool's threads wait: a worker
 * while the caller runs the serial work (norms, sampling), every thread
 * while the last task of a split finishes. The step is bound by reading
 * weights, so that time is spent pulling the next matmul's weights into
 * L2 instead (qtts_threads_set_idle). Participant p prefetches the first
 * rows of home range p of the next split, the range it usually takes (the
 * caller claims task 0 as it publishes the job, a spinning worker task 1
 * right after).
 * A wrong guess costs bandwidth, never results: only prefetch
 * instructions touch the hinted addresses, and they cannot fault. The hint
 * is a seqlock: odd while written; a reader that sees it change drops what
 * it read. */
#define PF_PARTS 8                /* participants that get a region */
#define PF_CAP (256 * 1024)       /* bytes per participant: L2 holds it beside the current tiles */
#define PF_QUANTUM 2048           /* bytes per idle call: 32 lines */

static struct {
    _Atomic uint32_t seq;
    _Atomic int writing;
    _Atomic uintptr_t at[PF_PARTS][2];   /* per participant two ranges (gate and up rows) */
    _Atomic size_t len[PF_PARTS][2];
} pf;

/* The calling thread's progress through its region of hint `seq`. */
static _Thread_local struct {
    uint32_t seq;
    size_t done;
} pf_me;

static bool pf_idle(int part) {
    if (part >= PF_PARTS) return false;
    const uint32_t seq = atomic_load_explicit(&pf.seq, memory_order_acquire);
    if (seq & 1) return false;
    if (seq != pf_me.seq) {
        pf_me.seq = seq;
        pf_me.done = 0;
    }
    const uintptr_t a0 = atomic_load_explicit(&pf.at[part][0], memory_order_relaxed);
    const uintptr_t a1 = atomic_load_explicit(&pf.at[part][1], memory_order_relaxed);
    const size_t n0 = atomic_load_explicit(&pf.len[part][0], memory_order_relaxed);
    const size_t n1 = atomic_load_explicit(&pf.len[part][1], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&pf.seq, memory_order_relaxed) != seq) return false;
    const size_t done = pf_me.done;
    if (done >= n0 + n1) return false;
    const char *at = done < n0 ? (const char *)a0 + done : (const char *)a1 + (done - n0);
    const size_t left = done < n0 ? n0 - done : n0 + n1 - done;
    const size_t len = left < PF_QUANTUM ? left : PF_QUANTUM;
    for (size_t o = 0; o < len; o += 64) __builtin_prefetch(at + o, 0, 2);   /* to L2 */
    pf_me.done = done + len;
    return true;
}

static pthread_once_t pf_once = PTHREAD_ONCE_INIT;
static void pf_install(void) { qtts_threads_set_idle(pf_idle); }

void qtts_matmul_prefetch_next(int count, const qtts_mat *const *W, bool swiglu) {
    const int threads = qtts_threads_count();
    if (threads < 2 || count < 1 || count > QTTS_MATMUL_MAX) return;
    pthread_once(&pf_once, pf_install);
    if (atomic_exchange_explicit(&pf.writing, 1, memory_order_acquire)) return; /* another caller */
    mm_split s;
    s.tasked = 0;
    qtts_mm_job jobs[QTTS_MATMUL_MAX];
    bool ok = true;
    for (int m = 0; m < count; m++) {
        ok = ok && W[m]->rows > 0 && W[m]->data;
        jobs[m] = (qtts_mm_job){.W = W[m], .n = 1};
        s.job[m] = &jobs[m];
    }
    const int units = ok ? plan_units(&s, swiglu ? 1 : count) : 0;
    const uint32_t seq = atomic_load_explicit(&pf.seq, memory_order_relaxed);
    atomic_store_explicit(&pf.seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (int p = 0; p < PF_PARTS; p++) {
        uintptr_t at[2] = {0, 0};
        size_t len[2] = {0, 0};
        int a = 0, b = 0;   /* participants past the pool's get no region */
        if (p < threads) qtts_steal_home(units, threads, p, &a, &b);
        for (int m = 0; a < b && m < s.tasked; m++) {
            int r0, r1;
            if (!unit_rows(&s, m, a, b, &r0, &r1)) continue;
            const size_t stride = qtts_mat_stride(W[m]);
            const size_t off = (size_t)r0 * stride, bytes = (size_t)(r1 - r0) * stride;
            const size_t cap = swiglu ? PF_CAP / 2 : PF_CAP;
            for (int k = 0; k < (swiglu ? 2 : 1); k++) {
                at[k] = (uintptr_t)W[swiglu ? k : m]->data + off;
                len[k] = bytes < cap ? bytes : cap;
            }
            break;   /* the range's first matrix */
        }
        for (int k = 0; k < 2; k++) {
            atomic_store_explicit(&pf.at[p][k], at[k], memory_order_relaxed);
            atomic_store_explicit(&pf.len[p][k], len[k], memory_order_relaxed);
        }
    }
    atomic_store_explicit(&pf.seq, seq + 2, memory_order_release);
    atomic_store_explicit(&pf.writing, 0, memory_order_release);
}

static qtts_mm_fn mm_fn(const qtts_isa *isa, qtts_dtype dt) {
    switch (dt) {
    case QTTS_DT_F32: return isa->mm_f32;
    case QTTS_DT_BF16: return isa->mm_bf16;
    case QTTS_DT_Q8_0: return isa->mm_q8_0;
    default: return isa->mm_q4_0;
    }
}

static bool quantized(qtts_dtype dt) { return dt == QTTS_DT_Q8_0 || dt == QTTS_DT_Q4_0; }

/* count matmuls of one x on isa (count 1: with bias). */
static void matmul_jobs(const qtts_isa *isa, int count, float *const *y, const float *x, int n,
                        const qtts_mat *const *W, const float *bias, bool swiglu) {
    const int C = W[0]->cols;
    if (n <= 0) return;
    qtts_mm_job jobs[QTTS_MATMUL_MAX];
    const qtts_mm_job *jp[QTTS_MATMUL_MAX];
    qtts_mm_fn fns[QTTS_MATMUL_MAX];
    const bool q = quantized(W[0]->dtype);
    for (int m = 0; m < count; m++) {
        QTTS_ASSERT(W[m]->cols == C && quantized(W[m]->dtype) == q);
        if (q) QTTS_ASSERT(C % QTTS_QK == 0 && W[m]->packed);
        jobs[m] = (qtts_mm_job){.W = W[m], .n = n, .x = x, .bias = bias, .y = y[m]};
        jp[m] = &jobs[m];
        fns[m] = mm_fn(isa, W[m]->dtype);
    }
    if (!q) {
        run_split(count, jp, fns, swiglu);
        return;
    }
    /* Quantized activations, packed (qtts_mm_job) for m rows of x at a
     * time: all n when they fit the stack buffer or the heap, else as many
     * as fit the stack buffer (same results, W read more). One row's plain
     * codes and scales go through the tail of the buffer first. */
    const int nb = C / QTTS_QK, ng = qtts_packed_groups(C);
    const size_t row_bytes = qtts_packed_act_bytes(C), plain_bytes = (size_t)C + (size_t)nb * 4;
    _Alignas(64) uint8_t stack_buf[16 * 1024];
    uint8_t *buf = stack_buf, *heap = NULL;
    int mrows = plain_bytes + row_bytes <= sizeof stack_buf
                    ? (int)((sizeof stack_buf - plain_bytes) / row_bytes)
                    : 0;
    if (mrows < n && (heap = qtts_aligned_alloc(row_bytes * n + plain_bytes))) {
        buf = heap;
        mrows = n;
    }
    QTTS_ASSERT(mrows >= 1);
    for (int t0 = 0; t0 < n; t0 += mrows) {
        const int mt = QTTS_MIN(mrows, n - t0);
        int8_t *xq = (int8_t *)buf;                       /* 64-byte aligned */
        float *xd = (float *)(buf + (size_t)mt * ng * 512);
        int32_t *xs = (int32_t *)(xd + (size_t)mt * ng * 16);
        float *pd = (float *)(xs + (size_t)mt * ng * 16); /* one plain row */
        int8_t *pq = (int8_t *)(pd + nb);
        for (int t = 0; t < mt; t++) {
            isa->quantize_act(x + (size_t)(t0 + t) * C, C, pq, pd);
            isa->pack_act(pq, pd, C, xq + (size_t)t * ng * 512, xd + (size_t)t * ng * 16,
                          xs + (size_t)t * ng * 16);
        }
        for (int m = 0; m < count; m++) {
            jobs[m].n = mt;
            jobs[m].xq = xq;
            jobs[m].xd = xd;
            jobs[m].xs = xs;
            jobs[m].y = y[m] + (size_t)t0 * W[m]->rows;
        }
        run_split(count, jp, fns, swiglu);
    }
    qtts_free(heap);
}

void qtts_pack_act(const int8_t *q, const float *d, int cols, int8_t *xq, float *xd, int32_t *xs) {
    const int nb = cols / QTTS_QK, ng = qtts_packed_groups(cols);
    if (nb < ng * 16) {   /* a partial last group: its missing blocks count as zeros */
        memset(xq + (size_t)(ng - 1) * 512, 0, 512);
        memset(xd + (size_t)(ng - 1) * 16, 0, sizeof(float) * 16);
        memset(xs + (size_t)(ng - 1) * 16, 0, sizeof(int32_t) * 16);
    }
    for (int b = 0; b < nb; b++) {
        const int8_t *qb = q + (size_t)b * QTTS_QK;
        int8_t *dst = xq + (size_t)(b / 16) * 512 + 4 * (b % 16);
        int32_t sum = 0;
        for (int e = 0; e < QTTS_QK; e++) sum += qb[e];
        for (int k = 0; k < 8; k++) memcpy(dst + 64 * k, qb + 4 * k, 4);
        xd[b] = d[b];
        xs[b] = sum;
    }
}

void qtts_matmul_isa(const qtts_isa *isa, float *y, const float *x, int n, const qtts_mat *W,
                     const float *bias) {
    if (W->rows <= 0) return;
    matmul_jobs(isa, 1, &y, x, n, &W, bias, false);
}

void qtts_matmul_multi_isa(const qtts_isa *isa, int count, float *const *y, const float *x, int n,
                           const qtts_mat *const *W) {
    QTTS_ASSERT(count >= 1 && count <= QTTS_MATMUL_MAX);
    matmul_jobs(isa, count, y, x, n, W, NULL, false);   /* a 0-row matrix gets no task */
}

void qtts_matmul_multi(int count, float *const *y, const float *x, int n, const qtts_mat *const *W) {
    qtts_matmul_multi_isa(qtts_isa_active(), count, y, x, n, W);
}

void qtts_matmul_swiglu_isa(const qtts_isa *isa, float *y, float *up, const float *x, int n,
                            const qtts_mat *gate, const qtts_mat *upw) {
    QTTS_ASSERT(gate->rows == upw->rows);
    if (gate->rows <= 0) return;
    float *const ys[2] = {y, up};
    const qtts_mat *const W[2] = {gate, upw};
    matmul_jobs(isa, 2, ys, x, n, W, NULL, true);
}

void qtts_matmul_swiglu(float *y, float *up, const float *x, int n, const qtts_mat *gate,
                        const qtts_mat *upw) {
    qtts_matmul_swiglu_isa(qtts_isa_active(), y, up, x, n, gate, upw);
}

void qtts_matmul(float *y, const float *x, int n, const qtts_mat *W, const float *bias) {
    qtts_matmul_isa(qtts_isa_active(), y, x, n, W, bias);
}

uint64_t qtts_stream_read(const void *p, size_t n) {
    typedef uint64_t v2u64 __attribute__((vector_size(16)));
    /* Each 2 KB block prefetches, all at once, the block 4 KB ahead: the
     * fastest plain read measured on the EPYC (Zen 4) and Intel hosts
     * (bursts 2-16 KB ahead and a prefetch per line 1-8 KB ahead tried;
     * on the Zen 4, bursts 2-4 KB ahead 28-30 GB/s, a line at a time 22-28).
     * A plain read may burst where the kernels cannot (kernels_impl.h): it
     * has no arithmetic to stall. Its prefetches go to L1: to L2, as the
     * kernels' do, it read 20 GB/s on one thread against 25-29. Four named
     * accumulators keep the sums in registers. */
    enum { BLOCK = 2048, AHEAD = 4096 };
    const unsigned char *b = p;
    v2u64 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        for (size_t o = 0; o < BLOCK; o += 64) __builtin_prefetch(b + i + AHEAD + o, 0, 3);
        for (size_t o = i; o < i + BLOCK; o += 64) {
            v2u64 v0, v1, v2, v3;
            memcpy(&v0, b + o, 16);
            memcpy(&v1, b + o + 16, 16);
            memcpy(&v2, b + o + 32, 16);
            memcpy(&v3, b + o + 48, 16);
            a0 += v0;
            a1 += v1;
            a2 += v2;
            a3 += v3;
        }
    }
    uint64_t tail = 0;
    for (; i < n; i++) tail += b[i];
    const v2u64 s = a0 ^ a1 ^ a2 ^ a3;
    return s[0] ^ s[1] ^ tail;
}

void qtts_attn_scores(float *scores, size_t lds, const float *q, int nh, const float *k,
                      size_t ldk, int ctx, int d, float scale, const void *next, int next_rows) {
    qtts_isa_active()->attn_scores(scores, lds, q, nh, k, ldk, ctx, d, scale, next, next_rows);
}

void qtts_attn_out(float *out, const float *p, size_t ldp, int nh, const float *v, size_t ldv,
                   int ctx, int d, bool acc, const void *next, int next_rows) {
    qtts_isa_active()->attn_out(out, p, ldp, nh, v, ldv, ctx, d, acc, next, next_rows);
}

void qtts_attn_scores_bf16(float *scores, size_t lds, const float *q, int nh, const uint16_t *k,
                           size_t ldk, int ctx, int d, float scale, const void *next,
                           int next_rows) {
    qtts_isa_active()->attn_scores_bf16(scores, lds, q, nh, k, ldk, ctx, d, scale, next,
                                        next_rows);
}

void qtts_attn_out_bf16(float *out, const float *p, size_t ldp, int nh, const uint16_t *v,
                        size_t ldv, int ctx, int d, bool acc, const void *next, int next_rows) {
    qtts_isa_active()->attn_out_bf16(out, p, ldp, nh, v, ldv, ctx, d, acc, next, next_rows);
}

int qtts_attn_cold_rows(bool bf16) { return ATTN_PF_FAR(bf16); }

void qtts_attn_prefetch_rows(const void *p, size_t ld, int n, int d, bool bf16) {
    const size_t es = bf16 ? 2 : 4, bytes = (size_t)d * es;
    for (int j = 0; j < n; j++) {
        const char *r = (const char *)p + (size_t)j * ld * es;
        for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(r + i, 0, 2);   /* to L2 */
    }
}

void qtts_f32_to_bf16_row(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = qtts_f32_to_bf16(src[i]);
}

void qtts_bf16_to_f32_row(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = qtts_bf16_to_f32(src[i]);
}
