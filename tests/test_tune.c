/* Unit tests of hsr tune (tune/tune.h) on hand-computed cases: the volumes of
 * each collective as the communicators count them (tests/mr_counters.c
 * derives the same from the message patterns), the bytes a step moves per
 * layout (fsdp across nodes 3P, hybrid 2P, partial reshard 2P, ddp 8P of
 * the parameters' bytes P), the ledger in bytes per parameter, the timeline,
 * the fit to bench JSON, the recommendation where the answer is known, the
 * emitters and bad inputs; the activation model and recompute in the search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "tune/tune.h"
#include "topology/topology_internal.h"
#include "runtime/io/ledger_internal.h"
#include "runtime/runtime_internal.h"

#define EQ(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-9 * (1 + fabs((double)(b))))

static tune_net host(void) {
  tune_net n;
  assert_int_equal(tune_net_default("host", &n), HSR_OK);
  return n;
}

static void vol(const tune_net *n, int op, tune_shape g, double count, tune_vol *v) {
  assert_int_equal(tune_volume(n, op, &g, count, 4, v), HSR_OK);
}

static void test_volumes(void **state) {
  (void)state;
  tune_net n = host();
  tune_vol v;
  /* shared memory, 4 ranks, 1000 f32 each (B = 4000): every rank reads 3 blocks */
  vol(&n, HSR_OP_ALLGATHER, (tune_shape){4, 1, 4, 1}, 1000, &v);
  EQ(v.sent, 12000), EQ(v.recv, 12000), EQ(v.fabric_sent, 0), EQ(v.full, 16000);
  assert_int_equal(v.nstages, 1);
  assert_int_equal(v.stage[0].tier, HSR_TUNE_INTRA);
  vol(&n, HSR_OP_REDUCE_SCATTER, (tune_shape){4, 1, 4, 1}, 1000, &v);
  EQ(v.sent, 12000), EQ(v.full, 16000);
  /* all-reduce of 4000 bytes: reduce my quarter from 3 peers, read 3 quarters */
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){4, 1, 4, 1}, 1000, &v);
  EQ(v.sent, 6000), EQ(v.recv, 6000), EQ(v.full, 4000);
  /* 2 ranks on 2 nodes: a UCX ring, everything crosses */
  vol(&n, HSR_OP_ALLGATHER, (tune_shape){2, 2, 1, 2}, 1000, &v);
  EQ(v.sent, 4000), EQ(v.fabric_sent, 4000), EQ(v.fabric_recv, 4000);
  assert_int_equal(v.stage[0].tier, HSR_TUNE_CROSS);
  /* small all-reduce: recursive doubling, log2(2) exchanges of the vector; large: ring, 2V(n-1)/n */
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){2, 2, 1, 2}, 1000, &v);
  EQ(v.sent, 4000), EQ(v.fabric_sent, 4000);
  assert_string_equal(v.algo, "ucx recursive doubling");
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){2, 2, 1, 2}, 100000, &v);
  EQ(v.sent, 400000);
  assert_string_equal(v.algo, "ucx ring");
  /* 8 ranks, 2 nodes of 4: two-level; node stage 3 x 2 blocks, cross ring 1 block */
  vol(&n, HSR_OP_ALLGATHER, (tune_shape){8, 2, 4, 2}, 1000, &v);
  EQ(v.sent, 28000), EQ(v.recv, 28000), EQ(v.fabric_sent, 4000), EQ(v.full, 32000);
  assert_int_equal(v.nstages, 2);
  EQ(v.stage[0].bytes, 24000), EQ(v.stage[1].bytes, 4000);
  /* two-level all-reduce as the collectives run it, UCC's split rail: node reduce-scatter of a
   * quarter (3 x 100000 bytes), that quarter all-reduced across (a ring of 2: 100000), node all-gather */
  assert_int_equal(n.ar2, HSR_TUNE_AR2_SPLIT_RAIL);
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){8, 2, 4, 2}, 100000, &v);
  EQ(v.sent, 300000 * 2 + 100000), EQ(v.fabric_sent, 100000);
  assert_int_equal(v.nstages, 3);
  /* 1002 elements: quarters of 250 (3000 each way, 1000 across by recursive doubling), and the
   * 2-element tail node all-reduced (2 x 8 x 3/4) and all-reduced across (8) */
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){8, 2, 4, 2}, 1002, &v);
  EQ(v.sent, 6000 + 1000 + 12 + 8), EQ(v.fabric_sent, 1008);
  assert_int_equal(v.nstages, 5);
  /* the shape before the split rail: the whole vector crossed from every local rank */
  n.ar2 = HSR_TUNE_AR2_FULL;
  vol(&n, HSR_OP_ALLREDUCE, (tune_shape){8, 2, 4, 2}, 100000, &v);
  EQ(v.sent, 600000 + 400000), EQ(v.fabric_sent, 400000);
  n.ar2 = HSR_TUNE_AR2_SPLIT_RAIL;
  /* one rank: nothing moves */
  vol(&n, HSR_OP_ALLGATHER, (tune_shape){1, 1, 1, 1}, 1000, &v);
  EQ(v.sent, 0), EQ(v.full, 4000);
  assert_int_equal(v.nstages, 0);
  /* NCCL across nodes: one ring bound by the network, 2 of its 16 hops cross */
  tune_net g;
  assert_int_equal(tune_net_default("h100", &g), HSR_OK);
  vol(&g, HSR_OP_ALLGATHER, (tune_shape){16, 2, 8, 2}, 1000, &v);
  EQ(v.sent, 60000), EQ(v.fabric_sent, 7500);
  assert_int_equal(v.stage[0].tier, HSR_TUNE_CROSS);
  /* time: alpha + bytes / busbw per stage */
  for (int op = 0; op < HSR_TUNE_OPS; op++) n.link[HSR_TUNE_INTRA][op].alpha_us = 10, n.link[0][op].busbw_gbs = 1;
  vol(&n, HSR_OP_ALLGATHER, (tune_shape){4, 1, 4, 1}, 1000, &v);
  EQ(tune_coll_time(&n, &v), 10e-6 + 12000 / 1e9);
  /* bad input */
  tune_shape bad = {2, 3, 1, 1};
  assert_int_equal(tune_volume(&n, HSR_OP_ALLGATHER, &bad, 10, 4, &v), HSR_ERR_INVALID);
  tune_shape ok = {2, 1, 2, 1};
  assert_int_equal(tune_volume(&n, HSR_OP_BCAST, &ok, 10, 4, &v), HSR_ERR_INVALID);
  assert_int_equal(tune_net_default("tpu", &n), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "h100"));
}

/* 8 ranks as 2 nodes of 4, one domain per node. */
static hsr_cluster *two_nodes(void) {
  int node[8], gpu[8];
  for (int r = 0; r < 8; r++) node[r] = r / 4, gpu[r] = -1;
  hsr_cluster *c;
  assert_int_equal(cluster_create(8, node, gpu, node, &c), HSR_OK);
  return c;
}

/* Two units of 8192 f32 (P = 65536 bytes): no padding for S up to 8. */
static const tune_model two_units = {.units = 2, .params = 16384, .fwd_ms = 1, .bwd_ratio = 2};

static tune_result eval_outer(const tune_net *n, const tune_model *m, hsr_rt_strategy s, int S, int K,
                                  hsr_rt_reshard pol, int prefetch, hsr_dtype pdt, hsr_rt_outer outer) {
  hsr_cluster *c = two_nodes();
  hsr_mesh *mesh;
  mesh_request q = {S, 0, K};
  assert_int_equal(mesh_plan(c, &q, &mesh), HSR_OK);
  tune_shape sh[HSR_RT_GROUP_COUNT];
  assert_int_equal(tune_mesh_shapes(c, mesh, sh), HSR_OK);
  hsr_rt_config cfg;
  hsr_rt_config_default(&cfg);
  cfg.strategy = s, cfg.reshard = pol, cfg.partial_k = K, cfg.prefetch = prefetch, cfg.param_dtype = pdt;
  cfg.outer_shard = outer;
  tune_result r;
  assert_int_equal(tune_eval(m, n, &cfg, S, 8 / S, sh, &r), HSR_OK);
  mesh_free(mesh);
  cluster_free(c);
  return r;
}

static tune_result eval(const tune_net *n, const tune_model *m, hsr_rt_strategy s, int S, int K,
                            hsr_rt_reshard pol, int prefetch, hsr_dtype pdt) {
  return eval_outer(n, m, s, S, K, pol, prefetch, pdt, HSR_RT_OUTER_NONE);
}

static void test_step_bytes(void **state) {
  (void)state;
  tune_net n = host();
  const double P = 65536;
  /* fsdp over both nodes: forward and backward gathers and the reduce-scatter each send P across
   * (8 ranks x a 4096-byte shard); the norm's 8-byte all-reduce adds 8 per rank */
  tune_result f = eval(&n, &two_units, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(f.fabric_all_ranks, 3 * P + 64);
  EQ(f.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER].calls, 4);
  EQ(f.bytes[HSR_RT_GROUP_SHARD][HSR_OP_REDUCE_SCATTER].calls, 2);
  EQ(f.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLREDUCE].calls, 1);
  EQ(f.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER].sent, 4 * (3 * 2 * 4096 + 4096));
  EQ(f.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER].full, 4 * 32768);
  /* hybrid 2 x 4: only the replicate all-reduce of each unit's quarter crosses */
  tune_result h = eval(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  EQ(h.fabric_all_ranks, 2 * P);
  const tune_bytes *ag = &h.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER];
  const tune_bytes *ar = &h.bytes[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE];
  EQ(ag->sent, ag->recv), EQ(ag->fabric_sent, 0), EQ(ag->sent, 4 * 3 * 8192);
  EQ(ar->calls, 2), EQ(ar->sent, 2 * 8192), EQ(ar->fabric_sent, ar->sent), EQ(ar->full, 2 * 8192);
  /* the same with the outer shard: the all-reduce of each quarter becomes a reduce-scatter and,
   * after the step, an all-gather over R of its half (4096 bytes each way over two ranks): the
   * same 2P across, plus the norm's second 8-byte all-reduce (over R: 8 ranks x 8 bytes) */
  tune_result o =
      eval_outer(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32, HSR_RT_OUTER_OPTIM);
  EQ(o.fabric_all_ranks, 2 * P + 64);
  const tune_bytes *ors = &o.bytes[HSR_RT_GROUP_REPLICATE][HSR_OP_REDUCE_SCATTER];
  const tune_bytes *oag = &o.bytes[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLGATHER];
  const tune_bytes *oar = &o.bytes[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE];
  EQ(ors->calls, 2), EQ(oag->calls, 2), EQ(oar->calls, 1), EQ(oar->sent, 8);
  EQ(ors->sent, 2 * 4096), EQ(oag->sent, 2 * 4096), EQ(ors->sent + oag->sent, ar->sent);
  EQ(ors->fabric_sent + oag->fabric_sent, ar->fabric_sent);
  EQ(o.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER].sent, ag->sent); /* the shard group's traffic is unchanged */
  assert_true(o.step_ms > h.step_ms);                               /* the gather over R waits at the end of the step */
  /* fsdp over both nodes with partial:4: the backward gathers stay in the node */
  tune_result p = eval(&n, &two_units, HSR_RT_FSDP, 8, 4, HSR_RT_RESHARD_PARTIAL, 0, HSR_F32);
  EQ(p.fabric_all_ranks, 2 * P + 64);
  EQ(p.bytes[HSR_RT_GROUP_PARTIAL][HSR_OP_ALLGATHER].calls, 2);
  EQ(p.bytes[HSR_RT_GROUP_PARTIAL][HSR_OP_ALLGATHER].fabric_sent, 0);
  /* zero1 2 x 4: the shard group all-reduces in full, the replicate group the slices: 2P across */
  tune_result z = eval(&n, &two_units, HSR_RT_ZERO1, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(z.fabric_all_ranks, 2 * P);
  EQ(z.bytes[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER].calls, 2); /* the re-gathers after the step */
  /* ddp: the split rail sends each local rank's quarter across once: 2P (8P when every local rank
   * sent the whole vector, the two-level all-reduce before the split rail) */
  tune_result d = eval(&n, &two_units, HSR_RT_DDP, 1, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(d.fabric_all_ranks, 2 * P);
  n.ar2 = HSR_TUNE_AR2_FULL;
  d = eval(&n, &two_units, HSR_RT_DDP, 1, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(d.fabric_all_ranks, 8 * P);
  assert_true(f.fabric_all_ranks > h.fabric_all_ranks);
}

static void test_ledger(void **state) {
  (void)state;
  tune_net n = host();
  /* fsdp, f32: the master is the parameter shard; it, the gradient accumulator, m and v: 16/S */
  tune_result r = eval(&n, &two_units, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  EQ(r.persistent_per_param * 8, 16);
  EQ(r.peak_cat[HSR_MEM_PARAM_SHARD], 0);
  /* bf16 parameters keep no bf16 shard beside the master (FSDP2: the gather input is cast from it,
   * a transient staging buffer of Ls x 2): 16/S too */
  r = eval(&n, &two_units, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_FULL, 1, HSR_BF16);
  EQ(r.persistent_per_param * 8, 16);
  EQ(r.peak_cat[HSR_MEM_PARAM_SHARD], 0);
  assert_true(r.peak_cat[HSR_MEM_STAGING] >= 8192 / 8 * 2); /* a cast gather input of the larger unit */
  r = eval(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_BF16);
  EQ(r.persistent_per_param * 4, 16);
  /* the outer shard, 2 x 4: master, m, v and accumulator over S x R = 8 (16/8), the bf16 shard
   * 2/4: 2.5; f32: the master lives in the f32 shard: 4/4 + 12/8 = 2.5 as well */
  r = eval_outer(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_BF16, HSR_RT_OUTER_OPTIM);
  EQ(r.persistent_per_param, 16.0 / 8 + 2.0 / 4);
  r = eval_outer(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32, HSR_RT_OUTER_OPTIM);
  EQ(r.persistent_per_param, 4.0 / 4 + 12.0 / 8);
  EQ(r.peak_cat[HSR_MEM_MASTER], 0);
  /* zero1 / zero2, f32: the whole parameters (4) + 16/S; ddp: 20 */
  r = eval(&n, &two_units, HSR_RT_ZERO1, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(r.persistent_per_param, 4 + 16.0 / 4);
  /* its peak adds the full f32 gradient of a unit and its all-reduced slice: with one unit
   * 4 + 4 + 16/S + 4/S (the textbook zero1 "8 + 12/S" counts a whole gradient and no accumulator) */
  tune_model one = {.units = 1, .params = 8192, .fwd_ms = 1, .bwd_ratio = 2};
  r = eval(&n, &one, HSR_RT_ZERO1, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ((double)r.runtime_peak / 8192, 8 + 16.0 / 4 + 4.0 / 4);
  r = eval(&n, &two_units, HSR_RT_ZERO2, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(r.persistent_per_param, 4 + 16.0 / 4);
  r = eval(&n, &two_units, HSR_RT_DDP, 1, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  EQ(r.persistent_per_param, 20);
  /* reshard none keeps every unit gathered from its forward to its backward: 2 units x 32768 bytes */
  r = eval(&n, &two_units, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_NONE, 0, HSR_F32);
  assert_int_equal(r.peak_cat[HSR_MEM_FULL_UNIT], 2 * 32768);
  /* partial:4 keeps a quarter of each */
  r = eval(&n, &two_units, HSR_RT_FSDP, 8, 4, HSR_RT_RESHARD_PARTIAL, 0, HSR_F32);
  assert_int_equal(r.peak_cat[HSR_MEM_PARTIAL_SLICE], 2 * 32768 / 4);
}

/* The case: S = 8 inside a node, R = 8 nodes, bf16 parameters, f32 reduction. Without
 * the outer shard every rank holds 16/S = 2 bytes per parameter (master, m, v, gradient
 * accumulator; FSDP2's footprint, no bf16 shard beside the master). With it, master, m, v and
 * the accumulator cover 1/(S R): 16/64 = 0.25, and the bf16 parameter shard that the gather over
 * R rebuilds 2/S = 0.25: 0.5 bytes. rs_only with micro-batches keeps the accumulator at the
 * shard (its micro-batches sum whole slices before the one reduce-scatter over R): 0.9375. */
static void test_outer_bytes(void **state) {
  (void)state;
  tune_net n = host();
  tune_shape sh[HSR_RT_GROUP_COUNT] = {{8, 1, 8, 1}, {8, 8, 1, 8}, {1, 1, 1, 1}};
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = HSR_RT_HYBRID;
  c.param_dtype = HSR_BF16;
  tune_result r;
  assert_int_equal(tune_eval(&two_units, &n, &c, 8, 8, sh, &r), HSR_OK);
  EQ(r.persistent_per_param, 16.0 / 8);
  c.outer_shard = HSR_RT_OUTER_OPTIM;
  assert_int_equal(tune_eval(&two_units, &n, &c, 8, 8, sh, &r), HSR_OK);
  EQ(r.persistent_per_param, 16.0 / 64 + 2.0 / 8);
  EQ((double)r.peak_cat[HSR_MEM_MASTER] / 16384, 4.0 / 64);
  EQ((double)r.peak_cat[HSR_MEM_GRAD_SHARD] / 16384, 4.0 / 64);
  EQ((double)r.peak_cat[HSR_MEM_PARAM_SHARD] / 16384, 2.0 / 8);
  c.micro_batches = 2;
  c.sync = HSR_RT_SYNC_RS_ONLY;
  assert_int_equal(tune_eval(&two_units, &n, &c, 8, 8, sh, &r), HSR_OK);
  EQ(r.persistent_per_param, 12.0 / 64 + 4.0 / 8 + 2.0 / 8);
}

/* A net where only bandwidth counts: no latency, no data work, no optimizer. */
static tune_net clean(double intra, double cross) {
  tune_net n = host();
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    n.link[HSR_TUNE_INTRA][op] = (tune_link){.busbw_gbs = intra};
    n.link[HSR_TUNE_CROSS][op] = (tune_link){.busbw_gbs = cross};
  }
  n.steal[0] = n.steal[1] = 0;
  n.optim_ns_per_elem = 0;
  n.data_gbs = 1e12;
  return n;
}

static void test_timeline(void **state) {
  (void)state;
  tune_net n = clean(1, 1);
  tune_model m = {.units = 1, .params = 8192, .fwd_ms = 0, .bwd_ratio = 2};
  /* S = 4 on one node... here 8 on two: use hybrid 2 x 4, one unit, no compute: gathers
   * (2 x 3 x 8192 bytes), reduce-scatter (3 x 8192), replicate all-reduce (8192), norm (12 bytes) */
  tune_result r = eval(&n, &m, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  double want = (2 * 3 * 8192 + 3 * 8192 + 8192 + 12) / 1e9 * 1e3;
  assert_true(fabs(r.comm_ms - want) < 1e-6);
  assert_true(fabs(r.exposed_ms - want) < 1e-6);
  assert_true(r.step_ms >= r.comm_ms - 1e-9);
  /* compute hides a prefetched gather: same communication, less of it exposed */
  tune_model m2 = {.units = 4, .params = 4 * 8192, .fwd_ms = 1, .bwd_ratio = 2};
  tune_result p0 = eval(&n, &m2, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  tune_result p1 = eval(&n, &m2, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  assert_true(fabs(p0.comm_ms - p1.comm_ms) < 1e-6);
  assert_true(p1.exposed_ms < p0.exposed_ms);
  assert_true(p1.step_ms < p0.step_ms);
  EQ(p0.compute_ms, 4 * 3);
  /* contention between the tiers: half the bandwidth while the other tier runs costs time */
  tune_net c = clean(0.001, 0.001);
  tune_result a = eval(&c, &m2, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  c.concurrent[0] = c.concurrent[1] = 0.5;
  tune_result b = eval(&c, &m2, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  assert_true(b.comm_ms > a.comm_ms * 1.01);
  /* a collective that takes the cores slows the compute beside it */
  c.steal[0] = c.steal[1] = 0.5;
  tune_result s = eval(&c, &m2, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
  assert_true(s.compute_ms > b.compute_ms * 1.01);
}

/* One bench row of an all-gather or reduce-scatter of B = 4 x count bytes
 * per rank: time = alpha + x / busbw (us, bytes), x what the rank sent. */
static void row(char *b, size_t len, double x, double fab, int n, int nodes, double t_us, int conc) {
  size_t o = strlen(b);
  /* the block each rank contributes: shared memory and rings send (n-1) blocks, two-level 1 across */
  double B = nodes == 1 || n == nodes ? x / (n - 1) : fab / 2;
  snprintf(b + o, len - o,
           "%s{\"size\":%g,\"count\":%.9g,\"type\":\"float\",\"out_of_place\":{\"time\":%.9g},\"in_place\":{"
           "\"time\":%.9g},\"hsr\":{\"group_size\":%d,\"nodes_spanned\":%d,\"concurrent_with\":[%s],"
           "\"out_of_place\":{\"sent_bytes_per_op\":%.9g,\"fabric_bytes_per_op\":%.9g},\"in_place\":{\"sent_bytes_"
           "per_op\":%.9g,\"fabric_bytes_per_op\":%.9g}}}",
           o && b[o - 1] == '}' ? "," : "", B * n, B / 4, t_us, t_us, n, nodes, conc ? "\"replicate\"" : "", x, fab, x,
           fab);
}

static void test_calib(void **state) {
  (void)state;
  static char j[16384];
  snprintf(j, sizeof j, "{\"hsr\":{\"collective\":\"all_gather\"},\"results\":[");
  for (double x = 3e4; x < 1e7; x *= 10) {
    row(j, sizeof j, x, 0, 4, 1, 20 + x / 2000, 0); /* intra: 20 us, 2 GB/s */
    /* fabric_bytes_per_op is what crossed nodes sent plus received, as hsr bench writes it */
    row(j, sizeof j, x, 2 * x, 2, 2, 50 + x / 100, 0); /* cross: 50 us, 0.1 GB/s */
    row(j, sizeof j, x, 0, 4, 1, 20 + x / 1000, 1);    /* intra beside the other tier: 1 GB/s */
    row(j, sizeof j, 6 * x + x, 2 * x, 8, 2, (20 + 6 * x / 2000) + (50 + x / 100), 0); /* two-level */
  }
  strcat(j, "]}");
  tune_calib *c;
  assert_int_equal(tune_calib_create(&c), HSR_OK);
  assert_int_equal(tune_calib_add_json(c, j, "/tmp/x/ag.json"), HSR_OK);
  assert_int_equal(tune_calib_rows(c), 24);
  tune_net n = host();
  char rep[2048];
  assert_int_equal(tune_calib_fit(c, &n, rep, sizeof rep), HSR_OK);
  const tune_link *a = &n.link[HSR_TUNE_INTRA][HSR_OP_ALLGATHER], *x = &n.link[HSR_TUNE_CROSS][HSR_OP_ALLGATHER];
  assert_true(fabs(a->alpha_us - 20) < 1e-6 && fabs(a->busbw_gbs - 2) < 1e-9);
  assert_true(fabs(x->alpha_us - 50) < 1e-6 && fabs(x->busbw_gbs - 0.1) < 1e-9);
  assert_int_equal(a->samples, 6);
  assert_int_equal(x->samples, 6); /* the flat rows; the two-level ones fit the span factor */
  assert_true(fabs(n.span[HSR_OP_ALLGATHER] - 1) < 1e-9);
  assert_int_equal(n.span_samples[HSR_OP_ALLGATHER], 6);
  /* two-level rows exactly their stages: their cross stage's fit is the flat one */
  assert_true(fabs(n.span_link[HSR_OP_ALLGATHER].alpha_us - 50) < 1e-6);
  assert_true(fabs(n.span_link[HSR_OP_ALLGATHER].busbw_gbs - 0.1) < 1e-9);
  assert_false(a->is_default);
  assert_non_null(strstr(a->source, "ag.json"));
  assert_true(fabs(n.concurrent[HSR_TUNE_INTRA] - 0.5) < 1e-6);
  assert_false(n.concurrent_default[HSR_TUNE_INTRA]);
  /* no reduce-scatter rows: taken as the all-gather, and said so */
  assert_true(fabs(n.link[HSR_TUNE_INTRA][HSR_OP_REDUCE_SCATTER].busbw_gbs - 2) < 1e-9);
  assert_non_null(strstr(n.link[HSR_TUNE_INTRA][HSR_OP_REDUCE_SCATTER].source, "assumed"));
  assert_non_null(strstr(rep, "intra-node all_gather"));
  /* bad files */
  assert_int_equal(tune_calib_add_json(c, "not json", "bad.json"), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "bad.json"));
  assert_int_equal(tune_calib_add_json(c, "{\"results\":[]}", "x.json"), HSR_ERR_INVALID);
  assert_int_equal(tune_calib_add_json(c, "{\"hsr\":{\"collective\":\"broadcast\"},\"results\":[]}", "b.json"),
                   HSR_ERR_INVALID);
  tune_calib_free(c);
  /* a row whose counters are not what the model moves on its group (here half the fabric bytes: the
   * fabric figure read as bytes sent only) is refused, naming both */
  j[0] = '\0';
  snprintf(j, sizeof j, "{\"hsr\":{\"collective\":\"all_gather\"},\"results\":[");
  row(j, sizeof j, 7e6, 2e6, 8, 2, 1000, 0);
  strcat(j, "]}");
  char *fabx = strstr(j, "\"fabric_bytes_per_op\":2000000");
  assert_non_null(fabx);
  memcpy(fabx + strlen("\"fabric_bytes_per_op\":"), "1000000", 7);
  assert_int_equal(tune_calib_create(&c), HSR_OK);
  assert_int_equal(tune_calib_add_json(c, j, "old.json"), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "records 7000000 bytes sent and 1000000 across nodes"));
  assert_non_null(strstr(hsr_last_error(), "moves 7000000 and 2000000"));
  tune_calib_free(c);
  /* a row's time, size and bandwidths must agree with each other (hsr bench wrote them from one measurement):
   * the row is named, with the numbers that disagree */
  static const char *good = "{\"hsr\":{\"collective\":\"all_gather\"},\"results\":[{\"size\":65536,\"count\":"
                            "8192,\"type\":\"float\",\"out_of_place\":{\"time\":%s,\"alg_bw\":2.243442391462486,"
                            "\"bus_bw\":%s},\"in_place\":{\"time\":29.21225},\"hsr\":{\"group_size\":2,\"nodes_"
                            "spanned\":1,\"out_of_place\":{\"sent_bytes_per_op\":32768,\"fabric_bytes_per_op\":0},"
                            "\"in_place\":{\"sent_bytes_per_op\":32768,\"fabric_bytes_per_op\":0}}}]}";
  static const char *const rows[][3] = {{"29.21225", "1.121721195731243", NULL},
                                        {"29.21", "1.1217", NULL}, /* rounded as a table prints it */
                                        {"1e308", "1.121721195731243",
                                         "row 1 (size 65536, out_of_place): time 1e+308 us and alg_bw 2.24344 GB/s "
                                         "disagree"},
                                        {"58.4245", "1.121721195731243", "time 58.4245 us and alg_bw 2.24344"},
                                        {"29.21225", "2.243442391462486",
                                         "row 1 (size 65536, out_of_place): bus_bw "
                                         "2.24344 GB/s is not alg_bw 2.24344 x 0.5"}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    snprintf(j, sizeof j, good, rows[i][0], rows[i][1]);
    assert_int_equal(tune_calib_create(&c), HSR_OK);
    assert_int_equal(tune_calib_add_json(c, j, "bw.json"), rows[i][2] ? HSR_ERR_INVALID : HSR_OK);
    if (rows[i][2]) assert_non_null(strstr(hsr_last_error(), rows[i][2]));
    tune_calib_free(c);
  }
  snprintf(j, sizeof j, good, "29.21225", "1.121721195731243");
  char *sz = strstr(j, "65536");
  assert_non_null(sz);
  memcpy(sz, "65535", 5);
  assert_int_equal(tune_calib_create(&c), HSR_OK);
  assert_int_equal(tune_calib_add_json(c, j, "bw.json"), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "row 1 (size 65535): its size disagrees with count 8192 x 4 bytes x the "
                                           "group = 65536"));
  tune_calib_free(c);
  /* two-level rows twice as slow as their stages: span 2; without flat cross rows they fit the cross tier */
  j[0] = '\0';
  snprintf(j, sizeof j, "{\"hsr\":{\"collective\":\"reduce_scatter\"},\"results\":[");
  for (double x = 3e4; x < 1e7; x *= 10) {
    row(j, sizeof j, x, 0, 4, 1, 20 + x / 2000, 0);
    row(j, sizeof j, x, 2 * x, 2, 2, 50 + x / 100, 0);
    row(j, sizeof j, 6 * x + x, 2 * x, 8, 2, 2 * ((20 + 6 * x / 2000) + (50 + x / 100)), 0);
  }
  strcat(j, "]}");
  assert_int_equal(tune_calib_create(&c), HSR_OK);
  assert_int_equal(tune_calib_add_json(c, j, "rs.json"), HSR_OK);
  n = host();
  assert_int_equal(tune_calib_fit(c, &n, rep, sizeof rep), HSR_OK);
  /* the cross stage gets its own fit: what the rows leave after their node stage, 2 (20 + 0.003 x) + 2 (50 +
   * 0.01 x) - (20 + 0.003 x) = 120 us + x / 43.48 MB/s; the flat cross fit stays the flat rows' */
  const tune_link *sl = &n.span_link[HSR_OP_REDUCE_SCATTER];
  assert_true(fabs(sl->alpha_us - 120) < 1e-6);
  assert_true(fabs(sl->busbw_gbs - 1 / 23.0) < 1e-9);
  assert_true(fabs(n.link[HSR_TUNE_CROSS][HSR_OP_REDUCE_SCATTER].busbw_gbs - 0.1) < 1e-9);
  EQ(n.span[HSR_OP_REDUCE_SCATTER], 1);
  assert_non_null(strstr(rep, "their cross stage alpha 120.0 us"));
  tune_vol v;
  tune_shape g = {8, 2, 4, 2};
  assert_int_equal(tune_volume(&n, HSR_OP_REDUCE_SCATTER, &g, 1000, 4, &v), HSR_OK);
  EQ(tune_coll_time(&n, &v), 2 * ((20e-6 + 24000 / 2e9) + (50e-6 + 4000 / 1e8)));
  tune_calib_free(c);
}

static void plan_only(const tune_net *n, const tune_model *m, double budget, int strategy, tune_plan *p) {
  hsr_cluster *c = two_nodes();
  tune_space sp;
  tune_space_default(&sp);
  sp.mem_budget = budget;
  sp.only_strategy = strategy;
  assert_int_equal(tune_plan_run(c, m, n, &sp, p), HSR_OK);
  cluster_free(c);
}

static void plan(const tune_net *n, const tune_model *m, double budget, tune_plan *p) {
  plan_only(n, m, budget, -1, p);
}

static void test_recommend(void **state) {
  (void)state;
  tune_model m = {.units = 8, .params = 8 * 262144, .fwd_ms = 0.5, .bwd_ratio = 2};
  /* a slow link between the nodes: the winner sends the least across (2P, give or take the norm's
   * 8-byte all-reduce); the slowest is flat fsdp over both nodes with full reshard, 3P (P = 8 MiB) */
  tune_net slow = clean(10, 0.01);
  tune_plan p;
  plan(&slow, &m, 0, &p);
  assert_true(p.nfeasible == p.n && p.n > 20);
  double least = 1e300;
  for (int i = 0; i < p.n; i++)
    if (p.cand[i].fabric_all_ranks < least) least = p.cand[i].fabric_all_ranks;
  assert_true(p.cand[0].fabric_all_ranks <= least * 1.001);
  EQ(least, 2 * 8 * 262144 * 4);
  assert_true(p.cand[p.n - 1].fabric_all_ranks >= 3 * 8 * 262144 * 4);
  char ex[4096];
  assert_int_equal(tune_explain(&p, &slow, ex, sizeof ex), HSR_OK);
  assert_non_null(strstr(ex, "recommended"));
  assert_non_null(strstr(ex, "runner-up"));
  assert_non_null(strstr(ex, "crosses nodes"));
  /* the outer shard is in the search, for hybrid only */
  int outer = 0;
  for (int i = 0; i < p.n; i++)
    if (p.cand[i].cfg.outer_shard == HSR_RT_OUTER_OPTIM) {
      outer++;
      assert_int_equal(p.cand[i].cfg.strategy, HSR_RT_HYBRID);
    }
  assert_true(outer > 0);
  /* every strategy has a branch of the planner: each one has candidates, and a feasible one */
  for (int s = 0; s < HSR_RT_STRATEGY_COUNT; s++) {
    int cands = 0, feasible = 0;
    for (int i = 0; i < p.n; i++)
      if ((int)p.cand[i].cfg.strategy == s) cands++, feasible += p.cand[i].feasible;
    if (!cands || !feasible) printf("strategy %s: %d candidates, %d feasible\n", rt_strategy_name(s), cands, feasible);
    assert_true(cands > 0 && feasible > 0);
  }
  tune_plan_free(&p);
  /* a budget the 2 x 4 layout fits only with the outer shard: among the hybrid layouts the planner
   * rejects it without, accepts it with, recommends it and states the trade (over every strategy
   * fsdp 1 x 8 partial:4, which needs no outer shard, is a few ms faster here) */
  tune_result hn = eval(&slow, &m, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  tune_result ho = eval_outer(&slow, &m, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32, HSR_RT_OUTER_OPTIM);
  assert_true(ho.peak_total < hn.peak_total);
  plan_only(&slow, &m, (ho.peak_total + hn.peak_total) / 2, HSR_RT_HYBRID, &p);
  int seen = 0;
  for (int i = 0; i < p.n; i++) {
    const tune_result *c = &p.cand[i];
    if (c->cfg.strategy != HSR_RT_HYBRID || c->S != 4 || c->cfg.reshard != HSR_RT_RESHARD_FULL || c->cfg.prefetch)
      continue;
    seen++;
    if (c->cfg.outer_shard == HSR_RT_OUTER_OPTIM)
      assert_true(c->feasible);
    else
      assert_non_null(strstr(c->reason, "over the memory budget"));
  }
  assert_int_equal(seen, 2);
  assert_int_equal(p.cand[0].cfg.outer_shard, HSR_RT_OUTER_OPTIM);
  assert_int_equal(tune_explain(&p, &slow, ex, sizeof ex), HSR_OK);
  assert_non_null(strstr(ex, "outer-shard optim vs none: -"));
  assert_non_null(strstr(ex, "all-gathered over the replicate group"));
  tune_plan_free(&p);
  /* a budget only the full sharding fits: fsdp over all 8 */
  tune_result f = eval(&slow, &m, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  plan(&slow, &m, f.peak_total * 1.05, &p);
  assert_true(p.nfeasible > 0);
  for (int i = 0; i < p.nfeasible; i++) assert_int_equal(p.cand[i].S, 8);
  assert_true(strstr(p.cand[p.nfeasible].reason, "over the memory budget") != NULL);
  tune_plan_free(&p);
  /* a budget nothing fits: says by how much (the smallest layout's excess) */
  plan(&slow, &m, 1024, &p);
  assert_int_equal(p.nfeasible, 0);
  assert_true(fabs(p.min_over_budget - (f.peak_total - 1024)) < 1);
  assert_int_equal(tune_explain(&p, &slow, ex, sizeof ex), HSR_OK);
  assert_non_null(strstr(ex, "no layout fits"));
  tune_plan_free(&p);
  /* as the link slows, flat fsdp over both nodes loses ground to hybrid */
  double prev = 0;
  for (double bw = 1; bw >= 0.01; bw /= 10) {
    tune_net n = clean(10, bw);
    tune_result a = eval(&n, &m, HSR_RT_FSDP, 8, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
    tune_result b = eval(&n, &m, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_F32);
    assert_true(a.step_ms / b.step_ms > prev);
    prev = a.step_ms / b.step_ms;
  }
  assert_true(prev > 1.2);
}

/* Ties: with residuals (a fitted net), two layouts whose steps differ by
 * less than one sigma of their difference tie even when they differ by more
 * than the ranking's 0.2% resolution; the rule's two arms both occur, and
 * without residuals only the 0.2% arm is left. */
static void test_ties(void **state) {
  (void)state;
  tune_model m = {.units = 8, .params = 8 * 262144, .fwd_ms = 0.5, .bwd_ratio = 2};
  tune_net n = clean(10, 0.1);
  n.step_rel_rms = 0.05; /* each layout's own residual in the probes: 5% of its step */
  tune_plan p;
  plan(&n, &m, 0, &p);
  int by_sigma = 0;
  for (int i = 1; i < p.nfeasible; i++) {
    const tune_result *r = &p.cand[i];
    if (r->tie < 0) continue;
    assert_true(r->tie < i);
    const tune_result *b = &p.cand[r->tie];
    if (r->step_ms - b->step_ms > 0.002 * b->step_ms) by_sigma++; /* beyond the resolution: tied by the sigma */
  }
  assert_true(by_sigma > 0);
  /* and a layout 30% slower than the best never ties with it at 5% residuals */
  for (int i = 1; i < p.nfeasible; i++)
    if (p.cand[i].step_ms > 1.3 * p.cand[0].step_ms) assert_int_not_equal(p.cand[i].tie, 0);
  tune_plan_free(&p);
  n.step_rel_rms = 0; /* nothing fitted: ties only within 0.2% */
  plan(&n, &m, 0, &p);
  for (int i = 1; i < p.nfeasible; i++)
    if (p.cand[i].tie >= 0) assert_true(p.cand[i].step_ms - p.cand[p.cand[i].tie].step_ms <= 0.002 * p.cand[p.cand[i].tie].step_ms + 1e-12);
  tune_plan_free(&p);
}

/* The budget rejects by the peak (persistent + transient peak +
 * activations), never by the persistent bytes alone. Budgets at every
 * candidate's persistent bytes and peak (and a byte below the peak), with
 * and without activations: a layout fits exactly when its peak does; one
 * whose persistent bytes fit and whose peak does not is refused, saying the
 * transient peak; the recommendation fits. */
static void test_budget_by_peak(void **state) {
  (void)state;
  tune_net n = clean(10, 1);
  for (int act = 0; act < 2; act++) {
    tune_model m = {.units = 8, .params = 8 * 262144, .fwd_ms = 0.5, .bwd_ratio = 2, .act_bytes = act ? 3e6 : 0};
    tune_plan all, p;
    plan(&n, &m, 0, &all);
    int between = 0, budgets = 0;
    for (int i = 0; i < all.n; i++) {
      const double bs[3] = {(double)all.cand[i].persistent, all.cand[i].peak_total - 1, all.cand[i].peak_total};
      for (int k = 0; k < 3; k++, budgets++) {
        double B = bs[k];
        plan(&n, &m, B, &p);
        assert_int_equal(p.n, all.n);
        for (int j = 0; j < p.n; j++) {
          const tune_result *r = &p.cand[j];
          char lab[96];
          int fits = r->peak_total <= B;
          if (fits != r->feasible)
            fail_msg("budget %.0f: %s (persistent %llu, peak %.0f) is %s", B, tune_label(r, lab, sizeof lab),
                     (unsigned long long)r->persistent, r->peak_total, r->feasible ? "accepted" : "refused");
          if (!fits) {
            assert_non_null(strstr(r->reason, "over the memory budget"));
            assert_non_null(strstr(r->reason, "transient peak"));
            between += (double)r->persistent <= B;
          }
        }
        if (p.nfeasible) assert_true(p.cand[0].peak_total <= B);
        tune_plan_free(&p);
      }
    }
    /* the cases a check of the persistent bytes alone gets wrong were there */
    assert_true(between > 0 && budgets == 3 * all.n);
    tune_plan_free(&all);
  }
}

static void test_gpu_defaults(void **state) {
  (void)state;
  /* 7e9 bf16 parameters in 32 units on 64 H100s: ddp needs 18 bytes per parameter */
  tune_net n;
  assert_int_equal(tune_net_default("h100", &n), HSR_OK);
  assert_true(tune_net_uses_defaults(&n));
  assert_non_null(strstr(n.link[HSR_TUNE_INTRA][0].source, "default"));
  int node[64], gpu[64];
  for (int r = 0; r < 64; r++) node[r] = r / 8, gpu[r] = r % 8;
  hsr_cluster *c;
  assert_int_equal(cluster_create(64, node, gpu, node, &c), HSR_OK);
  tune_model m = {.units = 32, .params = 7e9, .fwd_ms = 5, .bwd_ratio = 2};
  tune_space sp;
  tune_space_default(&sp);
  sp.mem_budget = 80.0 * (1 << 30);
  sp.param_dtype = HSR_BF16;
  tune_plan p;
  assert_int_equal(tune_plan_run(c, &m, &n, &sp, &p), HSR_OK);
  assert_int_equal(p.nfeasible, p.n - 1);
  const tune_result *d = &p.cand[p.n - 1];
  assert_int_equal(d->cfg.strategy, HSR_RT_DDP);
  assert_true(d->persistent == (uint64_t)(18 * 7e9));
  assert_non_null(strstr(d->reason, "GiB over 80.00 GiB"));
  /* the winner keeps its gathers on NVLink: one node per shard group */
  assert_int_equal(p.cand[0].shape[HSR_RT_GROUP_SHARD].nodes, 1);
  tune_plan_free(&p);
  cluster_free(c);
}

static void test_emit(void **state) {
  (void)state;
  tune_net n = host();
  char b[4096];
  tune_result h = eval(&n, &two_units, HSR_RT_HYBRID, 4, 2, HSR_RT_RESHARD_PARTIAL, 2, HSR_BF16);
  assert_int_equal(tune_emit(&h, HSR_TUNE_EMIT_FSDP2, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "init_device_mesh(\"cuda\", (2, 4), mesh_dim_names=(\"replicate\", \"shard\"))"));
  assert_non_null(strstr(b, "reshard_after_forward=2"));
  assert_non_null(strstr(b, "param_dtype=torch.bfloat16"));
  assert_non_null(strstr(b, "set_modules_to_forward_prefetch(blocks[i + 1:i + 3])"));
  assert_int_equal(tune_emit(&h, HSR_TUNE_EMIT_TORCHTITAN, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "data_parallel_replicate_degree = 2"));
  assert_non_null(strstr(b, "data_parallel_shard_degree = 4"));
  assert_non_null(strstr(b, "fsdp_reshard_after_forward = \"always\""));
  assert_non_null(strstr(b, "partial:2 has no torchtitan setting"));
  tune_result f = eval(&n, &two_units, HSR_RT_FSDP, 8, 4, HSR_RT_RESHARD_PARTIAL, 1, HSR_F32);
  assert_int_equal(tune_emit(&f, HSR_TUNE_EMIT_DEEPSPEED, b, sizeof b), HSR_OK);
  cJSON *j = cJSON_Parse(b);
  assert_non_null(j);
  const cJSON *z = cJSON_GetObjectItemCaseSensitive(j, "zero_optimization");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(z, "stage")->valueint, 3);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(z, "zero_hpz_partition_size")->valueint, 4);
  cJSON_Delete(j);
  tune_result d = eval(&n, &two_units, HSR_RT_ZERO2, 4, 0, HSR_RT_RESHARD_FULL, 0, HSR_F32);
  assert_int_equal(tune_emit(&d, HSR_TUNE_EMIT_DEEPSPEED, b, sizeof b), HSR_OK);
  j = cJSON_Parse(b);
  assert_non_null(j);
  assert_int_equal(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "zero_optimization"), "stage")->valueint, 2);
  cJSON_Delete(j);
  /* the outer shard: FSDP2 and torchtitan lack it (the request is pytorch#148257), DeepSpeed has no
   * exact form; each says so beside the nearest layout it has */
  tune_result o =
      eval_outer(&n, &two_units, HSR_RT_HYBRID, 4, 0, HSR_RT_RESHARD_FULL, 1, HSR_BF16, HSR_RT_OUTER_OPTIM);
  char lab[96];
  assert_string_equal(tune_label(&o, lab, sizeof lab), "hybrid 2x4 full p1 outer:optim");
  assert_int_equal(tune_emit(&o, HSR_TUNE_EMIT_FSDP2, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "pytorch#148257"));
  assert_non_null(strstr(b, "outer_dp_sharding_strategy=\"optim\""));
  assert_non_null(strstr(b, "mesh_dim_names=(\"replicate\", \"shard\")"));
  assert_int_equal(tune_emit(&o, HSR_TUNE_EMIT_TORCHTITAN, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "has no torchtitan setting"));
  assert_non_null(strstr(b, "data_parallel_replicate_degree = 2"));
  assert_int_equal(tune_emit(&o, HSR_TUNE_EMIT_DEEPSPEED, b, sizeof b), HSR_OK);
  j = cJSON_Parse(b);
  assert_non_null(j);
  assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(j, "_hsr")->valuestring, "has no DeepSpeed form"));
  cJSON_Delete(j);
  tune_emit_kind k;
  assert_int_equal(tune_parse_emit("torchtitan", &k), HSR_OK);
  assert_int_equal(k, HSR_TUNE_EMIT_TORCHTITAN);
  assert_int_equal(tune_parse_emit("megatron", &k), HSR_ERR_INVALID);
}

/* The activation model on hand-computed cases. hsr's GPT example (f32):
 * L 2, C 64, H 4, T 32, V 256, B 2, so N = 64 tokens. Per layer and token,
 * none keeps 16C + HT + 4 = 1156 floats; selective 10C + 4 = 644 and
 * recomputes 6C + HT = 512; full keeps C = 64 and recomputes
 * 15C + HT + 4 = 1092. The root: N (2C + 2 + V) = 64 x 386 floats, 8N of
 * f64 losses, and the backward's 10 C N + H T^2 = 40960 + 4096 floats. */
static void test_act(void **state) {
  (void)state;
  tune_arch a;
  assert_int_equal(tune_arch_preset("hsr-gpt", &a), HSR_OK);
  a.layers = 2, a.width = 64, a.heads = 4, a.seq = 32, a.vocab = 256, a.micro_batch = 2;
  assert_int_equal(a.act_dtype, HSR_F32);
  double saved, scratch; /* an unchecked shape is fine: its defaults are filled on a copy */
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_NONE, &saved, &scratch), HSR_OK);
  EQ(saved, 64 * 1156 * 4), EQ(scratch, 0);
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_SELECTIVE, &saved, &scratch), HSR_OK);
  EQ(saved, 64 * 644 * 4), EQ(scratch, 64 * 512 * 4);
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_FULL, &saved, &scratch), HSR_OK);
  EQ(saved, 64 * 64 * 4), EQ(scratch, 64 * 1092 * 4);
  tune_act act;
  assert_int_equal(tune_act_predict(&a, HSR_RT_RECOMPUTE_FULL, &act), HSR_OK);
  EQ(act.root, 4 * 64 * 386 + 8 * 64 + 4 * (40960 + 4096));
  EQ(act.peak, 2 * 64 * 64 * 4 + 64 * 1092 * 4 + act.root);
  /* full recomputes all that selective does, and more */
  double ff, fb, sf, sb;
  assert_int_equal(tune_recompute_cost(&a, HSR_RT_RECOMPUTE_FULL, &ff, &fb), HSR_OK);
  assert_int_equal(tune_recompute_cost(&a, HSR_RT_RECOMPUTE_SELECTIVE, &sf, &sb), HSR_OK);
  EQ(sf, 64 * 2 * 32 * 64); /* QK^T: 2 T C per token */
  assert_true(ff > sf && fb >= sb && sb > 0);
  a.heads = 5; /* a bad one is refused with the check's message */
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_NONE, &saved, &scratch), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "--heads 5 does not divide --width 64"));
  /* GPT-2 124M: 124,439,808 parameters; at 16 bits Korthikanti's s b h (34 + 5 a s / h) per layer */
  assert_int_equal(tune_arch_preset("gpt2-124m", &a), HSR_OK);
  assert_int_equal(tune_arch_check(&a), HSR_OK);
  EQ(tune_arch_params(&a), 124439808);
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_NONE, &saved, NULL), HSR_OK);
  EQ(saved, 1024.0 * 768 * (34 + 5.0 * 12 * 1024 / 768));
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_SELECTIVE, &saved, NULL), HSR_OK);
  EQ(saved, 34.0 * 1024 * 768);
  assert_int_equal(tune_act_layer(&a, HSR_RT_RECOMPUTE_FULL, &saved, NULL), HSR_OK);
  EQ(saved, 2.0 * 1024 * 768);
  /* Llama-3: 8,030,261,248 and 70,553,706,496 parameters */
  assert_int_equal(tune_arch_preset("llama3-8b", &a), HSR_OK);
  assert_int_equal(tune_arch_check(&a), HSR_OK);
  EQ(tune_arch_params(&a), 8030261248.0);
  assert_int_equal(tune_arch_preset("llama3-70b", &a), HSR_OK);
  assert_int_equal(tune_arch_check(&a), HSR_OK);
  EQ(tune_arch_params(&a), 70553706496.0);
  /* bad shapes: heads not dividing width, kv heads not dividing heads, an unknown preset */
  a.heads = 60;
  assert_int_equal(tune_arch_check(&a), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "does not divide --width 8192"));
  assert_int_equal(tune_arch_preset("llama3-70b", &a), HSR_OK);
  a.kv_heads = 7;
  assert_int_equal(tune_arch_check(&a), HSR_ERR_INVALID);
  assert_int_equal(tune_arch_preset("llama4", &a), HSR_ERR_INVALID);
  /* --hw's bound: h200 141 GiB less 2 GiB + 5% */
  const double G = 1024.0 * 1024 * 1024;
  EQ(tune_hw_memory("h200"), 141 * G);
  EQ(tune_mem_reserve(141 * G), 2 * G + 0.05 * 141 * G);
  EQ(tune_hw_memory("host"), 0);
}

/* Recompute as a dimension of the search: with activations the budget holds
 * only under full recompute, the winner recomputes and is charged for it;
 * with room for every policy, none wins. */
static void test_recompute_plan(void **state) {
  (void)state;
  tune_net n = clean(10, 1);
  double full_ms[8], sel_ms[8];
  for (int u = 0; u < 8; u++) full_ms[u] = 0.5, sel_ms[u] = 0.05;
  const double M = 1024.0 * 1024;
  tune_model m = {.units = 8,
                      .params = 8 * 262144,
                      .fwd_ms = 0.5,
                      .bwd_ratio = 2,
                      .act_by_policy = 1,
                      .act_policy = {64 * M, 4 * M, 32 * M},
                      .unit_recompute_ms = {NULL, full_ms, sel_ms}};
  tune_plan p;
  plan(&n, &m, 0, &p);
  assert_int_equal(p.recompute_searched, 1);
  assert_int_equal(p.cand[0].cfg.recompute, HSR_RT_RECOMPUTE_NONE);
  int seen[3] = {0};
  for (int i = 0; i < p.n; i++) seen[p.cand[i].cfg.recompute]++;
  assert_true(seen[0] > 0 && seen[0] == seen[1] && seen[1] == seen[2]);
  const tune_result none = p.cand[0];
  tune_plan_free(&p);
  /* a budget only full's activations fit under (the layout's own memory + 20 MiB) */
  plan(&n, &m, none.peak_total - 64 * M + 20 * M, &p);
  assert_true(p.nfeasible > 0);
  assert_int_equal(p.cand[0].cfg.recompute, HSR_RT_RECOMPUTE_FULL);
  EQ(p.cand[0].act_bytes, 4 * M);
  assert_true(p.cand[0].compute_ms > none.compute_ms); /* the recomputed forward is charged */
  char lab[96], ex[8192];
  assert_non_null(strstr(tune_label(&p.cand[0], lab, sizeof lab), "recompute:full"));
  assert_int_equal(tune_explain(&p, &n, ex, sizeof ex), HSR_OK);
  assert_non_null(strstr(ex, "none does not fit: needs"));
  assert_non_null(strstr(ex, "selective does not fit: needs"));
  for (int i = p.nfeasible; i < p.n; i++) /* the rejected say which activations they carry */
    if (p.cand[i].cfg.recompute == HSR_RT_RECOMPUTE_NONE)
      assert_non_null(strstr(p.cand[i].reason, "with recompute none"));
  char b[8192];
  assert_int_equal(tune_emit(&p.cand[0], HSR_TUNE_EMIT_TORCHTITAN, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "[activation_checkpoint]\nmode = \"full\""));
  assert_int_equal(tune_emit(&p.cand[0], HSR_TUNE_EMIT_DEEPSPEED, b, sizeof b), HSR_OK);
  cJSON *j = cJSON_Parse(b);
  assert_non_null(j);
  assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "activation_checkpointing"));
  cJSON_Delete(j);
  assert_int_equal(tune_emit(&p.cand[0], HSR_TUNE_EMIT_FSDP2, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "checkpoint_wrapper(b)"));
  tune_result sel = p.cand[0];
  sel.cfg.recompute = HSR_RT_RECOMPUTE_SELECTIVE;
  assert_int_equal(tune_emit(&sel, HSR_TUNE_EMIT_TORCHTITAN, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "selective_ac_option = \"op\""));
  assert_int_equal(tune_emit(&sel, HSR_TUNE_EMIT_FSDP2, b, sizeof b), HSR_OK);
  assert_non_null(strstr(b, "create_selective_checkpoint_contexts"));
  tune_plan_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_volumes),   cmocka_unit_test(test_step_bytes),
                                     cmocka_unit_test(test_ledger),    cmocka_unit_test(test_outer_bytes),
                                     cmocka_unit_test(test_timeline),  cmocka_unit_test(test_calib),
                                     cmocka_unit_test(test_recommend), cmocka_unit_test(test_gpu_defaults),
                                     cmocka_unit_test(test_emit),      cmocka_unit_test(test_budget_by_peak),
                                     cmocka_unit_test(test_act),       cmocka_unit_test(test_recompute_plan),
                                     cmocka_unit_test(test_ties)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
