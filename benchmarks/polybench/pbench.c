/* pbench.c - the pptmc benchmark harness: allocation, region timing, cache flush, checksums. */
#define _POSIX_C_SOURCE 200809L
#include "pbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PBENCH_ALIGN 64
#define PBENCH_DEFAULT_FLUSH_BYTES ((size_t)64 << 20)

static double region_start;

void *pbench_alloc(size_t count, size_t elem_size)
{
  void *ptr = NULL;
  size_t bytes = count * elem_size;
  if (bytes == 0)
    bytes = PBENCH_ALIGN;
  if (posix_memalign(&ptr, PBENCH_ALIGN, bytes) != 0) {
    fprintf(stderr, "pbench: cannot allocate %zu bytes; choose a smaller dataset (-DMINI_DATASET)\n", bytes);
    exit(1);
  }
  memset(ptr, 0, bytes);
  return ptr;
}

void pbench_free(void *ptr)
{
  free(ptr);
}

static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t flush_bytes(void)
{
  const char *text = getenv("PBENCH_FLUSH_BYTES");
  char *end = NULL;
  unsigned long long value;
  if (text == NULL || *text == '\0')
    return PBENCH_DEFAULT_FLUSH_BYTES;
  value = strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value == 0) {
    fprintf(stderr, "pbench: PBENCH_FLUSH_BYTES=%s is not a positive byte count; set e.g. 67108864\n", text);
    exit(1);
  }
  return (size_t)value;
}

void pbench_flush_cache(size_t bytes)
{
  size_t count = bytes / sizeof(double) + 1, i;
  double *buf = (double *)pbench_alloc(count, sizeof(double));
  volatile double sink = 0.0;
  for (i = 0; i < count; i++)
    buf[i] = (double)i;
  for (i = 0; i < count; i += 8)
    sink += buf[i];
  (void)sink;
  pbench_free(buf);
}

/* Start the OpenMP thread pool outside the timed region, so the first kernel region
 * is not charged for creating the threads.  Harness code is never traced or translated. */
static void warm_up_threads(void)
{
#ifdef _OPENMP
  volatile int sink = 0;
#pragma omp parallel
  {
    sink = 1;
  }
  (void)sink;
#endif
}

void pbench_region_begin(void)
{
  const char *cold = getenv("PBENCH_COLD");
  warm_up_threads();
  if (cold != NULL && strcmp(cold, "1") == 0)
    pbench_flush_cache(flush_bytes());
  region_start = now_seconds();
}

void pbench_region_end(void)
{
  double elapsed = now_seconds() - region_start;
  fprintf(stderr, "PBENCH_REGION_SECONDS %.9f\n", elapsed);
}

void pbench_checksum(const char *name, const double *data, size_t count)
{
  /* A plain sum misses permutations; the weighted sum catches most of them. */
  double sum = 0.0, wsum = 0.0;
  const char *dump = getenv("PBENCH_DUMP");
  size_t i;
  for (i = 0; i < count; i++) {
    sum += data[i];
    wsum += (double)(i % 13 + 1) * data[i];
  }
  printf("PBENCH_CHECKSUM %s n=%zu sum=%.10e wsum=%.10e\n", name, count, sum, wsum);
  if (dump != NULL && strcmp(dump, "1") == 0) {
    printf("PBENCH_DUMP %s %zu\n", name, count);
    for (i = 0; i < count; i++)
      printf("%.17e\n", data[i]);
  }
}
