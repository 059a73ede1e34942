/* Version 2 of the manifest lists no ranges: each data file's (what its
 * rank wrote at its mesh coordinates) are derived here with the save's own
 * planner (ckpt_geom, ckpt_plan.c) on the layout the manifest records,
 * rebuilt and checked against it, then checked as version 1's listed ranges
 * are (ckpt_manifest.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "ckpt_int.h"

/* The layout the manifest records, rebuilt: its units in order, its tensors
 * in layout order, its alignment, finalized for the mesh's shards; every
 * tensor at the offset the manifest records and every unit as long. */
static hsr_status saved_layout(ckpt_handle *c, pctx *px, rt_layout **out) {
  *out = NULL;
  const ckpt_info *in = &c->info;
  const cJSON *lay = ckpt_jobj(c->json, "layout"), *ua, *it;
  int64_t align, len;
  int nu;
  snprintf(px->where, sizeof px->where, "layout");
  if (!lay) return PERR(px, "missing or not an object");
  HSR_CHECK(ckpt_jint(px, lay, "align", 1, 1 << 20, &align));
  px->where[0] = 0;
  HSR_CHECK(ckpt_jarr(px, c->json, "units", &ua, &nu));
  rt_layout *l = NULL;
  hsr_status st = rt_layout_create((size_t)align, &l);
  if (st == HSR_OK && in->outer_shard) st = rt_layout_set_subshards(l, in->replicate);
  int u = 0;
  cJSON_ArrayForEach(it, ua) {
    const char *name;
    int got;
    snprintf(px->where, sizeof px->where, "unit %d", u++);
    if (st == HSR_OK) st = ckpt_jstr(px, it, "name", &name);
    if (st == HSR_OK) st = rt_layout_add_unit(l, name, &got);
  }
  for (int i = 0; st == HSR_OK && i < c->nt; i++) {
    const ckpt_tensor *t = &c->t[i];
    snprintf(px->where, sizeof px->where, "tensor '%.64s'", t->name);
    st = t->unit_index < nu ? rt_layout_add_param(l, t->unit_index, t->name, t->ndim, t->shape, t->group)
                            : PERR(px, "unit_index %d, the manifest lists %d units", t->unit_index, nu);
  }
  px->where[0] = 0;
  if (st == HSR_OK) st = rt_layout_finalize(l, in->shard);
  if (st != HSR_OK && !strstr(hsr_last_error(), "manifest")) { /* the layout's own words, placed */
    char why[CKPT_MSG];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    st = PERR(px, "its layout does not rebuild: %s", why);
  }
  for (int i = 0; st == HSR_OK && i < c->nt; i++) {
    rt_param_info p;
    st = rt_layout_param(l, i, &p);
    if (st == HSR_OK && p.offset != c->t[i].offset)
      st = (snprintf(px->where, sizeof px->where, "tensor '%.64s'", c->t[i].name),
            PERR(px, "offset %" PRIu64 ", its layout rebuilt on %d shards puts it at %zu", c->t[i].offset, in->shard,
                 p.offset));
  }
  u = 0;
  cJSON_ArrayForEach(it, ua) {
    if (st != HSR_OK) break;
    snprintf(px->where, sizeof px->where, "unit %d", u);
    st = ckpt_jint(px, it, "shard_len", 0, (int64_t)1 << 53, &len);
    if (st == HSR_OK && (uint64_t)len != rt_layout_shard_len(l, u))
      st = PERR(px, "shard_len %" PRId64 ", its layout rebuilt on %d shards makes %zu", len, in->shard,
                rt_layout_shard_len(l, u));
    u++;
  }
  px->where[0] = 0;
  if (st != HSR_OK) rt_layout_free(l), l = NULL;
  *out = l;
  return st;
}

static int range_cmp(const void *a, const void *b) {
  const ckpt_range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Each file's pieces (what its rank wrote: ckpt_geom_pieces at its mesh
 * coordinates, master, m and v side by side per piece, in order) as ranges
 * of their tensors, sorted by element; then checked as version 1's are. */
hsr_status ckpt_derive_ranges(ckpt_handle *c, pctx *px, uint64_t *covered) {
  rt_layout *l = NULL;
  ckpt_geom *g = NULL;
  int *cap = calloc((size_t)c->nt + 1, sizeof *cap);
  hsr_status st = cap ? saved_layout(c, px, &l) : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) st = ckpt_geom_create(l, c->info.replicate, c->info.shard, c->info.outer_shard, &g);
  for (int f = 0; st == HSR_OK && f < c->nf; f++) {
    ckpt_piece *pc = NULL;
    int np = 0;
    uint64_t off = 0;
    st = ckpt_geom_pieces(g, c->f[f].rep, c->f[f].sh, 0, &pc, &np);
    for (int i = 0; st == HSR_OK && i < np; i++) {
      ckpt_tensor *t = &c->t[pc[i].param];
      st = grow_array(&t->r, &cap[pc[i].param], t->nr, sizeof *t->r, 8, "checkpoint");
      uint64_t n = pc[i].count;
      if (st == HSR_OK) t->r[t->nr++] = (ckpt_range){pc[i].start, n, {off, off + 4 * n, off + 8 * n}, f};
      off += 12 * n;
    }
    free(pc);
  }
  free(cap);
  ckpt_geom_free(g);
  rt_layout_free(l);
  for (int i = 0; st == HSR_OK && i < c->nt; i++) {
    ckpt_tensor *t = &c->t[i];
    snprintf(px->where, sizeof px->where, "tensor '%.64s'", t->name);
    int sorted = 1;
    for (int k = 1; k < t->nr && sorted; k++) sorted = t->r[k - 1].start <= t->r[k].start;
    if (!sorted) qsort(t->r, (size_t)t->nr, sizeof *t->r, range_cmp);
    uint64_t next = 0;
    for (int k = 0; st == HSR_OK && k < t->nr; k++) {
      if (t->r[k].start != next)
        st = PERR(px, "elements [%" PRIu64 ", %" PRIu64 ") are in %s", next < t->r[k].start ? next : t->r[k].start,
                  next < t->r[k].start ? t->r[k].start : next,
                  next < t->r[k].start ? "no data file (one missing from the list?)"
                                       : "two data files (two at the same mesh coordinates?)");
      else
        st = ckpt_check_range(c, px, &t->r[k], k, covered);
      next += t->r[k].count;
    }
    if (st == HSR_OK && next != t->numel)
      st = PERR(px, "the data files' pieces cover %" PRIu64 " of its %" PRIu64 " elements", next, t->numel);
  }
  px->where[0] = 0;
  return st;
}
