/* Address-translation cost: nanoseconds per load when every load touches another page.
 *
 * For each count P it loads one 8-byte word from each of P pages, over and over, in eight
 * independent running sums (so no dependence chain sets the pace). Two layouts per P:
 *   paged: word i at i * (PAGE + LINE), so every load is on its own page and the lines spread
 *          over all cache sets;
 *   dense: word i at i * 3 * LINE, the same number of distinct lines packed into few pages.
 * Both touch P lines, so they pay the same cache costs, and paged - dense is what the extra pages
 * cost: nothing while P fits the first-level TLB, then its miss cost, then the page walks once
 * P outgrows the second level. pptmc machines detect reads the knees and steps off this curve.
 * A second pair times a loop walking down a column and updating it in place (a[i] = a[i] * 0.5 + 1,
 * one word per row, the rows laid out as above): on the Intel host a column walk of loads hides its
 * TLB misses behind the loop, but a read-modify-write pays ~1.4 cycles for each (rmw_paged - rmw_dense).
 * The buffers are kept on base pages (MADV_NOHUGEPAGE where the kernel has it), because the page
 * size is what is measured.
 * Usage: tlb PAGE_BYTES LINE_BYTES LOADS P1 [P2 ...]
 * Output per P: paged_<P>=<ns> and dense_<P>=<ns> per load, rmw_paged_<P> and rmw_dense_<P> per update
 * (best of 5 repetitions)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best-of-5 ns per load over `count` words `stride` bytes apart (count a multiple of 8). */
static double time_loads(const char *base, size_t stride, size_t count, long loads, uint64_t *sink) {
    long rounds = loads / (long)count + 1;
    uint64_t s[8] = {0};
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (long k = 0; k < rounds; k++)
            for (size_t i = 0; i < count; i += 8)
                for (int u = 0; u < 8; u++) s[u] += *(const volatile uint64_t *)(base + (i + u) * stride);
        double t = now() - t0;
        if (t < best) best = t;
    }
    for (int u = 0; u < 8; u++) *sink += s[u];
    return best / ((double)rounds * count) * 1e9;
}

/* Best-of-5 ns per update of a walk down `count` rows `stride` bytes apart, one word per row. */
static double time_updates(char *base, size_t stride, size_t count, long updates) {
    long rounds = updates / (long)count + 1;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (long k = 0; k < rounds; k++)
            for (size_t i = 0; i < count; i++) {
                double *p = (double *)(base + i * stride + (size_t)(k & 7) * sizeof(double));
                *p = *p * 0.5 + 1.0;
            }
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best / ((double)rounds * count) * 1e9;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: tlb PAGE_BYTES LINE_BYTES LOADS P1 [P2 ...]\n"); return 2; }
    size_t page = (size_t)atoll(argv[1]), line = (size_t)atoll(argv[2]);
    long loads = atol(argv[3]);
    if (page < 512 || line < 8 || line % 8 || loads < 1) {
        fprintf(stderr, "tlb: need PAGE_BYTES >= 512, LINE_BYTES a multiple of 8, LOADS >= 1\n");
        return 2;
    }
    uint64_t sink = 0;
    for (int a = 4; a < argc; a++) {
        size_t count = (size_t)atoll(argv[a]) / 8 * 8;
        if (count < 8) { fprintf(stderr, "tlb: page count %s below 8\n", argv[a]); return 2; }
        size_t bytes = count * (page + line) + page;
        char *buf = aligned_alloc(page, (bytes + page - 1) / page * page);
        if (!buf) { fprintf(stderr, "tlb: out of memory for %zu pages\n", count); return 3; }
#ifdef MADV_NOHUGEPAGE
        madvise(buf, (bytes + page - 1) / page * page, MADV_NOHUGEPAGE);
#endif
        for (size_t i = 0; i < bytes; i += 64) buf[i] = (char)i;  /* map every page before timing */
        double paged = time_loads(buf, page + line, count, loads, &sink);
        double dense = time_loads(buf, 3 * line, count, loads, &sink);
        printf("paged_%zu=%.4f\ndense_%zu=%.4f\n", count, paged, count, dense);
        printf("rmw_paged_%zu=%.4f\n", count, time_updates(buf, page + line, count, loads / 4));
        printf("rmw_dense_%zu=%.4f\n", count, time_updates(buf, 3 * line, count, loads / 4));
        free(buf);
    }
    printf("sink=%llu\n", (unsigned long long)sink);
    return 0;
}
