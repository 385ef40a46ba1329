/* Lower-triangular matrix times vector: rows get longer, so schedule(dynamic, 4) balances them. */
#include <stdio.h>

#define DIM 256

static double L[DIM][DIM];
static double vin[DIM], vout[DIM];

int main(void)
{
    for (int i = 0; i < DIM; i++) {
        vin[i] = (double)(i % 9);
        for (int j = 0; j <= i; j++)
            L[i][j] = (double)((i + j) % 4);
    }

#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < DIM; i++) {
        double s = 0.0;
        for (int j = 0; j <= i; j++)
            s += L[i][j] * vin[j];
        vout[i] = s;
    }

    double check = 0.0;
    for (int i = 0; i < DIM; i++)
        check += vout[i];
    printf("checksum: %.1f\n", check);
    return 0;
}
