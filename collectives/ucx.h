/* UCX transport (ucx*.c), private: the only header that includes UCP.
 * One UCP worker per world context, addresses exchanged through the PMIx
 * bootstrap, endpoints made on first use; tagged messages. A peer context
 * (ucx_peer.c) has a worker of its own, endpoints from its exchange. */
#ifndef HSR_COLL_UCX_H
#define HSR_COLL_UCX_H

#include <ucp/api/ucp.h>

#include "coll.h"

/* What an endpoint's error callback is told: whose endpoint it is. */
typedef struct ucx_peer {
  coll_ctx *x;
  int wr;
  int failed;      /* the endpoint reported an error: nothing more is sent on it */
  const char *err; /* what it reported (UCX's static text) */
} ucx_peer;

/* The context's UCX state (coll_ctx.net_state). */
struct ucx_ctx {
  ucp_context_h ucp;
  ucp_worker_h worker; /* NULL until made */
  ucp_ep_h *eps;       /* per world rank, made on first use, with peer error handling */
  ucx_peer *peers;     /* per world rank */
  void *addrs;         /* every rank's worker address, addr_max bytes each */
  size_t addr_max;
  char lanes_bad[200]; /* emulated network: why an endpoint was refused ("" while fine) */
  /* fault notices (fault.h): one receive always posted, sends in flight */
  seg_notice notice_in, notice_out;
  void *notice_req;
  int notice_ready, notices_out;
  int notice_posting; /* 1 while the notice receive is being posted; its callback clears it */
  int live; /* op transfers in flight (their requests are ours to free) */
};

/* Every message belongs to a chunk: rings run one independent pipeline per
 * chunk of the blocks (chunk k of step s+1 leaves as soon as chunk k of step
 * s has arrived, while other chunks are still in flight); the other
 * algorithms use chunk 0 only. */
typedef struct ucx_ctx ucx_ctx;
typedef struct ucx_chunk {
  coll_op *op;
  ucx_ctx *u; /* set when a transfer is tracked: a failed op's communicator may be gone before its callback */
  int k, stage, step, posted, pending, finished;
  int failed; /* one of its transfers ended with an error (peer notices and point to point name its member) */
  int posting, ended_inline; /* a transfer is being posted; its callback already ran inside the post */
  void *reqs[2];
} ucx_chunk;

/* A UCX op (coll_op.priv); its transfers in flight are coll_op.inflight. */
typedef struct ucx_op {
  int step;
  int cur; /* barrier: the zero-byte messages' buffer */
  void *tmp;
  ucx_chunk *chunks;
  int nchunks, chunks_left;
  size_t chunk_elems;
} ucx_op;
_Static_assert(sizeof(ucx_op) <= COLL_OP_PRIV, "ucx_op must fit coll_op.priv");

static inline ucx_op *ucx_op_of(coll_op *op) { return (ucx_op *)op->priv; }
static inline ucx_ctx *ucx_ctx_of(coll_ctx *x) { return x->net_state; }

/* Tag stages: comm id (20 bits) | op seq (20) | stage (2) | step (12) | chunk (10).
 * Comm id 0 is never used by an op: tag 1 carries fault notices. */
#define UCX_NOTICE_TAG 1ull
enum { UCX_S_RS = 0, UCX_S_AG = 1, UCX_S_RD = 2, UCX_S_MISC = 3 };
uint64_t ucx_tag(const coll_op *op, int stage, int step, int k);
/* Post one message of chunk ch; 0 if the op failed. */
int ucx_send(ucx_chunk *ch, int peer, const void *buf, size_t bytes, uint64_t tag);
int ucx_recv(ucx_chunk *ch, void *buf, size_t bytes, uint64_t tag);
/* One chunk for the algorithms that are not pipelined; NULL if the op failed. */
ucx_chunk *ucx_one_chunk(coll_op *op);
/* 1 (naming peer) while the op's messages are in flight. */
int ucx_waiting(coll_op *op, int peer);

/* The peer communicators' table (ucx_peer.c runs their ops): the all-reduce only. */
extern const coll_transport ucx_peer_transport;

static inline int ucx_mod(int a, int n) { return ((a % n) + n) % n; }

/* ucx_emul.c: with HSR_EMULATE_NET the context uses TCP on loopback only, so
 * traffic between simulated nodes goes through the shaped interface. */
hsr_status ucx_config_emulated(coll_ctx *x, ucp_config_t *cfg);
/* ucx_ifaces.c: UCX_NET_DEVICES for hsr's context: TCP on loopback for a job
 * on one host, else on the interfaces that route to its other hosts; every
 * non-TCP network device kept; a user's UCX_NET_DEVICES left alone. */
hsr_status ucx_config_ifaces(coll_ctx *x, ucp_config_t *cfg);
/* Logs (HSR_LOG=info) the transports of a new endpoint to world rank wr;
 * on an emulated network, refuses one that does not run on TCP. */
hsr_status ucx_ep_check(coll_ctx *x, int wr, ucp_ep_h ep);

#endif
