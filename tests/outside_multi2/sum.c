#include "sum.h"

double parallel_sum(const double *x, int n) {
  double s = 0.0;
#pragma omp parallel for reduction(+ : s) schedule(dynamic, 64)
  for (int i = 0; i < n; i++)
    s += x[i];
  return s;
}
