/* hsr ckpt inspect | verify | export | bench: checkpoints (hsr/ckpt.h)
 * without training. inspect and verify read every data file and check
 * every checksum; export is ckpt_export.c, bench ckpt_bench.c, plan
 * ckpt_plan.c. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "common/sys.h"

int ckpt_bench_main(int argc, char **argv);  /* ckpt_bench.c */
int ckpt_export_main(int argc, char **argv); /* ckpt_export.c */
int ckpt_plan_main(int argc, char **argv);   /* ckpt_plan.c */

static void usage(FILE *f) {
  fprintf(f, "usage: hsr ckpt inspect DIR [--json] [--no-verify]\n"
             "       hsr ckpt verify DIR [--json]\n"
             "       hsr ckpt export DIR --safetensors FILE [--max-shard-size N]\n"
             "       hsr ckpt bench [options]        (under hsr-run: save/load GB/s beside the disk's own)\n"
             "       hsr ckpt plan [options]         (one process: the planner timed for a mesh of any size)\n"
             "DIR is a checkpoint directory, a checkpoint root or a root's 'latest' file (the checkpoint it names).\n"
             "  inspect   the step, the mesh, strategy and dtypes at save, the model, the optimizer, the\n"
             "            program's state and every tensor (name, shape, dtype, unit, ranges); then reads every\n"
             "            data file and verifies every checksum (--no-verify: the manifest's only)\n"
             "  verify    reads every data file and verifies the manifest, the sizes and every crc32;\n"
             "            exit 1 on any problem, naming the file, the block and the tensor\n"
             "  export    the fp32 master weights by logical name as safetensors, streamed, with the model's\n"
             "            __metadata__ ('hsr ckpt export --help'; --max-shard-size: Hugging Face's sharded layout)\n"
             "  bench     'hsr ckpt bench --help'\n"
             "  plan      'hsr ckpt plan --help'\n"
             "  --json    one JSON object on stdout instead of the table\n"
             "Exit codes: 0 ok, 1 a problem with the checkpoint, 2 bad usage.\n");
}

static void shape_str(const int64_t *s, int nd, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < nd && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, d ? ", " : "", s[d]);
  if (o < len) snprintf(buf + o, len - o, "]");
}

/* "model": {"kind": ..., "config": {...}}, or null for a checkpoint that records none. */
static void model_json(const ckpt_handle *c, cJSON *o) {
  hsr_ckpt_state *cfg = NULL;
  const char *kind = NULL;
  char *cj = NULL;
  if (hsr_ckpt_state_create(&cfg) == HSR_OK && ckpt_get_model(c, &kind, cfg) == HSR_OK &&
      ckpt_state_json(cfg, &cj) == HSR_OK) {
    cJSON *m = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(m, "kind", kind);
    cJSON_AddItemToObject(m, "config", cJSON_Parse(cj));
  } else {
    cJSON_AddNullToObject(o, "model");
  }
  free(cj);
  hsr_ckpt_state_free(cfg);
}

/* "model gpt: n_layer 4, n_head 4, ..." or why there is none. */
static void print_model(const ckpt_handle *c) {
  hsr_ckpt_state *cfg = NULL;
  const char *kind = NULL;
  if (hsr_ckpt_state_create(&cfg) != HSR_OK) return;
  ckpt_info in;
  ckpt_get_info(c, &in);
  if (ckpt_get_model(c, &kind, cfg) != HSR_OK) {
    printf("model: none recorded (saved by hsr %s, before checkpoints carried their model, or by a program that "
           "gave none)\n",
           in.hsr_version);
  } else {
    printf("model %s:", kind);
    for (int i = 0; i < ckpt_state_count(cfg); i++) {
      const char *k;
      char v[128];
      if (ckpt_state_at(cfg, i, &k, v, sizeof v) == HSR_OK) printf("%s %s %s", i ? "," : "", k, v);
    }
    printf("\n");
  }
  hsr_ckpt_state_free(cfg);
}

static cJSON *info_json(const ckpt_handle *c, const ckpt_info *in) {
  cJSON *o = cJSON_CreateObject(), *m, *t;
  cJSON_AddStringToObject(o, "dir", in->dir);
  cJSON_AddNumberToObject(o, "step", (double)in->step);
  cJSON_AddNumberToObject(o, "format_version", in->format_version);
  cJSON_AddStringToObject(o, "hsr_version", in->hsr_version);
  cJSON_AddStringToObject(o, "git_hash", in->git_hash);
  /* mesh, dtypes and optimizer as the manifest's one schema has them (the
   * library parsed and validated it on open); the dtypes and optimizer
   * lists name what varies between checkpoints only */
  cJSON *man = cJSON_Parse(ckpt_manifest_text(c));
  static const char *const sub[] = {"mesh", "dtypes", "optimizer"};
  for (size_t k = 0; k < sizeof sub / sizeof sub[0]; k++) {
    m = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(man, sub[k]), 1);
    cJSON_DeleteItemFromObjectCaseSensitive(m, "master"); /* f32 in every checkpoint */
    cJSON_DeleteItemFromObjectCaseSensitive(m, "moments");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "kind"); /* adamw in every checkpoint */
    cJSON_AddItemToObject(o, sub[k], m ? m : cJSON_CreateNull());
  }
  cJSON_Delete(man);
  model_json(c, o);
  cJSON_AddNumberToObject(o, "data_bytes", (double)in->data_bytes);
  cJSON_AddNumberToObject(o, "files", in->num_files);
  cJSON_AddNumberToObject(o, "block_bytes", (double)in->block_bytes);
  cJSON_AddNumberToObject(o, "numel", (double)in->numel);
  t = cJSON_AddArrayToObject(o, "tensors");
  for (int i = 0; i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info x;
    if (ckpt_tensor_at(c, i, &x) != HSR_OK) continue;
    cJSON *e = cJSON_CreateObject(), *sh;
    cJSON_AddStringToObject(e, "name", x.name);
    sh = cJSON_AddArrayToObject(e, "shape");
    for (int d = 0; d < x.ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)x.shape[d]));
    cJSON_AddStringToObject(e, "dtype", x.dtype);
    cJSON_AddStringToObject(e, "unit", x.unit);
    cJSON_AddNumberToObject(e, "group", x.group);
    cJSON_AddNumberToObject(e, "numel", (double)x.numel);
    cJSON_AddNumberToObject(e, "ranges", x.ranges);
    cJSON_AddItemToArray(t, e);
  }
  hsr_ckpt_state *ps = NULL;
  char *pj = NULL;
  if (hsr_ckpt_state_create(&ps) == HSR_OK && ckpt_get_program(c, ps) == HSR_OK && ckpt_state_json(ps, &pj) == HSR_OK)
    cJSON_AddItemToObject(o, "program", cJSON_Parse(pj));
  free(pj);
  hsr_ckpt_state_free(ps);
  return o;
}

static void print_table(const ckpt_handle *c, const ckpt_info *in) {
  printf("checkpoint %s (format %d, hsr %s %s)\n", in->dir, in->format_version, in->hsr_version, in->git_hash);
  printf("step %" PRId64 "; saved on %d rank(s): mesh %d x %d (replicate x shard)%s, %s, reshard %s, prefetch %d, %s; "
         "dtypes param %s reduce %s, master and moments f32\n",
         in->step, in->world, in->replicate, in->shard, in->outer_shard ? " with the outer shard" : "", in->strategy,
         in->reshard, in->prefetch, in->device, in->param_dtype, in->reduce_dtype);
  print_model(c);
  printf("optimizer adamw, clip %g", in->clip);
  for (int g = 0; g < in->num_groups; g++)
    printf("; group %d: lr %.7g beta1 %g beta2 %g eps %g weight decay %g", g, in->groups[g].lr, in->groups[g].beta1,
           in->groups[g].beta2, in->groups[g].eps, in->groups[g].weight_decay);
  printf("\ndata: %" PRIu64 " bytes in %d file(s), %" PRIu64 "-byte checksum blocks; %" PRIu64 " parameters\n",
         in->data_bytes, in->num_files, in->block_bytes, in->numel);
  hsr_ckpt_state *ps = NULL;
  char *pj = NULL;
  if (hsr_ckpt_state_create(&ps) == HSR_OK && ckpt_get_program(c, ps) == HSR_OK && ckpt_state_json(ps, &pj) == HSR_OK)
    printf("program state: %s\n", pj);
  free(pj);
  hsr_ckpt_state_free(ps);
  printf("%-32s %-16s %-5s %-12s %5s %10s %6s\n", "tensor", "shape", "dtype", "unit", "group", "numel", "ranges");
  for (int i = 0; i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info t;
    char sh[96];
    if (ckpt_tensor_at(c, i, &t) != HSR_OK) continue;
    shape_str(t.shape, t.ndim, sh, sizeof sh);
    printf("%-32s %-16s %-5s %-12s %5d %10" PRIu64 " %6d\n", t.name, sh, t.dtype, t.unit, t.group, t.numel, t.ranges);
  }
}

/* inspect (verify: 1 reads the data, 2 = the verify command: no listing). */
static int run_inspect(const char *dir, int json, int verify, int listing) {
  ckpt_handle *c = NULL;
  hsr_status st = ckpt_open(dir, &c);
  if (st != HSR_OK) {
    if (json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "dir", dir);
      cJSON_AddBoolToObject(o, "ok", 0);
      cJSON_AddStringToObject(o, "error", hsr_last_error());
      char *s = cJSON_Print(o);
      printf("%s\n", s);
      free(s);
      cJSON_Delete(o);
    }
    fprintf(stderr, "hsr ckpt: %s: %s\n", hsr_status_str(st), hsr_last_error());
    return cli_exit_code(st); /* a bad manifest: 2, as hsr train --resume says it */
  }
  ckpt_info in;
  ckpt_get_info(c, &in);
  uint64_t bytes = 0;
  if (verify) st = ckpt_verify(c, &bytes);
  char err[1024] = "";
  if (st != HSR_OK) snprintf(err, sizeof err, "%s", hsr_last_error());
  if (json) {
    cJSON *o = listing ? info_json(c, &in) : cJSON_CreateObject();
    if (!listing) {
      cJSON_AddStringToObject(o, "dir", in.dir);
      cJSON_AddNumberToObject(o, "step", (double)in.step);
      cJSON_AddNumberToObject(o, "tensors", in.num_tensors);
      cJSON_AddNumberToObject(o, "files", in.num_files);
    }
    cJSON_AddBoolToObject(o, "verified", verify && st == HSR_OK);
    cJSON_AddNumberToObject(o, "bytes_read", (double)bytes);
    cJSON_AddBoolToObject(o, "ok", st == HSR_OK);
    if (st != HSR_OK) cJSON_AddStringToObject(o, "error", err);
    char *s = cJSON_Print(o);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
  } else {
    if (listing) print_table(c, &in);
    if (verify && st == HSR_OK)
      printf("%s: ok: step %" PRId64 ", %d tensors, %d file(s), %" PRIu64 " bytes read, every crc32 matches\n",
             listing ? "checksums" : in.dir, in.step, in.num_tensors, in.num_files, bytes);
    else if (!verify)
      printf("checksums: the manifest's verified; data files not read (--no-verify)\n");
  }
  if (st != HSR_OK) fprintf(stderr, "hsr ckpt: %s: %s\n", hsr_status_str(st), err);
  ckpt_close(c);
  return cli_exit_code(st);
}

int cmd_ckpt(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? HSR_EXIT_USAGE : HSR_EXIT_OK;
  }
  const char *act = argv[1];
  if (!strcmp(act, "bench")) return ckpt_bench_main(argc - 1, argv + 1);
  if (!strcmp(act, "export")) return ckpt_export_main(argc - 1, argv + 1);
  if (!strcmp(act, "plan")) return ckpt_plan_main(argc - 1, argv + 1);
  if (strcmp(act, "inspect") && strcmp(act, "verify"))
    return cli_usage_error("ckpt", "unknown action '%s' (valid: inspect, verify, export, bench, plan)", act);
  static const struct option opts[] = {
      {"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'}, {"no-verify", no_argument, 0, 'n'}, {0, 0, 0, 0}};
  int json = 0, verify = 1, c, ac = argc - 1;
  char **av = argv + 1;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(ac, av, "hj", opts, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout);
      return HSR_EXIT_OK;
    } else if (c == 'j') {
      json = 1;
    } else if (c == 'n' && !strcmp(act, "inspect")) {
      verify = 0;
    } else {
      return cli_usage_error("ckpt", "unknown option '%s' for %s", av[optind - 1], act);
    }
  }
  if (optind >= ac) return cli_usage_error("ckpt", "%s needs a checkpoint DIR", act);
  if (optind + 1 < ac) return cli_usage_error("ckpt", "unexpected argument '%s'", av[optind + 1]);
  if (cli_check_ckpt("DIR", av[optind]) != HSR_OK) return cli_usage_error("ckpt", "%s", hsr_last_error());
  return run_inspect(av[optind], json, verify, !strcmp(act, "inspect"));
}
