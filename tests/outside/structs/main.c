/* An array of structs moved in place; only some fields are touched. */
#include <stdio.h>
#include <stdlib.h>
#include "particle.h"

int main(void)
{
    particle_t *p = malloc(sizeof(particle_t) * NPART);
    for (int i = 0; i < NPART; i++) {
        p[i].x = i % 10;
        p[i].y = i % 20;
        p[i].z = 0.0;
        p[i].vx = 1.0;
        p[i].vy = -1.0;
        p[i].vz = (double)(i % 3);
        p[i].alive = (i % 5) != 0;
    }
    for (int step = 0; step < 3; step++) {
#pragma omp parallel for
        for (int i = 0; i < NPART; i++) {
            if (!p[i].alive)
                continue;
            p[i].x += DT * p[i].vx;
            p[i].y += DT * p[i].vy;
            p[i].z += DT * p[i].vz;
        }
    }
    double s = 0.0;
    for (int i = 0; i < NPART; i++)
        s += p[i].x + 2.0 * p[i].y + 3.0 * p[i].z;
    printf("checksum: %.2f\n", s);
    free(p);
    return 0;
}
