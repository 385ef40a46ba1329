/* Dot product with reduction(+:); the values are small integers, so the sum is exact. */
#include <stdio.h>
#include "vec.h"

double x[LEN], y[LEN];

int main(void)
{
    for (int i = 0; i < LEN; i++) {
        x[i] = weight(i);
        y[i] = (double)(i % 3);
    }
    double dot = 0.0;
#pragma omp parallel for reduction(+:dot)
    for (int i = 0; i < LEN; i++)
        dot += x[i] * y[i];
    printf("checksum: %.1f\n", dot);
    return 0;
}
