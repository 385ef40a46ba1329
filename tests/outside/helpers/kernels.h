#ifndef KERNELS_H
#define KERNELS_H

static inline double sq(double v)
{
    return v * v;
}

static inline double dist2(const double *p, const double *q)
{
    return sq(p[0] - q[0]) + sq(p[1] - q[1]);
}

#endif
