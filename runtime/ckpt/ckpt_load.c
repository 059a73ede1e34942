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
#include "runtime/engine/state.h"

typedef struct load_ctx {
  hsr_rt *rt;
  rt_state_info in; /* the engine, read-only */
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
  const rt_state_info *in = &x->in;
  const hsr_ckpt *c = x->c;
  int np = hsr_rt_layout_num_params(in->layout);
  if (c->info.num_groups != in->cfg->num_groups)
    return hsr_error(HSR_ERR_INVALID, "checkpoint '%s' has %d optimizer group(s), the program configured %d", c->dir,
                     c->info.num_groups, in->cfg->num_groups);
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
    st = hsr_rt_layout_param(in->layout, i, &p);
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

/* The kinds a checkpoint holds, in each range's order. */
static const rt_state_kind saved[CKPT_KINDS] = {RT_STATE_MASTER, RT_STATE_M, RT_STATE_V};

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

/* Tensor elements [ta, tb), landing at element `at` of what this rank holds
 * of unit u (every saved kind alike). */
static hsr_status plan_piece(load_ctx *x, int ti, uint64_t ta, uint64_t tb, int u, uint64_t at) {
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
                                        (float *)rt_state_ptr(x->rt, u, saved[k]) + at + (a - ta), NULL}));
  }
  return HSR_OK;
}

/* The spans this rank's ranges need (resharding is this intersection). */
static hsr_status plan(load_ctx *x) {
  const rt_state_info *in = &x->in;
  int rep, sh;
  HSR_CHECK(hsr_mesh_coords(in->mesh, in->rank, &rep, &sh));
  for (int ui = 0; ui < in->nunits; ui++) {
    rt_state_unit un;
    rt_state_range r;
    HSR_CHECK(rt_state_unit_of(x->rt, ui, &un));
    HSR_CHECK(rt_state_range_at(x->rt, ui, RT_STATE_MASTER, rep, sh, &r));
    for (int k = RT_STATE_M; k <= RT_STATE_V; k++) {
      rt_state_range o;
      HSR_CHECK(rt_state_range_at(x->rt, ui, (rt_state_kind)k, rep, sh, &o));
      if (o.lo != r.lo || o.n != r.n)
        return hsr_error(HSR_ERR_INTERNAL,
                         "checkpoint load: unit '%s' holds its moments over another range than its "
                         "master",
                         un.name);
    }
    uint64_t lo = r.lo, hi = lo + r.n;
    for (int j = 0; j < un.nparams; j++) {
      hsr_rt_param_info p;
      HSR_CHECK(hsr_rt_layout_param(in->layout, un.params[j], &p));
      uint64_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
      if (a < b) HSR_CHECK(plan_piece(x, x->map[un.params[j]], a - p.offset, b - p.offset, ui, a - lo));
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
  /* a pageable host source: the copy returns once src may be reused */
  return rt_state_copy(ctx, (char *)s->dst + pos, src, n);
}

/* Everything checked, nothing changed: manifest, match, every block read. */
static hsr_status verify(load_ctx *x, const char *path, size_t cap) {
  HSR_CHECK(rt_state_idle(x->rt, "load", 1));
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
  HSR_CHECK(rt_state_quiesce(rt));
  double t0 = hsr_clock_s();
  hsr_status st = HSR_OK;
  if (x->hold)
    for (int i = 0; i < x->n && st == HSR_OK; i++) st = rt_state_copy(rt, x->s[i].dst, x->s[i].hold, x->s[i].len);
  else
    st = ckpt_read_spans(x->c, x->s, x->n, x->buf, x->chunk, install_sink, rt, &x->read_bytes);
  x->data_s += hsr_clock_s() - t0;
  if (st == HSR_OK) st = rt_state_installed(rt); /* the parameters from the master; before the staging buffers go */
  if (st != HSR_OK)
    return hsr_error(st,
                     "checkpoint load failed while installing, after every rank had verified it; the engine's "
                     "state is partly overwritten (load again): %s",
                     hsr_last_error());
  return HSR_OK;
}

/* The step and each group's learning rate; the program's other
 * hyperparameters stay (a difference is worth a line). */
static hsr_status restore_optimizer(load_ctx *x) {
  const hsr_ckpt *c = x->c;
  rt_state_set_step(x->rt, c->info.step);
  for (int g = 0; g < x->in.cfg->num_groups; g++) {
    const hsr_rt_opt_group *now = &x->in.cfg->groups[g];
    const hsr_rt_opt_group *was = &c->info.groups[g];
    if (x->in.rank == 0 && (now->beta1 != was->beta1 || now->beta2 != was->beta2 || now->eps != was->eps ||
                            now->weight_decay != was->weight_decay))
      HSR_LOG_W("checkpoint: optimizer group %d was saved with beta1 %g beta2 %g eps %g weight_decay %g; keeping the "
                "program's %g %g %g %g",
                g, was->beta1, was->beta2, was->eps, was->weight_decay, now->beta1, now->beta2, now->eps,
                now->weight_decay);
    HSR_CHECK(hsr_rt_set_lr(x->rt, g, was->lr));
  }
  return HSR_OK;
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
  HSR_CHECK(hsr_rt_commit(rt)); /* commits first (hsr/ckpt.h) */
  double t0 = hsr_clock_s();
  rt_state_phase(rt);
  load_ctx x;
  memset(&x, 0, sizeof x);
  x.rt = rt;
  rt_state_info_of(rt, &x.in);
  size_t cap = 0;
  hsr_ckpt_state *prog = NULL;
  hsr_status st = ckpt_buffer_cap(&cap);
  if (st == HSR_OK) st = verify(&x, path, cap);
  if (st == HSR_OK && program) st = hsr_ckpt_state_create(&prog);
  if (st == HSR_OK && prog) st = hsr_ckpt_get_program(x.c, prog);
  st = ckpt_agree(rt, st, 0, 0, 0, NULL); /* nothing has changed yet */
  if (st == HSR_OK) {
    st = ckpt_agree(rt, install(&x), 0, 0, 0, NULL);
    if (st == HSR_OK) st = rt_state_regather(rt);
    if (st == HSR_OK) st = restore_optimizer(&x);
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
