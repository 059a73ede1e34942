/* Who writes what, and how ranks agree. The content of shard s (every
 * unit's slice s, the parameters' pieces in it, in order) is the same on
 * its R replicas, so replica r writes the r-th of R equal parts of it: every
 * rank writes about 1/(R x S) of the state and no byte twice. Any rank can
 * compute any rank's pieces, which is how rank 0 writes the manifest without
 * gathering more than checksums. */
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"
#include "runtime/engine/engine.h"
#include "hsr/env.h"

/* Calls f for every piece of shard sh's content, in order. */
typedef void (*piece_fn)(void *ctx, const ckpt_piece *p);
static hsr_status walk_shard(hsr_rt *rt, int sh, piece_fn f, void *ctx) {
  for (int u = 0; u < rt->nunits; u++) {
    const rt_unit *un = &rt->units[u];
    uint64_t lo = (uint64_t)sh * un->Ls, hi = lo + un->Ls;
    for (int j = rt->ubeg[u]; j < rt->ubeg[u + 1]; j++) {
      hsr_rt_param_info p;
      HSR_CHECK(hsr_rt_layout_param(rt->layout, rt->uparam[j], &p));
      uint64_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
      if (a >= b) continue;
      ckpt_piece pc = {rt->uparam[j], u, a - p.offset, b - a, a - lo};
      f(ctx, &pc);
    }
  }
  return HSR_OK;
}

typedef struct cut {
  uint64_t pos, lo, hi; /* position in the shard's content; this replica's part [lo, hi) */
  ckpt_piece *out;
  int n;
} cut;

static void count_fn(void *ctx, const ckpt_piece *p) { ((cut *)ctx)->pos += p->count; }

static void cut_fn(void *ctx, const ckpt_piece *p) {
  cut *c = ctx;
  uint64_t a = c->pos > c->lo ? c->pos : c->lo, b = c->pos + p->count < c->hi ? c->pos + p->count : c->hi;
  if (a < b && c->out) {
    ckpt_piece q = *p;
    q.start += a - c->pos;
    q.local += a - c->pos;
    q.count = b - a;
    c->out[c->n] = q;
  }
  if (a < b) c->n++;
  c->pos += p->count;
}

static uint64_t part(uint64_t T, int r, int R) {
  return T / (uint64_t)R * (uint64_t)r + T % (uint64_t)R * (uint64_t)r / (uint64_t)R;
}

hsr_status ckpt_pieces(hsr_rt *rt, int rep, int sh, ckpt_piece **out, int *n) {
  *out = NULL;
  *n = 0;
  cut c = {0};
  HSR_CHECK(walk_shard(rt, sh, count_fn, &c));
  uint64_t T = c.pos;
  c = (cut){0, part(T, rep, rt->R), part(T, rep + 1, rt->R), NULL, 0};
  HSR_CHECK(walk_shard(rt, sh, cut_fn, &c)); /* count */
  int np = c.n;
  c = (cut){0, c.lo, c.hi, malloc((size_t)(np ? np : 1) * sizeof(ckpt_piece)), 0};
  if (!c.out) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  hsr_status st = walk_shard(rt, sh, cut_fn, &c);
  if (st != HSR_OK) {
    free(c.out);
    return st;
  }
  *out = c.out;
  *n = c.n;
  return HSR_OK;
}

/* Over the host world communicator where there is one: bounded by
 * HSR_COMM_TIMEOUT and naming a dead or stopped rank (a PMIx fence waits
 * HSR_BOOT_TIMEOUT and names nobody); NCCL runs keep the bootstrap. */
hsr_status ckpt_allgather(hsr_rt *rt, const void *mine, size_t bytes, void *all) {
  if (rt->world && hsr_comm_backend(rt->world) == HSR_BACKEND_HOST)
    return hsr_comm_allgather(rt->world, mine, all, bytes, HSR_U8, NULL);
  return hsr_boot_allgather(rt->boot, mine, bytes, all);
}

hsr_status ckpt_agree(hsr_rt *rt, hsr_status st, uint64_t a, uint64_t b, uint32_t crc, ckpt_vote **all_out) {
  if (all_out) *all_out = NULL;
  int W = hsr_boot_size(rt->boot);
  ckpt_vote mine;
  memset(&mine, 0, sizeof mine);
  mine.status = (int32_t)st;
  mine.crc = crc;
  mine.a = a;
  mine.b = b;
  if (st != HSR_OK) snprintf(mine.msg, sizeof mine.msg, "%s", hsr_last_error());
  ckpt_vote *all = calloc((size_t)W, sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  hsr_status gs = ckpt_allgather(rt, &mine, sizeof mine, all);
  if (gs != HSR_OK) {
    free(all);
    return hsr_error(gs, "checkpoint: the ranks could not agree (%s)", hsr_last_error());
  }
  hsr_status res = HSR_OK;
  for (int r = 0; r < W && res == HSR_OK; r++)
    if (all[r].status != HSR_OK) {
      char msg[CKPT_MSG];
      memcpy(msg, all[r].msg, sizeof msg);
      msg[sizeof msg - 1] = 0;
      res = hsr_error((hsr_status)all[r].status, "rank %d: %s", r, msg);
    }
  if (all_out)
    *all_out = all;
  else
    free(all);
  return res;
}

hsr_status ckpt_check_idle(hsr_rt *rt, const char *what, int need_sharded) {
  if (hsr_sched_queued(rt->sched) > 0)
    return hsr_error(HSR_ERR_STATE, "checkpoint %s: %d gradient reduction(s) still in flight; call it between steps",
                     what, hsr_sched_queued(rt->sched));
  for (int u = 0; u < rt->nunits; u++) {
    const rt_unit *un = &rt->units[u];
    if (un->in_fwd || un->in_bwd)
      return hsr_error(HSR_ERR_STATE, "checkpoint %s: unit '%s' is inside its %s window; call it between steps", what,
                       un->name, un->in_fwd ? "forward" : "backward");
    if (hsr_sched_micro(rt->sched, u) > 0)
      return hsr_error(HSR_ERR_STATE,
                       "checkpoint %s: unit '%s' ran %d backward pass(es) of a step not yet taken (gradients are not "
                       "saved); call it after hsr_rt_step",
                       what, un->name, hsr_sched_micro(rt->sched, u));
    hsr_sched_state s = hsr_sched_state_of(rt->sched, u);
    if (need_sharded && rt->sharded_params && s != HSR_SCHED_SHARDED)
      return hsr_error(HSR_ERR_STATE,
                       "checkpoint %s: unit '%s' is %s (a gather issued at the end of the last step); load before "
                       "the first step or without prefetch_step",
                       what, un->name, hsr_sched_state_name(s));
  }
  return HSR_OK;
}

hsr_status ckpt_stage_alloc(hsr_rt *rt, size_t bytes, void **p) {
  *p = NULL;
  if (!bytes) bytes = 64;
  if (posix_memalign(p, 4096, bytes))
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory for a %zu-byte staging buffer (HSR_CKPT_BUFFER)", bytes);
  if (rt) rt_obs_mem_get(rt->obs, HSR_MEM_CKPT_STAGING, bytes, 1);
  return HSR_OK;
}

void ckpt_stage_free(hsr_rt *rt, void *p, size_t bytes) {
  if (!p) return;
  if (!bytes) bytes = 64;
  if (rt) rt_obs_mem_free(rt->obs, HSR_MEM_CKPT_STAGING, bytes, 1);
  free(p);
}

hsr_status ckpt_buffer_cap(size_t *cap) {
  return hsr_env_get_size("HSR_CKPT_BUFFER", cap); /* 4K to 1T, default 64M (the registry) */
}

hsr_status ckpt_block_bytes(uint64_t *block) {
  size_t b;
  HSR_CHECK(hsr_env_get_size("HSR_CKPT_BLOCK", &b)); /* 64 to 1G, default 1M (the registry) */
  *block = b;
  return HSR_OK;
}

const char *ckpt_reshard_name(const hsr_rt_config *c, char *buf, size_t len) {
  if (c->reshard == HSR_RT_RESHARD_PARTIAL)
    snprintf(buf, len, "partial:%d", c->partial_k);
  else
    snprintf(buf, len, "%s", c->reshard == HSR_RT_RESHARD_NONE ? "none" : "full");
  return buf;
}
