/* runtime/ internal: where the engine's buffers live and on which stream its
 * work runs. One engine code path drives both kinds:
 *
 *   host  every stream is NULL (the device layer runs synchronously on the
 *         calling thread) and every ordering call below is a no-op, so host
 *         runs do exactly what they did before the device path existed.
 *   CUDA  three streams (the sim device the same, its collectives the host
 *         ones run in its streams' order): compute (the caller's, or created), all-gather and
 *         reduce (both high priority). Ordering is expressed with events only:
 *           gather done  -> compute may read the full unit
 *           compute done -> the reduce stream may read the gradient
 *         Collectives go through NCCL communicators bound to those streams.
 *         A buffer handed back to the pool records a release event on every
 *         engine stream; whoever takes it next makes its first stream wait
 *         for those events, so a buffer is never rewritten while queued work
 *         still reads it, and the host never blocks to recycle memory.
 *
 * Every collective on one communicator is issued in program order on every
 * rank (no timing-dependent issue on the device path), which is what keeps
 * NCCL's per-communicator serialization deadlock-free. */
#ifndef HSR_RUNTIME_DEVICE_PATH_H
#define HSR_RUNTIME_DEVICE_PATH_H

#include "hsr/kernels.h"
#include "hsr/runtime.h"
#include "internal.h"

typedef struct rt_dev rt_dev;

/* HSR_SIM_DROP (a test hook of the sim device): the one ordering left out. */
typedef enum rt_drop {
  RT_DROP_NONE = 0,
  RT_DROP_GATHER_WAIT,
  RT_DROP_REDUCE_WAIT,
  RT_DROP_POOL_REUSE,
  RT_DROP_OPTIM_WAIT,
  RT_DROP_OFFLOAD_WAIT
} rt_drop;
/* 1 when the hook leaves this ordering out. */
int rt_dev_dropped(const rt_dev *dv, rt_drop what);

/* Opens (or adopts cfg->dev / cfg->stream) the device and the streams.
 * boot picks the GPU when cfg->device_ordinal < 0 (local rank % GPUs, the
 * GPU that the NCCL world communicator binds). */
hsr_status rt_dev_open(const hsr_rt_config *cfg, hsr_boot *boot, double timeout_s, rt_dev **out);
/* Waits (bounded) for every stream and outstanding request, then frees. */
hsr_status rt_dev_close(rt_dev *dv);
/* Drains every stream and outstanding request (bounded): before buffers are
 * freed or communicators destroyed. NULL is fine. */
hsr_status rt_dev_quiesce(rt_dev *dv);

/* Streams and events order the work (CUDA, sim); 0 on host. */
int rt_dev_async(const rt_dev *dv);
hsr_device *rt_dev_device(rt_dev *dv);
hsr_backend rt_dev_backend(const rt_dev *dv);
/* Streams (NULL on host). */
hsr_stream *rt_dev_cs(rt_dev *dv);
hsr_stream *rt_dev_gs(rt_dev *dv);
hsr_stream *rt_dev_rs(rt_dev *dv);

/* `waiter` does not start later work before `on` reached this point. */
hsr_status rt_dev_join(rt_dev *dv, hsr_stream *waiter, hsr_stream *on);
/* Binds a communicator's next operations to a stream (no-op on host). */
hsr_status rt_dev_use(rt_dev *dv, hsr_comm *c, hsr_stream *s);

/* Per-unit gather events: sized once at commit. */
hsr_status rt_dev_units(rt_dev *dv, int nunits);
hsr_status rt_dev_gather_issued(rt_dev *dv, int unit);  /* recorded on the gather stream */
hsr_status rt_dev_gather_consume(rt_dev *dv, int unit); /* compute waits for it */

/* A request whose completion the streams already order: freed once done,
 * without blocking (reaped at later calls, waited for at quiesce). */
hsr_status rt_dev_defer(rt_dev *dv, hsr_req *r);
hsr_status rt_dev_reap(rt_dev *dv);

/* Pool hooks, by block index. */
hsr_status rt_dev_block_release(rt_dev *dv, int block);
hsr_status rt_dev_block_reuse(rt_dev *dv, int block, rt_mem_cat cat);

/* Gives obs the device clock when this device can stamp its streams (sim). */
void rt_dev_clock(rt_dev *dv, rt_obs *obs);
/* The bound on every wait (cfg.timeout_s, else HSR_COMM_TIMEOUT). */
double rt_dev_timeout(const rt_dev *dv);
/* Waits (bounded) until a stream has run everything queued on it. */
hsr_status rt_dev_sync(rt_dev *dv, hsr_stream *s);
/* n host slots that sumsq results land in (valid until the next call). */
hsr_status rt_dev_slots(rt_dev *dv, int n, double **slots);
/* In-place SUM all-reduce of one host double over `c` (NCCL: through a
 * device word on the reduce stream). */
hsr_status rt_dev_allreduce_f64(rt_dev *dv, hsr_comm *c, double *x);

#endif
