/* What a line costs when a walk down a column keeps evicting it from L1 and L2 by set conflicts.
 *
 * Hardware prefetchers fetch a walk along a row ahead of its loads, and a column walk whose lines spread
 * over the sets keeps many misses in flight, so both cost about the serving level's reciprocal throughput
 * per line (lines.c). A column walk whose rows are a power of two apart puts all its lines into a few sets
 * of L1 and L2: they fit L2's capacity but not its set, so every load goes to L3 and, the set's ways being
 * few, with only a few misses in flight: atax at N = 1024 runs its column loop at 7.9 ns per element
 * against 1.3 with its rows padded by one line on an AMD Zen 3 guest, 5.4 against 1.1 on a 16-core
 * Xeon guest. This program walks one column of ROWS rows STRIDE bytes apart round and round, one load
 * per row, eight rows in flight as eight independent sums. detect gives a page as the stride, so the
 * rows share the set bits inside the page, and twice L2's lines per page offset (L2 size / page) as the
 * rows, so they overflow their L2 sets whatever frames the OS gave (3.5-3.8 ns per load on the Zen 3
 * guest, 4.7-5.0 on the Xeon guest, against 2.0 and 2.9 ns per line of a stream from L3).
 * Usage: walks LOADS STRIDE ROWS [STRIDE ROWS ...]
 * Output per walk k (from 0): column_<k>=<ns per load> (best of 5).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best-of-5 ns per load of walking `rows` rows `stride` bytes apart, one load per row, round and round
 * for at least `loads` loads (one warm-up walk first). */
static double time_walk(const char *m, size_t stride, size_t rows, long loads, double *sink) {
    double s[8] = {0}, best = 1e30;
    long rounds = loads / (long)rows + 1;
    for (int r = -1; r < 5; r++) {
        double t0 = now();
        for (long k = 0; k < (r < 0 ? 1 : rounds); k++)
            for (size_t i = 0; i < rows; i += 8)
                for (int u = 0; u < 8; u++) s[u] += *(const volatile double *)(m + (i + u) * stride);
        double t = now() - t0;
        if (r >= 0 && t < best) best = t;
    }
    for (int u = 0; u < 8; u++) *sink += s[u];
    return best / ((double)rounds * rows) * 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2) {
        fprintf(stderr, "usage: walks LOADS STRIDE ROWS [STRIDE ROWS ...]\n");
        return 2;
    }
    long loads = atol(argv[1]);
    if (loads < 1) { fprintf(stderr, "walks: LOADS must be at least 1\n"); return 2; }
    double sink = 0;
    for (int a = 2, k = 0; a + 1 < argc; a += 2, k++) {
        size_t stride = (size_t)atoll(argv[a]), rows = (size_t)atoll(argv[a + 1]);
        if (stride < sizeof(double) || stride % sizeof(double) || rows < 8 || rows % 8) {
            fprintf(stderr, "walks: STRIDE %s must be a multiple of 8, ROWS %s a multiple of 8\n", argv[a], argv[a + 1]);
            return 2;
        }
        size_t bytes = (rows * stride + 4095) / 4096 * 4096;
        char *m = aligned_alloc(4096, bytes);
        if (!m) { fprintf(stderr, "walks: out of memory for %zu rows %zu bytes apart\n", rows, stride); return 3; }
        for (size_t i = 0; i < rows; i++) *(double *)(m + i * stride) = (double)(i & 1023);
        printf("column_%d=%.4f\n", k, time_walk(m, stride, rows, loads, &sink));
        free(m);
    }
    printf("sink=%g\n", sink);
    return 0;
}
