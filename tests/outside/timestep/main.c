/* 1-D heat equation: the parallel region lives in a function called once per time step. */
#include <stdio.h>
#include <stdlib.h>
#include "heat.h"

void heat_step(const double *restrict in, double *restrict out, int n)
{
#pragma omp parallel for schedule(static, 64)
    for (int i = 1; i < n - 1; i++)
        out[i] = in[i] + 0.25 * (in[i - 1] - 2.0 * in[i] + in[i + 1]);
}

int main(void)
{
    double *a = calloc(CELLS, sizeof(double));
    double *b = calloc(CELLS, sizeof(double));
    a[CELLS / 2] = 1024.0;
    b[CELLS / 2] = 1024.0;
    for (int t = 0; t < NSTEPS; t++) {
        heat_step(a, b, CELLS);
        double *swap = a;
        a = b;
        b = swap;
    }
    double s = 0.0;
    for (int i = 0; i < CELLS; i++)
        s += a[i] * (i % 7);
    printf("checksum: %.6f\n", s);
    free(a);
    free(b);
    return 0;
}
