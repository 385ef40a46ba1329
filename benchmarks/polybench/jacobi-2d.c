/* jacobi-2d: 5-point Jacobi stencil sweeps over a 2D grid (PolyBench stencils). */
#include <stdio.h>
#include "pbench.h"

#if defined(POW2_DATASET)
#error "jacobi-2d has no POW2 dataset (POW2_KERNELS in benchmarks/polybench/catalog.py)"
#endif
#if defined(MINI_DATASET)
#define TSTEPS 8
#define N 30
#elif defined(SMALL_DATASET)
#define TSTEPS 20
#define N 58
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 250
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 1300
#elif defined(EXTRALARGE_DATASET)
#define TSTEPS 1000
#define N 2800
#elif defined(PAPER_DATASET)
#define TSTEPS 10
#define N 4000
#endif
#define _PB_TSTEPS PBENCH_LOOP_BOUND(TSTEPS, tsteps)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

static void init_array(int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n), DATA_TYPE POLYBENCH_2D(B, N, N, n, n))
{
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++) {
      A[i][j] = ((DATA_TYPE)i * (j + 2) + 2) / n;
      B[i][j] = ((DATA_TYPE)i * (j + 3) + 3) / n;
    }
}

void kernel_jacobi_2d(int tsteps, int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n), DATA_TYPE POLYBENCH_2D(B, N, N, n, n))
{
  int t, i, j;
#pragma scop
  /* One team for all time steps; the implicit barrier after each `for` separates the sweeps. */
#pragma omp parallel private(t, i, j)
  {
    for (t = 0; t < _PB_TSTEPS; t++) {
#pragma omp for
      for (i = 1; i < _PB_N - 1; i++)
        for (j = 1; j < _PB_N - 1; j++)
          B[i][j] = SCALAR_VAL(0.2) * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
#pragma omp for
      for (i = 1; i < _PB_N - 1; i++)
        for (j = 1; j < _PB_N - 1; j++)
          A[i][j] = SCALAR_VAL(0.2) * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
    }
  }
#pragma endscop
}

int main(void)
{
  int n = N, tsteps = TSTEPS;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, N, N, n, n);
  POLYBENCH_2D_ARRAY_DECL(B, DATA_TYPE, N, N, n, n);

  init_array(n, A, B);
  pbench_region_begin();
  kernel_jacobi_2d(tsteps, n, A, B);
  pbench_region_end();
  pbench_checksum("A", &A[0][0], (size_t)n * n);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(B);
  return 0;
}
