/* A hand-written ROSE-style translated program for the tracer tests: two outlined regions,
 * the translator's labels and loop markers, and known global arrays whose addresses it prints
 * (to stderr, so stdout is identical across runs) for exact-address checks.
 * Usage: rose_kernel N [crash|fail]  */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int xomp_trace_enabled = 0;
__attribute__((weak)) void XOMP_trace_loop_begin(int loop_id, long trip_count, int schedule, long chunk) {}
__attribute__((weak)) void XOMP_trace_iteration(int loop_id, long iteration) {}
__attribute__((weak)) void XOMP_trace_loop_end(int loop_id) {}

#define MAXN 4096
double A[MAXN], B[MAXN], C[MAXN];
int mode_crash;

struct OUT__1__1___data { void *a_p; void *b_p; void *n_p; };
struct OUT__2__1___data { void *c_p; void *n_p; };

static void OUT__1__1__(void *__out_argv) {
  double *a = (double *)(((struct OUT__1__1___data *)__out_argv)->a_p);
  struct OUT__1__1___data *d = (struct OUT__1__1___data *)__out_argv;
shared_var_trace1: {}
  a = (double *)d->a_p;
  double *b = (double *)d->b_p;
  int *n_p = (int *)d->n_p;
other_trace1: {}
  int n = *n_p;
  if (xomp_trace_enabled) XOMP_trace_loop_begin(0, n, 0, 0);
  for (int i = 0; i < n; i++) {
    if (xomp_trace_enabled) XOMP_trace_iteration(0, i);
    b[i] = a[i] + a[n - 1 - i];
  }
  if (xomp_trace_enabled) XOMP_trace_loop_end(0);
}

static void OUT__2__1__(void *__out_argv) {
  struct OUT__2__1___data *d = (struct OUT__2__1___data *)__out_argv;
shared_var_trace2: {}
  double *c = (double *)d->c_p;
  int *n_p = (int *)d->n_p;
other_trace2: {}
  volatile double priv[4];  /* thread-private scratch on the stack */
  if (xomp_trace_enabled) XOMP_trace_loop_begin(1, 1, 3, 0);
  if (xomp_trace_enabled) XOMP_trace_iteration(1, 0);
  priv[0] = 0.0;
  for (int i = 0; i < *n_p; i++) {
    if (i % 3 == 0) priv[0] = priv[0] + B[i];
    else c[i] = B[i] * 0.5;
  }
  if (mode_crash) raise(SIGSEGV);
  c[0] = priv[0];
  if (xomp_trace_enabled) XOMP_trace_loop_end(1);
}

void (*volatile fn1)(void *) = OUT__1__1__;  /* called through pointers, as XOMP_parallel_start does */
void (*volatile fn2)(void *) = OUT__2__1__;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  if (n < 1 || n > MAXN) { fprintf(stderr, "n must be in 1..%d\n", MAXN); return 2; }
  mode_crash = argc > 2 && strcmp(argv[2], "crash") == 0;
  for (int i = 0; i < n; i++) { A[i] = i * 0.25; B[i] = 0; C[i] = 1; }
  struct OUT__1__1___data d1 = {A, B, &n};
  struct OUT__2__1___data d2 = {C, &n};
  fprintf(stderr, "ADDR A=%p B=%p C=%p d1=%p d2=%p n=%p\n", (void *)A, (void *)B, (void *)C,
          (void *)&d1, (void *)&d2, (void *)&n);
  fn1(&d1);
  fn2(&d2);
  fn1(&d1);
  double s = 0;
  for (int i = 0; i < n; i++) s += B[i] + C[i];
  printf("checksum %.6f\n", s);
  if (argc > 2 && strcmp(argv[2], "fail") == 0) return 3;
  return 0;
}
