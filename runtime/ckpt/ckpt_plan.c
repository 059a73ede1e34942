/* Who writes what, and how ranks agree. What a rank holds of the saved
 * state (master, m, v: the engine's rt_state_range_at; shard s of every
 * unit, or with the outer shard its piece r of it, the parameters' pieces
 * in it, in order) is held alike by `parts` ranks (the R replicas; one with
 * the outer shard), so the p-th of them writes the p-th of `parts` equal
 * parts of it: every rank writes about 1/(R x S) of the state and no byte
 * twice. Any rank can compute any rank's pieces from the layout and the
 * mesh's shape alone (ckpt_geom: no engine, no communicator), which is how
 * rank 0 writes the manifest without gathering more than checksums, how a
 * load finds its part, and how `hsr ckpt plan` times the planner for a mesh
 * that does not exist. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"
#include "common/env.h"
#include "runtime/engine/state.h"
#include "collectives/comm_internal.h"

struct ckpt_geom {
  int R, S, outer, nunits, nparams;
  uint64_t *Ls, *Lo;     /* per unit: shard length; the outer shard's piece (Ls / R) */
  int *ubeg, *uparam;    /* unit u's parameters: uparam[ubeg[u] .. ubeg[u + 1]), layout order */
  uint64_t *off, *numel; /* per layout parameter: offset in its unit, elements */
};

void ckpt_geom_free(ckpt_geom *g) {
  if (!g) return;
  free(g->Ls), free(g->Lo), free(g->ubeg), free(g->uparam), free(g->off), free(g->numel);
  free(g);
}

hsr_status ckpt_geom_create(const rt_layout *l, int R, int S, int outer, ckpt_geom **out) {
  *out = NULL;
  if (!l || R < 1 || S < 1)
    return hsr_error(HSR_ERR_INVALID, "checkpoint plan: a mesh of %d x %d (replicate x shard; each at least 1)", R, S);
  if (rt_layout_shards(l) != S || rt_layout_subshards(l) != (outer ? R : 1))
    return hsr_error(HSR_ERR_INVALID,
                     "checkpoint plan: the layout is finalized for %d shards of %d pieces, the mesh is %d x %d%s",
                     rt_layout_shards(l), rt_layout_subshards(l), R, S, outer ? " with the outer shard" : "");
  int nu = rt_layout_num_units(l), np = rt_layout_num_params(l);
  ckpt_geom *g = calloc(1, sizeof *g);
  if (!g) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  *g = (ckpt_geom){R, S, outer, nu, np, NULL, NULL, NULL, NULL, NULL, NULL};
  g->Ls = malloc((size_t)(nu + 1) * sizeof *g->Ls);
  g->Lo = malloc((size_t)(nu + 1) * sizeof *g->Lo);
  g->ubeg = calloc((size_t)nu + 2, sizeof *g->ubeg);
  g->uparam = malloc((size_t)(np + 1) * sizeof *g->uparam);
  g->off = malloc((size_t)(np + 1) * sizeof *g->off);
  g->numel = malloc((size_t)(np + 1) * sizeof *g->numel);
  if (!g->Ls || !g->Lo || !g->ubeg || !g->uparam || !g->off || !g->numel) {
    ckpt_geom_free(g);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  for (int u = 0; u < nu; u++) {
    g->Ls[u] = rt_layout_shard_len(l, u);
    g->Lo[u] = outer ? g->Ls[u] / (uint64_t)R : g->Ls[u];
  }
  /* each unit's parameters in registration order, as the engine groups them */
  rt_param_info p;
  for (int i = 0; i < np; i++) {
    hsr_status st = rt_layout_param(l, i, &p);
    if (st != HSR_OK) {
      ckpt_geom_free(g);
      return st;
    }
    g->off[i] = p.offset, g->numel[i] = p.numel;
    g->ubeg[p.unit + 2]++;
  }
  for (int u = 0; u < nu; u++) g->ubeg[u + 2] += g->ubeg[u + 1];
  for (int i = 0; i < np; i++) {
    rt_layout_param(l, i, &p); /* read above */
    g->uparam[g->ubeg[p.unit + 1]++] = i;
  }
  *out = g;
  return HSR_OK;
}

int ckpt_geom_units(const ckpt_geom *g) { return g ? g->nunits : 0; }

hsr_status ckpt_geom_range(const ckpt_geom *g, int u, int rep, int sh, uint64_t *lo, uint64_t *n, int *part,
                           int *parts) {
  if (!g || u < 0 || u >= g->nunits || rep < 0 || rep >= g->R || sh < 0 || sh >= g->S)
    return hsr_error(HSR_ERR_INVALID, "checkpoint plan: unit %d at (%d, %d) does not exist on a %d x %d mesh", u, rep,
                     sh, g ? g->R : 0, g ? g->S : 0);
  if (g->outer) /* piece rep of shard sh: one rank holds it */
    *lo = (uint64_t)sh * g->Ls[u] + (uint64_t)rep * g->Lo[u], *n = g->Lo[u], *part = 0, *parts = 1;
  else /* shard sh, alike on its R replicas */
    *lo = (uint64_t)sh * g->Ls[u], *n = g->Ls[u], *part = rep, *parts = g->R;
  return HSR_OK;
}

static uint64_t part_of(uint64_t T, int r, int R) {
  return T / (uint64_t)R * (uint64_t)r + T % (uint64_t)R * (uint64_t)r / (uint64_t)R;
}

/* The pieces of what (rep, sh) holds whose positions in its content fall in
 * [clo, chi), in order; out NULL: only counted. *T: the content's length. */
static int walk(const ckpt_geom *g, int rep, int sh, uint64_t clo, uint64_t chi, ckpt_piece *out, uint64_t *T) {
  uint64_t pos = 0;
  int n = 0;
  for (int u = 0; u < g->nunits; u++) {
    uint64_t lo, len;
    int part, parts;
    ckpt_geom_range(g, u, rep, sh, &lo, &len, &part, &parts); /* (rep, sh) checked by the caller */
    uint64_t hi = lo + len;
    for (int j = g->ubeg[u]; j < g->ubeg[u + 1]; j++) {
      int i = g->uparam[j];
      uint64_t a = g->off[i] > lo ? g->off[i] : lo, b = g->off[i] + g->numel[i] < hi ? g->off[i] + g->numel[i] : hi;
      if (a >= b) continue;
      /* [a, b) is at [pos, pos + b - a) of the content; cut to [clo, chi) */
      uint64_t ca = pos > clo ? pos : clo, cb = pos + (b - a) < chi ? pos + (b - a) : chi;
      if (ca < cb) {
        if (out) out[n] = (ckpt_piece){i, u, a - g->off[i] + (ca - pos), cb - ca, a - lo + (ca - pos)};
        n++;
      }
      pos += b - a;
    }
  }
  *T = pos;
  return n;
}

hsr_status ckpt_geom_pieces(const ckpt_geom *g, int rep, int sh, int whole, ckpt_piece **out, int *n) {
  *out = NULL;
  *n = 0;
  uint64_t lo, len, T;
  int part, parts;
  if (!g || g->nunits == 0) return g ? HSR_OK : hsr_error(HSR_ERR_INVALID, "checkpoint plan: no geometry");
  HSR_CHECK(ckpt_geom_range(g, 0, rep, sh, &lo, &len, &part, &parts));
  walk(g, rep, sh, 0, 0, NULL, &T); /* the content's length */
  if (whole) part = 0, parts = 1;
  uint64_t clo = part_of(T, part, parts), chi = part_of(T, part + 1, parts);
  int np = walk(g, rep, sh, clo, chi, NULL, &T);
  ckpt_piece *pc = malloc((size_t)(np ? np : 1) * sizeof *pc);
  if (!pc) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  walk(g, rep, sh, clo, chi, pc, &T);
  *out = pc;
  *n = np;
  return HSR_OK;
}

/* The engine's geometry: its layout and mesh, every unit's range checked
 * against the engine's own (rt_state_range_at, all saved kinds alike), so
 * the planner a command runs for a mesh that does not exist is the one a
 * save and a load run. */
int ckpt_outer_of(hsr_rt *rt, const rt_state_info *in) {
  rt_state_range r0;
  return in->nunits > 0 && in->R > 1 && rt_state_range_at(rt, 0, RT_STATE_MASTER, 0, 0, &r0) == HSR_OK && r0.parts == 1;
}

static hsr_status engine_geom(hsr_rt *rt, const rt_state_info *in, int rep, int sh, ckpt_geom **out) {
  if (in->nunits > 0) { /* unit 0 exists: its range is readable (ckpt_outer_of reads it) */
    rt_state_range r0;
    HSR_CHECK(rt_state_range_at(rt, 0, RT_STATE_MASTER, 0, 0, &r0));
  }
  HSR_CHECK(ckpt_geom_create(in->layout, in->R, in->S, ckpt_outer_of(rt, in), out));
  for (int u = 0; u < in->nunits; u++) {
    rt_state_unit un;
    uint64_t lo, n;
    int part, parts;
    HSR_CHECK(rt_state_unit_of(rt, u, &un));
    HSR_CHECK(ckpt_geom_range(*out, u, rep, sh, &lo, &n, &part, &parts));
    if (un.nparams != (*out)->ubeg[u + 1] - (*out)->ubeg[u])
      return hsr_error(HSR_ERR_INTERNAL, "checkpoint: unit %d has %d parameters, its layout %d", u, un.nparams,
                       (*out)->ubeg[u + 1] - (*out)->ubeg[u]);
    for (int k = RT_STATE_MASTER; k <= RT_STATE_V; k++) {
      rt_state_range r;
      HSR_CHECK(rt_state_range_at(rt, u, (rt_state_kind)k, rep, sh, &r));
      if (r.lo != lo || r.n != n || r.part != part || r.parts != parts)
        return hsr_error(HSR_ERR_INTERNAL,
                         "checkpoint: unit %d kind %d at (%d, %d) holds [%zu, +%zu) part %d of %d, the planner's "
                         "geometry [%" PRIu64 ", +%" PRIu64 ") part %d of %d (the format stores master, m and v "
                         "side by side over one range)",
                         u, k, rep, sh, r.lo, r.n, r.part, r.parts, lo, n, part, parts);
    }
  }
  return HSR_OK;
}

hsr_status ckpt_pieces(hsr_rt *rt, const rt_state_info *in, int rep, int sh, int whole, ckpt_piece **out, int *n) {
  *out = NULL;
  *n = 0;
  ckpt_geom *g = NULL;
  hsr_status st = engine_geom(rt, in, rep, sh, &g);
  if (st == HSR_OK) st = ckpt_geom_pieces(g, rep, sh, whole, out, n);
  ckpt_geom_free(g);
  return st;
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
