/* Two files, each with a parallel region: a scale in main.c and a sum in sum.c. */
#include <stdio.h>
#include "sum.h"

#define N 2048

static double v[N];

int main(void) {
  for (int i = 0; i < N; i++)
    v[i] = (double)(i % 13);
#pragma omp parallel for
  for (int i = 0; i < N; i++)
    v[i] *= 3.0;
  printf("checksum: %.1f\n", parallel_sum(v, N));
  return 0;
}
