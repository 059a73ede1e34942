/* The GPT example model: parameters, activations, forward and backward. */
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex_rand.h"
#include "llama.h"

hsr_status gpt_cfg_check(const gpt_cfg *c) {
  if (c->n_layer < 0 || c->n_layer > GPT_MAX_LAYERS)
    return hsr_error(HSR_ERR_INVALID, "model: %d layers (valid: 0 to %d)", c->n_layer, GPT_MAX_LAYERS);
  if (c->n_head < 1 || c->n_embd < 1 || c->n_embd % c->n_head)
    return hsr_error(HSR_ERR_INVALID,
                     "model: width %d with %d heads: the width must be a positive multiple of the heads", c->n_embd,
                     c->n_head);
  if (c->n_ctx < 1 || c->vocab < 1)
    return hsr_error(HSR_ERR_INVALID, "model: context %d and vocabulary %d must be >= 1", c->n_ctx, c->vocab);
  if ((double)c->n_embd * c->n_embd * 4 > 2e9 || (double)c->vocab * c->n_embd > 2e9 ||
      (double)c->n_ctx * c->n_embd > 2e9)
    return hsr_error(HSR_ERR_INVALID, "model: width %d, vocabulary %d, context %d: a tensor would exceed 2^31 elements",
                     c->n_embd, c->vocab, c->n_ctx);
  if (c->arch == GPT_ARCH_LLAMA) return llama_cfg_check(c);
  if (c->arch != GPT_ARCH_GPT2)
    return hsr_error(HSR_ERR_INVALID, "model: architecture %d (valid: gpt 0, llama 1)", c->arch);
  return HSR_OK;
}

int gpt_num_params(const gpt_cfg *c) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_num_params(c);
  return GPT_ROOT_PARAMS + GPT_BLOCK_PARAMS * c->n_layer;
}

void gpt_param_name(const gpt_cfg *c, int i, char *buf, size_t len) {
  static const char *root[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
  static const char *blk[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                              "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                              "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  if (c->arch == GPT_ARCH_LLAMA) {
    llama_param_name(c, i, buf, len);
    return;
  }
  if (i < GPT_ROOT_PARAMS)
    snprintf(buf, len, "%s", root[i]);
  else
    snprintf(buf, len, "h.%d.%s", (i - GPT_ROOT_PARAMS) / GPT_BLOCK_PARAMS,
             blk[(i - GPT_ROOT_PARAMS) % GPT_BLOCK_PARAMS]);
}

int gpt_param_shape(const gpt_cfg *c, int i, int64_t shape[2], int *group) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_param_shape(c, i, shape, group);
  int64_t C = c->n_embd;
  if (i < GPT_ROOT_PARAMS) {
    *group = i < GPT_LNF_W ? 0 : 1;
    if (i == GPT_WTE) shape[0] = c->vocab, shape[1] = C;
    if (i == GPT_WPE) shape[0] = c->n_ctx, shape[1] = C;
    if (i >= GPT_LNF_W) shape[0] = C;
    return i < GPT_LNF_W ? 2 : 1;
  }
  /* [in, out] weights, GPT-2's Conv1D layout */
  static const int64_t in_m[] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0}, out_m[] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
  int k = (i - GPT_ROOT_PARAMS) % GPT_BLOCK_PARAMS;
  *group = in_m[k] ? 0 : 1;
  if (in_m[k]) {
    shape[0] = in_m[k] * C;
    shape[1] = out_m[k] * C;
    return 2;
  }
  shape[0] = out_m[k] * C;
  return 1;
}

size_t gpt_param_numel(const gpt_cfg *c, int i) {
  int64_t s[2] = {0, 0};
  int g, nd = gpt_param_shape(c, i, s, &g);
  return nd == 1 ? (size_t)s[0] : (size_t)(s[0] * s[1]);
}

size_t gpt_num_weights(const gpt_cfg *c) {
  size_t n = 0;
  for (int i = 0; i < gpt_num_params(c); i++) n += gpt_param_numel(c, i);
  return n;
}

void gpt_param_init(const gpt_cfg *c, int i, float *out) {
  if (c->arch == GPT_ARCH_LLAMA) {
    llama_param_init(c, i, out);
    return;
  }
  size_t n = gpt_param_numel(c, i);
  int64_t s[2] = {0, 0};
  int g, nd = gpt_param_shape(c, i, s, &g);
  int k = i < GPT_ROOT_PARAMS ? -1 : (i - GPT_ROOT_PARAMS) % GPT_BLOCK_PARAMS;
  if (nd == 1) { /* LayerNorm weights 1, every bias and LayerNorm bias 0 */
    float v = (i == GPT_LNF_W || k == GPT_LN1_W || k == GPT_LN2_W) ? 1.0f : 0.0f;
    for (size_t j = 0; j < n; j++) out[j] = v;
    return;
  }
  float std = 0.02f;
  if (k == GPT_APROJ_W || k == GPT_MPROJ_W) std /= sqrtf(2.0f * (float)(c->n_layer > 0 ? c->n_layer : 1));
  for (size_t j = 0; j < n; j++) out[j] = std * ex_normal(ex_hash3(c->seed, (uint64_t)i, j));
}

int gpt_num_units(const gpt_cfg *c) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_num_units(c);
  return 1 + (c->wrap_linear ? 4 : 1) * c->n_layer;
}

/* piece of a block parameter: 0 ln_1 + c_attn, 1 attn.c_proj, 2 ln_2 + c_fc, 3 mlp.c_proj */
static int piece_of(int k) { return k < GPT_APROJ_W ? 0 : k < GPT_LN2_W ? 1 : k < GPT_MPROJ_W ? 2 : 3; }
static int unit_of(const gpt_cfg *c, int l, int piece) { return c->wrap_linear ? 1 + 4 * l + piece : 1 + l; }

int gpt_param_unit(const gpt_cfg *c, int i) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_param_unit(c, i);
  if (i < GPT_ROOT_PARAMS) return 0;
  int l = (i - GPT_ROOT_PARAMS) / GPT_BLOCK_PARAMS, k = (i - GPT_ROOT_PARAMS) % GPT_BLOCK_PARAMS;
  return unit_of(c, l, piece_of(k));
}

void gpt_unit_name(const gpt_cfg *c, int u, char *buf, size_t len) {
  static const char *pieces[] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
  if (c->arch == GPT_ARCH_LLAMA)
    llama_unit_name(c, u, buf, len);
  else if (u == 0)
    snprintf(buf, len, "root");
  else if (c->wrap_linear)
    snprintf(buf, len, "h.%d.%s", (u - 1) / 4, pieces[(u - 1) % 4]);
  else
    snprintf(buf, len, "h.%d", u - 1);
}

double gpt_flops_per_token(const gpt_cfg *c, int T) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_flops_per_token(c, T);
  double C = c->n_embd, fwd = c->n_layer * (24.0 * C * C + 4.0 * T * C) + 2.0 * C * c->vocab;
  return 3.0 * fwd;
}

/* ---- activations ---- */
struct gpt_work {
  llama_work *ll; /* a llama configuration's activations: everything else unused */
  int B, T, L, C, H, V, np;
  hsr_device *dev, *host; /* dev: the caller's (NULL: host); host: opened here for host GEMMs */
  hsr_stream *s;
  int gpu;
  /* kept for the backward, per layer */
  float *res;                           /* (L+1) x N x C: block inputs, then the final stream */
  float *ln1, *ln1m, *ln1r, *qkv, *att; /* L x: N C, N, N, 3 N C, B H T T */
  float *atty, *mid, *ln2, *ln2m, *ln2r, *fch, *fchg;
  float *lnf, *lnfm, *lnfr, *logits;
  /* backward scratch */
  float *dres, *dln, *dqkv, *datty, *dfch, *datt;
  double *rowloss, *rowloss_h;
  const float **wp; /* the binder's pointers, per parameter */
  float **gp;
  uint64_t prof[GPT_T_COUNT]; /* ns per category since the last read */
};

/* elements of each buffer for capacity B x T */
typedef struct sizes {
  size_t nc, n, att, res, qkv, fc, logits, datt;
} sizes;

static sizes sizes_of(const gpt_cfg *c, int B, int T) {
  size_t N = (size_t)B * T, C = (size_t)c->n_embd, L = (size_t)c->n_layer;
  sizes z = {N * C,     N,         (size_t)B * c->n_head * T * T, (L + 1) * N * C,
             3 * N * C, 4 * N * C, N * (size_t)c->vocab,          (size_t)c->n_head * T * T};
  return z;
}

size_t gpt_work_bytes(const gpt_cfg *c, int B, int T) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_work_bytes(c, B, T);
  sizes z = sizes_of(c, B, T);
  size_t L = (size_t)c->n_layer;
  size_t kept =
      z.res + L * (2 * z.nc + 2 * z.n + z.qkv + z.att + z.nc + z.nc + 2 * z.n + 2 * z.fc) + z.nc + 2 * z.n + z.logits;
  size_t scratch = 2 * z.nc + z.qkv + z.nc + z.fc + z.datt;
  return (kept + scratch) * sizeof(float) + z.n * sizeof(double);
}

static float *walloc(gpt_work *w, size_t n, hsr_status *st) {
  void *p = NULL;
  if (*st != HSR_OK) return NULL;
  *st = hsr_device_alloc(w->dev ? w->dev : w->host, (n ? n : 1) * sizeof(float), &p);
  return p;
}

void gpt_work_free(gpt_work *w) {
  if (!w) return;
  llama_work_free(w->ll);
  hsr_device *d = w->dev ? w->dev : w->host;
  float **bufs[] = {&w->res,    &w->ln1,  &w->ln1m, &w->ln1r, &w->qkv,   &w->att,  &w->atty, &w->mid,
                    &w->ln2,    &w->ln2m, &w->ln2r, &w->fch,  &w->fchg,  &w->lnf,  &w->lnfm, &w->lnfr,
                    &w->logits, &w->dres, &w->dln,  &w->dqkv, &w->datty, &w->dfch, &w->datt};
  if (d) {
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hsr_device_free(d, *bufs[i]);
    hsr_device_free(d, w->rowloss);
  }
  if (w->gpu) free(w->rowloss_h);
  free(w->wp);
  free(w->gp);
  hsr_device_close(w->host);
  free(w);
}

hsr_status gpt_work_create(const gpt_cfg *c, int B, int T, hsr_device *dev, hsr_stream *s, gpt_work **out) {
  HSR_CHECK(gpt_cfg_check(c));
  if (B < 1 || T < 1 || T > c->n_ctx)
    return hsr_error(HSR_ERR_INVALID, "model: %d sequences of %d tokens (valid: >= 1 sequence, 1 to %d tokens)", B, T,
                     c->n_ctx);
  gpt_work *w = calloc(1, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (c->arch == GPT_ARCH_LLAMA) {
    hsr_status lst = llama_work_create(c, B, T, dev, s, &w->ll);
    if (lst == HSR_OK) {
      *out = w;
      return HSR_OK;
    }
    char why[512];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    free(w);
    return hsr_error(lst, "model: activations of %d x %d tokens (%.1f MiB): %s", B, T,
                     (double)gpt_work_bytes(c, B, T) / (1 << 20), why);
  }
  w->B = B, w->T = T, w->L = c->n_layer, w->C = c->n_embd, w->H = c->n_head, w->V = c->vocab, w->np = gpt_num_params(c);
  w->s = s;
  w->gpu = dev && hsr_device_kind_of(dev) != HSR_DEVICE_HOST;
  w->dev = w->gpu ? dev : NULL;
  hsr_status st = w->gpu ? HSR_OK : hsr_device_open(HSR_DEVICE_HOST, 0, &w->host);
  sizes z = sizes_of(c, B, T);
  size_t L = (size_t)w->L;
  w->res = walloc(w, z.res, &st);
  w->ln1 = walloc(w, L * z.nc, &st), w->ln1m = walloc(w, L * z.n, &st), w->ln1r = walloc(w, L * z.n, &st);
  w->qkv = walloc(w, L * z.qkv, &st), w->att = walloc(w, L * z.att, &st), w->atty = walloc(w, L * z.nc, &st);
  w->mid = walloc(w, L * z.nc, &st), w->ln2 = walloc(w, L * z.nc, &st);
  w->ln2m = walloc(w, L * z.n, &st), w->ln2r = walloc(w, L * z.n, &st);
  w->fch = walloc(w, L * z.fc, &st), w->fchg = walloc(w, L * z.fc, &st);
  w->lnf = walloc(w, z.nc, &st), w->lnfm = walloc(w, z.n, &st), w->lnfr = walloc(w, z.n, &st);
  w->logits = walloc(w, z.logits, &st);
  w->dres = walloc(w, z.nc, &st), w->dln = walloc(w, z.nc, &st), w->dqkv = walloc(w, z.qkv, &st);
  w->datty = walloc(w, z.nc, &st), w->dfch = walloc(w, z.fc, &st), w->datt = walloc(w, z.datt, &st);
  if (st == HSR_OK) st = hsr_device_alloc(w->dev ? w->dev : w->host, z.n * sizeof(double), (void **)&w->rowloss);
  if (st == HSR_OK && w->gpu && !(w->rowloss_h = malloc(z.n * sizeof(double))))
    st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (st == HSR_OK && !w->gpu) w->rowloss_h = w->rowloss;
  w->wp = calloc((size_t)w->np, sizeof *w->wp);
  w->gp = calloc((size_t)w->np, sizeof *w->gp);
  if (st == HSR_OK && (!w->wp || !w->gp)) st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (st != HSR_OK) {
    char why[512]; /* hsr_error writes the buffer hsr_last_error reads */
    snprintf(why, sizeof why, "%s", hsr_last_error());
    gpt_work_free(w);
    return hsr_error(st, "model: activations of %d x %d tokens (%.1f MiB): %s", B, T,
                     (double)gpt_work_bytes(c, B, T) / (1 << 20), why);
  }
  *out = w;
  return HSR_OK;
}

void gpt_work_timing(gpt_work *w, double seconds[GPT_T_COUNT], int reset) {
  if (w->ll) {
    llama_work_timing(w->ll, seconds, reset);
    return;
  }
  for (int i = 0; i < GPT_T_COUNT; i++) {
    seconds[i] = (double)w->prof[i] * 1e-9;
    if (reset) w->prof[i] = 0;
  }
}

const double *gpt_row_loss(const gpt_work *w) { return w->ll ? llama_row_loss(w->ll) : w->rowloss_h; }
const float *gpt_logits(const gpt_work *w) { return w->ll ? llama_logits(w->ll) : w->logits; }

/* ---- layers: every call on the work's stream ---- */
typedef struct pass {
  const gpt_cfg *c;
  gpt_work *w;
  hsr_device *d;
  const gpt_binder *b;
  int B, T, N, C, H, V;
} pass;

#define DEV(p) (p)->d, (p)->w->s

/* Where the model's time goes (host: the calls are synchronous). */
#define TIMED(p, cat, expr)                    \
  do {                                         \
    uint64_t t0_ = hsr_clock_ns();             \
    hsr_status s_ = (expr);                    \
    (p)->w->prof[cat] += hsr_clock_ns() - t0_; \
    if (s_ != HSR_OK) return s_;               \
  } while (0)

/* y (N x out) = x (N x in) W (in x out) + bias, or y += ... when acc */
static hsr_status linear(const pass *p, size_t in, size_t out, const float *x, const float *W, const float *bias,
                         float *y, int acc) {
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 0, 0, (size_t)p->N, out, in, 1.0f, x, in, W, out, acc ? 1.0f : 0.0f, y, out));
  TIMED(p, GPT_T_OTHER, hsr_kernels_bias_add(DEV(p), (size_t)p->N, out, bias, y));
  return HSR_OK;
}

/* dW += x^T dy, db += column sums of dy, dx = dy W^T */
static hsr_status linear_bwd(const pass *p, size_t in, size_t out, const float *x, const float *W, const float *dy,
                             float *dx, float *dW, float *db) {
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 1, 0, in, out, (size_t)p->N, 1.0f, x, in, dy, out, 1.0f, dW, out));
  TIMED(p, GPT_T_OTHER, hsr_kernels_bias_bwd(DEV(p), (size_t)p->N, out, dy, db));
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 0, 1, (size_t)p->N, in, out, 1.0f, dy, out, W, out, 0.0f, dx, in));
  return HSR_OK;
}

/* Queries in blocks of ATT_BLOCK rows: block [q0, q1) needs keys [0, q1)
 * only, so the GEMMs skip most of the masked upper triangle (at T = 128,
 * 3/4 of the full T x T work; the skipped entries stay 0 after the softmax). */
#define ATT_BLOCK 64

hsr_status gpt_attention(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv, float *att,
                         float *y) {
  size_t t = (size_t)T, c = (size_t)C, hs = (size_t)(C / H), h = (size_t)H, tt = t * t;
  for (int b = 0; b < B; b++) {
    const float *q = qkv + (size_t)b * t * 3 * c;
    float *a = att + (size_t)b * h * tt;
    for (size_t q0 = 0; q0 < t; q0 += ATT_BLOCK) {
      size_t q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 1, q1 - q0, q1, hs, 1.0f, q + q0 * 3 * c, 3 * c, hs, q + c, 3 * c, hs,
                                         0.0f, a + q0 * t, t, tt, h));
    }
  }
  HSR_CHECK(hsr_kernels_softmax_causal(d, s, (size_t)B * h * t, t, 1.0f / sqrtf((float)hs), att, att));
  for (int b = 0; b < B; b++) {
    const float *q = qkv + (size_t)b * t * 3 * c, *a = att + (size_t)b * h * tt;
    for (size_t q0 = 0; q0 < t; q0 += ATT_BLOCK) {
      size_t q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 0, q1 - q0, hs, q1, 1.0f, a + q0 * t, t, tt, q + 2 * c, 3 * c, hs,
                                         0.0f, y + ((size_t)b * t + q0) * c, c, hs, h));
    }
  }
  return HSR_OK;
}

hsr_status gpt_attention_bwd(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv,
                             const float *att, const float *dy, float *dqkv, float *scratch) {
  size_t t = (size_t)T, c = (size_t)C, hs = (size_t)(C / H), h = (size_t)H, tt = t * t;
  size_t nblk = (t + ATT_BLOCK - 1) / ATT_BLOCK; /* run last first: it covers every key, so it sets dV, dK */
  float *dp = scratch;
  for (int b = 0; b < B; b++) {
    const float *q = qkv + (size_t)b * t * 3 * c, *a = att + (size_t)b * h * tt, *g = dy + (size_t)b * t * c;
    float *dq = dqkv + (size_t)b * t * 3 * c;
    /* dP = dY V^T, dV = P^T dY (summed over the query blocks) */
    for (size_t k = nblk; k-- > 0;) {
      size_t q0 = k * ATT_BLOCK, q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
      float acc = k + 1 == nblk ? 0.0f : 1.0f;
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 1, q1 - q0, q1, hs, 1.0f, g + q0 * c, c, hs, q + 2 * c, 3 * c, hs,
                                         0.0f, dp + q0 * t, t, tt, h));
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 1, 0, q1, hs, q1 - q0, 1.0f, a + q0 * t, t, tt, g + q0 * c, c, hs, acc,
                                         dq + 2 * c, 3 * c, hs, h));
    }
    /* dS = softmax'(dP); dQ = dS K; dK = dS^T Q (summed over the query blocks) */
    HSR_CHECK(hsr_kernels_softmax_causal_bwd(d, s, h * t, t, 1.0f / sqrtf((float)hs), a, dp, dp));
    for (size_t k = nblk; k-- > 0;) {
      size_t q0 = k * ATT_BLOCK, q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
      float acc = k + 1 == nblk ? 0.0f : 1.0f;
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 0, q1 - q0, hs, q1, 1.0f, dp + q0 * t, t, tt, q + c, 3 * c, hs, 0.0f,
                                         dq + q0 * 3 * c, 3 * c, hs, h));
      HSR_CHECK(hsr_kernels_gemm_batched(d, s, 1, 0, q1, hs, q1 - q0, 1.0f, dp + q0 * t, t, tt, q + q0 * 3 * c, 3 * c,
                                         hs, acc, dq + c, 3 * c, hs, h));
    }
  }
  return HSR_OK;
}

/* Windows of the pieces of block l: block wrap opens the block's unit at the
 * first piece (forward 0, backward 3) and closes it after the last. */
static hsr_status piece_open(const pass *p, int l, int piece, int bwd) {
  if (!p->c->wrap_linear && piece != (bwd ? 3 : 0)) return HSR_OK;
  return p->b->acquire(p->b->ctx, unit_of(p->c, l, piece), bwd, p->w->wp, p->w->gp);
}
/* The pointers of a closed unit are cleared: a use outside its window
 * crashes in the tests instead of reading stale weights. */
static hsr_status release(const pass *p, int unit, int bwd) {
  for (int i = 0; i < p->w->np; i++)
    if (gpt_param_unit(p->c, i) == unit) p->w->wp[i] = NULL, p->w->gp[i] = NULL;
  return p->b->release(p->b->ctx, unit, bwd);
}
static hsr_status piece_close(const pass *p, int l, int piece, int bwd) {
  if (!p->c->wrap_linear && piece != (bwd ? 0 : 3)) return HSR_OK;
  return release(p, unit_of(p->c, l, piece), bwd);
}

#define LAYER(buf, l, n) ((buf) + (size_t)(l) * (n))

static hsr_status block_fwd(const pass *p, int l) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, nc = N * C;
  const float **W = w->wp;
  const float *x = LAYER(w->res, l, nc);
  float *ln1 = LAYER(w->ln1, l, nc), *qkv = LAYER(w->qkv, l, 3 * nc),
        *att = LAYER(w->att, l, (size_t)p->B * p->H * p->T * p->T);
  float *atty = LAYER(w->atty, l, nc), *mid = LAYER(w->mid, l, nc), *ln2 = LAYER(w->ln2, l, nc);
  float *fch = LAYER(w->fch, l, 4 * nc), *fchg = LAYER(w->fchg, l, 4 * nc), *out = LAYER(w->res, l + 1, nc);
  HSR_CHECK(piece_open(p, l, 0, 0));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, x, W[GPT_PARAM(l, GPT_LN1_W)], W[GPT_PARAM(l, GPT_LN1_B)], GPT_LN_EPS, ln1,
                              LAYER(w->ln1m, l, N), LAYER(w->ln1r, l, N)));
  HSR_CHECK(linear(p, C, 3 * C, ln1, W[GPT_PARAM(l, GPT_ATTN_W)], W[GPT_PARAM(l, GPT_ATTN_B)], qkv, 0));
  HSR_CHECK(piece_close(p, l, 0, 0));
  TIMED(p, GPT_T_ATTN, gpt_attention(DEV(p), p->B, p->T, p->C, p->H, qkv, att, atty));
  HSR_CHECK(piece_open(p, l, 1, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, mid, x, nc * sizeof(float), w->s)); /* the residual */
  HSR_CHECK(linear(p, C, C, atty, W[GPT_PARAM(l, GPT_APROJ_W)], W[GPT_PARAM(l, GPT_APROJ_B)], mid, 1));
  HSR_CHECK(piece_close(p, l, 1, 0));
  HSR_CHECK(piece_open(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, mid, W[GPT_PARAM(l, GPT_LN2_W)], W[GPT_PARAM(l, GPT_LN2_B)], GPT_LN_EPS,
                              ln2, LAYER(w->ln2m, l, N), LAYER(w->ln2r, l, N)));
  HSR_CHECK(linear(p, C, 4 * C, ln2, W[GPT_PARAM(l, GPT_FC_W)], W[GPT_PARAM(l, GPT_FC_B)], fch, 0));
  HSR_CHECK(piece_close(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER, hsr_kernels_gelu(DEV(p), 4 * nc, fch, fchg));
  HSR_CHECK(piece_open(p, l, 3, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, out, mid, nc * sizeof(float), w->s));
  HSR_CHECK(linear(p, 4 * C, C, fchg, W[GPT_PARAM(l, GPT_MPROJ_W)], W[GPT_PARAM(l, GPT_MPROJ_B)], out, 1));
  return piece_close(p, l, 3, 0);
}

/* w->dres holds d(output of block l) and becomes d(input of block l) */
static hsr_status block_bwd(const pass *p, int l) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, nc = N * C;
  const float **W = w->wp;
  float **G = w->gp;
  const float *x = LAYER(w->res, l, nc), *ln1 = LAYER(w->ln1, l, nc), *qkv = LAYER(w->qkv, l, 3 * nc);
  const float *att = LAYER(w->att, l, (size_t)p->B * p->H * p->T * p->T), *atty = LAYER(w->atty, l, nc);
  const float *mid = LAYER(w->mid, l, nc), *ln2 = LAYER(w->ln2, l, nc), *fch = LAYER(w->fch, l, 4 * nc);
  const float *fchg = LAYER(w->fchg, l, 4 * nc);
#define PW(k) W[GPT_PARAM(l, k)]
#define PG(k) G[GPT_PARAM(l, k)]
  HSR_CHECK(piece_open(p, l, 3, 1));
  HSR_CHECK(linear_bwd(p, 4 * C, C, fchg, PW(GPT_MPROJ_W), w->dres, w->dfch, PG(GPT_MPROJ_W), PG(GPT_MPROJ_B)));
  HSR_CHECK(piece_close(p, l, 3, 1));
  TIMED(p, GPT_T_OTHER, hsr_kernels_gelu_bwd(DEV(p), 4 * nc, fch, w->dfch, w->dfch));
  HSR_CHECK(piece_open(p, l, 2, 1));
  HSR_CHECK(linear_bwd(p, C, 4 * C, ln2, PW(GPT_FC_W), w->dfch, w->dln, PG(GPT_FC_W), PG(GPT_FC_B)));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm_bwd(DEV(p), N, C, w->dln, mid, PW(GPT_LN2_W), LAYER(w->ln2m, l, N), LAYER(w->ln2r, l, N),
                                  w->dres, PG(GPT_LN2_W), PG(GPT_LN2_B)));
  HSR_CHECK(piece_close(p, l, 2, 1));
  HSR_CHECK(piece_open(p, l, 1, 1));
  HSR_CHECK(linear_bwd(p, C, C, atty, PW(GPT_APROJ_W), w->dres, w->datty, PG(GPT_APROJ_W), PG(GPT_APROJ_B)));
  HSR_CHECK(piece_close(p, l, 1, 1));
  TIMED(p, GPT_T_ATTN, gpt_attention_bwd(DEV(p), p->B, p->T, p->C, p->H, qkv, att, w->datty, w->dqkv, w->datt));
  HSR_CHECK(piece_open(p, l, 0, 1));
  HSR_CHECK(linear_bwd(p, C, 3 * C, ln1, PW(GPT_ATTN_W), w->dqkv, w->dln, PG(GPT_ATTN_W), PG(GPT_ATTN_B)));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm_bwd(DEV(p), N, C, w->dln, x, PW(GPT_LN1_W), LAYER(w->ln1m, l, N), LAYER(w->ln1r, l, N),
                                  w->dres, PG(GPT_LN1_W), PG(GPT_LN1_B)));
#undef PW
#undef PG
  return piece_close(p, l, 0, 1);
}

static hsr_status pass_init(pass *p, const gpt_cfg *c, gpt_work *w, int B, int T, const gpt_binder *b) {
  if (!!w->ll != (c->arch == GPT_ARCH_LLAMA))
    return hsr_error(HSR_ERR_INVALID, "model: workspace made for another architecture");
  if (B < 1 || B > w->B || T < 1 || T > w->T || (size_t)B * T > (size_t)w->B * w->T)
    return hsr_error(HSR_ERR_INVALID, "model: %d x %d tokens exceed the workspace (%d x %d)", B, T, w->B, w->T);
  if (c->n_layer != w->L || c->n_embd != w->C || c->n_head != w->H || c->vocab != w->V)
    return hsr_error(HSR_ERR_INVALID, "model: workspace made for another configuration");
  *p = (pass){c, w, w->gpu ? w->dev : w->host, b, B, T, B * T, c->n_embd, c->n_head, c->vocab};
  return HSR_OK;
}

/* Embedding, blocks, final LayerNorm, tied head, loss; the root stays open
 * when the backward follows (keep). */
static hsr_status forward(const pass *p, const int32_t *tok, const int32_t *tgt, int keep, double *loss) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, V = (size_t)p->V;
  HSR_CHECK(p->b->acquire(p->b->ctx, 0, 0, w->wp, w->gp));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_embed(DEV(p), (size_t)p->B, (size_t)p->T, C, V, tok, w->wp[GPT_WTE], w->wp[GPT_WPE], w->res));
  for (int l = 0; l < p->c->n_layer; l++) HSR_CHECK(block_fwd(p, l));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, LAYER(w->res, p->c->n_layer, N * C), w->wp[GPT_LNF_W], w->wp[GPT_LNF_B],
                              GPT_LN_EPS, w->lnf, w->lnfm, w->lnfr));
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 0, 1, N, V, C, 1.0f, w->lnf, C, w->wp[GPT_WTE], C, 0.0f, w->logits, V));
  if (tgt) TIMED(p, GPT_T_OTHER, hsr_kernels_xent(DEV(p), N, V, w->logits, tgt, 1.0f / (float)N, w->rowloss));
  if (!keep) HSR_CHECK(release(p, 0, 0));
  if (!tgt) return HSR_OK;
  if (w->gpu) { /* the loss is the one value read back per micro-batch */
    TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, w->rowloss_h, w->rowloss, N * sizeof(double), w->s));
    HSR_CHECK(hsr_stream_sync(w->s, GPT_SYNC_TIMEOUT_S));
  }
  double sum = 0;
  for (size_t i = 0; i < N; i++) sum += w->rowloss_h[i];
  *loss = sum / (double)N;
  return HSR_OK;
}

static hsr_status backward(const pass *p, const int32_t *tok) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, V = (size_t)p->V;
  HSR_CHECK(release(p, 0, 0));
  HSR_CHECK(p->b->acquire(p->b->ctx, 0, 1, w->wp, w->gp));
  float *dwte = w->gp[GPT_WTE];
  /* the tied head: logits now hold dloss/dlogits */
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 1, 0, V, C, N, 1.0f, w->logits, V, w->lnf, C, 1.0f, dwte, C));
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 0, 0, N, C, V, 1.0f, w->logits, V, w->wp[GPT_WTE], C, 0.0f, w->dln, C));
  TIMED(p, GPT_T_OTHER, hsr_device_memset(p->d, w->dres, 0, N * C * sizeof(float), w->s));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm_bwd(DEV(p), N, C, w->dln, LAYER(w->res, p->c->n_layer, N * C), w->wp[GPT_LNF_W], w->lnfm,
                                  w->lnfr, w->dres, w->gp[GPT_LNF_W], w->gp[GPT_LNF_B]));
  for (int l = p->c->n_layer - 1; l >= 0; l--) HSR_CHECK(block_bwd(p, l));
  /* the embedding: wte's second use adds into the same gradient */
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_embed_bwd(DEV(p), (size_t)p->B, (size_t)p->T, C, V, tok, w->dres, dwte, w->gp[GPT_WPE]));
  return release(p, 0, 1);
}

hsr_status gpt_forward(const gpt_cfg *c, gpt_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                       const gpt_binder *b, double *loss) {
  if (c->arch == GPT_ARCH_LLAMA && w->ll) return llama_forward(c, w->ll, tokens, targets, B, T, b, loss);
  pass p;
  HSR_CHECK(pass_init(&p, c, w, B, T, b));
  return forward(&p, tokens, targets, 0, loss);
}

hsr_status gpt_fwd_bwd(const gpt_cfg *c, gpt_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                       const gpt_binder *b, double *loss) {
  if (c->arch == GPT_ARCH_LLAMA && w->ll) return llama_fwd_bwd(c, w->ll, tokens, targets, B, T, b, loss);
  pass p;
  HSR_CHECK(pass_init(&p, c, w, B, T, b));
  if (!targets) return hsr_error(HSR_ERR_INVALID, "model: a backward pass needs targets");
  HSR_CHECK(forward(&p, tokens, targets, 1, loss));
  return backward(&p, tokens);
}
