/* hsr ckpt export DIR --safetensors PATH [--max-shard-size N]: the
 * checkpoint's fp32 master weights by logical name, in registration order,
 * through the export writer (runtime/ckpt/ckpt_export.h: one safetensors file
 * or Hugging Face's sharded layout, committed as a checkpoint is): the header from
 * names and shapes, then each tensor read from the checkpoint in chunks of
 * at most 4 MiB (every block's crc32 checked), so the model is never in
 * memory. The __metadata__ is what hsr train --export writes (the model the
 * manifest records, hsr_step, hsr_version). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli/cli.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_export.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/io/safetensors_sharded.h"
#include "common/sys.h"
#include "tools/models/hf_config.h"
#include "tools/models/model_meta.h"

static void export_usage(FILE *f) {
  fprintf(f, "usage: hsr ckpt export DIR --safetensors PATH [--max-shard-size N]\n"
             "  Writes the fp32 master weights of checkpoint DIR (a checkpoint, a root or a root's latest file:\n"
             "  its latest) by logical name as safetensors (dtype F32), streaming one chunk of one tensor at a time.\n"
             "  __metadata__: what 'hsr train --export' writes - hsr.model and the model's config as the checkpoint\n"
             "  records it (gpt: n_layer, n_head, n_embd, n_ctx, vocab_size; llama: also n_kv_head, n_ff), then\n"
             "  hsr_step and hsr_version - so 'hsr eval', 'hsr sample' and 'hsr train --init' read it without flags.\n"
             "  --safetensors PATH   the file written; with --max-shard-size, the directory\n"
             "  --max-shard-size N   Hugging Face's sharded layout (save_pretrained's): PATH/model-00001-of-0000K\n"
             "                       .safetensors ... of at most N bytes of tensors each (a bigger tensor gets a\n"
             "                       file of its own) and PATH/model.safetensors.index.json; one shard:\n"
             "                       PATH/model.safetensors alone. N: 5GB = 5 x 10^9, 2GiB = 2 x 2^30, or bytes;\n"
             "                       the GPT and the llama also get PATH/config.json (GPT2LMHeadModel,\n"
             "                       LlamaForCausalLM), so the directory is what transformers' from_pretrained reads\n");
}

#define EXPORT_CHUNK ((uint64_t)1 << 20) /* elements: 4 MiB */

static hsr_status export_to(const ckpt_handle *c, const char *path, uint64_t max_shard, const model_meta *meta,
                            uint64_t *bytes, int *files) {
  int n = ckpt_num_tensors(c);
  st_tensor *t = calloc((size_t)n + 1, sizeof *t);
  float *buf = malloc(EXPORT_CHUNK * sizeof *buf);
  hsr_status st = t && buf ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "ckpt export: out of memory");
  for (int i = 0; i < n && st == HSR_OK; i++) {
    ckpt_tensor_info x;
    st = ckpt_tensor_at(c, i, &x);
    t[i].name = x.name, t[i].dtype = "F32", t[i].ndim = x.ndim;
    for (int d = 0; d < x.ndim; d++) t[i].shape[d] = x.shape[d];
  }
  ckpt_export *w = NULL;
  if (st == HSR_OK) st = ckpt_export_begin(path, max_shard, t, n, meta->kv, meta->n, &w);
  *files = ckpt_export_files(w);
  for (int i = 0; i < n && st == HSR_OK; i++) {
    ckpt_tensor_info x;
    ckpt_tensor_at(c, i, &x);
    for (uint64_t at = 0; at < x.numel && st == HSR_OK; at += EXPORT_CHUNK) {
      uint64_t k = x.numel - at < EXPORT_CHUNK ? x.numel - at : EXPORT_CHUNK;
      st = ckpt_read(c, i, HSR_CKPT_MASTER, at, k, buf);
      if (st == HSR_OK) st = ckpt_export_write(w, buf, (size_t)k * sizeof *buf);
      *bytes += k * sizeof *buf;
    }
  }
  if (w && st == HSR_OK)
    st = ckpt_export_finish(w);
  else if (w)
    ckpt_export_abort(w);
  free(buf);
  free(t);
  return st;
}

int ckpt_export_main(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  uint64_t max_shard = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      export_usage(stdout);
      return HSR_EXIT_OK;
    } else if (!strcmp(argv[i], "--safetensors") && i + 1 < argc) {
      out = argv[++i];
    } else if (!strcmp(argv[i], "--max-shard-size") && i + 1 < argc) {
      if (st_parse_shard_size("--max-shard-size", argv[++i], &max_shard) != HSR_OK)
        return cli_usage_error("ckpt export", "%s", hsr_last_error());
    } else if (argv[i][0] == '-') {
      return cli_usage_error("ckpt export", "unknown option or missing value '%s'", argv[i]);
    } else if (!dir) {
      dir = argv[i];
    } else {
      return cli_usage_error("ckpt export", "unexpected argument '%s'", argv[i]);
    }
  }
  if (!dir || !out)
    return cli_usage_error("ckpt export", "needs a checkpoint DIR and --safetensors %s", max_shard ? "DIR" : "FILE");
  hsr_status pst = cli_check_ckpt("DIR", dir);
  if (pst == HSR_OK)
    pst = max_shard ? cli_check_out_dir("--safetensors", out) : path_check_output("--safetensors", out);
  if (pst == HSR_OK) { /* never among the checkpoint's files (DIR, or the root whose latest DIR is) */
    char root[4096];
    const char *sl = strrchr(dir, '/');
    struct stat sb;
    if (!stat(dir, &sb) && S_ISREG(sb.st_mode))
      snprintf(root, sizeof root, "%.*s", sl ? (int)(sl - dir) + (sl == dir) : 1, sl ? dir : ".");
    else
      snprintf(root, sizeof root, "%s", dir);
    pst = path_check_outside("--safetensors", out, "DIR", root);
  }
  if (pst != HSR_OK) return cli_usage_error("ckpt export", "%s", hsr_last_error());
  ckpt_handle *c = NULL;
  uint64_t bytes = 0;
  model_meta meta;
  int has_model = 0, files = 0;
  hsr_status st = ckpt_open(dir, &c);
  if (st == HSR_OK) st = model_meta_of_ckpt(&meta, c, &has_model);
  if (st == HSR_OK) st = export_to(c, out, max_shard, &meta, &bytes, &files);
  int cfg = 0; /* the directory layout: transformers' config.json beside the shards */
  if (st == HSR_OK && max_shard) st = hf_config_write(out, meta.kv, meta.n, &cfg);
  if (st == HSR_OK) {
    ckpt_info in;
    ckpt_get_info(c, &in);
    printf("exported %d tensors (%" PRIu64 " bytes, F32) of %s, step %" PRId64 ", to %s (%d file%s%s%s)\n",
           in.num_tensors, bytes, in.dir, in.step, out, files, files == 1 ? "" : "s",
           files > 1 ? " and " HSR_ST_INDEX_NAME : "", cfg ? ", config.json" : "");
    if (!has_model)
      fprintf(stderr,
              "hsr ckpt export: note: %s records no model (saved by hsr %s, before checkpoints carried their "
              "model), so the export's __metadata__ has no hsr.model: hsr eval and sample need --heads, and hsr "
              "train --init the model's flags\n",
              in.dir, in.hsr_version);
  }
  ckpt_close(c);
  if (st != HSR_OK) fprintf(stderr, "hsr ckpt export: %s: %s\n", hsr_status_str(st), hsr_last_error());
  return cli_exit_code(st);
}
