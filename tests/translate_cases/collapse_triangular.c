/* collapse(2) over triangular nests: the inner bound reads the outer variable (issue #3, item 6). */
#include <stdio.h>
#define N 37
int main(void)
{
  int i, j, n = N;
  static double a[N][N], b[N][N];
  long pairs = 0, empty_rows = 0;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      a[i][j] = b[i][j] = 0.0;
#pragma omp parallel for collapse(2) reduction(+:pairs)
  for (i = 0; i < n; i++)
    for (j = i + 1; j < n; j++) {
      a[i][j] = i * 100.0 + j;
      pairs++;
    }
#pragma omp parallel
  {
#pragma omp for collapse(2) schedule(dynamic, 3)
    for (i = n - 1; i >= 0; i -= 2)
      for (j = 0; j <= i; j++)
        b[i][j] += 1.0 + i - j;
#pragma omp for collapse(2) schedule(guided) reduction(+:empty_rows)
    for (i = 0; i < n; i++)
      for (j = i; j < 20; j++)  /* rows past 20 are empty */
        empty_rows += i + 2 * j;
  }
  double s = 0.0, t = 0.0;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++) {
      s += a[i][j] * (i + 1);
      t += b[i][j] * (j + 3);
    }
  printf("pairs %ld s %.1f t %.1f empty %ld\n", pairs, s, t, empty_rows);
  return 0;
}
