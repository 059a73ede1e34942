/* launch internals: the calls of hsr/boot.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_LAUNCH_BOOT_INTERNAL_H
#define HSR_LAUNCH_BOOT_INTERNAL_H
#include "hsr/boot.h"

#ifdef __cplusplus
extern "C" {
#endif

int boot_local_rank(const hsr_boot *b);
int boot_local_size(const hsr_boot *b);
int boot_node(const hsr_boot *b); /* this rank's node index, 0..num_nodes-1 */
int boot_num_nodes(const hsr_boot *b);
int boot_node_of(const hsr_boot *b, int rank); /* any rank's node index */
int boot_sim_nodes(const hsr_boot *b);         /* HSR_SIM_NODES (1 if unset) */
int boot_is_singleton(const hsr_boot *b);
const char *boot_hostname(const hsr_boot *b);
const char *boot_hostname_of(const hsr_boot *b, int rank);
const char *boot_launcher(const hsr_boot *b); /* "mpirun", "srun", "pmix" or "singleton" */

/* Every rank contributes `bytes` bytes; `recv` receives size*bytes, rank r's
 * blob at offset r*bytes. All ranks must pass the same `bytes`. */
hsr_status boot_allgather(hsr_boot *b, const void *send, size_t bytes, void *recv);

/* `bytes` from `root` to every rank. */
hsr_status boot_bcast(hsr_boot *b, void *buf, size_t bytes, int root);
hsr_status boot_barrier(hsr_boot *b);
/* HSR_FAULT (a test hook) at `phase`, a point of the command's own ("final"). */
void boot_fault_hook(hsr_boot *b, const char *phase);

/* A barrier bounded by timeout_s that also gives up when stop(arg) returns
 * non-zero (polled every 20 ms) and the barrier has still not completed
 * min(2 s, timeout_s) later (a sign of a peer's death can come from a peer
 * that has already passed the barrier): HSR_ERR_TIMEOUT or HSR_ERR_STATE
 * then, and the context makes no more exchanges worth trusting. stop may be
 * NULL. */
hsr_status boot_barrier_until(hsr_boot *b, double timeout_s, int (*stop)(void *arg), void *arg);

/* Ends the whole job with `code` (PMIx_Abort: the launcher kills every rank,
 * a stopped one too), printing `msg` first unless it is NULL (used when one
 * rank found an error that the others cannot see). Singleton: exit(code). */
hsr_status boot_abort(hsr_boot *b, int code, const char *msg);

/* ---- failures ------------------------------------------------------------
 * The launcher's word on dead ranks: PMIx events (PMIX_ERR_PROC_ABORTED,
 * PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_TERM_WO_SYNC, ...; a default
 * handler too). Not every launcher sends them (mpirun 4.1 and srun 22.05 do
 * not for a killed rank), so collectives/ also watches node peers and UCX
 * endpoints itself. fn(arg, rank) runs on PMIx's thread: it may only set
 * flags and wake someone. One subscriber; fn NULL unsubscribes (waiting for a
 * call in progress to return). */
typedef void (*hsr_boot_peer_fn)(void *arg, int rank);
hsr_status boot_watch_peers(hsr_boot *b, hsr_boot_peer_fn fn, void *arg);

/* 1 (and what the launcher said in `why`, if why_n > 0) when the launcher
 * reported `rank` terminated or aborted; 0 otherwise. */
int boot_peer_gone(hsr_boot *b, int rank, char *why, size_t why_n);

/* Whether `rank`'s process still runs, from the launcher's process table
 * read at boot (mpirun's; /proc where there is none): 1 alive, 0 gone, -1
 * unknown (a rank of another host, or no table). Asks no one. */
int boot_rank_alive(hsr_boot *b, int rank);

/* Records that this rank found a peer failure: silent = 0 a peer died (the
 * launcher ends the job), 1 a peer is alive but silent or stopped (it will not
 * end by itself: boot_end_failed_job aborts the job). The first call wins. */
hsr_status boot_note_failure(hsr_boot *b, int silent);

/* 0 when no failure was noted, else 1 + silent. */
int boot_failure(const hsr_boot *b);

/* After a noted silent peer: gives the other ranks `grace_s` from the moment
 * the failure was found to print their own line, then boot_abort(b, code,
 * NULL). Returns HSR_OK at once when no such failure was noted. */
hsr_status boot_end_failed_job(hsr_boot *b, int code, double grace_s);

/* ---- the end of the job -----------------------------------------------------
 * A rank under a launcher ends with its launcher, whatever ends it: from
 * hsr_boot_init to hsr_boot_finalize a thread watches the parent process (a
 * pidfd) and the connection to the PMIx server; when either is gone the rank
 * prints one line and ends itself with SIGTERM (SIGKILL 5 s later if a
 * handler of the program keeps it alive). SIGTERM, SIGINT and SIGHUP, where
 * the program left them at their default action, are caught by the same
 * thread. Either way the subscribers run first, on that thread: fn(arg) may
 * print what this rank knows (a dead peer's verdict, which the launcher's
 * SIGTERM would otherwise cut off) and must return within about 0.3 s; then
 * the rank ends with the signal's default action (exit status 128 + N).
 * Up to 4 subscribers, one per arg; fn NULL unsubscribes arg (waiting for a
 * call in progress). */
typedef void (*hsr_boot_end_fn)(void *arg);
hsr_status boot_on_end(hsr_boot *b, hsr_boot_end_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
