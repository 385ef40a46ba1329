/* A program in three files: main here, the parallel kernel in kernel.c, plain helpers in util.c. */
#include <stdio.h>
#include "kernel.h"

#define N 4096

static double a[N], b[N];

int main(void) {
  fill(a, N, 1.0);
  fill(b, N, 2.0);
  double s = scaled_dot(a, b, N, 0.5);
  printf("checksum: %.1f\n", s);
  return 0;
}
