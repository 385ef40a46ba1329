#ifndef STENCIL_H
#define STENCIL_H

#define GRID 64
#define STEPS 4
#define AVG4(n, s, w, e) (0.25 * ((n) + (s) + (w) + (e)))

#endif
