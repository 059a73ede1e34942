/* hsr ft: replica groups that train on when one of them fails.
 *
 * Each replica group is its own job (S ranks, one launch) running the
 * engine with R = 1 inside; the replicate dimension lives across jobs, as in
 * torchft. A coordinator (etcd: leases for liveness, transactions for the
 * quorum) forms the quorum of live groups; rank i of every live group is
 * linked to rank i of the others over UCX (addresses exchanged through the
 * coordinator), and the engine's outer reduction (hsr_rt_config.outer)
 * averages each rank's gradient shard over the live groups (torchft's
 * WorldSizeMode.DYNAMIC). After the all-reduce the groups' leaders reduce
 * a commit bit and their state hashes among themselves: every bit set and
 * every hash equal, the step commits with no coordinator request; otherwise
 * every group votes through the coordinator. The step commits on every live
 * group or on none (a dropped step changes nothing; the quorum re-forms and
 * the same step runs again).
 * A group that is killed, or stopped past the timeout, is dropped; a group
 * restarted with join = 1 receives its shards' whole state (parameters,
 * AdamW moments, step, the program's state) from a live group over UCX at a
 * step boundary, and every group's state hash is compared.
 *
 * Only rank 0 of each group (its leader) talks to the coordinator; it holds
 * the group's lease and passes decisions on to its ranks. Every wait is
 * bounded: cross-group operations by 3/4 of HSR_COMM_TIMEOUT (so that a
 * group's own ranks never take each other for stopped meanwhile), the
 * coordinator by the same bound. See docs/fault-tolerance.md. */
#ifndef HSR_FT_H
#define HSR_FT_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/ckpt.h"
#include "hsr/common.h"
#include "hsr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSR_FT_MAX_REPLICAS 1024

typedef struct hsr_ft hsr_ft;

/* The program's state at `done` steps (data position, RNG, schedule: what
 * a checkpoint saves): sent to a group that heals from this one. */
typedef hsr_status (*hsr_ft_program_fn)(void *ctx, int64_t done, hsr_ckpt_state *out);

typedef struct hsr_ft_config {
  const char *coordinator; /* etcd client addresses, comma-separated: host:port or http://host:port */
  int replica_id;          /* I, 0 .. replicas-1 */
  int replicas;            /* N: the data are split N ways (a group's slice is fixed by its id) */
  int join;                /* 1: a restarted group: heal from a live one instead of starting */
  int hash_every;          /* state hash compared every N steps (0: only at the end and after healing) */
  /* what must be the same in every group, as "key": "value" pairs of a JSON
   * object (the model, its shape, the batch, the seed, the mesh, ...): a
   * group whose identity differs is refused, naming the first difference */
  const char *identity;
  hsr_ft_program_fn program;
  void *program_ctx;
} hsr_ft_config;

/* Checks the config and HSR_FT_TOKEN (required: the coordinator admits only
 * groups with its token), opens this rank's UCX worker, and on rank 0
 * connects to the coordinator (a wrong token is refused here). Collective
 * over the job: every rank returns the same status. */
HSR_API hsr_status hsr_ft_create(hsr_boot *boot, const hsr_ft_config *c, hsr_ft **out);
/* Leaves the quorum (the lease is revoked) and frees everything. */
HSR_API void hsr_ft_free(hsr_ft *ft);
/* Sets the engine's outer reduction and data slices (cfg.outer,
 * cfg.outer_ctx, cfg.outer_replicas, cfg.outer_rank). */
HSR_API hsr_status hsr_ft_attach(hsr_ft *ft, hsr_rt_config *cfg);

/* Joins the quorum, after the engine is set up (parameters initialized or
 * loaded from a checkpoint, `done` steps done): registers this group
 * (refused, naming the difference, when its identity, mesh, replica count
 * or hsr version differs from the running groups', or when its id is
 * live), then waits until the quorum forms (a start: every one of the N
 * groups registered, all at the same step with the same state) or admits
 * it (join = 1). *done: the steps done where training continues (a joiner:
 * the step at which it heals, in the next hsr_ft_step_begin). Collective. */
HSR_API hsr_status hsr_ft_join(hsr_ft *ft, hsr_rt *rt, int64_t *done);

/* What hsr_ft_step_begin did: this group healed from a peer (the program's
 * state it received, for the caller to check and install), or sent its
 * state to a group that heals. */
#define HSR_FT_HEAL_PEERS 16
typedef struct hsr_ft_heal {
  int healed, sent;
  int peer;                /* the healer, or the group healed */
  int64_t done;            /* the step boundary */
  uint64_t bytes;          /* this rank's bytes over UCX */
  double seconds;          /* this rank's time, from the first byte to the engine's installed state */
  hsr_ckpt_state *program; /* healed: the healer's program state (owned by ft, valid until the next call) */
  int failed;              /* a heal that did not complete (the step will be dropped and healing retried) */
  int npeers;              /* the healers, each sending a slice (peer is the first: header and program state) */
  int peers[HSR_FT_HEAL_PEERS]; /* healed: the first HSR_FT_HEAL_PEERS healers' ids */
} hsr_ft_heal;
/* Before the forward of step done + 1: the step boundary where groups
 * admitted into the quorum heal from a live group over UCX. Collective. */
HSR_API hsr_status hsr_ft_step_begin(hsr_ft *ft, int64_t done, hsr_ft_heal *out);

/* What became of the step hsr_rt_step just ran. */
typedef struct hsr_ft_step {
  int committed; /* 0: dropped on every live group (run the same step again) */
  int stop;      /* this group must stop: it left the quorum, the coordinator is gone, or states differ */
  int coord_lost;
  int nreplicas, replicas[HSR_FT_MAX_REPLICAS]; /* the live groups this step ran on */
  int saver;                                    /* this group saves checkpoints (the smallest live id) */
  /* one line for rank 0 to print when the quorum changed (a group dropped
   * or admitted), or why this group stops; "" otherwise */
  char line[1024];
} hsr_ft_step;
HSR_API hsr_status hsr_ft_step_end(hsr_ft *ft, hsr_ft_step *out);

/* The hash of this group's whole training state after `done` steps:
 * every rank's master weights and moments, hashed (XXH3) and combined in
 * rank order, with the step and the program's state. Remembered for the
 * next step's commit exchange (and vote), where every group's is compared.
 * Collective. */
HSR_API hsr_status hsr_ft_state_hash(hsr_ft *ft, hsr_rt *rt, int64_t done, uint64_t *hash);

/* After the last step: every live group's final hash compared through the
 * coordinator (bounded). line: what rank 0 prints ("state_hash ... equal on
 * replicas 0,1,2"). A difference is HSR_ERR_MISMATCH naming the groups.
 * Collective. */
HSR_API hsr_status hsr_ft_finish(hsr_ft *ft, int64_t done, uint64_t hash, char *line, size_t n);

#ifdef __cplusplus
}
#endif
#endif
