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
 * With thread counts after PHASES, for each count P: P threads, row i belonging to thread (i + p) % P in
 * phase p, so every line is written by P cores in turn, each taking it from the core that wrote it last.
 * Upgrades (2 threads): row i always belongs to thread i % 2, and in each phase the other thread first reads
 * one word of every line of it, then the owner updates its rows: every line it stores to is one it holds
 * while the other core holds it too, so the store waits for the other copy's invalidation (an upgrade). The
 * update alone is timed, against the same update with no reader in between.
 * Usage: transfer LINE_BYTES LINES PHASES [THREADS...]
 * Output: other_ns=<ns per line> same_ns=<ns per line> upgrade_ns=<ns per line more than with no reader>
 * (2 threads), or other_ns_<P>=<ns per line> per P
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double run(double *a, size_t row_words, size_t rows, size_t line_words, int phases, int migrate,
                  int threads) {
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads)
        {
            int me = omp_get_thread_num();
            for (int p = 0; p < phases; p++) {
#pragma omp barrier
                if (me == 0 && p == 1) t0 = omp_get_wtime();  /* phase 0 only places the rows */
                for (size_t i = 0; i < rows; i++) {
                    if ((int)((i + (migrate ? (size_t)p : 0)) % (size_t)threads) != me)
                        continue;
                    double *row = a + 2 * i * row_words;
                    for (size_t j = 0; j < row_words; j++)
                        row[j] = row[j] * 0.5 + 1.0;
                }
            }
#pragma omp barrier
            if (me == 0) t1 = omp_get_wtime();
        }
        double per_thread_lines = (double)(rows / (size_t)threads) * (double)(row_words / line_words);
        double t = (t1 - t0) / ((double)(phases - 1) * per_thread_lines);
        if (t < best) best = t;
    }
    return best * 1e9;
}

/* ns per line and per core of the owners' updates of their rows, the other thread having read them first
 * (`read`) or not: the update phases alone are timed. */
static double run_upgrade(double *a, size_t row_words, size_t rows, size_t line_words, int phases, int read) {
    double best = 1e30;
    volatile double sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double total = 0;
#pragma omp parallel num_threads(2) reduction(+ : total)
        {
            int me = omp_get_thread_num();
            double s = 0;
            for (int p = 0; p < phases; p++) {
                if (read)
                    for (size_t i = 1 - (size_t)me; i < rows; i += 2)
                        for (size_t j = 0; j < row_words; j += line_words)
                            s += a[2 * i * row_words + j];
#pragma omp barrier
                double t0 = omp_get_wtime();
                for (size_t i = (size_t)me; i < rows; i += 2) {
                    double *row = a + 2 * i * row_words;
                    for (size_t j = 0; j < row_words; j++)
                        row[j] = row[j] * 0.5 + 1.0;
                }
#pragma omp barrier
                if (me == 0 && p > 0)  /* phase 0 only makes each owner's copy its own */
                    total += omp_get_wtime() - t0;
            }
            sink += s;
        }
        double per_thread_lines = (double)(rows / 2) * (double)(row_words / line_words);
        double t = total / ((double)(phases - 1) * per_thread_lines);
        if (t < best) best = t;
    }
    return best * 1e9;
}

/* rows for `lines` lines of one page each, a multiple of `threads` and at least two per thread */
static size_t row_count(size_t lines, size_t line_words, size_t row_words, size_t threads) {
    size_t rows = (lines * line_words + row_words - 1) / row_words;
    rows = rows < 2 * threads ? 2 * threads : rows;
    return (rows + threads - 1) / threads * threads;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: transfer LINE_BYTES LINES PHASES [THREADS...]\n"); return 2; }
    size_t line = (size_t)atoll(argv[1]), lines = (size_t)atoll(argv[2]);
    int phases = atoi(argv[3]);
    long page = sysconf(_SC_PAGESIZE);
    if (line < 8 || line % 8 || lines < 1 || phases < 2 || page < (long)line) {
        fprintf(stderr, "transfer: bad arguments\n");
        return 2;
    }
    size_t row_words = (size_t)page / sizeof(double), line_words = line / sizeof(double);
    if (argc == 4) {  /* two threads, every thread the same number of rows */
        size_t rows = row_count(lines, line_words, row_words, 2);
        double *a = aligned_alloc((size_t)page, 2 * rows * (size_t)page);
        if (!a) { fprintf(stderr, "transfer: out of memory\n"); return 3; }
        for (size_t i = 0; i < 2 * rows * row_words; i++) a[i] = 1.0;
        printf("other_ns=%.4f\n", run(a, row_words, rows, line_words, phases, 1, 2));
        printf("same_ns=%.4f\n", run(a, row_words, rows, line_words, phases, 0, 2));
        double alone = run_upgrade(a, row_words, rows, line_words, phases, 0);
        double upgraded = run_upgrade(a, row_words, rows, line_words, phases, 1);
        printf("upgrade_ns=%.4f\n", upgraded > alone ? upgraded - alone : 0.0);
        free(a);
        return 0;
    }
    for (int k = 4; k < argc; k++) {
        int threads = atoi(argv[k]);
        if (threads < 2) { fprintf(stderr, "transfer: THREADS must be at least 2\n"); return 2; }
        size_t rows = row_count(lines, line_words, row_words, (size_t)threads);
        double *a = aligned_alloc((size_t)page, 2 * rows * (size_t)page);
        if (!a) { fprintf(stderr, "transfer: out of memory\n"); return 3; }
        for (size_t i = 0; i < 2 * rows * row_words; i++) a[i] = 1.0;
        printf("other_ns_%d=%.4f\n", threads, run(a, row_words, rows, line_words, phases, 1, threads));
        free(a);
    }
    return 0;
}
