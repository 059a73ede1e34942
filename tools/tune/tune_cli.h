/* hsr tune's front end: options, and the pieces its files share. */
#ifndef HSR_TOOLS_TUNE_CLI_H
#define HSR_TOOLS_TUNE_CLI_H

#include "hsr/boot.h"
#include "hsr/topology.h"
#include "runtime/io/ledger_internal.h"
#include "tune/tune.h"

#define TUNE_MAX_BENCH 16

typedef struct tune_opts {
  double params, tflops, tokens, compute_ms, bwd_ratio, act_bytes, mem_budget;
  double unit_bytes; /* --unit-size: gathered f32 bytes per unit (as hsr bench step) */
  long units, world, nodes, gpus_per_node, top, shard, replicate, nccl_host, micro, max_prefetch, prefetch;
  int json, validate, prefetch_step, units_given, strategy, root, reshard_given, partial_k, emit_given;
  int prefetch_given, v_given; /* flags that only the calculator / --validate read */
  int outer;                   /* --outer-shard: hsr_rt_outer, -1 not given (the planner searches both) */
  hsr_rt_reshard reshard;
  hsr_dtype param_dtype, reduce_dtype;
  tune_emit_kind emit;
  const char *xml, *nccl_xml, *hw, *plot, *compute_from;
  const char *bench[TUNE_MAX_BENCH];
  int nbench;
  /* --validate */
  long v_top, v_bad, v_steps, v_rounds;
  int v_reuse;
  int v_wait; /* --compute wait: hsr bench step's device-like compute */
  int v_sim;  /* --device sim: hsr bench step on the sim device */
  /* the model's shape (--arch, --layers ...): resolved and checked by the parser */
  const char *arch_name;
  long layers, width, heads, kv_heads, ffn, seq, vocab, micro_batch;
  int act_dtype_given, has_shape, recompute_given;
  hsr_dtype act_dtype;
  tune_arch arch;
  hsr_rt_recompute recompute; /* the calculator's (--recompute) */
  char given[64];             /* which flags were given (cmd_tune.c's option codes, from 256) */
  const char *v_keep;         /* directory for the bench files and results */
} tune_opts;

/* What the planner was given, for the report. */
typedef struct tune_ctx {
  const tune_opts *o;
  hsr_cluster *cl;
  tune_model model;
  tune_net net;
  char topo_desc[256], compute_desc[384], calib_report[2048];
  /* with a shape: per unit parameters, forward and each policy's recompute
   * (owned; tune_ctx_free), each policy's activations */
  double *unit_params, *unit_fwd, *unit_rc[HSR_TUNE_RECOMPUTES];
  tune_act act[HSR_TUNE_RECOMPUTES]; /* indexed by hsr_rt_recompute */
  int live;                              /* the job under a launcher: its own GPU's memory bounds the plan */
  double budget;         /* bytes per rank (0: none): --mem-budget, or the GPU's memory less the reserve */
  char budget_desc[256]; /* where it comes from */
} tune_ctx;
void tune_ctx_free(tune_ctx *x);

/* tune_out.c */
void tune_print_table(const tune_ctx *x, const tune_plan *p);
hsr_status tune_print_json(const tune_ctx *x, const tune_plan *p, const char *explain);
hsr_status tune_plot(const tune_ctx *x, const tune_plan *p, const double *measured, const int *which, int nm,
                     const char *path);
void tune_print_ledger(const tune_ctx *x, const tune_result *r);
/* The persistent bytes per parameter as full + over_s / S + over_sr / (S R). */
typedef struct tune_formula {
  double full, over_s, over_sr;
} tune_formula;
tune_formula tune_persistent_formula(const tune_result *r, double params);
/* What a persistent category holds in this layout, in a few words. */
const char *tune_cat_what(const tune_result *r, mem_cat c, double params);
hsr_status tune_print_ledger_json(const tune_ctx *x, const tune_result *r);
/* One candidate as the planner's JSON writes it (p: for its tie; may be NULL). */
struct cJSON *tune_cand_json(const tune_result *r, int rank, const tune_plan *p);
struct cJSON *tune_cost_json(const tune_net *n);
hsr_status tune_cost_json_text(const tune_net *n, char **out);

/* tune_mem.c: a GPU's memory (bytes) and name by its PCI bus id, from the
 * driver; HSR_ERR_UNSUPPORTED without one */
hsr_status tune_device_memory(const char *pci, double *total, char *name, size_t len);

/* tune_validate.c: under a launcher; returns an exit code */
int tune_validate(tune_opts *o);

/* tune_setup.c: the model and the cost model from the options (shared with --validate) */
hsr_status tune_setup(tune_ctx *x, hsr_cluster *cl);

#endif
