/* NCCL transport: device-memory collectives (HSR_BACKEND_NCCL).
 *
 * Nonblocking NCCL communicators (config.blocking = 0): every NCCL call may
 * return ncclInProgress, after which ncclCommGetAsyncError is polled (bounded
 * by the communicator's timeout); a communicator that stops making progress is
 * aborted with ncclCommAbort. Requests are CUDA events recorded on the
 * communicator's stream after the collective. NCCL picks its own algorithms,
 * so this transport has no rows; its ops never meet the host progress engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"
#include "common/env.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"
#include "common/dtype_internal.h"
#include "kernels/kernels_internal.h"

#if HSR_HAVE_NCCL

static hsr_status cuda_err(cudaError_t e, const char *what) {
  return hsr_error(HSR_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* Waits until a nonblocking NCCL call has finished its host-side work: the
 * call returns ncclSuccess or ncclInProgress, then the communicator's async
 * state is polled until it leaves ncclInProgress (bounded by timeout_s; at
 * the bound *comm is aborted and set to NULL). name: the communicator's, in
 * messages. */
hsr_status nccl_settle_comm(const char *name, ncclComm_t *comm, ncclResult_t rc, const char *what, double timeout_s) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    return hsr_error(HSR_ERR_TRANSPORT, "communicator '%s': %s: %s (%s)", name, what, ncclGetErrorString(rc),
                     *comm ? ncclGetLastError(*comm) : "");
  if (!*comm) return hsr_error(HSR_ERR_TRANSPORT, "communicator '%s': %s: its NCCL communicator was aborted", name, what);
  double t0 = clock_s();
  long us = 1;
  ncclResult_t state = ncclInProgress;
  while (*comm) {
    ncclResult_t q = ncclCommGetAsyncError(*comm, &state);
    if (q != ncclSuccess) state = q;
    if (state != ncclInProgress) break;
    if (clock_s() - t0 > timeout_s) {
      ncclCommAbort(*comm);
      *comm = NULL;
      return hsr_error(HSR_ERR_TIMEOUT,
                       "communicator '%s': %s did not complete within %.1f s (NCCL communicator aborted)", name, what,
                       timeout_s);
    }
    usleep((useconds_t)us);
    if (us < 1000) us *= 2;
  }
  if (state != ncclSuccess && state != ncclInProgress)
    return hsr_error(HSR_ERR_TRANSPORT, "communicator '%s': %s: %s (%s)", name, what, ncclGetErrorString(state),
                     *comm ? ncclGetLastError(*comm) : "");
  return HSR_OK;
}

/* The same for a communicator of the world's tree (the caller's handle is left as it is). */
static hsr_status nccl_settle(hsr_comm *c, ncclComm_t comm, ncclResult_t rc, const char *what) {
  return nccl_settle_comm(c->name, &comm, rc, what, c->timeout_s);
}

static hsr_status finish_setup(hsr_comm *c, nccl_state *s) {
  cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_err(e, "cudaStreamCreate");
  s->own_stream = 1;
  e = cudaMalloc((void **)&s->dev_scratch, 64 * sizeof(int));
  if (e != cudaSuccess) return cuda_err(e, "cudaMalloc");
  c->tp_state = s;
  return HSR_OK;
}

static hsr_status env_timeout(double *t) { return env_get_double("HSR_COMM_TIMEOUT", t); }

static hsr_status init_world(hsr_comm *c, hsr_boot *boot) {
  HSR_CHECK(env_timeout(&c->timeout_s));
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0)
    return hsr_error(HSR_ERR_UNSUPPORTED, "HSR_BACKEND_NCCL needs a CUDA device, and none is usable here (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  e = cudaSetDevice(boot_local_rank(boot) % ndev);
  if (e != cudaSuccess) return cuda_err(e, "cudaSetDevice");
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (c->rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) return hsr_error(HSR_ERR_TRANSPORT, "ncclGetUniqueId: %s", ncclGetErrorString(rc));
  }
  HSR_CHECK(boot_bcast(boot, &id, sizeof id, 0));
  nccl_state *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "NCCL state");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t rc = ncclCommInitRankConfig(&s->comm, c->size, id, c->rank, &cfg);
  hsr_status st = nccl_settle(c, s->comm, rc, "ncclCommInitRankConfig");
  if (st == HSR_OK) st = finish_setup(c, s);
  if (st != HSR_OK) free(s);
  return st;
}

hsr_status nccl_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  hsr_comm *c;
  HSR_CHECK(coll_comm_alloc_world(boot, backend, &c));
  c->tp = &nccl_transport;
  hsr_status st = init_world(c, boot);
  if (st != HSR_OK) {
    coll_comm_dealloc(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

/* World ranks of the members: one small all-gather on the new communicator. */
static hsr_status member_table(hsr_comm *parent, hsr_comm *child, nccl_state *s) {
  int rank = child->rank, size = child->size, mine = parent->world[parent->rank], *dev = NULL;
  cudaError_t e = cudaMalloc((void **)&dev, (size_t)size * sizeof(int));
  if (e != cudaSuccess) return cuda_err(e, "cudaMalloc");
  hsr_status st = HSR_OK;
  e = cudaMemcpy(dev + rank, &mine, sizeof mine, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    ncclResult_t rc = ncclAllGather(dev + rank, dev, 1, ncclInt32, s->comm, s->stream);
    st = nccl_settle(child, s->comm, rc, "ncclAllGather (member table)");
    if (st == HSR_OK) e = cudaStreamSynchronize(s->stream);
    if (st == HSR_OK && e == cudaSuccess)
      e = cudaMemcpy(child->world, dev, (size_t)size * sizeof(int), cudaMemcpyDeviceToHost);
  }
  cudaFree(dev);
  if (st == HSR_OK && e != cudaSuccess) st = cuda_err(e, "member table");
  return st;
}

static hsr_status split_into(hsr_comm *parent, hsr_comm *child, int color, int key) {
  nccl_state *ps = nccl_of(parent);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nc = NULL;
  ncclResult_t rc = ncclCommSplit(ps->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, &cfg);
  HSR_CHECK(nccl_settle(parent, ps->comm, rc, "ncclCommSplit"));
  if (color < 0) return HSR_OK;
  if (!nc) return hsr_error(HSR_ERR_TRANSPORT, "ncclCommSplit returned no communicator for color %d", color);
  HSR_CHECK(nccl_settle(parent, nc, ncclSuccess, "ncclCommSplit (child)"));
  nccl_state *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "NCCL state");
  s->comm = nc;
  int rank = 0, size = 0;
  ncclCommUserRank(nc, &rank);
  ncclCommCount(nc, &size);
  int *w = realloc(child->world, (size_t)size * sizeof *w);
  if (!w) {
    free(s);
    return hsr_error(HSR_ERR_NOMEM, "member table");
  }
  child->world = w;
  child->rank = rank, child->size = size;
  child->backend = HSR_BACKEND_NCCL;
  child->tp = &nccl_transport;
  child->timeout_s = parent->timeout_s;
  snprintf(child->name, sizeof child->name, "%.30s.split%d[%d]", parent->name, parent->nsplits & 0xffff,
           color & 0xffffff);
  hsr_status st = finish_setup(child, s);
  if (st != HSR_OK) {
    free(s);
    return st;
  }
  return member_table(parent, child, s);
}

hsr_status nccl_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  hsr_comm *c = NULL;
  if (color >= 0) HSR_CHECK(coll_comm_alloc(1, &c));
  hsr_status st = split_into(parent, c, color, key);
  if (st != HSR_OK) {
    if (c) coll_comm_dealloc(c);
    return st;
  }
  parent->nsplits++;
  *out = c;
  return HSR_OK;
}

static hsr_status nccl_free(hsr_comm *c) {
  nccl_state *s = nccl_of(c);
  if (s) {
    if (s->comm) ncclCommDestroy(s->comm);
    if (s->own_stream) cudaStreamDestroy(s->stream);
    cudaFree(s->dev_scratch);
    free(s);
    c->tp_state = NULL;
  }
  coll_comm_dealloc(c);
  return HSR_OK;
}

static void nccl_abort(hsr_comm *c) {
  nccl_state *s = nccl_of(c);
  if (s && s->comm) {
    ncclCommAbort(s->comm);
    s->comm = NULL;
  }
  c->failed = 1;
}

static hsr_status nccl_set_stream(hsr_comm *c, hsr_stream *stream) {
  nccl_state *s = nccl_of(c);
  if (stream && hsr_device_kind_of(stream_device(stream)) != HSR_DEVICE_CUDA)
    return hsr_error(HSR_ERR_INVALID, "hsr_comm_set_stream: NCCL communicator '%s' takes a CUDA stream", c->name);
  if (s->own_stream) cudaStreamDestroy(s->stream);
  s->own_stream = 0;
  s->stream = (cudaStream_t)stream_native(stream);
  return HSR_OK;
}

static hsr_status nccl_mem_alloc(hsr_comm *c, size_t bytes, void **ptr) {
  (void)c;
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  if (e != cudaSuccess) return cuda_err(e, "comm_mem_alloc (cudaMalloc)");
  return HSR_OK;
}

static hsr_status nccl_mem_free(hsr_comm *c, void *ptr) {
  (void)c;
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) return cuda_err(e, "comm_mem_free (cudaFree)");
  return HSR_OK;
}

/* ---- operations ---------------------------------------------------------------- */


/* Enqueues the collective and counts its bytes (NCCL's own accounting). */
static ncclResult_t enqueue(coll_op *op, nccl_state *s) {
  size_t bytes = op->count * dtype_size(op->dt);
  uint64_t n = (uint64_t)op->c->size;
  ncclDataType_t dt = nccl_dt(op->dt);
  ncclResult_t rc;
  switch (op->kind) {
  case HSR_OP_ALLGATHER:
    rc = ncclAllGather(op->send, op->recv, op->count, dt, s->comm, s->stream);
    coll_op_count(op, (n - 1) * bytes, (n - 1) * bytes);
    break;
  case HSR_OP_REDUCE_SCATTER:
    rc = ncclReduceScatter(op->send, op->recv, op->count, dt, nccl_redop(op->redop), s->comm, s->stream);
    coll_op_count(op, (n - 1) * bytes, (n - 1) * bytes);
    break;
  case HSR_OP_ALLREDUCE:
    rc = ncclAllReduce(op->send, op->recv, op->count, dt, nccl_redop(op->redop), s->comm, s->stream);
    coll_op_count(op, 2 * (n - 1) * bytes / n, 2 * (n - 1) * bytes / n);
    break;
  case HSR_OP_BCAST:
    rc = ncclBroadcast(op->recv, op->recv, op->count, dt, op->root, s->comm, s->stream);
    if (op->c->rank == op->root)
      coll_op_count(op, bytes, 0);
    else
      coll_op_count(op, 0, bytes);
    break;
  default: rc = ncclAllReduce(s->dev_scratch, s->dev_scratch, 1, ncclInt32, ncclSum, s->comm, s->stream); break;
  }
  return rc;
}

static hsr_status nccl_start(coll_op *op) {
  hsr_comm *c = op->c;
  nccl_state *s = nccl_of(c);
  if (!s || !s->comm) return hsr_error(HSR_ERR_STATE, "communicator '%s' has been aborted: %s", c->name, c->fail_msg);
  ncclResult_t rc = enqueue(op, s);
  HSR_CHECK(nccl_settle(c, s->comm, rc, op_name(op->kind)));
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ev, s->stream);
  if (e != cudaSuccess) return cuda_err(e, "cudaEventRecord");
  nccl_op_of(op)->event = ev;
  op->t_start = hsr_clock_ns();
  return HSR_OK;
}

/* Finished (or failed) NCCL ops are the caller's at once: no queue to leave. */
static void finish(coll_op *op) {
  coll_op_finish(op);
  coll_op_publish(op);
}

/* Polls the op's event and the communicator's async error. */
static hsr_status query(coll_op *op, int *done) {
  *done = 0;
  if (op->fin) {
    *done = 1;
    return HSR_OK;
  }
  nccl_state *s = nccl_of(op->c);
  nccl_op *no = nccl_op_of(op);
  cudaError_t e = cudaEventQuery(no->event);
  if (e == cudaSuccess) {
    cudaEventDestroy(no->event);
    no->event = NULL;
    finish(op);
    *done = 1;
    return HSR_OK;
  }
  if (e != cudaErrorNotReady) return cuda_err(e, "cudaEventQuery");
  ncclResult_t as = ncclSuccess;
  if (s && s->comm && ncclCommGetAsyncError(s->comm, &as) == ncclSuccess && as != ncclSuccess && as != ncclInProgress) {
    coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: %s", op->c->name, op_name(op->kind),
                 ncclGetErrorString(as));
    coll_op_publish(op);
    nccl_abort(op->c);
    *done = 1;
  }
  return HSR_OK;
}

static hsr_status nccl_test(coll_op *op, int *done) {
  if (!op->fin) HSR_CHECK(query(op, done));
  *done = op->fin;
  return op->fin ? coll_op_result(op) : HSR_OK;
}

static hsr_status nccl_wait(coll_op *op, double timeout_s) {
  hsr_comm *c = op->c;
  double limit = timeout_s >= 0 ? timeout_s : c->timeout_s, t0 = clock_s();
  long sleep_us = 1;
  while (!op->fin) {
    int d = 0;
    hsr_status st = query(op, &d);
    if (st != HSR_OK) {
      coll_op_release(op);
      return st;
    }
    if (d) break;
    if (clock_s() - t0 > limit) {
      coll_op_fail(op, HSR_ERR_TIMEOUT, "communicator '%s': %s made no progress for %.1f s (NCCL communicator aborted)",
                   c->name, op_name(op->kind), limit);
      coll_op_publish(op);
      nccl_abort(c);
      break;
    }
    usleep((useconds_t)sleep_us);
    if (sleep_us < 1000) sleep_us *= 2;
  }
  hsr_status st = coll_op_result(op);
  coll_op_release(op);
  return st;
}

const coll_transport nccl_transport = {
    .name = "nccl",
    .start = nccl_start,
    .test = nccl_test,
    .wait = nccl_wait,
    .mem_alloc = nccl_mem_alloc,
    .mem_free = nccl_mem_free,
    .set_stream = nccl_set_stream,
    .free = nccl_free,
};

#else /* no NCCL in this build: no NCCL communicator can exist */

hsr_status nccl_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  (void)boot, (void)backend, (void)out;
  return hsr_error(HSR_ERR_UNSUPPORTED,
                   "HSR_BACKEND_NCCL: this build of hsr has no NCCL (configure with CUDA and NCCL)");
}

hsr_status nccl_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  (void)parent, (void)color, (void)key, (void)out;
  return hsr_error(HSR_ERR_UNSUPPORTED, "HSR_BACKEND_NCCL: this build of hsr has no NCCL");
}
#endif
