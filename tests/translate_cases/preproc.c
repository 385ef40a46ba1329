/* Pragmas around preprocessor conditionals, continued lines, loop-declared variables, atomic update. */
#include <stdio.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define LEN 300
int main(int argc, char **argv)
{
  int a[LEN], i, hits = 0;
  (void)argv;
#if 0
#pragma omp task
  a[0] = 1;
#endif
#ifdef _OPENMP
#pragma omp parallel for \
    schedule(guided, 3)
#endif
  for (int k = 0; k < LEN; k++)
    a[k] = k * argc;
#pragma omp parallel for reduction(+ : hits)
  for (i = LEN - 1; i >= 1; i = i - 2)
    hits += a[i] % 7;
#pragma omp parallel
  {
#pragma omp for
    for (i = 0; i <= LEN - 1; i = i + 3) {
#pragma omp atomic update
      hits += 1;
    }
  }
  printf("preproc %d %d\n", hits, a[LEN - 1]);
  return 0;
}
