/* One region with single, master, critical and barrier. */
#include <stdio.h>
#include <omp.h>

#define SIZE 8192

int data[SIZE];
long total;
int setup_done;

int main(void)
{
    int i;
#pragma omp parallel
    {
#pragma omp single
        {
            for (int k = 0; k < SIZE; k++)
                data[k] = k % 17;
            setup_done = 1;
        }
        long mine = 0;
#pragma omp for
        for (i = 0; i < SIZE; i++)
            mine += data[i];
#pragma omp critical
        total += mine;
#pragma omp barrier
#pragma omp master
        {
            total += setup_done;
        }
    }
    printf("checksum: %ld\n", total);
    return 0;
}
