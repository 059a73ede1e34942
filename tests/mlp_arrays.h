/* The example model bound to plain per-unit arrays (no runtime): what the
 * model tests compute their references with. */
#ifndef HSR_TESTS_MLP_ARRAYS_H
#define HSR_TESTS_MLP_ARRAYS_H

#include "mlp.h"

typedef struct arrays {
  float *p[16][4], *g[16][4]; /* parameters and gradients, per unit and tensor */
} arrays;

static hsr_status acq(void *ctx, int unit, int backward, mlp_unit_ptrs *p) {
  arrays *a = ctx;
  (void)backward;
  for (int k = 0; k < 4; k++) p->w[k] = a->p[unit][k], p->g[k] = a->g[unit][k];
  return HSR_OK;
}

static hsr_status rel(void *ctx, int unit, int backward) {
  (void)ctx, (void)unit, (void)backward;
  return HSR_OK;
}

#endif
