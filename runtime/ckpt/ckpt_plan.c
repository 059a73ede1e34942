/* Who writes what, and how ranks agree. What a rank holds of the saved
 * state (master, m, v: the engine's rt_state_range_at; shard s of every
 * unit, or with the outer shard its piece r of it, the parameters' pieces
 * in it, in order) is held alike by `parts` ranks (the R replicas; one with
 * the outer shard), so the p-th of them writes the p-th of `parts` equal
 * parts of it: every rank writes about 1/(R x S) of the state and no byte
 * twice. Any rank can compute any rank's pieces, which is how
 * rank 0 writes the manifest without gathering more than checksums. */
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"
#include "common/env.h"
#include "runtime/engine/state.h"
#include "collectives/comm_internal.h"

/* The range the saved kinds cover at (rep, sh): master, m and v alike. */
static hsr_status saved_range(hsr_rt *rt, int u, int rep, int sh, rt_state_range *r) {
  HSR_CHECK(rt_state_range_at(rt, u, RT_STATE_MASTER, rep, sh, r));
  for (int k = RT_STATE_M; k <= RT_STATE_V; k++) {
    rt_state_range o;
    HSR_CHECK(rt_state_range_at(rt, u, (rt_state_kind)k, rep, sh, &o));
    if (o.lo != r->lo || o.n != r->n || o.part != r->part || o.parts != r->parts)
      return hsr_error(HSR_ERR_INTERNAL,
                       "checkpoint: unit %d's moments cover another range than its master (the format stores the three "
                       "side by side)",
                       u);
  }
  return HSR_OK;
}

/* Calls f for every piece of what (rep, sh) holds, in order; *part, *parts:
 * who else holds it. */
typedef void (*piece_fn)(void *ctx, const ckpt_piece *p);
static hsr_status walk_held(hsr_rt *rt, const rt_state_info *in, int rep, int sh, piece_fn f, void *ctx, int *part,
                            int *parts) {
  *part = 0, *parts = 1;
  for (int u = 0; u < in->nunits; u++) {
    rt_state_unit un;
    rt_state_range r;
    HSR_CHECK(rt_state_unit_of(rt, u, &un));
    HSR_CHECK(saved_range(rt, u, rep, sh, &r));
    if (u == 0) *part = r.part, *parts = r.parts;
    if (r.part != *part || r.parts != *parts)
      return hsr_error(HSR_ERR_INTERNAL, "checkpoint: unit %d is replicated differently from unit 0", u);
    uint64_t lo = r.lo, hi = lo + r.n;
    for (int j = 0; j < un.nparams; j++) {
      hsr_rt_param_info p;
      HSR_CHECK(rt_layout_param(in->layout, un.params[j], &p));
      uint64_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
      if (a >= b) continue;
      ckpt_piece pc = {un.params[j], u, a - p.offset, b - a, a - lo};
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

static uint64_t part_of(uint64_t T, int r, int R) {
  return T / (uint64_t)R * (uint64_t)r + T % (uint64_t)R * (uint64_t)r / (uint64_t)R;
}

hsr_status ckpt_pieces(hsr_rt *rt, const rt_state_info *in, int rep, int sh, int whole, ckpt_piece **out, int *n) {
  *out = NULL;
  *n = 0;
  cut c = {0};
  int part, parts;
  HSR_CHECK(walk_held(rt, in, rep, sh, count_fn, &c, &part, &parts));
  uint64_t T = c.pos;
  if (whole) part = 0, parts = 1;
  c = (cut){0, part_of(T, part, parts), part_of(T, part + 1, parts), NULL, 0};
  HSR_CHECK(walk_held(rt, in, rep, sh, cut_fn, &c, &part, &parts)); /* count */
  int np = c.n;
  c = (cut){0, c.lo, c.hi, malloc((size_t)(np ? np : 1) * sizeof(ckpt_piece)), 0};
  if (!c.out) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  hsr_status st = walk_held(rt, in, rep, sh, cut_fn, &c, &part, &parts);
  if (st != HSR_OK) {
    free(c.out);
    return st;
  }
  *out = c.out;
  *n = c.n;
  return HSR_OK;
}

void ckpt_link_of(hsr_rt *rt, ckpt_link *l) {
  rt_state_info in;
  rt_state_info_of(rt, &in);
  *l = (ckpt_link){in.world && comm_backend(in.world) == HSR_BACKEND_HOST ? in.world : NULL, in.boot, in.rank,
                   in.world_size};
}

/* Over a host communicator where there is one: bounded by HSR_COMM_TIMEOUT
 * and naming a dead or stopped rank (a PMIx fence waits HSR_BOOT_TIMEOUT and
 * names nobody); NCCL runs' synchronous saves keep the bootstrap. */
hsr_status ckpt_allgather(const ckpt_link *l, const void *mine, size_t bytes, void *all) {
  if (l->comm) return hsr_comm_allgather(l->comm, mine, all, bytes, HSR_U8, NULL);
  return boot_allgather(l->boot, mine, bytes, all);
}

static hsr_status link_gather(void *l, const void *mine, size_t bytes, void *all) {
  return ckpt_allgather(l, mine, bytes, all);
}

hsr_status ckpt_agree(const ckpt_link *l, hsr_status st, uint64_t a, uint64_t b, uint32_t crc, ckpt_vote **all_out) {
  return agree_votes(link_gather, (void *)l, l->world, st, a, b, crc, AGREE_NAME_RANK, "checkpoint", all_out);
}

hsr_status ckpt_stage_alloc(hsr_rt *rt, size_t bytes, void **p) {
  *p = NULL;
  if (!bytes) bytes = 64;
  if (rt_state_host_alloc(rt, bytes, p) != HSR_OK)
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory for a %zu-byte staging buffer (%s)", bytes,
                     hsr_last_error());
  return HSR_OK;
}

void ckpt_stage_free(hsr_rt *rt, void *p, size_t bytes) {
  if (!p) return;
  rt_state_host_free(rt, p, bytes ? bytes : 64);
}

hsr_status ckpt_buffer_cap(size_t *cap) {
  return env_get_size("HSR_CKPT_BUFFER", cap); /* 4K to 1T, default 64M (the registry) */
}

hsr_status ckpt_block_bytes(uint64_t *block) {
  size_t b;
  HSR_CHECK(env_get_size("HSR_CKPT_BLOCK", &b)); /* 64 to 1G, default 1M (the registry) */
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
