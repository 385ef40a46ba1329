/* An orphaned for and barrier in a function called from a parallel region, and called serially. */
#include <stdio.h>
static int data[200];
static void work(int n, int scale)
{
  int i;
#pragma omp for
  for (i = 0; i < n; i++)
    data[i] += i * scale;
#pragma omp barrier
}
int main(void)
{
#pragma omp parallel
  work(200, 2);
  work(200, 1);
  long s = 0;
  for (int i = 0; i < 200; i++)
    s += data[i] * (i % 3 + 1);
  printf("orphan %ld\n", s);
  return 0;
}
