#ifndef KERNEL_H
#define KERNEL_H
void fill(double *x, int n, double v);
double scaled_dot(const double *x, const double *y, int n, double scale);
#endif
