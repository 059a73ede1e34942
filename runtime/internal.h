/* runtime/ internals shared between its files: the two hooks every buffer
 * and every lifecycle event go through (the memory ledger and the trace are
 * built on exactly these). */
#ifndef HSR_RUNTIME_INTERNAL_H
#define HSR_RUNTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/ledger.h"
#include "hsr/runtime.h"

/* Buffer categories are the ledger's (hsr/ledger.h): param shard, grad
 * shard, master, moments m and v, full unit, partial slice, reduce-scatter
 * buffer (the full gradient), all-reduce buffer, staging. */
typedef hsr_mem_cat rt_mem_cat;

typedef enum rt_event_kind {
  RT_EV_GATHER = 0, RT_EV_RESHARD, RT_EV_REDUCE_SCATTER, RT_EV_ALLREDUCE, RT_EV_OPTIM, RT_EV_COUNT
} rt_event_kind;

const char *rt_event_name(rt_event_kind k);

/* Every runtime allocation: from the pool, else from hsr_comm_mem_alloc
 * (buffers collectives touch) or the device allocator (optimizer state). */
hsr_status rt_mem_get(hsr_rt *rt, rt_mem_cat cat, size_t bytes, void **ptr);
/* Back to the pool (poisoned first if it held a gathered unit and poisoning is on). */
void rt_mem_put(hsr_rt *rt, void *ptr);

/* Every lifecycle event: unit, group (-1: none), bytes moved or touched,
 * start/end monotonic ns. */
void rt_event(hsr_rt *rt, rt_event_kind kind, int unit, int group, size_t bytes, uint64_t t0, uint64_t t1);

#endif
