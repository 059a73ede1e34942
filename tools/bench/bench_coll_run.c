/* One size of hsr bench <collective>: warm-up, the timed iterations (nccl-tests'
 * -n, -m, -z), per-iteration times (-I), the counters of the timed ops, the
 * check iterations (-c), and the reduction of the times over ranks (-a).
 * Several groups at once (--concurrent) post their ops interleaved; each
 * group's time then comes from its own ops' transport timestamps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_coll.h"
#include "hsr/kmath.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"
#include "common/common_internal.h"
#include "common/env.h"

/* ---- element access -------------------------------------------------------- */
/* The bench's values (small integers and their quarters) are exact in every
 * dtype; 16-bit formats go through the kernels' casts (kmath.h). */
static void put(hsr_dtype dt, void *p, size_t i, double v) {
  switch (dt) {
  case HSR_F32: ((float *)p)[i] = (float)v; break;
  case HSR_F64: ((double *)p)[i] = v; break;
  case HSR_BF16: ((uint16_t *)p)[i] = hsr_km_f32_to_bf16((float)v); break;
  case HSR_F16: ((uint16_t *)p)[i] = hsr_km_f32_to_f16((float)v); break;
  case HSR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((uint8_t *)p)[i] = (uint8_t)v; break;
  }
}
static double get(hsr_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case HSR_F32: return ((const float *)p)[i];
  case HSR_F64: return ((const double *)p)[i];
  case HSR_BF16: return hsr_km_bf16_to_f32(((const uint16_t *)p)[i]);
  case HSR_F16: return hsr_km_f16_to_f32(((const uint16_t *)p)[i]);
  case HSR_I32: return ((const int32_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}
static double ref_reduce(hsr_dtype dt, hsr_redop op, int n, size_t i) {
  int u8 = dt == HSR_U8;
  double acc = nt_val(0, i, u8);
  for (int r = 1; r < n; r++) {
    double v = nt_val(r, i, u8);
    acc = op == HSR_MAX ? fmax(acc, v) : acc + v;
  }
  if (op == HSR_AVG) acc = (dt == HSR_I32 || u8) ? (double)((long long)acc / n) : acc / n;
  return acc;
}

size_t bc_count(const bc_opts *o, const bc_group *g, size_t bytes) {
  size_t es = dtype_size(o->dt);
  return o->coll <= NT_REDUCE_SCATTER ? bytes / es / (size_t)g->n : bytes / es;
}

/* ---- posting and checking ----------------------------------------------------- */
static hsr_status issue(const bc_opts *o, bc_group *g, size_t count, int inplace, hsr_req **req) {
  int r = hsr_comm_rank(g->c);
  size_t es = dtype_size(o->dt);
  switch (o->coll) {
  case NT_ALLGATHER:
    return inplace ? hsr_comm_allgather(g->c, g->b + (size_t)r * count * es, g->b, count, o->dt, req)
                   : hsr_comm_allgather(g->c, g->a, g->b, count, o->dt, req);
  case NT_REDUCE_SCATTER:
    return inplace ? hsr_comm_reduce_scatter(g->c, g->a, g->a + (size_t)r * count * es, count, o->dt, o->redop, req)
                   : hsr_comm_reduce_scatter(g->c, g->a, g->b, count, o->dt, o->redop, req);
  case NT_ALLREDUCE: return hsr_comm_allreduce(g->c, g->a, inplace ? g->a : g->b, count, o->dt, o->redop, req);
  default: return hsr_comm_bcast(g->c, inplace ? g->a : g->b, count, o->dt, (int)o->root, req);
  }
}

static double wait_limit(const bc_opts *o) { return o->timeout > 0 ? o->timeout : -1; }

static hsr_status wait_req(const bc_opts *o, hsr_req **r) {
  hsr_status st = *r ? hsr_req_wait(*r, wait_limit(o)) : HSR_OK;
  *r = NULL;
  return st;
}

/* Waits for r and reports the transport's start and end times: polls (the
 * times are the transport's own, so the polling interval does not enter
 * them), with -T enforced by a final bounded wait. */
static hsr_status wait_times(const bc_opts *o, hsr_req **r, uint64_t *t0, uint64_t *t1) {
  int done = 0;
  long ns = 20000;
  double start = clock_s();
  hsr_status st = HSR_OK;
  while (st == HSR_OK && !done) {
    st = req_test(*r, &done);
    if (done || st != HSR_OK) break;
    if (o->timeout > 0 && clock_s() - start > o->timeout) break; /* the wait below names the peer */
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
  req_times(*r, t0, t1);
  hsr_status w = wait_req(o, r);
  return st != HSR_OK ? st : w;
}

/* Fills the inputs, runs once, returns the number of wrong elements. */
static long long check_once(const bc_opts *o, bc_group *g, size_t count, int inplace, hsr_status *st) {
  int n = g->n, r = hsr_comm_rank(g->c), u8 = o->dt == HSR_U8, root = (int)o->root;
  size_t es = dtype_size(o->dt);
  char *in = o->coll == NT_ALLGATHER && inplace ? g->b + (size_t)r * count * es
             : o->coll == NT_BCAST && !inplace  ? g->b
                                                : g->a;
  size_t nin = o->coll == NT_REDUCE_SCATTER ? count * (size_t)n : count;
  for (size_t i = 0; i < nin; i++) put(o->dt, in, i, o->coll == NT_BCAST && r != root ? 3 : nt_val(r, i, u8));
  hsr_req *req = NULL;
  *st = issue(o, g, count, inplace, &req);
  if (*st == HSR_OK) *st = wait_req(o, &req);
  if (*st != HSR_OK) return 0;
  const char *out = o->coll == NT_REDUCE_SCATTER ? (inplace ? g->a + (size_t)r * count * es : g->b)
                    : o->coll == NT_ALLGATHER    ? g->b
                    : inplace                    ? g->a
                                                 : g->b;
  size_t nout = o->coll == NT_ALLGATHER ? count * (size_t)n : count;
  long long wrong = 0;
  /* HSR_BENCH_CHECK_FAULT=1: rank 0 of each group counts one element wrong (tests the wrong-results path) */
  int fault = 0;
  if (env_get_bool("HSR_BENCH_CHECK_FAULT", &fault) == HSR_OK && fault && r == 0 && nout) wrong++;
  for (size_t i = 0; i < nout; i++) {
    double want;
    switch (o->coll) {
    case NT_ALLGATHER: want = nt_val((int)(i / count), i % count, u8); break;
    case NT_REDUCE_SCATTER: want = ref_reduce(o->dt, o->redop, n, (size_t)r * count + i); break;
    case NT_ALLREDUCE: want = ref_reduce(o->dt, o->redop, n, i); break;
    default: want = nt_val(root, i, u8); break;
    }
    if (get(o->dt, out, i) != want) wrong++;
  }
  return wrong;
}

/* ---- the timed loop ------------------------------------------------------------- */
typedef struct lane {
  bc_group *g;
  size_t count;
  hsr_req **reqs;
  double *iter_us;
  uint64_t last_end; /* ns, transport time of its last op */
  hsr_comm_counter before, after;
} lane;

static hsr_status barrier(const bc_opts *o, hsr_comm *w) {
  hsr_req *r = NULL;
  HSR_CHECK(hsr_comm_barrier(w, &r));
  return wait_req(o, &r);
}

/* Waits for lane l's ops [lo, hi); the last one's transport end time is kept
 * when `times` (concurrent groups, or -z 0 with -I: every op's). */
static hsr_status drain(const bc_opts *o, lane *l, long lo, long hi, int times, int every) {
  hsr_status st = HSR_OK;
  for (long i = lo; i < hi; i++) {
    if (!l->reqs[i]) continue;
    if (times && (every || i == hi - 1)) {
      uint64_t a, b;
      hsr_status s2 = wait_times(o, &l->reqs[i], &a, &b);
      if (s2 == HSR_OK && b > l->last_end) l->last_end = b;
      if (s2 == HSR_OK && every && l->iter_us)
        l->iter_us[i / o->agg] = (double)(b - a) / 1e3; /* -m: the group's last */
      if (st == HSR_OK) st = s2;
    } else {
      hsr_status s2 = wait_req(o, &l->reqs[i]);
      if (st == HSR_OK) st = s2;
    }
  }
  return st;
}

static hsr_status timed(const bc_opts *o, hsr_comm *w, lane *L, int ng, int inplace, double *t_s) {
  long total = o->iters * o->agg;
  int conc = ng > 1, every = o->per_iter && o->blocking == 0;
  hsr_status st = HSR_OK;
  double coll_only = 0;
  uint64_t t0 = hsr_clock_ns();
  for (long i = 0; i < o->iters && st == HSR_OK; i++) {
    uint64_t ti = hsr_clock_ns();
    for (long a = 0; a < o->agg && st == HSR_OK; a++) {
      for (int k = 0; k < ng && st == HSR_OK; k++)
        st = issue(o, L[k].g, L[k].count, inplace, &L[k].reqs[i * o->agg + a]);
      if (o->blocking == 1 || o->blocking == 2)
        for (int k = 0; k < ng && st == HSR_OK; k++) st = drain(o, &L[k], i * o->agg + a, i * o->agg + a + 1, conc, 0);
      if (st == HSR_OK && o->blocking == 1) st = barrier(o, w);
    }
    if (st == HSR_OK && o->blocking == 3)
      for (int k = 0; k < ng && st == HSR_OK; k++) st = drain(o, &L[k], i * o->agg, (i + 1) * o->agg, conc, 0);
    uint64_t te = hsr_clock_ns();
    if (o->per_iter && o->blocking != 0)
      for (int k = 0; k < ng; k++) L[k].iter_us[i] = (double)(te - ti) / 1e3;
    if (st == HSR_OK && o->blocking == 3) {
      coll_only += (double)(te - ti) / 1e9;
      st = barrier(o, w);
    }
  }
  for (int k = 0; k < ng; k++) { /* every op: the remaining ones, or all of them after a failure */
    hsr_status s2 = drain(o, &L[k], 0, total, conc || every, every);
    if (st == HSR_OK) st = s2;
  }
  double wall = (double)(hsr_clock_ns() - t0) / 1e9;
  for (int k = 0; k < ng; k++)
    t_s[k] = (o->blocking == 3             ? coll_only
              : conc && L[k].last_end > t0 ? (double)(L[k].last_end - t0) / 1e9
                                           : wall) /
             (double)total;
  return st;
}

/* ---- statistics ---------------------------------------------------------------- */
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void iter_stats(const double *t, long n, bc_iter *s) {
  double *v = malloc((size_t)n * sizeof *v);
  if (!v) return;
  memcpy(v, t, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  double sum = 0, var = 0;
  for (long i = 0; i < n; i++) sum += v[i];
  s->avg = sum / (double)n;
  for (long i = 0; i < n; i++) var += (v[i] - s->avg) * (v[i] - s->avg);
  s->min = v[0], s->max = v[n - 1], s->p50 = v[n / 2];
  long i95 = (n * 95 + 99) / 100 - 1, i99 = (n * 99 + 99) / 100 - 1; /* nearest rank, as nccl-tests */
  s->p95 = v[i95 < n - 1 ? i95 : n - 1], s->p99 = v[i99 < n - 1 ? i99 : n - 1];
  s->stdev = sqrt(var / (double)n);
  s->cv = s->avg > 0 ? 100 * s->stdev / s->avg : 0;
  free(v);
}

/* -a: the time reported is rank 0's, the mean, the minimum or the maximum over ranks. */
static hsr_status over_ranks(const bc_opts *o, hsr_comm *w, double *t, int n) {
  double v[BC_KINDS];
  int me = hsr_comm_rank(w);
  for (int k = 0; k < n; k++) v[k] = o->average == 0 && me != 0 ? 0 : t[k];
  hsr_redop op = o->average == 1 ? HSR_AVG : o->average == 0 ? HSR_SUM : HSR_MAX;
  if (o->average == 2)
    for (int k = 0; k < n; k++) v[k] = -v[k]; /* min = -max(-t) */
  HSR_CHECK(hsr_comm_allreduce(w, v, t, (size_t)n, HSR_F64, op, NULL));
  if (o->average == 2)
    for (int k = 0; k < n; k++) t[k] = -t[k];
  return HSR_OK;
}

static void lanes_free(lane *L, int ng) {
  for (int k = 0; k < ng; k++) {
    free(L[k].reqs);
    free(L[k].iter_us);
  }
}

/* Warm-up, the timed loop, the counters of the timed ops, then -c checks. */
static hsr_status measure(const bc_opts *o, hsr_comm *w, lane *L, int ng, int inplace, double *t) {
  hsr_status st = HSR_OK;
  for (long i = 0; i < o->warmup && st == HSR_OK; i++) {
    for (int k = 0; k < ng && st == HSR_OK; k++) st = issue(o, L[k].g, L[k].count, inplace, &L[k].reqs[0]);
    for (int k = 0; k < ng; k++) {
      hsr_status s2 = wait_req(o, &L[k].reqs[0]);
      if (st == HSR_OK) st = s2;
    }
  }
  if (st == HSR_OK) st = barrier(o, w);
  for (int k = 0; k < ng && st == HSR_OK; k++) st = comm_counters(L[k].g->c, (hsr_op)o->coll, &L[k].before);
  if (st == HSR_OK) st = timed(o, w, L, ng, inplace, t);
  for (int k = 0; k < ng && st == HSR_OK; k++) st = comm_counters(L[k].g->c, (hsr_op)o->coll, &L[k].after);
  return st;
}

hsr_status bc_run_size(const bc_opts *o, hsr_boot *boot, hsr_comm *w, bc_group *g, int ng, size_t bytes, int inplace,
                       bc_one *res) {
  (void)boot;
  lane L[BC_KINDS];
  long total = o->iters * o->agg;
  memset(L, 0, sizeof L);
  hsr_status st = HSR_OK;
  for (int k = 0; k < ng; k++) {
    L[k].g = &g[k];
    L[k].count = bc_count(o, &g[k], bytes);
    L[k].reqs = calloc((size_t)total, sizeof *L[k].reqs);
    if (o->per_iter) L[k].iter_us = calloc((size_t)o->iters, sizeof *L[k].iter_us);
    if (!L[k].reqs || (o->per_iter && !L[k].iter_us)) st = hsr_error(HSR_ERR_NOMEM, "request table");
  }
  double t[BC_KINDS] = {0}, d[2 * BC_KINDS];
  if (st == HSR_OK) st = measure(o, w, L, ng, inplace, t);
  if (st == HSR_OK) st = over_ranks(o, w, t, ng);
  /* bytes each rank sent per op, and the fabric part of what it moved: most over ranks */
  for (int k = 0; k < ng && st == HSR_OK; k++) {
    const hsr_comm_counter *a = &L[k].after, *b = &L[k].before;
    d[2 * k] = (double)(a->bytes_sent - b->bytes_sent) / (double)total;
    d[2 * k + 1] = (double)(a->fabric_sent + a->fabric_recv - b->fabric_sent - b->fabric_recv) / (double)total;
  }
  if (st == HSR_OK) st = hsr_comm_allreduce(w, d, d, 2 * (size_t)ng, HSR_F64, HSR_MAX, NULL);
  /* per iteration: every rank's times (nccl-tests' per_process_max_times_us), and their maximum */
  int nw = hsr_comm_size(w);
  for (int k = 0; k < ng && st == HSR_OK && o->per_iter; k++) {
    double *all = malloc((size_t)nw * (size_t)o->iters * sizeof *all);
    st = all ? hsr_comm_allgather(w, L[k].iter_us, all, (size_t)o->iters, HSR_F64, NULL)
             : hsr_error(HSR_ERR_NOMEM, "iteration times");
    if (st == HSR_OK) {
      for (long i = 0; i < o->iters; i++)
        for (int r = 0; r < nw; r++)
          if (all[(size_t)r * (size_t)o->iters + (size_t)i] > L[k].iter_us[i])
            L[k].iter_us[i] = all[(size_t)r * (size_t)o->iters + (size_t)i];
      iter_stats(L[k].iter_us, o->iters, &res[k].it);
      res[k].it.times = L[k].iter_us;
      res[k].it.procs = all, res[k].it.nprocs = nw;
      res[k].have_iter = 1;
      L[k].iter_us = NULL; /* the row owns them */
    } else {
      free(all);
    }
  }
  double wrong[BC_KINDS] = {0};
  for (long c = 0; c < o->check && st == HSR_OK; c++)
    for (int k = 0; k < ng && st == HSR_OK; k++) wrong[k] += (double)check_once(o, &g[k], L[k].count, inplace, &st);
  if (st == HSR_OK) st = hsr_comm_allreduce(w, wrong, wrong, (size_t)ng, HSR_F64, HSR_SUM, NULL);
  for (int k = 0; k < ng && st == HSR_OK; k++) {
    double full = (double)L[k].count * (double)dtype_size(o->dt) * (o->coll <= NT_REDUCE_SCATTER ? g[k].n : 1);
    res[k].time_us = t[k] * 1e6;
    res[k].algbw = t[k] > 0 ? full / t[k] / 1e9 : 0;
    res[k].busbw = res[k].algbw * nt_bus_factor(o->coll, g[k].n);
    res[k].wrong = (long long)wrong[k];
    res[k].sent_per_op = d[2 * k];
    res[k].fabric_per_op = d[2 * k + 1];
  }
  lanes_free(L, ng);
  return st;
}
