#ifndef CSR_H
#define CSR_H

typedef struct csr {
    int nrows;
    int *rowptr;
    int *col;
    double *val;
} csr_t;

csr_t csr_banded(int nrows, int halfwidth);
void csr_free(csr_t *m);

#endif
