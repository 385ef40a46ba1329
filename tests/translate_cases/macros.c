/* Shared scalars hidden in macro expansions, VLA parameters, #pragma scop and single/nowait. */
#include <stdio.h>
#include <stdlib.h>
#include "macros.h"
static void kernel(int n, int m, DATA_TYPE alpha, DATA_TYPE A[N][M], DATA_TYPE B[n][m], DATA_TYPE *out)
{
  int i, j;
  DATA_TYPE acc = 0;
#pragma scop
#pragma omp parallel private(j)
  {
#pragma omp for
    for (i = 0; i < _PB_N; i++)
      for (j = 0; j < _PB_M; j++)
        B[i][j] = SCALE(A[i][j]) + n;
#pragma omp single nowait
    acc = alpha;
#pragma omp for reduction(+:acc)
    for (i = 0; i < _PB_N; i++)
      acc += B[i][i % _PB_M];
  }
#pragma endscop
  *out = acc;
}
int main(void)
{
  static DATA_TYPE A[N][M], B[N][M];
  int i, j;
  DATA_TYPE r;
  for (i = 0; i < N; i++)
    for (j = 0; j < M; j++)
      A[i][j] = (i * j) % 7;
  kernel(N, M, 1.5, A, B, &r);
  double s = 0;
  for (i = 0; i < N; i++)
    for (j = 0; j < M; j++)
      s += B[i][j];
  printf("macros %.3f %.3f\n", s, r);
  return 0;
}
