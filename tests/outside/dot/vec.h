#ifndef VEC_H
#define VEC_H

#define LEN (1 << 15)

static inline double weight(int i)
{
    return (double)(i & 31);
}

#endif
