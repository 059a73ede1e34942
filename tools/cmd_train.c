/* hsr train: trains an example model (--model mlp | gpt, tools/train_models.c)
 * with the sharding engine. The flags, the loop and the report are shared;
 * what differs between the models sits behind train_model (train.h). */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hsr/boot.h"
#include "hsr/runtime.h"
#include "hsr/topology.h"
#include "train.h"
#include "train_report.h"

static void usage(void) {
  printf("usage: hsr train [options]      (multi-rank: hsr-run -n 4 --nodes 2 -- hsr train --model gpt)\n"
         "Trains an example model with the sharding engine on a replicate x shard mesh:\n"
         "  --model gpt   GPT-2 (pre-LayerNorm blocks, causal attention, GELU MLP, head tied to the token\n"
         "                embedding) on byte-level text: by default the repository's own docs and sources\n"
         "  --model mlp   residual MLP blocks on synthetic data from a fixed random teacher (the default;\n"
         "                the fast tests' model)\n\n"
         "model and data\n"
         "  --model M           mlp | gpt (default mlp)\n"
         "  --layers L          blocks (default 4)\n"
         "  --dim D             width (mlp: blocks D -> 4D -> D, default 64; gpt: default 128)\n"
         "  --heads H           gpt: attention heads, dividing D (default 4)\n"
         "  --seq T             gpt: tokens per window; windows are T + 1 bytes (default 128)\n"
         "  --data FILE         gpt: training text (default: the repository's text, built into\n"
         "                      build/hsr-corpus.txt); the last tenth is held out for validation\n"
         "  --classes C         mlp: classes of the teacher (default 8)\n"
         "  --steps N           training steps (default 200)\n"
         "  --batch B           GLOBAL batch (mlp: samples, default 64; gpt: windows, default 16), split over\n"
         "                      all R x S data-parallel ranks: every mesh trains on the same data; gpt window\n"
         "                      i of step s starts at a position hashed from (seed, s x B + i)\n"
         "  --micro-batches M   micro-batches per step per rank (default 1)\n"
         "  --seed N            weights and data seed (default 1)\n"
         "  --init FILE         start from the weights of a safetensors file (names and shapes must match;\n"
         "                      gpt: the configuration comes from its __metadata__), fresh optimizer state\n"
         "  --export FILE       write the trained weights by name to a safetensors file at the end\n"
         "                      (gpt: GPT-2's names and layouts, __metadata__ hsr.model, n_layer, n_head,\n"
         "                      n_embd, n_ctx, vocab_size)\n"
         "  --val-every N       gpt: validation loss every N steps and at the end (default steps / 5)\n"
         "  --val-windows N     gpt: held-out windows per validation (default 32, at most what the tail holds)\n"
         "mesh and strategy\n"
         "  --shard S|auto      shard group size S (auto: the topology's domain size; default auto)\n"
         "  --replicate R       replicas (default world / S)\n"
         "  --strategy X        ddp | zero1 | zero2 | fsdp (R = 1) | hybrid (R > 1)\n"
         "                      (default: hybrid when R > 1, else fsdp)\n"
         "  --reshard P         after forward: full | none | partial:K (K divides S; the backward\n"
         "                      all-gather then runs in the K-rank partial group) (default full)\n"
         "  --root-reshard      reshard the root unit (embedding/head) too (default: keep it, like FSDP2)\n"
         "  --prefetch D        units gathered ahead, forward and backward (0 = off; default 1)\n"
         "  --prefetch-step     also gather the first unit at the end of each step (default off)\n"
         "  --max-live N        cap on gathered units alive at once that prefetch respects (0 = none)\n"
         "  --sync X            micro-batch gradient sync: full | none | rs_only (default full)\n"
         "  --param-dtype T     f32 | bf16: compute/gather dtype (default f32; master and moments are f32)\n"
         "  --reduce-dtype T    f32 | bf16: gradient reduction dtype (default f32)\n"
         "  --device X          host | cuda | cuda:N (cuda: NCCL collectives, cuBLAS; default host)\n"
         "  --wrap W            block | linear: one unit per block (default), or one per linear layer\n"
         "                      (mlp 2, gpt 4 per block: the wrapping mistake the diagnostic catches)\n"
         "optimizer (AdamW on the local shard)\n"
         "  --lr X              peak learning rate (default 3e-3)\n"
         "  --warmup N          linear warm-up steps (mlp default 0, gpt steps / 20)\n"
         "  --lr-min X          cosine decay from --lr after the warm-up towards X at the last step\n"
         "                      (mlp default: = --lr, constant; gpt: --lr / 10)\n"
         "  --wd X              weight decay of the 2-D weights; biases and LayerNorms get none (default 0.01)\n"
         "  --clip X            global gradient-norm clip, 0 = off (default 1.0)\n"
         "output\n"
         "  --log FILE          one JSON line per step: step, loss (global mean), val_loss (when measured),\n"
         "                      grad_norm (before clipping), lr, step_ms, tokens_per_s, gflops, calls per\n"
         "                      group and collective (counted; after a validation they include its gathers)\n"
         "  --trace FILE        lifecycle trace of every rank (Chrome trace JSON; hsr trace summarize FILE)\n"
         "  --json FILE         run summary as JSON: loss, val loss, tokens/s, GFLOP/s beside a GEMM probe,\n"
         "                      time per step by kind, memory ledger (measured and predicted), engine timing,\n"
         "                      wrap diagnostic\n"
         "  --no-progress       no progress lines\n"
         "  -h, --help          this text\n"
         "Exit codes: 0 ok, 1 failure, 2 bad usage.\n");
}

enum { O_MODEL = 256, O_HEADS, O_SEQ, O_DATA, O_INIT, O_EXPORT, O_VAL_EVERY, O_VAL_WINDOWS, O_WARMUP, O_LR_MIN };

static const struct option opts[] = {{"model", required_argument, 0, O_MODEL},
                                     {"layers", required_argument, 0, 'L'},
                                     {"dim", required_argument, 0, 'd'},
                                     {"heads", required_argument, 0, O_HEADS},
                                     {"seq", required_argument, 0, O_SEQ},
                                     {"data", required_argument, 0, O_DATA},
                                     {"init", required_argument, 0, O_INIT},
                                     {"export", required_argument, 0, O_EXPORT},
                                     {"val-every", required_argument, 0, O_VAL_EVERY},
                                     {"val-windows", required_argument, 0, O_VAL_WINDOWS},
                                     {"warmup", required_argument, 0, O_WARMUP},
                                     {"lr-min", required_argument, 0, O_LR_MIN},
                                     {"classes", required_argument, 0, 'C'},
                                     {"steps", required_argument, 0, 'n'},
                                     {"batch", required_argument, 0, 'b'},
                                     {"micro-batches", required_argument, 0, 'm'},
                                     {"seed", required_argument, 0, 's'},
                                     {"shard", required_argument, 0, 'S'},
                                     {"replicate", required_argument, 0, 'R'},
                                     {"strategy", required_argument, 0, 'x'},
                                     {"reshard", required_argument, 0, 'r'},
                                     {"root-reshard", no_argument, 0, 'o'},
                                     {"prefetch", required_argument, 0, 'p'},
                                     {"max-live", required_argument, 0, 'M'},
                                     {"sync", required_argument, 0, 'y'},
                                     {"param-dtype", required_argument, 0, 'P'},
                                     {"reduce-dtype", required_argument, 0, 'D'},
                                     {"lr", required_argument, 0, 'l'},
                                     {"wd", required_argument, 0, 'w'},
                                     {"clip", required_argument, 0, 'c'},
                                     {"log", required_argument, 0, 'g'},
                                     {"no-progress", no_argument, 0, 'q'},
                                     {"device", required_argument, 0, 'V'},
                                     {"trace", required_argument, 0, 'T'},
                                     {"json", required_argument, 0, 'J'},
                                     {"wrap", required_argument, 0, 'W'},
                                     {"prefetch-step", no_argument, 0, 'F'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};

/* One flag; *st carries a bad value. Returns 0, or an exit code. */
static int parse_one(int c, train_args *a, hsr_status *st) {
  long v = 0;
  double d = 0;
#define LONG(what, lo, hi) \
  if ((*st = hsr_parse_long(what, optarg, lo, hi, &v)) != HSR_OK) return 0
#define DBL(what, lo, hi) \
  if ((*st = hsr_parse_double(what, optarg, lo, hi, &d)) != HSR_OK) return 0
  switch (c) {
  case O_MODEL:
    if (!strcmp(optarg, "mlp") || !strcmp(optarg, "gpt"))
      a->model = !strcmp(optarg, "mlp") ? &train_model_mlp : &train_model_gpt;
    else
      *st = hsr_error(HSR_ERR_INVALID, "--model '%s' (valid: mlp, gpt)", optarg);
    break;
  case 'L':
    LONG("--layers", 0, 1000);
    a->layers = (int)v;
    break;
  case 'd':
    LONG("--dim", 1, 65536);
    a->dim = (int)v;
    break;
  case O_HEADS:
    LONG("--heads", 1, 4096);
    a->heads = (int)v;
    break;
  case O_SEQ:
    LONG("--seq", 1, 1 << 20);
    a->seq = (int)v;
    break;
  case O_DATA: a->data = optarg; break;
  case O_INIT: a->init = optarg; break;
  case O_EXPORT: a->export_path = optarg; break;
  case O_VAL_EVERY:
    LONG("--val-every", 1, 100000000);
    a->val_every = (int)v;
    break;
  case O_VAL_WINDOWS:
    LONG("--val-windows", 1, 1 << 24);
    a->val_windows = (int)v;
    break;
  case O_WARMUP:
    LONG("--warmup", 0, 100000000);
    a->warmup = (int)v;
    break;
  case O_LR_MIN:
    DBL("--lr-min", 0, 10);
    a->lr_min = (float)d;
    break;
  case 'C':
    LONG("--classes", 2, 65536);
    a->classes = (int)v;
    break;
  case 'n':
    LONG("--steps", 1, 100000000);
    a->steps = (int)v;
    break;
  case 'b':
    LONG("--batch", 1, 1 << 24);
    a->batch = (int)v;
    break;
  case 'm':
    LONG("--micro-batches", 1, 1 << 20);
    a->cfg.micro_batches = (int)v;
    break;
  case 's':
    LONG("--seed", 0, 0x7fffffffL);
    a->seed = (uint64_t)v;
    break;
  case 'S':
    if (!strcmp(optarg, "auto")) {
      a->cfg.shard = 0;
      break;
    }
    LONG("--shard", 1, 1 << 20);
    a->cfg.shard = (int)v;
    break;
  case 'R':
    LONG("--replicate", 1, 1 << 20);
    a->cfg.replicate = (int)v;
    break;
  case 'x':
    *st = hsr_rt_parse_strategy(optarg, &a->cfg.strategy);
    a->strategy_given = 1;
    break;
  case 'r': *st = hsr_rt_parse_reshard(optarg, &a->cfg.reshard, &a->cfg.partial_k); break;
  case 'o': a->cfg.root_reshard = 1; break;
  case 'p':
    LONG("--prefetch", 0, 1 << 20);
    a->cfg.prefetch = (int)v;
    break;
  case 'M':
    LONG("--max-live", 0, 1 << 20);
    a->cfg.max_live = (int)v;
    break;
  case 'y': *st = hsr_rt_parse_sync(optarg, &a->cfg.sync); break;
  case 'P':
  case 'D': {
    hsr_dtype t = HSR_F32;
    *st = hsr_dtype_parse(optarg, &t);
    if (*st == HSR_OK && t != HSR_F32 && t != HSR_BF16)
      *st = hsr_error(HSR_ERR_INVALID, "dtype '%s' is not supported here (valid: f32, bf16)", optarg);
    *(c == 'P' ? &a->cfg.param_dtype : &a->cfg.reduce_dtype) = t;
    break;
  }
  case 'l':
    DBL("--lr", 0, 10);
    a->lr = (float)d;
    break;
  case 'w':
    DBL("--wd", 0, 10);
    a->wd = (float)d;
    break;
  case 'c':
    DBL("--clip", 0, 1e30);
    a->cfg.clip = d;
    break;
  case 'g': a->log = optarg; break;
  case 'q': a->progress = 0; break;
  case 'V': *st = hsr_rt_parse_device(optarg, &a->cfg.device, &a->cfg.device_ordinal); break;
  case 'T': a->trace = optarg; break;
  case 'F': a->cfg.prefetch_step = 1; break;
  case 'J': a->json = optarg; break;
  case 'W':
    if (!strcmp(optarg, "block") || !strcmp(optarg, "linear"))
      a->wrap_linear = !strcmp(optarg, "linear");
    else
      *st = hsr_error(HSR_ERR_INVALID, "--wrap '%s' (valid: block, linear)", optarg);
    break;
  default: return hsr_cli_usage_error("train", "unknown option or missing value '%s'", optarg ? optarg : "?");
  }
#undef LONG
#undef DBL
  return 0;
}

/* Checks that need no launch: said before anything starts. */
static int check_args(train_args *a) {
  if (a->cfg.device == HSR_DEVICE_CUDA && hsr_device_cuda_count() == 0) {
    hsr_device *d = NULL;
    if (hsr_device_open(HSR_DEVICE_CUDA, 0, &d) == HSR_OK) hsr_device_close(d);
    return hsr_cli_usage_error("train", "--device cuda: %s (use --device host)", hsr_last_error());
  }
  if (a->cfg.reshard == HSR_RT_RESHARD_PARTIAL && a->cfg.shard > 0 && a->cfg.shard % a->cfg.partial_k) {
    char dv[256] = "";
    size_t o = 0;
    for (int k = 1; k <= a->cfg.shard; k++)
      if (a->cfg.shard % k == 0) o += (size_t)snprintf(dv + o, sizeof dv - o, "%s%d", o ? ", " : "", k);
    return hsr_cli_usage_error("train", "--reshard partial:%d: K must divide the shard size %d (valid K: %s)",
                               a->cfg.partial_k, a->cfg.shard, dv);
  }
  if (a->model->finish_args(a) != HSR_OK) return hsr_cli_usage_error("train", "%s", hsr_last_error());
  if (a->batch % a->cfg.micro_batches)
    return hsr_cli_usage_error("train", "--batch %d is not a multiple of --micro-batches %d", a->batch,
                               a->cfg.micro_batches);
  if (a->lr_min > a->lr)
    return hsr_cli_usage_error("train", "--lr-min %g exceeds --lr %g (the schedule decays)", a->lr_min, a->lr);
  if (a->warmup > a->steps) return hsr_cli_usage_error("train", "--warmup %d exceeds --steps %d", a->warmup, a->steps);
  hsr_rt_lr_schedule sched = train_schedule(a);
  if (a->lr > 0 && hsr_rt_lr_check(&sched) != HSR_OK) return hsr_cli_usage_error("train", "%s", hsr_last_error());
  return 0;
}

static int parse(int argc, char **argv, train_args *a) {
  memset(a, 0, sizeof *a);
  a->model = &train_model_mlp;
  a->layers = a->dim = a->heads = a->classes = a->seq = a->batch = a->warmup = a->val_every = a->val_windows = -1;
  a->lr = a->lr_min = -1;
  a->steps = 200;
  a->wd = 0.01f;
  a->seed = 1;
  a->progress = 1;
  hsr_rt_config_default(&a->cfg);
  a->cfg.clip = 1.0;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h') {
      usage();
      return -1;
    }
    if (c == '?') return hsr_cli_usage_error("train", "unknown option or missing value '%s'", argv[optind - 1]);
    hsr_status st = HSR_OK;
    int rc = parse_one(c, a, &st);
    if (rc) return rc;
    if (st != HSR_OK) return hsr_cli_usage_error("train", "%s", hsr_last_error());
  }
  if (optind < argc) return hsr_cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
  int rc = check_args(a);
  if (rc) return rc;
  a->cfg.num_groups = 2;
  a->cfg.groups[0] = (hsr_rt_opt_group){a->lr, 0.9f, 0.999f, 1e-8f, a->wd};
  a->cfg.groups[1] = (hsr_rt_opt_group){a->lr, 0.9f, 0.999f, 1e-8f, 0.0f};
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the model's identity and the run */
  const long ids[] = {a->model == &train_model_gpt,
                      a->layers,
                      a->dim,
                      a->heads,
                      a->classes,
                      a->seq,
                      a->batch,
                      (long)a->seed,
                      a->steps,
                      a->wrap_linear,
                      a->warmup,
                      (long)(a->lr * 1e9),
                      (long)(a->lr_min * 1e9)};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) h = (h ^ (uint64_t)ids[i]) * 1099511628211ull;
  a->cfg.user_hash = h;
  return 0;
}

/* rank 0 opens a file; every rank learns whether it could, so none waits */
static hsr_status open_out(train_run *r, const char *path, const char *flag, FILE **f) {
  if (!path) return HSR_OK;
  hsr_status st = HSR_OK;
  if (r->rank == 0 && !(*f = fopen(path, "w")))
    st = hsr_error(HSR_ERR_IO, "cannot open %s file '%s' for writing", flag, path);
  return train_agree(r->boot, st);
}

static uint64_t sum_op(const hsr_rt_step_info *in, hsr_op op) {
  uint64_t n = 0;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) n += in->calls[g][op];
  return n;
}

static void print_header(const train_run *r) {
  const train_args *a = r->a;
  char rs[32];
  if (a->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    snprintf(rs, sizeof rs, "partial:%d", a->cfg.partial_k);
  else
    snprintf(rs, sizeof rs, "%s", a->cfg.reshard == HSR_RT_RESHARD_FULL ? "full" : "none");
  int N = hsr_rt_dp_size(r->rt);
  printf("hsr train: %d ranks, %d node(s), %s, mesh %d x %d (replicate x shard), %s, reshard %s, prefetch %d, sync %s, "
         "%s/%s\n",
         r->world, hsr_boot_num_nodes(r->boot), a->cfg.device == HSR_DEVICE_CUDA ? "CUDA (NCCL)" : "host",
         hsr_rt_replicate(r->rt), hsr_rt_shard(r->rt), hsr_rt_strategy_name(a->cfg.strategy), rs, a->cfg.prefetch,
         hsr_rt_sync_name(a->cfg.sync), hsr_dtype_name(a->cfg.param_dtype), hsr_dtype_name(a->cfg.reduce_dtype));
  a->model->describe(r, stdout);
  printf("global batch %d (%d per rank, %d micro-batch(es)), %d steps, lr %g", a->batch, a->batch / N,
         a->cfg.micro_batches, a->steps, a->lr);
  if (a->warmup || a->lr_min != a->lr) printf(" (warm-up %d, cosine to %g)", a->warmup, a->lr_min);
  printf("%s%s\n", a->init ? ", from " : "", a->init ? a->init : "");
  if (hsr_rt_partial(r->rt) > 0) { /* say which ranks the backward gathers stay in, and where they live */
    int K = hsr_rt_partial(r->rt), *pg = calloc((size_t)K, sizeof *pg);
    if (pg && hsr_mesh_partial_group(hsr_rt_get_mesh(r->rt), 0, pg) == HSR_OK) {
      printf("partial group of rank 0 (K = %d): ranks", K);
      for (int i = 0; i < K; i++) printf(" %d", pg[i]);
      int n0 = hsr_boot_node_of(r->boot, pg[0]), same = 1;
      for (int i = 1; i < K; i++) same &= hsr_boot_node_of(r->boot, pg[i]) == n0;
      printf(same ? " (all on node %d: backward all-gathers stay inside the node)\n"
                  : " (spanning nodes: the shard group's ranks on one node are fewer than K=%d)\n",
             same ? n0 : K);
    }
    free(pg);
  }
  fflush(stdout);
}

typedef struct loop_stats {
  double first, last, val, total_ms, meas_ms, meas_ag, model_s[3];
  double val_engine_s, val_wait_s; /* engine time of validation passes: not training time */
  int meas, meas_ag_n, val_n;
  double val_first;
} loop_stats;

static void log_line(FILE *f, const hsr_rt_step_info *in, double loss, double val, double ms, double tps,
                     double gflops) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)in->step);
  cJSON_AddNumberToObject(o, "loss", loss);
  if (val == val) cJSON_AddNumberToObject(o, "val_loss", val);
  cJSON_AddNumberToObject(o, "grad_norm", in->grad_norm);
  char lr[32]; /* the float the optimizer used, without float-to-double noise */
  snprintf(lr, sizeof lr, "%.7g", in->lr);
  cJSON_AddNumberToObject(o, "lr", strtod(lr, NULL));
  cJSON_AddNumberToObject(o, "step_ms", ms);
  cJSON_AddNumberToObject(o, "tokens_per_s", tps);
  cJSON_AddNumberToObject(o, "gflops", gflops);
  cJSON *calls = cJSON_AddObjectToObject(o, "calls");
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
    cJSON *grp = cJSON_AddObjectToObject(calls, hsr_rt_group_name((hsr_rt_group)g));
    for (int op = 0; op < HSR_OP_COUNT; op++)
      cJSON_AddNumberToObject(grp, hsr_op_name((hsr_op)op), (double)in->calls[g][op]);
  }
  char *s = cJSON_PrintUnformatted(o);
  if (s) fprintf(f, "%s\n", s);
  free(s);
  cJSON_Delete(o);
}

static void progress(const train_run *r, int s, double loss, double val, const hsr_rt_step_info *info, double ms,
                     double tps, double gflops) {
  const train_args *a = r->a;
  int width = 24, done = (int)((long)(s + 1) * width / a->steps), every = a->steps >= 10 ? a->steps / 10 : 1;
  if ((s + 1) % every && s + 1 != a->steps) return; /* a line per tenth: under mpirun stdout is often a pty */
  char bar[32], vs[32] = "";
  for (int i = 0; i < width; i++) bar[i] = i < done ? '#' : '.';
  bar[width] = 0;
  if (val == val) snprintf(vs, sizeof vs, " val %.4f", val);
  printf("[%s] step %d/%d loss %.4f%s grad %.3f lr %.2e %.1f ms %.0f tok/s %.2f GFLOP/s  all-gather %llu "
         "reduce-scatter %llu all-reduce %llu\n",
         bar, s + 1, a->steps, loss, vs, info->grad_norm, info->lr, ms, tps, gflops,
         (unsigned long long)sum_op(info, HSR_OP_ALLGATHER), (unsigned long long)sum_op(info, HSR_OP_REDUCE_SCATTER),
         (unsigned long long)sum_op(info, HSR_OP_ALLREDUCE));
  fflush(stdout);
}

static hsr_status train_loop(train_run *r, FILE *logf, loop_stats *ls) {
  train_args *a = r->a;
  const train_model *m = a->model;
  double tokens = m->tokens_per_step(r), fpt = m->flops_per_token(r);
  ls->val = ls->val_first = NAN;
  int after_val = 0; /* a validation pass's gathers count in the next step's calls */
  hsr_rt_lr_schedule sched = train_schedule(a);
  for (int s = 0; s < a->steps; s++) {
    double lr = hsr_rt_lr_at(&sched, s + 1);
    for (int g = 0; g < a->cfg.num_groups; g++) HSR_CHECK(hsr_rt_set_lr(r->rt, g, lr));
    double loss, val = NAN, t0 = hsr_clock_s();
    hsr_rt_step_info info;
    HSR_CHECK(m->step(r, s, &loss, &info));
    double ms = (hsr_clock_s() - t0) * 1e3, tps = tokens / (ms * 1e-3), gflops = fpt * tps * 1e-9;
    ls->total_ms += ms;
    if (s == 0 && a->steps > 1) { /* the first step records the execution order: measure from the second */
      double drop[3];
      hsr_rt_reset_timing(r->rt);
      if (m->profile) m->profile(r, drop, 1);
    } else {
      ls->meas++;
      ls->meas_ms += ms;
      if (!after_val) ls->meas_ag += (double)sum_op(&info, HSR_OP_ALLGATHER), ls->meas_ag_n++;
    }
    after_val = 0;
    if (s == 0) ls->first = loss;
    ls->last = loss;
    if (m->val && ((s + 1) % a->val_every == 0 || s + 1 == a->steps)) {
      double p[3];
      hsr_rt_timing t0v, t1v;
      if (m->profile) m->profile(r, p, 0); /* validation is not training time */
      hsr_rt_get_timing(r->rt, &t0v);
      HSR_CHECK(m->val(r, &val));
      hsr_rt_get_timing(r->rt, &t1v);
      if (s > 0 || a->steps == 1) {
        ls->val_engine_s += t1v.engine_s - t0v.engine_s;
        ls->val_wait_s += t1v.wait_s - t0v.wait_s;
      }
      if (m->profile) {
        double q[3];
        m->profile(r, q, 1);
        for (int i = 0; i < 3; i++) ls->model_s[i] += p[i];
      }
      ls->val = val;
      if (ls->val_n++ == 0) ls->val_first = val;
      after_val = 1;
    }
    if (r->rank != 0) continue;
    if (logf) log_line(logf, &info, loss, val, ms, tps, gflops);
    if (a->progress) progress(r, s, loss, ls->val, &info, ms, tps, gflops);
  }
  if (m->profile) {
    double p[3];
    m->profile(r, p, 1);
    for (int i = 0; i < 3; i++) ls->model_s[i] += p[i];
  }
  return HSR_OK;
}

/* Throughput beside a GEMM probe run on every rank at once; time per step by kind. */
static hsr_status throughput(train_run *r, const loop_stats *ls, cJSON *extra) {
  const train_model *m = r->a->model;
  size_t pm, pn, pk;
  m->probe_shape(r, &pm, &pn, &pk);
  double g = 0, *all = calloc((size_t)r->world, sizeof *all), mean = 0;
  if (!all) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = hsr_boot_barrier(r->boot);
  if (st == HSR_OK) st = train_gemm_probe(hsr_rt_device(r->rt), hsr_rt_compute_stream(r->rt), pm, pn, pk, 0.3, &g);
  st = train_agree(r->boot, st);
  if (st == HSR_OK) st = hsr_boot_allgather(r->boot, &g, sizeof g, all);
  for (int i = 0; i < r->world; i++) mean += all[i] / r->world;
  free(all);
  HSR_CHECK(st);
  double step_s = ls->meas ? ls->meas_ms / ls->meas * 1e-3 : ls->total_ms * 1e-3 / r->a->steps;
  double tps = m->tokens_per_step(r) / step_s, gf = m->flops_per_token(r) * tps * 1e-9, per = gf / r->world;
  hsr_rt_timing tm;
  hsr_rt_get_timing(r->rt, &tm);
  double steps = tm.steps ? (double)tm.steps : 1, eng = (tm.engine_s - ls->val_engine_s) / steps * 1e3;
  double model_ms[3];
  for (int i = 0; i < 3; i++) model_ms[i] = m->profile ? ls->model_s[i] / steps * 1e3 : 0;
  if (r->rank == 0) {
    printf("throughput: %.0f tokens/s, %.2f GFLOP/s (%.2f per rank) = %.0f%% of a %zux%zux%zu GEMM at %.2f GFLOP/s "
           "per rank (all ranks at once, one thread each)\n",
           tps, gf, per, mean > 0 ? 100.0 * per / mean : 0, pm, pn, pk, mean);
    if (m->profile)
      printf("time per step (rank 0, %.2f ms): GEMM %.2f, attention %.2f, other kernels %.2f, engine calls %.2f "
             "(waits %.2f), rest %.2f ms\n",
             step_s * 1e3, model_ms[0], model_ms[1], model_ms[2], eng, (tm.wait_s - ls->val_wait_s) / steps * 1e3,
             step_s * 1e3 - model_ms[0] - model_ms[1] - model_ms[2] - eng);
  }
  cJSON_AddNumberToObject(extra, "tokens_per_s", tps);
  cJSON_AddNumberToObject(extra, "gflops", gf);
  cJSON_AddNumberToObject(extra, "gflops_per_rank", per);
  cJSON *p = cJSON_AddObjectToObject(extra, "gemm_probe");
  cJSON_AddNumberToObject(p, "m", (double)pm), cJSON_AddNumberToObject(p, "n", (double)pn);
  cJSON_AddNumberToObject(p, "k", (double)pk), cJSON_AddNumberToObject(p, "gflops_per_rank", mean);
  if (m->profile) {
    cJSON *t = cJSON_AddObjectToObject(extra, "model_time_per_step_ms");
    cJSON_AddNumberToObject(t, "gemm", model_ms[0]);
    cJSON_AddNumberToObject(t, "attention", model_ms[1]);
    cJSON_AddNumberToObject(t, "other_kernels", model_ms[2]);
  }
  return HSR_OK;
}

static hsr_status finish(train_run *r, const loop_stats *ls, FILE *jsonf) {
  train_args *a = r->a;
  const train_model *m = a->model;
  if (r->rank == 0) {
    printf("loss %.4f -> %.4f over %d steps, %.2f ms/step mean", ls->first, ls->last, a->steps,
           ls->total_ms / a->steps);
    if (ls->val_n) printf("; validation loss %.4f -> %.4f", ls->val_first, ls->val);
    printf("\n");
  }
  cJSON *extra = cJSON_CreateObject();
  cJSON_AddStringToObject(extra, "model", m->name);
  cJSON_AddNumberToObject(extra, "loss_first", ls->first);
  cJSON_AddNumberToObject(extra, "loss_last", ls->last);
  if (ls->val_n) cJSON_AddNumberToObject(extra, "val_loss", ls->val);
  if (m->json) m->json(r, extra);
  hsr_status st = throughput(r, ls, extra);
  hsr_prog_call *prog = NULL;
  int nprog = 0;
  if (st == HSR_OK) st = m->program(r, &prog, &nprog);
  if (st == HSR_OK) {
    train_measured tm = {ls->meas,
                         ls->meas ? ls->meas_ms / ls->meas : 0,
                         ls->meas_ag_n ? ls->meas_ag / ls->meas_ag_n : 0,
                         m->blocks(r),
                         prog,
                         nprog,
                         m->activation_bytes(r),
                         a->wrap_linear};
    int warned = 0;
    st = train_report(r->rt, &a->cfg, &tm, extra, r->rank == 0 ? jsonf : NULL, r->rank == 0 ? stdout : NULL, &warned);
    extra = NULL; /* owned by the report now */
  }
  free(prog);
  cJSON_Delete(extra);
  if (st == HSR_OK && a->export_path) {
    hsr_st_kv kv[8];
    char buf[8][64];
    int n = m->export_meta(r, kv, buf);
    if ((st = train_export(r->rt, r->boot, a->export_path, kv, n)) == HSR_OK && r->rank == 0)
      printf("exported: %s (safetensors, %d tensors)\n", a->export_path,
             hsr_rt_layout_num_params(hsr_rt_get_layout(r->rt)));
  }
  if (st == HSR_OK && a->trace) {
    if ((st = hsr_rt_trace_write(r->rt, a->trace)) == HSR_OK && r->rank == 0)
      printf("trace: %s (hsr trace summarize %s)\n", a->trace, a->trace);
  }
  return st;
}

static hsr_status run(train_run *r) {
  train_args *a = r->a;
  hsr_topo *topo = NULL;
  hsr_cluster *cl = NULL;
  FILE *logf = NULL, *jsonf = NULL;
  hsr_status st = hsr_topo_discover(NULL, &topo);
  if (st == HSR_OK) st = hsr_cluster_gather(r->boot, topo, &cl);
  if (st == HSR_OK && !a->strategy_given) { /* hybrid when the mesh has replicas, else fsdp */
    int S = a->cfg.shard ? a->cfg.shard : hsr_cluster_domain_size(cl);
    if (S < 1 || S > r->world || r->world % S) S = r->world;
    int R = a->cfg.replicate ? a->cfg.replicate : r->world / S;
    a->cfg.strategy = R > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
    if (a->cfg.strategy == HSR_RT_HYBRID && !a->cfg.shard) a->cfg.shard = S;
  }
  if (st == HSR_OK) st = hsr_rt_create(r->boot, NULL, cl, &a->cfg, &r->rt);
  if (st == HSR_OK) st = a->model->setup(r);
  int N = r->rt ? hsr_rt_dp_size(r->rt) : 1;
  if (st == HSR_OK && a->batch % (N * a->cfg.micro_batches))
    st = hsr_error(HSR_ERR_INVALID, "--batch %d must be a multiple of data-parallel ranks x micro-batches = %d x %d",
                   a->batch, N, a->cfg.micro_batches);
  if (st == HSR_OK) st = open_out(r, a->log, "--log", &logf);
  if (st == HSR_OK) st = open_out(r, a->json, "--json", &jsonf);
  if (st == HSR_OK && a->trace) st = hsr_rt_trace_enable(r->rt, 1);
  if (st == HSR_OK && r->rank == 0) print_header(r);
  loop_stats ls = {0};
  if (st == HSR_OK) st = train_loop(r, logf, &ls);
  if (st == HSR_OK) st = finish(r, &ls, jsonf);
  if (logf) fclose(logf);
  if (jsonf) fclose(jsonf);
  a->model->free(r);
  hsr_status dst = hsr_rt_destroy(r->rt);
  if (st == HSR_OK) st = dst;
  hsr_cluster_free(cl);
  hsr_topo_free(topo);
  return st;
}

int hsr_cmd_train(int argc, char **argv) {
  train_args a;
  int pr = parse(argc, argv, &a);
  if (pr < 0) return HSR_EXIT_OK;
  if (pr > 0) return pr;
  openblas_set_num_threads(1); /* one BLAS thread per rank: ranks share the cores */
  train_run r = {&a, NULL, NULL, 0, 1, NULL};
  hsr_status st = hsr_boot_init(&r.boot);
  if (st != HSR_OK) return hsr_cli_fail("train", st);
  r.rank = hsr_boot_rank(r.boot), r.world = hsr_boot_size(r.boot);
  st = run(&r);
  if (st != HSR_OK) {
    int code = hsr_cli_fail("train", st);
    hsr_boot_finalize(r.boot);
    return code;
  }
  st = hsr_boot_finalize(r.boot);
  return st == HSR_OK ? HSR_EXIT_OK : hsr_cli_fail("train", st);
}
