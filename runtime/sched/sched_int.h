/* runtime/sched, private: the schedule's state, shared by the decisions
 * (schedule.c) and the interpreter (run.c). */
#ifndef HSR_SCHED_INT_H
#define HSR_SCHED_INT_H

#include "schedule.h"

typedef struct sunit {
  size_t L, Ls, Lo, La; /* unit, shard, the rank's piece (outer shard: Ls / R), the accumulator */
  int is_root;
  sched_state state;
  int from_partial; /* GATHERING: the gather reads the partial slice */
  int from_cast;    /* GATHERING: the gather reads a copy cast from the master (GATHER_IN) */
  int has_grad;     /* holds the full gradient buffer */
  int micro;        /* backward passes this step */
  int fwd_pos;      /* position in the recorded forward order, -1 if none */
  /* the interpreter's */
  void *buf[HSR_SCHED_BUF_COUNT]; /* what the unit holds (REDUCE_STAGE, SLICE, ACC_STAGE: never) */
  void *gh;                       /* a gather or re-gather in flight: its handle */
  sched_action ga;            /* and the action that posted it */
} sunit;

struct sched_ctx {
  hsr_rt_config cfg;
  int S, R, K, sharded_params, sharded_grads, in_flight;
  int outer;           /* outer shard optim: master, m, v over 1/R of the shard */
  int master_in_param; /* outer with f32 parameters: the master is the rank's piece of PARAM */
  int gather_cast;     /* sharded, no outer shard, param dtype not f32: gathers read a cast copy */
  int offload;         /* offload optim: the optimizer state in host memory, PARAM held */
  size_t pes, res;
  sunit *u;
  int nu;
  int *order, norder, order_fixed;
  int live, live_peak;
  /* The reduction queue, oldest first: q[0, qs) started (sched_run),
   * q[0, qd) decided to retire, qn appended. */
  sched_red *q;
  int qn, qd, qs, qcap;
  sched_action *act;
  int nact, capact;
  hsr_status err; /* out of memory while emitting */
};

#endif
