/* runtime internals: the calls of hsr/runtime.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_RUNTIME_RUNTIME_INTERNAL_H
#define HSR_RUNTIME_RUNTIME_INTERNAL_H
#include "hsr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rt_layout rt_layout;

/* align: elements each parameter's offset is a multiple of (>= 1). */
hsr_status rt_layout_create(size_t align, rt_layout **out);
void rt_layout_free(rt_layout *l);

/* Units in model order; names unique. */
hsr_status rt_layout_add_unit(rt_layout *l, const char *name, int *unit);

/* A parameter of `unit`; names are unique over all units (a tied parameter
 * is registered once, in the unit that owns it). Zero-size shapes are valid.
 * group: optimizer group index (0..HSR_RT_MAX_GROUPS-1). */
hsr_status rt_layout_add_param(rt_layout *l, int unit, const char *name, int ndim, const int64_t *shape, int group);

/* Each shard is cut again into `parts` equal, aligned pieces (the outer
 * shard: parts = R), so unit lengths pad to a multiple of shards * parts *
 * align. Before finalize; default 1. */
hsr_status rt_layout_set_subshards(rt_layout *l, int parts);
int rt_layout_subshards(const rt_layout *l);

/* Fixes the layout for `shards` shards: offsets, padded unit lengths. No
 * registration afterwards. */
hsr_status rt_layout_finalize(rt_layout *l, int shards);
int rt_layout_num_units(const rt_layout *l);
int rt_layout_num_params(const rt_layout *l);
int rt_layout_shards(const rt_layout *l);
size_t rt_layout_align(const rt_layout *l);
const char *rt_layout_unit_name(const rt_layout *l, int unit);

/* Padded flat length of a unit (elements, a multiple of shards * align). */
size_t rt_layout_unit_len(const rt_layout *l, int unit);

/* Elements of one shard of a unit: unit_len / shards. */
size_t rt_layout_shard_len(const rt_layout *l, int unit);
typedef struct rt_param_info {
  char name[HSR_RT_NAME_MAX];
  int unit, group, ndim;
  int64_t shape[HSR_RT_MAX_DIMS];
  size_t numel, offset; /* elements; offset within the unit's flat buffer */
} rt_param_info;

/* Parameter `index` (0..num_params-1, registration order). */
hsr_status rt_layout_param(const rt_layout *l, int index, rt_param_info *out);

/* Looks a parameter up by name; *index is its registration index. */
hsr_status rt_layout_find(const rt_layout *l, const char *name, int *index);

/* The shard that owns element `elem` of a unit's flat buffer. */
int rt_layout_owner(const rt_layout *l, int unit, size_t elem);

/* 64-bit FNV-1a hash of (align, shards, units, parameters, offsets). */
uint64_t rt_layout_hash(const rt_layout *l);
hsr_status rt_parse_reshard(const char *s, hsr_rt_reshard *out, int *k); /* full | none | partial:K */
hsr_status rt_parse_sync(const char *s, hsr_rt_sync *out);               /* full | none | rs_only */
hsr_status rt_parse_outer_shard(const char *s, hsr_rt_outer *out);       /* none | optim */
hsr_status rt_parse_offload(const char *s, hsr_rt_offload *out);         /* none | optim */
hsr_status rt_parse_recompute(const char *s, hsr_rt_recompute *out);     /* none | full | selective */
/* host | cuda | cuda:N (cuda = automatic ordinal, -1). */
hsr_status rt_parse_device(const char *s, hsr_device_kind *kind, int *ordinal);
const char *rt_strategy_name(hsr_rt_strategy s);

/* What a strategy shards over the shard group, decided here only: the
 * parameters (fsdp, hybrid) and the gradients (zero2, fsdp, hybrid); every
 * strategy shards the optimizer state (ddp has S = 1). */
typedef struct rt_sharding {
  int params, grads;
} rt_sharding;
rt_sharding rt_strategy_sharding(hsr_rt_strategy s);
const char *rt_sync_name(hsr_rt_sync s);
const char *rt_outer_shard_name(hsr_rt_outer o); /* "none", "optim" */
const char *rt_offload_name(hsr_rt_offload o);   /* "none", "optim" */

/* The one check of a configuration: its fields, and the strategy against
 * the mesh. On a world size it fills *S and *R where the config leaves them
 * to the engine (auto_shard: the value for shard = 0); with world 0 (before
 * a launch) it checks what the given shard and replicate already decide and
 * returns them as given. The engine, hsr train and hsr tune all use it. */
hsr_status rt_config_resolve(const hsr_rt_config *c, int world, int auto_shard, int *S, int *R);

/* Learning-rate schedule (pure): linear warm-up over `warmup` steps, then
 * cosine decay from lr to lr_min, reaching lr_min at step `total` and staying
 * there (nanoGPT's get_lr). warmup = 0 and total = 0: constant lr. step is
 * 1-based: the step about to run. */
typedef struct rt_lr_schedule {
  double lr, lr_min;
  int64_t warmup, total;
} rt_lr_schedule;
double rt_lr_at(const rt_lr_schedule *s, int64_t step);

/* Checks a schedule (lr_min <= lr, warmup <= total when total > 0, ...). */
hsr_status rt_lr_check(const rt_lr_schedule *s);

/* The current master value of a parameter, full size, f32. Collective over
 * the shard group (with the outer shard: over the replicate group first). */
hsr_status rt_param_read(hsr_rt *rt, const char *name, float *out);

/* The synchronized gradient of a parameter, full size, f32: the average over
 * every data-parallel rank and micro-batch, before clipping (what AdamW
 * reads). Valid from the gradient hook (cfg.grad_hook) inside hsr_rt_step
 * until hsr_rt_zero_grad or the next reduction; HSR_ERR_STATE outside.
 * Collective over the shard group (with the outer shard: over the replicate
 * group first); its collectives do not count toward the step's
 * hsr_rt_step_info.calls. */
hsr_status rt_grad_read(hsr_rt *rt, const char *name, float *out);

/* Getters. */
const rt_layout *rt_get_layout(const hsr_rt *rt);
int rt_shard(const hsr_rt *rt);            /* S */
int rt_replicate(const hsr_rt *rt);        /* R */
int rt_partial(const hsr_rt *rt);          /* K (0 when reshard is not partial) */
const char *rt_group_name(hsr_rt_group g); /* "shard", "replicate", "partial" */
typedef struct rt_stats {
  uint64_t allocs;    /* buffers taken from the allocator (not the pool) so far */
  uint64_t pool_hits; /* buffers reused from the pool */
  int max_live_full;  /* most units FULL or gathering at once */
} rt_stats;
hsr_status rt_get_stats(const hsr_rt *rt, rt_stats *out);

/* This rank's slice of unit `unit`: `len` f32 elements each of the master
 * weights, the AdamW moments and the gradient shard (device memory on CUDA;
 * pinned host memory with cfg.offload = optim).
 * Valid from commit until the engine is destroyed; read them between steps
 * (or in the outer reduction), write master/m/v only between steps and then
 * call rt_state_installed_at. */
typedef struct rt_slice {
  size_t len;
  float *master, *m, *v, *grad;
} rt_slice;
hsr_status rt_slice_get(hsr_rt *rt, int unit, rt_slice *out);

/* Optimizer steps done (AdamW's bias correction counts them). */
int64_t rt_get_step(const hsr_rt *rt);

/* After this rank's master weights and moments were overwritten (a peer's
 * copy): sets the step count and derives the parameters from the master
 * weights (zero1 / zero2 / ddp gather them over the shard group). Collective
 * over the shard group; the gradients are zeroed. */
hsr_status rt_state_installed_at(hsr_rt *rt, int64_t step);

/* Buffers IN USE (taken from the pool and not yet returned), by category. */
const hsr_ledger *rt_ledger_in_use(const hsr_rt *rt);

/* Lifecycle trace on/off (off by default; spans cost a little memory each). */
hsr_status rt_trace_enable(hsr_rt *rt, int on);

/* Collective over every rank: rank 0 writes one Chrome trace JSON to `path`. */
hsr_status rt_trace_write(hsr_rt *rt, const char *path);

/* Where the time of engine calls went (this rank, since creation or the last
 * reset). bookkeeping = engine - wait - post - optimizer - data: the
 * runtime's own state machine, pool, ledger and trace. */
typedef struct rt_timing {
  uint64_t calls, steps;
  double engine_s;                /* inside lifecycle calls (begin/end, step, zero_grad) */
  double wait_s;                  /*   of which blocked waiting for collectives */
  double post_s;                  /*   of which non-blocking collective calls: posts and tests */
  double optim_s;                 /*   of which the AdamW update (and the norm) */
  double data_s;                  /*   of which the runtime's data work: zeroing, casts, accumulation, copies */
  double compute_s;               /* the program's work between calls, inside unit windows */
  double step_s;                  /* total of the step spans (first begin .. end of step) */
  uint64_t gathers, gather_bytes; /* all-gather collectives and bytes this rank contributed */
  double gather_s;                /* their duration (transport start .. end) */
} rt_timing;
hsr_status rt_get_timing(const hsr_rt *rt, rt_timing *out);
hsr_status rt_reset_timing(hsr_rt *rt);

#ifdef __cplusplus
}
#endif
#endif
