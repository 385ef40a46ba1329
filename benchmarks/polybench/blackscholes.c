/* blackscholes: price a portfolio of European options with the Black-Scholes formula
 * (the computation of the PARSEC benchmark, written from the formula; options are generated). */
#include <math.h>
#include <stdio.h>
#include "pbench.h"

#if defined(POW2_DATASET)
#error "blackscholes has no POW2 dataset (POW2_KERNELS in benchmarks/polybench/catalog.py)"
#endif
#if defined(MINI_DATASET)
#define NUM_OPTIONS 4096
#define NUM_RUNS 1
#elif defined(SMALL_DATASET)
#define NUM_OPTIONS 40960
#define NUM_RUNS 1
#elif defined(MEDIUM_DATASET)
#define NUM_OPTIONS 65536
#define NUM_RUNS 1
#elif defined(LARGE_DATASET)
#define NUM_OPTIONS 65536
#define NUM_RUNS 10
#elif defined(EXTRALARGE_DATASET)
#define NUM_OPTIONS 262144
#define NUM_RUNS 10
#elif defined(PAPER_DATASET)
#define NUM_OPTIONS 65536
#define NUM_RUNS 100
#endif
#define _PB_NUM_OPTIONS PBENCH_LOOP_BOUND(NUM_OPTIONS, num_options)
#define _PB_NUM_RUNS PBENCH_LOOP_BOUND(NUM_RUNS, num_runs)

/* Option types: a call (0) or a put (1). */
static void init_array(int num_options, DATA_TYPE POLYBENCH_1D(sptprice, NUM_OPTIONS, num_options),
                       DATA_TYPE POLYBENCH_1D(strike, NUM_OPTIONS, num_options),
                       DATA_TYPE POLYBENCH_1D(rate, NUM_OPTIONS, num_options),
                       DATA_TYPE POLYBENCH_1D(volatility, NUM_OPTIONS, num_options),
                       DATA_TYPE POLYBENCH_1D(otime, NUM_OPTIONS, num_options),
                       int POLYBENCH_1D(otype, NUM_OPTIONS, num_options))
{
  int i;
  for (i = 0; i < num_options; i++) {
    sptprice[i] = SCALAR_VAL(50.0) + (DATA_TYPE)(i % 97) / 2;
    strike[i] = SCALAR_VAL(40.0) + (DATA_TYPE)(i % 89) * SCALAR_VAL(0.625);
    rate[i] = SCALAR_VAL(0.01) + (DATA_TYPE)(i % 7) / 200;
    volatility[i] = SCALAR_VAL(0.1) + (DATA_TYPE)(i % 11) / 32;
    otime[i] = SCALAR_VAL(0.25) + (DATA_TYPE)(i % 13) / 8;
    otype[i] = i % 2;
  }
}

/* Standard normal CDF by the Abramowitz-Stegun 26.2.17 polynomial (|error| < 7.5e-8),
 * the approximation the PARSEC code uses. */
static DATA_TYPE cndf(DATA_TYPE x)
{
  DATA_TYPE ax = FABS_FUN(x);
  DATA_TYPE k = SCALAR_VAL(1.0) / (SCALAR_VAL(1.0) + SCALAR_VAL(0.2316419) * ax);
  DATA_TYPE poly = k * (SCALAR_VAL(0.319381530) + k * (SCALAR_VAL(-0.356563782) + k * (SCALAR_VAL(1.781477937)
                   + k * (SCALAR_VAL(-1.821255978) + k * SCALAR_VAL(1.330274429)))));
  DATA_TYPE upper = SCALAR_VAL(1.0) - SCALAR_VAL(0.39894228040143270) * EXP_FUN(SCALAR_VAL(-0.5) * ax * ax) * poly;
  return x < SCALAR_VAL(0.0) ? SCALAR_VAL(1.0) - upper : upper;
}

static DATA_TYPE black_scholes(DATA_TYPE s, DATA_TYPE k, DATA_TYPE r, DATA_TYPE v, DATA_TYPE t, int put)
{
  DATA_TYPE sqrt_t = SQRT_FUN(t);
  DATA_TYPE d1 = (LOG_FUN(s / k) + (r + SCALAR_VAL(0.5) * v * v) * t) / (v * sqrt_t);
  DATA_TYPE d2 = d1 - v * sqrt_t;
  DATA_TYPE discounted = k * EXP_FUN(-r * t);
  if (put)
    return discounted * (SCALAR_VAL(1.0) - cndf(d2)) - s * (SCALAR_VAL(1.0) - cndf(d1));
  return s * cndf(d1) - discounted * cndf(d2);
}

void kernel_blackscholes(int num_runs, int num_options, DATA_TYPE POLYBENCH_1D(sptprice, NUM_OPTIONS, num_options),
                         DATA_TYPE POLYBENCH_1D(strike, NUM_OPTIONS, num_options),
                         DATA_TYPE POLYBENCH_1D(rate, NUM_OPTIONS, num_options),
                         DATA_TYPE POLYBENCH_1D(volatility, NUM_OPTIONS, num_options),
                         DATA_TYPE POLYBENCH_1D(otime, NUM_OPTIONS, num_options),
                         int POLYBENCH_1D(otype, NUM_OPTIONS, num_options),
                         DATA_TYPE POLYBENCH_1D(prices, NUM_OPTIONS, num_options))
{
  int run, i;
#pragma scop
#pragma omp parallel private(run, i)
  {
    /* Repeated runs re-price the same options, as the PARSEC benchmark does. */
    for (run = 0; run < _PB_NUM_RUNS; run++) {
#pragma omp for schedule(static)
      for (i = 0; i < _PB_NUM_OPTIONS; i++)
        prices[i] = black_scholes(sptprice[i], strike[i], rate[i], volatility[i], otime[i], otype[i]);
    }
  }
#pragma endscop
}

int main(void)
{
  int num_options = NUM_OPTIONS, num_runs = NUM_RUNS;
  POLYBENCH_1D_ARRAY_DECL(sptprice, DATA_TYPE, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(strike, DATA_TYPE, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(rate, DATA_TYPE, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(volatility, DATA_TYPE, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(otime, DATA_TYPE, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(otype, int, NUM_OPTIONS, num_options);
  POLYBENCH_1D_ARRAY_DECL(prices, DATA_TYPE, NUM_OPTIONS, num_options);

  init_array(num_options, sptprice, strike, rate, volatility, otime, otype);
  pbench_region_begin();
  kernel_blackscholes(num_runs, num_options, sptprice, strike, rate, volatility, otime, otype, prices);
  pbench_region_end();
  pbench_checksum("prices", prices, (size_t)num_options);

  POLYBENCH_FREE_ARRAY(sptprice);
  POLYBENCH_FREE_ARRAY(strike);
  POLYBENCH_FREE_ARRAY(rate);
  POLYBENCH_FREE_ARRAY(volatility);
  POLYBENCH_FREE_ARRAY(otime);
  POLYBENCH_FREE_ARRAY(otype);
  POLYBENCH_FREE_ARRAY(prices);
  return 0;
}
