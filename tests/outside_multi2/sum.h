#ifndef SUM_H
#define SUM_H
double parallel_sum(const double *x, int n);
#endif
