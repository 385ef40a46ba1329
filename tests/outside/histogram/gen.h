#ifndef GEN_H
#define GEN_H

#define NSAMPLES 32768
#define NBINS 64

void make_samples(unsigned *out, int n, unsigned seed);

#endif
