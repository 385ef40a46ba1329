/* What a region sees stays visible in its outlined function (issue #29): macros defined or
 * #undef-ined inside function bodies and between functions, static functions, global arrays,
 * typedefs and an #include in the middle of the file. */
#include <stdio.h>
#include <math.h>
#define WIDTH 64
#define SCALE 2
typedef double real_t;
static real_t table[WIDTH];

static real_t square(real_t v) { return v * v; }

#undef SCALE
#define SCALE 5 /* redefined between functions */

static void fill(void)
{
#define sqrt_of_array_cell(x, j) sqrt(x[j])
  int j;
  for (j = 0; j < WIDTH; j++)
    table[j] = (real_t)(j * j);
  real_t roots[WIDTH];
#pragma omp parallel for
  for (j = 0; j < WIDTH; j++)
    roots[j] = sqrt_of_array_cell(table, j) * SCALE;
  for (j = 0; j < WIDTH; j++)
    table[j] = roots[j];
#undef sqrt_of_array_cell
}

#include "visibility_part.h"

static real_t twice(real_t v) { return 2 * v; }
#define twice(v) (3 * (v)) /* a macro hiding the function from here on */

static double total(void)
{
  double sum = 0;
  int j;
#undef WIDTH
#define WIDTH 32
#undef twice
#define LOCAL_OFFSET(j) ((j) + PART_SCALE)
  span_t s = {1.0, 100.0};
#pragma omp parallel
  {
#define IN_REGION(v) ((v) - 1) /* defined inside the region, used after it */
#pragma omp for reduction(+:sum)
    for (j = 0; j < WIDTH; j++)
      sum += clamp_to(s, square(table[j])) + twice(LOCAL_OFFSET(j)) + IN_REGION(0);
  }
  sum += IN_REGION(10);
#undef WIDTH
#define WIDTH 64
  return sum + WIDTH;
}

int main(void)
{
  fill();
  double t = total();
#ifdef IN_REGION
  t += IN_REGION(100);
#endif
#ifdef sqrt_of_array_cell
  t = -1;
#endif
  printf("visibility %.3f %d %.3f\n", t, WIDTH, table[WIDTH - 1]);
  return 0;
}
