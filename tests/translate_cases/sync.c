/* master, single, critical (named and unnamed), atomic and barrier in a time loop. */
#include <stdio.h>
int main(void)
{
  int t, i, n = 300;
  long hits = 0, named = 0, atomics = 0, steps = 0, singles = 0;
  static double a[300], b[300];
  for (i = 0; i < n; i++) a[i] = i;
#pragma omp parallel private(t)
  {
    for (t = 0; t < 4; t++) {
#pragma omp for
      for (i = 1; i < n - 1; i++)
        b[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
#pragma omp master
      {
        steps++;
        b[0] = a[0];
        b[n - 1] = a[n - 1];
      }
#pragma omp barrier
#pragma omp for
      for (i = 0; i < n; i++)
        a[i] = b[i];
#pragma omp single
      singles += 1;
#pragma omp critical
      hits += 1;
#pragma omp critical (counter)
      {
        named += 2;
      }
#pragma omp atomic
      atomics += 3;
#pragma omp barrier
    }
  }
  printf("threads-independent: steps=%ld singles=%ld\n", steps, singles);
  printf("per-thread ratio ok: %d %d\n", named == 2 * hits, atomics == 3 * hits);
  double s = 0;
  for (i = 0; i < n; i++) s += a[i];
  printf("a %.6f\n", s);
  return 0;
}
