/* symm: C = alpha*A*B + beta*C with A symmetric, stored in its lower triangle (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define M 128
#define N 256
#elif defined(MINI_DATASET)
#define M 20
#define N 24
#elif defined(SMALL_DATASET)
#define M 44
#define N 52
#elif defined(MEDIUM_DATASET)
#define M 200
#define N 240
#elif defined(LARGE_DATASET)
#define M 1000
#define N 1200
#elif defined(EXTRALARGE_DATASET)
#define M 2000
#define N 2600
#elif defined(PAPER_DATASET)
#define M 1024
#define N 1024
#endif
#define _PB_M PBENCH_LOOP_BOUND(M, m)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

/* Only the lower triangle of A is meaningful; the upper one holds junk the kernel must not read. */
static void init_array(int m, int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE POLYBENCH_2D(C, M, N, m, n),
                       DATA_TYPE POLYBENCH_2D(A, M, M, m, m), DATA_TYPE POLYBENCH_2D(B, M, N, m, n))
{
  int i, j;
  *alpha = SCALAR_VAL(1.5);
  *beta = SCALAR_VAL(1.2);
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      C[i][j] = (DATA_TYPE)((i + j) % 100) / m;
      B[i][j] = (DATA_TYPE)((n + i - j) % 100) / m;
    }
  for (i = 0; i < m; i++)
    for (j = 0; j < m; j++)
      A[i][j] = (j <= i) ? (DATA_TYPE)((i + j) % 100) / m : SCALAR_VAL(-999.0);
}

void kernel_symm(int m, int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE POLYBENCH_2D(C, M, N, m, n),
                 DATA_TYPE POLYBENCH_2D(A, M, M, m, m), DATA_TYPE POLYBENCH_2D(B, M, N, m, n))
{
  int i, j, k;
  DATA_TYPE temp2;
#pragma scop
  /* Row i updates C[k][j] for k < i, so rows depend on each other; columns j do not. */
#pragma omp parallel for private(i, k, temp2)
  for (j = 0; j < _PB_N; j++)
    for (i = 0; i < _PB_M; i++) {
      temp2 = SCALAR_VAL(0.0);
      for (k = 0; k < i; k++) {
        C[k][j] += alpha * B[i][j] * A[i][k];
        temp2 += B[k][j] * A[i][k];
      }
      C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2;
    }
#pragma endscop
}

int main(void)
{
  int m = M, n = N;
  DATA_TYPE alpha, beta;
  POLYBENCH_2D_ARRAY_DECL(C, DATA_TYPE, M, N, m, n);
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, M, M, m, m);
  POLYBENCH_2D_ARRAY_DECL(B, DATA_TYPE, M, N, m, n);

  init_array(m, n, &alpha, &beta, C, A, B);
  pbench_region_begin();
  kernel_symm(m, n, alpha, beta, C, A, B);
  pbench_region_end();
  pbench_checksum("C", &C[0][0], (size_t)m * n);

  POLYBENCH_FREE_ARRAY(C);
  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(B);
  return 0;
}
