/* Internals of the collectives module (not installed). */
#ifndef HSR_COLL_INTERNAL_H
#define HSR_COLL_INTERNAL_H

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdatomic.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "hsr/comm.h"

/* ---- kernels (kern.c) ------------------------------------------------ */
void hsr_coll_copy(void *dst, const void *src, size_t n, int have_avx2);
void hsr_coll_reduce(hsr_dtype dt, hsr_redop op, void *out, const void **ins, int nin, size_t count, int divisor);
float hsr_coll_half_to_f32(hsr_dtype dt, uint16_t h);
uint16_t hsr_coll_f32_to_half(hsr_dtype dt, float f);

/* ---- node-shared memory (ctx.c) ---------------------------------------- */
/* Where a buffer lives, as peers on the node see it. */
typedef struct shm_desc {
  int32_t rank, seg; /* owner world rank, its segment id (-1: none) */
  uint64_t off, seg_bytes;
  int32_t scattered, pad; /* two-level all-gather: blocks sit at their final places */
} shm_desc;

#define CTL_SLOTS 256

/* One slot per communicator in every rank's control segment. The three
 * counters only grow: op s of a communicator waits for base + s. */
typedef struct ctl_slot {
  _Atomic uint64_t arrive, mid, done;
  shm_desc in, out;
  char pad[128 - 3 * 8 - 2 * sizeof(shm_desc)];
} ctl_slot;

typedef struct ctl_seg {
  _Atomic uint32_t doorbell; /* futex word: bumped by anyone who may unblock this rank */
  /* Set while this rank's progress thread sleeps in epoll (multi-node runs):
   * a futex cannot wake epoll, so ringers then also send to its wake socket. */
  _Atomic uint32_t sleeping;
  /* Threads blocked in FUTEX_WAIT on the doorbell: ringers skip the wake
   * syscall when there are none (most posts find the thread awake). */
  _Atomic uint32_t waiters;
  char pad[116];
  ctl_slot slot[CTL_SLOTS];
} ctl_seg;

typedef struct seg {
  int id;
  void *base;
  size_t bytes;
  int in_use;
} seg;

typedef struct peer_map {
  int rank, seg;
  void *base;
  size_t bytes;
} peer_map;

typedef struct hsr_op_s hsr_op_s;

typedef struct coll_ctx {
  hsr_boot *boot;
  int rank, size, node;
  uint64_t job;  /* random id shared by the world: names shm objects */
  int32_t *pids; /* every rank's pid (part of its segment names) */
  int refs;      /* communicators alive */
  int have_avx2;
  int inline_progress;
  double timeout_s;
  int algo_allreduce; /* 0 auto, 1 ring, 2 recursive doubling */
  int algo_two_level; /* 0 auto, 1 off (flat UCX rings for groups spanning nodes) */
  size_t rd_max_bytes;
  size_t ucx_chunk; /* bytes per pipelined ring chunk */

  /* shared memory */
  ctl_seg *ctl;       /* mine */
  ctl_seg **peer_ctl; /* per world rank, NULL when not on my node */
  uint8_t slot_used[CTL_SLOTS];
  pthread_mutex_t pool_mu;
  seg *segs;
  int nsegs, next_seg;
  peer_map *maps;
  int nmaps, cap_maps;

  /* UCX (only when the world spans nodes) */
  int have_ucx;
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_ep_h *eps;
  void *addrs; /* every rank's worker address, addr_max bytes each */
  size_t addr_max;
  int efd, epfd, evfd;
  int wakefd; /* abstract unix datagram socket node peers ring (multi-node), -1 if none */

  /* progress */
  pthread_mutex_t mu; /* queues, op state, UCX worker */
  pthread_cond_t cv;  /* signalled when an op completes */
  pthread_t thread;
  int thread_started, stop;
  /* Posted ops not yet in their communicator's queue: posting pushes here
   * without the lock (a caller never waits behind a progress pass); the
   * progress pass moves them, in posting order, into the queues. */
  _Atomic(hsr_op_s *) incoming;
  hsr_comm **comms;
  int ncomms, cap_comms;
} coll_ctx;

struct hsr_comm {
  coll_ctx *ctx;
  hsr_backend backend;
  int rank, size;
  int *world; /* comm rank -> world rank */
  char name[64];
  uint64_t id;    /* same on every member: UCX tags */
  int nsplits;    /* splits made from this comm (same count on every member) */
  int intra;      /* every member on my node: shared-memory path */
  int slot;       /* my control slot */
  int *peer_slot; /* per comm rank */
  uint64_t *peer_base;
  uint64_t seq; /* ops issued that use the transport */
  double timeout_s;
  _Atomic int failed; /* read by posting threads without the lock; fail_msg is written first */
  char fail_msg[256];
  hsr_op_s *head, *tail;
  void *scratch;
  size_t scratch_bytes;
  hsr_comm_counter counters[HSR_OP_COUNT];
  void *nccl; /* NCCL backend state */
  /* Two-level (groups spanning nodes with the same member count per node):
   * node_comm = my node's members, cross_comm = same local index on every
   * node; two[l * nnodes + i] = comm rank with local index l on cross index i. */
  int two_level, local_n, nnodes;
  hsr_comm *node_comm, *cross_comm;
  int *two;
};

struct hsr_op_s {
  hsr_op kind;
  hsr_comm *c;
  const void *send;
  void *recv;
  size_t count;
  hsr_dtype dt;
  hsr_redop redop;
  int root;
  uint64_t seq;
  int phase, step, cur;
  /* fin: the transport has finished (progress side, under mu). done: the op
   * has also left its queue and belongs to the caller again; published with
   * release order, so hsr_req_test reads it without the lock. */
  int fin;
  _Atomic int done;
  hsr_op_s *in_next;      /* the context's incoming list */
  int freed_by_transport; /* op is blocking-wrapper owned */
  hsr_status st;
  char err[256];
  _Atomic uint64_t t_start; /* hsr_req_times may read it while the op runs */
  uint64_t t_end, t_progress;
  int wait_peer;      /* comm rank waited for, -1 none */
  double timeout_s;   /* no-progress limit */
  const void *src_in; /* what peers read (user buffer or staged copy) */
  void *tmp;          /* transport scratch */
  int ucx_pending;
  void *chunks; /* ucx.c: per-chunk pipeline state */
  int nchunks, chunks_left;
  size_t chunk_elems;
  hsr_op_s *next;
  void *nccl_event;
  hsr_op_s *child; /* two-level: the stage in flight */
  const int *perm; /* two-level node stage: block (j, i) lives at perm[j * perm_m + i] */
  int perm_m;
  int direct;        /* two-level all-gather: peers read my blocks in place in recv */
  const int *blk_at; /* UCX all-gather: block j lives at blk_at[j] * count */
  hsr_comm_counter child_before;
};

/* ctx.c */
hsr_status hsr_coll_ctx_create(hsr_boot *boot, coll_ctx **out);
void hsr_coll_ctx_release(coll_ctx *x);
hsr_status hsr_coll_ctx_add_comm(coll_ctx *x, hsr_comm *c);
void hsr_coll_ctx_remove_comm(coll_ctx *x, hsr_comm *c);
hsr_status hsr_coll_pool_alloc(coll_ctx *x, size_t bytes, void **ptr);
hsr_status hsr_coll_pool_free(coll_ctx *x, void *ptr);
/* Describes `p` if it lies in one of my segments (whole [p, p+bytes)); 0 if not. */
int hsr_coll_describe(coll_ctx *x, const void *p, size_t bytes, shm_desc *d);
/* Maps a peer's buffer (lazily, cached); NULL with an error set on failure. */
void *hsr_coll_peer_ptr(coll_ctx *x, const shm_desc *d);
int hsr_coll_slot_alloc(coll_ctx *x);
void hsr_coll_slot_free(coll_ctx *x, int slot);
void hsr_coll_ring(coll_ctx *x, int world_rank);
/* Abstract socket address of a rank's wake socket; returns the address length. */
socklen_t hsr_coll_wake_addr(coll_ctx *x, int world_rank, struct sockaddr_un *a);
void hsr_coll_kick(coll_ctx *x);
/* Drives every communicator's queue once; caller holds x->mu. Returns 1 if anything moved. */
int hsr_coll_progress(coll_ctx *x);
/* Moves posted ops into their queues; caller holds x->mu. */
void hsr_coll_take_incoming(coll_ctx *x);
hsr_status hsr_coll_comm_scratch(hsr_comm *c, size_t bytes, void **p);

/* shm.c: one step of an intra-node op; returns 1 if it moved. */
int hsr_coll_shm_advance(hsr_op_s *op);
/* two.c: two-level algorithms over node_comm and cross_comm. */
int hsr_coll_two_advance(hsr_op_s *op);
/* Decides whether `c` runs two-level and builds its internal communicators. */
hsr_status hsr_coll_two_setup(hsr_comm *c);
/* ucx.c */
hsr_status hsr_coll_ucx_init(coll_ctx *x);
void hsr_coll_ucx_fini(coll_ctx *x);
int hsr_coll_ucx_advance(hsr_op_s *op);
void hsr_coll_ucx_cancel(hsr_op_s *op);
/* Blocks up to ms for UCX or a local kick; caller does not hold mu. */
void hsr_coll_ucx_wait(coll_ctx *x, int ms);

/* comm.c */
/* Marks an op finished (its end time is the transport's finish time). */
void hsr_coll_op_done(hsr_op_s *op);
/* Hands a finished op that has left its queue back to its owner. */
void hsr_coll_op_publish(hsr_op_s *op);
void hsr_coll_op_fail(hsr_op_s *op, hsr_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* nccl.c */
hsr_status hsr_coll_nccl_world(hsr_comm *c, hsr_boot *boot);
hsr_status hsr_coll_nccl_split(hsr_comm *parent, hsr_comm *child, int color, int key);
void hsr_coll_nccl_free(hsr_comm *c);
hsr_status hsr_coll_nccl_start(hsr_op_s *op);
hsr_status hsr_coll_nccl_test(hsr_op_s *op, int *done);
hsr_status hsr_coll_nccl_abort(hsr_comm *c);
hsr_status hsr_coll_nccl_set_stream(hsr_comm *c, void *stream);
hsr_status hsr_coll_nccl_mem_alloc(size_t bytes, void **ptr);
hsr_status hsr_coll_nccl_mem_free(void *ptr);

#endif
