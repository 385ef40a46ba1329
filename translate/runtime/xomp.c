/* xomp.c - XOMP runtime on top of libomp; compile with -fopenmp. See xomp.h. */
#include "xomp.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define XOMP_SLOTS 64

/* Team-shared state of one dynamic/guided/single construct instance. */
struct XOMP_slot {
  long seq;   /* which construct instance (per-thread sequence number) owns the slot */
  long next;  /* next unclaimed iteration */
  int left;   /* threads that have not yet finished the instance; 0 = free */
};

struct XOMP_team {
  pthread_mutex_t lock;
  struct XOMP_slot slots[XOMP_SLOTS];
};

static _Thread_local struct XOMP_team *xomp_team;
static _Thread_local long xomp_seq;
static pthread_mutex_t xomp_atomic_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t xomp_create_lock = PTHREAD_MUTEX_INITIALIZER;
void *xomp_critical_default;

int xomp_trace_enabled = 0;
__attribute__((weak)) void XOMP_trace_loop_begin(int loop_id, long trip_count, int schedule, long chunk)
{
  (void)loop_id; (void)trip_count; (void)schedule; (void)chunk;
}
__attribute__((weak)) void XOMP_trace_iteration(int loop_id, long iteration) { (void)loop_id; (void)iteration; }
__attribute__((weak)) void XOMP_trace_loop_end(int loop_id) { (void)loop_id; }
__attribute__((weak)) void XOMP_trace_barrier(void) {}
/* Without the trace runtime a chunk runs as one piece. */
__attribute__((weak)) long XOMP_trace_piece(int loop_id, long k, long hi)
{
  (void)loop_id; (void)k;
  return hi;
}

void XOMP_init(int argc, char **argv) { (void)argc; (void)argv; }
void XOMP_terminate(int exitcode) { (void)exitcode; }

static void xomp_team_init(struct XOMP_team *team)
{
  pthread_mutex_init(&team->lock, NULL);
  for (int s = 0; s < XOMP_SLOTS; s++) {
    team->slots[s].seq = -1;
    team->slots[s].next = 0;
    team->slots[s].left = 0;
  }
}

static void xomp_run(void (*func)(void *), void *data, struct XOMP_team *team)
{
  struct XOMP_team *saved_team = xomp_team;
  long saved_seq = xomp_seq;
  xomp_team = team;
  xomp_seq = 0;
  func(data);
  xomp_team = saved_team;
  xomp_seq = saved_seq;
}

void XOMP_parallel_start_num_threads(void (*func)(void *), void *data, int num_threads)
{
  struct XOMP_team team;
  xomp_team_init(&team);
  if (num_threads > 0) {
#pragma omp parallel num_threads(num_threads)
    xomp_run(func, data, &team);
  } else {
#pragma omp parallel
    xomp_run(func, data, &team);
  }
  pthread_mutex_destroy(&team.lock);
}

void XOMP_parallel_start(void (*func)(void *), void *data) { XOMP_parallel_start_num_threads(func, data, 0); }

/* The region has already joined inside XOMP_parallel_start; kept for ROSE's call shape. */
void XOMP_parallel_end(void) {}

long XOMP_trip_count(long lb, long ub, long step, int cmp)
{
  switch (cmp) {
  case XOMP_CMP_LT: return (ub > lb && step > 0) ? (ub - lb + step - 1) / step : 0;
  case XOMP_CMP_LE: return (ub >= lb && step > 0) ? (ub - lb) / step + 1 : 0;
  case XOMP_CMP_GT: return (lb > ub && step < 0) ? (lb - ub - step - 1) / (-step) : 0;
  default: return (lb >= ub && step < 0) ? (lb - ub) / (-step) + 1 : 0;
  }
}

void XOMP_index_overflow(int line, long trip)
{
  fprintf(stderr, "xomp: the work-shared loop at line %d runs %ld iterations, more than its loop variable's "
          "type can count; declare the variable with a wider integer type\n", line, trip);
  exit(70);
}

long *XOMP_prefix_alloc(long rows)
{
  long *pre = malloc(((rows > 0 ? rows : 0) + 1) * sizeof *pre);
  if (!pre)
    abort();
  pre[0] = 0;
  return pre;
}

/* The row t holding flattened index k: the largest t with pre[t] <= k (rows may be empty). */
long XOMP_prefix_find(const long *pre, long rows, long k)
{
  long lo = 0, hi = rows; /* invariant: pre[lo] <= k < pre[hi] */
  while (hi - lo > 1) {
    long mid = lo + (hi - lo) / 2;
    if (pre[mid] <= k)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

void XOMP_prefix_free(long *pre) { free(pre); }

/* schedule(runtime): OMP_SCHEDULE as libomp parsed it; auto (and anything unknown) runs static. */
void XOMP_runtime_schedule(int *sched, long *chunk)
{
  omp_sched_t kind;
  int size;
  omp_get_schedule(&kind, &size);
  switch ((int)kind & ~(int)omp_sched_monotonic) {
  case omp_sched_dynamic: *sched = XOMP_SCHED_DYNAMIC; break;
  case omp_sched_guided: *sched = XOMP_SCHED_GUIDED; break;
  case omp_sched_static: *sched = XOMP_SCHED_STATIC; break;
  default: *sched = XOMP_SCHED_STATIC; size = 0; break;
  }
  *chunk = size > 0 ? size : 0;
}

static struct XOMP_slot *xomp_slot_acquire(struct XOMP_team *team, int nthreads)
{
  long seq = xomp_seq++;
  struct XOMP_slot *slot = &team->slots[seq % XOMP_SLOTS];
  for (;;) {
    pthread_mutex_lock(&team->lock);
    if (slot->seq == seq || slot->left == 0) {
      if (slot->seq != seq) {
        slot->seq = seq;
        slot->next = 0;
        slot->left = nthreads;
      }
      pthread_mutex_unlock(&team->lock);
      return slot;
    }
    pthread_mutex_unlock(&team->lock);
    sched_yield(); /* a thread is still inside the instance XOMP_SLOTS constructs back */
  }
}

void XOMP_loop_bounds(long *lo, long *hi, long *stride, int *last, void *typed_hi)
{
  (void)lo; (void)hi; (void)stride; (void)last; (void)typed_hi;
}

void XOMP_loop_start(XOMP_loop_t *loop, long trip, int sched, long chunk)
{
  int nth = xomp_team ? omp_get_num_threads() : 1;
  int tid = xomp_team ? omp_get_thread_num() : 0;
  loop->trip = trip < 0 ? 0 : trip;
  loop->sched = sched == XOMP_SCHED_SINGLE ? XOMP_SCHED_DYNAMIC : sched;
  loop->chunk = sched == XOMP_SCHED_SINGLE ? 1 : chunk;
  loop->nthreads = nth;
  loop->finished = 0;
  loop->slot = NULL;
  if (loop->sched == XOMP_SCHED_STATIC) {
    if (chunk > 0) {
      loop->next = tid * chunk;
      loop->stride = (long)nth * chunk;
    } else { /* one contiguous block per thread, the first trip % nth threads get one more */
      long base = loop->trip / nth, extra = loop->trip % nth;
      loop->next = tid * base + (tid < extra ? tid : extra);
      loop->stride = base + (tid < extra ? 1 : 0);
    }
  } else {
    if (loop->chunk <= 0)
      loop->chunk = 1;
    if (xomp_team)
      loop->slot = xomp_slot_acquire(xomp_team, nth);
    loop->next = 0;
  }
}

static int xomp_claim(XOMP_loop_t *loop, long *lo, long *hi)
{
  struct XOMP_slot *slot = loop->slot;
  long start, size;
  if (!slot) { /* outside any parallel region: one thread takes chunks in order */
    start = loop->next;
    size = loop->chunk;
    loop->next += size;
  } else if (loop->sched == XOMP_SCHED_DYNAMIC) {
    size = loop->chunk;
    start = __atomic_fetch_add(&slot->next, size, __ATOMIC_RELAXED);
  } else {
    start = __atomic_load_n(&slot->next, __ATOMIC_RELAXED);
    do {
      long rest = loop->trip - start;
      if (rest <= 0)
        return 0;
      size = (rest + loop->nthreads - 1) / loop->nthreads;
      if (size < loop->chunk)
        size = loop->chunk;
    } while (!__atomic_compare_exchange_n(&slot->next, &start, start + size, 0, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
  }
  if (start >= loop->trip)
    return 0;
  *lo = start;
  *hi = start + size < loop->trip ? start + size : loop->trip;
  return 1;
}

int XOMP_loop_next(XOMP_loop_t *loop, long *lo, long *hi)
{
  if (loop->finished)
    return 0;
  if (loop->sched == XOMP_SCHED_STATIC) {
    long chunked = loop->chunk > 0;
    if (loop->next >= loop->trip || (!chunked && loop->stride == 0)) {
      loop->finished = 1;
      return 0;
    }
    *lo = loop->next;
    *hi = chunked ? loop->next + loop->chunk : loop->next + loop->stride;
    if (*hi > loop->trip)
      *hi = loop->trip;
    if (chunked)
      loop->next += loop->stride;
    else
      loop->finished = 1;
    return 1;
  }
  if (!xomp_claim(loop, lo, hi)) {
    loop->finished = 1;
    return 0;
  }
  return 1;
}

void XOMP_loop_end(XOMP_loop_t *loop, int nowait)
{
  if (loop->slot && xomp_team) {
    pthread_mutex_lock(&xomp_team->lock);
    loop->slot->left--;
    pthread_mutex_unlock(&xomp_team->lock);
  }
  if (!nowait)
    XOMP_barrier();
}

void XOMP_barrier(void)
{
  if (xomp_trace_enabled)
    XOMP_trace_barrier();
  if (xomp_team) {
#pragma omp barrier
  }
}

int XOMP_master(void) { return omp_get_thread_num() == 0; }

void XOMP_atomic_start(void) { pthread_mutex_lock(&xomp_atomic_lock); }
void XOMP_atomic_end(void) { pthread_mutex_unlock(&xomp_atomic_lock); }

static pthread_mutex_t *xomp_named_lock(void **lock)
{
  pthread_mutex_t *mutex = __atomic_load_n((pthread_mutex_t **)lock, __ATOMIC_ACQUIRE);
  if (mutex)
    return mutex;
  pthread_mutex_lock(&xomp_create_lock);
  mutex = *(pthread_mutex_t **)lock;
  if (!mutex) {
    mutex = malloc(sizeof *mutex);
    if (!mutex)
      abort();
    pthread_mutex_init(mutex, NULL);
    __atomic_store_n((pthread_mutex_t **)lock, mutex, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&xomp_create_lock);
  return mutex;
}

void XOMP_critical_start(void **lock) { pthread_mutex_lock(xomp_named_lock(lock)); }
void XOMP_critical_end(void **lock) { pthread_mutex_unlock(xomp_named_lock(lock)); }
