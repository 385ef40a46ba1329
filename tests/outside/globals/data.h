#ifndef DATA_H
#define DATA_H

#define NPTS 16384

extern double coords[NPTS];
extern int labels[NPTS];

void load_data(void);

#endif
