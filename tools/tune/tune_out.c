/* hsr tune's output: the table, the JSON of every candidate, the plot, the
 * ledger of the calculator, and the compute time read from a measurement. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench_coll.h" /* bc_have_gnuplot */
#include "tools/cli/cli.h"
#include "common/json.h"
#include "common/sys.h"
#include "runtime/io/trace_summary.h"
#include "tune_cli.h"
#include "common/dtype_internal.h"

static const double GiB = 1024.0 * 1024 * 1024;
static const char *const tier_names[] = {"intra-node", "cross-node"};
static const char *const op_names[] = {"all_gather", "reduce_scatter", "all_reduce"};

static double fabric_rank(const tune_result *r) {
  double f = 0;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_TUNE_OPS; op++) f += r->bytes[g][op].fabric_sent;
  return f;
}

static const char *reshard_name(const tune_result *r, char *b, size_t n) {
  if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    snprintf(b, n, "partial:%d", r->cfg.partial_k);
  else
    snprintf(b, n, "%s", r->cfg.reshard == HSR_RT_RESHARD_NONE ? "none" : "full");
  return b;
}

/* The shape and its activations per policy, or that activations are not counted. */
static void act_header(const tune_ctx *x) {
  const tune_opts *o = x->o;
  if (!o->has_shape) {
    if (o->act_bytes > 0)
      printf("# activations: %.2f GiB per rank (--act-mem), the same for every layout; no recompute planned\n",
             o->act_bytes / GiB);
    else
      printf("# activations: not counted (the model's shape is unknown: give --arch %s, or --layers --width "
             "--heads --seq --vocab [--micro-batch], to plan them and their recompute; or --act-mem BYTES)\n",
             tune_arch_names());
    return;
  }
  const tune_arch *a = &o->arch;
  printf("# shape %s (%s): layers %d, width %d, heads %d, kv heads %d, ffn %d, vocab %d, seq %d, micro-batch %d, "
         "%s activations: %.4g parameters\n",
         a->name, tune_family_name(a->family), a->layers, a->width, a->heads, a->kv_heads, a->ffn, a->vocab, a->seq,
         a->micro_batch, dtype_name(a->act_dtype), tune_arch_params(a));
  printf("# activations per rank per micro-batch (layers x saved + one layer's recompute + root):");
  for (int rc = 0; rc < HSR_TUNE_RECOMPUTES; rc++)
    printf("%s %s %.2f GiB", rc ? ";" : "", hsr_rt_recompute_name((hsr_rt_recompute)rc), x->act[rc].peak / GiB);
  printf("\n");
}

static void header(const tune_ctx *x, const tune_plan *p) {
  const tune_model *m = &x->model;
  printf("# hsr tune: %d ranks on %d nodes (%d per node), NVLink domain %d ranks; %s\n", p->world, p->nodes,
         p->per_node, p->domain_size, x->topo_desc);
  printf("# model: %.3g parameters in %d units, %s parameters, %s reduction, %d micro-batch%s; compute %s, "
         "backward x%.2g\n",
         m->params, m->units, dtype_name(x->o->param_dtype), dtype_name(x->o->reduce_dtype), (int)x->o->micro,
         x->o->micro > 1 ? "es" : "", x->compute_desc, m->bwd_ratio);
  act_header(x);
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++)
    for (int op = 0; op < HSR_TUNE_OPS; op++) {
      const tune_link *l = &x->net.link[t][op];
      printf("# cost %s %s: %.3g GB/s busbw, %.1f us (%s)\n", tier_names[t], op_names[op], l->busbw_gbs, l->alpha_us,
             l->source);
    }
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++)
    printf("# cost %s beside the other tier: %.2fx bandwidth (%s); takes %.0f%% of compute speed while busy\n",
           tier_names[t], x->net.concurrent[t], x->net.concurrent_default[t] ? "default" : "fitted",
           100 * x->net.steal[t]);
  printf("# %d layouts evaluated in %.1f ms (%.1f ms of CPU), %d within the budget", p->n, p->plan_s * 1e3,
         p->plan_cpu_s * 1e3, p->nfeasible);
  if (x->budget > 0) printf(" of %.2f GiB per rank", x->budget / GiB);
  printf("\n");
  if (x->budget > 0 && x->o->mem_budget <= 0) printf("# memory budget: %s\n", x->budget_desc);
  if (x->budget <= 0 && x->net.device_is_gpu)
    printf("# memory: not bounded (give --mem-budget, or --hw h100|h200|a100 for the GPU's memory less the "
           "reserve)\n");
}

void tune_print_table(const tune_ctx *x, const tune_plan *p) {
  header(x, p);
  int unc = p->nfeasible > 0 && p->cand[0].step_pm_ms > 0;
  int act = x->o->has_shape, lw = 34; /* the layout column: as wide as the longest label shown */
  for (int i = 0; i < p->nfeasible && i < x->o->top; i++) {
    char lab[96];
    int n = (int)strlen(tune_label(&p->cand[i], lab, sizeof lab));
    if (n > lw) lw = n;
  }
  printf("%4s  %-*s %5s %5s %4s %10s %8s %9s %9s %9s %13s %9s%s  %s\n", "rank", lw, "layout", "S", "R", "K", "step(ms)",
         unc ? "+-" : "", "compute", "comm", "exposed", "fabric/rank", "peak GiB", act ? "   act GiB" : "", "tie");
  int shown = 0;
  for (int i = 0; i < p->nfeasible && shown < x->o->top; i++, shown++) {
    const tune_result *r = &p->cand[i];
    char lab[96], pm[16] = "", tie[16] = "";
    if (unc) snprintf(pm, sizeof pm, "%.2f", r->step_pm_ms);
    if (r->tie >= 0) snprintf(tie, sizeof tie, "= %d", r->tie + 1);
    char ab[16] = "";
    if (act) snprintf(ab, sizeof ab, " %9.2f", r->act_bytes / GiB);
    printf("%4d  %-*s %5d %5d %4d %10.2f %8s %9.2f %9.2f %9.2f %10.2f MB %9.2f%s  %s\n", i + 1, lw,
           tune_label(r, lab, sizeof lab), r->S, r->R, r->K, r->step_ms, pm, r->compute_ms, r->comm_ms, r->exposed_ms,
           fabric_rank(r) / 1e6, r->peak_total / GiB, ab, tie);
  }
  printf("# tie '= N': cannot be told apart from rank N within the prediction's uncertainty%s\n",
         unc ? " (+- one sigma, from the fit's residuals)" : " (built-in figures have no residuals: only exact ties)");
  int rej = p->n - p->nfeasible;
  if (rej) {
    printf("# %d rejected over the budget; the closest:\n", rej);
    for (int i = p->nfeasible; i < p->n && i < p->nfeasible + x->o->top; i++) {
      char lab[96];
      printf("#   %s: %s\n", tune_label(&p->cand[i], lab, sizeof lab), p->cand[i].reason);
    }
  }
}

static cJSON *bytes_json(const tune_bytes *b) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "calls", b->calls);
  cJSON_AddNumberToObject(o, "sent", b->sent);
  cJSON_AddNumberToObject(o, "recv", b->recv);
  cJSON_AddNumberToObject(o, "fabric_sent", b->fabric_sent);
  cJSON_AddNumberToObject(o, "fabric_recv", b->fabric_recv);
  cJSON_AddNumberToObject(o, "full", b->full);
  return o;
}

cJSON *tune_cand_json(const tune_result *r, int rank, const tune_plan *p) {
  cJSON *o = cJSON_CreateObject();
  char lab[96], res[24];
  cJSON_AddNumberToObject(o, "rank", rank);
  cJSON_AddStringToObject(o, "label", tune_label(r, lab, sizeof lab));
  cJSON_AddStringToObject(o, "strategy", rt_strategy_name(r->cfg.strategy));
  cJSON_AddNumberToObject(o, "shard", r->S);
  cJSON_AddNumberToObject(o, "replicate", r->R);
  cJSON_AddStringToObject(o, "reshard", reshard_name(r, res, sizeof res));
  cJSON_AddNumberToObject(o, "partial_k", r->cfg.reshard == HSR_RT_RESHARD_PARTIAL ? r->cfg.partial_k : 0);
  cJSON_AddNumberToObject(o, "prefetch", r->cfg.prefetch);
  cJSON_AddBoolToObject(o, "prefetch_step", r->cfg.prefetch_step);
  cJSON_AddStringToObject(o, "sync", rt_sync_name(r->cfg.sync));
  cJSON_AddStringToObject(o, "outer_shard", rt_outer_shard_name(r->cfg.outer_shard));
  cJSON_AddStringToObject(o, "recompute", hsr_rt_recompute_name(r->cfg.recompute));
  cJSON_AddNumberToObject(o, "micro_batches", r->cfg.micro_batches);
  cJSON_AddStringToObject(o, "param_dtype", dtype_name(r->cfg.param_dtype));
  cJSON_AddStringToObject(o, "reduce_dtype", dtype_name(r->cfg.reduce_dtype));
  cJSON_AddBoolToObject(o, "feasible", r->feasible);
  cJSON_AddStringToObject(o, "reason", r->reason);
  cJSON_AddNumberToObject(o, "step_ms", r->step_ms);
  cJSON_AddNumberToObject(o, "step_pm_ms", r->step_pm_ms);
  cJSON *u = cJSON_AddObjectToObject(o, "uncertainty_ms");
  static const char *const uk[HSR_TUNE_UNC_TERMS] = {"intra_node", "cross_node", "compute", "step_residual"};
  for (int k = 0; k < HSR_TUNE_UNC_TERMS; k++) cJSON_AddNumberToObject(u, uk[k], r->unc_ms[k]);
  if (p && r->tie >= 0 && r->tie < p->n) {
    char tl[96];
    cJSON_AddStringToObject(o, "tie_with", tune_label(&p->cand[r->tie], tl, sizeof tl));
  } else {
    cJSON_AddNullToObject(o, "tie_with");
  }
  cJSON_AddNumberToObject(o, "compute_ms", r->compute_ms);
  cJSON_AddNumberToObject(o, "comm_ms", r->comm_ms);
  cJSON_AddNumberToObject(o, "exposed_ms", r->exposed_ms);
  cJSON_AddNumberToObject(o, "all_gather_ms", r->ag_ms);
  cJSON_AddNumberToObject(o, "all_gather_exposed_ms", r->ag_exposed_ms);
  cJSON *groups = cJSON_AddObjectToObject(o, "groups"), *busy = cJSON_AddObjectToObject(o, "busy_ms");
  cJSON *bytes = cJSON_AddObjectToObject(o, "bytes_per_step");
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
    const char *gn = rt_group_name((hsr_rt_group)g);
    cJSON *gj = cJSON_AddObjectToObject(groups, gn);
    cJSON_AddNumberToObject(gj, "size", r->shape[g].n);
    cJSON_AddNumberToObject(gj, "nodes", r->shape[g].nodes);
    cJSON_AddNumberToObject(gj, "per_node", r->shape[g].per_node);
    cJSON_AddNumberToObject(busy, gn, r->busy_ms[g]);
    cJSON *bg = cJSON_AddObjectToObject(bytes, gn);
    for (int op = 0; op < HSR_TUNE_OPS; op++) cJSON_AddItemToObject(bg, op_names[op], bytes_json(&r->bytes[g][op]));
  }
  cJSON_AddNumberToObject(o, "fabric_bytes_per_rank", fabric_rank(r));
  cJSON_AddNumberToObject(o, "fabric_bytes_per_step_all_ranks", r->fabric_all_ranks);
  cJSON_AddNumberToObject(o, "persistent_bytes", (double)r->persistent);
  cJSON_AddNumberToObject(o, "transient_peak_bytes", (double)r->transient_peak);
  cJSON_AddNumberToObject(o, "runtime_peak_bytes", (double)r->runtime_peak);
  cJSON_AddNumberToObject(o, "peak_bytes", r->peak_total);
  cJSON_AddNumberToObject(o, "act_bytes", r->act_bytes);
  cJSON_AddNumberToObject(o, "persistent_bytes_per_param", r->persistent_per_param);
  cJSON *w = cJSON_AddObjectToObject(o, "peak_where");
  cJSON_AddStringToObject(w, "phase", phase_name(r->peak_where.phase));
  cJSON_AddNumberToObject(w, "unit", r->peak_where.unit);
  cJSON_AddNumberToObject(w, "step", (double)r->peak_where.step);
  cJSON *cats = cJSON_AddObjectToObject(o, "peak_by_category");
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++)
    if (r->peak_cat[c]) cJSON_AddNumberToObject(cats, mem_cat_name((mem_cat)c), (double)r->peak_cat[c]);
  return o;
}

cJSON *tune_cost_json(const tune_net *n) {
  cJSON *o = cJSON_CreateObject(), *links = NULL;
  cJSON_AddStringToObject(o, "hardware", n->name);
  cJSON_AddBoolToObject(o, "defaults_used", tune_net_uses_defaults(n));
  links = cJSON_AddArrayToObject(o, "links");
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++)
    for (int op = 0; op < HSR_TUNE_OPS; op++) {
      const tune_link *l = &n->link[t][op];
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "tier", tier_names[t]);
      cJSON_AddStringToObject(j, "op", op_names[op]);
      cJSON_AddNumberToObject(j, "alpha_us", l->alpha_us);
      cJSON_AddNumberToObject(j, "busbw_gbs", l->busbw_gbs);
      cJSON_AddNumberToObject(j, "samples", l->samples);
      cJSON_AddBoolToObject(j, "default", l->is_default);
      cJSON_AddStringToObject(j, "source", l->source);
      cJSON_AddItemToArray(links, j);
    }
  cJSON *tl = cJSON_AddArrayToObject(o, "two_level_cross_links");
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    const tune_link *l = &n->span_link[op];
    if (!l->samples) continue;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", op_names[op]);
    cJSON_AddNumberToObject(j, "alpha_us", l->alpha_us);
    cJSON_AddNumberToObject(j, "busbw_gbs", l->busbw_gbs);
    cJSON_AddNumberToObject(j, "samples", l->samples);
    cJSON_AddStringToObject(j, "source", l->source);
    cJSON_AddItemToArray(tl, j);
  }
  cJSON *c = cJSON_AddObjectToObject(o, "concurrent"), *s = cJSON_AddObjectToObject(o, "compute_steal");
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
    cJSON_AddNumberToObject(c, tier_names[t], n->concurrent[t]);
    cJSON_AddNumberToObject(s, tier_names[t], n->steal[t]);
  }
  cJSON_AddNumberToObject(o, "optim_ns_per_elem", n->optim_ns_per_elem);
  cJSON_AddNumberToObject(o, "data_gbs", n->data_gbs);
  cJSON_AddStringToObject(o, "two_level_all_reduce", n->ar2 == HSR_TUNE_AR2_FULL ? "full-vector" : "split-rail");
  cJSON_AddStringToObject(o, "device", n->device_is_gpu ? "gpu" : "host");
  cJSON_AddBoolToObject(o, "compute_off_host", n->compute_off_host);
  cJSON *sl = cJSON_AddObjectToObject(o, "in_step_slowdown"), *sb = cJSON_AddObjectToObject(o, "beside_compute");
  cJSON *rr = cJSON_AddObjectToObject(o, "residual_rms");
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
    cJSON_AddNumberToObject(sl, tier_names[t], n->slow[t]);
    cJSON_AddNumberToObject(sb, tier_names[t], n->slow_busy[t]);
    cJSON_AddNumberToObject(rr, tier_names[t], n->rel_rms[t]);
  }
  cJSON_AddNumberToObject(rr, "compute", n->compute_rel_rms);
  cJSON_AddNumberToObject(rr, "step", n->step_rel_rms);
  return o;
}

hsr_status tune_cost_json_text(const tune_net *n, char **out) {
  cJSON *o = tune_cost_json(n);
  *out = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return *out ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
}

/* Prints a document on stdout, one line, and frees it. */
static hsr_status print_doc(cJSON *o) {
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!txt) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  printf("%s\n", txt);
  free(txt);
  return HSR_OK;
}

/* The shape and its activations per policy (null without a shape). */
static cJSON *shape_json(const tune_ctx *x) {
  if (!x->o->has_shape) return cJSON_CreateNull();
  const tune_arch *a = &x->o->arch;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "arch", a->name);
  cJSON_AddStringToObject(o, "family", tune_family_name(a->family));
  cJSON_AddNumberToObject(o, "layers", a->layers);
  cJSON_AddNumberToObject(o, "width", a->width);
  cJSON_AddNumberToObject(o, "heads", a->heads);
  cJSON_AddNumberToObject(o, "kv_heads", a->kv_heads);
  cJSON_AddNumberToObject(o, "ffn", a->ffn);
  cJSON_AddNumberToObject(o, "seq", a->seq);
  cJSON_AddNumberToObject(o, "vocab", a->vocab);
  cJSON_AddNumberToObject(o, "micro_batch", a->micro_batch);
  cJSON_AddStringToObject(o, "act_dtype", dtype_name(a->act_dtype));
  cJSON_AddNumberToObject(o, "params", tune_arch_params(a));
  cJSON *ac = cJSON_AddObjectToObject(o, "activations");
  for (int rc = 0; rc < HSR_TUNE_RECOMPUTES; rc++) {
    cJSON *p = cJSON_AddObjectToObject(ac, hsr_rt_recompute_name((hsr_rt_recompute)rc));
    cJSON_AddNumberToObject(p, "saved_per_layer", x->act[rc].saved);
    cJSON_AddNumberToObject(p, "scratch", x->act[rc].scratch);
    cJSON_AddNumberToObject(p, "root", x->act[rc].root);
    cJSON_AddNumberToObject(p, "peak", x->act[rc].peak);
  }
  return o;
}

hsr_status tune_print_json(const tune_ctx *x, const tune_plan *p, const char *explain) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "tool", "hsr tune");
  cJSON_AddNumberToObject(o, "world", p->world);
  cJSON_AddNumberToObject(o, "nodes", p->nodes);
  cJSON_AddNumberToObject(o, "ranks_per_node", p->per_node);
  cJSON_AddNumberToObject(o, "domain_size", p->domain_size);
  cJSON_AddStringToObject(o, "topology", x->topo_desc);
  cJSON *m = cJSON_AddObjectToObject(o, "model");
  cJSON_AddNumberToObject(m, "params", x->model.params);
  cJSON_AddNumberToObject(m, "units", x->model.units);
  cJSON_AddNumberToObject(m, "fwd_ms_per_unit", x->model.fwd_ms);
  cJSON_AddNumberToObject(m, "bwd_ratio", x->model.bwd_ratio);
  cJSON_AddStringToObject(m, "compute", x->compute_desc);
  cJSON_AddBoolToObject(m, "compute_default", x->model.compute_default);
  cJSON_AddNumberToObject(m, "act_bytes", x->model.act_bytes);
  cJSON_AddItemToObject(m, "shape", shape_json(x));
  cJSON_AddItemToObject(o, "cost_model", tune_cost_json(&x->net));
  if (x->budget > 0) {
    cJSON_AddNumberToObject(o, "mem_budget_bytes", x->budget);
    cJSON_AddStringToObject(o, "mem_budget_source", x->budget_desc);
  } else {
    cJSON_AddNullToObject(o, "mem_budget_bytes");
    cJSON_AddNullToObject(o, "mem_budget_source");
  }
  cJSON_AddNumberToObject(o, "plan_ms", p->plan_s * 1e3);
  cJSON_AddNumberToObject(o, "plan_cpu_ms", p->plan_cpu_s * 1e3);
  cJSON_AddNumberToObject(o, "feasible", p->nfeasible);
  cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
  for (int i = 0; i < p->n; i++)
    cJSON_AddItemToArray(arr, tune_cand_json(&p->cand[i], p->cand[i].feasible ? i + 1 : 0, p));
  if (p->nfeasible > 0)
    cJSON_AddItemToObject(o, "chosen", tune_cand_json(&p->cand[0], 1, p));
  else
    cJSON_AddNullToObject(o, "chosen");
  cJSON_AddNumberToObject(o, "min_over_budget_bytes", p->nfeasible ? 0 : p->min_over_budget);
  cJSON_AddStringToObject(o, "explanation", explain ? explain : "");
  return print_doc(o);
}

/* Predicted (and measured, where given) step time of every feasible candidate, split into compute and exposed
 * communication. measured: pairs (compute, exposed) for candidates which[0..nm). */
hsr_status tune_plot(const tune_ctx *x, const tune_plan *p, const double *measured, const int *which, int nm,
                     const char *path) {
  if (!bc_have_gnuplot())
    return hsr_error(HSR_ERR_INVALID, "--plot needs gnuplot, which is not installed (Debian: apt-get install "
                                      "gnuplot-nox; scripts/setup.sh installs it)");
  int n = nm > 0 ? nm : p->nfeasible;
  if (n == 0) return hsr_error(HSR_ERR_INVALID, "--plot: no feasible layout to draw");
  cli_plot pl;
  HSR_CHECK(cli_plot_open(&pl, "--plot", path));
  FILE *gp = pl.script;
  fprintf(gp, "$d << EOD\n");
  for (int i = 0; i < n; i++) {
    const tune_result *r = &p->cand[nm > 0 ? which[i] : i];
    char lab[96];
    fprintf(gp, "%d \"%s\" %g %g %g %g\n", i, tune_label(r, lab, sizeof lab), r->step_ms - r->exposed_ms, r->exposed_ms,
            nm > 0 ? measured[2 * i] : NAN, nm > 0 ? measured[2 * i + 1] : NAN);
  }
  fprintf(gp, "EOD\nset terminal svg size %d,600 dynamic background rgb 'white'\n",
          n * 40 + 300 > 4000 ? 4000 : n * 40 + 300);
  fprintf(gp,
          "set style fill solid 0.8 border -1\nset xtics rotate by -60 font ',9'\nset grid ytics\n"
          "set ylabel 'ms per step'\nset key left top\nset xrange [-1:%d]\nset yrange [0:*]\n"
          "set title 'hsr tune: %d ranks, %d nodes: predicted%s step time (compute + exposed communication)'\n",
          n, p->world, p->nodes, nm > 0 ? " and measured" : "");
  double o = nm > 0 ? 0.2 : 0, w = nm > 0 ? 0.18 : 0.35;
  fprintf(gp,
          "plot $d using ($1-%g):(0):($1-%g-%g):($1-%g+%g):(0):($3) with boxxyerror lc rgb '#4682b4' title "
          "'compute, predicted', "
          "$d using ($1-%g):(0):($1-%g-%g):($1-%g+%g):($3):($3+$4) with boxxyerror lc rgb '#ff8c00' title 'exposed "
          "communication, predicted', $d using 1:(NaN):xtic(2) notitle",
          o, o, w, o, w, o, o, w, o, w);
  if (nm > 0)
    fprintf(gp,
            ", $d using ($1+%g):(0):($1+%g-%g):($1+%g+%g):(0):($5) with boxxyerror fs pattern 2 lc rgb '#4682b4' "
            "title 'compute, measured', $d using ($1+%g):(0):($1+%g-%g):($1+%g+%g):($5):($5+$6) with boxxyerror fs "
            "pattern 2 lc rgb '#ff8c00' title 'exposed communication, measured'",
            o, o, w, o, w, o, o, w, o, w);
  fprintf(gp, "\n");
  (void)x;
  return cli_plot_close(&pl);
}

/* The calculator's --json: the layout (as a candidate of the planner's
 * JSON), its bytes per parameter by category and the formula. */
hsr_status tune_print_ledger_json(const tune_ctx *x, const tune_result *r) {
  const tune_model *m = &x->model;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "tool", "hsr tune");
  cJSON_AddStringToObject(o, "mode", "calculator");
  cJSON *mj = cJSON_AddObjectToObject(o, "model");
  cJSON_AddNumberToObject(mj, "params", m->params);
  cJSON_AddNumberToObject(mj, "units", m->units);
  cJSON_AddItemToObject(mj, "shape", shape_json(x));
  cJSON_AddItemToObject(o, "layout", tune_cand_json(r, 1, NULL));
  cJSON *bp = cJSON_AddObjectToObject(o, "bytes_per_param");
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++) {
    if (!r->peak_cat[c] || c == HSR_MEM_ACTIVATION) continue;
    cJSON_AddNumberToObject(bp, mem_cat_name((mem_cat)c), (double)r->peak_cat[c] / m->params);
  }
  tune_formula fm = tune_persistent_formula(r, m->params);
  cJSON *f = cJSON_AddObjectToObject(o, "persistent_per_param");
  cJSON_AddNumberToObject(f, "unsharded", fm.full);
  cJSON_AddNumberToObject(f, "times_S", fm.over_s);
  cJSON_AddNumberToObject(f, "times_S_R", fm.over_sr);
  cJSON_AddNumberToObject(f, "S", r->S);
  cJSON_AddNumberToObject(f, "R", r->R);
  cJSON_AddNumberToObject(f, "total", r->persistent_per_param);
  cJSON *what = cJSON_AddObjectToObject(o, "what");
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++)
    if (r->peak_cat[c] && mem_cat_persistent((mem_cat)c))
      cJSON_AddStringToObject(what, mem_cat_name((mem_cat)c), tune_cat_what(r, (mem_cat)c, m->params));
  cJSON_AddItemToObject(o, "cost_model", tune_cost_json(&x->net));
  return print_doc(o);
}

/* The one split of the persistent bytes per parameter, for the table and the
 * JSON: full + over_s / S + over_sr / (S R). Unsharded parameters are
 * whole; with the outer shard master, m, v (and the accumulator, unless it
 * holds whole slices: rs_only) cover 1/(S R). */
tune_formula tune_persistent_formula(const tune_result *r, double P) {
  tune_formula f = {0, 0, 0};
  int sharded_params = rt_strategy_sharding(r->cfg.strategy).params;
  int outer = r->cfg.outer_shard == HSR_RT_OUTER_OPTIM;
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++) {
    if (!r->peak_cat[c] || !mem_cat_persistent((mem_cat)c)) continue;
    double b = (double)r->peak_cat[c] / P;
    int acc_shard = c == HSR_MEM_GRAD_SHARD && fabs(b * r->S - 4) < 0.5; /* rs_only: the shard's slices */
    if (c == HSR_MEM_PARAM_SHARD && !sharded_params)
      f.full += b;
    else if (!outer || c == HSR_MEM_PARAM_SHARD || acc_shard)
      f.over_s += b * r->S;
    else
      f.over_sr += b * r->S * r->R;
  }
  return f;
}

/* What a persistent category holds in this layout, in a few words. */
const char *tune_cat_what(const tune_result *r, mem_cat c, double P) {
  int sharded = rt_strategy_sharding(r->cfg.strategy).params;
  int outer = r->cfg.outer_shard == HSR_RT_OUTER_OPTIM;
  double b = (double)r->peak_cat[c] / P;
  switch (c) {
  case HSR_MEM_PARAM_SHARD:
    if (!sharded) return "the whole parameters in the param dtype";
    return r->cfg.param_dtype == HSR_F32 ? "the f32 parameter shard the gathers read, rebuilt by the all-gather "
                                           "over R after each step; its 1/R piece is this rank's master"
                                         : "the parameter shard in the param dtype that the gathers read, rebuilt "
                                           "by the all-gather over R after each step";
  case HSR_MEM_MASTER:
    return outer     ? "f32 master weights of the rank's 1/(S R) piece"
           : sharded ? "f32 master weights of the shard: the "
                       "parameter shard itself (the gathers "
                       "read it, or a bf16 copy cast from it)"
                     : "f32 master weights of the shard";
  case HSR_MEM_MOMENT_M: return outer ? "AdamW first moment, 1/(S R)" : "AdamW first moment, 1/S";
  case HSR_MEM_MOMENT_V: return outer ? "AdamW second moment, 1/(S R)" : "AdamW second moment, 1/S";
  case HSR_MEM_GRAD_SHARD:
    return outer && fabs(b * r->S - 4) >= 0.5 ? "f32 gradient accumulator of the rank's 1/(S R) piece"
           : outer ? "f32 gradient accumulator of the shard (rs_only sums whole slices before the one "
                     "reduce-scatter over R)"
                   : "f32 gradient accumulator, 1/S";
  default: return "";
  }
}

void tune_print_ledger(const tune_ctx *x, const tune_result *r) {
  const tune_model *m = &x->model;
  char res[24];
  double P = m->params;
  printf("# hsr tune ledger: %s, S = %d, R = %d, %.3g parameters in %d units, %s parameters, %s reduction, "
         "reshard %s, prefetch %d, outer shard %s\n",
         rt_strategy_name(r->cfg.strategy), r->S, r->R, P, m->units, dtype_name(r->cfg.param_dtype),
         dtype_name(r->cfg.reduce_dtype), reshard_name(r, res, sizeof res), r->cfg.prefetch,
         rt_outer_shard_name(r->cfg.outer_shard));
  printf("%-18s %18s %12s %14s\n", "category", "bytes per GPU", "GiB", "bytes/param");
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++) {
    if (!r->peak_cat[c] || c == HSR_MEM_ACTIVATION) continue;
    double b = (double)r->peak_cat[c];
    int pers = mem_cat_persistent((mem_cat)c);
    printf("%-18s %18.0f %12.3f %14.4f  %s\n", mem_cat_name((mem_cat)c), b, b / GiB, b / P,
           pers ? tune_cat_what(r, (mem_cat)c, P) : "(transient, peak)");
  }
  tune_formula f = tune_persistent_formula(r, P);
  printf("%-18s %18.0f %12.3f %14.4f  = ", "persistent", (double)r->persistent, (double)r->persistent / GiB,
         r->persistent_per_param);
  if (f.full > 0.005) printf("%.3g + ", f.full);
  if (f.over_sr > 0.005)
    printf("%.3g/S + %.3g/(S R) with S = %d, R = %d\n", f.over_s, f.over_sr, r->S, r->R);
  else
    printf("%.3g/S with S = %d\n", f.over_s, r->S);
  printf("%-18s %18.0f %12.3f   in %s, unit %d, step %lld\n", "runtime peak", (double)r->runtime_peak,
         (double)r->runtime_peak / GiB, phase_name(r->peak_where.phase), r->peak_where.unit,
         (long long)r->peak_where.step);
  if (x->o->has_shape) {
    for (int rc = 0; rc < HSR_TUNE_RECOMPUTES; rc++) {
      const tune_act *a = &x->act[rc];
      printf("%-18s %18.0f %12.3f   recompute %-9s (%d layers x %.0f saved + %.0f recomputed + root %.0f)%s\n",
             "activations", a->peak, a->peak / GiB, hsr_rt_recompute_name((hsr_rt_recompute)rc), x->o->arch.layers,
             a->saved, a->scratch, a->root, rc == (int)r->cfg.recompute ? " <" : "");
    }
    printf("%-18s %18.0f %12.3f   with recompute %s (--recompute)\n", "peak + act.", r->peak_total, r->peak_total / GiB,
           hsr_rt_recompute_name(r->cfg.recompute));
  } else if (m->act_bytes > 0) {
    printf("%-16s %18.0f %12.3f   with --act-mem\n", "peak + act.", r->peak_total, r->peak_total / GiB);
  }
  printf("predicted step: %.2f ms (compute %.2f, communication %.2f, exposed %.2f; %s)\n", r->step_ms, r->compute_ms,
         r->comm_ms, r->exposed_ms, x->compute_desc);
  printf("# hsr keeps f32 master weights, moments and gradient accumulator shards. fsdp/hybrid: the master is the\n"
         "# parameter shard (FSDP2's 16 bytes/S; the gathers cast it to the param dtype); --outer-shard optim\n"
         "# splits master, m, v and the accumulator over the R replicas and keeps a parameter shard in the param\n"
         "# dtype for the gathers. ddp/zero1/zero2 keep the whole parameters in the param dtype.\n");
}

hsr_status tune_compute_from(const char *path, int units, double bwd, double *fwd_ms, char *desc, size_t len) {
  FILE *f;
  HSR_CHECK(file_fopen_read("--compute-from", path, &f));
  char head[4096];
  size_t n = fread(head, 1, sizeof head - 1, f);
  head[n] = '\0';
  fclose(f);
  if (strstr(head, "traceEvents")) { /* a lifecycle trace: compute per step over the units */
    trace_step_summary *s = NULL;
    int ns = 0;
    HSR_CHECK(trace_steps(path, &s, &ns));
    double sum = 0;
    int k = 0;
    for (int i = 0; i < ns; i++)
      if (s[i].step >= 2 || ns == 1) sum += s[i].compute_ms, k++;
    free(s);
    if (!k) return hsr_error(HSR_ERR_INVALID, "--compute-from %s: no steps in the trace", path);
    *fwd_ms = sum / k / (units * (1 + bwd));
    snprintf(desc, len, "%.3f ms per unit forward (measured: trace %s, %d steps)", *fwd_ms, path, k);
    return HSR_OK;
  }
  FILE *g = NULL;
  char *txt = NULL;
  if (file_fopen_read("--compute-from", path, &g) == HSR_OK) {
    fseek(g, 0, SEEK_END);
    long sz = ftell(g);
    fseek(g, 0, SEEK_SET);
    txt = sz > 0 ? calloc(1, (size_t)sz + 1) : NULL;
    if (txt && fread(txt, 1, (size_t)sz, g) != (size_t)sz) free(txt), txt = NULL;
    fclose(g);
  }
  cJSON *j = txt ? cJSON_Parse(txt) : NULL;
  free(txt);
  if (json_check_finite(j, HSR_ERR_INVALID, path) != HSR_OK) {
    cJSON_Delete(j);
    return HSR_ERR_INVALID;
  }
  const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "results"), *r0 = cJSON_GetArrayItem(res, 0);
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "units"), *br = cJSON_GetObjectItemCaseSensitive(j, "bwd_ratio");
  const cJSON *cm = cJSON_GetObjectItemCaseSensitive(r0, "compute_ms");
  hsr_status st = HSR_OK;
  if (!cJSON_IsNumber(cm) || !cJSON_IsNumber(u) || u->valuedouble < 1)
    st = hsr_error(HSR_ERR_INVALID,
                   "--compute-from %s: neither a trace (hsr train --trace) nor an `hsr bench step "
                   "--json` file (results[].compute_ms, units)",
                   path);
  if (st == HSR_OK) {
    double b = cJSON_IsNumber(br) ? br->valuedouble : bwd;
    *fwd_ms = cm->valuedouble / (u->valuedouble * (1 + b));
    snprintf(desc, len, "%.3f ms per unit forward (measured: hsr bench step %s)", *fwd_ms, path);
  }
  cJSON_Delete(j);
  return st;
}
