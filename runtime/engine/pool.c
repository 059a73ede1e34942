/* The buffer pool: every runtime buffer, reused by (category, size). Blocks
 * go back only at points fixed by program order (the schedule's), so the
 * pool's high-water mark does not depend on timing and steady-state steps
 * allocate nothing. Buffers that collectives touch come from
 * comm_mem_alloc (registered for zero-copy), optimizer state and the
 * gradient accumulator from the device allocator (a master the gathers read
 * is registered too), or with offload from the device's pinned host
 * allocator (the HSR_MEM_HOST_* categories). */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "kernels/sim.h"
#include "common/common_internal.h"

hsr_status rt_mem_get(hsr_rt *rt, rt_mem_cat cat, size_t bytes, void **ptr) {
  if (!bytes) bytes = 64;
  for (int i = 0; i < rt->nblocks; i++) {
    rt_block *b = &rt->blocks[i];
    if (!b->in_use && b->cat == cat && b->bytes == bytes) {
      HSR_CHECK(rt_dev_block_reuse(rt->dv, i, cat)); /* its first stream waits for the last users */
      b->in_use = 1;
      rt->stats.pool_hits++;
      rt_obs_mem_get(rt->obs, cat, bytes, 0);
      *ptr = b->ptr;
      return HSR_OK;
    }
  }
  if (rt->nblocks == rt->capblocks) {
    int cap = rt->capblocks ? 2 * rt->capblocks : 32;
    rt_block *nb = realloc(rt->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    rt->blocks = nb;
    rt->capblocks = cap;
  }
  /* Optimizer state and the gradient accumulator are never read by peers,
   * except a master that is itself the gathers' input (FSDP2's footprint). */
  int host = mem_cat_host(cat); /* offloaded optimizer state: pinned host memory */
  int shared = !host && !((cat == HSR_MEM_MASTER && !rt->master_shared) || cat == HSR_MEM_MOMENT_M ||
                          cat == HSR_MEM_MOMENT_V || cat == HSR_MEM_GRAD_SHARD);
  void *p = NULL;
  hsr_status st = shared ? comm_mem_alloc(rt->world, bytes, &p)
                  : host ? device_host_alloc(rt->dev, bytes, &p)
                         : hsr_device_alloc(rt->dev, bytes, &p);
  if (st != HSR_OK)
    return hsr_error(st, "runtime: allocating %zu bytes for %s failed: %s", bytes, mem_cat_name(cat), hsr_last_error());
  /* the sim device takes a communicator's segment as its memory (a no-op elsewhere) */
  if (shared && (st = kern_adopt(rt->dev, p, bytes, mem_cat_name(cat))) != HSR_OK) {
    comm_mem_free(rt->world, p);
    return st;
  }
  rt->blocks[rt->nblocks++] = (rt_block){p, bytes, cat, 1, shared};
  rt->stats.allocs++;
  rt_obs_mem_get(rt->obs, cat, bytes, 1);
  *ptr = p;
  return HSR_OK;
}

/* The interpreter's buffer rules (sched_buffers) take and return every
 * buffer of the lifecycle through these two. */
hsr_status rt_pool_get(void *ctx, int unit, const sched_bufop *b, void **p) {
  hsr_rt *rt = ctx;
  HSR_CHECK(rt_mem_get(rt, b->cat, b->bytes, p));
  char label[96];
  snprintf(label, sizeof label, "%s of unit %d '%s'", mem_cat_name(b->cat), unit,
           unit >= 0 && unit < rt->nunits ? rt->units[unit].name : "?");
  return kern_label(rt->dev, *p, b->bytes, label);
}

void rt_pool_put(void *ctx, int unit, const sched_bufop *b, void *p) {
  (void)unit, (void)b;
  rt_mem_put(ctx, p);
}

void rt_mem_put(hsr_rt *rt, void *ptr) {
  if (!ptr) return;
  for (int i = 0; i < rt->nblocks; i++)
    if (rt->blocks[i].ptr == ptr) {
      /* 0xFF bytes are NaN in f32 and bf16: a stale view reads NaN */
      if (rt->poison && rt->blocks[i].cat == HSR_MEM_FULL_UNIT)
        hsr_device_memset(rt->dev, ptr, 0xFF, rt->blocks[i].bytes, CS(rt));
      if (rt_dev_block_release(rt->dv, i) != HSR_OK) { /* cannot order reuse: never hand it out again */
        HSR_LOG_W("runtime: buffer %p not recycled: %s", ptr, hsr_last_error());
      } else {
        rt->blocks[i].in_use = 0;
        rt_obs_mem_put(rt->obs, rt->blocks[i].cat, rt->blocks[i].bytes);
      }
      return;
    }
  HSR_LOG_W("runtime: buffer %p returned twice or never allocated", ptr);
}

hsr_status rt_mem_drop(hsr_rt *rt, void *ptr) {
  if (!ptr) return HSR_OK;
  for (int i = 0; i < rt->nblocks; i++) {
    rt_block *b = &rt->blocks[i];
    if (b->ptr != ptr) continue;
    HSR_CHECK(rt_dev_quiesce(rt->dv)); /* nothing queued still uses it */
    rt_obs_mem_free(rt->obs, b->cat, b->bytes, b->in_use);
    hsr_status st = HSR_OK;
    if (b->shared) {
      st = kern_unadopt(rt->dev, ptr);
      hsr_status f = comm_mem_free(rt->world, ptr);
      if (st == HSR_OK) st = f;
    } else {
      st = mem_cat_host(b->cat) ? device_host_free(rt->dev, ptr) : hsr_device_free(rt->dev, ptr);
    }
    /* the slot stays (block indices name release events) but holds nothing */
    *b = (rt_block){NULL, 0, b->cat, 1, 0};
    return st;
  }
  return hsr_error(HSR_ERR_INTERNAL, "runtime: buffer %p dropped but never allocated", ptr);
}

hsr_status rt_zero(hsr_rt *rt, void *p, size_t bytes) { return hsr_device_memset(rt->dev, p, 0, bytes, CS(rt)); }

void rt_mem_release_all(hsr_rt *rt) {
  if (rt_dev_quiesce(rt->dv) != HSR_OK)
    HSR_LOG_W("runtime: device work still queued at teardown: %s", hsr_last_error());
  for (int i = 0; i < rt->nblocks; i++) {
    if (!rt->blocks[i].ptr) continue; /* dropped */
    rt_obs_mem_free(rt->obs, rt->blocks[i].cat, rt->blocks[i].bytes, rt->blocks[i].in_use);
    if (rt->blocks[i].shared) {
      if (kern_unadopt(rt->dev, rt->blocks[i].ptr) != HSR_OK) HSR_LOG_W("runtime: %s", hsr_last_error());
      comm_mem_free(rt->world, rt->blocks[i].ptr);
    } else if (mem_cat_host(rt->blocks[i].cat)) {
      device_host_free(rt->dev, rt->blocks[i].ptr);
    } else {
      hsr_device_free(rt->dev, rt->blocks[i].ptr);
    }
  }
  free(rt->blocks);
  rt->blocks = NULL;
  rt->nblocks = rt->capblocks = 0;
}
