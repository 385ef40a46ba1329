/* The paper's Fig. 2 summation program. */
#include <stdio.h>
int main()
{
  int i, n, sum;
  n = 500;
  sum = 0;
#pragma omp parallel for reduction(+: sum)
  for(i = 0; i < n; i++)
    sum = sum + i;
  printf("sum %d\n", sum);
  return 0;
}
