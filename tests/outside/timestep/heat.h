#ifndef HEAT_H
#define HEAT_H

#define CELLS 4096
#define NSTEPS 8

void heat_step(const double *restrict in, double *restrict out, int n);

#endif
