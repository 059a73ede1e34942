#include "hsr/common.h"
#include "common/common_internal.h"

#include <time.h>

uint64_t hsr_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double clock_s(void) { return (double)hsr_clock_ns() * 1e-9; }
