/* What a cold cache line costs when a loop walks down a column: one load per line, a stride of
 * about a page between loads, after a flush (by default the benchmark harness's 64 MiB).
 *
 * Hardware prefetchers follow a walk along a row, so a stream of cold lines costs line / bandwidth;
 * a walk whose every load lands on another page is not prefetched the same way, and how many of the
 * first-level cache's sets its lines fall into changes what it costs (on the Intel host: 8 ns per line
 * over all 64 sets, 11 over 32, 14-16 over 16 or fewer, against 5.4 along a row). For each set count
 * d = 1, 2, 4, .., SETS the walk's stride is an odd multiple of SETS / d lines near SETS lines; it walks
 * 8 neighbouring line-columns of ROWS rows (as a column loop over a matrix of doubles does), timed after
 * a flush, median of REPS repetitions.
 * FLUSH_BYTES (default 64 MiB, the harness's) sizes the flush: more than the last-level cache evicts it all.
 * Usage: strided SETS LINE_BYTES ROWS REPS [FLUSH_BYTES]   Output: `sets_<d>=<ns per line>` lines.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLUMNS 8
static size_t flush_bytes = (size_t)64 << 20;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double sink;

/* write, then read, a buffer larger than the caches; allocated once, so a large flush does not page-fault
 * its way through the kernel at every repetition */
static void flush(void) {
    static double *buf;
    size_t n = flush_bytes / sizeof(double);
    double s = 0;
    if (!buf && !(buf = malloc(n * sizeof *buf))) { fprintf(stderr, "strided: out of memory\n"); exit(3); }
    for (size_t i = 0; i < n; i++) buf[i] = (double)i;
    for (size_t i = 0; i < n; i += 8) s += buf[i];
    sink += s;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The odd multiple of sets / d lines nearest to sets - 3 lines (d = 1: sets lines). */
static long stride_lines(long sets, long d) {
    long unit = sets / d, best = unit;
    for (long m = 1; m * unit <= 2 * sets; m += 2)
        if (labs(m * unit - (sets - 3)) < labs(best - (sets - 3))) best = m * unit;
    return best;
}

static double walk_ns(const char *a, size_t stride, int rows, int reps) {
    double t[64];
    for (int r = 0; r < reps; r++) {
        flush();
        double s = 0, t0 = now();
        for (int c = 0; c < COLUMNS; c++)
            for (int i = 0; i < rows; i++) s += *(const double *)(a + (size_t)i * stride + (size_t)c * 64);
        t[r] = (now() - t0) * 1e9 / ((double)rows * COLUMNS);
        sink += s;
    }
    qsort(t, reps, sizeof *t, cmp);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) { fprintf(stderr, "usage: strided SETS LINE_BYTES ROWS REPS [FLUSH_BYTES]\n"); return 2; }
    long sets = atol(argv[1]), line = atol(argv[2]);
    int rows = atoi(argv[3]), reps = atoi(argv[4]);
    if (argc == 6) flush_bytes = (size_t)atoll(argv[5]);
    if (sets < 1 || (sets & (sets - 1)) || line < 64 || rows < 16 || reps < 1 || reps > 64 || flush_bytes < 64) {
        fprintf(stderr, "strided: need SETS a power of two, LINE_BYTES >= 64, ROWS >= 16, 1 <= REPS <= 64, "
                        "FLUSH_BYTES >= 64\n");
        return 2;
    }
    size_t bytes = (size_t)rows * 2 * sets * line + COLUMNS * line;
    char *a;
    if (posix_memalign((void **)&a, 4096, bytes)) { fprintf(stderr, "strided: out of memory\n"); return 3; }
    memset(a, 1, bytes);
    for (long d = 1; d <= sets; d *= 2)
        printf("sets_%ld=%.4f\n", d, walk_ns(a, (size_t)(stride_lines(sets, d) * line), rows, reps));
    printf("sink=%g\n", sink);
    free(a);
    return 0;
}
