/* The pure model of the host collectives' algorithms: which transport a
 * group gets, the rule between all-reduce's rows, and what each algorithm
 * moves per rank. Selection (select.c, algo.c) and the tuner (tune/cost.c)
 * both read it, so the rule and the volumes are written once. Pure: sizes
 * and shapes in, numbers out; no context, no communicator. It lives in
 * common/ because it is below both its readers (tune/ may not include
 * collectives/). INTERNAL: included as "common/coll_model.h". */
#ifndef HSR_COLL_MODEL_H
#define HSR_COLL_MODEL_H

#include <stddef.h>

/* The operations, numbered as hsr_op (hsr/comm.h, which common/ may not
 * include; collectives/coll.h checks that the two agree). */
enum { COLL_MODEL_AG = 0, COLL_MODEL_RS, COLL_MODEL_AR, COLL_MODEL_BCAST, COLL_MODEL_BARRIER };

/* HSR_ALGO_ALLREDUCE and HSR_ALGO_TWO_LEVEL (the registry's choices, in order) */
enum { COLL_AR_AUTO, COLL_AR_RING, COLL_AR_RD };
enum { COLL_TWO_AUTO, COLL_TWO_OFF };

/* A host communicator's transport. */
typedef enum coll_model_tp { COLL_MODEL_SHM, COLL_MODEL_UCX, COLL_MODEL_TWO } coll_model_tp;

/* A group as it lies on the nodes: n members on `nodes` nodes, `per_node`
 * on each (0 when uneven), in `domains` NVLink domains. */
typedef struct coll_model_shape {
  int n, nodes, per_node, domains;
} coll_model_shape;

/* What the rule and the volumes read of the settings. */
typedef struct coll_model_cfg {
  int allreduce;       /* COLL_AR_* */
  double rd_max_bytes; /* recursive doubling up to this many bytes (COLL_AR_AUTO) */
  int split_rail;      /* two-level all-reduce: node reduce-scatter, cross all-reduce of 1/L, node all-gather */
} coll_model_cfg;

enum { COLL_MODEL_INTRA = 0, COLL_MODEL_CROSS = 1 };
#define COLL_MODEL_MAX_STAGES 5
typedef struct coll_model_stage {
  int tier;     /* COLL_MODEL_INTRA or COLL_MODEL_CROSS */
  int op;       /* hsr_op of the stage */
  double bytes; /* what this rank sends in it */
  int span;     /* a two-level operation's stage: 1 + its hsr_op; else 0 */
} coll_model_stage;

/* Per rank, the mean over the group's members as the counters count them,
 * and the stages that take time. */
typedef struct coll_model_vol {
  double sent, recv, fabric_sent, fabric_recv;
  int nstages;
  coll_model_stage stage[COLL_MODEL_MAX_STAGES];
  const char *algo;
} coll_model_vol;

/* One algorithm's volume: op on group g of B bytes (a rank's block; the
 * vector for all-reduce and broadcast), es the element size. Adds to v. */
typedef void (*coll_model_vol_fn)(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                                  coll_model_vol *v);
typedef struct coll_model_algo {
  const char *name;
  coll_model_vol_fn vol;
} coll_model_algo;

/* One per algorithm family; every coll_algo names its own (coll_algo.model). */
extern const coll_model_algo coll_model_shm, coll_model_ucx_ring, coll_model_ucx_rd, coll_model_ucx_flat,
    coll_model_ucx_dissem, coll_model_two, coll_model_nccl;

/* The transport of a host group spanning `nodes` nodes, `per_node` on each
 * (0 when uneven), two_level a COLL_TWO_* choice. */
coll_model_tp coll_model_transport(int nodes, int per_node, int two_level);
/* UCX all-reduce of `bytes` over n members: recursive doubling (1) or ring (0). */
int coll_model_rd(const coll_model_cfg *cfg, int n, double bytes);
/* The volume of op on a group whose members run the host transports (gpu 0)
 * or NCCL (gpu 1): the algorithm the selection would run. */
void coll_model_volume(const coll_model_cfg *cfg, int gpu, int op, const coll_model_shape *g, double B, size_t es,
                       coll_model_vol *v);

/* Every row of the host transports' tables with its algorithm's model
 * (select.c, which names the transports), for the check that each has a volume (test_coll_model). */
void coll_model_each_algo(void (*fn)(const char *tp, int op, const char *algo, const coll_model_algo *m, void *arg),
                          void *arg);

#endif
