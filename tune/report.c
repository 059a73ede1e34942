/* What the planner says in words: the winner and the runner-up explained,
 * and a layout written in FSDP2's, torchtitan's and DeepSpeed's vocabulary. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tune/tune.h"
#include "common/common_internal.h"
#include "common/dtype_internal.h"
#include "runtime/runtime_internal.h"

typedef struct out {
  char *b;
  size_t len, o;
} out;

static void put(out *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *w, const char *fmt, ...) {
  if (w->o >= w->len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(w->b + w->o, w->len - w->o, fmt, ap);
  va_end(ap);
  if (k > 0) w->o += (size_t)k;
  if (w->o >= w->len) w->o = w->len - 1;
}

static const double GiB = 1024.0 * 1024 * 1024;

static void human(char *b, size_t n, double v) { /* decimal, like bandwidths */
  if (v >= 1e12)
    snprintf(b, n, "%.2f TB", v / 1e12);
  else if (v >= 1e9)
    snprintf(b, n, "%.2f GB", v / 1e9);
  else if (v >= 1e6)
    snprintf(b, n, "%.2f MB", v / 1e6);
  else
    snprintf(b, n, "%.1f KB", v / 1e3);
}

static double fabric(const tune_result *r) {
  double f = 0;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_TUNE_OPS; op++) f += r->bytes[g][op].fabric_sent;
  return f;
}

static int sharded(const tune_result *r) { return rt_strategy_sharding(r->cfg.strategy).params; }

static const char *where_of(const tune_shape *s, const tune_net *net) {
  if (s->n <= 1) return "on the rank itself";
  if (s->nodes == 1) return net->device_is_gpu ? "inside one node (NVLink)" : "inside one node (shared memory)";
  if (net->device_is_gpu && s->domains == 1) return "inside one NVLink domain across nodes";
  return "across nodes";
}

/* The same layout with another reshard policy, if it was evaluated. */
static const tune_result *sibling(const tune_plan *p, const tune_result *r, hsr_rt_reshard pol) {
  for (int i = 0; i < p->n; i++) {
    const tune_result *c = &p->cand[i];
    if (c->S == r->S && c->cfg.strategy == r->cfg.strategy && c->cfg.prefetch == r->cfg.prefetch &&
        c->cfg.sync == r->cfg.sync && c->cfg.reshard == pol && c->cfg.outer_shard == r->cfg.outer_shard &&
        c->cfg.recompute == r->cfg.recompute && c != r)
      return c;
  }
  return NULL;
}

/* The same layout with the other outer shard (hybrid), if it was evaluated. */
static const tune_result *outer_sibling(const tune_plan *p, const tune_result *r) {
  for (int i = 0; i < p->n; i++) {
    const tune_result *c = &p->cand[i];
    if (c->S == r->S && c->cfg.strategy == r->cfg.strategy && c->cfg.prefetch == r->cfg.prefetch &&
        c->cfg.sync == r->cfg.sync && c->cfg.reshard == r->cfg.reshard && c->cfg.partial_k == r->cfg.partial_k &&
        c->cfg.outer_shard != r->cfg.outer_shard && c->cfg.recompute == r->cfg.recompute)
      return c;
  }
  return NULL;
}

/* The outer shard's trade: the optimizer state it no longer keeps on every
 * replica against the all-gather over R after AdamW, which the next
 * forward waits for (the all-reduce it replaces ran under backward). */
static void outer_trade(out *w, const tune_plan *p, const tune_result *r, const tune_net *net) {
  const tune_result *o = outer_sibling(p, r);
  if (!o || r->cfg.strategy != HSR_RT_HYBRID) return;
  int is_opt = r->cfg.outer_shard == HSR_RT_OUTER_OPTIM;
  const tune_result *none = is_opt ? o : r, *opt = is_opt ? r : o;
  const tune_bytes *ag = &opt->bytes[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLGATHER];
  double alone = 0;
  size_t pes = dtype_size(opt->cfg.param_dtype);
  tune_vol v;
  if (ag->calls > 0 && opt->R > 0 &&
      tune_volume(net, HSR_OP_ALLGATHER, &opt->shape[HSR_RT_GROUP_REPLICATE],
                  ag->full / ag->calls / opt->R / (double)pes, pes, &v) == HSR_OK)
    alone = tune_coll_time(net, &v) * ag->calls * 1e3;
  char a[32], b[32];
  double none_x = 0, opt_x = 0;
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    none_x += none->bytes[HSR_RT_GROUP_REPLICATE][op].fabric_sent;
    opt_x += opt->bytes[HSR_RT_GROUP_REPLICATE][op].fabric_sent;
  }
  human(a, sizeof a, opt_x);
  human(b, sizeof b, none_x);
  int same_dt = opt->cfg.param_dtype == opt->cfg.reduce_dtype;
  put(w,
      "    outer-shard optim %s none: %+.2f GiB persistent per rank (the optimizer state over all %d ranks instead "
      "of %d), %+.2f GiB peak, %+.1f ms per step: after AdamW each unit's 1/%d piece is all-gathered over the "
      "replicate group (%.0f per step, %.1f ms alone) and the next forward waits for it; across nodes per rank %s "
      "against %s (%s, plus the norm's 8 bytes)\n",
      is_opt ? "vs" : "instead of", ((double)opt->persistent - (double)none->persistent) / GiB, opt->S * opt->R, opt->S,
      (opt->peak_total - none->peak_total) / GiB, opt->step_ms - none->step_ms, opt->R, ag->calls, alone, a, b,
      same_dt ? "reduce-scatter + all-gather = the all-reduce they replace"
              : "the all-gather moves parameters in the param dtype where the all-reduce moved gradients in the "
                "reduce dtype");
}

static void describe(out *w, const tune_plan *p, const tune_result *r, const tune_net *net) {
  char lab[96], a[32], b[32];
  tune_label(r, lab, sizeof lab);
  char pm[48] = "";
  if (r->step_pm_ms > 0) snprintf(pm, sizeof pm, " +- %.1f", r->step_pm_ms);
  put(w, "  %s: step %.1f%s ms (compute %.1f, communication %.1f, exposed %.1f), peak %.2f GiB per rank\n", lab,
      r->step_ms, pm, r->compute_ms, r->comm_ms, r->exposed_ms, r->peak_total / GiB);
  const tune_bytes *ag = &r->bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER];
  const tune_bytes *pag = &r->bytes[HSR_RT_GROUP_PARTIAL][HSR_OP_ALLGATHER];
  if (ag->calls + pag->calls > 0) {
    human(a, sizeof a, ag->full);
    put(w, "    all-gathers: %.0f per step in the shard group of %d %s (%s gathered)", ag->calls,
        r->shape[HSR_RT_GROUP_SHARD].n, where_of(&r->shape[HSR_RT_GROUP_SHARD], net), a);
    if (pag->calls > 0) {
      human(b, sizeof b, pag->full);
      put(w, "; %.0f in the partial group of %d %s (%s)", pag->calls, r->shape[HSR_RT_GROUP_PARTIAL].n,
          where_of(&r->shape[HSR_RT_GROUP_PARTIAL], net), b);
    }
    put(w, "\n");
  }
  double f = fabric(r);
  if (f > 0) {
    double sh = 0, rep = 0;
    for (int op = 0; op < HSR_TUNE_OPS; op++) {
      sh += r->bytes[HSR_RT_GROUP_SHARD][op].fabric_sent;
      rep += r->bytes[HSR_RT_GROUP_REPLICATE][op].fabric_sent;
    }
    human(a, sizeof a, f);
    human(b, sizeof b, r->fabric_all_ranks);
    put(w, "    crosses nodes: %s per rank per step (%s over all ranks)", a, b);
    if (rep > 0 && sh > 0)
      put(w, ": the shard group's collectives and the replicate group's\n");
    else if (rep > 0 && r->cfg.outer_shard == HSR_RT_OUTER_OPTIM)
      put(w,
          ": only the replicate group's reduce-scatter of each unit's 1/%d gradient shard and all-gather of its "
          "updated parameters (groups of %d)\n",
          r->S, r->shape[HSR_RT_GROUP_REPLICATE].n);
    else if (rep > 0)
      put(w, ": only the replicate all-reduce of each unit's 1/%d gradient shard (groups of %d)\n", r->S,
          r->shape[HSR_RT_GROUP_REPLICATE].n);
    else
      put(w, ": the shard group's gathers and reduce-scatters (it spans %d nodes)\n",
          r->shape[HSR_RT_GROUP_SHARD].nodes);
  } else {
    put(w, "    nothing crosses nodes\n");
  }
  if (!sharded(r)) return;
  outer_trade(w, p, r, net);
  const tune_result *full = sibling(p, r, HSR_RT_RESHARD_FULL);
  if (r->cfg.reshard != HSR_RT_RESHARD_FULL && full)
    put(w, "    reshard %s vs full: %+.2f GiB peak per rank, %+.1f ms per step\n",
        r->cfg.reshard == HSR_RT_RESHARD_NONE ? "none" : "partial", (r->peak_total - full->peak_total) / GiB,
        r->step_ms - full->step_ms);
}

/* The same layout with another recompute policy, if it was evaluated. */
static const tune_result *rc_sibling(const tune_plan *p, const tune_result *r, hsr_rt_recompute rc) {
  for (int i = 0; i < p->n; i++) {
    const tune_result *c = &p->cand[i];
    if (c->S == r->S && c->cfg.strategy == r->cfg.strategy && c->cfg.prefetch == r->cfg.prefetch &&
        c->cfg.sync == r->cfg.sync && c->cfg.reshard == r->cfg.reshard && c->cfg.partial_k == r->cfg.partial_k &&
        c->cfg.outer_shard == r->cfg.outer_shard && c->cfg.recompute == rc)
      return c;
  }
  return NULL;
}

/* Which recompute the winner needs and why: the cheaper policies of its
 * layout, over the budget by how much, and the fastest layout that needs
 * none; or, with none, what recompute would save. */
static void recompute_said(out *w, const tune_plan *p, const tune_result *win) {
  put(w, "    activations: %.2f GiB per rank with recompute %s", win->act_bytes / GiB,
      hsr_rt_recompute_name(win->cfg.recompute));
  if (win->cfg.recompute == HSR_RT_RECOMPUTE_NONE) {
    put(w, ": no recompute needed");
    for (int k = HSR_RT_RECOMPUTE_FULL; k < HSR_TUNE_RECOMPUTES; k++) {
      const tune_result *c = rc_sibling(p, win, (hsr_rt_recompute)k);
      if (c)
        put(w, "; %s would save %.2f GiB for %+.1f ms per step", hsr_rt_recompute_name(c->cfg.recompute),
            (win->peak_total - c->peak_total) / GiB, c->step_ms - win->step_ms);
    }
    put(w, "\n");
    return;
  }
  const tune_result *none = rc_sibling(p, win, HSR_RT_RECOMPUTE_NONE);
  put(w, " (%+.1f ms per step of recompute)\n", none ? win->step_ms - none->step_ms : 0.0);
  /* the cheaper policies of the same layout: none, and selective when full won */
  for (int k = 0; k < 2; k++) {
    hsr_rt_recompute rc = k == 0 ? HSR_RT_RECOMPUTE_NONE : HSR_RT_RECOMPUTE_SELECTIVE;
    if (rc == HSR_RT_RECOMPUTE_SELECTIVE && win->cfg.recompute != HSR_RT_RECOMPUTE_FULL) continue;
    const tune_result *c = rc_sibling(p, win, rc);
    if (!c) continue;
    if (!c->feasible)
      put(w, "    %s does not fit: needs %.2f GiB more (peak %.2f GiB, activations %.2f GiB)\n",
          hsr_rt_recompute_name(rc), (c->peak_total - p->mem_budget) / GiB, c->peak_total / GiB, c->act_bytes / GiB);
    else
      put(w, "    %s fits this layout too but is %+.1f ms per step\n", hsr_rt_recompute_name(rc),
          c->step_ms - win->step_ms);
  }
  const tune_result *best_none = NULL;
  for (int i = 0; i < p->nfeasible && !best_none; i++)
    if (p->cand[i].cfg.recompute == HSR_RT_RECOMPUTE_NONE) best_none = &p->cand[i];
  char lab[96];
  if (best_none)
    put(w, "    the fastest layout without recompute, %s, is %+.1f ms per step\n",
        tune_label(best_none, lab, sizeof lab), best_none->step_ms - win->step_ms);
  else
    put(w, "    no layout fits without recompute\n");
}

/* The measurement that would tell two layouts apart, by the term their
 * difference rests on. */
static void separate(out *w, const tune_result *a, const tune_result *b, const tune_net *net) {
  int k;
  if (tune_separating_term(a, b, &k) != HSR_OK) return;
  char la[96], lb[96];
  tune_label(a, la, sizeof la), tune_label(b, lb, sizeof lb);
  if (k == HSR_TUNE_UNC_INTRA || k == HSR_TUNE_UNC_CROSS) {
    int t = k == HSR_TUNE_UNC_INTRA ? HSR_TUNE_INTRA : HSR_TUNE_CROSS;
    put(w,
        "    they differ most in their %s (fitted to %.1f%% rms): more rows of `hsr bench all_gather|reduce_scatter|"
        "all_reduce --group %s -J` at their message sizes (more -n iterations, --validate-rounds) would separate "
        "them\n",
        tune_unc_name(k), 100 * net->rel_rms[t], t == HSR_TUNE_INTRA ? "shard" : "replicate");
  } else if (k == HSR_TUNE_UNC_COMPUTE) {
    put(w,
        "    they differ most in how much compute hides their communication (compute fitted to %.1f%% rms): a "
        "measured compute per unit (--compute-from a trace or hsr bench step --json) would separate them\n",
        100 * net->compute_rel_rms);
  } else {
    put(w,
        "    the model's own residual in the probes (%.1f%% of a step) covers the difference: measure both "
        "(hsr bench step --shard %d ... and --shard %d ..., or hsr tune --validate, which runs the top layouts)\n",
        100 * net->step_rel_rms, a->S, b->S);
  }
}

/* The top layouts that tie, said once each: which, by how much, and what
 * would tell them apart. */
static void ties_said(out *w, const tune_plan *p, const tune_net *net) {
  int said = 0;
  for (int i = 1; i < p->nfeasible && i < 10; i++) {
    const tune_result *r = &p->cand[i];
    if (r->tie != 0) continue;
    const tune_result *a = &p->cand[0];
    char la[96], lb[96];
    if (!said++) put(w, "ties (the difference is within the uncertainty of the prediction):\n");
    put(w, "  %s and %s: %+.1f ms apart, %s\n", tune_label(a, la, sizeof la), tune_label(r, lb, sizeof lb),
        r->step_ms - a->step_ms,
        a->step_pm_ms > 0 ? "within one sigma of the fit's residuals"
                          : "the same predicted step within the ranking's resolution (0.2%)");
    if (a->step_pm_ms > 0) separate(w, a, r, net);
    if (said == 3) break;
  }
}

hsr_status tune_explain(const tune_plan *p, const tune_net *net, char *buf, size_t len) {
  if (!p || !net || !buf || !len) return hsr_error(HSR_ERR_INVALID, "tune_explain: NULL argument");
  out w = {buf, len, 0};
  buf[0] = '\0';
  if (p->nfeasible == 0) {
    put(&w, "no layout fits the memory budget: the smallest needs %.2f GiB more per rank\n", p->min_over_budget / GiB);
    return HSR_OK;
  }
  const tune_result *win = &p->cand[0];
  put(&w, "recommended:\n");
  describe(&w, p, win, net);
  if (p->recompute_searched) recompute_said(&w, p, win);
  /* a partial:K of the winner's mesh: what it would cost and save */
  if (sharded(win) && win->cfg.reshard != HSR_RT_RESHARD_PARTIAL) {
    const tune_result *best = NULL;
    for (int i = 0; i < p->n; i++) {
      const tune_result *c = &p->cand[i];
      if (c->S == win->S && c->cfg.reshard == HSR_RT_RESHARD_PARTIAL && c->cfg.prefetch == win->cfg.prefetch &&
          c->cfg.outer_shard == win->cfg.outer_shard && c->cfg.recompute == win->cfg.recompute && c->feasible &&
          (!best || c->step_ms < best->step_ms))
        best = c;
    }
    if (best)
      put(&w,
          "    partial:%d instead: %+.2f GiB peak per rank, %+.1f ms per step (its backward gathers in groups of %d "
          "%s)\n",
          best->cfg.partial_k, (best->peak_total - win->peak_total) / GiB, best->step_ms - win->step_ms,
          best->shape[HSR_RT_GROUP_PARTIAL].n, where_of(&best->shape[HSR_RT_GROUP_PARTIAL], net));
  }
  if (p->nfeasible > 1) {
    const tune_result *ru = &p->cand[1];
    /* the best layout of another mesh or strategy is the informative runner-up */
    for (int i = 1; i < p->nfeasible; i++)
      if (p->cand[i].S != win->S || p->cand[i].cfg.strategy != win->cfg.strategy) {
        ru = &p->cand[i];
        break;
      }
    put(&w, "runner-up (%+.1f ms, %+.1f%%):\n", ru->step_ms - win->step_ms,
        win->step_ms > 0 ? 100 * (ru->step_ms - win->step_ms) / win->step_ms : 0);
    describe(&w, p, ru, net);
    ties_said(&w, p, net);
  }
  if (tune_net_uses_defaults(net))
    put(&w,
        "note: some figures are built-in defaults for '%s' (labelled 'default' in --json), not measured here; "
        "calibrate with --bench FILE.json (hsr bench ... -J)\n",
        net->name);
  return HSR_OK;
}

hsr_status tune_parse_emit(const char *s, tune_emit_kind *out) {
  static const char *const names[] = {"fsdp2", "torchtitan", "deepspeed", NULL};
  int k = 0;
  HSR_CHECK(parse_choice("--emit", s, names, &k));
  *out = (tune_emit_kind)k;
  return HSR_OK;
}

/* Recompute in PyTorch's words, before fully_shard wraps the blocks:
 * checkpoint_wrapper (torch.utils.checkpoint) per block for full; the
 * selective checkpoint contexts with a policy that saves the matmuls and
 * the attention for selective. */
static void emit_fsdp2_recompute(out *w, const tune_result *r) {
  if (r->cfg.recompute == HSR_RT_RECOMPUTE_FULL) {
    put(w, "# recompute full: each block keeps only its input and recomputes its forward in its backward\n"
           "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
           "blocks = [checkpoint_wrapper(b) for b in blocks]  # put them back in model.layers before fully_shard\n");
  } else if (r->cfg.recompute == HSR_RT_RECOMPUTE_SELECTIVE) {
    put(w, "# recompute selective: keep the matmuls' and the attention's outputs, recompute the rest\n"
           "from functools import partial\n"
           "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
           "from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts\n"
           "_save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention.default,\n"
           "         torch.ops.aten._scaled_dot_product_efficient_attention.default}\n"
           "def _policy(ctx, op, *args, **kwargs):\n"
           "    return CheckpointPolicy.MUST_SAVE if op in _save else CheckpointPolicy.PREFER_RECOMPUTE\n"
           "blocks = [checkpoint_wrapper(b, context_fn=partial(create_selective_checkpoint_contexts, _policy))\n"
           "          for b in blocks]  # put them back in model.layers before fully_shard\n");
  }
}

static void emit_fsdp2(out *w, const tune_result *r) {
  const char *pd = r->cfg.param_dtype == HSR_BF16 ? "torch.bfloat16" : "torch.float32";
  const char *rd = r->cfg.reduce_dtype == HSR_BF16 ? "torch.bfloat16" : "torch.float32";
  put(w, "import torch\nfrom torch.distributed.device_mesh import init_device_mesh\n");
  if (!rt_strategy_sharding(r->cfg.strategy).params) {
    put(w, "from torch.nn.parallel import DistributedDataParallel as DDP\n\n");
    put(w, "mesh = init_device_mesh(\"cuda\", (%d,), mesh_dim_names=(\"dp\",))\n", r->R * r->S);
    if (r->cfg.recompute != HSR_RT_RECOMPUTE_NONE) {
      put(w, "blocks = list(model.layers)\n");
      emit_fsdp2_recompute(w, r);
    }
    put(w, "model = DDP(model, process_group=mesh.get_group())\n");
    if (r->cfg.strategy != HSR_RT_DDP)
      put(w,
          "# %s: optimizer state sharded over groups of %d; FSDP2 has no such mode. Nearest in PyTorch:\n"
          "# torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO-1, over the whole group), or\n"
          "# DeepSpeed's stage %d (--emit deepspeed)\n",
          rt_strategy_name(r->cfg.strategy), r->S, r->cfg.strategy == HSR_RT_ZERO1 ? 1 : 2);
    return;
  }
  put(w, "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard\n\n");
  if (r->R > 1)
    put(w, "mesh = init_device_mesh(\"cuda\", (%d, %d), mesh_dim_names=(\"replicate\", \"shard\"))  # HSDP\n", r->R,
        r->S);
  else
    put(w, "mesh = init_device_mesh(\"cuda\", (%d,), mesh_dim_names=(\"shard\",))\n", r->S);
  if (r->cfg.outer_shard == HSR_RT_OUTER_OPTIM)
    put(w,
        "# outer-shard optim (HFSDP: master, m and v sharded over all %d ranks, parameters over %d) has no FSDP2\n"
        "# form: FSDP2 shards the optimizer state like the parameters, so this HSDP keeps a whole copy of it on\n"
        "# every replica (12 bytes x params / %d per rank, not / %d). It is asked for in pytorch#148257;\n"
        "# Megatron-FSDP has it: outer_dp_sharding_strategy=\"optim\" on a hybrid mesh, with\n"
        "# data_parallel_sharding_strategy=\"optim_grads_params\" inside the shard group.\n",
        r->S * r->R, r->S, r->S, r->S * r->R);
  put(w, "mp = MixedPrecisionPolicy(param_dtype=%s, reduce_dtype=%s)\n", pd, rd);
  char raf[48];
  if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    snprintf(raf, sizeof raf, "%d", r->cfg.partial_k);
  else
    snprintf(raf, sizeof raf, "%s", r->cfg.reshard == HSR_RT_RESHARD_NONE ? "False" : "True");
  put(w, "blocks = list(model.layers)  # one FSDP unit per block, as hsr's units\n");
  emit_fsdp2_recompute(w, r);
  put(w, "for block in blocks:\n    fully_shard(block, mesh=mesh, reshard_after_forward=%s, mp_policy=mp)\n", raf);
  put(w, "fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=mp)  # the root, kept gathered\n");
  if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    put(w,
        "# reshard_after_forward=%d keeps 1/%d of each block after forward: the backward all-gather then runs\n"
        "# in %d consecutive ranks (flattened replicate x shard order), inside one node with block placement\n",
        r->cfg.partial_k, r->cfg.partial_k, r->cfg.partial_k);
  if (r->cfg.prefetch == 0)
    put(w, "# prefetch 0: FSDP2 always prefetches one block implicitly; hsr measured/predicted without it\n");
  else if (r->cfg.prefetch > 1)
    put(w,
        "for i, block in enumerate(blocks):  # prefetch %d blocks ahead\n"
        "    block.set_modules_to_forward_prefetch(blocks[i + 1:i + %d])\n"
        "    block.set_modules_to_backward_prefetch(blocks[max(0, i - %d):i][::-1])\n",
        r->cfg.prefetch, r->cfg.prefetch + 1, r->cfg.prefetch);
  if (r->cfg.micro_batches > 1 && r->cfg.sync == HSR_RT_SYNC_NONE)
    put(w, "# micro-batches but the last: model.set_requires_gradient_sync(False)\n");
  if (r->cfg.micro_batches > 1 && r->cfg.sync == HSR_RT_SYNC_RS_ONLY)
    put(w, "# micro-batches but the last: model.set_requires_all_reduce(False)\n");
}

static void emit_titan(out *w, const tune_result *r) {
  int rep = r->R, sh = r->S;
  if (r->cfg.strategy == HSR_RT_DDP) rep = r->R * r->S, sh = 1;
  put(w, "[parallelism]\ndata_parallel_replicate_degree = %d\ndata_parallel_shard_degree = %d\n", rep, sh);
  if (sharded(r)) {
    const char *pol = r->cfg.reshard == HSR_RT_RESHARD_NONE ? "never" : "always";
    put(w, "fsdp_reshard_after_forward = \"%s\"\n", pol);
    if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
      put(w,
          "# partial:%d has no torchtitan setting (FSDP2's integer reshard_after_forward): pass\n"
          "# reshard_after_forward=%d to fully_shard in your parallelize function; \"always\" is the nearest\n",
          r->cfg.partial_k, r->cfg.partial_k);
  } else if (r->cfg.strategy != HSR_RT_DDP) {
    put(w, "# %s (optimizer state sharded, parameters replicated) has no torchtitan form; this is plain DDP\n",
        rt_strategy_name(r->cfg.strategy));
  }
  if (r->cfg.outer_shard == HSR_RT_OUTER_OPTIM)
    put(w,
        "# outer-shard optim (the optimizer state over all %d ranks) has no torchtitan setting: FSDP2 keeps\n"
        "# a whole copy of it per replica group (pytorch#148257); nearest is the HSDP above, with 12 bytes x\n"
        "# params / %d of optimizer state per rank instead of / %d\n",
        r->S * r->R, r->S, r->S * r->R);
  put(w, "\n[activation_checkpoint]\nmode = \"%s\"\n", hsr_rt_recompute_name(r->cfg.recompute));
  if (r->cfg.recompute == HSR_RT_RECOMPUTE_SELECTIVE)
    put(w, "selective_ac_option = \"op\"  # save the matmuls and the attention, recompute the rest\n");
  put(w, "\n[training]\nmixed_precision_param = \"%s\"\nmixed_precision_reduce = \"%s\"\n",
      r->cfg.param_dtype == HSR_BF16 ? "bfloat16" : "float32",
      r->cfg.reduce_dtype == HSR_BF16 ? "bfloat16" : "float32");
}

static void emit_ds(out *w, const tune_result *r, char *lab) {
  int stage = r->cfg.strategy == HSR_RT_DDP     ? 0
              : r->cfg.strategy == HSR_RT_ZERO1 ? 1
              : r->cfg.strategy == HSR_RT_ZERO2 ? 2
                                                : 3;
  put(w, "{\n  \"_hsr\": \"%s", lab);
  if (r->cfg.strategy == HSR_RT_HYBRID)
    put(w,
        "; sharding over groups of %d with %d replicas is MiCS in DeepSpeed (mics_shard_size; check that your "
        "DeepSpeed version still has it)",
        r->S, r->R);
  if (r->cfg.strategy == HSR_RT_HYBRID && r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    put(w, "; partial:%d together with MiCS is not expressible", r->cfg.partial_k);
  if (r->cfg.outer_shard == HSR_RT_OUTER_OPTIM)
    put(w,
        "; outer-shard optim (optimizer state over all %d ranks, parameters over groups of %d) has no DeepSpeed "
        "form: MiCS keeps the optimizer state per group as below, and ZeRO-3 with zero_hpz_partition_size %d "
        "shards it over every rank but gathers each forward across nodes",
        r->S * r->R, r->S, r->S);
  if (stage == 1 || stage == 2)
    put(w, "; DeepSpeed shards stage %d over every rank, hsr over groups of %d", stage, r->S);
  if (r->cfg.recompute == HSR_RT_RECOMPUTE_FULL)
    put(w, "; recompute full: call each block through deepspeed.checkpointing.checkpoint(block, x), configured by "
           "activation_checkpointing");
  if (r->cfg.recompute == HSR_RT_RECOMPUTE_SELECTIVE)
    put(w, "; recompute selective: DeepSpeed checkpoints whole blocks; keep the matmuls' outputs with "
           "torch.utils.checkpoint's create_selective_checkpoint_contexts in the model's blocks");
  put(w, "\",\n");
  if (r->cfg.recompute == HSR_RT_RECOMPUTE_FULL)
    put(w, "  \"activation_checkpointing\": {\"partition_activations\": false, \"cpu_checkpointing\": false, "
           "\"contiguous_memory_optimization\": false, \"number_checkpoints\": null, "
           "\"synchronize_checkpoint_boundary\": false, \"profile\": false},\n");
  put(w, "  \"bf16\": {\"enabled\": %s},\n", r->cfg.param_dtype == HSR_BF16 ? "true" : "false");
  put(w, "  \"communication_data_type\": \"%s\",\n", r->cfg.reduce_dtype == HSR_BF16 ? "bf16" : "fp32");
  put(w, "  \"zero_optimization\": {\n    \"stage\": %d", stage);
  if (stage == 3) {
    put(w, ",\n    \"overlap_comm\": true,\n    \"reduce_scatter\": true");
    if (r->cfg.strategy == HSR_RT_HYBRID)
      put(w, ",\n    \"mics_shard_size\": %d,\n    \"mics_hierarchical_params_gather\": true", r->S);
    else if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
      put(w, ",\n    \"zero_hpz_partition_size\": %d", r->cfg.partial_k);
    if (r->cfg.reshard == HSR_RT_RESHARD_NONE)
      put(w, ",\n    \"stage3_max_reuse_distance\": 1000000000,\n    \"stage3_max_live_parameters\": 1000000000");
  }
  put(w, "\n  }\n}\n");
}

hsr_status tune_emit(const tune_result *r, tune_emit_kind kind, char *buf, size_t len) {
  if (!r || !buf || !len) return hsr_error(HSR_ERR_INVALID, "tune_emit: NULL argument");
  out w = {buf, len, 0};
  buf[0] = '\0';
  char lab[96];
  tune_label(r, lab, sizeof lab);
  switch (kind) {
  case HSR_TUNE_EMIT_FSDP2:
    put(&w, "# hsr tune: %s, predicted %.1f ms per step, %.2f GiB peak per rank\n", lab, r->step_ms,
        r->peak_total / GiB);
    emit_fsdp2(&w, r);
    break;
  case HSR_TUNE_EMIT_TORCHTITAN:
    put(&w, "# hsr tune: %s, predicted %.1f ms per step, %.2f GiB peak per rank\n", lab, r->step_ms,
        r->peak_total / GiB);
    emit_titan(&w, r);
    break;
  case HSR_TUNE_EMIT_DEEPSPEED: emit_ds(&w, r, lab); break;
  default: return hsr_error(HSR_ERR_INVALID, "tune_emit: kind %d (valid: fsdp2, torchtitan, deepspeed)", kind);
  }
  return HSR_OK;
}
