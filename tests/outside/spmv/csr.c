/* Builds a banded sparse matrix in CSR form. */
#include <stdlib.h>
#include "csr.h"

csr_t csr_banded(int nrows, int halfwidth)
{
    csr_t m;
    int nnz_max = nrows * (2 * halfwidth + 1);
    m.nrows = nrows;
    m.rowptr = malloc(sizeof(int) * (nrows + 1));
    m.col = malloc(sizeof(int) * nnz_max);
    m.val = malloc(sizeof(double) * nnz_max);
    int nnz = 0;
    for (int r = 0; r < nrows; r++) {
        m.rowptr[r] = nnz;
        for (int c = r - halfwidth; c <= r + halfwidth; c++) {
            if (c < 0 || c >= nrows)
                continue;
            m.col[nnz] = c;
            m.val[nnz] = (double)((r + 3 * c) % 5 - 2);
            nnz++;
        }
    }
    m.rowptr[nrows] = nnz;
    return m;
}

void csr_free(csr_t *m)
{
    free(m->rowptr);
    free(m->col);
    free(m->val);
}
