/* The training driver's API (the tools/train room; `hsr train` and
 * examples/train_run.c call it): a configuration (train_args) from defaults
 * and fields, or from hsr train's flags, then one job (train_job). Also the
 * model table (what differs between the MLP, the GPT and the Llama) and the
 * helpers the shared training loop uses. Internal: linked from libhsr_train.a,
 * not exported by libhsr.so.
 *
 *   train_args a;
 *   train_args_default(&a);            // hsr train's defaults (the MLP)
 *   a.model = &train_model_gpt, a.steps = 20;
 *   int code = train_args_finish(&a);  // the model's defaults, the checks
 *   if (!code) code = train_job(&a);   // boot, train, report, finalize
 */
#ifndef HSR_TOOLS_TRAIN_H
#define HSR_TOOLS_TRAIN_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "hsr/boot.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/safetensors.h"
#include "runtime/io/safetensors_sharded.h"
#include "hsr/tune_ledger.h"
#include "train_ckpt.h"
#include "train_ft.h"

struct train_model;

typedef struct train_args {
  const struct train_model *model;
  /* model shape; -1: the model's default */
  int layers, dim, heads, kv_heads, classes, seq;
  const char *data, *init, *export_path;
  const char *export_init;  /* --export-init: the initial weights, before the first step */
  uint64_t max_shard_bytes; /* --max-shard-size (0: one file) */
  int steps, batch, warmup, val_every, val_windows;
  float lr, lr_min, wd; /* lr_min < 0: the model's default */
  uint64_t seed;
  int wrap_linear;
  hsr_rt_config cfg;
  int strategy_given;
  unsigned given; /* TRAIN_GIVEN_* of the flags on the command line (defaults are never refused) */
  const char *log, *trace, *json;
  int progress;
  train_ckpt ck; /* --ckpt --save-every --keep --resume (train_ckpt.c) */
  train_ft ftc;  /* --coordinator --replica-id --replicas --join --hash-every (train_ft.c) */
} train_args;

enum {
  TRAIN_GIVEN_RESHARD = 1u << 0,
  TRAIN_GIVEN_ROOT_RESHARD = 1u << 1,
  TRAIN_GIVEN_PREFETCH = 1u << 2,
  TRAIN_GIVEN_MAX_LIVE = 1u << 3,
  TRAIN_GIVEN_PREFETCH_STEP = 1u << 4,
  TRAIN_GIVEN_SYNC = 1u << 5,
  TRAIN_GIVEN_REPLICATE = 1u << 6,
  TRAIN_GIVEN_SHARD = 1u << 7,
  TRAIN_GIVEN_REDUCE_DTYPE = 1u << 8,
  TRAIN_GIVEN_VAL_WINDOWS = 1u << 9,
  TRAIN_GIVEN_OUTER = 1u << 10
};

/* One run: what the shared loop and the model's functions share. */
typedef struct train_run {
  train_args *a;
  hsr_boot *boot;
  hsr_rt *rt;
  int rank, world;
  void *m;  /* the model's state */
  int said; /* the job's error is printed already (cli_say_shared) */
} train_run;

typedef struct train_model {
  const char *name;
  /* defaults of the flags left at -1, then checks (usage errors, exit 2) */
  hsr_status (*finish_args)(train_args *a);
  /* registers units and parameters, initialises them (or loads --init) */
  hsr_status (*setup)(train_run *r);
  /* one step on the global batch of step `step` (0-based) */
  hsr_status (*step)(train_run *r, int64_t step, double *loss, hsr_rt_step_info *info);
  /* validation loss (NULL: the model has none); collective */
  hsr_status (*val)(train_run *r, double *loss);
  /* the lifecycle calls of one step, for the predicted ledger */
  hsr_status (*program)(const train_run *r, hsr_prog_call **calls, int *n);
  int (*blocks)(const train_run *r);              /* repeating blocks, for the wrap diagnostic */
  double (*tokens_per_step)(const train_run *r);  /* samples or tokens */
  double (*flops_per_token)(const train_run *r);  /* training FLOPs per token (forward + backward) */
  size_t (*activation_bytes)(const train_run *r); /* per micro-batch, as noted in the ledger */
  void (*describe)(const train_run *r, FILE *f);  /* the "model: ..." line */
  /* __metadata__ of --export (n pairs at most 8, strings in buf) */
  int (*export_meta)(const train_run *r, st_kv *kv, char buf[8][64]);
  /* GEMM of the probe that sizes the model's own (m x n x k) */
  void (*probe_shape)(const train_run *r, size_t *m, size_t *n, size_t *k);
  /* seconds of the model's own GEMMs, attention and other kernels since the
   * last reset (NULL: not measured) */
  void (*profile)(train_run *r, double s[3], int reset);
  /* model fields of the --json summary (NULL: none) */
  void (*json)(const train_run *r, cJSON *o);
  void (*free)(train_run *r);
  /* from the flags alone (before setup): parameter elements, the largest
   * unit's elements and the activation bytes of a micro-batch of `rows`
   * samples (the memory check) */
  void (*sizes)(const train_args *a, int rows, double *params, double *unit_max, double *act_bytes);
} train_model;

extern const train_model train_model_mlp, train_model_gpt, train_model_llama;

/* train_args.c: parses argv into *a (the model's defaults filled in, the
 * optimizer groups and the run's hash set). 0: go; -1: --help printed;
 * else the exit code of a usage error (printed). */
int train_parse(int argc, char **argv, train_args *a);
/* train_args.c: hsr train's defaults with no flag given (the MLP, 200 steps;
 * shape fields at -1: the model's own). Set fields after it, then call
 * train_args_finish. */
void train_args_default(train_args *a);
/* train_args.c: what train_parse does after the flags: the checks made
 * before anything starts (said once per job), the model's defaults, the
 * optimizer groups and the run's hash. 0: go; else the exit code of a usage
 * error (printed). */
int train_args_finish(train_args *a);
/* train_loop.c: one training job from a finished configuration: the
 * bootstrap (a launcher's ranks, or a singleton), the mesh checks, the
 * engine, the loop with its log, checkpoints and replica groups, export,
 * the report and --json, teardown. Prints what hsr train prints; returns
 * its exit code (0, 1 a failure, 2 bad input). Once per process. */
int train_job(train_args *a);

/* train_args.c: the checks that need the mesh (after the bootstrap, before
 * the engine): flags that have no effect on this mesh are refused. 0 or an
 * error (HSR_ERR_INVALID) naming the flag. */
hsr_status train_check_mesh(const train_args *a, int S, int R);
/* Bytes this host must hold for the run (every rank of it: parameters,
 * gradients, optimizer state, gathered units, activations), estimated from
 * the parameter count; refused (HSR_ERR_INVALID saying how much is needed and
 * how much there is) when it does not fit. ranks_here: the job's ranks on
 * this host. */
hsr_status train_check_fit(const train_args *a, int S, int R, int world, int ranks_here);

/* The run's learning-rate schedule (rt_lr_at): warm-up over --warmup
 * steps, then cosine decay to --lr-min over the run; constant when
 * --lr-min = --lr and no warm-up. */
static inline rt_lr_schedule train_schedule(const train_args *a) {
  rt_lr_schedule s = {a->lr, a->lr_min, a->warmup, a->lr_min < a->lr || a->warmup ? a->steps : 0};
  return s;
}

/* ---- train_io.c ---- */
/* Every rank learns whether all succeeded; on a failure every rank returns
 * the lowest failing rank's error ("rank R: ..."). Collective. */
hsr_status train_agree(hsr_boot *boot, hsr_status st);
/* Writes every parameter by logical name (registration order) to a
 * safetensors file, or with max_shard_bytes > 0 to a directory in Hugging
 * Face's sharded layout (runtime/io/safetensors_sharded.h): rank 0 writes, one
 * tensor in memory at a time, read through rt_param_read. *files
 * (may be NULL): the files rank 0 writes. Collective. */
hsr_status train_export(hsr_rt *rt, hsr_boot *boot, const char *path, uint64_t max_shard_bytes, const st_kv *meta,
                        int nmeta, int *files);
/* Initial values of every parameter from safetensors weights (F32, BF16 or
 * F16; a file, an index or a directory: st_set_open): names and shapes
 * must match the registered ones exactly. Collective (all ranks agree
 * before any parameter is set). */
hsr_status train_init_from(hsr_rt *rt, hsr_boot *boot, const char *path);
/* GFLOP/s of a host or CUDA GEMM of m x n x k, run for about `seconds`. */
hsr_status train_gemm_probe(hsr_device *dev, hsr_stream *s, size_t m, size_t n, size_t k, double seconds,
                            double *gflops);

#endif
