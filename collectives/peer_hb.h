/* Heartbeats between peer contexts (ucx_peer_hb.c), private to
 * collectives/. A peer context's main worker is progressed only by the
 * thread that runs its operations, so it cannot prove its process alive
 * while that thread computes. The responder is a UCX context, worker and
 * thread of its own that answers every ping at once: a member that answers
 * none is stopped (SIGSTOP, a host that hangs), not slow, and an operation
 * waiting for it names it without waiting for its whole bound. A member
 * that answers but sends nothing is waited for to the bound, as before. */
#ifndef HSR_COLLECTIVES_PEER_HB_H
#define HSR_COLLECTIVES_PEER_HB_H

#include <stddef.h>

#include "hsr/common.h"

/* Active-message ids: a ping goes to a responder's worker (header: the
 * sender's id; data: the sender's main worker address), the pong to the
 * sender's main worker (header: the responder's id). */
#define PEER_HB_PING 11
#define PEER_HB_PONG 12

typedef struct peer_hb peer_hb;

/* The responder for member `id`: its worker and thread, answering pings. */
hsr_status peer_hb_open(int id, peer_hb **out);
/* Its worker's address (valid until peer_hb_close). */
const void *peer_hb_address(const peer_hb *h, size_t *len);
/* Stops the thread (bounded: it sleeps on an event fd), closes every
 * endpoint, the worker and the context. */
void peer_hb_close(peer_hb *h);

#endif
