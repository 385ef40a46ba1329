/* Store throughput into L1 when consecutive stores write the same line or each another line.
 *
 * Eight independent 8-byte stores per iteration over a 16 KiB buffer (L1-resident everywhere),
 * either 8 bytes apart (consecutive stores share a line) or one line apart (each store writes
 * another line than the one before it). Cores that commit two stores per cycle only when they
 * write one line (Golden Cove) show the difference; others show none.
 * Usage: stores LINE_BYTES STORES   Output: same_line_ns=<ns per store> new_line_ns=<ns per store>
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

/* Best-of-5 ns per store over `count` stores `stride` bytes apart, repeated to ~`stores` stores. */
static double time_stores(char *buf, size_t stride, size_t count, long stores) {
    long rounds = stores / (long)count + 1;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (long k = 0; k < rounds; k++)
            for (size_t i = 0; i < count; i += 8)
                for (int u = 0; u < 8; u++) *(volatile uint64_t *)(buf + (i + u) * stride) = (uint64_t)k;
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best / ((double)rounds * count) * 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: stores LINE_BYTES STORES\n"); return 2; }
    size_t line = (size_t)atoll(argv[1]);
    long stores = atol(argv[2]);
    if (line < 16 || line % 8 || stores < 1) { fprintf(stderr, "stores: need LINE_BYTES >= 16, a multiple of 8\n"); return 2; }
    size_t count = 16384 / line / 8 * 8;  /* one store per line of a 16 KiB buffer */
    char *buf = aligned_alloc(4096, 16384 + 4096);
    if (!buf || count < 8) { fprintf(stderr, "stores: cannot set up the buffer\n"); return 3; }
    for (size_t i = 0; i < 16384 + 4096; i++) buf[i] = 0;
    printf("same_line_ns=%.4f\n", time_stores(buf, 8, count, stores));
    printf("new_line_ns=%.4f\n", time_stores(buf, line, count, stores));
    return 0;
}
