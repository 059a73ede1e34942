/* Multi-rank test of the communicator counters, launched for real.
 *
 *   mr_counters [--split S] [--counts LIST]
 *
 * For every operation (all-gather, reduce-scatter, all-reduce, broadcast from
 * the first and the last rank, barrier) in the world and (--split S) in the
 * shard groups (r / S) and replicate groups (r % S), checks the growth of
 * every counter (calls, bytes sent, bytes received, fabric bytes sent and
 * received, the full buffer) against values computed here by hand from the
 * transport the group must run on: shared memory when every member is on one
 * node, two-level when it spans nodes with the same number of members per
 * node (unless HSR_ALGO_TWO_LEVEL=off), a flat UCX ring otherwise. The
 * formulas below are derived from the algorithms' message patterns, not read
 * back from the library. HSR_ALGO_ALLREDUCE and HSR_ALGO_ALLREDUCE_RD_MAX are
 * read to know which all-reduce a UCX group runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "hsr/comm.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"
#include "common/common_internal.h"

static int g_rank, g_fail;
static hsr_boot *g_boot;

#include "mr_check.h"

typedef hsr_comm_counter ctr;
enum { T_SHM, T_UCX, T_TWO };
static const char *const tp_names[] = {"shm", "ucx", "two-level"};

/* ---- how the group lies on nodes ------------------------------------------------ */
typedef struct shape {
  int n, r, tp;
  int *node;  /* per comm rank */
  int L, m;   /* two-level: members per node, nodes */
  int nr, xr; /* two-level: my rank in the node group and in the cross group */
} shape;

static int node_of(hsr_comm *c, int j) { return boot_node_of(g_boot, comm_world_rank(c, j)); }

static void shape_of(hsr_comm *c, int two_off, shape *s) {
  int n = hsr_comm_size(c), r = hsr_comm_rank(c);
  *s = (shape){.n = n, .r = r};
  s->node = calloc((size_t)n, sizeof *s->node);
  int nodes = boot_num_nodes(g_boot), *per = calloc((size_t)nodes, sizeof *per), used = 0;
  for (int j = 0; j < n; j++) {
    s->node[j] = node_of(c, j);
    if (per[s->node[j]]++ == 0) used++;
  }
  int uniform = 1, L = per[s->node[0]];
  for (int k = 0; k < nodes; k++)
    if (per[k] && per[k] != L) uniform = 0;
  s->tp = used == 1 ? T_SHM : (!two_off && uniform && L >= 2 && used >= 2) ? T_TWO : T_UCX;
  s->L = L, s->m = used;
  /* node rank: my position among my node's members (by comm rank); cross rank:
   * my position among the members with my node rank (by comm rank) */
  int mine = 0;
  for (int j = 0; j < r; j++) mine += s->node[j] == s->node[r];
  s->nr = mine;
  int x = 0;
  for (int j = 0; j < r; j++) {
    int lj = 0;
    for (int q = 0; q < j; q++) lj += s->node[q] == s->node[j];
    x += lj == mine;
  }
  s->xr = x;
  free(per);
}

/* ---- expected growth ------------------------------------------------------------- */
typedef struct ar_rule {
  int mode; /* 0 auto, 1 ring, 2 rd */
  size_t rd_max;
} ar_rule;

static int pow2(int n) { return n > 0 && !(n & (n - 1)); }
static uint64_t slice(size_t count, int n, int j, size_t es) {
  return (uint64_t)(count * (size_t)(j + 1) / (size_t)n - count * (size_t)j / (size_t)n) * es;
}
static int md(int a, int n) { return ((a % n) + n) % n; }

/* Shared memory among n members, my rank r: never fabric. */
static void shm_expect(hsr_op k, size_t count, size_t es, int n, int r, int root, ctr *e) {
  uint64_t B = count * es;
  switch (k) {
  case HSR_OP_ALLGATHER:
  case HSR_OP_REDUCE_SCATTER: e->bytes_sent = e->bytes_recv = (uint64_t)(n - 1) * B; break;
  case HSR_OP_ALLREDUCE: { /* peers read my reduced slice, I read the others' (and they my input) */
    uint64_t mine = slice(count, n, r, es);
    e->bytes_sent = e->bytes_recv = (uint64_t)(n - 1) * mine + (B - mine);
    break;
  }
  case HSR_OP_BCAST:
    if (r == root)
      e->bytes_sent = (uint64_t)(n - 1) * B;
    else
      e->bytes_recv = B;
    break;
  default: break;
  }
}

/* A UCX group: rem(j) says whether member j is on another node than me. */
typedef int (*remote_fn)(const shape *s, int j);
static int rem_flat(const shape *s, int j) { return s->node[j] != s->node[s->r]; }
static int rem_all(const shape *s, int j) { return j != s->r; } /* the cross group of two-level */

static void ucx_expect(hsr_op k, size_t count, size_t es, int n, int r, int root, const ar_rule *ar, const shape *s,
                       remote_fn rem, ctr *e) {
  uint64_t B = count * es;
  int right = md(r + 1, n), left = md(r - 1, n);
  switch (k) {
  case HSR_OP_ALLGATHER: /* ring: n-1 steps, one block each way */
  case HSR_OP_REDUCE_SCATTER:
    e->bytes_sent = e->bytes_recv = (uint64_t)(n - 1) * B;
    e->fabric_sent = rem(s, right) ? e->bytes_sent : 0;
    e->fabric_recv = rem(s, left) ? e->bytes_recv : 0;
    break;
  case HSR_OP_ALLREDUCE: {
    int rd = pow2(n) && (ar->mode == 2 || (ar->mode == 0 && B <= ar->rd_max));
    if (rd) { /* log2(n) exchanges of the whole vector with r ^ mask */
      for (int mask = 1; mask < n; mask <<= 1) {
        e->bytes_sent += B, e->bytes_recv += B;
        if (rem(s, r ^ mask)) e->fabric_sent += B, e->fabric_recv += B;
      }
    } else { /* reduce-scatter sends every slice but mine, all-gather every slice but my right's */
      e->bytes_sent = 2 * B - slice(count, n, r, es) - slice(count, n, right, es);
      e->bytes_recv = 2 * B - slice(count, n, left, es) - slice(count, n, r, es);
      e->fabric_sent = rem(s, right) ? e->bytes_sent : 0;
      e->fabric_recv = rem(s, left) ? e->bytes_recv : 0;
    }
    break;
  }
  case HSR_OP_BCAST: /* flat: the root sends to every member */
    if (r == root) {
      for (int j = 0; j < n; j++)
        if (j != r) {
          e->bytes_sent += B;
          if (rem(s, j)) e->fabric_sent += B;
        }
    } else {
      e->bytes_recv = B;
      e->fabric_recv = rem(s, root) ? B : 0;
    }
    break;
  default: break;
  }
}

static void add(ctr *a, const ctr *b) {
  a->bytes_sent += b->bytes_sent, a->bytes_recv += b->bytes_recv;
  a->fabric_sent += b->fabric_sent, a->fabric_recv += b->fabric_recv;
}

static void expect(const shape *s, hsr_op k, size_t count, size_t es, int root, const ar_rule *ar, ctr *e) {
  memset(e, 0, sizeof *e);
  uint64_t B = count * es;
  e->calls = 1;
  e->bytes_full = k == HSR_OP_BARRIER ? 0 : (k == HSR_OP_ALLGATHER || k == HSR_OP_REDUCE_SCATTER) ? B * s->n : B;
  if (count == 0 || k == HSR_OP_BARRIER) return;
  if (s->tp == T_SHM) {
    shm_expect(k, count, es, s->n, s->r, root, e);
  } else if (s->tp == T_UCX || k == HSR_OP_BCAST) { /* two-level broadcasts flat */
    ucx_expect(k, count, es, s->n, s->r, root, ar, s, rem_flat, e);
  } else {
    /* two-level: a node stage (shared memory, L members) and a cross stage
     * (UCX, m members, one per node: all of it crosses) */
    ctr nd = {0}, x = {0};
    shape xs = *s; /* the cross group: my index there, every other member remote */
    xs.r = s->xr;
    if (k == HSR_OP_ALLREDUCE) {
      /* split rail: node reduce-scatter and all-gather of q = count / L per
       * member around a cross all-reduce of my q; the count % L tail takes
       * node all-reduce + cross all-reduce (SUM here, so never the MAX path) */
      size_t q = count / (size_t)s->L, tail = count - q * (size_t)s->L;
      ctr st[5] = {{0}};
      if (q) {
        shm_expect(HSR_OP_REDUCE_SCATTER, q, es, s->L, s->nr, 0, &st[0]);
        ucx_expect(HSR_OP_ALLREDUCE, q, es, s->m, s->xr, 0, ar, &xs, rem_all, &st[1]);
        shm_expect(HSR_OP_ALLGATHER, q, es, s->L, s->nr, 0, &st[2]);
      }
      if (tail) {
        shm_expect(HSR_OP_ALLREDUCE, tail, es, s->L, s->nr, 0, &st[3]);
        ucx_expect(HSR_OP_ALLREDUCE, tail, es, s->m, s->xr, 0, ar, &xs, rem_all, &st[4]);
      }
      for (int i = 0; i < 5; i++) add(e, &st[i]);
      return;
    }
    shm_expect(k, count * (size_t)s->m, es, s->L, s->nr, 0, &nd); /* the node stage moves m blocks per member */
    ucx_expect(k, count, es, s->m, s->xr, 0, ar, &xs, rem_all, &x);
    add(e, &nd);
    add(e, &x);
  }
}

/* ---- running one op ----------------------------------------------------------------- */
static int run_op(hsr_comm *c, const char *label, const shape *s, hsr_op k, size_t count, int root, int comm_mem,
                  int inplace, const ar_rule *ar) {
  hsr_dtype dt = (count & 1) ? HSR_F32 : HSR_BF16;
  size_t es = dtype_size(dt), n = (size_t)s->n, bytes = (count * n + 16) * es;
  char *a = NULL, *b = NULL;
  if (comm_mem) {
    OK(comm_mem_alloc(c, bytes, (void **)&a));
    OK(comm_mem_alloc(c, bytes, (void **)&b));
  } else {
    a = calloc(1, bytes), b = calloc(1, bytes);
  }
  memset(a, 0, bytes);
  ctr before, after, want;
  OK(comm_counters(c, k, &before));
  size_t off = (size_t)s->r * count * es;
  switch (k) {
  case HSR_OP_ALLGATHER: OK(hsr_comm_allgather(c, inplace ? b + off : a, b, count, dt, NULL)); break;
  case HSR_OP_REDUCE_SCATTER: OK(hsr_comm_reduce_scatter(c, a, inplace ? a + off : b, count, dt, HSR_SUM, NULL)); break;
  case HSR_OP_ALLREDUCE: OK(hsr_comm_allreduce(c, a, inplace ? a : b, count, dt, HSR_SUM, NULL)); break;
  case HSR_OP_BCAST: OK(hsr_comm_bcast(c, a, count, dt, root, NULL)); break;
  default: OK(hsr_comm_barrier(c, NULL)); break;
  }
  OK(comm_counters(c, k, &after));
  expect(s, k, count, es, root, ar, &want);
  ctr got = {after.calls - before.calls,
             after.bytes_sent - before.bytes_sent,
             after.bytes_recv - before.bytes_recv,
             after.fabric_sent - before.fabric_sent,
             after.fabric_recv - before.fabric_recv,
             after.bytes_full - before.bytes_full};
  const char *names[6] = {"calls", "bytes_sent", "bytes_recv", "fabric_sent", "fabric_recv", "bytes_full"};
  const uint64_t *g = &got.calls, *w = &want.calls;
  for (int i = 0; i < 6; i++)
    CHECK(g[i] == w[i], "%s (%s, %d of %d, %d nodes): %s count %zu %s root %d: %s grew by %llu, expected %llu", label,
          tp_names[s->tp], s->r, s->n, s->m, op_name(k), count, dtype_name(dt), root, names[i],
          (unsigned long long)g[i], (unsigned long long)w[i]);
  CHECK(got.fabric_sent <= got.bytes_sent && got.fabric_recv <= got.bytes_recv, "%s: fabric above the total", label);
  if (comm_mem) {
    OK(comm_mem_free(c, a));
    OK(comm_mem_free(c, b));
  } else {
    free(a), free(b);
  }
  return 0;
}

static int run_group(hsr_comm *c, const char *label, const size_t *counts, int nc, int two_off, const ar_rule *ar,
                     uint64_t *fabric_total) {
  shape s;
  shape_of(c, two_off, &s);
  if (g_rank == 0 || s.r == 0)
    printf("[rank %d] %s: %d members on %d node(s): %s\n", g_rank, label, s.n, s.m, tp_names[s.tp]);
  int rc = 0;
  for (int i = 0; i < nc && !rc; i++) {
    size_t count = counts[i];
    int mem = i & 1, inplace = (i >> 1) & 1;
    rc |= run_op(c, label, &s, HSR_OP_ALLGATHER, count, 0, mem, inplace, ar);
    rc |= run_op(c, label, &s, HSR_OP_REDUCE_SCATTER, count, 0, !mem, inplace, ar);
    rc |= run_op(c, label, &s, HSR_OP_ALLREDUCE, count, 0, mem, !inplace, ar);
    rc |= run_op(c, label, &s, HSR_OP_BCAST, count, 0, mem, 0, ar);
    rc |= run_op(c, label, &s, HSR_OP_BCAST, count, s.n - 1, !mem, 0, ar);
  }
  rc |= run_op(c, label, &s, HSR_OP_BARRIER, 0, 0, 0, 0, ar);
  for (int k = 0; k < HSR_OP_COUNT; k++) {
    ctr t;
    OK(comm_counters(c, (hsr_op)k, &t));
    *fabric_total += t.fabric_sent + t.fabric_recv;
  }
  free(s.node);
  return rc;
}

static int parse_counts(const char *s, size_t *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    out[n++] = strtoul(s, &end, 10);
    s = *end == ',' ? end + 1 : end;
    if (end == s && *s) return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  int split = 0, nc = 4;
  size_t counts[16] = {1, 7, 1000, 20001};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--split") && i + 1 < argc)
      split = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--counts") && i + 1 < argc)
      nc = parse_counts(argv[++i], counts, 16);
    else {
      fprintf(stderr, "usage: mr_counters [--split S] [--counts LIST]\n");
      return 2;
    }
  }
  static const char *const ars[] = {"auto", "ring", "rd", NULL}, *const two[] = {"auto", "off", NULL};
  ar_rule ar = {0};
  int two_off = 0;
  if (env_choice("HSR_ALGO_ALLREDUCE", ars, 0, &ar.mode) != HSR_OK ||
      env_size("HSR_ALGO_ALLREDUCE_RD_MAX", 64 << 10, &ar.rd_max) != HSR_OK ||
      env_choice("HSR_ALGO_TWO_LEVEL", two, 0, &two_off) != HSR_OK) {
    fprintf(stderr, "%s\n", hsr_last_error());
    return 2;
  }
  if (hsr_boot_init(&g_boot) != HSR_OK) {
    fprintf(stderr, "boot: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(g_boot);
  int n = hsr_boot_size(g_boot), rc = 0;
  hsr_comm *w = NULL, *shard = NULL, *repl = NULL;
  uint64_t fabric = 0;
  if (hsr_comm_world(g_boot, HSR_BACKEND_HOST, &w) != HSR_OK) {
    fprintf(stderr, "[rank %d] world: %s\n", g_rank, hsr_last_error());
    return 1;
  }
  /* (a fresh world on several nodes has counted the all-gathers its own
   * two-level set-up ran: splits count what they move on their parent) */
  rc |= run_group(w, "world", counts, nc, two_off, &ar, &fabric);
  if (!rc && split > 0 && n % split == 0) {
    if (comm_split(w, g_rank / split, g_rank, &shard) != HSR_OK ||
        comm_split(w, g_rank % split, g_rank, &repl) != HSR_OK) {
      fprintf(stderr, "[rank %d] split: %s\n", g_rank, hsr_last_error());
      rc = 1;
    } else {
      rc |= run_group(shard, "shard", counts, nc, two_off, &ar, &fabric);
      rc |= run_group(repl, "replicate", counts, nc, two_off, &ar, &fabric);
    }
  }
  /* reset zeroes every counter */
  if (!rc && comm_counters_reset(w) == HSR_OK) {
    for (int k = 0; k < HSR_OP_COUNT; k++) {
      ctr t;
      comm_counters(w, (hsr_op)k, &t);
      if (t.calls || t.bytes_sent || t.bytes_recv || t.fabric_sent || t.fabric_recv || t.bytes_full) {
        fprintf(stderr, "[rank %d] FAIL: counters not zero after reset\n", g_rank);
        rc = 1;
      }
    }
  }
  /* fabric bytes somewhere exactly when the world spans nodes */
  double mine = (double)fabric, all = 0;
  if (hsr_comm_allreduce(w, &mine, &all, 1, HSR_F64, HSR_SUM, NULL) != HSR_OK) rc = 1;
  if ((all > 0) != (boot_num_nodes(g_boot) > 1)) {
    fprintf(stderr, "[rank %d] FAIL: %.0f fabric bytes in all on %d node(s)\n", g_rank, all, boot_num_nodes(g_boot));
    rc = 1;
  }
  hsr_comm_free(repl);
  hsr_comm_free(shard);
  hsr_comm_free(w);
  hsr_boot_finalize(g_boot);
  rc |= g_fail;
  if (g_rank == 0) printf("mr_counters: %s\n", rc ? "FAILED" : "ok");
  return rc;
}
