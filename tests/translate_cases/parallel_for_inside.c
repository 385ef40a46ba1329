/* parallel region with several for loops, private list, shared pointer and scalars. */
#include <stdio.h>
#include <stdlib.h>
static void kernel(int n, double *x, double *y)
{
  int i, j;
  double scale = 0.5;
#pragma omp parallel private(j) shared(x, y)
  {
#pragma omp for
    for (i = 0; i < n; i++)
      x[i] = i * scale;
#pragma omp for
    for (i = 0; i < n; i++) {
      y[i] = 0;
      for (j = 0; j <= i % 5; j++)
        y[i] += x[i] + j;
    }
  }
}
int main(void)
{
  int n = 777;
  double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  kernel(n, x, y);
  double s = 0;
  for (int i = 0; i < n; i++)
    s += y[i] * (i % 3);
  printf("parallel_for_inside %.6f\n", s);
  free(x);
  free(y);
  return 0;
}
