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
  if (c->recompute < HSR_RT_RECOMPUTE_NONE || c->recompute > HSR_RT_RECOMPUTE_SELECTIVE)
    return hsr_error(HSR_ERR_INVALID, "model: recompute %d (valid: none, full, selective)", (int)c->recompute);
  if (c->recompute != HSR_RT_RECOMPUTE_NONE && c->wrap_linear)
    return hsr_error(HSR_ERR_INVALID,
                     "model: --recompute %s needs block units (--wrap block): a block's recompute reads all of its "
                     "weights, which one backward window holds only when the block is one unit",
                     hsr_rt_recompute_name(c->recompute));
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
/* What a block's forward writes and its backward reads, per token (N = B T
 * tokens): elements of each buffer, and which the recompute policies keep
 * per layer. A buffer not kept lives once, in the scratch of the layer being
 * recomputed. The block input (res) is always kept. */
enum { AB_LN1 = 0, AB_LN1M, AB_LN1R, AB_QKV, AB_ATT, AB_ATTY, AB_MID, AB_LN2, AB_LN2M, AB_LN2R, AB_FCH, AB_FCHG, AB_COUNT };
static size_t ab_per_token(const gpt_cfg *c, int T, int k) {
  size_t C = (size_t)c->n_embd;
  switch (k) {
  case AB_QKV: return 3 * C;
  case AB_ATT: return (size_t)c->n_head * (size_t)T; /* B H T T probabilities over B T tokens */
  case AB_FCH:
  case AB_FCHG: return 4 * C;
  case AB_LN1M:
  case AB_LN1R:
  case AB_LN2M:
  case AB_LN2R: return 1;
  default: return C;
  }
}
/* selective keeps the matmuls' outputs (qkv, the attention's output, the
 * residual after the projection, c_fc's output) and the LayerNorms' tiny
 * statistics; it recomputes the LayerNorms' outputs, the attention's
 * probabilities (Q K^T and the softmax: O(T^2) memory for a small part of the
 * FLOPs) and the GELU. full keeps nothing but the block input. */
static int ab_kept(int policy, int k) {
  if (policy == HSR_RT_RECOMPUTE_NONE) return 1;
  if (policy == HSR_RT_RECOMPUTE_FULL) return 0;
  return k == AB_LN1M || k == AB_LN1R || k == AB_QKV || k == AB_ATTY || k == AB_MID || k == AB_LN2M || k == AB_LN2R ||
         k == AB_FCH;
}

struct gpt_work {
  llama_work *ll; /* a llama configuration's activations: everything else unused */
  int B, T, L, C, H, V, np, policy;
  hsr_device *dev, *host; /* dev: the caller's (NULL: host); host: opened here for host GEMMs */
  hsr_stream *s;
  int gpu;
  size_t allocated; /* bytes of device (or host) memory this workspace holds, as allocated */
  /* kept for the backward: the block inputs and the final stream, (L+1) x N x C */
  float *res;
  float *ab[AB_COUNT]; /* per buffer: L layers when kept, else one (the recompute's scratch) */
  float *lnf, *lnfm, *lnfr, *logits;
  /* backward scratch */
  float *dres, *dln, *dqkv, *datty, *dfch, *datt;
  double *rowloss, *rowloss_h;
  const float **wp; /* the binder's pointers, per parameter */
  float **gp;
  uint64_t prof[GPT_T_COUNT]; /* ns per category since the last read */
};

hsr_status gpt_act_plan_of(const gpt_cfg *c, int B, int T, gpt_act_plan *out) {
  HSR_CHECK(gpt_cfg_check(c));
  if (c->arch == GPT_ARCH_LLAMA) return llama_act_plan(c, B, T, out);
  size_t N = (size_t)B * T, C = (size_t)c->n_embd, L = (size_t)c->n_layer, V = (size_t)c->vocab, f = sizeof(float);
  gpt_act_plan a = {0};
  a.layer = N * C * f; /* the block input */
  for (int k = 0; k < AB_COUNT; k++) {
    size_t b = N * ab_per_token(c, T, k) * f;
    if (ab_kept(c->recompute, k))
      a.layer += b;
    else
      a.scratch += b;
  }
  /* the final stream, ln_f (output, mean, rstd), the logits; the backward's
   * scratch (one sequence's attention gradient) and the per-token losses */
  a.fixed = N * C * f + (N * C + 2 * N) * f + N * V * f;
  a.fixed += (2 * N * C + 3 * N * C + N * C + 4 * N * C) * f + (size_t)c->n_head * T * T * f + N * sizeof(double);
  a.total = L * a.layer + a.scratch + a.fixed;
  *out = a;
  return HSR_OK;
}

size_t gpt_work_bytes(const gpt_cfg *c, int B, int T) {
  if (c->arch == GPT_ARCH_LLAMA) return llama_work_bytes(c, B, T);
  gpt_act_plan a;
  return gpt_act_plan_of(c, B, T, &a) == HSR_OK ? a.total : 0;
}

static void *walloc_bytes(gpt_work *w, size_t bytes, hsr_status *st) {
  void *p = NULL;
  if (*st != HSR_OK) return NULL;
  *st = hsr_device_alloc(w->dev ? w->dev : w->host, bytes ? bytes : 1, &p);
  if (*st == HSR_OK) w->allocated += bytes;
  return p;
}
static float *walloc(gpt_work *w, size_t n, hsr_status *st) { return walloc_bytes(w, n * sizeof(float), st); }

size_t gpt_work_allocated(const gpt_work *w) { return !w ? 0 : w->ll ? llama_work_allocated(w->ll) : w->allocated; }

void gpt_work_free(gpt_work *w) {
  if (!w) return;
  llama_work_free(w->ll);
  hsr_device *d = w->dev ? w->dev : w->host;
  float **bufs[] = {&w->res,  &w->lnf,  &w->lnfm,  &w->lnfr, &w->logits, &w->dres,
                    &w->dln,  &w->dqkv, &w->datty, &w->dfch, &w->datt};
  if (d) {
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hsr_device_free(d, *bufs[i]);
    for (int k = 0; k < AB_COUNT; k++) hsr_device_free(d, w->ab[k]);
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
  w->policy = c->recompute;
  w->s = s;
  w->gpu = dev && hsr_device_kind_of(dev) != HSR_DEVICE_HOST;
  w->dev = w->gpu ? dev : NULL;
  hsr_status st = w->gpu ? HSR_OK : hsr_device_open(HSR_DEVICE_HOST, 0, &w->host);
  size_t N = (size_t)B * T, nc = N * (size_t)c->n_embd, L = (size_t)w->L;
  w->res = walloc(w, (L + 1) * nc, &st);
  for (int k = 0; k < AB_COUNT; k++)
    w->ab[k] = walloc(w, (ab_kept(w->policy, k) ? L : 1) * N * ab_per_token(c, T, k), &st);
  w->lnf = walloc(w, nc, &st), w->lnfm = walloc(w, N, &st), w->lnfr = walloc(w, N, &st);
  w->logits = walloc(w, N * (size_t)c->vocab, &st);
  w->dres = walloc(w, nc, &st), w->dln = walloc(w, nc, &st), w->dqkv = walloc(w, 3 * nc, &st);
  w->datty = walloc(w, nc, &st), w->dfch = walloc(w, 4 * nc, &st);
  w->datt = walloc(w, (size_t)c->n_head * T * T, &st);
  w->rowloss = walloc_bytes(w, N * sizeof(double), &st);
  if (st == HSR_OK && w->gpu && !(w->rowloss_h = malloc(N * sizeof(double))))
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

/* The probabilities: att = softmax(Q K^T / sqrt(hs)), causal. */
static hsr_status attention_probs(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv,
                                  float *att) {
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
  return hsr_kernels_softmax_causal(d, s, (size_t)B * h * t, t, 1.0f / sqrtf((float)hs), att, att);
}

hsr_status gpt_attention(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv, float *att,
                         float *y) {
  size_t t = (size_t)T, c = (size_t)C, hs = (size_t)(C / H), h = (size_t)H, tt = t * t;
  HSR_CHECK(attention_probs(d, s, B, T, C, H, qkv, att));
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

/* Block l's buffers: the kept ones at layer l, the others in the one layer
 * of scratch the recompute policy leaves them. */
typedef struct lbufs {
  const float *x;
  float *out, *b[AB_COUNT];
} lbufs;
static lbufs layer_bufs(const pass *p, int l) {
  gpt_work *w = p->w;
  size_t nc = (size_t)p->N * p->C;
  lbufs r = {LAYER(w->res, l, nc), LAYER(w->res, l + 1, nc), {0}};
  for (int k = 0; k < AB_COUNT; k++)
    r.b[k] = LAYER(w->ab[k], ab_kept(w->policy, k) ? l : 0, (size_t)p->N * ab_per_token(p->c, p->T, k));
  return r;
}

/* The block's forward up to c_fc's GELU, on weights already open (the
 * whole block is one unit when it recomputes, hsr_rt_recompute_begin). rc:
 * a recompute, whose work is the same as the forward's, so its results are
 * bitwise the forward's. */
static hsr_status block_fwd_body(const pass *p, int l, int rc) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, nc = N * C;
  const float **W = w->wp;
  lbufs b = layer_bufs(p, l);
  if (!rc) HSR_CHECK(piece_open(p, l, 0, 0));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, b.x, W[GPT_PARAM(l, GPT_LN1_W)], W[GPT_PARAM(l, GPT_LN1_B)], GPT_LN_EPS,
                              b.b[AB_LN1], b.b[AB_LN1M], b.b[AB_LN1R]));
  HSR_CHECK(linear(p, C, 3 * C, b.b[AB_LN1], W[GPT_PARAM(l, GPT_ATTN_W)], W[GPT_PARAM(l, GPT_ATTN_B)], b.b[AB_QKV], 0));
  if (!rc) HSR_CHECK(piece_close(p, l, 0, 0));
  TIMED(p, GPT_T_ATTN, gpt_attention(DEV(p), p->B, p->T, p->C, p->H, b.b[AB_QKV], b.b[AB_ATT], b.b[AB_ATTY]));
  if (!rc) HSR_CHECK(piece_open(p, l, 1, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, b.b[AB_MID], b.x, nc * sizeof(float), w->s)); /* the residual */
  HSR_CHECK(
      linear(p, C, C, b.b[AB_ATTY], W[GPT_PARAM(l, GPT_APROJ_W)], W[GPT_PARAM(l, GPT_APROJ_B)], b.b[AB_MID], 1));
  if (!rc) HSR_CHECK(piece_close(p, l, 1, 0));
  if (!rc) HSR_CHECK(piece_open(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, b.b[AB_MID], W[GPT_PARAM(l, GPT_LN2_W)], W[GPT_PARAM(l, GPT_LN2_B)],
                              GPT_LN_EPS, b.b[AB_LN2], b.b[AB_LN2M], b.b[AB_LN2R]));
  HSR_CHECK(linear(p, C, 4 * C, b.b[AB_LN2], W[GPT_PARAM(l, GPT_FC_W)], W[GPT_PARAM(l, GPT_FC_B)], b.b[AB_FCH], 0));
  if (!rc) HSR_CHECK(piece_close(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER, hsr_kernels_gelu(DEV(p), 4 * nc, b.b[AB_FCH], b.b[AB_FCHG]));
  return HSR_OK;
}

static hsr_status block_fwd(const pass *p, int l) {
  size_t C = (size_t)p->C, nc = (size_t)p->N * C;
  const float **W = p->w->wp;
  HSR_CHECK(block_fwd_body(p, l, 0));
  lbufs b = layer_bufs(p, l);
  HSR_CHECK(piece_open(p, l, 3, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, b.out, b.b[AB_MID], nc * sizeof(float), p->w->s));
  HSR_CHECK(linear(p, 4 * C, C, b.b[AB_FCHG], W[GPT_PARAM(l, GPT_MPROJ_W)], W[GPT_PARAM(l, GPT_MPROJ_B)], b.out, 1));
  return piece_close(p, l, 3, 0);
}

/* selective: the LayerNorms' outputs (from the kept inputs; the statistics
 * they write again are the kept ones, bit for bit), the attention's
 * probabilities from the kept qkv, the GELU from the kept c_fc output. */
static hsr_status block_recompute_selective(const pass *p, int l) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, nc = N * C;
  const float **W = w->wp;
  lbufs b = layer_bufs(p, l);
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, b.x, W[GPT_PARAM(l, GPT_LN1_W)], W[GPT_PARAM(l, GPT_LN1_B)], GPT_LN_EPS,
                              b.b[AB_LN1], b.b[AB_LN1M], b.b[AB_LN1R]));
  TIMED(p, GPT_T_ATTN, attention_probs(DEV(p), p->B, p->T, p->C, p->H, b.b[AB_QKV], b.b[AB_ATT]));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm(DEV(p), N, C, b.b[AB_MID], W[GPT_PARAM(l, GPT_LN2_W)], W[GPT_PARAM(l, GPT_LN2_B)],
                              GPT_LN_EPS, b.b[AB_LN2], b.b[AB_LN2M], b.b[AB_LN2R]));
  TIMED(p, GPT_T_OTHER, hsr_kernels_gelu(DEV(p), 4 * nc, b.b[AB_FCH], b.b[AB_FCHG]));
  return HSR_OK;
}

/* Inside the block's backward window: its recompute, declared to the binder
 * (the engine: hsr_rt_recompute_begin/_end) so the schedule, the trace and
 * the counters see it. */
static hsr_status block_recompute(const pass *p, int l) {
  int policy = p->w->policy, unit = unit_of(p->c, l, 0);
  if (policy == HSR_RT_RECOMPUTE_NONE) return HSR_OK;
  if (p->b->recompute) HSR_CHECK(p->b->recompute(p->b->ctx, unit, 1));
  HSR_CHECK(policy == HSR_RT_RECOMPUTE_FULL ? block_fwd_body(p, l, 1) : block_recompute_selective(p, l));
  return p->b->recompute ? p->b->recompute(p->b->ctx, unit, 0) : HSR_OK;
}

/* w->dres holds d(output of block l) and becomes d(input of block l) */
static hsr_status block_bwd(const pass *p, int l) {
  gpt_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, nc = N * C;
  const float **W = w->wp;
  float **G = w->gp;
  HSR_CHECK(piece_open(p, l, 3, 1));
  HSR_CHECK(block_recompute(p, l));
  lbufs b = layer_bufs(p, l);
  const float *x = b.x, *ln1 = b.b[AB_LN1], *qkv = b.b[AB_QKV], *att = b.b[AB_ATT], *atty = b.b[AB_ATTY];
  const float *mid = b.b[AB_MID], *ln2 = b.b[AB_LN2], *fch = b.b[AB_FCH], *fchg = b.b[AB_FCHG];
#define PW(k) W[GPT_PARAM(l, k)]
#define PG(k) G[GPT_PARAM(l, k)]
  HSR_CHECK(linear_bwd(p, 4 * C, C, fchg, PW(GPT_MPROJ_W), w->dres, w->dfch, PG(GPT_MPROJ_W), PG(GPT_MPROJ_B)));
  HSR_CHECK(piece_close(p, l, 3, 1));
  TIMED(p, GPT_T_OTHER, hsr_kernels_gelu_bwd(DEV(p), 4 * nc, fch, w->dfch, w->dfch));
  HSR_CHECK(piece_open(p, l, 2, 1));
  HSR_CHECK(linear_bwd(p, C, 4 * C, ln2, PW(GPT_FC_W), w->dfch, w->dln, PG(GPT_FC_W), PG(GPT_FC_B)));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm_bwd(DEV(p), N, C, w->dln, mid, PW(GPT_LN2_W), b.b[AB_LN2M], b.b[AB_LN2R], w->dres,
                                  PG(GPT_LN2_W), PG(GPT_LN2_B)));
  HSR_CHECK(piece_close(p, l, 2, 1));
  HSR_CHECK(piece_open(p, l, 1, 1));
  HSR_CHECK(linear_bwd(p, C, C, atty, PW(GPT_APROJ_W), w->dres, w->datty, PG(GPT_APROJ_W), PG(GPT_APROJ_B)));
  HSR_CHECK(piece_close(p, l, 1, 1));
  TIMED(p, GPT_T_ATTN, gpt_attention_bwd(DEV(p), p->B, p->T, p->C, p->H, qkv, att, w->datty, w->dqkv, w->datt));
  HSR_CHECK(piece_open(p, l, 0, 1));
  HSR_CHECK(linear_bwd(p, C, 3 * C, ln1, PW(GPT_ATTN_W), w->dqkv, w->dln, PG(GPT_ATTN_W), PG(GPT_ATTN_B)));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_layernorm_bwd(DEV(p), N, C, w->dln, x, PW(GPT_LN1_W), b.b[AB_LN1M], b.b[AB_LN1R], w->dres,
                                  PG(GPT_LN1_W), PG(GPT_LN1_B)));
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
