/* nowait loops followed by an explicit barrier; the second phase reads the first. */
#include <stdio.h>
#define N 500
int main(void)
{
  int i;
  static int a[N], b[N], c[N];
#pragma omp parallel
  {
#pragma omp for nowait
    for (i = 0; i < N; i++) a[i] = i;
#pragma omp for nowait schedule(dynamic)
    for (i = 0; i < N; i++) b[i] = 2 * i;
#pragma omp barrier
#pragma omp for
    for (i = 0; i < N; i++) c[i] = a[N - 1 - i] + b[(i * 7) % N];
  }
  long s = 0;
  for (i = 0; i < N; i++) s += (long)c[i] * (i % 5);
  printf("nowait %ld\n", s);
  return 0;
}
