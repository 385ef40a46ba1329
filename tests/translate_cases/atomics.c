/* Hardware atomics for every update form, read and write (issue #3, item 3). */
#include <stdio.h>
int main(void)
{
  int i, n = 4000;
  int ci = 0, cdec = 1000000, cand = -1, cor = 0, cxor = 0, cpre = 0, cmul = 1;
  long cl = 0, ceq = 0, cshift = 0;
  double d = 0.0, dm = 1.0, deq = 0.0, dinc = 0.0, snap = 0.0;
  float f = 0.0f;
  unsigned char bytes[3] = {0, 0, 0};
  long flag = 0, seen = 0, flip = 5, rev = 0;
  double drev = 0.0;
#pragma omp parallel for
  for (i = 0; i < n; i++) {
#pragma omp atomic
    ci += 2;
#pragma omp atomic
    cdec--;
#pragma omp atomic update
    ++cpre;
#pragma omp atomic
    cand &= ~(1 << (i % 20));
#pragma omp atomic
    cor |= 1 << (i % 24);
#pragma omp atomic
    cxor ^= i;
#pragma omp atomic
    cl = cl + (long)i * 3;
#pragma omp atomic
    ceq = ceq - 2 * i;
#pragma omp atomic
    d += 0.5;
#pragma omp atomic
    deq = deq + 0.25 * (i % 4);
#pragma omp atomic
    dinc++;
#pragma omp atomic
    f += 1.0f;
#pragma omp atomic
    bytes[i % 3] += 1;
    if (i % 1000 == 0) {
#pragma omp atomic
      cmul *= 3;
#pragma omp atomic
      dm *= 1.5;
#pragma omp atomic
      cshift += 1L << 3;
    }
#pragma omp atomic
    flip = 7 - flip;
#pragma omp atomic
    rev = 2 * (i % 5) + rev;
#pragma omp atomic
    drev = 0.125 * (i % 8) + drev;
#pragma omp atomic write
    flag = 7;
#pragma omp atomic read
    seen = flag;
#pragma omp atomic read
    snap = d;
  }
  printf("ints %d %d %d %d %d %d %d\n", ci, cdec, cpre, cand, cor, cxor, cmul);
  printf("longs %ld %ld %ld\n", cl, ceq, cshift);
  printf("floats %.3f %.3f %.3f %.3f %.1f\n", d, dm, deq, dinc, f);
  printf("reversed %ld %ld %.3f\n", flip, rev, drev);
  printf("bytes %d %d %d flag %ld %ld %d\n", bytes[0], bytes[1], bytes[2], flag, seen, snap > 0);
  return 0;
}
