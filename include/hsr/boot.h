/* hsr launch layer: the PMIx bootstrap.
 *
 * Every hsr process starts here. Under a launcher (mpirun, srun --mpi=pmix)
 * it joins the PMIx job; with no launcher it is a singleton (rank 0 of 1).
 * The bootstrap moves only small blobs (UCX addresses, NCCL unique ids,
 * topology records, config hashes); bulk data goes through collectives/.
 *
 * Simulated nodes: HSR_SIM_NODES=N splits the ranks of each host into N nodes
 * of contiguous local ranks, so that everything above sees N nodes per host.
 */
#ifndef HSR_BOOT_H
#define HSR_BOOT_H

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSR_HOSTNAME_MAX 64

typedef struct hsr_boot hsr_boot;

/* Joins the job (or becomes a singleton). Reads HSR_SIM_NODES, HSR_LOG and
 * HSR_BOOT_TIMEOUT (seconds, default 300) strictly. */
HSR_API hsr_status hsr_boot_init(hsr_boot **out);
/* Leaves the job and frees the context (NULL is fine). */
HSR_API hsr_status hsr_boot_finalize(hsr_boot *b);

/* Getters. Node values are after HSR_SIM_NODES is applied. */
HSR_API int hsr_boot_rank(const hsr_boot *b);
HSR_API int hsr_boot_size(const hsr_boot *b);
HSR_API int hsr_boot_local_rank(const hsr_boot *b);
HSR_API int hsr_boot_local_size(const hsr_boot *b);
HSR_API int hsr_boot_node(const hsr_boot *b); /* this rank's node index, 0..num_nodes-1 */
HSR_API int hsr_boot_num_nodes(const hsr_boot *b);
HSR_API int hsr_boot_node_of(const hsr_boot *b, int rank); /* any rank's node index */
HSR_API int hsr_boot_sim_nodes(const hsr_boot *b);         /* HSR_SIM_NODES (1 if unset) */
HSR_API int hsr_boot_is_singleton(const hsr_boot *b);
HSR_API const char *hsr_boot_hostname(const hsr_boot *b);
HSR_API const char *hsr_boot_hostname_of(const hsr_boot *b, int rank);
HSR_API const char *hsr_boot_launcher(const hsr_boot *b); /* "mpirun", "srun", "pmix" or "singleton" */

/* Every rank contributes `bytes` bytes; `recv` receives size*bytes, rank r's
 * blob at offset r*bytes. All ranks must pass the same `bytes`. */
HSR_API hsr_status hsr_boot_allgather(hsr_boot *b, const void *send, size_t bytes, void *recv);
/* `bytes` from `root` to every rank. */
HSR_API hsr_status hsr_boot_bcast(hsr_boot *b, void *buf, size_t bytes, int root);
HSR_API hsr_status hsr_boot_barrier(hsr_boot *b);
/* Ends the whole job with `code`, printing `msg` (used when one rank found an
 * error that the others cannot see). Does not return on success. */
HSR_API hsr_status hsr_boot_abort(hsr_boot *b, int code, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
