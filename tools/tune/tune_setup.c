/* hsr tune's context (tune_setup): the model, its activations and compute
 * time, the cost model and the memory budget; shared by the planner and the
 * calculator (cmd_tune.c) and by --validate (tune_validate.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "tune_cli.h"
#include "launch/boot_internal.h"
#include "common/dtype_internal.h"

static char *slurp(const char *path, hsr_status *st) {
  FILE *f;
  if ((*st = file_fopen_read("input", path, &f)) != HSR_OK) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) free(b), b = NULL;
  fclose(f);
  if (!b) {
    *st = hsr_error(HSR_ERR_INVALID, "cannot read '%s'", path);
    return NULL;
  }
  b[n] = '\0';
  return b;
}

hsr_status tune_compute_from(const char *path, int units, double bwd, double *fwd_ms, char *desc, size_t len);

/* The unit that holds the root's parameters (the first unless --root last). */
static int root_unit(const tune_model *m) { return m->root == HSR_TUNE_ROOT_LAST ? m->units - 1 : 0; }

/* With a shape: each policy's activations, and its recompute per unit (a
 * layer's forward times the share of its FLOPs recomputed, plus the
 * elementwise bytes at the runtime's data rate), spread over the units that
 * hold layers. */
static hsr_status activations(tune_ctx *x) {
  const tune_arch *a = &x->o->arch;
  tune_model *m = &x->model;
  int root = root_unit(m), plain = m->units == a->layers + 1;
  int has_root = m->root != HSR_TUNE_ROOT_NONE && m->units > 1;
  double lf = tune_arch_layer_flops(a), rf = tune_arch_root_flops(a);
  double fwd_all = 0; /* the forward of every unit, and the layers' share of it */
  for (int u = 0; u < m->units; u++) fwd_all += m->unit_fwd_ms ? m->unit_fwd_ms[u] : m->fwd_ms;
  double layers_fwd = fwd_all * a->layers * lf / (a->layers * lf + rf);
  for (int k = 0; k < HSR_TUNE_RECOMPUTES; k++) {
    hsr_rt_recompute rc = (hsr_rt_recompute)k;
    double fl = 0, by = 0;
    HSR_CHECK(tune_act_predict(a, rc, &x->act[rc]));
    HSR_CHECK(tune_recompute_cost(a, rc, &fl, &by));
    if (!(x->unit_rc[rc] = calloc((size_t)m->units, sizeof(double)))) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    double elem_ms = by / (x->net.data_gbs * 1e9) * 1e3; /* one layer's elementwise recompute */
    for (int u = 0; u < m->units; u++) {
      if (plain && u == root) continue; /* the root is not recomputed */
      if (plain)
        x->unit_rc[rc][u] = (m->unit_fwd_ms ? m->unit_fwd_ms[u] : m->fwd_ms) * fl / lf + elem_ms;
      else if (!(has_root && u == root))
        x->unit_rc[rc][u] = (layers_fwd * fl / lf + a->layers * elem_ms) / (m->units - has_root);
    }
    m->act_policy[rc] = x->act[rc].peak;
    m->unit_recompute_ms[rc] = x->unit_rc[rc];
  }
  m->act_by_policy = 1;
  return HSR_OK;
}

void tune_ctx_free(tune_ctx *x) {
  if (!x) return;
  free(x->unit_params), free(x->unit_fwd);
  for (int k = 0; k < HSR_TUNE_RECOMPUTES; k++) free(x->unit_rc[k]);
  x->unit_params = x->unit_fwd = NULL;
  memset(x->unit_rc, 0, sizeof x->unit_rc);
}

static hsr_status compute(tune_ctx *x) {
  const tune_opts *o = x->o;
  tune_model *m = &x->model;
  m->bwd_ratio = o->bwd_ratio;
  if (o->compute_ms > 0) {
    m->fwd_ms = o->compute_ms;
    snprintf(x->compute_desc, sizeof x->compute_desc, "%.3f ms per unit forward (given)", m->fwd_ms);
  } else if (o->tflops > 0 || (!o->compute_from && x->net.device_is_gpu)) {
    double tf = o->tflops > 0 ? o->tflops : 400;
    m->fwd_ms = 2 * (m->params / m->units) * o->tokens / (tf * 1e12) * 1e3;
    if (x->unit_fwd) { /* the shape's FLOPs: the root's head, each layer's matmuls and attention */
      const tune_arch *a = &o->arch;
      int root = root_unit(m), plain = m->units == a->layers + 1;
      double all = a->layers * tune_arch_layer_flops(a) + tune_arch_root_flops(a);
      for (int u = 0; u < m->units; u++)
        x->unit_fwd[u] = (plain ? (u == root ? tune_arch_root_flops(a) : tune_arch_layer_flops(a)) : all / m->units) /
                         (tf * 1e12) * 1e3;
      m->unit_fwd_ms = x->unit_fwd;
      m->fwd_ms = all / m->units / (tf * 1e12) * 1e3;
    }
    m->compute_default = o->tflops <= 0;
    snprintf(x->compute_desc, sizeof x->compute_desc, "%.3f ms per unit forward (%s%g TFLOP/s x %g tokens per rank)",
             m->fwd_ms, o->tflops > 0 ? "" : "default: ", tf, o->tokens);
  } else if (o->compute_from) {
    HSR_CHECK(tune_compute_from(o->compute_from, m->units, m->bwd_ratio, &m->fwd_ms, x->compute_desc,
                                sizeof x->compute_desc));
  } else {
    m->fwd_ms = 10;
    m->compute_default = 1;
    snprintf(x->compute_desc, sizeof x->compute_desc, "10 ms per unit forward (default: give --compute-ms-per-unit)");
  }
  return HSR_OK;
}

/* The memory bound: --mem-budget, else the GPU's memory (--hw) less the
 * reserve. */
static void budget(tune_ctx *x) {
  const tune_opts *o = x->o;
  const double G = 1024.0 * 1024 * 1024;
  double cap = o->hw ? tune_hw_memory(o->hw) : 0, dev = 0;
  char pci[64] = "", name[96] = "";
  if (x->live && o->mem_budget <= 0 && x->cl && cluster_rank_gpu(x->cl, 0) >= 0) {
    const hsr_topo *t = cluster_node_topo(x->cl, cluster_rank_node(x->cl, 0));
    const char *bus = t ? topo_gpu_pci(t, cluster_rank_gpu(x->cl, 0)) : NULL;
    if (bus) snprintf(pci, sizeof pci, "%s", bus);
    if (!pci[0] || tune_device_memory(pci, &dev, name, sizeof name) != HSR_OK) dev = 0; /* no driver: --hw's */
  }
  if (o->mem_budget > 0) {
    x->budget = o->mem_budget;
    snprintf(x->budget_desc, sizeof x->budget_desc, "--mem-budget %.2f GiB", o->mem_budget / G);
  } else if (dev > 0) {
    double res = tune_mem_reserve(dev);
    x->budget = dev - res;
    snprintf(x->budget_desc, sizeof x->budget_desc,
             "this job's GPU (rank 0's, %s %s): %.2f GiB less a reserve of %.2f GiB (2 GiB for the CUDA context and "
             "NCCL's buffers + 5%% for the allocator's fragmentation) = %.2f GiB",
             name[0] ? name : "GPU", pci, dev / G, res / G, x->budget / G);
  } else if (cap > 0) {
    double res = tune_mem_reserve(cap);
    x->budget = cap - res;
    snprintf(x->budget_desc, sizeof x->budget_desc,
             "--hw %s: %.0f GiB%s less a reserve of %.2f GiB (2 GiB for the CUDA context and NCCL's buffers + 5%% "
             "for the allocator's fragmentation) = %.2f GiB",
             o->hw, cap / G, strcmp(o->hw, "a100") ? "" : " (the 80 GB A100; for the 40 GB one give --mem-budget)",
             res / G, x->budget / G);
  }
}

hsr_status tune_setup(tune_ctx *x, hsr_cluster *cl) {
  const tune_opts *o = x->o;
  x->cl = cl;
  int gpus = 0;
  for (int n = 0; cl && n < cluster_num_nodes(cl); n++)
    if (cluster_node_topo(cl, n) && topo_num_gpus(cluster_node_topo(cl, n)) > 0) gpus = 1;
  if (cl && cluster_rank_gpu(cl, 0) >= 0) gpus = 1;
  HSR_CHECK(tune_net_default(o->hw ? o->hw : gpus ? "h100" : "host", &x->net));
  if (o->nbench) {
    tune_calib *c = NULL;
    HSR_CHECK(tune_calib_create(&c));
    hsr_status st = HSR_OK;
    for (int i = 0; i < o->nbench && st == HSR_OK; i++) {
      char *txt = slurp(o->bench[i], &st);
      if (txt) st = tune_calib_add_json(c, txt, o->bench[i]);
      free(txt);
    }
    if (st == HSR_OK) st = tune_calib_fit(c, &x->net, x->calib_report, sizeof x->calib_report);
    tune_calib_free(c);
    HSR_CHECK(st);
  }
  tune_model *m = &x->model;
  m->units = (int)o->units;
  m->params = o->unit_bytes > 0 ? o->unit_bytes / 4 * (double)o->units : o->params;
  m->root = (tune_root)o->root;
  m->act_bytes = o->act_bytes;
  if (o->has_shape) { /* parameters per unit from the shape, scaled to a given --params */
    const tune_arch *a = &o->arch;
    int root = root_unit(m);
    x->unit_params = malloc(sizeof(double) * (size_t)m->units);
    x->unit_fwd = malloc(sizeof(double) * (size_t)m->units);
    if (!x->unit_params || !x->unit_fwd) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    double scale = m->params / tune_arch_params(a);
    for (int u = 0; u < m->units; u++)
      x->unit_params[u] = m->units == a->layers + 1
                              ? scale * (u == root ? tune_arch_root_params(a) : tune_arch_layer_params(a))
                              : m->params / m->units;
    m->unit_params = x->unit_params;
  }
  HSR_CHECK(compute(x));
  if (o->has_shape) HSR_CHECK(activations(x));
  budget(x);
  return HSR_OK;
}
