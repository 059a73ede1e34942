/* ft/ internal: the context and what its files share.
 *
 *   ft.c     the context: create, join (register, the quorum's formation or
 *            admission), finish; the group's internal messages (rank 0 to
 *            its ranks, with heartbeats while it waits on the coordinator)
 *   lead.c   rank 0's side of the coordinator: records, the vote, the
 *            decision, the quorum, the lease's keep-alive thread
 *   step.c   the engine's outer reduction (pack, the cross-group
 *            all-reduce, the group's outcome, the decision), step begin/end
 *   heal.c   the state transfer between groups and the state hash
 *   quorum.c the quorum's pure rules; etcd.c the coordinator's client
 * The data plane between groups is a peer context of collectives/
 * (collectives/peer_internal.h): ft has no transport of its own. */
#ifndef HSR_FT_FT_INT_H
#define HSR_FT_FT_INT_H

#include <pthread.h>

#include "etcd.h"
#include "hsr/comm.h"
#include "common/fault_hook.h"
#include "hsr/ft.h"
#include "collectives/peer_internal.h"
#include "quorum.h"

#define FT_PREFIX "/hsr/ft/"
_Static_assert(FT_MAX_REPLICAS <= PEER_MAX && FT_MAX_CULPRITS == PEER_MAX_CULPRITS,
               "a replica id is a peer id; a vote names what the data plane names");
typedef peer_result ft_result; /* what a cross-group operation did: ok, or the groups it names */

/* seconds: a dead leader's records go after this (renewed every second); past 256 groups N/256 times as long,
 * at most 4 times, and past 512 groups at least N/1024 minutes (lead.c, lease_ttl) */
#define FT_LEASE_TTL 5
#define FT_COMMIT_SEQ (1 << 19) /* the commit exchange's tag: the step's, offset from the gradient's */
#define FT_DEV_SEQ (1 << 18)    /* the device communicator's unique id, and naming after its failure */

/* One rank's outcome of a step's cross-group part, gathered by rank 0. */
typedef struct ft_outcome {
  int32_t ok, healed, n, culprit[FT_MAX_CULPRITS];
  char why[320];
} ft_outcome;

/* A member record as the leader last read it (m/IIII: what the start and
 * the decisions compare; the identity's flags and the UCX addresses are in
 * x/IIII, written with it, read only by those who need them). */
typedef struct ft_rec {
  int present, join;
  int64_t rev; /* the revision of the put that wrote it: a new process has a new one */
  char host[64];
  int pid;
  int64_t start;
  char start_hash[24];
  char *js;     /* the record's JSON (the identity check compares it) */
  char *addrs;  /* JSON array of base64 UCX addresses, one per rank (NULL: not read) */
  int64_t arev; /* the record's revision whose addresses these are */
} ft_rec;

/* The votes of one step as its decider has read them: each read takes only
 * those written since the last, so a decider that wakes on every vote reads
 * each once (allocated when a group first decides). */
typedef struct ft_vbuf {
  int64_t step, epoch, rev; /* the votes of (step, epoch) as of revision rev */
  unsigned char has[FT_MAX_REPLICAS];
  ft_vote v[FT_MAX_REPLICAS];
} ft_vbuf;

struct hsr_ft {
  hsr_ft_config c;
  char *coord, *identity;
  char token[1024];
  hsr_boot *boot;
  int rank, S;
  hsr_comm *grp;
  int own_grp;
  hsr_rt *rt;
  uint64_t layout_hash;         /* the engine's flat layout, in the record (hsr bench ft: a stand-in) */
  double T;                     /* cross-group and coordinator bound */
  double beat;                  /* rank 0's heartbeat to its ranks while it waits */
  double slice;                 /* the start's (ft_grp_wait's slice until admitted; 0: the beat) */
  peer_ctx *peers;              /* rank i of every group (NULL in hsr bench ft's simulated groups: no data plane) */
  void *paddr[FT_MAX_REPLICAS]; /* peers' addresses for this rank's index (the exchange's `get`) */
  size_t plen[FT_MAX_REPLICAS];
  void *myaddr; /* this rank's (the exchange's `put`), into the group's record */
  size_t mylen;
  hsr_comm *view; /* the participants of view_epoch, over `peers` (rebuilt when the quorum changes) */
  int64_t view_epoch;
  int view_parts[FT_MAX_REPLICAS], view_n;

  ft_quorum q; /* what the next (or current) step runs on */
  int parts[FT_MAX_REPLICAS], nparts, me;

  /* rank 0 */
  ft_etcd *e, *ka;
  int64_t lease, my_rev;
  pthread_t ka_thread;
  int ka_on;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ka_stop, lease_lost;
  int64_t ka_base;                      /* the store's revision at the leader's last read (mu) */
  int ka_read;                          /* in a quorum: the keep-alive thread reads new records' keys (mu) */
  int ka_new[FT_MAX_SEEN], ka_nnew;     /* records written since ka_base, as the keep-alive thread last read (-1:
                                       some record; mu) */
  int64_t ka_count;                     /* the records at ka_base (mu) */
  int ka_other[FT_MAX_SEEN], ka_nother; /* records outside the quorum at ka_base, and their revisions (mu) */
  int64_t ka_other_rev[FT_MAX_SEEN];
  char *my_addrs; /* JSON array of this group's addresses */
  ft_rec rec[FT_MAX_REPLICAS];
  int64_t m_rev, m_count;            /* the records as read at m_rev: etcd's count of them (0: never read) */
  int64_t part_rev[FT_MAX_REPLICAS]; /* each participant's record when the epoch began */
  int seen[FT_MAX_SEEN], nseen;      /* joiners waiting, seen in the last read */
  int64_t qmod;                      /* the quorum key's mod revision as last read */
  int qpresent;                      /* a quorum key exists */
  ft_quorum qkey;                    /* and what it says */
  int voted, vote_written;           /* this step's vote was tried; it is in the store */
  int deciding;                      /* this group decides the step: it reads the votes and writes r/ */
  int64_t xchg_done;                 /* the last step it committed through the commit exchange */
  int64_t rk_rev;                    /* the step's decision was absent at this revision (0: not read) */
  int64_t qw_rev;                    /* the start: the quorum key was as held at this revision (0: not read) */
  ft_vbuf *vb;                       /* the votes it read (NULL until it first decides) */
  uint64_t *fin;                     /* the end: [id] 0 not reported, 1 its hash equal, 2 not; [FT_MAX_REPLICAS +
                                        id] its hash; read up to fin_rev */
  int64_t fin_rev;
  int doubt;                         /* this step's commit exchange did not complete: a member may have committed */
  int read_stale;                    /* steps committed by the exchange since the last read (seen joiners are old) */
  double coord_fail_since;           /* when the coordinator's calls began to fail (0: they do not) */
  double t_voted, t_begin;           /* when it was; when a wait began */
  double t_reg;                      /* when the registration began */
  int start_tries;                   /* the start's coordinator errors (spreads the retries) */
  int wrote_done, finishing, said_waiting;

  /* the step */
  float *stage;
  size_t stage_cap;
  int dev_reduce;       /* HSR_FT_DEVICE_REDUCE=nccl: on a CUDA device the average stays in device memory */
  peer_dev *dview;      /* its communicator, for dview_epoch */
  int64_t dview_epoch;
  float *dstage;        /* the device staging buffer */
  size_t dstage_cap;
  hsr_ft_step last;
  int step_ran; /* the outer reduction ran since step_begin */
  int heal_failed;
  int heal_culprit;
  char heal_why[320];
  int64_t hash_step;
  uint64_t hash;
  hsr_ckpt_state *healed_prog;
  int aborts_in_row;
  fault_hook hook; /* HSR_FAULT's ft_allreduce, ft_vote and ft_heal */
  /* the commit exchange among the leaders (NULL: peer_allreduce on the view; hsr bench ft models it) */
  hsr_status (*commit_xchg)(hsr_ft *ft, int64_t step, float *x, int n, ft_result *r); /* x: MAX over the leaders */
  void *xchg_ctx;
};

/* ---- ft.c: the group's messages ---- */
hsr_status ft_grp_bcast(hsr_ft *ft, void *buf, size_t n);
hsr_status ft_grp_allgather(hsr_ft *ft, const void *send, size_t n, void *recv);
/* Rank 0 runs fn in slices (fn returns with *final = 0 at `until`), telling
 * its ranks in between that it is still at it; then every rank gets fn's
 * status (and message) and *blob (malloc'd, NUL-terminated; rank 0's). */
typedef hsr_status (*ft_lead_fn)(hsr_ft *ft, void *arg, double until, int *final, char **blob);
hsr_status ft_grp_wait(hsr_ft *ft, ft_lead_fn fn, void *arg, char **blob);
/* The quorum and peer addresses of a blob: installed on this rank
 * (endpoints connected to new participants, closed to those that left). */
hsr_status ft_install(hsr_ft *ft, const char *blob);

/* ---- lead.c ---- */
hsr_status ft_lead_open(hsr_ft *ft);
void ft_lead_close(hsr_ft *ft);
/* Registers the group; *hash: the state hash at `done` (the start's check). */
hsr_status ft_lead_register(hsr_ft *ft, int64_t done, uint64_t hash, double until, int *final);
/* Waits (a slice) for the quorum to form or admit this group. */
hsr_status ft_lead_wait_quorum(hsr_ft *ft, void *arg, double until, int *final, char **blob);
/* The step's vote and decision; arg: the group's ft_outcome. */
hsr_status ft_lead_vote(hsr_ft *ft, void *arg, double until, int *final, char **blob);
/* Whether this group may commit the step through the exchange alone: its
 * lease not found expired, and no record written since the last read that is
 * not a participant's (a joiner waiting: the vote admits it). */
int ft_lead_fast_ok(hsr_ft *ft);
hsr_status ft_lead_finish(hsr_ft *ft, void *arg, double until, int *final, char **blob);
/* The blob for the current quorum: {"q":..., "addrs":{id:[...]}, ...extra}. */
hsr_status ft_lead_blob(hsr_ft *ft, const ft_quorum *q, const char *extra_json, char **blob);

/* The participants' communicator for the current quorum (made when the epoch
 * or the participants changed since the last). */
hsr_status ft_view(hsr_ft *ft);

/* ---- heal.c ---- */
hsr_status ft_heal_send(hsr_ft *ft, int joiner, int64_t done, hsr_ft_heal *out);
hsr_status ft_heal_recv(hsr_ft *ft, int64_t done, hsr_ft_heal *out);

/* ---- step.c ---- */
hsr_status ft_outer(hsr_rt *rt, void *ctx, int *commit);
/* The step's decision after the cross-group all-reduce: every rank's
 * outcome gathered; when the group's is ok, its leader's commit bit reduced
 * over the participants' leaders (the commit exchange): every bit set, the
 * step commits with no coordinator request; otherwise rank 0's vote in the
 * coordinator. The decision installed; fills L (the data plane's part of
 * ft_outer stays there; hsr bench ft calls this with a modelled outcome and a
 * modelled exchange). */
hsr_status ft_decide(hsr_ft *ft, const ft_outcome *mine, hsr_ft_step *L);

#endif
