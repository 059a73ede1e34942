/* Unit tests of the memory ledger and the trace writer/summary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "hsr/ledger.h"
#include "runtime/io/ledger_internal.h"
#include "runtime/io/trace.h"

static void test_ledger_totals(void **state) {
  (void)state;
  hsr_ledger *l;
  assert_int_equal(ledger_create(&l), HSR_OK);
  /* 1000 params, S = 4: bf16 shard + bf16 grad + f32 master/m/v = 16 B/param / S */
  assert_int_equal(ledger_alloc(l, HSR_MEM_PARAM_SHARD, 250 * 2), HSR_OK);
  assert_int_equal(ledger_alloc(l, HSR_MEM_GRAD_SHARD, 250 * 2), HSR_OK);
  assert_int_equal(ledger_alloc(l, HSR_MEM_MASTER, 250 * 4), HSR_OK);
  assert_int_equal(ledger_alloc(l, HSR_MEM_MOMENT_M, 250 * 4), HSR_OK);
  assert_int_equal(ledger_alloc(l, HSR_MEM_MOMENT_V, 250 * 4), HSR_OK);
  assert_int_equal(ledger_persistent(l), 4000);
  assert_int_equal(ledger_persistent(l) * 4 / 1000, 16);

  ledger_set_phase(l, HSR_PHASE_FORWARD, 2, 1);
  assert_int_equal(ledger_alloc(l, HSR_MEM_FULL_UNIT, 2000), HSR_OK);
  assert_int_equal(ledger_alloc(l, HSR_MEM_FULL_UNIT, 2000), HSR_OK);
  assert_int_equal(ledger_release(l, HSR_MEM_FULL_UNIT, 2000), HSR_OK);
  ledger_set_phase(l, HSR_PHASE_BACKWARD, 1, 1);
  assert_int_equal(ledger_alloc(l, HSR_MEM_RS_BUF, 1000), HSR_OK);
  assert_int_equal(hsr_ledger_note(l, 5000), HSR_OK); /* activations do not move the runtime peak */
  assert_int_equal(ledger_peak(l, HSR_MEM_FULL_UNIT), 4000);
  assert_int_equal(ledger_current(l, HSR_MEM_FULL_UNIT), 2000);
  assert_int_equal(ledger_runtime_peak(l), 4000 + 4000);
  ledger_where w = ledger_runtime_peak_where(l);
  assert_int_equal(w.phase, HSR_PHASE_FORWARD);
  assert_int_equal(w.unit, 2);
  assert_int_equal(ledger_total_peak(l), 4000 + 2000 + 1000 + 5000);
  assert_int_equal(ledger_total_peak_where(l).phase, HSR_PHASE_BACKWARD);
  assert_int_equal(ledger_transient_peak(l), 2000 + 1000 + 5000);
  /* releasing more than alive is a bookkeeping bug, reported */
  assert_int_equal(ledger_release(l, HSR_MEM_AR_BUF, 1), HSR_ERR_STATE);
  assert_non_null(strstr(hsr_last_error(), "all_reduce_buf"));
  assert_int_equal(ledger_alloc(l, (mem_cat)99, 1), HSR_ERR_INVALID);

  char *js = NULL;
  assert_int_equal(ledger_json(l, &js), HSR_OK);
  cJSON *doc = cJSON_Parse(js);
  assert_non_null(doc);
  assert_int_equal((int)cJSON_GetObjectItem(doc, "persistent")->valuedouble, 4000);
  cJSON *fu = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "categories"), "full_unit");
  assert_int_equal((int)cJSON_GetObjectItem(fu, "peak")->valuedouble, 4000);
  cJSON_Delete(doc);
  free(js);

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(ledger_print(l, l, 1000, f), HSR_OK);
  fclose(f);
  assert_non_null(strstr(buf, "4.00 bytes/param"));
  assert_non_null(strstr(buf, "+0.00%"));
  free(buf);
  ledger_free(l);
}

static void span(trace_log *t, span_kind k, const char *lane, const char *name, const char *unit, double a_ms,
                 double b_ms, int64_t step) {
  trace_span s = {
      k,   lane, name, unit, k == HSR_SPAN_COMM ? "shard" : NULL, (uint64_t)(a_ms * 1e6), (uint64_t)(b_ms * 1e6),
      100, step};
  assert_int_equal(trace_add(t, &s), HSR_OK);
}

static void test_trace_roundtrip(void **state) {
  (void)state;
  trace_log *t;
  assert_int_equal(trace_create(0, &t), HSR_OK);
  /* step 1: compute [0,10], comm [8,14] -> comm 6, exposed 4 */
  span(t, HSR_SPAN_STEP, "step", "step", NULL, 0, 20, 1);
  span(t, HSR_SPAN_COMPUTE, "compute", "forward", "block0", 0, 10, 1);
  span(t, HSR_SPAN_COMM, "comm shard", "all_gather", "block0", 8, 14, 1);
  span(t, HSR_SPAN_COMM, "comm shard", "all_gather", "block1", 12, 13, 1); /* inside the first: union unchanged */
  /* step 2: comm [21,23] fully hidden by compute [20,30] */
  span(t, HSR_SPAN_STEP, "step", "step", NULL, 20, 40, 2);
  span(t, HSR_SPAN_COMPUTE, "compute", "forward", "block0", 20, 30, 2);
  span(t, HSR_SPAN_COMM, "comm shard", "all_gather", "block0", 21, 23, 2);
  assert_int_equal(trace_count(t), 7);
  trace_span bad = {HSR_SPAN_COMM, "x", "y", NULL, NULL, 10, 5, 0, 0};
  assert_int_equal(trace_add(t, &bad), HSR_ERR_INVALID);

  char path[] = "/tmp/hsr_trace_testXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(trace_write(t, NULL, path), HSR_OK);
  trace_free(t);

  /* valid JSON with balanced complete events */
  FILE *f = fopen(path, "r");
  char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  cJSON *doc = cJSON_Parse(buf);
  assert_non_null(doc);
  int x = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
    if (!strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) {
      x++;
      assert_true(cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
    }
  }
  assert_int_equal(x, 7);
  cJSON_Delete(doc);

  trace_step_summary *s = NULL;
  int ns = 0;
  assert_int_equal(trace_steps(path, &s, &ns), HSR_OK);
  assert_int_equal(ns, 2);
  assert_int_equal(s[0].step, 1);
  assert_true(s[0].comm_ms > 5.999 && s[0].comm_ms < 6.001);
  assert_true(s[0].exposed_ms > 3.999 && s[0].exposed_ms < 4.001);
  assert_true(s[0].overlap > 0.333 && s[0].overlap < 0.334);
  assert_int_equal(s[0].all_gathers, 2);
  assert_true(s[1].exposed_ms < 1e-9);
  assert_true(s[1].overlap > 0.9999);
  free(s);

  char *out = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&out, &len);
  assert_int_equal(trace_summarize(path, 0, m), HSR_OK);
  fclose(m);
  assert_non_null(strstr(out, "block0=1 block1=1"));
  free(out);
  remove(path);

  assert_int_equal(trace_summarize("/nonexistent/trace.json", 0, stdout), HSR_ERR_IO);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ledger_totals), cmocka_unit_test(test_trace_roundtrip)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
