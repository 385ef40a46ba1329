/* Crash robustness: the region stores A[i] = i for i < n (n known accesses, one 8-byte store
 * each), then ends as MODE asks: segv (a store through a null pointer, in the traced code),
 * stack (unbounded recursion), fpe, ill, abrt, term, kill (signals), _exit (_exit(5) inside the
 * region), exit (exit(4) inside the region), _exit0 (_exit(0) in main after the region), ok.
 * Prints A's address to stderr. Usage: crash N MODE */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXN 100000
double A[MAXN];
int *volatile null_ptr;  /* NULL read at run time: a real fault, not UB the compiler can drop */
volatile int zero, k_num;
struct OUT__1__1___data { int n; int mode; };
static const char *modes[] = {"ok", "segv", "stack", "fpe", "ill", "abrt", "term", "kill", "_exit", "exit",
                              "_exit0"};

__attribute__((noinline)) static int deep(int k) {
  volatile char pad[512];
  pad[k & 511] = (char)k;
  return deep(k + 1) + pad[3];
}

__attribute__((noinline)) static void end_run(int mode) {
  switch (mode) {
  case 2: fprintf(stderr, "%d\n", deep(0)); break;
  case 3: fprintf(stderr, "%d\n", (k_num + 7) / zero); break;
  case 4: __builtin_trap();
  case 5: abort();
  case 6: raise(SIGTERM); break;
  case 7: raise(SIGKILL); break;
  case 8: _exit(5);
  case 9: exit(4);
  }
}

static void OUT__1__1__(void *arg) {
  struct OUT__1__1___data *d = (struct OUT__1__1___data *)arg;
  int n = d->n;
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
  for (int i = 0; i < n; i++) A[i] = i;
  if (d->mode == 1) *null_ptr = 1;
  else if (d->mode) end_run(d->mode);
}

void (*volatile fn)(void *) = OUT__1__1__;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100, mode = 0;
  if (n < 1 || n > MAXN || argc < 3) return 2;
  for (int m = 0; m < (int)(sizeof modes / sizeof *modes); m++)
    if (strcmp(argv[2], modes[m]) == 0) mode = m;
  fprintf(stderr, "ADDR A=%p\n", (void *)A);
  struct OUT__1__1___data d = {n, mode == 10 ? 0 : mode};
  fn(&d);
  printf("%f\n", A[n - 1]);
  fflush(stdout);
  if (mode == 10) _exit(0);
  return 0;
}
