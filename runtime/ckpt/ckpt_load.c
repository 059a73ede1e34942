/* hsr_ckpt_load: every byte is read once. The R replicas of shard s need
 * the same bytes, so each reads its part of them: the part it would write
 * if it saved now (ckpt_pieces on this mesh: 1/R of the shard's content),
 * found per tensor by intersecting with the saved ranges, every block
 * verified against the manifest, held in host memory. Only when every rank
 * has verified its part does any state change: then the replicas of each
 * shard all-gather their parts over the replicate group, window by window,
 * straight into the engine's master, m and v.
 *
 * Why the replicate group: a node's ranks hold different shards, so what a
 * rank needs beyond its own part is held by its replicas only, on the other
 * nodes; the cross-node bytes a node must receive are (R-1)/R of its state
 * whatever the exchange. The replicate all-gather moves them over every
 * rank's own link in parallel (rail to rail, no hop inside the node) while
 * the disk serves each byte once, so the disk stays the bottleneck while
 * x (a node's disk bandwidth) < S x (one rank's link): the exchange
 * is then faster than the reads that feed it.
 *
 * HSR_CKPT_EXCHANGE=off makes each replica read its whole shard instead
 * (measured here, with simulated nodes on one host whose page cache they
 * share, that is still slower: twice the copies and checks on 2 cores).
 *
 * A part that does not fit HSR_CKPT_BUFFER (with the read window) is read
 * twice: verified first, then each rank reads its whole shard again into
 * the engine.
 *
 * In place (HSR_CKPT_IN_PLACE; by default a fresh engine on host memory,
 * whose state is only its initialization): the part is read straight into
 * master, m and v, with no held copy, after the ranks have agreed on every
 * check that needs no data. Why: the held copy must be faulted in and then
 * copied out, two passes over the part on cores that the reads need
 * (measured: 4 ranks on 2 cores loaded at 40-60% of the disk's parallel
 * read held, 80-95% in place). The price is that a corrupted block tears
 * the engine (rt_state_torn) instead of leaving it as it was. The exchange
 * then sends this rank's part from the engine. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "ckpt_int.h"
#include "common/env.h"
#include "runtime/engine/state.h"
#include "collectives/comm_internal.h"

typedef struct load_ctx {
  hsr_rt *rt;
  rt_state_info in; /* the engine, read-only */
  ckpt_handle *c;
  int *map;                 /* layout parameter -> checkpoint tensor */
  int rep, sh, parts, part; /* parts ranks (its replicate group) hold this rank's shard alike */
  int alike;                /* that count before HSR_CKPT_EXCHANGE=off: 1 with the outer shard */
  int in_place;             /* the part is read straight into the engine (HSR_CKPT_IN_PLACE) */
  ckpt_piece *pc;           /* this rank's part of it */
  int np;
  uint64_t pbytes;
  ckpt_span *s;
  uint64_t *at; /* per span, held: its place in the part (bytes) */
  int n, cap;
  char *hold, *buf;
  size_t need, chunk, alloc; /* bytes needed; the read window and its buffer */
  uint64_t read_bytes, exchanged;
  void *slots; /* the exchange's windows (the replicate group's memory) */
  size_t slot_bytes;
  double data_s, read_s, exch_s;
} load_ctx;

static void shape_str(const int64_t *s, int nd, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < nd && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, d ? ", " : "", s[d]);
  if (o < len) snprintf(buf + o, len - o, "]");
}

static int name_cmp(const void *a, const void *b, void *c) {
  const ckpt_handle *k = c;
  return strcmp(k->t[*(const int *)a].name, k->t[*(const int *)b].name);
}

/* The checkpoint's tensors by name: idx sorted (n log n), then found by
 * binary search. */
static int find_sorted(const ckpt_handle *c, const int *idx, const char *name) {
  int lo = 0, hi = c->nt;
  while (lo < hi) {
    int mid = (lo + hi) / 2, d = strcmp(c->t[idx[mid]].name, name);
    if (!d) return idx[mid];
    if (d < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* Names, shapes, dtypes and groups: exactly what the program registered. */
static hsr_status match(load_ctx *x) {
  const rt_state_info *in = &x->in;
  const ckpt_handle *c = x->c;
  int np = rt_layout_num_params(in->layout);
  if (c->info.num_groups != in->cfg->num_groups)
    return hsr_error(HSR_ERR_INVALID, "checkpoint '%s' has %d optimizer group(s), the program configured %d", c->dir,
                     c->info.num_groups, in->cfg->num_groups);
  char *used = calloc((size_t)c->nt + 1, 1);
  int *idx = malloc((size_t)(c->nt + 1) * sizeof *idx);
  x->map = malloc((size_t)(np ? np : 1) * sizeof *x->map);
  if (!used || !idx || !x->map) {
    free(used), free(idx);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  for (int k = 0; k < c->nt; k++) idx[k] = k;
  qsort_r(idx, (size_t)c->nt, sizeof *idx, name_cmp, (void *)c); /* names found in O(log n), not O(n) */
  hsr_status st = HSR_OK;
  char a[96], b[96];
  for (int i = 0; i < np && st == HSR_OK; i++) {
    rt_param_info p;
    st = rt_layout_param(in->layout, i, &p);
    if (st != HSR_OK) break;
    int k = find_sorted(c, idx, p.name);
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
  free(used), free(idx);
  return st;
}

/* The kinds a checkpoint holds, in each range's order. */
static const rt_state_kind saved[CKPT_KINDS] = {RT_STATE_MASTER, RT_STATE_M, RT_STATE_V};

static hsr_status add_span(load_ctx *x, ckpt_span s) {
  if (x->n == x->cap) { /* two arrays in step: the second grows to the first's capacity */
    int cs = x->cap, ca = x->cap;
    HSR_CHECK(grow_array(&x->s, &cs, x->n, sizeof *x->s, 64, "checkpoint"));
    HSR_CHECK(grow_array(&x->at, &ca, cs - 1, sizeof *x->at, 64, "checkpoint"));
    x->cap = cs;
  }
  x->at[x->n] = 0;
  x->s[x->n++] = s;
  x->need += s.len;
  return HSR_OK;
}

/* The first of t's ranges (sorted by start, tiling it) that ends after
 * element ta: a binary search, so a rank's plan costs O(its pieces x log
 * ranges), not O(the manifest's ranges). */
static int first_range(const ckpt_tensor *t, uint64_t ta) {
  int lo = 0, hi = t->nr;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->r[mid].start + t->r[mid].count <= ta)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

hsr_status ckpt_plan_load(const ckpt_handle *c, const rt_layout *l, const ckpt_geom *g, int rep, int sh, int whole,
                          ckpt_load_plan *out) {
  memset(out, 0, sizeof *out);
  if (!c || !l || !g) return hsr_error(HSR_ERR_INVALID, "ckpt_plan_load: NULL argument");
  int np = rt_layout_num_params(l), *idx = malloc((size_t)(c->nt + 1) * sizeof *idx);
  int *map = malloc((size_t)(np + 1) * sizeof *map);
  char *used = calloc((size_t)c->nf + 1, 1);
  ckpt_piece *pc = NULL;
  int n = 0;
  hsr_status st = idx && map && used ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  for (int k = 0; st == HSR_OK && k < c->nt; k++) idx[k] = k;
  if (st == HSR_OK) qsort_r(idx, (size_t)c->nt, sizeof *idx, name_cmp, (void *)c);
  for (int i = 0; st == HSR_OK && i < np; i++) {
    rt_param_info p;
    st = rt_layout_param(l, i, &p);
    if (st == HSR_OK && (map[i] = find_sorted(c, idx, p.name)) < 0)
      st = hsr_error(HSR_ERR_INVALID, "checkpoint '%s' has no tensor '%s'", c->dir, p.name);
  }
  if (st == HSR_OK) st = ckpt_geom_pieces(g, rep, sh, whole, &pc, &n);
  for (int i = 0; st == HSR_OK && i < n; i++) {
    const ckpt_tensor *t = &c->t[map[pc[i].param]];
    uint64_t ta = pc[i].start, tb = ta + pc[i].count;
    for (int j = first_range(t, ta); j < t->nr && t->r[j].start < tb; j++) {
      out->spans += CKPT_KINDS;
      if (!used[t->r[j].file]) used[t->r[j].file] = 1, out->files++;
    }
    out->bytes += 12 * pc[i].count;
  }
  out->pieces = n;
  free(idx), free(map), free(used), free(pc);
  return st;
}

/* Tensor elements [ta, tb), landing at element `at` of what this rank holds
 * of unit u (every saved kind alike), or (held) at byte poff of this rank's
 * part, laid out as its data file would be (master, m, v of the piece). */
static hsr_status plan_piece(load_ctx *x, int ti, uint64_t ta, uint64_t tb, int u, uint64_t at, int held,
                             uint64_t poff) {
  const ckpt_tensor *t = &x->c->t[ti];
  for (int j = first_range(t, ta); j < t->nr && t->r[j].start < tb; j++) {
    const ckpt_range *r = &t->r[j];
    uint64_t a = ta > r->start ? ta : r->start, b = tb < r->start + r->count ? tb : r->start + r->count;
    for (int k = 0; k < CKPT_KINDS; k++) {
      float *dst = held ? NULL : (float *)rt_state_ptr(x->rt, u, saved[k]) + at + (a - ta);
      HSR_CHECK(add_span(x, (ckpt_span){r->file, r->off[k] + 4 * (a - r->start), 4 * (b - a), ti, k, a, dst, NULL}));
      if (held) x->at[x->n - 1] = poff + 4 * (tb - ta) * (uint64_t)k + 4 * (a - ta);
    }
  }
  return HSR_OK;
}

/* The spans of this rank's part (resharding is this intersection). */
static hsr_status plan_part(load_ctx *x) {
  uint64_t off = 0;
  for (int i = 0; i < x->np; i++) {
    const ckpt_piece *p = &x->pc[i];
    HSR_CHECK(plan_piece(x, x->map[p->param], p->start, p->start + p->count, p->unit, p->local, !x->in_place, off));
    off += 12 * p->count;
  }
  return HSR_OK;
}

/* The spans of this rank's whole shard, into the engine (the second read). */
static hsr_status plan_shard(load_ctx *x) {
  const rt_state_info *in = &x->in;
  int rep = x->rep, sh = x->sh;
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
      rt_param_info p;
      HSR_CHECK(rt_layout_param(in->layout, un.params[j], &p));
      uint64_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
      if (a < b) HSR_CHECK(plan_piece(x, x->map[un.params[j]], a - p.offset, b - p.offset, ui, a - lo, 0, 0));
    }
  }
  return HSR_OK;
}

static hsr_status install_sink(void *ctx, ckpt_span *s, uint64_t pos, const void *src, size_t n) {
  /* a pageable host source: the copy returns once src may be reused */
  return rt_state_copy(ctx, (char *)s->dst + pos, src, n);
}

/* This rank's place, its part and who holds its shard alike. */
static hsr_status place(load_ctx *x) {
  const rt_state_info *in = &x->in;
  HSR_CHECK(hsr_mesh_coords(in->mesh, in->rank, &x->rep, &x->sh));
  x->parts = 1, x->part = 0, x->alike = 1;
  if (in->nunits > 0) {
    rt_state_range r;
    HSR_CHECK(rt_state_range_at(x->rt, 0, RT_STATE_MASTER, x->rep, x->sh, &r));
    x->parts = r.parts, x->part = r.part;
    x->alike = r.parts;
  }
  if (x->parts > 1 && (x->parts != in->R || x->part != x->rep || hsr_comm_size(in->rep) != x->parts ||
                       hsr_comm_rank(in->rep) != x->part))
    return hsr_error(HSR_ERR_INTERNAL,
                     "checkpoint load: the %d ranks that hold this rank's state alike are not its replicate group",
                     x->parts);
  if (x->parts > 1) {
    int mode = 0; /* HSR_CKPT_EXCHANGE: on, off */
    HSR_CHECK(env_get_choice("HSR_CKPT_EXCHANGE", &mode));
    if (mode == 1) x->parts = 1, x->part = 0; /* each reads its whole shard */
  }
  HSR_CHECK(ckpt_pieces(x->rt, in, x->rep, x->sh, x->parts == 1, &x->pc, &x->np));
  for (int i = 0; i < x->np; i++) x->pbytes += 12 * x->pc[i].count;
  return HSR_OK;
}

/* Where the part goes: in place on an engine whose state is host memory
 * (a host run, or offload optim) and only its
 * initialization (auto), or always (on); else held, then installed. */
static hsr_status pick_in_place(load_ctx *x) {
  int mode = 0; /* HSR_CKPT_IN_PLACE: auto, on, off */
  HSR_CHECK(env_get_choice("HSR_CKPT_IN_PLACE", &mode));
  x->in_place = x->in.host_state && (mode == 1 || (mode == 0 && rt_state_fresh(x->rt)));
  return HSR_OK;
}

/* Everything checked that needs no data, nothing changed: manifest, match,
 * this rank's part and its spans, the read window. */
static hsr_status prepare(load_ctx *x, const char *path, size_t cap) {
  HSR_CHECK(rt_state_idle(x->rt, "load", 1));
  HSR_CHECK(ckpt_open(path, &x->c));
  HSR_CHECK(match(x));
  HSR_CHECK(place(x));
  HSR_CHECK(pick_in_place(x));
  HSR_CHECK(plan_part(x));
  /* the read window: at most CKPT_CHUNK and the buffer, no larger than the
   * largest file it reads, at least a block */
  uint64_t B = x->c->info.block_bytes, big = 0;
  for (int i = 0; i < x->n; i++)
    if (x->c->f[x->s[i].file].bytes > big) big = x->c->f[x->s[i].file].bytes;
  x->chunk = (cap < CKPT_CHUNK ? cap : CKPT_CHUNK) / B * B;
  if (x->chunk < B) x->chunk = (size_t)B;
  x->alloc = x->chunk < big ? x->chunk : (size_t)big; /* a window never runs past its file's end */
  return ckpt_stage_alloc(x->rt, x->alloc, (void **)&x->buf);
}

/* This rank's part read and every block of it verified: into the engine
 * (in place), held in host memory when it fits, or only verified. */
static hsr_status read_part(load_ctx *x, size_t cap) {
  double t0 = clock_s();
  hsr_status st;
  if (x->in_place) {
    /* a device run with offload: no copy queued earlier (the initialization's) may land after the read */
    if (x->in.gpu) HSR_CHECK(rt_state_quiesce(x->rt));
    st = ckpt_read_into(x->c, x->s, x->n, x->buf, x->chunk, &x->read_bytes);
  } else if (x->pbytes + x->alloc <= cap) { /* one read: hold the part */
    HSR_CHECK(ckpt_stage_alloc(x->rt, (size_t)x->pbytes, (void **)&x->hold));
    for (int i = 0; i < x->n; i++) x->s[i].hold = x->hold + x->at[i]; /* before the read sorts them */
    st = ckpt_read_held(x->c, x->s, x->n, x->buf, x->chunk, &x->read_bytes);
  } else {
    st = ckpt_read_spans(x->c, x->s, x->n, x->buf, x->chunk, NULL, NULL, &x->read_bytes);
  }
  x->data_s += clock_s() - t0;
  x->read_s = clock_s() - t0;
  return st;
}

/* Where each byte of replica j's part goes: per piece and kind, its place
 * in the part and in the engine's memory. */
typedef struct seg {
  uint64_t off, len;
  char *dst;
} seg;

static hsr_status segments(load_ctx *x, int j, seg **out, int *n, uint64_t *bytes) {
  ckpt_piece *pc;
  int np;
  *out = NULL, *n = 0, *bytes = 0;
  HSR_CHECK(ckpt_pieces(x->rt, &x->in, j, x->sh, x->parts == 1, &pc, &np));
  seg *sg = malloc((size_t)(np ? np : 1) * CKPT_KINDS * sizeof *sg);
  if (!sg) {
    free(pc);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  uint64_t off = 0;
  for (int i = 0; i < np; i++)
    for (int k = 0; k < CKPT_KINDS; k++) {
      uint64_t len = 4 * pc[i].count;
      sg[(*n)++] = (seg){off, len, (char *)((float *)rt_state_ptr(x->rt, pc[i].unit, saved[k]) + pc[i].local)};
      off += len;
    }
  free(pc);
  *out = sg, *bytes = off;
  return HSR_OK;
}

/* Bytes [lo, hi) of a part, at buf, to their places in the engine (out = 0)
 * or from there to buf (out = 1); cursor *c in sg. */
static hsr_status move(hsr_rt *rt, const seg *sg, int n, int *c, uint64_t lo, uint64_t hi, char *buf, int out) {
  for (; *c < n && sg[*c].off < hi; (*c)++) {
    const seg *g = &sg[*c];
    uint64_t a = g->off > lo ? g->off : lo, b = g->off + g->len < hi ? g->off + g->len : hi;
    char *part = buf + (a - lo), *engine = g->dst + (a - g->off);
    if (a < b) HSR_CHECK(rt_state_copy(rt, out ? part : engine, out ? engine : part, (size_t)(b - a)));
    if (g->off + g->len > hi) break; /* continues in the next window */
  }
  return HSR_OK;
}

/* The replicas' parts, all-gathered window by window over the replicate
 * group (two windows in flight: the next is posted before this one is
 * placed), into the engine. */
static hsr_status exchange(load_ctx *x) {
  hsr_rt *rt = x->rt;
  hsr_comm *rc = x->in.rep;
  int R = x->parts, me = x->part;
  seg **sg = calloc((size_t)R, sizeof *sg);
  int *ns = calloc((size_t)R, sizeof *ns), *cur = calloc((size_t)R, sizeof *cur), gcur = 0;
  uint64_t *P = calloc((size_t)R, sizeof *P), maxP = 0;
  hsr_status st = sg && ns && cur && P ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  for (int j = 0; j < R && st == HSR_OK; j++) {
    st = segments(x, j, &sg[j], &ns[j], &P[j]);
    if (P[j] > maxP) maxP = P[j];
  }
  if (st == HSR_OK && P[me] != x->pbytes) st = hsr_error(HSR_ERR_INTERNAL, "checkpoint load: parts disagree");
  uint64_t W = maxP < CKPT_CHUNK ? maxP : CKPT_CHUNK, rounds = W ? (maxP + W - 1) / W : 0;
  x->slot_bytes = (size_t)(2 * (uint64_t)R * W);
  if (st == HSR_OK && rounds) st = comm_mem_alloc(rc, x->slot_bytes, &x->slots);
  hsr_req *req[2] = {NULL, NULL};
  for (uint64_t i = 0; i < rounds + 1 && st == HSR_OK; i++) {
    if (i < rounds) { /* post window i */
      char *slot = (char *)x->slots + (i % 2) * R * W, *own = slot + (uint64_t)me * W;
      uint64_t lo = i * W, hi = lo + W < P[me] ? lo + W : P[me];
      if (lo < hi) /* in place: this rank's part is already in the engine, sent from there */
        st = x->in_place ? move(rt, sg[me], ns[me], &gcur, lo, hi, own, 1)
                         : rt_state_copy(rt, own, x->hold + lo, (size_t)(hi - lo));
      if (st == HSR_OK && x->in.gpu) st = rt_state_sync(rt);
      if (st == HSR_OK) st = hsr_comm_allgather(rc, own, slot, (size_t)W, HSR_U8, &req[i % 2]);
    }
    if (i == 0 || st != HSR_OK) continue;
    uint64_t w = i - 1; /* place window i - 1 */
    hsr_req *r = req[w % 2];
    req[w % 2] = NULL;
    st = hsr_req_wait(r, -1);
    char *slot = (char *)x->slots + (w % 2) * R * W;
    for (int j = 0; j < R && st == HSR_OK; j++) {
      uint64_t lo = w * W, hi = lo + W < P[j] ? lo + W : P[j];
      if (lo >= hi || (j == me && x->in_place)) continue;
      st = move(rt, sg[j], ns[j], &cur[j], lo, hi, slot + (uint64_t)j * W, 0);
      if (j != me) x->exchanged += hi - lo;
    }
    if (st == HSR_OK && x->in.gpu) st = rt_state_sync(rt); /* before the slot is reused */
  }
  for (int k = 0; k < 2; k++)
    if (req[k]) hsr_req_wait(req[k], -1); /* after a failure: nothing left in flight on the slots */
  for (int j = 0; sg && j < R; j++) free(sg[j]);
  free(sg), free(ns), free(cur), free(P);
  return st;
}

/* Master weights, moments and the parameters derived from them (this
 * rank's slice; the unsharded strategies' full copies are gathered after). */
static hsr_status install(load_ctx *x) {
  hsr_rt *rt = x->rt;
  HSR_CHECK(rt_state_quiesce(rt));
  double t0 = clock_s();
  hsr_status st = HSR_OK;
  if ((x->hold || x->in_place) && x->parts > 1) {
    st = exchange(x);
    x->exch_s = clock_s() - t0;
  } else if (x->in_place) { /* the whole shard is this rank's part, read in place */
  } else if (x->hold) { /* the whole shard is this rank's part */
    seg *sg = NULL;
    int n = 0, c = 0;
    uint64_t bytes;
    st = segments(x, x->rep, &sg, &n, &bytes);
    if (st == HSR_OK) st = move(rt, sg, n, &c, 0, bytes, x->hold, 0);
    free(sg);
  } else { /* read again: the whole shard, into the engine */
    x->n = 0, x->need = 0;
    st = plan_shard(x);
    if (st == HSR_OK) st = ckpt_read_spans(x->c, x->s, x->n, x->buf, x->chunk, install_sink, rt, &x->read_bytes);
  }
  x->data_s += clock_s() - t0;
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
  const ckpt_handle *c = x->c;
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
  s->seconds = clock_s() - t0;
  s->data_seconds = x->data_s;
  s->gbps = s->seconds > 0 ? (double)s->bytes_total / s->seconds / 1e9 : 0;
  s->staging_bytes = (x->buf ? x->alloc : 0) + (x->hold ? x->pbytes : 0) + x->slot_bytes;
  s->reads = x->hold || x->in_place ? 1 : 2;
  s->in_place = x->in_place;
  s->exchanged_bytes = x->exchanged;
  s->readers = x->parts > 1 ? 1 : x->alike; /* the outer shard: one rank holds each piece */
  s->waited_step = -1;
}

hsr_status hsr_ckpt_load(hsr_rt *rt, const char *path, hsr_ckpt_state *program, hsr_ckpt_stats *stats) {
  if (!rt || !path) return hsr_error(HSR_ERR_INVALID, "hsr_ckpt_load: NULL argument");
  HSR_CHECK(rt_state_commit(rt)); /* commits first (hsr/ckpt.h); a torn state may be loaded again */
  double t0 = clock_s(), waited = 0;
  int64_t wstep = -1;
  HSR_CHECK(ckpt_async_settle(rt, &waited, &wstep)); /* a background save in flight finishes first */
  rt_state_phase(rt);
  load_ctx x;
  memset(&x, 0, sizeof x);
  x.rt = rt;
  rt_state_info_of(rt, &x.in);
  size_t cap = 0;
  hsr_ckpt_state *prog = NULL;
  hsr_status st = ckpt_buffer_cap(&cap);
  if (st == HSR_OK) st = prepare(&x, path, cap);
  if (st == HSR_OK && program) st = hsr_ckpt_state_create(&prog);
  if (st == HSR_OK && prog) st = ckpt_get_program(x.c, prog);
  ckpt_link l;
  ckpt_link_of(rt, &l);
  /* every rank's checks that need no data passed before any byte is read;
   * in place only where every rank is (HSR_CKPT_IN_PLACE may differ) */
  ckpt_vote *v = NULL;
  st = ckpt_agree(&l, st, (uint64_t)x.in_place, 0, 0, &v);
  int all = st == HSR_OK && v;
  for (int r = 0; all && r < x.in.world_size; r++) all = v[r].a != 0;
  free(v);
  if (st == HSR_OK && x.in_place && !all) { /* planned in place: held after all */
    x.in_place = 0, x.n = 0, x.need = 0;
    st = plan_part(&x);
  }
  int torn = st == HSR_OK && x.in_place;
  if (torn) rt_state_torn(rt, 1);
  if (torn) st = rt_state_quiesce(rt);
  if (st == HSR_OK) st = read_part(&x, cap);
  st = ckpt_agree(&l, st, 0, 0, 0, NULL); /* every part read and verified; nothing changed unless in place */
  if (st != HSR_OK && torn)
    st = hsr_error(st,
                   "%s (the load was writing in place into this fresh engine, whose state is now partly "
                   "overwritten: load a checkpoint again)",
                   hsr_last_error());
  if (st == HSR_OK) {
    st = ckpt_agree(&l, install(&x), 0, 0, 0, NULL);
    if (st == HSR_OK) st = rt_state_regather(rt);
    if (st == HSR_OK) st = restore_optimizer(&x);
    if (st == HSR_OK) rt_state_torn(rt, 0);
    if (st == HSR_OK && prog) st = ckpt_state_assign(program, ckpt_state_obj(prog), "checkpoint: program state");
  }
  if (stats) fill_stats(&x, t0, stats);
  if (st == HSR_OK)
    HSR_LOG_I("checkpoint: loaded step %lld from %s (%.3f s: read and verified %llu bytes in %.3f s, received %llu "
              "from the replicas in %.3f s)",
              (long long)x.c->info.step, x.c->dir, clock_s() - t0, (unsigned long long)x.read_bytes, x.read_s,
              (unsigned long long)x.exchanged, x.exch_s);
  if (stats) stats->waited_seconds = waited, stats->waited_step = wstep;
  ckpt_stage_free(rt, x.hold, (size_t)x.pbytes);
  ckpt_stage_free(rt, x.buf, x.alloc);
  if (x.slots) comm_mem_free(x.in.rep, x.slots);
  free(x.pc);
  hsr_ckpt_state_free(prog);
  ckpt_close(x.c);
  free(x.map);
  free(x.s);
  free(x.at);
  return st;
}
