/* launch/ private: the boot context (boot.c) and what watch.c adds to it:
 * the launcher's failure events, the failure a rank has found, and the
 * barrier that gives up when told to. */
#ifndef HSR_LAUNCH_BOOT_INT_H
#define HSR_LAUNCH_BOOT_INT_H

#include <pmix.h>
#include <pthread.h>

#include "hsr/boot.h"

typedef struct boot_watch {
  pthread_mutex_t mu; /* the subscriber and the table below (PMIx's thread writes them) */
  int registered;     /* event handlers registered with PMIx */
  size_t refs[2];
  int nrefs;
  hsr_boot_peer_fn fn;
  void *arg;
  char (*gone)[96]; /* per rank: what the launcher said, "" if nothing */
  int failure;      /* hsr_boot_note_failure: 0 none, 1 a peer died, 2 a peer is silent */
  double failure_at;
  void *abandoned; /* a barrier given up on: PMIx may still call back into it */
} boot_watch;

struct hsr_boot {
  int singleton;
  pmix_proc_t me;
  int rank, size;
  int local_rank, local_size; /* after simulated-node split */
  int node, num_nodes, sim_nodes;
  int timeout_s;
  unsigned long seq; /* per-call key suffix for allgather/bcast */
  char launcher[16];
  char hostname[HSR_HOSTNAME_MAX];
  char (*hosts)[HSR_HOSTNAME_MAX]; /* per rank */
  int *node_of;                    /* per rank */
  boot_watch watch;
};

/* watch.c */
void boot_watch_init(hsr_boot *b); /* after the world is known; registers the PMIx handlers */
void boot_watch_fini(hsr_boot *b); /* before PMIx_Finalize */
void boot_watch_free(hsr_boot *b); /* after it */

#endif
