/* Unit tests of Hugging Face's sharded safetensors layout
 * (runtime/io/safetensors_sharded.h): the shard size as save_pretrained reads it,
 * the plan (hand-written cases), a streaming round trip through the shards
 * and the index (its text byte for byte), re-exports into the same directory
 * (stale files go, others stay), an aborted export (no index left behind),
 * and malformed indexes, each refused naming the index and the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/ckpt/ckpt_export.h"
#include "runtime/io/safetensors_sharded.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static char g_dir[64];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", g_dir, name); }

static int exists(const char *dir, const char *name) {
  char p[256];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return !stat(p, &sb);
}

static void put_text(const char *dir, const char *name, const char *text) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *get_text(const char *dir, const char *name) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  static char b[1 << 16];
  size_t n = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[n] = 0;
  return b;
}

static void expect_error(hsr_status st, hsr_status want, const char *needle) {
  if (st != want || !strstr(hsr_last_error(), needle))
    fail_msg("got %s '%s', expected %s with '%s'", hsr_status_str(st), hsr_last_error(), hsr_status_str(want), needle);
}

static void test_shard_size(void **state) {
  (void)state;
  static const struct {
    const char *s;
    uint64_t v;
  } good[] = {{"1", 1},
              {"1000000", 1000000},
              {"5GB", 5000000000ull},
              {"500MB", 500000000ull},
              {"3kB", 3000},
              {"1TB", 1000000000000ull},
              {"2GiB", 2ull << 30},
              {"1KiB", 1024},
              {"7MiB", 7ull << 20}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t v = 0;
    OK(st_parse_shard_size("--max-shard-size", good[i].s, &v));
    assert_int_equal(v, good[i].v);
  }
  static const struct {
    const char *s, *needle;
  } bad[] = {{"", "empty size"},
             {"x", "'x' is not a size"},
             {"-1", "'-1' is not a size"},
             {"0", "'0' is zero"},
             {"5G", "'5G' is ambiguous: write 5GB (10^9 bytes, as save_pretrained) or 5GiB (2^30)"},
             {"5m", "'5m' is ambiguous: write 5MB"},
             {"5Gb", "a lowercase b means bits"},
             {"5GiBs", "trailing characters"},
             {"5XB", "unknown unit"},
             {"1.5GB", "unknown unit"},
             {"99999999999999999999", "too large"},
             {"20000000TB", "too large"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 7;
    expect_error(st_parse_shard_size("--max-shard-size", bad[i].s, &v), HSR_ERR_INVALID, bad[i].needle);
    assert_int_equal(v, 0);
    assert_non_null(strstr(hsr_last_error(), "--max-shard-size"));
  }
}

static void plan(const uint64_t *b, int n, uint64_t max, const int *want, int want_n) {
  int got[16], k = -1;
  OK(st_shard_plan(b, n, max, got, &k));
  assert_int_equal(k, want_n);
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("tensor %d went to shard %d, expected %d", i, got[i], want[i]);
}

static void test_plan(void **state) {
  (void)state;
  plan((const uint64_t[]){10, 10, 10}, 3, 20, (const int[]){0, 0, 1}, 2);
  plan((const uint64_t[]){10, 10}, 2, 20, (const int[]){0, 0}, 1); /* exactly full */
  /* bigger than the limit: a file of its own, before and after which shards go on */
  plan((const uint64_t[]){30, 5, 5, 30, 5}, 5, 20, (const int[]){0, 1, 1, 2, 3}, 4);
  plan((const uint64_t[]){5, 30}, 2, 20, (const int[]){0, 1}, 2);
  plan((const uint64_t[]){0, 0, 25, 0}, 4, 20, (const int[]){0, 0, 1, 2}, 3); /* empty tensors ride along */
  plan((const uint64_t[]){7, 7, 7}, 3, 1, (const int[]){0, 1, 2}, 3);         /* all above: one each */
  plan(NULL, 0, 20, NULL, 1);                                                 /* no tensors: one empty file */
  int s[1], n;
  expect_error(st_shard_plan((const uint64_t[]){1}, 1, 0, s, &n), HSR_ERR_INVALID, "max_bytes 0");
  uint64_t *many = calloc(100001, sizeof *many);
  int *sh = calloc(100001, sizeof *sh);
  for (int i = 0; i < 100001; i++) many[i] = 2;
  expect_error(st_shard_plan(many, 100001, 1, sh, &n), HSR_ERR_INVALID, "exceed the 99999");
  free(many), free(sh);
}

/* a 12, b 40 (above the limit), c 8, d 0, e 8 bytes; limit 20: shards {a}, {b}, {c, d, e} */
static const st_tensor g_t[5] = {{"a", "F32", 1, {3}},
                                     {"b.weight", "F32", 2, {2, 5}},
                                     {"c", "I32", 1, {2}},
                                     {"d", "U8", 1, {0}},
                                     {"e", "F64", 0, {0}}};
static const st_kv g_meta[2] = {{"hsr.model", "mlp"}, {"layers", "2"}};
#define G_BYTES 68

static void export_to(const char *dir, uint64_t max, size_t cut, int finish) {
  unsigned char data[G_BYTES];
  for (int i = 0; i < G_BYTES; i++) data[i] = (unsigned char)(i * 7 + 1);
  ckpt_export *w;
  OK(ckpt_export_begin(dir, max, g_t, 5, g_meta, 2, &w));
  size_t end = finish ? G_BYTES : cut;
  for (size_t off = 0; off < end; off += 7) /* chunks across tensors and shards */
    OK(ckpt_export_write(w, data + off, end - off < 7 ? end - off : 7));
  if (finish)
    OK(ckpt_export_finish(w));
  else
    ckpt_export_abort(w);
}

static const char *const g_index =
    "{\n  \"metadata\": {\n    \"total_size\": 68\n  },\n  \"weight_map\": {\n"
    "    \"a\": \"model-00001-of-00003.safetensors\",\n    \"b.weight\": \"model-00002-of-00003.safetensors\",\n"
    "    \"c\": \"model-00003-of-00003.safetensors\",\n    \"d\": \"model-00003-of-00003.safetensors\",\n"
    "    \"e\": \"model-00003-of-00003.safetensors\"\n  }\n}\n";

static void check_set(const char *path, int files) {
  st_set *s;
  OK(st_set_open(path, &s));
  assert_int_equal(st_set_count(s), 5);
  assert_int_equal(st_set_num_files(s), files);
  assert_int_equal(st_set_total_bytes(s), G_BYTES);
  assert_string_equal(st_set_meta(s, "hsr.model"), "mlp");
  assert_int_equal(st_set_meta_count(s), 2);
  unsigned char want[G_BYTES], got[G_BYTES];
  for (int i = 0; i < G_BYTES; i++) want[i] = (unsigned char)(i * 7 + 1);
  size_t at = 0;
  static const char *const file_of[5] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                         "model-00003-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                         "model-00003-of-00003.safetensors"};
  for (int k = 0; k < 5; k++) {
    int i = -1;
    st_info in;
    OK(st_set_find(s, g_t[k].name, &i));
    OK(st_set_info_at(s, i, &in));
    assert_string_equal(in.name, g_t[k].name);
    assert_string_equal(in.dtype, g_t[k].dtype);
    assert_int_equal(in.ndim, g_t[k].ndim);
    size_t n = (size_t)(in.end - in.begin);
    OK(st_set_read(s, i, 0, got + at, n));
    assert_memory_equal(got + at, want + at, n);
    if (files == 3) assert_string_equal(st_set_file_of(s, i), file_of[k]);
    at += n;
  }
  assert_int_equal(at, G_BYTES);
  expect_error(st_set_find(s, "zz", &(int){0}), HSR_ERR_NOT_FOUND, "no tensor 'zz'");
  st_set_close(s);
}

static void test_round_trip(void **state) {
  (void)state;
  char d[128], ix[192];
  path_of(d, sizeof d, "rt");
  export_to(d, 20, 0, 1);
  for (int k = 1; k <= 3; k++) {
    char n[64];
    snprintf(n, sizeof n, "model-%05d-of-00003.safetensors", k);
    assert_true(exists(d, n));
  }
  assert_false(exists(d, HSR_ST_SINGLE_NAME));
  assert_string_equal(get_text(d, HSR_ST_INDEX_NAME), g_index); /* json.dumps(indent=2, sort_keys=True) + "\n" */
  check_set(d, 3);
  snprintf(ix, sizeof ix, "%s/%s", d, HSR_ST_INDEX_NAME);
  check_set(ix, 3);
  char *file;
  int is_index;
  OK(st_set_locate(d, &file, &is_index));
  assert_string_equal(file, ix);
  assert_int_equal(is_index, 1);
  free(file);
  /* one file (no limit) and one shard (a limit above the model): the single form */
  char one[128], d1[128];
  path_of(one, sizeof one, "one.safetensors");
  export_to(one, 0, 0, 1);
  check_set(one, 1);
  path_of(d1, sizeof d1, "one-dir");
  export_to(d1, 1000, 0, 1);
  assert_true(exists(d1, HSR_ST_SINGLE_NAME));
  assert_false(exists(d1, HSR_ST_INDEX_NAME));
  check_set(d1, 1);
}

static void test_reexport(void **state) {
  (void)state;
  char d[128];
  path_of(d, sizeof d, "re");
  export_to(d, 20, 0, 1);
  put_text(d, "notes.txt", "mine\n");
  put_text(d, "model-00009-of-00009.safetensors", "stale\n");
  export_to(d, 1000, 0, 1); /* now one shard: the shards and the index of before go */
  assert_true(exists(d, HSR_ST_SINGLE_NAME));
  assert_false(exists(d, HSR_ST_INDEX_NAME));
  assert_false(exists(d, "model-00001-of-00003.safetensors"));
  assert_false(exists(d, "model-00009-of-00009.safetensors"));
  assert_true(exists(d, "notes.txt"));
  check_set(d, 1);
  export_to(d, 20, 0, 1); /* and back: the single file goes */
  assert_false(exists(d, HSR_ST_SINGLE_NAME));
  assert_true(exists(d, "notes.txt"));
  check_set(d, 3);
  /* an export that fails half-way leaves the previous one whole (its files
   * were staged) and nothing staged behind */
  export_to(d, 1000, 30, 0);
  assert_true(exists(d, HSR_ST_INDEX_NAME));
  assert_false(exists(d, HSR_ST_SINGLE_NAME));
  assert_false(exists(d, HSR_ST_SINGLE_NAME ".hsr-staged"));
  check_set(d, 3);
  export_to(d, 20, 30, 0);
  assert_false(exists(d, "model-00001-of-00003.safetensors.hsr-staged"));
  check_set(d, 3);
  /* a crashed export's staged files go with the next export */
  put_text(d, "model-00001-of-00002.safetensors.hsr-staged", "crashed\n");
  put_text(d, "mine.hsr-staged", "mine\n");
  export_to(d, 20, 0, 1);
  assert_false(exists(d, "model-00001-of-00002.safetensors.hsr-staged"));
  assert_true(exists(d, "mine.hsr-staged"));
  check_set(d, 3);
  /* finishing early is refused, writing past the end too */
  ckpt_export *w;
  OK(ckpt_export_begin(d, 20, g_t, 5, g_meta, 2, &w));
  expect_error(ckpt_export_finish(w), HSR_ERR_INVALID, "before every tensor's bytes were written");
  check_set(d, 3); /* the previous export stays */
  unsigned char z[G_BYTES + 1] = {0};
  OK(ckpt_export_begin(d, 20, g_t, 5, g_meta, 2, &w));
  expect_error(ckpt_export_write(w, z, sizeof z), HSR_ERR_INVALID, "more than the tensors hold");
  ckpt_export_abort(w);
  /* a bad tensor list touches no file */
  st_tensor bad[2] = {{"x", "F32", 1, {1}}, {"x", "F32", 1, {1}}};
  char d2[128];
  path_of(d2, sizeof d2, "never");
  expect_error(ckpt_export_begin(d2, 20, bad, 2, NULL, 0, &w), HSR_ERR_INVALID, "given twice");
  struct stat sb;
  assert_int_not_equal(stat(d2, &sb), 0);
}

/* Opening d must fail with `needle`, naming the index. */
static void open_fails(const char *d, const char *needle) {
  st_set *s = NULL;
  expect_error(st_set_open(d, &s), HSR_ERR_INVALID, needle);
  assert_null(s);
  assert_non_null(strstr(hsr_last_error(), HSR_ST_INDEX_NAME));
}

/* A valid 3-shard export in `name`, its index replaced by `index`. */
static void bad_index(const char *name, const char *index, const char *needle) {
  char d[128];
  path_of(d, sizeof d, name);
  export_to(d, 20, 0, 1);
  put_text(d, HSR_ST_INDEX_NAME, index);
  open_fails(d, needle);
}

#define S1 "\"model-00001-of-00003.safetensors\""
#define S2 "\"model-00002-of-00003.safetensors\""
#define S3 "\"model-00003-of-00003.safetensors\""
#define REST "\"c\": " S3 ", \"d\": " S3 ", \"e\": " S3

static void test_bad_index(void **state) {
  (void)state;
  bad_index(
      "b0", "{\"weight_map\": {\"a\": " S1 ", \"b.weight\": \"model-00004-of-00004.safetensors\", " REST "}}",
      "shard 'model-00004-of-00004.safetensors' (the weight_map puts 1 tensor there, e.g. 'b.weight') is missing");
  bad_index("b1", "{\"weight_map\": {\"a\": " S1 ", \"a\": " S2 ", \"b.weight\": " S2 ", " REST "}}",
            "the weight_map names tensor 'a' twice");
  bad_index("b2",
            "{\"weight_map\": {\"a\": \"../b2/model-00001-of-00003.safetensors\", \"b.weight\": " S2 ", " REST "}}",
            "weight_map['a'] = '../b2/model-00001-of-00003.safetensors' is not a plain file name");
  bad_index("b3", "{\"weight_map\": {\"a\": \"/etc/passwd\", \"b.weight\": " S2 ", " REST "}}",
            "'/etc/passwd' is not a plain file name");
  bad_index("b4", "{\"weight_map\": {\"a\": \"..\", \"b.weight\": " S2 ", " REST "}}", "'..' is not a plain file name");
  bad_index("b5", "{\"weight_map\": [1, 2]}", "\"weight_map\" is missing or not an object");
  bad_index("b6", "{\"metadata\": {\"total_size\": 68}}", "\"weight_map\" is missing or not an object");
  bad_index("b7", "{\"weight_map\": {\"a\": 1}}", "weight_map['a'] is not a file name (a string)");
  bad_index("b8", "{\"weight_map\": {\"a\": " S1 ",", "not a JSON object");
  bad_index("b9", "{\"metadata\": {\"total_size\": \"68\"}, \"weight_map\": {\"a\": " S1 "}}",
            "metadata.total_size is not a non-negative integer");
  bad_index("b10", "{\"metadata\": {\"total_size\": -1}, \"weight_map\": {\"a\": " S1 "}}",
            "metadata.total_size is not a non-negative integer");
  bad_index("b11", "{\"weight_map\": {\"a\": " S1 ", \"b.weight\": " S2 ", \"c\": " S3 ", \"d\": " S3 "}}",
            "shard 'model-00003-of-00003.safetensors' holds tensor 'e', which the weight_map does not name");
  bad_index("b12",
            "{\"weight_map\": {\"a\": " S1 ", \"b.weight\": " S2 ", \"c\": " S1 ", \"d\": " S3 ", \"e\": " S3 "}}",
            "tensor 'c' is in shard 'model-00003-of-00003.safetensors', but the weight_map puts it in "
            "'model-00001-of-00003.safetensors'");
  bad_index("b13", "{\"weight_map\": {\"a\": " S1 ", \"b.weight\": " S2 ", \"zz\": " S1 ", " REST "}}",
            "the weight_map puts tensor 'zz' in shard 'model-00001-of-00003.safetensors', which does not hold it");
  bad_index("b14", "{\"weight_map\": {}}", "the weight_map is empty");
  bad_index("b15", "{\"weight_map\": {\"a\": \"sub/x.safetensors\"}}", "is not a plain file name");
  /* a shard that is not safetensors, and shards of two exports */
  char d[128];
  path_of(d, sizeof d, "b16");
  export_to(d, 20, 0, 1);
  put_text(d, "model-00002-of-00003.safetensors", "junk");
  open_fails(d, "shard 'model-00002-of-00003.safetensors': safetensors '");
  path_of(d, sizeof d, "b17");
  export_to(d, 20, 0, 1);
  char p[192];
  snprintf(p, sizeof p, "%s/model-00001-of-00003.safetensors", d);
  st_writer *w;
  st_kv other[2] = {{"hsr.model", "mlp"}, {"layers", "3"}};
  OK(st_create(p, g_t, 1, other, 2, &w));
  OK(st_write(w, (unsigned char[12]){0}, 12));
  OK(st_finish(w));
  open_fails(d, "have different __metadata__ ('layers' is '3' and '2')");
  /* a wrong total_size is only a warning: the tensors say what they hold */
  path_of(d, sizeof d, "b18");
  export_to(d, 20, 0, 1);
  put_text(d, HSR_ST_INDEX_NAME,
           "{\"metadata\": {\"total_size\": 5}, \"weight_map\": {\"a\": " S1 ", \"b.weight\": " S2 ", " REST "}}");
  check_set(d, 3);
  /* directories: both forms, neither */
  path_of(d, sizeof d, "b19");
  export_to(d, 20, 0, 1);
  put_text(d, HSR_ST_SINGLE_NAME, "x");
  st_set *s = NULL;
  expect_error(st_set_open(d, &s), HSR_ERR_INVALID, "holds both model.safetensors.index.json and");
  path_of(d, sizeof d, "b20");
  mkdir(d, 0755);
  expect_error(st_set_open(d, &s), HSR_ERR_INVALID, "holds neither");
  path_of(d, sizeof d, "b21-missing");
  expect_error(st_set_open(d, &s), HSR_ERR_NOT_FOUND, "No such file");
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/hsr-st-sharded-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) ? -1 : 0;
}

/* Every format of the commit protocol's table has a test that writes it: a
 * new format fails here until it gets one. */
static void test_every_format(void **state) {
  (void)state;
  static const struct {
    const char *format, *test;
  } tested[] = {
      {"hsr-checkpoint", "tests/mr_ckpt.c (ckpt_* tests: save, crash at each stage, load on any mesh)"},
      {"safetensors", "test_round_trip, test_single_file (here)"},
      {"safetensors-sharded", "test_round_trip, test_reexport (here)"},
  };
  int n = 0;
  for (const char *f; (f = ckpt_format_name(n)) != NULL; n++) {
    int found = 0;
    for (size_t k = 0; k < sizeof tested / sizeof tested[0] && !found; k++) found = !strcmp(tested[k].format, f);
    if (!found) fail_msg("checkpoint format '%s' has no test (docs/checkpoints.md: adding a format)", f);
  }
  assert_int_equal(n, (int)(sizeof tested / sizeof tested[0]));
}

/* One file: staged beside its target, renamed; a failed export leaves the
 * previous file; a symlink's target is written and the link stays. */
static void test_single_file(void **state) {
  (void)state;
  char f[128], l[128];
  path_of(f, sizeof f, "single.safetensors");
  export_to(f, 0, 0, 1);
  check_set(f, 1);
  export_to(f, 0, 30, 0);
  check_set(f, 1);
  assert_false(exists(g_dir, "single.safetensors.hsr-staged"));
  path_of(l, sizeof l, "link.safetensors");
  assert_int_equal(symlink(f, l), 0);
  export_to(l, 0, 0, 1);
  struct stat sb;
  assert_int_equal(lstat(l, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  check_set(l, 1);
  ckpt_export *w;
  OK(ckpt_export_begin("/dev/null", 0, g_t, 5, g_meta, 2, &w)); /* a device: in place */
  unsigned char z[G_BYTES] = {0};
  OK(ckpt_export_write(w, z, sizeof z));
  OK(ckpt_export_finish(w));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_shard_size), cmocka_unit_test(test_plan),
                                     cmocka_unit_test(test_round_trip), cmocka_unit_test(test_reexport),
                                     cmocka_unit_test(test_bad_index), cmocka_unit_test(test_single_file),
                                     cmocka_unit_test(test_every_format)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
