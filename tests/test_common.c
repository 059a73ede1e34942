/* Unit tests of common/: status strings, error detail, strict env parsing,
 * and every BOOL and CHOICE variable of the HSR_* registry walked through
 * every spelling it accepts (in four cases), read back as what it means. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <cmocka.h>

#include "common/grow.h"
#include "hsr/common.h"
#include "common/common_internal.h"
#include "common/env.h"
#include "common/sys.h"

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(hsr_status_str(HSR_OK), "HSR_OK");
  assert_string_equal(hsr_status_str(HSR_ERR_TIMEOUT), "HSR_ERR_TIMEOUT");
  assert_string_equal(hsr_status_str(HSR_ERR_INTERNAL), "HSR_ERR_INTERNAL");
  assert_string_equal(hsr_status_str((hsr_status)999), "HSR_ERR_UNKNOWN");
  /* every code has a distinct name */
  for (int a = HSR_OK; a <= HSR_ERR_INTERNAL; a++)
    for (int b = a + 1; b <= HSR_ERR_INTERNAL; b++)
      assert_string_not_equal(hsr_status_str((hsr_status)a), hsr_status_str((hsr_status)b));
}

static void test_error_detail(void **state) {
  (void)state;
  clear_error();
  assert_string_equal(hsr_last_error(), "");
  assert_int_equal(hsr_error(HSR_ERR_INVALID, "count %d bad", 7), HSR_ERR_INVALID);
  assert_string_equal(hsr_last_error(), "count 7 bad");
  /* wrapping the previous detail in a new one (read and written at once) */
  assert_int_equal(hsr_error(HSR_ERR_IO, "reading x: %s", hsr_last_error()), HSR_ERR_IO);
  assert_string_equal(hsr_last_error(), "reading x: count 7 bad");
  assert_int_equal(hsr_error(HSR_ERR_IO, "%s; again: %s", hsr_last_error(), hsr_last_error()), HSR_ERR_IO);
  assert_string_equal(hsr_last_error(), "reading x: count 7 bad; again: reading x: count 7 bad");
}

static void test_parse_long(void **state) {
  (void)state;
  long v = 0;
  assert_int_equal(parse_long("x", "42", 0, 100, &v), HSR_OK);
  assert_int_equal(v, 42);
  assert_int_equal(parse_long("x", "-3", -5, 5, &v), HSR_OK);
  assert_int_equal(v, -3);
  v = 9;
  assert_int_equal(parse_long("x", "4x", 0, 100, &v), HSR_ERR_INVALID);
  assert_int_equal(v, 9); /* untouched on error */
  assert_non_null(strstr(hsr_last_error(), "not an integer"));
  assert_int_equal(parse_long("x", "", 0, 100, &v), HSR_ERR_INVALID);
  assert_int_equal(parse_long("x", "101", 0, 100, &v), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "0 to 100"));
  assert_int_equal(parse_long("x", "99999999999999999999999", 0, 100, &v), HSR_ERR_INVALID);
  assert_int_equal(parse_long("x", " 5", 0, 100, &v), HSR_OK); /* strtol skips leading space */
}

static void test_parse_size_and_double(void **state) {
  (void)state;
  size_t s = 0;
  assert_int_equal(parse_size("b", "64M", &s), HSR_OK);
  assert_int_equal(s, 64u << 20);
  assert_int_equal(parse_size("b", "8", &s), HSR_OK);
  assert_int_equal(s, 8);
  assert_int_equal(parse_size("b", "1KB", &s), HSR_OK);
  assert_int_equal(s, 1024);
  assert_int_equal(parse_size("b", "2G", &s), HSR_OK);
  assert_int_equal(s, 2ull << 30);
  assert_int_equal(parse_size("b", "3Q", &s), HSR_ERR_INVALID);
  assert_int_equal(parse_size("b", "-1", &s), HSR_ERR_INVALID);
  assert_int_equal(parse_size("b", "M", &s), HSR_ERR_INVALID);
  assert_int_equal(parse_size("b", "1Mx", &s), HSR_ERR_INVALID);
  double d = 0;
  assert_int_equal(parse_double("d", "1e-3", 0, 1, &d), HSR_OK);
  assert_true(d == 1e-3);
  assert_int_equal(parse_double("d", "nan", 0, 1, &d), HSR_ERR_INVALID);
  assert_int_equal(parse_double("d", "2", 0, 1, &d), HSR_ERR_INVALID);
}

static void test_env(void **state) {
  (void)state;
  long v = 0;
  unsetenv("HSR_TEST_V");
  assert_int_equal(env_long("HSR_TEST_V", 7, 0, 10, &v), HSR_OK);
  assert_int_equal(v, 7);
  setenv("HSR_TEST_V", "", 1); /* set but empty is an error that says so, not the default */
  assert_int_equal(env_long("HSR_TEST_V", 8, 0, 10, &v), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "HSR_TEST_V is set but empty"));
  setenv("HSR_TEST_V", "3", 1);
  assert_int_equal(env_long("HSR_TEST_V", 7, 0, 10, &v), HSR_OK);
  assert_int_equal(v, 3);
  setenv("HSR_TEST_V", "three", 1);
  assert_int_equal(env_long("HSR_TEST_V", 7, 0, 10, &v), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "HSR_TEST_V"));

  static const char *const ch[] = {"thread", "inline", NULL};
  int c = -1;
  setenv("HSR_TEST_V", "INLINE", 1);
  assert_int_equal(env_choice("HSR_TEST_V", ch, 0, &c), HSR_OK);
  assert_int_equal(c, 1);
  setenv("HSR_TEST_V", "spin", 1);
  assert_int_equal(env_choice("HSR_TEST_V", ch, 0, &c), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "thread|inline"));

  int b = -1;
  setenv("HSR_TEST_V", "yes", 1);
  assert_int_equal(env_bool("HSR_TEST_V", 0, &b), HSR_OK);
  assert_int_equal(b, 1);
  setenv("HSR_TEST_V", "off", 1);
  assert_int_equal(env_bool("HSR_TEST_V", 1, &b), HSR_OK);
  assert_int_equal(b, 0);
  setenv("HSR_TEST_V", "maybe", 1);
  assert_int_equal(env_bool("HSR_TEST_V", 1, &b), HSR_ERR_INVALID);

  size_t sz = 0;
  setenv("HSR_TEST_V", "4K", 1);
  assert_int_equal(env_size("HSR_TEST_V", 1, &sz), HSR_OK);
  assert_int_equal(sz, 4096);

  setenv("HSR_LOG", "loud", 1);
  assert_int_equal(log_check_env(), HSR_ERR_INVALID);
  setenv("HSR_LOG", "debug", 1);
  assert_int_equal(log_check_env(), HSR_OK);
  assert_true(log_enabled(HSR_LOG_DEBUG));
  setenv("HSR_LOG", "error", 1);
  assert_false(log_enabled(HSR_LOG_WARN));
  unsetenv("HSR_LOG");
  unsetenv("HSR_TEST_V");
}

/* s in four cases: as written, UPPER, Capitalized, lower */
static void spell(const char *s, int how, char *out, size_t n) {
  snprintf(out, n, "%s", s);
  for (size_t i = 0; out[i]; i++)
    out[i] = (char)(how == 1 || (how == 2 && i == 0) ? toupper((unsigned char)out[i])
                    : how == 3 || how == 2           ? tolower((unsigned char)out[i])
                                                     : out[i]);
}

/* What each spelling a BOOL accepts means, written down here: a spelling the
 * registry adds must be given a meaning in this table first. */
static int bool_meaning(const char *w) {
  static const char *const no[] = {"0", "false", "no", "off"}, *const yes[] = {"1", "true", "yes", "on"};
  for (int i = 0; i < 4; i++) {
    if (!strcmp(w, no[i])) return 0;
    if (!strcmp(w, yes[i])) return 1;
  }
  fail_msg("the registry accepts the BOOL spelling '%s', which this test gives no meaning", w);
  return -1;
}

static void test_registry_spellings(void **state) {
  (void)state;
  int bools = 0, choices = 0;
  char buf[512], val[64];
  for (int i = 0; i < env_count(); i++) {
    const env_info *v = env_at(i);
    if (v->kind != HSR_ENV_BOOL && v->kind != HSR_ENV_CHOICE && v->kind != HSR_ENV_STAGE) continue;
    const char *saved = getenv(v->name);
    char keep[256] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    /* the spellings, from what the registry says is valid */
    if (v->kind == HSR_ENV_BOOL)
      env_valid_text(v, buf, sizeof buf);
    else
      snprintf(buf, sizeof buf, "%s", v->choices);
    int k = 0;
    for (char *sv = NULL, *w = strtok_r(buf, "|", &sv); w; w = strtok_r(NULL, "|", &sv), k++) {
      for (int how = 0; how < 4; how++) {
        spell(w, how, val, sizeof val);
        setenv(v->name, val, 1);
        if (env_check(v->name) != HSR_OK) fail_msg("%s=%s refused: %s", v->name, val, hsr_last_error());
        int got = -7;
        if (v->kind == HSR_ENV_BOOL) {
          assert_int_equal(env_get_bool(v->name, &got), HSR_OK);
          if (got != bool_meaning(w)) fail_msg("%s=%s reads as %d, it means %d", v->name, val, got, bool_meaning(w));
          assert_int_equal(env_bool(v->name, -1, &got), HSR_OK); /* common.h's reader agrees */
          if (got != bool_meaning(w)) fail_msg("env_bool: %s=%s reads as %d", v->name, val, got);
        } else if (v->kind == HSR_ENV_CHOICE) {
          assert_int_equal(env_get_choice(v->name, &got), HSR_OK);
          if (got != k) fail_msg("%s=%s reads as choice %d, it is choice %d of %s", v->name, val, got, k, v->choices);
        } else {
          snprintf(val + strlen(val), sizeof val - strlen(val), ":7");
          setenv(v->name, val, 1);
          if (env_check(v->name) != HSR_OK) fail_msg("%s=%s refused: %s", v->name, val, hsr_last_error());
        }
      }
      bools += v->kind == HSR_ENV_BOOL, choices += v->kind != HSR_ENV_BOOL;
    }
    /* and what is not a spelling of it, refused with what is */
    static const char *const bad[] = {"2", "tru", "enabled", "o", " on"};
    for (int b = 0; b < 5; b++) {
      setenv(v->name, bad[b], 1);
      if (env_check(v->name) != HSR_ERR_INVALID) fail_msg("%s='%s' accepted", v->name, bad[b]);
      env_valid_text(v, buf, sizeof buf);
      if (!strstr(hsr_last_error(), v->name) || !strstr(hsr_last_error(), v->kind == HSR_ENV_STAGE ? v->choices : buf))
        fail_msg("%s='%s': the error '%s' does not say what is valid", v->name, bad[b], hsr_last_error());
    }
    if (saved)
      setenv(v->name, keep, 1);
    else
      unsetenv(v->name);
  }
  assert_true(bools >= 2 * 8 && choices >= 10); /* HSR_POISON, HSR_BENCH_CHECK_FAULT; HSR_LOG, ... */
  /* HSR_LOG's effect: level k lets through exactly the levels up to k */
  snprintf(buf, sizeof buf, "%s", env_find("HSR_LOG")->choices);
  int k = 0;
  for (char *sv = NULL, *w = strtok_r(buf, "|", &sv); w; w = strtok_r(NULL, "|", &sv), k++)
    for (int how = 0; how < 4; how++) {
      spell(w, how, val, sizeof val);
      setenv("HSR_LOG", val, 1);
      assert_int_equal(log_check_env(), HSR_OK);
      for (int m = HSR_LOG_ERROR; m <= HSR_LOG_DEBUG; m++)
        if (log_enabled((log_level)m) != (m <= k))
          fail_msg("HSR_LOG=%s: level %d is %s", val, m, m <= k ? "off" : "on");
    }
  assert_int_equal(k, HSR_LOG_DEBUG + 1);
  unsetenv("HSR_LOG");
}

static void test_clock(void **state) {
  (void)state;
  uint64_t a = hsr_clock_ns(), b = hsr_clock_ns();
  assert_true(b >= a);
  assert_true(clock_s() > 0.0);
}

/* ---- what a memory cgroup leaves (memfds and private memory alike) ---- */
static void put(const char *dir, const char *name, const char *text) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_cgroup_room(void **state) {
  (void)state;
  char t[] = "/tmp/hsr-cg-XXXXXX", d[512], cg[512];
  assert_non_null(mkdtemp(t));
  uint64_t room = 0;
  /* v2: a limited parent (1 GiB, 600 MiB used of which 100 MiB reclaimable cache, 50 MiB of it shmem) above an
   * unlimited child: the parent's room, 1024 - 600 + (100 - 50) = 474 MiB */
  snprintf(d, sizeof d, "%s/v2/job", t);
  char mk[600];
  snprintf(mk, sizeof mk, "mkdir -p %s/step", d);
  assert_int_equal(system(mk), 0);
  put(t, "v2/cgroup.controllers", "cpu memory\n");
  put(d, "memory.max", "1073741824\n");
  put(d, "memory.current", "629145600\n");
  put(d, "memory.stat", "anon 1\nfile 104857600\nshmem 52428800\n");
  snprintf(d, sizeof d, "%s/v2/job/step", t);
  put(d, "memory.max", "max\n");
  put(d, "memory.current", "1000\n");
  snprintf(cg, sizeof cg, "%s/cg2", t);
  put(t, "cg2", "0::/job/step\n");
  snprintf(d, sizeof d, "%s/v2", t);
  assert_int_equal(sys_cgroup_room(cg, d, &room), HSR_OK);
  assert_int_equal(room, 474ull << 20);
  /* a path that is not mounted here (a cgroup namespace): the nearest folder above it */
  put(t, "cg2b", "0::/job/step/gone/deeper\n");
  snprintf(cg, sizeof cg, "%s/cg2b", t);
  assert_int_equal(sys_cgroup_room(cg, d, &room), HSR_OK);
  assert_int_equal(room, 474ull << 20);
  /* v1 (memory controller in its own hierarchy), the child tighter: 256 MiB - 200 MiB */
  snprintf(mk, sizeof mk, "mkdir -p %s/v1/memory/a/b", t);
  assert_int_equal(system(mk), 0);
  snprintf(d, sizeof d, "%s/v1/memory", t);
  put(d, "memory.limit_in_bytes", "9223372036854771712\n");
  put(d, "memory.usage_in_bytes", "5000000000\n");
  snprintf(d, sizeof d, "%s/v1/memory/a/b", t);
  put(d, "memory.limit_in_bytes", "268435456\n");
  put(d, "memory.usage_in_bytes", "209715200\n");
  put(d, "memory.stat", "cache 0\nshmem 0\n");
  put(t, "cg1", "12:pids:/a/b\n4:memory:/a/b\n0::/\n");
  snprintf(cg, sizeof cg, "%s/cg1", t);
  snprintf(d, sizeof d, "%s/v1", t);
  assert_int_equal(sys_cgroup_room(cg, d, &room), HSR_OK);
  assert_int_equal(room, 56ull << 20);
  /* no limit anywhere */
  put(t, "cg0", "4:memory:/\n");
  snprintf(cg, sizeof cg, "%s/cg0", t);
  assert_int_equal(sys_cgroup_room(cg, d, &room), HSR_ERR_NOT_FOUND);
  snprintf(mk, sizeof mk, "rm -rf %s", t);
  assert_int_equal(system(mk), 0);
}

/* The growable array: room for element n, doubling, contents kept. */
static void test_grow_array(void **state) {
  (void)state;
  int *a = NULL, cap = 0;
  for (int n = 0; n < 1000; n++) {
    assert_int_equal(grow_array(&a, &cap, n, sizeof *a, 4, "test"), HSR_OK);
    assert_true(cap > n);
    a[n] = n * 3;
  }
  assert_int_equal(cap, 1024);
  for (int n = 0; n < 1000; n++) assert_int_equal(a[n], n * 3);
  int before = cap;
  assert_int_equal(grow_array(&a, &cap, 10, sizeof *a, 4, "test"), HSR_OK); /* room already */
  assert_int_equal(cap, before);
  free(a);
  char *b = NULL;
  int bc = 0;
  assert_int_equal(grow_array(&b, &bc, 100, 1, 0, "test"), HSR_OK); /* a jump: enough at once */
  assert_true(bc > 100);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_grow_array),
      cmocka_unit_test(test_error_detail),
      cmocka_unit_test(test_parse_long),
      cmocka_unit_test(test_parse_size_and_double),
      cmocka_unit_test(test_env),
      cmocka_unit_test(test_clock),
      cmocka_unit_test(test_registry_spellings),
      cmocka_unit_test(test_cgroup_room),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
