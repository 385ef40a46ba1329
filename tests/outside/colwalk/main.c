/* Column sums of a 256 x 256 global matrix: every access strides by one row (2 KiB). */
#include <stdio.h>

#define N 256

static double grid[N][N];
static double colsum[N];

int main(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            grid[i][j] = (double)((i + 2 * j) & 15);

#pragma omp parallel for schedule(static)
    for (int j = 0; j < N; j++) {
        double s = 0.0;
        for (int i = 0; i < N; i++)
            s += grid[i][j];
        colsum[j] = s;
    }

    double check = 0.0;
    for (int j = 0; j < N; j++)
        check += colsum[j] * (j % 5 + 1);
    printf("checksum: %.1f\n", check);
    return 0;
}
