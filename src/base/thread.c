/*
 * thread.c - the pool behind thread.h.
 *
 * A job is published through three fields:
 *
 *   fn, ctx   plain fields, written by the caller before `work` is stored
 *             (release) and read by a worker only after it has claimed a
 *             task (acquire), so they never change under a reader: the
 *             caller rewrites them only after every claimed task finished.
 *   work      one 64-bit atomic: n_tasks in the high half, the next task
 *             to claim in the low half. A claim is one fetch-add; an index
 *             >= n_tasks means the job has no task left. A worker that is
 *             late by a whole job can only claim a task of the current job
 *             (the counter it adds to is the current one), which is fine.
 *   done      tasks finished; the caller returns when it reaches n_tasks.
 *
 * Workers wait for the generation counter `gen` to change: first spinning
 * (a CPU pause per poll, then also yielding the CPU; SPIN_NS in all), then
 * on the condition variable. The
 * sleep/wake hand-off is the usual Dekker pair on seq_cst atomics: a worker
 * increments `sleepers` and then re-reads `gen` under `mu`; the caller
 * bumps `gen` and then reads `sleepers`, broadcasting under `mu` if
 * anyone sleeps. Either the worker sees the new generation or the caller
 * sees the sleeper, so no wake-up is lost.
 */
#include "thread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

/* How long an idle worker polls before blocking. Between the matmuls of
 * one decode step the gaps are tens of microseconds; between steps
 * (sampling, attention over a long context) they can reach a millisecond.
 * After YIELD_AFTER_NS each poll also yields the CPU: on an idle machine
 * sched_yield returns at once, on a loaded one (more runnable threads than
 * cores) it lets others run, our own caller included when the scheduler
 * put both on one core, instead of burning the time slice. */
#define SPIN_NS 500000L
#define YIELD_AFTER_NS 20000L

static _Atomic(qtts_idle_fn) g_idle;

void qtts_threads_set_idle(qtts_idle_fn fn) { atomic_store(&g_idle, fn); }

/* One quantum of idle work; false when there is none. */
static inline bool idle_work(int participant) {
    qtts_idle_fn fn = atomic_load_explicit(&g_idle, memory_order_relaxed);
    return fn && fn(participant);
}

/* What a worker thread starts with. */
typedef struct {
    struct qtts_pool *p;
    int participant;   /* 1.. */
} worker_arg;

struct qtts_pool {
    int n;                      /* participants, the caller included */
    int n_started;              /* worker threads running */
    pthread_t *threads;
    worker_arg *args;           /* [n - 1] */
    pthread_mutex_t run_mu;     /* held by the thread whose job is running */

    qtts_task_fn fn;
    void *ctx;
    _Alignas(64) _Atomic uint64_t work;   /* n_tasks << 32 | next */
    _Alignas(64) _Atomic int done;
    _Alignas(64) _Atomic uint32_t gen;
    _Atomic int sleepers;
    _Atomic int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;

    /* A job lent to one worker (qtts_pool_lend). The lender takes the slot
     * (LEND_NONE -> LEND_SETUP), writes lend_fn and lend_ctx and stores
     * LEND_POSTED (release); the worker that moves it to LEND_RUNNING runs
     * the job and stores LEND_DONE (release), which the lender's wait
     * turns back to LEND_NONE. */
    _Alignas(64) _Atomic int lend;
    qtts_task_fn lend_fn;
    void *lend_ctx;
    /* The lent job's own parallel-fors (lend_run), published like a job
     * (sub_fn, sub_ctx; sub_work: n_tasks << 32 | next; sub_done) for the
     * lender to help with while it waits (qtts_pool_lend_wait), and the
     * idle workers (wait_gen). */
    qtts_task_fn sub_fn;
    void *sub_ctx;
    _Alignas(64) _Atomic uint64_t sub_work;
    _Alignas(64) _Atomic int sub_done;
};

enum { LEND_NONE, LEND_SETUP, LEND_POSTED, LEND_RUNNING, LEND_DONE };

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

int qtts_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

uint64_t qtts_parse_cache_size(const char *s) {
    uint64_t v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (digits == 12) return 0;   /* no cache is a terabyte; and no overflow below */
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (!digits) return 0;
    uint64_t unit = 1;
    if (*s == 'K') unit = 1024, s++;
    else if (*s == 'M') unit = 1024 * 1024, s++;
    else if (*s == 'G') unit = 1024 * 1024 * 1024, s++;
    if (*s == '\n') s++;
    return *s ? 0 : v * unit;
}

/* Reads a short sysfs file into buf (NUL-terminated); false if absent. */
static bool read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

static uint64_t g_llc;
static pthread_once_t g_llc_once = PTHREAD_ONCE_INIT;

static void find_llc(void) {
    int best = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_small(path, buf, sizeof buf)) continue;
        const int level = atoi(buf);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (level <= best || !read_small(path, buf, sizeof buf) || !strncmp(buf, "Instruction", 11))
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        const uint64_t bytes = read_small(path, buf, sizeof buf) ? qtts_parse_cache_size(buf) : 0;
        if (bytes) {
            best = level;
            g_llc = bytes;
        }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!g_llc) {
        const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        g_llc = l3 > 0 ? (uint64_t)l3 : l2 > 0 ? (uint64_t)l2 : 0;
    }
#endif
}

uint64_t qtts_llc_bytes(void) {
    pthread_once(&g_llc_once, find_llc);
    return g_llc;
}

/* Claims and runs tasks of the current job until none is left. */
static void run_tasks(qtts_pool *p) {
    for (;;) {
        uint64_t w = atomic_fetch_add_explicit(&p->work, 1, memory_order_acq_rel);
        uint32_t i = (uint32_t)w, n = (uint32_t)(w >> 32);
        if (i >= n) return;
        p->fn(p->ctx, (int)i);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static bool run_sub_tasks(qtts_pool *p);

/* Waits until gen differs from seen; returns the new value. Meanwhile it
 * runs the tasks of a lent job's parallel-fors, and idle work
 * (qtts_threads_set_idle) takes the place of the pause while there is any. */
static uint32_t wait_gen(qtts_pool *p, int participant, uint32_t seen) {
    long t0 = 0, t = 0;
    for (unsigned i = 1;; i++) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        if (run_sub_tasks(p)) {   /* helped a lent job: not idle, spin on */
            t0 = 0;
            continue;
        }
        if (!idle_work(participant)) cpu_relax();
        if (t0 && t - t0 > YIELD_AFTER_NS) sched_yield();
        if ((i & 63) == 0) {
            t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > SPIN_NS) break;
        }
    }
    uint32_t g;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static _Thread_local int t_participant;   /* 0: a caller; 1..: this worker's index */
static _Thread_local bool t_serial;       /* qtts_threads_set_local_serial */
static _Thread_local qtts_pool *t_lent;   /* the pool whose lent job this worker runs */
static _Thread_local bool t_in_sub;       /* in a task of a lent job's parallel-for */

int qtts_thread_participant(void) { return t_participant; }

static void *worker_main(void *arg) {
    qtts_pool *p = ((worker_arg *)arg)->p;
    const int participant = ((worker_arg *)arg)->participant;
    t_participant = participant;
    uint32_t seen = 0;
    for (;;) {
        seen = wait_gen(p, participant, seen);
        /* a posted lend first, so that one posted before the pool's
         * destruction still runs */
        int posted = LEND_POSTED;
        if (atomic_load_explicit(&p->lend, memory_order_acquire) == LEND_POSTED &&
            atomic_compare_exchange_strong(&p->lend, &posted, LEND_RUNNING)) {
            /* the lent job's own parallel-fors (lend_run) are this worker's,
             * the lender's while it waits, and any idle worker's: each as
             * its own participant, as in a job */
            t_lent = p;
            p->lend_fn(p->lend_ctx, 0);
            t_lent = NULL;
            atomic_store_explicit(&p->lend, LEND_DONE, memory_order_release);
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        run_tasks(p);
    }
}

qtts_pool *qtts_pool_create(int n_threads) {
    int n = n_threads > 0 ? n_threads : qtts_cpu_count();
    if (n > QTTS_MAX_THREADS) n = QTTS_MAX_THREADS;
    qtts_pool *p = qtts_aligned_alloc(sizeof *p);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    p->n = n;
    atomic_init(&p->work, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->gen, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->lend, LEND_NONE);
    if (n > 1) {
        if (!(p->threads = qtts_calloc((size_t)(n - 1), sizeof *p->threads)) ||
            !(p->args = qtts_calloc((size_t)(n - 1), sizeof *p->args)))
            goto fail;
        for (int i = 0; i < n - 1; i++) {
            p->args[i] = (worker_arg){p, i + 1};
            if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) goto fail;
            p->n_started++;
            pthread_setname_np(p->threads[i], "qtts-worker");
        }
    }
    return p;
fail:
    qtts_pool_destroy(p);
    return NULL;
}

void qtts_pool_destroy(qtts_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->run_mu);
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_unlock(&p->run_mu);
    pthread_mutex_destroy(&p->run_mu);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    qtts_free(p->threads);
    qtts_free(p->args);
    qtts_free(p);
}

int qtts_pool_size(const qtts_pool *p) { return p ? p->n : 1; }

/* A new generation for the workers, waking any that sleep. */
static void wake_workers(qtts_pool *p) {
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Claims and runs tasks of the lent job's current parallel-for until none
 * is left; whether it ran any. The claim is tried only while one is left,
 * so that the threads polling between them do not keep bumping the
 * counter. */
static bool run_sub_tasks(qtts_pool *p) {
    bool ran = false;
    for (;; ran = true) {
        uint64_t w = atomic_load_explicit(&p->sub_work, memory_order_acquire);
        if ((uint32_t)w >= (uint32_t)(w >> 32)) return ran;
        w = atomic_fetch_add_explicit(&p->sub_work, 1, memory_order_acq_rel);
        const uint32_t i = (uint32_t)w, n = (uint32_t)(w >> 32);
        if (i >= n) return ran;
        const bool in_sub = t_in_sub;
        t_in_sub = true;   /* a parallel-for inside the task runs on its thread */
        p->sub_fn(p->sub_ctx, (int)i);
        t_in_sub = in_sub;
        atomic_fetch_add_explicit(&p->sub_done, 1, memory_order_release);
    }
}

/* A parallel-for on the worker running a lent job: published for the
 * lender (while it waits) and the idle workers to help with, run here
 * until every task is claimed, then waited for. The same publication
 * rules as a job's: fn and ctx are rewritten only after every claimed
 * task finished. */
static void lend_run(qtts_pool *p, int n_tasks, qtts_task_fn fn, void *ctx) {
    p->sub_fn = fn;
    p->sub_ctx = ctx;
    atomic_store_explicit(&p->sub_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->sub_work, (uint64_t)n_tasks << 32, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) wake_workers(p);   /* idle ones help (wait_gen) */
    run_sub_tasks(p);
    for (unsigned i = 1; atomic_load_explicit(&p->sub_done, memory_order_acquire) < n_tasks; i++) {
        cpu_relax();
        if ((i & 255) == 0) sched_yield();   /* the lender was descheduled mid-task */
    }
}

bool qtts_pool_lend(qtts_pool *p, qtts_task_fn fn, void *ctx) {
    if (!p || p->n_started < 1 || t_serial || t_lent || t_in_sub) return false;
    int none = LEND_NONE;
    if (!atomic_compare_exchange_strong(&p->lend, &none, LEND_SETUP)) return false;
    p->lend_fn = fn;
    p->lend_ctx = ctx;
    atomic_store_explicit(&p->lend, LEND_POSTED, memory_order_release);
    wake_workers(p);
    return true;
}

bool qtts_pool_lend_done(qtts_pool *p) {
    const int st = p ? atomic_load_explicit(&p->lend, memory_order_acquire) : LEND_NONE;
    return st == LEND_NONE || st == LEND_DONE;
}

void qtts_pool_lend_wait(qtts_pool *p) {
    if (!p || atomic_load_explicit(&p->lend, memory_order_acquire) == LEND_NONE) return;
    /* help with the lent job's parallel-fors while it runs; the tasks run
     * as participant 0 with their own parallel-fors inline */
    const int outer = t_participant;
    t_participant = 0;
    for (unsigned i = 1; atomic_load_explicit(&p->lend, memory_order_acquire) != LEND_DONE; i++) {
        if (run_sub_tasks(p)) continue;
        cpu_relax();
        if ((i & 255) == 0) sched_yield();   /* more threads than cores: let the job run */
    }
    t_participant = outer;
    atomic_store_explicit(&p->lend, LEND_NONE, memory_order_release);
}

void qtts_pool_run(qtts_pool *p, int n_tasks, qtts_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    QTTS_ASSERT(n_tasks < (1 << 30));
    if (!p || p->n == 1 || n_tasks == 1 || pthread_mutex_trylock(&p->run_mu) != 0) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->work, (uint64_t)n_tasks << 32, memory_order_release);
    wake_workers(p);
    /* the caller is participant 0 of its own job, whatever it is elsewhere
     * (a worker of another pool), so that no two threads of a job share one */
    const int outer = t_participant;
    t_participant = 0;
    run_tasks(p);
    t_participant = outer;
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks; i++) {
        if (!idle_work(0)) cpu_relax();
        if ((i & 255) == 0) sched_yield();   /* a claimed task's thread was descheduled */
    }
    pthread_mutex_unlock(&p->run_mu);
}

/* ==== contiguous splits with stealing =================================== */

/* The owner takes 1/STEAL_CHUNK_DIV of what is left in its range (at least
 * one unit): large chunks early, one unit at the end, so a thief that finds
 * the range late waits at most a small chunk for the owner. */
#define STEAL_CHUNK_DIV 4

static inline uint64_t lohi(uint32_t lo, uint32_t hi) { return (uint64_t)hi << 32 | lo; }

void qtts_steal_home(int n, int parts, int p, int *a, int *b) {
    *a = (int)((int64_t)n * p / parts);
    *b = (int)((int64_t)n * (p + 1) / parts);
}

void qtts_steal_init(qtts_steal *s, int n, int parts) {
    QTTS_ASSERT(n >= 0 && parts >= 1 && parts <= QTTS_MAX_THREADS);
    s->parts = parts;
    for (int p = 0; p < parts; p++) {
        int a, b;
        qtts_steal_home(n, parts, p, &a, &b);
        atomic_init(&s->range[p].lohi, lohi((uint32_t)a, (uint32_t)b));
        atomic_init(&s->range[p].started, 0);
    }
}

bool qtts_steal_next(qtts_steal *s, int p, int *a, int *b) {
    QTTS_ASSERT(p >= 0 && p < s->parts);
    _Atomic uint64_t *own = &s->range[p].lohi;
    if (!atomic_load_explicit(&s->range[p].started, memory_order_relaxed))
        atomic_store_explicit(&s->range[p].started, 1, memory_order_relaxed);
    for (;;) {
        uint64_t v = atomic_load_explicit(own, memory_order_relaxed);
        for (;;) {
            const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
            if (lo >= hi) break;
            const uint32_t c = (hi - lo + STEAL_CHUNK_DIV - 1) / STEAL_CHUNK_DIV;
            if (atomic_compare_exchange_weak_explicit(own, &v, lohi(lo + c, hi),
                                                      memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *a = (int)lo;
                *b = (int)(lo + c);
                return true;
            }
        }
        /* Own range empty: nobody else writes it now (a thief takes only
         * from a range with units left, and its CAS expects the value it
         * read), so after a steal a plain store makes the stolen units ours. */
        int victim = -1;
        uint64_t vv = 0;
        uint32_t most = 0;
        bool whole = false;
        for (int q = 0; q < s->parts; q++) {
            const uint64_t w = atomic_load_explicit(&s->range[q].lohi, memory_order_relaxed);
            const uint32_t lo = (uint32_t)w, hi = (uint32_t)(w >> 32);
            if (lo >= hi) continue;
            if (!atomic_load_explicit(&s->range[q].started, memory_order_relaxed)) {
                victim = q;   /* nobody streams it yet: all of it, front to back */
                vv = w;
                whole = true;
                break;
            }
            if (hi - lo > most) {
                most = hi - lo;
                victim = q;
                vv = w;
            }
        }
        if (victim < 0) return false;
        const uint32_t lo = (uint32_t)vv, hi = (uint32_t)(vv >> 32);
        const uint32_t take = whole ? hi - lo : (hi - lo + 1) / 2;
        if (atomic_compare_exchange_strong_explicit(&s->range[victim].lohi, &vv,
                                                    lohi(lo, hi - take), memory_order_relaxed,
                                                    memory_order_relaxed))
            atomic_store_explicit(own, lohi(hi - take, hi), memory_order_relaxed);
        /* else the victim moved on: look again */
    }
}

/* ==== the process-wide pool ============================================ */

static _Atomic(qtts_pool *) g_pool;
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;

int qtts_threads_init(int n_threads) {
    int want = n_threads > 0 ? n_threads : qtts_cpu_count();
    if (want > QTTS_MAX_THREADS) want = QTTS_MAX_THREADS;
    pthread_mutex_lock(&g_pool_mu);
    qtts_pool *old = atomic_load(&g_pool);
    if (qtts_pool_size(old) != want) {
        atomic_store(&g_pool, NULL);
        qtts_pool_destroy(old);
        atomic_store(&g_pool, want > 1 ? qtts_pool_create(want) : NULL);
    }
    int n = qtts_pool_size(atomic_load(&g_pool));
    pthread_mutex_unlock(&g_pool_mu);
    return n;
}

int qtts_threads_count(void) {
    if (t_serial) return 1;
    /* a lent job's parallel-fors are its worker's, the lender's and the
     * idle workers', each as its own participant (lend_run) */
    return qtts_pool_size(atomic_load(&g_pool));
}

bool qtts_threads_lend(qtts_task_fn fn, void *ctx) {
    return qtts_pool_lend(atomic_load_explicit(&g_pool, memory_order_acquire), fn, ctx);
}
bool qtts_threads_lend_done(void) {
    return qtts_pool_lend_done(atomic_load_explicit(&g_pool, memory_order_acquire));
}
void qtts_threads_lend_wait(void) {
    qtts_pool_lend_wait(atomic_load_explicit(&g_pool, memory_order_acquire));
}

void qtts_threads_shutdown(void) { qtts_threads_init(1); }

void qtts_threads_set_local_serial(bool serial) { t_serial = serial; }

void qtts_parallel_for(int n_tasks, qtts_task_fn fn, void *ctx) {
    if (t_serial || t_in_sub || (t_lent && n_tasks == 1)) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i);
        return;
    }
    if (t_lent) {
        lend_run(t_lent, n_tasks, fn, ctx);
        return;
    }
    qtts_pool_run(atomic_load_explicit(&g_pool, memory_order_acquire), n_tasks, fn, ctx);
}

/* ==== the round trip between two threads ================================ */

#define RT_TRIPS 2000
#define RT_LIMIT_NS 50000000L   /* 50 ms */

typedef struct {
    _Alignas(64) _Atomic long flag;
    _Alignas(64) _Atomic int started[2];
    _Atomic int give_up;
    long t0;
    double ns;
} rt_job;

/* Spin until j->flag == want; false (and give_up set) past the time limit
 * or when the other task gave up. */
static bool rt_wait(rt_job *j, long want) {
    for (unsigned spins = 1;; spins++) {
        if (atomic_load_explicit(&j->flag, memory_order_acquire) == want) return true;
        if (atomic_load_explicit(&j->give_up, memory_order_relaxed)) return false;
        if (!(spins & 4095) && now_ns() - j->t0 > RT_LIMIT_NS) {
            atomic_store(&j->give_up, 1);
            return false;
        }
    }
}

static void rt_task(void *ctx, int p) {
    rt_job *j = ctx;
    atomic_store(&j->started[p], 1);
    /* both tasks may fall to one thread, one after the other: the first
     * then gives up waiting for the second, which finds give_up set */
    while (!atomic_load(&j->started[1 - p]))
        if (atomic_load(&j->give_up) || now_ns() - j->t0 > RT_LIMIT_NS) {
            atomic_store(&j->give_up, 1);
            return;
        }
    if (p == 0) {
        const long t = now_ns();
        for (long i = 0; i < RT_TRIPS; i++) {
            atomic_store_explicit(&j->flag, 2 * i + 1, memory_order_release);
            if (!rt_wait(j, 2 * i + 2)) return;
        }
        j->ns = (double)(now_ns() - t) / RT_TRIPS;
    } else {
        for (long i = 0; i < RT_TRIPS; i++) {
            if (!rt_wait(j, 2 * i + 1)) return;
            atomic_store_explicit(&j->flag, 2 * i + 2, memory_order_release);
        }
    }
}

double qtts_threads_round_trip_ns(void) {
    if (qtts_threads_count() < 2 || t_serial) return -1;
    rt_job j = {.t0 = now_ns(), .ns = -1};
    qtts_parallel_for(2, rt_task, &j);
    return atomic_load(&j.give_up) ? -1 : j.ns;
}
