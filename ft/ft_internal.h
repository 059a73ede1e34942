/* ft internals: the calls of hsr/ft.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_FT_FT_INTERNAL_H
#define HSR_FT_FT_INTERNAL_H
#include "hsr/ft.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_coord ft_coord;

/* Waits up to timeout_s until the etcd at `addr` answers, then makes it
 * check tokens: a root user whose password is `token`, authentication on
 * (idempotent; a cluster that already checks another token is refused,
 * HSR_ERR_INVALID). version: etcd's ("3.4.23"). */
hsr_status ft_coord_open(const char *addr, const char *token, double timeout_s, ft_coord **out, char *version,
                         size_t n);

/* Waits up to wait_s for the quorum to change; *changed and a line saying
 * what it is now ("epoch 3, 57 steps done: replicas 0,2; joining 1 (healer 0)");
 * *groups: the replica groups registered now. An etcd that answers nothing
 * (no quorum) fails it within about wait_s + 6 s. */
hsr_status ft_coord_watch(ft_coord *c, double wait_s, int *changed, int *groups, char *line, size_t n);
void ft_coord_close(ft_coord *c);

/* ---- the control plane's simulator (hsr bench ft) ----
 * N replica groups as threads of this process, each a leader without ranks
 * or data: it registers, waits for the quorum, decides every step (the
 * commit exchange, the vote when one is needed) and installs the decision
 * through the same code as hsr train's rank 0 (only the cross-group
 * all-reduce, the exchange's transport and the heal's transfer are
 * modelled: a dead or stopped participant is named as the peer all-reduce
 * names it, after the detection delay; the exchange's vectors are reduced
 * among the threads). Failures: groups killed at once (their leases left to
 * expire), one group stopped past the timeout, killed groups restarted with
 * join. */
typedef struct ft_sim_config {
  const char *coordinator; /* a running coordinator's client address; HSR_FT_TOKEN its token */
  int groups;              /* N, ids 0 .. N-1 */
  int group_size;          /* S: the UCX addresses a record carries */
  int addr_bytes;          /* one rank's address */
  int steps;
  double step_s;            /* a step's compute, before the all-reduce */
  double timeout_s;         /* HSR_COMM_TIMEOUT (cross-group bound: 3/4 of it) */
  double detect_s;          /* how long the data plane takes to name a killed peer */
  double heal_s;            /* a heal's transfer */
  int kill, kill_step;      /* groups killed at once at the start of step kill_step (kill 0: none) */
  int kill_xchg;            /* instead inside kill_step's commit exchange, once their vectors are given: the groups
                               with smaller ids than a victim complete it and commit, the others are in doubt */
  int kill_decider;         /* the killed include group 0, the smallest participant: every vote's decider */
  int stop_step;            /* a group stopped in the all-reduce of this step (0: none) */
  double stop_s;            /* for this long */
  int restart, restart_gap; /* killed groups restarted with join once the others committed kill_step + gap */
  /* called at the start (0) and the end (1) of the steps' phase (etcd's
   * own figures are read there); may be NULL */
  void (*sample)(void *ctx, int phase);
  void *sample_ctx;
} ft_sim_config;
typedef struct ft_sim_report {
  double setup_s, steps_s, finish_s;   /* start to every group admitted; the steps; the final hash comparison */
  int nvotes;                          /* decisions of steady steps (committed, the quorum unchanged) */
  double vote_p50, vote_p99, vote_max; /* a group's decision: its outcome handed in to the decision installed (s) */
  double period_p50, period_p99;       /* commit to commit of steady steps (s) */
  double kill_commit_s;                /* the kill to the last survivor's commit of that step (-1: none) */
  int kill_drops;                      /* times that step was dropped */
  double stop_commit_s;                /* likewise for the stopped group */
  int stop_drops;
  double admit_s;          /* a restarted group registered to admitted (most of the joiners; -1: none) */
  int admit_steps;         /* steps committed meanwhile (most) */
  double join_commit_s;    /* registered to its first committed step (most) */
  long requests;           /* etcd requests of every group in the steps' phase */
  double requests_per_s;   /* over the steps' phase */
  int survivors, expected; /* groups that finished every step; that should have */
  int same_steps;          /* every group that committed a step committed it with the same replicas, and every
                              survivor committed every step since it joined */
  int named;               /* survivors that saw every killed and stopped group dropped (a restarted one counts:
                              it was not there) */
  int admitted;            /* restarted groups admitted that finished every step */
  int equal_end;           /* survivors whose final comparison found every state hash equal */
  char dead[256];          /* the killed and stopped ids */
  int failed;              /* groups that stopped or failed unexpectedly */
  char failure[1024];      /* the first unexpected stop or error ("" none) */
} ft_sim_report;

/* Runs the simulation against the coordinator; HSR_ERR_INVALID for a bad
 * config. The outcome (who stopped, what was named) is in the report, not
 * the status. */
hsr_status ft_sim_run(const ft_sim_config *c, ft_sim_report *r);

/* Getters. */
int ft_replica_id(const hsr_ft *ft);
double ft_timeout(const hsr_ft *ft); /* the cross-group bound, seconds */

#ifdef __cplusplus
}
#endif
#endif
