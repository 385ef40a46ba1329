/* Nearest-centre search calling static inline helpers (nested) inside the region. */
#include <stdio.h>
#include "kernels.h"

#define NP 2048
#define NC 16

static double pts[NP][2];
static double centres[NC][2];
static int owner[NP];

static int nearest(const double *p)
{
    int best = 0;
    double bd = dist2(p, centres[0]);
    for (int c = 1; c < NC; c++) {
        double d = dist2(p, centres[c]);
        if (d < bd) {
            bd = d;
            best = c;
        }
    }
    return best;
}

int main(void)
{
    for (int i = 0; i < NP; i++) {
        pts[i][0] = (double)(i % 37);
        pts[i][1] = (double)(i % 23);
    }
    for (int c = 0; c < NC; c++) {
        centres[c][0] = 2.0 * c + 0.5;
        centres[c][1] = 1.5 * c + 0.25;
    }
#pragma omp parallel for
    for (int i = 0; i < NP; i++)
        owner[i] = nearest(pts[i]);

    long check = 0;
    for (int i = 0; i < NP; i++)
        check += (long)owner[i] * (i % 7 + 1);
    printf("checksum: %ld\n", check);
    return 0;
}
