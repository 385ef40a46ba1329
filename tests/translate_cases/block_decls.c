/* Block-scope prototypes and extern variables, and macros defined inside an outer region before
 * a nested one, stay visible in the outlined functions (issue #29). */
#include <stdio.h>
#include <omp.h>

int main(void)
{
  double helper(double);
  int i, a[16], b[16];
  {
    extern int counter;
#define BIAS (counter + 1)
#pragma omp parallel for
    for (i = 0; i < 16; i++)
      a[i] = (int)helper(i) + BIAS;
  }
  int total = 0;
#pragma omp parallel
  {
#define STEP(v) ((v) * 2)
#pragma omp parallel
    {
#pragma omp for
      for (i = 0; i < 16; i++)
        b[i] = STEP(a[i]) + omp_get_level() - omp_get_level();
    }
#pragma omp for reduction(+:total)
    for (i = 0; i < 16; i++)
      total += STEP(1);
  }
  printf("block_decls %d %d %d %d\n", a[15], b[15], total, STEP(3));
  return 0;
}
int counter = 7;
double helper(double v) { return v * 2; }
