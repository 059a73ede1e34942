/* Multi-rank correctness test of the collectives, launched for real.
 *
 *   mr_coll [--split S] [--big] [--counts LIST] [--dtypes all|f32]
 *           [--timeout-case] [--bad-args] [--concurrent] [--interleave]
 *
 * Every operation, dtype, redop, in/out-of-place and buffer kind (from
 * comm_mem_alloc and from malloc) is checked element by element against a
 * reference computed here from the same input formula. Inputs are small
 * integers, so every reduction is exact in every dtype and results must match
 * exactly. --split S also runs everything in the shard groups (r / S) and the
 * replicate groups (r % S). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"

static int g_rank;
static long g_checked;

#include "mr_check.h"

/* ---- element encoding (independent of the library's own) ---------------- */
static uint16_t enc_half(double v) { /* exact for small integers and dyadic fractions */
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = fabs(v);
  int e;
  double m = frexp(a, &e); /* a = m * 2^e, m in [0.5,1) */
  int exp = e - 1 + 15;
  uint16_t man = (uint16_t)lround((m * 2 - 1) * 1024);
  return (uint16_t)(sign | (exp << 10) | man);
}
static double dec_half(uint16_t h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
  return (h & 0x8000) ? -v : v;
}
static void store(hsr_dtype dt, void *p, size_t i, double v) {
  switch (dt) {
  case HSR_F32: ((float *)p)[i] = (float)v; break;
  case HSR_F64: ((double *)p)[i] = v; break;
  case HSR_BF16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    break;
  }
  case HSR_F16: ((uint16_t *)p)[i] = enc_half(v); break;
  case HSR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((uint8_t *)p)[i] = (uint8_t)v; break;
  }
}
static double load(hsr_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case HSR_F32: return ((const float *)p)[i];
  case HSR_F64: return ((const double *)p)[i];
  case HSR_BF16: {
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case HSR_F16: return dec_half(((const uint16_t *)p)[i]);
  case HSR_I32: return ((const int32_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}
static double val(hsr_dtype dt, int r, size_t i) {
  double v = (double)((r * 7 + (i % 1000) * 3 + i / 1000) % 17);
  return dt == HSR_U8 ? v : v - 8;
}
static double reduce_ref(hsr_dtype dt, hsr_redop op, int n, size_t i) {
  double acc = val(dt, 0, i);
  for (int r = 1; r < n; r++) {
    double v = val(dt, r, i);
    acc = op == HSR_MAX ? (v > acc ? v : acc) : acc + v;
  }
  if (op == HSR_AVG) {
    if (dt == HSR_I32 || dt == HSR_U8)
      acc = (double)((long long)acc / n);
    else
      acc /= n;
  }
  return acc;
}

static void *buf_alloc(hsr_comm *c, size_t bytes, int comm_mem) {
  void *p = NULL;
  if (comm_mem) {
    if (comm_mem_alloc(c, bytes, &p) != HSR_OK) return NULL;
  } else {
    p = malloc(bytes ? bytes : 1);
  }
  return p;
}
static void buf_free(hsr_comm *c, void *p, int comm_mem) {
  if (comm_mem)
    comm_mem_free(c, p);
  else
    free(p);
}

/* One operation, checked. */
static int run_case(hsr_comm *c, hsr_op kind, hsr_dtype dt, hsr_redop rop, size_t count, int inplace, int comm_mem,
                    int root) {
  int n = hsr_comm_size(c), r = hsr_comm_rank(c);
  size_t es = dtype_size(dt);
  size_t in_n = kind == HSR_OP_REDUCE_SCATTER ? count * (size_t)n : count;
  size_t out_n = kind == HSR_OP_ALLGATHER ? count * (size_t)n : count;
  size_t big = in_n > out_n ? in_n : out_n;
  char *a = buf_alloc(c, big * es + 64, comm_mem), *b = NULL;
  if (!a) FAIL("allocation of %zu bytes", big * es);
  if (!inplace && kind != HSR_OP_BCAST) {
    b = buf_alloc(c, out_n * es + 64, comm_mem);
    if (!b) FAIL("allocation");
  }
  const void *send;
  void *recv;
  hsr_comm_counter before, after;
  OK(comm_counters(c, kind, &before));
  hsr_status st;
  hsr_req *req = NULL;
  switch (kind) {
  case HSR_OP_ALLGATHER:
    recv = inplace ? a : b;
    send = inplace ? a + (size_t)r * count * es : a;
    if (!inplace) memset(b, 0xee, out_n * es);
    for (size_t i = 0; i < count; i++) store(dt, (void *)send, i, val(dt, r, i));
    st = hsr_comm_allgather(c, send, recv, count, dt, &req);
    break;
  case HSR_OP_REDUCE_SCATTER:
    send = a;
    recv = inplace ? a + (size_t)r * count * es : b;
    for (size_t i = 0; i < in_n; i++) store(dt, a, i, val(dt, r, i));
    st = hsr_comm_reduce_scatter(c, send, recv, count, dt, rop, &req);
    break;
  case HSR_OP_ALLREDUCE:
    send = a;
    recv = inplace ? a : b;
    for (size_t i = 0; i < count; i++) store(dt, a, i, val(dt, r, i));
    st = hsr_comm_allreduce(c, send, recv, count, dt, rop, &req);
    break;
  default:
    send = recv = a;
    for (size_t i = 0; i < count; i++) store(dt, a, i, r == root ? val(dt, root, i) : 5);
    st = hsr_comm_bcast(c, a, count, dt, root, &req);
    break;
  }
  if (st != HSR_OK) FAIL("%s issue: %s %s", op_name(kind), hsr_status_str(st), hsr_last_error());
  /* Poll a little (exercises req_test), then check the times and wait. */
  int done = 0;
  for (int k = 0; k < 3 && !done; k++) OK(req_test(req, &done));
  while (!done) {
    OK(req_test(req, &done));
    if (!done) usleep(200);
  }
  uint64_t t0, t1;
  OK(req_times(req, &t0, &t1));
  if (count && (t0 == 0 || t1 < t0))
    FAIL("%s: request times %llu..%llu", op_name(kind), (unsigned long long)t0, (unsigned long long)t1);
  OK(hsr_req_wait(req, -1));
  for (size_t i = 0; i < out_n; i++) {
    double want;
    if (kind == HSR_OP_ALLGATHER)
      want = val(dt, (int)(i / count), i % count);
    else if (kind == HSR_OP_REDUCE_SCATTER)
      want = reduce_ref(dt, rop, n, (size_t)r * count + i);
    else if (kind == HSR_OP_ALLREDUCE)
      want = reduce_ref(dt, rop, n, i);
    else
      want = val(dt, root, i);
    double got = load(dt, recv, i);
    if (got != want)
      FAIL("%s %s %s count %zu %s %s mem, group of %d: element %zu is %g, expected %g", op_name(kind), dtype_name(dt),
           redop_name(rop), count, inplace ? "in-place" : "out-of-place", comm_mem ? "comm" : "user", n, i, got, want);
  }
  g_checked += (long)out_n;
  OK(comm_counters(c, kind, &after));
  if (after.calls != before.calls + 1)
    FAIL("%s: calls counter %llu -> %llu", op_name(kind), (unsigned long long)before.calls,
         (unsigned long long)after.calls);
  uint64_t drecv = after.bytes_recv - before.bytes_recv, dsent = after.bytes_sent - before.bytes_sent;
  if (kind == HSR_OP_ALLGATHER && drecv != (uint64_t)(n - 1) * count * es)
    FAIL("all_gather: bytes_recv grew by %llu, expected %llu", (unsigned long long)drecv,
         (unsigned long long)((n - 1) * count * es));
  if (kind == HSR_OP_BCAST && count && n > 1) {
    if (r == root && (dsent != (uint64_t)(n - 1) * count * es || drecv != 0))
      FAIL("broadcast root: sent %llu recv %llu", (unsigned long long)dsent, (unsigned long long)drecv);
    if (r != root && (drecv != count * es || dsent != 0))
      FAIL("broadcast: sent %llu recv %llu", (unsigned long long)dsent, (unsigned long long)drecv);
  }
  buf_free(c, a, comm_mem);
  if (b) buf_free(c, b, comm_mem);
  return 0;
}

static const hsr_dtype all_dt[] = {HSR_F32, HSR_F64, HSR_BF16, HSR_F16, HSR_I32, HSR_U8};

static int run_suite(hsr_comm *c, const size_t *counts, int ncounts, int ndt, size_t big_limit) {
  for (int ci = 0; ci < ncounts; ci++)
    for (int d = 0; d < ndt; d++)
      for (int inplace = 0; inplace < 2; inplace++)
        for (int mem = 0; mem < 2; mem++) {
          size_t count = counts[ci];
          /* Large counts once per dtype, alternating the buffer kind. */
          if (count > big_limit && (mem != ((d + inplace) & 1))) continue;
          hsr_dtype dt = all_dt[d];
          if (run_case(c, HSR_OP_ALLGATHER, dt, HSR_SUM, count, inplace, mem, 0)) return 1;
          if (run_case(c, HSR_OP_REDUCE_SCATTER, dt, inplace ? HSR_AVG : HSR_SUM, count, inplace, mem, 0)) return 1;
          hsr_redop ar = (hsr_redop)((ci + d + inplace + mem) % 3);
          if (count <= big_limit)
            for (int o = 0; o < 3; o++)
              if (run_case(c, HSR_OP_ALLREDUCE, dt, (hsr_redop)o, count, inplace, mem, 0)) return 1;
          if (count > big_limit && run_case(c, HSR_OP_ALLREDUCE, dt, ar, count, inplace, mem, 0)) return 1;
          if (!inplace && run_case(c, HSR_OP_BCAST, dt, HSR_SUM, count, 1, mem, mem ? 0 : hsr_comm_size(c) - 1))
            return 1;
        }
  OK(hsr_comm_barrier(c, NULL));
  return 0;
}

static int bad_args(hsr_comm *c) {
  float x[64];
  struct {
    const char *what;
    hsr_status st;
  } cases[] = {
      {"null send", hsr_comm_allgather(c, NULL, x, 1, HSR_F32, NULL)},
      {"null recv", hsr_comm_reduce_scatter(c, x, NULL, 1, HSR_F32, HSR_SUM, NULL)},
      {"bad dtype", hsr_comm_allreduce(c, x, x, 4, (hsr_dtype)99, HSR_SUM, NULL)},
      {"bad redop", hsr_comm_allreduce(c, x, x, 4, HSR_F32, (hsr_redop)7, NULL)},
      {"max for reduce-scatter", hsr_comm_reduce_scatter(c, x, x + 32, 1, HSR_F32, HSR_MAX, NULL)},
      {"overlapping all-gather", hsr_comm_allgather(c, x + 1, x, 2, HSR_F32, NULL)},
      {"overlapping all-reduce", hsr_comm_allreduce(c, x, x + 1, 8, HSR_F32, HSR_SUM, NULL)},
      {"overlapping reduce-scatter", hsr_comm_reduce_scatter(c, x, x + 1, 2, HSR_F32, HSR_SUM, NULL)},
      {"bad root", hsr_comm_bcast(c, x, 4, HSR_F32, hsr_comm_size(c), NULL)},
      {"null comm", hsr_comm_barrier(NULL, NULL)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (cases[i].st != HSR_ERR_INVALID) FAIL("bad argument '%s' gave %s", cases[i].what, hsr_status_str(cases[i].st));
  hsr_comm_allreduce(c, x, x + 1, 8, HSR_F32, HSR_SUM, NULL);
  if (!strstr(hsr_last_error(), "overlap")) FAIL("overlap message is '%s'", hsr_last_error());
  hsr_comm_allreduce(c, x, x, 4, (hsr_dtype)99, HSR_SUM, NULL);
  if (!strstr(hsr_last_error(), "dtype")) FAIL("dtype message is '%s'", hsr_last_error());
  /* The communicator still works after rejected calls. */
  OK(hsr_comm_barrier(c, NULL));
  return 0;
}

/* A shard-group all-gather and a replicate-group all-reduce in flight at once,
 * plus two queued operations on one communicator. */
static int concurrent(hsr_comm *shard, hsr_comm *repl, size_t count) {
  int ns = hsr_comm_size(shard), rs = hsr_comm_rank(shard), nr = hsr_comm_size(repl);
  float *ag_in = NULL, *ag_out = NULL, *ar = NULL, *ar2 = NULL;
  OK(comm_mem_alloc(shard, count * 4, (void **)&ag_in));
  OK(comm_mem_alloc(repl, count * 4 * (size_t)ns, (void **)&ag_out));
  ar = malloc(count * 4), ar2 = malloc(count * 4);
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < count; i++) {
      ag_in[i] = (float)val(HSR_F32, rs + round, i);
      ar[i] = (float)val(HSR_F32, hsr_comm_rank(repl) + round, i);
      ar2[i] = 1;
    }
    hsr_req *q1, *q2, *q3;
    OK(hsr_comm_allgather(shard, ag_in, ag_out, count, HSR_F32, &q1));
    OK(hsr_comm_allreduce(repl, ar, ar, count, HSR_F32, HSR_SUM, &q2));
    OK(hsr_comm_allreduce(repl, ar2, ar2, count, HSR_F32, HSR_MAX, &q3));
    /* Wait in the opposite order of issue. */
    OK(hsr_req_wait(q3, -1));
    OK(hsr_req_wait(q2, -1));
    OK(hsr_req_wait(q1, -1));
    for (size_t i = 0; i < count * (size_t)ns; i++)
      if (ag_out[i] != (float)val(HSR_F32, (int)(i / count) + round, i % count))
        FAIL("concurrent all-gather round %d element %zu", round, i);
    for (size_t i = 0; i < count; i++) {
      double want = 0;
      for (int q = 0; q < nr; q++) want += val(HSR_F32, q + round, i);
      if (ar[i] != (float)want) FAIL("concurrent all-reduce round %d element %zu: %g vs %g", round, i, ar[i], want);
      if (ar2[i] != 1) FAIL("queued all-reduce element %zu", i);
    }
  }
  comm_mem_free(shard, ag_in);
  comm_mem_free(shard, ag_out); /* freed through another communicator of the world */
  free(ar), free(ar2);
  return 0;
}

/* Two threads of one rank post at once, each on its own communicator
 * (posting is lock-free: both land in the context's incoming list). */
typedef struct poster {
  hsr_comm *c;
  int allreduce, rc;
} poster;

static int post_rounds(poster *p) {
  enum { ROUNDS = 300, COUNT = 7 };
  int n = hsr_comm_size(p->c), r = hsr_comm_rank(p->c);
  float in[COUNT], out[COUNT * 16];
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < COUNT; i++) in[i] = (float)(r * 1000 + round * 10 + i);
    hsr_req *q;
    if (p->allreduce)
      OK(hsr_comm_allreduce(p->c, in, out, COUNT, HSR_F32, HSR_SUM, &q));
    else
      OK(hsr_comm_allgather(p->c, in, out, COUNT, HSR_F32, &q));
    int done = 0;
    OK(req_test(q, &done)); /* lock-free when not done yet; no spinning here */
    OK(done ? req_free(q) : hsr_req_wait(q, -1));
    for (int j = 0; j < (p->allreduce ? 1 : n); j++)
      for (int i = 0; i < COUNT; i++) {
        double want = 0;
        if (p->allreduce)
          for (int k = 0; k < n; k++) want += k * 1000 + round * 10 + i;
        else
          want = j * 1000 + round * 10 + i;
        if (out[j * COUNT + i] != (float)want)
          FAIL("threaded %s round %d element %d: %g vs %g", p->allreduce ? "all-reduce" : "all-gather", round,
               j * COUNT + i, out[j * COUNT + i], want);
      }
  }
  return 0;
}

static void *poster_main(void *arg) {
  poster *p = arg;
  p->rc = post_rounds(p);
  return NULL;
}

static int threaded(hsr_comm *shard, hsr_comm *repl) {
  if (hsr_comm_size(shard) > 16) return 0;
  poster a = {shard, 0, 0}, b = {repl, 1, 0};
  pthread_t t;
  if (pthread_create(&t, NULL, poster_main, &b) != 0) FAIL("pthread_create");
  poster_main(&a);
  pthread_join(t, NULL);
  return a.rc || b.rc;
}

/* With the progress thread, an operation completes while the caller does
 * not call into hsr at all (req_times does not drive progress). */
static int progress_without_caller(hsr_comm *c) {
  size_t count = 1 << 20;
  float *x = malloc(count * 4);
  for (size_t i = 0; i < count; i++) x[i] = 1;
  hsr_req *q;
  OK(hsr_comm_allreduce(c, x, x, count, HSR_F32, HSR_SUM, &q));
  uint64_t t0 = 0, t1 = 0;
  for (int k = 0; k < 30000 && !t1; k++) {
    usleep(1000);
    OK(req_times(q, &t0, &t1));
  }
  if (!t1) FAIL("all_reduce did not complete within 30 s without the caller driving it");
  OK(hsr_req_wait(q, -1));
  for (size_t i = 0; i < count; i++)
    if (x[i] != (float)hsr_comm_size(c)) FAIL("progress-thread all_reduce element %zu = %g", i, x[i]);
  free(x);
  return 0;
}

static int timeout_case(hsr_comm *w, int loose) {
  int n = hsr_comm_size(w), r = hsr_comm_rank(w);
  OK(comm_set_name(w, "tworld"));
  float x[16] = {0};
  if (r == n - 1) {
    /* Never joins; stays alive until the others have timed out. */
    sleep(4);
    return 0;
  }
  hsr_status st = hsr_comm_allreduce(w, x, x, 16, HSR_F32, HSR_SUM, NULL);
  if (st != HSR_ERR_TIMEOUT) FAIL("missing rank: expected HSR_ERR_TIMEOUT, got %s", hsr_status_str(st));
  const char *m = hsr_last_error();
  char want[32];
  snprintf(want, sizeof want, "rank %d", n - 1);
  /* Across nodes a rank may be waiting for a peer that itself waits for the
   * missing one: then the message names that peer (loose). */
  if (!strstr(m, "tworld") || !strstr(m, "all_reduce") || !strstr(m, loose ? "rank" : want))
    FAIL("timeout message '%s'", m);
  if (r == 0) printf("timeout message: %s\n", m);
  st = hsr_comm_barrier(w, NULL);
  if (st != HSR_ERR_STATE) FAIL("after a timeout: expected HSR_ERR_STATE, got %s", hsr_status_str(st));
  return 0;
}

int main(int argc, char **argv) {
  int split = 0, big = 0, tcase = 0, loose = 0, bad = 0, conc = 0, ndt = 6, inter = 0;
  size_t counts[8] = {0, 1, 7, 1000003};
  int ncounts = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--split") && i + 1 < argc)
      split = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--big"))
      big = 1;
    else if (!strcmp(argv[i], "--timeout-case"))
      tcase = 1;
    else if (!strcmp(argv[i], "--loose"))
      loose = 1;
    else if (!strcmp(argv[i], "--bad-args"))
      bad = 1;
    else if (!strcmp(argv[i], "--concurrent"))
      conc = 1;
    else if (!strcmp(argv[i], "--interleave"))
      inter = 1;
    else if (!strcmp(argv[i], "--dtypes") && i + 1 < argc)
      ndt = strcmp(argv[++i], "f32") ? 6 : 1;
    else if (!strcmp(argv[i], "--counts") && i + 1 < argc) {
      ncounts = 0;
      for (char *t = strtok(argv[++i], ","); t && ncounts < 8; t = strtok(NULL, ","))
        counts[ncounts++] = strtoull(t, 0, 10);
    } else {
      fprintf(stderr, "mr_coll: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  hsr_boot *boot;
  hsr_status st = hsr_boot_init(&boot);
  if (st != HSR_OK) {
    fprintf(stderr, "boot: %s %s\n", hsr_status_str(st), hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(boot);
  int n = hsr_boot_size(boot), rc = 0;
  hsr_comm *w = NULL;
  st = hsr_comm_world(boot, HSR_BACKEND_HOST, &w);
  if (st != HSR_OK) {
    fprintf(stderr, "[rank %d] world: %s %s\n", g_rank, hsr_status_str(st), hsr_last_error());
    return 1;
  }
  if (tcase) {
    rc = timeout_case(w, loose);
  } else if (bad) {
    rc = bad_args(w);
  } else {
    if (hsr_comm_size(w) != n || hsr_comm_rank(w) != g_rank || comm_world_rank(w, n) != -1) {
      fprintf(stderr, "world identity wrong\n");
      rc = 1;
    }
    if (!rc && conc && !getenv("HSR_PROGRESS")) rc = progress_without_caller(w);
    if (!rc) rc = run_suite(w, counts, ncounts, ndt, 100000);
    if (!rc && split > 0) {
      hsr_comm *shard = NULL, *repl = NULL, *none = (hsr_comm *)1;
      if (comm_split(w, g_rank / split, g_rank, &shard) != HSR_OK ||
          comm_split(w, g_rank % split, -g_rank, &repl) != HSR_OK ||
          comm_split(w, g_rank == 0 ? 0 : -1, 0, &none) != HSR_OK) {
        fprintf(stderr, "[rank %d] split: %s\n", g_rank, hsr_last_error());
        rc = 1;
      }
      /* Replicate groups are keyed by -rank: comm rank order reverses. */
      if (!rc && (hsr_comm_size(shard) != split || hsr_comm_rank(shard) != g_rank % split ||
                  comm_world_rank(repl, 0) != (n / split - 1) * split + g_rank % split)) {
        fprintf(stderr, "[rank %d] split membership wrong\n", g_rank);
        rc = 1;
      }
      if (!rc && (g_rank == 0 ? (!none || hsr_comm_size(none) != 1) : none != NULL)) {
        fprintf(stderr, "[rank %d] color -1 / single-member split wrong\n", g_rank);
        rc = 1;
      }
      if (!rc && conc) rc = concurrent(shard, repl, 100003);
      if (!rc && conc) rc = threaded(shard, repl);
      size_t sc[3] = {1, 7, 100003};
      if (!rc) rc = run_suite(shard, sc, 3, ndt, 1000);
      if (!rc) rc = run_suite(repl, sc, 3, ndt, 1000);
      if (none) {
        if (!rc) rc = run_suite(none, sc, 2, 1, 1000);
        hsr_comm_free(none);
      }
      hsr_comm_free(shard);
      hsr_comm_free(repl);
    }
    if (!rc && inter) {
      /* Every rank, ordered even ranks first: with simulated nodes the comm
       * ranks alternate between nodes (two-level with a scattered layout). */
      hsr_comm *il = NULL;
      if (comm_split(w, 0, (g_rank % 2) * 100000 + g_rank / 2, &il) != HSR_OK) {
        fprintf(stderr, "[rank %d] split: %s\n", g_rank, hsr_last_error());
        rc = 1;
      }
      size_t ic[3] = {1, 7, 100003};
      if (!rc) rc = run_suite(il, ic, 3, ndt, 1000);
      hsr_comm_free(il);
    }
    if (!rc && big) {
      /* 64 MiB gathered, f32, comm memory: all-gather and reduce-scatter. */
      size_t count = (64u << 20) / 4 / (size_t)n;
      rc = run_case(w, HSR_OP_ALLGATHER, HSR_F32, HSR_SUM, count, 0, 1, 0) ||
           run_case(w, HSR_OP_REDUCE_SCATTER, HSR_F32, HSR_SUM, count, 0, 1, 0);
    }
  }
  if (!tcase) {
    st = hsr_comm_free(w);
    if (st != HSR_OK) {
      fprintf(stderr, "[rank %d] free: %s\n", g_rank, hsr_last_error());
      rc = 1;
    }
  } else {
    hsr_comm_free(w);
  }
  if (rc == 0 && g_rank == 0) printf("mr_coll OK: %d ranks, %ld elements checked on rank 0\n", n, g_checked);
  hsr_boot_finalize(boot);
  return rc;
}
