/* adi: Alternating Direction Implicit solver for 2D heat diffusion (PolyBench stencils). */
#include <stdio.h>
#include "pbench.h"

/* POW2 comes first: pbench.h defines SMALL_DATASET when it sees none of the PolyBench sizes. */
#if defined(POW2_DATASET)
#define TSTEPS 4
#define N 256
#elif defined(MINI_DATASET)
#define TSTEPS 5
#define N 20
#elif defined(SMALL_DATASET)
#define TSTEPS 10
#define N 40
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 200
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 1000
#elif defined(EXTRALARGE_DATASET)
#define TSTEPS 1000
#define N 2000
#elif defined(PAPER_DATASET)
#define TSTEPS 50
#define N 1000
#endif
#define _PB_TSTEPS PBENCH_LOOP_BOUND(TSTEPS, tsteps)
#define _PB_N PBENCH_LOOP_BOUND(N, n)

static void init_array(int n, DATA_TYPE POLYBENCH_2D(u, N, N, n, n))
{
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      u[i][j] = (DATA_TYPE)(i + n - j) / n;
}

void kernel_adi(int tsteps, int n, DATA_TYPE POLYBENCH_2D(u, N, N, n, n), DATA_TYPE POLYBENCH_2D(v, N, N, n, n),
                DATA_TYPE POLYBENCH_2D(p, N, N, n, n), DATA_TYPE POLYBENCH_2D(q, N, N, n, n))
{
  int t, i, j;
  DATA_TYPE DX, DY, DT, B1, B2, mul1, mul2, a, b, c, d, e, f;
#pragma scop
  DX = SCALAR_VAL(1.0) / (DATA_TYPE)_PB_N;
  DY = SCALAR_VAL(1.0) / (DATA_TYPE)_PB_N;
  DT = SCALAR_VAL(1.0) / (DATA_TYPE)_PB_TSTEPS;
  B1 = SCALAR_VAL(2.0);
  B2 = SCALAR_VAL(1.0);
  mul1 = B1 * DT / (DX * DX);
  mul2 = B2 * DT / (DY * DY);
  a = -mul1 / SCALAR_VAL(2.0);
  b = SCALAR_VAL(1.0) + mul1;
  c = a;
  d = -mul2 / SCALAR_VAL(2.0);
  e = SCALAR_VAL(1.0) + mul2;
  f = d;
#pragma omp parallel private(t, i, j)
  {
    for (t = 1; t <= _PB_TSTEPS; t++) {
      /* Column sweep: a tridiagonal solve along each column i of v. */
#pragma omp for nowait
      for (i = 1; i < _PB_N - 1; i++) {
        v[0][i] = SCALAR_VAL(1.0);
        p[i][0] = SCALAR_VAL(0.0);
        q[i][0] = v[0][i];
        for (j = 1; j < _PB_N - 1; j++) {
          p[i][j] = -c / (a * p[i][j - 1] + b);
          q[i][j] = (-d * u[j][i - 1] + (SCALAR_VAL(1.0) + SCALAR_VAL(2.0) * d) * u[j][i] - f * u[j][i + 1]
                     - a * q[i][j - 1]) / (a * p[i][j - 1] + b);
        }
        v[_PB_N - 1][i] = SCALAR_VAL(1.0);
        for (j = _PB_N - 2; j >= 1; j--)
          v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
      }
      /* The row sweep reads neighbouring columns of v: everyone must finish first. */
#pragma omp barrier
      /* Row sweep: a tridiagonal solve along each row i of u. */
#pragma omp for
      for (i = 1; i < _PB_N - 1; i++) {
        u[i][0] = SCALAR_VAL(1.0);
        p[i][0] = SCALAR_VAL(0.0);
        q[i][0] = u[i][0];
        for (j = 1; j < _PB_N - 1; j++) {
          p[i][j] = -f / (d * p[i][j - 1] + e);
          q[i][j] = (-a * v[i - 1][j] + (SCALAR_VAL(1.0) + SCALAR_VAL(2.0) * a) * v[i][j] - c * v[i + 1][j]
                     - d * q[i][j - 1]) / (d * p[i][j - 1] + e);
        }
        u[i][_PB_N - 1] = SCALAR_VAL(1.0);
        for (j = _PB_N - 2; j >= 1; j--)
          u[i][j] = p[i][j] * u[i][j + 1] + q[i][j];
      }
    }
  }
#pragma endscop
}

int main(void)
{
  int n = N, tsteps = TSTEPS;
  POLYBENCH_2D_ARRAY_DECL(u, DATA_TYPE, N, N, n, n);
  POLYBENCH_2D_ARRAY_DECL(v, DATA_TYPE, N, N, n, n);
  POLYBENCH_2D_ARRAY_DECL(p, DATA_TYPE, N, N, n, n);
  POLYBENCH_2D_ARRAY_DECL(q, DATA_TYPE, N, N, n, n);

  init_array(n, u);
  pbench_region_begin();
  kernel_adi(tsteps, n, u, v, p, q);
  pbench_region_end();
  pbench_checksum("u", &u[0][0], (size_t)n * n);

  POLYBENCH_FREE_ARRAY(u);
  POLYBENCH_FREE_ARRAY(v);
  POLYBENCH_FREE_ARRAY(p);
  POLYBENCH_FREE_ARRAY(q);
  return 0;
}
