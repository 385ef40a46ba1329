/* Sparse matrix-vector product y = A x on a CSR matrix built in csr.c. */
#include <stdio.h>
#include <stdlib.h>
#include "csr.h"

#define ROWS 8192
#define HALF 3

int main(void)
{
    csr_t a = csr_banded(ROWS, HALF);
    double *x = malloc(sizeof(double) * ROWS);
    double *y = malloc(sizeof(double) * ROWS);
    for (int i = 0; i < ROWS; i++)
        x[i] = (double)(i % 6);

    const int *rowptr = a.rowptr;
    const int *col = a.col;
    const double *val = a.val;
#pragma omp parallel for schedule(dynamic, 64)
    for (int r = 0; r < ROWS; r++) {
        double s = 0.0;
        for (int k = rowptr[r]; k < rowptr[r + 1]; k++)
            s += val[k] * x[col[k]];
        y[r] = s;
    }

    double check = 0.0;
    for (int i = 0; i < ROWS; i++)
        check += y[i] * (i % 4);
    printf("checksum: %.1f\n", check);
    csr_free(&a);
    free(x);
    free(y);
    return 0;
}
