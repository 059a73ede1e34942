/* Healing a group from a live one, and the state hash (hsr/ft.h).
 *
 * Rank i of every healer group (all members: ft_quorum_healers) sends rank
 * i of the joiner a slice of its rank's state at the step boundary: the
 * first healer a header (the steps done, the sizes) and the program's state
 * (JSON); then the units in turn over the healers (unit u from healer
 * u mod k), each the master weights and both AdamW moments, straight from
 * the engine's buffers (device engines through a host copy). The joiner
 * takes them in rounds of k units, one from each healer at once
 * (peer_recv_many), so the healers' links carry the state together. Every member
 * committed the same steps, so the slices fit together bitwise. The
 * joiner's ranks then install it together (rt_state_installed_at) and hash
 * it: the healers hashed the same state before sending, and the next vote
 * compares them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ft_int.h"
#include "hsr/kernels.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/runtime_internal.h"
#include "common/common_internal.h"

#define HEAL_MAGIC 0x6873724845414c31ull /* "hsrHEAL1" */

typedef struct heal_hdr {
  uint64_t magic;
  int64_t done, engine_step;
  uint64_t units, total, prog_len;
} heal_hdr;

/* device memory (CUDA, sim): healing stages through the host */
static int device_of(hsr_ft *ft) { return hsr_device_kind_of(hsr_rt_device(ft->rt)) != HSR_DEVICE_HOST; }

/* A unit's master, m and v in host memory: the engine's own on host, a copy
 * on a device engine. */
static hsr_status unit_bufs(hsr_ft *ft, int u, int to_host, float *host, void *bufs[3], size_t bytes[3]) {
  rt_slice s;
  HSR_CHECK(rt_slice_get(ft->rt, u, &s));
  float *src[3] = {s.master, s.m, s.v};
  for (int k = 0; k < 3; k++) {
    bytes[k] = s.len * sizeof(float);
    bufs[k] = host ? (void *)(host + (size_t)k * s.len) : (void *)src[k];
    if (host && to_host)
      HSR_CHECK(hsr_device_copy(hsr_rt_device(ft->rt), bufs[k], src[k], bytes[k], hsr_rt_compute_stream(ft->rt)));
  }
  return host && to_host ? hsr_stream_sync(hsr_rt_compute_stream(ft->rt), ft->T) : HSR_OK;
}

static hsr_status unit_store(hsr_ft *ft, int u, const float *host) {
  rt_slice s;
  HSR_CHECK(rt_slice_get(ft->rt, u, &s));
  float *dst[3] = {s.master, s.m, s.v};
  hsr_stream *cs = hsr_rt_compute_stream(ft->rt);
  for (int k = 0; k < 3; k++)
    HSR_CHECK(hsr_device_copy(hsr_rt_device(ft->rt), dst[k], host + (size_t)k * s.len, s.len * sizeof(float), cs));
  return hsr_stream_sync(cs, ft->T); /* the host copy is reused for the next unit */
}

static size_t largest_unit(hsr_rt *rt) {
  const rt_layout *l = rt_get_layout(rt);
  size_t m = 0;
  for (int u = 0; u < rt_layout_num_units(l); u++)
    if (rt_layout_shard_len(l, u) > m) m = rt_layout_shard_len(l, u);
  return m;
}

static hsr_status program_json(hsr_ft *ft, int64_t done, char **out) {
  *out = NULL;
  hsr_ckpt_state *p;
  HSR_CHECK(hsr_ckpt_state_create(&p));
  hsr_status st = ft->c.program ? ft->c.program(ft->c.program_ctx, done, p) : HSR_OK;
  if (st == HSR_OK) st = ckpt_state_json(p, out);
  hsr_ckpt_state_free(p);
  return st;
}

hsr_status ft_heal_send(hsr_ft *ft, int joiner, int64_t done, hsr_ft_heal *out) {
  double t0 = clock_s();
  int hs[FT_MAX_REPLICAS], k = ft_quorum_healers(&ft->q, joiner, hs), mi = -1;
  for (int i = 0; i < k; i++)
    if (hs[i] == ft->c.replica_id) mi = i;
  if (mi < 0) return HSR_OK; /* not one of its healers */
  uint64_t h;
  HSR_CHECK(hsr_ft_state_hash(ft, ft->rt, done, &h)); /* what the joiner must end with */
  const rt_layout *l = rt_get_layout(ft->rt);
  int U = rt_layout_num_units(l);
  char *prog = NULL;
  if (mi == 0) HSR_CHECK(program_json(ft, done, &prog)); /* the first healer's to send */
  heal_hdr *hd = malloc(sizeof *hd); /* on the heap: a send to a joiner that stopped may outlive this call */
  float *host = device_of(ft) ? malloc(3 * (largest_unit(ft->rt) ? largest_unit(ft->rt) : 1) * sizeof(float)) : NULL;
  if (!hd || (device_of(ft) && !host)) {
    free(prog), free(hd), free(host);
    return hsr_error(HSR_ERR_NOMEM, "healing: out of memory");
  }
  *hd = (heal_hdr){HEAL_MAGIC, done, rt_get_step(ft->rt), (uint64_t)U, 0, prog ? strlen(prog) + 1 : 0};
  for (int u = 0; u < U; u++) hd->total += rt_layout_shard_len(l, u);
  ft_result r = {.ok = 1};
  int64_t ep = ft->q.epoch;
  hsr_status st = HSR_OK;
  int taken = 0;
  uint64_t bytes = 0;
  if (mi == 0) { /* the first healer sends the header and the program state */
    void *b0[2] = {hd, prog};
    size_t n0[2] = {sizeof *hd, hd->prog_len};
    st = peer_send(ft->peers, joiner, ep, 0, b0, n0, 2, ft->T, &r);
    taken = r.buf_taken; /* header and program state still read by a pending send */
    bytes = r.bytes_sent;
  }
  for (int u = 0; u < U && st == HSR_OK && r.ok; u++) {
    void *b[3];
    size_t n[3];
    st = fault_hook_hit(&ft->hook, "ft_heal"); /* at every unit's boundary, sent here or by another healer */
    if (st != HSR_OK || ft_heal_slice_owner(u, k) != mi) continue;
    st = unit_bufs(ft, u, 1, host, b, n);
    if (st == HSR_OK) st = peer_send(ft->peers, joiner, ep, 2 + 3 * (int64_t)u, b, n, 3, ft->T, &r);
    if (st == HSR_OK && r.buf_taken && host) taken = 1; /* the engine's own buffers outlive the send anyway */
    bytes += r.bytes_sent;
  }
  if (!taken) { /* otherwise left to the pending send (once per failed heal: bounded) */
    free(host);
    free(prog);
    free(hd);
  }
  HSR_CHECK(st);
  out->sent = 1;
  out->peer = joiner;
  out->done = done;
  out->bytes += bytes;
  out->seconds = clock_s() - t0;
  out->npeers = k;
  out->failed = !r.ok; /* the joiner failed: this group's state is intact; the all-reduce will name it */
  return HSR_OK;
}

hsr_status ft_heal_recv(hsr_ft *ft, int64_t done, hsr_ft_heal *out) {
  double t0 = clock_s();
  const rt_layout *l = rt_get_layout(ft->rt);
  int U = rt_layout_num_units(l);
  int hs[FT_MAX_REPLICAS], k = ft_quorum_healers(&ft->q, ft->c.replica_id, hs), healer = hs[0];
  int *dead = calloc((size_t)k, sizeof *dead);
  heal_hdr hd = {0}, *hdp = calloc(1, sizeof *hdp); /* received on the heap: a receive from a healer that
                                                      stopped mid-message may outlive this call */
  char *prog = NULL;
  ft_result r = {.ok = 1};
  int64_t ep = ft->q.epoch;
  if (!hdp || !dead) {
    free(hdp), free(dead);
    return hsr_error(HSR_ERR_NOMEM, "healing: out of memory");
  }
  void *b0[1] = {hdp};
  size_t n0[1] = {sizeof *hdp};
  hsr_status st = peer_recv(ft->peers, healer, ep, 0, b0, n0, 1, ft->T, &r);
  int taken = r.buf_taken; /* then neither the header nor what follows is freed here (bounded: once per heal) */
  if (!taken) {
    hd = *hdp;
    free(hdp);
  }
  uint64_t total = 0, bytes = r.bytes_recv;
  for (int u = 0; u < U; u++) total += rt_layout_shard_len(l, u);
  char why[320] = "";
  int culprit = healer;
  if (st == HSR_OK && r.ok &&
      (hd.magic != HEAL_MAGIC || hd.done != done || hd.units != (uint64_t)U || hd.total != total ||
       hd.prog_len > (1u << 24) || hd.prog_len == 0))
    snprintf(why, sizeof why,
             "replica %d sent a state of %" PRIu64 " units / %" PRIu64 " elements after %" PRId64
             " steps; this group expects %d / %" PRIu64 " after %" PRId64,
             healer, hd.units, hd.total, hd.done, U, total, done);
  if (st == HSR_OK && r.ok && !why[0]) {
    prog = calloc(1, hd.prog_len);
    void *b1[1] = {prog};
    size_t n1[1] = {hd.prog_len};
    st = prog ? peer_recv(ft->peers, healer, ep, 1, b1, n1, 1, ft->T, &r) : hsr_error(HSR_ERR_NOMEM, "out of memory");
    taken |= st == HSR_OK && r.buf_taken;
    bytes += r.bytes_recv;
  }
  if (st == HSR_OK && !r.ok && !why[0]) snprintf(why, sizeof why, "healing from replica %d: %.250s", healer, r.why);
  size_t lu = largest_unit(ft->rt) ? largest_unit(ft->rt) : 1; /* a host copy per healer on a device engine */
  float *host = device_of(ft) ? malloc((size_t)k * 3 * lu * sizeof(float)) : NULL;
  peer_req *rq = calloc((size_t)k, sizeof *rq);
  ft_result *rr = calloc((size_t)k, sizeof *rr);
  void **bb = calloc((size_t)k * 3, sizeof *bb);
  size_t *bn = calloc((size_t)k * 3, sizeof *bn);
  int *ru = calloc((size_t)k, sizeof *ru);
  if (st == HSR_OK && ((device_of(ft) && !host) || !rq || !rr || !bb || !bn || !ru))
    st = hsr_error(HSR_ERR_NOMEM, "healing: out of memory");
  /* in rounds of k units, unit r*k + i from healer i, the k receives at once
   * (each healer over its own link); after a healer fails, the others' units
   * are still taken (so that their sends end promptly) and the heal fails
   * naming the first that did */
  int hdr_ok = !why[0];
  for (int u0 = 0; u0 < U && st == HSR_OK && hdr_ok; u0 += k) {
    int nr = 0;
    for (int i = 0; i < k && u0 + i < U && st == HSR_OK; i++) {
      int u = u0 + i;
      st = fault_hook_hit(&ft->hook, "ft_heal");
      if (st != HSR_OK || dead[ft_heal_slice_owner(u, k)]) continue;
      st = unit_bufs(ft, u, 0, host ? host + (size_t)nr * 3 * lu : NULL, bb + 3 * nr, bn + 3 * nr);
      rq[nr] = (peer_req){hs[ft_heal_slice_owner(u, k)], 2 + 3 * (int64_t)u, bb + 3 * nr, bn + 3 * nr, 3};
      ru[nr++] = u;
    }
    if (st == HSR_OK && nr) st = peer_recv_many(ft->peers, ep, rq, nr, ft->T, rr);
    for (int i = 0; i < nr && st == HSR_OK; i++) {
      if (rr[i].buf_taken && host) taken = 1; /* the engine's own buffers outlive it anyway */
      bytes += rr[i].bytes_recv;
      if (rr[i].ok && host) st = unit_store(ft, ru[i], host + (size_t)i * 3 * lu);
      if (rr[i].ok) continue;
      dead[ft_heal_slice_owner(ru[i], k)] = 1;
      if (!why[0]) {
        culprit = rq[i].id;
        snprintf(why, sizeof why, "healing from replica %d: %.250s", rq[i].id, rr[i].why);
      }
    }
  }
  free(rq), free(rr), free(bb), free(bn), free(ru);
  free(dead);
  if (!taken) free(host);
  if (st != HSR_OK) {
    if (!taken) free(prog);
    return st;
  }
  /* every rank installs (collective over the group), whatever it got: a
   * failed rank's group votes the step down and heals again */
  int ok = !why[0], all_ok = ok, *v = calloc((unsigned)ft->S, sizeof *v);
  if (!v) {
    if (!taken) free(prog);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  st = ft_grp_allgather(ft, &ok, sizeof ok, v);
  for (int i = 0; i < ft->S; i++) all_ok &= v[i];
  free(v);
  if (st == HSR_OK) st = rt_state_installed_at(ft->rt, all_ok ? hd.engine_step : rt_get_step(ft->rt));
  if (st == HSR_OK && all_ok) {
    hsr_ckpt_state_free(ft->healed_prog);
    ft->healed_prog = NULL;
    st = hsr_ckpt_state_create(&ft->healed_prog);
    if (st == HSR_OK) st = ckpt_state_from_json(ft->healed_prog, prog);
  }
  if (!taken) free(prog);
  HSR_CHECK(st);
  uint64_t h;
  if (all_ok) HSR_CHECK(hsr_ft_state_hash(ft, ft->rt, done, &h)); /* compared with the healers' in the next vote */
  out->peer = healer;
  out->npeers = k;
  for (int i = 0; i < k && i < HSR_FT_HEAL_PEERS; i++) out->peers[i] = hs[i];
  out->done = done;
  out->bytes = bytes;
  out->seconds = clock_s() - t0;
  if (!all_ok) {
    out->failed = 1;
    ft->heal_failed = 1;
    ft->heal_culprit = culprit;
    snprintf(ft->heal_why, sizeof ft->heal_why, "%s", why[0] ? why : "another rank of this group did not heal");
    return HSR_OK;
  }
  out->healed = 1;
  out->program = ft->healed_prog;
  return HSR_OK;
}

/* ---- the state hash ---- */

hsr_status hsr_ft_state_hash(hsr_ft *ft, hsr_rt *rt, int64_t done, uint64_t *hash) {
  if (!ft || !rt || !hash) return hsr_error(HSR_ERR_INVALID, "hsr_ft_state_hash: NULL argument");
  if (!ft->grp) return hsr_error(HSR_ERR_STATE, "hsr_ft_state_hash before hsr_ft_join");
  XXH3_state_t *x = XXH3_createState();
  if (!x) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  XXH3_64bits_reset(x);
  int U = rt_layout_num_units(rt_get_layout(rt)), dev = hsr_device_kind_of(hsr_rt_device(rt)) != HSR_DEVICE_HOST;
  float *host = dev ? malloc((largest_unit(rt) ? largest_unit(rt) : 1) * sizeof(float)) : NULL;
  hsr_status st = dev && !host ? hsr_error(HSR_ERR_NOMEM, "out of memory") : HSR_OK;
  for (int u = 0; u < U && st == HSR_OK; u++) {
    rt_slice s;
    st = rt_slice_get(rt, u, &s);
    float *b[3] = {s.master, s.m, s.v};
    for (int k = 0; k < 3 && st == HSR_OK; k++) {
      if (host) st = hsr_device_copy(hsr_rt_device(rt), host, b[k], s.len * 4, hsr_rt_compute_stream(rt));
      if (host && st == HSR_OK) st = hsr_stream_sync(hsr_rt_compute_stream(rt), ft->T);
      if (st == HSR_OK) XXH3_64bits_update(x, host ? host : b[k], s.len * 4);
    }
  }
  int64_t steps[2] = {done, rt_get_step(rt)};
  XXH3_64bits_update(x, steps, sizeof steps);
  char *prog = NULL;
  if (st == HSR_OK) st = program_json(ft, done, &prog);
  if (st == HSR_OK) XXH3_64bits_update(x, prog, strlen(prog));
  free(prog);
  free(host);
  uint64_t mine = XXH3_64bits_digest(x), *all = calloc((unsigned)ft->S, sizeof *all);
  XXH3_freeState(x);
  if (st == HSR_OK && !all) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) st = ft_grp_allgather(ft, &mine, sizeof mine, all); /* combined in rank order */
  if (st == HSR_OK) *hash = XXH3_64bits(all, (size_t)ft->S * sizeof *all);
  free(all);
  HSR_CHECK(st);
  ft->hash_step = done;
  ft->hash = *hash;
  return HSR_OK;
}
