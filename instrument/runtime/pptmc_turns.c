/* Equal-speed turns for the original program's traced run (the validator's ground truth).
 *
 * Which thread gets a dynamic or guided chunk, or runs a `single`, depends on which thread asks first. On
 * the validation host, many threads share a few cores, so the OS decides that: a run of covariance at 16
 * threads on 2 cores gave one thread 7 to 14 times the mean share of a `schedule(dynamic, 1)` loop, and
 * two runs of the same binary gave different shares. The ground truth is meant to be the program as
 * equal-speed threads run it (its merge already advances every thread one reference per turn), so here
 * each hand-out goes to the thread that asks at the smallest *virtual time*: its references since the
 * team last synchronised (instrumentation sites run, counted per block entry by pptmc_rt.c), ties to the
 * lowest thread id. That is the hand-out order of threads that run one reference per cycle, and it does
 * not depend on the OS, so the ground truth is the same on every run.
 *
 * How: the instrumentation pass renames the program's calls of libomp's hand-out entry points
 * (`__kmpc_dispatch_next_*`, `__kmpc_single`) to `__pptmc_turn_<name>`, which wait for their turn and then
 * call libomp; and its calls of entry points that wait for the whole team (barriers, reductions,
 * copyprivate) to wrappers that mark the thread as waiting there. A thread may take its turn when no other
 * thread of its team could still ask earlier: every other thread has finished the region, waits at a team
 * call, has passed more team calls, or has run more references (read live from its counter) or asks
 * later. A thread that has not yet entered the region, or has passed fewer team calls, is waited for.
 *
 * Hand-written: this is a conservative discrete-event gate on libomp's own entry points; no library
 * does it. If nothing the gate waits for moves for STALL_SECONDS (a construct the gate does not know
 * blocks a thread), the gate stops for the rest of the run with one warning, and hand-outs follow the OS
 * as without it. Nested parallel regions, and threads beyond TURN_THREADS, are not gated. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define TURN_THREADS 1024
#define STALL_SECONDS 20.0

extern int omp_get_num_threads(void) __attribute__((weak));
extern int omp_get_level(void) __attribute__((weak));

enum { T_RUNNING, T_TEAM_CALL, T_DONE };  /* a thread waiting for its turn is running, with its time frozen */

typedef struct {
    uint64_t gen;            /* the region instance the thread is in (the master's count) */
    uint64_t phase;          /* team calls passed in this region */
    uint64_t start;          /* its reference counter when the phase began */
    const uint64_t *refs;    /* its live reference counter */
    int status;
} turn_thread;

static turn_thread threads[TURN_THREADS];
static __thread turn_thread *mine;  /* the calling thread's slot, from its region entry (NULL: not gated) */
static __thread uint32_t mine_id;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t gen;         /* region instances the master has entered */
static int team = 1;
static int gate_off;         /* set once a wait stalled */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t live_refs(const turn_thread *u) {
    if (!u->refs) return 0;  /* not yet in any region */
    return __atomic_load_n(u->refs, __ATOMIC_RELAXED) - u->start;  /* the owner adds to it without a lock */
}

/* Nothing the turns wait for has moved for STALL_SECONDS: hand-outs follow the OS from now on (call holding mu). */
static void stop_turns(void) {
    if (gate_off) return;
    gate_off = 1;
    fprintf(stderr, "pptmc: equal-speed turns stopped: no thread moved for %.0f s; dynamic chunks and singles are "
                    "dealt by the OS from here on\n", STALL_SECONDS);
}

/* The calling thread's slot, or NULL when it is not gated. */
static turn_thread *me(uint32_t *tid) {
    if (!mine || gate_off || (&omp_get_level && omp_get_level() != 1)) return NULL;
    *tid = mine_id;
    return mine;
}

/* How far another thread could still be from asking: 0 = it cannot ask before `w`, else a progress
 * figure that grows as it runs (for the stall check). */
static uint64_t blocks_turn(const turn_thread *u, uint32_t uid, const turn_thread *w, uint32_t wid, uint64_t vt) {
    if (u->gen < w->gen || (u->gen == w->gen && u->phase < w->phase)) return 1 + u->phase + live_refs(u);
    if (u->gen != w->gen || u->phase > w->phase || u->status == T_DONE || u->status == T_TEAM_CALL) return 0;
    uint64_t at = live_refs(u);
    if (at < vt || (at == vt && uid < wid)) return 1 + at;
    return 0;
}

/* Wait until no other thread of the team could ask before `w`; returns holding `mu`. */
static void wait_turn(turn_thread *w, uint32_t wid) {
    uint64_t vt = live_refs(w), seen = 0;
    double since = now_s();
    for (unsigned spins = 0;; spins++) {
        pthread_mutex_lock(&mu);
        uint64_t progress = 0;
        for (int u = 0; u < team && u < TURN_THREADS && !gate_off; u++)
            if ((uint32_t)u != wid) progress += blocks_turn(&threads[u], (uint32_t)u, w, wid, vt);
        if (progress == 0) return;
        if (progress != seen) {
            seen = progress;
            since = now_s();
        } else if (now_s() - since > STALL_SECONDS) {
            stop_turns();
            return;
        }
        pthread_mutex_unlock(&mu);
        if (spins < 64) sched_yield();
        else nanosleep(&(struct timespec){0, 20000}, NULL);
    }
}

/* Region entry (depth 0 of an instrumented function, while tracing; pptmc_rt.c passes the thread's id and its
 * live reference counter): workers wait for the master to open the instance. */
void __pptmc_turn_region_begin(uint32_t tid, const uint64_t *refs) {
    mine = NULL;
    if (gate_off || !&omp_get_num_threads || tid >= TURN_THREADS || (&omp_get_level && omp_get_level() != 1)) return;
    turn_thread *t = &threads[tid];
    pthread_mutex_lock(&mu);
    if (tid == 0) {
        gen++;
        team = omp_get_num_threads();
    }
    pthread_mutex_unlock(&mu);
    double since = now_s();
    for (unsigned spins = 0; tid != 0 && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) <= t->gen; spins++) {
        if (gate_off) return;
        if (now_s() - since > STALL_SECONDS) {  /* the master never opened the instance (not a team of ours) */
            pthread_mutex_lock(&mu);
            stop_turns();
            pthread_mutex_unlock(&mu);
            return;
        }
        if (spins < 64) sched_yield();
        else nanosleep(&(struct timespec){0, 20000}, NULL);
    }
    pthread_mutex_lock(&mu);
    t->refs = refs;
    t->gen = gen;
    t->phase = 0;
    t->start = *refs;
    t->status = T_RUNNING;
    pthread_mutex_unlock(&mu);
    mine = t;
    mine_id = tid;
}

void __pptmc_turn_region_end(void) {
    uint32_t tid;
    turn_thread *t = me(&tid);
    if (!t) return;
    pthread_mutex_lock(&mu);
    t->status = T_DONE;
    pthread_mutex_unlock(&mu);
    mine = NULL;
}

static void team_call_begin(turn_thread *t) {
    if (!t) return;
    pthread_mutex_lock(&mu);
    t->status = T_TEAM_CALL;
    pthread_mutex_unlock(&mu);
}

/* After a team call; `every` = every thread of the team makes it: a new phase, whose virtual time starts at 0
 * (only the thread that combines a blocking reduction calls __kmpc_end_reduce). */
static void team_call_end(turn_thread *t, int every) {
    if (!t) return;
    pthread_mutex_lock(&mu);
    if (every) {
        t->phase++;
        t->start = *t->refs;
    }
    t->status = T_RUNNING;
    pthread_mutex_unlock(&mu);
}

typedef int32_t (*next_fn)(void *, int32_t, void *, void *, void *, void *);

/* One hand-out in turn: libomp is called while the gate is held, so hand-outs happen in turn order. */
static int32_t next_in_turn(next_fn real, void *loc, int32_t gtid, void *last, void *lb, void *ub, void *st) {
    uint32_t tid;
    turn_thread *t = me(&tid);
    if (!t) return real(loc, gtid, last, lb, ub, st);
    wait_turn(t, tid);
    int32_t r = real(loc, gtid, last, lb, ub, st);
    pthread_mutex_unlock(&mu);
    return r;
}

int32_t __kmpc_dispatch_next_4(void *, int32_t, void *, void *, void *, void *);
int32_t __kmpc_dispatch_next_4u(void *, int32_t, void *, void *, void *, void *);
int32_t __kmpc_dispatch_next_8(void *, int32_t, void *, void *, void *, void *);
int32_t __kmpc_dispatch_next_8u(void *, int32_t, void *, void *, void *, void *);
int32_t __kmpc_single(void *, int32_t);
void __kmpc_barrier(void *, int32_t);
int32_t __kmpc_cancel_barrier(void *, int32_t);
int32_t __kmpc_reduce(void *, int32_t, int32_t, size_t, void *, void (*)(void *, void *), void *);
int32_t __kmpc_reduce_nowait(void *, int32_t, int32_t, size_t, void *, void (*)(void *, void *), void *);
void __kmpc_end_reduce(void *, int32_t, void *);
void __kmpc_copyprivate(void *, int32_t, size_t, void *, void (*)(void *, void *), int32_t);

int32_t __pptmc_turn___kmpc_dispatch_next_4(void *l, int32_t g, void *la, void *lb, void *ub, void *st) {
    return next_in_turn(__kmpc_dispatch_next_4, l, g, la, lb, ub, st);
}
int32_t __pptmc_turn___kmpc_dispatch_next_4u(void *l, int32_t g, void *la, void *lb, void *ub, void *st) {
    return next_in_turn(__kmpc_dispatch_next_4u, l, g, la, lb, ub, st);
}
int32_t __pptmc_turn___kmpc_dispatch_next_8(void *l, int32_t g, void *la, void *lb, void *ub, void *st) {
    return next_in_turn(__kmpc_dispatch_next_8, l, g, la, lb, ub, st);
}
int32_t __pptmc_turn___kmpc_dispatch_next_8u(void *l, int32_t g, void *la, void *lb, void *ub, void *st) {
    return next_in_turn(__kmpc_dispatch_next_8u, l, g, la, lb, ub, st);
}

int32_t __pptmc_turn___kmpc_single(void *loc, int32_t gtid) {
    uint32_t tid;
    turn_thread *t = me(&tid);
    if (!t) return __kmpc_single(loc, gtid);
    wait_turn(t, tid);
    int32_t r = __kmpc_single(loc, gtid);
    pthread_mutex_unlock(&mu);
    return r;
}

/* Team calls: calls that may wait for the whole team; all but __kmpc_end_reduce are made by every thread, in
 * the same order. TEAM_CALL(every, statement) runs the libomp call marked as waiting there. */
#define TEAM_CALL(every, call)               \
    do {                                     \
        uint32_t tid_;                       \
        turn_thread *t_ = me(&tid_);         \
        team_call_begin(t_);                 \
        call;                                \
        team_call_end(t_, every);            \
    } while (0)

void __pptmc_turn___kmpc_barrier(void *loc, int32_t gtid) {
    TEAM_CALL(1, __kmpc_barrier(loc, gtid));
}

int32_t __pptmc_turn___kmpc_cancel_barrier(void *loc, int32_t gtid) {
    int32_t r;
    TEAM_CALL(1, r = __kmpc_cancel_barrier(loc, gtid));
    return r;
}

int32_t __pptmc_turn___kmpc_reduce(void *loc, int32_t gtid, int32_t n, size_t size, void *data,
                                   void (*fn)(void *, void *), void *lck) {
    int32_t r;
    TEAM_CALL(1, r = __kmpc_reduce(loc, gtid, n, size, data, fn, lck));
    return r;
}

int32_t __pptmc_turn___kmpc_reduce_nowait(void *loc, int32_t gtid, int32_t n, size_t size, void *data,
                                          void (*fn)(void *, void *), void *lck) {
    int32_t r;
    TEAM_CALL(1, r = __kmpc_reduce_nowait(loc, gtid, n, size, data, fn, lck));
    return r;
}

void __pptmc_turn___kmpc_end_reduce(void *loc, int32_t gtid, void *lck) {
    TEAM_CALL(0, __kmpc_end_reduce(loc, gtid, lck));
}

void __pptmc_turn___kmpc_copyprivate(void *loc, int32_t gtid, size_t size, void *data,
                                     void (*fn)(void *, void *), int32_t didit) {
    TEAM_CALL(1, __kmpc_copyprivate(loc, gtid, size, data, fn, didit));
}
