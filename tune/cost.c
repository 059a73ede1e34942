/* The cost model's arithmetic: built-in figures for well-known hardware and
 * the volumes and times of one collective on a group as it lies on the
 * nodes. The volumes are the collectives' own model of the algorithms they
 * run (common/coll_model.c, the rule and the bytes written once);
 * tests/test_tune.c holds them to hand-computed cases and tests/tune.cmake
 * to counters measured in a real run. */
#include <stdio.h>
#include <string.h>

#include "common/coll_model.h"
#include "tune/tune.h"
#include "tune_int.h"

typedef struct hw_fig {
  const char *name;
  double intra_gbs, intra_us, cross_gbs, cross_us, hbm_gbs;
  double mem_gib; /* the GPU's memory (0: no figure) */
  const char *intra_src, *cross_src;
  int gpu;
} hw_fig;

/* Public figures: nccl-tests bus bandwidth (nccl-tests' published results),
 * NCCL's ring latencies (tuning.cc: base 8.4 us + per-hop NVLink/NET). */
static const hw_fig figs[] = {
    {"h100", 360, 15, 48, 30, 3350, 80, "default: H100 NVLink all-gather busbw ~360 GB/s (nccl-tests)",
     "default: NDR 400G ~48 GB/s per GPU's NIC (nccl-tests)", 1},
    {"h200", 360, 15, 48, 30, 4800, 141, "default: H200 NVLink all-gather busbw ~360 GB/s (nccl-tests)",
     "default: NDR 400G ~48 GB/s per GPU's NIC (nccl-tests)", 1},
    {"a100", 230, 15, 24, 30, 2000, 80, "default: A100 NVLink 3 all-gather busbw ~230 GB/s",
     "default: HDR 200G ~24 GB/s per GPU's NIC", 1},
    {"pcie5", 50, 20, 48, 30, 3350, 0, "default: PCIe Gen5 x16 ~50 GB/s between GPUs without NVLink",
     "default: NDR 400G ~48 GB/s per GPU's NIC (nccl-tests)", 1},
    {"host", 3.0, 30, 0.5, 60, 6, 0,
     "default: hsr shared-memory collectives, ~3 GB/s busbw on 2-4 cores (docs/tiers.md)",
     "default: UCX over TCP ~0.5 GB/s per rank (docs/tiers.md: 3.6 GB/s loopback, shared by the ranks)", 0},
};

/* a100: the 80 GB part (the 40 GB one: --mem-budget 40G less the reserve). */
double tune_hw_memory(const char *hw) {
  for (size_t i = 0; hw && i < sizeof figs / sizeof figs[0]; i++)
    if (!strcmp(hw, figs[i].name)) return figs[i].mem_gib * 1024.0 * 1024 * 1024;
  return 0;
}

double tune_mem_reserve(double capacity) { return capacity > 0 ? 2.0 * 1024 * 1024 * 1024 + 0.05 * capacity : 0; }

const char *tune_net_hw_names(void) { return "h100, h200, a100, pcie5, host"; }

hsr_status tune_net_default(const char *hw, tune_net *out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "tune_net_default: NULL argument");
  const hw_fig *f = NULL;
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++)
    if (hw && !strcmp(hw, figs[i].name)) f = &figs[i];
  if (!f)
    return hsr_error(HSR_ERR_INVALID, "unknown hardware '%s' (valid: %s)", hw ? hw : "(null)", tune_net_hw_names());
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", f->name);
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    tune_link *a = &out->link[HSR_TUNE_INTRA][op], *x = &out->link[HSR_TUNE_CROSS][op];
    *a = (tune_link){.alpha_us = f->intra_us, .busbw_gbs = f->intra_gbs, .is_default = 1};
    *x = (tune_link){.alpha_us = f->cross_us, .busbw_gbs = f->cross_gbs, .is_default = 1};
    snprintf(a->source, sizeof a->source, "%s", f->intra_src);
    snprintf(x->source, sizeof x->source, "%s", f->cross_src);
  }
  for (int op = 0; op < HSR_TUNE_OPS; op++) out->span[op] = 1;
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
    out->slow[t] = 1;
    out->slow_busy[t] = 1;
    out->concurrent[t] = 1;
    out->concurrent_default[t] = 1;
  }
  out->device_is_gpu = f->gpu;
  /* host collectives copy on the cores that compute; a rate-limited link mostly waits */
  out->steal[HSR_TUNE_INTRA] = f->gpu ? 0 : 0.5;
  out->steal[HSR_TUNE_CROSS] = f->gpu ? 0 : 0.1;
  /* AdamW: read parameter, gradient, master, m, v; write them back: ~30 bytes per element */
  out->optim_ns_per_elem = 30.0 / f->hbm_gbs;
  out->data_gbs = f->gpu ? f->hbm_gbs / 2 : f->hbm_gbs;
  out->ar2 = HSR_TUNE_AR2_SPLIT_RAIL; /* collectives/two_allreduce.c */
  out->ar_rd_max_bytes = 64 * 1024;
  return HSR_OK;
}

int tune_net_uses_defaults(const tune_net *n) {
  if (!n) return 0;
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
    if (n->concurrent_default[t]) return 1;
    for (int op = 0; op < HSR_TUNE_OPS; op++)
      if (n->link[t][op].is_default) return 1;
  }
  return 0;
}

/* ---- volumes: the collectives' own model (common/coll_model.c) ---- */

hsr_status tune_volume(const tune_net *net, int op, const tune_shape *g, double count, size_t es,
                           tune_vol *v) {
  if (!net || !g || !v) return hsr_error(HSR_ERR_INVALID, "tune_volume: NULL argument");
  if (op != HSR_OP_ALLGATHER && op != HSR_OP_REDUCE_SCATTER && op != HSR_OP_ALLREDUCE)
    return hsr_error(HSR_ERR_INVALID, "tune_volume: operation %d (valid: all-gather, reduce-scatter, all-reduce)",
                     op);
  if (g->n < 1 || g->nodes < 1 || g->nodes > g->n || count < 0)
    return hsr_error(HSR_ERR_INVALID, "tune_volume: group of %d members on %d nodes, count %g", g->n, g->nodes,
                     count);
  const coll_model_cfg cfg = {.allreduce = COLL_AR_AUTO,
                              .rd_max_bytes = net->ar_rd_max_bytes,
                              .split_rail = net->ar2 == HSR_TUNE_AR2_SPLIT_RAIL};
  const coll_model_shape shape = {g->n, g->nodes, g->per_node, g->domains};
  double B = count * (double)es;
  coll_model_vol m;
  coll_model_volume(&cfg, net->device_is_gpu, op, &shape, B, es, &m);
  memset(v, 0, sizeof *v);
  v->full = op == HSR_OP_ALLREDUCE ? B : B * g->n;
  v->sent = m.sent, v->recv = m.recv, v->fabric_sent = m.fabric_sent, v->fabric_recv = m.fabric_recv;
  v->algo = m.algo;
  for (int i = 0; i < m.nstages && i < HSR_TUNE_MAX_STAGES; i++) {
    const coll_model_stage *s = &m.stage[i];
    v->stage[v->nstages++] = (tune_stage){s->tier == COLL_MODEL_CROSS ? HSR_TUNE_CROSS : HSR_TUNE_INTRA, s->op,
                                              s->bytes, s->span};
  }
  return HSR_OK;
}

const tune_link *tl_stage_link(const tune_net *n, const tune_stage *s, double *factor) {
  *factor = 1;
  if (!s->span) return &n->link[s->tier][s->op];
  if (s->tier == HSR_TUNE_CROSS && n->span_link[s->span - 1].samples > 0) return &n->span_link[s->span - 1];
  *factor = n->span[s->span - 1];
  return &n->link[s->tier][s->op];
}

double tune_coll_time(const tune_net *net, const tune_vol *v) {
  if (!net || !v) return 0;
  double t = 0;
  for (int i = 0; i < v->nstages; i++) {
    double f;
    const tune_link *l = tl_stage_link(net, &v->stage[i], &f);
    t += f * (l->alpha_us * 1e-6 + (l->busbw_gbs > 0 ? v->stage[i].bytes / (l->busbw_gbs * 1e9) : 0));
  }
  return t;
}
