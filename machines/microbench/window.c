/* How far an out-of-order core looks ahead past a stalled dependence chain.
 *
 * Many instances of a reduction of L iterations, each starting afresh: within an instance every
 * iteration waits for the previous one; the next instance is independent, and the core starts it
 * as soon as its first operations enter the window, so the last iterations of one instance overlap
 * the first ones of the next. Two chains of different latency per iteration:
 *   add: acc = acc + x[j] * c   (fadd on the chain, ~2-4 cycles)
 *   div: acc = acc / c + x[j]   (fdiv + fadd on the chain, ~15-20 cycles)
 * Each iteration is 6 operations as pptmc's pass counts them (load, fmul or fdiv, fadd, index
 * add, compare, branch); the loops are kept rolled so that stays true. For long instances the
 * time per instance is c L - b: c the chain's cycles per iteration, b = c k - P, k the iterations
 * of the next instance the window holds, P what the loop exit costs (a mispredicted branch). Two
 * chains give k and P (machines/detect.py fits them).
 * Output: `add_<L>=<ns per iteration>` and `div_<L>=...` lines.
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

static double per_iteration(int len, long iterations, int divide) {
    double c = cvol, seed = seedvol, best = 1e30;
    long instances = iterations / len;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (long k = 0; k < instances; k++) {
            double acc = seed;
            const double *x = a + (k & 7) * 8;
            if (divide) {
#pragma clang loop unroll(disable) vectorize(disable)
                for (int j = 0; j < len; j++) acc = acc / c + x[j];
            } else {
#pragma clang loop unroll(disable) vectorize(disable)
                for (int j = 0; j < len; j++) acc = acc + x[j] * c;
            }
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
    static const int lengths[] = {16, 24, 32, 48, 64, 96, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072};
    for (int divide = 0; divide < 2; divide++)
        for (unsigned i = 0; i < sizeof lengths / sizeof *lengths; i++)
            printf("%s_%d=%.5f\n", divide ? "div" : "add", lengths[i], per_iteration(lengths[i], iterations, divide));
    printf("sink=%g\n", sink);
    return 0;
}
