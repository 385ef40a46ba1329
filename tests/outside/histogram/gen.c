/* Sample generator, kept in its own file like a project's utility code. */
#include "gen.h"

void make_samples(unsigned *out, int n, unsigned seed)
{
    unsigned x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (x >> 16) & 0x7fff;
    }
}
