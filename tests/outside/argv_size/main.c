/* The size comes from the command line: `prog 64` builds a 64 x 64 problem. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 32;
    if (n < 2 || n > 1024) {
        fprintf(stderr, "usage: %s [n in 2..1024]\n", argv[0]);
        return 1;
    }
    double *m = malloc(sizeof(double) * n * n);
    double *rowsum = malloc(sizeof(double) * n);
    for (int i = 0; i < n * n; i++)
        m[i] = (double)(i % 9);

#pragma omp parallel for
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++)
            s += m[i * n + j];
        rowsum[i] = s;
    }
    double check = 0.0;
    for (int i = 0; i < n; i++)
        check += rowsum[i] * (i + 1);
    printf("checksum: n=%d %.1f\n", n, check);
    free(m);
    free(rowsum);
    return 0;
}
