/*
 * test_thread.c - the thread pool (base/thread.h): every task of every job
 * runs exactly once and its writes are visible to the caller, over tens of
 * thousands of dispatches at 1, 2 and 4 threads; workers that went to
 * sleep wake up; a second caller and a nested parallel-for run inline
 * instead of deadlocking; the process-wide pool follows qtts_threads_init;
 * the idle hook runs for the caller and the workers while they wait; the
 * contiguous split with stealing (qtts_steal) hands every unit out once,
 * each thread of a job has its own participant index,
 * keeps each part's chunks in order and moves a slow part's work; the
 * cache-size parser behind qtts_llc_bytes; lending a worker (2 and 4
 * threads): the lent job runs on a worker, its parallel-fors run every
 * task once, each thread as its own participant (the lender 0), nested
 * parallel-fors inline, a task that needs a second thread to finish gets
 * one (the waiting lender or an idle worker), the lender's own jobs run
 * meanwhile, one lend at a time, none with one thread or from a serial
 * caller or from inside the lent job.
 * Built under ThreadSanitizer by `make test-tsan`. Prints the dispatch
 * cost for information.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "base/base.h"
#include "base/thread.h"

#define MAX_TASKS 1000

typedef struct {
    int gen;
    int out[MAX_TASKS];       /* plain writes, one task each */
    _Atomic int runs;
} job;

static void job_task(void *ctx, int i) {
    job *j = ctx;
    j->out[i] = j->gen * 7 + i;
    atomic_fetch_add_explicit(&j->runs, 1, memory_order_relaxed);
}

/* Runs `rounds` jobs of varying size on p; false on the first wrong one. */
static bool run_rounds(qtts_pool *p, int rounds, int sleep_every) {
    static const int sizes[] = {1, 2, 3, 7, 16, 64, 1000};
    job j;
    for (int g = 0; g < rounds; g++) {
        const int n = sizes[g % (int)QTTS_ARRAY_LEN(sizes)];
        j.gen = g;
        atomic_store(&j.runs, 0);
        for (int i = 0; i < n; i++) j.out[i] = -1;
        qtts_pool_run(p, n, job_task, &j);
        if (atomic_load(&j.runs) != n) {
            fprintf(stderr, "  round %d: %d of %d tasks ran\n", g, atomic_load(&j.runs), n);
            return false;
        }
        for (int i = 0; i < n; i++)
            if (j.out[i] != g * 7 + i) {
                fprintf(stderr, "  round %d: task %d wrote %d\n", g, i, j.out[i]);
                return false;
            }
        if (sleep_every && g % sleep_every == sleep_every - 1) {
            struct timespec ts = {0, 3 * 1000 * 1000};   /* past the spin: workers block */
            nanosleep(&ts, NULL);
        }
    }
    return true;
}

static void test_many_dispatches(void) {
    const int counts[] = {1, 2, 4};
    for (size_t c = 0; c < QTTS_ARRAY_LEN(counts); c++) {
        qtts_pool *p = qtts_pool_create(counts[c]);
        REQUIRE(p != NULL, "pool of %d", counts[c]);
        CHECK(qtts_pool_size(p) == counts[c], "size %d", qtts_pool_size(p));
        CHECK(run_rounds(p, 20000, 0), "%d threads: back-to-back jobs", counts[c]);
        CHECK(run_rounds(p, 40, 8), "%d threads: jobs after the workers slept", counts[c]);
        qtts_pool_destroy(p);
    }
    qtts_pool_run(NULL, 5, job_task, &(job){0});   /* NULL pool: inline */
    qtts_pool_destroy(NULL);
}

static void test_zero_means_all_cpus(void) {
    qtts_pool *p = qtts_pool_create(0);
    REQUIRE(p != NULL, "pool");
    CHECK(qtts_pool_size(p) == QTTS_MIN(qtts_cpu_count(), QTTS_MAX_THREADS), "%d vs %d cpus",
          qtts_pool_size(p), qtts_cpu_count());
    CHECK(run_rounds(p, 200, 0), "jobs");
    qtts_pool_destroy(p);
}

/* Two threads dispatch on one pool at once: whichever finds it busy runs
 * its job inline; both must be complete and correct. */
typedef struct {
    qtts_pool *p;
    bool ok;
} caller_arg;

static void *caller_main(void *arg) {
    caller_arg *a = arg;
    a->ok = run_rounds(a->p, 3000, 0);
    return NULL;
}

static void test_concurrent_callers(void) {
    qtts_pool *p = qtts_pool_create(4);
    REQUIRE(p != NULL, "pool");
    caller_arg a[2] = {{p, false}, {p, false}};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, caller_main, &a[0]) == 0, "thread");
    caller_main(&a[1]);
    pthread_join(th, NULL);
    CHECK(a[0].ok && a[1].ok, "both callers' jobs complete");
    qtts_pool_destroy(p);
}

/* A task that itself dispatches on the same pool. */
typedef struct {
    qtts_pool *p;
    _Atomic int inner_runs;
} nested_job;

static void inner_task(void *ctx, int i) {
    atomic_fetch_add(&((nested_job *)ctx)->inner_runs, 1);
}

static void outer_task(void *ctx, int i) {
    nested_job *j = ctx;
    qtts_pool_run(j->p, 10, inner_task, j);
}

static void test_nested(void) {
    qtts_pool *p = qtts_pool_create(2);
    REQUIRE(p != NULL, "pool");
    nested_job j = {p, 0};
    for (int r = 0; r < 100; r++) qtts_pool_run(p, 8, outer_task, &j);
    CHECK(atomic_load(&j.inner_runs) == 100 * 8 * 10, "%d inner tasks", atomic_load(&j.inner_runs));
    qtts_pool_destroy(p);
}

/* qtts_thread_participant: within a job each thread has its own index
 * below the pool's size, the job's caller 0, also when the caller is a
 * worker of another pool (its own index there restored after). */
typedef struct {
    qtts_pool *inner;                 /* run a job on it from each task, or NULL */
    int spin;                         /* a task's busy loop, so that every thread gets some */
    _Atomic unsigned long who[4];     /* participant -> pthread_self of a task's thread */
    _Atomic int bad;
} part_job;

static void part_task(void *ctx, int i) {
    part_job *j = ctx;
    const int me = qtts_thread_participant();
    if (me < 0 || me >= 4) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    unsigned long self = (unsigned long)pthread_self(), none = 0;
    if (!atomic_compare_exchange_strong(&j->who[me], &none, self) && none != self)
        atomic_fetch_add(&j->bad, 1);   /* another thread had this index */
    if (j->inner && me != 0) {   /* a job whose caller is a worker of p */
        part_job in = {.spin = 5000};
        qtts_pool_run(j->inner, 64, part_task, &in);
        if (atomic_load(&in.bad)) atomic_fetch_add(&j->bad, 1);
        if (qtts_thread_participant() != me) atomic_fetch_add(&j->bad, 1);
    }
    for (volatile int k = 0; k < j->spin; k++) (void)i;
}

static void test_participant(void) {
    qtts_pool *p = qtts_pool_create(3), *q = qtts_pool_create(2);
    REQUIRE(p && q, "pools");
    CHECK(qtts_thread_participant() == 0, "a plain thread is 0");
    for (int r = 0; r < 200; r++) {
        part_job j = {.inner = r % 2 ? q : NULL, .spin = 50000};
        qtts_pool_run(p, 32, part_task, &j);
        CHECK(atomic_load(&j.bad) == 0, "round %d: %d bad tasks", r, atomic_load(&j.bad));
        const unsigned long w0 = atomic_load(&j.who[0]);   /* 0: the workers took every task */
        CHECK(w0 == 0 || w0 == (unsigned long)pthread_self(), "round %d: the caller is 0", r);
        CHECK(atomic_load(&j.who[3]) == 0, "round %d: index 3 in a pool of 3", r);
    }
    qtts_pool_destroy(p);
    qtts_pool_destroy(q);
}

static void test_global_pool(void) {
    CHECK(qtts_threads_init(2) == 2, "two threads");
    CHECK(qtts_threads_count() == 2, "count");
    CHECK(qtts_threads_init(2) == 2, "same size again");
    job j = {.gen = 3};
    atomic_init(&j.runs, 0);
    qtts_parallel_for(100, job_task, &j);
    CHECK(atomic_load(&j.runs) == 100 && j.out[99] == 3 * 7 + 99, "parallel_for");
    CHECK(qtts_threads_init(4) == 4, "resize");
    atomic_store(&j.runs, 0);
    qtts_parallel_for(100, job_task, &j);
    CHECK(atomic_load(&j.runs) == 100, "after resize");
    qtts_threads_shutdown();
    CHECK(qtts_threads_count() == 1, "shut down");
    atomic_store(&j.runs, 0);
    qtts_parallel_for(10, job_task, &j);
    CHECK(atomic_load(&j.runs) == 10, "inline after shutdown");
}

static void busy_wait_us(double us) {
    const double t0 = qtts_now();
    while (qtts_now() - t0 < us * 1e-6) {
    }
}

/* A task of about 5 microseconds of work. */
static void busy_task(void *ctx, int i) { busy_wait_us(5); }

/* Informational: wall time of a job of two 5 us tasks (10 us on one
 * thread, 5 us plus the dispatch cost on two). */
static void test_dispatch_latency(void) {
    for (int n = 1; n <= 2; n++) {
        qtts_pool *p = qtts_pool_create(n);
        REQUIRE(p != NULL, "pool");
        const int reps = 2000;
        double best = 1e9;
        for (int k = 0; k < 5; k++) {
            double t0 = qtts_now();
            for (int i = 0; i < reps; i++) qtts_pool_run(p, 2, busy_task, NULL);
            double us = (qtts_now() - t0) / reps * 1e6;
            best = us < best ? us : best;
        }
        printf("  %d thread(s): %.2f us per job of 2 x 5 us tasks (best of 5 x %d)\n", n, best, reps);
        qtts_pool_destroy(p);
    }
}

/* The idle hook (qtts_threads_set_idle): called by workers between jobs
 * and by the caller while the last tasks finish, with their participant
 * numbers, and jobs stay exact while it works. */
static _Atomic int idle_calls[4];
static _Atomic int idle_bad;

static bool idle_count(int participant) {
    if (participant < 0 || participant >= 4) {
        atomic_store(&idle_bad, participant + 1000);
        return false;
    }
    /* more work on every other call */
    return (atomic_fetch_add_explicit(&idle_calls[participant], 1, memory_order_relaxed) & 1) == 0;
}

/* A job of two tasks that two threads run at once: each task waits (up
 * to 0.1 s) until both have started, so one thread cannot take both even
 * when the other is descheduled on a busy machine. Then the worker's task
 * takes 200 us more, so the caller waits for it, whichever task each
 * thread claimed. */
typedef struct {
    pthread_t caller;
    _Atomic int started, finished;
} slow_job;

static void slow_task(void *ctx, int i) {
    slow_job *j = ctx;
    atomic_fetch_add(&j->started, 1);
    const double t0 = qtts_now();
    while (atomic_load(&j->started) < 2 && qtts_now() - t0 < 0.1) {
    }
    if (!pthread_equal(pthread_self(), j->caller)) busy_wait_us(200);
    atomic_fetch_add_explicit(&j->finished, 1, memory_order_relaxed);
}

static void test_idle_hook(void) {
    qtts_pool *p = qtts_pool_create(2);
    REQUIRE(p != NULL, "pool");
    qtts_threads_set_idle(idle_count);
    CHECK(run_rounds(p, 2000, 500), "jobs with an idle hook");
    /* until both have waited (the caller takes task 0 in most jobs) */
    int runs = 0, r = 0;
    for (; r < 500 && !(atomic_load(&idle_calls[0]) && atomic_load(&idle_calls[1])); r++) {
        slow_job j = {.caller = pthread_self()};
        qtts_pool_run(p, 2, slow_task, &j);
        runs += atomic_load(&j.finished);
    }
    CHECK(runs == 2 * r, "%d of %d slow tasks", runs, 2 * r);
    CHECK(atomic_load(&idle_calls[0]) > 0, "the caller never ran idle work");
    CHECK(atomic_load(&idle_calls[1]) > 0, "the worker never ran idle work");
    CHECK(atomic_load(&idle_calls[2]) == 0 && atomic_load(&idle_calls[3]) == 0,
          "participants 2, 3 of a 2-thread pool were called");
    CHECK(atomic_load(&idle_bad) == 0, "participant %d", atomic_load(&idle_bad) - 1000);
    qtts_threads_set_idle(NULL);
    const int before = atomic_load(&idle_calls[1]);
    CHECK(run_rounds(p, 200, 0), "jobs after the hook is removed");
    CHECK(atomic_load(&idle_calls[1]) == before, "the removed hook was called");
    qtts_pool_destroy(p);
}

/* ==== qtts_steal ========================================================== */

/* One part alone: its home range front to back, then each other range whole
 * (none has started) in order: the chunks tile [0, n) ascending. */
static void test_steal_serial(void) {
    static const int ns[] = {0, 1, 2, 3, 7, 64, 301, 1000};
    for (size_t i = 0; i < QTTS_ARRAY_LEN(ns); i++)
        for (int parts = 1; parts <= 5; parts++) {
            qtts_steal s;
            qtts_steal_init(&s, ns[i], parts);
            int next = 0, a, b;
            /* part 0 first, as the caller claims task 0 */
            while (qtts_steal_next(&s, 0, &a, &b)) {
                CHECK(a < b, "n=%d parts=%d: empty chunk [%d, %d)", ns[i], parts, a, b);
                if (a != next) {
                    CHECK(false, "n=%d parts=%d: chunk [%d, %d) after %d", ns[i], parts, a, b, next);
                    break;
                }
                next = b;
            }
            CHECK(next == ns[i], "n=%d parts=%d: %d units handed out", ns[i], parts, next);
            for (int p = 1; p < parts; p++)
                CHECK(!qtts_steal_next(&s, p, &a, &b), "n=%d parts=%d: part %d got [%d, %d) after "
                      "the end", ns[i], parts, p, a, b);
        }
}

/* Two parts taking turns, one chunk each: each part's chunks follow each
 * other in memory until a range runs dry, and the units are handed out once. */
static void test_steal_contiguous(void) {
    const int n = 192;   /* the CP's q/k/v at 16-row units, say */
    qtts_steal s;
    qtts_steal_init(&s, n, 2);
    int seen[192] = {0}, last_end[2] = {-1, -1}, jumps[2] = {0, 0}, a, b;
    bool more[2] = {true, true};
    while (more[0] || more[1])
        for (int p = 0; p < 2; p++) {
            if (!more[p] || !(more[p] = qtts_steal_next(&s, p, &a, &b))) continue;
            if (last_end[p] >= 0 && a != last_end[p]) jumps[p]++;
            last_end[p] = b;
            for (int u = a; u < b; u++) seen[u]++;
        }
    for (int u = 0; u < n; u++) CHECK(seen[u] == 1, "unit %d handed out %d times", u, seen[u]);
    /* in lockstep the two ranges end together: at most a steal of the last unit */
    CHECK(jumps[0] <= 1 && jumps[1] <= 1, "the parts jumped %d and %d times", jumps[0], jumps[1]);
}

typedef struct {
    qtts_steal s;
    _Atomic int count[4000];
    int n, slow;   /* part `slow` waits first, so the others steal from it */
    _Atomic int stolen;
} steal_job;

static void steal_task(void *ctx, int p) {
    steal_job *j = ctx;
    if (p == j->slow) busy_wait_us(300);
    int a, b, h0, h1;
    qtts_steal_home(j->n, j->s.parts, p, &h0, &h1);
    while (qtts_steal_next(&j->s, p, &a, &b)) {
        if (a < h0 || b > h1) atomic_fetch_add_explicit(&j->stolen, 1, memory_order_relaxed);
        for (int u = a; u < b; u++) {
            atomic_fetch_add_explicit(&j->count[u], 1, memory_order_relaxed);
            if (u % 8 == 0) busy_wait_us(1);   /* work, so that steals happen mid-range */
        }
    }
}

/* Real threads: every unit exactly once, whichever part is slow, and a slow
 * part's units taken by the others. */
static void test_steal_threads(void) {
    static steal_job j;
    const int threads[] = {2, 3, 4};
    for (size_t k = 0; k < QTTS_ARRAY_LEN(threads); k++) {
        qtts_pool *p = qtts_pool_create(threads[k]);
        REQUIRE(p != NULL, "pool");
        int stolen = 0;
        for (int round = 0; round < 60; round++) {
            j.n = (int[]){1, 5, 97, 1000, 4000}[round % 5];
            j.slow = round % (threads[k] + 1);   /* == threads: none */
            atomic_store(&j.stolen, 0);
            for (int u = 0; u < j.n; u++) atomic_store_explicit(&j.count[u], 0, memory_order_relaxed);
            qtts_steal_init(&j.s, j.n, threads[k]);
            qtts_pool_run(p, threads[k], steal_task, &j);
            int bad = -1;
            for (int u = 0; u < j.n && bad < 0; u++)
                if (atomic_load_explicit(&j.count[u], memory_order_relaxed) != 1) bad = u;
            CHECK(bad < 0, "threads=%d n=%d: unit %d handed out %d times", threads[k], j.n, bad,
                  bad < 0 ? 1 : atomic_load(&j.count[bad]));
            if (j.n >= 1000 && j.slow < threads[k]) stolen += atomic_load(&j.stolen);
        }
        CHECK(stolen > 0, "threads=%d: no part ever took units outside its home range",
              threads[k]);
        qtts_pool_destroy(p);
    }
}

/* The sysfs cache-size parser behind qtts_llc_bytes: the kernel's forms
 * ("48K", "266240K", "32M", a plain byte count, with or without the
 * newline), and 0 for anything else rather than a guess. */
static void test_cache_size(void) {
    static const struct {
        const char *s;
        uint64_t want;
    } cases[] = {
        {"48K\n", 48u << 10},     {"266240K", 266240ull << 10}, {"32M\n", 32ull << 20},
        {"1G", 1ull << 30},        {"512", 512},                 {"", 0},
        {"K", 0},                  {"12Q", 0},                   {"12K extra", 0},
        {"-4K", 0},                {"1234567890123K", 0},        {"12K\n\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(qtts_parse_cache_size(cases[i].s) == cases[i].want, "\"%s\": %llu, want %llu",
              cases[i].s, (unsigned long long)qtts_parse_cache_size(cases[i].s),
              (unsigned long long)cases[i].want);
    /* whatever this machine reports, the same value on every call */
    const uint64_t llc = qtts_llc_bytes();
    CHECK(qtts_llc_bytes() == llc, "qtts_llc_bytes changed between calls");
    printf("  last-level cache here: %llu KB\n", (unsigned long long)(llc >> 10));
}

/* The threads' round trip: -1 without a second thread (one thread, or a
 * caller marked serial); with two, a positive time, or -1 when the two
 * tasks did not run side by side (a loaded machine), and never a hang. */
static void test_round_trip(void) {
    qtts_threads_shutdown();
    CHECK(qtts_threads_round_trip_ns() == -1, "one thread: -1");
    CHECK(qtts_threads_init(2) == 2, "two threads");
    for (int i = 0; i < 5; i++) {
        const double ns = qtts_threads_round_trip_ns();
        CHECK(ns == -1 || (ns > 0 && ns < 50e6), "round trip %g ns", ns);
        if (i == 0) printf("  threads' round trip here: %.0f ns\n", ns);
    }
    qtts_threads_set_local_serial(true);
    CHECK(qtts_threads_round_trip_ns() == -1, "a serial caller: -1");
    qtts_threads_set_local_serial(false);
    qtts_threads_shutdown();
}

/* Lending a worker of the process-wide pool (qtts_threads_lend). */
typedef struct {
    pthread_t lender;
    int threads;               /* the pool's size */
    _Atomic int go;            /* the lender's checks are done: the job may end */
    _Atomic int bad;
    _Atomic int started;       /* tasks of the pair job that began */
    _Atomic int pair_ok;       /* the pair job's two tasks ran side by side */
    job j;                     /* the parallel-fors' bookkeeping */
    int n;                     /* tasks of the parallel-for running */
    _Atomic unsigned long who[8];      /* the thread seen as each participant */
    _Atomic unsigned long on_lender;   /* tasks the lender ran */
    bool lend_inside;          /* a lend from inside the lent job */
} lend_job;

static void mark_task(void *ctx, int i) {
    atomic_store((_Atomic unsigned long *)ctx + i, (unsigned long)pthread_self());
}

/* A task of the lent job's parallel-fors: every thread as its own
 * participant (the lender 0, a worker its index), a parallel-for inside
 * a task of one of several tasks on its own thread (a lone task runs
 * inline on the lent worker, and what it starts is a parallel-for of the
 * lent job like any other). */
static void lent_sub_task(void *ctx, int i) {
    lend_job *l = ctx;
    job_task(&l->j, i);
    const bool lender = pthread_equal(pthread_self(), l->lender);
    const int p = qtts_thread_participant();
    if (lender) atomic_fetch_add(&l->on_lender, 1);
    if (p < 0 || p >= l->threads || lender != (p == 0)) {
        atomic_fetch_add(&l->bad, 1);
        return;
    }
    unsigned long none = 0;
    if (!atomic_compare_exchange_strong(&l->who[p], &none, (unsigned long)pthread_self()) &&
        none != (unsigned long)pthread_self())
        atomic_fetch_add(&l->bad, 1);   /* two threads as one participant */
    if (i == 0 && l->n > 1) {
        _Atomic unsigned long ran[3] = {0, 0, 0};
        qtts_parallel_for(3, mark_task, ran);
        for (int k = 0; k < 3; k++)
            if (atomic_load(&ran[k]) != (unsigned long)pthread_self()) atomic_fetch_add(&l->bad, 1);
    }
}

/* Two tasks that each wait (up to 5 s) for the other to start: they end
 * only if a second thread (the waiting lender, or an idle worker) takes
 * one. */
static void pair_task(void *ctx, int i) {
    lend_job *l = ctx;
    atomic_fetch_add(&l->started, 1);
    const double t0 = qtts_now();
    while (atomic_load(&l->started) < 2)
        if (qtts_now() - t0 > 5) return;
    atomic_fetch_add(&l->pair_ok, 1);
}

static void lent_main(void *ctx, int task) {
    lend_job *l = ctx;
    if (task != 0 || pthread_equal(pthread_self(), l->lender)) atomic_fetch_add(&l->bad, 1);
    if (qtts_threads_count() != l->threads || qtts_thread_participant() < 1)
        atomic_fetch_add(&l->bad, 1);
    l->lend_inside = qtts_threads_lend(lent_sub_task, l);
    static const int sizes[] = {1, 2, 3, 7, 16, 64, 1000};
    for (int g = 0; g < 300; g++) {
        const int n = sizes[g % (int)QTTS_ARRAY_LEN(sizes)];
        l->j.gen = g;
        atomic_store(&l->j.runs, 0);
        for (int i = 0; i < n; i++) l->j.out[i] = -1;
        l->n = n;
        qtts_parallel_for(n, lent_sub_task, l);
        bool ok = atomic_load(&l->j.runs) == n;
        for (int i = 0; i < n; i++) ok = ok && l->j.out[i] == g * 7 + i;
        if (!ok) atomic_fetch_add(&l->bad, 1);
        if (g == 10)   /* the lender is not waiting yet */
            while (!atomic_load(&l->go)) busy_wait_us(10);
    }
    qtts_parallel_for(2, pair_task, l);
}

static void lend_rounds(int threads, int rounds) {
    REQUIRE(qtts_threads_init(threads) == threads, "%d threads", threads);
    for (int round = 0; round < rounds; round++) {
        lend_job l = {.lender = pthread_self(), .threads = threads};
        REQUIRE(qtts_threads_lend(lent_main, &l), "%d threads, round %d: lend", threads, round);
        CHECK(!qtts_threads_lend(lent_main, &l), "round %d: a second lend", round);
        CHECK(!qtts_threads_lend_done(), "round %d: done before go", round);
        /* the lender's own job meanwhile, on the pool's other threads */
        job j = {.gen = round};
        atomic_init(&j.runs, 0);
        qtts_parallel_for(100, job_task, &j);
        CHECK(atomic_load(&j.runs) == 100 && j.out[99] == round * 7 + 99, "round %d: own job",
              round);
        qtts_threads_set_local_serial(true);
        CHECK(!qtts_threads_lend(lent_main, &l), "round %d: lend from a serial caller", round);
        qtts_threads_set_local_serial(false);
        atomic_store(&l.go, 1);
        qtts_threads_lend_wait();
        CHECK(qtts_threads_lend_done(), "round %d: done after the wait", round);
        CHECK(atomic_load(&l.bad) == 0, "%d threads, round %d: %d bad checks in the lent job",
              threads, round, atomic_load(&l.bad));
        CHECK(!l.lend_inside, "round %d: a lend from inside the lent job", round);
        CHECK(atomic_load(&l.pair_ok) == 2,
              "%d threads, round %d: no second thread took a task of the lent job (%d)", threads,
              round, atomic_load(&l.pair_ok));
        if (round == 0)
            printf("  %d threads: the lender ran %lu of the lent job's tasks\n", threads,
                   atomic_load(&l.on_lender));
    }
}

static void test_lend(void) {
    qtts_threads_shutdown();
    CHECK(!qtts_threads_lend(lent_sub_task, NULL), "one thread: nothing to lend");
    CHECK(qtts_threads_lend_done(), "one thread: none out");
    qtts_threads_lend_wait();   /* none out: returns */
    lend_rounds(2, 20);
    lend_rounds(4, 10);
    qtts_threads_shutdown();
}

int main(void) {
    TEST_RUN(test_cache_size);
    TEST_RUN(test_many_dispatches);
    TEST_RUN(test_zero_means_all_cpus);
    TEST_RUN(test_concurrent_callers);
    TEST_RUN(test_nested);
    TEST_RUN(test_participant);
    TEST_RUN(test_global_pool);
    TEST_RUN(test_idle_hook);
    TEST_RUN(test_steal_serial);
    TEST_RUN(test_steal_contiguous);
    TEST_RUN(test_steal_threads);
    TEST_RUN(test_dispatch_latency);
    TEST_RUN(test_round_trip);
    TEST_RUN(test_lend);
    TEST_END();
}
