/* xomp.h - the small XOMP runtime that pptmc's translated programs call (ROSE-style names).
 *
 * Work-shared loops are scheduled over a normalised iteration space [0, trip):
 *   XOMP_loop_t ls; long lo, hi;
 *   XOMP_loop_start(&ls, trip, XOMP_SCHED_DYNAMIC, chunk);
 *   while (XOMP_loop_next(&ls, &lo, &hi)) for (k = lo; k < hi; k++) ...;
 *   XOMP_loop_end(&ls, nowait);
 * The runtime sits on libomp (XOMP_parallel_start opens `#pragma omp parallel`) and
 * therefore honours OMP_NUM_THREADS.  A nested XOMP_parallel_start opens a nested libomp region
 * (a team of one unless the user enables nested parallelism).
 */
#ifndef PPTMC_XOMP_H
#define PPTMC_XOMP_H

#define XOMP_SCHED_STATIC 0
#define XOMP_SCHED_DYNAMIC 1
#define XOMP_SCHED_GUIDED 2
#define XOMP_SCHED_MASTER 3
#define XOMP_SCHED_SINGLE 4

/* Comparison of a canonical loop test, for XOMP_trip_count. */
#define XOMP_CMP_LT 0
#define XOMP_CMP_LE 1
#define XOMP_CMP_GT 2
#define XOMP_CMP_GE 3

typedef struct XOMP_loop {
  long trip, chunk, next, stride;
  int sched, nthreads, finished;
  struct XOMP_slot *slot;
} XOMP_loop_t;

void XOMP_init(int argc, char **argv);
void XOMP_terminate(int exitcode);
void XOMP_parallel_start(void (*func)(void *), void *data);
void XOMP_parallel_start_num_threads(void (*func)(void *), void *data, int num_threads);
void XOMP_parallel_end(void);

long XOMP_trip_count(long lb, long ub, long step, int cmp);
/* A one-level loop counts its iterations in its variable's type: stop with a message when they do not fit. */
void XOMP_index_overflow(int line, long trip);
/* Row offsets of a triangular collapse(2): pre[0] = 0, pre[t+1] = pre[t] + length of row t. */
long *XOMP_prefix_alloc(long rows);
long XOMP_prefix_find(const long *pre, long rows, long k);
void XOMP_prefix_free(long *pre);
void XOMP_runtime_schedule(int *sched, long *chunk);
/* Takes the addresses of a loop's bounds, stride and last-iteration flag, which the translated code has
   stored just before, as clang's lowering stores libomp's (__kmpc_for_static_init / dispatch_init): their
   stack traffic is then in the trace as in the native outlined code. typed_hi (or null): the block's last
   iteration in the loop variable's own type, as clang keeps libomp's upper bound; once its address is
   taken, a store of that type in the body may change it, so the loop reloads it every iteration and does
   not vectorise, exactly as the native loop does with an int bound and int stores. It reads nothing. */
void XOMP_loop_bounds(long *lo, long *hi, long *stride, int *last, void *typed_hi);
void XOMP_loop_start(XOMP_loop_t *loop, long trip, int sched, long chunk);
int XOMP_loop_next(XOMP_loop_t *loop, long *lo, long *hi);
void XOMP_loop_end(XOMP_loop_t *loop, int nowait);

void XOMP_barrier(void);
int XOMP_master(void);
void XOMP_atomic_start(void);
void XOMP_atomic_end(void);
void XOMP_critical_start(void **lock);
void XOMP_critical_end(void **lock);
extern void *xomp_critical_default;

/* Loop markers (see translate/README.md): weak no-ops here, recorded by the trace runtime. */
extern int xomp_trace_enabled;
void XOMP_trace_loop_begin(int loop_id, long trip_count, int schedule, long chunk);
void XOMP_trace_iteration(int loop_id, long iteration);
/* Marks iteration k as the start of a piece of the chunk that ends at hi and returns the piece's end: the
   iterations [k, end) run as one inner loop that the compiler may vectorise (translate/README.md). `pure`
   tells the compiler that it writes none of the program's memory, so no shared variable is reloaded after
   it; its only effect, the marker, is the trace runtime's. */
long XOMP_trace_piece(int loop_id, long k, long hi) __attribute__((pure));
void XOMP_trace_loop_end(int loop_id);
void XOMP_trace_barrier(void);

#endif
