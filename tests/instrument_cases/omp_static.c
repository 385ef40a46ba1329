/* An original OpenMP program (clang outlines the parallel region) for per-thread traces.
 * With "crash", thread 1 stores through a null pointer after the loop, inside the region.
 * Prints the array address to stderr. Usage: omp_static N [crash] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 100000
double X[MAXN];
int *volatile null_ptr;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int crash = argc > 2 && strcmp(argv[2], "crash") == 0;
  if (n < 1 || n > MAXN) return 2;
  fprintf(stderr, "ADDR X=%p\n", (void *)X);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i = 0; i < n; i++) X[i] = i * 0.5;
    if (crash && omp_get_thread_num() == 1) *null_ptr = 1;
  }
  double s = 0;
  for (int i = 0; i < n; i++) s += X[i];
  printf("%f\n", s);
  return 0;
}
