/* The training driver: one job (bootstrap, engine, the loop, checkpoints,
 * the report) for an example model (--model mlp | gpt | llama,
 * train_models.c) with the sharding engine. The arguments (train_args.c),
 * the loop and the report are shared; what differs between the models sits
 * behind train_model (train.h). */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "tools/models/hf_config.h"
#include "tools/models/model_meta.h"
#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "hsr/config.h"
#include "hsr/runtime.h"
#include "common/sys.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "runtime/io/ledger_internal.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"
#include "train.h"
#include "train_report.h"

/* rank 0 opens a file; every rank learns whether it could, so none waits */
static hsr_status open_out(train_run *r, const char *path, const char *flag, int mode, sys_out *o) {
  if (!path) return HSR_OK;
  hsr_status st = HSR_OK;
  if (r->rank == 0) st = out_open(o, flag, path, mode);
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
  char pf[48];
  snprintf(pf, sizeof pf, "%d", a->cfg.prefetch);
  if (a->cfg.strategy != HSR_RT_FSDP && a->cfg.strategy != HSR_RT_HYBRID) /* parameters stay full: nothing applies */
    snprintf(rs, sizeof rs, "-"), snprintf(pf, sizeof pf, "-");
  printf("hsr train: %d ranks, %d node(s), %s, mesh %d x %d (replicate x shard), %s, reshard %s, prefetch %s, sync %s, "
         "%s%s%s/%s\n",
         r->world, boot_num_nodes(r->boot),
         a->cfg.device == HSR_DEVICE_CUDA  ? "CUDA (NCCL)"
         : a->cfg.device == HSR_DEVICE_SIM ? "sim"
                                           : "host",
         rt_replicate(r->rt), rt_shard(r->rt), rt_strategy_name(a->cfg.strategy), rs, pf,
         a->cfg.micro_batches > 1 ? rt_sync_name(a->cfg.sync) : "-",
         a->cfg.outer_shard == HSR_RT_OUTER_OPTIM ? "outer-shard optim, " : "",
         a->cfg.offload == HSR_RT_OFFLOAD_OPTIM ? "offload optim, " : "", dtype_name(a->cfg.param_dtype),
         dtype_name(a->cfg.reduce_dtype));
  a->model->describe(r, stdout);
  printf("global batch %d (%d per rank, %d micro-batch(es)), %d steps, lr %g", a->batch, a->batch / N,
         a->cfg.micro_batches, a->steps, a->lr);
  if (a->warmup || a->lr_min != a->lr) printf(" (warm-up %d, cosine to %g)", a->warmup, a->lr_min);
  printf("%s%s\n", a->init ? ", from " : "", a->init ? a->init : "");
  if (rt_partial(r->rt) > 0) { /* say which ranks the backward gathers stay in, and where they live */
    int K = rt_partial(r->rt), *pg = calloc((size_t)K, sizeof *pg);
    if (pg && mesh_partial_group(hsr_rt_get_mesh(r->rt), 0, pg) == HSR_OK) {
      printf("partial group of rank 0 (K = %d): ranks", K);
      for (int i = 0; i < K; i++) printf(" %d", pg[i]);
      int n0 = boot_node_of(r->boot, pg[0]), same = 1;
      for (int i = 1; i < K; i++) same &= boot_node_of(r->boot, pg[i]) == n0;
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
  double val_engine_s, val_wait_s;   /* engine time of validation passes: not training time */
  int meas, meas_ag_n, val_n, start; /* start: steps a checkpoint had done */
  double val_first;
  hsr_comm_counter comm[HSR_RT_GROUP_COUNT][HSR_OP_COUNT]; /* counters of the measured steps */
} loop_stats;

/* Every rank: a replica group's fields need the group (its state_hash). */
static hsr_status log_line(train_run *r, FILE *f, const hsr_rt_step_info *in, double loss, double val, double ms,
                           double tps, double gflops) {
  if (r->rank != 0 || !f) return train_ft_log(r, in->step, NULL);
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
  cJSON_AddNumberToObject(o, "recomputes", in->recomputes);
  cJSON *calls = cJSON_AddObjectToObject(o, "calls");
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
    cJSON *grp = cJSON_AddObjectToObject(calls, rt_group_name((hsr_rt_group)g));
    for (int op = 0; op < HSR_OP_COUNT; op++)
      cJSON_AddNumberToObject(grp, op_name((hsr_op)op), (double)in->calls[g][op]);
  }
  train_comm_json(o, "comm", in->comm, 1); /* per group and op: calls, bytes sent/received, fabric, full buffers */
  hsr_status st = train_ft_log(r, in->step, o);
  char *s = cJSON_PrintUnformatted(o);
  if (s) fprintf(f, "%s\n", s);
  free(s);
  cJSON_Delete(o);
  return st;
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
  char rc[32] = ""; /* with recompute on: the units recomputed, beside the gathers that served them */
  if (a->cfg.recompute != HSR_RT_RECOMPUTE_NONE) snprintf(rc, sizeof rc, " recompute %d", info->recomputes);
  printf("[%s] step %d/%d loss %.4f%s grad %.3f lr %.2e %.1f ms %.0f tok/s %.2f GFLOP/s  all-gather %llu "
         "reduce-scatter %llu all-reduce %llu%s\n",
         bar, s + 1, a->steps, loss, vs, info->grad_norm, info->lr, ms, tps, gflops,
         (unsigned long long)sum_op(info, HSR_OP_ALLGATHER), (unsigned long long)sum_op(info, HSR_OP_REDUCE_SCATTER),
         (unsigned long long)sum_op(info, HSR_OP_ALLREDUCE), rc);
  fflush(stdout);
}

static hsr_status train_loop(train_run *r, sys_out *logf, loop_stats *ls) {
  train_args *a = r->a;
  const train_model *m = a->model;
  double tokens = m->tokens_per_step(r), fpt = m->flops_per_token(r);
  ls->val = ls->val_first = NAN;
  int after_val = 0; /* a validation pass's gathers count in the next step's calls */
  rt_lr_schedule sched = train_schedule(a);
  /* --resume: the checkpoint says how many steps are done (and its data
   * position, seed and schedule must be this run's) */
  st_kv mkv[8];
  char mbuf[8][64];
  int nm = m->export_meta(r, mkv, mbuf); /* the model the checkpoints record */
  train_ckpt_state ts = {m->name, a->batch, a->seed, sched.total > 0 ? &sched : NULL, mkv, nm};
  int64_t start = 0;
  HSR_CHECK(train_ckpt_resume(&a->ck, r->boot, r->rt, &ts, a->steps, &start));
  HSR_CHECK(train_ft_join(r, &start)); /* replica groups: into the quorum (a joiner starts where it heals) */
  ls->start = (int)start;
  for (int s = (int)start; s < a->steps; s++) {
    double lr = rt_lr_at(&sched, s + 1);
    for (int g = 0; g < a->cfg.num_groups; g++) HSR_CHECK(hsr_rt_set_lr(r->rt, g, lr));
    HSR_CHECK(train_ft_begin(r, s));
    double loss, val = NAN, t0 = clock_s();
    hsr_rt_step_info info;
    HSR_CHECK(m->step(r, s, &loss, &info));
    int again = 0;
    HSR_CHECK(train_ft_end(r, s, &ts, &again));
    if (again) { /* dropped on every replica group: the same step again */
      s--;
      continue;
    }
    double ms = (clock_s() - t0) * 1e3, tps = tokens / (ms * 1e-3), gflops = fpt * tps * 1e-9;
    ls->total_ms += ms;
    if (s == start && a->steps > start + 1) { /* the first step records the execution order: measure from the second */
      double drop[3];
      rt_reset_timing(r->rt);
      if (m->profile) m->profile(r, drop, 1);
    } else {
      ls->meas++;
      ls->meas_ms += ms;
      train_comm_add(ls->comm, &info);
      if (!after_val) ls->meas_ag += (double)sum_op(&info, HSR_OP_ALLGATHER), ls->meas_ag_n++;
    }
    after_val = 0;
    if (s == start) ls->first = loss;
    ls->last = loss;
    if (m->val && ((s + 1) % a->val_every == 0 || s + 1 == a->steps)) {
      double p[3];
      rt_timing t0v, t1v;
      if (m->profile) m->profile(r, p, 0); /* validation is not training time */
      rt_get_timing(r->rt, &t0v);
      HSR_CHECK(m->val(r, &val));
      rt_get_timing(r->rt, &t1v);
      if (s > start || a->steps == start + 1) {
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
    HSR_CHECK(log_line(r, logf->f, &info, loss, val, ms, tps, gflops)); /* every rank: a group's state_hash */
    if (r->rank == 0 && logf->f) HSR_CHECK(out_flush(logf)); /* each line checked: a full disk ends the run now */
    if (r->rank == 0 && a->progress) progress(r, s, loss, ls->val, &info, ms, tps, gflops);
    if (train_ft_saver(r)) /* replica groups: the smallest live id saves */
      HSR_CHECK(train_ckpt_after_step(&a->ck, r->boot, r->rt, &ts, s + 1, a->steps)); /* when due; collective */
  }
  HSR_CHECK(train_ckpt_finish(&a->ck, r->boot, r->rt)); /* --async-save: the last save commits */
  HSR_CHECK(train_ft_finish(r, a->steps));
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
  boot_fault_hook(r->boot, "final"); /* HSR_FAULT: the run's final barrier */
  hsr_status st = boot_barrier(r->boot);
  if (st == HSR_OK) st = train_gemm_probe(hsr_rt_device(r->rt), hsr_rt_compute_stream(r->rt), pm, pn, pk, 0.3, &g);
  st = train_agree(r->boot, st);
  if (st == HSR_OK) st = boot_allgather(r->boot, &g, sizeof g, all);
  for (int i = 0; i < r->world; i++) mean += all[i] / r->world;
  free(all);
  HSR_CHECK(st);
  int ran = r->a->steps - ls->start;
  double step_s = ls->meas ? ls->meas_ms / ls->meas * 1e-3 : ls->total_ms * 1e-3 / (ran > 0 ? ran : 1);
  double tps = m->tokens_per_step(r) / step_s, gf = m->flops_per_token(r) * tps * 1e-9, per = gf / r->world;
  rt_timing tm;
  rt_get_timing(r->rt, &tm);
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

/* The parameters by name to safetensors (--export after the last step,
 * --export-init before the first), the model's __metadata__ with hsr_step. */
static hsr_status export_weights(train_run *r, const char *path, uint64_t max_shard_bytes, int step) {
  st_kv kv[8];
  char buf[8][64];
  model_meta meta;
  int n = r->a->model->export_meta(r, kv, buf), files = 0;
  HSR_CHECK(model_meta_make(&meta, kv, n, step, HSR_VERSION_STRING));
  HSR_CHECK(train_export(r->rt, r->boot, path, max_shard_bytes, meta.kv, meta.n, &files));
  int cfg = 0; /* the directory layout: transformers' config.json beside the shards */
  if (max_shard_bytes)
    HSR_CHECK(train_agree(r->boot, r->rank == 0 ? hf_config_write(path, meta.kv, meta.n, &cfg) : HSR_OK));
  if (r->rank == 0)
    printf("exported: %s (safetensors, %d tensors in %d file%s%s%s)\n", path,
           rt_layout_num_params(rt_get_layout(r->rt)), files, files == 1 ? "" : "s", cfg ? ", config.json" : "",
           step ? "" : ", the initial weights");
  return HSR_OK;
}

static hsr_status finish(train_run *r, const loop_stats *ls, FILE *jsonf) {
  train_args *a = r->a;
  const train_model *m = a->model;
  if (r->rank == 0) {
    int n = a->steps - ls->start;
    printf("loss %.4f -> %.4f over %d steps, %.2f ms/step mean", ls->first, ls->last, n,
           ls->total_ms / (n > 0 ? n : 1));
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
    train_measured tm = {.steps = ls->meas,
                         .step_ms = ls->meas ? ls->meas_ms / ls->meas : 0,
                         .gathers_per_step = ls->meas_ag_n ? ls->meas_ag / ls->meas_ag_n : 0,
                         .blocks = m->blocks(r),
                         .prog = prog,
                         .nprog = nprog,
                         .activation_bytes = m->activation_bytes(r),
                         .wrap_linear = a->wrap_linear};
    memcpy(tm.comm, ls->comm, sizeof tm.comm);
    int warned = 0;
    st = train_report(r->rt, &a->cfg, &tm, extra, r->rank == 0 ? jsonf : NULL, r->rank == 0 ? stdout : NULL, &warned);
    extra = NULL; /* owned by the report now */
  }
  free(prog);
  cJSON_Delete(extra);
  if (st == HSR_OK && a->export_path) st = export_weights(r, a->export_path, a->max_shard_bytes, a->steps);
  if (st == HSR_OK && a->trace) {
    if ((st = rt_trace_write(r->rt, a->trace)) == HSR_OK && r->rank == 0)
      printf("trace: %s (hsr trace summarize %s)\n", a->trace, a->trace);
  }
  return st;
}

/* The schedule's own peak of this run per rank (held ledger + activations,
 * predicted: train_predict) against what this host had before the engine
 * allocated: the first check (train_check_fit) estimates from sizes; this
 * one, before the first step, counts every transient buffer the schedule
 * takes. */
static hsr_status check_peak(train_run *r, int here, uint64_t mem) {
  const train_model *m = r->a->model;
  hsr_prog_call *prog = NULL;
  int nprog = 0;
  hsr_ledger *ph = NULL;
  hsr_status st = m->program(r, &prog, &nprog);
  if (st == HSR_OK) st = ledger_create(&ph);
  if (st == HSR_OK) st = train_predict(r->rt, &r->a->cfg, prog, nprog, m->activation_bytes(r), ph, NULL, NULL);
  double peak = st == HSR_OK ? (double)ledger_total_peak(ph) : 0, need = peak * here;
  if (st == HSR_OK && need > 0.9 * (double)mem) {
    char b[5][32];
    double pers = (double)ledger_persistent(ph), act = (double)m->activation_bytes(r);
    sys_bytes_text(need, b[0], sizeof b[0]), sys_bytes_text(pers, b[1], sizeof b[1]);
    sys_bytes_text(peak - pers - act, b[2], sizeof b[2]), sys_bytes_text(act, b[3], sizeof b[3]);
    sys_bytes_text((double)mem, b[4], sizeof b[4]);
    st = hsr_error(HSR_ERR_INVALID,
                   "the model does not fit in memory at its peak: the %d rank(s) on this host need about %s (per "
                   "rank: %s persistent, %s of gathered units and gradient buffers at the peak, in %s, %s of "
                   "activations: the schedule's count), %s is available: use a smaller model, --batch or more hosts",
                   here, b[0], b[1], b[2], phase_name(ledger_total_peak_where(ph).phase), b[3], b[4]);
  }
  free(prog);
  ledger_free(ph);
  return st;
}

static hsr_status run(train_run *r) {
  train_args *a = r->a;
  hsr_topo *topo = NULL;
  hsr_cluster *cl = NULL;
  sys_out logf = {0}, jsonf = {0};
  hsr_status st = train_ft_create(r); /* a replica group: before the engine, which it hooks */
  if (st == HSR_OK) st = topo_discover(NULL, &topo);
  if (st == HSR_OK) st = cluster_gather(r->boot, topo, &cl);
  if (st == HSR_OK && !a->strategy_given) { /* hybrid when the mesh has replicas, else fsdp */
    int S = a->cfg.shard ? a->cfg.shard : cluster_domain_size(cl);
    if (S < 1 || S > r->world || r->world % S) S = r->world;
    int R = a->cfg.replicate ? a->cfg.replicate : r->world / S;
    a->cfg.strategy = R > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
    if (a->cfg.strategy == HSR_RT_HYBRID && !a->cfg.shard) a->cfg.shard = S;
    if (R == 1 && a->cfg.outer_shard == HSR_RT_OUTER_OPTIM) /* said for the mesh, not the strategy it implies */
      st = train_agree(r->boot, train_check_mesh(a, S, R));
  }
  if (st == HSR_OK) { /* settings this mesh ignores, and what this host can hold: before the engine allocates */
    int S = 0, R = 0, here = 0;
    if (rt_config_resolve(&a->cfg, r->world, cluster_domain_size(cl), &S, &R) == HSR_OK) {
      for (int q = 0; q < r->world; q++) here += !strcmp(boot_hostname_of(r->boot, q), boot_hostname(r->boot));
      st = train_check_mesh(a, S, R);
      if (st == HSR_OK) st = train_check_fit(a, S, R, r->world, here);
      st = train_agree(r->boot, st);
    }
  }
  uint64_t mem = 0;
  int here = 0, have_mem = st == HSR_OK && a->cfg.device == HSR_DEVICE_HOST && sys_mem_available(&mem) == HSR_OK;
  for (int q = 0; q < r->world; q++) here += !strcmp(boot_hostname_of(r->boot, q), boot_hostname(r->boot));
  if (st == HSR_OK) st = hsr_rt_create(r->boot, NULL, cl, &a->cfg, &r->rt);
  if (st == HSR_OK) st = a->model->setup(r);
  if (st == HSR_OK && have_mem) st = train_agree(r->boot, check_peak(r, here, mem));
  int N = r->rt ? hsr_rt_dp_size(r->rt) : 1;
  if (st == HSR_OK && a->batch % (N * a->cfg.micro_batches)) {
    st = hsr_error(HSR_ERR_INVALID, "--batch %d must be a multiple of data-parallel ranks x micro-batches = %d x %d",
                   a->batch, N, a->cfg.micro_batches);
    error_share(); /* every rank computes it from the same flags and mesh: said once */
  }
  if (st == HSR_OK) st = open_out(r, a->log, "--log", HSR_OUT_STREAM, &logf);
  if (st == HSR_OK) st = open_out(r, a->json, "--json", HSR_OUT_WHOLE, &jsonf);
  if (st == HSR_OK && a->trace) st = rt_trace_enable(r->rt, 1);
  if (st == HSR_OK && r->rank == 0) print_header(r);
  if (st == HSR_OK && a->export_init) st = export_weights(r, a->export_init, 0, 0);
  loop_stats ls = {0};
  if (st == HSR_OK) st = train_loop(r, &logf, &ls);
  if (st == HSR_OK) st = finish(r, &ls, jsonf.f);
  if (st == HSR_OK) st = out_close(&logf); /* a write error is the run's error */
  if (st == HSR_OK) st = out_close(&jsonf);
  out_abort(&logf), out_abort(&jsonf); /* after an error: what is left (the log as written) */
  a->model->free(r);
  /* the job's one line before the teardown (leaving a lost coordinator waits
   * seconds; the other ranks' exit would have the launcher end this one first) */
  r->said = cli_say_shared("train", st, r->boot);
  char why[1024] = ""; /* teardown may raise errors of its own: the first one is the job's */
  int shared = st != HSR_OK && error_shared();
  if (st != HSR_OK) snprintf(why, sizeof why, "%s", hsr_last_error());
  train_ft_free(r); /* leaves the quorum; before the engine it reads */
  hsr_status dst = hsr_rt_destroy(r->rt);
  if (st == HSR_OK)
    st = dst;
  else
    hsr_error(st, "%s", why);
  if (shared) error_share(); /* still the job's one error */
  cluster_free(cl);
  topo_free(topo);
  return st;
}

int train_job(train_args *a) {
  openblas_set_num_threads(1); /* one BLAS thread per rank: ranks share the cores */
  train_run r = {a, NULL, NULL, 0, 1, NULL, 0};
  hsr_status st = hsr_boot_init(&r.boot);
  if (st != HSR_OK) return cli_fail("train", st);
  r.rank = hsr_boot_rank(r.boot), r.world = hsr_boot_size(r.boot);
  st = run(&r);
  if (st != HSR_OK) {
    int code = r.said ? cli_end_job(st, r.boot) : cli_fail_job("train", st, r.boot);
    hsr_boot_finalize(r.boot);
    return code;
  }
  st = hsr_boot_finalize(r.boot);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("train", st);
}
