/* hsr train's flags: the help text, the parser, the checks that need no
 * launch (each a usage error, exit 2, before anything starts). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "train.h"
#include "common/dtype_internal.h"
#include "kernels/kernels_internal.h"

static void usage(void) {
  printf("usage: hsr train [options]      (multi-rank: hsr-run -n 4 --nodes 2 -- hsr train --model gpt)\n"
         "Trains an example model with the sharding engine on a replicate x shard mesh:\n"
         "  --model gpt   GPT-2 (pre-LayerNorm blocks, causal attention, GELU MLP, head tied to the token\n"
         "                embedding) on byte-level text: by default the repository's own docs and sources\n"
         "  --model llama Llama-style (RMSNorm, rotary embeddings, SwiGLU MLP, grouped-query attention,\n"
         "                untied head; transformers' LlamaForCausalLM names) on the same byte-level text\n"
         "  --model mlp   residual MLP blocks on synthetic data from a fixed random teacher (the default;\n"
         "                the fast tests' model)\n\n"
         "model and data\n"
         "  --model M           mlp | gpt | llama (default mlp)\n"
         "  --layers L          blocks (default 4)\n"
         "  --dim D             width (mlp: blocks D -> 4D -> D, default 64; gpt, llama: default 128)\n"
         "  --heads H           gpt, llama: attention heads, dividing D (default 4)\n"
         "  --kv-heads G        llama: key/value heads, dividing H (default H / 2 when H is even, else H)\n"
         "  --seq T             gpt, llama: tokens per window; windows are T + 1 bytes (default 128)\n"
         "  --data FILE         gpt, llama: training text (default: the repository's text, built into\n"
         "                      build/hsr-corpus.txt); the last tenth is held out for validation\n"
         "  --classes C         mlp: classes of the teacher (default 8)\n"
         "  --steps N           training steps (default 200)\n"
         "  --batch B           GLOBAL batch (mlp: samples, default 64; gpt, llama: windows, default 16), split\n"
         "                      over all R x S data-parallel ranks: every mesh trains on the same data; window\n"
         "                      i of step s starts at a position hashed from (seed, s x B + i)\n"
         "  --micro-batches M   micro-batches per step per rank (default 1)\n"
         "  --seed N            weights and data seed (default 1)\n"
         "  --init FILE|DIR     start from safetensors weights (names and shapes must match; gpt, llama: the\n"
         "                      configuration comes from their __metadata__), fresh optimizer state: a file,\n"
         "                      a model.safetensors.index.json, or a directory holding one of the two\n"
         "  --export FILE       write the trained weights by name to a safetensors file at the end\n"
         "                      (__metadata__ hsr.model and the model's config - gpt: n_layer, n_head, n_embd,\n"
         "                      n_ctx, vocab_size; GPT-2's names and layouts; llama: also n_kv_head, n_ff,\n"
         "                      LlamaForCausalLM's names - then hsr_step, hsr_version)\n"
         "  --export-init FILE  write the initial weights (the seed's or --init's) the same way, before the\n"
         "                      first step (hsr_step 0): what another trainer starts from to run the same job\n"
         "  --max-shard-size N  --export a directory in Hugging Face's sharded layout instead:\n"
         "                      model-00001-of-0000K.safetensors ... of at most N bytes of tensors each (a\n"
         "                      bigger tensor gets a file of its own) and model.safetensors.index.json; one\n"
         "                      shard: model.safetensors alone. N as save_pretrained: 5GB = 5 x 10^9, 2GiB\n"
         "                      = 2 x 2^30, or bytes; gpt, llama: and config.json (GPT2LMHeadModel,\n"
         "                      LlamaForCausalLM), so the directory is what transformers' from_pretrained reads\n"
         "  --val-every N       gpt, llama: validation loss every N steps and at the end (default steps / 5)\n"
         "  --val-windows N     gpt, llama: held-out windows per validation (default 32, at most what the tail holds)\n"
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
         "  --outer-shard X     hybrid: none | optim (default none). optim shards the f32 master, m and v\n"
         "                      of each shard again over the R replicas (Megatron-FSDP's HFSDP): the\n"
         "                      gradients reduce-scatter over S then over R, AdamW updates 1/(S R), an\n"
         "                      all-gather over R rebuilds the shard; as many bytes cross nodes as the\n"
         "                      all-reduce it replaces, for about 12/S - 12/(S R) bytes per parameter less\n"
         "  --param-dtype T     f32 | bf16: compute/gather dtype (default f32; master and moments are f32)\n"
         "  --reduce-dtype T    f32 | bf16: gradient reduction dtype (default f32)\n"
         "  --device X          host | cuda | cuda:N | sim (cuda: NCCL collectives, cuBLAS; sim: the emulated\n"
         "                      device, CUDA's stream semantics on the CPU with the host collectives; default host)\n"
         "  --offload X         device runs: none | optim (default none). optim keeps the f32 master, m, v and\n"
         "                      the gradient shard in pinned host memory and runs AdamW on the host's cores\n"
         "                      (HSR_OFFLOAD_THREADS); the device keeps the parameter shard (2/S bytes per\n"
         "                      parameter in bf16) and transients (docs/memory.md, \"Offload\")\n"
         "  --wrap W            block | linear: one unit per block (default), or one per linear layer\n"
         "                      (mlp 2, gpt 4 per block: the wrapping mistake the diagnostic catches)\n"
         "  --recompute X       none | full | selective (gpt; block units): full keeps each block's input\n"
         "                      and recomputes its forward inside its backward; selective keeps the\n"
         "                      matmuls' outputs and recomputes LayerNorm, the attention's softmax and\n"
         "                      GELU. The backward's gather serves the recompute (docs/memory.md)\n"
         "optimizer (AdamW on the local shard)\n"
         "  --lr X              peak learning rate (default 3e-3)\n"
         "  --warmup N          linear warm-up steps (mlp default 0, gpt and llama steps / 20)\n"
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
         "  --no-progress       no progress lines\n");
  train_ckpt_usage(stdout);
  train_ft_usage(stdout);
  printf("  -h, --help          this text\n"
         "Exit codes: 0 ok, 1 failure, 2 bad usage.\n");
}

enum {
  O_MODEL = 256,
  O_HEADS,
  O_KV_HEADS,
  O_SEQ,
  O_DATA,
  O_INIT,
  O_EXPORT,
  O_EXPORT_INIT,
  O_VAL_EVERY,
  O_VAL_WINDOWS,
  O_WARMUP,
  O_LR_MIN,
  O_MAX_SHARD,
  O_OUTER,
  O_OFFLOAD,
  O_RECOMPUTE
};

static const struct option opts[] = {{"model", required_argument, 0, O_MODEL},
                                     {"layers", required_argument, 0, 'L'},
                                     {"dim", required_argument, 0, 'd'},
                                     {"heads", required_argument, 0, O_HEADS},
                                     {"kv-heads", required_argument, 0, O_KV_HEADS},
                                     {"seq", required_argument, 0, O_SEQ},
                                     {"data", required_argument, 0, O_DATA},
                                     {"init", required_argument, 0, O_INIT},
                                     {"export", required_argument, 0, O_EXPORT},
                                     {"export-init", required_argument, 0, O_EXPORT_INIT},
                                     {"max-shard-size", required_argument, 0, O_MAX_SHARD},
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
                                     {"outer-shard", required_argument, 0, O_OUTER},
                                     {"offload", required_argument, 0, O_OFFLOAD},
                                     {"recompute", required_argument, 0, O_RECOMPUTE},
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
                                     {"ckpt", required_argument, 0, TRAIN_OPT_CKPT},
                                     {"save-every", required_argument, 0, TRAIN_OPT_SAVE_EVERY},
                                     {"keep", required_argument, 0, TRAIN_OPT_KEEP},
                                     {"resume", required_argument, 0, TRAIN_OPT_RESUME},
                                     {"coordinator", required_argument, 0, TRAIN_OPT_COORD},
                                     {"replica-id", required_argument, 0, TRAIN_OPT_REPLICA_ID},
                                     {"replicas", required_argument, 0, TRAIN_OPT_REPLICAS},
                                     {"join", no_argument, 0, TRAIN_OPT_JOIN},
                                     {"hash-every", required_argument, 0, TRAIN_OPT_HASH_EVERY},
                                     {"async-save", no_argument, 0, TRAIN_OPT_ASYNC_SAVE},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};

/* One flag; *st carries a bad value. Returns 0, or an exit code. */
static int parse_one(int c, train_args *a, hsr_status *st) {
  long v = 0;
  double d = 0;
#define LONG(what, lo, hi) \
  if ((*st = parse_long(what, optarg, lo, hi, &v)) != HSR_OK) return 0
#define DBL(what, lo, hi) \
  if ((*st = parse_double(what, optarg, lo, hi, &d)) != HSR_OK) return 0
  switch (c) {
  case O_MODEL:
    if (!strcmp(optarg, "mlp"))
      a->model = &train_model_mlp;
    else if (!strcmp(optarg, "gpt"))
      a->model = &train_model_gpt;
    else if (!strcmp(optarg, "llama"))
      a->model = &train_model_llama;
    else
      *st = hsr_error(HSR_ERR_INVALID, "--model '%s' (valid: mlp, gpt, llama)", optarg);
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
  case O_KV_HEADS:
    LONG("--kv-heads", 1, 4096);
    a->kv_heads = (int)v;
    break;
  case O_SEQ:
    LONG("--seq", 1, 1 << 20);
    a->seq = (int)v;
    break;
  case O_DATA: a->data = optarg; break;
  case O_INIT: a->init = optarg; break;
  case O_EXPORT: a->export_path = optarg; break;
  case O_EXPORT_INIT: a->export_init = optarg; break;
  case O_MAX_SHARD: *st = st_parse_shard_size("--max-shard-size", optarg, &a->max_shard_bytes); break;
  case O_VAL_EVERY:
    LONG("--val-every", 1, 100000000);
    a->val_every = (int)v;
    break;
  case O_VAL_WINDOWS:
    a->given |= TRAIN_GIVEN_VAL_WINDOWS;
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
    a->given |= TRAIN_GIVEN_SHARD;
    if (!strcmp(optarg, "auto")) {
      a->cfg.shard = 0;
      break;
    }
    LONG("--shard", 1, 1 << 20);
    a->cfg.shard = (int)v;
    break;
  case 'R':
    a->given |= TRAIN_GIVEN_REPLICATE;
    LONG("--replicate", 1, 1 << 20);
    a->cfg.replicate = (int)v;
    break;
  case 'x':
    *st = hsr_rt_parse_strategy(optarg, &a->cfg.strategy);
    a->strategy_given = 1;
    break;
  case 'r':
    a->given |= TRAIN_GIVEN_RESHARD;
    *st = rt_parse_reshard(optarg, &a->cfg.reshard, &a->cfg.partial_k);
    break;
  case 'o':
    a->given |= TRAIN_GIVEN_ROOT_RESHARD;
    a->cfg.root_reshard = 1;
    break;
  case 'p':
    a->given |= TRAIN_GIVEN_PREFETCH;
    LONG("--prefetch", 0, 1 << 20);
    a->cfg.prefetch = (int)v;
    break;
  case 'M':
    a->given |= TRAIN_GIVEN_MAX_LIVE;
    LONG("--max-live", 0, 1 << 20);
    a->cfg.max_live = (int)v;
    break;
  case 'y':
    a->given |= TRAIN_GIVEN_SYNC;
    *st = rt_parse_sync(optarg, &a->cfg.sync);
    break;
  case O_OUTER:
    a->given |= TRAIN_GIVEN_OUTER;
    *st = rt_parse_outer_shard(optarg, &a->cfg.outer_shard);
    break;
  case O_OFFLOAD: *st = rt_parse_offload(optarg, &a->cfg.offload); break;
  case O_RECOMPUTE: *st = rt_parse_recompute(optarg, &a->cfg.recompute); break;
  case 'P':
  case 'D': {
    hsr_dtype t = HSR_F32;
    *st = dtype_parse(optarg, &t);
    if (*st == HSR_OK && t != HSR_F32 && t != HSR_BF16)
      *st = hsr_error(HSR_ERR_INVALID, "dtype '%s' is not supported here (valid: f32, bf16)", optarg);
    *(c == 'P' ? &a->cfg.param_dtype : &a->cfg.reduce_dtype) = t;
    if (c == 'D') a->given |= TRAIN_GIVEN_REDUCE_DTYPE;
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
  case 'V': *st = rt_parse_device(optarg, &a->cfg.device, &a->cfg.device_ordinal); break;
  case 'T': a->trace = optarg; break;
  case 'F':
    a->given |= TRAIN_GIVEN_PREFETCH_STEP;
    a->cfg.prefetch_step = 1;
    break;
  case 'J': a->json = optarg; break;
  case 'W':
    if (!strcmp(optarg, "block") || !strcmp(optarg, "linear"))
      a->wrap_linear = !strcmp(optarg, "linear");
    else
      *st = hsr_error(HSR_ERR_INVALID, "--wrap '%s' (valid: block, linear)", optarg);
    break;
  default: {
    int k = train_ckpt_option(&a->ck, c, optarg);
    if (k == 0) k = train_ft_option(&a->ftc, c, optarg);
    if (k < 0) return -k;
    if (k == 0) return cli_usage_error("train", "unknown option or missing value '%s'", optarg ? optarg : "?");
  }
  }
#undef LONG
#undef DBL
  return 0;
}

/* A flag the chosen strategy ignores is refused, never silently dropped:
 * ddp, zero1 and zero2 keep every parameter full on every rank, so nothing
 * is gathered, resharded or prefetched. */
static int check_strategy(const train_args *a) {
  const hsr_rt_config *c = &a->cfg;
  const char *st = rt_strategy_name(c->strategy);
  int unsharded = a->strategy_given && !rt_strategy_sharding(c->strategy).params;
  static const struct {
    unsigned bit;
    const char *flag;
  } gathers[] = {{TRAIN_GIVEN_RESHARD, "--reshard"},
                 {TRAIN_GIVEN_ROOT_RESHARD, "--root-reshard"},
                 {TRAIN_GIVEN_PREFETCH, "--prefetch"},
                 {TRAIN_GIVEN_MAX_LIVE, "--max-live"},
                 {TRAIN_GIVEN_PREFETCH_STEP, "--prefetch-step"}};
  for (size_t i = 0; unsharded && i < sizeof gathers / sizeof gathers[0]; i++)
    if (a->given & gathers[i].bit)
      return cli_usage_error("train",
                             "%s has no effect with --strategy %s: it keeps every parameter full on every rank, so "
                             "nothing is gathered, resharded or prefetched (drop %s, or use --strategy fsdp or "
                             "hybrid)",
                             gathers[i].flag, st, gathers[i].flag);
  /* strategy and mesh: the runtime's one check, on the values given (without --strategy, the launch picks
   * hybrid unless R = 1, which the check then holds too) */
  hsr_rt_config given = *c;
  if (!a->strategy_given) given.strategy = c->replicate == 1 ? HSR_RT_FSDP : HSR_RT_HYBRID;
  if (rt_config_resolve(&given, 0, 0, NULL, NULL) != HSR_OK) return cli_usage_error("train", "%s", hsr_last_error());
  if ((a->given & TRAIN_GIVEN_PREFETCH_STEP) && c->prefetch == 0)
    return cli_usage_error("train", "--prefetch-step has no effect with --prefetch 0 (it prefetches the next "
                                    "step's first unit)");
  if ((a->given & TRAIN_GIVEN_MAX_LIVE) && c->prefetch == 0)
    return cli_usage_error("train", "--max-live %d has no effect with --prefetch 0 (it caps what prefetch gathers)",
                           c->max_live);
  if ((a->given & TRAIN_GIVEN_MAX_LIVE) && c->max_live == 1 && !c->prefetch_step)
    return cli_usage_error("train",
                           "--max-live 1 turns --prefetch %d off: the unit in use is already live "
                           "(use --max-live 2 or more, 0 for no cap, or --prefetch 0)",
                           c->prefetch);
  if ((a->given & TRAIN_GIVEN_ROOT_RESHARD) && c->reshard == HSR_RT_RESHARD_NONE)
    return cli_usage_error("train", "--root-reshard has no effect with --reshard none (no unit is resharded)");
  if ((a->given & TRAIN_GIVEN_SYNC) && c->micro_batches == 1)
    return cli_usage_error("train",
                           "--sync %s has no effect with one micro-batch: every step syncs its only "
                           "backward (give --micro-batches M > 1)",
                           rt_sync_name(c->sync));
  return 0;
}

/* The files the run reads and writes, before anything starts. */
static int check_paths(const train_args *a) {
  static const char *const out_flags[] = {"--log", "--trace", "--json", "--export", "--export-init"};
  const char *outs[] = {a->log, a->trace, a->json, a->export_path, a->export_init};
  enum { NOUT = sizeof outs / sizeof outs[0] };
  static const char *const in_flags[] = {"--init", "--data"};
  const char *ins[] = {a->init, a->data};
  hsr_status st = HSR_OK;
  if (a->max_shard_bytes && !a->export_path)
    return cli_usage_error("train", "--max-shard-size needs --export DIR (the directory of the shards)");
  for (int i = 0; i < NOUT && st == HSR_OK; i++)
    if (outs[i] && i == 3 && a->max_shard_bytes)
      st = cli_check_out_dir(out_flags[i], outs[i]);
    else if (outs[i])
      st = path_check_output(out_flags[i], outs[i]);
  for (int i = 0; i < NOUT && st == HSR_OK; i++)
    for (int j = i + 1; j < NOUT && st == HSR_OK; j++)
      st = path_check_distinct(out_flags[i], outs[i], out_flags[j], outs[j]);
  if (st == HSR_OK && a->init) st = cli_check_weights("--init", a->init);
  if (st == HSR_OK && a->data) st = path_check_read("--data", a->data);
  for (int i = 0; i < NOUT && st == HSR_OK; i++) /* an output is never one of the inputs */
    for (int j = 0; j < 2 && st == HSR_OK; j++) st = path_check_distinct(out_flags[i], outs[i], in_flags[j], ins[j]);
  if (st == HSR_OK && a->ck.dir) st = path_check_mkdir("--ckpt", a->ck.dir);
  if (st == HSR_OK && a->ck.resume && strcmp(a->ck.resume, "latest")) st = cli_check_ckpt("--resume", a->ck.resume);
  struct stat isb;
  int init_dir = a->init && !stat(a->init, &isb) && S_ISDIR(isb.st_mode);
  for (int i = 0; i < NOUT && st == HSR_OK; i++) { /* nor among the checkpoints' files, nor --init's shards */
    st = path_check_outside(out_flags[i], outs[i], "--ckpt", a->ck.dir);
    if (st == HSR_OK && init_dir) st = path_check_outside(out_flags[i], outs[i], "--init", a->init);
    if (st == HSR_OK && a->ck.resume && strcmp(a->ck.resume, "latest"))
      st = path_check_outside(out_flags[i], outs[i], "--resume", a->ck.resume);
  }
  if (st != HSR_OK) return cli_usage_error("train", "%s", hsr_last_error());
  if (a->ck.save_every && a->ck.save_every >= a->steps) /* redundant, not contradictory: said, not refused */
    cli_warn("train", "--save-every %d with --steps %d saves once, after the last step, as --ckpt alone does",
             a->ck.save_every, a->steps);
  return 0;
}

/* Checks that need no launch: said before anything starts. */
static int check_args(train_args *a) {
  if (train_ckpt_check(&a->ck)) return HSR_EXIT_USAGE;
  if (a->init && a->ck.resume) /* the resume would silently overwrite the --init weights */
    return cli_usage_error("train", "--init and --resume both set the weights: use one (--init starts a new run "
                                    "from a safetensors file, --resume continues a checkpoint)");
  if (a->export_init && (a->ck.resume || a->ftc.join)) /* their weights arrive after the first step starts */
    return cli_usage_error("train", "--export-init writes the weights a new run starts from: drop %s",
                           a->ck.resume ? "--resume" : "--join");
  int rc = check_strategy(a);
  if (!rc) rc = check_paths(a);
  if (!rc) rc = train_ft_check(a);
  if (rc) return rc;
  if (a->cfg.device == HSR_DEVICE_CUDA && device_cuda_count() == 0) {
    hsr_device *d = NULL;
    if (hsr_device_open(HSR_DEVICE_CUDA, 0, &d) == HSR_OK) hsr_device_close(d);
    return cli_usage_error("train", "--device cuda: %s (use --device host)", hsr_last_error());
  }
  hsr_status fst = a->model->finish_args(a); /* reads --init's configuration: a malformed file is exit 1 */
  if (fst != HSR_OK)
    return fst == HSR_ERR_INVALID ? cli_usage_error("train", "%s", hsr_last_error()) : cli_fail("train", fst);
  if (a->batch % a->cfg.micro_batches)
    return cli_usage_error("train", "--batch %d is not a multiple of --micro-batches %d", a->batch,
                           a->cfg.micro_batches);
  if (a->lr_min > a->lr)
    return cli_usage_error("train", "--lr-min %g exceeds --lr %g (the schedule decays)", a->lr_min, a->lr);
  rt_lr_schedule sched = train_schedule(a);
  if (a->lr > 0 && sched.total > 0 && rt_lr_check(&sched) != HSR_OK)
    return cli_usage_error("train", "--warmup %d --lr-min %g --lr %g --steps %d: %s", a->warmup, a->lr_min, a->lr,
                           a->steps, hsr_last_error());
  return 0;
}

void train_args_default(train_args *a) {
  memset(a, 0, sizeof *a);
  a->model = &train_model_mlp;
  a->layers = a->dim = a->heads = a->kv_heads = a->classes = a->seq = a->batch = a->warmup = a->val_every =
      a->val_windows = -1;
  a->lr = a->lr_min = -1;
  a->steps = 200;
  a->wd = 0.01f;
  a->seed = 1;
  a->progress = 1;
  a->ftc.id = -1;
  a->ftc.hash_every = 10;
  hsr_rt_config_default(&a->cfg);
  a->cfg.clip = 1.0;
}

int train_parse(int argc, char **argv, train_args *a) {
  train_args_default(a);
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h') {
      usage();
      return -1;
    }
    if (c == '?') return cli_usage_error("train", "unknown option or missing value '%s'", argv[optind - 1]);
    hsr_status st = HSR_OK;
    int rc = parse_one(c, a, &st);
    if (rc) return rc;
    if (st != HSR_OK) return cli_usage_error("train", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
  return train_args_finish(a);
}

int train_args_finish(train_args *a) {
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
  if (a->model == &train_model_llama) { /* after the others: the GPT's and the MLP's hashes stay what they were */
    h = (h ^ 2u) * 1099511628211ull;
    h = (h ^ (uint64_t)a->kv_heads) * 1099511628211ull;
  }
  a->cfg.user_hash = h;
  return 0;
}

hsr_status train_check_mesh(const train_args *a, int S, int R) {
  const hsr_rt_config *c = &a->cfg;
  hsr_rt_config mesh = *c; /* strategy and mesh: the runtime's one check, on this mesh */
  mesh.shard = S, mesh.replicate = R;
  HSR_CHECK(rt_config_resolve(&mesh, S * R, 0, NULL, NULL));
  if ((a->given & TRAIN_GIVEN_SYNC) && c->sync == HSR_RT_SYNC_RS_ONLY && R == 1)
    return hsr_error(
        HSR_ERR_INVALID,
        "--sync rs_only has no effect on a %d x %d mesh: it defers the replicate all-reduce, and with R = 1 "
        "there is none (use --sync full or none, or a mesh with R > 1)",
        R, S);
  if (c->reshard == HSR_RT_RESHARD_PARTIAL && S % c->partial_k == 0 && c->partial_k == S && S > 1 &&
      rt_strategy_sharding(c->strategy).params)
    return hsr_error(
        HSR_ERR_INVALID,
        "--reshard partial:%d on a shard group of %d: the partial group is the whole shard group, which is "
        "--reshard full with an extra copy (use full, or a K below %d)",
        c->partial_k, S, S);
  return HSR_OK;
}

hsr_status train_check_fit(const train_args *a, int S, int R, int world, int ranks_here) {
  const hsr_rt_config *c = &a->cfg;
  if (c->device != HSR_DEVICE_HOST) return HSR_OK; /* device memory: the allocator says (no query here) */
  int dp = c->strategy == HSR_RT_DDP ? world : S * R;
  int rows = a->batch / (dp > 0 ? dp : 1) / (c->micro_batches > 0 ? c->micro_batches : 1);
  double P, U, act;
  a->model->sizes(a, rows > 0 ? rows : 1, &P, &U, &act);
  rt_sharding sh = rt_strategy_sharding(c->strategy);
  int sp = sh.params, sg = sh.grads;
  int so = c->strategy != HSR_RT_DDP;
  double pes = (double)dtype_size(c->param_dtype), s = S > 0 ? S : 1;
  double params = P * pes / (sp ? s : 1), grads = P * 4 / (sg ? s : 1), optim = P * 12 / (so ? s : 1);
  double gathered = !sp ? 0 : c->reshard == HSR_RT_RESHARD_NONE ? P * pes : (c->prefetch + 2) * U * pes;
  double staging = 2 * U * 4, per = params + grads + optim + gathered + staging + act;
  /* shared parts (parameters, gathered units, staging) are memfds: memory like
   * the rest, whatever /dev/shm's size (a container's 64 MB /dev/shm is no limit) */
  double need = per * ranks_here;
  uint64_t mem = 0;
  char b[8][32];
  sys_bytes_text(need, b[0], sizeof b[0]);
  sys_bytes_text(params + grads + optim, b[1], sizeof b[1]);
  sys_bytes_text(gathered + staging, b[2], sizeof b[2]);
  sys_bytes_text(act, b[3], sizeof b[3]);
  if (sys_mem_available(&mem) == HSR_OK && need > 0.9 * (double)mem) {
    sys_bytes_text((double)mem, b[4], sizeof b[4]);
    return hsr_error(HSR_ERR_INVALID,
                     "the model does not fit in memory: %.4g parameters (--layers %d --dim %d); the %d rank(s) on this "
                     "host need about %s (per rank: %s of parameters, gradients and optimizer state on a %d x %d %s "
                     "mesh, %s of gathered units and staging, %s of activations), %s is available (this host's, or "
                     "its memory cgroup's): use a smaller model, --batch or more hosts",
                     P, a->layers, a->dim, ranks_here, b[0], b[1], R, S, rt_strategy_name(c->strategy), b[2], b[3],
                     b[4]);
  }
  (void)world;
  return HSR_OK;
}
