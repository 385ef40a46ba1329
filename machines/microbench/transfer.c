/* Cache-to-cache transfer: nanoseconds per line when each line was last written by another core.
 *
 * The pattern of a work-shared loop whose rows change owner between steps (lu's schedule(static, 1)):
 * the buffer is ROWS rows of one page each, and in phase p both threads work at once, thread t
 * updating every word of the rows i with (i + p) % 2 == t, then both meet at a barrier. So every line a
 * phase touches is modified in the other core's private cache, and each row is a new stream for the
 * prefetchers. With `same` row i always belongs to thread i % 2 (the same work, nothing moves).
 * Rows are whole pages, one page apart, so that the two cores never write the same page or neighbouring
 * pages at once (on the Intel host both cost extra on their own: interleaved 50-line rows sharing pages
 * took 4.1 ns per line per core with no line moving, neighbouring pages 2.7, rows a page apart 1.3).
 * Times are per line and per core: a phase's time over the lines one thread updates.
 * Usage: transfer LINE_BYTES LINES PHASES   Output: other_ns=<ns per line> same_ns=<ns per line>
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double run(double *a, size_t row_words, size_t rows, size_t line_words, int phases, int migrate) {
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(2)
        {
            int me = omp_get_thread_num();
            for (int p = 0; p < phases; p++) {
#pragma omp barrier
                if (me == 0 && p == 1) t0 = omp_get_wtime();  /* phase 0 only places the rows */
                for (size_t i = 0; i < rows; i++) {
                    if ((int)((i + (migrate ? (size_t)p : 0)) % 2) != me)
                        continue;
                    double *row = a + 2 * i * row_words;
                    for (size_t j = 0; j < row_words; j++)
                        row[j] = row[j] * 0.5 + 1.0;
                }
            }
#pragma omp barrier
            if (me == 0) t1 = omp_get_wtime();
        }
        double per_thread_lines = (double)(rows / 2) * (double)(row_words / line_words);
        double t = (t1 - t0) / ((double)(phases - 1) * per_thread_lines);
        if (t < best) best = t;
    }
    return best * 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: transfer LINE_BYTES LINES PHASES\n"); return 2; }
    size_t line = (size_t)atoll(argv[1]), lines = (size_t)atoll(argv[2]);
    int phases = atoi(argv[3]);
    long page = sysconf(_SC_PAGESIZE);
    if (line < 8 || line % 8 || lines < 1 || phases < 2 || page < (long)line) {
        fprintf(stderr, "transfer: bad arguments\n");
        return 2;
    }
    size_t row_words = (size_t)page / sizeof(double), line_words = line / sizeof(double);
    size_t rows = (lines * line_words + row_words - 1) / row_words;
    rows = rows < 4 ? 4 : rows + rows % 2;  /* even: both threads get the same number of rows */
    double *a = aligned_alloc((size_t)page, 2 * rows * (size_t)page);
    if (!a) { fprintf(stderr, "transfer: out of memory\n"); return 3; }
    for (size_t i = 0; i < 2 * rows * row_words; i++) a[i] = 1.0;
    printf("other_ns=%.4f\n", run(a, row_words, rows, line_words, phases, 1));
    printf("same_ns=%.4f\n", run(a, row_words, rows, line_words, phases, 0));
    free(a);
    return 0;
}
