/* hsr eval: the mean cross-entropy of GPT weights (a safetensors file) over
 * consecutive windows of a text file. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "tools/models/gpt_file.h"
#include "common/sys.h"
#include "common/common_internal.h"

static void usage(void) {
  printf("usage: hsr eval --init FILE|DIR --data FILE [--seq T] [--windows N] [--batch B] [--heads H] [--json]\n"
         "                [--logits FILE]\n"
         "Mean cross-entropy (natural log) of GPT weights over windows i = 0..N-1 of a text file, each the\n"
         "bytes [i T, i T + T + 1): inputs the first T, targets the next T. The model's configuration comes from\n"
         "the weights' __metadata__ (hsr train --export and hsr ckpt export write it).\n\n"
         "  --init FILE|DIR   the weights (safetensors; GPT-2 names): a file, an index\n"
         "                    (model.safetensors.index.json) or a directory holding one or model.safetensors\n"
         "  --data FILE       the text\n"
         "  --seq T           tokens per window (default: the model's context)\n"
         "  --windows N       windows (default: every whole window the file holds)\n"
         "  --batch B         windows per forward pass (default 8; the result does not depend on it)\n"
         "  --heads H         attention heads, for weights without hsr's __metadata__ (GPT-2's own)\n"
         "  --json            print {\"loss\": ..., \"windows\": N, \"seq\": T} only\n"
         "  --logits FILE     also write the logits as safetensors: tensor \"logits\", F32 [N, T, vocabulary]\n"
         "                    (what another implementation's forward of the same windows must give)\n"
         "  -h, --help        this text\n"
         "Exit codes: 0 ok, 1 failure, 2 bad usage.\n");
}

typedef struct eval_args {
  const char *init, *data, *logits;
  int seq, windows, batch, json, heads;
} eval_args;

static int parse(int argc, char **argv, eval_args *a) {
  static const struct option opts[] = {
      {"init", required_argument, 0, 'i'},    {"data", required_argument, 0, 'd'},  {"seq", required_argument, 0, 'T'},
      {"windows", required_argument, 0, 'n'}, {"batch", required_argument, 0, 'b'}, {"json", no_argument, 0, 'j'},
      {"help", no_argument, 0, 'h'},          {"heads", required_argument, 0, 'H'}, {"logits", required_argument, 0, 'L'},
      {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  a->seq = a->windows = -1;
  a->batch = 8;
  optind = 1;
  opterr = 0;
  int c;
  long v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h': usage(); return -1;
    case 'i': a->init = optarg; break;
    case 'd': a->data = optarg; break;
    case 'j': a->json = 1; break;
    case 'L': a->logits = optarg; break;
    case 'T':
    case 'n':
    case 'b':
    case 'H':
      st = parse_long(c == 'T'   ? "--seq"
                      : c == 'n' ? "--windows"
                      : c == 'b' ? "--batch"
                                 : "--heads",
                      optarg, 1, 1 << 24, &v);
      *(c == 'T' ? &a->seq : c == 'n' ? &a->windows : c == 'b' ? &a->batch : &a->heads) = (int)v;
      break;
    default: return cli_usage_error("eval", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("eval", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("eval", "unexpected argument '%s'", argv[optind]);
  if (!a->init || !a->data) return cli_usage_error("eval", "--init FILE and --data FILE are required");
  hsr_status st = cli_check_weights("--init", a->init);
  if (st == HSR_OK) st = path_check_read("--data", a->data);
  if (st == HSR_OK && a->logits) st = path_check_output("--logits", a->logits);
  return st == HSR_OK ? 0 : cli_usage_error("eval", "%s", hsr_last_error());
}

static hsr_status map_file(const char *path, const uint8_t **bytes, size_t *len) {
  int fd;
  HSR_CHECK(file_open_read("--data", path, &fd));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return hsr_error(HSR_ERR_IO, "--data: '%s' is not a regular file", path);
  }
  *len = (size_t)sb.st_size;
  void *m = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (*len && m == MAP_FAILED) return hsr_error(HSR_ERR_IO, "--data: cannot map '%s': %s", path, strerror(errno));
  *bytes = m;
  return HSR_OK;
}

/* Sum of the token losses of windows [0, n); lw (may be NULL) receives
 * their logits, window by window. */
static hsr_status eval_windows(const gpt_cfg *c, float **w, const uint8_t *bytes, int n, int T, int B, double *sum,
                               st_writer *lw) {
  gpt_work *work;
  HSR_CHECK(gpt_work_create(c, B, T, NULL, NULL, &work));
  int32_t *in = malloc((size_t)B * T * 4), *tg = malloc((size_t)B * T * 4);
  hsr_status st = in && tg ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  gpt_arrays arr = {c, w, NULL};
  gpt_binder b = gpt_arrays_binder(&arr);
  *sum = 0;
  for (int first = 0; st == HSR_OK && first < n; first += B) {
    int k = n - first < B ? n - first : B;
    for (int s = 0; s < k; s++)
      for (int t = 0; t < T; t++) {
        size_t pos = (size_t)(first + s) * T + (size_t)t;
        in[(size_t)s * T + t] = bytes[pos];
        tg[(size_t)s * T + t] = bytes[pos + 1];
      }
    double mean;
    st = gpt_forward(c, work, in, tg, k, T, &b, &mean);
    const double *rl = gpt_row_loss(work);
    for (size_t i = 0; st == HSR_OK && i < (size_t)k * T; i++) *sum += rl[i];
    if (st == HSR_OK && lw) st = gpt_forward(c, work, in, NULL, k, T, &b, &mean); /* the logits, host memory */
    if (st == HSR_OK && lw) st = st_write(lw, gpt_logits(work), (size_t)k * T * (size_t)c->vocab * sizeof(float));
  }
  free(in), free(tg);
  gpt_work_free(work);
  return st;
}

/* The weights (f32) and a forward pass of B windows must fit in memory: said before loading. */
static hsr_status eval_fits(const gpt_cfg *c, int B, int T) {
  double need = (double)gpt_num_weights(c) * 4 + (double)gpt_work_bytes(c, B, T);
  uint64_t mem = 0;
  if (sys_mem_available(&mem) != HSR_OK || need <= 0.9 * (double)mem) return HSR_OK;
  char n[32], m[32];
  sys_bytes_text(need, n, sizeof n);
  sys_bytes_text((double)mem, m, sizeof m);
  return hsr_error(HSR_ERR_INVALID,
                   "--batch %d --seq %d does not fit: the weights and a forward pass of %d windows need %s, %s of "
                   "memory is available (give a smaller --batch)",
                   B, T, B, n, m);
}

int cmd_eval(int argc, char **argv) {
  eval_args a;
  int pr = parse(argc, argv, &a);
  if (pr) return pr < 0 ? HSR_EXIT_OK : pr;
  openblas_set_num_threads(1);
  gpt_cfg c;
  st_set *f = NULL;
  float **w = NULL;
  const uint8_t *bytes = NULL;
  size_t len = 0;
  hsr_status st = gpt_file_open(a.init, a.heads, &c, &f);
  if (st == HSR_OK && a.seq < 0) a.seq = c.n_ctx;
  if (st == HSR_OK && a.seq > c.n_ctx)
    st = hsr_error(HSR_ERR_INVALID, "--seq %d exceeds the model's context %d", a.seq, c.n_ctx);
  if (st == HSR_OK) st = map_file(a.data, &bytes, &len);
  int fit = len > 0 ? (int)((len - 1) / (size_t)a.seq) : 0;
  if (st == HSR_OK && a.windows < 0) a.windows = fit;
  if (st == HSR_OK && (a.windows < 1 || a.windows > fit))
    st = hsr_error(HSR_ERR_INVALID, "--windows %d: '%s' (%zu bytes) holds %d whole windows of %d + 1 bytes", a.windows,
                   a.data, len, fit, a.seq);
  int B = a.batch < a.windows ? a.batch : a.windows;
  if (st == HSR_OK) st = eval_fits(&c, B, a.seq);
  if (st == HSR_OK) st = gpt_file_load(f, a.init, &c, &w);
  double sum = 0;
  st_writer *lw = NULL;
  if (st == HSR_OK && a.logits) {
    st_tensor lt = {"logits", "F32", 3, {a.windows, a.seq, c.vocab}};
    st = st_create(a.logits, &lt, 1, NULL, 0, &lw);
  }
  if (st == HSR_OK) st = eval_windows(&c, w, bytes, a.windows, a.seq, B, &sum, lw);
  if (lw && st == HSR_OK)
    st = st_finish(lw);
  else if (lw)
    st_abort(lw);
  if (st == HSR_OK) {
    double loss = sum / ((double)a.windows * a.seq);
    if (a.json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "loss", loss);
      cJSON_AddNumberToObject(o, "windows", a.windows);
      cJSON_AddNumberToObject(o, "seq", a.seq);
      char *t = cJSON_PrintUnformatted(o);
      if (t) printf("%s\n", t);
      free(t);
      cJSON_Delete(o);
    } else {
      printf("loss %.6f over %d windows of %d tokens (perplexity %.3f, %.4f bits per byte); %d layers, width %d, "
             "vocabulary %d\n",
             loss, a.windows, a.seq, exp(loss), loss / log(2.0), c.n_layer, c.n_embd, c.vocab);
    }
  }
  gpt_file_free(&c, w);
  st_set_close(f);
  if (bytes) munmap((void *)bytes, len);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("eval", st);
}
