/* 2mm: D = alpha*A*B*C + beta*D, two chained matrix multiplications (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define NI 32
#define NJ 256
#define NK 256
#define NL 256
#elif defined(MINI_DATASET)
#define NI 16
#define NJ 18
#define NK 22
#define NL 24
#elif defined(SMALL_DATASET)
#define NI 32
#define NJ 36
#define NK 44
#define NL 48
#elif defined(MEDIUM_DATASET)
#define NI 180
#define NJ 190
#define NK 210
#define NL 220
#elif defined(LARGE_DATASET)
#define NI 800
#define NJ 900
#define NK 1100
#define NL 1200
#elif defined(EXTRALARGE_DATASET)
#define NI 1600
#define NJ 1800
#define NK 2200
#define NL 2400
#elif defined(PAPER_DATASET)
#define NI 512
#define NJ 512
#define NK 512
#define NL 512
#endif
#define _PB_NI PBENCH_LOOP_BOUND(NI, ni)
#define _PB_NJ PBENCH_LOOP_BOUND(NJ, nj)
#define _PB_NK PBENCH_LOOP_BOUND(NK, nk)
#define _PB_NL PBENCH_LOOP_BOUND(NL, nl)

static void init_array(int ni, int nj, int nk, int nl, DATA_TYPE *alpha, DATA_TYPE *beta,
                       DATA_TYPE POLYBENCH_2D(A, NI, NK, ni, nk), DATA_TYPE POLYBENCH_2D(B, NK, NJ, nk, nj),
                       DATA_TYPE POLYBENCH_2D(C, NJ, NL, nj, nl), DATA_TYPE POLYBENCH_2D(D, NI, NL, ni, nl))
{
  int i, j;
  *alpha = SCALAR_VAL(1.5);
  *beta = SCALAR_VAL(1.25);
  for (i = 0; i < ni; i++)
    for (j = 0; j < nk; j++)
      A[i][j] = (DATA_TYPE)((i * j + 1) % ni) / ni;
  for (i = 0; i < nk; i++)
    for (j = 0; j < nj; j++)
      B[i][j] = (DATA_TYPE)((i * (j + 1)) % nj) / nj;
  for (i = 0; i < nj; i++)
    for (j = 0; j < nl; j++)
      C[i][j] = (DATA_TYPE)((i * (j + 3) + 1) % nl) / nl;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nl; j++)
      D[i][j] = (DATA_TYPE)((i * (j + 2)) % nk) / nk;
}

void kernel_2mm(int ni, int nj, int nk, int nl, DATA_TYPE alpha, DATA_TYPE beta,
                DATA_TYPE POLYBENCH_2D(tmp, NI, NJ, ni, nj), DATA_TYPE POLYBENCH_2D(A, NI, NK, ni, nk),
                DATA_TYPE POLYBENCH_2D(B, NK, NJ, nk, nj), DATA_TYPE POLYBENCH_2D(C, NJ, NL, nj, nl),
                DATA_TYPE POLYBENCH_2D(D, NI, NL, ni, nl))
{
  int i, j, k;
#pragma scop
#pragma omp parallel private(i, j, k)
  {
#pragma omp for collapse(2)
    for (i = 0; i < _PB_NI; i++)
      for (j = 0; j < _PB_NJ; j++) {
        tmp[i][j] = SCALAR_VAL(0.0);
        for (k = 0; k < _PB_NK; k++)
          tmp[i][j] += alpha * A[i][k] * B[k][j];
      }
#pragma omp for collapse(2)
    for (i = 0; i < _PB_NI; i++)
      for (j = 0; j < _PB_NL; j++) {
        D[i][j] *= beta;
        for (k = 0; k < _PB_NJ; k++)
          D[i][j] += tmp[i][k] * C[k][j];
      }
  }
#pragma endscop
}

int main(void)
{
  int ni = NI, nj = NJ, nk = NK, nl = NL;
  DATA_TYPE alpha, beta;
  POLYBENCH_2D_ARRAY_DECL(tmp, DATA_TYPE, NI, NJ, ni, nj);
  POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, NI, NK, ni, nk);
  POLYBENCH_2D_ARRAY_DECL(B, DATA_TYPE, NK, NJ, nk, nj);
  POLYBENCH_2D_ARRAY_DECL(C, DATA_TYPE, NJ, NL, nj, nl);
  POLYBENCH_2D_ARRAY_DECL(D, DATA_TYPE, NI, NL, ni, nl);

  init_array(ni, nj, nk, nl, &alpha, &beta, A, B, C, D);
  pbench_region_begin();
  kernel_2mm(ni, nj, nk, nl, alpha, beta, tmp, A, B, C, D);
  pbench_region_end();
  pbench_checksum("D", &D[0][0], (size_t)ni * nl);

  POLYBENCH_FREE_ARRAY(tmp);
  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(B);
  POLYBENCH_FREE_ARRAY(C);
  POLYBENCH_FREE_ARRAY(D);
  return 0;
}
