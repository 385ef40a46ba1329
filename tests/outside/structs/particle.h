#ifndef PARTICLE_H
#define PARTICLE_H

typedef struct {
    double x, y, z;
    double vx, vy, vz;
    int alive;
} particle_t;

#define NPART 4096
#define DT 0.5

#endif
