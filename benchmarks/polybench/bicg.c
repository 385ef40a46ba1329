/* bicg: s = A^T r and q = A p, the BiCG sub-kernel of BiCGStab (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define N 1024
#define M 1024
#elif defined(MINI_DATASET)
#define N 64
#define M 60
#elif defined(SMALL_DATASET)
#define N 200
#define M 190
#elif defined(MEDIUM_DATASET)
#define N 500
#define M 480
#elif defined(LARGE_DATASET)
#define N 2000
#define M 1900
#elif defined(EXTRALARGE_DATASET)
#define N 4000
#define M 3800
#elif defined(PAPER_DATASET)
#define N 4000
#define M 4000
#endif
#define _PB_N PBENCH_LOOP_BOUND(N, n)
#define _PB_M PBENCH_LOOP_BOUND(M, m)

static void init_array(int n, int m, DATA_TYPE POLYBENCH_2D(A, N, M, n, m), DATA_TYPE POLYBENCH_1D(r, N, n),
                       DATA_TYPE POLYBENCH_1D(p, M, m))
{
  int i, j;
  for (j = 0; j < m; j++)
    p[j] = (DATA_TYPE)(j % 17) / 17;
  for (i = 0; i < n; i++) {
    r[i] = (DATA_TYPE)(i % 11) / 11;
    for (j = 0; j < m; j++)
      A[i][j] = (DATA_TYPE)((i * (j + 1)) % n) / n;
  }
}

void kernel_bicg(int n, int m, DATA_TYPE POLYBENCH_2D(A, N, M, n, m), DATA_TYPE POLYBENCH_1D(s, M, m),
                 DATA_TYPE POLYBENCH_1D(q, N, n), DATA_TYPE POLYBENCH_1D(p, M, m), DATA_TYPE POLYBENCH_1D(r, N, n))
{
  int i, j;
#pragma scop
#pragma omp parallel private(i, j)
  {
    /* s and q are disjoint, so threads go on to q without waiting. */
#pragma omp for nowait
    for (j = 0; j < _PB_M; j++) {
      s[j] = SCALAR_VAL(0.0);
      for (i = 0; i < _PB_N; i++)
        s[j] = s[j] + r[i] * A[i][j];
    }
#pragma omp for
    for (i = 0; i < _PB_N; i++) {
      q[i] = SCALAR_VAL(0.0);
      for (j = 0; j < _PB_M; j++)
        q[i] = q[i] + A[i][j] * p[j];
    }
  }
#pragma endscop
}

int main(void)
{
  int n = N, m = M;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, N, M, n, m);
  POLYBENCH_1D_ARRAY_DECL(s, DATA_TYPE, M, m);
  POLYBENCH_1D_ARRAY_DECL(q, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(p, DATA_TYPE, M, m);
  POLYBENCH_1D_ARRAY_DECL(r, DATA_TYPE, N, n);

  init_array(n, m, A, r, p);
  pbench_region_begin();
  kernel_bicg(n, m, A, s, q, p, r);
  pbench_region_end();
  pbench_checksum("s", s, (size_t)m);
  pbench_checksum("q", q, (size_t)n);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(s);
  POLYBENCH_FREE_ARRAY(q);
  POLYBENCH_FREE_ARRAY(p);
  POLYBENCH_FREE_ARRAY(r);
  return 0;
}
