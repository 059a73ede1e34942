/* hsr train: trains the example MLP (examples/mlp.h) with the sharding engine. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hsr/boot.h"
#include "hsr/runtime.h"
#include "hsr/topology.h"
#include "hsr/tune_ledger.h"
#include "mlp.h"
#include "train_ckpt.h"
#include "train_report.h"

typedef struct train_args {
  mlp_cfg model;
  int steps, batch;
  hsr_rt_config cfg;
  int strategy_given;
  float lr, wd;
  hsr_rt_lr_schedule sched; /* --warmup / --lr-min: warm-up + cosine over --steps (sched_on) */
  int sched_on;
  train_ckpt ck;
  const char *log, *trace, *json;
  int progress; /* 1 bar, 0 off */
} train_args;

static void usage(void) {
  printf("usage: hsr train [options]      (multi-rank: hsr-run -n 4 --nodes 2 -- hsr train)\n"
         "Trains the example model (residual MLP blocks, softmax cross-entropy head, synthetic data from a\n"
         "fixed random teacher) with the sharding engine on a replicate x shard mesh.\n\n"
         "model and data\n"
         "  --layers L          MLP blocks (default 4)\n"
         "  --dim D             width; blocks are D -> 4D -> D (default 64)\n"
         "  --classes C         classes of the teacher (default 8)\n"
         "  --steps N           training steps (default 200)\n"
         "  --batch B           GLOBAL batch, split over all R x S data-parallel ranks, so every mesh\n"
         "                      trains on the same data (default 64)\n"
         "  --micro-batches M   micro-batches per step per rank (default 1)\n"
         "  --seed N            model, data and teacher seed (default 1)\n"
         "mesh and strategy\n"
         "  --shard S|auto      shard group size S (auto: the topology's domain size; default auto)\n"
         "  --replicate R       replicas (default world / S)\n"
         "  --strategy X        ddp | zero1 | zero2 | fsdp (R = 1) | hybrid (R > 1)\n"
         "                      (default: hybrid when R > 1, else fsdp)\n"
         "  --reshard P         after forward: full | none | partial:K (K divides S; the backward\n"
         "                      all-gather then runs in the K-rank partial group) (default full)\n"
         "  --root-reshard      reshard the root unit (embedding/head) too (default: keep it, like FSDP2)\n"
         "  --prefetch D        units gathered ahead, forward and backward (0 = off; default 1)\n"
         "  --prefetch-step     also gather the first unit at the end of each step (hides the next\n"
         "                      step's first gather behind data loading; default off)\n"
         "  --max-live N        cap on gathered units alive at once that prefetch respects (0 = none)\n"
         "  --sync X            micro-batch gradient sync: full | none | rs_only (default full)\n"
         "  --param-dtype T     f32 | bf16: compute/gather dtype (default f32; master and moments are f32)\n"
         "  --reduce-dtype T    f32 | bf16: gradient reduction dtype (default f32)\n"
         "  --device X          host | cuda | cuda:N: where parameters, gradients and optimizer state live\n"
         "                      and the model runs (cuda: NCCL collectives, cuBLAS; the GPU is local rank\n"
         "                      %% visible GPUs) (default host)\n"
         "optimizer (AdamW on the local shard)\n"
         "  --lr X              learning rate (default 3e-3)\n"
         "  --warmup N          linear warm-up over the first N steps, then cosine decay to --lr-min at\n"
         "                      the last step (default 0: no warm-up)\n"
         "  --lr-min X          the learning rate the cosine decay ends at (default: --lr, no decay)\n"
         "  --wd X              weight decay of the weights; biases get none (default 0.01)\n"
         "  --clip X            global gradient-norm clip, 0 = off (default 1.0)\n"
         "  --wrap W            block | linear: one unit per MLP block (default), or one per linear\n"
         "                      layer (2 per block: the wrapping mistake the diagnostic catches)\n"
         "output\n"
         "  --log FILE          one JSON line per step: step, loss (global mean), grad_norm (before\n"
         "                      clipping), lr, step_ms, calls per group and collective (counted)\n"
         "  --trace FILE        lifecycle trace of every rank: Chrome trace JSON (Perfetto,\n"
         "                      chrome://tracing); summarize with 'hsr trace summarize FILE'\n"
         "  --json FILE         run summary as JSON: memory ledger (measured: held and in use;\n"
         "                      predicted), engine timing and bookkeeping overhead, wrap diagnostic\n"
         "  --no-progress       no progress bar\n");
  train_ckpt_usage(stdout);
  printf("  -h, --help          this text\n"
         "Exit codes: 0 ok, 1 failure, 2 bad usage.\n");
}

static int parse(int argc, char **argv, train_args *a) {
  static const struct option opts[] = {{"layers", required_argument, 0, 'L'},
                                       {"dim", required_argument, 0, 'd'},
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
                                       {"warmup", required_argument, 0, 0x100},
                                       {"lr-min", required_argument, 0, 0x101},
                                       {"ckpt", required_argument, 0, TRAIN_OPT_CKPT},
                                       {"save-every", required_argument, 0, TRAIN_OPT_SAVE_EVERY},
                                       {"keep", required_argument, 0, TRAIN_OPT_KEEP},
                                       {"resume", required_argument, 0, TRAIN_OPT_RESUME},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  a->model = (mlp_cfg){.layers = 4, .dim = 64, .in_dim = 64, .classes = 8, .seed = 1};
  a->steps = 200;
  a->batch = 64;
  a->lr = 3e-3f;
  a->wd = 0.01f;
  a->progress = 1;
  double lr_min = -1;
  hsr_rt_config_default(&a->cfg);
  a->cfg.clip = 1.0;
  int c;
  long v;
  double d;
  optind = 1;
  opterr = 0;
#define LONG(what, lo, hi)                                         \
  do {                                                             \
    if (hsr_parse_long(what, optarg, lo, hi, &v) != HSR_OK)        \
      return hsr_cli_usage_error("train", "%s", hsr_last_error()); \
  } while (0)
#define DBL(what, lo, hi)                                          \
  do {                                                             \
    if (hsr_parse_double(what, optarg, lo, hi, &d) != HSR_OK)      \
      return hsr_cli_usage_error("train", "%s", hsr_last_error()); \
  } while (0)
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h': usage(); return -1;
    case 'L':
      LONG("--layers", 0, 1000);
      a->model.layers = (int)v;
      break;
    case 'd':
      LONG("--dim", 1, 65536);
      a->model.dim = a->model.in_dim = (int)v;
      break;
    case 'C':
      LONG("--classes", 2, 65536);
      a->model.classes = (int)v;
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
      a->model.seed = (uint64_t)v;
      break;
    case 'S':
      if (!strcmp(optarg, "auto"))
        a->cfg.shard = 0;
      else {
        LONG("--shard", 1, 1 << 20);
        a->cfg.shard = (int)v;
      }
      break;
    case 'R':
      LONG("--replicate", 1, 1 << 20);
      a->cfg.replicate = (int)v;
      break;
    case 'x':
      st = hsr_rt_parse_strategy(optarg, &a->cfg.strategy);
      a->strategy_given = 1;
      break;
    case 'r': st = hsr_rt_parse_reshard(optarg, &a->cfg.reshard, &a->cfg.partial_k); break;
    case 'o': a->cfg.root_reshard = 1; break;
    case 'p':
      LONG("--prefetch", 0, 1 << 20);
      a->cfg.prefetch = (int)v;
      break;
    case 'M':
      LONG("--max-live", 0, 1 << 20);
      a->cfg.max_live = (int)v;
      break;
    case 'y': st = hsr_rt_parse_sync(optarg, &a->cfg.sync); break;
    case 'P':
    case 'D': {
      hsr_dtype t;
      st = hsr_dtype_parse(optarg, &t);
      if (st == HSR_OK && t != HSR_F32 && t != HSR_BF16)
        st = hsr_error(HSR_ERR_INVALID, "dtype '%s' is not supported here (valid: f32, bf16)", optarg);
      if (c == 'P')
        a->cfg.param_dtype = t;
      else
        a->cfg.reduce_dtype = t;
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
    case 'V': st = hsr_rt_parse_device(optarg, &a->cfg.device, &a->cfg.device_ordinal); break;
    case 'T': a->trace = optarg; break;
    case 'F': a->cfg.prefetch_step = 1; break;
    case 'J': a->json = optarg; break;
    case 0x100:
      LONG("--warmup", 0, 100000000);
      a->sched.warmup = v;
      a->sched_on = 1;
      break;
    case 0x101:
      DBL("--lr-min", 0, 10);
      lr_min = d;
      a->sched_on = 1;
      break;
    case 'W':
      if (!strcmp(optarg, "block"))
        a->model.wrap_linear = 0;
      else if (!strcmp(optarg, "linear"))
        a->model.wrap_linear = 1;
      else
        st = hsr_error(HSR_ERR_INVALID, "--wrap '%s' (valid: block, linear)", optarg);
      break;
    default: {
      int k = train_ckpt_option(&a->ck, c, optarg);
      if (k < 0) return -k;
      if (k == 0) return hsr_cli_usage_error("train", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    }
    if (st != HSR_OK) return hsr_cli_usage_error("train", "%s", hsr_last_error());
  }
  if (optind < argc) return hsr_cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
  if (train_ckpt_check(&a->ck)) return HSR_EXIT_USAGE;
  if (a->cfg.device == HSR_DEVICE_CUDA && hsr_device_cuda_count() == 0) { /* the reason, before launching anything */
    hsr_device *d = NULL;
    if (hsr_device_open(HSR_DEVICE_CUDA, 0, &d) == HSR_OK) hsr_device_close(d);
    return hsr_cli_usage_error("train", "--device cuda: %s (use --device host)", hsr_last_error());
  }
  /* K against an explicit S: say so before launching anything */
  if (a->cfg.reshard == HSR_RT_RESHARD_PARTIAL && a->cfg.shard > 0 && a->cfg.shard % a->cfg.partial_k) {
    char dv[256] = "";
    size_t o = 0;
    for (int k = 1; k <= a->cfg.shard; k++)
      if (a->cfg.shard % k == 0) o += (size_t)snprintf(dv + o, sizeof dv - o, "%s%d", o ? ", " : "", k);
    return hsr_cli_usage_error("train", "--reshard partial:%d: K must divide the shard size %d (valid K: %s)",
                               a->cfg.partial_k, a->cfg.shard, dv);
  }
  if (a->batch % a->cfg.micro_batches)
    return hsr_cli_usage_error("train", "--batch %d is not a multiple of --micro-batches %d", a->batch,
                               a->cfg.micro_batches);
  a->sched = (hsr_rt_lr_schedule){a->lr, lr_min >= 0 ? lr_min : a->lr, a->sched.warmup, a->steps};
  if (a->sched_on && hsr_rt_lr_check(&a->sched) != HSR_OK)
    return hsr_cli_usage_error("train", "--warmup %lld --lr-min %g --lr %g --steps %d: %s", (long long)a->sched.warmup,
                               a->sched.lr_min, a->sched.lr, a->steps, hsr_last_error());
  a->cfg.num_groups = 2;
  a->cfg.groups[0] = (hsr_rt_opt_group){a->lr, 0.9f, 0.999f, 1e-8f, a->wd};
  a->cfg.groups[1] = (hsr_rt_opt_group){a->lr, 0.9f, 0.999f, 1e-8f, 0.0f};
  a->cfg.user_hash = ((uint64_t)a->model.layers << 48) ^ ((uint64_t)a->model.dim << 24) ^
                     ((uint64_t)a->model.classes << 8) ^ a->model.seed ^ ((uint64_t)a->batch << 32) ^
                     ((uint64_t)a->model.wrap_linear << 62) ^ (uint64_t)a->steps * 0x9e3779b97f4a7c15ull;
  return 0;
}

static void log_line(FILE *f, const hsr_rt_step_info *in, double loss, double ms) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)in->step);
  cJSON_AddNumberToObject(o, "loss", loss);
  cJSON_AddNumberToObject(o, "grad_norm", in->grad_norm);
  char lr[32]; /* the float the optimizer used, without float-to-double noise */
  snprintf(lr, sizeof lr, "%.7g", in->lr);
  cJSON_AddNumberToObject(o, "lr", strtod(lr, NULL));
  cJSON_AddNumberToObject(o, "step_ms", ms);
  train_comm_json(o, "comm", in->comm, 1); /* per group and op: calls, bytes sent/received, fabric, full buffers */
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

static uint64_t sum_op(const hsr_rt_step_info *in, hsr_op op) {
  uint64_t n = 0;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) n += in->calls[g][op];
  return n;
}

int hsr_cmd_train(int argc, char **argv) {
  train_args a;
  int pr = parse(argc, argv, &a);
  if (pr < 0) return HSR_EXIT_OK;
  if (pr > 0) return pr;
  mlp_blas_threads(1);

  hsr_boot *boot = NULL;
  hsr_topo *topo = NULL;
  hsr_cluster *cl = NULL;
  hsr_rt *rt = NULL;
  mlp_rt_ctx *x = NULL;
  FILE *logf = NULL, *jsonf = NULL;
  hsr_status st = hsr_boot_init(&boot);
  if (st != HSR_OK) return hsr_cli_fail("train", st);
  int rank = hsr_boot_rank(boot), world = hsr_boot_size(boot);
  if ((st = hsr_topo_discover(NULL, &topo)) != HSR_OK) goto out;
  if ((st = hsr_cluster_gather(boot, topo, &cl)) != HSR_OK) goto out;
  if (!a.strategy_given) { /* hybrid when the mesh has replicas, else fsdp */
    int S = a.cfg.shard ? a.cfg.shard : hsr_cluster_domain_size(cl);
    if (S < 1 || S > world || world % S) S = world;
    int R = a.cfg.replicate ? a.cfg.replicate : world / S;
    a.cfg.strategy = R > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
    if (a.cfg.strategy == HSR_RT_HYBRID && !a.cfg.shard) a.cfg.shard = S;
  }
  if ((st = hsr_rt_create(boot, NULL, cl, &a.cfg, &rt)) != HSR_OK) goto out;
  if ((st = mlp_rt_setup(&a.model, rt)) != HSR_OK) goto out;
  if ((st = mlp_rt_ctx_create(&a.model, rt, a.cfg.param_dtype, &x)) != HSR_OK) goto out;
  int N = hsr_rt_dp_size(rt);
  if (a.batch % (N * a.cfg.micro_batches)) {
    st = hsr_error(HSR_ERR_INVALID, "--batch %d must be a multiple of data-parallel ranks x micro-batches = %d x %d",
                   a.batch, N, a.cfg.micro_batches);
    goto out;
  }
  if (a.log) { /* every rank learns whether rank 0 could open it, so none waits for the others */
    int ok = 1;
    if (rank == 0 && !(logf = fopen(a.log, "w"))) ok = 0;
    if ((st = hsr_boot_bcast(boot, &ok, sizeof ok, 0)) != HSR_OK) goto out;
    if (!ok) {
      st = hsr_error(HSR_ERR_IO, "cannot open --log file '%s' for writing", a.log);
      goto out;
    }
  }
  if (a.json) {
    int ok = 1;
    if (rank == 0 && !(jsonf = fopen(a.json, "w"))) ok = 0;
    if ((st = hsr_boot_bcast(boot, &ok, sizeof ok, 0)) != HSR_OK) goto out;
    if (!ok) {
      st = hsr_error(HSR_ERR_IO, "cannot open --json file '%s' for writing", a.json);
      goto out;
    }
  }
  if (a.trace && (st = hsr_rt_trace_enable(rt, 1)) != HSR_OK) goto out;
  if (rank == 0) {
    char rs[32];
    if (a.cfg.reshard == HSR_RT_RESHARD_PARTIAL)
      snprintf(rs, sizeof rs, "partial:%d", a.cfg.partial_k);
    else
      snprintf(rs, sizeof rs, "%s", a.cfg.reshard == HSR_RT_RESHARD_FULL ? "full" : "none");
    printf(
        "hsr train: %d ranks, %d node(s), %s, mesh %d x %d (replicate x shard), %s, reshard %s, prefetch %d, "
        "sync %s, %s/%s\n"
        "model: %d blocks of %d -> %d -> %d, %d classes, %d units; global batch %d (%d per rank, %d micro-batch(es)), "
        "%d steps\n",
        world, hsr_boot_num_nodes(boot), a.cfg.device == HSR_DEVICE_CUDA ? "CUDA (NCCL)" : "host", hsr_rt_replicate(rt),
        hsr_rt_shard(rt), hsr_rt_strategy_name(a.cfg.strategy), rs, a.cfg.prefetch, hsr_rt_sync_name(a.cfg.sync),
        hsr_dtype_name(a.cfg.param_dtype), hsr_dtype_name(a.cfg.reduce_dtype), a.model.layers, a.model.dim,
        4 * a.model.dim, a.model.dim, a.model.classes, mlp_rt_num_units(&a.model), a.batch, a.batch / N,
        a.cfg.micro_batches, a.steps);
    if (hsr_rt_partial(rt) > 0) { /* say which ranks the backward gathers stay in, and where they live */
      int K = hsr_rt_partial(rt), *pg = calloc((size_t)K, sizeof *pg);
      if (pg && hsr_mesh_partial_group(hsr_rt_get_mesh(rt), 0, pg) == HSR_OK) {
        printf("partial group of rank 0 (K = %d): ranks", K);
        for (int i = 0; i < K; i++) printf(" %d", pg[i]);
        int n0 = hsr_boot_node_of(boot, pg[0]), same = 1;
        for (int i = 1; i < K; i++) same &= hsr_boot_node_of(boot, pg[i]) == n0;
        printf(same ? " (all on node %d: backward all-gathers stay inside the node)\n"
                    : " (spanning nodes: the shard group's ranks on one node are fewer than K=%d)\n",
               same ? n0 : K);
      }
      free(pg);
    }
    fflush(stdout);
  }
  double first = 0, last = 0, total_ms = 0, meas_ms = 0, meas_ag = 0;
  int meas = 0;
  train_measured m = {0};
  hsr_rt_step_info info;
  int64_t start = 0;
  train_ckpt_state ts = {"mlp", a.batch, a.model.seed, a.sched_on ? &a.sched : NULL};
  if ((st = train_ckpt_resume(&a.ck, boot, rt, &ts, a.steps, &start)) != HSR_OK) goto out;
  for (int s = (int)start; s < a.steps; s++) {
    double loss, t0 = hsr_clock_s();
    for (int g = 0; a.sched_on && g < a.cfg.num_groups && st == HSR_OK; g++)
      st = hsr_rt_set_lr(rt, g, hsr_rt_lr_at(&a.sched, s + 1));
    if (st != HSR_OK || (st = mlp_rt_train_step(x, s, a.batch, a.cfg.micro_batches, &loss, &info)) != HSR_OK) goto out;
    double ms = (hsr_clock_s() - t0) * 1e3;
    total_ms += ms;
    /* the first step records the execution order (no prefetch yet): measure from the second */
    if (s == start && a.steps > start + 1)
      hsr_rt_reset_timing(rt);
    else {
      meas++;
      meas_ms += ms;
      meas_ag += (double)sum_op(&info, HSR_OP_ALLGATHER);
      train_comm_add(&m, &info);
    }
    if (s == start) first = loss;
    last = loss;
    if (rank == 0 && logf) log_line(logf, &info, loss, ms);
    if ((st = train_ckpt_after_step(&a.ck, boot, rt, &ts, s + 1, a.steps)) != HSR_OK) goto out;
    if (rank != 0) continue;
    if (a.progress) {
      int width = 24, done = (int)((long)(s + 1) * width / a.steps);
      char bar[32];
      for (int i = 0; i < width; i++) bar[i] = i < done ? '#' : '.';
      bar[width] = 0;
      /* a line per tenth of the run, not \r: under mpirun stdout is often a pty even when piped */
      int every = a.steps >= 10 ? a.steps / 10 : 1;
      if ((s + 1) % every == 0 || s + 1 == a.steps) {
        printf("[%s] step %d/%d loss %.4f grad %.3f %.1f ms  all-gather %llu reduce-scatter %llu "
               "all-reduce %llu\n",
               bar, s + 1, a.steps, loss, info.grad_norm, ms, (unsigned long long)sum_op(&info, HSR_OP_ALLGATHER),
               (unsigned long long)sum_op(&info, HSR_OP_REDUCE_SCATTER),
               (unsigned long long)sum_op(&info, HSR_OP_ALLREDUCE));
        fflush(stdout);
      }
    }
  }
  if (rank == 0) {
    printf("loss %.4f -> %.4f over %d steps, %.2f ms/step mean\n", first, last, a.steps - (int)start,
           total_ms / (a.steps - (int)start));
  }
  {
    m.steps = meas, m.step_ms = meas ? meas_ms / meas : 0, m.gathers_per_step = meas ? meas_ag / meas : 0;
    int warned = 0;
    if ((st = train_report(rt, &a.model, &a.cfg, &m, rank == 0 ? jsonf : NULL, rank == 0 ? stdout : NULL, &warned)) !=
        HSR_OK)
      goto out;
  }
  if (a.trace) {
    if ((st = hsr_rt_trace_write(rt, a.trace)) != HSR_OK) goto out;
    if (rank == 0) printf("trace: %s (hsr trace summarize %s)\n", a.trace, a.trace);
  }
out:
  if (logf) fclose(logf);
  if (jsonf) fclose(jsonf);
  mlp_rt_ctx_free(x);
  char why[1024] = ""; /* teardown may raise errors of its own: the first one is the job's */
  if (st != HSR_OK) snprintf(why, sizeof why, "%s", hsr_last_error());
  hsr_status dst = hsr_rt_destroy(rt);
  if (st == HSR_OK) st = dst;
  else hsr_error(st, "%s", why);
  hsr_cluster_free(cl);
  hsr_topo_free(topo);
  if (st != HSR_OK) {
    int code = hsr_cli_fail_job("train", st, boot);
    hsr_boot_finalize(boot);
    return code;
  }
  st = hsr_boot_finalize(boot);
  return st == HSR_OK ? HSR_EXIT_OK : hsr_cli_fail("train", st);
}
