#include "kernel.h"

double scaled_dot(const double *x, const double *y, int n, double scale) {
  double s = 0.0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < n; i++)
    s += scale * x[i] * y[i];
  return s;
}
