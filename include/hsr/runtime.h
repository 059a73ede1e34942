/* hsr runtime: the sharding engine.
 *
 * A program registers units (normally one block each) in model order, each
 * with named parameters. The flat layout of every unit is derived from that
 * list, deterministically, and is identical on every rank. The engine then
 * drives each unit through its lifecycle:
 *
 *   SHARDED -> gather -> FULL -> forward -> reshard (FULL | PARTIAL | SHARDED)
 *           -> gather -> FULL -> backward -> reduce-scatter (shard group)
 *           -> all-reduce (replicate group) -> AdamW on the local shard
 *
 * Strategies are policies of this one engine:
 *   ddp    no sharding (S = 1): gradients all-reduced, full optimizer state
 *   zero1  optimizer state sharded over S; gradients all-reduced in full;
 *          parameters all-gathered after the step
 *   zero2  zero1 with gradients reduce-scattered (sharded)
 *   fsdp   parameters, gradients and optimizer state sharded, R = 1
 *   hybrid fsdp inside the shard group, replicated R > 1 times (HSDP)
 *
 * hybrid's outer shard (Megatron-FSDP's outer_dp_sharding_strategy):
 *   none   every replica holds the whole optimizer state of its shard (HSDP)
 *   optim  the fp32 master, m and v of each shard are split again over the
 *          R replicas (HFSDP): gradients reduce-scatter over S, then over R;
 *          AdamW updates 1/(S R); an all-gather over R rebuilds the shard
 *
 * Views returned by hsr_rt_param_view / hsr_rt_grad_view are valid only
 * inside the unit's forward or backward window (begin .. end).
 */
#ifndef HSR_RUNTIME_H
#define HSR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "hsr/common.h"
#include "hsr/dtype.h"
#include "hsr/kernels.h"
#include "hsr/ledger.h"
#include "hsr/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSR_RT_NAME_MAX 64
#define HSR_RT_MAX_DIMS 4
#define HSR_RT_MAX_GROUPS 4

/* ---- engine configuration ---- */

typedef enum hsr_rt_strategy {
  HSR_RT_DDP = 0,
  HSR_RT_ZERO1,
  HSR_RT_ZERO2,
  HSR_RT_FSDP,
  HSR_RT_HYBRID,
  HSR_RT_STRATEGY_COUNT
} hsr_rt_strategy;
typedef enum hsr_rt_reshard { HSR_RT_RESHARD_FULL = 0, HSR_RT_RESHARD_NONE, HSR_RT_RESHARD_PARTIAL } hsr_rt_reshard;
/* Gradient synchronisation for micro-batches that are not the last one of a
 * step (the last one always completes the full reduction). */
typedef enum hsr_rt_sync { HSR_RT_SYNC_FULL = 0, HSR_RT_SYNC_NONE, HSR_RT_SYNC_RS_ONLY } hsr_rt_sync;
/* What hybrid shards across the replicate dimension (Megatron-FSDP's
 * vocabulary): nothing (HSDP), or the optimizer state (HFSDP). */
typedef enum hsr_rt_outer { HSR_RT_OUTER_NONE = 0, HSR_RT_OUTER_OPTIM } hsr_rt_outer;
/* Where a device run keeps its optimizer state: on the device (none), or
 * (optim) the f32 master, m, v and the f32 gradient shard in pinned host
 * memory, AdamW on the host's cores, the reduced gradient copied down after
 * its reduction and the updated parameters copied up before the next
 * forward's gather; the device keeps the parameter shard in its dtype. */
typedef enum hsr_rt_offload { HSR_RT_OFFLOAD_NONE = 0, HSR_RT_OFFLOAD_OPTIM } hsr_rt_offload;
/* Activation recompute, as the program declares it (docs/memory.md): none
 * keeps every activation the backward reads; full keeps each unit's input
 * and recomputes its forward inside its backward window; selective keeps the
 * matmuls' outputs and recomputes the cheap rest. The engine holds no
 * activations: the policy tells the schedule, the ledger's prediction and the
 * tuner what the program does between hsr_rt_recompute_begin and _end. */
typedef enum hsr_rt_recompute {
  HSR_RT_RECOMPUTE_NONE = 0,
  HSR_RT_RECOMPUTE_FULL,
  HSR_RT_RECOMPUTE_SELECTIVE
} hsr_rt_recompute;

typedef struct hsr_rt_opt_group {
  float lr, beta1, beta2, eps, weight_decay;
} hsr_rt_opt_group;

typedef struct hsr_rt hsr_rt;
/* Called by hsr_rt_step on every rank once the step's gradients are
 * synchronized: after every reduction (shard group, replicate group) and the
 * 1/micro_batches scale, before the global norm, clipping and AdamW read
 * them (what FSDP2 users see from a post-accumulate hook). A status other
 * than HSR_OK fails the step with it. */
typedef hsr_status (*hsr_rt_grad_hook)(hsr_rt *rt, void *ctx);
/* Called by hsr_rt_step on every rank after this job's own reductions and
 * the 1/micro_batches scale, before the gradient hook, the norm, clipping
 * and AdamW: a reduction over replicas that live outside this job (hsr/ft.h
 * averages each rank's gradient shard over the live replica groups:
 * hsr_ft_attach sets it). It may read and overwrite the gradient shards
 * (device memory is idle during the call). *commit = 0 drops the step: no update anywhere, the
 * step count stays, hsr_rt_step_info.dropped is set and the gradients wait
 * for hsr_rt_zero_grad. A status other than HSR_OK fails the step. */
typedef hsr_status (*hsr_rt_outer_fn)(hsr_rt *rt, void *ctx, int *commit);

typedef struct hsr_rt_config {
  hsr_rt_strategy strategy;
  int shard;     /* S; 0 = auto (the topology's domain size; ddp: 1) */
  int replicate; /* R; 0 = world / S */
  hsr_rt_reshard reshard;
  int partial_k;     /* K for HSR_RT_RESHARD_PARTIAL (divides S) */
  int root_reshard;  /* root units: 1 = follow `reshard`, 0 = keep FULL until backward (default, like FSDP2) */
  int prefetch;      /* units gathered ahead (0 = off) */
  int max_live;      /* cap on FULL/gathering units at once that prefetch respects (0 = no cap) */
  int prefetch_step; /* with prefetch > 0: start the first unit's gather at the end of hsr_rt_step, so
                        the next step's first gather overlaps the program's work between steps (its
                        count then falls in the step that issued it). Default 0 */
  hsr_dtype param_dtype, reduce_dtype; /* HSR_F32 or HSR_BF16 */
  hsr_rt_sync sync;
  hsr_rt_outer outer_shard; /* hybrid only: optim splits master, m, v over the R replicas (default none) */
  hsr_rt_offload offload;   /* device runs (cuda, sim): optim keeps the optimizer state in host memory */
  int micro_batches;        /* backward passes per step (>= 1) */
  hsr_rt_recompute recompute; /* the program's activation recompute (default none) */
  size_t align;             /* elements (default 16) */
  double clip;              /* global grad-norm clip; <= 0 off */
  int num_groups;           /* optimizer groups in use */
  hsr_rt_opt_group groups[HSR_RT_MAX_GROUPS];
  double timeout_s;   /* bound on every wait; <= 0: HSR_COMM_TIMEOUT */
  int poison;         /* NaN-fill released full buffers: -1 auto (debug builds or HSR_POISON=1), 0, 1 */
  uint64_t user_hash; /* mixed into the cross-rank config hash (model config, seed, ...) */
  /* Where every runtime buffer lives and the work runs. HSR_DEVICE_HOST
   * (default): host memory, host collectives. HSR_DEVICE_CUDA: device memory,
   * NCCL collectives, a compute stream plus high-priority all-gather and
   * reduce streams ordered by events; views are device pointers, valid for
   * work queued on hsr_rt_compute_stream() inside the unit's window. */
  hsr_device_kind device;
  int device_ordinal; /* cuda:N; -1 = automatic (local rank % visible GPUs, the GPU NCCL binds) */
  hsr_device *dev;    /* optional: a device the caller opened (it wins over device/ordinal; must outlive the engine) */
  hsr_stream *stream; /* optional, CUDA: the caller's compute stream on `dev` (NULL: the engine creates one) */
  hsr_rt_grad_hook grad_hook; /* optional (NULL: none), with its context */
  void *grad_hook_ctx;
  hsr_rt_outer_fn outer; /* optional (NULL: none): the outer reduction, with its context */
  void *outer_ctx;
  /* Replicas outside this job that train on other slices of the global batch
   * (hsr/ft.h): this job is replica outer_rank of outer_replicas, and
   * hsr_rt_dp_rank / hsr_rt_dp_size count every replica's ranks. 0: none. */
  int outer_replicas, outer_rank;
} hsr_rt_config;

/* Defaults: fsdp, S auto, reshard full, prefetch 1, f32/f32, sync full, one
 * micro-batch, align 16, no clip, one group lr 1e-3 (0.9, 0.999, 1e-8, 0.01). */
HSR_API hsr_status hsr_rt_config_default(hsr_rt_config *c);
/* Parsers for flag values, with errors listing what is valid. */
HSR_API hsr_status hsr_rt_parse_strategy(const char *s, hsr_rt_strategy *out);
HSR_API const char *hsr_rt_recompute_name(hsr_rt_recompute r); /* "none", "full", "selective" */

/* ---- the engine ---- */

/* Collective over the boot context. world / cluster may be NULL (the engine
 * then creates and owns them); when given they must outlive the engine. */
HSR_API hsr_status hsr_rt_create(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cluster, const hsr_rt_config *cfg,
                                 hsr_rt **out);
HSR_API hsr_status hsr_rt_destroy(hsr_rt *rt);

/* Registration, before the first step. A root unit (embedding/head) follows
 * cfg.root_reshard. */
HSR_API hsr_status hsr_rt_unit_add(hsr_rt *rt, const char *name, int is_root, int *unit);
HSR_API hsr_status hsr_rt_param_add(hsr_rt *rt, int unit, const char *name, int ndim, const int64_t *shape, int group);
/* Closes registration: layout, buffers, and the cross-rank comparison of the
 * (config, mesh, layout) hash. Collective; once (later calls return HSR_OK).
 * The calls that start work commit first if the program has not:
 * hsr_rt_param_init, hsr_rt_forward_begin,
 * hsr_rt_backward_begin, hsr_rt_step, hsr_rt_zero_grad, hsr_ckpt_save and
 * hsr_ckpt_load; every rank must then reach that call (a commit is
 * collective). A commit that fails after the layout was fixed leaves the
 * engine unusable: every later call returns HSR_ERR_STATE with the reason. */
HSR_API hsr_status hsr_rt_commit(hsr_rt *rt);
/* Initial values of a parameter (f32, full size, the same on every rank);
 * each rank keeps its shard. */
HSR_API hsr_status hsr_rt_param_init(hsr_rt *rt, const char *name, const float *values);

/* Lifecycle. */
HSR_API hsr_status hsr_rt_forward_begin(hsr_rt *rt, int unit);
HSR_API hsr_status hsr_rt_forward_end(hsr_rt *rt, int unit);
HSR_API hsr_status hsr_rt_backward_begin(hsr_rt *rt, int unit);
HSR_API hsr_status hsr_rt_backward_end(hsr_rt *rt, int unit);
/* The unit's recompute: opened inside its backward window (after
 * hsr_rt_backward_begin, before any of its backward work), closed before
 * hsr_rt_backward_end. The backward's gather serves it: no collective, no
 * gather, no prefetch in the forward order; the views stay valid. Needs
 * cfg.recompute other than none, at most once per backward window. The
 * compute in between is traced and timed as the unit's "recompute". */
HSR_API hsr_status hsr_rt_recompute_begin(hsr_rt *rt, int unit);
HSR_API hsr_status hsr_rt_recompute_end(hsr_rt *rt, int unit);
/* Full parameter (param dtype), valid until the unit's forward_end or
 * backward_end. A tied parameter is viewed through its owner unit. */
HSR_API hsr_status hsr_rt_param_view(hsr_rt *rt, const char *name, void **ptr);
/* Full gradient (f32) that backward ACCUMULATES into; valid inside the
 * backward window of the parameter's unit. */
HSR_API hsr_status hsr_rt_grad_view(hsr_rt *rt, const char *name, float **ptr);

typedef enum hsr_rt_group {
  HSR_RT_GROUP_SHARD = 0,
  HSR_RT_GROUP_REPLICATE,
  HSR_RT_GROUP_PARTIAL,
  HSR_RT_GROUP_COUNT
} hsr_rt_group;

typedef struct hsr_rt_step_info {
  int64_t step;     /* 1-based, after the update */
  double grad_norm; /* global norm of the averaged gradient, before clipping */
  double clip_coef; /* factor applied (1 without clipping) */
  double lr;        /* group 0's learning rate */
  int dropped;      /* the outer reduction dropped the step: nothing was updated (step, norm as before) */
  int recomputes;   /* units recomputed during this step (hsr_rt_recompute_begin calls) */
  /* collective calls during this step (since the previous step ended),
   * counted by the communicators, per group and operation */
  uint64_t calls[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  /* the same span's full counters (calls, bytes sent and received, fabric
   * bytes sent and received, full buffers; hsr_comm_counter) of this rank */
  hsr_comm_counter comm[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
} hsr_rt_step_info;

/* Waits for every reduction, clips, runs AdamW on the local shard (with the
 * outer shard its 1/R piece), and refreshes the parameters the gathers read:
 * zero1, zero2, ddp the full ones over the shard group, the outer shard the
 * shard over the replicate group. info may be NULL. */
HSR_API hsr_status hsr_rt_step(hsr_rt *rt, hsr_rt_step_info *info);
HSR_API hsr_status hsr_rt_zero_grad(hsr_rt *rt);
/* The learning rate of optimizer group `group` for the next hsr_rt_step
 * (every rank must set the same value). */
HSR_API hsr_status hsr_rt_set_lr(hsr_rt *rt, int group, double lr);

/* Getters. The mesh: hsr_mesh_shard, hsr_mesh_replicate, hsr_mesh_coords (hsr/topology.h). */
HSR_API const hsr_mesh *hsr_rt_get_mesh(const hsr_rt *rt);
HSR_API hsr_comm *hsr_rt_world(hsr_rt *rt);
/* The engine's device, and the stream the caller's compute must be queued on
 * (NULL on host: the host device layer is synchronous). */
HSR_API hsr_device *hsr_rt_device(hsr_rt *rt);
HSR_API hsr_stream *hsr_rt_compute_stream(hsr_rt *rt);
HSR_API int hsr_rt_dp_rank(const hsr_rt *rt); /* rep * S + shard: index of this rank's data slice */
HSR_API int hsr_rt_dp_size(const hsr_rt *rt); /* R * S */

/* ---- seeing the schedule ---- */

/* The memory ledger of this rank: what the runtime HOLDS from the allocator
 * (its pool included: a pooled buffer is real memory), by category, plus the
 * activations the program reports with hsr_ledger_note on this ledger. Its
 * peak is the pool's high-water mark. Owned by the engine. */
HSR_API hsr_ledger *hsr_rt_ledger(hsr_rt *rt);

#ifdef __cplusplus
}
#endif
#endif
