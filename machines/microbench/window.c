/* How far an out-of-order core looks ahead past a stalled dependence chain.
 *
 * Many instances of a short reduction `acc = acc / c + a[j]` (j < L), each starting afresh:
 * within an instance every iteration waits for the previous one (divide + add latency); the
 * next instance is independent, and the core starts it as soon as its first operations enter
 * the reorder window, so short instances overlap and long ones do not. Printed per L: the
 * time per iteration in ns. One iteration is 6 operations as pptmc's pass counts them (load,
 * fdiv, fadd, index add, compare, branch); the loop is kept rolled so that stays true.
 * Output: `t_<L>=<ns per iteration>` lines.
 * Usage: window ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096
static double a[N];
static volatile double cvol = 1.0000001, seedvol = 0.5;
static double sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double per_iteration(int len, long iterations) {
    double c = cvol, seed = seedvol, best = 1e30;
    long instances = iterations / len;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (long k = 0; k < instances; k++) {
            double acc = seed;
            const double *x = a + (k & 7) * 8;
#pragma clang loop unroll(disable) vectorize(disable)
            for (int j = 0; j < len; j++) acc = acc / c + x[j];
            sink += acc;
        }
        double t = (now() - t0) * 1e9 / ((double)instances * len);
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: window ITERATIONS\n"); return 2; }
    long iterations = atol(argv[1]);
    for (int i = 0; i < N; i++) a[i] = 1e-3 * (i % 17);
    static const int lengths[] = {4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 1024, 4000};
    for (unsigned i = 0; i < sizeof lengths / sizeof *lengths; i++)
        printf("t_%d=%.4f\n", lengths[i], per_iteration(lengths[i], iterations));
    printf("sink=%g\n", sink);
    return 0;
}
