/* Core of the collectives module (not installed): the context, the
 * communicator, the operation, and the two tables a transport fills in (one
 * coll_transport per transport, one coll_algo per algorithm). Names no
 * transport library: each transport keeps its own state in its own header
 * (shm.h, ucx.h, two.h, nccl.h) inside the opaque areas below. */
#ifndef HSR_COLL_H
#define HSR_COLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fault.h"
#include "hsr/comm.h"
#include "common/coll_model.h"

_Static_assert((int)COLL_MODEL_AG == (int)HSR_OP_ALLGATHER && (int)COLL_MODEL_RS == (int)HSR_OP_REDUCE_SCATTER &&
                   (int)COLL_MODEL_AR == (int)HSR_OP_ALLREDUCE && (int)COLL_MODEL_BCAST == (int)HSR_OP_BCAST &&
                   (int)COLL_MODEL_BARRIER == (int)HSR_OP_BARRIER,
               "common/coll_model.h numbers the operations as hsr_op");
#include "seg.h"

typedef struct hsr_req coll_op; /* a request is the operation itself */
typedef struct coll_ctx coll_ctx;
typedef struct coll_transport coll_transport;

/* ---- the tables ---------------------------------------------------------- */

/* One algorithm of one collective (UCC's shape). The progress engine calls
 * start once, when the op reaches the head of its communicator's queue, then
 * advance until the op is finished. Both run under the context lock and
 * return 1 if anything moved, 0 while waiting (with op->wait_peer set). */
typedef struct coll_algo {
  const char *name;
  const coll_transport *tp; /* whose per-op state it keeps (cancel, op_fini) */
  int (*start)(coll_op *op);
  int (*advance)(coll_op *op);
  const coll_model_algo *model; /* its bytes per rank (common/coll_model.c), as the tuner reads them */
} coll_algo;

/* A row of a per-collective table: the first row that fits runs the op. */
typedef struct coll_row {
  const coll_algo *algo;
  int (*fits)(const coll_op *op); /* a rule of algo.c; NULL: always */
} coll_row;

#define COLL_ROWS 4
typedef coll_row coll_rows[HSR_OP_COUNT][COLL_ROWS];

/* What a communicator's operations run on (NCCL's struct ncclTransport shape).
 * The public API calls only these; a NULL member is never called. */
struct coll_transport {
  const char *name;
  const coll_rows *rows; /* host transports: the algorithms per collective */
  /* Takes a posted op (argument checks done, counted). Host: onto the
   * incoming list for the progress engine; NCCL: enqueued on the stream. */
  hsr_status (*start)(coll_op *op);
  hsr_status (*test)(coll_op *op, int *done);
  hsr_status (*wait)(coll_op *op, double timeout_s); /* and releases the op */
  void (*cancel)(coll_op *op);                       /* a failed op's transfers in flight (context lock held) */
  void (*op_fini)(coll_op *op);                      /* frees what the op's state points to */
  hsr_status (*mem_alloc)(hsr_comm *c, size_t bytes, void **ptr);
  hsr_status (*mem_free)(hsr_comm *c, void *ptr);
  hsr_status (*set_stream)(hsr_comm *c, hsr_stream *stream);
  hsr_status (*free)(hsr_comm *c);
  /* Context level, for the transport that carries traffic between nodes. */
  hsr_status (*net_init)(coll_ctx *x); /* collective; sets x->net_state and x->net_fd */
  void (*net_fini)(coll_ctx *x);
  int (*net_progress)(coll_ctx *x); /* context lock held: 1 if anything happened */
  int (*net_arm)(coll_ctx *x);      /* context lock held: 1 when events are pending (do not sleep) */
  void (*net_notify)(coll_ctx *x, const seg_notice *n); /* context lock held: a verdict to every other node */
};

/* The host transports (world on one node, flat across nodes) and the
 * two-level composite built on them. */
extern const coll_transport shm_transport, ucx_transport, two_transport;

/* A backend's constructors (select.c): the world, and a split of one of its
 * communicators. */
typedef struct coll_backend {
  hsr_status (*world)(hsr_boot *boot, hsr_backend backend, hsr_comm **out);
  hsr_status (*split)(hsr_comm *parent, int color, int key, hsr_comm **out);
} coll_backend;

/* ---- the context: one per host world ---------------------------------------- */

/* HSR_ALGO_* and HSR_UCX_CHUNK, read by algo.c (COLL_AR_*, COLL_TWO_*: common/coll_model.h). */
typedef struct coll_tuning {
  int allreduce, two_level;
  size_t rd_max_bytes;
  size_t ucx_chunk;    /* bytes per pipelined ring chunk */
  int ucx_peer_errors; /* endpoints with UCP_ERR_HANDLING_MODE_PEER (HSR_UCX_PEER_ERRORS, default on) */
  char emulate[32];    /* HSR_EMULATE_NET (hsr-run --emulate-net): the emulated rate, "" when off */
} coll_tuning;

struct coll_ctx {
  hsr_boot *boot;
  int rank, size, node;
  int refs; /* communicators alive */
  int have_avx2;
  int inline_progress;
  double timeout_s;
  double stop_s; /* HSR_STOP_TIMEOUT */
  coll_tuning tune;
  seg_node seg;     /* node-shared memory, slots, doorbells, wake socket */
  coll_fault fault; /* failure detection and the verdict (fault.c) */

  /* the network transport, when the world spans nodes */
  const coll_transport *net;
  void *net_state;
  int net_fd;     /* its event fd */
  int evfd, epfd; /* kick and sleep (progress.c) */

  pthread_mutex_t mu; /* queues, op state, the network transport */
  pthread_cond_t cv;  /* signalled when an op completes */
  pthread_t thread;
  int thread_started, stop;
  /* Posted ops not yet in their communicator's queue: posting pushes here
   * without the lock (a caller never waits behind a progress pass); the
   * progress pass moves them, in posting order, into the queues. */
  _Atomic(coll_op *) incoming;
  hsr_comm **comms;
  int ncomms, cap_comms;
};

/* ---- the communicator ------------------------------------------------------ */

struct hsr_comm {
  const coll_transport *tp;
  coll_ctx *ctx;       /* host communicators; NULL for NCCL */
  pthread_mutex_t *mu; /* guards the queue and counters (&ctx->mu); NULL: the caller's thread only */
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
  char fail_msg[512];
  coll_op *head, *tail;
  hsr_stream *stream; /* host transports: a sim stream whose order its ops run in (NULL: at once) */
  void *scratch;
  size_t scratch_bytes;
  hsr_comm_counter counters[HSR_OP_COUNT];
  void *tp_state; /* the transport's own (two_comm, nccl_state) */
};

/* ---- the operation ----------------------------------------------------------- */

/* Where an op's blocks live when they are not in rank order (set by the
 * two-level transport for its stages, read by the flat algorithms). */
typedef struct coll_place {
  const int *perm; /* node stage: block (j, i) lives at perm[j * perm_m + i] */
  int perm_m;
  int direct;        /* all-gather: peers read my blocks in place in recv */
  const int *blk_at; /* UCX all-gather: block j lives at blk_at[j] * count */
} coll_place;

#define COLL_OP_PRIV 64
enum { COLL_GATE_NONE = 0, COLL_GATE_CLOSED, COLL_GATE_OPEN, COLL_GATE_CANCELLED };

struct hsr_req {
  hsr_op kind;
  hsr_comm *c;
  const void *send;
  void *recv;
  size_t count;
  hsr_dtype dt;
  hsr_redop redop;
  int root;
  coll_place place;
  const coll_transport *tp; /* runs it: the comm's, then its algorithm's */
  const coll_algo *algo;    /* NULL until the progress engine starts it */
  uint64_t seq;
  int phase; /* the algorithm's position */
  /* fin: the transport has finished (progress side, under mu). done: the op
   * has also left its queue and belongs to the caller again; published with
   * release order, so req_test reads it without the lock. */
  int fin;
  _Atomic int done;
  coll_op *in_next; /* the context's incoming list */
  coll_op *next;    /* the communicator's queue */
  int inflight;     /* transfers still pointing at the op (context lock) */
  int orphaned;     /* the caller let go first: the last transfer frees it */
  int detached;     /* a stage whose parent was freed while it was queued: released when it leaves the queue */
  hsr_status st;
  char err[512];
  _Atomic uint64_t t_start; /* req_times may read it while the op runs */
  uint64_t t_end, t_progress;
  int wait_peer;        /* comm rank waited for, -1 none */
  double timeout_s;     /* no-progress limit */
  uint64_t grace_ns;    /* timed out on a remote peer: its node's notice may come until then */
  const char *xfer_err; /* a transfer failed (static text), acted on by fault.c */
  /* An op of a communicator bound to a sim stream waits at its gate until
   * the stream reaches it (COLL_GATE_*); the stream's task holds a second
   * reference until it has seen the op finish. */
  _Atomic int gate;
  _Atomic int refs;
  char gate_why[256];
  _Alignas(16) unsigned char priv[COLL_OP_PRIV]; /* the algorithm's state (shm_op, ucx_op, two_op, nccl_op) */
};

/* ---- op.c: an operation's life -------------------------------------------------- */
coll_op *coll_op_new(hsr_comm *c, hsr_op kind);
/* Posting: lock-free push onto the context's incoming list. */
void coll_op_post(coll_op *op);
/* Context lock held: posted ops into their queues, in posting order, each
 * given its communicator's next seq. */
void coll_take_incoming(coll_ctx *x);
/* Context lock held: straight into its communicator's queue (two-level stages). */
void coll_op_enqueue(coll_op *op);
/* Context lock held: the finished head leaves its queue. */
coll_op *coll_op_dequeue(hsr_comm *c);
/* Nothing to move: finished and handed back at once, never queued. */
void coll_op_skip(coll_op *op);
/* The transport has finished (its end time is now). */
void coll_op_finish(coll_op *op);
void coll_op_fail(coll_op *op, hsr_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Hands a finished op that has left its queue back to its owner. */
void coll_op_publish(coll_op *op);
hsr_status coll_op_result(const coll_op *op);
/* Counts the call and its full buffer (hsr_comm_counter.bytes_full). */
void coll_op_count_call(coll_op *op);
/* Bytes this rank sent and received for the op, on its communicator's
 * counter: to and from members on this rank's node (never fabric bytes). */
void coll_op_count(coll_op *op, uint64_t sent, uint64_t recv);
/* Bytes sent to comm rank `to` and received from comm rank `from` (-1: none):
 * fabric bytes too when that member is on another node. */
void coll_op_count_peer(coll_op *op, int to, uint64_t sent, int from, uint64_t recv);
/* A stage's counter delta, added to its parent op (two-level). */
void coll_op_count_add(coll_op *op, const hsr_comm_counter *delta);
/* 1 when comm rank j of c lives on another node than this rank. */
int coll_remote(const hsr_comm *c, int j);
/* The caller lets go of a finished op (a failed one may still have transfers). */
void coll_op_release(coll_op *op);
void coll_op_release_locked(coll_op *op);
/* A transfer ended (context lock held): frees an orphaned op once none is left. */
void coll_op_reap(coll_op *op);
void coll_op_destroy(coll_op *op);

/* ---- ctx.c: the context -------------------------------------------------------- */
/* net: the transport between nodes (NULL: the world is on one node). */
hsr_status coll_ctx_create(hsr_boot *boot, const coll_transport *net, coll_ctx **out);
void coll_ctx_release(coll_ctx *x);
hsr_status coll_ctx_add_comm(coll_ctx *x, hsr_comm *c);
void coll_ctx_remove_comm(coll_ctx *x, hsr_comm *c);

/* ---- progress.c: the progress engine ---------------------------------------------- */
/* Drives every communicator's queue once; caller holds x->mu. 1 if anything moved. */
int coll_progress(coll_ctx *x);
hsr_status coll_progress_start(coll_ctx *x); /* the thread, unless HSR_PROGRESS=inline */
void coll_progress_stop(coll_ctx *x);
/* Counts the call and hands the op to its transport (trivial: finished at
 * once); req == NULL: waits for it. Every op of every communicator, the
 * public API's and the module's own (a split's join exchange), goes here. */
hsr_status coll_op_issue(coll_op *op, int trivial, hsr_req **req);
/* The host transports' start, test and wait. */
hsr_status coll_host_start(coll_op *op);
hsr_status coll_host_test(coll_op *op, int *done);
hsr_status coll_host_wait(coll_op *op, double timeout_s);

/* ---- wake.c: waking the progress ---------------------------------------------------- */
/* Wakes whatever drives this context's progress. */
void coll_kick(coll_ctx *x);
/* Kick and sleep fds of a context with a network transport (and the wake socket). */
hsr_status coll_events_open(coll_ctx *x);
void coll_events_close(coll_ctx *x);

/* ---- group.c: communicator objects; host communicators --------------------------- */
hsr_status coll_comm_alloc(int size, hsr_comm **out);
void coll_comm_dealloc(hsr_comm *c);
/* Every world rank, in order, named "world". */
hsr_status coll_comm_alloc_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out);
/* Host communicators without a transport yet (the caller gives them one):
 * the world on a new context (net: its transport between nodes), and a
 * split (members ordered by (key, parent rank); *out NULL for color < 0). */
hsr_status coll_group_world(hsr_boot *boot, hsr_backend backend, const coll_transport *net, hsr_comm **out);
hsr_status coll_group_split(hsr_comm *parent, int color, int key, hsr_comm **out);
/* HSR_ERR_STATE while the communicator has outstanding requests. */
hsr_status coll_host_idle(hsr_comm *c);
hsr_status coll_host_free(hsr_comm *c);
void coll_host_destroy(hsr_comm *c); /* after coll_host_idle */
hsr_status coll_host_mem_alloc(hsr_comm *c, size_t bytes, void **ptr);
hsr_status coll_host_mem_free(hsr_comm *c, void *ptr);
hsr_status coll_host_set_stream(hsr_comm *c, hsr_stream *stream);
/* The communicator's scratch (a registered segment), at least `bytes`. */
hsr_status coll_scratch(hsr_comm *c, size_t bytes, void **p);
void coll_scratch_free(hsr_comm *c);

/* ---- algo.c: the knobs and an op's algorithm ------------------------------------------ */
hsr_status coll_tuning_env(coll_tuning *t);
/* The op's algorithm: the first fitting row of its transport's table. */
const coll_algo *coll_select(const coll_op *op);
int coll_rule_rd(const coll_op *op); /* UCX all-reduce: recursive doubling */

/* ---- select.c: the choices above the transports ----------------------------------------- */
/* A backend's constructors (host: the world and splits, each given its
 * transport: shared memory, UCX or two-level); NULL: unknown backend. */
const coll_backend *coll_backend_of(hsr_backend backend);

/* nccl.c (stubs without NCCL) */
hsr_status nccl_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out);
hsr_status nccl_split(hsr_comm *parent, int color, int key, hsr_comm **out);

#endif
