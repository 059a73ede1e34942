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
  hsr_tune_emit_kind emit;
  const char *xml, *nccl_xml, *hw, *plot, *compute_from;
  const char *bench[TUNE_MAX_BENCH];
  int nbench;
  /* --validate */
  long v_top, v_bad, v_steps, v_rounds;
  int v_reuse;
  int v_wait;         /* --compute wait: hsr bench step's device-like compute */
  int v_sim;          /* --device sim: hsr bench step on the sim device */
  char given[64];     /* which flags were given (cmd_tune.c's option codes, from 256) */
  const char *v_keep; /* directory for the bench files and results */
} tune_opts;

/* What the planner was given, for the report. */
typedef struct tune_ctx {
  const tune_opts *o;
  hsr_cluster *cl;
  hsr_tune_model model;
  hsr_tune_net net;
  char topo_desc[256], compute_desc[384], calib_report[2048];
} tune_ctx;

/* tune_out.c */
void tune_print_table(const tune_ctx *x, const hsr_tune_plan *p);
hsr_status tune_print_json(const tune_ctx *x, const hsr_tune_plan *p, const char *explain);
hsr_status tune_plot(const tune_ctx *x, const hsr_tune_plan *p, const double *measured, const int *which, int nm,
                     const char *path);
void tune_print_ledger(const tune_ctx *x, const hsr_tune_result *r);
/* The persistent bytes per parameter as full + over_s / S + over_sr / (S R). */
typedef struct tune_formula {
  double full, over_s, over_sr;
} tune_formula;
tune_formula tune_persistent_formula(const hsr_tune_result *r, double params);
/* What a persistent category holds in this layout, in a few words. */
const char *tune_cat_what(const hsr_tune_result *r, hsr_mem_cat c, double params);
hsr_status tune_print_ledger_json(const tune_ctx *x, const hsr_tune_result *r);
/* One candidate as the planner's JSON writes it (p: for its tie; may be NULL). */
struct cJSON *tune_cand_json(const hsr_tune_result *r, int rank, const hsr_tune_plan *p);
struct cJSON *tune_cost_json(const hsr_tune_net *n);
hsr_status tune_cost_json_text(const hsr_tune_net *n, char **out);

/* tune_validate.c: under a launcher; returns an exit code */
int tune_validate(tune_opts *o);

/* cmd_tune.c: the model and the cost model from the options (shared with --validate) */
hsr_status tune_setup(tune_ctx *x, hsr_cluster *cl);

#endif
