/* Canonical identity: a hash of the configuration (and, from commit on, of
 * the flat layout), compared across ranks so that a rank that registered
 * something else fails with the ranks named instead of hanging. */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "launch/boot_internal.h"
#include "runtime/runtime_internal.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

uint64_t rt_id_config(const hsr_rt *rt) {
  const hsr_rt_config *c = &rt->cfg;
  int64_t v[] = {c->strategy,
                 rt->S,
                 rt->R,
                 rt->K,
                 c->reshard,
                 c->root_reshard,
                 c->prefetch,
                 c->max_live,
                 c->prefetch_step,
                 c->param_dtype,
                 c->reduce_dtype,
                 c->sync,
                 c->outer_shard,
                 c->offload,
                 c->micro_batches,
                 (int64_t)c->align,
                 c->num_groups};
  uint64_t h = fnv(0xcbf29ce484222325ull, v, sizeof v);
  h = fnv(h, &c->clip, sizeof c->clip);
  h = fnv(h, c->groups, sizeof c->groups);
  if (hsr_device_kind_of(rt->dev) == HSR_DEVICE_CUDA) h = fnv(h, "cuda", 4); /* every rank on the same kind */
  if (hsr_device_kind_of(rt->dev) == HSR_DEVICE_SIM) h = fnv(h, "sim", 3);
  return fnv(h, &c->user_hash, sizeof c->user_hash);
}

uint64_t rt_id_layout(const hsr_rt *rt) {
  return fnv(rt_id_config(rt), &(uint64_t){rt_layout_hash(rt->layout)}, sizeof(uint64_t));
}

hsr_status rt_id_compare(hsr_rt *rt, uint64_t mine, const char *what) {
  int n = hsr_boot_size(rt->boot);
  uint64_t *all = calloc((size_t)n, sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  hsr_status st = boot_allgather(rt->boot, &mine, sizeof mine, all);
  if (st != HSR_OK) {
    free(all);
    return st;
  }
  char list[256] = "";
  size_t o = 0;
  int bad = 0;
  for (int r = 1; r < n; r++)
    if (all[r] != all[0]) {
      if (o + 16 < sizeof list) o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", bad ? ", " : "", r);
      bad++;
    }
  uint64_t h0 = all[0];
  free(all);
  if (bad)
    return hsr_error(HSR_ERR_MISMATCH,
                     "%s hash differs across ranks: rank(s) %s differ from rank 0 (0x%016llx; this rank 0x%016llx) "
                     "- every rank must register the same units and parameters with the same configuration",
                     what, list, (unsigned long long)h0, (unsigned long long)mine);
  return HSR_OK;
}
