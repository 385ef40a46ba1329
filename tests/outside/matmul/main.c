/* C = A * B in i-j-k order: B is walked down a column in the inner loop. */
#include <stdio.h>
#include <stdlib.h>
#include "matmul.h"

static void fill(real_t *m, int seed)
{
    for (int i = 0; i < N * N; i++)
        m[i] = (real_t)((i * seed + 3) % 7);
}

int main(void)
{
    real_t *a = malloc(sizeof(real_t) * N * N);
    real_t *b = malloc(sizeof(real_t) * N * N);
    real_t *c = malloc(sizeof(real_t) * N * N);
    int i, j, k;
    fill(a, 5);
    fill(b, 3);

#pragma omp parallel for private(j, k)
    for (i = 0; i < N; i++) {
        for (j = 0; j < N; j++) {
            real_t s = 0.0;
            for (k = 0; k < N; k++)
                s += AT(a, i, k) * AT(b, k, j);
            AT(c, i, j) = s;
        }
    }

    real_t sum = 0.0;
    for (i = 0; i < N * N; i++)
        sum += c[i] * (real_t)(i % 13);
    printf("checksum: %.1f\n", sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
