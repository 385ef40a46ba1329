/* OpenMP parallel overhead, in ns, for each thread count given (the EPCC syncbench idea).
 *
 * fork_join: an empty `#pragma omp parallel` region, timed over ROUNDS regions.
 * barrier: a `#pragma omp for` loop of one iteration per thread (with its implied barrier)
 * inside one parallel region, timed over ROUNDS loops. Each figure is the best of REPS
 * repetitions, minus nothing: the empty body costs a few ns. Usage: overhead ROUNDS REPS THREADS...
 * Output: fork_join_ns_<threads>=<value> and barrier_ns_<threads>=<value> per thread count.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;

static double fork_join(int threads, long rounds) {
    double t0 = omp_get_wtime();
    for (long r = 0; r < rounds; r++) {
#pragma omp parallel num_threads(threads)
        { sink = omp_get_thread_num(); }
    }
    return (omp_get_wtime() - t0) * 1e9 / rounds;
}

static double barrier(int threads, long rounds) {
    double t = 0;
#pragma omp parallel num_threads(threads)
    {
        double t0 = omp_get_wtime();
        for (long r = 0; r < rounds; r++) {
#pragma omp for schedule(static)
            for (int i = 0; i < threads; i++) sink = i;
        }
#pragma omp master
        t = omp_get_wtime() - t0;
    }
    return t * 1e9 / rounds;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: overhead ROUNDS REPS THREADS...\n"); return 2; }
    long rounds = atol(argv[1]);
    int reps = atoi(argv[2]);
    if (rounds < 1 || reps < 1) { fprintf(stderr, "overhead: ROUNDS and REPS must be positive\n"); return 3; }
    for (int k = 3; k < argc; k++) {
        int threads = atoi(argv[k]);
        double best_fj = 1e300, best_bar = 1e300;
        fork_join(threads, rounds / 10 + 1); /* start the thread pool */
        for (int r = 0; r < reps; r++) {
            double fj = fork_join(threads, rounds), bar = barrier(threads, rounds);
            if (fj < best_fj) best_fj = fj;
            if (bar < best_bar) best_bar = bar;
        }
        printf("fork_join_ns_%d=%.2f\nbarrier_ns_%d=%.2f\n", threads, best_fj, threads, best_bar);
    }
    return 0;
}
