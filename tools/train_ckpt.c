/* hsr train's checkpoints. The program state: the model's name, the data
 * position as a global sample index (the example's sample j of step s is a
 * counter hash of (seed, s, j), so the index and the global batch say
 * exactly which samples come next on any number of ranks), the RNG (the
 * seed: no generator has hidden state) and the learning-rate schedule. */
#include "train_ckpt.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model_meta.h"

void train_ckpt_usage(FILE *f) {
  fprintf(f, "checkpoints (a directory per checkpoint: manifest + data files; see docs/checkpoints.md)\n"
             "  --ckpt DIR          save checkpoints under DIR (DIR/step-NNNNNNNN, DIR/latest) after the last step\n"
             "  --save-every N      and every N steps\n"
             "  --keep K            keep the newest K checkpoints of DIR (default: all)\n"
             "  --resume DIR|latest continue from a checkpoint (DIR: a checkpoint, a root or a root's latest file;\n"
             "                      latest: --ckpt's, or a fresh start when it has none yet) on any mesh and\n"
             "                      strategy; --steps is the total, so the run trains the steps after the\n"
             "                      checkpoint's. Checkpoints record the model: another one is refused\n"
             "  --async-save        save in the background: a step blocks only while this rank's share is copied\n"
             "                      to host memory; writing, fsync, checksums and the commit run on a writer\n"
             "                      thread (at most one save in flight: the next one waits, and says so)\n");
}

int train_ckpt_option(train_ckpt *c, int code, const char *arg) {
  long v;
  switch (code) {
  case TRAIN_OPT_CKPT: c->dir = arg; return 1;
  case TRAIN_OPT_RESUME: c->resume = arg; return 1;
  case TRAIN_OPT_ASYNC_SAVE: c->async_save = 1; return 1;
  case TRAIN_OPT_SAVE_EVERY:
  case TRAIN_OPT_KEEP:
    if (hsr_parse_long(code == TRAIN_OPT_KEEP ? "--keep" : "--save-every", arg, 1, 100000000, &v) != HSR_OK)
      return -hsr_cli_usage_error("train", "%s", hsr_last_error());
    *(code == TRAIN_OPT_KEEP ? &c->keep : &c->save_every) = (int)v;
    return 1;
  default: return 0;
  }
}

int train_ckpt_check(const train_ckpt *c) {
  if (!c->dir && (c->save_every || c->keep || c->async_save))
    return hsr_cli_usage_error("train", "--%s needs --ckpt DIR",
                               c->save_every ? "save-every"
                               : c->keep     ? "keep"
                                             : "async-save");
  if (c->resume && !strcmp(c->resume, "latest") && !c->dir)
    return hsr_cli_usage_error("train", "--resume latest needs --ckpt DIR (the root whose latest to resume)");
  return 0;
}

hsr_status train_ckpt_program(hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t done) {
  HSR_CHECK(hsr_ckpt_state_set_str(p, "model", ts->model));
  HSR_CHECK(hsr_ckpt_state_set_i64(p, "data.sample_index", done * ts->batch));
  HSR_CHECK(hsr_ckpt_state_set_i64(p, "data.batch", ts->batch));
  HSR_CHECK(hsr_ckpt_state_set_u64(p, "rng.seed", ts->seed));
  HSR_CHECK(hsr_ckpt_state_set_str(p, "rng.kind", "counter hash of (seed, step, sample): no hidden state"));
  HSR_CHECK(hsr_ckpt_state_set_str(p, "lr.schedule", ts->sched ? "warmup_cosine" : "constant"));
  if (ts->sched) {
    HSR_CHECK(hsr_ckpt_state_set_f64(p, "lr.max", ts->sched->lr));
    HSR_CHECK(hsr_ckpt_state_set_f64(p, "lr.min", ts->sched->lr_min));
    HSR_CHECK(hsr_ckpt_state_set_i64(p, "lr.warmup", ts->sched->warmup));
    HSR_CHECK(hsr_ckpt_state_set_i64(p, "lr.total", ts->sched->total));
  }
  return HSR_OK;
}

/* A background save that has finished: one line for the job. */
static void report_done(const hsr_ckpt_stats *w) {
  printf("checkpoint: step %" PRId64 " committed in the background -> %s, %.1f KB; this rank wrote %.1f KB in %.1f ms "
         "(data %.1f ms), the training blocked %.2f ms\n",
         w->step, w->dir, w->bytes_total / 1e3, w->bytes_rank / 1e3, w->background_seconds * 1e3, w->data_seconds * 1e3,
         w->seconds * 1e3);
  fflush(stdout);
}

/* The save in flight finishes first; *waited: whether it was still running. */
static hsr_status settle(hsr_boot *boot, hsr_rt *rt, int64_t next, int *waited) {
  int pending = 0;
  HSR_CHECK(hsr_ckpt_poll(rt, &pending));
  hsr_ckpt_stats w;
  double t0 = hsr_clock_s();
  HSR_CHECK(hsr_ckpt_wait(rt, -1, &w)); /* its failure is the same on every rank */
  double ms = (hsr_clock_s() - t0) * 1e3;
  *waited = pending;
  if (w.step < 0 || hsr_boot_rank(boot) != 0) return HSR_OK;
  if (pending && next >= 0)
    printf("checkpoint: step %" PRId64 " waits %.1f ms for the save of step %" PRId64 " still being written\n", next,
           ms, w.step);
  report_done(&w);
  return HSR_OK;
}

hsr_status train_ckpt_after_step(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, const train_ckpt_state *ts,
                                 int64_t done, int64_t steps) {
  if (!c->dir || !((c->save_every && done % c->save_every == 0) || done == steps)) return HSR_OK;
  int waited = 0;
  if (c->async_save) HSR_CHECK(settle(boot, rt, done, &waited));
  hsr_ckpt_state *p;
  HSR_CHECK(hsr_ckpt_state_create(&p));
  hsr_ckpt_stats s;
  hsr_ckpt_state *mc = NULL;
  hsr_ckpt_save_opts o = {p, c->keep, NULL, NULL, NULL, c->async_save};
  hsr_status st = train_ckpt_program(p, ts, done);
  if (st == HSR_OK && ts->nmodel_meta) st = hsr_ckpt_state_create(&mc);
  if (st == HSR_OK && mc) st = model_meta_config(ts->model_meta, ts->nmodel_meta, &o.model_kind, mc);
  o.model_config = mc;
  if (st == HSR_OK) st = hsr_ckpt_save(rt, c->dir, &o, &s);
  hsr_ckpt_state_free(p);
  hsr_ckpt_state_free(mc);
  HSR_CHECK(st);
  if (hsr_boot_rank(boot) == 0 && c->async_save) {
    printf("checkpoint: step %" PRId64 " -> %s: this rank's %.1f KB staged in %.2f ms (the training blocked %.2f ms); "
           "writing in the background\n",
           done, s.dir, s.bytes_rank / 1e3, s.stage_seconds * 1e3, s.seconds * 1e3);
    fflush(stdout);
  } else if (hsr_boot_rank(boot) == 0) {
    printf("checkpoint: step %" PRId64 " -> %s, %.1f KB in %.1f ms (%.3f GB/s); this rank wrote %.1f KB in %.1f ms\n",
           done, s.dir, s.bytes_total / 1e3, s.seconds * 1e3, s.gbps, s.bytes_rank / 1e3, s.data_seconds * 1e3);
    fflush(stdout);
  }
  return HSR_OK;
}

hsr_status train_ckpt_finish(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt) {
  int waited;
  return c->async_save ? settle(boot, rt, -1, &waited) : HSR_OK;
}

/* The saved state must describe this run's data stream. */
static hsr_status check_state(const hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t step, const char *dir) {
  const char *model = NULL;
  int64_t batch = 0, sample = -1;
  uint64_t seed = 0;
  if (hsr_ckpt_state_get_str(p, "model", &model) != HSR_OK || hsr_ckpt_state_get_i64(p, "data.batch", &batch) ||
      hsr_ckpt_state_get_i64(p, "data.sample_index", &sample) || hsr_ckpt_state_get_u64(p, "rng.seed", &seed))
    return hsr_error(HSR_ERR_INVALID, "--resume %s: not a checkpoint of hsr train (its program state lacks %s)", dir,
                     hsr_last_error());
  if (strcmp(model, ts->model))
    return hsr_error(HSR_ERR_INVALID, "--resume %s: a checkpoint of the %s model, this run trains the %s", dir, model,
                     ts->model);
  if (batch != ts->batch)
    return hsr_error(HSR_ERR_INVALID,
                     "--resume %s: saved with --batch %" PRId64 " (its data position is global sample %" PRId64
                     "); resume with --batch %" PRId64 ", on any number of ranks",
                     dir, batch, sample, batch);
  if (seed != ts->seed)
    return hsr_error(HSR_ERR_INVALID, "--resume %s: saved with --seed %" PRIu64 " (the data and teacher depend on it)",
                     dir, seed);
  if (sample != step * batch)
    return hsr_error(HSR_ERR_INVALID,
                     "--resume %s: its data position (sample %" PRId64 ") is not step %" PRId64 " x batch %" PRId64,
                     dir, sample, step, batch);
  return HSR_OK;
}

/* The checkpoint's model (when it records one) is the run's: the kind and
 * every config value (the shapes can agree where the model does not: the
 * heads). */
static hsr_status check_model(const hsr_ckpt *c, const train_ckpt_state *ts, const char *dir) {
  if (!ts->nmodel_meta) return HSR_OK;
  hsr_ckpt_state *saved, *mine;
  const char *kind = NULL, *my_kind = NULL;
  HSR_CHECK(hsr_ckpt_state_create(&saved));
  hsr_status st = hsr_ckpt_state_create(&mine);
  hsr_status got = st == HSR_OK ? hsr_ckpt_get_model(c, &kind, saved) : st;
  if (st == HSR_OK) st = model_meta_config(ts->model_meta, ts->nmodel_meta, &my_kind, mine);
  if (st == HSR_OK && got == HSR_ERR_NOT_FOUND)
    got = HSR_OK, kind = NULL; /* an older checkpoint: the load checks shapes */
  if (st == HSR_OK) st = got;
  if (st == HSR_OK && kind && strcmp(kind, my_kind))
    st = hsr_error(HSR_ERR_INVALID, "--resume %s: a checkpoint of the %s model, this run trains the %s", dir, kind,
                   my_kind);
  for (int i = 0; st == HSR_OK && kind && i < hsr_ckpt_state_count(mine); i++) {
    const char *k, *k2;
    char v[128], w[128] = "";
    st = hsr_ckpt_state_at(mine, i, &k, v, sizeof v);
    int j = -1;
    for (int q = 0; st == HSR_OK && q < hsr_ckpt_state_count(saved) && j < 0; q++)
      if (hsr_ckpt_state_at(saved, q, &k2, w, sizeof w) == HSR_OK && !strcmp(k, k2)) j = q;
    if (st == HSR_OK && (j < 0 || strcmp(v, w)))
      st = hsr_error(HSR_ERR_INVALID, "--resume %s: the checkpoint's %s model has %s %s, this run's has %s %s", dir,
                     kind, k, j < 0 ? "none" : w, k, v);
  }
  hsr_ckpt_state_free(saved);
  hsr_ckpt_state_free(mine);
  return st;
}

static void note_schedule(const hsr_ckpt_state *p, const train_ckpt_state *ts) {
  double mx = 0, mn = 0;
  int64_t w = 0, t = 0;
  const char *kind = "constant";
  hsr_ckpt_state_get_str(p, "lr.schedule", &kind);
  int was = !strcmp(kind, "warmup_cosine"), same = was == (ts->sched != NULL);
  if (was && ts->sched) {
    hsr_ckpt_state_get_f64(p, "lr.max", &mx);
    hsr_ckpt_state_get_f64(p, "lr.min", &mn);
    hsr_ckpt_state_get_i64(p, "lr.warmup", &w);
    hsr_ckpt_state_get_i64(p, "lr.total", &t);
    same = mx == ts->sched->lr && mn == ts->sched->lr_min && w == ts->sched->warmup && t == ts->sched->total;
  }
  if (!same)
    printf("note: the learning-rate schedule differs from the checkpoint's (%s): continuing with this run's\n", kind);
}

hsr_status train_ckpt_check_program(const hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t step,
                                    const char *from) {
  return check_state(p, ts, step, from);
}

/* --resume latest with no checkpoint under --ckpt yet: a fresh start. */
static hsr_status fresh_start(const train_ckpt *c, hsr_boot *boot, int *fresh) {
  *fresh = 0;
  if (strcmp(c->resume, "latest")) return HSR_OK;
  char p[4096];
  struct stat sb;
  snprintf(p, sizeof p, "%s/latest", c->dir);
  int none = stat(p, &sb) != 0;
  HSR_CHECK(hsr_boot_bcast(boot, &none, sizeof none, 0)); /* rank 0 decides for all */
  *fresh = none;
  return HSR_OK;
}

hsr_status train_ckpt_resume(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, const train_ckpt_state *ts, int64_t steps,
                             int64_t *start) {
  *start = 0;
  if (!c->resume) return HSR_OK;
  int fresh, rank = hsr_boot_rank(boot);
  HSR_CHECK(fresh_start(c, boot, &fresh));
  if (fresh) {
    if (rank == 0) printf("resume: no checkpoint under %s yet: starting at step 0\n", c->dir);
    return HSR_OK;
  }
  const char *path = strcmp(c->resume, "latest") ? c->resume : c->dir;
  hsr_ckpt_state *p;
  HSR_CHECK(hsr_ckpt_state_create(&p));
  /* the run's own checks first, so that a refusal changes nothing; a
   * checkpoint that does not open is left to the load to report on every rank */
  hsr_ckpt *pre = NULL;
  hsr_ckpt_info pi;
  hsr_status st = HSR_OK;
  if (hsr_ckpt_open(path, &pre) == HSR_OK) {
    hsr_ckpt_get_info(pre, &pi);
    st = hsr_ckpt_get_program(pre, p);
    if (st == HSR_OK) st = check_state(p, ts, pi.step, path);
    if (st == HSR_OK) st = check_model(pre, ts, path);
    if (st == HSR_OK && pi.step >= steps)
      st = hsr_error(HSR_ERR_INVALID,
                     "--resume %s: the checkpoint is at step %" PRId64 " and --steps is %" PRId64
                     " (the total): nothing left to train",
                     path, pi.step, steps);
    hsr_ckpt_close(pre);
  }
  hsr_ckpt_stats s;
  if (st == HSR_OK) st = hsr_ckpt_load(rt, path, p, &s);
  if (st == HSR_OK) st = check_state(p, ts, s.step, path);
  if (st == HSR_OK && rank == 0) {
    hsr_ckpt *ck = NULL;
    hsr_ckpt_info in = {0};
    if (hsr_ckpt_open(s.dir, &ck) == HSR_OK) hsr_ckpt_get_info(ck, &in);
    printf("resume: %s: step %" PRId64 ", next sample %" PRId64 ", saved on %d rank(s) as %d x %d %s; read %.1f KB "
           "in %.1f ms (%s)\n",
           s.dir, s.step, s.step * ts->batch, in.world, in.replicate, in.shard, in.strategy ? in.strategy : "?",
           s.bytes_rank / 1e3, s.seconds * 1e3, s.reads == 1 ? "one read" : "verified, then read again");
    note_schedule(p, ts);
    fflush(stdout);
    hsr_ckpt_close(ck);
  }
  hsr_ckpt_state_free(p);
  HSR_CHECK(st);
  *start = s.step;
  return HSR_OK;
}
