/* The GPT example's data (byte windows of a text file) and its single-rank
 * reference trainer over plain arrays. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ex_rand.h"
#include "gpt.h"

/* ---- data ---- */
hsr_status gpt_data_wrap(const uint8_t *bytes, size_t len, int T, gpt_data *out) {
  memset(out, 0, sizeof *out);
  if (T < 1) return hsr_error(HSR_ERR_INVALID, "data: sequence length %d must be >= 1", T);
  size_t tail = len / 10;
  if (tail < (size_t)T + 1 && len >= 3 * ((size_t)T + 1)) tail = (size_t)T + 1;
  if (len < tail + (size_t)T + 1)
    return hsr_error(HSR_ERR_INVALID,
                     "data: %zu bytes cannot hold a training window of %d + 1 bytes beside the "
                     "held-out tail (%zu bytes); use a longer file or a shorter --seq",
                     len, T, tail);
  out->bytes = bytes;
  out->len = len;
  out->split = len - tail;
  return HSR_OK;
}

hsr_status gpt_data_open(const char *path, int T, gpt_data *out) {
  memset(out, 0, sizeof *out);
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "data: empty path");
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "cannot open data '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return hsr_error(HSR_ERR_IO, "data: '%s' is not a regular file", path);
  }
  size_t len = (size_t)st.st_size;
  void *m = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && m == MAP_FAILED) return hsr_error(HSR_ERR_IO, "data: cannot map '%s': %s", path, strerror(errno));
  hsr_status s = gpt_data_wrap(m, len, T, out);
  if (s != HSR_OK) {
    if (len) munmap(m, len);
    char why[512]; /* hsr_error writes the buffer hsr_last_error reads */
    snprintf(why, sizeof why, "%s", hsr_last_error());
    return hsr_error(s, "'%s': %s", path, why);
  }
  out->map = m;
  out->map_len = len;
  return HSR_OK;
}

void gpt_data_close(gpt_data *d) {
  if (d->map) munmap(d->map, d->map_len);
  memset(d, 0, sizeof *d);
}

static void window_at(const gpt_data *d, size_t pos, int T, int32_t *in, int32_t *tgt) {
  for (int t = 0; t < T; t++) {
    in[t] = d->bytes[pos + (size_t)t];
    tgt[t] = d->bytes[pos + (size_t)t + 1];
  }
}

void gpt_data_window(const gpt_data *d, uint64_t seed, int64_t g, int T, int32_t *in, int32_t *tgt) {
  size_t span = d->split - (size_t)T; /* positions whose T + 1 bytes lie in [0, split] */
  window_at(d, (size_t)(ex_hash3(seed ^ 0x6770747eull, (uint64_t)g, 0) % span), T, in, tgt);
}

int gpt_data_val_windows(const gpt_data *d, int T) {
  size_t n = (d->len - d->split - 1) / (size_t)T;
  return n > 0x7fffffff ? 0x7fffffff : (int)n;
}

void gpt_data_val_window(const gpt_data *d, int i, int T, int32_t *in, int32_t *tgt) {
  window_at(d, d->split + (size_t)i * (size_t)T, T, in, tgt);
}

/* ---- a binder over plain arrays ---- */
static hsr_status arr_acquire(void *ctx, int unit, int backward, const float **w, float **g) {
  gpt_arrays *a = ctx;
  for (int i = 0; i < gpt_num_params(a->c); i++)
    if (gpt_param_unit(a->c, i) == unit) {
      w[i] = a->w[i];
      g[i] = backward && a->g ? a->g[i] : NULL;
    }
  return HSR_OK;
}

static hsr_status arr_release(void *ctx, int unit, int backward) {
  (void)ctx, (void)unit, (void)backward;
  return HSR_OK;
}

gpt_binder gpt_arrays_binder(gpt_arrays *a) { return (gpt_binder){a, arr_acquire, arr_release, NULL}; }

/* ---- reference trainer ---- */
struct gpt_ref {
  gpt_cfg c;
  gpt_opt o;
  int batch, T, np;
  int64_t t;
  float **p, **g, **m, **v;
  int32_t *in, *tgt;
  gpt_work *w;
};

void gpt_ref_free(gpt_ref *r) {
  if (!r) return;
  for (int i = 0; i < r->np; i++) {
    if (r->p) free(r->p[i]);
    if (r->g) free(r->g[i]);
    if (r->m) free(r->m[i]);
    if (r->v) free(r->v[i]);
  }
  free(r->p), free(r->g), free(r->m), free(r->v), free(r->in), free(r->tgt);
  gpt_work_free(r->w);
  free(r);
}

hsr_status gpt_ref_create(const gpt_cfg *c, const gpt_opt *o, int batch, int T, gpt_ref **out) {
  gpt_ref *r = calloc(1, sizeof *r);
  if (!r) return hsr_error(HSR_ERR_NOMEM, "reference: out of memory");
  r->c = *c, r->o = *o, r->batch = batch, r->T = T, r->np = gpt_num_params(c);
  r->p = calloc((size_t)r->np, sizeof(float *));
  r->g = calloc((size_t)r->np, sizeof(float *));
  r->m = calloc((size_t)r->np, sizeof(float *));
  r->v = calloc((size_t)r->np, sizeof(float *));
  r->in = malloc((size_t)batch * T * sizeof(int32_t));
  r->tgt = malloc((size_t)batch * T * sizeof(int32_t));
  int ok = r->p && r->g && r->m && r->v && r->in && r->tgt;
  for (int i = 0; ok && i < r->np; i++) {
    size_t n = gpt_param_numel(c, i) + 1;
    r->p[i] = malloc(n * sizeof(float));
    r->g[i] = calloc(n, sizeof(float));
    r->m[i] = calloc(n, sizeof(float));
    r->v[i] = calloc(n, sizeof(float));
    ok = r->p[i] && r->g[i] && r->m[i] && r->v[i];
    if (ok) gpt_param_init(c, i, r->p[i]);
  }
  hsr_status st =
      ok ? gpt_work_create(c, batch, T, NULL, NULL, &r->w) : hsr_error(HSR_ERR_NOMEM, "reference: out of memory");
  if (st != HSR_OK) {
    gpt_ref_free(r);
    return st;
  }
  *out = r;
  return HSR_OK;
}

float *gpt_ref_param(gpt_ref *r, int i) { return r->p[i]; }

hsr_status gpt_ref_step(gpt_ref *r, const gpt_data *d, uint64_t data_seed, int64_t g0, float lr, double *loss,
                        double *grad_norm) {
  const gpt_cfg *c = &r->c;
  for (int i = 0; i < r->np; i++) memset(r->g[i], 0, gpt_param_numel(c, i) * sizeof(float));
  for (int s = 0; s < r->batch; s++)
    gpt_data_window(d, data_seed, g0 + s, r->T, r->in + (size_t)s * r->T, r->tgt + (size_t)s * r->T);
  gpt_arrays a = {c, r->p, r->g};
  gpt_binder b = gpt_arrays_binder(&a);
  HSR_CHECK(gpt_fwd_bwd(c, r->w, r->in, r->tgt, r->batch, r->T, &b, loss));
  double ss = 0;
  for (int i = 0; i < r->np; i++)
    for (size_t j = 0, n = gpt_param_numel(c, i); j < n; j++) ss += (double)r->g[i][j] * r->g[i][j];
  double norm = sqrt(ss), coef = 1.0;
  if (r->o.clip > 0 && norm > r->o.clip) coef = r->o.clip / (norm + 1e-6);
  if (grad_norm) *grad_norm = norm;
  r->t++;
  double bc1 = 1.0 - pow(r->o.beta1, (double)r->t), bc2 = 1.0 - pow(r->o.beta2, (double)r->t);
  for (int i = 0; i < r->np; i++) {
    int64_t s[2];
    int grp;
    gpt_param_shape(c, i, s, &grp);
    float wd = grp ? 0.0f : r->o.weight_decay, *p = r->p[i], *m = r->m[i], *v = r->v[i];
    const float *g = r->g[i];
    for (size_t j = 0, n = gpt_param_numel(c, i); j < n; j++) {
      float gj = (float)(g[j] * coef);
      m[j] = r->o.beta1 * m[j] + (1.0f - r->o.beta1) * gj;
      v[j] = r->o.beta2 * v[j] + (1.0f - r->o.beta2) * gj * gj;
      double mh = m[j] / bc1, vh = v[j] / bc2;
      p[j] = (float)(p[j] - lr * (wd * p[j] + mh / (sqrt(vh) + r->o.eps)));
    }
  }
  return HSR_OK;
}
