#ifndef MATMUL_H
#define MATMUL_H

#define N 64                      /* power of two: the rows of B alias in the cache */
#define AT(m, i, j) ((m)[(i) * N + (j)])

typedef double real_t;

#endif
