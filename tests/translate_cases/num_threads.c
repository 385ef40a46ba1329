/* num_threads clause with an expression. */
#include <stdio.h>
int main(void)
{
  int i, want = 2, count = 0;
#pragma omp parallel num_threads(want + 1) reduction(+:count)
  {
#pragma omp for
    for (i = 0; i < 90; i++)
      count += i;
  }
  printf("count %d\n", count);
  return 0;
}
