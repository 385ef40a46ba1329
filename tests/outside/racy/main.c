/* A racy update: every thread adds into a small shared vector without synchronisation.
   The sums depend on the interleaving, so only the number of updates is printed. */
#include <stdio.h>

#define SLOTS 8
#define ITERS 16384

double shared_vec[SLOTS];

int main(void)
{
    long updates = 0;
#pragma omp parallel for reduction(+:updates)
    for (int i = 0; i < ITERS; i++) {
        shared_vec[i % SLOTS] += 1.0;
        updates++;
    }
    int touched = 0;
    for (int s = 0; s < SLOTS; s++)
        touched += shared_vec[s] > 0.0;
    printf("checksum: %ld %d\n", updates, touched);
    return 0;
}
