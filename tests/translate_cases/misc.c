/* A pointer assigned inside the region, a static local, a struct scalar and a global array. */
#include <stdio.h>
typedef struct {
  int a;
  double b;
} pair_t;
static double g[60];
int main(void)
{
  static int counter = 0;
  pair_t pr = {3, 0.5};
  double *p = g;
  int i;
#pragma omp parallel
  {
#pragma omp single
    {
      p = g + 10;
      counter += 5;
    }
#pragma omp for schedule(static, 4)
    for (i = 0; i < 40; i++)
      p[i] = i * pr.b + pr.a + counter;
  }
  double s = 0;
  for (i = 0; i < 60; i++)
    s += g[i] * (i + 1);
  printf("misc %.2f %d %ld\n", s, counter, (long)(p - g));
  return 0;
}
