/* hsr fault injection: a TEST HOOK for the fault matrix (tests/faults/).
 *
 *   HSR_FAULT=RANK:PHASE:N:ACTION
 *
 * makes world rank RANK, at its Nth call of PHASE (counted from 1, per
 * process), act on itself:
 *   PHASE   all_gather | reduce_scatter | all_reduce | broadcast | barrier
 *           (host collectives, counted when posted) | step (the optimizer
 *           step, hsr_rt_step) | ckpt_save (hsr_ckpt_save, after this rank
 *           has written its data, before the ranks agree to commit) |
 *           ckpt_done (hsr_ckpt_wait, once a background save has committed:
 *           the last one is after the last step) |
 *           ft_allreduce (a replica group's cross-group all-reduce, hsr/ft.h)
 *           | ft_vote (after it, before the commit exchange and vote) | ft_heal (each buffer a
 *           healer sends or a healed group receives) | boot (the Nth PMIx
 *           exchange of the bootstrap layer: #1 is the bootstrap's own,
 *           before any communicator exists) | final (hsr train's final
 *           barrier, after the last step and save) | teardown (the
 *           collectives' context is freed: the command's last act)
 *   ACTION  kill (SIGKILL) | killnode (SIGKILL to every rank of the
 *           victim's node at once, itself last: a lost node; collective
 *           phases only) | stop (SIGSTOP) | sleep:S (sleep S seconds, then
 *           carry on: a slow rank that is still alive)
 * Unset or empty: off. A malformed value is an error at start-up. Never set it
 * in a real job.
 */
#ifndef HSR_FAULT_H
#define HSR_FAULT_H

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fault_hook {
  int armed;      /* this rank is the victim */
  int action;     /* 0 kill, 1 stop, 2 sleep, 3 killnode, 4 jump */
  double sleep_s; /* sleep:S */
  long n;         /* the call that fires */
  long count;     /* calls of the phase so far (atomic) */
  char phase[16];
  const int *node_pids; /* killnode: the node peers' pids (set by the caller; not owned) */
  int n_node_pids;
} fault_hook;

/* Reads HSR_FAULT for world rank `rank`; HSR_ERR_INVALID naming the variable
 * and the valid forms when it is malformed. */
hsr_status fault_hook_init(fault_hook *h, int rank);
/* Counts a call of `phase` and acts when it is the Nth (thread-safe). */
hsr_status fault_hook_hit(fault_hook *h, const char *phase);

#ifdef __cplusplus
}
#endif
#endif
