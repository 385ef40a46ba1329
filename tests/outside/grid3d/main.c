/* A 7-point sweep over a 3-D array, k fastest; the two outer loops are collapsed. */
#include <stdio.h>

#define NX 32
#define NY 32
#define NZ 32

static float in[NX][NY][NZ];
static float out[NX][NY][NZ];

int main(void)
{
    int x, y, z;
    for (x = 0; x < NX; x++)
        for (y = 0; y < NY; y++)
            for (z = 0; z < NZ; z++)
                in[x][y][z] = (float)((x + y + z) % 8);

#pragma omp parallel for collapse(2) private(z)
    for (x = 1; x < NX - 1; x++)
        for (y = 1; y < NY - 1; y++)
            for (z = 1; z < NZ - 1; z++)
                out[x][y][z] = in[x][y][z] * 6.0f - in[x - 1][y][z] - in[x + 1][y][z]
                             - in[x][y - 1][z] - in[x][y + 1][z] - in[x][y][z - 1] - in[x][y][z + 1];

    double s = 0.0;
    for (x = 0; x < NX; x++)
        for (y = 0; y < NY; y++)
            for (z = 0; z < NZ; z++)
                s += out[x][y][z] * ((x + z) % 3);
    printf("checksum: %.1f\n", s);
    return 0;
}
