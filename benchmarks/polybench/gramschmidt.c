/* gramschmidt: QR decomposition A = Q R by modified Gram-Schmidt (PolyBench linear algebra). */
#include <math.h>
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define M 64
#define N 256
#elif defined(MINI_DATASET)
#define M 24
#define N 20
#elif defined(SMALL_DATASET)
#define M 56
#define N 44
#elif defined(MEDIUM_DATASET)
#define M 240
#define N 200
#elif defined(LARGE_DATASET)
#define M 1200
#define N 1000
#elif defined(EXTRALARGE_DATASET)
#define M 2600
#define N 2000
#elif defined(PAPER_DATASET)
#define M 512
#define N 512
#endif
#define _PB_M PBENCH_LOOP_BOUND(M, m)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

/* The dominant diagonal keeps the columns linearly independent. */
static void init_array(int m, int n, DATA_TYPE POLYBENCH_2D(A, M, N, m, n))
{
  int i, j;
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++)
      A[i][j] = (DATA_TYPE)((i * j + 1) % m) / m + ((i == j) ? SCALAR_VAL(10.0) : SCALAR_VAL(0.0));
}

void kernel_gramschmidt(int m, int n, DATA_TYPE POLYBENCH_2D(A, M, N, m, n), DATA_TYPE POLYBENCH_2D(R, N, N, n, n),
                        DATA_TYPE POLYBENCH_2D(Q, M, N, m, n))
{
  int i, j, k;
  DATA_TYPE nrm;
#pragma scop
#pragma omp parallel private(i, j, k)
  {
    for (k = 0; k < _PB_N; k++) {
      /* The norm is a sequential sum so results do not depend on the team size. */
#pragma omp single
      {
        nrm = SCALAR_VAL(0.0);
        for (i = 0; i < _PB_M; i++)
          nrm += A[i][k] * A[i][k];
        R[k][k] = SQRT_FUN(nrm);
      }
#pragma omp for
      for (i = 0; i < _PB_M; i++)
        Q[i][k] = A[i][k] / R[k][k];
#pragma omp for
      for (j = k + 1; j < _PB_N; j++) {
        R[k][j] = SCALAR_VAL(0.0);
        for (i = 0; i < _PB_M; i++)
          R[k][j] += Q[i][k] * A[i][j];
        for (i = 0; i < _PB_M; i++)
          A[i][j] = A[i][j] - Q[i][k] * R[k][j];
      }
    }
  }
#pragma endscop
}

int main(void)
{
  int m = M, n = N;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, M, N, m, n);
  POLYBENCH_2D_ARRAY_DECL(R, DATA_TYPE, N, N, n, n);
  POLYBENCH_2D_ARRAY_DECL(Q, DATA_TYPE, M, N, m, n);

  init_array(m, n, A);
  pbench_region_begin();
  kernel_gramschmidt(m, n, A, R, Q);
  pbench_region_end();
  pbench_checksum("R", &R[0][0], (size_t)n * n);
  pbench_checksum("Q", &Q[0][0], (size_t)m * n);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(R);
  POLYBENCH_FREE_ARRAY(Q);
  return 0;
}
