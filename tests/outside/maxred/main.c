/* Largest residual with reduction(max:), plus the arg-max found in a critical section. */
#include <stdio.h>
#include <stdlib.h>

#define COUNT 20000

int main(void)
{
    double *r = malloc(sizeof(double) * COUNT);
    for (int i = 0; i < COUNT; i++)
        r[i] = (double)((i * 7919) % 10007);

    double biggest = 0.0;
#pragma omp parallel for reduction(max:biggest)
    for (int i = 0; i < COUNT; i++)
        if (r[i] > biggest)
            biggest = r[i];

    int where = COUNT;
#pragma omp parallel for
    for (int i = 0; i < COUNT; i++) {
        if (r[i] == biggest) {
#pragma omp critical
            {
                if (i < where)
                    where = i;
            }
        }
    }
    printf("checksum: %.1f %d\n", biggest, where);
    free(r);
    return 0;
}
