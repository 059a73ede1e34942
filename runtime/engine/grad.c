/* The gradient path: the reduction queue. Each unit's full gradient is
 * reduced in the shard group (stage 1: reduce-scatter when gradients are
 * sharded, else an all-reduce in full), its slice all-reduced in the
 * replicate group (stage 2), and accumulated into the unit's f32 gradient
 * shard. What is reduced when, and how many stay in flight, is the
 * schedule's (REDUCE, DEFERRED_AR, PROGRESS, RETIRE); this file runs it. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static hsr_status q_push(hsr_rt *rt, const rt_red *r) {
  if (rt->qn == rt->qcap) {
    int cap = rt->qcap ? 2 * rt->qcap : 16;
    rt_red *nq = realloc(rt->q, (size_t)cap * sizeof *nq);
    if (!nq) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    rt->q = nq;
    rt->qcap = cap;
  }
  rt->q[rt->qn++] = *r;
  return HSR_OK;
}

/* Stage 1: reduce the full gradient in the shard group. Grads sharded:
 * reduce-scatter (avg) to the local slice. Grads replicated (zero1, ddp):
 * all-reduce (avg) in full, then the slice is what the optimizer needs. */
hsr_status rt_red_start(hsr_rt *rt, const hsr_sched_action *a) {
  int ui = a->unit;
  rt_unit *u = &rt->units[ui];
  hsr_dtype rdt = rt->cfg.reduce_dtype;
  rt_red r = {.unit = ui, .stage = 1, .ar = a->all_reduce, .t0 = hsr_clock_ns()};
  rt->grad_ready = 0;                             /* the accumulator takes a new reduction */
  HSR_CHECK(rt_dev_join(rt->dv, RS(rt), CS(rt))); /* compute done -> the reduction may read the gradient */
  /* reduce-dtype copy of the full gradient (or the gradient itself) */
  if (rdt == HSR_F32) {
    r.send = u->gfull;
  } else {
    HSR_CHECK(rt_buf_get(rt, HSR_SCHED_BUF_REDUCE_STAGE, ui, &r.send));
    RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), u->L, u->gfull, HSR_F32, r.send, rdt));
    rt_mem_put(rt, u->gfull);
  }
  u->gfull = NULL;
  HSR_CHECK(rt_buf_get(rt, HSR_SCHED_BUF_SLICE, ui, &r.slice));
  if (!a->local) {
    HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, RS(rt)));
    if (a->scatter)
      RT_TIMED(rt, RT_T_POST, hsr_comm_reduce_scatter(rt->shard_c, r.send, r.slice, u->Ls, rdt, HSR_AVG, &r.req));
    else
      RT_TIMED(rt, RT_T_POST, hsr_comm_allreduce(rt->shard_c, r.send, r.send, u->L, rdt, HSR_AVG, &r.req));
  }
  return q_push(rt, &r);
}

/* rs_only, last micro-batch: the slices of earlier micro-batches were summed
 * without the replicate all-reduce; one all-reduce of the accumulated slice
 * completes them all. */
hsr_status rt_red_deferred(hsr_rt *rt, const hsr_sched_action *a) {
  rt_unit *u = &rt->units[a->unit];
  rt_red r = {.unit = a->unit, .stage = 2, .deferred = 1, .t0 = hsr_clock_ns()};
  HSR_CHECK(rt_buf_get(rt, HSR_SCHED_BUF_SLICE, a->unit, &r.slice));
  RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, r.slice, rt->cfg.reduce_dtype));
  RT_TIMED(rt, RT_T_POST,
           hsr_comm_allreduce(rt->rep_c, r.slice, r.slice, u->Ls, rt->cfg.reduce_dtype, HSR_AVG, &r.req));
  return q_push(rt, &r);
}

static hsr_status stage1_done(hsr_rt *rt, rt_red *r) {
  rt_unit *u = &rt->units[r->unit];
  if (rt->S == 1 || !rt->sharded_grads)
    RT_TIMED(rt, RT_T_DATA,
             hsr_device_copy(rt->dev, r->slice, (char *)r->send + (size_t)rt->srank * u->Ls * rt->res, u->Ls * rt->res,
                             RS(rt)));
  if (r->ar) {
    r->stage = 2;
    r->t0 = hsr_clock_ns();
    RT_TIMED(rt, RT_T_POST,
             hsr_comm_allreduce(rt->rep_c, r->slice, r->slice, u->Ls, rt->cfg.reduce_dtype, HSR_AVG, &r->req));
    return HSR_OK;
  }
  r->done = 1;
  return HSR_OK;
}

/* Adds a reduced slice into the unit's f32 accumulator. */
static hsr_status accumulate(hsr_rt *rt, int ui, const void *slice) {
  rt_unit *u = &rt->units[ui];
  if (rt->cfg.reduce_dtype == HSR_F32) return hsr_kernels_axpy(rt->dev, RS(rt), u->Ls, 1.0, slice, u->gshard, HSR_F32);
  float *tmp;
  HSR_CHECK(rt_buf_get(rt, HSR_SCHED_BUF_ACC_STAGE, ui, (void **)&tmp));
  hsr_status st = hsr_kernels_cast(rt->dev, RS(rt), u->Ls, slice, rt->cfg.reduce_dtype, tmp, HSR_F32);
  if (st == HSR_OK) st = hsr_kernels_axpy(rt->dev, RS(rt), u->Ls, 1.0, tmp, u->gshard, HSR_F32);
  rt_mem_put(rt, tmp);
  return st;
}

static void red_event(hsr_rt *rt, const rt_red *r, uint64_t t0, uint64_t t1) {
  const rt_unit *u = &rt->units[r->unit];
  int s1 = r->stage == 1;
  rt_event(rt, s1 && rt->sharded_grads ? RT_EV_REDUCE_SCATTER : RT_EV_ALLREDUCE, r->unit,
           s1 ? HSR_RT_GROUP_SHARD : HSR_RT_GROUP_REPLICATE, (s1 && !rt->sharded_grads ? u->L : u->Ls) * rt->res, t0,
           t1);
}

/* Stage-1 completions move on in FIFO order, so every rank issues the
 * replicate all-reduces in the same order. */
hsr_status rt_red_advance(hsr_rt *rt) {
  if (rt_dev_gpu(rt->dv)) return HSR_OK; /* device: everything was issued in program order (retire) */
  for (int i = 0; i < rt->qn; i++) {
    rt_red *r = &rt->q[i];
    if (r->done) continue;
    if (r->req) {
      int done = 0;
      RT_TIMED(rt, RT_T_POST, hsr_req_test(r->req, &done));
      if (!done) {
        if (r->stage == 1) break; /* later stage-1 entries cannot pass this one */
        continue;
      }
      uint64_t a = 0, b = 0;
      hsr_req_times(r->req, &a, &b);
      hsr_req_free(r->req);
      r->req = NULL;
      red_event(rt, r, a ? a : r->t0, b ? b : hsr_clock_ns());
    }
    if (r->stage == 1) {
      HSR_CHECK(stage1_done(rt, r));
      if (r->stage == 2) i--; /* test its all-reduce right away */
    } else {
      r->done = 1;
    }
  }
  return HSR_OK;
}

/* Completes the oldest entry, blocking (bounded by the timeout). */
static hsr_status complete_head(hsr_rt *rt) {
  rt_red *r = &rt->q[0];
  while (!r->done) {
    if (r->req) {
      uint64_t t0, t1;
      hsr_status st = rt_wait_req(rt, r->req, r->t0, &t0, &t1);
      r->req = NULL;
      if (st != HSR_OK)
        return hsr_error(st, "runtime: gradient %s of unit '%s' failed: %s",
                         r->stage == 1 ? "reduction (shard group)" : "all-reduce (replicate group)",
                         rt->units[r->unit].name, hsr_last_error());
      red_event(rt, r, t0, t1);
    }
    if (r->stage == 1)
      HSR_CHECK(stage1_done(rt, r));
    else
      r->done = 1;
  }
  return HSR_OK;
}

/* Accumulates the head's result (in FIFO order: bitwise reproducible sums)
 * and returns its buffers. */
static hsr_status retire_head(hsr_rt *rt) {
  HSR_CHECK(complete_head(rt));
  rt_red *r = &rt->q[0];
  rt_unit *u = &rt->units[r->unit];
  if (r->deferred) { /* the all-reduced sum replaces the accumulator */
    if (rt->cfg.reduce_dtype == HSR_F32)
      RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, u->gshard, r->slice, u->Ls * 4, RS(rt)));
    else
      RT_TIMED(rt, RT_T_DATA,
               hsr_kernels_cast(rt->dev, RS(rt), u->Ls, r->slice, rt->cfg.reduce_dtype, u->gshard, HSR_F32));
  } else {
    RT_TIMED(rt, RT_T_DATA, accumulate(rt, r->unit, r->slice));
  }
  rt_mem_put(rt, r->send);
  rt_mem_put(rt, r->slice);
  memmove(rt->q, rt->q + 1, (size_t)(rt->qn - 1) * sizeof *rt->q);
  rt->qn--;
  return HSR_OK;
}

hsr_status rt_red_retire(hsr_rt *rt, const hsr_sched_action *a) {
  if (rt->qn == 0 || rt->q[0].unit != a->unit || rt->q[0].deferred != a->deferred)
    return hsr_error(HSR_ERR_INTERNAL, "runtime: the schedule retires a reduction of unit %d, the queue holds %s %d",
                     a->unit, rt->qn ? "unit" : "none, unit", rt->qn ? rt->q[0].unit : -1);
  return retire_head(rt);
}

hsr_status rt_red_drain(hsr_rt *rt) {
  while (rt->qn > 0) HSR_CHECK(retire_head(rt));
  return HSR_OK;
}

/* ---- reading the synchronized gradient ---- */
/* Counters of the shard group's all-gathers (the only collective a read uses). */
static hsr_comm_counter read_counter(hsr_rt *rt) {
  hsr_comm_counter c = {0};
  if (rt->shard_c) hsr_comm_counters(rt->shard_c, HSR_OP_ALLGATHER, &c);
  return c;
}

hsr_status hsr_rt_grad_read(hsr_rt *rt, const char *name, float *out) {
  if (!rt || !name || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_grad_read: NULL argument");
  hsr_rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  if (!rt->grad_ready)
    return hsr_error(HSR_ERR_STATE,
                     "hsr_rt_grad_read(%s): no synchronized gradient now; it exists from the gradient hook inside "
                     "hsr_rt_step (after the reductions and the 1/micro-batches scale) until hsr_rt_zero_grad or the "
                     "next backward reduction",
                     name);
  rt_unit *u = &rt->units[p.unit];
  HSR_CHECK(rt_dev_quiesce(rt->dv)); /* device: the scaled accumulators are complete; out is host memory */
  if (rt->S == 1) {
    RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, out, u->gshard + p.offset, p.numel * 4, RS(rt)));
    return rt_dev_sync(rt->dv, RS(rt));
  }
  float *full;
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, u->L * 4, (void **)&full));
  hsr_comm_counter before = read_counter(rt);
  hsr_status st = rt_dev_use(rt->dv, rt->shard_c, RS(rt));
  if (st == HSR_OK) st = hsr_comm_allgather(rt->shard_c, u->gshard, full, u->Ls, HSR_F32, NULL);
  if (st == HSR_OK) st = hsr_device_copy(rt->dev, out, full + p.offset, p.numel * 4, RS(rt));
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, RS(rt));
  rt_mem_put(rt, full);
  /* a read is not the step's communication: its calls leave the step's counts alone */
  hsr_comm_counter after = read_counter(rt), *b = &rt->base[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER];
  b->calls += after.calls - before.calls;
  b->bytes_sent += after.bytes_sent - before.bytes_sent;
  b->bytes_recv += after.bytes_recv - before.bytes_recv;
  b->fabric_sent += after.fabric_sent - before.fabric_sent;
  b->fabric_recv += after.fabric_recv - before.fabric_recv;
  b->bytes_full += after.bytes_full - before.bytes_full;
  return st;
}
