/* Device peer communicators (peer_internal.h): an NCCL communicator over a
 * peer view's members (rank i of every replica group), for cross-job
 * reductions that stay in device memory.
 *
 * The unique id comes from the view's smallest member and travels through
 * the view itself: its 128 bytes as floats, every other member's -1, reduced
 * with MAX (bounded, and a member that fails is named there). A drop (the
 * new view's members a subset of the last) shrinks the last communicator
 * (ncclCommShrink: no unique id, no rendezvous of a new world; with
 * NCCL_SHRINK_ABORT when it failed, which ends its operations first), as
 * torchft needs a fresh process group for; a join makes a new one. A
 * failed all-reduce revokes the communicator (ncclCommRevoke) so that a
 * shrink can follow; NCCL names no culprit, the view does. Waits poll
 * ncclCommGetAsyncError and the stream's event with sleeps of at most
 * 1 ms, bounded by the caller's timeout (NCCL offers no fd to sleep on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "collectives/comm_internal.h"
#include "collectives/peer_internal.h"
#include "common/common_internal.h"
#include "common/dtype_internal.h"
#include "hsr/config.h"

int peer_dev_shrink_plan(const int *from, int n_from, const int *to, int n_to, int *exclude) {
  int i = 0, n = 0;
  for (int j = 0; j < n_to; j++) {
    while (i < n_from && from[i] < to[j]) exclude[n++] = i++;
    if (i == n_from || from[i] != to[j]) return -1; /* to[j] is new */
    i++;
  }
  while (i < n_from) exclude[n++] = i++;
  return n;
}

#if HSR_HAVE_NCCL
#include "nccl.h" /* the one header with CUDA and NCCL */

#define NCCL_HAS_SHRINK (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))
#define NCCL_HAS_REVOKE (NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0))

struct peer_dev {
  ncclComm_t comm;
  cudaStream_t stream;
  cudaEvent_t done;
  int n, ids[PEER_MAX]; /* the members, ascending: comm rank k is ids[k] */
  int failed;           /* an operation failed: revoked, shrunk with NCCL_SHRINK_ABORT */
};

int peer_dev_available(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

static void nap(long *us) {
  usleep((useconds_t)*us);
  if (*us < 1000) *us *= 2;
}

#define DEV_NAME "replicas' device"

static hsr_status settle(ncclComm_t *comm, ncclResult_t rc, const char *what, double timeout_s) {
  return nccl_settle_comm(DEV_NAME, comm, rc, what, timeout_s);
}

static hsr_status cuda_ok(cudaError_t e, const char *what) {
  return e == cudaSuccess ? HSR_OK : hsr_error(HSR_ERR_CUDA, "replicas' device communicator: %s: %s", what,
                                               cudaGetErrorString(e));
}

static void destroy(peer_dev *d) {
  if (!d) return;
  if (d->comm) (d->failed ? ncclCommAbort : ncclCommDestroy)(d->comm);
  if (d->done) cudaEventDestroy(d->done);
  if (d->stream) cudaStreamDestroy(d->stream);
  free(d);
}

static hsr_status setup(peer_dev *d, hsr_comm *view) {
  d->n = view->size;
  memcpy(d->ids, view->world, sizeof(int) * (size_t)view->size);
  HSR_CHECK(cuda_ok(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  return cuda_ok(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming), "cudaEventCreate");
}

/* The smallest member's unique id, through the view. */
static hsr_status unique_id(hsr_comm *view, int64_t seq, double timeout_s, ncclUniqueId *id) {
  float v[sizeof id->internal];
  memset(id, 0, sizeof *id);
  if (view->rank == 0) {
    ncclResult_t rc = ncclGetUniqueId(id);
    if (rc != ncclSuccess) return hsr_error(HSR_ERR_TRANSPORT, "ncclGetUniqueId: %s", ncclGetErrorString(rc));
  }
  for (size_t i = 0; i < sizeof id->internal; i++) v[i] = view->rank == 0 ? (float)(unsigned char)id->internal[i] : -1.0f;
  peer_result r;
  float *b = malloc(sizeof v);
  if (!b) return hsr_error(HSR_ERR_NOMEM, "unique id");
  memcpy(b, v, sizeof v);
  HSR_CHECK(peer_allreduce(view, seq, b, sizeof id->internal, HSR_F32, HSR_MAX, timeout_s, &r));
  if (!r.ok) {
    if (!r.buf_taken) free(b);
    return hsr_error(HSR_ERR_TRANSPORT, "replicas' device communicator: its unique id did not reach every member: %s",
                     r.why);
  }
  for (size_t i = 0; i < sizeof id->internal; i++) id->internal[i] = (char)(unsigned char)b[i];
  free(b);
  return HSR_OK;
}

hsr_status peer_dev_update(peer_dev **dp, hsr_comm *view, int64_t seq, double timeout_s, const char **how) {
  if (!dp || !view || view->size < 1) return hsr_error(HSR_ERR_INVALID, "peer_dev_update: no view");
  peer_dev *old = *dp, *d = calloc(1, sizeof *d);
  if (!d) return hsr_error(HSR_ERR_NOMEM, "device communicator");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  int ex[PEER_MAX], nex = old ? peer_dev_shrink_plan(old->ids, old->n, view->world, view->size, ex) : -1;
  hsr_status st = HSR_OK;
#if NCCL_HAS_SHRINK
  if (old && old->comm && nex >= 0) {
    *how = "shrunk";
    ncclResult_t rc =
        ncclCommShrink(old->comm, ex, nex, &d->comm, &cfg, old->failed ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
    st = settle(&old->comm, rc, "ncclCommShrink", timeout_s);
    if (st == HSR_OK) st = settle(&d->comm, ncclSuccess, "ncclCommShrink (the new communicator)", timeout_s);
  } else
#endif
  {
    (void)nex;
    *how = "new";
    ncclUniqueId id;
    st = unique_id(view, seq, timeout_s, &id);
    if (st == HSR_OK)
      st = settle(&d->comm, ncclCommInitRankConfig(&d->comm, view->size, id, view->rank, &cfg),
                  "ncclCommInitRankConfig", timeout_s);
  }
  if (st == HSR_OK) st = setup(d, view);
  if (st != HSR_OK) {
    d->failed = 1;
    destroy(d);
    return st;
  }
  destroy(old);
  *dp = d;
  return HSR_OK;
}

static void dev_revoke(peer_dev *d) {
  d->failed = 1;
#if NCCL_HAS_REVOKE
  if (d->comm) ncclCommRevoke(d->comm, NCCL_REVOKE_DEFAULT);
#endif
}

hsr_status peer_dev_allreduce(peer_dev *d, void *buf, size_t count, hsr_dtype dt, hsr_redop rop, double timeout_s,
                              peer_result *res) {
  memset(res, 0, sizeof *res);
  res->ok = 1;
  if (!d || !d->comm) return hsr_error(HSR_ERR_STATE, "peer_dev_allreduce: no communicator");
  if (d->n <= 1 || !count) return HSR_OK;
  ncclResult_t rc = ncclAllReduce(buf, buf, count, nccl_dt(dt), nccl_redop(rop), d->comm, d->stream);
  hsr_status st = settle(&d->comm, rc, "ncclAllReduce", timeout_s);
  if (st == HSR_OK) st = cuda_ok(cudaEventRecord(d->done, d->stream), "cudaEventRecord");
  double end = clock_s() + timeout_s;
  long us = 1;
  cudaError_t e = cudaErrorNotReady;
  while (st == HSR_OK && (e = cudaEventQuery(d->done)) == cudaErrorNotReady) {
    ncclResult_t state = ncclSuccess; /* a peer's failure shows here, not in the event */
    if (ncclCommGetAsyncError(d->comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) break;
    if (clock_s() > end) break;
    nap(&us);
  }
  if (st == HSR_OK && e == cudaSuccess) {
    res->bytes_sent = res->bytes_recv = 2 * count * dtype_size(dt) * (size_t)(d->n - 1) / (size_t)d->n;
    return HSR_OK;
  }
  dev_revoke(d);
  res->ok = 0;
  snprintf(res->why, sizeof res->why, "the device all-reduce failed or stalled within %.1f s (%s)", timeout_s,
           st != HSR_OK ? hsr_last_error() : e == cudaErrorNotReady ? "no completion" : cudaGetErrorString(e));
  return HSR_OK;
}

void peer_dev_free(peer_dev *d) { destroy(d); }

#else /* built without NCCL */

struct peer_dev {
  int unused;
};
int peer_dev_available(void) { return 0; }
static hsr_status none(void) {
  return hsr_error(HSR_ERR_UNSUPPORTED, "replicas' device communicator: this hsr was built without NCCL");
}
hsr_status peer_dev_update(peer_dev **d, hsr_comm *view, int64_t seq, double timeout_s, const char **how) {
  (void)d, (void)view, (void)seq, (void)timeout_s, (void)how;
  return none();
}
hsr_status peer_dev_allreduce(peer_dev *d, void *buf, size_t count, hsr_dtype dt, hsr_redop rop, double timeout_s,
                              peer_result *res) {
  (void)d, (void)buf, (void)count, (void)dt, (void)rop, (void)timeout_s;
  memset(res, 0, sizeof *res);
  return none();
}
void peer_dev_free(peer_dev *d) { (void)d; }
#endif
