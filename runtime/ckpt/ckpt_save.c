/* hsr_ckpt_save: every rank writes its share (ckpt_plan.c) to its own data
 * file in parallel, then rank 0 commits through the commit protocol
 * (ckpt_commit.c): the manifest under a temporary name, fsync, rename,
 * directory fsync, then `latest` the same way. The native format (data
 * files and manifest) is ckpt_format_native, the writer behind it. Ranks
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

#include "common/grow.h"
#include "ckpt_int.h"
#include "hsr/config.h"
#include "hsr/git.h"
#include "common/dtype_internal.h"
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
  const ckpt_format *fmt; /* what the commit protocol commits */
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
  if (w->x->in.host_state && n >= CKPT_DIRECT) { /* host memory: large pieces go out without a copy */
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
static hsr_status write_data(ckpt_job *x) {
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
static cJSON *tensor_json(hsr_rt *rt, const rt_state_info *in, int i) {
  rt_param_info p;
  rt_state_unit un;
  if (rt_layout_param(in->layout, i, &p) != HSR_OK || rt_state_unit_of(rt, p.unit, &un) != HSR_OK) return NULL;
  return ckpt_manifest_tensor(&p, un.name);
}

/* The manifest's head from the engine (ckpt_manifest.c writes it), with
 * the layout and the units, which only a load reads. */
static void add_head(save_ctx *x, cJSON *m) {
  hsr_rt *rt = x->rt;
  const rt_state_info *in = &x->in;
  const hsr_rt_config *c = in->cfg;
  char rs[32];
  ckpt_info h = {.hsr_version = HSR_VERSION_STRING,
                     .git_hash = HSR_GIT_HASH,
                     .step = in->step,
                     .clip = c->clip,
                     .num_groups = c->num_groups,
                     .world = x->world,
                     .replicate = in->R,
                     .shard = in->S,
                     .partial = in->K,
                     .outer_shard = ckpt_outer_of(rt, in),
                     .strategy = rt_strategy_name(c->strategy),
                     .reshard = ckpt_reshard_name(c, rs, sizeof rs),
                     .prefetch = c->prefetch,
                     .device = in->gpu ? "cuda" : "host",
                     .param_dtype = dtype_name(c->param_dtype),
                     .reduce_dtype = dtype_name(c->reduce_dtype),
                     .block_bytes = x->block};
  memcpy(h.groups, c->groups, sizeof h.groups);
  cJSON *lay = cJSON_CreateObject(), *ua = cJSON_CreateArray();
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
  ckpt_manifest_head(m, &h, lay, ua);
}

static hsr_status build_manifest(save_ctx *x, cJSON **out) {
  hsr_rt *rt = x->rt;
  int np = rt_layout_num_params(x->in.layout);
  cJSON *m = cJSON_CreateObject();
  hsr_status st = m ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) {
    add_head(x, m);
    uint64_t total = 0;
    cJSON *fa = cJSON_AddArrayToObject(m, "files");
    for (int r = 0; st == HSR_OK && r < x->world; r++) {
      if (!x->votes[r].a) continue; /* a rank that holds only padding writes no file */
      char name[64];
      int rep, sh;
      st = hsr_mesh_coords(x->in.mesh, r, &rep, &sh);
      snprintf(name, sizeof name, "data-%08x-%05d.bin", x->id, r);
      const ckpt_file f = {name, x->votes[r].a, x->votes[r].b, x->votes[r].crc, &x->blocks[r * x->maxnb], r, rep, sh};
      cJSON_AddItemToArray(fa, ckpt_manifest_file(&f));
      total += x->votes[r].a;
    }
    cJSON_AddNumberToObject(m, "data_bytes", (double)total);
  }
  cJSON *ta = st == HSR_OK ? cJSON_AddArrayToObject(m, "tensors") : NULL;
  for (int i = 0; st == HSR_OK && i < np; i++) {
    cJSON *t = tensor_json(rt, &x->in, i);
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
  if (st != HSR_OK) {
    cJSON_Delete(m);
    return st;
  }
  *out = m;
  return HSR_OK;
}

/* ---- the native format behind the commit protocol (ckpt_commit.c) ---- */
/* Files of the checkpoint directory that stay after a commit: the manifest,
 * this save's data files, and anything that is not a checkpoint's. */
static int keep_committed(const char *name, const void *w) {
  const ckpt_job *x = w;
  if (!strcmp(name, CKPT_MANIFEST)) return 1;
  int ours = !strncmp(name, "data-", 5) || strstr(name, ".tmp") != NULL;
  char pre[32];
  snprintf(pre, sizeof pre, "data-%08x-", x->id);
  return !ours || (!strncmp(name, pre, strlen(pre)) && !strstr(name, ".tmp"));
}

/* The native format's index: the manifest (ckpt_manifest.c's schema). */
static hsr_status native_index(void *w, char **text, size_t *len) {
  ckpt_job *x = w;
  cJSON *m;
  HSR_CHECK(build_manifest(x, &m));
  hsr_status st = ckpt_manifest_print(m, text, len);
  cJSON_Delete(m);
  return st;
}

static const char *native_index_name(const void *w) {
  (void)w;
  return CKPT_MANIFEST;
}

/* Data files named by the save's id, never staged: nothing to retire. */
const ckpt_format ckpt_format_native = {.name = CKPT_FORMAT,
                                        .own_names = 1,
                                        .index = native_index_name,
                                        .index_text = native_index,
                                        .keep = keep_committed};

static ckpt_commit_at at_of(const save_ctx *x) {
  return (ckpt_commit_at){x->root, x->dir, x->name, x->rank, x->in.step, x->fault};
}

/* Every rank's block checksums (maxnb per rank). Only rank 0 writes them,
 * but the collectives have no gather (all-gather, reduce-scatter,
 * all-reduce, broadcast, barrier), and at 4 bytes per MiB a rank wrote they
 * are a small part of what the save's agreement all-gathers anyway (a
 * 1 KiB vote per rank): 3.4 MB a rank at 65,536 FSDP ranks of 70 B
 * parameters, against the votes' 68 MB. */
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
  x->fmt = &ckpt_format_native;
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
  const ckpt_commit_at at = at_of(x);
  if (st == HSR_OK && x->rank == 0) st = ckpt_commit_prepare(&at, x->fmt, x);
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
    st = write_data(x); /* this rank's data file, durable under its final name */
    if (st == HSR_OK) ckpt_fault_here(x->fault, CKPT_FAULT_AFTER_DATA, x->rank, x->in.step);
    rt_state_fault(x->rt, "ckpt_save"); /* HSR_FAULT: between this rank's data and the agreement */
    st = ckpt_agree(&x->link, st, x->bytes, x->crc.nb, x->crc.file, &x->votes);
    bump(x);
    if (st == HSR_OK) st = gather_blocks(x);
    int unknown = 0; /* whether rank 0 committed: a rank that cannot tell keeps its file */
    if (st == HSR_OK) {
      hsr_status cs = x->rank == 0 ? ckpt_commit_run(&at, x->fmt, x, &x->committed) : HSR_OK;
      st = ckpt_agree(&x->link, cs, (uint64_t)x->committed, 0, 0, &v);
      bump(x);
      if (v) x->committed = (int)v[0].a;
      unknown = !v;
      free(v);
      /* after the others have returned: removing old checkpoints blocks only rank 0 */
      if (st == HSR_OK && x->rank == 0 && x->keep > 0) ckpt_commit_prune(&at, x->fmt, x->keep);
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
