/* What an in-place update costs when a walk down a column keeps its dirty lines conflicting out of L1.
 *
 * A column walk that only loads keeps many L1 misses in flight even when its lines fall into one L1 set
 * (walks.c, strided.c). A walk that updates the column (x[i][j] += c, the column stores of symm,
 * gramschmidt and adi) fills every way of those sets with dirty lines, and each refill must first write
 * a dirty victim back to L2: refills into one set wait on each other. On an AMD Zen 3 guest an update
 * walk down one set costs 7.4 ns per row, over two sets 3.4, four 3.1, eight 1.5, against 0.3-0.5 ns with
 * the rows padded by one line (the walk then hits L1).
 * This program walks one column of ROWS rows STRIDE bytes apart, updating one double per row, round and
 * round; each round moves to the next double of the same line, so a round touches the same L1 sets.
 * detect gives, for k = 1, 2, 4, .. L1 sets, STRIDE = L1 way span / k (the span being a page or less, the
 * rows' set bits are the virtual address's) and ROWS = 2 x ways x k: twice what those sets hold, so every
 * update refills, and far less than L2, which serves them whatever frames the OS gave.
 * Usage: updates UPDATES STRIDE ROWS [STRIDE ROWS ...]
 * Output per walk k (from 0): update_<k>=<ns per update> (best of 5).
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

/* Best-of-5 ns per update of walking `rows` rows `stride` bytes apart, one update per row, round and round
 * for at least `updates` updates (one warm-up round first). */
static double time_walk(char *m, size_t stride, size_t rows, long updates) {
    double best = 1e30;
    long rounds = updates / (long)rows + 1;
    for (int r = -1; r < 5; r++) {
        double t0 = now();
        for (long k = 0; k < (r < 0 ? 1 : rounds); k++) {
            size_t j = (size_t)(k % 8) * sizeof(double);
            for (size_t i = 0; i < rows; i++) *(volatile double *)(m + i * stride + j) += 1.5;
        }
        double t = now() - t0;
        if (r >= 0 && t < best) best = t;
    }
    return best / ((double)rounds * rows) * 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2) {
        fprintf(stderr, "usage: updates UPDATES STRIDE ROWS [STRIDE ROWS ...]\n");
        return 2;
    }
    long updates = atol(argv[1]);
    if (updates < 1) { fprintf(stderr, "updates: UPDATES must be at least 1\n"); return 2; }
    double sink = 0;
    for (int a = 2, k = 0; a + 1 < argc; a += 2, k++) {
        size_t stride = (size_t)atoll(argv[a]), rows = (size_t)atoll(argv[a + 1]);
        if (stride < 64 || stride % 64 || rows < 1) {
            fprintf(stderr, "updates: STRIDE %s must be a multiple of 64, ROWS %s at least 1\n", argv[a], argv[a + 1]);
            return 2;
        }
        size_t bytes = (rows * stride + 4095) / 4096 * 4096;
        char *m = aligned_alloc(4096, bytes);
        if (!m) { fprintf(stderr, "updates: out of memory for %zu rows %zu bytes apart\n", rows, stride); return 3; }
        for (size_t i = 0; i < bytes; i += sizeof(double)) *(double *)(m + i) = (double)(i & 1023);
        printf("update_%d=%.4f\n", k, time_walk(m, stride, rows, updates));
        for (size_t i = 0; i < rows; i++) sink += *(double *)(m + i * stride);
        free(m);
    }
    printf("sink=%g\n", sink);
    return 0;
}
