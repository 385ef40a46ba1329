/* An original OpenMP program (clang outlines the parallel region) for per-thread traces.
 * Prints the array address to stderr. Usage: omp_static N */
#include <stdio.h>
#include <stdlib.h>

#define MAXN 100000
double X[MAXN];

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1 || n > MAXN) return 2;
  fprintf(stderr, "ADDR X=%p\n", (void *)X);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; i++) X[i] = i * 0.5;
  double s = 0;
  for (int i = 0; i < n; i++) s += X[i];
  printf("%f\n", s);
  return 0;
}
