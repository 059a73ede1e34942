/* hsr train's checkpoints. The program state: the model's name, the data
 * position as a global sample index (the example's sample j of step s is a
 * counter hash of (seed, s, j), so the index and the global batch say
 * exactly which samples come next on any number of ranks), the RNG (the
 * seed: no generator has hidden state) and the learning-rate schedule. */
#include "train_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "tools/models/model_meta.h"
#include "train.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "runtime/runtime_internal.h"
#include "runtime/ckpt/ckpt_internal.h"

void train_ckpt_usage(FILE *f) {
  fprintf(f, "checkpoints (a directory per checkpoint: manifest + data files; see docs/checkpoints.md)\n"
             "  --ckpt DIR          save checkpoints under DIR (DIR/step-NNNNNNNN, DIR/latest) after the last step\n"
             "  --save-every N      and every N steps\n"
             "  --keep K            keep the newest K checkpoints of DIR (default: all)\n"
             "  --resume DIR|latest continue from a checkpoint (DIR: a checkpoint, a root or a root's latest file;\n"
             "                      latest: the newest committed checkpoint under --ckpt, whatever its 'latest'\n"
             "                      file says, or a fresh start when it has none) on any mesh and strategy;\n"
             "                      --steps is the total, so the run trains the steps after the checkpoint's.\n"
             "                      Checkpoints record the model: another one is refused. A run never saves\n"
             "                      over a committed checkpoint: it is refused before its first step\n"
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
    if (parse_long(code == TRAIN_OPT_KEEP ? "--keep" : "--save-every", arg, 1, 100000000, &v) != HSR_OK)
      return -cli_usage_error("train", "%s", hsr_last_error());
    *(code == TRAIN_OPT_KEEP ? &c->keep : &c->save_every) = (int)v;
    return 1;
  default: return 0;
  }
}

int train_ckpt_check(const train_ckpt *c) {
  if (!c->dir && (c->save_every || c->keep || c->async_save))
    return cli_usage_error("train", "--%s needs --ckpt DIR",
                           c->save_every ? "save-every"
                           : c->keep     ? "keep"
                                         : "async-save");
  if (c->resume && !strcmp(c->resume, "latest") && !c->dir)
    return cli_usage_error("train", "--resume latest needs --ckpt DIR (the root whose latest to resume)");
  return 0;
}

hsr_status train_ckpt_program(hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t done) {
  HSR_CHECK(hsr_ckpt_state_set_str(p, "model", ts->model));
  HSR_CHECK(hsr_ckpt_state_set_i64(p, "data.sample_index", done * ts->batch));
  HSR_CHECK(hsr_ckpt_state_set_i64(p, "data.batch", ts->batch));
  HSR_CHECK(ckpt_state_set_u64(p, "rng.seed", ts->seed));
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
  HSR_CHECK(ckpt_poll(rt, &pending));
  hsr_ckpt_stats w;
  double t0 = clock_s();
  HSR_CHECK(hsr_ckpt_wait(rt, -1, &w)); /* its failure is the same on every rank */
  double ms = (clock_s() - t0) * 1e3;
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
      hsr_ckpt_state_get_i64(p, "data.sample_index", &sample) || ckpt_state_get_u64(p, "rng.seed", &seed))
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
static hsr_status check_model(const ckpt_handle *c, const train_ckpt_state *ts, const char *dir) {
  if (!ts->nmodel_meta) return HSR_OK;
  hsr_ckpt_state *saved, *mine;
  const char *kind = NULL, *my_kind = NULL;
  HSR_CHECK(hsr_ckpt_state_create(&saved));
  hsr_status st = hsr_ckpt_state_create(&mine);
  hsr_status got = st == HSR_OK ? ckpt_get_model(c, &kind, saved) : st;
  if (st == HSR_OK) st = model_meta_config(ts->model_meta, ts->nmodel_meta, &my_kind, mine);
  if (st == HSR_OK && got == HSR_ERR_NOT_FOUND)
    got = HSR_OK, kind = NULL; /* an older checkpoint: the load checks shapes */
  if (st == HSR_OK) st = got;
  if (st == HSR_OK && kind && strcmp(kind, my_kind))
    st = hsr_error(HSR_ERR_INVALID, "--resume %s: a checkpoint of the %s model, this run trains the %s", dir, kind,
                   my_kind);
  for (int i = 0; st == HSR_OK && kind && i < ckpt_state_count(mine); i++) {
    const char *k, *k2;
    char v[128], w[128] = "";
    st = ckpt_state_at(mine, i, &k, v, sizeof v);
    int j = -1;
    for (int q = 0; st == HSR_OK && q < ckpt_state_count(saved) && j < 0; q++)
      if (ckpt_state_at(saved, q, &k2, w, sizeof w) == HSR_OK && !strcmp(k, k2)) j = q;
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

/* Which checkpoint the run continues, decided by rank 0 for all: --resume
 * DIR as given; --resume latest: the newest committed checkpoint under
 * --ckpt. `latest` missing, or naming an older one (a save that ended after
 * its commit and before `latest`), is said and not followed: following it,
 * or starting over, would later write over a committed checkpoint. No
 * committed checkpoint at all: a fresh start. */
typedef struct resume_pick {
  int32_t fresh;
  char path[4096];
  char note[640];
} resume_pick;

static hsr_status pick(const train_ckpt *c, hsr_boot *boot, resume_pick *d) {
  memset(d, 0, sizeof *d);
  if (hsr_boot_rank(boot) == 0) {
    char name[128];
    int64_t step = 0;
    if (strcmp(c->resume, "latest")) {
      snprintf(d->path, sizeof d->path, "%s", c->resume);
    } else if (ckpt_newest(c->dir, name, sizeof name, &step) != HSR_OK) {
      d->fresh = 1;
    } else {
      snprintf(d->path, sizeof d->path, "%s/%s", c->dir, name);
      char *ld = NULL;
      const char *lname = NULL;
      if (ckpt_resolve(c->dir, &ld) == HSR_OK) lname = strrchr(ld, '/') ? strrchr(ld, '/') + 1 : ld;
      if (!lname)
        snprintf(d->note, sizeof d->note,
                 "%s/latest is missing or names no checkpoint: resuming the newest committed one, %s (step %" PRId64
                 ")",
                 c->dir, name, step);
      else if (strcmp(lname, name))
        snprintf(d->note, sizeof d->note,
                 "%s/latest names %s, but %s (step %" PRId64
                 ") is newer and committed (a save ended before it updated latest): resuming it",
                 c->dir, lname, name, step);
      free(ld);
    }
  }
  return boot_bcast(boot, d, sizeof *d, 0);
}

/* A save this run will make (every --save-every steps after `start`, and
 * the last step) must not replace a committed checkpoint: a run that starts
 * over, or resumes an older step, above another run's checkpoints stops
 * here, before its first step. Rank 0 looks; every rank gets the answer. */
static hsr_status check_overwrite(const train_ckpt *c, int64_t start, int64_t steps) {
  DIR *d = opendir(c->dir);
  if (!d) return HSR_OK; /* made at the first save */
  struct dirent *e;
  int64_t hit = -1;
  while ((e = readdir(d)) != NULL) {
    char *end;
    if (strncmp(e->d_name, "step-", 5) || !e->d_name[5]) continue;
    long long v = strtoll(e->d_name + 5, &end, 10);
    if (*end || v <= start || v > steps || !((c->save_every && v % c->save_every == 0) || v == steps)) continue;
    /* a name the save will need that cannot be a directory fails that save
     * after the steps before it trained: said now */
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
    if (stat(p, &sb) || !S_ISDIR(sb.st_mode)) {
      int loop = errno == ELOOP, dangling = !loop && lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode);
      closedir(d);
      return hsr_error(HSR_ERR_INVALID,
                       "--ckpt %s: %s, where this run will save step %lld, %s: remove it or give another --ckpt",
                       c->dir, e->d_name, v,
                       loop       ? "is a symbolic link loop"
                       : dangling ? "is a symbolic link to nothing"
                                  : "is not a directory");
    }
    if (ckpt_committed(c->dir, e->d_name) && (hit < 0 || v < hit)) hit = v;
  }
  closedir(d);
  if (hit < 0) return HSR_OK;
  char from[64];
  snprintf(from, sizeof from, start ? "resumes step %" PRId64 : "starts at step 0", start);
  return hsr_error(HSR_ERR_INVALID,
                   "--ckpt %s: this run %s and would save step %" PRId64
                   " over the committed checkpoint %s/step-%08" PRId64
                   " (another run's?): continue it with --resume latest, give another --ckpt, or remove it",
                   c->dir, from, hit, c->dir, hit);
}

/* The saves that fit: one checkpoint must, or the run is refused before its
 * first step (needed against available); all the run will keep at once
 * (--keep + 1 while a save is written, else every save) should, or it is
 * said. */
static hsr_status check_space(const train_ckpt *c, hsr_rt *rt, int64_t start, int64_t steps, int *warn, char *msg,
                              size_t n) {
  const rt_layout *l = rt_get_layout(rt);
  int np = rt_layout_num_params(l);
  double per = 64 * 1024; /* the manifest, `latest`, directory entries */
  for (int i = 0; i < np; i++) {
    rt_param_info p;
    if (rt_layout_param(l, i, &p) == HSR_OK) per += (double)p.numel * 4 * HSR_CKPT_KIND_COUNT + 512;
  }
  int64_t saves = c->save_every ? steps / c->save_every - start / c->save_every : 0; /* in (start, steps] */
  if (!c->save_every || steps % c->save_every) saves++;                              /* the last step's */
  int64_t held = c->keep && c->keep + 1 < saves ? c->keep + 1 : saves;
  char up[4096];
  snprintf(up, sizeof up, "%s", c->dir);
  struct stat sb;
  while (stat(up, &sb) != 0) { /* the nearest directory that exists: the file system it will be on */
    char *sl = strrchr(up, '/');
    if (!sl || sl == up) {
      snprintf(up, sizeof up, "%s", sl == up ? "/" : ".");
      break;
    }
    *sl = '\0';
  }
  uint64_t avail = 0;
  if (sys_fs_available(up, &avail) != HSR_OK) return HSR_OK; /* unknown: the saves will say */
  char need[32], have[32], all[32];
  sys_bytes_text(per, need, sizeof need);
  sys_bytes_text((double)avail, have, sizeof have);
  sys_bytes_text(per * (double)held, all, sizeof all);
  if ((double)avail < per)
    return hsr_error(HSR_ERR_INVALID,
                     "--ckpt %s: one checkpoint needs %s, the file system holding it has %s available (free space, "
                     "or give --ckpt on a larger one)",
                     c->dir, need, have);
  if ((double)avail < per * (double)held) {
    *warn = 1;
    snprintf(msg, n,
             "--ckpt %s: the run keeps %" PRId64 " checkpoints of %s at once (%s), the file system has %s available: "
             "a later save will fail (--keep K bounds what is kept)",
             c->dir, held, need, all, have);
  }
  return HSR_OK;
}

/* Before the first step: the overwrite and the space checks, agreed. */
static hsr_status check_saves(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, int64_t start, int64_t steps) {
  if (!c->dir) return HSR_OK;
  hsr_status st = HSR_OK;
  int warn = 0;
  char msg[640] = "";
  if (hsr_boot_rank(boot) == 0) {
    st = check_overwrite(c, start, steps);
    if (st == HSR_OK) st = check_space(c, rt, start, steps, &warn, msg, sizeof msg);
    if (warn) fprintf(stderr, "hsr train: warning: %s\n", msg);
  }
  return train_agree(boot, st);
}

hsr_status train_ckpt_resume(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, const train_ckpt_state *ts, int64_t steps,
                             int64_t *start) {
  *start = 0;
  if (!c->resume) return check_saves(c, boot, rt, 0, steps);
  int rank = hsr_boot_rank(boot);
  resume_pick d;
  HSR_CHECK(pick(c, boot, &d));
  if (d.fresh) {
    if (rank == 0) printf("resume: no committed checkpoint under %s yet: starting at step 0\n", c->dir);
    return check_saves(c, boot, rt, 0, steps);
  }
  if (rank == 0 && d.note[0]) printf("resume: %s\n", d.note);
  const char *path = d.path;
  hsr_ckpt_state *p;
  HSR_CHECK(hsr_ckpt_state_create(&p));
  /* the run's own checks first, so that a refusal changes nothing; a
   * checkpoint that does not open is left to the load to report on every rank */
  ckpt_handle *pre = NULL;
  ckpt_info pi;
  hsr_status st = HSR_OK;
  if (ckpt_open(path, &pre) == HSR_OK) {
    ckpt_get_info(pre, &pi);
    st = ckpt_get_program(pre, p);
    if (st == HSR_OK) st = check_state(p, ts, pi.step, path);
    if (st == HSR_OK) st = check_model(pre, ts, path);
    if (st == HSR_OK && pi.step >= steps)
      st = hsr_error(HSR_ERR_INVALID,
                     "--resume %s: the checkpoint is at step %" PRId64 " and --steps is %" PRId64
                     " (the total): nothing left to train",
                     path, pi.step, steps);
    ckpt_close(pre);
  }
  /* one decision for the job (a refusal on some ranks would leave the others
   * in the load's collectives), said once by rank 0 */
  st = train_agree(boot, st);
  hsr_ckpt_stats s;
  if (st == HSR_OK) st = hsr_ckpt_load(rt, path, p, &s);
  if (st == HSR_OK) st = check_state(p, ts, s.step, path);
  if (st == HSR_OK && rank == 0) {
    ckpt_handle *ck = NULL;
    ckpt_info in = {0};
    if (ckpt_open(s.dir, &ck) == HSR_OK) ckpt_get_info(ck, &in);
    printf("resume: %s: step %" PRId64 ", next sample %" PRId64 ", saved on %d rank(s) as %d x %d %s; read %.1f KB "
           "in %.1f ms (%s)\n",
           s.dir, s.step, s.step * ts->batch, in.world, in.replicate, in.shard, in.strategy ? in.strategy : "?",
           s.bytes_rank / 1e3, s.seconds * 1e3,
           s.in_place     ? "one read, in place"
           : s.reads == 1 ? "one read, held"
                          : "verified, then read again");
    note_schedule(p, ts);
    fflush(stdout);
    ckpt_close(ck);
  }
  hsr_ckpt_state_free(p);
  HSR_CHECK(st);
  *start = s.step;
  return check_saves(c, boot, rt, s.step, steps);
}
