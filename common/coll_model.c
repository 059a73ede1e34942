/* The pure model of the host collectives' algorithms (model.h): the rules
 * that pick a transport and a row, and each algorithm's bytes per rank as
 * the counters count them (tests/mr_counters.c derives the same figures by
 * hand from the message patterns; tests/test_tune.c holds them to hand-
 * computed cases; test_coll_model checks every algorithm has one). */
#include <math.h>
#include <string.h>

#include "coll_model.h"

coll_model_tp coll_model_transport(int nodes, int per_node, int two_level) {
  if (nodes <= 1) return COLL_MODEL_SHM;
  if (two_level != COLL_TWO_OFF && per_node >= 2) return COLL_MODEL_TWO;
  return COLL_MODEL_UCX;
}

/* Recursive doubling for power-of-two groups when asked (HSR_ALGO_ALLREDUCE=rd)
 * or, by default, up to HSR_ALGO_ALLREDUCE_RD_MAX bytes. */
int coll_model_rd(const coll_model_cfg *cfg, int n, double bytes) {
  if (n < 1 || (n & (n - 1))) return 0;
  if (cfg->allreduce == COLL_AR_RING) return 0;
  if (cfg->allreduce == COLL_AR_RD) return 1;
  return bytes <= cfg->rd_max_bytes;
}

static int ilog2(int n) {
  int k = 0;
  while ((1 << (k + 1)) <= n) k++;
  return k;
}

static void stage(coll_model_vol *v, int tier, int op, double bytes) {
  if (v->nstages < COLL_MODEL_MAX_STAGES) v->stage[v->nstages++] = (coll_model_stage){tier, op, bytes, 0};
}

/* A UCX algorithm's one cross stage: `sent` bytes each way per rank, `fabric` of them across nodes. */
static void cross(coll_model_vol *v, int op, double sent, double fabric, double stage_bytes) {
  v->sent += sent, v->recv += sent;
  v->fabric_sent += fabric, v->fabric_recv += fabric;
  stage(v, COLL_MODEL_CROSS, op, stage_bytes);
}

/* Shared memory among n members: every rank reads (n-1) blocks; all-reduce
 * reduces its slice from the others' inputs, then reads the others' slices;
 * broadcast: the others read the root's vector. */
static double shm_bytes(int op, int n, double B) {
  if (n < 2) return 0;
  if (op == COLL_MODEL_BCAST) return B * (n - 1) / n;
  if (op == COLL_MODEL_BARRIER) return 0;
  return op == COLL_MODEL_AR ? 2.0 * B * (n - 1) / n : B * (n - 1);
}

static void shm_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                    coll_model_vol *v) {
  (void)cfg, (void)es;
  double b = shm_bytes(op, g->n, B);
  v->sent += b, v->recv += b;
  stage(v, COLL_MODEL_INTRA, op, b);
  v->algo = "shared memory";
}

/* The share of a UCX group's hops that reach another node. */
static double ring_frac(const coll_model_shape *g) {
  return g->nodes > 1 ? (g->n == g->nodes ? 1.0 : (double)g->nodes / g->n) : 0;
}

static void ucx_ring_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                         coll_model_vol *v) {
  (void)cfg, (void)es;
  int n = g->n;
  double frac = ring_frac(g);
  double sent = op == COLL_MODEL_AR ? 2.0 * B * (n - 1) / n : B * (n - 1);
  v->algo = "ucx ring";
  cross(v, op, sent, sent * frac, sent);
}

/* log2(n) exchanges of the vector; with p members per node the partner
 * r ^ mask is remote for the log2(nodes) largest masks */
static void ucx_rd_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                       coll_model_vol *v) {
  (void)cfg, (void)es;
  double sent = ilog2(g->n) * B;
  double frac = g->nodes > 1 ? (double)ilog2(g->nodes) / ilog2(g->n) : 0;
  v->algo = "ucx recursive doubling";
  cross(v, op, sent, sent * frac, sent);
}

/* the root sends the vector to every member: (n-1)/n of it per rank on average */
static void ucx_flat_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                         coll_model_vol *v) {
  (void)cfg, (void)es;
  int n = g->n;
  double mean = B * (n - 1) / n, frac = g->nodes > 1 ? (double)(g->nodes - 1) / g->nodes : 0;
  v->algo = "ucx flat";
  cross(v, op, mean, B * frac, B * (n - 1));
}

/* ceil(log2 n) rounds of empty messages: latency only */
static void ucx_dissem_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                           coll_model_vol *v) {
  (void)cfg, (void)g, (void)B, (void)es;
  v->algo = "ucx dissemination";
  stage(v, COLL_MODEL_CROSS, op, 0);
}

/* UCX's rows: all-reduce by the rule, broadcast flat, barrier by dissemination, else the ring. */
static void ucx_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                    coll_model_vol *v) {
  if (op == COLL_MODEL_AR && coll_model_rd(cfg, g->n, B))
    ucx_rd_vol(cfg, op, g, B, es, v);
  else if (op == COLL_MODEL_BCAST)
    ucx_flat_vol(cfg, op, g, B, es, v);
  else if (op == COLL_MODEL_BARRIER)
    ucx_dissem_vol(cfg, op, g, B, es, v);
  else
    ucx_ring_vol(cfg, op, g, B, es, v);
}

/* A node stage of shared memory among L members, a cross stage of UCX among
 * the m nodes (one member each, every hop remote). */
static void two_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                    coll_model_vol *v) {
  int L = g->per_node, m = g->nodes;
  const coll_model_shape x = {m, m, 1, m};
  if (op != COLL_MODEL_AG && op != COLL_MODEL_RS && op != COLL_MODEL_AR) { /* flat UCX rows */
    ucx_vol(cfg, op, g, B, es, v);
    return;
  }
  if (op != COLL_MODEL_AR) { /* node stage over m blocks per member, cross ring of one block */
    double nb = shm_bytes(op, L, B * m);
    v->sent += nb, v->recv += nb;
    stage(v, COLL_MODEL_INTRA, op, nb);
    ucx_vol(cfg, op, &x, B, es, v);
  } else if (!cfg->split_rail) { /* node all-reduce, cross all-reduce of the whole vector */
    double nb = shm_bytes(op, L, B);
    v->sent += nb, v->recv += nb;
    stage(v, COLL_MODEL_INTRA, op, nb);
    ucx_vol(cfg, op, &x, B, es, v);
  } else { /* split rail: node reduce-scatter of q = count / L, cross all-reduce of q, node all-gather;
            * the count % L tail: node all-reduce, cross all-reduce */
    double q = floor(B / es / L), tail = B / es - q * L;
    if (q > 0) {
      double rs = shm_bytes(COLL_MODEL_RS, L, q * es);
      v->sent += 2 * rs, v->recv += 2 * rs;
      stage(v, COLL_MODEL_INTRA, COLL_MODEL_RS, rs);
      ucx_vol(cfg, op, &x, q * es, es, v);
      stage(v, COLL_MODEL_INTRA, COLL_MODEL_AG, rs);
    }
    if (tail > 0) {
      double nb = shm_bytes(op, L, tail * es);
      v->sent += nb, v->recv += nb;
      stage(v, COLL_MODEL_INTRA, op, nb);
      ucx_vol(cfg, op, &x, tail * es, es, v);
    }
  }
  v->algo = "two-level";
  for (int i = 0; i < v->nstages; i++) v->stage[i].span = 1 + op;
}

/* NCCL: inside a node over NVLink; across, its ring, bound by the network
 * (by NVLink inside one domain). */
static void nccl_vol(const coll_model_cfg *cfg, int op, const coll_model_shape *g, double B, size_t es,
                     coll_model_vol *v) {
  (void)cfg, (void)es;
  double b = shm_bytes(op, g->n, B);
  v->sent += b, v->recv += b;
  if (g->nodes == 1) {
    stage(v, COLL_MODEL_INTRA, op, b);
    v->algo = "nccl (nvlink)";
    return;
  }
  double frac = (double)g->nodes / g->n;
  v->fabric_sent += b * frac, v->fabric_recv += b * frac;
  stage(v, g->domains == 1 ? COLL_MODEL_INTRA : COLL_MODEL_CROSS, op, b);
  v->algo = "nccl ring";
}

const coll_model_algo coll_model_shm = {"shared memory", shm_vol};
const coll_model_algo coll_model_ucx_ring = {"ucx ring", ucx_ring_vol};
const coll_model_algo coll_model_ucx_rd = {"ucx recursive doubling", ucx_rd_vol};
const coll_model_algo coll_model_ucx_flat = {"ucx flat", ucx_flat_vol};
const coll_model_algo coll_model_ucx_dissem = {"ucx dissemination", ucx_dissem_vol};
const coll_model_algo coll_model_two = {"two-level", two_vol};
const coll_model_algo coll_model_nccl = {"nccl", nccl_vol};

void coll_model_volume(const coll_model_cfg *cfg, int gpu, int op, const coll_model_shape *g, double B, size_t es,
                       coll_model_vol *v) {
  memset(v, 0, sizeof *v);
  v->algo = "local";
  if (g->n == 1 || B == 0) return;
  if (gpu) {
    nccl_vol(cfg, op, g, B, es, v);
    return;
  }
  switch (coll_model_transport(g->nodes, g->per_node, COLL_TWO_AUTO)) {
  case COLL_MODEL_SHM: shm_vol(cfg, op, g, B, es, v); break;
  case COLL_MODEL_TWO: two_vol(cfg, op, g, B, es, v); break;
  case COLL_MODEL_UCX: ucx_vol(cfg, op, g, B, es, v); break;
  }
}
