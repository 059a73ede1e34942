/* The timeline of one rank: its program (compute, engine work, blocking
 * waits) and its collectives, each lane running its queue in order. Rates
 * are piecewise constant between events: a stage of tier t moves bytes at
 * busbw(t), times the contention factor while the other tier is busy,
 * shared with the other busy stages of its tier; compute slows by the
 * steal of each busy tier (host collectives copy on the compute cores).
 * Ranks are symmetric, so one rank's timeline is every rank's. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "tune_int.h"

void tl_init(tl *t, const tune_net *net) {
  memset(t, 0, sizeof *t);
  t->net = net;
}

void tl_free(tl *t) {
  free(t->ops);
  for (int l = 0; l < TL_LANES; l++) free(t->q[l]);
  free(t->comp);
  free(t->stg);
  free(t->stg_tier);
  memset(t, 0, sizeof *t);
}

/* grow_array, keeping the first error in *err (the timeline checks it once, at the end) */
static void *grow(void *p, int *cap, int need, size_t el, hsr_status *err) {
  hsr_status st = grow_array(&p, cap, need - 1, el, 64, "tune timeline");
  if (st != HSR_OK) *err = st;
  return p;
}

static void load_stage(const tl *t, tl_op *o) {
  const tune_stage *s = &o->st[o->cur];
  double f;
  o->lat_left = tl_stage_link(t->net, s, &f)->alpha_us * 1e-6 * t->net->slow[s->tier] * f;
  o->bytes_left = s->bytes;
  o->stage_start = t->now;
}

static void stage_done(tl *t, const tl_op *o) {
  t->stg = grow(t->stg, &t->capstg, t->nstg + 1, sizeof *t->stg, &t->err);
  t->stg_tier = grow(t->stg_tier, &t->capstgt, t->nstg + 1, sizeof *t->stg_tier, &t->err);
  if (t->err != HSR_OK) return;
  t->stg[t->nstg] = (ival){o->stage_start, t->now};
  t->stg_tier[t->nstg++] = o->st[o->cur].tier;
}

int tl_post(tl *t, int lane, int group, int op, const tune_vol *v) {
  if (!v->nstages || t->err != HSR_OK || lane < 0 || lane >= TL_LANES) return -1;
  t->ops = grow(t->ops, &t->capops, t->nops + 1, sizeof *t->ops, &t->err);
  t->q[lane] = grow(t->q[lane], &t->qcap[lane], t->qn[lane] + 1, sizeof(int), &t->err);
  if (t->err != HSR_OK) return -1;
  tl_op *o = &t->ops[t->nops];
  memset(o, 0, sizeof *o);
  o->lane = lane, o->group = group, o->op = op, o->nst = v->nstages;
  memcpy(o->st, v->stage, sizeof o->st);
  o->post = t->now;
  o->start = o->end = -1;
  t->q[lane][t->qn[lane]++] = t->nops;
  return t->nops++;
}

int tl_done(const tl *t, int id) { return id < 0 || id >= t->nops || t->ops[id].done; }

static tl_op *head(tl *t, int lane) {
  return t->qhead[lane] < t->qn[lane] ? &t->ops[t->q[lane][t->qhead[lane]]] : NULL;
}

/* One interval of constant rates, at most `limit` seconds long; `work`
 * (may be NULL) is compute left, in seconds at full speed; cpu: the program
 * holds its cores (computing or engine work): its collectives then run
 * slow_busy times slower again (host: they share those cores). */
static void advance(tl *t, double *work, double limit, int cpu) {
  const tune_net *n = t->net;
  tl_op *h[TL_LANES];
  int moving[HSR_TUNE_TIER_COUNT] = {0};
  for (int l = 0; l < TL_LANES; l++) {
    h[l] = head(t, l);
    if (h[l] && !h[l]->started) {
      h[l]->started = 1;
      h[l]->start = t->now;
      load_stage(t, h[l]);
    }
    if (h[l] && h[l]->lat_left <= 0) moving[h[l]->st[h[l]->cur].tier]++;
  }
  double rate[TL_LANES] = {0}, dt = limit;
  for (int l = 0; l < TL_LANES; l++) {
    if (!h[l]) continue;
    if (h[l]->lat_left > 0) {
      if (h[l]->lat_left < dt) dt = h[l]->lat_left;
      continue;
    }
    int tier = h[l]->st[h[l]->cur].tier;
    const tune_stage *st = &h[l]->st[h[l]->cur];
    double f;
    double bw = tl_stage_link(n, st, &f)->busbw_gbs * 1e9 / n->slow[tier] / (cpu ? n->slow_busy[tier] : 1) / f;
    if (moving[1 - tier]) bw *= n->concurrent[tier];
    rate[l] = bw > 0 ? bw / moving[tier] : DBL_MAX;
    double need = h[l]->bytes_left / rate[l];
    if (need < dt) dt = need;
  }
  double crate = 1;
  for (int k = 0; k < HSR_TUNE_TIER_COUNT; k++)
    if (moving[k]) crate -= n->steal[k];
  if (crate < 0.05) crate = 0.05;
  if (work && *work / crate < dt) dt = *work / crate;
  if (dt == DBL_MAX) { /* nothing can move: a wait on a collective that never runs */
    t->err = hsr_error(HSR_ERR_INTERNAL, "tune timeline: a wait that nothing completes");
    return;
  }
  if (dt < 0) dt = 0;
  t->now += dt;
  if (work) *work = *work - crate * dt < 1e-15 ? 0 : *work - crate * dt;
  for (int l = 0; l < TL_LANES; l++) {
    tl_op *o = h[l];
    if (!o) continue;
    if (o->lat_left > 0) {
      o->lat_left = o->lat_left - dt < 1e-15 ? 0 : o->lat_left - dt;
      if (o->lat_left > 0 || o->bytes_left > 0) continue;
    } else {
      o->bytes_left -= rate[l] * dt;
      if (o->bytes_left > 1e-9 * o->st[o->cur].bytes + 1e-6) continue;
    }
    stage_done(t, o);
    if (++o->cur < o->nst) {
      load_stage(t, o);
      continue;
    }
    o->done = 1;
    o->end = t->now;
    t->qhead[l]++;
  }
}

void tl_wait(tl *t, int id) {
  while (t->err == HSR_OK && !tl_done(t, id)) advance(t, NULL, DBL_MAX, 0);
}

void tl_compute(tl *t, double s) {
  if (s <= 0 || t->err != HSR_OK) return;
  double t0 = t->now, work = s;
  while (t->err == HSR_OK && work > 0) advance(t, &work, DBL_MAX, 1);
  t->comp = grow(t->comp, &t->capcomp, t->ncomp + 1, sizeof *t->comp, &t->err);
  if (t->err == HSR_OK) t->comp[t->ncomp++] = (ival){t0, t->now};
}

void tl_busy(tl *t, double s) {
  double end = t->now + s;
  while (t->err == HSR_OK && t->now < end) advance(t, NULL, end - t->now, 1);
}
