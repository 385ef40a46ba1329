/* convolution-2d: 3x3 convolution of a 2D image (PolyBench/GPU stencils). */
#include <stdio.h>
#include "pbench.h"

#if defined(POW2_DATASET)
#error "convolution-2d has no POW2 dataset (POW2_KERNELS in benchmarks/polybench/catalog.py)"
#endif
#if defined(MINI_DATASET)
#define NI 64
#define NJ 64
#elif defined(SMALL_DATASET)
#define NI 200
#define NJ 200
#elif defined(MEDIUM_DATASET)
#define NI 500
#define NJ 500
#elif defined(LARGE_DATASET)
#define NI 2000
#define NJ 2000
#elif defined(EXTRALARGE_DATASET)
#define NI 8000
#define NJ 8000
#elif defined(PAPER_DATASET)
#define NI 4000
#define NJ 4000
#endif
#define _PB_NI PBENCH_LOOP_BOUND(NI, ni)
#define _PB_NJ PBENCH_LOOP_BOUND(NJ, nj)

static void init_array(int ni, int nj, DATA_TYPE POLYBENCH_2D(A, NI, NJ, ni, nj))
{
  int i, j;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++)
      A[i][j] = (DATA_TYPE)((i * 7 + j * 3) % 32) / 32;
}

void kernel_conv2d(int ni, int nj, DATA_TYPE POLYBENCH_2D(A, NI, NJ, ni, nj), DATA_TYPE POLYBENCH_2D(B, NI, NJ, ni, nj))
{
  int i, j;
  DATA_TYPE c11 = SCALAR_VAL(0.2), c21 = SCALAR_VAL(0.5), c31 = SCALAR_VAL(-0.8);
  DATA_TYPE c12 = SCALAR_VAL(-0.3), c22 = SCALAR_VAL(0.6), c32 = SCALAR_VAL(-0.9);
  DATA_TYPE c13 = SCALAR_VAL(0.4), c23 = SCALAR_VAL(0.7), c33 = SCALAR_VAL(0.1);
#pragma scop
#pragma omp parallel for collapse(2)
  for (i = 1; i < _PB_NI - 1; i++)
    for (j = 1; j < _PB_NJ - 1; j++)
      B[i][j] = c11 * A[i - 1][j - 1] + c12 * A[i][j - 1] + c13 * A[i + 1][j - 1]
              + c21 * A[i - 1][j] + c22 * A[i][j] + c23 * A[i + 1][j]
              + c31 * A[i - 1][j + 1] + c32 * A[i][j + 1] + c33 * A[i + 1][j + 1];
#pragma endscop
}

int main(void)
{
  int ni = NI, nj = NJ;
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, NI, NJ, ni, nj);
  POLYBENCH_2D_ARRAY_DECL(B, DATA_TYPE, NI, NJ, ni, nj);

  init_array(ni, nj, A);
  pbench_region_begin();
  kernel_conv2d(ni, nj, A, B);
  pbench_region_end();
  pbench_checksum("B", &B[0][0], (size_t)ni * nj);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(B);
  return 0;
}
