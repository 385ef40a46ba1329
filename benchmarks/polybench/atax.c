/* atax: y = A^T (A x), matrix transpose and vector multiplication (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define M 1024
#define N 1024
#elif defined(MINI_DATASET)
#define M 64
#define N 64
#elif defined(SMALL_DATASET)
#define M 200
#define N 200
#elif defined(MEDIUM_DATASET)
#define M 500
#define N 500
#elif defined(LARGE_DATASET)
#define M 2000
#define N 2000
#elif defined(EXTRALARGE_DATASET)
#define M 4000
#define N 4000
#elif defined(PAPER_DATASET)
#define M 4000
#define N 4000
#endif
#define _PB_M PBENCH_LOOP_BOUND(M, m)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

static void init_array(int m, int n, DATA_TYPE POLYBENCH_2D(A, M, N, m, n), DATA_TYPE POLYBENCH_1D(x, N, n))
{
  int i, j;
  for (j = 0; j < n; j++)
    x[j] = SCALAR_VAL(1.0) + (DATA_TYPE)j / n;
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++)
      A[i][j] = (DATA_TYPE)((i + 2 * j) % n) / (4 * m);
}

void kernel_atax(int m, int n, DATA_TYPE POLYBENCH_2D(A, M, N, m, n), DATA_TYPE POLYBENCH_1D(x, N, n),
                 DATA_TYPE POLYBENCH_1D(y, N, n), DATA_TYPE POLYBENCH_1D(tmp, M, m))
{
  int i, j;
#pragma scop
#pragma omp parallel for private(j)
  for (i = 0; i < _PB_M; i++) {
    tmp[i] = SCALAR_VAL(0.0);
    for (j = 0; j < _PB_N; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
  }
  /* Column-wise so each thread owns whole elements of y: no reduction needed. */
#pragma omp parallel for private(i)
  for (j = 0; j < _PB_N; j++) {
    y[j] = SCALAR_VAL(0.0);
    for (i = 0; i < _PB_M; i++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
#pragma endscop
}

int main(void)
{
  int m = M, n = N;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, M, N, m, n);
  POLYBENCH_1D_ARRAY_DECL(x, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(y, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(tmp, DATA_TYPE, M, m);

  init_array(m, n, A, x);
  pbench_region_begin();
  kernel_atax(m, n, A, x, y, tmp);
  pbench_region_end();
  pbench_checksum("y", y, (size_t)n);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(x);
  POLYBENCH_FREE_ARRAY(y);
  POLYBENCH_FREE_ARRAY(tmp);
  return 0;
}
