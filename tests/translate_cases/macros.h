/* User header: loop-bound macros that expand to function parameters (PolyBench style). */
#define DATA_TYPE double
#define BOUND(x, y) y
#define _PB_N BOUND(N, n)
#define _PB_M BOUND(M, m)
#define SCALE(x) ((x) * alpha)
#define N 40
#define M 30
