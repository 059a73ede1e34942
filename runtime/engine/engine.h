/* runtime/engine, private to this folder: the engine's types and the
 * functions its files share. The engine is one executor of the schedule's
 * interpreter (runtime/sched/schedule.h, sched_run): it decides
 * nothing, and keeps no buffer or queue of its own.
 *
 *   engine.c    the lifecycle calls, the executor table, gathers, reshard,
 *               release, views
 *   setup.c     creation, groups, registration, commit, init/read-back, getters
 *   pool.c      the buffer pool (the executor's get/put)
 *   identity.c  the (config, layout) hash and its cross-rank comparison
 *   grad.c      the reduction queue's stages: stage 1 in the shard group,
 *               stage 2 in the replicate group, accumulation; grad_read
 *   optim.c     the optimizer step (norm, AdamW, re-gather) and zero_grad
 *   state.c     the checkpoint room's interface (state.h)
 *
 * Every rank issues the same collectives on each communicator in the same
 * order: every decision comes from the schedule and depends on program order
 * only. The one timing-dependent step, moving a finished reduce-scatter on
 * to its replicate all-reduce, is done strictly in FIFO order (by the
 * interpreter), so replicate all-reduces are issued in the same order too. */
#ifndef HSR_RUNTIME_ENGINE_H
#define HSR_RUNTIME_ENGINE_H

#include "common/fault_hook.h"
#include "device_path.h"
#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "internal.h"
#include "runtime/sched/schedule.h"

typedef struct rt_unit {
  char name[HSR_RT_NAME_MAX];
  int is_root;
  size_t L, Ls;       /* elements: padded length, shard length */
  int in_fwd, in_bwd; /* view windows */
  int in_rc, rc_done; /* inside its recompute; recomputed in this backward window */
  uint64_t gt0;       /* the gather in flight (its handle is the schedule's): posted at */
  int64_t gstep;      /* by the step that issued it (the step-end prefetch serves the next) */
} rt_unit;

/* A pool block. */
typedef struct rt_block {
  void *ptr;
  size_t bytes;
  rt_mem_cat cat;
  int in_use, shared;
} rt_block;

/* The optimizer's progress through one step: its clip factor and the open
 * span of optimizer work that a posted gather interrupts. */
typedef struct rt_opt_run {
  double norm, coef;
  uint64_t t0, now;
  int open, dropped;        /* dropped: the outer reduction (cfg.outer) voted the step down */
  _Atomic uint64_t *dev_t0; /* the device clock at the optimizer's start (NULL: none) */
} rt_opt_run;

/* Where commit stands: registration open, committed, or a commit that
 * failed part-way (the engine is then unusable: commit_msg says why). */
typedef enum rt_commit { RT_OPEN = 0, RT_COMMITTED, RT_BROKEN } rt_commit;

struct hsr_rt {
  hsr_rt_config cfg;
  hsr_boot *boot;
  hsr_comm *world, *shard_c, *rep_c, *part_c;
  int own_world;
  hsr_cluster *own_cluster;
  hsr_mesh *mesh;
  hsr_device *dev;
  rt_dev *dv; /* device path: streams and ordering (all NULL / no-ops on host) */
  int S, R, K, srank, rrank, prank;
  rt_sharding sh; /* what the strategy shards */
  int outer;          /* outer shard optim (hybrid) */
  int master_shared;  /* the master is a gather's input (sharded f32, no outer shard): registered memory */
  int poison;
  double timeout;
  fault_hook hook; /* HSR_FAULT at the optimizer step (a test hook) */
  size_t pes, res;
  rt_layout *layout;
  rt_commit commit;
  char commit_msg[512];
  sched_ctx *sched;           /* the decisions, the buffers and the reduction queue (from commit on) */
  const sched_exec *exec; /* this engine as the schedule's executor (host or device) */
  rt_opt_run *opt;            /* inside hsr_rt_step: the optimizer's span */
  rt_unit *units;
  int nunits;
  int *uparam, *ubeg; /* layout params grouped by unit: uparam[ubeg[u] .. ubeg[u+1]) */
  rt_block *blocks;
  int nblocks, capblocks;
  int64_t step;
  int loaded;     /* a checkpoint load installed state (rt_state_fresh) */
  int torn;       /* a load in place failed part-way: only another load may use the state */
  int grad_ready; /* the accumulators hold the step's synchronized, averaged gradient (rt_grad_read) */
  int recomputes; /* hsr_rt_recompute_begin calls since the last step */
  hsr_comm_counter base[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  rt_stats stats;
  rt_obs *obs;        /* ledgers, trace, timing (observe.c) */
  struct rt_off *off; /* offload optim: the host optimizer (offload.c); NULL without */
  void *ckpt;         /* the checkpoint room's object (state.h: rt_state_attach) */
  void (*ckpt_fini)(void *ckpt);
};

/* Streams of the device path: compute, all-gather, reduce (NULL on host). */
#define CS(rt) rt_dev_cs((rt)->dv)
#define GS(rt) rt_dev_gs((rt)->dv)
#define RS(rt) rt_dev_rs((rt)->dv)

/* One call, its time charged to a bucket of the engine timing (post: the
 * collective library's own non-blocking calls; data: the runtime's copies,
 * casts, zeroing and accumulation), the rest stays bookkeeping. */
#define RT_TIMED(rt, kind, call)                         \
  do {                                                   \
    uint64_t t_ = hsr_clock_ns();                        \
    hsr_status s_ = (call);                              \
    rt_obs_time((rt)->obs, (kind), hsr_clock_ns() - t_); \
    HSR_CHECK(s_);                                       \
  } while (0)

/* A unit's buffer of kind b (the schedule holds them; NULL: none now). */
static inline void *rt_buf(const hsr_rt *rt, int unit, sched_buf b) { return sched_buf_of(rt->sched, unit, b); }
static inline float *rt_f32(const hsr_rt *rt, int unit, sched_buf b) { return rt_buf(rt, unit, b); }
/* The unit's full parameters: gathered (sharded strategies) or persistent. */
static inline void *rt_full(const hsr_rt *rt, int unit) { return sched_full_of(rt->sched, unit); }

/* Intersection of [off, off+n) with this rank's slice of the unit. */
static inline int rt_local_range(const hsr_rt *rt, const rt_unit *u, size_t off, size_t n, size_t *a, size_t *b) {
  size_t lo = (size_t)rt->srank * u->Ls, hi = lo + u->Ls;
  *a = off > lo ? off : lo;
  *b = off + n < hi ? off + n : hi;
  return *b > *a;
}

/* The rank's piece of the unit, what its master, m, v and the optimizer's
 * gradient cover: its shard, or (outer shard optim) the 1/R of the shard at
 * its replicate index. Lo elements from element rt_piece_lo. */
static inline size_t rt_piece_len(const hsr_rt *rt, int unit) { return sched_piece_len(rt->sched, unit); }
static inline size_t rt_piece_lo(const hsr_rt *rt, int unit) {
  size_t lo = (size_t)rt->srank * rt->units[unit].Ls;
  return sched_outer(rt->sched) ? lo + (size_t)rt->rrank * rt_piece_len(rt, unit) : lo;
}
static inline int rt_piece_range(const hsr_rt *rt, int unit, size_t off, size_t n, size_t *a, size_t *b) {
  size_t lo = rt_piece_lo(rt, unit), hi = lo + rt_piece_len(rt, unit);
  *a = off > lo ? off : lo;
  *b = off + n < hi ? off + n : hi;
  return *b > *a;
}
/* The f32 master of the rank's piece: its own buffer, or (outer shard optim
 * with f32 parameters) that piece of the parameter shard. */
static inline float *rt_master(const hsr_rt *rt, int unit) {
  if (sched_holds(rt->sched, HSR_SCHED_BUF_MASTER)) return rt_f32(rt, unit, HSR_SCHED_BUF_MASTER);
  return rt_f32(rt, unit, HSR_SCHED_BUF_PARAM) + (size_t)rt->rrank * rt_piece_len(rt, unit);
}

/* The engine's state is usable: committed (NULL rt, an uncommitted or a
 * broken engine: an error naming `what`). */
hsr_status rt_need_committed(const hsr_rt *rt, const char *what);
/* The state is not torn by a failed load in place (rt->torn). */
hsr_status rt_need_whole(const hsr_rt *rt, const char *what);

/* ---- pool.c: the executor's get/put ---- */
hsr_status rt_pool_get(void *ctx, int unit, const sched_bufop *b, void **p);
void rt_pool_put(void *ctx, int unit, const sched_bufop *b, void *p);
/* Zero on the compute stream: every buffer zeroed here is next touched by
 * compute (or by a stream that joins compute before it reads). */
hsr_status rt_zero(hsr_rt *rt, void *p, size_t bytes);
/* A buffer back to its allocator at once, not to the pool (one-off staging
 * that steady state never needs again); the device drained first. */
hsr_status rt_mem_drop(hsr_rt *rt, void *ptr);
/* Teardown: every block back to its allocator. */
void rt_mem_release_all(hsr_rt *rt);

/* ---- setup.c ---- */
/* The whole unit (L x 4, a staging buffer the caller returns) from every
 * rank's f32 piece: over the replicate group first (outer shard optim),
 * then the shard group, on stream s. Blocking. */
hsr_status rt_gather_pieces(hsr_rt *rt, int ui, const float *piece, hsr_stream *s, float **full);

/* ---- identity.c ---- */
uint64_t rt_id_config(const hsr_rt *rt);
uint64_t rt_id_layout(const hsr_rt *rt); /* config + layout */
/* Every rank contributes its hash; a mismatch names the ranks that differ from rank 0. */
hsr_status rt_id_compare(hsr_rt *rt, uint64_t mine, const char *what);

/* ---- engine.c ---- */
/* This engine as an executor: on host, or on the device (where the streams
 * order the reduction stages). */
const sched_exec *rt_exec_of(int gpu);
/* Runs a lifecycle call's actions through the interpreter with this engine. */
hsr_status rt_run(hsr_rt *rt, const sched_action *acts, int n);
/* Waits for a request and reports the transport's own start/end when known. */
hsr_status rt_wait_req(hsr_rt *rt, hsr_req *r, uint64_t issued, uint64_t *t0, uint64_t *t1);
/* A collective's span on the device clock (NULL / nothing without one):
 * begin before posting it on the lane's stream (1 gather, 2 reduce), end after. */
_Atomic uint64_t *rt_dev_span_begin(hsr_rt *rt, int lane);
void rt_dev_span_end(hsr_rt *rt, int64_t step, rt_event_kind kind, int unit, int group, size_t bytes,
                     _Atomic uint64_t *a, int lane);
hsr_status rt_check_unit(hsr_rt *rt, int ui, const char *what);
hsr_status rt_find_param(hsr_rt *rt, const char *name, rt_param_info *p);

/* ---- the executor's callbacks (sched_exec): engine.c ---- */
hsr_status rt_x_gather(void *ctx, const sched_action *a, void **h);
hsr_status rt_x_gather_wait(void *ctx, const sched_action *a, void *h);
hsr_status rt_x_reshard(void *ctx, const sched_action *a);
hsr_status rt_x_release(void *ctx, const sched_action *a);
hsr_status rt_x_grad_buf(void *ctx, const sched_action *a);
/* setup.c */
hsr_status rt_x_setup(void *ctx, const sched_action *a);
/* grad.c */
hsr_status rt_x_stage_cast(void *ctx, sched_red *r, void *grad);
hsr_status rt_x_stage1(void *ctx, sched_red *r);
hsr_status rt_x_stage1_done(void *ctx, sched_red *r);
hsr_status rt_x_stage2(void *ctx, sched_red *r);
hsr_status rt_x_deferred_ar(void *ctx, sched_red *r);
hsr_status rt_x_test(void *ctx, sched_red *r, int *done);
hsr_status rt_x_wait(void *ctx, sched_red *r);
hsr_status rt_x_accumulate(void *ctx, sched_red *r, void *stage);
/* optim.c */
hsr_status rt_x_norm(void *ctx, const sched_action *a);
hsr_status rt_x_optim(void *ctx, const sched_action *a);
hsr_status rt_x_regather(void *ctx, const sched_action *a, void **h);
hsr_status rt_x_regather_wait(void *ctx, const sched_action *a, void *h);
hsr_status rt_x_grad_zero(void *ctx, const sched_action *a);

/* ---- offload.c: offload optim (rt->off; every call a no-op without) ---- */
hsr_status rt_off_open(hsr_rt *rt); /* commit, after the schedule */
void rt_off_close(hsr_rt *rt);
hsr_device *rt_off_host(hsr_rt *rt); /* the host device whose CPU twins the host optimizer runs */
/* RETIRE: the reduced piece copied down on the reduce stream. */
hsr_status rt_off_down(hsr_rt *rt, sched_red *r);
/* What was copied down for the unit (-1: every unit), added to its
 * accumulator after a bounded wait for the copy. */
hsr_status rt_off_settle(hsr_rt *rt, int unit);
hsr_status rt_off_zero(hsr_rt *rt, int unit);
/* rs_only's deferred replicate stage: the accumulator (every micro-batch's
 * slice added) cast on the host into GRAD_DOWN and copied up into r->slice
 * on the reduce stream. */
hsr_status rt_off_deferred(hsr_rt *rt, sched_red *r);
/* AdamW on the host (hps: per optimizer group), the parameters copied up. */
hsr_status rt_off_optim(hsr_rt *rt, int unit, const adamw_hparams *hps);
/* The parameters from the master (after a load), copied up and completed. */
hsr_status rt_off_installed(hsr_rt *rt);

/* ---- optim.c ---- */
/* Inside a step, a gather posted under the optimizer ends its span (at
 * `end`) and opens the next one once posted. */
void rt_optim_close(hsr_rt *rt, uint64_t end);
void rt_optim_open(hsr_rt *rt);
hsr_status rt_step(hsr_rt *rt, hsr_rt_step_info *info);
hsr_status rt_zero_grad(hsr_rt *rt);
/* Communicator call counts since the last snapshot (info may be NULL). */
hsr_status rt_snapshot_counts(hsr_rt *rt, hsr_rt_step_info *info);

#endif
