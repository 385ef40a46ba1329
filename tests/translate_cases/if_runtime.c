/* if() on parallel, schedule(runtime) and schedule(auto) (issue #3, item 4). */
#include <stdio.h>
#include <omp.h>
static int team_size(int n)
{
  int size = 0;
#pragma omp parallel if(n > 100)
  {
#pragma omp master
    size = omp_get_num_threads();
  }
  return size;
}
int main(void)
{
  int i, n = 1000, small = 10;
  double a[1000], s = 0.0, t = 0.0;
  long big_team = 0;
#pragma omp parallel for if(parallel: small > 100) reduction(+:s)
  for (i = 0; i < small; i++)
    s += omp_get_num_threads();  /* a team of one: adds 1 per iteration */
#pragma omp parallel for schedule(runtime)
  for (i = 0; i < n; i++)
    a[i] = i * 0.5;
#pragma omp parallel for schedule(auto) reduction(+:t)
  for (i = 0; i < n; i++)
    t += a[i];
#pragma omp parallel num_threads(3) if(n > small)
  {
#pragma omp atomic
    big_team++;
  }
  printf("small team %.0f, team_size(10)=%d, team_size(1000)>=1: %d\n", s, team_size(10), team_size(1000) >= 1);
  printf("t %.2f threads(3)-or-fewer %d\n", t, big_team >= 1 && big_team <= 3);
  return 0;
}
