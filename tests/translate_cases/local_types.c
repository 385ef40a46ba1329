/* Types, typedefs, structs and enums declared inside the enclosing function (issue #3, item 1). */
#include <stdio.h>
struct point { int x, y; };  /* a file-scope type that the local one below shadows */
static double run(int n, int m)
{
  struct point { double x, y; };
  typedef struct point point_t;
  enum color { RED = 1, GREEN = 2, BLUE = 4 };
  typedef union { long l; double d; } cell_t;
  typedef double row_t[m];  /* depends on a local value: evaluated like a VLA parameter */
  struct acc { double sum; enum color last; } total = { 0.0, RED };
  point_t pts[64];
  row_t grid[8];
  cell_t cells[64];
  int i, j;
  for (i = 0; i < 8; i++)
    for (j = 0; j < m; j++)
      grid[i][j] = i + 0.5 * j;
#pragma omp parallel private(j)
  {
    struct local_only { int k; } lo;
#pragma omp for
    for (i = 0; i < n; i++) {
      point_t p = { i * 0.5, i * 2.0 };
      enum color c = (i % 3 == 0) ? RED : (i % 3 == 1) ? GREEN : BLUE;
      lo.k = i;
      pts[i] = p;
      cells[i].d = p.x + c + lo.k;
    }
#pragma omp for
    for (i = 0; i < 8; i++) {
      row_t *r = &grid[i];
      for (j = 0; j < m; j++)
        (*r)[j] *= 2.0;
    }
#pragma omp single
    {
      for (i = 0; i < n; i++)
        total.sum += cells[i].d + pts[i].y;
      total.last = BLUE;
    }
  }
#pragma omp parallel for
  for (i = 0; i < 8; i++) {  /* m is read only through row_t's bound */
    row_t *r = &grid[i];
    (*r)[sizeof(row_t) / sizeof(double) - 1] += 1.0;
  }
  double g = 0;
  for (i = 0; i < 8; i++)
    for (j = 0; j < m; j++)
      g += grid[i][j];
  printf("sizeof(struct point)=%zu last=%d\n", sizeof(struct point), (int)total.last);
  return total.sum + g;
}
int main(void)
{
  printf("local types %.3f\n", run(64, 5));
  return 0;
}
