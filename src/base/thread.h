/*
 * thread.h - a persistent pthread pool with a low-latency parallel-for.
 *
 * One decode frame issues ~700 parallel matmuls of a few tens to a few
 * hundred microseconds each, so dispatch must cost about a microsecond, not
 * a thread wake-up. Workers therefore spin (with a CPU pause) on a
 * generation counter for a short while after each job and only then block
 * on a condition variable; the calling thread takes a share of the tasks
 * instead of waiting idle.
 *
 * Tasks are claimed dynamically (one atomic add each), so a worker that the
 * OS has descheduled does not stall the job: the others take its tasks.
 * Which thread runs a task is therefore not fixed, and callers must make
 * each task's result independent of that (the matmul computes every output
 * row with the same code wherever it runs, see kernels.h).
 *
 * One job runs at a time per pool. A parallel-for issued while the pool is
 * busy (a second caller thread, or a task that itself calls parallel-for)
 * runs all its tasks on the calling thread: same results, no deadlock.
 *
 * The process-wide pool used by the kernels is set with qtts_threads_init
 * (the engine calls it with qtts_engine_options.n_threads); until then, or
 * with one thread, qtts_parallel_for simply loops on the caller.
 */
#ifndef QTTS_THREAD_H
#define QTTS_THREAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Runs task i of a job; ctx is the job's shared, read-only argument block. */
typedef void (*qtts_task_fn)(void *ctx, int task);

typedef struct qtts_pool qtts_pool;

/* A pool of n_threads participants: the caller plus n_threads-1 workers
 * (n_threads 0 = one per online CPU, capped at QTTS_MAX_THREADS). NULL if
 * the workers cannot be created. */
#define QTTS_MAX_THREADS 64
qtts_pool *qtts_pool_create(int n_threads);
void qtts_pool_destroy(qtts_pool *p);                     /* NULL ok; no job may be running */
int qtts_pool_size(const qtts_pool *p);                   /* participants, >= 1; 1 for NULL */

/* Runs fn(ctx, i) for every i in [0, n_tasks) and returns when all have
 * finished. p may be NULL (runs inline). */
void qtts_pool_run(qtts_pool *p, int n_tasks, qtts_task_fn fn, void *ctx);

/* The process-wide pool. qtts_threads_init(n) (re)creates it with n
 * participants (0 = all CPUs); calling it with the current size is a no-op.
 * It must not race with running jobs: call it at engine open, not while
 * another thread is synthesizing. Returns the resulting size (1 if the
 * workers could not be created: everything then runs on the caller). */
int qtts_threads_init(int n_threads);
int qtts_threads_count(void);
void qtts_threads_shutdown(void);                         /* back to inline execution */
void qtts_parallel_for(int n_tasks, qtts_task_fn fn, void *ctx);

/* Per calling thread: while set, qtts_parallel_for runs every task on the
 * caller and leaves the process-wide pool to the other threads. For heavy
 * one-off work (cloning a voice on a server's connection thread) beside a
 * thread that synthesizes: the pool serves one job at a time, so without
 * it the two callers would take turns having the whole pool and the
 * synthesizing thread would run its share single-threaded whenever the
 * other held it. Results are the same bits either way. */
void qtts_threads_set_local_serial(bool serial);

/* Lending one worker: fn(ctx, 0) runs on a worker of the pool while the
 * lender's jobs go on with the other participants (the tasks are claimed
 * dynamically, so a job simply has one thread fewer). The lent job's own
 * parallel-fors are published like jobs: the lent worker runs their
 * tasks, and so do the pool's idle workers and the lender while it waits
 * (qtts_pool_lend_wait), each as its own participant (qtts_threads_count()
 * is the pool's size there too). For two stages of a pipeline: one that
 * reads memory (the talker) beside one that computes (the codec) keeps
 * the cores doing what each does best, and no core idles while either
 * has work. One lend at a time per pool: false (nothing run) when another
 * is out, the pool has no worker, or the caller is local serial or itself
 * inside a lent job; the caller then runs fn itself.
 * qtts_pool_lend_done: no lend is out, or it has finished (its results
 * visible to the caller); qtts_pool_lend_wait: waits for it to finish,
 * helping, and frees the lend (no-op when none is out). The lender must
 * wait before the pool is destroyed or resized. */
bool qtts_pool_lend(qtts_pool *p, qtts_task_fn fn, void *ctx);
bool qtts_pool_lend_done(qtts_pool *p);
void qtts_pool_lend_wait(qtts_pool *p);
/* The same on the process-wide pool. */
bool qtts_threads_lend(qtts_task_fn fn, void *ctx);
bool qtts_threads_lend_done(void);
void qtts_threads_lend_wait(void);

/* Work for a participant that would otherwise wait: a worker between jobs,
 * the caller while the last tasks of its job finish. fn(participant) is
 * called between polls (participant 0 is the calling thread, 1.. the
 * workers) and must return quickly (a microsecond or so: it delays the
 * reaction to the next job by as much) and true while it has more to do.
 * It must not touch anything a job's results depend on; the kernels use
 * it to prefetch the next matmul's weights (kernels.c). NULL: none. The
 * hook is process-wide, for every pool. */
typedef bool (*qtts_idle_fn)(int participant);
void qtts_threads_set_idle(qtts_idle_fn fn);

/* The calling thread's participant index: in a job's tasks, 0 on the
 * job's caller and 1.. on the pool's workers (each its own); outside
 * jobs, 1.. in a worker and 0 in any other thread. Fixed per thread, so
 * that a task can pick its work by the thread it runs on: work
 * split the same way job after job then finds the data a thread wrote in
 * the job before in its own caches (qtts_steal with part = participant;
 * results must still not depend on it). */
int qtts_thread_participant(void);

/* Contiguous work split with stealing, for the tasks of one job. Units
 * [0, n) start as `parts` contiguous home ranges, range p = [n*p/parts,
 * n*(p+1)/parts). qtts_steal_next(s, p, ...) gives the caller of part p the
 * next chunk of its range, front to back; once that range is empty it
 * moves the back half of the fullest range into its own and goes on from
 * there; a range whose part has not asked for work yet (its task not
 * claimed: the worker asleep or busy) moves whole. So a part's chunks follow
 * each other in memory until the job's last moments (the matmul's threads
 * each stream one span of the weights, as a hardware prefetcher wants),
 * and a part slowed by another tenant still leaves its remaining work to
 * the others. Every unit is handed out exactly once. A range is one 64-bit
 * atomic (lo | hi << 32) on its own cache line: the owner takes from lo, a
 * thief from hi, each with a CAS. */
typedef struct {
    _Alignas(64) _Atomic uint64_t lohi;
    _Atomic int started;   /* part p has asked for work */
} qtts_steal_range;

typedef struct {
    int parts;
    qtts_steal_range range[QTTS_MAX_THREADS];
} qtts_steal;

/* parts in [1, QTTS_MAX_THREADS]; n >= 0 units. */
void qtts_steal_init(qtts_steal *s, int n, int parts);
/* Part p's next chunk [*a, *b) (b > a); false when every range is empty. */
bool qtts_steal_next(qtts_steal *s, int p, int *a, int *b);
/* Home range p (before any claim): [*a, *b). */
void qtts_steal_home(int n, int parts, int p, int *a, int *b);

/* Nanoseconds for a cache line to go from one thread of the process-wide
 * pool to another and back: the mean of 2000 round trips between the two
 * tasks of one parallel-for (usually the caller and a worker). -1 with one
 * thread, or when the two tasks did not run side by side within 50 ms
 * (a busy pool runs both on the caller; a loaded CPU). A diagnostic for
 * benchmarks: on a VM the two vCPUs may share a core complex (one L3,
 * ~55 ns on the EPYC host of docs/PERFORMANCE.md) or sit on two (~300
 * ns), and memory-bound timings differ between the two. */
double qtts_threads_round_trip_ns(void);

/* Online CPUs this process may run on (sched affinity), at least 1. */
int qtts_cpu_count(void);

/* Bytes of the last-level cache CPU 0 sees (the highest cache level in
 * sysfs, else glibc's sysconf), read once; 0 when unknown. */
uint64_t qtts_llc_bytes(void);
/* A sysfs cache size ("266240K", "32M", "512"): bytes, 0 if malformed. */
uint64_t qtts_parse_cache_size(const char *s);

#endif
