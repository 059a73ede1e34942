/* runtime/sched (internal, not installed): the unit lifecycle's decisions
 * and the one interpreter that runs them. The engine (runtime/engine), the
 * tuner's timeline (tune/eval.c) and the ledger prediction
 * (tune/ledger_predict.c) are its three executors, so what they predict and
 * what the engine does are the same actions over the same buffers and the
 * same reduction queue. No I/O, no communication: a schedule knows sizes and
 * states, and holds its executor's buffers and collectives as opaque handles.
 *
 * A schedule holds what the decisions depend on: per unit its state and
 * whether it holds a full gradient buffer, the backward passes of this step,
 * the forward order recorded on the first step, how many units are live
 * (gathering or FULL), and the reduction queue. Each lifecycle call turns
 * into a list of actions, to be run in that order (sched_run):
 *
 *   forward_begin   [GATHER] [WAIT]  prefetch: GATHER of the next units
 *   forward_end     [RESHARD]        (policy: sched_reshard_of)
 *   backward_begin  [GATHER] [WAIT] [GRAD_BUF]  prefetch: GATHER of the previous units
 *   backward_end    [RELEASE] [REDUCE] [RETIRE... DEFERRED_AR] PROGRESS RETIRE...
 *   step            RETIRE... NORM, then per unit (the next forward's first
 *                   unit first) OPTIM and [REGATHER] [REGATHER_WAIT GATHER];
 *                   REGATHER_WAIT...
 *   zero_grad       RETIRE... GRAD_ZERO per unit
 *
 * Outer shard optim (hybrid, HFSDP): a unit's master, m and v cover 1/R of
 * its shard (the piece at the rank's replicate index); stage 2 of a
 * reduction is a reduce-scatter over R into that piece instead of the
 * all-reduce of the whole slice; the step's REGATHER is the all-gather over
 * R of the updated pieces into the parameter shard, which the next
 * forward's gathers read. Sharded strategies without it keep no parameter
 * shard beside the f32 master (FSDP2's footprint): a gather reads the
 * master, or a copy cast from it into a transient buffer (bf16).
 *
 * Every decision depends on program order only, never on timing, so every
 * rank issues the same collectives in the same order and a prediction from
 * the same program is exact. */
#ifndef HSR_SCHEDULE_H
#define HSR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "hsr/ledger.h"
#include "runtime/io/ledger_internal.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sched_ctx sched_ctx;

/* A unit's parameters: SHARDED (only the shard), GATHERING (an all-gather
 * into a full buffer is in flight), FULL (gathered; unsharded strategies are
 * always FULL), PARTIAL (resharded after forward to 1/K of the unit). */
typedef enum sched_state {
  HSR_SCHED_SHARDED = 0,
  HSR_SCHED_GATHERING,
  HSR_SCHED_FULL,
  HSR_SCHED_PARTIAL
} sched_state;

typedef enum sched_op {
  HSR_SCHED_SETUP = 0,   /* commit: the unit's persistent buffers */
  HSR_SCHED_GATHER,      /* start the all-gather of a unit into a new full buffer */
  HSR_SCHED_WAIT,        /* finish it: the unit is FULL; the partial slice it read goes back */
  HSR_SCHED_RESHARD,     /* after forward: keep the 1/K slice (partial) or nothing; the full buffer goes back */
  HSR_SCHED_RELEASE,     /* after backward: the full buffer goes back, the unit is SHARDED */
  HSR_SCHED_GRAD_BUF,    /* the full f32 gradient buffer (zeroed) that backward accumulates into */
  HSR_SCHED_REDUCE,      /* start a reduction: stage 1 in the shard group, then (all_reduce) the replicate group */
  HSR_SCHED_DEFERRED_AR, /* rs_only, last micro-batch: one replicate all-reduce of the accumulated slice
                            (outer shard optim: one reduce-scatter over R) */
  HSR_SCHED_PROGRESS,    /* move queued reductions on without blocking */
  HSR_SCHED_RETIRE,      /* complete the oldest reduction, accumulate its slice, return its buffers */
  HSR_SCHED_NORM,        /* global gradient norm and clip factor */
  HSR_SCHED_OPTIM,       /* AdamW on the unit's local slice */
  HSR_SCHED_REGATHER,    /* start the all-gather of the updated slices, in place: zero1/zero2 over the shard
                            group into the full parameters, outer shard optim over the replicate group into
                            the parameter shard */
  HSR_SCHED_REGATHER_WAIT,
  HSR_SCHED_GRAD_ZERO, /* zero the gradient accumulator; free_grad: the full gradient buffer goes back */
  HSR_SCHED_OP_COUNT
} sched_op;

typedef struct sched_action {
  sched_op op;
  int unit;       /* -1: not about one unit (NORM, PROGRESS) */
  int group;      /* hsr_rt_group of the collective (gathers, reshard, stage 1 of REDUCE); -1: none */
  int local;      /* the group has one rank: a local copy stands in for the collective */
  size_t count;   /* elements each rank contributes (gathers); stage 1 of REDUCE: elements reduced;
                   RESHARD: elements kept (0 unless partial) */
  int partial;    /* GATHER / WAIT: from the partial slice; RESHARD: keeps one */
  int cast;       /* GATHER / WAIT: the input is a copy of the master cast to the param dtype (GATHER_IN) */
  int outer;      /* REDUCE, DEFERRED_AR: the replicate stage is a reduce-scatter over R (outer shard optim) */
  int scatter;    /* REDUCE: stage 1 is a reduce-scatter (sharded gradients), else an all-reduce in full */
  int all_reduce; /* REDUCE: the replicate all-reduce follows stage 1 */
  int deferred;   /* RETIRE: the entry is a DEFERRED_AR (its slice replaces the accumulator) */
  int free_grad;  /* GRAD_ZERO */
} sched_action;

/* Buffer kinds, each with its ledger category and size per unit. */
/* Offload optim (cfg.offload, a device run): MASTER, MOMENT_M, MOMENT_V and
 * GRAD_SHARD live in host memory (the HSR_MEM_HOST_* categories), PARAM is
 * held by every strategy (the gathers read it: no GATHER_IN), and each unit
 * holds PARAM_UP and GRAD_DOWN (host_staging); RETIRE takes no ACC_STAGE
 * (the host accumulates what GRAD_DOWN received).
 * Lo = Ls / R with the outer shard (the rank's piece of its shard), else Ls;
 * La, the accumulator: Lo, except Ls for rs_only with micro-batches (its
 * micro-batches sum whole slices before the one reduce-scatter over R). */
typedef enum sched_buf {
  HSR_SCHED_BUF_MASTER = 0,   /* f32 master: Lo x 4 (outer shard optim with f32 parameters: none, the
                                 master is the rank's piece of PARAM) */
  HSR_SCHED_BUF_MOMENT_M,     /* Lo x 4 */
  HSR_SCHED_BUF_MOMENT_V,     /* Lo x 4 */
  HSR_SCHED_BUF_GRAD_SHARD,   /* f32 gradient accumulator: La x 4 */
  HSR_SCHED_BUF_PARAM,        /* parameters in the param dtype: the whole unit (L) when unsharded, the shard
                                 (Ls) with the outer shard or offload; sharded without either: none (the master
                                 is the shard) */
  HSR_SCHED_BUF_PARAM_UP,     /* offload optim, host: the updated piece in the param dtype, copied up: Lo x param
                                 dtype */
  HSR_SCHED_BUF_GRAD_DOWN,    /* offload optim, host: the reduced piece copied down (and rs_only's deferred
                                 stage's accumulator copied up): La x reduce dtype */
  HSR_SCHED_BUF_FULL,         /* a gathered unit: L x param dtype */
  HSR_SCHED_BUF_PARTIAL,      /* the slice kept after forward: L/K x param dtype */
  HSR_SCHED_BUF_GRAD,         /* the full f32 gradient: L x 4 */
  HSR_SCHED_BUF_REDUCE_STAGE, /* reduce-dtype copy of the full gradient: L x reduce dtype */
  HSR_SCHED_BUF_SLICE,        /* the reduced slice, all-reduced in place: Ls x reduce dtype */
  HSR_SCHED_BUF_ACC_STAGE,    /* f32 copy of a reduce-dtype result before it is accumulated: La x 4 */
  HSR_SCHED_BUF_GATHER_IN,    /* a gather's input cast from the master (bf16, no outer shard): Ls x param dtype */
  HSR_SCHED_BUF_OUTER_SLICE,  /* the reduce-scatter over R's result (outer shard optim): Lo x reduce dtype */
  HSR_SCHED_BUF_COUNT
} sched_buf;

/* One buffer taken from (get = 1) or returned to (get = 0) the pool. */
typedef struct sched_bufop {
  int get;
  sched_buf buf;
  mem_cat cat;
  size_t bytes;
} sched_bufop;
#define HSR_SCHED_MAX_BUFOPS 8

/* cfg: strategy, reshard and K, root_reshard, prefetch, max_live,
 * prefetch_step, dtypes, sync, micro-batches, and device (HSR_DEVICE_CUDA
 * keeps no reduction in flight behind backward: the streams order them).
 * S, R: the resolved mesh. layout: finalized for S shards. is_root[u]: root
 * units (cfg->root_reshard applies; NULL: none). */
hsr_status sched_create(const hsr_rt_config *cfg, int S, int R, const rt_layout *layout, const int *is_root,
                        sched_ctx **out);
void sched_free(sched_ctx *s);

/* The lifecycle. Each call decides, updates the schedule and returns its
 * actions in *acts (owned by the schedule, valid until its next call). A
 * call that the unit's state does not allow is HSR_ERR_STATE. */
hsr_status sched_setup(sched_ctx *s, const sched_action **acts, int *n); /* once, at commit */
hsr_status sched_forward_begin(sched_ctx *s, int unit, const sched_action **acts, int *n);
hsr_status sched_forward_end(sched_ctx *s, int unit, const sched_action **acts, int *n);
hsr_status sched_backward_begin(sched_ctx *s, int unit, const sched_action **acts, int *n);
hsr_status sched_backward_end(sched_ctx *s, int unit, const sched_action **acts, int *n);
/* Inside the unit's backward window (FULL): no actions; see schedule.c. */
hsr_status sched_recompute(sched_ctx *s, int unit, const sched_action **acts, int *n);
hsr_status sched_step(sched_ctx *s, const sched_action **acts, int *n);
hsr_status sched_zero_grad(sched_ctx *s, const sched_action **acts, int *n);
/* WAIT for every unit still GATHERING (before a trace is written). */
hsr_status sched_settle(sched_ctx *s, const sched_action **acts, int *n);

/* The buffers an action takes and returns, in the order it does so (at most
 * HSR_SCHED_MAX_BUFOPS):
 *   SETUP        get MASTER (unless it is a piece of PARAM), MOMENT_M, MOMENT_V,
 *                GRAD_SHARD, PARAM (unless sharded without the outer shard or offload);
 *                offload: PARAM_UP, GRAD_DOWN
 *   GATHER       get GATHER_IN (if cast), get FULL
 *   WAIT         put GATHER_IN (if cast), put PARTIAL (if partial)
 *   RESHARD      get PARTIAL (if partial), put FULL
 *   RELEASE      put FULL                  GRAD_BUF  get GRAD
 *   REDUCE       reduce dtype not f32: get REDUCE_STAGE, put GRAD; then get SLICE
 *                (f32: the gradient buffer itself is what stage 1 reads); get
 *                OUTER_SLICE (if outer)
 *   DEFERRED_AR  get SLICE, get OUTER_SLICE (if outer)
 *   RETIRE       not deferred: reduce dtype not f32 (no offload): get ACC_STAGE, put ACC_STAGE;
 *                then put what stage 1 read (REDUCE_STAGE or GRAD); put SLICE;
 *                put OUTER_SLICE (if the entry is outer)
 *   GRAD_ZERO    put GRAD (if free_grad)
 * the others none. */
hsr_status sched_buffers(const sched_ctx *s, const sched_action *a, sched_bufop *out, int *n);
mem_cat sched_buf_cat(sched_buf b);
/* The category of b in this schedule (offload: the host categories). */
mem_cat hsr_sched_cat_of(const sched_ctx *s, sched_buf b);
/* Bytes of a buffer of unit u, as the pool hands it out (an empty one is a
 * 64-byte block). */
size_t sched_buf_bytes(const sched_ctx *s, sched_buf b, int unit);

/* The persistent buffers (SETUP's) a unit holds: 1 for b in MASTER ..
 * HSR_SCHED_BUF_LAST_HELD when SETUP takes it. */
#define HSR_SCHED_BUF_LAST_HELD HSR_SCHED_BUF_GRAD_DOWN
int sched_holds(const sched_ctx *s, sched_buf b);
/* Offload optim in effect (cfg.offload on a device run). */
int hsr_sched_offload(const sched_ctx *s);
/* Elements of the rank's piece of unit u's shard (Lo) and of its gradient
 * accumulator (La); the optimizer's master, m, v and gradient cover them
 * (the accumulator's first Lo elements when La = Ls). */
size_t sched_piece_len(const sched_ctx *s, int unit);
size_t sched_acc_len(const sched_ctx *s, int unit);
/* Outer shard optim in effect (hybrid with cfg.outer_shard = optim). */
int sched_outer(const sched_ctx *s);

/* Pure decisions on their own. */
/* What forward_end does to the unit: NONE for unsharded strategies and for
 * root units unless cfg.root_reshard, else cfg.reshard. */
hsr_rt_reshard sched_reshard_of(const sched_ctx *s, int unit);
/* Reductions left in flight at the end of backward_end (2 on host, 0 on CUDA). */
int sched_in_flight(const sched_ctx *s);

/* ---- the interpreter (run.c) ----
 *
 * sched_run executes a lifecycle call's actions with one executor: a
 * table of callbacks, where NULL means "no effect" (the ledger prediction
 * fills in only the pool; the timeline no pool at all). It owns:
 *   - the buffer rules: for every action it takes and returns the buffers
 *     sched_buffers lists, in that order, through get/put, and keeps them
 *     (per unit; per reduction: sched_red). An action's effect runs once
 *     the buffers it takes are there and before any it returns goes back;
 *     REDUCE with a reduce-dtype copy is the one effect split in two: the
 *     copy (stage_cast) before the gradient goes back, stage 1 after the
 *     slice is taken;
 *   - the reduction queue (the schedule's own: REDUCE and DEFERRED_AR start
 *     the entries the decisions appended, RETIRE completes and removes the
 *     head): stage 1 in the shard group, then, when the entry has an
 *     all-reduce, stage 2 in the replicate group; PROGRESS moves finished
 *     stage-1 entries on in FIFO order (timing decides only when, never
 *     which or in what order); RETIRE waits for the head, accumulates it and
 *     returns its buffers;
 *   - the gathers in flight: one handle per unit, from GATHER or REGATHER
 *     to its WAIT.
 * After an action fails, the rest of the list runs only the waits of gathers
 * already posted (a posted collective is always completed); the first error
 * is returned. */

/* A reduction in the queue. */
typedef struct sched_red {
  int unit;
  int deferred;       /* rs_only's DEFERRED_AR: its slice replaces the accumulator */
  int scatter, local; /* REDUCE: stage 1 is a reduce-scatter / its group has one rank (no collective) */
  int all_reduce;     /* stage 2 (the replicate all-reduce of the slice) follows stage 1 */
  int outer;          /* stage 2 (and a deferred one) is a reduce-scatter over R of the slice into oslice */
  size_t count;       /* stage 1: elements each rank contributes (REDUCE's count) */
  int stage;          /* 0 not started, 1 shard group, 2 replicate group */
  int done;           /* every stage has completed */
  void *send;         /* what stage 1 reads: the gradient, or its reduce-dtype copy */
  void *slice;        /* Ls (reduce dtype): stage 1's result, all-reduced in place by stage 2 */
  void *oslice;       /* Lo (reduce dtype): outer: stage 2's result (the rank's piece of the slice) */
  void *h;            /* the executor's handle of the stage's collective in flight (NULL: none) */
  uint64_t t0;        /* the executor's: when that stage was posted */
} sched_red;

typedef struct sched_exec {
  /* The pool: a buffer of b's kind, category and size for `unit`, and back. */
  hsr_status (*get)(void *ctx, int unit, const sched_bufop *b, void **p);
  void (*put)(void *ctx, int unit, const sched_bufop *b, void *p);
  /* One callback per action (its unit's buffers: sched_buf_of). GATHER
   * and REGATHER return the handle their WAIT and REGATHER_WAIT get back. */
  hsr_status (*setup)(void *ctx, const sched_action *a);
  hsr_status (*gather)(void *ctx, const sched_action *a, void **h);
  hsr_status (*gather_wait)(void *ctx, const sched_action *a, void *h);
  hsr_status (*reshard)(void *ctx, const sched_action *a);
  hsr_status (*release)(void *ctx, const sched_action *a);
  hsr_status (*grad_buf)(void *ctx, const sched_action *a);
  hsr_status (*norm)(void *ctx, const sched_action *a);
  hsr_status (*optim)(void *ctx, const sched_action *a);
  hsr_status (*regather)(void *ctx, const sched_action *a, void **h);
  hsr_status (*regather_wait)(void *ctx, const sched_action *a, void *h);
  hsr_status (*grad_zero)(void *ctx, const sched_action *a);
  /* The reduction queue's stages; each posting callback sets r->h (NULL:
   * nothing to wait for). stage_cast: the gradient into its reduce-dtype
   * copy r->send. stage1: post stage 1 (a local one: nothing to post).
   * stage1_done: stage 1 has completed (where it left the result in
   * r->send, the slice is copied out). stage2: post the replicate all-reduce
   * of r->slice (r->outer: its reduce-scatter over R into r->oslice).
   * deferred_ar: DEFERRED_AR's all-reduce of the accumulated slice (into
   * r->slice; r->outer: its reduce-scatter into r->oslice). test: whether r->h has completed, releasing it
   * when it has (NULL: PROGRESS moves nothing; the device's streams order
   * the stages). wait: completes and releases r->h (NULL: no host wait).
   * accumulate: RETIRE, the slice (r->outer: oslice) into the unit's
   * accumulator (stage: an f32 staging buffer when the reduce dtype is not
   * f32, else NULL). */
  hsr_status (*stage_cast)(void *ctx, sched_red *r, void *grad);
  hsr_status (*stage1)(void *ctx, sched_red *r);
  hsr_status (*stage1_done)(void *ctx, sched_red *r);
  hsr_status (*stage2)(void *ctx, sched_red *r);
  hsr_status (*deferred_ar)(void *ctx, sched_red *r);
  hsr_status (*test)(void *ctx, sched_red *r, int *done);
  hsr_status (*wait)(void *ctx, sched_red *r);
  hsr_status (*accumulate)(void *ctx, sched_red *r, void *stage);
} sched_exec;

/* Runs acts[0..n) (a lifecycle call's list, just decided) with executor x. */
hsr_status sched_run(sched_ctx *s, const sched_action *acts, int n, const sched_exec *x, void *ctx);
/* Teardown: completes every reduction still queued (stage 2 included, so
 * peers that posted theirs are not left waiting) and every gather in
 * flight, and gives their buffers back. */
hsr_status sched_drain(sched_ctx *s, const sched_exec *x, void *ctx);
/* The buffer of kind b that unit u holds (NULL: none). */
void *sched_buf_of(const sched_ctx *s, int unit, sched_buf b);
/* The unit's full parameters: the gathered buffer (sharded strategies,
 * NULL while not FULL) or the persistent one. */
void *sched_full_of(const sched_ctx *s, int unit);
/* Reductions started and not yet retired. */
int sched_started(const sched_ctx *s);

/* Getters. */
int sched_num_units(const sched_ctx *s);
sched_state sched_state_of(const sched_ctx *s, int unit);
int sched_micro(const sched_ctx *s, int unit); /* backward passes this step */
int sched_live(const sched_ctx *s);            /* units gathering or FULL (sharded strategies) */
int sched_live_peak(const sched_ctx *s);
int sched_queued(const sched_ctx *s); /* reductions in the queue */
/* The recorded forward order (*n units; fixed at the first step). */
const int *sched_order(const sched_ctx *s, int *n);
const char *sched_state_name(sched_state st); /* "sharded", "gathering", "full", "partial" */
const char *sched_op_name(sched_op op);       /* "gather", "wait", ... */

#ifdef __cplusplus
}
#endif
#endif
