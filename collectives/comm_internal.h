/* collectives internals: the calls of hsr/comm.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_COLLECTIVES_COMM_INTERNAL_H
#define HSR_COLLECTIVES_COMM_INTERNAL_H
#include "hsr/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over `parent`: ranks with the same color form a new communicator,
 * ordered by (key, parent rank). color < 0: this rank joins none (*out = NULL). */
hsr_status comm_split(hsr_comm *parent, int color, int key, hsr_comm **out);
/* *done = 1 when the operation has completed (the request stays valid until
 * hsr_req_wait or req_free). Returns the operation's error, if any. */
hsr_status req_test(hsr_req *r, int *done);
int comm_world_rank(const hsr_comm *c, int comm_rank); /* -1 if out of range */
hsr_backend comm_backend(const hsr_comm *c);

/* A label used in errors and traces ("world", "shard[1]", ...). */
hsr_status comm_set_name(hsr_comm *c, const char *name);
const char *comm_name(const hsr_comm *c);

/* Memory that peers on the node read directly (host backend: a node-shared
 * segment; NCCL backend: device memory). Not collective. A pointer from one
 * communicator can be used with any communicator of the same world.
 * Host buffers not allocated this way work too, but are staged (slower). */
hsr_status comm_mem_alloc(hsr_comm *c, size_t bytes, void **ptr);
hsr_status comm_mem_free(hsr_comm *c, void *ptr);

/* Frees a completed request (waiting first if needed). NULL is fine. */
hsr_status req_free(hsr_req *r);

/* Monotonic ns when the transport started and finished the operation (for
 * traces and overlap figures); 0 while not known. */
hsr_status req_times(const hsr_req *r, uint64_t *start_ns, uint64_t *end_ns);
hsr_status comm_counters(const hsr_comm *c, hsr_op op, hsr_comm_counter *out);
hsr_status comm_counters_reset(hsr_comm *c);
const char *op_name(hsr_op op); /* "all_gather", "reduce_scatter", ... */

#ifdef __cplusplus
}
#endif
#endif
