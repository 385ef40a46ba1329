/* Jacobi sweeps on a 64 x 64 grid; the interior loop nest is collapsed. */
#include <stdio.h>
#include "stencil.h"

double u[GRID][GRID], v[GRID][GRID];

int main(void)
{
    int i, j, t;
    for (i = 0; i < GRID; i++)
        for (j = 0; j < GRID; j++)
            u[i][j] = v[i][j] = (i == 0 || j == 0) ? 16.0 : 0.0;

    for (t = 0; t < STEPS; t++) {
#pragma omp parallel for collapse(2)
        for (i = 1; i < GRID - 1; i++)
            for (j = 1; j < GRID - 1; j++)
                v[i][j] = AVG4(u[i - 1][j], u[i + 1][j], u[i][j - 1], u[i][j + 1]);
#pragma omp parallel for collapse(2)
        for (i = 1; i < GRID - 1; i++)
            for (j = 1; j < GRID - 1; j++)
                u[i][j] = v[i][j];
    }

    double s = 0.0;
    for (i = 0; i < GRID; i++)
        for (j = 0; j < GRID; j++)
            s += u[i][j];
    printf("checksum: %.6f\n", s);
    return 0;
}
