/* Device-memory collectives through NCCL (HSR_BACKEND_NCCL).
 *
 * Nonblocking NCCL communicators (config.blocking = 0): every NCCL call may
 * return ncclInProgress, after which ncclCommGetAsyncError is polled (bounded
 * by the communicator's timeout); a communicator that stops making progress is
 * aborted with ncclCommAbort. Requests are CUDA events recorded on the
 * communicator's stream after the collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "hsr/config.h"

#if HSR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

typedef struct nccl_state {
  ncclComm_t comm;
  cudaStream_t stream;
  int own_stream;
  int *dev_scratch; /* barrier word */
} nccl_state;

static hsr_status cuda_err(cudaError_t e, const char *what) {
  return hsr_error(HSR_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* Waits until a nonblocking NCCL call has finished its host-side work: the
 * call returns ncclSuccess or ncclInProgress, then the communicator's async
 * state is polled until it leaves ncclInProgress (bounded by the timeout). */
static hsr_status nccl_settle(hsr_comm *c, ncclComm_t comm, ncclResult_t rc, const char *what) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    return hsr_error(HSR_ERR_TRANSPORT, "communicator '%s': %s: %s (%s)", c->name, what, ncclGetErrorString(rc),
                     ncclGetLastError(comm));
  double t0 = hsr_clock_s();
  long us = 1;
  ncclResult_t state = ncclInProgress;
  for (;;) {
    ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) state = q;
    if (state != ncclInProgress) break;
    if (hsr_clock_s() - t0 > c->timeout_s) {
      ncclCommAbort(comm);
      return hsr_error(HSR_ERR_TIMEOUT,
                       "communicator '%s': %s did not complete within %.1f s (NCCL communicator aborted)", c->name,
                       what, c->timeout_s);
    }
    usleep((useconds_t)us);
    if (us < 1000) us *= 2;
  }
  if (state != ncclSuccess)
    return hsr_error(HSR_ERR_TRANSPORT, "communicator '%s': %s: %s (%s)", c->name, what, ncclGetErrorString(state),
                     ncclGetLastError(comm));
  return HSR_OK;
}

static hsr_status finish_setup(hsr_comm *c, nccl_state *s) {
  cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_err(e, "cudaStreamCreate");
  s->own_stream = 1;
  e = cudaMalloc((void **)&s->dev_scratch, 64 * sizeof(int));
  if (e != cudaSuccess) return cuda_err(e, "cudaMalloc");
  c->nccl = s;
  return HSR_OK;
}

static hsr_status env_timeout(double *t) { return hsr_env_double("HSR_COMM_TIMEOUT", 300, 0.001, 1e9, t); }

hsr_status hsr_coll_nccl_world(hsr_comm *c, hsr_boot *boot) {
  HSR_CHECK(env_timeout(&c->timeout_s));
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0)
    return hsr_error(HSR_ERR_UNSUPPORTED, "HSR_BACKEND_NCCL needs a CUDA device, and none is usable here (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  e = cudaSetDevice(hsr_boot_local_rank(boot) % ndev);
  if (e != cudaSuccess) return cuda_err(e, "cudaSetDevice");
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (c->rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) return hsr_error(HSR_ERR_TRANSPORT, "ncclGetUniqueId: %s", ncclGetErrorString(rc));
  }
  HSR_CHECK(hsr_boot_bcast(boot, &id, sizeof id, 0));
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

hsr_status hsr_coll_nccl_split(hsr_comm *parent, hsr_comm *child, int color, int key) {
  nccl_state *ps = parent->nccl;
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
  child->timeout_s = parent->timeout_s;
  snprintf(child->name, sizeof child->name, "%.30s.split%d[%d]", parent->name, parent->nsplits & 0xffff,
           color & 0xffffff);
  hsr_status st = finish_setup(child, s);
  if (st != HSR_OK) {
    free(s);
    return st;
  }
  /* World ranks of the members: one small all-gather on the new communicator. */
  int mine = parent->world[parent->rank], *dev = NULL;
  cudaError_t e = cudaMalloc((void **)&dev, (size_t)size * sizeof(int));
  if (e != cudaSuccess) return cuda_err(e, "cudaMalloc");
  e = cudaMemcpy(dev + rank, &mine, sizeof mine, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    rc = ncclAllGather(dev + rank, dev, 1, ncclInt32, nc, s->stream);
    st = nccl_settle(child, nc, rc, "ncclAllGather (member table)");
    if (st == HSR_OK) e = cudaStreamSynchronize(s->stream);
    if (st == HSR_OK && e == cudaSuccess)
      e = cudaMemcpy(child->world, dev, (size_t)size * sizeof(int), cudaMemcpyDeviceToHost);
  }
  cudaFree(dev);
  if (st == HSR_OK && e != cudaSuccess) st = cuda_err(e, "member table");
  return st;
}

void hsr_coll_nccl_free(hsr_comm *c) {
  nccl_state *s = c->nccl;
  if (!s) return;
  if (s->comm) ncclCommDestroy(s->comm);
  if (s->own_stream) cudaStreamDestroy(s->stream);
  cudaFree(s->dev_scratch);
  free(s);
  c->nccl = NULL;
}

hsr_status hsr_coll_nccl_abort(hsr_comm *c) {
  nccl_state *s = c->nccl;
  if (s && s->comm) {
    ncclCommAbort(s->comm);
    s->comm = NULL;
  }
  c->failed = 1;
  return HSR_OK;
}

hsr_status hsr_coll_nccl_set_stream(hsr_comm *c, void *stream) {
  nccl_state *s = c->nccl;
  if (s->own_stream) cudaStreamDestroy(s->stream);
  s->own_stream = 0;
  s->stream = (cudaStream_t)stream;
  return HSR_OK;
}

hsr_status hsr_coll_nccl_mem_alloc(size_t bytes, void **ptr) {
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
  if (e != cudaSuccess) return cuda_err(e, "hsr_comm_mem_alloc (cudaMalloc)");
  return HSR_OK;
}

hsr_status hsr_coll_nccl_mem_free(void *ptr) {
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) return cuda_err(e, "hsr_comm_mem_free (cudaFree)");
  return HSR_OK;
}

static ncclDataType_t nccl_dt(hsr_dtype dt) {
  switch (dt) {
  case HSR_F32: return ncclFloat32;
  case HSR_F64: return ncclFloat64;
  case HSR_BF16: return ncclBfloat16;
  case HSR_F16: return ncclFloat16;
  case HSR_I32: return ncclInt32;
  default: return ncclUint8;
  }
}

static ncclRedOp_t nccl_op(hsr_redop op) { return op == HSR_AVG ? ncclAvg : op == HSR_MAX ? ncclMax : ncclSum; }

hsr_status hsr_coll_nccl_start(hsr_op_s *op) {
  hsr_comm *c = op->c;
  nccl_state *s = c->nccl;
  if (!s || !s->comm) return hsr_error(HSR_ERR_STATE, "communicator '%s' has been aborted: %s", c->name, c->fail_msg);
  size_t bytes = op->count * hsr_dtype_size(op->dt);
  uint64_t n = (uint64_t)c->size;
  hsr_comm_counter *k = &c->counters[op->kind];
  ncclResult_t rc;
  ncclDataType_t dt = nccl_dt(op->dt);
  switch (op->kind) {
  case HSR_OP_ALLGATHER:
    rc = ncclAllGather(op->send, op->recv, op->count, dt, s->comm, s->stream);
    k->bytes_sent += (n - 1) * bytes, k->bytes_recv += (n - 1) * bytes;
    break;
  case HSR_OP_REDUCE_SCATTER:
    rc = ncclReduceScatter(op->send, op->recv, op->count, dt, nccl_op(op->redop), s->comm, s->stream);
    k->bytes_sent += (n - 1) * bytes, k->bytes_recv += (n - 1) * bytes;
    break;
  case HSR_OP_ALLREDUCE:
    rc = ncclAllReduce(op->send, op->recv, op->count, dt, nccl_op(op->redop), s->comm, s->stream);
    k->bytes_sent += 2 * (n - 1) * bytes / n, k->bytes_recv += 2 * (n - 1) * bytes / n;
    break;
  case HSR_OP_BCAST:
    rc = ncclBroadcast(op->recv, op->recv, op->count, dt, op->root, s->comm, s->stream);
    if (c->rank == op->root)
      k->bytes_sent += bytes;
    else
      k->bytes_recv += bytes;
    break;
  default: rc = ncclAllReduce(s->dev_scratch, s->dev_scratch, 1, ncclInt32, ncclSum, s->comm, s->stream); break;
  }
  HSR_CHECK(nccl_settle(c, s->comm, rc, hsr_op_name(op->kind)));
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ev, s->stream);
  if (e != cudaSuccess) return cuda_err(e, "cudaEventRecord");
  op->nccl_event = ev;
  op->t_start = hsr_clock_ns();
  return HSR_OK;
}

hsr_status hsr_coll_nccl_test(hsr_op_s *op, int *done) {
  *done = 0;
  if (op->fin) {
    *done = 1;
    return HSR_OK;
  }
  nccl_state *s = op->c->nccl;
  cudaError_t e = cudaEventQuery((cudaEvent_t)op->nccl_event);
  if (e == cudaSuccess) {
    cudaEventDestroy((cudaEvent_t)op->nccl_event);
    op->nccl_event = NULL;
    hsr_coll_op_done(op);
    *done = 1;
    return HSR_OK;
  }
  if (e != cudaErrorNotReady) return cuda_err(e, "cudaEventQuery");
  ncclResult_t as = ncclSuccess;
  if (s && s->comm && ncclCommGetAsyncError(s->comm, &as) == ncclSuccess && as != ncclSuccess && as != ncclInProgress) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: %s", op->c->name, hsr_op_name(op->kind),
                     ncclGetErrorString(as));
    hsr_coll_nccl_abort(op->c);
    *done = 1;
  }
  return HSR_OK;
}

#else /* no NCCL in this build */

static hsr_status no_nccl(void) {
  return hsr_error(HSR_ERR_UNSUPPORTED,
                   "HSR_BACKEND_NCCL: this build of hsr has no NCCL (configure with CUDA and NCCL)");
}
hsr_status hsr_coll_nccl_world(hsr_comm *c, hsr_boot *boot) {
  (void)c, (void)boot;
  return no_nccl();
}
hsr_status hsr_coll_nccl_split(hsr_comm *p, hsr_comm *c, int color, int key) {
  (void)p, (void)c, (void)color, (void)key;
  return no_nccl();
}
void hsr_coll_nccl_free(hsr_comm *c) { (void)c; }
hsr_status hsr_coll_nccl_start(hsr_op_s *op) {
  (void)op;
  return no_nccl();
}
hsr_status hsr_coll_nccl_test(hsr_op_s *op, int *done) {
  (void)op, *done = 1;
  return no_nccl();
}
hsr_status hsr_coll_nccl_abort(hsr_comm *c) {
  (void)c;
  return HSR_OK;
}
hsr_status hsr_coll_nccl_set_stream(hsr_comm *c, void *s) {
  (void)c, (void)s;
  return no_nccl();
}
hsr_status hsr_coll_nccl_mem_alloc(size_t b, void **p) {
  (void)b, (void)p;
  return no_nccl();
}
hsr_status hsr_coll_nccl_mem_free(void *p) {
  (void)p;
  return no_nccl();
}
#endif
