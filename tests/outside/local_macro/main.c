/* Index macros defined inside main, just before the region, as many codes do. */
#include <stdio.h>
#include <stdlib.h>

#define N 128

int main(void)
{
    double *img = malloc(sizeof(double) * N * N);
    double *out = malloc(sizeof(double) * N * N);
#define IDX(i, j) ((i) * N + (j))
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : ((v) > (hi) ? (hi) : (v)))
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            img[IDX(i, j)] = (double)((i * j) % 32);

#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            int jl = CLAMP(j - 1, 0, N - 1);
            int jr = CLAMP(j + 1, 0, N - 1);
            out[IDX(i, j)] = img[IDX(i, jl)] + img[IDX(i, j)] + img[IDX(i, jr)];
        }
    }

    double s = 0.0;
    for (int i = 0; i < N * N; i++)
        s += out[i];
    printf("checksum: %.1f\n", s);
#undef IDX
#undef CLAMP
    free(img);
    free(out);
    return 0;
}
