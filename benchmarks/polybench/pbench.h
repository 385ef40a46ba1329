/* pbench.h - the pptmc benchmark harness (our own code, PolyBench-style conventions).
 *
 * Dataset selection: compile with one of -DMINI_DATASET, -DSMALL_DATASET (default),
 * -DMEDIUM_DATASET, -DLARGE_DATASET, -DEXTRALARGE_DATASET or -DPAPER_DATASET (the
 * sizes of Table 4 of the PPT-Multicore paper).  Each kernel file defines its bounds
 * (N, M, TSTEPS, ...) per dataset and the _PB_* loop-bound macros.
 *
 * Arrays live on the heap: POLYBENCH_2D_ARRAY_DECL(A, DATA_TYPE, N, M, n, m) declares
 * `DATA_TYPE (*A)[M]`, which is passed directly to a kernel parameter declared as
 * `DATA_TYPE POLYBENCH_2D(A, N, M, n, m)`, i.e. `DATA_TYPE A[N][M]`.
 */
#ifndef PBENCH_H
#define PBENCH_H

#include <math.h>
#include <stddef.h>

/* `#pragma scop` / `#pragma endscop` mark the kernel for source tools; compilers
 * do not know them, so keep -Wall output clean. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-pragmas"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

#if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(MEDIUM_DATASET) && \
    !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET) && !defined(PAPER_DATASET)
#define SMALL_DATASET
#endif

#ifndef DATA_TYPE
#define DATA_TYPE double
#define DATA_PRINTF_MODIFIER "%.10e"
#define SCALAR_VAL(x) x
#define SQRT_FUN(x) sqrt(x)
#define EXP_FUN(x) exp(x)
#define LOG_FUN(x) log(x)
#define FABS_FUN(x) fabs(x)
#endif

/* Loop bounds: the runtime parameter by default, the compile-time macro with
 * -DPBENCH_USE_SCALAR_LB (as PolyBench's POLYBENCH_USE_SCALAR_LB). */
#ifdef PBENCH_USE_SCALAR_LB
#define PBENCH_LOOP_BOUND(x, y) x
#else
#define PBENCH_LOOP_BOUND(x, y) y
#endif

/* Kernel parameter declarators. */
#define POLYBENCH_1D(var, d1, ddim1) var[d1]
#define POLYBENCH_2D(var, d1, d2, ddim1, ddim2) var[d1][d2]
#define POLYBENCH_3D(var, d1, d2, d3, ddim1, ddim2, ddim3) var[d1][d2][d3]

/* Heap allocation of arrays, 64-byte aligned so cache-line behaviour is reproducible. */
#define POLYBENCH_1D_ARRAY_DECL(var, type, d1, ddim1) \
  type *var = (type *)pbench_alloc((size_t)(d1), sizeof(type))
#define POLYBENCH_2D_ARRAY_DECL(var, type, d1, d2, ddim1, ddim2) \
  type(*var)[d2] = (type(*)[d2])pbench_alloc((size_t)(d1) * (size_t)(d2), sizeof(type))
#define POLYBENCH_3D_ARRAY_DECL(var, type, d1, d2, d3, ddim1, ddim2, ddim3) \
  type(*var)[d2][d3] = (type(*)[d2][d3])pbench_alloc((size_t)(d1) * (size_t)(d2) * (size_t)(d3), sizeof(type))
#define POLYBENCH_FREE_ARRAY(x) pbench_free((void *)(x))

/* Zeroed, 64-byte aligned memory; exits with a message when allocation fails. */
void *pbench_alloc(size_t count, size_t elem_size);
void pbench_free(void *ptr);

/* Time the parallel regions only.  begin() evicts the caches first when the
 * environment has PBENCH_COLD=1 (buffer size: PBENCH_FLUSH_BYTES, default 64 MiB);
 * end() prints "PBENCH_REGION_SECONDS <seconds>" to stderr. */
void pbench_region_begin(void);
void pbench_region_end(void);

/* Touch a buffer larger than the last-level cache. */
void pbench_flush_cache(size_t bytes);

/* Print "PBENCH_CHECKSUM <name> n=<count> sum=<..> wsum=<..>" to stdout; with
 * PBENCH_DUMP=1 also "PBENCH_DUMP <name> <count>" followed by every value (%.17e). */
void pbench_checksum(const char *name, const double *data, size_t count);

#endif /* PBENCH_H */
