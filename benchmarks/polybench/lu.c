/* lu: in-place LU decomposition without pivoting, A = L U with unit-diagonal L (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

#if defined(POW2_DATASET)
#error "lu has no POW2 dataset (POW2_KERNELS in benchmarks/polybench/catalog.py)"
#endif
#if defined(MINI_DATASET)
#define N 40
#elif defined(SMALL_DATASET)
#define N 86
#elif defined(MEDIUM_DATASET)
#define N 400
#elif defined(LARGE_DATASET)
#define N 2000
#elif defined(EXTRALARGE_DATASET)
#define N 4000
#elif defined(PAPER_DATASET)
#define N 1000
#endif
#define _PB_N PBENCH_LOOP_BOUND(N, n)

/* Strictly diagonally dominant, so elimination without pivoting is stable. */
static void init_array(int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      A[i][j] = (i == j) ? (DATA_TYPE)(n + 1) : (DATA_TYPE)((i * j + 1) % n) / n;
}

void kernel_lu(int n, DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int i, j, k;
#pragma scop
  /* Right-looking elimination: step k scales column k and updates the trailing block.
   * Rows below k are independent within a step; the implicit barrier of `for` orders the steps.
   * Every element sees its updates in the same k order as the sequential algorithm. */
#pragma omp parallel private(i, j, k)
  {
    for (k = 0; k < _PB_N; k++) {
#pragma omp for schedule(static, 1)
      for (i = k + 1; i < _PB_N; i++) {
        A[i][k] = A[i][k] / A[k][k];
        for (j = k + 1; j < _PB_N; j++)
          A[i][j] = A[i][j] - A[i][k] * A[k][j];
      }
    }
  }
#pragma endscop
}

int main(void)
{
  int n = N;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, N, N, n, n);

  init_array(n, A);
  pbench_region_begin();
  kernel_lu(n, A);
  pbench_region_end();
  pbench_checksum("A", &A[0][0], (size_t)n * n);

  POLYBENCH_FREE_ARRAY(A);
  return 0;
}
