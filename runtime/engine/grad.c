/* The gradient path as the executor of the reduction queue's stages (the
 * queue, its order and its buffers are the interpreter's: runtime/sched).
 * Each unit's full gradient is reduced in the shard group (stage 1:
 * reduce-scatter when gradients are sharded, else an all-reduce in full),
 * its slice all-reduced in the replicate group (stage 2), and accumulated
 * into the unit's f32 gradient shard. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "collectives/comm_internal.h"
#include "runtime/runtime_internal.h"

/* A reduce-dtype copy of the full gradient for stage 1 to read. */
hsr_status rt_x_stage_cast(void *ctx, sched_red *r, void *grad) {
  hsr_rt *rt = ctx;
  rt_unit *u = &rt->units[r->unit];
  rt->grad_ready = 0; /* the accumulator takes a new reduction */
  if (!rt_dev_dropped(rt->dv, RT_DROP_REDUCE_WAIT))
    HSR_CHECK(rt_dev_join(rt->dv, RS(rt), CS(rt))); /* compute done -> the reduction may read the gradient */
  RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), u->L, grad, HSR_F32, r->send, rt->cfg.reduce_dtype));
  return HSR_OK;
}

/* A stage's collective: reduce-scatter or all-reduce, and its bytes per rank
 * (the slice, the whole unit unsharded, or the outer piece). */
static int red_scatter(const hsr_rt *rt, const sched_red *r) { return r->stage == 1 ? rt->sh.grads : r->outer; }
static size_t red_bytes(const hsr_rt *rt, const sched_red *r) {
  const rt_unit *u = &rt->units[r->unit];
  int s1 = r->stage == 1;
  size_t n = s1 && !rt->sh.grads ? u->L : !s1 && r->outer ? rt_piece_len(rt, r->unit) : u->Ls;
  return n * rt->res;
}

static void red_event(hsr_rt *rt, const sched_red *r, uint64_t t0, uint64_t t1) {
  rt_event(rt, 0, red_scatter(rt, r) ? RT_EV_REDUCE_SCATTER : RT_EV_ALLREDUCE, r->unit,
           r->stage == 1 ? HSR_RT_GROUP_SHARD : HSR_RT_GROUP_REPLICATE, 1, red_bytes(rt, r), t0, t1);
}

/* Stage 1: reduce the full gradient in the shard group. Grads sharded:
 * reduce-scatter (avg) to the local slice. Grads replicated (zero1, ddp):
 * all-reduce (avg) in full, then the slice is what the optimizer needs. */
hsr_status rt_x_stage1(void *ctx, sched_red *r) {
  hsr_rt *rt = ctx;
  rt_unit *u = &rt->units[r->unit];
  hsr_dtype rdt = rt->cfg.reduce_dtype;
  r->t0 = hsr_clock_ns();
  hsr_req *req = NULL;
  if (rdt == HSR_F32) { /* stage_cast did these for a copy */
    rt->grad_ready = 0;
    if (!rt_dev_dropped(rt->dv, RT_DROP_REDUCE_WAIT)) HSR_CHECK(rt_dev_join(rt->dv, RS(rt), CS(rt)));
  }
  if (!r->local) {
    HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, RS(rt)));
    _Atomic uint64_t *ds = rt_dev_span_begin(rt, 2);
    if (r->scatter)
      RT_TIMED(rt, RT_T_POST, hsr_comm_reduce_scatter(rt->shard_c, r->send, r->slice, u->Ls, rdt, HSR_AVG, &req));
    else
      RT_TIMED(rt, RT_T_POST, hsr_comm_allreduce(rt->shard_c, r->send, r->send, u->L, rdt, HSR_AVG, &req));
    rt_dev_span_end(rt, 0, red_scatter(rt, r) ? RT_EV_REDUCE_SCATTER : RT_EV_ALLREDUCE, r->unit, HSR_RT_GROUP_SHARD,
                    red_bytes(rt, r), ds, 2);
  }
  r->h = req;
  return HSR_OK;
}

/* A local or unsharded stage 1 left the result in place: the slice is copied out. */
hsr_status rt_x_stage1_done(void *ctx, sched_red *r) {
  hsr_rt *rt = ctx;
  rt_unit *u = &rt->units[r->unit];
  if (r->local || !r->scatter)
    RT_TIMED(rt, RT_T_DATA,
             hsr_device_copy(rt->dev, r->slice, (char *)r->send + (size_t)rt->srank * u->Ls * rt->res, u->Ls * rt->res,
                             RS(rt)));
  return HSR_OK;
}

/* The replicate stage of the slice: its all-reduce in place, or (outer
 * shard optim) its reduce-scatter over R into the rank's piece. The
 * replicate group's collectives run on the reduce stream. */
static hsr_status replicate_stage(hsr_rt *rt, sched_red *r) {
  rt_unit *u = &rt->units[r->unit];
  hsr_dtype rdt = rt->cfg.reduce_dtype;
  hsr_req *req = NULL;
  HSR_CHECK(rt_dev_use(rt->dv, rt->rep_c, RS(rt)));
  _Atomic uint64_t *ds = rt_dev_span_begin(rt, 2);
  if (r->outer)
    RT_TIMED(rt, RT_T_POST,
             hsr_comm_reduce_scatter(rt->rep_c, r->slice, r->oslice, rt_piece_len(rt, r->unit), rdt, HSR_AVG, &req));
  else
    RT_TIMED(rt, RT_T_POST, hsr_comm_allreduce(rt->rep_c, r->slice, r->slice, u->Ls, rdt, HSR_AVG, &req));
  rt_dev_span_end(rt, 0, red_scatter(rt, r) ? RT_EV_REDUCE_SCATTER : RT_EV_ALLREDUCE, r->unit, HSR_RT_GROUP_REPLICATE,
                  red_bytes(rt, r), ds, 2);
  r->h = req;
  return HSR_OK;
}

/* Stage 2: the replicate stage of the slice stage 1 left. */
hsr_status rt_x_stage2(void *ctx, sched_red *r) {
  hsr_rt *rt = ctx;
  r->t0 = hsr_clock_ns();
  return replicate_stage(rt, r);
}

/* rs_only, last micro-batch: the slices of earlier micro-batches were summed
 * without the replicate stage; one all-reduce (outer shard optim: one
 * reduce-scatter over R) of the accumulated slice completes them all. */
hsr_status rt_x_deferred_ar(void *ctx, sched_red *r) {
  hsr_rt *rt = ctx;
  rt_unit *u = &rt->units[r->unit];
  r->t0 = hsr_clock_ns();
  if (rt->off) /* the accumulator is in host memory: cast there, copied up */
    HSR_CHECK(rt_off_deferred(rt, r));
  else
    RT_TIMED(rt, RT_T_DATA,
             hsr_kernels_cast(rt->dev, RS(rt), u->Ls, rt_buf(rt, r->unit, HSR_SCHED_BUF_GRAD_SHARD), HSR_F32, r->slice,
                              rt->cfg.reduce_dtype));
  return replicate_stage(rt, r);
}

/* PROGRESS (host): whether the stage's collective has finished, without blocking. */
hsr_status rt_x_test(void *ctx, sched_red *r, int *done) {
  hsr_rt *rt = ctx;
  hsr_req *req = r->h;
  *done = 0;
  RT_TIMED(rt, RT_T_POST, req_test(req, done));
  if (!*done) return HSR_OK;
  uint64_t a = 0, b = 0;
  req_times(req, &a, &b);
  req_free(req);
  red_event(rt, r, a ? a : r->t0, b ? b : hsr_clock_ns());
  return HSR_OK;
}

/* Blocks (bounded by the timeout) for the stage's collective. */
hsr_status rt_x_wait(void *ctx, sched_red *r) {
  hsr_rt *rt = ctx;
  uint64_t t0, t1;
  hsr_status st = rt_wait_req(rt, r->h, r->t0, &t0, &t1);
  if (st != HSR_OK)
    return hsr_error(st, "runtime: gradient %s of unit '%s' failed: %s",
                     r->stage == 1 ? "reduction (shard group)" : "all-reduce (replicate group)",
                     rt->units[r->unit].name, hsr_last_error());
  red_event(rt, r, t0, t1);
  return HSR_OK;
}

/* RETIRE: the head's result into the unit's f32 accumulator (in FIFO order:
 * bitwise reproducible sums); a deferred all-reduce's sum replaces it (outer
 * shard optim: the reduce-scatter's piece replaces its first Lo elements,
 * which the optimizer reads). */
hsr_status rt_x_accumulate(void *ctx, sched_red *r, void *stage) {
  hsr_rt *rt = ctx;
  if (rt->off) return rt_off_down(rt, r); /* the accumulator is in host memory */
  rt_unit *u = &rt->units[r->unit];
  float *acc = rt_f32(rt, r->unit, HSR_SCHED_BUF_GRAD_SHARD);
  hsr_dtype rdt = rt->cfg.reduce_dtype;
  const void *res = r->outer ? r->oslice : r->slice;
  size_t n = r->outer ? rt_piece_len(rt, r->unit) : u->Ls;
  if (r->deferred) {
    if (rdt == HSR_F32)
      RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, acc, res, n * 4, RS(rt)));
    else
      RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), n, res, rdt, acc, HSR_F32));
    return HSR_OK;
  }
  uint64_t t = hsr_clock_ns();
  hsr_status st;
  if (rdt == HSR_F32) {
    st = hsr_kernels_axpy(rt->dev, RS(rt), n, 1.0, res, acc, HSR_F32);
  } else {
    st = hsr_kernels_cast(rt->dev, RS(rt), n, res, rdt, stage, HSR_F32);
    if (st == HSR_OK) st = hsr_kernels_axpy(rt->dev, RS(rt), n, 1.0, stage, acc, HSR_F32);
  }
  rt_obs_time(rt->obs, RT_T_DATA, hsr_clock_ns() - t);
  return st;
}

/* ---- reading the synchronized gradient ---- */
/* Counters of a group's all-gathers (the only collective a read uses). */
static hsr_comm_counter read_counter(hsr_comm *c) {
  hsr_comm_counter k = {0};
  if (c) comm_counters(c, HSR_OP_ALLGATHER, &k);
  return k;
}

static void not_counted(hsr_comm_counter *b, const hsr_comm_counter *before, const hsr_comm_counter *after) {
  b->calls += after->calls - before->calls;
  b->bytes_sent += after->bytes_sent - before->bytes_sent;
  b->bytes_recv += after->bytes_recv - before->bytes_recv;
  b->fabric_sent += after->fabric_sent - before->fabric_sent;
  b->fabric_recv += after->fabric_recv - before->fabric_recv;
  b->bytes_full += after->bytes_full - before->bytes_full;
}

hsr_status rt_grad_read(hsr_rt *rt, const char *name, float *out) {
  if (!rt || !name || !out) return hsr_error(HSR_ERR_INVALID, "rt_grad_read: NULL argument");
  rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  if (!rt->grad_ready)
    return hsr_error(HSR_ERR_STATE,
                     "rt_grad_read(%s): no synchronized gradient now; it exists from the gradient hook inside "
                     "hsr_rt_step (after the reductions and the 1/micro-batches scale) until hsr_rt_zero_grad or the "
                     "next backward reduction",
                     name);
  const float *gshard = rt_f32(rt, p.unit, HSR_SCHED_BUF_GRAD_SHARD);
  HSR_CHECK(rt_dev_quiesce(rt->dv)); /* device: the scaled accumulators are complete; out is host memory */
  HSR_CHECK(rt_off_settle(rt, -1));
  if (rt->S == 1 && !rt->outer) {
    RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, out, gshard + p.offset, p.numel * 4, RS(rt)));
    return rt_dev_sync(rt->dv, RS(rt));
  }
  float *full;
  hsr_comm_counter b0 = read_counter(rt->shard_c), r0 = read_counter(rt->rep_c);
  hsr_status st = rt_gather_pieces(rt, p.unit, gshard, RS(rt), &full);
  if (st == HSR_OK) st = hsr_device_copy(rt->dev, out, full + p.offset, p.numel * 4, RS(rt));
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, RS(rt));
  rt_mem_put(rt, full);
  /* a read is not the step's communication: its calls leave the step's counts alone */
  hsr_comm_counter b1 = read_counter(rt->shard_c), r1 = read_counter(rt->rep_c);
  not_counted(&rt->base[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER], &b0, &b1);
  not_counted(&rt->base[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLGATHER], &r0, &r1);
  return st;
}
