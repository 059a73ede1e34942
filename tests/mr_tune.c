/* Multi-rank test: the cost model's bytes against what the communicators
 * count. For each spec ("strategy=hybrid,S=2,reshard=full,prefetch=1,...")
 * a synthetic model of units of one parameter each runs three steps through
 * the engine on the real mesh; every rank compares its counters of the third
 * step (calls, bytes sent and received, fabric bytes sent and received, full
 * buffers, per group and operation: hsr_rt_step_info) with tune_eval's
 * prediction for the same layout, the mesh's group shapes taken from the
 * engine's own mesh. Unit sizes are multiples of every group size, so each
 * member's share is the mean the model predicts.
 *
 *   mr_tune SPEC...    (units=U and elems=N in a spec: the model; root=last) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "hsr/runtime.h"
#include "topology/topology_internal.h"
#include "runtime/runtime_internal.h"
#include "tune/tune.h"

static int g_rank, g_fail;
#include "mr_check.h"
#include "mr_spec.h"

typedef struct spec {
  hsr_rt_config cfg;
  int units, last_root;
  long elems;
} spec;

static int parse_spec(const char *s, spec *o) {
  hsr_rt_config_default(&o->cfg);
  o->cfg.poison = 0;
  o->units = 3, o->elems = 4096, o->last_root = 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
    char *eq = strchr(t, '=');
    if (!eq) return -1;
    *eq = '\0';
    hsr_status st;
    if (mr_spec_policy(&o->cfg, t, eq + 1, &st)) {
      if (st != HSR_OK) return -1;
    } else if (!strcmp(t, "units")) {
      o->units = atoi(eq + 1);
    } else if (!strcmp(t, "elems")) {
      o->elems = atol(eq + 1);
    } else if (!strcmp(t, "last")) {
      o->last_root = atoi(eq + 1);
    } else {
      return -1;
    }
  }
  return 0;
}

static int run_engine(hsr_boot *b, const spec *sp, hsr_rt_step_info *info, tune_shape *shapes, int *S, int *R) {
  hsr_rt *rt = NULL;
  OK(hsr_rt_create(b, NULL, NULL, &sp->cfg, &rt));
  char name[32];
  for (int u = 0; u < sp->units; u++) {
    int id;
    snprintf(name, sizeof name, "u%d", u);
    OK(hsr_rt_unit_add(rt, name, sp->last_root && u == sp->units - 1, &id));
    snprintf(name, sizeof name, "u%d.w", u);
    int64_t shape[1] = {sp->elems};
    OK(hsr_rt_param_add(rt, id, name, 1, shape, 0));
  }
  OK(hsr_rt_commit(rt));
  for (int step = 0; step < 3; step++)
    for (int m = 0; m < sp->cfg.micro_batches; m++) {
      for (int u = 0; u < sp->units; u++) {
        OK(hsr_rt_forward_begin(rt, u));
        OK(hsr_rt_forward_end(rt, u));
      }
      for (int u = sp->units - 1; u >= 0; u--) {
        float *g;
        snprintf(name, sizeof name, "u%d.w", u);
        OK(hsr_rt_backward_begin(rt, u));
        OK(hsr_rt_grad_view(rt, name, &g));
        g[0] += 1e-3f;
        OK(hsr_rt_backward_end(rt, u));
      }
      if (m == sp->cfg.micro_batches - 1) {
        OK(hsr_rt_step(rt, info));
        OK(hsr_rt_zero_grad(rt));
      }
    }
  *S = rt_shard(rt), *R = rt_replicate(rt);
  hsr_topo *t = NULL;
  hsr_cluster *cl = NULL;
  OK(topo_discover(NULL, &t));
  OK(cluster_gather(b, t, &cl));
  OK(tune_mesh_shapes(cl, hsr_rt_get_mesh(rt), shapes));
  cluster_free(cl);
  topo_free(t);
  OK(hsr_rt_destroy(rt));
  return 0;
}

static int check(const char *label, const spec *sp, hsr_boot *b) {
  hsr_rt_step_info info;
  tune_shape sh[HSR_RT_GROUP_COUNT];
  int S = 0, R = 0;
  if (run_engine(b, sp, &info, sh, &S, &R)) return 1;
  tune_net net;
  OK(tune_net_default("host", &net));
  tune_model m = {.units = sp->units,
                      .params = (double)sp->elems * sp->units,
                      .fwd_ms = 1,
                      .bwd_ratio = 2,
                      .root = sp->last_root ? HSR_TUNE_ROOT_LAST : HSR_TUNE_ROOT_NONE};
  tune_result r;
  OK(tune_eval(&m, &net, &sp->cfg, S, R, sh, &r));
  const char *ops[3] = {"all_gather", "reduce_scatter", "all_reduce"};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_TUNE_OPS; op++) {
      const hsr_comm_counter *c = &info.comm[g][op];
      const tune_bytes *p = &r.bytes[g][op];
      const double got[6] = {(double)c->calls,       (double)c->bytes_sent,  (double)c->bytes_recv,
                             (double)c->fabric_sent, (double)c->fabric_recv, (double)c->bytes_full};
      const double want[6] = {p->calls, p->sent, p->recv, p->fabric_sent, p->fabric_recv, p->full};
      const char *what[6] = {"calls", "bytes sent", "bytes received", "fabric sent", "fabric received", "full"};
      for (int k = 0; k < 6; k++)
        CHECK(fabs(got[k] - want[k]) < 0.5, "%s: %s %s %s: counted %.0f, predicted %.0f (group of %d on %d nodes)",
              label, rt_group_name((hsr_rt_group)g), ops[op], what[k], got[k], want[k], sh[g].n, sh[g].nodes);
    }
  if (g_rank == 0)
    printf("%s: mesh %d x %d, fabric %.0f bytes per step over all ranks (predicted)\n", label, R, S,
           r.fabric_all_ranks);
  return 0;
}

int main(int argc, char **argv) {
  hsr_boot *b = NULL;
  if (hsr_boot_init(&b) != HSR_OK) {
    fprintf(stderr, "mr_tune: boot failed: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(b);
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    spec sp;
    if (parse_spec(argv[i], &sp)) {
      fprintf(stderr, "mr_tune: bad spec '%s'\n", argv[i]);
      rc = 2;
      break;
    }
    rc = check(argv[i], &sp, b);
  }
  hsr_boot_finalize(b);
  if (!rc && g_fail) rc = 1;
  if (!rc && g_rank == 0) printf("mr_tune: every counter as predicted\n");
  return rc;
}
