/* The example MLP: layers, synthetic data, and the single-rank reference. */
#include "mlp.h"

#include <cblas.h>

#include "mlp_cuda.h"
#include "mlp_math.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- deterministic randomness: a counter-based hash, so any rank can
 * produce any sample of any step without shared state ---- */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(mix(a) ^ b) ^ c); }
static float normal(uint64_t h) {
  double u1 = ((mix(h) >> 11) + 1.0) / 9007199254740993.0, u2 = (mix(h ^ 0x5bd1e995ull) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void mlp_blas_threads(int n) { openblas_set_num_threads(n); }

int mlp_num_units(const mlp_cfg *c) { return c->layers + 1; }
int mlp_unit_params(const mlp_cfg *c, int unit) {
  (void)c;
  return unit == 0 ? MLP_ROOT_PARAMS : MLP_BLOCK_PARAMS;
}

void mlp_param_name(int unit, int k, char *buf, size_t len) {
  static const char *root[] = {"embed.w", "embed.b", "head.w", "head.b"};
  static const char *blk[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};
  if (unit == 0)
    snprintf(buf, len, "%s", root[k]);
  else
    snprintf(buf, len, "blk%d.%s", unit - 1, blk[k]);
}

int mlp_param_shape(const mlp_cfg *c, int unit, int k, int64_t shape[2], int *group) {
  int64_t d = c->dim, h = 4 * (int64_t)c->dim;
  int64_t rows, cols;
  if (unit == 0) {
    rows = k < 2 ? d : c->classes;
    cols = k < 2 ? c->in_dim : d;
  } else {
    rows = k < 2 ? h : d;
    cols = k < 2 ? d : h;
  }
  *group = k & 1; /* weights 0, biases 1 */
  if (k & 1) {
    shape[0] = rows;
    return 1;
  }
  shape[0] = rows;
  shape[1] = cols;
  return 2;
}

size_t mlp_param_numel(const mlp_cfg *c, int unit, int k) {
  int64_t s[2];
  int g, nd = mlp_param_shape(c, unit, k, s, &g);
  return nd == 1 ? (size_t)s[0] : (size_t)(s[0] * s[1]);
}

void mlp_param_init(const mlp_cfg *c, int unit, int k, float *out) {
  int64_t s[2];
  int g, nd = mlp_param_shape(c, unit, k, s, &g);
  size_t n = mlp_param_numel(c, unit, k);
  if (nd == 1) { /* small random biases so that no gradient is exactly zero by symmetry */
    for (size_t i = 0; i < n; i++) out[i] = 0.01f * normal(hash3(c->seed, (uint64_t)(unit * 8 + k), i));
    return;
  }
  float std = 1.0f / sqrtf((float)s[1]);
  if (unit > 0 && k == MLP_W2) std *= 0.5f; /* residual branch starts small */
  for (size_t i = 0; i < n; i++) out[i] = std * normal(hash3(c->seed, (uint64_t)(unit * 8 + k), i));
}

/* The teacher is a fixed random map: drawn once per generator, not per sample. */
struct mlp_gen {
  mlp_cfg c;
  float *teacher; /* classes x in_dim */
  double *th;     /* in_dim: tanh of the current sample */
};

void mlp_gen_free(mlp_gen *g) {
  if (!g) return;
  free(g->teacher), free(g->th);
  free(g);
}

hsr_status mlp_gen_create(const mlp_cfg *c, mlp_gen **out) {
  mlp_gen *g = calloc(1, sizeof *g);
  size_t in = (size_t)c->in_dim;
  if (g) g->teacher = malloc(((size_t)c->classes * in + 1) * sizeof(float)), g->th = malloc((in + 1) * sizeof(double));
  if (!g || !g->teacher || !g->th) {
    mlp_gen_free(g);
    return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  }
  g->c = *c;
  for (int k = 0; k < c->classes; k++)
    for (int j = 0; j < c->in_dim; j++)
      g->teacher[(size_t)k * in + j] = normal(hash3(c->seed ^ 0x7eac4e5ull, (uint64_t)k, (uint64_t)j));
  *out = g;
  return HSR_OK;
}

void mlp_gen_batch(mlp_gen *g, int64_t step, int64_t first, int n, float *x, int *y) {
  const mlp_cfg *c = &g->c;
  int in = c->in_dim;
  for (int s = 0; s < n; s++) {
    uint64_t sid = (uint64_t)(first + s);
    float *xs = x + (size_t)s * in;
    for (int j = 0; j < in; j++) {
      xs[j] = normal(hash3(c->seed ^ 0xda7aull, ((uint64_t)step << 32) ^ sid, (uint64_t)j));
      g->th[j] = tanh(xs[j]);
    }
    /* teacher: argmax of the fixed random linear map of tanh(x) */
    int best = 0;
    double bv = -1e300;
    for (int k = 0; k < c->classes; k++) {
      const float *tk = g->teacher + (size_t)k * in;
      double v = 0;
      for (int j = 0; j < in; j++) v += tk[j] * g->th[j];
      if (v > bv) bv = v, best = k;
    }
    y[s] = best;
  }
}

void mlp_data(const mlp_cfg *c, int64_t step, int64_t first, int n, float *x, int *y) {
  mlp_gen *g;
  if (mlp_gen_create(c, &g) != HSR_OK) { /* keep the contract: no outputs left unwritten */
    memset(x, 0, (size_t)n * c->in_dim * sizeof(float));
    memset(y, 0, (size_t)n * sizeof(int));
    return;
  }
  mlp_gen_batch(g, step, first, n, x, y);
  mlp_gen_free(g);
}

/* ---- layers ----
 * One code path for both kinds of device: GEMMs through hsr_kernels_gemm
 * (OpenBLAS / cuBLAS), bias, GELU and their backward through the layer
 * kernels of hsr/kernels.h (the kmath.h formulas, vectorised on the host),
 * the loss through mlp_math.h; everything queued on the work's stream. */
struct mlp_work {
  int n;
  hsr_device *dev; /* NULL: host, plain malloc */
  hsr_stream *s;
  int gpu;
  float *h;     /* (L+1) x n x d: input of each block, then the head input */
  float *a, *g; /* L x n x 4d: pre-activation and GELU output */
  float *logits, *dh, *dg, *tmp;
  double *rowloss; /* n: per-sample loss (device memory on GPU) */
  double *rowloss_h;
};

size_t mlp_work_bytes(const mlp_cfg *c, int n) {
  size_t d = (size_t)c->dim, h = 4 * d, L = (size_t)c->layers, nn = (size_t)n;
  size_t in = d > (size_t)c->in_dim ? d : (size_t)c->in_dim;
  return ((L + 1) * nn * d + 2 * (L ? L : 1) * nn * h + nn * (size_t)c->classes + nn * d + nn * h + nn * in) *
             sizeof(float) +
         nn * sizeof(double); /* per-row losses */
}

static void *wal(mlp_work *w, size_t bytes, hsr_status *st) {
  void *p = NULL;
  if (*st != HSR_OK) return NULL;
  if (w->dev)
    *st = hsr_device_alloc(w->dev, bytes ? bytes : 4, &p);
  else if (!(p = malloc(bytes ? bytes : 4)))
    *st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  return p;
}

static void wfree(mlp_work *w, void *p) {
  if (!p) return;
  if (w->dev)
    hsr_device_free(w->dev, p);
  else
    free(p);
}

hsr_status mlp_work_create_on(const mlp_cfg *c, int n, hsr_device *dev, hsr_stream *s, mlp_work **out) {
  mlp_work *w = calloc(1, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  size_t d = (size_t)c->dim, h = 4 * d, L = (size_t)c->layers, nn = (size_t)n;
  w->n = n;
  w->dev = dev;
  w->s = s;
  w->gpu = dev && hsr_device_kind_of(dev) != HSR_DEVICE_HOST; /* device memory: CUDA or sim */
  hsr_status st = HSR_OK;
  w->h = wal(w, (L + 1) * nn * d * sizeof(float), &st);
  w->a = wal(w, (L ? L : 1) * nn * h * sizeof(float), &st);
  w->g = wal(w, (L ? L : 1) * nn * h * sizeof(float), &st);
  w->logits = wal(w, nn * (size_t)c->classes * sizeof(float), &st);
  w->dh = wal(w, nn * d * sizeof(float), &st);
  w->dg = wal(w, nn * h * sizeof(float), &st);
  w->tmp = wal(w, nn * (d > (size_t)c->in_dim ? d : (size_t)c->in_dim) * sizeof(float), &st);
  w->rowloss = wal(w, nn * sizeof(double), &st);
  if (st == HSR_OK && !(w->rowloss_h = malloc((nn ? nn : 1) * sizeof(double))))
    st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (st != HSR_OK) {
    mlp_work_free(w);
    char why[512]; /* hsr_error writes the buffer hsr_last_error reads */
    snprintf(why, sizeof why, "%s", hsr_last_error());
    return hsr_error(st, "model: workspace for a micro-batch of %d: %s", n, why);
  }
  *out = w;
  return HSR_OK;
}

hsr_status mlp_work_create(const mlp_cfg *c, int n, mlp_work **out) {
  return mlp_work_create_on(c, n, NULL, NULL, out);
}

void mlp_work_free(mlp_work *w) {
  if (!w) return;
  wfree(w, w->h), wfree(w, w->a), wfree(w, w->g), wfree(w, w->logits), wfree(w, w->dh), wfree(w, w->dg);
  wfree(w, w->tmp), wfree(w, w->rowloss);
  free(w->rowloss_h);
  free(w);
}

/* The host device object for GEMMs on host work (no state, opened once per call site). */
static hsr_device *gemm_dev(mlp_work *w, hsr_device **host) {
  if (w->dev) return w->dev;
  if (!*host && hsr_device_open(HSR_DEVICE_HOST, 0, host) != HSR_OK) return NULL;
  return *host;
}

/* y (n x out) = x (n x in) W^T + b, or y += ... when acc */
static hsr_status linear_fwd(mlp_work *w, hsr_device *d, int n, int in, int out, const float *x, const float *W,
                             const float *b, float *y, int acc) {
  HSR_CHECK(hsr_kernels_gemm(d, w->s, 0, 1, (size_t)n, (size_t)out, (size_t)in, 1.0f, x, (size_t)in, W, (size_t)in,
                             acc ? 1.0f : 0.0f, y, (size_t)out));
  return hsr_kernels_bias_add(d, w->s, (size_t)n, (size_t)out, b, y);
}

/* dW += dy^T x, db += sum dy, dx = dy W (dx may be NULL) */
static hsr_status linear_bwd(mlp_work *w, hsr_device *d, int n, int in, int out, const float *x, const float *W,
                             const float *dy, float *dx, float *dW, float *db) {
  HSR_CHECK(hsr_kernels_gemm(d, w->s, 1, 0, (size_t)out, (size_t)in, (size_t)n, 1.0f, dy, (size_t)out, x, (size_t)in,
                             1.0f, dW, (size_t)in));
  HSR_CHECK(hsr_kernels_bias_bwd(d, w->s, (size_t)n, (size_t)out, dy, db));
  if (dx)
    HSR_CHECK(hsr_kernels_gemm(d, w->s, 0, 0, (size_t)n, (size_t)in, (size_t)out, 1.0f, dy, (size_t)out, W, (size_t)in,
                               0.0f, dx, (size_t)in));
  return HSR_OK;
}

/* The loss as a device kernel: the CUDA launch, or its CPU twin in stream
 * order on a sim device. */
typedef struct ce_args {
  int n, C;
  float *z;
  const int *y;
  double *rowloss;
} ce_args;
static void ce_host(const void *p) {
  const ce_args *a = p;
  for (int s = 0; s < a->n; s++) a->rowloss[s] = mlp_ce_row(a->z + (size_t)s * a->C, a->C, a->y[s], a->n);
}
static hsr_status ce_cuda(void *stream, const void *p) {
  const ce_args *a = p;
  return mlp_cuda_ce(stream, a->n, a->C, a->z, a->y, a->rowloss);
}
static const hsr_kernel_def ce_kernel = {"mlp softmax_ce", ce_host, ce_cuda};

static hsr_status fwd_bwd(const mlp_cfg *c, mlp_work *w, hsr_device *dv, const float *x, const int *y, int n,
                          const mlp_binder *b, double *loss) {
  int d = c->dim, h = 4 * d, L = c->layers, C = c->classes;
  size_t nd = (size_t)n * d, nh = (size_t)n * h;
  mlp_unit_ptrs root, p;
  HSR_CHECK(b->acquire(b->ctx, 0, 0, &root));
  HSR_CHECK(linear_fwd(w, dv, n, c->in_dim, d, x, root.w[MLP_EW], root.w[MLP_EB], w->h, 0));
  for (int l = 0; l < L; l++) {
    HSR_CHECK(b->acquire(b->ctx, l + 1, 0, &p));
    const float *hin = w->h + (size_t)l * nd;
    float *hout = w->h + (size_t)(l + 1) * nd, *a = w->a + (size_t)l * nh, *g = w->g + (size_t)l * nh;
    HSR_CHECK(linear_fwd(w, dv, n, d, h, hin, p.w[MLP_W1], p.w[MLP_B1], a, 0));
    HSR_CHECK(hsr_kernels_gelu(dv, w->s, nh, a, g));
    HSR_CHECK(hsr_device_copy(dv, hout, hin, nd * sizeof(float), w->s)); /* the residual */
    HSR_CHECK(linear_fwd(w, dv, n, h, d, g, p.w[MLP_W2], p.w[MLP_B2], hout, 1));
    HSR_CHECK(b->release(b->ctx, l + 1, 0));
  }
  const float *hl = w->h + (size_t)L * nd;
  HSR_CHECK(linear_fwd(w, dv, n, d, C, hl, root.w[MLP_HW], root.w[MLP_HB], w->logits, 0));
  /* softmax cross-entropy; logits become dlogits = (p - onehot) / n */
  if (w->gpu) {
    ce_args a = {n, C, w->logits, y, w->rowloss};
    hsr_access acc[] = {{y, (size_t)n * sizeof(int), 0},
                        {w->logits, (size_t)n * (size_t)C * sizeof(float), 1},
                        {w->rowloss, (size_t)n * sizeof(double), 1}};
    HSR_CHECK(hsr_kernels_launch(dv, w->s, &ce_kernel, &a, sizeof a, acc, 3));
  } else {
    for (int s = 0; s < n; s++) w->rowloss[s] = mlp_ce_row(w->logits + (size_t)s * C, C, y[s], n);
  }
  HSR_CHECK(b->release(b->ctx, 0, 0));

  HSR_CHECK(b->acquire(b->ctx, 0, 1, &root));
  HSR_CHECK(linear_bwd(w, dv, n, d, C, hl, root.w[MLP_HW], w->logits, w->dh, root.g[MLP_HW], root.g[MLP_HB]));
  for (int l = L - 1; l >= 0; l--) {
    HSR_CHECK(b->acquire(b->ctx, l + 1, 1, &p));
    const float *hin = w->h + (size_t)l * nd, *a = w->a + (size_t)l * nh, *g = w->g + (size_t)l * nh;
    /* dh flows through the residual unchanged; the branch adds to it */
    HSR_CHECK(linear_bwd(w, dv, n, h, d, g, p.w[MLP_W2], w->dh, w->dg, p.g[MLP_W2], p.g[MLP_B2]));
    HSR_CHECK(hsr_kernels_gelu_bwd(dv, w->s, nh, a, w->dg, w->dg));
    HSR_CHECK(linear_bwd(w, dv, n, d, h, hin, p.w[MLP_W1], w->dg, w->tmp, p.g[MLP_W1], p.g[MLP_B1]));
    HSR_CHECK(hsr_kernels_axpy(dv, w->s, nd, 1.0, w->tmp, w->dh, HSR_F32));
    HSR_CHECK(b->release(b->ctx, l + 1, 1));
  }
  HSR_CHECK(linear_bwd(w, dv, n, c->in_dim, d, x, root.w[MLP_EW], w->dh, NULL, root.g[MLP_EW], root.g[MLP_EB]));
  HSR_CHECK(b->release(b->ctx, 0, 1));
  const double *rl = w->rowloss;
  if (w->gpu) { /* the loss is the one value the host reads back per micro-batch */
    HSR_CHECK(hsr_stream_sync(w->s, MLP_SYNC_TIMEOUT_S));
    HSR_CHECK(hsr_device_copy(dv, w->rowloss_h, w->rowloss, (size_t)n * sizeof(double), w->s));
    rl = w->rowloss_h;
  }
  double total = 0;
  for (int s = 0; s < n; s++) total += rl[s];
  *loss = total / n;
  return HSR_OK;
}

hsr_status mlp_fwd_bwd(const mlp_cfg *c, mlp_work *w, const float *x, const int *y, int n, const mlp_binder *b,
                       double *loss) {
  if (n > w->n) return hsr_error(HSR_ERR_INVALID, "model: micro-batch %d exceeds the workspace (%d)", n, w->n);
  hsr_device *host = NULL, *dv = gemm_dev(w, &host);
  if (!dv) return HSR_ERR_INTERNAL; /* hsr_device_open said why */
  hsr_status st = fwd_bwd(c, w, dv, x, y, n, b, loss);
  hsr_device_close(host);
  return st;
}

/* ---- reference trainer ---- */
struct mlp_ref {
  mlp_cfg c;
  mlp_opt o;
  int batch, nunits;
  int64_t t;
  float **p, **g, **m, **v; /* per (unit, k): index unit*4+k */
  float *x;
  int *y;
  mlp_work *w;
  mlp_gen *gen;
};

static hsr_status ref_acquire(void *ctx, int unit, int backward, mlp_unit_ptrs *p) {
  mlp_ref *r = ctx;
  (void)backward;
  for (int k = 0; k < 4; k++) {
    p->w[k] = r->p[unit * 4 + k];
    p->g[k] = r->g[unit * 4 + k];
  }
  return HSR_OK;
}
static hsr_status ref_release(void *ctx, int unit, int backward) {
  (void)ctx, (void)unit, (void)backward;
  return HSR_OK;
}

void mlp_ref_free(mlp_ref *r) {
  if (!r) return;
  for (int i = 0; i < r->nunits * 4; i++) free(r->p[i]), free(r->g[i]), free(r->m[i]), free(r->v[i]);
  free(r->p), free(r->g), free(r->m), free(r->v), free(r->x), free(r->y);
  mlp_work_free(r->w);
  mlp_gen_free(r->gen);
  free(r);
}

hsr_status mlp_ref_create(const mlp_cfg *c, const mlp_opt *o, int batch, mlp_ref **out) {
  mlp_ref *r = calloc(1, sizeof *r);
  if (!r) return hsr_error(HSR_ERR_NOMEM, "reference: out of memory");
  r->c = *c;
  r->o = *o;
  r->batch = batch;
  r->nunits = mlp_num_units(c);
  int np = r->nunits * 4;
  r->p = calloc((size_t)np, sizeof(float *));
  r->g = calloc((size_t)np, sizeof(float *));
  r->m = calloc((size_t)np, sizeof(float *));
  r->v = calloc((size_t)np, sizeof(float *));
  r->x = malloc((size_t)batch * c->in_dim * sizeof(float));
  r->y = malloc((size_t)batch * sizeof(int));
  if (!r->p || !r->g || !r->m || !r->v || !r->x || !r->y) goto oom;
  for (int u = 0; u < r->nunits; u++)
    for (int k = 0; k < 4; k++) {
      size_t n = mlp_param_numel(c, u, k);
      int i = u * 4 + k;
      r->p[i] = malloc((n ? n : 1) * sizeof(float));
      r->g[i] = calloc(n ? n : 1, sizeof(float));
      r->m[i] = calloc(n ? n : 1, sizeof(float));
      r->v[i] = calloc(n ? n : 1, sizeof(float));
      if (!r->p[i] || !r->g[i] || !r->m[i] || !r->v[i]) goto oom;
      mlp_param_init(c, u, k, r->p[i]);
    }
  hsr_status st = mlp_work_create(c, batch, &r->w);
  if (st == HSR_OK) st = mlp_gen_create(c, &r->gen);
  if (st != HSR_OK) {
    mlp_ref_free(r);
    return st;
  }
  *out = r;
  return HSR_OK;
oom:
  mlp_ref_free(r);
  return hsr_error(HSR_ERR_NOMEM, "reference: out of memory");
}

hsr_status mlp_ref_step(mlp_ref *r, int64_t step, double *loss, double *grad_norm) {
  int64_t first = 0;
  return mlp_ref_step_ranges(r, step, 1, &first, &r->batch, loss, grad_norm);
}

hsr_status mlp_ref_step_ranges(mlp_ref *r, int64_t step, int nr, const int64_t *first, const int *count, double *loss,
                               double *grad_norm) {
  const mlp_cfg *c = &r->c;
  int n = 0;
  for (int i = 0; i < nr; i++) {
    if (count[i] < 0 || first[i] < 0 || first[i] + count[i] > r->batch || n + count[i] > r->batch)
      return hsr_error(HSR_ERR_INVALID, "reference: samples [%lld, +%d) are not in a batch of %d", (long long)first[i],
                       count[i], r->batch);
    mlp_gen_batch(r->gen, step, first[i], count[i], r->x + (size_t)n * c->in_dim, r->y + n);
    n += count[i];
  }
  for (int u = 0; u < r->nunits; u++)
    for (int k = 0; k < 4; k++) memset(r->g[u * 4 + k], 0, mlp_param_numel(c, u, k) * sizeof(float));
  mlp_binder b = {r, ref_acquire, ref_release};
  HSR_CHECK(mlp_fwd_bwd(c, r->w, r->x, r->y, n, &b, loss));
  double ss = 0;
  for (int u = 0; u < r->nunits; u++)
    for (int k = 0; k < 4; k++) {
      const float *g = r->g[u * 4 + k];
      for (size_t i = 0, n = mlp_param_numel(c, u, k); i < n; i++) ss += (double)g[i] * g[i];
    }
  double norm = sqrt(ss), coef = 1.0;
  if (r->o.clip > 0 && norm > r->o.clip) coef = r->o.clip / (norm + 1e-6);
  if (grad_norm) *grad_norm = norm;
  r->t++;
  double bc1 = 1.0 - pow(r->o.beta1, (double)r->t), bc2 = 1.0 - pow(r->o.beta2, (double)r->t);
  for (int u = 0; u < r->nunits; u++)
    for (int k = 0; k < 4; k++) {
      int i = u * 4 + k;
      float wd = (k & 1) ? 0.0f : r->o.weight_decay;
      float *p = r->p[i], *m = r->m[i], *v = r->v[i];
      const float *g = r->g[i];
      for (size_t j = 0, n = mlp_param_numel(c, u, k); j < n; j++) {
        float gj = (float)(g[j] * coef);
        m[j] = r->o.beta1 * m[j] + (1.0f - r->o.beta1) * gj;
        v[j] = r->o.beta2 * v[j] + (1.0f - r->o.beta2) * gj * gj;
        double mh = m[j] / bc1, vh = v[j] / bc2;
        p[j] = (float)(p[j] - r->o.lr * (wd * p[j] + mh / (sqrt(vh) + r->o.eps)));
      }
    }
  return HSR_OK;
}

const float *mlp_ref_param(const mlp_ref *r, int unit, int k) { return r->p[unit * 4 + k]; }
const float *mlp_ref_grad(const mlp_ref *r, int unit, int k) { return r->g[unit * 4 + k]; }
