/* hsr train's replica groups (train_ft.h, hsr/ft.h). */
#include "train_ft.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cli/cli.h"
#include "common/env.h"
#include "train.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "common/dtype_internal.h"
#include "runtime/runtime_internal.h"
#include "ft/ft_internal.h"

void train_ft_usage(FILE *f) {
  fprintf(f, "replica groups (fault tolerance: each group its own launch; docs/fault-tolerance.md)\n"
             "  --coordinator ADDR  the coordinator (hsr coordinator; etcd): HOST:PORT, comma-separated for a\n"
             "                      multi-member one; needs HSR_FT_TOKEN. This launch is one replica group: the\n"
             "                      groups average gradients over UCX, and a failed group is dropped while the\n"
             "                      others train on\n"
             "  --replica-id I      this group's id, 0 .. N-1 (its slice of every global batch)\n"
             "  --replicas N        replica groups of the run (the global batch is split N x S ways)\n"
             "  --join              a restarted group: heal from a live group over UCX (parameters, optimizer\n"
             "                      state, step, data position, RNG, schedule) and train on with it\n"
             "  --hash-every N      log every group's state_hash every N steps, compared across groups\n"
             "                      (default 10; 0: only after healing and at the last step)\n"
             "                      --log rows then also hold replicas (the live groups of the step),\n"
             "                      replica_id, time (wall clock) and, when computed, state_hash; loss is the\n"
             "                      group's own slice's\n");
}

int train_ft_option(train_ft *f, int code, const char *arg) {
  long v;
  switch (code) {
  case TRAIN_OPT_COORD: f->coord = arg, f->given = 1; return 1;
  case TRAIN_OPT_JOIN: f->join = 1, f->given = 1; return 1;
  case TRAIN_OPT_REPLICA_ID:
    if (parse_long("--replica-id", arg, 0, HSR_FT_MAX_REPLICAS - 1, &v) != HSR_OK)
      return -cli_usage_error("train", "%s", hsr_last_error());
    f->id = (int)v, f->given = 1;
    return 1;
  case TRAIN_OPT_REPLICAS:
    if (parse_long("--replicas", arg, 1, HSR_FT_MAX_REPLICAS, &v) != HSR_OK)
      return -cli_usage_error("train", "%s", hsr_last_error());
    f->replicas = (int)v, f->given = 1;
    return 1;
  case TRAIN_OPT_HASH_EVERY:
    if (parse_long("--hash-every", arg, 0, 100000000, &v) != HSR_OK)
      return -cli_usage_error("train", "%s", hsr_last_error());
    f->hash_every = (int)v, f->given = 1;
    return 1;
  default: return 0;
  }
}

int train_ft_check(const train_args *a) {
  const train_ft *f = &a->ftc;
  if (!f->given) return 0;
  if (!f->coord)
    return cli_usage_error("train", "--replica-id, --replicas, --join and --hash-every need --coordinator ADDR "
                                    "(hsr coordinator; hsr-run starts one on loopback when none is given)");
  if (parse_hostports("--coordinator", f->coord, 16 /* ft/etcd.c's MAX_EP */) != HSR_OK)
    return cli_usage_error("train", "%s", hsr_last_error());
  if (f->replicas < 1) return cli_usage_error("train", "--coordinator needs --replicas N (the replica groups)");
  if (f->id < 0) return cli_usage_error("train", "--coordinator needs --replica-id I (0 to %d)", f->replicas - 1);
  if (f->id >= f->replicas)
    return cli_usage_error("train", "--replica-id %d with --replicas %d (valid: 0 to %d)", f->id, f->replicas,
                           f->replicas - 1);
  const char *tok = NULL;
  if (env_get_str("HSR_FT_TOKEN", &tok) != HSR_OK || !tok)
    return cli_usage_error("train", "--coordinator: HSR_FT_TOKEN is not set (the run's shared token: every group "
                                    "and the coordinator need the same one)");
  if (f->join && a->ck.resume)
    return cli_usage_error("train", "--join heals from the live groups and --resume loads from disk: use one");
  if (f->join && a->init) return cli_usage_error("train", "--join takes the live groups' weights: drop --init");
  if ((a->given & TRAIN_GIVEN_REPLICATE) && a->cfg.replicate > 1)
    return cli_usage_error("train",
                           "--replicate %d with --coordinator: a replica group trains with R = 1 inside "
                           "(its replicas are the other groups: --replicas)",
                           a->cfg.replicate);
  if (a->strategy_given && a->cfg.strategy == HSR_RT_HYBRID)
    return cli_usage_error("train", "--strategy hybrid with --coordinator: a replica group is fsdp, zero1, zero2 "
                                    "or ddp inside (its replicas are the other groups)");
  if (a->cfg.prefetch_step)
    return cli_usage_error("train", "--prefetch-step with --coordinator: a healed group installs its state at a "
                                    "step boundary, where the step-end prefetch holds the old values");
  return 0;
}

/* ---- the program's state: what a checkpoint saves ---- */

typedef struct ft_prog {
  train_ckpt_state ts;
  rt_lr_schedule sched;
} ft_prog;

static hsr_status program(void *ctx, int64_t done, hsr_ckpt_state *out) {
  ft_prog *p = ctx;
  return train_ckpt_program(out, &p->ts, done);
}

/* What must match across groups, named by the flags that set it. */
static char *identity(const train_args *a) {
  cJSON *o = cJSON_CreateObject();
  char b[64];
#define NUM(k, v) (snprintf(b, sizeof b, "%.9g", (double)(v)), cJSON_AddStringToObject(o, k, b))
  cJSON_AddStringToObject(o, "--model", a->model->name);
  NUM("--layers", a->layers);
  NUM("--dim", a->dim);
  NUM("--heads", a->heads);
  NUM("--classes", a->classes);
  NUM("--seq", a->seq);
  cJSON_AddStringToObject(o, "--data", a->data ? a->data : "-");
  NUM("--batch", a->batch);
  NUM("--micro-batches", a->cfg.micro_batches);
  NUM("--seed", (double)a->seed);
  NUM("--steps", a->steps);
  NUM("--lr", a->lr);
  NUM("--lr-min", a->lr_min);
  NUM("--warmup", a->warmup);
  NUM("--wd", a->wd);
  NUM("--clip", a->cfg.clip);
  cJSON_AddStringToObject(o, "--strategy", a->strategy_given ? rt_strategy_name(a->cfg.strategy) : "fsdp");
  cJSON_AddStringToObject(o, "--param-dtype", dtype_name(a->cfg.param_dtype));
  cJSON_AddStringToObject(o, "--reduce-dtype", dtype_name(a->cfg.reduce_dtype));
  cJSON_AddStringToObject(o, "--wrap", a->wrap_linear ? "linear" : "block");
  cJSON_AddStringToObject(o, "--device",
                          a->cfg.device == HSR_DEVICE_CUDA  ? "cuda"
                          : a->cfg.device == HSR_DEVICE_SIM ? "sim"
                                                            : "host");
  int dev_reduce = 0; /* where the groups average (HSR_FT_DEVICE_REDUCE): both ends must */
  if (a->cfg.device == HSR_DEVICE_CUDA && env_get_choice("HSR_FT_DEVICE_REDUCE", &dev_reduce) == HSR_OK)
    cJSON_AddStringToObject(o, "HSR_FT_DEVICE_REDUCE", dev_reduce ? "nccl" : "host");
#undef NUM
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

hsr_status train_ft_create(train_run *r) {
  train_args *a = r->a;
  train_ft *f = &a->ftc;
  if (!f->given) return HSR_OK;
  ft_prog *p = calloc(1, sizeof *p);
  char *id = identity(a);
  if (!p || !id) {
    free(p), free(id);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  p->sched = train_schedule(a);
  p->ts = (train_ckpt_state){.model = a->model->name,
                             .batch = a->batch,
                             .seed = a->seed,
                             .sched = p->sched.total > 0 ? &p->sched : NULL}; /* the program state only */
  hsr_ft_config c = {f->coord, f->id, f->replicas, f->join, f->hash_every, id, program, p};
  hsr_status st = hsr_ft_create(r->boot, &c, &f->ft);
  free(id);
  if (st != HSR_OK) {
    free(p);
    return st;
  }
  f->prog = p;
  if (!a->strategy_given) a->cfg.strategy = HSR_RT_FSDP, a->strategy_given = 1; /* R = 1 inside */
  return hsr_ft_attach(f->ft, &a->cfg);
}

hsr_status train_ft_join(train_run *r, int64_t *start) {
  train_ft *f = &r->a->ftc;
  if (!f->ft) return HSR_OK;
  int64_t done = 0;
  HSR_CHECK(hsr_ft_join(f->ft, r->rt, &done));
  if (r->rank == 0) {
    printf("replica group %d of %d (%d rank(s)): %s after %" PRId64 " steps; cross-group timeout %.1f s\n", f->id,
           f->replicas, r->world, f->join ? "admitted, heals from a live group" : "in the quorum", done,
           ft_timeout(f->ft));
    fflush(stdout);
  }
  *start = done;
  return HSR_OK;
}

hsr_status train_ft_begin(train_run *r, int64_t s) {
  train_ft *f = &r->a->ftc;
  if (!f->ft) return HSR_OK;
  hsr_ft_heal h;
  HSR_CHECK(hsr_ft_step_begin(f->ft, s, &h));
  if (h.healed) { /* the data position, RNG and schedule must be this run's */
    const ft_prog *p = f->prog;
    HSR_CHECK(train_ckpt_check_program(h.program, &p->ts, s, "the healing replica"));
    if (rt_get_step(r->rt) != s)
      return hsr_error(HSR_ERR_MISMATCH, "healed after %" PRId64 " steps, but the engine holds %" PRId64, s,
                       rt_get_step(r->rt));
  }
  double tb = h.bytes, ts = h.seconds;
  if ((h.healed || h.sent) && r->world > 1) { /* the group's totals: every rank moved its own slice */
    double v[2] = {tb, ts}, *all = calloc((size_t)r->world * 2, sizeof *all);
    if (!all) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    hsr_status st = boot_allgather(r->boot, v, sizeof v, all);
    tb = 0, ts = 0;
    for (int i = 0; i < r->world; i++) tb += all[2 * i], ts = all[2 * i + 1] > ts ? all[2 * i + 1] : ts;
    free(all);
    HSR_CHECK(st);
  }
  if (r->rank == 0 && (h.healed || h.failed || h.sent)) {
    char from[160] = "";
    if (h.healed && h.npeers > 1) { /* the healers that each sent a slice */
      size_t o = (size_t)snprintf(from, sizeof from, " in slices from %d healers (replicas ", h.npeers);
      for (int i = 0; i < h.npeers && i < HSR_FT_HEAL_PEERS && o < sizeof from; i++)
        o += (size_t)snprintf(from + o, sizeof from - o, "%s%d", i ? "," : "", h.peers[i]);
      if (o < sizeof from) snprintf(from + o, sizeof from - o, "%s)", h.npeers > HSR_FT_HEAL_PEERS ? ",..." : "");
    } else if (h.sent && h.npeers > 1)
      snprintf(from, sizeof from, " (a slice: one of %d healers)", h.npeers);
    if (h.healed)
      printf("healed from replica %d after %" PRId64 " steps: %.2f MB over UCX in %.3f s (%.1f MB/s)%s, installed; "
             "state_hash compared at the next vote\n",
             h.peer, s, tb / 1e6, ts, ts > 0 ? tb / 1e6 / ts : 0, from);
    else if (h.sent)
      printf("sent this group's state to replica %d after %" PRId64 " steps%s: %.2f MB in %.3f s%s\n", h.peer, s, from,
             tb / 1e6, ts, h.failed ? " (it did not arrive: the step will be dropped)" : "");
    else
      printf("healing from replica %d failed; the step will be dropped and healing tried again\n", h.peer);
    fflush(stdout);
  }
  return HSR_OK;
}

hsr_status train_ft_end(train_run *r, int64_t s, const train_ckpt_state *ts, int *again) {
  train_ft *f = &r->a->ftc;
  *again = 0;
  if (!f->ft) return HSR_OK;
  HSR_CHECK(hsr_ft_step_end(f->ft, &f->last));
  hsr_ft_step *L = &f->last;
  if (r->rank == 0 && L->line[0] && !L->stop) {
    printf("hsr train: replica %d: %s\n", f->id, L->line);
    fflush(stdout);
  }
  if (L->stop) {
    char why[1100];
    snprintf(why, sizeof why, "replica %d: %s", f->id, L->line);
    if (L->coord_lost && L->saver && r->a->ck.dir) { /* the last committed state, on disk */
      hsr_status st = train_ckpt_after_step(&r->a->ck, r->boot, r->rt, ts, s, s);
      if (st == HSR_OK) st = train_ckpt_finish(&r->a->ck, r->boot, r->rt); /* --async-save: committed before exit */
      size_t o = strlen(why);
      snprintf(why + o, sizeof why - o,
               st == HSR_OK ? "; saved the checkpoint of step %" PRId64 " under %s"
                            : "; the checkpoint of step %" PRId64 " under %s failed",
               s, r->a->ck.dir);
    }
    hsr_error(L->coord_lost ? HSR_ERR_TIMEOUT : HSR_ERR_STATE, "%s", why);
    error_share(); /* the leader's decision, on every rank of the group: said once */
    return L->coord_lost ? HSR_ERR_TIMEOUT : HSR_ERR_STATE;
  }
  *again = !L->committed;
  return HSR_OK;
}

hsr_status train_ft_log(train_run *r, int64_t done, cJSON *row) {
  train_ft *f = &r->a->ftc;
  f->have_hash = 0;
  if (!f->ft) return HSR_OK;
  if ((f->hash_every > 0 && done % f->hash_every == 0) || done == r->a->steps) {
    HSR_CHECK(hsr_ft_state_hash(f->ft, r->rt, done, &f->hash));
    f->have_hash = 1;
    f->hash_done = done;
  }
  if (!row) return HSR_OK;
  cJSON *rep = cJSON_AddArrayToObject(row, "replicas");
  for (int i = 0; i < f->last.nreplicas; i++) cJSON_AddItemToArray(rep, cJSON_CreateNumber(f->last.replicas[i]));
  cJSON_AddNumberToObject(row, "replica_id", f->id);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  cJSON_AddNumberToObject(row, "time", (double)t.tv_sec + t.tv_nsec * 1e-9);
  if (f->have_hash) {
    char h[24];
    snprintf(h, sizeof h, "%016" PRIx64, f->hash);
    cJSON_AddStringToObject(row, "state_hash", h);
  }
  return HSR_OK;
}

int train_ft_saver(const train_run *r) { return !r->a->ftc.ft || r->a->ftc.last.saver; }

hsr_status train_ft_finish(train_run *r, int64_t done) {
  train_ft *f = &r->a->ftc;
  if (!f->ft) return HSR_OK;
  if (!f->have_hash || f->hash_done != done) HSR_CHECK(hsr_ft_state_hash(f->ft, r->rt, done, &f->hash));
  char line[1024];
  HSR_CHECK(hsr_ft_finish(f->ft, done, f->hash, line, sizeof line));
  if (r->rank == 0) {
    printf("hsr train: replica %d: %s\n", f->id, line);
    fflush(stdout);
  }
  return HSR_OK;
}

void train_ft_free(train_run *r) {
  train_ft *f = &r->a->ftc;
  hsr_ft_free(f->ft);
  f->ft = NULL;
  free(f->prog);
  f->prog = NULL;
}
