/* Unit tests of the sim device (kernels/sim.c): CUDA's stream and event
 * rules, host calls that return once work is queued, copies as
 * cudaMemcpyAsync, the sticky error, bounded waits, the arena, the
 * stream-order check (a race reported with both operations, no report once
 * an event orders them), and the kernels equal to the host kind's bitwise.
 * Ordering is tested with operations that block on each other (bounded), so
 * a wrong rule shows as a timeout, never as a timing assertion. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "kernels/sim.h"

#define BOUND_S 10.0

static hsr_device *open_sim(int check) {
  setenv("HSR_SIM_CHECK", check ? "1" : "0", 1);
  hsr_device *d = NULL;
  assert_int_equal(hsr_device_open(HSR_DEVICE_SIM, 0, &d), HSR_OK);
  assert_int_equal(hsr_device_kind_of(d), HSR_DEVICE_SIM);
  return d;
}

/* A kernel that waits (bounded) for a flag, then sets its own. */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open, done, timed_out;
} gate;
typedef struct gate_args {
  gate *wait_for, *set;
} gate_args;

static void gate_init(gate *g) {
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
}
static void gate_set(gate *g) {
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}
static int gate_wait(gate *g, double s) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += (time_t)s;
  pthread_mutex_lock(&g->mu);
  int rc = 0;
  while (!g->open && rc == 0) rc = pthread_cond_timedwait(&g->cv, &g->mu, &dl);
  int ok = g->open;
  pthread_mutex_unlock(&g->mu);
  return ok;
}
static void k_gate(const void *p) {
  const gate_args *a = p;
  if (a->wait_for && !gate_wait(a->wait_for, BOUND_S)) a->set->timed_out = 1;
  if (a->set) gate_set(a->set);
}
static const hsr_kernel_def gate_kernel = {"gate", k_gate, NULL};

static void launch_gate(hsr_device *d, hsr_stream *s, gate *wait_for, gate *set) {
  gate_args a = {wait_for, set};
  assert_int_equal(hsr_kernels_launch(d, s, &gate_kernel, &a, sizeof a, NULL, 0), HSR_OK);
}

/* The host runs ahead: the call returns while the kernel still waits for
 * the host (a synchronous call would wait for itself). */
static void test_host_runs_ahead(void **state) {
  (void)state;
  hsr_device *d = open_sim(0);
  hsr_stream *s;
  assert_int_equal(stream_create(d, 0, &s), HSR_OK);
  gate host, k;
  gate_init(&host), gate_init(&k);
  launch_gate(d, s, &host, &k);
  dev_event *e;
  assert_int_equal(event_create(d, &e), HSR_OK);
  assert_int_equal(event_record(e, s), HSR_OK);
  int done = 1;
  assert_int_equal(event_query(e, &done), HSR_OK);
  assert_int_equal(done, 0);
  gate_set(&host);
  assert_int_equal(hsr_stream_sync(s, BOUND_S), HSR_OK);
  assert_true(k.open);
  assert_false(k.timed_out);
  assert_int_equal(event_query(e, &done), HSR_OK);
  assert_int_equal(done, 1);
  assert_int_equal(event_destroy(e), HSR_OK);
  assert_int_equal(stream_destroy(s), HSR_OK);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* A record captures the stream's position: a wait for it does not wait for
 * work queued on that stream after the record (here that work waits for the
 * waiter, so waiting for it would never end). */
static void test_event_captures_position(void **state) {
  (void)state;
  hsr_device *d = open_sim(0);
  hsr_stream *a, *b;
  dev_event *e;
  assert_int_equal(stream_create(d, 0, &a), HSR_OK);
  assert_int_equal(stream_create(d, 0, &b), HSR_OK);
  assert_int_equal(event_create(d, &e), HSR_OK);
  gate first, after, waiter;
  gate_init(&first), gate_init(&after), gate_init(&waiter);
  launch_gate(d, a, NULL, &first);
  assert_int_equal(event_record(e, a), HSR_OK);
  launch_gate(d, a, &waiter, &after); /* after the record: waits for b's kernel */
  assert_int_equal(stream_wait_event(b, e), HSR_OK);
  launch_gate(d, b, &first, &waiter); /* b runs once a reached the record */
  assert_int_equal(hsr_stream_sync(b, BOUND_S), HSR_OK);
  assert_int_equal(hsr_stream_sync(a, BOUND_S), HSR_OK);
  assert_false(after.timed_out);
  assert_false(waiter.timed_out);
  assert_int_equal(event_destroy(e), HSR_OK);
  assert_int_equal(stream_destroy(a), HSR_OK);
  assert_int_equal(stream_destroy(b), HSR_OK);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* A never-recorded event is complete; a wait for it waits for nothing. A
 * wait uses the last record before it, not a later one. */
static void test_event_never_recorded_and_rerecorded(void **state) {
  (void)state;
  hsr_device *d = open_sim(0);
  hsr_stream *a, *b;
  dev_event *e;
  assert_int_equal(stream_create(d, 0, &a), HSR_OK);
  assert_int_equal(stream_create(d, 0, &b), HSR_OK);
  assert_int_equal(event_create(d, &e), HSR_OK);
  int done = 0;
  assert_int_equal(event_query(e, &done), HSR_OK);
  assert_int_equal(done, 1);
  assert_int_equal(event_sync(e, 1.0), HSR_OK);
  gate g1, g2, g3;
  gate_init(&g1), gate_init(&g2), gate_init(&g3);
  assert_int_equal(stream_wait_event(b, e), HSR_OK); /* never recorded: b waits for nothing */
  launch_gate(d, b, NULL, &g1);
  assert_int_equal(hsr_stream_sync(b, BOUND_S), HSR_OK);
  /* record on a (empty: complete), wait on b, then re-record after a blocked kernel:
   * b's earlier wait refers to the first record */
  assert_int_equal(event_record(e, a), HSR_OK);
  assert_int_equal(stream_wait_event(b, e), HSR_OK);
  launch_gate(d, a, &g3, &g2); /* waits for b's kernel below */
  assert_int_equal(event_record(e, a), HSR_OK);
  assert_int_equal(event_query(e, &done), HSR_OK);
  assert_int_equal(done, 0);
  launch_gate(d, b, NULL, &g3);
  assert_int_equal(event_sync(e, BOUND_S), HSR_OK);
  assert_false(g2.timed_out);
  assert_int_equal(event_destroy(e), HSR_OK);
  assert_int_equal(stream_destroy(a), HSR_OK);
  assert_int_equal(stream_destroy(b), HSR_OK);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* Copies as cudaMemcpyAsync: a pageable source is read at the call; a
 * pageable destination holds the data when the call returns; the default
 * stream (NULL) is a worker too. */
static void test_copies(void **state) {
  (void)state;
  hsr_device *d = open_sim(1);
  enum { N = 1000 };
  float src[N], back[N], *dv = NULL;
  for (int i = 0; i < N; i++) src[i] = (float)i;
  assert_int_equal(hsr_device_alloc(d, N * 4, (void **)&dv), HSR_OK);
  assert_int_equal(hsr_device_copy(d, dv, src, N * 4, NULL), HSR_OK);
  for (int i = 0; i < N; i++) src[i] = -1.0f; /* the copy read it at the call */
  assert_int_equal(kernels_scale(d, NULL, N, dv, HSR_F32, 2.0), HSR_OK);
  assert_int_equal(hsr_device_copy(d, back, dv, N * 4, NULL), HSR_OK);
  for (int i = 0; i < N; i++) assert_true(back[i] == 2.0f * (float)i);
  assert_int_equal(hsr_device_free(d, dv), HSR_OK);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* The arena: a host pointer given to a device kernel is an error naming it. */
static void test_host_pointer_refused(void **state) {
  (void)state;
  hsr_device *d = open_sim(0);
  float *h = malloc(64 * 4);
  hsr_status st = kernels_scale(d, NULL, 64, h, HSR_F32, 2.0);
  assert_int_equal(st, HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "not device memory"));
  free(h);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* A race between two streams is reported with both operations; an event
 * between them orders them and nothing is reported. */
static void test_check_reports_and_orders(void **state) {
  (void)state;
  hsr_device *d = open_sim(1);
  hsr_stream *a, *b;
  dev_event *e;
  float *x = NULL, *y = NULL;
  assert_int_equal(stream_create(d, 0, &a), HSR_OK);
  assert_int_equal(stream_create(d, 0, &b), HSR_OK);
  assert_int_equal(kern_stream_label(a, "writer"), HSR_OK);
  assert_int_equal(kern_stream_label(b, "reader"), HSR_OK);
  assert_int_equal(event_create(d, &e), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, 4096, (void **)&x), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, 4096, (void **)&y), HSR_OK);
  assert_int_equal(kern_label(d, x, 4096, "test buffer x"), HSR_OK);
  /* ordered: write on a, record, wait on b, read on b */
  assert_int_equal(hsr_device_memset(d, x, 0, 4096, a), HSR_OK);
  assert_int_equal(event_record(e, a), HSR_OK);
  assert_int_equal(stream_wait_event(b, e), HSR_OK);
  assert_int_equal(hsr_kernels_cast(d, b, 1024, x, HSR_F32, y, HSR_F32), HSR_OK);
  assert_int_equal(kern_sim_reports(d), 0);
  assert_int_equal(hsr_stream_sync(b, BOUND_S), HSR_OK); /* the host saw b's read: a's next write is after it */
  /* unordered: a writes again, b reads without a new wait */
  assert_int_equal(kernels_scale(d, a, 1024, x, HSR_F32, 3.0), HSR_OK);
  hsr_status st = hsr_kernels_axpy(d, b, 1024, 1.0, x, y, HSR_F32);
  assert_int_equal(st, HSR_ERR_STATE);
  const char *m = hsr_last_error();
  assert_non_null(strstr(m, "read-after-write race on test buffer x"));
  assert_non_null(strstr(m, "'axpy'"));
  assert_non_null(strstr(m, "on stream 'reader'"));
  assert_non_null(strstr(m, "'scale'"));
  assert_non_null(strstr(m, "on stream 'writer'"));
  assert_int_equal(kern_sim_reports(d), 1);
  /* the device has failed: every later call says why (CUDA's sticky error) */
  assert_int_equal(hsr_stream_sync(a, BOUND_S), HSR_ERR_STATE);
  assert_non_null(strstr(hsr_last_error(), "race on test buffer x"));
  event_destroy(e);
  stream_destroy(a);
  stream_destroy(b);
  hsr_device_close(d);
}

/* A write after a read on another stream, with the host's sync between them:
 * the sync orders them (nothing reported). */
static void test_host_sync_orders(void **state) {
  (void)state;
  hsr_device *d = open_sim(1);
  hsr_stream *a, *b;
  float *x = NULL, *y = NULL;
  assert_int_equal(stream_create(d, 0, &a), HSR_OK);
  assert_int_equal(stream_create(d, 0, &b), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, 4096, (void **)&x), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, 4096, (void **)&y), HSR_OK);
  assert_int_equal(hsr_device_memset(d, x, 0, 4096, a), HSR_OK);
  assert_int_equal(hsr_stream_sync(a, BOUND_S), HSR_OK);
  assert_int_equal(hsr_kernels_cast(d, b, 1024, x, HSR_F32, y, HSR_F32), HSR_OK);
  assert_int_equal(hsr_stream_sync(b, BOUND_S), HSR_OK);
  assert_int_equal(hsr_device_memset(d, x, 1, 4096, a), HSR_OK);
  assert_int_equal(kern_sim_reports(d), 0);
  assert_int_equal(hsr_stream_sync(a, BOUND_S), HSR_OK);
  stream_destroy(a);
  stream_destroy(b);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* A sync is bounded: a stream that cannot finish in time is a timeout, and
 * the work completes afterwards. */
static void test_sync_bounded(void **state) {
  (void)state;
  hsr_device *d = open_sim(0);
  hsr_stream *s;
  assert_int_equal(stream_create(d, 0, &s), HSR_OK);
  gate host, k;
  gate_init(&host), gate_init(&k);
  launch_gate(d, s, &host, &k);
  assert_int_equal(hsr_stream_sync(s, 0.05), HSR_ERR_TIMEOUT);
  assert_non_null(strstr(hsr_last_error(), "did not reach it within"));
  gate_set(&host);
  assert_int_equal(hsr_stream_sync(s, BOUND_S), HSR_OK);
  stream_destroy(s);
  assert_int_equal(hsr_device_close(d), HSR_OK);
}

/* The kernels on sim are the CPU twins: bitwise the host kind's results. */
static void test_kernels_equal_host(void **state) {
  (void)state;
  hsr_device *d = open_sim(1), *h = NULL;
  assert_int_equal(hsr_device_open(HSR_DEVICE_HOST, 0, &h), HSR_OK);
  enum { N = 4099 };
  float *p = malloc(N * 4), *m = calloc(N, 4), *v = calloc(N, 4), *g = malloc(N * 4), *out = malloc(N * 4);
  for (int i = 0; i < N; i++)
    p[i] = (float)((i * 37) % 101) / 50.0f - 1.0f, g[i] = (float)((i * 13) % 97) / 97.0f - 0.5f;
  float *dp, *dm, *dv, *dg, *back = malloc(N * 4);
  assert_int_equal(hsr_device_alloc(d, N * 4, (void **)&dp), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, N * 4, (void **)&dm), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, N * 4, (void **)&dv), HSR_OK);
  assert_int_equal(hsr_device_alloc(d, N * 4, (void **)&dg), HSR_OK);
  assert_int_equal(hsr_device_copy(d, dp, p, N * 4, NULL), HSR_OK);
  assert_int_equal(hsr_device_memset(d, dm, 0, N * 4, NULL), HSR_OK);
  assert_int_equal(hsr_device_memset(d, dv, 0, N * 4, NULL), HSR_OK);
  assert_int_equal(hsr_device_copy(d, dg, g, N * 4, NULL), HSR_OK);
  adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0.5f};
  for (int step = 1; step <= 3; step++) {
    hp.step = step;
    assert_int_equal(kernels_adamw(h, NULL, N, p, m, v, g, HSR_F32, NULL, HSR_F32, &hp), HSR_OK);
    assert_int_equal(kernels_adamw(d, NULL, N, dp, dm, dv, dg, HSR_F32, NULL, HSR_F32, &hp), HSR_OK);
  }
  double s1 = 0, s2 = 0;
  assert_int_equal(kernels_sumsq(h, NULL, N, p, HSR_F32, &s1), HSR_OK);
  assert_int_equal(kernels_sumsq(d, NULL, N, dp, HSR_F32, &s2), HSR_OK);
  assert_int_equal(hsr_device_copy(d, back, dp, N * 4, NULL), HSR_OK); /* pageable: waits, s2 landed before */
  assert_memory_equal(back, p, N * 4);
  assert_true(s1 == s2);
  (void)out;
  free(p), free(m), free(v), free(g), free(out), free(back);
  hsr_device_free(d, dp), hsr_device_free(d, dm), hsr_device_free(d, dv), hsr_device_free(d, dg);
  assert_int_equal(kern_sim_reports(d), 0);
  assert_int_equal(hsr_device_close(d), HSR_OK);
  assert_int_equal(hsr_device_close(h), HSR_OK);
}

/* HSR_SIM_DELAY is checked when the device opens. */
static void test_bad_delay(void **state) {
  (void)state;
  setenv("HSR_SIM_DELAY", "lots", 1);
  hsr_device *d = NULL;
  assert_int_equal(hsr_device_open(HSR_DEVICE_SIM, 0, &d), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "HSR_SIM_DELAY"));
  assert_null(d);
  setenv("HSR_SIM_DELAY", "50:42", 1);
  assert_int_equal(hsr_device_open(HSR_DEVICE_SIM, 0, &d), HSR_OK);
  assert_int_equal(hsr_device_close(d), HSR_OK);
  unsetenv("HSR_SIM_DELAY");
}

int main(void) {
  unsetenv("HSR_SIM_DELAY");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_runs_ahead),
      cmocka_unit_test(test_event_captures_position),
      cmocka_unit_test(test_event_never_recorded_and_rerecorded),
      cmocka_unit_test(test_copies),
      cmocka_unit_test(test_host_pointer_refused),
      cmocka_unit_test(test_check_reports_and_orders),
      cmocka_unit_test(test_host_sync_orders),
      cmocka_unit_test(test_sync_bounded),
      cmocka_unit_test(test_kernels_equal_host),
      cmocka_unit_test(test_bad_delay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
