/* durbin: Levinson-Durbin solver for the Yule-Walker (Toeplitz) system (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

#if defined(POW2_DATASET)
#error "durbin has no POW2 dataset (POW2_KERNELS in benchmarks/polybench/catalog.py)"
#endif
#if defined(MINI_DATASET)
#define N 120
#elif defined(SMALL_DATASET)
#define N 400
#elif defined(MEDIUM_DATASET)
#define N 2000
#elif defined(LARGE_DATASET)
#define N 4000
#elif defined(EXTRALARGE_DATASET)
#define N 8000
#elif defined(PAPER_DATASET)
#define N 4000
#endif
#define _PB_N PBENCH_LOOP_BOUND(N, n)

/* r[i] is the autocorrelation at lag i+1 of a strictly diagonally dominant Toeplitz
 * matrix (sum of 0.5/(k+1)^2 over both sides < 1), so every reflection |alpha| < 1. */
static void init_array(int n, DATA_TYPE POLYBENCH_1D(r, N, n))
{
  int i;
  for (i = 0; i < n; i++)
    r[i] = SCALAR_VAL(0.5) / ((DATA_TYPE)(i + 2) * (i + 2));
}

void kernel_durbin(int n, DATA_TYPE POLYBENCH_1D(r, N, n), DATA_TYPE POLYBENCH_1D(y, N, n),
                   DATA_TYPE POLYBENCH_1D(z, N, n))
{
  DATA_TYPE alpha, beta, sum;
  int i, k;
#pragma scop
#pragma omp parallel private(i, k)
  {
#pragma omp single
    {
      y[0] = -r[0];
      beta = SCALAR_VAL(1.0);
      alpha = -r[0];
    }
    for (k = 1; k < _PB_N; k++) {
      /* The dot product feeds alpha, which every thread needs: one thread computes it
       * in sequential order (bit-identical results for any team size), then all wait. */
#pragma omp master
      {
        beta = (1 - alpha * alpha) * beta;
        sum = SCALAR_VAL(0.0);
        for (i = 0; i < k; i++)
          sum += r[k - i - 1] * y[i];
        alpha = -(r[k] + sum) / beta;
      }
#pragma omp barrier
#pragma omp for
      for (i = 0; i < k; i++)
        z[i] = y[i] + alpha * y[k - i - 1];
#pragma omp for
      for (i = 0; i < k; i++)
        y[i] = z[i];
#pragma omp single
      y[k] = alpha;
    }
  }
#pragma endscop
}

int main(void)
{
  int n = N;
  POLYBENCH_1D_ARRAY_DECL(r, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(y, DATA_TYPE, N, n);
  POLYBENCH_1D_ARRAY_DECL(z, DATA_TYPE, N, n);

  init_array(n, r);
  pbench_region_begin();
  kernel_durbin(n, r, y, z);
  pbench_region_end();
  pbench_checksum("y", y, (size_t)n);

  POLYBENCH_FREE_ARRAY(r);
  POLYBENCH_FREE_ARRAY(y);
  POLYBENCH_FREE_ARRAY(z);
  return 0;
}
