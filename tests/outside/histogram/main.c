/* Histogram with one shared bin array updated by atomics. */
#include <stdio.h>
#include <stdlib.h>
#include "gen.h"

int main(void)
{
    unsigned *samples = malloc(sizeof(unsigned) * NSAMPLES);
    int bins[NBINS] = {0};
    make_samples(samples, NSAMPLES, 42u);

#pragma omp parallel for
    for (int i = 0; i < NSAMPLES; i++) {
        int b = samples[i] % NBINS;
#pragma omp atomic
        bins[b]++;
    }

    long check = 0;
    for (int b = 0; b < NBINS; b++)
        check += (long)bins[b] * (b + 1);
    printf("checksum: %ld\n", check);
    free(samples);
    return 0;
}
