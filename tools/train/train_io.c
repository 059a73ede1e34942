/* hsr train's I/O helpers: agreement across ranks, safetensors export and
 * --init of the engine's parameters, the GEMM probe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/models/gpt_file.h"
#include "hsr/kernels.h"
#include "launch/agree.h"
#include "runtime/ckpt/ckpt_export.h"
#include "train.h"

/* The rank is named where it matters: not when every rank found the same,
 * nor twice (an inner agreement already named it). */
hsr_status train_agree(hsr_boot *boot, hsr_status st) {
  return agree_votes(agree_boot_gather, boot, hsr_boot_size(boot), st, 0, 0, 0, AGREE_NAME_RANK | AGREE_UNLESS_ALIKE,
                     NULL, NULL);
}

typedef struct tensors {
  int n;
  rt_param_info *p;
  st_tensor *t;
  size_t maxn;
} tensors;

static hsr_status layout_tensors(hsr_rt *rt, tensors *ts) {
  const rt_layout *l = rt_get_layout(rt);
  ts->n = rt_layout_num_params(l);
  ts->p = calloc((size_t)ts->n + 1, sizeof *ts->p);
  ts->t = calloc((size_t)ts->n + 1, sizeof *ts->t);
  ts->maxn = 1;
  if (!ts->p || !ts->t) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < ts->n; i++) {
    HSR_CHECK(rt_layout_param(l, i, &ts->p[i]));
    ts->t[i].name = ts->p[i].name;
    ts->t[i].dtype = "F32";
    ts->t[i].ndim = ts->p[i].ndim;
    for (int d = 0; d < ts->p[i].ndim; d++) ts->t[i].shape[d] = ts->p[i].shape[d];
    if (ts->p[i].numel > ts->maxn) ts->maxn = ts->p[i].numel;
  }
  return HSR_OK;
}

static void tensors_free(tensors *ts) { free(ts->p), free(ts->t); }

hsr_status train_export(hsr_rt *rt, hsr_boot *boot, const char *path, uint64_t max_shard_bytes, const st_kv *meta,
                        int nmeta, int *files) {
  int rank = hsr_boot_rank(boot);
  tensors ts = {0};
  hsr_status st = layout_tensors(rt, &ts);
  float *buf = st == HSR_OK ? malloc(ts.maxn * sizeof(float)) : NULL;
  if (st == HSR_OK && !buf) st = hsr_error(HSR_ERR_NOMEM, "--export: out of memory");
  ckpt_export *w = NULL;
  if (st == HSR_OK && rank == 0) st = ckpt_export_begin(path, max_shard_bytes, ts.t, ts.n, meta, nmeta, &w);
  if (files) *files = ckpt_export_files(w);
  st = train_agree(boot, st);
  /* every rank reads every tensor (a collective in its shard group); rank 0
   * keeps going after a failed write so no peer waits for it */
  hsr_status local = HSR_OK;
  for (int i = 0; st == HSR_OK && i < ts.n; i++) {
    hsr_status r = rt_param_read(rt, ts.p[i].name, buf);
    if (r != HSR_OK) {
      st = r; /* a read-back failure is not recoverable: the collective is broken */
      break;
    }
    if (rank == 0 && local == HSR_OK) local = ckpt_export_write(w, buf, ts.p[i].numel * sizeof(float));
  }
  if (rank == 0 && w) {
    if (st == HSR_OK && local == HSR_OK)
      local = ckpt_export_finish(w);
    else
      ckpt_export_abort(w);
  }
  if (st == HSR_OK) st = train_agree(boot, local);
  free(buf);
  tensors_free(&ts);
  return st;
}

/* GPT-2's published files also hold its attention masks, buffers rather
 * than parameters (h.N.attn.bias [1, 1, n_ctx, n_ctx], h.N.attn.masked_bias):
 * they are not weights, so --init passes over them. */
static int st_buffer_name(const char *name) {
  size_t n = strlen(name);
  return (n > 10 && !strcmp(name + n - 10, ".attn.bias")) || (n > 17 && !strcmp(name + n - 17, ".attn.masked_bias"));
}

/* The file's tensors against the registered parameters: the same names
 * and shapes, float dtypes. */
static hsr_status check_file(const st_set *f, const tensors *ts, const char *path, int *idx) {
  for (int i = 0; i < ts->n; i++) {
    const rt_param_info *p = &ts->p[i];
    if (gpt_file_find(f, p->name, &idx[i]) != HSR_OK)
      return hsr_error(HSR_ERR_INVALID, "--init '%s': no tensor '%s' (the model's parameter %d of %d)", path, p->name,
                       i + 1, ts->n);
    st_info in;
    HSR_CHECK(st_set_info_at(f, idx[i], &in));
    int same = in.ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = in.shape[d] == p->shape[d];
    if (!same) {
      char a[96] = "", b[96] = "";
      for (int d = 0, o = 0; d < in.ndim; d++)
        o += snprintf(a + o, sizeof a - (size_t)o, "%s%lld", d ? ", " : "", (long long)in.shape[d]);
      for (int d = 0, o = 0; d < p->ndim; d++)
        o += snprintf(b + o, sizeof b - (size_t)o, "%s%lld", d ? ", " : "", (long long)p->shape[d]);
      return hsr_error(HSR_ERR_INVALID, "--init '%s': tensor '%s' has shape [%s], the model's is [%s]", path, p->name,
                       a, b);
    }
    if (strcmp(in.dtype, "F32") && strcmp(in.dtype, "BF16") && strcmp(in.dtype, "F16"))
      return hsr_error(HSR_ERR_INVALID, "--init '%s': tensor '%s' is %s (valid: F32, BF16, F16)", path, p->name,
                       in.dtype);
  }
  if (st_set_count(f) != ts->n) { /* an extra tensor: say which */
    for (int j = 0; j < st_set_count(f); j++) {
      st_info in;
      st_set_info_at(f, j, &in);
      int known = st_buffer_name(in.name);
      for (int i = 0; i < ts->n && !known; i++) known = idx[i] == j;
      if (!known)
        return hsr_error(HSR_ERR_INVALID,
                         "--init '%s': tensor '%s' is not a parameter of this model (%d tensors, the "
                         "model has %d)",
                         path, in.name, st_set_count(f), ts->n);
    }
  }
  return HSR_OK;
}

static hsr_status load_one(const st_set *f, int j, size_t n, float *out, void *tmp) {
  st_info in;
  HSR_CHECK(st_set_info_at(f, j, &in));
  if (!strcmp(in.dtype, "F32")) return st_set_read(f, j, 0, out, n * 4);
  HSR_CHECK(st_set_read(f, j, 0, tmp, n * 2));
  hsr_device *h;
  HSR_CHECK(hsr_device_open(HSR_DEVICE_HOST, 0, &h));
  hsr_status st = hsr_kernels_cast(h, NULL, n, tmp, !strcmp(in.dtype, "BF16") ? HSR_BF16 : HSR_F16, out, HSR_F32);
  hsr_device_close(h);
  return st;
}

hsr_status train_init_from(hsr_rt *rt, hsr_boot *boot, const char *path) {
  tensors ts = {0};
  st_set *f = NULL;
  int *idx = NULL;
  hsr_status st = layout_tensors(rt, &ts);
  if (st == HSR_OK) st = init_st_open(path, &f);
  if (st == HSR_OK && !(idx = calloc((size_t)ts.n + 1, sizeof *idx))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) st = check_file(f, &ts, path, idx);
  st = train_agree(boot, st); /* nothing is set unless every rank can read it all */
  float *buf = st == HSR_OK ? malloc(ts.maxn * 4) : NULL;
  void *tmp = st == HSR_OK ? malloc(ts.maxn * 2) : NULL;
  if (st == HSR_OK && (!buf || !tmp)) st = hsr_error(HSR_ERR_NOMEM, "--init: out of memory");
  for (int i = 0; st == HSR_OK && i < ts.n; i++) {
    st = load_one(f, idx[i], ts.p[i].numel, buf, tmp);
    if (st == HSR_OK) st = hsr_rt_param_init(rt, ts.p[i].name, buf);
  }
  st = train_agree(boot, st);
  free(buf), free(tmp), free(idx);
  st_set_close(f);
  tensors_free(&ts);
  return st;
}

hsr_status train_gemm_probe(hsr_device *dev, hsr_stream *s, size_t m, size_t n, size_t k, double seconds,
                            double *gflops) {
  float *a = NULL, *b = NULL, *c = NULL;
  HSR_CHECK(hsr_device_alloc(dev, m * k * 4, (void **)&a));
  hsr_status st = hsr_device_alloc(dev, k * n * 4, (void **)&b);
  if (st == HSR_OK) st = hsr_device_alloc(dev, m * n * 4, (void **)&c);
  if (st == HSR_OK) st = hsr_device_memset(dev, a, 0, m * k * 4, s);
  if (st == HSR_OK) st = hsr_device_memset(dev, b, 0, k * n * 4, s);
  int reps = 0;
  double t0 = clock_s(), t = 0;
  /* one untimed product first (first-touch, cuBLAS handle) */
  if (st == HSR_OK) st = hsr_kernels_gemm(dev, s, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  if (st == HSR_OK && s) st = hsr_stream_sync(s, 600);
  t0 = clock_s();
  while (st == HSR_OK && (t = clock_s() - t0) < seconds) {
    for (int i = 0; i < 4 && st == HSR_OK; i++, reps++)
      st = hsr_kernels_gemm(dev, s, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    if (st == HSR_OK && s) st = hsr_stream_sync(s, 600);
  }
  t = clock_s() - t0;
  hsr_device_free(dev, a), hsr_device_free(dev, b), hsr_device_free(dev, c);
  HSR_CHECK(st);
  *gflops = t > 0 ? 2.0 * (double)m * n * k * reps / t / 1e9 : 0;
  return HSR_OK;
}
