/* Cost of the C math library's functions, in ns per call, as an -O2 program calls them.
 *
 * Built like the benchmarks (clang -O2, default target, no -ffast-math), so calls that the
 * compiler turns into instructions (fabs) or keeps as calls (exp, log; sqrt with its errno
 * check) behave as they do in the traced programs. Inputs cycle through 1024 values in the
 * functions' usual domain.
 * Throughput: independent calls, results summed into 4 accumulators.
 * Latency: each input depends on the previous result (x[i] + r * 1e-300), which adds one
 *   multiply-add to each call's latency.
 * Output: `<name>.recip_ns=` and `<name>.latency_ns=` per function.
 * Usage: libm CALLS
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1024
static double in[N];
static float inf_[N];
static volatile double tiny = 1e-300;
static volatile float tinyf = 1e-30f;
static double sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BENCH(NAME, T, INPUT, TINY, CALL)                                               \
    static void bench_##NAME(long calls) {                                              \
        double best_thr = 1e30, best_lat = 1e30;                                        \
        for (int rep = 0; rep < 3; rep++) {                                             \
            T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                           \
            double t0 = now();                                                          \
            for (long i = 0; i < calls; i += 4) {                                       \
                const T *x = INPUT + (i & (N - 4));                                     \
                s0 += CALL(x[0]); s1 += CALL(x[1]); s2 += CALL(x[2]); s3 += CALL(x[3]); \
            }                                                                           \
            double thr = (now() - t0) * 1e9 / calls;                                    \
            T r = 0, t = TINY;                                                          \
            t0 = now();                                                                 \
            for (long i = 0; i < calls; i++) r = CALL(INPUT[i & (N - 1)] + r * t);      \
            double lat = (now() - t0) * 1e9 / calls;                                    \
            sink += (double)(s0 + s1 + s2 + s3 + r);                                    \
            if (thr < best_thr) best_thr = thr;                                         \
            if (lat < best_lat) best_lat = lat;                                         \
        }                                                                               \
        printf(#NAME ".recip_ns=%.4f\n" #NAME ".latency_ns=%.4f\n", best_thr, best_lat);\
    }

static double pow2(double x) { return pow(x, 1.37); }
static float pow2f(float x) { return powf(x, 1.37f); }

BENCH(exp, double, in, tiny, exp)
BENCH(log, double, in, tiny, log)
BENCH(sqrt, double, in, tiny, sqrt)
BENCH(pow, double, in, tiny, pow2)
BENCH(sin, double, in, tiny, sin)
BENCH(cos, double, in, tiny, cos)
BENCH(tan, double, in, tiny, tan)
BENCH(atan, double, in, tiny, atan)
BENCH(erf, double, in, tiny, erf)
BENCH(cbrt, double, in, tiny, cbrt)
BENCH(log10, double, in, tiny, log10)
BENCH(expf, float, inf_, tinyf, expf)
BENCH(logf, float, inf_, tinyf, logf)
BENCH(sqrtf, float, inf_, tinyf, sqrtf)
BENCH(powf, float, inf_, tinyf, pow2f)
BENCH(sinf, float, inf_, tinyf, sinf)
BENCH(cosf, float, inf_, tinyf, cosf)

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: libm CALLS\n"); return 2; }
    long calls = atol(argv[1]) & ~3L;
    if (calls < 4) { fprintf(stderr, "libm: CALLS must be at least 4\n"); return 2; }
    for (int i = 0; i < N; i++) {
        in[i] = 0.05 + 4.0 * (double)((i * 389) % N) / N;  /* (0.05, 4.05): every function's domain */
        inf_[i] = (float)in[i];
    }
    bench_exp(calls); bench_log(calls); bench_sqrt(calls); bench_pow(calls); bench_sin(calls);
    bench_cos(calls); bench_tan(calls); bench_atan(calls); bench_erf(calls); bench_cbrt(calls);
    bench_log10(calls); bench_expf(calls); bench_logf(calls); bench_sqrtf(calls); bench_powf(calls);
    bench_sinf(calls); bench_cosf(calls);
    printf("sink=%g\n", sink);
    return 0;
}
