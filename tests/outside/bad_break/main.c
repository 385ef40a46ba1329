/* INVALID OpenMP: a `break` leaves a work-shared loop early. */
#include <stdio.h>

#define LEN 1000

int values[LEN];

int main(void)
{
    int found = -1;
    for (int i = 0; i < LEN; i++)
        values[i] = (i * 37) % LEN;
#pragma omp parallel for
    for (int i = 0; i < LEN; i++) {
        if (values[i] == 500) {
            found = i;
            break;
        }
    }
    printf("checksum: %d\n", found);
    return 0;
}
