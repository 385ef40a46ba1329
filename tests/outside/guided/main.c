/* Work that shrinks with i, scheduled with schedule(guided). */
#include <stdio.h>
#include <stdlib.h>

#define ITEMS 512

static int cost(int i)
{
    return (ITEMS - i) / 8 + 1;
}

int main(void)
{
    int *work = malloc(sizeof(int) * ITEMS * 64);
    long *result = malloc(sizeof(long) * ITEMS);
    for (int i = 0; i < ITEMS * 64; i++)
        work[i] = i % 11;

#pragma omp parallel for schedule(guided)
    for (int i = 0; i < ITEMS; i++) {
        long acc = 0;
        int reps = cost(i);
        for (int k = 0; k < reps; k++)
            acc += work[(i * 64 + k) % (ITEMS * 64)];
        result[i] = acc;
    }

    long check = 0;
    for (int i = 0; i < ITEMS; i++)
        check += result[i] * (i & 3);
    printf("checksum: %ld\n", check);
    free(work);
    free(result);
    return 0;
}
