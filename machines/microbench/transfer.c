/* Cache-to-cache transfer: nanoseconds per line when each line was last written by another core.
 *
 * Two threads (OpenMP, one per core) take turns: in phase k thread k % 2 updates one word in each of
 * LINES lines (a read-modify-write stream, as a loop that updates rows another thread updated in the
 * previous step), then both meet at a barrier. So every line a phase touches is modified in the
 * other core's private cache. With `same` the same thread runs every phase (its lines stay in its own
 * caches), which gives the stream's cost without the transfers.
 * Usage: transfer LINE_BYTES LINES PHASES   Output: other_ns=<ns per line> same_ns=<ns per line>
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double run(double *a, size_t step, size_t lines, int phases, int alternate) {
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(2)
        {
            int me = omp_get_thread_num();
            for (int p = 0; p < phases; p++) {
#pragma omp barrier
                if (me == 0 && p == 1) t0 = omp_get_wtime();  /* phase 0 only places the lines */
                if (me == (alternate ? p % 2 : 0))
                    for (size_t i = 0; i < lines; i++) a[i * step] = a[i * step] * 0.5 + 1.0;
            }
#pragma omp barrier
            if (me == 0) t1 = omp_get_wtime();
        }
        double t = (t1 - t0) / ((double)(phases - 1) * lines);
        if (t < best) best = t;
    }
    return best * 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: transfer LINE_BYTES LINES PHASES\n"); return 2; }
    size_t line = (size_t)atoll(argv[1]), lines = (size_t)atoll(argv[2]);
    int phases = atoi(argv[3]);
    if (line < 8 || line % 8 || lines < 1 || phases < 2) { fprintf(stderr, "transfer: bad arguments\n"); return 2; }
    size_t step = line / sizeof(double);
    double *a = aligned_alloc(4096, (lines * line + 4095) / 4096 * 4096);
    if (!a) { fprintf(stderr, "transfer: out of memory\n"); return 3; }
    for (size_t i = 0; i < lines * step; i++) a[i] = 1.0;
    printf("other_ns=%.4f\n", run(a, step, lines, phases, 1));
    printf("same_ns=%.4f\n", run(a, step, lines, phases, 0));
    return 0;
}
