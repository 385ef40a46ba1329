/* An outlined function that calls another instrumented function in the middle of its loop
 * body, to check that the decoded access order follows the program across calls.
 * Prints the array addresses to stderr. Usage: nested_calls N */
#include <stdio.h>
#include <stdlib.h>

#define MAXN 1024
long A[MAXN], B[MAXN], C[MAXN];

__attribute__((noinline)) void OUT__helper(long *b, long i) { b[i] = i * 3; }

static void OUT__1__1__(void *arg) {
  long n = *(long *)arg;
  for (long i = 0; i < n; i++) {
    A[i] = A[i] + 1;
    OUT__helper(B, i);
    C[i] = A[i] + B[i];
  }
}

void (*volatile fn)(void *) = OUT__1__1__;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10;
  if (n < 1 || n > MAXN) return 2;
  fprintf(stderr, "ADDR A=%p B=%p C=%p\n", (void *)A, (void *)B, (void *)C);
  fn(&n);
  long s = 0;
  for (long i = 0; i < n; i++) s += C[i];
  printf("sum %ld\n", s);
  return 0;
}
