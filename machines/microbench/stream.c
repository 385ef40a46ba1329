/* Streaming read bandwidth with OpenMP, in GB/s, for each thread count given.
 *
 * Each thread first-touches its own part of the array; a timed repetition sums the whole
 * array PASSES times (8 bytes read per element), so small, cache-resident arrays are timed
 * over enough bytes. Usage: stream KILOBYTES PASSES REPS THREADS...
 * Output: gbs_<threads>=<value> per thread count (best repetition).
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: stream KILOBYTES PASSES REPS THREADS...\n"); return 2; }
    size_t n = (size_t)atoll(argv[1]) * 1024 / sizeof(uint64_t);
    int passes = atoi(argv[2]), reps = atoi(argv[3]);
    uint64_t *a = malloc(n * sizeof *a);
    if (!a || n == 0 || passes < 1 || reps < 1) { fprintf(stderr, "stream: bad size or out of memory\n"); return 3; }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = i;
    uint64_t sink = 0;
    for (int k = 4; k < argc; k++) {
        int threads = atoi(argv[k]);
        double best = 0;
        for (int r = 0; r < reps; r++) {
            uint64_t sum = 0;
            double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
            for (int p = 0; p < passes; p++) {
#pragma omp for schedule(static) nowait
                for (size_t i = 0; i < n; i++) sum += a[i] ^ (uint64_t)p;
            }
            double gbs = (double)n * sizeof *a * passes / (omp_get_wtime() - t0) / 1e9;
            sink += sum;
            if (gbs > best) best = gbs;
        }
        printf("gbs_%d=%.3f\n", threads, best);
    }
    printf("sink=%llu\n", (unsigned long long)sink);
    free(a);
    return 0;
}
