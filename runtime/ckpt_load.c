/* hsr_ckpt_load: every rank reads what its slice of each unit needs on the
 * current mesh (per tensor, the intersection of its slice with the saved
 * ranges), verifying every block against the manifest, and only when every
 * rank has succeeded does any state change. What a rank needs is held in
 * host memory when it fits HSR_CKPT_BUFFER (one read); otherwise it is read
 * twice, verified first and installed second. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"
#include "engine.h"

typedef struct load_ctx {
  hsr_rt *rt;
  hsr_ckpt *c;
  int *map; /* layout parameter -> checkpoint tensor */
  ckpt_span *s;
  int n, cap;
  char *hold, *buf;
  size_t need, chunk, alloc; /* bytes needed; the read window and its buffer */
  uint64_t read_bytes;
  double data_s;
} load_ctx;

static void shape_str(const int64_t *s, int nd, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < nd && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, d ? ", " : "", s[d]);
  if (o < len) snprintf(buf + o, len - o, "]");
}

/* Names, shapes, dtypes and groups: exactly what the program registered. */
static hsr_status match(load_ctx *x) {
  hsr_rt *rt = x->rt;
  const hsr_ckpt *c = x->c;
  int np = hsr_rt_layout_num_params(rt->layout);
  if (c->info.num_groups != rt->cfg.num_groups)
    return hsr_error(HSR_ERR_INVALID, "checkpoint '%s' has %d optimizer group(s), the program configured %d", c->dir,
                     c->info.num_groups, rt->cfg.num_groups);
  char *used = calloc((size_t)c->nt + 1, 1);
  x->map = malloc((size_t)(np ? np : 1) * sizeof *x->map);
  if (!used || !x->map) {
    free(used);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  hsr_status st = HSR_OK;
  char a[96], b[96];
  for (int i = 0; i < np && st == HSR_OK; i++) {
    hsr_rt_param_info p;
    int k = -1;
    st = hsr_rt_layout_param(rt->layout, i, &p);
    for (int j = 0; st == HSR_OK && j < c->nt && k < 0; j++)
      if (!strcmp(c->t[j].name, p.name)) k = j;
    if (st != HSR_OK) break;
    if (k < 0) {
      st = hsr_error(HSR_ERR_INVALID,
                     "checkpoint '%s' has no tensor '%s' (the program registers %d parameters, the checkpoint holds "
                     "%d: a checkpoint of another model?)",
                     c->dir, p.name, np, c->nt);
      break;
    }
    const ckpt_tensor *t = &c->t[k];
    int same = t->ndim == p.ndim;
    for (int d = 0; same && d < p.ndim; d++) same = t->shape[d] == p.shape[d];
    shape_str(t->shape, t->ndim, a, sizeof a);
    shape_str(p.shape, p.ndim, b, sizeof b);
    if (!same)
      st = hsr_error(HSR_ERR_INVALID, "checkpoint '%s': tensor '%s' has shape %s, the program registered %s", c->dir,
                     p.name, a, b);
    else if (t->group != p.group)
      st = hsr_error(HSR_ERR_INVALID, "checkpoint '%s': tensor '%s' is in optimizer group %d, the program's in %d",
                     c->dir, p.name, t->group, p.group);
    used[k] = 1;
    x->map[i] = k;
  }
  for (int j = 0; st == HSR_OK && j < c->nt; j++)
    if (!used[j])
      st = hsr_error(HSR_ERR_INVALID,
                     "checkpoint '%s': tensor '%s' is not a parameter the program registered (a checkpoint of another "
                     "model?)",
                     c->dir, c->t[j].name);
  free(used);
  return st;
}

static float *state_of(rt_unit *u, int k) { return k == 0 ? u->master : k == 1 ? u->m : u->v; }

static hsr_status add_span(load_ctx *x, ckpt_span s) {
  if (x->n == x->cap) {
    int cap = x->cap ? 2 * x->cap : 64;
    ckpt_span *ns = realloc(x->s, (size_t)cap * sizeof *ns);
    if (!ns) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    x->s = ns;
    x->cap = cap;
  }
  x->s[x->n++] = s;
  x->need += s.len;
  return HSR_OK;
}

/* Tensor elements [ta, tb), landing at element `at` of unit u's slice. */
static hsr_status plan_piece(load_ctx *x, int ti, uint64_t ta, uint64_t tb, rt_unit *u, uint64_t at) {
  const ckpt_tensor *t = &x->c->t[ti];
  int lo = 0, hi = t->nr; /* the first range that ends after ta */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->r[mid].start + t->r[mid].count <= ta)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int j = lo; j < t->nr && t->r[j].start < tb; j++) {
    const ckpt_range *r = &t->r[j];
    uint64_t a = ta > r->start ? ta : r->start, b = tb < r->start + r->count ? tb : r->start + r->count;
    for (int k = 0; k < CKPT_KINDS; k++)
      HSR_CHECK(add_span(x, (ckpt_span){r->file, r->off[k] + 4 * (a - r->start), 4 * (b - a), ti, k, a,
                                        state_of(u, k) + at + (a - ta), NULL}));
  }
  return HSR_OK;
}

/* The spans this rank's slices need (resharding is this intersection). */
static hsr_status plan(load_ctx *x) {
  hsr_rt *rt = x->rt;
  for (int ui = 0; ui < rt->nunits; ui++) {
    rt_unit *u = &rt->units[ui];
    uint64_t lo = (uint64_t)rt->srank * u->Ls, hi = lo + u->Ls;
    for (int j = rt->ubeg[ui]; j < rt->ubeg[ui + 1]; j++) {
      hsr_rt_param_info p;
      HSR_CHECK(hsr_rt_layout_param(rt->layout, rt->uparam[j], &p));
      uint64_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
      if (a < b) HSR_CHECK(plan_piece(x, x->map[rt->uparam[j]], a - p.offset, b - p.offset, u, a - lo));
    }
  }
  return HSR_OK;
}

static hsr_status hold_sink(void *ctx, ckpt_span *s, uint64_t pos, const void *src, size_t n) {
  (void)ctx;
  memcpy(s->hold + pos, src, n);
  return HSR_OK;
}

static hsr_status install_sink(void *ctx, ckpt_span *s, uint64_t pos, const void *src, size_t n) {
  hsr_rt *rt = ctx;
  /* a pageable host source: the copy returns once src may be reused */
  return hsr_device_copy(rt->dev, (char *)s->dst + pos, src, n, CS(rt));
}

/* Everything checked, nothing changed: manifest, match, every block read. */
static hsr_status verify(load_ctx *x, const char *path, size_t cap) {
  HSR_CHECK(ckpt_check_idle(x->rt, "load", 1));
  HSR_CHECK(hsr_ckpt_open(path, &x->c));
  HSR_CHECK(match(x));
  HSR_CHECK(plan(x));
  /* the read window: at most CKPT_CHUNK and the buffer, no larger than the
   * largest file it reads, at least a block */
  uint64_t B = x->c->info.block_bytes, big = 0;
  for (int i = 0; i < x->n; i++)
    if (x->c->f[x->s[i].file].bytes > big) big = x->c->f[x->s[i].file].bytes;
  x->chunk = (cap < CKPT_CHUNK ? cap : CKPT_CHUNK) / B * B;
  if (x->chunk < B) x->chunk = (size_t)B;
  x->alloc = x->chunk < big ? x->chunk : (size_t)big; /* a window never runs past its file's end */
  HSR_CHECK(ckpt_stage_alloc(x->rt, x->alloc, (void **)&x->buf));
  if (x->need + x->alloc <= cap) { /* one read: keep what is needed */
    HSR_CHECK(ckpt_stage_alloc(x->rt, x->need, (void **)&x->hold));
    size_t o = 0;
    for (int i = 0; i < x->n; i++) {
      x->s[i].hold = x->hold + o;
      o += x->s[i].len;
    }
  }
  double t0 = hsr_clock_s();
  hsr_status st = ckpt_read_spans(x->c, x->s, x->n, x->buf, x->chunk, x->hold ? hold_sink : NULL, NULL, &x->read_bytes);
  x->data_s += hsr_clock_s() - t0;
  return st;
}

/* Master weights, moments and the parameters derived from them (this
 * rank's slice; the unsharded strategies' full copies are gathered after). */
static hsr_status install(load_ctx *x) {
  hsr_rt *rt = x->rt;
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  double t0 = hsr_clock_s();
  hsr_status st = HSR_OK;
  if (x->hold)
    for (int i = 0; i < x->n && st == HSR_OK; i++)
      st = hsr_device_copy(rt->dev, x->s[i].dst, x->s[i].hold, x->s[i].len, CS(rt));
  else
    st = ckpt_read_spans(x->c, x->s, x->n, x->buf, x->chunk, install_sink, rt, &x->read_bytes);
  x->data_s += hsr_clock_s() - t0;
  for (int ui = 0; ui < rt->nunits && st == HSR_OK; ui++) {
    rt_unit *u = &rt->units[ui];
    void *dst = rt->sharded_params ? u->shard : (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes;
    st = hsr_kernels_cast(rt->dev, CS(rt), u->Ls, u->master, HSR_F32, dst, rt->cfg.param_dtype);
  }
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, CS(rt)); /* before the staging buffers go */
  if (st != HSR_OK)
    return hsr_error(st,
                     "checkpoint load failed while installing, after every rank had verified it; the engine's "
                     "state is partly overwritten (load again): %s",
                     hsr_last_error());
  return HSR_OK;
}

/* zero1 / zero2 / ddp keep full parameters: the shard group gathers the slices. */
static hsr_status regather(hsr_rt *rt) {
  if (rt->sharded_params || rt->S == 1) return HSR_OK;
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt)));
  HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, GS(rt)));
  for (int ui = 0; ui < rt->nunits; ui++) {
    rt_unit *u = &rt->units[ui];
    HSR_CHECK(hsr_comm_allgather(rt->shard_c, (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes, u->full, u->Ls,
                                 rt->cfg.param_dtype, NULL));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, GS(rt)));
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt)));
  return rt_snapshot_counts(rt, NULL); /* the load's gathers do not count toward the next step */
}

/* The step and each group's learning rate; the program's other
 * hyperparameters stay (a difference is worth a line). */
static void restore_optimizer(hsr_rt *rt, const hsr_ckpt *c) {
  rt->step = c->info.step;
  for (int g = 0; g < rt->cfg.num_groups; g++) {
    hsr_rt_opt_group *now = &rt->cfg.groups[g];
    const hsr_rt_opt_group *was = &c->info.groups[g];
    if (hsr_boot_rank(rt->boot) == 0 && (now->beta1 != was->beta1 || now->beta2 != was->beta2 || now->eps != was->eps ||
                                         now->weight_decay != was->weight_decay))
      HSR_LOG_W("checkpoint: optimizer group %d was saved with beta1 %g beta2 %g eps %g weight_decay %g; keeping the "
                "program's %g %g %g %g",
                g, was->beta1, was->beta2, was->eps, was->weight_decay, now->beta1, now->beta2, now->eps,
                now->weight_decay);
    now->lr = was->lr;
  }
}

static void fill_stats(const load_ctx *x, double t0, hsr_ckpt_stats *s) {
  memset(s, 0, sizeof *s);
  if (x->c) {
    snprintf(s->dir, sizeof s->dir, "%.1000s", x->c->dir);
    s->step = x->c->info.step;
    s->bytes_total = x->c->info.data_bytes;
  }
  s->bytes_rank = x->read_bytes;
  s->seconds = hsr_clock_s() - t0;
  s->data_seconds = x->data_s;
  s->gbps = s->seconds > 0 ? (double)s->bytes_total / s->seconds / 1e9 : 0;
  s->staging_bytes = (x->buf ? x->alloc : 0) + (x->hold ? x->need : 0);
  s->reads = x->hold ? 1 : 2;
}

hsr_status hsr_ckpt_load(hsr_rt *rt, const char *path, hsr_ckpt_state *program, hsr_ckpt_stats *stats) {
  if (!rt || !path) return hsr_error(HSR_ERR_INVALID, "hsr_ckpt_load: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  double t0 = hsr_clock_s();
  rt_obs_phase(rt->obs, HSR_PHASE_CKPT, -1);
  load_ctx x;
  memset(&x, 0, sizeof x);
  x.rt = rt;
  size_t cap = 0;
  hsr_ckpt_state *prog = NULL;
  hsr_status st = ckpt_buffer_cap(&cap);
  if (st == HSR_OK) st = verify(&x, path, cap);
  if (st == HSR_OK && program) st = hsr_ckpt_state_create(&prog);
  if (st == HSR_OK && prog) st = hsr_ckpt_get_program(x.c, prog);
  st = ckpt_agree(rt, st, 0, 0, 0, NULL); /* nothing has changed yet */
  if (st == HSR_OK) {
    st = ckpt_agree(rt, install(&x), 0, 0, 0, NULL);
    if (st == HSR_OK) st = regather(rt);
    if (st == HSR_OK) restore_optimizer(rt, x.c);
    if (st == HSR_OK && prog) st = ckpt_state_assign(program, ckpt_state_obj(prog), "checkpoint: program state");
  }
  if (stats) fill_stats(&x, t0, stats);
  if (st == HSR_OK)
    HSR_LOG_I("checkpoint: loaded step %lld from %s (read %llu bytes, %.3f s)", (long long)x.c->info.step, x.c->dir,
              (unsigned long long)x.read_bytes, hsr_clock_s() - t0);
  ckpt_stage_free(rt, x.hold, x.need);
  ckpt_stage_free(rt, x.buf, x.alloc);
  hsr_ckpt_state_free(prog);
  hsr_ckpt_close(x.c);
  free(x.map);
  free(x.s);
  return st;
}
