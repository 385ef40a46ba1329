/* doitgen: multiresolution analysis kernel, A[r][q][:] = A[r][q][:] * C4 (PolyBench linear algebra). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define NR 16
#define NQ 16
#define NP 128
#elif defined(MINI_DATASET)
#define NR 12
#define NQ 12
#define NP 12
#elif defined(SMALL_DATASET)
#define NR 20
#define NQ 20
#define NP 22
#elif defined(MEDIUM_DATASET)
#define NR 50
#define NQ 40
#define NP 60
#elif defined(LARGE_DATASET)
#define NR 150
#define NQ 140
#define NP 160
#elif defined(EXTRALARGE_DATASET)
#define NR 250
#define NQ 220
#define NP 270
#elif defined(PAPER_DATASET)
#define NR 128
#define NQ 128
#define NP 128
#endif
#define _PB_NR PBENCH_LOOP_BOUND(NR, nr)
#define _PB_NQ PBENCH_LOOP_BOUND(NQ, nq)
#define _PB_NP PBENCH_LOOP_BOUND(NP, np)

static void init_array(int nr, int nq, int np, DATA_TYPE POLYBENCH_3D(A, NR, NQ, NP, nr, nq, np),
                       DATA_TYPE POLYBENCH_2D(C4, NP, NP, np, np))
{
  int r, q, p;
  for (r = 0; r < nr; r++)
    for (q = 0; q < nq; q++)
      for (p = 0; p < np; p++)
        A[r][q][p] = (DATA_TYPE)((r * q + p) % np) / np;
  for (r = 0; r < np; r++)
    for (p = 0; p < np; p++)
      C4[r][p] = (DATA_TYPE)((r * p) % np) / np;
}

void kernel_doitgen(int nr, int nq, int np, DATA_TYPE POLYBENCH_3D(A, NR, NQ, NP, nr, nq, np),
                    DATA_TYPE POLYBENCH_2D(C4, NP, NP, np, np), DATA_TYPE POLYBENCH_2D(sum, NR, NP, nr, np))
{
  int r, q, p, s;
#pragma scop
  /* Each r gets its own row of `sum`, so the scratch vector needs no privatisation. */
#pragma omp parallel for private(q, p, s)
  for (r = 0; r < _PB_NR; r++)
    for (q = 0; q < _PB_NQ; q++) {
      for (p = 0; p < _PB_NP; p++) {
        sum[r][p] = SCALAR_VAL(0.0);
        for (s = 0; s < _PB_NP; s++)
          sum[r][p] += A[r][q][s] * C4[s][p];
      }
      for (p = 0; p < _PB_NP; p++)
        A[r][q][p] = sum[r][p];
    }
#pragma endscop
}

int main(void)
{
  int nr = NR, nq = NQ, np = NP;
  POLYBENCH_3D_ARRAY_DECL(A, DATA_TYPE, NR, NQ, NP, nr, nq, np);
  POLYBENCH_2D_ARRAY_DECL(C4, DATA_TYPE, NP, NP, np, np);
  POLYBENCH_2D_ARRAY_DECL(sum, DATA_TYPE, NR, NP, nr, np);

  init_array(nr, nq, np, A, C4);
  pbench_region_begin();
  kernel_doitgen(nr, nq, np, A, C4, sum);
  pbench_region_end();
  pbench_checksum("A", &A[0][0][0], (size_t)nr * nq * np);

  POLYBENCH_FREE_ARRAY(A);
  POLYBENCH_FREE_ARRAY(C4);
  POLYBENCH_FREE_ARRAY(sum);
  return 0;
}
