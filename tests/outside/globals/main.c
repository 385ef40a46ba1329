/* Extern globals from data.c, plus file-static accumulators, read in one region. */
#include <stdio.h>
#include "data.h"

#define NCLASS 4

static double class_sum[NCLASS];
static double scaled[NPTS];

int main(void)
{
    load_data();
#pragma omp parallel for
    for (int i = 0; i < NPTS; i++)
        scaled[i] = coords[i] * (labels[i] + 1);

    for (int i = 0; i < NPTS; i++)
        class_sum[labels[i]] += scaled[i];
    printf("checksum: %.1f %.1f %.1f %.1f\n", class_sum[0], class_sum[1], class_sum[2], class_sum[3]);
    return 0;
}
