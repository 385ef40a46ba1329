/* parallel for over a 1-D array with a shared scalar bound (Fig. 2 shape). */
#include <stdio.h>
int main(void)
{
  int i, n = 1000;
  long a[1000];
#pragma omp parallel for
  for (i = 0; i < n; i++)
    a[i] = (long)i * i;
  long s = 0;
  for (i = 0; i < n; i++)
    s += a[i] * (i % 7);
  printf("parallel_for %ld\n", s);
  return 0;
}
