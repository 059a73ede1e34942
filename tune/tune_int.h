/* tune/'s private pieces: the timeline of one rank's program and its
 * collectives (timeline.c), used by the layout evaluation (eval.c). */
#ifndef HSR_TUNE_INT_H
#define HSR_TUNE_INT_H

#include "runtime/io/trace.h"
#include "tune/tune.h"

/* A lane runs its collectives one after the other, in posting order: a
 * host communicator's queue, or a CUDA stream. */
#define TL_LANES 3

typedef struct tl_op {
  int lane, group, op, nst, cur, started, done;
  tune_stage st[HSR_TUNE_MAX_STAGES];
  double lat_left, bytes_left, post, start, end, stage_start;
} tl_op;

typedef struct tl {
  const tune_net *net;
  double now;
  tl_op *ops;
  int nops, capops;
  int *q[TL_LANES]; /* op ids, in posting order */
  int qhead[TL_LANES], qn[TL_LANES], qcap[TL_LANES];
  ival *comp; /* the program's compute, as wall-clock intervals */
  int ncomp, capcomp;
  ival *stg; /* every finished stage, and its tier */
  int *stg_tier, nstg, capstg, capstgt;
  hsr_status err;
} tl;

void tl_init(tl *t, const tune_net *net);
void tl_free(tl *t);
/* Posts a collective of these stages on a lane now; -1 when it has none. */
int tl_post(tl *t, int lane, int group, int op, const tune_vol *v);
int tl_done(const tl *t, int id);
/* The program blocks until the collective has finished. */
void tl_wait(tl *t, int id);
/* The program computes for `s` seconds of work (slower while host
 * collectives take its cores). */
void tl_compute(tl *t, double s);
/* The program is busy for `s` seconds without computing (engine data work). */
void tl_busy(tl *t, double s);

/* The link a stage runs at and the factor on its time: a two-level
 * operation's cross stage on its own fit (span_link) when there is one,
 * else the tier's link times the span factor. */
const tune_link *tl_stage_link(const tune_net *n, const tune_stage *s, double *factor);

/* Interval arithmetic: merge in place (returns the count), total length,
 * overlap of two merged sets. */

#endif
