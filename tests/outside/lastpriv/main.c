/* firstprivate scratch, lastprivate result and an if() clause on the region. */
#include <stdio.h>

#define LEN 4096

double in[LEN], out[LEN];

int main(void)
{
    double scale = 3.0;
    double last = -1.0;
    int big = LEN > 1000;
    for (int i = 0; i < LEN; i++)
        in[i] = (double)(i % 50);

    int i;
#pragma omp parallel for if(big) firstprivate(scale) lastprivate(last, i)
    for (i = 0; i < LEN; i++) {
        last = in[i] * scale;
        out[i] = last + 1.0;
        scale += 0.0;
    }

    double s = 0.0;
    for (int k = 0; k < LEN; k++)
        s += out[k];
    printf("checksum: %.1f %.1f %d\n", s, last, i);
    return 0;
}
