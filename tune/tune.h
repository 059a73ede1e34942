/* hsr tune: how much to shard inside the node and how much across, predicted.
 * Pure functions (no I/O, no communication) in four parts:
 *
 *  1. the cost model's parameters (tune_net): per tier (intra-node,
 *     cross-node) and collective a latency and a bus bandwidth in nccl-tests'
 *     sense, built-in defaults from public figures (always labelled as such)
 *     or fitted to `hsr bench <collective> -J` files;
 *  2. volumes and times of one collective on a group as it lies on the nodes
 *     (tune_volume): bytes sent, received and across nodes per rank, as
 *     the communicators count them, and the stages that take time;
 *  3. one layout evaluated (tune_eval): the runtime's own schedule
 *     (runtime/sched/schedule.h, internal) run over one training step gives every collective
 *     and buffer; a timeline of the program and its communicators gives step,
 *     communication and exposed time; the ledger comes from
 *     tune_ledger_predict (hsr/tune_ledger.h);
 *  4. the planner (tune_plan): every layout the mesh planner
 *     (mesh_plan) accepts, filtered by a memory budget, ranked by
 *     predicted step time, explained, and written in FSDP2's, torchtitan's
 *     and DeepSpeed's vocabulary. */
#ifndef HSR_TUNE_H
#define HSR_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/ledger.h"
#include "runtime/io/ledger_internal.h"
#include "hsr/runtime.h"
#include "hsr/topology.h"
#include "tune/tune_ledger_internal.h"
#include "topology/topology_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. the cost model's parameters ---- */

typedef enum tune_tier { HSR_TUNE_INTRA = 0, HSR_TUNE_CROSS, HSR_TUNE_TIER_COUNT } tune_tier;
/* The collectives the model times: hsr_op's first three. */
#define HSR_TUNE_OPS 3 /* HSR_OP_ALLGATHER, HSR_OP_REDUCE_SCATTER, HSR_OP_ALLREDUCE */

/* A stage of tier t moving b bytes per rank (what this rank sends in it)
 * takes alpha + b / busbw. For a ring all-gather of S gathered bytes over n
 * ranks b = S (n-1)/n, so busbw is nccl-tests' bus bandwidth. */
typedef struct tune_link {
  double alpha_us;  /* latency per stage */
  double busbw_gbs; /* 1e9 bytes per second */
  int samples;      /* bench rows fitted (0: not measured) */
  int is_default;   /* a built-in figure, not measured on this system */
  char source[160]; /* where the figure comes from */
} tune_link;

/* Two-level all-reduce shapes (groups spanning nodes): */
typedef enum tune_ar2 {
  HSR_TUNE_AR2_FULL = 0,  /* node all-reduce, then every local rank all-reduces the whole vector across (hsr
                             before the split rail) */
  HSR_TUNE_AR2_SPLIT_RAIL /* node reduce-scatter, cross all-reduce of 1/L, node all-gather; the count % L tail
                             node all-reduced then cross all-reduced (UCC hier; collectives/two_allreduce.c) */
} tune_ar2;

typedef struct tune_net {
  char name[64];
  tune_link link[HSR_TUNE_TIER_COUNT][HSR_TUNE_OPS];
  /* bandwidth factor of a tier while the other tier is busy too (1: no
   * contention; fitted from `hsr bench --group shard,replicate --concurrent`) */
  double concurrent[HSR_TUNE_TIER_COUNT];
  int concurrent_default[HSR_TUNE_TIER_COUNT];
  /* share of the compute speed a busy collective of the tier takes (host
   * collectives run on the cores that compute; 0 on GPUs) */
  double steal[HSR_TUNE_TIER_COUNT];
  /* collectives inside a training step take `slow` times their benchmarked
   * time (host: the ranks' compute holds the cores their progress threads
   * need; 1 unless fitted with tune_calib_step) */
  double slow[HSR_TUNE_TIER_COUNT];
  /* and `slow_busy` times that again while the program computes beside them
   * (host: they share its cores; 1 unless fitted; 1 on GPUs) */
  double slow_busy[HSR_TUNE_TIER_COUNT];
  /* groups spanning nodes with several members per node run two-level
   * (node stage, cross stage): their measured time over the stages' modeled
   * time, per collective (fitted from `hsr bench --group world` rows; 1) */
  double span[HSR_TUNE_OPS];
  int span_samples[HSR_TUNE_OPS];
  /* the cross stage of a two-level operation, per collective, fitted to
   * `hsr bench --group world` rows (what is left of their time after the
   * node stage): used instead of the cross tier's link times `span` when it
   * has samples. A two-level stage overlaps and shares differently from a
   * flat ring, so its own fit beats a factor on the flat one. */
  tune_link span_link[HSR_TUNE_OPS];
  double optim_ns_per_elem; /* AdamW per element of the local shard */
  double data_gbs;          /* the runtime's own data work (zeroing, casts, copies) */
  int device_is_gpu;        /* the engine's CUDA path: stream-ordered reductions */
  /* the program's compute holds no host core (GPU kernels; hsr bench step
   * --compute wait): steal stays 0 and slow_busy 1, tune_calib_step
   * does not fit them */
  int compute_off_host;
  /* how well the fits matched what they were fitted to, as relative rms
   * residuals (0: nothing fitted, e.g. built-in figures): each tier's
   * collectives (its bench rows, and its groups' busy time in the probes),
   * the compute per unit, and the step itself in the probes (what the
   * model leaves unexplained) */
  double rel_rms[HSR_TUNE_TIER_COUNT];
  double compute_rel_rms, step_rel_rms;
  tune_ar2 ar2;       /* the two-level all-reduce the collectives run */
  double ar_rd_max_bytes; /* cross-node all-reduce by recursive doubling up to this size (power-of-two groups) */
} tune_net;

/* Built-in figures: "h100", "h200" (NVLink all-gather busbw ~360 GB/s, NDR
 * 400G ~48 GB/s per GPU's NIC), "a100" (NVLink 3 ~230 GB/s, HDR 200G ~24
 * GB/s), "pcie5" (PCIe Gen5 ~50 GB/s inside the node, NDR across), "host"
 * (hsr's host collectives: shared memory, UCX). Every link is marked
 * is_default with its source. */
hsr_status tune_net_default(const char *hw, tune_net *out);
const char *tune_net_hw_names(void); /* "h100, h200, a100, pcie5, host" */
/* 1 when any link, contention factor or cost the model would use is a default. */
int tune_net_uses_defaults(const tune_net *n);

/* Calibration: rows of `hsr bench all_gather|reduce_scatter|all_reduce -J`
 * files, then a least-squares fit (relative error) of alpha and busbw per
 * tier and collective. Intra-node rows (one node) fit the intra tier;
 * inter-node rows with one member per node fit the cross tier; rows of
 * groups spanning nodes with several members per node (two-level) fit the
 * factor `span` of their collective (or, without cross rows, the cross tier
 * from what is left after their node stage); rows run
 * --concurrent with the other tier fit the contention factors. Tiers and
 * collectives without rows keep their values (a reduce-scatter fitted
 * without all-reduce rows gives the all-reduce as reduce-scatter plus
 * all-gather, labelled so). */
typedef struct tune_calib tune_calib;
hsr_status tune_calib_create(tune_calib **out);
void tune_calib_free(tune_calib *c);
/* text: the file's contents; name: for messages and labels. */
hsr_status tune_calib_add_json(tune_calib *c, const char *text, const char *name);
int tune_calib_rows(const tune_calib *c);
/* Fits into net; report (may be NULL) gets one line per fitted link with
 * its rows and the worst relative error of the fit. */
hsr_status tune_calib_fit(const tune_calib *c, tune_net *net, char *report, size_t len);

/* ---- 2. one collective ---- */

/* A group as it lies on the nodes: n members on `nodes` nodes, `per_node`
 * members on each (0 when uneven), in `domains` NVLink domains. */
typedef struct tune_shape {
  int n, nodes, per_node, domains;
} tune_shape;

#define HSR_TUNE_MAX_STAGES 5
typedef struct tune_stage {
  tune_tier tier;
  int op;       /* hsr_op of the stage */
  double bytes; /* what this rank sends in the stage */
  int span;     /* a stage of a two-level operation (a group spanning nodes): 1 + its hsr_op; else 0 */
} tune_stage;

/* Per rank, as the communicators count them (hsr_comm_counter; the mean
 * over the group's members), and the stages that take time. */
typedef struct tune_vol {
  double sent, recv, fabric_sent, fabric_recv, full;
  int nstages;
  tune_stage stage[HSR_TUNE_MAX_STAGES];
  const char *algo; /* "local", "shared memory", "ucx ring", "ucx recursive doubling", "two-level", ... */
} tune_vol;

/* op: HSR_OP_ALLGATHER (count = elements each rank contributes),
 * HSR_OP_REDUCE_SCATTER (count = elements each rank receives) or
 * HSR_OP_ALLREDUCE (count = vector length); es: element size. */
hsr_status tune_volume(const tune_net *net, int op, const tune_shape *g, double count, size_t es,
                       tune_vol *out);
/* Seconds of a collective alone: the sum of its stages' alpha + bytes / busbw. */
double tune_coll_time(const tune_net *net, const tune_vol *v);

/* ---- 3. one layout ---- */

typedef enum tune_root {
  HSR_TUNE_ROOT_NONE = 0, /* every unit is a block */
  HSR_TUNE_ROOT_LAST,     /* the last unit is a root unit (hsr bench step) */
  HSR_TUNE_ROOT_OUTER     /* the first unit is a root that wraps the rest (embedding + head: hsr train) */
} tune_root;

/* The recompute policies, indexed by hsr_rt_recompute (none, full,
 * selective: hsr/runtime.h). */
#define HSR_TUNE_RECOMPUTES 3

typedef struct tune_model {
  int units;
  const double *unit_params; /* per unit (elements); NULL: params / units each */
  double params;
  tune_root root;
  const double *unit_fwd_ms; /* per unit forward compute per micro-batch; NULL: fwd_ms each */
  double fwd_ms, bwd_ratio;  /* backward = bwd_ratio x forward */
  double act_bytes;          /* activation memory per rank, added to the peak */
  double selective_frac;     /* recompute selective: the part of a unit's forward compute recomputed */
  int compute_default;       /* the compute figure is an assumption, not measured or given */
  /* With the model's shape: the activations per recompute policy
   * (act_policy[cfg.recompute] instead of act_bytes), and the planner
   * searches recompute with the layouts. unit_recompute_ms[policy]: the
   * compute of each unit's recompute (ms per micro-batch; NULL: its
   * forward, times selective_frac for selective). */
  int act_by_policy;
  double act_policy[HSR_TUNE_RECOMPUTES];
  const double *unit_recompute_ms[HSR_TUNE_RECOMPUTES];
} tune_model;

/* Bytes and calls per rank per step, one group and collective. */
typedef struct tune_bytes {
  double calls, sent, recv, fabric_sent, fabric_recv, full;
} tune_bytes;

/* The terms of the uncertainty: each tier's collectives, compute, and the
 * step's own residual in the probes (independent for every layout). */
enum { HSR_TUNE_UNC_INTRA = 0, HSR_TUNE_UNC_CROSS, HSR_TUNE_UNC_COMPUTE, HSR_TUNE_UNC_STEP, HSR_TUNE_UNC_TERMS };
const char *tune_unc_name(int term); /* "intra-node collectives", ... */

typedef struct tune_result {
  hsr_rt_config cfg; /* strategy, reshard, K (partial_k), prefetch, sync, dtypes */
  int S, R, K;       /* K: the mesh's partial group size (the planner's choice) */
  tune_shape shape[HSR_RT_GROUP_COUNT];
  int feasible;
  char reason[256]; /* why not (budget and amount), "" when feasible */
  /* time per step (ms), as hsr bench step measures it from the trace: */
  double step_ms, compute_ms, comm_ms, exposed_ms, ag_ms, ag_exposed_ms;
  double busy_ms[HSR_RT_GROUP_COUNT];       /* time the group's collectives ran */
  double tier_busy_ms[HSR_TUNE_TIER_COUNT]; /* time a stage of the tier ran */
  tune_bytes bytes[HSR_RT_GROUP_COUNT][HSR_TUNE_OPS];
  double fabric_all_ranks; /* bytes sent across node boundaries per step, summed over every rank */
  /* the ledger (per rank, held memory: the pool's high-water) */
  uint64_t persistent, runtime_peak, transient_peak;
  double peak_total; /* runtime peak + activations */
  double act_bytes;  /* the activations in peak_total (cfg.recompute's, with a shape) */
  ledger_where peak_where;
  uint64_t peak_cat[HSR_MEM_CAT_COUNT];
  double persistent_per_param; /* bytes per parameter */
  /* how sure (tune_plan_run, with a fitted model): unc_ms[k] is how far
   * the step moves if term k (HSR_TUNE_UNC_*) is one residual off;
   * step_pm_ms is their root sum of squares (one sigma); tie: the index in
   * the ranked plan of a faster candidate this one cannot be told apart
   * from within that uncertainty, else -1 */
  double unc_ms[HSR_TUNE_UNC_TERMS];
  double step_pm_ms;
  int tie;
} tune_result;

/* Evaluates one layout: cfg (strategy, reshard, partial_k, prefetch,
 * prefetch_step, max_live, sync, micro_batches, dtypes; device chosen from
 * net), the mesh S x R, and the shapes of its shard, replicate and partial
 * groups. */
hsr_status tune_eval(const tune_model *m, const tune_net *net, const hsr_rt_config *cfg, int S, int R,
                     const tune_shape shapes[HSR_RT_GROUP_COUNT], tune_result *out);
/* The shapes of rank 0's groups in a planned mesh. */
hsr_status tune_mesh_shapes(const hsr_cluster *c, const hsr_mesh *m, tune_shape shapes[HSR_RT_GROUP_COUNT]);
/* "hybrid 2x4 full p1" style label, " outer:optim" appended with the
 * outer shard (buf of >= 96 bytes). */
const char *tune_label(const tune_result *r, char *buf, size_t len);

/* Measured runs of known layouts (hsr bench step) fit what a benchmark of
 * collectives alone cannot show: the compute per unit, how much slower the
 * collectives run inside a step (net->slow) and how much compute speed a
 * busy collective takes (net->steal), per tier, by minimising the squared
 * relative errors of the runs' step, communication and compute time
 * (coordinate descent, golden-section line searches within fixed bounds).
 * On GPUs these stay 1 and 0: the collectives have their own engines. */
typedef struct tune_probe {
  hsr_rt_config cfg;
  int S, R;
  tune_shape shapes[HSR_RT_GROUP_COUNT];
  double step_ms, comm_ms, compute_ms; /* measured, per step */
  double busy_ms[HSR_RT_GROUP_COUNT];  /* measured union of each group's collectives (0: not measured) */
} tune_probe;
hsr_status tune_calib_step(tune_net *net, tune_model *m, const tune_probe *p, int n, char *report,
                           size_t len);

/* ---- 4. the planner ---- */

typedef struct tune_space {
  double mem_budget; /* bytes per rank; <= 0: no budget */
  int max_prefetch;  /* prefetch depths 0..max (default 2) */
  int prefetch_step; /* the step-end prefetch with prefetch > 0 (default 1) */
  int micro_batches; /* >= 1; with > 1 every sync mode is a candidate */
  hsr_dtype param_dtype, reduce_dtype;
  int only_shard;    /* > 0: only this S */
  int only_strategy; /* >= 0: only this hsr_rt_strategy; -1 all */
  int only_outer;    /* >= 0: only this hsr_rt_outer (optim: hybrid alone has it); -1 both */
} tune_space;
hsr_status tune_space_default(tune_space *s);

typedef struct tune_plan {
  tune_result *cand; /* every candidate: feasible ones ranked first, by step time */
  int n, nfeasible;
  int world, nodes, per_node, domain_size;
  double min_over_budget; /* when nothing fits: the least any layout is over the budget by (bytes) */
  double plan_s;          /* seconds the planning took (wall clock) */
  double plan_cpu_s;      /* and of this thread's CPU time: what it takes on an idle core */
  int recompute_searched; /* the model has activations per policy: recompute is a dimension of the search */
  double mem_budget;      /* the space's (bytes per rank; <= 0: none) */
} tune_plan;

/* Every layout of the cluster's world: S over the mesh planner's valid
 * shard sizes (mesh_plan decides; no second copy of its rules),
 * strategies (ddp for S = 1, zero1/zero2 for S > 1, fsdp or hybrid),
 * reshard full/none/partial:K (K over the divisors of S the planner accepts),
 * prefetch 0..max, sync modes with micro-batches, and for hybrid the outer
 * shard none and optim (the optimizer state over the replicas too). */
hsr_status tune_plan_run(const hsr_cluster *c, const tune_model *m, const tune_net *net,
                         const tune_space *sp, tune_plan *out);
void tune_plan_free(tune_plan *p);
/* Of two candidates, the uncertainty term (HSR_TUNE_UNC_*) that most
 * decides which is faster: the measurement that would separate them. */
hsr_status tune_separating_term(const tune_result *a, const tune_result *b, int *term);

/* A few plain lines on the winner (cand[0]) and the runner-up: which
 * gathers stay inside the node, what crosses nodes and how much, what
 * partial:K costs in memory and saves in time, and for hybrid the outer
 * shard's trade (the memory it saves against the all-gather over R that
 * the step then waits for). */
hsr_status tune_explain(const tune_plan *p, const tune_net *net, char *buf, size_t len);

typedef enum tune_emit_kind {
  HSR_TUNE_EMIT_FSDP2 = 0,
  HSR_TUNE_EMIT_TORCHTITAN,
  HSR_TUNE_EMIT_DEEPSPEED
} tune_emit_kind;
hsr_status tune_parse_emit(const char *s, tune_emit_kind *out); /* fsdp2 | torchtitan | deepspeed */
/* The layout in that system's vocabulary (Python, TOML, JSON text); what
 * the system lacks (the outer shard: FSDP2 and torchtitan, pytorch#148257;
 * DeepSpeed's nearest forms) is said in a comment. */
hsr_status tune_emit(const tune_result *r, tune_emit_kind kind, char *buf, size_t len);

/* ---- 5. activations (tune/act.c) ---- */

/* The model families the activation model knows:
 *  - gpt: the transformer of Korthikanti et al. 2022 ("Reducing Activation
 *    Recomputation in Large Transformer Models"): LayerNorm, multi-head
 *    attention with its scores materialized and dropout, a 4C GELU MLP,
 *    tied head, learned positions;
 *  - llama: the same adapted to Llama (RMSNorm, grouped-query attention by a
 *    fused kernel that keeps no score matrix, SwiGLU of width ffn, no
 *    dropout, untied head);
 *  - hsr-gpt, hsr-llama: hsr's own GPT and Llama examples (examples/gpt.h,
 *    examples/llama.h) exactly, f32. */
typedef enum tune_family {
  HSR_TUNE_FAM_GPT = 0,
  HSR_TUNE_FAM_LLAMA,
  HSR_TUNE_FAM_HSR_GPT,
  HSR_TUNE_FAM_HSR_LLAMA
} tune_family;
const char *tune_family_name(tune_family f); /* "gpt", "llama", "hsr-gpt", "hsr-llama" */

/* A model's shape. micro_batch: sequences per micro-batch per rank. ctx:
 * rows of the learned position table (gpt, hsr-gpt; 0: seq). */
typedef struct tune_arch {
  tune_family family;
  int layers, width, heads, kv_heads, ffn, seq, vocab, micro_batch, ctx;
  hsr_dtype act_dtype; /* bf16 or f32 (hsr-gpt, hsr-llama: f32) */
  char name[32];       /* the preset or family it came from */
} tune_arch;

/* Presets, with published shapes: "gpt2-124m" (L12 C768 H12 V50257
 * T1024), "llama3-8b" (L32 C4096 H32 KV8 F14336 V128256 T8192),
 * "llama3-70b" (L80 C8192 H64 KV8 F28672 V128256 T8192), micro-batch 1,
 * bf16; and the families "gpt", "llama", "hsr-gpt", "hsr-llama" with no
 * shape (zeros: the caller fills it in). */
hsr_status tune_arch_preset(const char *name, tune_arch *out);
const char *tune_arch_names(void);
/* Fills the defaults (kv_heads = heads; ffn: 4C for gpt, Llama's rule for
 * llama (8C/3 up to a multiple of 256; hsr-llama's: of 8); ctx = seq) and checks the shape: a clear error naming what is
 * wrong and what would be valid. */
hsr_status tune_arch_check(tune_arch *a);
/* Parameters: one layer, the root (embeddings, final norm, head), all. */
double tune_arch_layer_params(const tune_arch *a);
double tune_arch_root_params(const tune_arch *a);
double tune_arch_params(const tune_arch *a);
/* Forward FLOPs per micro-batch: one layer (2 x its parameters x tokens +
 * the attention's 4 T C per token), the root (the head: 2 V C per token). */
double tune_arch_layer_flops(const tune_arch *a);
double tune_arch_root_flops(const tune_arch *a);
/* What a policy recomputes in one layer's backward, per micro-batch: matmul
 * FLOPs, and the bytes elementwise work reads and writes. */
hsr_status tune_recompute_cost(const tune_arch *a, hsr_rt_recompute rc, double *flops, double *bytes);

/* These take a shape as given (its defaults filled and checked on a copy:
 * a bad one is HSR_ERR_INVALID with the message tune_arch_check gives).
 * Bytes per rank per micro-batch. saved: what one layer keeps from its
 * forward to its backward; scratch: what one layer's backward recomputes
 * (one layer at a time: saved(none) - saved(rc)); root: the embedding
 * output, the final norm, the logits and the loss, and the backward's
 * working buffers; peak: layers x saved + scratch + root. */
typedef struct tune_act {
  double saved, scratch, root, peak;
} tune_act;
hsr_status tune_act_layer(const tune_arch *a, hsr_rt_recompute rc, double *saved, double *scratch);
hsr_status tune_act_predict(const tune_arch *a, hsr_rt_recompute rc, tune_act *out);

/* A GPU's memory as the planner bounds it (tune/cost.c's table): capacity
 * (h100 80 GiB, h200 141 GiB, a100 80 GiB: the 80 GB part), and the reserve
 * the runtime's buffers never get, tune_mem_reserve(capacity). 0 for
 * hardware without a figure (pcie5, host). */
double tune_hw_memory(const char *hw);
/* 2 GiB (the CUDA context, NCCL's buffers) + 5% of the capacity (the
 * caching allocator's fragmentation). */
double tune_mem_reserve(double capacity);

#ifdef __cplusplus
}
#endif
#endif
