/* The interpreter (schedule.h): one switch over the actions, the buffer
 * rules applied from sched_buffers, the reduction queue's stages, and
 * the gathers in flight. Every executor (the engine, the tuner's timeline,
 * the ledger prediction) runs through here. */
#include <string.h>

#include "sched_int.h"

typedef struct run {
  sched_ctx *s;
  const sched_exec *x;
  void *ctx;
} run;

#define CALL(fn, ...) (r->x->fn ? r->x->fn(r->ctx, __VA_ARGS__) : HSR_OK)

/* Where an action's buffer of kind b lives: the unit's, or the reduction's
 * (stage 1's input and the slice; RETIRE returns the gradient stage 1 read). */
static void **slot(run *r, const sched_action *a, sched_buf b, sched_red *e, void **acc) {
  if (b == HSR_SCHED_BUF_ACC_STAGE) return acc;
  if (e && b == HSR_SCHED_BUF_OUTER_SLICE) return &e->oslice;
  if (e && (b == HSR_SCHED_BUF_REDUCE_STAGE || b == HSR_SCHED_BUF_SLICE))
    return b == HSR_SCHED_BUF_SLICE ? &e->slice : &e->send;
  if (e && b == HSR_SCHED_BUF_GRAD && a->op == HSR_SCHED_RETIRE) return &e->send;
  return &r->s->u[a->unit].buf[b];
}

/* ops[*k, end): takes and returns buffers, in order. */
static hsr_status apply(run *r, const sched_action *a, const sched_bufop *ops, int *k, int end,
                        sched_red *e, void **acc) {
  for (; *k < end; (*k)++) {
    const sched_bufop *b = &ops[*k];
    void **p = slot(r, a, b->buf, e, acc);
    if (b->get) {
      *p = NULL;
      HSR_CHECK(CALL(get, a->unit, b, p));
    } else {
      if (r->x->put) r->x->put(r->ctx, a->unit, b, *p);
      *p = NULL;
    }
  }
  return HSR_OK;
}

/* The entry an action starts (REDUCE, DEFERRED_AR: the next one not started)
 * or retires (the head); NULL with an error when the queue disagrees. */
static sched_red *entry(run *r, const sched_action *a) {
  sched_ctx *s = r->s;
  int start = a->op != HSR_SCHED_RETIRE, at = start ? s->qs : 0;
  int ok = start ? s->qs < s->qn : s->qs > 0;
  sched_red *e = ok ? &s->q[at] : NULL;
  if (!e || e->unit != a->unit || e->deferred != (start ? a->op == HSR_SCHED_DEFERRED_AR : a->deferred) ||
      e->outer != a->outer) {
    hsr_error(HSR_ERR_INTERNAL, "schedule: %s of unit %d, but the reduction queue holds %s %d", sched_op_name(a->op),
              a->unit, e ? "unit" : "none, unit", e ? e->unit : -1);
    return NULL;
  }
  if (start) s->qs++;
  return e;
}

/* Stage 1 has finished: its result becomes the slice; stage 2 follows or the entry is done. */
static hsr_status stage1_over(run *r, sched_red *e) {
  HSR_CHECK(CALL(stage1_done, e));
  if (!e->all_reduce) {
    e->done = 1;
    return HSR_OK;
  }
  e->stage = 2;
  return CALL(stage2, e);
}

/* Blocks (within the executor's bound) until the entry's stages are done. */
static hsr_status complete(run *r, sched_red *e) {
  while (!e->done) {
    if (e->h) {
      hsr_status st = CALL(wait, e);
      e->h = NULL;
      HSR_CHECK(st);
    }
    if (e->stage == 1)
      HSR_CHECK(stage1_over(r, e));
    else
      e->done = 1;
  }
  return HSR_OK;
}

/* Stage-1 completions move on in FIFO order, so every rank posts the
 * replicate all-reduces in the same order; a stage 2 still running does not
 * hold later entries back. */
static hsr_status progress(run *r) {
  sched_ctx *s = r->s;
  if (!r->x->test) return HSR_OK;
  for (int i = 0; i < s->qs; i++) {
    sched_red *e = &s->q[i];
    if (e->done) continue;
    if (e->h) {
      int done = 0;
      HSR_CHECK(r->x->test(r->ctx, e, &done));
      if (!done) {
        if (e->stage == 1) break;
        continue;
      }
      e->h = NULL;
    }
    if (e->stage == 1) {
      HSR_CHECK(stage1_over(r, e));
      if (e->stage == 2) i--; /* test its all-reduce right away */
    } else {
      e->done = 1;
    }
  }
  return HSR_OK;
}

static void pop(sched_ctx *s) {
  memmove(s->q, s->q + 1, (size_t)(s->qn - 1) * sizeof *s->q);
  s->qn--;
  s->qs--;
  if (s->qd > 0) s->qd--;
}

static hsr_status one(run *r, const sched_action *a) {
  sched_ctx *s = r->s;
  if (a->unit >= s->nu || (a->unit < 0 && a->op != HSR_SCHED_NORM && a->op != HSR_SCHED_PROGRESS))
    return hsr_error(HSR_ERR_INTERNAL, "schedule: a %s action of unit %d (%d units)", sched_op_name(a->op), a->unit,
                     s->nu);
  sched_bufop ops[HSR_SCHED_MAX_BUFOPS];
  int n = 0, k = 0;
  HSR_CHECK(sched_buffers(s, a, ops, &n));
  sched_red *e = NULL;
  void *acc = NULL;
  if (a->op == HSR_SCHED_REDUCE || a->op == HSR_SCHED_DEFERRED_AR || a->op == HSR_SCHED_RETIRE) {
    e = entry(r, a);
    if (!e) return HSR_ERR_INTERNAL;
  }
  /* the buffers the effect writes, then the effect, then what it leaves */
  int gets = 0;
  while (gets < n && ops[gets].get) gets++;
  HSR_CHECK(apply(r, a, ops, &k, gets, e, &acc));
  sunit *u = a->unit >= 0 ? &s->u[a->unit] : NULL;
  switch (a->op) {
  case HSR_SCHED_SETUP: HSR_CHECK(CALL(setup, a)); break;
  case HSR_SCHED_GATHER:
  case HSR_SCHED_REGATHER:
    u->gh = NULL;
    u->ga = *a;
    HSR_CHECK(a->op == HSR_SCHED_GATHER ? CALL(gather, a, &u->gh) : CALL(regather, a, &u->gh));
    break;
  case HSR_SCHED_WAIT:
  case HSR_SCHED_REGATHER_WAIT: {
    void *h = u->gh;
    u->gh = NULL;
    HSR_CHECK(a->op == HSR_SCHED_WAIT ? CALL(gather_wait, a, h) : CALL(regather_wait, a, h));
    break;
  }
  case HSR_SCHED_RESHARD: HSR_CHECK(CALL(reshard, a)); break;
  case HSR_SCHED_RELEASE: HSR_CHECK(CALL(release, a)); break;
  case HSR_SCHED_GRAD_BUF: HSR_CHECK(CALL(grad_buf, a)); break;
  case HSR_SCHED_REDUCE:
    e->stage = 1;
    if (k < n) { /* a reduce-dtype copy: made before the gradient goes back, the slice taken after */
      HSR_CHECK(CALL(stage_cast, e, u->buf[HSR_SCHED_BUF_GRAD]));
      HSR_CHECK(apply(r, a, ops, &k, n, e, &acc));
    } else { /* stage 1 reads the gradient itself, returned at RETIRE */
      e->send = u->buf[HSR_SCHED_BUF_GRAD];
      u->buf[HSR_SCHED_BUF_GRAD] = NULL;
    }
    HSR_CHECK(CALL(stage1, e));
    break;
  case HSR_SCHED_DEFERRED_AR:
    e->stage = 2;
    HSR_CHECK(CALL(deferred_ar, e));
    break;
  case HSR_SCHED_PROGRESS: HSR_CHECK(progress(r)); break;
  case HSR_SCHED_RETIRE:
    HSR_CHECK(complete(r, e));
    HSR_CHECK(CALL(accumulate, e, acc));
    break;
  case HSR_SCHED_NORM: HSR_CHECK(CALL(norm, a)); break;
  case HSR_SCHED_OPTIM: HSR_CHECK(CALL(optim, a)); break;
  case HSR_SCHED_GRAD_ZERO: HSR_CHECK(CALL(grad_zero, a)); break;
  case HSR_SCHED_OP_COUNT: return hsr_error(HSR_ERR_INTERNAL, "schedule: an action without an op");
  }
  HSR_CHECK(apply(r, a, ops, &k, n, e, &acc));
  if (a->op == HSR_SCHED_RETIRE) pop(s);
  return HSR_OK;
}

hsr_status sched_run(sched_ctx *s, const sched_action *acts, int n, const sched_exec *x, void *ctx) {
  if (!s || !x || (n > 0 && !acts)) return hsr_error(HSR_ERR_INVALID, "sched_run: NULL argument");
  run rr = {s, x, ctx}, *r = &rr;
  hsr_status first = HSR_OK;
  for (int i = 0; i < n; i++) {
    const sched_action *a = &acts[i];
    if (first == HSR_OK) {
      first = one(r, a);
      continue;
    }
    /* after a failure: gathers already posted still complete */
    int wait = a->op == HSR_SCHED_WAIT || a->op == HSR_SCHED_REGATHER_WAIT;
    if (!wait || a->unit < 0 || a->unit >= s->nu || !s->u[a->unit].gh) continue;
    sunit *u = &s->u[a->unit];
    void *h = u->gh;
    u->gh = NULL;
    hsr_status w = a->op == HSR_SCHED_WAIT ? CALL(gather_wait, a, h) : CALL(regather_wait, a, h);
    (void)w;
  }
  return first;
}

hsr_status sched_drain(sched_ctx *s, const sched_exec *x, void *ctx) {
  if (!s || !x) return HSR_OK;
  run rr = {s, x, ctx}, *r = &rr;
  hsr_status first = HSR_OK;
  while (s->qs > 0) {
    sched_red *e = &s->q[0];
    sched_action a = {
        .op = HSR_SCHED_RETIRE, .unit = e->unit, .group = -1, .deferred = e->deferred, .outer = e->outer};
    hsr_status st = one(r, &a);
    if (st != HSR_OK) {
      if (first == HSR_OK) first = st;
      pop(s); /* its buffers stay with the pool, which the executor frees whole */
    }
  }
  s->qn = s->qd = 0; /* appended but never started: an earlier failure stopped its call */
  for (int i = 0; i < s->nu; i++) {
    sunit *u = &s->u[i];
    if (!u->gh) continue;
    void *h = u->gh;
    u->gh = NULL;
    hsr_status st = u->ga.op == HSR_SCHED_REGATHER ? CALL(regather_wait, &u->ga, h) : CALL(gather_wait, &u->ga, h);
    if (st != HSR_OK && first == HSR_OK) first = st;
  }
  return first;
}

void *sched_buf_of(const sched_ctx *s, int unit, sched_buf b) {
  return s && unit >= 0 && unit < s->nu && b >= 0 && b < HSR_SCHED_BUF_COUNT ? s->u[unit].buf[b] : NULL;
}

void *sched_full_of(const sched_ctx *s, int unit) {
  if (!s) return NULL;
  return sched_buf_of(s, unit, s->sharded_params ? HSR_SCHED_BUF_FULL : HSR_SCHED_BUF_PARAM);
}
