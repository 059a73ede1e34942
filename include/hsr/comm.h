/* hsr collectives: communicators, nonblocking collectives, node-shared memory.
 *
 * A communicator is an ordered group of world ranks. Members on one node (real
 * or HSR_SIM_NODES-simulated) talk through hsr's shared-memory path; members
 * on different nodes through UCX; groups spanning nodes use two-level
 * algorithms. Device memory goes through NCCL (HSR_BACKEND_NCCL).
 *
 * Every operation is nonblocking: it returns a request (hsr_req) that the
 * caller tests or waits on. Passing req == NULL makes the call blocking (it
 * waits with the communicator's timeout). Operations on one communicator
 * complete in issue order; operations on different communicators progress
 * independently.
 *
 * collectives/ knows rank lists only: it never includes topology/ or runtime/.
 */
#ifndef HSR_COMM_H
#define HSR_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/common.h"
#include "hsr/dtype.h"
#include "hsr/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hsr_comm hsr_comm;
typedef struct hsr_req hsr_req;

typedef enum hsr_backend {
  HSR_BACKEND_HOST = 0, /* host memory: shared memory + UCX */
  HSR_BACKEND_NCCL = 1  /* device memory: NCCL, ordered on the comm's CUDA stream */
} hsr_backend;

typedef enum hsr_op {
  HSR_OP_ALLGATHER = 0,
  HSR_OP_REDUCE_SCATTER,
  HSR_OP_ALLREDUCE,
  HSR_OP_BCAST,
  HSR_OP_BARRIER,
  HSR_OP_COUNT
} hsr_op;

/* Per operation, as seen by this rank:
 *   calls                    operations issued
 *   bytes_sent, bytes_recv   payload bytes this rank sent to / received from
 *                            its peers (a shared-memory peer reading my buffer
 *                            counts as sent), all peers
 *   fabric_sent, fabric_recv the part of those that went to / came from ranks
 *                            on OTHER nodes (node-local traffic is not fabric
 *                            traffic; shared memory is always 0; two-level ops
 *                            count their cross-node stage; NCCL: not counted, 0)
 *   bytes_full               the operations' full buffers: the gathered output
 *                            (all-gather), the whole input (reduce-scatter),
 *                            the vector (all-reduce, broadcast): nccl-tests' size
 * Different numbers: e.g. a 4-rank all-gather of 64 MiB gathered counts 64 MiB
 * full and 48 MiB received, of which only the blocks from other nodes are fabric. */
typedef struct hsr_comm_counter {
  uint64_t calls, bytes_sent, bytes_recv;
  uint64_t fabric_sent, fabric_recv;
  uint64_t bytes_full;
} hsr_comm_counter;

/* World communicator over every rank of the boot context. Collective.
 * Reads HSR_PROGRESS (thread|inline), HSR_COMM_TIMEOUT (seconds), HSR_ALGO_*. */
HSR_API hsr_status hsr_comm_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out);
/* Frees a communicator; outstanding requests must have completed. NULL is fine. */
HSR_API hsr_status hsr_comm_free(hsr_comm *c);

HSR_API int hsr_comm_rank(const hsr_comm *c);
HSR_API int hsr_comm_size(const hsr_comm *c);
/* The stream later operations are ordered on (NCCL's rule: every operation
 * of one communicator issued in program order on every rank). NCCL
 * communicators: a CUDA stream. Host communicators: a stream of a sim
 * device, whose worker runs each operation when it reaches it (the host
 * collectives, with their timeouts and verdicts), or NULL to run them at
 * once. */
HSR_API hsr_status hsr_comm_set_stream(hsr_comm *c, hsr_stream *stream);

/* All-gather: every rank contributes `count` elements; `recv` holds
 * size*count, rank r's block at r*count. In place when
 * send == recv + rank*count*elemsize. */
HSR_API hsr_status hsr_comm_allgather(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt,
                                      hsr_req **req);
/* Reduce-scatter: `send` holds size*count elements; this rank receives the
 * reduction of block `rank` (count elements). op: HSR_SUM or HSR_AVG. In place
 * when recv == send + rank*count*elemsize. */
HSR_API hsr_status hsr_comm_reduce_scatter(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt,
                                           hsr_redop op, hsr_req **req);
/* All-reduce of `count` elements (in place when send == recv). */
HSR_API hsr_status hsr_comm_allreduce(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt,
                                      hsr_redop op, hsr_req **req);
HSR_API hsr_status hsr_comm_bcast(hsr_comm *c, void *buf, size_t count, hsr_dtype dt, int root, hsr_req **req);
HSR_API hsr_status hsr_comm_barrier(hsr_comm *c, hsr_req **req);

/* Waits until done and frees the request. timeout_s < 0 uses HSR_COMM_TIMEOUT.
 * A wait that sees no progress for the timeout returns HSR_ERR_TIMEOUT with a
 * message naming the communicator, the operation and the peer it waited for;
 * the communicator is then failed (later operations return HSR_ERR_STATE). */
HSR_API hsr_status hsr_req_wait(hsr_req *r, double timeout_s);

#ifdef __cplusplus
}
#endif
#endif
