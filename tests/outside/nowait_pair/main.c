/* Two independent work-shared loops in one region, the first without its barrier. */
#include <stdio.h>
#include <stdlib.h>

#define LEN 8192

int main(void)
{
    int *a = malloc(sizeof(int) * LEN);
    int *b = malloc(sizeof(int) * LEN);
    int *c = malloc(sizeof(int) * LEN);
    for (int i = 0; i < LEN; i++)
        c[i] = i % 13;

#pragma omp parallel
    {
#pragma omp for nowait schedule(static)
        for (int i = 0; i < LEN; i++)
            a[i] = c[i] * 2;
#pragma omp for schedule(static)
        for (int i = 0; i < LEN; i++)
            b[i] = c[LEN - 1 - i] + 1;
    }

    long check = 0;
    for (int i = 0; i < LEN; i++)
        check += (long)a[i] * 3 + b[i];
    printf("checksum: %ld\n", check);
    free(a);
    free(b);
    free(c);
    return 0;
}
