/* runtime/ internal: the engine's types and the functions its files share.
 *
 *   engine.c    the lifecycle: begin/end calls, gathers, reshard, prefetch
 *               execution, views, the public (observed) lifecycle calls
 *   setup.c     creation, groups, registration, commit, init/read-back, getters
 *   pool.c      the buffer pool
 *   identity.c  the (config, layout) hash and its cross-rank comparison
 *   grad.c      the gradient path: the reduction queue
 *   optim.c     the optimizer step and zero_grad
 *   schedule.c  the decisions all of them execute (hsr/schedule.h)
 *
 * Every rank issues the same collectives on each communicator in the same
 * order: every decision comes from the schedule and depends on program order
 * only. The one timing-dependent step, moving a finished reduce-scatter on
 * to its replicate all-reduce, is done strictly in FIFO order, so replicate
 * all-reduces are issued in the same order too. */
#ifndef HSR_RUNTIME_ENGINE_H
#define HSR_RUNTIME_ENGINE_H

#include "device_path.h"
#include "common/fault_hook.h"
#include "hsr/kernels.h"
#include "runtime/sched/schedule.h"
#include "internal.h"

typedef struct rt_unit {
  char name[HSR_RT_NAME_MAX];
  int is_root;
  size_t L, Ls;       /* elements: padded length, shard length */
  int in_fwd, in_bwd; /* view windows */
  void *shard;        /* Ls (param dtype): sharded strategies */
  void *full;         /* L (param dtype): transient (sharded) or persistent */
  void *partial;      /* L/K (param dtype) between forward and backward */
  hsr_req *greq;      /* gather in flight (also the zero1/zero2 re-gather during a step) */
  uint64_t gt0;
  int64_t gstep;                  /* the step that issued it (the step-end prefetch serves the next) */
  float *master, *m, *v, *gshard; /* Ls each */
  float *gfull;                   /* L: full gradient being accumulated */
} rt_unit;

/* A gradient reduction in flight. */
typedef struct rt_red {
  int unit, stage, done, ar; /* stage 1: shard group; 2: replicate group */
  hsr_req *req;
  void *send;   /* full gradient (or its reduce-dtype copy) read by stage 1 */
  void *slice;  /* Ls (reduce dtype): result of stage 1, in place for stage 2 */
  int deferred; /* rs_only's deferred all-reduce: its slice replaces the accumulator */
  uint64_t t0;
} rt_red;

/* A pool block. */
typedef struct rt_block {
  void *ptr;
  size_t bytes;
  rt_mem_cat cat;
  int in_use, shared;
} rt_block;

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
  int sharded_params, sharded_grads; /* policy flags of the strategy */
  int poison;
  double timeout;
  hsr_fault_hook hook; /* HSR_FAULT at the optimizer step (a test hook) */
  size_t pes, res;
  hsr_rt_layout *layout;
  int committed;
  hsr_sched *sched; /* the decisions (from commit on) */
  rt_unit *units;
  int nunits;
  int *uparam, *ubeg; /* layout params grouped by unit: uparam[ubeg[u] .. ubeg[u+1]) */
  rt_red *q;
  int qn, qcap;
  rt_block *blocks;
  int nblocks, capblocks;
  int64_t step;
  int grad_ready; /* gshard holds the step's synchronized, averaged gradient (hsr_rt_grad_read) */
  hsr_comm_counter base[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  hsr_rt_stats stats;
  rt_obs *obs; /* ledgers, trace, timing (observe.c) */
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

/* Intersection of [off, off+n) with this rank's slice of the unit. */
static inline int rt_local_range(const hsr_rt *rt, const rt_unit *u, size_t off, size_t n, size_t *a, size_t *b) {
  size_t lo = (size_t)rt->srank * u->Ls, hi = lo + u->Ls;
  *a = off > lo ? off : lo;
  *b = off + n < hi ? off + n : hi;
  return *b > *a;
}

/* ---- pool.c ---- */
/* A buffer of the schedule's kind for unit u: its category and size come
 * from the schedule (hsr_sched_buf_cat / hsr_sched_buf_bytes). */
hsr_status rt_buf_get(hsr_rt *rt, hsr_sched_buf kind, int unit, void **ptr);
/* Zero on the compute stream: every buffer zeroed here is next touched by
 * compute (or by a stream that joins compute before it reads). */
hsr_status rt_zero(hsr_rt *rt, void *p, size_t bytes);
/* Teardown: every block back to its allocator. */
void rt_mem_release_all(hsr_rt *rt);

/* ---- identity.c ---- */
uint64_t rt_id_config(const hsr_rt *rt);
uint64_t rt_id_layout(const hsr_rt *rt); /* config + layout */
/* Every rank contributes its hash; a mismatch names the ranks that differ from rank 0. */
hsr_status rt_id_compare(hsr_rt *rt, uint64_t mine, const char *what);

/* ---- engine.c ---- */
/* Waits for a request and reports the transport's own start/end when known. */
hsr_status rt_wait_req(hsr_rt *rt, hsr_req *r, uint64_t issued, uint64_t *t0, uint64_t *t1);
hsr_status rt_gather_start(hsr_rt *rt, const hsr_sched_action *a);
hsr_status rt_gather_wait(hsr_rt *rt, const hsr_sched_action *a);
hsr_status rt_check_unit(hsr_rt *rt, int ui, const char *what);
hsr_status rt_find_param(hsr_rt *rt, const char *name, hsr_rt_param_info *p);

/* ---- grad.c ---- */
hsr_status rt_red_start(hsr_rt *rt, const hsr_sched_action *a);
hsr_status rt_red_deferred(hsr_rt *rt, const hsr_sched_action *a);
/* Moves entries on without blocking (host; on CUDA the streams do). */
hsr_status rt_red_advance(hsr_rt *rt);
/* Completes the oldest entry (it must be the action's unit), accumulates
 * its slice and returns its buffers. */
hsr_status rt_red_retire(hsr_rt *rt, const hsr_sched_action *a);
/* Teardown: retires whatever is still queued. */
hsr_status rt_red_drain(hsr_rt *rt);

/* ---- optim.c ---- */
hsr_status rt_step(hsr_rt *rt, hsr_rt_step_info *info);
hsr_status rt_zero_grad(hsr_rt *rt);
/* Communicator call counts since the last snapshot (info may be NULL). */
hsr_status rt_snapshot_counts(hsr_rt *rt, hsr_rt_step_info *info);

#endif
