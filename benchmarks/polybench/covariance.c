/* covariance: sample covariance matrix of N observations of M attributes (PolyBench data mining). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define M 256
#define N 128
#elif defined(MINI_DATASET)
#define M 28
#define N 32
#elif defined(SMALL_DATASET)
#define M 60
#define N 68
#elif defined(MEDIUM_DATASET)
#define M 240
#define N 260
#elif defined(LARGE_DATASET)
#define M 1200
#define N 1400
#elif defined(EXTRALARGE_DATASET)
#define M 2600
#define N 3000
#elif defined(PAPER_DATASET)
#define M 1000
#define N 1000
#endif
#define _PB_M PBENCH_LOOP_BOUND(M, m)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

static void init_array(int m, int n, DATA_TYPE *float_n, DATA_TYPE POLYBENCH_2D(data, N, M, n, m))
{
  int i, j;
  *float_n = (DATA_TYPE)n;
  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      data[i][j] = (DATA_TYPE)((i * (j + 1) + 3 * j) % 19) / 19;
}

void kernel_covariance(int m, int n, DATA_TYPE float_n, DATA_TYPE POLYBENCH_2D(data, N, M, n, m),
                       DATA_TYPE POLYBENCH_2D(cov, M, M, m, m), DATA_TYPE POLYBENCH_1D(mean, M, m))
{
  int i, j, k;
#pragma scop
#pragma omp parallel private(i, j, k)
  {
#pragma omp for
    for (j = 0; j < _PB_M; j++) {
      mean[j] = SCALAR_VAL(0.0);
      for (i = 0; i < _PB_N; i++)
        mean[j] += data[i][j];
      mean[j] /= float_n;
    }
#pragma omp for collapse(2)
    for (i = 0; i < _PB_N; i++)
      for (j = 0; j < _PB_M; j++)
        data[i][j] -= mean[j];
    /* Row i of the upper triangle costs M - i: dynamic scheduling balances the triangle. */
#pragma omp for schedule(dynamic, 1)
    for (i = 0; i < _PB_M; i++)
      for (j = i; j < _PB_M; j++) {
        cov[i][j] = SCALAR_VAL(0.0);
        for (k = 0; k < _PB_N; k++)
          cov[i][j] += data[k][i] * data[k][j];
        cov[i][j] /= (float_n - SCALAR_VAL(1.0));
        cov[j][i] = cov[i][j];
      }
  }
#pragma endscop
}

int main(void)
{
  int m = M, n = N;
  DATA_TYPE float_n;
  POLYBENCH_2D_ARRAY_DECL(data, DATA_TYPE, N, M, n, m);
  POLYBENCH_2D_ARRAY_DECL(cov, DATA_TYPE, M, M, m, m);
  POLYBENCH_1D_ARRAY_DECL(mean, DATA_TYPE, M, m);

  init_array(m, n, &float_n, data);
  pbench_region_begin();
  kernel_covariance(m, n, float_n, data, cov, mean);
  pbench_region_end();
  pbench_checksum("cov", &cov[0][0], (size_t)m * m);

  POLYBENCH_FREE_ARRAY(data);
  POLYBENCH_FREE_ARRAY(cov);
  POLYBENCH_FREE_ARRAY(mean);
  return 0;
}
