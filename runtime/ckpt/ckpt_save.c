/* hsr_ckpt_save: every rank writes its share (ckpt_plan.c) to its own data
 * file in parallel, then rank 0 commits: the manifest under a temporary
 * name, fsync, rename, directory fsync, then `latest` the same way. Ranks
 * agree at three points (directory ready, data durable, committed), so a
 * failure anywhere fails every rank with one message and nobody waits
 * longer than the link's timeout.
 *
 * A save is a job: ckpt_job_check and ckpt_job_plan on the training thread
 * (everything that reads the engine), then ckpt_job_run, which reads only
 * the job, the staged data and what commit fixed: here on the training
 * thread for a synchronous save, on the writer thread for an asynchronous
 * one (ckpt_async.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "hsr/config.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/runtime_internal.h"
#include "common/dtype_internal.h"
#include "common/common_internal.h"
#include "common/env.h"
#include "runtime/engine/state.h"

struct ckpt_job {
  hsr_rt *rt;
  rt_state_info in;  /* the engine, read-only; in.cfg points at cfg */
  hsr_rt_config cfg; /* a copy: the training thread changes the learning rates while a job runs */
  ckpt_link link;
  char root[4096], name[CKPT_NAME_MAX], dir[4096], file[64], path[4200];
  int rank, world, keep;
  uint32_t id;
  ckpt_stage fault;
  double delay;                 /* HSR_CKPT_DELAY (test hook) */
  char *prog;                   /* program state JSON (for the cross-rank comparison) */
  cJSON *prog_obj;              /* a copy of its object, for the manifest */
  char model[HSR_CKPT_KEY_MAX]; /* the model's kind ("": none) */
  cJSON *model_cfg;             /* a copy of its config object */
  char *model_text;             /* kind and config (for the cross-rank comparison) */
  ckpt_piece *pc;               /* this rank's pieces */
  int np;
  uint64_t bytes;     /* this rank's data bytes */
  const char *stage;  /* the staged data, in file order (NULL: written from the engine's memory) */
  uint64_t *progress; /* bumped as the job moves (atomic; NULL: nobody watches) */
  ckpt_crc crc;       /* of this rank's file */
  uint64_t block;     /* bytes per checksummed block */
  ckpt_vote *votes;   /* round 2: every rank's file */
  uint32_t *blocks;   /* every rank's block crcs, maxnb each */
  uint64_t maxnb;
  double t0, data_s, run_s;
  size_t staged;
  int committed;
};
typedef ckpt_job save_ctx;

static void bump(save_ctx *x) {
  if (x->progress) __atomic_add_fetch(x->progress, 1, __ATOMIC_RELAXED);
}

static uint64_t fnv(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static hsr_status mkdir_p(const char *path) {
  char p[4096];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return hsr_error(HSR_ERR_INVALID, "path too long");
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c == '/' || c == 0) {
      *s = 0;
      if (mkdir(p, 0755) && errno != EEXIST)
        return hsr_error(HSR_ERR_IO, "creating checkpoint directory '%s' failed: %s", p, strerror(errno));
      *s = c;
    }
    if (!c) break;
  }
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode))
    return hsr_error(HSR_ERR_IO, "checkpoint root '%s' is not a directory", path);
  return HSR_OK;
}

/* Removes a directory's files that `keep` says are not to be kept. */
static void remove_files(const char *dir, int (*keep)(const char *name, void *ctx), void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[4400];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (keep && keep(e->d_name, ctx))) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (unlink(p)) HSR_LOG_W("checkpoint: could not remove '%s': %s", p, strerror(errno));
  }
  closedir(d);
}

/* Rank 0: the root and an empty (or committed) checkpoint directory. */
static hsr_status prepare_dirs(save_ctx *x) {
  HSR_CHECK(mkdir_p(x->root));
  char m[4400];
  snprintf(m, sizeof m, "%s/%s", x->dir, CKPT_MANIFEST);
  struct stat sb;
  if (!stat(x->dir, &sb)) {
    if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_IO, "'%s' exists and is not a directory", x->dir);
    /* a committed checkpoint stays valid until the new manifest replaces it
     * (new data files have new names); a crashed attempt's files go */
    if (stat(m, &sb)) remove_files(x->dir, NULL, NULL);
    return HSR_OK;
  }
  if (mkdir(x->dir, 0755)) return hsr_error(HSR_ERR_IO, "creating '%s' failed: %s", x->dir, strerror(errno));
  return ckpt_fsync_dir(x->root);
}

/* What every rank decides alike from the same program state: refused here
 * on every rank, before anything is written. */
static hsr_status job_check(save_ctx *x, const hsr_ckpt_save_opts *o) {
  hsr_rt *rt = x->rt;
  HSR_CHECK(rt_state_idle(rt, "save", 0));
  HSR_CHECK(ckpt_fault_parse(x->in.step, &x->fault));
  HSR_CHECK(ckpt_block_bytes(&x->block));
  HSR_CHECK(env_get_double("HSR_CKPT_DELAY", &x->delay));
  ckpt_crc_init(&x->crc, x->block);
  if (o && o->name) {
    if (!ckpt_safe_name(o->name))
      return hsr_error(HSR_ERR_INVALID, "checkpoint name '%s' is not a plain name ([A-Za-z0-9._-])", o->name);
    snprintf(x->name, sizeof x->name, "%s", o->name);
  } else {
    snprintf(x->name, sizeof x->name, "step-%08" PRId64, x->in.step);
  }
  HSR_CHECK(ckpt_path(x->dir, sizeof x->dir, x->root, x->name));
  const char *model = o ? o->model_kind : NULL;
  if (model && ckpt_check_key(model) != HSR_OK)
    return hsr_error(HSR_ERR_INVALID, "checkpoint save: model kind '%s' is not a plain name (1-63 of [A-Za-z0-9_.-])",
                     model);
  return HSR_OK;
}

/* This rank's part: the program state and model copied (an async save
 * outlives the caller's), its pieces and bytes. */
static hsr_status job_plan(save_ctx *x, const hsr_ckpt_save_opts *o) {
  const hsr_ckpt_state *program = o ? o->program : NULL;
  HSR_CHECK(ckpt_state_json(program, &x->prog));
  const cJSON *po = ckpt_state_obj(program);
  x->prog_obj = po ? cJSON_Duplicate(po, 1) : cJSON_CreateObject();
  if (!x->prog_obj) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (o && o->model_kind) {
    snprintf(x->model, sizeof x->model, "%s", o->model_kind);
    char *cfg = NULL;
    HSR_CHECK(ckpt_state_json(o->model_config, &cfg));
    size_t n = strlen(x->model) + strlen(cfg) + 2;
    if ((x->model_text = malloc(n))) snprintf(x->model_text, n, "%s %s", x->model, cfg);
    free(cfg);
    const cJSON *co = ckpt_state_obj(o->model_config);
    x->model_cfg = co ? cJSON_Duplicate(co, 1) : cJSON_CreateObject();
    if (!x->model_text || !x->model_cfg) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  x->keep = o ? o->keep : 0;
  int rep, sh;
  HSR_CHECK(hsr_mesh_coords(x->in.mesh, x->rank, &rep, &sh));
  HSR_CHECK(ckpt_pieces(x->rt, &x->in, rep, sh, 0, &x->pc, &x->np));
  for (int i = 0; i < x->np; i++) x->bytes += 12 * x->pc[i].count;
  if (x->rank == 0) x->id = (uint32_t)(hsr_clock_ns() ^ ((uint64_t)getpid() << 16) ^ (uint64_t)time(NULL));
  return HSR_OK;
}

#define CKPT_DIRECT ((size_t)256 << 10)

/* The kinds a checkpoint holds, in each piece's order. */
static const rt_state_kind saved[CKPT_KINDS] = {RT_STATE_MASTER, RT_STATE_M, RT_STATE_V};

typedef struct writer {
  save_ctx *x;
  int fd;
  char *buf;
  size_t cap, fill;
} writer;

static hsr_status w_flush(writer *w) {
  hsr_rt *rt = w->x->rt;
  if (!w->fill) return HSR_OK;
  if (w->x->in.gpu) HSR_CHECK(rt_state_sync(rt)); /* the copies out of device memory landed */
  HSR_CHECK(ckpt_crc_feed(&w->x->crc, w->buf, w->fill));
  HSR_CHECK(ckpt_write_all(w->fd, w->buf, w->fill, w->x->path));
  w->fill = 0;
  return HSR_OK;
}

/* src: engine memory (host or device). */
static hsr_status w_append(writer *w, const void *src, size_t n) {
  hsr_rt *rt = w->x->rt;
  const char *s = src;
  if (!w->x->in.gpu && n >= CKPT_DIRECT) { /* host memory: large pieces go out without a copy */
    HSR_CHECK(w_flush(w));
    HSR_CHECK(ckpt_crc_feed(&w->x->crc, s, n));
    return ckpt_write_all(w->fd, s, n, w->x->path);
  }
  while (n) {
    size_t take = w->cap - w->fill < n ? w->cap - w->fill : n;
    HSR_CHECK(rt_state_copy(rt, w->buf + w->fill, s, take));
    w->fill += take;
    s += take;
    n -= take;
    if (w->fill == w->cap) HSR_CHECK(w_flush(w));
  }
  return HSR_OK;
}

static hsr_status write_pieces(save_ctx *x, writer *w) {
  for (int i = 0; i < x->np; i++)
    for (int k = 0; k < CKPT_KINDS; k++)
      HSR_CHECK(
          w_append(w, (float *)rt_state_ptr(x->rt, x->pc[i].unit, saved[k]) + x->pc[i].local, x->pc[i].count * 4));
  return w_flush(w);
}

/* The staged bytes: already in file order, in host memory. */
static hsr_status write_staged(save_ctx *x, int fd) {
  for (uint64_t o = 0; o < x->bytes;) {
    size_t n = x->bytes - o < CKPT_CHUNK ? (size_t)(x->bytes - o) : CKPT_CHUNK;
    HSR_CHECK(ckpt_crc_feed(&x->crc, x->stage + o, n));
    HSR_CHECK(ckpt_write_all(fd, x->stage + o, n, x->path));
    o += n;
    bump(x);
  }
  return HSR_OK;
}

/* This rank's data file: its pieces, each as master, m, v; fsync; rename. */
static hsr_status write_data(save_ctx *x) {
  hsr_rt *rt = x->rt;
  snprintf(x->file, sizeof x->file, "data-%08x-%05d.bin", x->id, x->rank);
  HSR_CHECK(ckpt_path(x->path, sizeof x->path, x->dir, x->file));
  if (!x->bytes) return HSR_OK;
  size_t cap = 0;
  hsr_status st = x->stage ? HSR_OK : ckpt_buffer_cap(&cap);
  if (cap > CKPT_CHUNK) cap = CKPT_CHUNK;
  if (cap > x->bytes) cap = (size_t)x->bytes;
  writer w = {x, -1, NULL, cap, 0};
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp", x->path);
  double t0 = clock_s();
  if (st == HSR_OK && !x->stage) st = rt_state_quiesce(rt); /* the optimizer's updates are in the state */
  if (st == HSR_OK && !x->stage) st = ckpt_stage_alloc(rt, cap, (void **)&w.buf);
  if (st == HSR_OK && (w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
    st = hsr_error(HSR_ERR_IO, "creating checkpoint data file '%s' failed: %s", tmp, strerror(errno));
  if (!x->stage) x->staged = w.buf ? cap : 0;
  if (st == HSR_OK) st = x->stage ? write_staged(x, w.fd) : write_pieces(x, &w);
  if (st == HSR_OK) st = ckpt_crc_finish(&x->crc);
  if (st == HSR_OK && fsync(w.fd)) st = hsr_error(HSR_ERR_IO, "fsync of '%s' failed: %s", tmp, strerror(errno));
  if (w.fd >= 0 && close(w.fd) && st == HSR_OK)
    st = hsr_error(HSR_ERR_IO, "closing '%s' failed: %s", tmp, strerror(errno));
  if (st == HSR_OK && rename(tmp, x->path))
    st = hsr_error(HSR_ERR_IO, "renaming '%s' failed: %s", tmp, strerror(errno));
  if (st != HSR_OK) unlink(tmp);
  if (w.buf) ckpt_stage_free(rt, w.buf, cap);
  x->data_s = clock_s() - t0;
  bump(x);
  return st;
}

/* ---- the manifest (rank 0) ---- */
typedef struct rlist {
  ckpt_range *r;
  int n, cap;
} rlist;

static int range_cmp(const void *a, const void *b) {
  const ckpt_range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Every rank's pieces as ranges of their tensors, in file order. */
static hsr_status collect_ranges(save_ctx *x, const int *fidx, rlist *rl) {
  hsr_rt *rt = x->rt;
  for (int r = 0; r < x->world; r++) {
    if (fidx[r] < 0) continue;
    ckpt_piece *pc;
    int np, rep, sh;
    HSR_CHECK(hsr_mesh_coords(x->in.mesh, r, &rep, &sh));
    HSR_CHECK(ckpt_pieces(rt, &x->in, rep, sh, 0, &pc, &np));
    uint64_t off = 0;
    for (int i = 0; i < np; i++) {
      rlist *l = &rl[pc[i].param];
      if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        ckpt_range *nr = realloc(l->r, (size_t)cap * sizeof *nr);
        if (!nr) {
          free(pc);
          return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
        }
        l->r = nr;
        l->cap = cap;
      }
      uint64_t c = pc[i].count;
      l->r[l->n++] = (ckpt_range){pc[i].start, c, {off, off + 4 * c, off + 8 * c}, fidx[r]};
      off += 12 * c;
    }
    free(pc);
  }
  return HSR_OK;
}

static cJSON *tensor_json(hsr_rt *rt, const rt_state_info *in, int i, rlist *l) {
  hsr_rt_param_info p;
  rt_state_unit un;
  if (rt_layout_param(in->layout, i, &p) != HSR_OK || rt_state_unit_of(rt, p.unit, &un) != HSR_OK) return NULL;
  cJSON *t = cJSON_CreateObject(), *sh, *ra;
  cJSON_AddStringToObject(t, "name", p.name);
  sh = cJSON_AddArrayToObject(t, "shape");
  for (int d = 0; d < p.ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)p.shape[d]));
  cJSON_AddStringToObject(t, "dtype", "f32");
  cJSON_AddNumberToObject(t, "numel", (double)p.numel);
  cJSON_AddStringToObject(t, "unit", un.name);
  cJSON_AddNumberToObject(t, "unit_index", p.unit);
  cJSON_AddNumberToObject(t, "offset", (double)p.offset);
  cJSON_AddNumberToObject(t, "group", p.group);
  ra = cJSON_AddArrayToObject(t, "ranges");
  if (l->n) qsort(l->r, (size_t)l->n, sizeof *l->r, range_cmp);
  for (int j = 0; j < l->n; j++) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "start", (double)l->r[j].start);
    cJSON_AddNumberToObject(r, "count", (double)l->r[j].count);
    cJSON_AddNumberToObject(r, "file", l->r[j].file);
    cJSON_AddNumberToObject(r, "master", (double)l->r[j].off[0]);
    cJSON_AddNumberToObject(r, "m", (double)l->r[j].off[1]);
    cJSON_AddNumberToObject(r, "v", (double)l->r[j].off[2]);
    cJSON_AddItemToArray(ra, r);
  }
  return t;
}

static void add_head(save_ctx *x, cJSON *m) {
  hsr_rt *rt = x->rt;
  const rt_state_info *in = &x->in;
  const hsr_rt_config *c = in->cfg;
  char rs[32];
  cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
  cJSON_AddNumberToObject(m, "format_version", HSR_CKPT_FORMAT_VERSION);
  cJSON_AddStringToObject(m, "hsr_version", HSR_VERSION_STRING);
  cJSON_AddStringToObject(m, "git_hash", HSR_GIT_HASH);
  cJSON_AddNumberToObject(m, "step", (double)in->step);
  cJSON *opt = cJSON_AddObjectToObject(m, "optimizer"), *ga;
  cJSON_AddStringToObject(opt, "kind", "adamw");
  char clip[40];
  snprintf(clip, sizeof clip, "%.17g", c->clip); /* exactly (cJSON may round a double's last digit) */
  cJSON_AddRawToObject(opt, "clip", clip);
  ga = cJSON_AddArrayToObject(opt, "groups");
  for (int g = 0; g < c->num_groups; g++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "lr", c->groups[g].lr);
    cJSON_AddNumberToObject(o, "beta1", c->groups[g].beta1);
    cJSON_AddNumberToObject(o, "beta2", c->groups[g].beta2);
    cJSON_AddNumberToObject(o, "eps", c->groups[g].eps);
    cJSON_AddNumberToObject(o, "weight_decay", c->groups[g].weight_decay);
    cJSON_AddItemToArray(ga, o);
  }
  cJSON *mesh = cJSON_AddObjectToObject(m, "mesh");
  cJSON_AddNumberToObject(mesh, "world", x->world);
  cJSON_AddNumberToObject(mesh, "replicate", in->R);
  cJSON_AddNumberToObject(mesh, "shard", in->S);
  cJSON_AddNumberToObject(mesh, "partial", in->K);
  cJSON_AddStringToObject(mesh, "strategy", rt_strategy_name(c->strategy));
  cJSON_AddStringToObject(mesh, "reshard", ckpt_reshard_name(c, rs, sizeof rs));
  cJSON_AddNumberToObject(mesh, "prefetch", c->prefetch);
  cJSON_AddStringToObject(mesh, "device", in->gpu ? "cuda" : "host");
  cJSON *dt = cJSON_AddObjectToObject(m, "dtypes");
  cJSON_AddStringToObject(dt, "param", dtype_name(c->param_dtype));
  cJSON_AddStringToObject(dt, "reduce", dtype_name(c->reduce_dtype));
  cJSON_AddStringToObject(dt, "master", "f32");
  cJSON_AddStringToObject(dt, "moments", "f32");
  cJSON *lay = cJSON_AddObjectToObject(m, "layout"), *ua = cJSON_AddArrayToObject(m, "units");
  cJSON_AddNumberToObject(lay, "align", (double)rt_layout_align(in->layout));
  cJSON_AddNumberToObject(lay, "shards", in->S);
  for (int u = 0; u < in->nunits; u++) {
    rt_state_unit un = {0};
    rt_state_unit_of(rt, u, &un); /* u exists: name, lengths */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", un.name ? un.name : "?");
    cJSON_AddBoolToObject(o, "root", un.is_root);
    cJSON_AddNumberToObject(o, "len", (double)un.len);
    cJSON_AddNumberToObject(o, "shard_len", (double)un.shard_len);
    cJSON_AddItemToArray(ua, o);
  }
  cJSON_AddNumberToObject(m, "block_bytes", (double)x->block);
}

static hsr_status build_manifest(save_ctx *x, cJSON **out) {
  hsr_rt *rt = x->rt;
  int np = rt_layout_num_params(x->in.layout), nf = 0;
  int *fidx = malloc((size_t)x->world * sizeof *fidx);
  rlist *rl = calloc((size_t)np + 1, sizeof *rl);
  cJSON *m = cJSON_CreateObject();
  hsr_status st = fidx && rl && m ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) {
    add_head(x, m);
    uint64_t total = 0;
    cJSON *fa = cJSON_AddArrayToObject(m, "files");
    for (int r = 0; r < x->world; r++) {
      fidx[r] = x->votes[r].a ? nf++ : -1;
      if (fidx[r] < 0) continue;
      char name[64];
      snprintf(name, sizeof name, "data-%08x-%05d.bin", x->id, r);
      cJSON *f = cJSON_CreateObject(), *bl;
      cJSON_AddStringToObject(f, "name", name);
      cJSON_AddNumberToObject(f, "rank", r);
      cJSON_AddNumberToObject(f, "bytes", (double)x->votes[r].a);
      cJSON_AddNumberToObject(f, "crc32", x->votes[r].crc);
      bl = cJSON_AddArrayToObject(f, "block_crc32");
      for (uint64_t b = 0; b < x->votes[r].b; b++)
        cJSON_AddItemToArray(bl, cJSON_CreateNumber(x->blocks[r * x->maxnb + b]));
      cJSON_AddItemToArray(fa, f);
      total += x->votes[r].a;
    }
    cJSON_AddNumberToObject(m, "data_bytes", (double)total);
    st = collect_ranges(x, fidx, rl);
  }
  cJSON *ta = st == HSR_OK ? cJSON_AddArrayToObject(m, "tensors") : NULL;
  for (int i = 0; st == HSR_OK && i < np; i++) {
    cJSON *t = tensor_json(rt, &x->in, i, &rl[i]);
    if (!t) st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    cJSON_AddItemToArray(ta, t);
  }
  /* a copy of the state's own items: their numbers are printed exactly */
  cJSON *prog = st == HSR_OK ? cJSON_Duplicate(x->prog_obj, 1) : NULL;
  if (st == HSR_OK && !prog) st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) cJSON_AddItemToObject(m, "program", prog);
  if (st == HSR_OK && x->model[0]) {
    cJSON *mo = cJSON_AddObjectToObject(m, "model"), *cfg = cJSON_Duplicate(x->model_cfg, 1);
    if (!mo || !cfg || !cJSON_AddStringToObject(mo, "kind", x->model)) {
      cJSON_Delete(cfg);
      st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    } else {
      cJSON_AddItemToObject(mo, "config", cfg);
    }
  }
  for (int i = 0; rl && i < np; i++) free(rl[i].r);
  free(rl);
  free(fidx);
  if (st != HSR_OK) {
    cJSON_Delete(m);
    return st;
  }
  *out = m;
  return HSR_OK;
}

/* ---- commit, latest, retention (rank 0) ---- */
/* Files of the checkpoint directory that stay after a commit: the manifest,
 * this save's data files, and anything that is not a checkpoint's. */
static int keep_committed(const char *name, void *ctx) {
  const save_ctx *x = ctx;
  if (!strcmp(name, CKPT_MANIFEST)) return 1;
  int ours = !strncmp(name, "data-", 5) || strstr(name, ".tmp") != NULL;
  char pre[32];
  snprintf(pre, sizeof pre, "data-%08x-", x->id);
  return !ours || (!strncmp(name, pre, strlen(pre)) && !strstr(name, ".tmp"));
}

static void remove_ckpt(const char *root, const char *name) {
  char d[4200], m[4400];
  snprintf(d, sizeof d, "%s/%s", root, name);
  snprintf(m, sizeof m, "%s/%s", d, CKPT_MANIFEST);
  /* first it stops being a checkpoint, then its files go */
  if (!unlink(m) && ckpt_fsync_dir(d) != HSR_OK) HSR_LOG_W("checkpoint: %s", hsr_last_error());
  remove_files(d, NULL, NULL);
  if (rmdir(d)) HSR_LOG_W("checkpoint: could not remove '%s': %s", d, strerror(errno));
}

static int step_of(const char *name, int64_t *step) {
  if (strncmp(name, "step-", 5) || !name[5]) return 0;
  char *end;
  long long v = strtoll(name + 5, &end, 10);
  if (*end || v < 0) return 0;
  *step = v;
  return 1;
}

typedef struct old_ckpt {
  char name[CKPT_NAME_MAX];
  int64_t step;
  int committed;
} old_ckpt;

static int old_cmp(const void *a, const void *b) {
  const old_ckpt *x = a, *y = b;
  return x->step > y->step ? -1 : x->step < y->step;
}

/* Keeps the new checkpoint and the keep - 1 newest older ones; removes the
 * rest and the leftovers of crashed saves older than the new one.
 * Checkpoints of a later step (an abandoned run) are left alone. */
static void prune(const save_ctx *x, int keep) {
  DIR *d = opendir(x->root);
  if (!d) return;
  old_ckpt *v = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int64_t s;
    if (!step_of(e->d_name, &s) || s >= x->in.step || !strcmp(e->d_name, x->name) || strlen(e->d_name) >= CKPT_NAME_MAX)
      continue;
    if (n == cap) {
      old_ckpt *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *nv);
      if (!nv) break;
      v = nv;
    }
    char m[4400];
    struct stat sb;
    snprintf(m, sizeof m, "%s/%s/%s", x->root, e->d_name, CKPT_MANIFEST);
    snprintf(v[n].name, sizeof v[n].name, "%.127s", e->d_name); /* shorter names only (checked above) */
    v[n].step = s;
    v[n++].committed = !stat(m, &sb);
  }
  closedir(d);
  if (n) qsort(v, (size_t)n, sizeof *v, old_cmp);
  int kept = 1;
  for (int i = 0; i < n; i++) {
    if (v[i].committed && kept < keep) {
      kept++;
      continue;
    }
    HSR_LOG_I("checkpoint: removing %s/%s (%s)", x->root, v[i].name, v[i].committed ? "--keep" : "incomplete");
    remove_ckpt(x->root, v[i].name);
  }
  free(v);
}

static hsr_status commit(save_ctx *x, int *committed) {
  cJSON *m;
  HSR_CHECK(build_manifest(x, &m));
  char *text;
  size_t len;
  hsr_status st = ckpt_manifest_print(m, &text, &len);
  cJSON_Delete(m);
  HSR_CHECK(st);
  int fault = x->fault == CKPT_FAULT_BEFORE_MANIFEST_RENAME;
  st = ckpt_fsync_dir(x->dir); /* the data files' renames are durable before the manifest names them */
  if (st == HSR_OK) st = ckpt_write_small(x->dir, CKPT_MANIFEST, text, len, fault);
  free(text);
  if (st == HSR_OK && fault) ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_MANIFEST_RENAME, x->rank, x->in.step);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->dir);
  HSR_CHECK(st);
  *committed = 1; /* from here on the checkpoint exists */
  ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_LATEST, x->rank, x->in.step);
  char line[CKPT_NAME_MAX + 2];
  int n = snprintf(line, sizeof line, "%s\n", x->name);
  st = ckpt_write_small(x->root, CKPT_LATEST, line, (size_t)n, 0);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->root);
  remove_files(x->dir, keep_committed, x);
  return st;
}

/* Every rank's block checksums (maxnb per rank). */
static hsr_status gather_blocks(save_ctx *x) {
  for (int r = 0; r < x->world; r++)
    if (x->votes[r].b > x->maxnb) x->maxnb = x->votes[r].b;
  if (!x->maxnb) return HSR_OK;
  uint32_t *mine = calloc((size_t)x->maxnb, sizeof *mine);
  x->blocks = malloc((size_t)x->maxnb * (size_t)x->world * sizeof *x->blocks);
  hsr_status st = mine && x->blocks ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) {
    if (x->crc.nb) memcpy(mine, x->crc.blocks, (size_t)x->crc.nb * sizeof *mine);
    st = ckpt_allgather(&x->link, mine, (size_t)x->maxnb * sizeof *mine, x->blocks);
  }
  free(mine);
  return st;
}

static hsr_status same_program(const save_ctx *x, const ckpt_vote *v) {
  for (int r = 1; r < x->world; r++) {
    if (v[r].b != v[0].b)
      return hsr_error(HSR_ERR_MISMATCH,
                       "checkpoint save: the program state of rank %d differs from rank 0's (it must be global: the "
                       "global sample index, not one rank's position)",
                       r);
    if (v[r].crc != v[0].crc)
      return hsr_error(HSR_ERR_MISMATCH, "checkpoint save: the model (kind, config) of rank %d differs from rank 0's",
                       r);
  }
  return HSR_OK;
}

/* Stages this rank's data in file order into buf (host memory, x->bytes):
 * the copy a background save blocks the training for. */
hsr_status ckpt_job_stage(ckpt_job *x, char *buf) {
  hsr_rt *rt = x->rt;
  HSR_CHECK(rt_state_quiesce(rt)); /* the optimizer's updates are in the state */
  uint64_t off = 0;
  for (int i = 0; i < x->np; i++)
    for (int k = 0; k < CKPT_KINDS; k++) {
      size_t n = x->pc[i].count * 4;
      HSR_CHECK(rt_state_copy(rt, buf + off, (float *)rt_state_ptr(rt, x->pc[i].unit, saved[k]) + x->pc[i].local, n));
      off += n;
    }
  if (x->in.gpu) HSR_CHECK(rt_state_sync(rt)); /* landed before the training moves on */
  x->stage = buf;
  return HSR_OK;
}

hsr_status ckpt_job_begin(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *o, ckpt_job **out) {
  *out = NULL;
  save_ctx *x = calloc(1, sizeof *x);
  if (!x) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  x->t0 = clock_s();
  rt_state_info_of(rt, &x->in);
  x->cfg = *x->in.cfg;
  x->in.cfg = &x->cfg;
  x->rt = rt, x->rank = x->in.rank, x->world = x->in.world_size;
  ckpt_crc_init(&x->crc, CKPT_BLOCK);
  x->block = CKPT_BLOCK;
  *out = x;
  if (snprintf(x->root, sizeof x->root, "%s", root) >= (int)sizeof x->root)
    return hsr_error(HSR_ERR_INVALID, "checkpoint root '%.64s...' is too long", root);
  return job_check(x, o);
}

hsr_status ckpt_job_plan(ckpt_job *x, const hsr_ckpt_save_opts *o) { return job_plan(x, o); }

/* Everything after the plan: the directory, the three agreements, this
 * rank's data file, rank 0's commit and retention. st: the plan's result
 * (a failure is voted, so every rank returns it). */
hsr_status ckpt_job_run(ckpt_job *x, hsr_status st, const ckpt_link *l, uint64_t *progress) {
  double t0 = clock_s();
  x->link = *l;
  x->progress = progress;
  ckpt_vote *v = NULL;
  if (st == HSR_OK && x->rank == 0) st = prepare_dirs(x);
  st =
      ckpt_agree(&x->link, st, x->id, x->prog ? fnv(x->prog) : 0, x->model_text ? (uint32_t)fnv(x->model_text) : 0, &v);
  bump(x);
  if (st == HSR_OK) st = same_program(x, v);
  if (v) x->id = (uint32_t)v[0].a;
  free(v);
  v = NULL;
  if (st == HSR_OK) {               /* every rank takes the same branches: they follow agreements */
    if (x->stage && x->delay > 0) { /* test hook: the training moves on before the data is written */
      struct timespec d = {(time_t)x->delay, (long)((x->delay - (double)(time_t)x->delay) * 1e9)};
      nanosleep(&d, NULL);
    }
    st = write_data(x);
    if (st == HSR_OK) ckpt_fault_here(x->fault, CKPT_FAULT_AFTER_DATA, x->rank, x->in.step);
    rt_state_fault(x->rt, "ckpt_save"); /* HSR_FAULT: between this rank's data and the agreement */
    st = ckpt_agree(&x->link, st, x->bytes, x->crc.nb, x->crc.file, &x->votes);
    bump(x);
    if (st == HSR_OK) st = gather_blocks(x);
    int unknown = 0; /* whether rank 0 committed: a rank that cannot tell keeps its file */
    if (st == HSR_OK) {
      hsr_status cs = x->rank == 0 ? commit(x, &x->committed) : HSR_OK;
      st = ckpt_agree(&x->link, cs, (uint64_t)x->committed, 0, 0, &v);
      bump(x);
      if (v) x->committed = (int)v[0].a;
      unknown = !v;
      free(v);
      /* after the others have returned: removing old checkpoints blocks only rank 0 */
      if (st == HSR_OK && x->rank == 0 && x->keep > 0) prune(x, x->keep);
    }
    if (st != HSR_OK && !x->committed && !unknown && x->bytes) unlink(x->path);
  }
  if (st != HSR_OK && x->rank == 0 && !x->committed) rmdir(x->dir); /* if empty */
  x->run_s = clock_s() - t0;
  if (st == HSR_OK)
    HSR_LOG_I("checkpoint: saved step %lld to %s (this rank %llu bytes, %.3f s)", (long long)x->in.step, x->dir,
              (unsigned long long)x->bytes, x->run_s);
  return st;
}

uint64_t ckpt_job_bytes(const ckpt_job *x) { return x->bytes; }
int64_t ckpt_job_step(const ckpt_job *x) { return x->in.step; }
const char *ckpt_job_dir(const ckpt_job *x) { return x->dir; }

void ckpt_job_stats(const ckpt_job *x, hsr_ckpt_stats *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "%.1000s", x->dir);
  s->step = x->in.step;
  for (int r = 0; x->votes && r < x->world; r++) s->bytes_total += x->votes[r].a;
  s->bytes_rank = x->bytes;
  s->seconds = clock_s() - x->t0;
  s->data_seconds = x->data_s;
  s->gbps = s->seconds > 0 ? (double)s->bytes_total / s->seconds / 1e9 : 0;
  s->staging_bytes = x->staged;
  s->waited_step = -1;
  s->background_seconds = x->run_s;
}

void ckpt_job_free(ckpt_job *x) {
  if (!x) return;
  free(x->prog);
  cJSON_Delete(x->prog_obj);
  cJSON_Delete(x->model_cfg);
  free(x->model_text);
  free(x->pc);
  free(x->votes);
  free(x->blocks);
  ckpt_crc_free(&x->crc);
  free(x);
}

hsr_status hsr_ckpt_save(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *o, hsr_ckpt_stats *stats) {
  if (!rt || !root || !*root) return hsr_error(HSR_ERR_INVALID, "hsr_ckpt_save: NULL runtime or empty root");
  HSR_CHECK(hsr_rt_commit(rt)); /* commits first (hsr/ckpt.h) */
  if (o && o->async) return ckpt_async_save(rt, root, o, stats);
  double t0 = clock_s(), waited = 0;
  int64_t wstep = -1;
  HSR_CHECK(ckpt_async_settle(rt, &waited, &wstep)); /* a background save in flight finishes first */
  rt_state_phase(rt);
  ckpt_job *x;
  hsr_status st = ckpt_job_begin(rt, root, o, &x);
  if (st == HSR_OK) {
    x->t0 = t0;
    st = ckpt_job_plan(x, o);
    ckpt_link l;
    ckpt_link_of(rt, &l);
    st = ckpt_job_run(x, st, &l, NULL);
  }
  if (stats && x) {
    ckpt_job_stats(x, stats);
    stats->waited_seconds = waited, stats->waited_step = wstep;
  }
  ckpt_job_free(x);
  return st;
}
