/* mvt: x1 += A y1 and x2 += A^T y2, matrix-vector product and transpose (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define N 1024
#elif defined(MINI_DATASET)
#define N 64
#elif defined(SMALL_DATASET)
#define N 200
#elif defined(MEDIUM_DATASET)
#define N 500
#elif defined(LARGE_DATASET)
#define N 2000
#elif defined(EXTRALARGE_DATASET)
#define N 4000
#elif defined(PAPER_DATASET)
#define N 4000
#endif
#define _PB_N PBENCH_LOOP_BOUND(N, n)

static void init_array(int n, DATA_TYPE POLYBENCH_1D(x1, N, n), DATA_TYPE POLYBENCH_1D(x2, N, n),
                       DATA_TYPE POLYBENCH_1D(y1, N, n), DATA_TYPE POLYBENCH_1D(y2, N, n),
                       DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int i, j;
  for (i = 0; i < n; i++) {
    x1[i] = (DATA_TYPE)(i % n) / n;
    x2[i] = (DATA_TYPE)((i + 1) % n) / n;
    y1[i] = (DATA_TYPE)((i + 3) % n) / n;
    y2[i] = (DATA_TYPE)((i + 4) % n) / n;
    for (j = 0; j < n; j++)
      A[i][j] = (DATA_TYPE)((i * j) % n) / n;
  }
}

void kernel_mvt(int n, DATA_TYPE POLYBENCH_1D(x1, N, n), DATA_TYPE POLYBENCH_1D(x2, N, n),
                DATA_TYPE POLYBENCH_1D(y1, N, n), DATA_TYPE POLYBENCH_1D(y2, N, n),
                DATA_TYPE POLYBENCH_2D(A, N, N, n, n))
{
  int i, j;
#pragma scop
#pragma omp parallel for private(j)
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      x1[i] = x1[i] + A[i][j] * y1[j];
#pragma omp parallel for private(j)
  for (i = 0; i < _PB_N; i++)
    for (j = 0; j < _PB_N; j++)
      x2[i] = x2[i] + A[j][i] * y2[j];
#pragma endscop
}

int main(void)
{
  int n = N;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, N, N, n, n);
  POLYBENCH_1D_ARRAY_DECL(x1, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(x2, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(y1, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(y2, DATA_TYPE, N, n);

  init_array(n, x1, x2, y1, y2, A);
  pbench_region_begin();
  kernel_mvt(n, x1, x2, y1, y2, A);
  pbench_region_end();
  pbench_checksum("x1", x1, (size_t)n);
  pbench_checksum("x2", x2, (size_t)n);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(x1);
  POLYBENCH_FREE_ARRAY(x2);
  POLYBENCH_FREE_ARRAY(y1);
  POLYBENCH_FREE_ARRAY(y2);
  return 0;
}
