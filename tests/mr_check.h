/* Assertion helpers of the multi-rank test programs: CHECK records a failure
 * and goes on (so one run reports every mismatch; it needs g_fail), FAIL
 * returns 1 from the calling function with a message, OK does so on a failed
 * hsr call. The program defines g_rank. */
#ifndef HSR_TESTS_MR_CHECK_H
#define HSR_TESTS_MR_CHECK_H

#include <stdio.h>

#include "hsr/common.h"

#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) {                                 \
      fprintf(stderr, "[rank %d] FAIL: ", g_rank); \
      fprintf(stderr, __VA_ARGS__);                \
      fprintf(stderr, "\n");                       \
      g_fail = 1;                                  \
    }                                              \
  } while (0)

#define FAIL(...)                                \
  do {                                           \
    fprintf(stderr, "[rank %d] FAIL: ", g_rank); \
    fprintf(stderr, __VA_ARGS__);                \
    fprintf(stderr, "\n");                       \
    return 1;                                    \
  } while (0)

#define OK(expr)                                                                       \
  do {                                                                                 \
    hsr_status _s = (expr);                                                            \
    if (_s != HSR_OK) FAIL("%s: %s: %s", #expr, hsr_status_str(_s), hsr_last_error()); \
  } while (0)

#endif
