/* hsr tune: how much to shard inside the node and how much across nodes.
 * Enumerates every layout the mesh planner accepts, predicts each one's
 * step time, communication and memory with tune/'s cost model, rejects those
 * over the memory budget, ranks the rest and explains the choice; emits the
 * winner for FSDP2, torchtitan or DeepSpeed; as a calculator prints the
 * ledger of one layout; with --validate (under a launcher) checks itself
 * against measured runs of this job. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "tune_cli.h"
#include "launch/boot_internal.h"
#include "common/dtype_internal.h"

static void usage(void) {
  printf("usage: hsr tune --params N [--units U] (--world W --gpus-per-node G | --xml FILE | --nccl-xml FILE |\n"
         "                under a launcher) [options]\n"
         "       hsr tune --params N --shard S [--replicate R] [options]          the ledger calculator\n"
         "       hsr-run -n 8 --nodes 2 [--emulate-net RATE] -- hsr tune --validate [options]\n"
         "Enumerates every valid layout (shard size S, replicas R, strategy, reshard full/none/partial:K,\n"
         "prefetch depth, sync mode), predicts its step time, communication and memory, rejects those over\n"
         "--mem-budget with the reason and the amount, ranks the rest and explains the winner and runner-up.\n"
         "Model:\n"
         "  --params N            parameters (e.g. 7e9)           --units U    units (default 32)\n"
         "  --unit-size BYTES     instead of --params: gathered f32 bytes per unit (as hsr bench step)\n"
         "  --root none|last|outer  root unit: none (default), the last (hsr bench step), the first wrapping\n"
         "                        the rest (hsr train's embedding + head)\n"
         "  --compute-ms-per-unit X  forward compute per unit and micro-batch (ms)\n"
         "  --tflops X [--tokens T]  compute from FLOPs: 2 x params x tokens per rank (default 4096) / X\n"
         "  --compute-from FILE   compute from a measured `hsr bench step --json` file or `hsr train --trace`\n"
         "  --bwd-ratio X         backward = X x forward (default 2)\n"
         "  --param-dtype f32|bf16 --reduce-dtype f32|bf16 --micro-batches M   (default f32, f32, 1)\n"
         "  --act-mem BYTES       activation memory per rank, added to the peak (default 0: not counted)\n"
         "The model's shape (activations per recompute policy; --params, --units and --tokens follow from it):\n"
         "  --arch gpt2-124m|llama3-8b|llama3-70b   a published shape (bf16 activations), or a family with the\n"
         "                        shape flags: gpt (Korthikanti et al. 2022's transformer; the default family),\n"
         "                        llama (GQA, SwiGLU, RMSNorm, fused attention), hsr-gpt and hsr-llama (hsr train\n"
         "                        --model gpt|llama exactly, f32)\n"
         "  --layers L --width C --heads H [--kv-heads K] [--ffn F] --seq T --vocab V\n"
         "  --micro-batch B       sequences per micro-batch per rank (default 1; --micro-batches M is how many)\n"
         "  --act-dtype f32|bf16  (default bf16; hsr-gpt, hsr-llama f32)\n"
         "  The planner searches recompute none, selective and full with the layouts: full costs one more\n"
         "  forward of every layer, selective what it recomputes (FLOPs and elementwise bytes, from the shape).\n"
         "  The calculator takes --recompute none|full|selective (default none). A --params more than 10%% off\n"
         "  the shape's, or --unit-size, --act-mem, --tokens beside a shape: exit 2.\n"
         "Topology (the mesh rules are hsr mesh's): --world W --gpus-per-node G (one NVLink domain per\n"
         "  node assumed), --xml FILE or --nccl-xml FILE [--nccl-host N] per node with --world/--nodes,\n"
         "  or the live job under a launcher.\n"
         "Cost model: --hw h100|h200|a100|pcie5|host (built-in public figures, labelled 'default';\n"
         "  default h100 with GPUs, host without; without --mem-budget, h100|h200|a100 bound memory by the GPU's\n"
         "  80|141|80 GiB (a100: the 80 GB part) less a reserve of 2 GiB (CUDA context, NCCL's buffers) + 5%%\n"
         "  (the allocator's fragmentation)), --bench FILE.json (repeatable: hsr bench ... -J files,\n"
         "  fitted per tier and collective; a --concurrent run fits the contention between tiers).\n"
         "Search: --mem-budget BYTES (e.g. 80G), --shard S, --strategy ddp|zero1|zero2|fsdp|hybrid,\n"
         "  --max-prefetch D (default 2), --no-prefetch-step, --outer-shard none|optim (only layouts with it;\n"
         "  default both: optim, hybrid only, also splits the optimizer state over the replicas, HFSDP).\n"
         "Output: --top N (default 10), --json (every candidate; schema in docs/tuning.md), --plot FILE.svg\n"
         "  (gnuplot), --emit fsdp2|torchtitan|deepspeed (the winner in that system's vocabulary).\n"
         "Calculator (--shard without a topology): --reshard full|none|partial:K, --prefetch D, --strategy,\n"
         "  --outer-shard none|optim (with --replicate R > 1).\n"
         "--validate: calibrates from a quick bench on this launch (collectives alone and both tiers at once,\n"
         "  three probe runs of hsr bench step), runs the top --validate-top N (3) and --validate-bad N (2)\n"
         "  deliberately bad layouts through hsr bench step and prints predicted vs measured. The model is\n"
         "  hsr bench step's: --units (8) --unit-size (8M) --compute-ms-per-unit (10). --validate-steps N (4);\n"
         "  --validate-rounds N (1): measure every probe and layout N times, interleaved, and keep the round\n"
         "  with the shortest step (other work on the cores only ever adds time);\n"
         "  --validate-keep DIR keeps the bench files; --validate-reuse DIR also reuses the results already\n"
         "  there (re-fits and re-plans without measuring them again); --compute cpu|wait (cpu): hsr bench\n"
         "  step's compute: GEMMs on the ranks' cores, or wait: each unit holds its rank for the time without\n"
         "  a core, as a kernel occupies a GPU (the faithful miniature of a GPU cluster; docs/tuning.md);\n"
         "  --device host|sim (host): where hsr bench step's engine runs; sim: the emulated device, whose\n"
         "  compute stream holds the unit's time while the host runs ahead and queues the next gather.\n"
         "Exit: 0; 2 bad usage, impossible mesh, or nothing fits the budget (says by how much).\n");
}

enum {
  O_PARAMS = 256,
  O_UNITS,
  O_UNIT_SIZE,
  O_ROOT,
  O_CMS,
  O_TFLOPS,
  O_TOKENS,
  O_CFROM,
  O_BWD,
  O_PDT,
  O_RDT,
  O_MICRO,
  O_ACT,
  O_WORLD,
  O_NODES,
  O_GPN,
  O_XML,
  O_NCCL,
  O_NHOST,
  O_HW,
  O_BENCH,
  O_BUDGET,
  O_SHARD,
  O_REP,
  O_STRAT,
  O_MAXPF,
  O_NOPFS,
  O_TOP,
  O_JSON,
  O_PLOT,
  O_EMIT,
  O_RESHARD,
  O_PF,
  O_VAL,
  O_VTOP,
  O_VBAD,
  O_VSTEPS,
  O_VKEEP,
  O_VREUSE,
  O_VROUNDS,
  O_VCOMPUTE,
  O_VDEVICE,
  O_OUTER,
  O_ARCH,
  O_LAYERS,
  O_WIDTH,
  O_HEADS,
  O_KVH,
  O_FFN,
  O_SEQ,
  O_VOCAB,
  O_MB,
  O_ADT,
  O_RECOMPUTE,
  O_COUNT
};

/* Which modes read each flag: the planner, the calculator (--shard without
 * a topology), --validate. A flag given to a mode that does not read it is
 * refused: no flag is accepted and ignored. */
enum { M_PLAN = 1, M_CALC = 2, M_VAL = 4, M_ALL = 7 };
static const struct {
  int code, modes;
  const char *name;
} flag_modes[] = {
    {O_PARAMS, M_ALL, "--params"},
    {O_UNITS, M_ALL, "--units"},
    {O_UNIT_SIZE, M_ALL, "--unit-size"},
    {O_ROOT, M_PLAN | M_CALC, "--root"},
    {O_CMS, M_ALL, "--compute-ms-per-unit"},
    {O_TFLOPS, M_PLAN | M_CALC, "--tflops"},
    {O_TOKENS, M_PLAN | M_CALC, "--tokens"},
    {O_CFROM, M_PLAN | M_CALC, "--compute-from"},
    {O_BWD, M_ALL, "--bwd-ratio"},
    {O_PDT, M_PLAN | M_CALC, "--param-dtype"},
    {O_RDT, M_PLAN | M_CALC, "--reduce-dtype"},
    {O_MICRO, M_PLAN | M_CALC, "--micro-batches"},
    {O_ACT, M_PLAN | M_CALC, "--act-mem"},
    {O_WORLD, M_PLAN, "--world"},
    {O_NODES, M_PLAN, "--nodes"},
    {O_GPN, M_PLAN, "--gpus-per-node"},
    {O_XML, M_PLAN, "--xml"},
    {O_NCCL, M_PLAN, "--nccl-xml"},
    {O_NHOST, M_PLAN, "--nccl-host"},
    {O_HW, M_ALL, "--hw"},
    {O_BENCH, M_PLAN | M_CALC, "--bench"},
    {O_BUDGET, M_PLAN | M_VAL, "--mem-budget"},
    {O_SHARD, M_PLAN | M_CALC, "--shard"},
    {O_REP, M_CALC, "--replicate"},
    {O_STRAT, M_PLAN | M_CALC, "--strategy"},
    {O_MAXPF, M_PLAN | M_VAL, "--max-prefetch"},
    {O_NOPFS, M_PLAN, "--no-prefetch-step"},
    {O_TOP, M_PLAN, "--top"},
    {O_JSON, M_ALL, "--json"},
    {O_PLOT, M_PLAN | M_VAL, "--plot"},
    {O_EMIT, M_PLAN, "--emit"},
    {O_RESHARD, M_CALC, "--reshard"},
    {O_PF, M_CALC, "--prefetch"},
    {O_VTOP, M_VAL, "--validate-top"},
    {O_VBAD, M_VAL, "--validate-bad"},
    {O_VSTEPS, M_VAL, "--validate-steps"},
    {O_VKEEP, M_VAL, "--validate-keep"},
    {O_VREUSE, M_VAL, "--validate-reuse"},
    {O_VROUNDS, M_VAL, "--validate-rounds"},
    {O_VCOMPUTE, M_VAL, "--compute"},
    {O_VDEVICE, M_VAL, "--device"},
    {O_OUTER, M_ALL, "--outer-shard"},
    {O_ARCH, M_PLAN | M_CALC, "--arch"},
    {O_LAYERS, M_PLAN | M_CALC, "--layers"},
    {O_WIDTH, M_PLAN | M_CALC, "--width"},
    {O_HEADS, M_PLAN | M_CALC, "--heads"},
    {O_KVH, M_PLAN | M_CALC, "--kv-heads"},
    {O_FFN, M_PLAN | M_CALC, "--ffn"},
    {O_SEQ, M_PLAN | M_CALC, "--seq"},
    {O_VOCAB, M_PLAN | M_CALC, "--vocab"},
    {O_MB, M_PLAN | M_CALC, "--micro-batch"},
    {O_ADT, M_PLAN | M_CALC, "--act-dtype"},
    {O_RECOMPUTE, M_CALC, "--recompute"},
};

static const char *mode_name(int m) {
  return m == M_PLAN ? "the planner" : m == M_CALC ? "the calculator (--shard without a topology)" : "--validate";
}

/* The first given flag the mode does not read, with the modes that do. */
static int refuse_ignored(const tune_opts *o, int mode) {
  for (size_t i = 0; i < sizeof flag_modes / sizeof flag_modes[0]; i++) {
    int c = flag_modes[i].code, m = flag_modes[i].modes;
    if (!o->given[c - O_PARAMS] || (m & mode)) continue;
    char who[160] = "";
    for (int k = M_PLAN; k <= M_VAL; k <<= 1)
      if (m & k) snprintf(who + strlen(who), sizeof who - strlen(who), "%s%s", who[0] ? " and " : "", mode_name(k));
    return cli_usage_error("tune", "%s means nothing to %s (it is read by %s)", flag_modes[i].name, mode_name(mode),
                           who);
  }
  return 0;
}

static hsr_status parse_opt(tune_opts *o, int c, const char *a) {
  static const char *const roots[] = {"none", "last", "outer", NULL};
  size_t z = 0;
  hsr_status st = HSR_OK;
  switch (c) {
  case O_PARAMS: return parse_double("--params", a, 1, 1e16, &o->params);
  case O_UNITS: o->units_given = 1; return parse_long("--units", a, 1, 1 << 20, &o->units);
  case O_UNIT_SIZE:
    st = parse_size("--unit-size", a, &z);
    if (st == HSR_OK && z < 64) st = hsr_error(HSR_ERR_INVALID, "--unit-size: at least 64 bytes (got '%s')", a);
    o->unit_bytes = (double)z;
    return st;
  case O_ROOT: return parse_choice("--root", a, roots, &o->root);
  case O_CMS: return parse_double("--compute-ms-per-unit", a, 0, 1e7, &o->compute_ms);
  case O_TFLOPS: return parse_double("--tflops", a, 1e-6, 1e6, &o->tflops);
  case O_TOKENS: return parse_double("--tokens", a, 1, 1e12, &o->tokens);
  case O_CFROM: o->compute_from = a; return HSR_OK;
  case O_BWD: return parse_double("--bwd-ratio", a, 0, 100, &o->bwd_ratio);
  case O_PDT: st = dtype_parse(a, &o->param_dtype); break;
  case O_RDT: st = dtype_parse(a, &o->reduce_dtype); break;
  case O_MICRO: return parse_long("--micro-batches", a, 1, 1024, &o->micro);
  case O_ACT: st = parse_size("--act-mem", a, &z), o->act_bytes = (double)z; return st;
  case O_WORLD: return parse_long("--world", a, 1, 1 << 22, &o->world);
  case O_NODES: return parse_long("--nodes", a, 1, 1 << 20, &o->nodes);
  case O_GPN: return parse_long("--gpus-per-node", a, 1, 1024, &o->gpus_per_node);
  case O_XML: o->xml = a; return HSR_OK;
  case O_NCCL: o->nccl_xml = a; return HSR_OK;
  case O_NHOST: return parse_long("--nccl-host", a, 0, 1 << 16, &o->nccl_host);
  case O_HW: o->hw = a; return HSR_OK;
  case O_BENCH:
    if (o->nbench == TUNE_MAX_BENCH) return hsr_error(HSR_ERR_INVALID, "at most %d --bench files", TUNE_MAX_BENCH);
    o->bench[o->nbench++] = a;
    return HSR_OK;
  case O_BUDGET:
    st = parse_size("--mem-budget", a, &z);
    if (st == HSR_OK && z == 0) st = hsr_error(HSR_ERR_INVALID, "--mem-budget: must be above 0 (e.g. 80G)");
    o->mem_budget = (double)z;
    return st;
  case O_SHARD: return parse_long("--shard", a, 1, 1 << 22, &o->shard);
  case O_REP: return parse_long("--replicate", a, 1, 1 << 22, &o->replicate);
  case O_STRAT: {
    hsr_rt_strategy s;
    st = hsr_rt_parse_strategy(a, &s);
    o->strategy = (int)s;
    return st;
  }
  case O_MAXPF: return parse_long("--max-prefetch", a, 0, 8, &o->max_prefetch);
  case O_NOPFS: o->prefetch_step = 0; return HSR_OK;
  case O_TOP: return parse_long("--top", a, 1, 1 << 20, &o->top);
  case O_JSON: o->json = 1; return HSR_OK;
  case O_PLOT: o->plot = a; return HSR_OK;
  case O_EMIT: o->emit_given = 1; return tune_parse_emit(a, &o->emit);
  case O_RESHARD: o->reshard_given = 1; return rt_parse_reshard(a, &o->reshard, &o->partial_k);
  case O_PF: o->prefetch_given = 1; return parse_long("--prefetch", a, 0, 8, &o->prefetch);
  case O_VAL: o->validate = 1; return HSR_OK;
  case O_OUTER: {
    hsr_rt_outer v;
    st = rt_parse_outer_shard(a, &v);
    o->outer = (int)v;
    return st;
  }
  case O_ARCH: o->arch_name = a; return HSR_OK;
  case O_LAYERS: return parse_long("--layers", a, 1, 4096, &o->layers);
  case O_WIDTH: return parse_long("--width", a, 1, 1 << 20, &o->width);
  case O_HEADS: return parse_long("--heads", a, 1, 1 << 16, &o->heads);
  case O_KVH: return parse_long("--kv-heads", a, 1, 1 << 16, &o->kv_heads);
  case O_FFN: return parse_long("--ffn", a, 1, 1 << 22, &o->ffn);
  case O_SEQ: return parse_long("--seq", a, 1, 1 << 24, &o->seq);
  case O_VOCAB: return parse_long("--vocab", a, 1, 1 << 26, &o->vocab);
  case O_MB: return parse_long("--micro-batch", a, 1, 1 << 20, &o->micro_batch);
  case O_ADT:
    o->act_dtype_given = 1;
    st = dtype_parse(a, &o->act_dtype);
    if (st == HSR_OK && o->act_dtype != HSR_F32 && o->act_dtype != HSR_BF16)
      st = hsr_error(HSR_ERR_INVALID, "--act-dtype: '%s' (valid: f32, bf16)", a);
    return st;
  case O_RECOMPUTE: o->recompute_given = 1; return rt_parse_recompute(a, &o->recompute);
  case O_VTOP: o->v_given = 1; return parse_long("--validate-top", a, 1, 16, &o->v_top);
  case O_VBAD: o->v_given = 1; return parse_long("--validate-bad", a, 0, 16, &o->v_bad);
  case O_VSTEPS: o->v_given = 1; return parse_long("--validate-steps", a, 1, 1000, &o->v_steps);
  case O_VKEEP: o->v_given = 1, o->v_keep = a; return HSR_OK;
  case O_VROUNDS: o->v_given = 1; return parse_long("--validate-rounds", a, 1, 20, &o->v_rounds);
  case O_VREUSE: o->v_given = 1, o->v_keep = a, o->v_reuse = 1; return HSR_OK;
  case O_VCOMPUTE: {
    static const char *const modes[] = {"cpu", "wait", NULL};
    o->v_given = 1;
    return parse_choice("--compute", a, modes, &o->v_wait);
  }
  case O_VDEVICE: {
    static const char *const kinds[] = {"host", "sim", NULL};
    o->v_given = 1;
    return parse_choice("--device", a, kinds, &o->v_sim);
  }
  default: return hsr_error(HSR_ERR_INVALID, "unknown option");
  }
  if (st == HSR_OK && c == O_PDT && o->param_dtype != HSR_F32 && o->param_dtype != HSR_BF16)
    st = hsr_error(HSR_ERR_INVALID, "--param-dtype: '%s' (valid: f32, bf16)", a);
  if (st == HSR_OK && c == O_RDT && o->reduce_dtype != HSR_F32 && o->reduce_dtype != HSR_BF16)
    st = hsr_error(HSR_ERR_INVALID, "--reduce-dtype: '%s' (valid: f32, bf16)", a);
  return st;
}

/* The model's shape from --arch and the shape flags, checked; --params and
 * --units follow from it unless given, and a given --params more than 10%
 * off the shape's, or a --unit-size, --act-mem or --tokens beside it, is a
 * contradiction. All before any work. */
static int resolve_shape(tune_opts *o) {
  int any = o->layers || o->width || o->heads || o->kv_heads || o->ffn || o->seq || o->vocab || o->micro_batch ||
            o->act_dtype_given;
  if (!o->arch_name && !any) {
    if (o->recompute_given)
      return cli_usage_error("tune", "--recompute needs the model's shape (--arch, or --layers --width --heads "
                                     "--seq --vocab): without it activations are not counted");
    return 0;
  }
  tune_arch *a = &o->arch;
  hsr_status st = tune_arch_preset(o->arch_name ? o->arch_name : "gpt", a);
  if (st != HSR_OK) return cli_usage_error("tune", "%s", hsr_last_error());
  if (o->layers) a->layers = (int)o->layers;
  if (o->width) a->width = (int)o->width;
  if (o->heads) a->heads = (int)o->heads;
  if (o->kv_heads) a->kv_heads = (int)o->kv_heads;
  if (o->ffn) a->ffn = (int)o->ffn;
  if (o->seq) a->seq = (int)o->seq;
  if (o->vocab) a->vocab = (int)o->vocab;
  if (o->micro_batch) a->micro_batch = (int)o->micro_batch;
  if (o->act_dtype_given) a->act_dtype = o->act_dtype;
  /* derived sizes follow the given ones: gpt's MLP is 4 x width, Llama's by its rule unless --ffn */
  if (a->family != HSR_TUNE_FAM_LLAMA || (o->width && !o->ffn)) a->ffn = (int)o->ffn;
  if ((st = tune_arch_check(a)) != HSR_OK) return cli_usage_error("tune", "%s", hsr_last_error());
  double P = tune_arch_params(a);
  char sh[200];
  snprintf(sh, sizeof sh, "%s: layers %d, width %d, heads %d, kv heads %d, ffn %d, vocab %d, seq %d", a->name,
           a->layers, a->width, a->heads, a->kv_heads, a->ffn, a->vocab, a->seq);
  if (o->params > 0 && (o->params < 0.9 * P || o->params > 1.1 * P))
    return cli_usage_error("tune",
                           "--params %g contradicts the model's shape (%s) of %.4g parameters: give --params "
                           "within 10%% of it, or leave it out",
                           o->params, sh, P);
  if (o->unit_bytes > 0)
    return cli_usage_error("tune", "--unit-size contradicts the model's shape (%s): the shape gives the units", sh);
  if (o->act_bytes > 0)
    return cli_usage_error("tune",
                           "--act-mem contradicts the model's shape (%s): the shape gives the "
                           "activations per recompute policy",
                           sh);
  double N = (double)a->micro_batch * a->seq;
  if (o->given[O_TOKENS - O_PARAMS] && o->tokens != N)
    return cli_usage_error("tune",
                           "--tokens %g contradicts the model's shape: --micro-batch %d x --seq %d = %g "
                           "tokens per rank per micro-batch",
                           o->tokens, a->micro_batch, a->seq, N);
  if (o->params <= 0) o->params = P;
  if (!o->units_given) o->units = a->layers + 1;
  if (!o->given[O_ROOT - O_PARAMS]) o->root = HSR_TUNE_ROOT_OUTER;
  o->tokens = N;
  o->has_shape = 1;
  return 0;
}

static int parse(int argc, char **argv, tune_opts *o) {
  static const struct option lo[] = {{"help", no_argument, 0, 'h'},
                                     {"params", 1, 0, O_PARAMS},
                                     {"units", 1, 0, O_UNITS},
                                     {"unit-size", 1, 0, O_UNIT_SIZE},
                                     {"root", 1, 0, O_ROOT},
                                     {"compute-ms-per-unit", 1, 0, O_CMS},
                                     {"tflops", 1, 0, O_TFLOPS},
                                     {"tokens", 1, 0, O_TOKENS},
                                     {"compute-from", 1, 0, O_CFROM},
                                     {"bwd-ratio", 1, 0, O_BWD},
                                     {"param-dtype", 1, 0, O_PDT},
                                     {"reduce-dtype", 1, 0, O_RDT},
                                     {"micro-batches", 1, 0, O_MICRO},
                                     {"act-mem", 1, 0, O_ACT},
                                     {"world", 1, 0, O_WORLD},
                                     {"nodes", 1, 0, O_NODES},
                                     {"gpus-per-node", 1, 0, O_GPN},
                                     {"xml", 1, 0, O_XML},
                                     {"nccl-xml", 1, 0, O_NCCL},
                                     {"nccl-host", 1, 0, O_NHOST},
                                     {"hw", 1, 0, O_HW},
                                     {"bench", 1, 0, O_BENCH},
                                     {"mem-budget", 1, 0, O_BUDGET},
                                     {"shard", 1, 0, O_SHARD},
                                     {"replicate", 1, 0, O_REP},
                                     {"strategy", 1, 0, O_STRAT},
                                     {"max-prefetch", 1, 0, O_MAXPF},
                                     {"no-prefetch-step", 0, 0, O_NOPFS},
                                     {"top", 1, 0, O_TOP},
                                     {"json", 0, 0, O_JSON},
                                     {"plot", 1, 0, O_PLOT},
                                     {"emit", 1, 0, O_EMIT},
                                     {"reshard", 1, 0, O_RESHARD},
                                     {"prefetch", 1, 0, O_PF},
                                     {"validate", 0, 0, O_VAL},
                                     {"validate-top", 1, 0, O_VTOP},
                                     {"validate-bad", 1, 0, O_VBAD},
                                     {"validate-steps", 1, 0, O_VSTEPS},
                                     {"validate-keep", 1, 0, O_VKEEP},
                                     {"validate-reuse", 1, 0, O_VREUSE},
                                     {"validate-rounds", 1, 0, O_VROUNDS},
                                     {"compute", 1, 0, O_VCOMPUTE},
                                     {"device", 1, 0, O_VDEVICE},
                                     {"outer-shard", 1, 0, O_OUTER},
                                     {"arch", 1, 0, O_ARCH},
                                     {"layers", 1, 0, O_LAYERS},
                                     {"width", 1, 0, O_WIDTH},
                                     {"heads", 1, 0, O_HEADS},
                                     {"kv-heads", 1, 0, O_KVH},
                                     {"ffn", 1, 0, O_FFN},
                                     {"seq", 1, 0, O_SEQ},
                                     {"vocab", 1, 0, O_VOCAB},
                                     {"micro-batch", 1, 0, O_MB},
                                     {"act-dtype", 1, 0, O_ADT},
                                     {"recompute", 1, 0, O_RECOMPUTE},
                                     {0, 0, 0, 0}};
  *o = (tune_opts){.units = 32,
                   .bwd_ratio = 2,
                   .top = 10,
                   .micro = 1,
                   .max_prefetch = 2,
                   .prefetch = 1,
                   .prefetch_step = 1,
                   .strategy = -1,
                   .tokens = 4096,
                   .param_dtype = HSR_F32,
                   .reduce_dtype = HSR_F32,
                   .v_top = 3,
                   .v_bad = 2,
                   .v_steps = 4,
                   .v_rounds = 1,
                   .outer = -1,
                   .nccl_host = -1};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    if (c == 'h') {
      usage();
      return -1;
    }
    if (c >= O_PARAMS && c < O_COUNT) o->given[c - O_PARAMS] = 1;
    if (c == '?' || c == ':') return cli_usage_error("tune", "unknown option or missing value '%s'", argv[optind - 1]);
    if (parse_opt(o, c, optarg) != HSR_OK) return cli_usage_error("tune", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("tune", "unexpected argument '%s'", argv[optind]);
  int sources = (o->compute_ms > 0) + (o->tflops > 0) + (o->compute_from != NULL);
  if (sources > 1) return cli_usage_error("tune", "give one of --compute-ms-per-unit, --tflops and --compute-from");
  if (o->params > 0 && o->unit_bytes > 0) return cli_usage_error("tune", "give one of --params and --unit-size");
  if (o->xml && o->nccl_xml) return cli_usage_error("tune", "give one of --xml (hwloc) and --nccl-xml (NCCL)");
  if ((o->xml || o->nccl_xml) && o->gpus_per_node)
    return cli_usage_error("tune", "--gpus-per-node goes without --xml/--nccl-xml (the file says how many)");
  if (o->nccl_host >= 0 && !o->nccl_xml) return cli_usage_error("tune", "--nccl-host goes with --nccl-xml");
  int r = resolve_shape(o);
  if (r) return r;
  if (!o->validate && o->params <= 0 && o->unit_bytes <= 0)
    return cli_usage_error("tune",
                           "give the model: --params N (e.g. 7e9) [--units U], --unit-size BYTES, or "
                           "its shape (--arch %s, or --layers --width --heads --seq --vocab)",
                           tune_arch_names());
  if (o->params > 0 && o->params < o->units)
    return cli_usage_error("tune", "--params %g is fewer than one parameter per unit (--units %ld)", o->params,
                           o->units);
  if (o->replicate && !o->shard) return cli_usage_error("tune", "--replicate goes with --shard (the calculator)");
  if (o->v_given && !o->validate)
    return cli_usage_error("tune",
                           "--validate-top, -bad, -steps, -rounds, -keep, -reuse and --compute go with --validate");
  /* files before any work: a missing input is a usage error, an output must be writable */
  hsr_status st = HSR_OK;
  for (int i = 0; st == HSR_OK && i < o->nbench; i++) st = path_check_read("--bench", o->bench[i]);
  if (st == HSR_OK && o->compute_from) st = path_check_read("--compute-from", o->compute_from);
  if (st == HSR_OK && o->xml) st = path_check_read("--xml", o->xml);
  if (st == HSR_OK && o->nccl_xml) st = path_check_read("--nccl-xml", o->nccl_xml);
  if (st == HSR_OK && o->plot) st = path_check_output("--plot", o->plot);
  for (int i = 0; st == HSR_OK && o->plot && i < o->nbench; i++)
    st = path_check_distinct("--plot", o->plot, "--bench", o->bench[i]);
  if (st == HSR_OK) st = path_check_distinct("--plot", o->plot, "--compute-from", o->compute_from);
  if (st == HSR_OK) st = path_check_distinct("--plot", o->plot, "--xml", o->xml);
  if (st == HSR_OK) st = path_check_distinct("--plot", o->plot, "--nccl-xml", o->nccl_xml);
  if (st == HSR_OK && o->v_keep)
    st = o->v_reuse ? path_check_dir("--validate-reuse", o->v_keep, 0) : path_check_mkdir("--validate-keep", o->v_keep);
  if (st != HSR_OK) return cli_usage_error("tune", "%s", hsr_last_error());
  return 0;
}

/* ---- topology ---- */
static hsr_status synthetic_gpn(const tune_opts *o, hsr_cluster **cl, char *desc, size_t len) {
  long G = o->gpus_per_node, W = o->world ? o->world : G * (o->nodes ? o->nodes : 1);
  if (W % G)
    return hsr_error(HSR_ERR_INVALID, "--world %ld is not a multiple of --gpus-per-node %ld (valid: %ld, %ld, ...)", W,
                     G, G * (W / G ? W / G : 1), G * (W / G + 1));
  if (o->nodes && o->nodes * G != W)
    return hsr_error(HSR_ERR_INVALID, "--nodes %ld x --gpus-per-node %ld != --world %ld", o->nodes, G, W);
  int *node = malloc(sizeof(int) * (size_t)W), *gpu = malloc(sizeof(int) * (size_t)W);
  if (!node || !gpu) {
    free(node), free(gpu);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  for (long r = 0; r < W; r++) node[r] = (int)(r / G), gpu[r] = (int)(r % G);
  hsr_status st = cluster_create((int)W, node, gpu, node, cl); /* one domain per node */
  free(node), free(gpu);
  snprintf(desc, len, "%ld nodes x %ld GPUs (--gpus-per-node: one NVLink domain per node assumed)", W / G, G);
  return st;
}

static hsr_status offline(const tune_opts *o, hsr_topo *t, hsr_cluster **cl, char *desc, size_t len) {
  int g = topo_num_gpus(t);
  long nodes = o->nodes, world = o->world;
  if (!nodes) nodes = world && g ? (world + g - 1) / g : 1;
  if (!world) world = nodes * (g ? g : 1);
  HSR_CHECK(cluster_synthetic(t, (int)nodes, (int)world, cl));
  char sum[160];
  topo_summary(t, sum, sizeof sum);
  snprintf(desc, len, "%ld nodes of %s (%s)", nodes, topo_host(t), sum);
  return HSR_OK;
}

/* The cluster view: --gpus-per-node, a file, or the live job (*boot kept for rank 0's printing). */
static hsr_status build_cluster(const tune_opts *o, hsr_boot **boot, hsr_cluster **cl, char *desc, size_t len) {
  if (o->gpus_per_node) return synthetic_gpn(o, cl, desc, len);
  hsr_topo *t = NULL;
  HSR_CHECK(o->nccl_xml ? topo_load_nccl(o->nccl_xml, o->nccl_host < 0 ? 0 : (int)o->nccl_host, &t, NULL)
                        : topo_discover(o->xml, &t));
  hsr_status st = HSR_OK;
  if (o->world || o->nodes || o->xml || o->nccl_xml) {
    st = offline(o, t, cl, desc, len);
  } else {
    st = hsr_boot_init(boot);
    if (st == HSR_OK && boot_is_singleton(*boot))
      st = hsr_error(HSR_ERR_INVALID, "no topology: give --world W with --gpus-per-node G, --xml FILE or "
                                      "--nccl-xml FILE, or run under a launcher (hsr-run -n 8 -- hsr tune ...)");
    if (st == HSR_OK) st = cluster_gather(*boot, t, cl);
    if (st == HSR_OK) {
      char sum[160];
      topo_summary(t, sum, sizeof sum);
      snprintf(desc, len, "this job: %d ranks on %d nodes (%s)", hsr_boot_size(*boot), boot_num_nodes(*boot), sum);
    }
  }
  topo_free(t);
  return st;
}

/* ---- the calculator ---- */
static int calc_run(tune_opts *o, tune_ctx *xp);
static int calculator(tune_opts *o) {
  tune_ctx x = {.o = o};
  hsr_status st = tune_setup(&x, NULL);
  if (st != HSR_OK) {
    tune_ctx_free(&x);
    return cli_fail("tune", st);
  }
  int code = calc_run(o, &x);
  tune_ctx_free(&x);
  return code;
}

static int calc_run(tune_opts *o, tune_ctx *xp) {
  tune_ctx x = *xp;
  hsr_status st = HSR_OK;
  hsr_rt_config cfg;
  hsr_rt_config_default(&cfg);
  int S = (int)o->shard, R = o->replicate ? (int)o->replicate : 1;
  cfg.strategy = o->strategy >= 0 ? (hsr_rt_strategy)o->strategy : R > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
  if (cfg.strategy == HSR_RT_DDP) S = 1, R = R > 1 ? R : (int)o->shard;
  if (o->outer >= 0) cfg.outer_shard = (hsr_rt_outer)o->outer;
  if (o->reshard_given) cfg.reshard = o->reshard, cfg.partial_k = o->partial_k;
  cfg.prefetch = (int)o->prefetch;
  cfg.recompute = o->recompute; /* --recompute: with a shape (none without) */
  cfg.param_dtype = o->param_dtype, cfg.reduce_dtype = o->reduce_dtype, cfg.micro_batches = (int)o->micro;
  hsr_rt_config mesh = cfg; /* strategy and mesh: the runtime's one check, on this R x S */
  mesh.shard = S, mesh.replicate = R;
  if (rt_config_resolve(&mesh, S * R, 0, NULL, NULL) != HSR_OK) return cli_usage_error("tune", "%s", hsr_last_error());
  int K = cfg.reshard == HSR_RT_RESHARD_PARTIAL ? cfg.partial_k : S;
  tune_shape sh[HSR_RT_GROUP_COUNT] = {{S, 1, S, 1}, {R, R, 1, R}, {K, 1, K, 1}};
  tune_result r;
  st = tune_eval(&x.model, &x.net, &cfg, S, R, sh, &r);
  if (st != HSR_OK) return cli_fail("tune", st);
  if (o->json) {
    st = tune_print_ledger_json(&x, &r);
    if (st != HSR_OK) return cli_fail("tune", st);
  } else {
    tune_print_ledger(&x, &r);
  }
  return HSR_EXIT_OK;
}

static int plan(tune_opts *o) {
  hsr_boot *boot = NULL;
  hsr_cluster *cl = NULL;
  tune_ctx x = {.o = o};
  tune_plan p = {0};
  hsr_status st = build_cluster(o, &boot, &cl, x.topo_desc, sizeof x.topo_desc);
  int rank0 = !boot || hsr_boot_rank(boot) == 0, code = HSR_EXIT_OK;
  x.live = boot && rank0; /* rank 0 plans, on its own GPU's memory */
  if (st == HSR_OK) st = tune_setup(&x, cl);
  if (st == HSR_OK && rank0) {
    tune_space sp;
    tune_space_default(&sp);
    sp.mem_budget = x.budget;
    sp.max_prefetch = (int)o->max_prefetch;
    sp.prefetch_step = o->prefetch_step;
    sp.micro_batches = (int)o->micro;
    sp.param_dtype = o->param_dtype, sp.reduce_dtype = o->reduce_dtype;
    sp.only_shard = (int)o->shard;
    sp.only_strategy = o->strategy;
    sp.only_outer = o->outer;
    st = tune_plan_run(cl, &x.model, &x.net, &sp, &p);
  }
  if (st == HSR_OK && rank0) {
    static char explain[8192];
    tune_explain(&p, &x.net, explain, sizeof explain);
    if (o->json) {
      st = tune_print_json(&x, &p, explain);
    } else {
      tune_print_table(&x, &p);
      printf("\n%s", explain);
      if (!o->has_shape && o->act_bytes <= 0)
        printf("note: activations are not counted in these peaks: give the model's shape (--arch, or --layers "
               "--width --heads --seq --vocab) to plan them and their recompute, or --act-mem BYTES\n");
    }
    if (st == HSR_OK && o->emit_given && p.nfeasible > 0) {
      static char em[8192];
      st = tune_emit(&p.cand[0], o->emit, em, sizeof em);
      if (st == HSR_OK) printf("%s%s", o->json ? "" : "\n", em);
    }
    if (st == HSR_OK && o->plot) st = tune_plot(&x, &p, NULL, NULL, 0, o->plot);
    fflush(stdout);
    if (st == HSR_OK && p.nfeasible == 0) {
      fprintf(stderr, "hsr tune: no layout fits %s: the smallest needs %.2f GiB more per rank\n", x.budget_desc,
              p.min_over_budget / (1024.0 * 1024 * 1024));
      code = HSR_EXIT_USAGE;
    }
  }
  if (st != HSR_OK) code = cli_fail("tune", st);
  tune_plan_free(&p);
  cluster_free(cl);
  if (boot) hsr_boot_finalize(boot);
  tune_ctx_free(&x);
  return code;
}

int cmd_tune(int argc, char **argv) {
  tune_opts o;
  int pr = parse(argc, argv, &o);
  if (pr < 0) return HSR_EXIT_OK;
  if (pr > 0) return pr;
  int topo = o.world || o.nodes || o.gpus_per_node || o.xml || o.nccl_xml;
  int mode = o.validate ? M_VAL : o.shard && !topo && !getenv("PMIX_NAMESPACE") ? M_CALC : M_PLAN;
  if (mode == M_PLAN && (o.reshard_given || o.prefetch_given))
    return cli_usage_error("tune",
                           "--%s goes with the calculator (--shard without a topology); the planner "
                           "tries every policy (--max-prefetch bounds the depth)",
                           o.reshard_given ? "reshard" : "prefetch");
  if ((pr = refuse_ignored(&o, mode))) return pr;
  if (mode == M_VAL) return tune_validate(&o);
  if (mode == M_CALC) return calculator(&o);
  return plan(&o);
}
