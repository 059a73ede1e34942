/* Unit tests of the schedule (runtime/sched/schedule.h: the decisions the engine runs,
 * on small hand-written cases whose expected actions are written out by
 * hand), the predicted ledger (known layouts, by hand) and the wrap
 * diagnostic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/sched/schedule.h"
#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/ledger_internal.h"

/* Two units of 1024 and 4096 f32 elements, S = 4, align 16: no padding. */
static rt_layout *two_units(int S) {
  rt_layout *l;
  assert_int_equal(rt_layout_create(16, &l), HSR_OK);
  int u;
  int64_t a[] = {1024}, b[] = {64, 64};
  assert_int_equal(rt_layout_add_unit(l, "root", &u), HSR_OK);
  assert_int_equal(rt_layout_add_param(l, u, "a", 1, a, 0), HSR_OK);
  assert_int_equal(rt_layout_add_unit(l, "blk", &u), HSR_OK);
  assert_int_equal(rt_layout_add_param(l, u, "b", 2, b, 0), HSR_OK);
  assert_int_equal(rt_layout_finalize(l, S), HSR_OK);
  return l;
}

static void test_predict_fsdp(void **state) {
  (void)state;
  rt_layout *l = two_units(4);
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = HSR_RT_FSDP;
  c.prefetch = 0;
  c.root_reshard = 1;
  hsr_prog_call *p;
  int n;
  assert_int_equal(hsr_tune_prog_nested(2, 0, 1, HSR_RT_RECOMPUTE_NONE, &p, &n), HSR_OK);
  assert_int_equal(n, 9);
  hsr_ledger *h, *u;
  ledger_create(&h);
  ledger_create(&u);
  int roots[2] = {0, 0};
  hsr_status st = tune_ledger_predict(l, roots, &c, 4, 1, p, n, 3, h, u);
  if (st != HSR_OK) fprintf(stderr, "%s\n", hsr_last_error());
  assert_int_equal(st, HSR_OK);
  /* persistent: (256 + 1024) elements x 4 B x 4 categories: master, m, v,
   * gradient; the master is the parameter shard (FSDP2's 16 bytes / S) */
  assert_int_equal(ledger_persistent(h), 1280 * 4 * 4);
  assert_int_equal(ledger_peak(h, HSR_MEM_MASTER), 1280 * 4);
  assert_int_equal(ledger_peak(h, HSR_MEM_PARAM_SHARD), 0);
  assert_int_equal(ledger_peak(h, HSR_MEM_STAGING), 0); /* f32: the gathers read the master itself */
  /* sequential units, no prefetch: one full unit at a time, pool keeps one of each size */
  assert_int_equal(ledger_peak(u, HSR_MEM_FULL_UNIT), 4096 * 4);
  assert_int_equal(ledger_peak(h, HSR_MEM_FULL_UNIT), (4096 + 1024) * 4);
  /* backward of blk: full unit + its f32 gradient */
  assert_int_equal(ledger_peak(u, HSR_MEM_RS_BUF), (4096 + 1024) * 4);
  assert_int_equal(ledger_peak(u, HSR_MEM_AR_BUF), (1024 + 256) * 4);
  ledger_where w = ledger_runtime_peak_where(u);
  assert_int_equal(w.phase, HSR_PHASE_BACKWARD);
  assert_int_equal(w.unit,
                   1); /* blk: its full unit and full gradient (32 KiB) beat root + queued blk reduction (28 KiB) */
  /* everything transient is back in the pool at the end */
  assert_int_equal(ledger_current(u, HSR_MEM_FULL_UNIT), 0);
  assert_int_equal(ledger_current(h, HSR_MEM_FULL_UNIT), (4096 + 1024) * 4);

  /* ddp: full parameters are persistent, no gathers */
  c.strategy = HSR_RT_DDP;
  rt_layout *l1 = two_units(1);
  assert_int_equal(tune_ledger_predict(l1, roots, &c, 1, 4, p, n, 2, h, u), HSR_OK);
  assert_int_equal(ledger_persistent(h), 5120 * 4 * 5);
  assert_int_equal(ledger_peak(h, HSR_MEM_FULL_UNIT), 0);
  /* bad input */
  assert_int_equal(tune_ledger_predict(l1, roots, &c, 4, 1, p, n, 2, h, u), HSR_ERR_INVALID);
  free(p);
  rt_layout_free(l);
  rt_layout_free(l1);
  ledger_free(h);
  ledger_free(u);
}

static void test_wrap(void **state) {
  (void)state;
  wrap_report r;
  /* per block: 4 blocks + root kept, reshard full: 2 x 4 + 1 gathers */
  wrap_input in = {.gathers_per_step = 9,
                       .repeating_blocks = 4,
                       .units = 5,
                       .root_units = 1,
                       .root_gathers_per_step = 1,
                       .gathers_per_unit = 2,
                       .mean_gather_bytes = 256 << 10,
                       .mean_gather_us = 80,
                       .min_unit_bytes = 64 << 10};
  assert_int_equal(tune_wrap_check(&in, &r), HSR_OK);
  assert_false(r.too_many_gathers);
  assert_false(r.latency_bound);
  assert_string_equal(r.message, "");
  /* per linear layer: 2 units per block */
  wrap_input lin = in;
  lin.gathers_per_step = 17;
  lin.units = 9;
  lin.mean_gather_bytes = 128 << 10;
  assert_int_equal(tune_wrap_check(&lin, &r), HSR_OK);
  assert_true(r.too_many_gathers);
  assert_true(r.gathers_per_block > 3.9 && r.gathers_per_block < 4.1);
  assert_non_null(strstr(r.message, "per block"));
  /* small units: latency-bound */
  in.mean_gather_bytes = 4096;
  assert_int_equal(tune_wrap_check(&in, &r), HSR_OK);
  assert_true(r.latency_bound);
  assert_non_null(strstr(r.message, "HSR_WRAP_MIN_BYTES"));
}

/* ---- the schedule ---- */

/* Units of 64, 128 and 256 f32 elements (a multiple of S x align for S <= 4:
 * no padding), so shard and partial lengths are easy to check by hand. */
static rt_layout *three_units(int S, int n) {
  rt_layout *l;
  assert_int_equal(rt_layout_create(16, &l), HSR_OK);
  const char *names[] = {"u0", "u1", "u2"};
  for (int i = 0; i < n; i++) {
    int u;
    int64_t shape[] = {64 << i};
    char pn[16];
    snprintf(pn, sizeof pn, "p%d", i);
    assert_int_equal(rt_layout_add_unit(l, names[i], &u), HSR_OK);
    assert_int_equal(rt_layout_add_param(l, u, pn, 1, shape, 0), HSR_OK);
  }
  assert_int_equal(rt_layout_finalize(l, S), HSR_OK);
  return l;
}

static hsr_rt_config sched_cfg(hsr_rt_strategy strat) {
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = strat;
  c.prefetch = 0;
  c.root_reshard = 1;
  return c;
}

/* One action as text: op [unit] [group:count] [flags]; a call's actions joined by ", ". */
static void fmt(const sched_action *a, int n, char *out, size_t cap) {
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n && o < cap; i++) {
    const sched_action *x = &a[i];
    o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", sched_op_name(x->op));
    if (x->unit >= 0) o += (size_t)snprintf(out + o, cap - o, " %d", x->unit);
    if (x->group >= 0)
      o += (size_t)snprintf(out + o, cap - o, " %s:%zu", rt_group_name((hsr_rt_group)x->group), x->count);
    const char *flag[] = {"partial", "local", "scatter", "ar", "deferred", "free", "cast", "outer"};
    int on[] = {x->partial, x->local, x->scatter, x->all_reduce, x->deferred, x->free_grad, x->cast, x->outer};
    for (int f = 0; f < 8; f++)
      if (on[f]) o += (size_t)snprintf(out + o, cap - o, " %s", flag[f]);
  }
}

enum { FB = 0, FE, BB, BE, ST, ZG };
/* Runs one lifecycle call and checks its actions against the text. */
static void expect_call(sched_ctx *s, int call, int unit, const char *want) {
  const sched_action *a = NULL;
  int n = 0;
  hsr_status st = call == FB   ? sched_forward_begin(s, unit, &a, &n)
                  : call == FE ? sched_forward_end(s, unit, &a, &n)
                  : call == BB ? sched_backward_begin(s, unit, &a, &n)
                  : call == BE ? sched_backward_end(s, unit, &a, &n)
                  : call == ST ? sched_step(s, &a, &n)
                               : sched_zero_grad(s, &a, &n);
  if (st != HSR_OK) fprintf(stderr, "%s\n", hsr_last_error());
  assert_int_equal(st, HSR_OK);
  char got[2048];
  fmt(a, n, got, sizeof got);
  if (strcmp(got, want)) fprintf(stderr, "call %d unit %d:\n  got  %s\n  want %s\n", call, unit, got, want);
  assert_string_equal(got, want);
}

/* fsdp S = 4, reshard partial:2, prefetch 1, live cap 2, three units run in
 * order. Step 1 records the order (no prefetch); from step 2 on each
 * forward gathers the next unit from the shard group, each backward the
 * previous one from the partial group (half a unit per rank). */
static void test_sched_partial_prefetch(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 3);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.reshard = HSR_RT_RESHARD_PARTIAL;
  c.partial_k = 2;
  c.prefetch = 1;
  c.max_live = 2;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_OK);
  assert_int_equal(sched_state_of(s, 0), HSR_SCHED_SHARDED);
  for (int step = 1; step <= 2; step++) {
    int pf = step > 1;
    expect_call(s, FB, 0,
                pf ? "gather 0 shard:16, wait 0 shard:16, gather 1 shard:32" : "gather 0 shard:16, wait 0 shard:16");
    assert_int_equal(sched_live(s), pf ? 2 : 1);
    expect_call(s, FE, 0, "reshard 0 partial:32 partial");
    assert_int_equal(sched_state_of(s, 0), HSR_SCHED_PARTIAL);
    expect_call(s, FB, 1, pf ? "wait 1 shard:32, gather 2 shard:64" : "gather 1 shard:32, wait 1 shard:32");
    expect_call(s, FE, 1, "reshard 1 partial:64 partial");
    expect_call(s, FB, 2, pf ? "wait 2 shard:64" : "gather 2 shard:64, wait 2 shard:64");
    expect_call(s, FE, 2, "reshard 2 partial:128 partial");
    assert_int_equal(sched_live(s), 0);
    expect_call(s, BB, 2,
                pf ? "gather 2 partial:128 partial, wait 2 partial:128 partial, grad_buf 2, gather 1 partial:64 partial"
                   : "gather 2 partial:128 partial, wait 2 partial:128 partial, grad_buf 2");
    expect_call(s, BE, 2, "release 2, reduce 2 shard:64 scatter, progress");
    expect_call(s, BB, 1,
                pf ? "wait 1 partial:64 partial, grad_buf 1, gather 0 partial:32 partial"
                   : "gather 1 partial:64 partial, wait 1 partial:64 partial, grad_buf 1");
    expect_call(s, BE, 1, "release 1, reduce 1 shard:32 scatter, progress");
    expect_call(s, BB, 0,
                pf ? "wait 0 partial:32 partial, grad_buf 0"
                   : "gather 0 partial:32 partial, wait 0 partial:32 partial, grad_buf 0");
    /* two reductions stay in flight behind backward (host) */
    expect_call(s, BE, 0, "release 0, reduce 0 shard:16 scatter, progress, retire 2");
    assert_int_equal(sched_queued(s), 2);
    expect_call(s, ST, -1, "retire 1, retire 0, norm, optim 0, optim 1, optim 2");
    expect_call(s, ZG, -1, "grad_zero 0, grad_zero 1, grad_zero 2");
  }
  int n;
  const int *order = sched_order(s, &n);
  assert_int_equal(n, 3);
  assert_int_equal(order[0] + 10 * order[1] + 100 * order[2], 210);
  assert_int_equal(sched_live_peak(s), 2);
  sched_free(s);
  rt_layout_free(l);
}

/* The live cap stops a prefetch: prefetch 2 with at most 2 units live. A
 * root unit (root_reshard 0) stays FULL from its forward to its backward. */
static void test_sched_cap_and_root(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 3);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.prefetch = 2;
  c.max_live = 2;
  c.root_reshard = 0;
  int roots[3] = {1, 0, 0};
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 4, 1, l, roots, &s), HSR_OK);
  assert_int_equal(sched_reshard_of(s, 0), HSR_RT_RESHARD_NONE);
  assert_int_equal(sched_reshard_of(s, 1), HSR_RT_RESHARD_FULL);
  /* step 1: the root wraps units 1 and 2 (as hsr_tune_prog_nested(3, 1, 1)) */
  expect_call(s, FB, 0, "gather 0 shard:16, wait 0 shard:16");
  expect_call(s, FB, 1, "gather 1 shard:32, wait 1 shard:32");
  expect_call(s, FE, 1, "reshard 1 shard:0");
  expect_call(s, FB, 2, "gather 2 shard:64, wait 2 shard:64");
  expect_call(s, FE, 2, "reshard 2 shard:0");
  expect_call(s, FE, 0, ""); /* root: kept FULL */
  assert_int_equal(sched_state_of(s, 0), HSR_SCHED_FULL);
  expect_call(s, BB, 0, "grad_buf 0");
  expect_call(s, BB, 2, "gather 2 shard:64, wait 2 shard:64, grad_buf 2");
  expect_call(s, BE, 2, "release 2, reduce 2 shard:64 scatter, progress");
  expect_call(s, BB, 1, "gather 1 shard:32, wait 1 shard:32, grad_buf 1");
  expect_call(s, BE, 1, "release 1, reduce 1 shard:32 scatter, progress");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:16 scatter, progress, retire 2");
  expect_call(s, ST, -1, "retire 1, retire 0, norm, optim 0, optim 1, optim 2");
  expect_call(s, ZG, -1, "grad_zero 0, grad_zero 1, grad_zero 2");
  /* step 2: unit 0 live, unit 1 prefetched, unit 2 would make three */
  expect_call(s, FB, 0, "gather 0 shard:16, wait 0 shard:16, gather 1 shard:32");
  expect_call(s, FB, 1, "wait 1 shard:32");
  expect_call(s, FE, 1, "reshard 1 shard:0");
  expect_call(s, FB, 2, "gather 2 shard:64, wait 2 shard:64");
  expect_call(s, FE, 2, "reshard 2 shard:0");
  expect_call(s, FE, 0, "");
  expect_call(s, BB, 0, "grad_buf 0"); /* the root is first in the order: nothing before it to prefetch */
  /* units 0 and 2 live: the cap stops the prefetch of unit 1 */
  expect_call(s, BB, 2, "gather 2 shard:64, wait 2 shard:64, grad_buf 2");
  expect_call(s, BE, 2, "release 2, reduce 2 shard:64 scatter, progress");
  expect_call(s, BB, 1, "gather 1 shard:32, wait 1 shard:32, grad_buf 1"); /* unit 0 is FULL: no gather */
  expect_call(s, BE, 1, "release 1, reduce 1 shard:32 scatter, progress");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:16 scatter, progress, retire 2");
  assert_int_equal(sched_live_peak(s), 2);
  sched_free(s);
  rt_layout_free(l);
}
/* zero1: parameters stay FULL (no gathers), the gradient is all-reduced in
 * full in the shard group, and the step re-gathers every unit's updated
 * slice, the next forward's first unit (here 2) first. */
static void test_sched_zero1_regather(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 3);
  hsr_rt_config c = sched_cfg(HSR_RT_ZERO1);
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_OK);
  assert_int_equal(sched_state_of(s, 1), HSR_SCHED_FULL);
  int fwd[3] = {2, 0, 1};
  for (int i = 0; i < 3; i++) {
    expect_call(s, FB, fwd[i], "");
    expect_call(s, FE, fwd[i], "");
  }
  expect_call(s, BB, 1, "grad_buf 1");
  expect_call(s, BE, 1, "reduce 1 shard:128, progress");
  expect_call(s, BB, 0, "grad_buf 0");
  expect_call(s, BE, 0, "reduce 0 shard:64, progress");
  expect_call(s, BB, 2, "grad_buf 2");
  expect_call(s, BE, 2, "reduce 2 shard:256, progress, retire 1");
  expect_call(s, ST, -1,
              "retire 0, retire 2, norm, optim 2, regather 2 shard:64, optim 0, regather 0 shard:16, optim 1, "
              "regather 1 shard:32, regather_wait 0 shard:16, regather_wait 1 shard:32, regather_wait 2 shard:64");
  sched_free(s);
  rt_layout_free(l);
}

/* The step-end prefetch: the next step's first gather is posted right after
 * its unit's update, runs under the rest of the optimizer and completes
 * before the step returns (a step's counters hold whole collectives); the
 * next forward finds the unit full. */
static void test_sched_step_prefetch(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 2);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.prefetch = 1;
  c.prefetch_step = 1;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_OK);
  expect_call(s, FB, 0, "gather 0 shard:16, wait 0 shard:16");
  expect_call(s, FE, 0, "reshard 0 shard:0");
  expect_call(s, FB, 1, "gather 1 shard:32, wait 1 shard:32");
  expect_call(s, FE, 1, "reshard 1 shard:0");
  expect_call(s, BB, 1, "gather 1 shard:32, wait 1 shard:32, grad_buf 1");
  expect_call(s, BE, 1, "release 1, reduce 1 shard:32 scatter, progress");
  expect_call(s, BB, 0, "gather 0 shard:16, wait 0 shard:16, grad_buf 0");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:16 scatter, progress");
  expect_call(s, ST, -1, "retire 1, retire 0, norm, optim 0, gather 0 shard:16, optim 1, wait 0 shard:16");
  assert_int_equal(sched_state_of(s, 0), HSR_SCHED_FULL);
  expect_call(s, ZG, -1, "grad_zero 0, grad_zero 1");
  expect_call(s, FB, 0, "gather 1 shard:32");
  sched_free(s);
  rt_layout_free(l);
}

/* The buffers of an action as text: +get / -put category:bytes. */
static void fmt_bufs(const sched_ctx *s, const sched_action *a, int n, char *out, size_t cap) {
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    sched_bufop b[HSR_SCHED_MAX_BUFOPS];
    int nb;
    assert_int_equal(sched_buffers(s, &a[i], b, &nb), HSR_OK);
    for (int k = 0; k < nb && o < cap; k++)
      o += (size_t)snprintf(out + o, cap - o, "%s%c%s:%zu", o ? " " : "", b[k].get ? '+' : '-', mem_cat_name(b[k].cat),
                            b[k].bytes);
  }
}

static void expect_bufs(sched_ctx *s, int call, int unit, const char *want_acts, const char *want_bufs) {
  const sched_action *a;
  int n;
  assert_int_equal(call == BE ? sched_backward_end(s, unit, &a, &n) : sched_step(s, &a, &n), HSR_OK);
  char got[1024];
  fmt(a, n, got, sizeof got);
  assert_string_equal(got, want_acts);
  fmt_bufs(s, a, n, got, sizeof got);
  if (strcmp(got, want_bufs)) fprintf(stderr, "buffers:\n  got  %s\n  want %s\n", got, want_bufs);
  assert_string_equal(got, want_bufs);
}

/* hybrid 2 x 2, two micro-batches, rs_only, bf16 reduction of one unit of
 * 64 elements (shard 32): each micro-batch reduce-scatters only; the last
 * drains the queue and all-reduces the accumulated slice once. */
static void test_sched_rs_only_bf16(void **state) {
  (void)state;
  rt_layout *l = three_units(2, 1);
  hsr_rt_config c = sched_cfg(HSR_RT_HYBRID);
  c.micro_batches = 2;
  c.sync = HSR_RT_SYNC_RS_ONLY;
  c.reduce_dtype = HSR_BF16;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 2, 2, l, NULL, &s), HSR_OK);
  const sched_action *a;
  int n;
  char got[512];
  assert_int_equal(sched_setup(s, &a, &n), HSR_OK);
  fmt_bufs(s, a, n, got, sizeof got);
  /* sharded f32: the master is the parameter shard (no param_shard beside it) */
  assert_string_equal(got, "+master:128 +moment_m:128 +moment_v:128 +grad_shard:128");
  for (int m = 0; m < 2; m++) {
    expect_call(s, FB, 0, "gather 0 shard:32, wait 0 shard:32");
    expect_call(s, FE, 0, "reshard 0 shard:0");
    expect_call(s, BB, 0, "gather 0 shard:32, wait 0 shard:32, grad_buf 0");
    if (m == 0) /* f32 gradient -> bf16 copy (the f32 buffer goes back) -> bf16 slice */
      expect_bufs(s, BE, 0, "release 0, reduce 0 shard:32 scatter, progress",
                  "-full_unit:256 +staging:128 -reduce_scatter_buf:256 +all_reduce_buf:64");
    else
      /* retiring: the slice through an f32 staging copy into the accumulator */
      expect_bufs(s, BE, 0,
                  "release 0, reduce 0 shard:32 scatter, retire 0, retire 0, deferred_ar 0 replicate:32, progress",
                  "-full_unit:256 +staging:128 -reduce_scatter_buf:256 +all_reduce_buf:64 "
                  "+staging:128 -staging:128 -staging:128 -all_reduce_buf:64 "
                  "+staging:128 -staging:128 -staging:128 -all_reduce_buf:64 +all_reduce_buf:64");
  }
  expect_bufs(s, ST, -1, "retire 0 deferred, norm, optim 0", "-all_reduce_buf:64");
  sched_free(s);
  rt_layout_free(l);
}

/* One-rank groups copy locally: the shard group at S = 1, the partial group
 * at K = 1. On CUDA no reduction stays in flight behind backward. */
static void test_sched_local_and_device(void **state) {
  (void)state;
  rt_layout *l1 = three_units(1, 1), *l2 = three_units(2, 1);
  hsr_rt_config c = sched_cfg(HSR_RT_HYBRID);
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 1, 4, l1, NULL, &s), HSR_OK);
  assert_int_equal(sched_in_flight(s), 2);
  expect_call(s, FB, 0, "gather 0 shard:64 local, wait 0 shard:64 local");
  expect_call(s, FE, 0, "reshard 0 shard:0");
  expect_call(s, BB, 0, "gather 0 shard:64 local, wait 0 shard:64 local, grad_buf 0");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:64 local scatter ar, progress");
  sched_free(s);

  c = sched_cfg(HSR_RT_FSDP);
  c.reshard = HSR_RT_RESHARD_PARTIAL;
  c.partial_k = 1;
  c.device = HSR_DEVICE_CUDA;
  assert_int_equal(sched_create(&c, 2, 1, l2, NULL, &s), HSR_OK);
  assert_int_equal(sched_in_flight(s), 0);
  expect_call(s, FB, 0, "gather 0 shard:32, wait 0 shard:32");
  expect_call(s, FE, 0, "reshard 0 partial:64 partial");
  expect_call(s, BB, 0, "gather 0 partial:64 partial local, wait 0 partial:64 partial local, grad_buf 0");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:32 scatter, progress, retire 0");
  sched_free(s);
  rt_layout_free(l1);
  rt_layout_free(l2);
}

/* Units of 64 and 128 f32 elements cut for S shards of R pieces each
 * (multiples of S x R x align for S x R <= 4: no padding). */
static rt_layout *outer_units(int S, int R, int n) {
  rt_layout *l;
  assert_int_equal(rt_layout_create(16, &l), HSR_OK);
  assert_int_equal(rt_layout_set_subshards(l, R), HSR_OK);
  for (int i = 0; i < n; i++) {
    int u;
    int64_t shape[] = {64 << i};
    char un[16], pn[16];
    snprintf(un, sizeof un, "u%d", i);
    snprintf(pn, sizeof pn, "p%d", i);
    assert_int_equal(rt_layout_add_unit(l, un, &u), HSR_OK);
    assert_int_equal(rt_layout_add_param(l, u, pn, 1, shape, 0), HSR_OK);
  }
  assert_int_equal(rt_layout_finalize(l, S), HSR_OK);
  return l;
}

static void expect_setup(sched_ctx *s, const char *want) {
  const sched_action *a;
  int n;
  char got[512];
  assert_int_equal(sched_setup(s, &a, &n), HSR_OK);
  fmt_bufs(s, a, n, got, sizeof got);
  if (strcmp(got, want)) fprintf(stderr, "setup:\n  got  %s\n  want %s\n", got, want);
  assert_string_equal(got, want);
}

/* Offload optim, fsdp S = 2, bf16 parameters and reductions, one unit of 64
 * elements (shard 32) on a device: the master, m, v and accumulator are
 * host categories, the device holds the parameter shard in bf16 (2 bytes x
 * 32) which the gathers read (no cast copy), each unit holds its two host
 * staging buffers (the piece up in bf16, the reduced piece down in bf16),
 * and a RETIRE takes no device staging to accumulate. On the host device
 * the setting has no effect. */
static void test_sched_offload(void **state) {
  (void)state;
  rt_layout *l = three_units(2, 1);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.offload = HSR_RT_OFFLOAD_OPTIM;
  c.param_dtype = c.reduce_dtype = HSR_BF16;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 2, 1, l, NULL, &s), HSR_OK);
  assert_int_equal(hsr_sched_offload(s), 0); /* host: all state is host memory already */
  sched_free(s);
  c.device = HSR_DEVICE_SIM;
  assert_int_equal(sched_create(&c, 2, 1, l, NULL, &s), HSR_OK);
  assert_int_equal(hsr_sched_offload(s), 1);
  assert_int_equal(sched_holds(s, HSR_SCHED_BUF_PARAM), 1);
  assert_int_equal(hsr_sched_cat_of(s, HSR_SCHED_BUF_MASTER), HSR_MEM_HOST_MASTER);
  expect_setup(s, "+host_master:128 +host_moment_m:128 +host_moment_v:128 +host_grad_shard:128 +param_shard:64 "
                  "+host_staging:64 +host_staging:64");
  expect_call(s, FB, 0, "gather 0 shard:32, wait 0 shard:32");
  expect_call(s, FE, 0, "reshard 0 shard:0");
  expect_call(s, BB, 0, "gather 0 shard:32, wait 0 shard:32, grad_buf 0");
  expect_bufs(s, BE, 0, "release 0, reduce 0 shard:32 scatter, progress, retire 0",
              "-full_unit:128 +staging:128 -reduce_scatter_buf:256 +all_reduce_buf:64 -staging:128 -all_reduce_buf:64");
  sched_free(s);
  rt_layout_free(l);
}

/* Outer shard optim (HFSDP), hybrid 2 x 2, f32, two units of 64 and 128
 * elements (shards 32 and 64, pieces 16 and 32), the step-end prefetch on.
 * The master, m, v and accumulator cover the piece (f32: the master is the
 * piece of the parameter shard, no buffer of its own); stage 2 of every
 * reduction reduce-scatters over R into a piece-sized buffer; the step
 * updates the piece and gathers the shard back over R, waiting for the
 * first unit's before the next forward's gather of it. */
static void test_sched_outer(void **state) {
  (void)state;
  rt_layout *l = outer_units(2, 2, 2);
  hsr_rt_config c = sched_cfg(HSR_RT_HYBRID);
  c.outer_shard = HSR_RT_OUTER_OPTIM;
  c.prefetch = 1;
  c.prefetch_step = 1;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 2, 2, l, NULL, &s), HSR_OK);
  assert_int_equal(sched_outer(s), 1);
  assert_int_equal(sched_piece_len(s, 1), 32);
  assert_int_equal(sched_acc_len(s, 1), 32);
  assert_int_equal(sched_holds(s, HSR_SCHED_BUF_MASTER), 0);
  assert_int_equal(sched_holds(s, HSR_SCHED_BUF_PARAM), 1);
  expect_setup(s, "+moment_m:64 +moment_v:64 +grad_shard:64 +param_shard:128 "
                  "+moment_m:128 +moment_v:128 +grad_shard:128 +param_shard:256");
  expect_call(s, FB, 0, "gather 0 shard:32, wait 0 shard:32");
  expect_call(s, FE, 0, "reshard 0 shard:0");
  expect_call(s, FB, 1, "gather 1 shard:64, wait 1 shard:64");
  expect_call(s, FE, 1, "reshard 1 shard:0");
  expect_call(s, BB, 1, "gather 1 shard:64, wait 1 shard:64, grad_buf 1");
  /* the slice (64 x 4) all-reduced nowhere: reduce-scattered over R into 32 x 4 */
  expect_bufs(s, BE, 1, "release 1, reduce 1 shard:64 scatter ar outer, progress",
              "-full_unit:512 +all_reduce_buf:256 +all_reduce_buf:128");
  expect_call(s, BB, 0, "gather 0 shard:32, wait 0 shard:32, grad_buf 0");
  expect_call(s, BE, 0, "release 0, reduce 0 shard:32 scatter ar outer, progress");
  expect_bufs(s, ST, -1,
              "retire 1 outer, retire 0 outer, norm, optim 0, regather 0 replicate:16, regather_wait 0 replicate:16, "
              "gather 0 shard:32, optim 1, regather 1 replicate:32, regather_wait 1 replicate:32, wait 0 shard:32",
              "-reduce_scatter_buf:512 -all_reduce_buf:256 -all_reduce_buf:128 "
              "-reduce_scatter_buf:256 -all_reduce_buf:128 -all_reduce_buf:64 +full_unit:256");
  assert_int_equal(sched_state_of(s, 0), HSR_SCHED_FULL);
  sched_free(s);

  /* bf16 parameters, rs_only over two micro-batches: the master is a buffer
   * of its own (1/R), the parameter shard bf16; the accumulator holds whole
   * slices until the one deferred reduce-scatter over R of the last
   * micro-batch, whose piece replaces it */
  c = sched_cfg(HSR_RT_HYBRID);
  c.outer_shard = HSR_RT_OUTER_OPTIM;
  c.param_dtype = HSR_BF16;
  c.micro_batches = 2;
  c.sync = HSR_RT_SYNC_RS_ONLY;
  assert_int_equal(sched_create(&c, 2, 2, l, NULL, &s), HSR_OK);
  assert_int_equal(sched_acc_len(s, 0), 32);
  assert_int_equal(sched_piece_len(s, 0), 16);
  expect_setup(s, "+master:64 +moment_m:64 +moment_v:64 +grad_shard:128 +param_shard:64 "
                  "+master:128 +moment_m:128 +moment_v:128 +grad_shard:256 +param_shard:128");
  for (int m = 0; m < 2; m++) {
    expect_call(s, FB, 0, "gather 0 shard:32, wait 0 shard:32");
    expect_call(s, FE, 0, "reshard 0 shard:0");
    expect_call(s, FB, 1, "gather 1 shard:64, wait 1 shard:64");
    expect_call(s, FE, 1, "reshard 1 shard:0");
    expect_call(s, BB, 1, "gather 1 shard:64, wait 1 shard:64, grad_buf 1");
    if (m == 0) {
      expect_bufs(s, BE, 1, "release 1, reduce 1 shard:64 scatter, progress", "-full_unit:256 +all_reduce_buf:256");
    } else {
      expect_bufs(s, BE, 1,
                  "release 1, reduce 1 shard:64 scatter, retire 1, retire 0, retire 1, deferred_ar 1 replicate:32 "
                  "outer, progress",
                  "-full_unit:256 +all_reduce_buf:256 -reduce_scatter_buf:512 -all_reduce_buf:256 "
                  "-reduce_scatter_buf:256 -all_reduce_buf:128 -reduce_scatter_buf:512 -all_reduce_buf:256 "
                  "+all_reduce_buf:256 +all_reduce_buf:128");
    }
    expect_call(s, BB, 0, "gather 0 shard:32, wait 0 shard:32, grad_buf 0");
    expect_call(s, BE, 0,
                m == 0 ? "release 0, reduce 0 shard:32 scatter, progress"
                       : "release 0, reduce 0 shard:32 scatter, retire 1 deferred outer, retire 0, deferred_ar 0 "
                         "replicate:16 outer, progress");
  }
  expect_bufs(s, ST, -1,
              "retire 0 deferred outer, norm, optim 0, regather 0 replicate:16, optim 1, regather 1 replicate:32, "
              "regather_wait 0 replicate:16, regather_wait 1 replicate:32",
              "-all_reduce_buf:128 -all_reduce_buf:64");
  sched_free(s);
  rt_layout_free(l);
}

/* FSDP2's footprint with bf16 parameters: no parameter shard beside the f32
 * master; each gather's input is a bf16 copy cast from the master, taken
 * with the gather and given back when it completes (a partial gather reads
 * the kept slice, a one-rank group casts straight into the full buffer). */
static void test_sched_gather_cast(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 1), *l1 = three_units(1, 1);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.param_dtype = HSR_BF16;
  c.reshard = HSR_RT_RESHARD_PARTIAL;
  c.partial_k = 2;
  sched_ctx *s;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_OK);
  expect_setup(s, "+master:64 +moment_m:64 +moment_v:64 +grad_shard:64");
  const sched_action *a;
  int n;
  char got[512];
  assert_int_equal(sched_forward_begin(s, 0, &a, &n), HSR_OK);
  fmt(a, n, got, sizeof got);
  assert_string_equal(got, "gather 0 shard:16 cast, wait 0 shard:16 cast");
  fmt_bufs(s, a, n, got, sizeof got);
  assert_string_equal(got, "+staging:32 +full_unit:128 -staging:32");
  expect_call(s, FE, 0, "reshard 0 partial:32 partial");
  expect_call(s, BB, 0, "gather 0 partial:32 partial, wait 0 partial:32 partial, grad_buf 0");
  sched_free(s);
  c.reshard = HSR_RT_RESHARD_FULL;
  c.strategy = HSR_RT_HYBRID;
  assert_int_equal(sched_create(&c, 1, 4, l1, NULL, &s), HSR_OK);
  expect_call(s, FB, 0, "gather 0 shard:64 local, wait 0 shard:64 local");
  sched_free(s);
  rt_layout_free(l);
  rt_layout_free(l1);
}

static void test_sched_bad(void **state) {
  (void)state;
  rt_layout *l = three_units(4, 2);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  sched_ctx *s = NULL;
  assert_int_equal(sched_create(&c, 2, 1, l, NULL, &s), HSR_ERR_INVALID); /* layout is for S = 4 */
  c.reshard = HSR_RT_RESHARD_PARTIAL;
  c.partial_k = 3;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "does not divide"));
  assert_null(s);
  c = sched_cfg(HSR_RT_FSDP);
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_OK);
  const sched_action *a;
  int n;
  assert_int_equal(sched_forward_begin(s, 2, &a, &n), HSR_ERR_INVALID);
  assert_int_equal(sched_forward_end(s, 0, &a, &n), HSR_ERR_STATE); /* still sharded */
  assert_int_equal(sched_backward_begin(s, 0, &a, &n), HSR_OK);
  assert_int_equal(sched_backward_end(s, 0, &a, &n), HSR_OK);
  assert_int_equal(sched_backward_begin(s, 0, &a, &n), HSR_ERR_STATE); /* one micro-batch per step */
  assert_non_null(strstr(hsr_last_error(), "backward passes"));
  sched_free(s);
  s = NULL;
  /* the outer shard: only hybrid, only on a layout cut into R pieces per shard */
  c = sched_cfg(HSR_RT_FSDP);
  c.outer_shard = HSR_RT_OUTER_OPTIM;
  assert_int_equal(sched_create(&c, 4, 1, l, NULL, &s), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "R > 1"));
  c.strategy = HSR_RT_HYBRID;
  rt_layout *l2 = three_units(2, 2);
  assert_int_equal(sched_create(&c, 2, 2, l2, NULL, &s), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "pieces per shard"));
  assert_null(s);
  rt_layout_free(l2);
  rt_layout_free(l);
}

/* ---- the interpreter (sched_run) ---- */

/* A recording executor: the buffers it is asked for and gives back, the
 * collectives it posts and completes, in order. Stage 1 of a reduction
 * completes only when the test says so (done[unit]). */
typedef struct rec {
  sched_ctx *s;
  char log[8192];
  size_t o;
  char pool[8192];
  size_t po;
  int done[4];     /* stage 1 of the unit's reduction has finished */
  int fail_optim;  /* OPTIM of this unit fails (-1: none) */
  int waits;       /* gather waits that found a handle */
  int next_handle; /* handles are 1, 2, ... */
  void *live[64];  /* buffers given out and not yet back */
  int nlive, casts, outer_acc;
} rec;

static int is_live(const rec *r, const void *p) {
  for (int i = 0; i < r->nlive; i++)
    if (r->live[i] == p) return 1;
  return 0;
}

static void logf_(rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(rec *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  r->o += (size_t)vsnprintf(r->log + r->o, sizeof r->log - r->o, fmt, ap);
  va_end(ap);
}

static hsr_status r_get(void *ctx, int unit, const sched_bufop *b, void **p) {
  rec *r = ctx;
  r->po += (size_t)snprintf(r->pool + r->po, sizeof r->pool - r->po, "%s+%s:%zu", r->po ? " " : "",
                            mem_cat_name(b->cat), b->bytes);
  static int serial;
  *p = (void *)(intptr_t)(100000 * ++serial + 1000 * (unit + 1) + b->buf); /* distinct, recognisable */
  assert_true(r->nlive < 64);
  r->live[r->nlive++] = *p;
  return HSR_OK;
}

static void r_put(void *ctx, int unit, const sched_bufop *b, void *p) {
  rec *r = ctx;
  (void)unit;
  assert_true(is_live(r, p)); /* the interpreter gives back only what it was given, once */
  for (int i = 0; i < r->nlive; i++)
    if (r->live[i] == p) r->live[i] = r->live[--r->nlive];
  r->po += (size_t)snprintf(r->pool + r->po, sizeof r->pool - r->po, "%s-%s:%zu", r->po ? " " : "",
                            mem_cat_name(b->cat), b->bytes);
}

static hsr_status r_gather(void *ctx, const sched_action *a, void **h) {
  rec *r = ctx;
  logf_(r, "G%d ", a->unit);
  *h = (void *)(intptr_t)++r->next_handle;
  return HSR_OK;
}

static hsr_status r_gather_wait(void *ctx, const sched_action *a, void *h) {
  rec *r = ctx;
  logf_(r, "W%d ", a->unit);
  if (h) r->waits++;
  return HSR_OK;
}

static hsr_status r_optim(void *ctx, const sched_action *a) {
  rec *r = ctx;
  logf_(r, "O%d ", a->unit);
  return a->unit == r->fail_optim ? hsr_error(HSR_ERR_TRANSPORT, "optim %d failed (test)", a->unit) : HSR_OK;
}

/* The copy reads the gradient before it goes back, into a buffer taken for it. */
static hsr_status r_stage_cast(void *ctx, sched_red *e, void *grad) {
  rec *r = ctx;
  assert_true(is_live(r, grad));
  assert_true(is_live(r, e->send));
  r->casts++;
  return HSR_OK;
}

static hsr_status r_stage1(void *ctx, sched_red *e) {
  rec *r = ctx;
  logf_(r, "s1:%d ", e->unit);
  e->h = (void *)(intptr_t)++r->next_handle;
  return HSR_OK;
}

static hsr_status r_stage2(void *ctx, sched_red *e) {
  rec *r = ctx;
  logf_(r, "s2:%d ", e->unit);
  assert_true(is_live(r, e->slice));
  if (e->outer) assert_true(is_live(r, e->oslice)); /* the reduce-scatter over R writes the piece */
  e->h = (void *)(intptr_t)++r->next_handle;
  return HSR_OK;
}

static hsr_status r_test(void *ctx, sched_red *e, int *done) {
  rec *r = ctx;
  *done = e->stage == 1 ? r->done[e->unit] : 0; /* stage 2 finishes only when waited for */
  return HSR_OK;
}

static hsr_status r_wait(void *ctx, sched_red *e) {
  rec *r = ctx;
  logf_(r, "w%d:%d ", e->stage, e->unit);
  return HSR_OK;
}

static hsr_status r_acc(void *ctx, sched_red *e, void *stage) {
  rec *r = ctx;
  (void)stage;
  logf_(r, "acc:%d ", e->unit);
  if (e->outer) { /* the piece is read before it goes back */
    assert_true(is_live(r, e->oslice));
    r->outer_acc++;
  }
  return HSR_OK;
}

static const sched_exec rec_exec = {.get = r_get,
                                        .put = r_put,
                                        .gather = r_gather,
                                        .gather_wait = r_gather_wait,
                                        .optim = r_optim,
                                        .stage_cast = r_stage_cast,
                                        .stage1 = r_stage1,
                                        .stage2 = r_stage2,
                                        .test = r_test,
                                        .wait = r_wait,
                                        .accumulate = r_acc};

/* One lifecycle call decided and run; *want gets the buffers sched_buffers lists for it. */
static hsr_status run_call(rec *r, int call, int unit, char *want, size_t *wo, size_t cap) {
  const sched_action *a = NULL;
  int n = 0;
  sched_ctx *s = r->s;
  hsr_status st = call == FB   ? sched_forward_begin(s, unit, &a, &n)
                  : call == FE ? sched_forward_end(s, unit, &a, &n)
                  : call == BB ? sched_backward_begin(s, unit, &a, &n)
                  : call == BE ? sched_backward_end(s, unit, &a, &n)
                  : call == ST ? sched_step(s, &a, &n)
                               : sched_zero_grad(s, &a, &n);
  assert_int_equal(st, HSR_OK);
  char b[2048];
  fmt_bufs(s, a, n, b, sizeof b);
  if (b[0]) *wo += (size_t)snprintf(want + *wo, cap - *wo, "%s%s", *wo ? " " : "", b);
  return sched_run(s, a, n, &rec_exec, r);
}

/* hybrid 2 x 2, three units, host (two reductions stay in flight), bf16
 * reduction. Stage 1 of unit 1 finishes before stage 1 of unit 2: the
 * replicate all-reduces are still posted in the queue's order (2, then 1),
 * never in completion order, and the accumulation is FIFO. Every buffer the
 * executor saw is exactly what sched_buffers lists, in that order, and
 * everything transient is given back. */
static void test_run_fifo_and_buffers(void **state) {
  (void)state;
  rt_layout *l = three_units(2, 3);
  hsr_rt_config c = sched_cfg(HSR_RT_HYBRID);
  c.reduce_dtype = HSR_BF16;
  rec *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->fail_optim = -1;
  assert_int_equal(sched_create(&c, 2, 2, l, NULL, &r->s), HSR_OK);
  static char want[8192];
  size_t wo = 0;
  const sched_action *a;
  int n;
  assert_int_equal(sched_setup(r->s, &a, &n), HSR_OK);
  fmt_bufs(r->s, a, n, want, sizeof want);
  wo = strlen(want);
  assert_int_equal(sched_run(r->s, a, n, &rec_exec, r), HSR_OK);
  for (int u = 0; u < 3; u++) {
    assert_int_equal(run_call(r, FB, u, want, &wo, sizeof want), HSR_OK);
    assert_int_equal(run_call(r, FE, u, want, &wo, sizeof want), HSR_OK);
  }
  r->o = 0, r->log[0] = 0;
  assert_int_equal(run_call(r, BB, 2, want, &wo, sizeof want), HSR_OK);
  assert_int_equal(run_call(r, BE, 2, want, &wo, sizeof want), HSR_OK); /* stage 1 of 2 posted, not finished */
  assert_int_equal(run_call(r, BB, 1, want, &wo, sizeof want), HSR_OK);
  r->done[1] = 1; /* unit 1's stage 1 finishes first */
  assert_int_equal(run_call(r, BE, 1, want, &wo, sizeof want), HSR_OK);
  assert_null(strstr(r->log, "s2:")); /* unit 2 holds the queue: no stage 2 yet */
  r->done[2] = 1;
  assert_int_equal(run_call(r, BB, 0, want, &wo, sizeof want), HSR_OK);
  assert_int_equal(run_call(r, BE, 0, want, &wo, sizeof want), HSR_OK);
  /* backward_end 0: progress posts 2's then 1's all-reduce; 0's stage 1 is
   * still running; then the oldest (2) retires, two stay in flight */
  assert_non_null(strstr(r->log, "s1:0 s2:2 s2:1 w2:2 acc:2 "));
  assert_int_equal(sched_queued(r->s), 2);
  assert_int_equal(sched_started(r->s), 2);
  r->o = 0, r->log[0] = 0;
  assert_int_equal(run_call(r, ST, -1, want, &wo, sizeof want), HSR_OK);
  assert_string_equal(r->log, "w2:1 acc:1 w1:0 s2:0 w2:0 acc:0 O0 O1 O2 ");
  assert_int_equal(run_call(r, ZG, -1, want, &wo, sizeof want), HSR_OK);
  assert_int_equal(sched_started(r->s), 0);
  assert_int_equal(r->casts, 3);
  assert_int_equal(r->nlive, 12); /* three units' four persistent buffers (the master is the shard) */
  if (strcmp(r->pool, want)) fprintf(stderr, "pool:\n  got  %s\n  want %s\n", r->pool, want);
  assert_string_equal(r->pool, want);
  /* nothing transient left in use: every unit holds only its four persistent buffers */
  for (int u = 0; u < 3; u++)
    for (int b = HSR_SCHED_BUF_FULL; b < HSR_SCHED_BUF_COUNT; b++) assert_null(sched_buf_of(r->s, u, (sched_buf)b));
  assert_non_null(sched_buf_of(r->s, 0, HSR_SCHED_BUF_MASTER));
  sched_free(r->s);
  free(r);
  rt_layout_free(l);
}

/* The outer shard through the interpreter: hybrid 2 x 2, bf16 reduction,
 * two units. Every reduction's piece buffer is there for its reduce-scatter
 * over R and its accumulation, and back after; the step's gathers over R
 * are posted after each update and waited for at the end; what the pool
 * saw is exactly sched_buffers' list. */
static void test_run_outer(void **state) {
  (void)state;
  rt_layout *l = outer_units(2, 2, 2);
  hsr_rt_config c = sched_cfg(HSR_RT_HYBRID);
  c.outer_shard = HSR_RT_OUTER_OPTIM;
  c.reduce_dtype = HSR_BF16;
  rec *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->fail_optim = -1;
  sched_exec x = rec_exec;
  x.regather = r_gather;
  x.regather_wait = r_gather_wait;
  assert_int_equal(sched_create(&c, 2, 2, l, NULL, &r->s), HSR_OK);
  static char want[8192];
  size_t wo = 0;
  const sched_action *a;
  int n;
  assert_int_equal(sched_setup(r->s, &a, &n), HSR_OK);
  fmt_bufs(r->s, a, n, want, sizeof want);
  wo = strlen(want);
  assert_int_equal(sched_run(r->s, a, n, &x, r), HSR_OK);
  int calls[][2] = {{FB, 0}, {FE, 0}, {FB, 1}, {FE, 1}, {BB, 1}, {BE, 1}, {BB, 0}, {BE, 0}, {ST, -1}, {ZG, -1}};
  r->done[0] = r->done[1] = 1;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    if (calls[i][0] == ST) r->o = 0, r->log[0] = 0;
    const sched_action *b = NULL;
    int nb = 0, call = calls[i][0], unit = calls[i][1];
    hsr_status st = call == FB   ? sched_forward_begin(r->s, unit, &b, &nb)
                    : call == FE ? sched_forward_end(r->s, unit, &b, &nb)
                    : call == BB ? sched_backward_begin(r->s, unit, &b, &nb)
                    : call == BE ? sched_backward_end(r->s, unit, &b, &nb)
                    : call == ST ? sched_step(r->s, &b, &nb)
                                 : sched_zero_grad(r->s, &b, &nb);
    assert_int_equal(st, HSR_OK);
    char t[2048];
    fmt_bufs(r->s, b, nb, t, sizeof t);
    if (t[0]) wo += (size_t)snprintf(want + wo, sizeof want - wo, " %s", t);
    assert_int_equal(sched_run(r->s, b, nb, &x, r), HSR_OK);
    if (call == ST) assert_string_equal(r->log, "w2:1 acc:1 w2:0 acc:0 O0 G0 O1 G1 W0 W1 ");
  }
  assert_int_equal(r->outer_acc, 2);
  assert_int_equal(r->casts, 2);
  assert_int_equal(r->nlive, 8); /* two units' m, v, accumulator and parameter shard (the f32 master is in it) */
  if (strcmp(r->pool, want)) fprintf(stderr, "pool:\n  got  %s\n  want %s\n", r->pool, want);
  assert_string_equal(r->pool, want);
  assert_non_null(strstr(r->pool, "+all_reduce_buf:32")); /* a piece of unit 0: 16 bf16 elements */
  for (int u = 0; u < 2; u++)
    for (int b = HSR_SCHED_BUF_FULL; b < HSR_SCHED_BUF_COUNT; b++) assert_null(sched_buf_of(r->s, u, (sched_buf)b));
  sched_free(r->s);
  free(r);
  rt_layout_free(l);
}

/* NULL callbacks are no effect; a RETIRE the queue does not hold is an
 * internal error; after a failed action the list still completes the
 * gathers it posted (the step-end prefetch) and returns the first error. */
static void test_run_errors(void **state) {
  (void)state;
  rt_layout *l = three_units(2, 3);
  hsr_rt_config c = sched_cfg(HSR_RT_FSDP);
  c.prefetch = 1;
  c.prefetch_step = 1;
  rec *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->fail_optim = -1;
  sched_exec none = {0};
  assert_int_equal(sched_create(&c, 2, 1, l, NULL, &r->s), HSR_OK);
  const sched_action *a;
  int n;
  assert_int_equal(sched_setup(r->s, &a, &n), HSR_OK);
  assert_int_equal(sched_run(r->s, a, n, &none, NULL), HSR_OK);
  sched_action bogus = {.op = HSR_SCHED_RETIRE, .unit = 1, .group = -1};
  assert_int_equal(sched_run(r->s, &bogus, 1, &rec_exec, r), HSR_ERR_INTERNAL);
  assert_non_null(strstr(hsr_last_error(), "reduction queue"));
  size_t wo = 0;
  static char want[8192];
  for (int u = 0; u < 3; u++) {
    assert_int_equal(run_call(r, FB, u, want, &wo, sizeof want), HSR_OK);
    assert_int_equal(run_call(r, FE, u, want, &wo, sizeof want), HSR_OK);
  }
  for (int u = 2; u >= 0; u--) {
    r->done[u] = 1;
    assert_int_equal(run_call(r, BB, u, want, &wo, sizeof want), HSR_OK);
    assert_int_equal(run_call(r, BE, u, want, &wo, sizeof want), HSR_OK);
  }
  r->o = 0, r->log[0] = 0;
  r->fail_optim = 1; /* after the first unit's update and its gather */
  r->waits = 0;
  assert_int_equal(run_call(r, ST, -1, want, &wo, sizeof want), HSR_ERR_TRANSPORT);
  assert_non_null(strstr(r->log, "O0 G0 O1 W0 "));
  assert_null(strstr(r->log, "O2"));
  assert_int_equal(r->waits, 1);
  sched_free(r->s);
  free(r);
  rt_layout_free(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_sched_partial_prefetch),
                                     cmocka_unit_test(test_sched_cap_and_root),
                                     cmocka_unit_test(test_sched_zero1_regather),
                                     cmocka_unit_test(test_sched_step_prefetch),
                                     cmocka_unit_test(test_sched_rs_only_bf16),
                                     cmocka_unit_test(test_sched_local_and_device),
                                     cmocka_unit_test(test_sched_outer),
                                     cmocka_unit_test(test_sched_gather_cast),
                                     cmocka_unit_test(test_sched_bad),
                                     cmocka_unit_test(test_run_fifo_and_buffers),
                                     cmocka_unit_test(test_run_errors),
                                     cmocka_unit_test(test_run_outer),
                                     cmocka_unit_test(test_sched_offload),
                                     cmocka_unit_test(test_predict_fsdp),
                                     cmocka_unit_test(test_wrap)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
