/* hsr ckpt export DIR --safetensors FILE: the checkpoint's fp32 master
 * weights by logical name, in registration order, through the safetensors
 * module's streaming writer (hsr/safetensors.h): the header from names and
 * shapes, then each tensor read from the checkpoint in chunks of at most
 * 4 MiB (every block's crc32 checked), so the model is never in memory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hsr/ckpt.h"
#include "hsr/sys.h"

#include "hsr/safetensors.h"

static void export_usage(FILE *f) {
  fprintf(f, "usage: hsr ckpt export DIR --safetensors FILE\n"
             "  Writes the fp32 master weights of checkpoint DIR (a checkpoint or a root: its latest) by logical\n"
             "  name as a safetensors file (dtype F32; __metadata__: hsr_step, hsr_version, source), streaming one\n"
             "  chunk of one tensor at a time. 'hsr train --init FILE' starts a run from it.\n");
}

#define EXPORT_CHUNK ((uint64_t)1 << 20) /* elements: 4 MiB */

static hsr_status export_to(const hsr_ckpt *c, const char *path, uint64_t *bytes) {
  hsr_ckpt_info in;
  HSR_CHECK(hsr_ckpt_get_info(c, &in));
  int n = hsr_ckpt_num_tensors(c);
  hsr_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
  float *buf = malloc(EXPORT_CHUNK * sizeof *buf);
  hsr_status st = t && buf ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "ckpt export: out of memory");
  for (int i = 0; i < n && st == HSR_OK; i++) {
    hsr_ckpt_tensor x;
    st = hsr_ckpt_tensor_at(c, i, &x);
    t[i].name = x.name, t[i].dtype = "F32", t[i].ndim = x.ndim;
    for (int d = 0; d < x.ndim; d++) t[i].shape[d] = x.shape[d];
  }
  char step[32];
  snprintf(step, sizeof step, "%" PRId64, in.step);
  hsr_st_kv meta[3] = {
      {"hsr_step", step}, {"hsr_version", in.hsr_version}, {"source", "hsr checkpoint master weights"}};
  hsr_st_writer *w = NULL;
  if (st == HSR_OK) st = hsr_st_create(path, t, n, meta, 3, &w);
  for (int i = 0; i < n && st == HSR_OK; i++) {
    hsr_ckpt_tensor x;
    hsr_ckpt_tensor_at(c, i, &x);
    for (uint64_t at = 0; at < x.numel && st == HSR_OK; at += EXPORT_CHUNK) {
      uint64_t k = x.numel - at < EXPORT_CHUNK ? x.numel - at : EXPORT_CHUNK;
      st = hsr_ckpt_read(c, i, HSR_CKPT_MASTER, at, k, buf);
      if (st == HSR_OK) st = hsr_st_write(w, buf, (size_t)k * sizeof *buf);
      *bytes += k * sizeof *buf;
    }
  }
  if (w && st == HSR_OK)
    st = hsr_st_finish(w);
  else if (w)
    hsr_st_abort(w);
  free(buf);
  free(t);
  return st;
}

int hsr_ckpt_export_main(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      export_usage(stdout);
      return HSR_EXIT_OK;
    } else if (!strcmp(argv[i], "--safetensors") && i + 1 < argc) {
      out = argv[++i];
    } else if (argv[i][0] == '-') {
      return hsr_cli_usage_error("ckpt export", "unknown option or missing value '%s'", argv[i]);
    } else if (!dir) {
      dir = argv[i];
    } else {
      return hsr_cli_usage_error("ckpt export", "unexpected argument '%s'", argv[i]);
    }
  }
  if (!dir || !out) return hsr_cli_usage_error("ckpt export", "needs a checkpoint DIR and --safetensors FILE");
  hsr_status pst = hsr_path_check_dir("DIR", dir, 0);
  if (pst == HSR_OK) pst = hsr_path_check_output("--safetensors", out);
  if (pst == HSR_OK) pst = hsr_path_check_outside("--safetensors", out, "DIR", dir); /* never over the checkpoint */
  if (pst != HSR_OK) return hsr_cli_usage_error("ckpt export", "%s", hsr_last_error());
  hsr_ckpt *c = NULL;
  uint64_t bytes = 0;
  hsr_status st = hsr_ckpt_open(dir, &c);
  if (st == HSR_OK) st = export_to(c, out, &bytes);
  if (st == HSR_OK) {
    hsr_ckpt_info in;
    hsr_ckpt_get_info(c, &in);
    printf("exported %d tensors (%" PRIu64 " bytes, F32) of %s, step %" PRId64 ", to %s\n", in.num_tensors, bytes,
           in.dir, in.step, out);
  }
  hsr_ckpt_close(c);
  if (st != HSR_OK) fprintf(stderr, "hsr ckpt export: %s: %s\n", hsr_status_str(st), hsr_last_error());
  return st == HSR_OK ? HSR_EXIT_OK : HSR_EXIT_FAIL;
}
