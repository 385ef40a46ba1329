/* Pointer-chasing load latency for one working-set size, in nanoseconds per load.
 *
 * The lines of the buffer form one random cycle (Sattolo's algorithm, seeded), so every load
 * depends on the previous one and the hardware prefetchers cannot guess the next line.
 * Usage: chase SIZE_BYTES LOADS SEED   Output: ns_per_load=<value>
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define LINE 64

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: chase SIZE_BYTES LOADS SEED\n"); return 2; }
    size_t lines = (size_t)atoll(argv[1]) / LINE;
    long loads = atol(argv[2]);
    uint64_t state = (uint64_t)atoll(argv[3]);
    if (lines < 2 || loads < 1) { fprintf(stderr, "chase: need at least 2 lines and 1 load\n"); return 2; }
    size_t bytes = ((lines * LINE + (2u << 20) - 1) >> 21) << 21;
    char *buf = aligned_alloc(2u << 20, bytes);
#ifdef MADV_HUGEPAGE
    if (buf) madvise(buf, bytes, MADV_HUGEPAGE); /* fewer TLB misses: time the caches, not page walks */
#endif
    uint32_t *order = malloc(lines * sizeof *order);
    if (!buf || !order) { fprintf(stderr, "chase: out of memory\n"); return 3; }
    for (size_t i = 0; i < lines; i++) order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle through all lines */
        size_t j = next_random(&state) % i;
        uint32_t t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        *(void **)(buf + (size_t)order[i] * LINE) = buf + (size_t)order[(i + 1) % lines] * LINE;
    free(order);
    void **p = (void **)buf;
    size_t warm = lines < 4000000 ? lines : 4000000;
    for (size_t i = 0; i < warm; i++) p = (void **)*p; /* warm: bring the set into the caches */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (long i = 0; i < loads; i++) p = (void **)*p;
        double t = (now() - t0) * 1e9 / loads;
        if (t < best) best = t;
    }
    printf("ns_per_load=%.4f\nsink=%p\n", best, (void *)p);
    free(buf);
    return 0;
}
