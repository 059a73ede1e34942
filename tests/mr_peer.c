/* Peer communicators (collectives/peer_internal.h) inside one job, their
 * addresses through the bootstrap's exchange (peer_xchg_boot), member id =
 * world rank, on 3 ranks:
 *
 *   allreduce  HSR_AVG of f32 over every member (the ring) and over views of
 *              two (recursive doubling), the odd count 1001 so that slices
 *              differ: every member of a view ends with the same bits (their
 *              hashes compared over the world), each element the mean within
 *              1e-6 (relative)
 *   p2p        send/recv of three buffers between two members, and a receive
 *              whose sender is silent: named ("sent nothing") within its bound
 *   late       a large all-reduce that rank 0 joins 0.3 s after the others:
 *              their rendezvous messages wait unexpected, so its receives
 *              match at once and UCX may run their callbacks inside the post
 *              (a CMA get that ends there); the mean on every rank
 *   verdict    rank 2 skips a step's all-reduce: ranks 0 and 1 fail it within
 *              the bound naming member 2 alone (nothing else), while the job's
 *              world communicator is untouched (a barrier and an all-reduce on
 *              it succeed after); the next step's view works again; rank 2
 *              was alive, so it is named by the bound, not by its heartbeats
 *   plan       the device communicator's shrink plan (pure): the indices a
 *              drop removes, and -1 for a join
 *   heartbeat  rank 2 stops itself (SIGSTOP) in a step: the rank waiting for
 *              it names it by its silence ("answered no heartbeat"), the
 *              other by that rank's notice, long before the bound (120 s,
 *              the test's own timeout)
 *
 * mr_peer --bench FLOATS ITERS: the all-reduce's time (HSR_AVG of FLOATS f32
 * over every rank, ITERS times after one warm-up), printed by rank 0 as a
 * line and as JSON; no checks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "collectives/peer_internal.h"

static int g_rank;
static int g_fail;

#include "mr_check.h"

#define COUNT 1001

static float val(int member, size_t i) { return (float)((member + 1) * 0.37 + (double)i * 1e-3 - member * (double)i * 1e-4); }

static double expect(const int *ids, int n, size_t i) {
  double acc = 0;
  for (int k = 0; k < n; k++) acc += val(ids[k], i);
  return acc / n;
}

static uint64_t hash_of(const float *v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < n * sizeof *v; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Every rank calls it (over the world: the hashes of the view's members compared). */
static int check_allreduce(peer_ctx *p, hsr_comm *w, const int *ids, int n, int64_t epoch, int64_t step) {
  int in = 0;
  for (int k = 0; k < n; k++) in |= ids[k] == g_rank;
  uint64_t h = 0, hs[3] = {0};
  if (in) {
    hsr_comm *c;
    OK(peer_comm_create(p, ids, n, epoch, &c));
    float *buf = malloc(COUNT * sizeof *buf);
    if (!buf) FAIL("out of memory");
    for (size_t i = 0; i < COUNT; i++) buf[i] = val(g_rank, i);
    peer_result r;
    OK(peer_allreduce(c, step, buf, COUNT, HSR_F32, HSR_AVG, 20, &r));
    CHECK(r.ok, "all-reduce over %d members failed: %s", n, r.why);
    int bad = 0;
    for (size_t i = 0; i < COUNT && r.ok; i++) {
      double e = expect(ids, n, i), d = buf[i] - e;
      bad += (d < 0 ? -d : d) > 1e-6 * (e < 0 ? -e : e) + 1e-7;
    }
    CHECK(bad == 0, "all-reduce over %d members: %d elements off the mean", n, bad);
    h = hash_of(buf, COUNT);
    if (!r.buf_taken) free(buf);
    peer_comm_free(c);
  }
  OK(hsr_comm_allgather(w, &h, hs, sizeof h, HSR_U8, NULL));
  for (int k = 1; k < n; k++)
    CHECK(hs[ids[k]] == hs[ids[0]], "all-reduce over %d members: member %d's bits differ from member %d's", n, ids[k],
          ids[0]);
  return 0;
}

/* This rank's COUNT values (val), malloc'd: a failed all-reduce may keep it. */
static float *member_buf(void) {
  float *b = malloc(COUNT * sizeof *b);
  for (size_t i = 0; b && i < COUNT; i++) b[i] = val(g_rank, i);
  return b;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* late: rank 0 posts after the others' messages have arrived. */
static int check_late(peer_ctx *p, hsr_comm *w) {
  const size_t n = (size_t)1 << 21;
  int all[3] = {0, 1, 2};
  hsr_comm *c;
  OK(peer_comm_create(p, all, 3, 20, &c));
  float *buf = malloc(n * sizeof *buf);
  if (!buf) FAIL("out of memory");
  for (size_t i = 0; i < n; i++) buf[i] = val(g_rank, i % 4096);
  OK(hsr_comm_barrier(w, NULL));
  if (g_rank == 0) nanosleep(&(struct timespec){0, 300000000}, NULL);
  peer_result r;
  OK(peer_allreduce(c, 1, buf, n, HSR_F32, HSR_AVG, 30, &r));
  CHECK(r.ok, "late all-reduce: %s", r.why);
  size_t bad = 0;
  for (size_t i = 0; i < n && r.ok; i++) {
    double e = expect(all, 3, i % 4096);
    if (fabs(buf[i] - e) > 1e-6 * fabs(e) + 1e-7) bad++;
  }
  CHECK(bad == 0, "late all-reduce: %zu of %zu elements are not the mean", bad, n);
  if (!r.buf_taken) free(buf);
  peer_comm_free(c);
  return 0;
}

/* The all-reduce alone, timed: ITERS steps of one view over every rank. */
static int bench(peer_ctx *p, hsr_comm *w, int n, size_t floats, int iters) {
  int ids[PEER_MAX];
  for (int i = 0; i < n; i++) ids[i] = i;
  hsr_comm *c;
  OK(peer_comm_create(p, ids, n, 1, &c));
  float *buf = malloc((floats ? floats : 1) * sizeof *buf);
  if (!buf) FAIL("out of memory");
  for (size_t i = 0; i < floats; i++) buf[i] = val(g_rank, i);
  peer_result r;
  double t0 = 0;
  for (int it = 0; it <= iters; it++) {
    if (it == 1) { /* after the warm-up (endpoints' first messages) */
      OK(hsr_comm_barrier(w, NULL));
      t0 = now_s();
    }
    OK(peer_allreduce(c, it + 1, buf, floats, HSR_F32, HSR_AVG, 60, &r));
    if (!r.ok) FAIL("all-reduce %d: %s", it, r.why);
  }
  double ms = (now_s() - t0) / (iters > 0 ? iters : 1) * 1e3;
  if (g_rank == 0) {
    printf("peer all-reduce (HSR_AVG, f32) of %.1f MB over %d members: %.2f ms\n", (double)floats * 4e-6, n, ms);
    printf("{\"members\": %d, \"bytes\": %zu, \"iters\": %d, \"ms\": %.3f}\n", n, floats * 4, iters, ms);
  }
  free(buf);
  peer_comm_free(c);
  return 0;
}

int main(int argc, char **argv) {
  size_t bench_floats = 0;
  int bench_iters = 0;
  if (argc == 4 && !strcmp(argv[1], "--bench")) {
    char *e1, *e2;
    bench_floats = strtoull(argv[2], &e1, 10);
    bench_iters = (int)strtol(argv[3], &e2, 10);
    if (*e1 || *e2 || bench_floats < 1 || bench_iters < 1) {
      fprintf(stderr, "mr_peer: --bench FLOATS ITERS: both positive integers (got '%s' '%s')\n", argv[2], argv[3]);
      return 2;
    }
  } else if (argc != 1) {
    fprintf(stderr, "usage: mr_peer [--bench FLOATS ITERS]\n");
    return 2;
  }
  hsr_boot *boot;
  hsr_status st = hsr_boot_init(&boot);
  if (st != HSR_OK) {
    fprintf(stderr, "boot: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(boot);
  if (hsr_boot_size(boot) != 3 && !bench_iters) {
    fprintf(stderr, "mr_peer: run on 3 ranks\n");
    hsr_boot_finalize(boot);
    return 2;
  }
  hsr_comm *w = NULL;
  peer_xchg x = {0};
  peer_ctx *p = NULL;
  int rc = 0;
#define TRY(expr)                                                                             \
  do {                                                                                        \
    hsr_status _s = (expr);                                                                   \
    if (_s != HSR_OK) {                                                                       \
      fprintf(stderr, "[rank %d] FAIL: %s: %s\n", g_rank, #expr, hsr_last_error());           \
      rc = 1;                                                                                 \
      goto out;                                                                               \
    }                                                                                         \
  } while (0)
  TRY(hsr_comm_world(boot, HSR_BACKEND_HOST, &w));
  TRY(peer_xchg_boot(boot, &x));
  TRY(peer_open(g_rank, "rank", &x, &p));
  for (int id = 0; id < hsr_boot_size(boot); id++)
    if (id != g_rank) TRY(peer_connect(p, id));
  if (bench_iters) {
    rc = bench(p, w, hsr_boot_size(boot), bench_floats, bench_iters);
    goto out;
  }

  /* the device communicator's plan: which members a drop removes, and that a join cannot shrink */
  {
    int from[5] = {0, 2, 3, 7, 9}, ex[5];
    int to1[3] = {2, 7, 9}, to2[5] = {0, 2, 3, 7, 9}, to3[3] = {0, 3, 8}, to4[1] = {9};
    CHECK(peer_dev_shrink_plan(from, 5, to1, 3, ex) == 2 && ex[0] == 0 && ex[1] == 2, "plan: drop 0 and 3");
    CHECK(peer_dev_shrink_plan(from, 5, to2, 5, ex) == 0, "plan: no change");
    CHECK(peer_dev_shrink_plan(from, 5, to3, 3, ex) == -1, "plan: 8 joins, no shrink makes it");
    CHECK(peer_dev_shrink_plan(from, 5, to4, 1, ex) == 4 && ex[3] == 3, "plan: only 9 left");
  }

  /* allreduce: all three, then each view of two that holds this rank */
  int all[3] = {0, 1, 2};
  rc |= check_allreduce(p, w, all, 3, 1, 1);
  int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (int k = 0; k < 3; k++) rc |= check_allreduce(p, w, pairs[k], 2, 2 + k, 1);
  rc |= check_late(p, w);

  /* p2p: 0 sends three buffers to 1 */
  if (g_rank <= 1) {
    char a[5] = "abcd", b[3000], cbuf[1];
    for (size_t i = 0; i < sizeof b; i++) b[i] = (char)(i * 7);
    cbuf[0] = 'z';
    char ra[5] = {0}, rb[3000] = {0}, rcb[1] = {0};
    void *sb[3] = {a, b, cbuf}, *rbufs[3] = {ra, rb, rcb};
    size_t n[3] = {sizeof a, sizeof b, sizeof cbuf};
    peer_result r;
    if (g_rank == 0) {
      TRY(peer_send(p, 1, 7, 10, sb, n, 3, 20, &r));
      CHECK(r.ok && r.bytes_sent == sizeof a + sizeof b + 1, "send: %s (%llu bytes)", r.why,
            (unsigned long long)r.bytes_sent);
    } else {
      TRY(peer_recv(p, 0, 7, 10, rbufs, n, 3, 20, &r));
      CHECK(r.ok && !memcmp(a, ra, sizeof a) && !memcmp(b, rb, sizeof b) && rcb[0] == 'z', "recv: %s", r.why);
      /* nobody sends this one */
      char q[8];
      void *qb[1] = {q};
      size_t qn[1] = {sizeof q};
      TRY(peer_recv(p, 0, 7, 99, qb, qn, 1, 0.5, &r));
      CHECK(!r.ok && r.n == 1 && r.culprit[0] == 0 && strstr(r.why, "sent nothing"),
            "a silent sender: ok %d, %d named (first %d): %s", r.ok, r.n, r.n ? r.culprit[0] : -1, r.why);
    }
  }
  TRY(hsr_comm_barrier(w, NULL));

  /* verdict: rank 2 skips step 5 of epoch 9 */
  {
    hsr_comm *c;
    TRY(peer_comm_create(p, all, 3, 9, &c));
    float *buf = member_buf();
    if (!buf) {
      rc = 1;
      goto out;
    }
    peer_result r = {.ok = 1};
    if (g_rank != 2) {
      TRY(peer_allreduce(c, 5, buf, COUNT, HSR_F32, HSR_AVG, 1.0, &r));
      CHECK(!r.ok && r.n == 1 && r.culprit[0] == 2, "rank 2 skipped: ok %d, %d named (first %d): %s", r.ok, r.n,
            r.n ? r.culprit[0] : -1, r.why);
      /* alive (in the world's barrier): its responder answers, so its bound named it, not its silence */
      CHECK(!strstr(r.why, "heartbeat"), "rank 2 skipped but was alive, yet named by heartbeat: %s", r.why);
    }
    if (!r.buf_taken) free(buf);
    /* the world does not know: its collectives go on */
    float one = 1, sum = 0;
    TRY(hsr_comm_barrier(w, NULL));
    TRY(hsr_comm_allreduce(w, &one, &sum, 1, HSR_F32, HSR_SUM, NULL));
    CHECK(sum == 3, "world all-reduce after the peer failure: %g", sum);
    /* the next step (a new epoch, as a quorum would make) completes, whatever step 5 left behind */
    peer_comm_free(c);
    rc |= check_allreduce(p, w, all, 3, 10, 6);
  }
  TRY(hsr_comm_barrier(w, NULL));

  /* heartbeat: rank 2 stops itself (SIGSTOP) instead of step 7's all-reduce.
   * Ranks 0 and 1, with a bound of 120 s, name it by its silence (its
   * responder stopped with it) long before; rank 0 then resumes it. */
  {
    int32_t mine = (int32_t)getpid(), pid[3] = {0};
    TRY(hsr_comm_allgather(w, &mine, pid, 1, HSR_I32, NULL));
    hsr_comm *c;
    TRY(peer_comm_create(p, all, 3, 11, &c));
    float *buf = member_buf();
    if (!buf) {
      rc = 1;
      goto out;
    }
    peer_result r = {.ok = 1};
    int32_t heard = 0, named = 0; /* this rank named it by its silence; ranks that did */
    if (g_rank == 2) {
      raise(SIGSTOP);
    } else {
      TRY(peer_allreduce(c, 7, buf, COUNT, HSR_F32, HSR_AVG, 120.0, &r));
      /* the rank waiting for it names it by its silence, the other by that rank's notice */
      CHECK(!r.ok && r.n == 1 && r.culprit[0] == 2, "rank 2 stopped: ok %d, %d named (first %d): %s", r.ok, r.n,
            r.n ? r.culprit[0] : -1, r.why);
      heard = strstr(r.why, "answered no heartbeat") != NULL;
      if (g_rank == 0) kill((pid_t)pid[2], SIGCONT);
    }
    TRY(hsr_comm_allreduce(w, &heard, &named, 1, HSR_I32, HSR_SUM, NULL));
    CHECK(named >= 1, "no rank named the stopped rank 2 by its silence (%d)", named);
    if (!r.buf_taken) free(buf);
    peer_comm_free(c);
    TRY(hsr_comm_barrier(w, NULL));
  }
out:
  peer_close(p);
  peer_xchg_boot_free(&x);
  if (w) hsr_comm_free(w);
  hsr_boot_finalize(boot);
  rc |= g_fail;
  if (rc == 0 && g_rank == 0) printf("mr_peer: ok\n");
  return rc;
}
