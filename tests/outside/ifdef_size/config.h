#ifndef CONFIG_H
#define CONFIG_H

#ifdef SIZE
#define LEN SIZE
#elif defined(LARGE)
#define LEN 65536
#else
#define LEN 1024
#endif

#endif
