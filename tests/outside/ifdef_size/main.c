/* The problem size is chosen at compile time (-DSIZE=... or -DLARGE). */
#include <stdio.h>
#include "config.h"

static float a[LEN], b[LEN];

int main(void)
{
    for (int i = 0; i < LEN; i++)
        a[i] = (float)(i & 63);
#pragma omp parallel for
    for (int i = 0; i < LEN; i++)
        b[i] = 2.0f * a[i] + 1.0f;
    double s = 0.0;
    for (int i = 0; i < LEN; i++)
        s += b[i];
    printf("checksum: %d %.1f\n", LEN, s);
    return 0;
}
