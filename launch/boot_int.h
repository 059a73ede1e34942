/* launch/ private: the boot context (boot.c) and what watch.c adds to it:
 * the launcher's failure events, the failure a rank has found, and the
 * barrier that gives up when told to. */
#ifndef HSR_LAUNCH_BOOT_INT_H
#define HSR_LAUNCH_BOOT_INT_H

#include <pmix.h>
#include <stdatomic.h>
#include <pthread.h>

#include "common/fault_hook.h"
#include "hsr/boot.h"
#include "launch/boot_internal.h"

typedef struct boot_watch {
  pthread_mutex_t mu; /* the subscriber and the table below (PMIx's thread writes them) */
  int registered;     /* event handlers registered with PMIx */
  size_t refs[2];
  int nrefs;
  hsr_boot_peer_fn fn;
  void *arg;
  char (*gone)[96]; /* per rank: what the launcher said, "" if nothing */
  int failure;      /* boot_note_failure: 0 none, 1 a peer died, 2 a peer is silent */
  double failure_at;
} boot_watch;

#define LIFE_NSIGS 3
#define LIFE_NSUBS 4
/* lifeline.c: what ends this rank from outside, and who speaks first */
typedef struct boot_life {
  int inited, started;
  pthread_t thread;
  int rfd, wfd; /* the pipe the thread waits on: signals, PMIx's connection loss, stop */
  int pidfd;    /* the parent's, -1 if none */
  int ppid;
  size_t lost_ref;
  int lost_registered;
  int owns_signals, caught[LIFE_NSIGS];
  pthread_mutex_t mu; /* the subscribers */
  hsr_boot_end_fn fn[LIFE_NSUBS];
  void *arg[LIFE_NSUBS];
} boot_life;

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
  boot_life life;
  fault_hook hook; /* HSR_FAULT's boot and final phases */
  _Atomic int named;   /* an error of the bootstrap layer has named a rank that ended */
  _Atomic int booting; /* inside hsr_boot_init's exchange: a rank that ends is a failure */
  int *table_pid;      /* per rank: its pid where on this host, from the process table; 0 unknown */
  _Atomic int table_read; /* boot_table_pids has run */
  int pids_asked;          /* the peers' own pids asked for (no process table) */
  char named_msg[320];    /* the bootstrap's named failure, for the lifeline to say when the launcher ends it */
  /* roll.c */
  unsigned long fence_seq; /* per-fence marker keys */
  int no_proc_table;       /* the launcher does not answer PMIX_QUERY_PROC_TABLE */
  void **roll_left;        /* given-up calls PMIx may still call back into: freed after PMIx_Finalize */
  int nroll_left;
  /* hold.c */
  int hold_wfd; /* the pipe to the child that holds the PMIx connection (srun), -1 if none */
  int hold_pid;
};

/* watch.c */
void boot_watch_init(hsr_boot *b); /* after the world is known; registers the PMIx handlers */
void boot_watch_fini(hsr_boot *b); /* before PMIx_Finalize */
void boot_watch_free(hsr_boot *b); /* after it */

/* roll.c: a fence bounded by HSR_BOOT_TIMEOUT that names a rank that has
 * ended (where the launcher says) at once, and the ranks that did not arrive
 * at the timeout */
hsr_status boot_fence(hsr_boot *b, int collect, const char *what);
void boot_roll_free(hsr_boot *b); /* after PMIx_Finalize */
/* A rank of the job that was killed or crashed (not one that left as it
 * should), from the launcher's process table, asked again for up to wait_s:
 * 1 with msg ("rank 1 (node 0, host vm, pid 42) was killed by a signal
 * before reaching it"); after the bootstrap, where the table does not say
 * (srun has none, mpirun's lags), the one rank of this host whose process
 * is gone ("... was killed or crashed: its process is gone"); 0 when none. */
int boot_killed_rank(hsr_boot *b, char *msg, size_t n, double wait_s);
/* The pids of this host's ranks from the launcher's process table, asked
 * once (mpirun; srun has no table), for boot_gone_rank. */
void boot_table_pids(hsr_boot *b);
/* Without asking anyone (a signal handler's thread, while the launcher
 * ends the job): a rank of this host whose process is gone, from that
 * table; 1 with msg, else 0. */
int boot_gone_rank(hsr_boot *b, char *msg, size_t n);
/* The one bounded PMIx fence (roll.c), under boot_fence and the barrier
 * that gives up (watch.c): a nonblocking fence over every rank (collect:
 * with the data put before; PMIx's own bound pmix_timeout_s), waited in
 * slices of slice_s; after each, give_up(arg) (called unlocked) says
 * whether to stop waiting. *done: it completed, *fst its status; a fence
 * given up on stays with PMIx, kept until PMIx_Finalize. Returns the start's
 * status (PMIX_ERR_NOMEM: no memory). */
pmix_status_t boot_fence_wait(hsr_boot *b, int collect, int pmix_timeout_s, double slice_s,
                              int (*give_up)(void *arg), void *arg, int *done, pmix_status_t *fst);

/* lifeline.c */
void boot_life_start(hsr_boot *b); /* after PMIx_Init (a singleton: only the subscriber table) */
void boot_life_stop(hsr_boot *b);  /* before PMIx_Finalize */

/* hold.c: under srun, a child holds a copy of the PMIx connection so that
 * a rank's death is not a lost connection (Slurm answers one with SIGKILL to
 * the whole step); bounded by HSR_COMM_TIMEOUT, HSR_BOOT_TIMEOUT and a grace. */
#define BOOT_HOLD_COMM "hsr-hold"    /* the child's name (/proc/PID/comm): not a rank */
void boot_hold_start(hsr_boot *b);   /* right after PMIx_Init */
void boot_hold_release(hsr_boot *b); /* after PMIx_Finalize: the child leaves */

#endif
