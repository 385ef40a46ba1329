/* Loops that clang-19 -O2 vectorises with llvm.masked.* when the function targets AVX2:
 * a conditional copy (masked.load of B, masked.store of A) and, with Skylake tuning, a gather
 * (masked.gather of T[idx[i]]). Prints the array addresses to stderr. Usage: masked N */
#include <stdio.h>
#include <stdlib.h>

#define MAXN 4096
double A[MAXN], B[MAXN], T[1024], S[MAXN];
int C[MAXN], idx[MAXN];
struct OUT__1__1___data { int n; };

__attribute__((target("avx2"))) static void OUT__1__1__(void *arg) {
  int n = ((struct OUT__1__1___data *)arg)->n;
  for (int i = 0; i < n; i++)
    if (C[i]) A[i] = B[i] * 2.0;
}

__attribute__((target("arch=skylake"))) static void OUT__2__1__(void *arg) {
  int n = ((struct OUT__1__1___data *)arg)->n;
  for (int i = 0; i < n; i++) S[i] = T[idx[i]];
}

void (*volatile fn1)(void *) = OUT__1__1__;
void (*volatile fn2)(void *) = OUT__2__1__;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  if (n < 1 || n > MAXN) return 2;
  unsigned x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    C[i] = (x >> 12) % 3 == 0;
    idx[i] = (x >> 8) % 1024;
    B[i] = i;
  }
  fprintf(stderr, "ADDR A=%p B=%p C=%p T=%p S=%p idx=%p\n", (void *)A, (void *)B, (void *)C, (void *)T, (void *)S,
          (void *)idx);
  struct OUT__1__1___data d = {n};
  fn1(&d);
  fn2(&d);
  double s = 0;
  for (int i = 0; i < n; i++) s += A[i] + S[i];
  printf("%f\n", s);
  return 0;
}
