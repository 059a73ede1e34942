/* The arithmetic of `hsr trace summarize` (trace_steps) on generated
 * traces with known answers: spans that cross step boundaries (each step
 * gets only its part), nested and overlapping spans on several lanes, gaps,
 * several ranks (means per rank); and property tests on random traces
 * against an independent oracle that counts 1-microsecond cells: exposed <=
 * communication, exposed + hidden = communication, and the per-step figures
 * add up to those of the whole traced time; half their all-gathers carry no
 * step argument and count in the step window they start in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/io/trace.h"

/* ---- writing a Chrome trace by hand (times in microseconds) ---- */
typedef struct tbuf {
  char *s;
  size_t n, cap;
} tbuf;

static void put(tbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    b->cap = b->cap ? 2 * b->cap : 4096;
    b->s = realloc(b->s, b->cap);
    assert_non_null(b->s);
  }
}

/* cat: step, compute, comm, runtime. step: the args.step (0: none). */
static void ev(tbuf *b, int pid, const char *cat, const char *name, const char *lane, double t0, double t1, int step,
               const char *unit) {
  put(b, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{",
      b->n > 16 ? "," : "", name, cat, t0, t1 - t0, pid, (int)strlen(lane));
  if (unit) put(b, "\"unit\":\"%s\",", unit);
  put(b, "\"step\":%d}}", step);
}

static void open_trace(tbuf *b) {
  memset(b, 0, sizeof *b);
  put(b, "{\"traceEvents\":[");
  /* metadata events are not spans: the summary skips them */
  put(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"rank 0\"}}");
}

/* Closes the document, writes it and summarizes it. */
static trace_step_summary *summarize(tbuf *b, int *n) {
  put(b, "]}");
  char path[] = "/tmp/hsr_trace_sumXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, b->s, b->n), (ssize_t)b->n);
  close(fd);
  free(b->s);
  trace_step_summary *s = NULL;
  hsr_status st = trace_steps(path, &s, n);
  if (st != HSR_OK) fail_msg("trace_steps: %s", hsr_last_error());
  remove(path);
  return s;
}

#define NEAR(a, b) (fabs_((a) - (b)) < 1e-9)
static double fabs_(double x) { return x < 0 ? -x : x; }

static void expect_ms(const char *what, int64_t step, double got, double want) {
  if (!NEAR(got, want)) fail_msg("step %lld: %s is %.6f ms, expected %.6f ms", (long long)step, what, got, want);
}

static const trace_step_summary *step_of(const trace_step_summary *s, int n, int64_t step) {
  for (int i = 0; i < n; i++)
    if (s[i].step == step) return &s[i];
  fail_msg("no summary for step %lld", (long long)step);
  return NULL;
}

/* A collective that starts in step 1 and ends in step 2 counts 1 ms in step 1
 * and 3 ms in step 2, not 4 ms in each; its count goes to the step that
 * issued it (args.step), its time to the windows it falls in. */
static void crossing_boundary(void **state) {
  (void)state;
  tbuf b;
  open_trace(&b);
  ev(&b, 0, "step", "step", "step", 0, 10000, 1, NULL);
  ev(&b, 0, "step", "step", "step", 10000, 20000, 2, NULL);
  ev(&b, 0, "comm", "all_gather", "comm shard", 9000, 13000, 1, "blk0");
  ev(&b, 0, "compute", "forward", "compute", 12000, 15000, 2, "blk0"); /* hides 1 ms of step 2's 3 */
  /* outside every step window: counted nowhere */
  ev(&b, 0, "comm", "all_reduce", "comm replicate", 25000, 26000, 0, NULL);
  int n;
  trace_step_summary *s = summarize(&b, &n);
  assert_int_equal(n, 2);
  const trace_step_summary *a = step_of(s, n, 1), *c = step_of(s, n, 2);
  expect_ms("step 1 communication", 1, a->comm_ms, 1.0);
  expect_ms("step 1 exposed", 1, a->exposed_ms, 1.0);
  expect_ms("step 1 all-gather time", 1, a->gather_ms, 1.0);
  expect_ms("step 2 communication", 2, c->comm_ms, 3.0);
  expect_ms("step 2 exposed", 2, c->exposed_ms, 2.0);
  expect_ms("step 2 all-gather exposed", 2, c->gather_exposed_ms, 2.0);
  expect_ms("step 2 compute", 2, c->compute_ms, 3.0);
  expect_ms("step length", 2, c->step_ms, 10.0);
  assert_int_equal(a->all_gathers, 1);
  assert_int_equal(c->all_gathers, 0);
  assert_true(NEAR(c->overlap, 1.0 / 3.0));
  free(s);
}

/* Nested compute, two overlapping communicators, gaps; the union counts once. */
static void nested_overlapping_gaps(void **state) {
  (void)state;
  tbuf b;
  open_trace(&b);
  ev(&b, 0, "step", "step", "step", 0, 20000, 1, NULL);
  ev(&b, 0, "compute", "forward", "compute", 0, 5000, 1, "blk0");
  ev(&b, 0, "compute", "optimizer", "compute", 1000, 3000, 1, NULL); /* nested in the forward span */
  ev(&b, 0, "compute", "backward", "compute", 7000, 9000, 1, "blk0");
  ev(&b, 0, "comm", "all_gather", "comm shard", 2000, 6000, 1, "blk1");
  ev(&b, 0, "comm", "reduce_scatter", "comm replicate", 4000, 8000, 1, "blk0"); /* overlaps the gather */
  ev(&b, 0, "comm", "all_gather", "comm shard", 12000, 13000, 1, "blk2");       /* after a gap, exposed */
  ev(&b, 0, "runtime", "reshard", "runtime", 0, 20000, 1, "blk0");              /* not compute, not communication */
  int n;
  trace_step_summary *s = summarize(&b, &n);
  assert_int_equal(n, 1);
  /* comm union [2,8] + [12,13] = 7; compute union [0,5] + [7,9] = 7; hidden [2,5] + [7,8] = 4 */
  expect_ms("communication", 1, s[0].comm_ms, 7.0);
  expect_ms("compute", 1, s[0].compute_ms, 7.0);
  expect_ms("exposed", 1, s[0].exposed_ms, 3.0);
  /* gathers [2,6] + [12,13] = 5, hidden [2,5] = 3 */
  expect_ms("all-gather time", 1, s[0].gather_ms, 5.0);
  expect_ms("all-gather exposed", 1, s[0].gather_exposed_ms, 2.0);
  assert_int_equal(s[0].all_gathers, 2);
  assert_true(NEAR(s[0].overlap, 4.0 / 7.0));
  free(s);
}

/* Several ranks: every figure is the mean per rank; so is the gather count. */
static void several_ranks(void **state) {
  (void)state;
  tbuf b;
  open_trace(&b);
  for (int r = 0; r < 3; r++) {
    double o = r * 500.0; /* ranks' step windows differ */
    ev(&b, r, "step", "step", "step", o, o + 10000, 1, NULL);
    ev(&b, r, "compute", "forward", "compute", o, o + 2000, 1, "blk0");
    for (int k = 0; k <= r; k++) /* rank r: r + 1 gathers of 1 ms each, after its compute */
      ev(&b, r, "comm", "all_gather", "comm shard", o + 3000 + 2000 * k, o + 4000 + 2000 * k, 1, "blk0");
  }
  int n;
  trace_step_summary *s = summarize(&b, &n);
  assert_int_equal(n, 1);
  assert_int_equal(s[0].ranks, 3);
  expect_ms("communication", 1, s[0].comm_ms, 2.0); /* (1 + 2 + 3) / 3 */
  expect_ms("exposed", 1, s[0].exposed_ms, 2.0);
  expect_ms("compute", 1, s[0].compute_ms, 2.0);
  assert_int_equal(s[0].all_gathers, 2);
  free(s);
}

/* Gathers without a step argument count in the window they start in, even
 * where steps differ in length and leave gaps (the random traces below have
 * neither): one in the gap after a short step counts nowhere, one inside a
 * long step counts there and not in the short step that began before it. */
static void stepless_gathers_in_gaps(void **state) {
  (void)state;
  tbuf b;
  open_trace(&b);
  ev(&b, 0, "step", "step", "step", 0, 100, 1, NULL);
  ev(&b, 0, "step", "step", "step", 300, 1300, 2, NULL);
  ev(&b, 0, "comm", "all_gather", "comm shard", 150, 160, 0, "u");
  ev(&b, 0, "comm", "all_gather", "comm shard", 350, 360, 0, "u");
  int n;
  trace_step_summary *s = summarize(&b, &n);
  assert_int_equal(n, 2);
  assert_int_equal(s[0].all_gathers, 0);
  assert_int_equal(s[1].all_gathers, 1);
  free(s);
}

/* ---- property tests against a cell-counting oracle ---- */
enum { MAXR = 4, MAXS = 5, CELL_US = 1 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

typedef struct oracle {
  double comm[MAXS], comp[MAXS], hidden[MAXS], ag[MAXS], ag_hidden[MAXS];
  long gathers[MAXS];
} oracle;

/* One random trace of `ranks` ranks and `steps` back-to-back steps of T us. */
static void random_case(int ranks, int steps, int T, oracle *o, tbuf *b) {
  memset(o, 0, sizeof *o);
  open_trace(b);
  int span = T * steps;
  unsigned char *cm = malloc((size_t)span * 3), *cp = cm + span, *ga = cp + span;
  for (int r = 0; r < ranks; r++) {
    memset(cm, 0, (size_t)span * 3);
    for (int k = 0; k < steps; k++) ev(b, r, "step", "step", "step", k * T, (k + 1) * T, k + 1, NULL);
    int nsp = 4 + (int)rnd(20);
    for (int i = 0; i < nsp; i++) {
      int kind = (int)rnd(3); /* 0 compute, 1 all_gather, 2 reduce_scatter */
      int a = (int)rnd((unsigned)span + T) - T / 2,
          len = 1 + (int)rnd((unsigned)T); /* may start before the first step */
      int c = a + len;
      int issued = a < 0 ? 1 : a / T + 1;
      if (issued > steps) issued = steps;
      /* half the gathers carry no step argument (another writer's trace):
       * they count in the window they start in, the earlier one on a
       * boundary, and nowhere outside every window */
      int noarg = kind == 1 && rnd(2);
      int window = a < 0 || a > span ? 0 : a == 0 ? 1 : (a + T - 1) / T;
      ev(b, r, kind ? "comm" : "compute",
         kind == 0   ? "forward"
         : kind == 1 ? "all_gather"
                     : "reduce_scatter",
         kind == 0   ? "compute"
         : kind == 1 ? "comm shard"
                     : "comm replicate",
         a, c, noarg ? 0 : issued, "u");
      if (kind == 1 && !noarg) o->gathers[issued - 1]++;
      if (noarg && window) o->gathers[window - 1]++;
      for (int t = a < 0 ? 0 : a; t < c && t < span; t++) {
        if (kind == 0) cp[t] = 1;
        if (kind >= 1) cm[t] = 1;
        if (kind == 1) ga[t] = 1;
      }
    }
    for (int t = 0; t < span; t++) {
      int k = t / T;
      o->comm[k] += cm[t];
      o->comp[k] += cp[t];
      o->hidden[k] += cm[t] && cp[t];
      o->ag[k] += ga[t];
      o->ag_hidden[k] += ga[t] && cp[t];
    }
  }
  free(cm);
  for (int k = 0; k < steps; k++) { /* microsecond cells -> mean milliseconds per rank */
    o->comm[k] /= 1e3 * ranks;
    o->comp[k] /= 1e3 * ranks;
    o->hidden[k] /= 1e3 * ranks;
    o->ag[k] /= 1e3 * ranks;
    o->ag_hidden[k] /= 1e3 * ranks;
  }
}

static void properties(void **state) {
  (void)state;
  for (int iter = 0; iter < 300; iter++) {
    int ranks = 1 + (int)rnd(MAXR), steps = 1 + (int)rnd(MAXS), T = 50 + (int)rnd(200);
    oracle o;
    tbuf b;
    random_case(ranks, steps, T, &o, &b);
    int n;
    trace_step_summary *s = summarize(&b, &n);
    assert_int_equal(n, steps);
    double sum_comm = 0, whole_comm = 0, sum_exposed = 0, whole_exposed = 0;
    for (int k = 0; k < steps; k++) {
      const trace_step_summary *x = step_of(s, n, k + 1);
      if (x->ranks != ranks) fail_msg("case %d step %d: %d ranks, expected %d", iter, k + 1, x->ranks, ranks);
      expect_ms("communication", k + 1, x->comm_ms, o.comm[k]);
      expect_ms("compute", k + 1, x->compute_ms, o.comp[k]);
      expect_ms("all-gather time", k + 1, x->gather_ms, o.ag[k]);
      expect_ms("all-gather exposed", k + 1, x->gather_exposed_ms, o.ag[k] - o.ag_hidden[k]);
      if (x->exposed_ms > x->comm_ms + 1e-12) fail_msg("case %d step %d: exposed > communication", iter, k + 1);
      /* exposed + hidden = communication (hidden from the oracle, the rest from the summary) */
      expect_ms("exposed + hidden", k + 1, x->exposed_ms + o.hidden[k], x->comm_ms);
      long want = (long)((double)o.gathers[k] / ranks + 0.5);
      if (x->all_gathers != want)
        fail_msg("case %d step %d: %ld all-gathers, expected %ld", iter, k + 1, x->all_gathers, want);
      sum_comm += x->comm_ms;
      sum_exposed += x->exposed_ms;
      whole_comm += o.comm[k];
      whole_exposed += o.comm[k] - o.hidden[k];
    }
    /* back-to-back steps tile the traced time: the steps add up to the whole */
    if (!NEAR(sum_comm, whole_comm) || !NEAR(sum_exposed, whole_exposed))
      fail_msg("case %d: per-step communication sums to %.6f ms (exposed %.6f), the whole is %.6f (%.6f)", iter,
               sum_comm, sum_exposed, whole_comm, whole_exposed);
    free(s);
  }
}

/* The interval arithmetic itself, shared with the tuner: unsorted, nested,
 * touching and disjoint intervals, by hand. */
static void interval_arithmetic(void **state) {
  (void)state;
  ival v[] = {{5, 6}, {0, 2}, {1, 3}, {1.5, 2.5}, {3, 4}, {8, 9}};
  int n = 6;
  assert_int_equal(ival_merge(v, &n), HSR_OK);
  assert_int_equal(n, 3); /* [0,4] (touching at 3 joins), [5,6], [8,9] */
  assert_true(v[0].a == 0 && v[0].b == 4 && v[1].a == 5 && v[1].b == 6 && v[2].a == 8 && v[2].b == 9);
  assert_true(ival_length(v, n) == 6);
  ival w[] = {{3.5, 5.5}, {8.5, 10}};
  assert_true(ival_overlap(v, n, w, 2) == 0.5 + 0.5 + 0.5);
  assert_true(ival_overlap(v, n, w, 0) == 0);
  int zero = 0;
  assert_int_equal(ival_merge(NULL, &zero), HSR_OK);
  assert_int_equal(ival_merge(NULL, &n), HSR_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(crossing_boundary),   cmocka_unit_test(nested_overlapping_gaps),
                                     cmocka_unit_test(several_ranks),       cmocka_unit_test(properties),
                                     cmocka_unit_test(interval_arithmetic), cmocka_unit_test(stepless_gathers_in_gaps)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
