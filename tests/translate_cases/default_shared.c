/* default(shared) and default(none) with explicit shared/private lists. */
#include <stdio.h>
int g_total;
int main(void)
{
  int i, n = 64, m = 3;
  int a[64];
#pragma omp parallel default(none) shared(a, n, m) private(i)
  {
#pragma omp for
    for (i = 0; i < n; i++)
      a[i] = i * m;
  }
#pragma omp parallel for default(shared)
  for (i = 0; i < n; i++)
    a[i] += 1;
  for (i = 0; i < n; i++)
    g_total += a[i];
  printf("total %d\n", g_total);
  return 0;
}
