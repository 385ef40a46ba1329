/* collapse(2) and collapse(3), with a VLA parameter, chunks starting mid-row, and continue. */
#include <stdio.h>
static void fill(int n, int m, double A[n][m])
{
  int i, j;
#pragma omp parallel for collapse(2)
  for (i = 0; i < n; i++)
    for (j = m - 1; j >= 0; j--)
      A[i][j] = i * 100 + j;
}
int main(void)
{
  int n = 13, m = 17, i, j, k;
  double A[13][17];
  int C[4][5][6];
  fill(n, m, A);
#pragma omp parallel
  {
#pragma omp for collapse(3) schedule(dynamic, 2)
    for (i = 0; i < 4; i++)
      for (j = 0; j < 5; j++)
        for (k = 0; k < 6; k += 1)
          C[i][j][k] = i * j + k;
  }
  int D[7][5] = {{0}};
#pragma omp parallel for collapse(2) schedule(static, 3)
  for (i = 1; i < 8; i++)
    for (j = 10; j > 0; j -= 2) {
      if ((i + j) % 3 == 0)
        continue; /* the collapsed counters must still advance */
      D[i - 1][j / 2 - 1] = i * 10 + j;
    }
  long u = 0;
  for (i = 0; i < 7; i++)
    for (j = 0; j < 5; j++)
      u += D[i][j] * (i + 2 * j + 1);
  double s = 0;
  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      s += A[i][j] * ((i + j) % 4);
  long t = 0;
  for (i = 0; i < 4; i++)
    for (j = 0; j < 5; j++)
      for (k = 0; k < 6; k++)
        t += C[i][j][k] * (k + 1);
  printf("collapse %.1f %ld %ld\n", s, t, u);
  return 0;
}
