/* Every algorithm of the module, one object per algorithm and collective.
 * Each transport's table (coll_rows, in shm.c, ucx.c, two.c) lists the rows
 * of each collective; the rules that choose between rows live in algo.c.
 * A new algorithm: a new file defining its coll_algo, declared here, and a
 * row in its transport's table. */
#ifndef HSR_COLL_ALGOS_H
#define HSR_COLL_ALGOS_H

#include "coll.h"

/* shared memory, inside a node (shm_*.c) */
extern const coll_algo shm_allgather, shm_reduce_scatter, shm_allreduce, shm_bcast, shm_barrier;

/* UCX, across nodes (ucx_*.c) */
extern const coll_algo ucx_ring_allgather, ucx_ring_reduce_scatter, ucx_ring_allreduce; /* ucx_ring.c */
extern const coll_algo ucx_rd_allreduce;   /* recursive doubling, ucx_allreduce_rd.c */
extern const coll_algo ucx_flat_bcast;     /* root sends to every rank, ucx_bcast_flat.c */
extern const coll_algo ucx_dissem_barrier; /* dissemination, ucx_barrier_dissem.c */

/* two-level: shared-memory stage + UCX stage (two_*.c) */
extern const coll_algo two_allgather, two_reduce_scatter, two_allreduce;

#endif
