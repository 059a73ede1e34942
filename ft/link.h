/* ft/ internal: rank i of every replica group, linked over UCX (its own UCP
 * context and worker, apart from collectives/: a peer group's death must
 * fail the cross-group operation, never this job's world).
 *
 * Endpoints use peer error handling, so a dead peer's endpoint reports an
 * error; waits block on the worker's event fd, bounded by a deadline; the
 * all-reduce names the peer it could not get a message from. */
#ifndef HSR_FT_LINK_H
#define HSR_FT_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"

#define FT_MAX_REPLICAS 1024
#define FT_MAX_CULPRITS 32 /* groups one failure report names: those that die at once are dropped at once */

typedef struct ft_link ft_link;

/* Why an operation failed: the replicas it could not hear from (or that
 * reported aborting), and a sentence. */
typedef struct ft_result {
  int ok;
  int n, culprit[FT_MAX_CULPRITS];
  char why[320];
  uint64_t bytes_sent, bytes_recv;
  int buf_taken; /* the all-reduce's buffer is still read by a send to a peer that stopped: it belongs to the
                    link now (freed when that send ends; it was allocated with malloc) and the caller takes another.
                    After ft_link_send/recv: a request on the buffers is still pending, so the caller must neither
                    free nor reuse them */
} ft_result;

hsr_status ft_link_open(ft_link **out);
void ft_link_close(ft_link *l);
/* This worker's address (valid until close). */
hsr_status ft_link_address(ft_link *l, const void **addr, size_t *len);
/* An endpoint to replica `peer` (replacing one it had). */
hsr_status ft_link_connect(ft_link *l, int peer, const void *addr, size_t len);
/* Closes the endpoint to a replica that left the quorum (its pending sends end). */
void ft_link_disconnect(ft_link *l, int peer);
int ft_link_connected(const ft_link *l, int peer);

/* Tags: the operation, the quorum's epoch and the step (or a sequence
 * number), and the sender, so that nothing of an abandoned attempt matches
 * a later one. */
enum { FT_TAG_RS = 1, FT_TAG_AG, FT_TAG_ABORT, FT_TAG_HEAL };
uint64_t ft_tag(int kind, int64_t epoch, int64_t step, int src);

/* Averages buf (len floats) over the replicas peers[0..n-1] (sorted; this
 * one is peers[me]): each reduces one n-th in replica order and sends it to
 * all (a direct reduce-scatter + all-gather, so that a timeout names the
 * replica that did not send). On a failure the others hear of it at once
 * (an abort message naming the culprit). res says what happened; the
 * return is HSR_OK unless hsr itself failed (memory). buf must come from
 * malloc (see res->buf_taken). */
hsr_status ft_link_allreduce_avg(ft_link *l, const int *peers, int n, int me, int64_t epoch, int64_t step, float *buf,
                                 size_t len, double timeout_s, ft_result *res);

/* Point to point, for healing: nbuf buffers to / from one replica, tagged
 * with sequence numbers from `seq`. */
hsr_status ft_link_send(ft_link *l, int peer, int src, int64_t epoch, int64_t seq, void *const *bufs,
                        const size_t *bytes, int nbuf, double timeout_s, ft_result *res);
hsr_status ft_link_recv(ft_link *l, int peer, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes,
                        int nbuf, double timeout_s, ft_result *res);

#endif
