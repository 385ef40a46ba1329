/* schedule(static|dynamic|guided[, chunk]) with non-unit and negative steps. */
#include <stdio.h>
#define N 1001
int main(void)
{
  int i, chunk = 3;
  static int a[N], b[N], c[N], d[N], e[N], f[N];
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (i = 0; i < N; i++) a[i] = i + 1;
#pragma omp for schedule(static, 7)
    for (i = N - 1; i >= 0; i--) b[i] = 2 * i;
#pragma omp for schedule(dynamic)
    for (i = 0; i < N; i += 2) c[i] = 3 * i;
#pragma omp for schedule(dynamic, chunk)
    for (i = 1; i <= N - 1; i = i + 2) c[i] = -i;
#pragma omp for schedule(guided)
    for (i = N; i > 0; i -= 1) d[i - 1] = i;
#pragma omp for schedule(guided, 5)
    for (i = 0; i < N; ++i) e[i] = a[i] + b[i];
  }
#pragma omp parallel for schedule(dynamic, 4)
  for (i = 0; i < N; i++) f[i] = c[i] + d[i] + e[i];
  long s = 0;
  for (i = 0; i < N; i++) s += (long)f[i] * (i % 11);
  printf("schedules %ld\n", s);
  return 0;
}
