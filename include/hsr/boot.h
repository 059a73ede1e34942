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

#ifdef __cplusplus
}
#endif
#endif
