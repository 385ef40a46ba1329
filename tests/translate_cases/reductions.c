/* Every reduction operator; integer data (and exactly representable doubles) so results are exact. */
#include <stdio.h>
int main(void)
{
  int i, n = 200;
  long sum = 5, prod = 1, diff = 0, mn = 1000, mx = -1000, band = ~0L, bor = 0, bxor = 0;
  int land = 1, lor = 0;
  double dsum = 0.25, dmax = -1.0;
#pragma omp parallel for reduction(+:sum) reduction(*:prod) reduction(-:diff) reduction(min:mn) \
    reduction(max:mx) reduction(&:band) reduction(|:bor) reduction(^:bxor) reduction(&&:land) \
    reduction(||:lor) reduction(+:dsum) reduction(max:dmax)
  for (i = 0; i < n; i++) {
    sum += i;
    if (i % 50 == 1)
      prod *= 3;
    diff -= i;
    mn = (i * 7 % 101) < mn ? (i * 7 % 101) : mn;
    mx = (i * 13 % 97) > mx ? (i * 13 % 97) : mx;
    band &= ~(1L << (i % 40));
    bor |= 1L << (i % 13);
    bxor ^= (long)i * 2654435761L;
    land = land && (i < 500);
    lor = lor || (i == 150);
    dsum += 0.5;
    dmax = i * 0.25 > dmax ? i * 0.25 : dmax;
  }
  printf("%ld %ld %ld %ld %ld %ld %ld %ld %d %d %.3f %.3f\n", sum, prod, diff, mn, mx, band, bor, bxor,
         land, lor, dsum, dmax);
  int total = 0;
#pragma omp parallel reduction(+:total)
  {
#pragma omp for
    for (i = 0; i < n; i++)
      total += i % 9;
  }
  printf("region reduction %d\n", total);
  return 0;
}
