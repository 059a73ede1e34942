/* bf16 and f16 reductions whose results need rounding, launched for real.
 *
 *   mr_round [--counts LIST]
 *
 * Inputs have full mantissas (k / 128 or k / 1024 steps in [1, 4), both
 * signs), so nearly every sum needs rounding and many land exactly halfway
 * (ties to even). Each reduction step of a transport sums its inputs in f32
 * and rounds once (collectives/kern.c); the inputs are chosen so that every
 * such f32 sum is exact, so the result depends only on WHERE the algorithm
 * rounds, which this file models independently for each transport:
 *   shm (members on one node)   one rounding of the whole sum (AVG: of sum / n)
 *   UCX ring                    block b summed along b+1, b+2, ..., b, rounded
 *                               after every step; AVG divides at the last one
 *   UCX recursive doubling      a rounding per exchange, then AVG: sum / n
 *   two-level (2 nodes)         node sums (shm), the two node sums, then AVG
 * and every element must match bit for bit. The algorithm is chosen here by
 * the rules of collectives/select.c (HSR_ALGO_TWO_LEVEL, HSR_ALGO_ALLREDUCE,
 * HSR_ALGO_ALLREDUCE_RD_MAX). Runs on the world and, with 4 or more ranks,
 * on pairs (r / 2) and on the groups r % 2; reduce-scatter and all-reduce,
 * sum and avg, user and communicator memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "hsr/comm.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"

static int g_rank, g_fail;
static long g_checked, g_rounded, g_ties;

#include "mr_check.h"

/* ---- values: exact decode, round to nearest even (independent of kmath.h) ---- */
static double ulp_of(hsr_dtype dt, double x) {
  int e;
  frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
  int mant = dt == HSR_BF16 ? 7 : 10, emin = dt == HSR_BF16 ? -126 : -14;
  return ldexp(1.0, (e - 1 < emin ? emin : e - 1) - mant);
}
static double round_to(hsr_dtype dt, double x) {
  if (x == 0) return x;
  double ulp = ulp_of(dt, x);
  return rint(x / ulp) * ulp; /* the default rounding mode: to nearest, ties to even */
}
static int is_tie(hsr_dtype dt, double x) {
  if (x == 0) return 0;
  double q = x / ulp_of(dt, x);
  return fabs(q - floor(q) - 0.5) == 0;
}
static double decode(hsr_dtype dt, uint16_t h) {
  if (dt == HSR_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -v : v;
}
static uint16_t encode(hsr_dtype dt, double v) { /* v is representable */
  if (dt == HSR_BF16) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
  }
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double m = frexp(fabs(v), &e);
  return (uint16_t)(sign | ((e - 1 + 15) << 10) | (uint16_t)lround((m * 2 - 1) * 1024));
}

/* Input of comm rank r, element i: +-(1 + k / 2^mant) * 2^(0 or 1). */
static double input(hsr_dtype dt, int r, size_t i) {
  uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  int mant = dt == HSR_BF16 ? 7 : 10;
  double v = ldexp(1.0 + (double)(h % (1u << mant)) / (1u << mant), (int)((h >> 20) & 1));
  return (h >> 21) & 1 ? -v : v;
}

/* ---- the transports' rounding ---- */
typedef enum { M_SHM, M_RING, M_RD, M_TWO } model;
static const char *const model_names[] = {"shm", "UCX ring", "UCX recursive doubling", "two-level"};

typedef struct group {
  int n, nnodes, *node; /* node index (0..nnodes-1) of each comm rank */
} group;

/* Reduce-scatter / all-reduce result of element i of block b (op SUM or AVG). */
static double model_value(model m, hsr_dtype dt, const group *g, int b, size_t i, hsr_redop op) {
  int n = g->n;
  double acc = 0;
  switch (m) {
  case M_SHM:
    for (int r = 0; r < n; r++) acc += input(dt, r, i);
    return round_to(dt, op == HSR_AVG ? (double)((float)acc / (float)n) : acc);
  case M_RING:
    acc = input(dt, (b + 1) % n, i);
    for (int s = 2; s < n; s++) acc = round_to(dt, acc + input(dt, (b + s) % n, i));
    acc += input(dt, b, i);
    return round_to(dt, op == HSR_AVG ? (double)((float)acc / (float)n) : acc);
  case M_RD: {
    double v[64];
    for (int r = 0; r < n; r++) v[r] = input(dt, r, i);
    for (int mask = 1; mask < n; mask <<= 1)
      for (int r = 0; r < n; r++)
        if (!(r & mask)) v[r] = v[r | mask] = round_to(dt, v[r] + v[r | mask]);
    return op == HSR_AVG ? round_to(dt, (double)((float)v[0] / (float)n)) : v[0];
  }
  default: { /* two nodes: each node's sum, their sum, then avg */
    double p[2] = {0, 0};
    for (int r = 0; r < n; r++) p[g->node[r]] += input(dt, r, i);
    acc = round_to(dt, round_to(dt, p[0]) + round_to(dt, p[1]));
    return op == HSR_AVG ? round_to(dt, (double)((float)acc / (float)n)) : acc;
  }
  }
}

static int env_is(const char *name, const char *v) {
  const char *e = getenv(name);
  return e && !strcmp(e, v);
}

/* select.c's rules, for a group and an operation of `bytes`. */
static model pick(const group *g, hsr_op kind, size_t bytes) {
  if (g->nnodes == 1) return M_SHM;
  int uniform = 1, per0 = 0;
  for (int r = 0; r < g->n; r++) per0 += g->node[r] == 0;
  for (int k = 0; k < g->nnodes; k++) {
    int c = 0;
    for (int r = 0; r < g->n; r++) c += g->node[r] == k;
    uniform &= c == per0;
  }
  if (!env_is("HSR_ALGO_TWO_LEVEL", "off") && uniform && per0 >= 2) return M_TWO;
  if (kind == HSR_OP_REDUCE_SCATTER) return M_RING;
  int pow2 = !(g->n & (g->n - 1));
  const char *rdmax = getenv("HSR_ALGO_ALLREDUCE_RD_MAX");
  size_t lim = rdmax ? (size_t)atol(rdmax) : 64 << 10;
  if (pow2 && (env_is("HSR_ALGO_ALLREDUCE", "rd") || (!env_is("HSR_ALGO_ALLREDUCE", "ring") && bytes <= lim)))
    return M_RD;
  return M_RING;
}

static int group_of(hsr_boot *boot, hsr_comm *c, group *g) {
  g->n = hsr_comm_size(c);
  g->node = malloc(sizeof(int) * (size_t)g->n);
  int ids[64], nid = 0;
  if (g->n > 64) FAIL("groups of more than 64 ranks are not modelled");
  for (int r = 0; r < g->n; r++) {
    int nd = boot_node_of(boot, comm_world_rank(c, r)), k;
    for (k = 0; k < nid && ids[k] != nd; k++) {}
    if (k == nid) ids[nid++] = nd;
    g->node[r] = k;
  }
  g->nnodes = nid;
  return 0;
}

/* One reduce-scatter or all-reduce, checked element by element. */
static int run_case(hsr_comm *c, const group *g, hsr_op kind, hsr_dtype dt, hsr_redop op, size_t count, int cmem) {
  int n = g->n, r = hsr_comm_rank(c);
  size_t in_n = kind == HSR_OP_REDUCE_SCATTER ? count * (size_t)n : count, bytes = (in_n + 32) * 2;
  uint16_t *in = NULL, *out = NULL;
  if (cmem) {
    OK(comm_mem_alloc(c, bytes, (void **)&in));
    OK(comm_mem_alloc(c, bytes, (void **)&out));
  } else {
    in = malloc(bytes), out = malloc(bytes);
  }
  for (size_t i = 0; i < in_n; i++) in[i] = encode(dt, input(dt, r, i));
  model m = pick(g, kind, count * 2);
  if (m == M_TWO && g->nnodes != 2) FAIL("two-level over %d nodes is not modelled (2 only)", g->nnodes);
  if (kind == HSR_OP_REDUCE_SCATTER)
    OK(hsr_comm_reduce_scatter(c, in, out, count, dt, op, NULL));
  else
    OK(hsr_comm_allreduce(c, in, out, count, dt, op, NULL));
  int bad = 0;
  for (size_t j = 0; j < count; j++) {
    /* reduce-scatter: my block r; all-reduce: element j lies in ring slice b */
    size_t i = kind == HSR_OP_REDUCE_SCATTER ? (size_t)r * count + j : j;
    int b = r;
    if (kind == HSR_OP_ALLREDUCE)
      for (b = 0; b < n - 1 && !(j < count * (size_t)(b + 1) / (size_t)n); b++) {}
    double want = model_value(m, dt, g, b, i, op), got = decode(dt, out[j]), exact = 0;
    for (int q = 0; q < n; q++) exact += input(dt, q, i);
    if (op == HSR_AVG) exact /= n;
    g_rounded += want != exact;
    g_ties += is_tie(dt, exact);
    if (got != want && bad++ < 3)
      CHECK(0,
            "%s %s %s count %zu (%s memory), group of %d over %d node(s), %s model: element %zu is %.9g, "
            "expected %.9g (exact %.9g)",
            op_name(kind), dtype_name(dt), redop_name(op), count, cmem ? "comm" : "user", n, g->nnodes, model_names[m],
            j, got, want, exact);
  }
  g_checked += (long)count;
  if (cmem) {
    comm_mem_free(c, in);
    comm_mem_free(c, out);
  } else {
    free(in), free(out);
  }
  return 0;
}

static int run_group(hsr_boot *boot, hsr_comm *c, const size_t *counts, int nc) {
  group g;
  if (group_of(boot, c, &g)) return 1;
  const hsr_dtype dts[2] = {HSR_BF16, HSR_F16};
  for (int ci = 0; ci < nc; ci++)
    for (int d = 0; d < 2; d++)
      for (int o = 0; o < 2; o++) {
        hsr_redop op = o ? HSR_AVG : HSR_SUM;
        int cmem = (ci + d + o) & 1;
        if (run_case(c, &g, HSR_OP_REDUCE_SCATTER, dts[d], op, counts[ci], cmem) ||
            run_case(c, &g, HSR_OP_ALLREDUCE, dts[d], op, counts[ci], !cmem))
          return free(g.node), 1;
      }
  if (g_rank == 0)
    printf("%-12s %d ranks over %d node(s): reduce-scatter %s, all-reduce %s (largest count)\n", comm_name(c), g.n,
           g.nnodes, model_names[pick(&g, HSR_OP_REDUCE_SCATTER, counts[nc - 1] * 2)],
           model_names[pick(&g, HSR_OP_ALLREDUCE, counts[nc - 1] * 2)]);
  free(g.node);
  return 0;
}

int main(int argc, char **argv) {
  size_t counts[8] = {1, 7, 1003, 100003};
  int nc = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--counts") && i + 1 < argc) {
      nc = 0;
      for (char *t = strtok(argv[++i], ","); t && nc < 8; t = strtok(NULL, ",")) counts[nc++] = strtoull(t, 0, 10);
    } else {
      fprintf(stderr, "usage: mr_round [--counts LIST]\n");
      return 2;
    }
  }
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) return fprintf(stderr, "boot: %s\n", hsr_last_error()), 1;
  g_rank = hsr_boot_rank(boot);
  int n = hsr_boot_size(boot), rc = 0;
  hsr_comm *w = NULL, *pair = NULL, *cross = NULL;
  OK(hsr_comm_world(boot, HSR_BACKEND_HOST, &w));
  rc = run_group(boot, w, counts, nc);
  if (!rc && n >= 4 && n % 2 == 0) {
    OK(comm_split(w, g_rank / 2, g_rank, &pair));
    OK(comm_split(w, g_rank % 2, g_rank, &cross));
    rc = run_group(boot, pair, counts, nc) || run_group(boot, cross, counts, nc);
    hsr_comm_free(pair);
    hsr_comm_free(cross);
  }
  hsr_comm_free(w);
  CHECK(g_rounded > g_checked / 4, "only %ld of %ld results needed rounding", g_rounded, g_checked);
  CHECK(g_ties > 0, "no result was a tie");
  if (!rc && !g_fail && g_rank == 0)
    printf("mr_round OK: %ld elements checked on rank 0, %ld needed rounding, %ld ties\n", g_checked, g_rounded,
           g_ties);
  hsr_boot_finalize(boot);
  return rc || g_fail;
}
