/* NCCL transport (nccl.c), private: the only header that includes CUDA and
 * NCCL. */
#ifndef HSR_COLL_NCCL_H
#define HSR_COLL_NCCL_H

#include "coll.h"
#include "hsr/config.h"

#if HSR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

/* A NCCL communicator's state (hsr_comm.tp_state). */
typedef struct nccl_state {
  ncclComm_t comm; /* NULL once aborted */
  cudaStream_t stream;
  int own_stream;
  int *dev_scratch; /* barrier word */
} nccl_state;

/* A NCCL op (coll_op.priv): recorded on the stream after the collective. */
typedef struct nccl_op {
  cudaEvent_t event;
} nccl_op;
_Static_assert(sizeof(nccl_op) <= COLL_OP_PRIV, "nccl_op must fit coll_op.priv");

static inline nccl_op *nccl_op_of(coll_op *op) { return (nccl_op *)op->priv; }

static inline ncclDataType_t nccl_dt(hsr_dtype dt) {
  switch (dt) {
  case HSR_F32: return ncclFloat32;
  case HSR_F64: return ncclFloat64;
  case HSR_BF16: return ncclBfloat16;
  case HSR_F16: return ncclFloat16;
  case HSR_I32: return ncclInt32;
  default: return ncclUint8;
  }
}
static inline ncclRedOp_t nccl_redop(hsr_redop op) { return op == HSR_AVG ? ncclAvg : op == HSR_MAX ? ncclMax : ncclSum; }
static inline nccl_state *nccl_of(const hsr_comm *c) { return c->tp_state; }

extern const coll_transport nccl_transport;

/* A nonblocking call settled (nccl.c): its host side done and the
 * communicator out of ncclInProgress within timeout_s, else *comm aborted
 * and NULL. */
hsr_status nccl_settle_comm(const char *name, ncclComm_t *comm, ncclResult_t rc, const char *what, double timeout_s);
#endif

#endif
