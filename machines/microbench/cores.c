/* What one core gets while P cores run at once, for each thread count P given (threads pinned by the caller:
 * OMP_PROC_BIND=close, OMP_PLACES=cores).
 *
 * ops: every thread runs ITERATIONS iterations of 8 independent chains (4 integer adds, 4 floating-point
 * adds, an empty asm after each so clang neither folds nor vectorises them); the figure is the slowest
 * thread's ns per operation, best of REPS. Relative to P = 1 it shows the clock and shared-resource cost of
 * more active cores.
 * clock: every thread runs ITERATIONS x 8 integer adds in one dependent chain (one add a cycle at any port
 * pressure); the figure is the slowest thread's ns per add, best of REPS. Relative to P = 1 it shows the clock
 * alone, so that ops over clock separates a slower clock from issue ports shared with a sibling thread.
 * shared: every thread reads one 8-byte word per line of its own SLICE_KIB slice (first touched by itself),
 * in four independent sums as lines.c, about 64 MiB of lines per repetition after one untimed pass; the
 * figure is the slowest thread's ns per line, best of REPS. A slice just beyond the private levels puts
 * P slices in the shared cache while P x SLICE fits there.
 * Usage: cores ITERATIONS SLICE_KIB LINE_BYTES REPS THREADS...
 * Output per thread count P: ops_ns_<P>=<ns per operation per core> clock_ns_<P>=<ns per dependent add>
 * shared_ns_<P>=<ns per line per core>
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HIDE(v) __asm__ volatile("" : "+r"(v))
#if defined(__x86_64__) || defined(__i386__)
#define HIDEF(v) __asm__ volatile("" : "+x"(v))
#else
#define HIDEF(v) __asm__ volatile("" : "+w"(v))
#endif
#define MIB ((size_t)1 << 20)

static volatile uint64_t seed_one = 1;
static volatile double fseed_one = 1.0;
static volatile double sink;

/* ns per operation of one thread's 8 independent chains */
static double ops_ns(long n) {
    uint64_t y = seed_one, i0 = y, i1 = y + 1, i2 = y + 2, i3 = y + 3;
    double fy = fseed_one, f0 = fy, f1 = fy + 1, f2 = fy + 2, f3 = fy + 3;
    double t0 = omp_get_wtime();
    for (long i = 0; i < n; i++) {
        i0 += y; HIDE(i0); i1 += y; HIDE(i1); i2 += y; HIDE(i2); i3 += y; HIDE(i3);
        f0 += fy; HIDEF(f0); f1 += fy; HIDEF(f1); f2 += fy; HIDEF(f2); f3 += fy; HIDEF(f3);
    }
    double t = omp_get_wtime() - t0;
    sink += (double)(i0 + i1 + i2 + i3) + f0 + f1 + f2 + f3;
    return t * 1e9 / (8.0 * (double)n);
}

/* ns per add of one thread's dependent chain of 8n integer adds */
static double clock_ns(long n) {
    uint64_t y = seed_one, x = y;
    double t0 = omp_get_wtime();
    for (long i = 0; i < n; i++) {
        x += y; HIDE(x); x += y; HIDE(x); x += y; HIDE(x); x += y; HIDE(x);
        x += y; HIDE(x); x += y; HIDE(x); x += y; HIDE(x); x += y; HIDE(x);
    }
    double t = omp_get_wtime() - t0;
    sink += (double)x;
    return t * 1e9 / (8.0 * (double)n);
}

/* ns per line of one thread's passes over its slice (one word per line, four sums) */
static double lines_ns(const uint64_t *a, size_t lines, size_t step, int passes) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    double t0 = omp_get_wtime();
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < lines * step; i += 4 * step) {
            s0 += a[i];
            s1 += a[i + step];
            s2 += a[i + 2 * step];
            s3 += a[i + 3 * step];
        }
    double t = omp_get_wtime() - t0;
    sink += (double)(s0 + s1 + s2 + s3);
    return t * 1e9 / ((double)lines * passes);
}

/* best over reps of the slowest thread's figure, for `threads` threads */
static void measure(int threads, long n, size_t slice_bytes, size_t line, int reps, double *ops, double *clock,
                    double *shared) {
    double slowest_ops[64], slowest_clock[64], slowest_lines[64];
    for (int r = 0; r < reps; r++) slowest_ops[r] = slowest_clock[r] = slowest_lines[r] = 0;
    size_t step = line / sizeof(uint64_t), lines = slice_bytes / line / 4 * 4;
    int passes = (int)(64 * MIB / (lines * line)) + 1;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t *a = malloc(lines * line);
        if (!a) failed = 1;
        else
            for (size_t i = 0; i < lines * step; i++) a[i] = i;
#pragma omp barrier
        if (!failed) {
            lines_ns(a, lines, step, 1);  /* bring the slice into the caches */
            for (int r = 0; r < reps; r++) {
#pragma omp barrier
                double o = ops_ns(n);
#pragma omp barrier
                double c = clock_ns(n);
#pragma omp barrier
                double l = lines_ns(a, lines, step, passes);
#pragma omp critical
                {
                    if (o > slowest_ops[r]) slowest_ops[r] = o;
                    if (c > slowest_clock[r]) slowest_clock[r] = c;
                    if (l > slowest_lines[r]) slowest_lines[r] = l;
                }
            }
        }
        free(a);
    }
    if (failed) { fprintf(stderr, "cores: out of memory\n"); exit(3); }
    *ops = *clock = *shared = 1e300;
    for (int r = 0; r < reps; r++) {
        if (slowest_ops[r] < *ops) *ops = slowest_ops[r];
        if (slowest_clock[r] < *clock) *clock = slowest_clock[r];
        if (slowest_lines[r] < *shared) *shared = slowest_lines[r];
    }
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: cores ITERATIONS SLICE_KIB LINE_BYTES REPS THREADS...\n"); return 2; }
    long n = atol(argv[1]);
    size_t slice = (size_t)atoll(argv[2]) * 1024, line = (size_t)atoll(argv[3]);
    int reps = atoi(argv[4]);
    if (n < 1 || line < 32 || line % 8 || slice < 4 * line || reps < 1 || reps > 64) {
        fprintf(stderr, "cores: need ITERATIONS >= 1, LINE_BYTES a multiple of 8 (>= 32), SLICE_KIB >= 4 lines, "
                        "1 <= REPS <= 64\n");
        return 2;
    }
    for (int k = 5; k < argc; k++) {
        int threads = atoi(argv[k]);
        if (threads < 1) { fprintf(stderr, "cores: thread counts must be positive\n"); return 2; }
        double ops, clock, shared;
        measure(threads, n, slice, line, reps, &ops, &clock, &shared);
        printf("ops_ns_%d=%.5f\nclock_ns_%d=%.5f\nshared_ns_%d=%.4f\n", threads, ops, threads, clock, threads,
               shared);
    }
    printf("sink=%g\n", sink);
    return 0;
}
