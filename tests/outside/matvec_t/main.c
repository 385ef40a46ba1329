/* y = A^T x with A stored row-major: each thread owns some outputs and strides through A. */
#include <stdio.h>
#include <stdlib.h>

#define ROWS 256
#define COLS 128

int main(void)
{
    float *a = malloc(sizeof(float) * ROWS * COLS);
    float *x = malloc(sizeof(float) * ROWS);
    float *y = malloc(sizeof(float) * COLS);
    for (int r = 0; r < ROWS; r++) {
        x[r] = (float)(r % 4);
        for (int c = 0; c < COLS; c++)
            a[r * COLS + c] = (float)((r ^ c) & 7);
    }

    int c;
#pragma omp parallel for
    for (c = 0; c < COLS; c++) {
        float acc = 0.0f;
        for (int r = 0; r < ROWS; r++)
            acc += a[r * COLS + c] * x[r];
        y[c] = acc;
    }

    long check = 0;
    for (c = 0; c < COLS; c++)
        check += (long)y[c] * (c + 1);
    printf("checksum: %ld\n", check);
    free(a);
    free(x);
    free(y);
    return 0;
}
