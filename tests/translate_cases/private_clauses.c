/* private, firstprivate and lastprivate on parallel, for and parallel for. */
#include <stdio.h>
int main(void)
{
  int i, n = 100, t = 7, last = -1, base = 1000, k;
  int a[100], b[100];
#pragma omp parallel for private(t) firstprivate(base) lastprivate(last)
  for (i = 0; i < n; i++) {
    t = i * 2;
    a[i] = base + t;
    last = a[i];
  }
  printf("after parallel for: t=%d last=%d base=%d\n", t, last, base);
#pragma omp parallel firstprivate(base)
  {
#pragma omp for lastprivate(k, i)
    for (i = 0; i < n; i += 3) {
      k = i + base;
      b[i] = k;
    }
#pragma omp master
    last = k;
  }
  printf("after parallel: last=%d i=%d b[99]=%d\n", last, i, b[99]);
  long s = 0;
  for (i = 0; i < n; i++)
    s += a[i];
  printf("sum a=%ld\n", s);
  return 0;
}
