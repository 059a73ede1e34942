/* Node-shared memory of one rank (seg.c): the segments peers on the node map,
 * the control segment with one slot per communicator, the doorbell that wakes
 * a rank, and the wake socket that reaches a progress thread asleep in epoll.
 * Segments are memfds: a node peer opens the owner's fd through
 * /proc/<pid>/fd/<fd>, so nothing has a name in /dev/shm and the kernel frees
 * a segment when the last process holding it ends, killed or not.
 * Knows nothing of communicators or operations. */
#ifndef HSR_COLL_SEG_H
#define HSR_COLL_SEG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/common.h"

/* Where a buffer lives, as peers on the node see it. */
typedef struct seg_desc {
  int32_t rank, seg; /* owner world rank, its segment id (-1: none) */
  uint64_t off, seg_bytes;
  int32_t scattered; /* two-level all-gather: blocks sit at their final places */
  int32_t fd;        /* the segment's memfd in the owner */
} seg_desc;

#define SEG_SLOTS 256

/* One slot per communicator in every rank's control segment. The three
 * counters only grow: op s of a communicator waits for base + s. */
typedef struct seg_slot {
  _Atomic uint64_t arrive, mid, done;
  seg_desc in, out;
  char pad[128 - 3 * 8 - 2 * sizeof(seg_desc)];
} seg_slot;

/* A failure as one rank found or learned it (fault.c): node peers read it
 * from the rank's control segment, remote ranks get it as a UCX message. */
typedef struct seg_notice {
  _Atomic uint32_t valid; /* stored last, with release order */
  int32_t culprit, kind, reporter;
  double waited_s;
  char what[128];  /* what happened to the culprit */
  char where[192]; /* the reporter's operation that waited for it */
} seg_notice;

typedef struct seg_ctl {
  _Atomic uint32_t doorbell; /* futex word: bumped by anyone who may unblock this rank */
  /* Set while this rank's progress thread sleeps in epoll (multi-node runs):
   * a futex cannot wake epoll, so ringers then also send to its wake socket. */
  _Atomic uint32_t sleeping;
  /* Threads blocked in FUTEX_WAIT on the doorbell: ringers skip the wake
   * syscall when there are none (most posts find the thread awake). */
  _Atomic uint32_t waiters;
  /* What node peers read to tell a dead, stopped, busy or waiting rank apart
   * (fault.c): set when the rank leaves hsr normally; the progress engine's
   * last pass (CLOCK_MONOTONIC is host-wide); the world rank its longest
   * stalled op waits for (-1: none) and since when. */
  _Atomic uint32_t bye;
  _Atomic uint64_t beat_ns;
  _Atomic int32_t wait_rank;
  _Atomic uint64_t wait_since_ns;
  seg_notice notice;
  _Alignas(128) seg_slot slot[SEG_SLOTS];
} seg_ctl;

typedef struct seg_mine {
  int id, fd;
  void *base;
  size_t bytes;
  int in_use;
} seg_mine;

typedef struct seg_map {
  int rank, seg;
  void *base;
  size_t bytes;
} seg_map;

typedef struct seg_node {
  int rank, size;
  uint64_t job;     /* random id shared by the world: names the wake sockets */
  int32_t *pids;    /* every rank's pid: where its memfds are opened */
  int32_t *ctl_fds; /* every rank's control segment memfd */
  seg_ctl *ctl;     /* mine */
  int ctl_fd;
  seg_ctl **peer_ctl;           /* per world rank, NULL when not on my node */
  uint8_t slot_used[SEG_SLOTS]; /* guarded by the context lock */
  pthread_mutex_t pool_mu;
  seg_mine *segs;
  int nsegs, next_seg;
  seg_map *maps; /* peers' segments I mapped (progress side, context lock) */
  int nmaps, cap_maps;
  int wakefd; /* abstract unix datagram socket node peers ring (multi-node), -1 if none */
} seg_node;

/* Collective over the boot context: the world's job id, every pid, my control
 * segment, and the control segments of my node's peers. */
hsr_status seg_open(seg_node *s, hsr_boot *boot);
/* Tells node peers this rank leaves normally (before its last barrier). */
void seg_bye(seg_node *s);
void seg_close(seg_node *s);

hsr_status seg_pool_alloc(seg_node *s, size_t bytes, void **ptr);
hsr_status seg_pool_free(seg_node *s, void *ptr);
/* Describes `p` if it lies in one of my segments (whole [p, p+bytes)); 0 if not. */
int seg_describe(seg_node *s, const void *p, size_t bytes, seg_desc *d);
/* Maps a peer's buffer (lazily, cached); NULL with an error set on failure. */
void *seg_peer_ptr(seg_node *s, const seg_desc *d);

int seg_slot_alloc(seg_node *s);
void seg_slot_free(seg_node *s, int slot);
/* The highest counter of my slot: a new communicator's ops count from here. */
uint64_t seg_slot_base(seg_node *s, int slot);
/* Slot `slot` in the control segment of `world_rank` (mine or a node peer's). */
static inline seg_slot *seg_slot_of(seg_node *s, int world_rank, int slot) {
  seg_ctl *c = world_rank == s->rank ? s->ctl : s->peer_ctl[world_rank];
  return &c->slot[slot];
}

/* Wakes `world_rank` (me or a node peer): doorbell, futex, wake socket. */
void seg_ring(seg_node *s, int world_rank);
/* Sleeps on my doorbell while it still reads `seen`, up to ns. */
void seg_doorbell_wait(seg_node *s, uint32_t seen, long ns);
/* Binds my wake socket; -1 with errno set when refused. */
int seg_wake_open(seg_node *s);
void seg_wake_drain(seg_node *s);

#endif
