/* INVALID OpenMP: an `omp for` closely nested inside another `omp for` (no parallel between). */
#include <stdio.h>

#define N 64

double m[N][N];

int main(void)
{
#pragma omp parallel
    {
#pragma omp for
        for (int i = 0; i < N; i++) {
#pragma omp for
            for (int j = 0; j < N; j++)
                m[i][j] = i + j;
        }
    }
    printf("checksum: %.1f\n", m[N - 1][N - 1]);
    return 0;
}
