/* A parallel region inside a parallel region (issue #3, item 5): with nested parallelism off
 * (the OpenMP default) the inner region runs with a team of one on each outer thread. */
#include <stdio.h>
#include <omp.h>
int main(void)
{
  int i, n = 200;
  double a[200], total = 0.0;
  long inner_threads = 0, inner_ids = 0, regions = 0, counted = 0;
  for (i = 0; i < n; i++) a[i] = i;
#pragma omp parallel private(i)
  {
    int me = omp_get_thread_num();
    double local = 0.0;
#pragma omp parallel firstprivate(me) reduction(+:local)
    {
      int k;
#pragma omp for
      for (k = 0; k < n; k++)
        local += a[k] * 0.5;
#pragma omp atomic
      inner_threads += omp_get_num_threads();
#pragma omp atomic
      inner_ids += omp_get_thread_num();
#pragma omp single
      {
        /* one inner team per outer thread: the singles of different teams run at once */
#pragma omp atomic
        regions++;
      }
      me = -1;
    }
#pragma omp atomic
    total += local;
    long count = 0;
#pragma omp parallel for reduction(+:count) schedule(dynamic, 7)
    for (int k = 0; k < n; k++)
      count += k % 3 == 0;
#pragma omp atomic
    counted += count;
#pragma omp barrier
#pragma omp for
    for (i = 0; i < n; i++)
      a[i] += 1.0;
  }
  /* every outer thread ran the inner region once with a team of one */
  printf("per-region %.1f inner team==1: %d ids==0: %d\n", total / regions, inner_threads == regions,
         inner_ids == 0);
  double s = 0.0;
  for (i = 0; i < n; i++) s += a[i];
  printf("a %.1f counted per region %ld\n", s, counted / regions);
  return 0;
}
