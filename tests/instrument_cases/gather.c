/* Irregular accesses for the stride predictor: T[idx[i]] with idx from a fixed LCG; then a
 * constant-size memcpy and a variable-size memset, whose lengths are recorded.
 * Prints the array addresses to stderr. Usage: gather N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 4096
int idx[MAXN];
double T[1024], D[1024], E[MAXN];

static void OUT__1__1__(void *arg) {
  int n = *(int *)arg;
  double s = 0;
  for (int i = 0; i < n; i++) s += T[idx[i]];
  T[0] = s;
  memcpy(D, T, 64 * sizeof(double));
  memset(E, 0, (size_t)n * sizeof(double));
}

void (*volatile fn)(void *) = OUT__1__1__;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  if (n < 1 || n > MAXN) return 2;
  unsigned x = 12345;
  for (int i = 0; i < n; i++) { x = x * 1103515245u + 12345u; idx[i] = (x >> 8) % 1024; }
  for (int i = 0; i < 1024; i++) T[i] = i;
  fprintf(stderr, "ADDR idx=%p T=%p D=%p E=%p\n", (void *)idx, (void *)T, (void *)D, (void *)E);
  fn(&n);
  printf("%f %f\n", T[0], D[1] + E[0]);
  return 0;
}
