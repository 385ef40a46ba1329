/* The program's global arrays are defined here and filled by load_data. */
#include "data.h"

double coords[NPTS];
int labels[NPTS];

void load_data(void)
{
    for (int i = 0; i < NPTS; i++) {
        coords[i] = (double)(i % 101);
        labels[i] = i % 4;
    }
}
