/* Declaration styles whose types the outlined code re-spells from source text (issue #3, item 2). */
#include <stdio.h>
#define LEN 24
#define VEC(name, n) name[n]
typedef double vec_t[LEN];
static double twice(double v) { return 2.0 * v; }
static void kernel(int n, const double src[restrict LEN], double *restrict dst, double (*fn)(double),
                   double VEC(extra, LEN), vec_t *rows, double grid[][LEN])
{
  static double scratch[LEN];
  register int i;
  double *ptrs[4] = { dst, dst + 1, dst + 2, dst + 3 }, (*row)[LEN] = grid;
  const int lim = n < LEN ? n : LEN;
#pragma omp parallel for
  for (i = 0; i < lim; i++) {
    scratch[i] = fn(src[i]) + extra[i] + rows[1][i] + row[2][i];
    dst[i] = scratch[i] + *ptrs[i % 4] * 0.0;
  }
}
int main(void)
{
  double a[LEN], b[LEN], c[LEN], rows[3][LEN], grid[3][LEN];
  int i, j;
  for (i = 0; i < LEN; i++) {
    a[i] = i;
    c[i] = 0.5 * i;
    for (j = 0; j < 3; j++) rows[j][i] = grid[j][i] = i + j;
  }
  kernel(LEN, a, b, twice, c, rows, grid);
  double same[sizeof a / sizeof a[0]];  /* bounds naming locals the outlined code cannot see */
  __typeof__(a) like_a;
  __auto_type three = 3;
#pragma omp parallel for
  for (i = 0; i < LEN; i++) {
    same[i] = b[i] + three;
    like_a[i] = same[i] * 2;
  }
  double s = like_a[LEN - 1];
  for (i = 0; i < LEN; i++) s += b[i] * (i + 1);
  printf("decl styles %.2f\n", s);
  return 0;
}
