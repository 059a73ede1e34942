/* mr_ckpt's refusal cases (included by mr_ckpt.c, which defines env, spec,
 * run and the helpers used here): broken checkpoints, a save that cannot
 * write, and the program-state API. */
#include <glob.h>
#include <zlib.h>
#include "launch/boot_internal.h"
#include "runtime/runtime_internal.h"
#include "runtime/ckpt/ckpt_internal.h"

/* Rank 0 edits; others wait. */
static int sh(const char *fmt, const char *a, const char *b) {
  char cmd[1400];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  return system(cmd) ? 1 : 0;
}

/* Data file i (in rank order) of a checkpoint directory. */
static int data_file(const char *dir, int i, char *out, size_t len) {
  char pat[600];
  glob_t g;
  snprintf(pat, sizeof pat, "%s/data-*.bin", dir);
  if (glob(pat, 0, NULL, &g)) return 1;
  int ok = g.gl_pathc > 0 && (i < 0 || (size_t)i < g.gl_pathc);
  if (ok) snprintf(out, len, "%s", g.gl_pathv[i < 0 ? g.gl_pathc - 1 : (size_t)i]);
  globfree(&g);
  return !ok;
}

static int flip_byte(const char *path, long at) {
  int fd = open(path, O_RDWR);
  unsigned char b;
  if (fd < 0) return 1;
  off_t end = lseek(fd, 0, SEEK_END);
  off_t off = at >= 0 ? at : end / 2;
  int rc = pread(fd, &b, 1, off) != 1;
  b ^= 0x5a;
  rc |= pwrite(fd, &b, 1, off) != 1;
  close(fd);
  return rc;
}

/* Replaces `from` by `to` in the manifest and recomputes its own crc32, so
 * that only what was edited is wrong. */
static int edit_manifest(const char *dir, const char *from, const char *to) {
  char path[600];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  static char text[1 << 20], out[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *at = strstr(text, from);
  if (!at) return 1;
  size_t pre = (size_t)(at - text);
  int m = snprintf(out, sizeof out, "%.*s%s%s", (int)pre, text, to, at + strlen(from));
  char *k = NULL;
  for (char *p = out; (p = strstr(p, "\"manifest_crc32\"")) != NULL; p++) k = p;
  if (!k || !(k = strchr(k + 16, '"'))) return 1;
  memset(k + 1, '0', 8);
  char hex[9];
  snprintf(hex, sizeof hex, "%08lx", crc32(crc32(0L, Z_NULL, 0), (const Bytef *)out, (uInt)m));
  memcpy(k + 1, hex, 8);
  f = fopen(path, "wb");
  if (!f) return 1;
  fwrite(out, 1, (size_t)m, f);
  fclose(f);
  return 0;
}

typedef struct bad_case {
  const char *name, *needle;
  hsr_status want;
} bad_case;

/* Rank 0 builds case i's directory from the good checkpoint `good`. */
static int make_case(int i, const char *good, const char *other_shape, const char *other_model, char *dir) {
  char f[700];
  if (i == 6 || i == 7) { /* whole checkpoints of other models */
    return sh("cp -r '%s' '%s'", i == 6 ? other_shape : other_model, dir);
  }
  if (i == 8) return sh("mkdir -p '%s' && echo junk > '%s/notes.txt'", dir, dir);
  if (i == 9) return sh("mkdir -p '%s' && echo step-00000099 > '%s/latest'", dir, dir);
  if (sh("cp -r '%s' '%s'", good, dir)) return 1;
  switch (i) {
  case 0: /* the last rank's data file loses its tail */
    if (data_file(dir, -1, f, sizeof f)) return 1;
    return truncate(f, 100) ? 1 : 0;
  case 1: return data_file(dir, 0, f, sizeof f) || flip_byte(f, -1);
  case 2: return data_file(dir, 1, f, sizeof f) || unlink(f);
  case 3: snprintf(f, sizeof f, "%s/manifest.json", dir); return flip_byte(f, 200);
  case 4: return edit_manifest(dir, "\"format_version\":\t2", "\"format_version\":\t3");
  case 5: return edit_manifest(dir, "\"name\":\t\"head.b\"", "\"name\":\t\"head.bias\"");
  case 10: return edit_manifest(dir, "\"kind\":\t\"mlp\"", "\"kind\":\t\"m/lp\"");
  case 11: return edit_manifest(dir, "\"layers\":\t3", "\"layers\":\t[3]");
  }
  return 1;
}

static const bad_case cases[] = {
    {"truncated data file", "truncated", HSR_ERR_IO},
    {"flipped bytes in a data file", "corrupted", HSR_ERR_IO},
    {"missing data file", "is missing", HSR_ERR_NOT_FOUND},
    {"flipped byte in the manifest", "corrupted", HSR_ERR_INVALID},
    {"newer format version", "newer than this hsr", HSR_ERR_INVALID},
    {"renamed tensor", "no tensor 'head.b'", HSR_ERR_INVALID},
    {"wrong shape", "has shape [8, 13], the program registered [7, 13]", HSR_ERR_INVALID},
    {"another model", "no tensor 'blk2.fc1.w'", HSR_ERR_INVALID},
    {"not a checkpoint", "not a checkpoint", HSR_ERR_INVALID},
    {"latest names nothing", "has no manifest.json", HSR_ERR_INVALID},
    {"a model kind that is not a name", "manifest: model: kind 'm/lp' is not a plain name", HSR_ERR_INVALID},
    {"a model config value that is an array", "manifest: model: config: 'layers' is neither a number nor a string",
     HSR_ERR_INVALID},
};

/* Every parameter, full size (collective). */
static float *snapshot(hsr_rt *rt) {
  const rt_layout *l = rt_get_layout(rt);
  size_t total = 0;
  rt_param_info p;
  for (int i = 0; i < rt_layout_num_params(l); i++)
    if (rt_layout_param(l, i, &p) == HSR_OK) total += p.numel;
  float *v = malloc(total * 4 + 4), *w = v;
  for (int i = 0; v && i < rt_layout_num_params(l); i++) {
    rt_layout_param(l, i, &p);
    if (rt_param_read(rt, p.name, w) != HSR_OK) return free(v), NULL;
    w += p.numel;
  }
  return v;
}

/* The same message on every rank. */
static int same_everywhere(env *e, const char *msg) {
  int n = hsr_boot_size(e->boot);
  uint32_t mine = (uint32_t)crc32(0, (const Bytef *)msg, (uInt)strlen(msg)), all[64];
  if (n > 64 || boot_allgather(e->boot, &mine, sizeof mine, all) != HSR_OK) return 0;
  for (int r = 0; r < n; r++)
    if (all[r] != mine) return 0;
  return 1;
}

static int save_variant(env *e, const spec *sp, mlp_cfg m, const char *root) {
  run r;
  if (run_open(e, sp, &m, &r) || save(&r, root, 0, NULL)) return 1;
  run_close(&r);
  return 0;
}

static int mr_ckpt_corrupt(env *e) {
  static const hsr_ckpt_save_opts o_sync = {NULL, 0, NULL, NULL, NULL, 0};
  spec sp;
  int n = hsr_boot_size(e->boot);
  char txt[64], good[300], shp[300], oth[300], dir[300], tag[16];
  snprintf(txt, sizeof txt, "strategy=fsdp,S=%d,block=256", n);
  if (parse_spec(txt, &sp) || shared_dir(e, "good", good, sizeof good) || shared_dir(e, "shape", shp, sizeof shp) ||
      shared_dir(e, "other", oth, sizeof oth))
    return 1;
  set_env("HSR_CKPT_BLOCK", sp.block);
  mlp_cfg m8 = model, m2 = model;
  m8.classes = 8;
  m2.layers = 2;
  if (save_variant(e, &sp, m8, shp) || save_variant(e, &sp, m2, oth)) return 1;
  run r;
  if (run_open(e, &sp, &model, &r) || run_steps(&r, &sp, 0, 3) || save(&r, good, 3 * BATCH, NULL)) return 1;
  char gdir[400];
  snprintf(gdir, sizeof gdir, "%s/step-00000003", good);
  float *before = snapshot(r.rt);
  if (!before) FAIL("snapshot failed");
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    snprintf(tag, sizeof tag, "case%d", i);
    if (shared_dir(e, tag, dir, sizeof dir)) return 1;
    int made = g_rank == 0 ? make_case(i, gdir, shp, oth, dir) : 0;
    OK(boot_bcast(e->boot, &made, sizeof made, 0));
    if (made) FAIL("could not build case '%s'", cases[i].name);
    hsr_status st = hsr_ckpt_load(r.rt, dir, NULL, NULL);
    const char *msg = hsr_last_error();
    CHECK(st == cases[i].want, "%s: load returned %s (%s), expected %s", cases[i].name, hsr_status_str(st), msg,
          hsr_status_str(cases[i].want));
    CHECK(strstr(msg, cases[i].needle) != NULL, "%s: message '%s' lacks '%s'", cases[i].name, msg, cases[i].needle);
    CHECK(!strncmp(msg, "rank ", 5), "%s: message '%s' does not name the rank", cases[i].name, msg);
    char keep[600];
    snprintf(keep, sizeof keep, "%s", msg);
    CHECK(same_everywhere(e, keep), "%s: ranks report different messages ('%s' here)", cases[i].name, keep);
    if (i == 0 && n > 1)
      CHECK(strstr(keep, "rank 0:") == NULL, "%s: only the last rank reads that file, yet '%s'", cases[i].name, keep);
    float *after = snapshot(r.rt);
    size_t total = 0;
    for (int u = 0; u < mlp_num_units(&model); u++)
      for (int k = 0; k < 4; k++) total += mlp_param_numel(&model, u, k);
    CHECK(after && !memcmp(before, after, total * 4), "%s: a failed load changed the parameters", cases[i].name);
    free(after);
    if (g_rank == 0) printf("ok refused: %-30s %s\n", cases[i].name, keep);
  }
  /* the engine is where it was: the next step is step 4, and the good checkpoint loads */
  if (run_steps(&r, &sp, 3, 4)) return 1;
  char latest[400]; /* ROOT/latest, as users type it */
  snprintf(latest, sizeof latest, "%s/latest", good);
  OK(hsr_ckpt_load(r.rt, latest, NULL, NULL));
  float *again = snapshot(r.rt);
  size_t total = 0;
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) total += mlp_param_numel(&model, u, k);
  CHECK(again && !memcmp(before, again, total * 4), "loading the good checkpoint back does not restore step 3");
  free(again);
  /* A fresh engine is loaded in place (HSR_CKPT_IN_PLACE=auto): the manifest
   * cases above are refused before any byte lands, but a corrupted block is
   * found after its window was written, so the state is torn: everything but
   * another load is refused, and the good checkpoint then loads. */
  char bad[300];
  if (shared_dir(e, "torn", bad, sizeof bad)) return 1;
  int made = g_rank == 0 ? make_case(1, gdir, shp, oth, bad) : 0; /* a flipped byte in a data file */
  OK(boot_bcast(e->boot, &made, sizeof made, 0));
  if (made) FAIL("could not build the flipped-byte case");
  hsr_ckpt_stats ls;
  for (int mode = 0; mode < 2; mode++) { /* auto, then off */
    set_env("HSR_CKPT_IN_PLACE", mode ? "off" : NULL);
    run f;
    if (run_open(e, &sp, &model, &f)) return 1;
    float *init = snapshot(f.rt);
    if (!init) FAIL("snapshot of a fresh engine failed");
    hsr_status st = hsr_ckpt_load(f.rt, bad, NULL, NULL);
    char keep[1200];
    snprintf(keep, sizeof keep, "%s", hsr_last_error());
    CHECK(st == HSR_ERR_IO && strstr(keep, "corrupted"), "fresh engine (%s), flipped byte: %s (%s)",
          mode ? "off" : "auto", hsr_status_str(st), keep);
    CHECK(same_everywhere(e, keep), "fresh engine: ranks report different messages ('%s' here)", keep);
    if (!mode) {
      CHECK(strstr(keep, "partly overwritten") != NULL, "in place: the message '%s' does not say the state is torn",
            keep);
      st = rt_param_read(f.rt, "head.b", init);
      CHECK(st == HSR_ERR_STATE && strstr(hsr_last_error(), "load a checkpoint again"),
            "a torn engine's parameters were read: %s (%s)", hsr_status_str(st), hsr_last_error());
      st = hsr_ckpt_save(f.rt, bad, &o_sync, NULL);
      CHECK(st == HSR_ERR_STATE, "a torn engine was saved: %s (%s)", hsr_status_str(st), hsr_last_error());
    } else {
      float *after = snapshot(f.rt);
      CHECK(strstr(keep, "partly overwritten") == NULL, "held: the message '%s' says the state is torn", keep);
      CHECK(after && !memcmp(init, after, total * 4), "HSR_CKPT_IN_PLACE=off: a failed load changed a fresh engine");
      free(after);
    }
    OK(hsr_ckpt_load(f.rt, latest, NULL, &ls));
    CHECK(ls.in_place == !mode && ls.reads == 1, "fresh engine (%s): in_place %d reads %d", mode ? "off" : "auto",
          ls.in_place, ls.reads);
    float *fixed = snapshot(f.rt);
    CHECK(fixed && !memcmp(before, fixed, total * 4), "fresh engine (%s): the good checkpoint does not restore step 3",
          mode ? "off" : "auto");
    free(fixed);
    free(init);
    if (run_steps(&f, &sp, 3, 4)) return 1; /* usable again */
    OK(hsr_ckpt_load(f.rt, latest, NULL, &ls));
    CHECK(ls.in_place == 0, "an engine that has stepped was loaded in place");
    run_close(&f);
    if (g_rank == 0) printf("ok fresh engine, HSR_CKPT_IN_PLACE=%s: %s\n", mode ? "off" : "auto", keep);
  }
  set_env("HSR_CKPT_IN_PLACE", NULL);
  free(before);
  /* a save that cannot write: every rank fails with rank 0's message */
  char file[400];
  snprintf(file, sizeof file, "%s/a-file", e->tmp);
  if (g_rank == 0) sh("touch '%s'%s", file, "");
  OK(boot_barrier(e->boot));
  hsr_ckpt_save_opts o = {NULL, 0, NULL, NULL, NULL, 0};
  hsr_status st = hsr_ckpt_save(r.rt, file, &o, NULL);
  CHECK(st == HSR_ERR_IO && !strncmp(hsr_last_error(), "rank 0:", 7), "save into a file: %s (%s)", hsr_status_str(st),
        hsr_last_error());
  char keep[600];
  snprintf(keep, sizeof keep, "%s", hsr_last_error());
  CHECK(same_everywhere(e, keep), "save into a file: ranks report different messages");
  if (g_rank == 0) printf("ok refused: %-30s %s\n", "save into a regular file", keep);
  run_close(&r);
  set_env("HSR_CKPT_BLOCK", NULL);
  return 0;
}

static int g_state_fail;
#define SCHECK(c, ...)              \
  do {                              \
    if (!(c)) {                     \
      fprintf(stderr, "FAIL: ");    \
      fprintf(stderr, __VA_ARGS__); \
      fprintf(stderr, "\n");        \
      g_state_fail = 1;             \
    }                               \
  } while (0)

static int mr_ckpt_state(void) {
  hsr_ckpt_state *s;
  if (hsr_ckpt_state_create(&s) != HSR_OK) return 1;
  int64_t i;
  uint64_t u;
  double d;
  const char *str;
  SCHECK(hsr_ckpt_state_set_i64(s, "data.sample_index", 123456789012LL) == HSR_OK, "set i64");
  SCHECK(hsr_ckpt_state_set_i64(s, "big", -(1LL << 62) - 5) == HSR_OK, "set big i64");
  SCHECK(ckpt_state_set_u64(s, "rng.state", 0xfedcba9876543210ull) == HSR_OK, "set u64");
  SCHECK(hsr_ckpt_state_set_f64(s, "lr", 0.1 + 0.2) == HSR_OK, "set f64");
  SCHECK(hsr_ckpt_state_set_str(s, "model", "mlp") == HSR_OK, "set str");
  SCHECK(hsr_ckpt_state_set_i64(s, "bad key", 1) == HSR_ERR_INVALID, "a key with a space is refused");
  SCHECK(hsr_ckpt_state_set_f64(s, "nan", NAN) == HSR_ERR_INVALID, "NaN is refused");
  char *json;
  SCHECK(ckpt_state_json(s, &json) == HSR_OK, "json");
  hsr_ckpt_state *t;
  hsr_ckpt_state_create(&t);
  SCHECK(ckpt_state_from_json(t, json) == HSR_OK, "round trip through JSON: %s", json);
  SCHECK(ckpt_state_from_json(t, "[1]") == HSR_ERR_INVALID, "an array is not a state");
  SCHECK(ckpt_state_from_json(t, json) == HSR_OK, "round trip through JSON: %s", json);
  free(json);
  SCHECK(hsr_ckpt_state_get_i64(t, "data.sample_index", &i) == HSR_OK && i == 123456789012LL, "i64 back");
  SCHECK(hsr_ckpt_state_get_i64(t, "big", &i) == HSR_OK && i == -(1LL << 62) - 5, "big i64 back exactly");
  SCHECK(ckpt_state_get_u64(t, "rng.state", &u) == HSR_OK && u == 0xfedcba9876543210ull, "u64 back exactly");
  SCHECK(hsr_ckpt_state_get_f64(t, "lr", &d) == HSR_OK && d == 0.1 + 0.2, "f64 back exactly");
  SCHECK(hsr_ckpt_state_get_str(t, "model", &str) == HSR_OK && !strcmp(str, "mlp"), "string back");
  SCHECK(hsr_ckpt_state_get_i64(t, "model", &i) == HSR_ERR_INVALID, "a string is not an integer");
  SCHECK(hsr_ckpt_state_get_i64(t, "nope", &i) == HSR_ERR_NOT_FOUND, "absent key");
  SCHECK(ckpt_state_count(t) == 5, "5 pairs, got %d", ckpt_state_count(t));
  hsr_ckpt_state_free(s);
  hsr_ckpt_state_free(t);
  printf(g_state_fail ? "FAILED\n" : "PASSED\n");
  return g_state_fail;
}
