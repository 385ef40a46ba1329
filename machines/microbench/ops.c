/* Latency and reciprocal throughput of the operation classes, in core cycles per operation.
 *
 * Latency: one dependent chain of 8 operations per loop iteration. Throughput: 8 independent
 * chains. An empty asm statement after each operation hides the value from the optimiser, so
 * the chain is neither folded (x + n*y) nor vectorised; build with -O2 -fno-vectorize
 * -fno-slp-vectorize -ffp-contract=off. Output: one `name=cycles` line per figure, then `ghz=`
 * (the fastest dependent-add rate, one add per cycle).
 * Usage: ops ITERATIONS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define FREG "+x"
#else
#define FREG "+w"
#endif
#define HIDE(v) __asm__ volatile("" : "+r"(v))
#define HIDEF(v) __asm__ volatile("" : FREG(v))

static volatile uint64_t seed_one = 1, seed_big = 0xFFFFFFF7u, seed_small = 7;
static volatile double fseed_one = 1.0, fseed_zero = 0.0, fseed_num = 1.0000001, fseed_den = 1.3;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define REP8(s) s s s s s s s s
#define LAT(name, T, HID, init, step)                                            \
    static double name(long n) {                                                  \
        init;                                                                     \
        T x = x0;                                                                 \
        double t0 = now();                                                        \
        for (long i = 0; i < n; i++) { REP8(step; HID(x);) }                     \
        double t = now() - t0;                                                    \
        sink += (double)x;                                                        \
        return t * 1e9 / (8.0 * n);                                               \
    }
#define THR(name, T, HID, init, step)                                            \
    static double name(long n) {                                                  \
        init;                                                                     \
        T a0 = x0, a1 = x0 + 1, a2 = x0 + 2, a3 = x0 + 3, a4 = x0 + 4, a5 = x0 + 5,   \
          a6 = x0 + 6, a7 = x0 + 7;                                               \
        double t0 = now();                                                        \
        for (long i = 0; i < n; i++) {                                            \
            { T x = a0; step; HID(x); a0 = x; }                                   \
            { T x = a1; step; HID(x); a1 = x; } { T x = a2; step; HID(x); a2 = x; } \
            { T x = a3; step; HID(x); a3 = x; } { T x = a4; step; HID(x); a4 = x; } \
            { T x = a5; step; HID(x); a5 = x; } { T x = a6; step; HID(x); a6 = x; } \
            { T x = a7; step; HID(x); a7 = x; }                                   \
        }                                                                         \
        double t = now() - t0;                                                    \
        sink += (double)(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7);                  \
        return t * 1e9 / (8.0 * n);                                               \
    }

static double sink;

#define IADD_INIT uint64_t y = seed_one, x0 = seed_small
#define IDIV_INIT uint32_t c = (uint32_t)seed_big, x0 = (uint32_t)seed_small
#define FADD_INIT double y = fseed_one, x0 = fseed_zero
#define FMUL_INIT double y = fseed_one, x0 = fseed_den
#define FDIV_INIT double c = fseed_num, x0 = fseed_den
#define FFMA_INIT double y = fseed_one, z = fseed_zero, x0 = fseed_den

LAT(int_add_lat, uint64_t, HIDE, IADD_INIT, x += y)
THR(int_add_thr, uint64_t, HIDE, IADD_INIT, x += y)
LAT(int_mul_lat, uint64_t, HIDE, IADD_INIT, x *= y)
THR(int_mul_thr, uint64_t, HIDE, IADD_INIT, x *= y)
LAT(int_div_lat, uint32_t, HIDE, IDIV_INIT, x = c / x)
THR(int_div_thr, uint32_t, HIDE, IDIV_INIT, x = c / x)
LAT(fp_add_lat, double, HIDEF, FADD_INIT, x += y)
THR(fp_add_thr, double, HIDEF, FADD_INIT, x += y)
LAT(fp_mul_lat, double, HIDEF, FMUL_INIT, x *= y)
THR(fp_mul_thr, double, HIDEF, FMUL_INIT, x *= y)
LAT(fp_div_lat, double, HIDEF, FDIV_INIT, x = c / x)
THR(fp_div_thr, double, HIDEF, FDIV_INIT, x = c / x)
LAT(fp_fma_lat, double, HIDEF, FFMA_INIT, x = __builtin_fma(x, y, z))
THR(fp_fma_thr, double, HIDEF, FFMA_INIT, x = __builtin_fma(x, y, z))

/* Load latency: pointer chase around 64 lines (4 KB, always in L1). */
static double load_lat(long n) {
    static void *ring[64 * 8];
    for (int i = 0; i < 64; i++) ring[i * 8] = &ring[((i * 37 + 11) % 64) * 8];
    void **p = (void **)ring[0];
    double t0 = now();
    for (long i = 0; i < n; i++) { REP8(p = (void **)*p;) }
    double t = now() - t0;
    sink += (double)(uintptr_t)p;
    return t * 1e9 / (8.0 * n);
}

/* Load throughput: 8 independent loads per iteration from a 4 KB buffer. */
static double load_thr(long n) {
    static uint64_t buf[512];
    for (int i = 0; i < 512; i++) buf[i] = (uint64_t)i * seed_one;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        const uint64_t *b = buf + ((i & 63) << 3);
        uint64_t v0 = b[0], v1 = b[1], v2 = b[2], v3 = b[3], v4 = b[4], v5 = b[5], v6 = b[6], v7 = b[7];
        __asm__ volatile("" ::"r"(v0), "r"(v1), "r"(v2), "r"(v3), "r"(v4), "r"(v5), "r"(v6), "r"(v7));
    }
    double t = now() - t0;
    return t * 1e9 / (8.0 * n);
}

/* Store throughput: 8 independent stores per iteration into a 4 KB buffer. */
static double store_thr(long n) {
    static uint64_t buf[512];
    double t0 = now();
    for (long i = 0; i < n; i++) {
        uint64_t *b = buf + ((i & 63) << 3);
        b[0] = i; b[1] = i; b[2] = i; b[3] = i; b[4] = i; b[5] = i; b[6] = i; b[7] = i;
        __asm__ volatile("" ::: "memory");
    }
    double t = now() - t0;
    sink += (double)buf[7];
    return t * 1e9 / (8.0 * n);
}

/* Store latency, taken as the store-to-load forwarding round trip of one location. */
static double store_lat(long n) {
    static volatile uint64_t cell;
    uint64_t x = seed_small;
    double t0 = now();
    for (long i = 0; i < n; i++) { REP8(cell = x; x = cell;) }
    double t = now() - t0;
    sink += (double)x;
    return t * 1e9 / (8.0 * n);
}

typedef double (*bench_fn)(long);
static double best(bench_fn f, long n) {
    double b = f(n);
    for (int r = 0; r < 2; r++) { double t = f(n); if (t < b) b = t; }
    return b;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    struct { const char *name; bench_fn f; long scale; } tests[] = {
        {"int_add.latency", int_add_lat, 1}, {"int_add.recip_throughput", int_add_thr, 1},
        {"int_mul.latency", int_mul_lat, 1}, {"int_mul.recip_throughput", int_mul_thr, 1},
        {"int_div.latency", int_div_lat, 8}, {"int_div.recip_throughput", int_div_thr, 8},
        {"fp_add.latency", fp_add_lat, 1}, {"fp_add.recip_throughput", fp_add_thr, 1},
        {"fp_mul.latency", fp_mul_lat, 1}, {"fp_mul.recip_throughput", fp_mul_thr, 1},
        {"fp_div.latency", fp_div_lat, 4}, {"fp_div.recip_throughput", fp_div_thr, 4},
        {"fp_fma.latency", fp_fma_lat, 1}, {"fp_fma.recip_throughput", fp_fma_thr, 1},
        {"load.latency", load_lat, 1}, {"load.recip_throughput", load_thr, 1},
        {"store.latency", store_lat, 1}, {"store.recip_throughput", store_thr, 1},
    };
    /* Cycles = time / time of one dependent add (1 cycle), the add chain timed right before each
     * test, so a clock change or a busy host between tests does not skew the ratio. */
    double fastest_add = best(int_add_lat, n);
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        long m = n / tests[i].scale;
        double add = int_add_lat(m), t = tests[i].f(m);
        /* interleaved minima of many ~1 ms runs: preemption only ever adds time, and on a busy host
         * only runs shorter than a scheduler time slice have a fair chance to finish undisturbed */
        for (int r = 0; r < 14; r++) {
            double a = int_add_lat(m), b = tests[i].f(m);
            if (a < add) add = a;
            if (b < t) t = b;
        }
        if (add < fastest_add) fastest_add = add;
        printf("%s=%.6f\n", tests[i].name, t / add);
    }
    printf("ghz=%.6f\nsink=%g\n", 1.0 / fastest_add, sink);
    return 0;
}
