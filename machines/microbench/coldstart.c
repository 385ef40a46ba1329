/* The first OpenMP parallel region after a cache flush, in ns, for each thread count given.
 *
 * The benchmark harness (benchmarks/polybench/pbench.c) starts the thread pool, then flushes the caches
 * by writing and reading a buffer it frees again, then times the region: so the region's first fork
 * fetches libomp's code and data, and the outlined function's code, from memory again (and walks cold
 * page tables). This program does the same: per repetition, one warm-up region, the same flush, then a
 * one-iteration-per-thread `omp for` region timed (cold); then the same region again (warm). Output,
 * the median over REPS: cold_ns_<threads>=<value> and warm_ns_<threads>=<value>.
 * Usage: coldstart FLUSH_BYTES REPS THREADS...
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile double sink;
static double lines[1024];

static void flush(size_t bytes) {  /* as pbench_flush_cache: write, read, free */
    size_t count = bytes / sizeof(double) + 1;
    double *buf = NULL;
    if (posix_memalign((void **)&buf, 64, count * sizeof(double)) != 0) { perror("coldstart"); exit(4); }
    memset(buf, 0, count * sizeof(double));
    for (size_t i = 0; i < count; i++) buf[i] = (double)i;
    double s = 0;
    for (size_t i = 0; i < count; i += 8) s += buf[i];
    sink = s;
    free(buf);
}

static double region(int threads) {
    double t0 = omp_get_wtime();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < threads; i++) lines[i * 8] += 1.0;
    return (omp_get_wtime() - t0) * 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: coldstart FLUSH_BYTES REPS THREADS...\n"); return 2; }
    size_t bytes = (size_t)atoll(argv[1]);
    int reps = atoi(argv[2]);
    if (bytes < 1 || reps < 1) { fprintf(stderr, "coldstart: FLUSH_BYTES and REPS must be positive\n"); return 3; }
    double *cold = malloc(reps * sizeof(double)), *warm = malloc(reps * sizeof(double));
    for (int k = 3; k < argc; k++) {
        int threads = atoi(argv[k]);
        for (int r = 0; r < reps; r++) {
            region(threads);
            flush(bytes);
            cold[r] = region(threads);
            warm[r] = region(threads);
        }
        qsort(cold, reps, sizeof(double), by_value);
        qsort(warm, reps, sizeof(double), by_value);
        printf("cold_ns_%d=%.1f\nwarm_ns_%d=%.1f\n", threads, cold[reps / 2], threads, warm[reps / 2]);
    }
    free(cold);
    free(warm);
    return 0;
}
