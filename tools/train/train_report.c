/* hsr train's end-of-run report (see train_report.h). */
#include "train_report.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/ledger_internal.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"
#include "common/env.h"

static cJSON *ledger_obj(const hsr_ledger *l) {
  char *txt = NULL;
  if (ledger_json(l, &txt) != HSR_OK) return cJSON_CreateNull();
  cJSON *o = cJSON_Parse(txt);
  free(txt);
  return o ? o : cJSON_CreateNull();
}

static double pct(double m, double p) { return p > 0 ? 100.0 * (m - p) / p : 0.0; }

/* ---- communication counters per step ------------------------------------------- */

void train_comm_add(hsr_comm_counter c[HSR_RT_GROUP_COUNT][HSR_OP_COUNT], const hsr_rt_step_info *in) {
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++) {
      hsr_comm_counter *a = &c[g][op];
      const hsr_comm_counter *b = &in->comm[g][op];
      a->calls += b->calls, a->bytes_sent += b->bytes_sent, a->bytes_recv += b->bytes_recv;
      a->fabric_sent += b->fabric_sent, a->fabric_recv += b->fabric_recv, a->bytes_full += b->bytes_full;
    }
}

static void counter_json(cJSON *o, const hsr_comm_counter *c, double per) {
  const char *k[6] = {"calls", "bytes_sent", "bytes_recv", "fabric_sent", "fabric_recv", "bytes_full"};
  const uint64_t v[6] = {c->calls, c->bytes_sent, c->bytes_recv, c->fabric_sent, c->fabric_recv, c->bytes_full};
  for (int i = 0; i < 6; i++) cJSON_AddNumberToObject(o, k[i], (double)v[i] / per);
}

static hsr_comm_counter group_total(const hsr_comm_counter c[HSR_OP_COUNT]) {
  hsr_comm_counter t = {0};
  for (int op = 0; op < HSR_OP_COUNT; op++) {
    t.calls += c[op].calls, t.bytes_sent += c[op].bytes_sent, t.bytes_recv += c[op].bytes_recv;
    t.fabric_sent += c[op].fabric_sent, t.fabric_recv += c[op].fabric_recv, t.bytes_full += c[op].bytes_full;
  }
  return t;
}

void train_comm_json(cJSON *parent, const char *key, const hsr_comm_counter c[HSR_RT_GROUP_COUNT][HSR_OP_COUNT],
                     double per) {
  cJSON *o = cJSON_AddObjectToObject(parent, key);
  if (per <= 0) per = 1;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
    cJSON *grp = cJSON_AddObjectToObject(o, rt_group_name((hsr_rt_group)g));
    for (int op = 0; op < HSR_OP_COUNT; op++)
      counter_json(cJSON_AddObjectToObject(grp, op_name((hsr_op)op)), &c[g][op], per);
    hsr_comm_counter t = group_total(c[g]);
    counter_json(cJSON_AddObjectToObject(grp, "total"), &t, per);
  }
}

/* Every rank: per step, this rank's fabric bytes sent per group, summed over
 * ranks (all that crossed a node boundary), and rank 0's view printed. */
static hsr_status comm_report(hsr_rt *rt, const train_measured *m, FILE *out, cJSON *json) {
  double per = m->steps > 0 ? m->steps : 1, fab[HSR_RT_GROUP_COUNT + 1] = {0};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) fab[g] = (double)group_total(m->comm[g]).fabric_sent / per;
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) fab[HSR_RT_GROUP_COUNT] += fab[g];
  HSR_CHECK(hsr_comm_allreduce(hsr_rt_world(rt), fab, fab, HSR_RT_GROUP_COUNT + 1, HSR_F64, HSR_SUM, NULL));
  if (out) {
    fprintf(out, "communication per step (rank 0; MiB): group calls sent recv across-nodes(sent+recv) full-buffers\n");
    for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
      hsr_comm_counter t = group_total(m->comm[g]);
      if (!t.calls) continue;
      double mib = 1024.0 * 1024 * per;
      fprintf(out, "  %-9s %6.1f %9.3f %9.3f %9.3f %9.3f\n", rt_group_name((hsr_rt_group)g), (double)t.calls / per,
              (double)t.bytes_sent / mib, (double)t.bytes_recv / mib, (double)(t.fabric_sent + t.fabric_recv) / mib,
              (double)t.bytes_full / mib);
    }
    fprintf(out, "bytes across nodes per step, all ranks: %.3f MiB\n", fab[HSR_RT_GROUP_COUNT] / (1024.0 * 1024));
  }
  if (json) {
    train_comm_json(json, "comm_per_step", m->comm, per);
    cJSON *f = cJSON_AddObjectToObject(json, "fabric_bytes_per_step_all_ranks");
    for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) cJSON_AddNumberToObject(f, rt_group_name((hsr_rt_group)g), fab[g]);
    cJSON_AddNumberToObject(f, "total", fab[HSR_RT_GROUP_COUNT]);
  }
  return HSR_OK;
}

hsr_status train_predict(hsr_rt *rt, const hsr_rt_config *cfg, const hsr_prog_call *prog, int nprog, size_t act,
                         hsr_ledger *ph, hsr_ledger *pu, int *gathers) {
  const rt_layout *lay = rt_get_layout(rt);
  int nu = rt_layout_num_units(lay);
  int *is_root = calloc((size_t)nu + 1, sizeof *is_root);
  if (!is_root) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  is_root[0] = 1;
  hsr_rt_config rc = *cfg;
  hsr_status st = tune_prog_predict(lay, is_root, &rc, rt_shard(rt), rt_replicate(rt), prog, nprog, 3, ph, pu, gathers);
  free(is_root);
  /* the model's activations, from its sizes: alive from a micro-batch's forward to its backward */
  if (st == HSR_OK) st = ledger_set_phase(ph, HSR_PHASE_FORWARD, 0, 1);
  if (st == HSR_OK) st = hsr_ledger_note(ph, (int64_t)act);
  if (st == HSR_OK) st = hsr_ledger_note(ph, -(int64_t)act);
  return st;
}

hsr_status train_report(hsr_rt *rt, const hsr_rt_config *cfg, const train_measured *m, cJSON *extra, FILE *json,
                        FILE *out, int *warned) {
  const rt_layout *lay = rt_get_layout(rt);
  int nu = rt_layout_num_units(lay), S = rt_shard(rt), R = rt_replicate(rt);
  *warned = 0;
  /* predicted ledgers: sizes and policy only */
  hsr_ledger *ph = NULL, *pu = NULL;
  hsr_status st = ledger_create(&ph);
  if (st == HSR_OK) st = ledger_create(&pu);
  int pred_gathers = 0;
  if (st == HSR_OK) st = train_predict(rt, cfg, m->prog, m->nprog, m->activation_bytes, ph, pu, &pred_gathers);
  double nparams = 0, inner_bytes = 0;
  rt_param_info pi;
  for (int i = 0; st == HSR_OK && i < rt_layout_num_params(lay); i++)
    if (rt_layout_param(lay, i, &pi) == HSR_OK) nparams += (double)pi.numel;
  int inner = nu - 1;
  size_t pes = dtype_size(cfg->param_dtype);
  for (int u = 1; u < nu; u++) inner_bytes += (double)rt_layout_unit_len(lay, u) * (double)pes;
  /* wrap diagnostic: measured gathers against the repeating structure */
  rt_timing tm;
  rt_get_timing(rt, &tm);
  int sharded = rt_strategy_sharding(cfg->strategy).params;
  int per_unit = !sharded ? 0 : cfg->reshard == HSR_RT_RESHARD_NONE ? 1 : 2;
  size_t min_bytes = 64 << 10; /* checked before the run: every command validates the HSR_* variables first */
  if (st == HSR_OK) st = env_get_size("HSR_WRAP_MIN_BYTES", &min_bytes);
  wrap_input wi = {.gathers_per_step = m->gathers_per_step,
                       .repeating_blocks = m->blocks,
                       .units = nu,
                       .root_units = 1,
                       .gathers_per_unit = per_unit,
                       .root_gathers_per_step = cfg->root_reshard ? per_unit : (per_unit ? 1 : 0),
                       .mean_gather_bytes = inner ? inner_bytes / inner : 0,
                       .mean_gather_us = tm.gathers ? tm.gather_s / (double)tm.gathers * 1e6 : 0,
                       .min_unit_bytes = (double)min_bytes};
  wrap_report wr;
  if (st == HSR_OK) st = tune_wrap_check(&wi, &wr);
  if (st != HSR_OK) {
    ledger_free(ph);
    ledger_free(pu);
    cJSON_Delete(extra);
    return st;
  }
  /* per-linear wrapping: its gathers beyond one unit per block, at their measured duration */
  double extra_g = m->gathers_per_step - wi.root_gathers_per_step - (double)per_unit * cfg->micro_batches * m->blocks;
  if (!m->wrap_linear || extra_g < 0) extra_g = 0;
  double extra_ms = extra_g * wi.mean_gather_us * 1e-3;
  *warned = wr.too_many_gathers || wr.latency_bound;
  const hsr_ledger *mh = hsr_rt_ledger(rt), *mu = rt_ledger_in_use(rt);
  double steps = tm.steps ? (double)tm.steps : 1;
  double eng = tm.engine_s / steps * 1e3, wait = tm.wait_s / steps * 1e3, opt = tm.optim_s / steps * 1e3;
  double post = tm.post_s / steps * 1e3, data = tm.data_s / steps * 1e3;
  double book = eng - wait - post - opt - data, comp = tm.compute_s / steps * 1e3;
  if (out) {
    fprintf(out,
            "\nmemory ledger of rank 0 (held from the allocator, pool included; predicted from sizes and policy)\n");
    ledger_print(mh, ph, nparams, out);
    double per = (double)ledger_persistent(mh) / nparams;
    fprintf(out, "persistent per parameter: %.2f/S bytes = %.2f bytes at S = %d (%.0f parameters)%s\n", per * S, per, S,
            nparams,
            cfg->outer_shard == HSR_RT_OUTER_OPTIM ? "; outer shard: master, m, v and the accumulator over S x R" : "");
    if (cfg->offload == HSR_RT_OFFLOAD_OPTIM)
      fprintf(out, "offload optim: %.2f bytes per parameter in pinned host memory (master, m, v, gradient, staging)\n",
              (double)ledger_host(mh) / nparams);
    fprintf(out, "buffers in use: runtime peak %.1f KiB (predicted %.1f KiB, %+.2f%%)\n",
            (double)ledger_runtime_peak(mu) / 1024, (double)ledger_runtime_peak(pu) / 1024,
            pct((double)ledger_runtime_peak(mu), (double)ledger_runtime_peak(pu)));
    fprintf(out,
            "engine time per step (rank 0, %d steps): %.3f ms in calls = wait %.3f + collective posts %.3f + "
            "optimizer %.3f + data work %.3f + bookkeeping %.3f (%.2f%% of the %.3f ms step); compute between "
            "calls %.3f ms\n",
            (int)tm.steps, eng, wait, post, opt, data, book, m->step_ms > 0 ? 100.0 * book / m->step_ms : 0, m->step_ms,
            comp);
    fprintf(out, "all-gathers: %.1f per step (the schedule predicts %d), %.1f us each on average\n",
            m->gathers_per_step, pred_gathers, wi.mean_gather_us);
    if (extra_g > 0)
      fprintf(out,
              "per-linear wrapping: %.1f all-gathers per step more than one unit per block; at the measured %.1f us "
              "each that is %.3f ms of collective time per step (%.1f%% of the step); compare with --wrap block\n",
              extra_g, wi.mean_gather_us, extra_ms, m->step_ms > 0 ? 100.0 * extra_ms / m->step_ms : 0);
    if (*warned) fprintf(out, "WARNING: %s\n", wr.message);
    fflush(out);
  }
  /* the communication part first: it is collective */
  cJSON *o = json ? (extra ? extra : cJSON_CreateObject()) : NULL;
  if (o) extra = NULL;
  hsr_status cst = comm_report(rt, m, out, o);
  if (cst != HSR_OK) {
    cJSON_Delete(o);
    o = NULL;
    json = NULL;
  }
  if (json) {
    cJSON_AddNumberToObject(o, "activation_bytes_per_micro_batch", (double)m->activation_bytes);
    cJSON_AddItemToObject(o, "ledger", ledger_obj(mh));
    cJSON_AddItemToObject(o, "ledger_predicted", ledger_obj(ph));
    cJSON_AddItemToObject(o, "ledger_in_use", ledger_obj(mu));
    cJSON_AddItemToObject(o, "ledger_in_use_predicted", ledger_obj(pu));
    cJSON_AddNumberToObject(o, "parameters", nparams);
    cJSON_AddNumberToObject(o, "shard", S);
    cJSON_AddNumberToObject(o, "replicate", R);
    cJSON_AddStringToObject(o, "outer_shard", rt_outer_shard_name(cfg->outer_shard));
    cJSON_AddStringToObject(o, "offload", rt_offload_name(cfg->offload));
    cJSON_AddNumberToObject(o, "host_bytes_per_param", (double)ledger_host(mh) / nparams);
    cJSON_AddNumberToObject(o, "persistent_bytes_per_param_times_S", (double)ledger_persistent(mh) * S / nparams);
    cJSON *t = cJSON_AddObjectToObject(o, "timing_per_step_ms");
    cJSON_AddNumberToObject(t, "steps", (double)tm.steps);
    cJSON_AddNumberToObject(t, "step", m->step_ms);
    cJSON_AddNumberToObject(t, "engine", eng);
    cJSON_AddNumberToObject(t, "wait", wait);
    cJSON_AddNumberToObject(t, "collective_posts", post);
    cJSON_AddNumberToObject(t, "optimizer", opt);
    cJSON_AddNumberToObject(t, "data_work", data);
    cJSON_AddNumberToObject(t, "bookkeeping", book);
    cJSON_AddNumberToObject(t, "bookkeeping_pct", m->step_ms > 0 ? 100.0 * book / m->step_ms : 0);
    cJSON_AddNumberToObject(t, "compute", comp);
    cJSON *w = cJSON_AddObjectToObject(o, "wrap");
    cJSON_AddNumberToObject(w, "gathers_per_step", m->gathers_per_step);
    cJSON_AddNumberToObject(w, "gathers_per_step_predicted", pred_gathers);
    cJSON_AddNumberToObject(w, "repeating_blocks", m->blocks);
    cJSON_AddNumberToObject(w, "extra_gathers_vs_block", extra_g);
    cJSON_AddNumberToObject(w, "extra_gather_ms_vs_block", extra_ms);
    cJSON_AddNumberToObject(w, "units", nu);
    cJSON_AddNumberToObject(w, "gathers_per_block", wr.gathers_per_block);
    cJSON_AddNumberToObject(w, "mean_gather_bytes", wi.mean_gather_bytes);
    cJSON_AddNumberToObject(w, "mean_gather_us", wi.mean_gather_us);
    cJSON_AddBoolToObject(w, "too_many_gathers", wr.too_many_gathers);
    cJSON_AddBoolToObject(w, "latency_bound", wr.latency_bound);
    cJSON_AddStringToObject(w, "message", wr.message);
    char *txt = cJSON_Print(o);
    if (txt) fprintf(json, "%s\n", txt);
    free(txt);
    cJSON_Delete(o);
  }
  cJSON_Delete(extra);
  ledger_free(ph);
  ledger_free(pu);
  return cst;
}
