/* The Llama-style model (llama.h): parameters, activations, forward and
 * backward, on the GPT's GEMMs and kernels plus RMSNorm, SwiGLU and the
 * rotary embedding of kernels/nn_llama.c. */
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex_rand.h"

int llama_default_ff(int C) { return (8 * C / 3 + 7) / 8 * 8; }
int llama_kv_heads(const gpt_cfg *c) { return c->n_kv_head > 0 ? c->n_kv_head : c->n_head; }
int llama_ff(const gpt_cfg *c) { return c->n_ff > 0 ? c->n_ff : llama_default_ff(c->n_embd); }

/* gpt_cfg_check has checked layers, heads dividing the width, context, vocabulary */
hsr_status llama_cfg_check(const gpt_cfg *c) {
  int G = llama_kv_heads(c), D = c->n_embd / c->n_head;
  if (c->n_kv_head < 0 || G > c->n_head || c->n_head % G)
    return hsr_error(HSR_ERR_INVALID, "model: %d key/value heads must divide the %d heads", c->n_kv_head, c->n_head);
  if (D % 2)
    return hsr_error(HSR_ERR_INVALID,
                     "model: width %d with %d heads: the head size %d must be even (rotary embeddings turn pairs)",
                     c->n_embd, c->n_head, D);
  if (c->n_ff < 0 || (double)llama_ff(c) * c->n_embd > 2e9)
    return hsr_error(HSR_ERR_INVALID, "model: MLP width %d (valid: 1 to 2^31 / width)", llama_ff(c));
  return HSR_OK;
}

int llama_num_params(const gpt_cfg *c) { return LLAMA_ROOT_PARAMS + LLAMA_BLOCK_PARAMS * c->n_layer; }

void llama_param_name(const gpt_cfg *c, int i, char *buf, size_t len) {
  static const char *root[] = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
  static const char *blk[] = {"input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                              "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                              "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};
  (void)c;
  if (i < LLAMA_ROOT_PARAMS)
    snprintf(buf, len, "%s", root[i]);
  else
    snprintf(buf, len, "model.layers.%d.%s", (i - LLAMA_ROOT_PARAMS) / LLAMA_BLOCK_PARAMS,
             blk[(i - LLAMA_ROOT_PARAMS) % LLAMA_BLOCK_PARAMS]);
}

int llama_param_shape(const gpt_cfg *c, int i, int64_t shape[2], int *group) {
  int64_t C = c->n_embd, KV = (int64_t)llama_kv_heads(c) * (C / c->n_head), F = llama_ff(c);
  if (i < LLAMA_ROOT_PARAMS) {
    *group = i == LLAMA_NORM;
    if (i == LLAMA_NORM) {
      shape[0] = C;
      return 1;
    }
    shape[0] = c->vocab, shape[1] = C;
    return 2;
  }
  /* [out, in]: torch.nn.Linear's layout */
  int k = (i - LLAMA_ROOT_PARAMS) % LLAMA_BLOCK_PARAMS;
  *group = 0;
  switch (k) {
  case LLAMA_IN_NORM:
  case LLAMA_POST_NORM: *group = 1, shape[0] = C; return 1;
  case LLAMA_Q:
  case LLAMA_O: shape[0] = C, shape[1] = C; return 2;
  case LLAMA_K:
  case LLAMA_V: shape[0] = KV, shape[1] = C; return 2;
  case LLAMA_GATE:
  case LLAMA_UP: shape[0] = F, shape[1] = C; return 2;
  default: shape[0] = C, shape[1] = F; return 2; /* down_proj */
  }
}

void llama_param_init(const gpt_cfg *c, int i, float *out) {
  int64_t s[2] = {0, 0};
  int g, nd = llama_param_shape(c, i, s, &g);
  size_t n = nd == 1 ? (size_t)s[0] : (size_t)(s[0] * s[1]);
  if (nd == 1) { /* RMSNorm weights */
    for (size_t j = 0; j < n; j++) out[j] = 1.0f;
    return;
  }
  for (size_t j = 0; j < n; j++) out[j] = 0.02f * ex_normal(ex_hash3(c->seed, (uint64_t)i, j));
}

int llama_num_units(const gpt_cfg *c) { return 1 + (c->wrap_linear ? 4 : 1) * c->n_layer; }

/* piece of a block parameter: 0 input norm + q/k/v, 1 o_proj, 2 post norm + gate/up, 3 down_proj */
static int piece_of(int k) { return k < LLAMA_O ? 0 : k == LLAMA_O ? 1 : k < LLAMA_DOWN ? 2 : 3; }
static int unit_of(const gpt_cfg *c, int l, int piece) { return c->wrap_linear ? 1 + 4 * l + piece : 1 + l; }

int llama_param_unit(const gpt_cfg *c, int i) {
  if (i < LLAMA_ROOT_PARAMS) return 0;
  int l = (i - LLAMA_ROOT_PARAMS) / LLAMA_BLOCK_PARAMS, k = (i - LLAMA_ROOT_PARAMS) % LLAMA_BLOCK_PARAMS;
  return unit_of(c, l, piece_of(k));
}

void llama_unit_name(const gpt_cfg *c, int u, char *buf, size_t len) {
  static const char *pieces[] = {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"};
  if (u == 0)
    snprintf(buf, len, "root");
  else if (c->wrap_linear)
    snprintf(buf, len, "model.layers.%d.%s", (u - 1) / 4, pieces[(u - 1) % 4]);
  else
    snprintf(buf, len, "model.layers.%d", u - 1);
}

double llama_flops_per_token(const gpt_cfg *c, int T) {
  double C = c->n_embd, KV = (double)llama_kv_heads(c) * (C / c->n_head), F = llama_ff(c);
  double blk = 2.0 * (2.0 * C * C + 2.0 * C * KV) + 6.0 * C * F + 4.0 * T * C;
  return 3.0 * (c->n_layer * blk + 2.0 * C * c->vocab);
}

/* ---- activations ---- */
/* What a block's forward writes and its backward reads, per token, and what
 * each recompute policy keeps per layer (the rest lives in one layer of
 * scratch); the block input (res) is always kept. As gpt.c: selective keeps
 * the matmuls' outputs (q and k after their rotation, v, the attention's
 * output, the residual after o_proj, gate and up) and the RMSNorms'
 * statistics, and recomputes the RMSNorms' outputs, the attention's
 * probabilities and SwiGLU; full keeps the block input only. */
enum { LB_H1 = 0, LB_R1, LB_Q, LB_K, LB_V, LB_ATT, LB_ATTY, LB_MID, LB_H2, LB_R2, LB_GT, LB_UP, LB_ACT, LB_COUNT };
static size_t lb_per_token(const gpt_cfg *c, int T, int k) {
  size_t C = (size_t)c->n_embd, KV = (size_t)llama_kv_heads(c) * (C / (size_t)c->n_head);
  switch (k) {
  case LB_R1:
  case LB_R2: return 1;
  case LB_K:
  case LB_V: return KV;
  case LB_ATT: return (size_t)c->n_head * (size_t)T;
  case LB_GT:
  case LB_UP:
  case LB_ACT: return (size_t)llama_ff(c);
  default: return C;
  }
}
static int lb_kept(int policy, int k) {
  if (policy == HSR_RT_RECOMPUTE_NONE) return 1;
  if (policy == HSR_RT_RECOMPUTE_FULL) return 0;
  return k != LB_H1 && k != LB_ATT && k != LB_H2 && k != LB_ACT;
}

struct llama_work {
  int B, T, L, C, H, G, D, F, V, policy;
  hsr_device *dev, *host; /* dev: the caller's (NULL: host); host: opened here for host GEMMs */
  hsr_stream *s;
  int gpu;
  size_t allocated; /* bytes allocated, counted as allocated */
  /* kept for the backward: the block inputs and the final stream, (L+1) x N x C */
  float *res;
  float *ab[LB_COUNT]; /* per buffer: L layers when kept, else one (the recompute's scratch) */
  float *hf, *rf, *logits;
  /* backward scratch; the rotary table; a zero position row for hsr_kernels_embed */
  float *dres, *dh, *dq, *dk, *dv, *datty, *dact, *dg, *du, *datt, *rope, *zpos, *dzpos;
  double *rowloss, *rowloss_h;
  const float **wp; /* the binder's pointers, per parameter */
  float **gp;
  int np;
  uint64_t prof[GPT_T_COUNT]; /* ns per category since the last read */
};

hsr_status llama_act_plan(const gpt_cfg *c, int B, int T, gpt_act_plan *out) {
  size_t N = (size_t)B * T, C = (size_t)c->n_embd, L = (size_t)c->n_layer, f = sizeof(float);
  size_t D = C / (size_t)c->n_head, KV = (size_t)llama_kv_heads(c) * D, F = (size_t)llama_ff(c);
  gpt_act_plan a = {0};
  a.layer = N * C * f;
  for (int k = 0; k < LB_COUNT; k++) {
    size_t b = N * lb_per_token(c, T, k) * f;
    if (lb_kept(c->recompute, k))
      a.layer += b;
    else
      a.scratch += b;
  }
  /* the final stream, the final RMSNorm (output, statistic), the logits; the
   * backward's scratch, one sequence's attention gradient, the rotary table,
   * the zero position row and its sink; the per-token losses */
  a.fixed = (N * C + N * C + N + N * (size_t)c->vocab) * f;
  a.fixed += (4 * N * C + 2 * N * KV + 3 * N * F + (size_t)c->n_head * T * T + (size_t)T * D + 2 * C) * f;
  a.fixed += N * sizeof(double);
  a.total = L * a.layer + a.scratch + a.fixed;
  *out = a;
  return HSR_OK;
}

size_t llama_work_bytes(const gpt_cfg *c, int B, int T) {
  gpt_act_plan a;
  llama_act_plan(c, B, T, &a);
  return a.total;
}

size_t llama_work_allocated(const llama_work *w) { return w ? w->allocated : 0; }

static void *walloc_bytes(llama_work *w, size_t bytes, hsr_status *st) {
  void *p = NULL;
  if (*st != HSR_OK) return NULL;
  *st = hsr_device_alloc(w->dev ? w->dev : w->host, bytes ? bytes : 1, &p);
  if (*st == HSR_OK) w->allocated += bytes;
  return p;
}
static float *walloc(llama_work *w, size_t n, hsr_status *st) { return walloc_bytes(w, n * sizeof(float), st); }

#define LLAMA_BUFS(w)                                                                                              \
  {                                                                                                                \
    &(w)->res, &(w)->hf, &(w)->rf, &(w)->logits, &(w)->dres, &(w)->dh, &(w)->dq, &(w)->dk, &(w)->dv, &(w)->datty, \
        &(w)->dact, &(w)->dg, &(w)->du, &(w)->datt, &(w)->rope, &(w)->zpos, &(w)->dzpos                            \
  }

void llama_work_free(llama_work *w) {
  if (!w) return;
  hsr_device *d = w->dev ? w->dev : w->host;
  float **bufs[] = LLAMA_BUFS(w);
  if (d) {
    if (w->s) hsr_stream_sync(w->s, GPT_SYNC_TIMEOUT_S); /* the table's and zero row's writes are queued */
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hsr_device_free(d, *bufs[i]);
    for (int k = 0; k < LB_COUNT; k++) hsr_device_free(d, w->ab[k]);
    hsr_device_free(d, w->rowloss);
  }
  if (w->gpu) free(w->rowloss_h);
  free(w->wp);
  free(w->gp);
  hsr_device_close(w->host);
  free(w);
}

hsr_status llama_work_create(const gpt_cfg *c, int B, int T, hsr_device *dev, hsr_stream *s, llama_work **out) {
  llama_work *w = calloc(1, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  w->B = B, w->T = T, w->L = c->n_layer, w->C = c->n_embd, w->H = c->n_head, w->G = llama_kv_heads(c);
  w->D = c->n_embd / c->n_head, w->F = llama_ff(c), w->V = c->vocab, w->np = llama_num_params(c);
  w->policy = c->recompute;
  w->s = s;
  w->gpu = dev && hsr_device_kind_of(dev) != HSR_DEVICE_HOST; /* device memory: CUDA or sim */
  w->dev = w->gpu ? dev : NULL;
  hsr_status st = w->gpu ? HSR_OK : hsr_device_open(HSR_DEVICE_HOST, 0, &w->host);
  size_t N = (size_t)B * T, L = (size_t)w->L, C = (size_t)w->C, nc = N * C, kv = N * (size_t)w->G * w->D;
  size_t ff = N * (size_t)w->F;
  w->res = walloc(w, (L + 1) * nc, &st);
  for (int k = 0; k < LB_COUNT; k++)
    w->ab[k] = walloc(w, (lb_kept(w->policy, k) ? L : 1) * N * lb_per_token(c, T, k), &st);
  w->hf = walloc(w, nc, &st), w->rf = walloc(w, N, &st), w->logits = walloc(w, N * (size_t)c->vocab, &st);
  w->dres = walloc(w, nc, &st), w->dh = walloc(w, nc, &st), w->dq = walloc(w, nc, &st);
  w->dk = walloc(w, kv, &st), w->dv = walloc(w, kv, &st), w->datty = walloc(w, nc, &st);
  w->dact = walloc(w, ff, &st), w->dg = walloc(w, ff, &st), w->du = walloc(w, ff, &st);
  w->datt = walloc(w, (size_t)c->n_head * T * T, &st), w->rope = walloc(w, (size_t)T * w->D, &st);
  w->zpos = walloc(w, C, &st), w->dzpos = walloc(w, C, &st);
  hsr_device *d = w->gpu ? w->dev : w->host;
  w->rowloss = walloc_bytes(w, N * sizeof(double), &st);
  if (st == HSR_OK && w->gpu && !(w->rowloss_h = malloc(N * sizeof(double))))
    st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (st == HSR_OK && !w->gpu) w->rowloss_h = w->rowloss;
  if (st == HSR_OK) st = hsr_kernels_rope_table(d, w->s, (size_t)T, (size_t)w->D, LLAMA_ROPE_THETA, w->rope);
  if (st == HSR_OK) st = hsr_device_memset(d, w->zpos, 0, C * sizeof(float), w->s);
  w->wp = calloc((size_t)w->np, sizeof *w->wp);
  w->gp = calloc((size_t)w->np, sizeof *w->gp);
  if (st == HSR_OK && (!w->wp || !w->gp)) st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (st != HSR_OK) {
    llama_work_free(w);
    return st;
  }
  *out = w;
  return HSR_OK;
}

void llama_work_timing(llama_work *w, double seconds[GPT_T_COUNT], int reset) {
  for (int i = 0; i < GPT_T_COUNT; i++) {
    seconds[i] = (double)w->prof[i] * 1e-9;
    if (reset) w->prof[i] = 0;
  }
}

const double *llama_row_loss(const llama_work *w) { return w->rowloss_h; }
const float *llama_logits(const llama_work *w) { return w->logits; }

/* ---- layers: every call on the work's stream ---- */
typedef struct pass {
  const gpt_cfg *c;
  llama_work *w;
  hsr_device *d;
  const gpt_binder *b;
  int B, T, N, C, H, G, D, F, V;
} pass;

#define DEV(p) (p)->d, (p)->w->s

#define TIMED(p, cat, expr)                    \
  do {                                         \
    uint64_t t0_ = hsr_clock_ns();             \
    hsr_status s_ = (expr);                    \
    (p)->w->prof[cat] += hsr_clock_ns() - t0_; \
    if (s_ != HSR_OK) return s_;               \
  } while (0)

/* y (N x out) = x (N x in) W^T, W [out, in]; y += ... when acc */
static hsr_status linear(const pass *p, size_t in, size_t out, const float *x, const float *W, float *y, int acc) {
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 0, 1, (size_t)p->N, out, in, 1.0f, x, in, W, in, acc ? 1.0f : 0.0f, y, out));
  return HSR_OK;
}

/* dW += dy^T x; dx = dy W (dx += when acc) */
static hsr_status linear_bwd(const pass *p, size_t in, size_t out, const float *x, const float *W, const float *dy,
                             float *dx, float *dW, int acc) {
  TIMED(p, GPT_T_GEMM, hsr_kernels_gemm(DEV(p), 1, 0, out, in, (size_t)p->N, 1.0f, dy, out, x, in, 1.0f, dW, in));
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 0, 0, (size_t)p->N, in, out, 1.0f, dy, out, W, in, acc ? 1.0f : 0.0f, dx, in));
  return HSR_OK;
}

/* Queries in blocks of ATT_BLOCK rows, as gpt.c: block [q0, q1) needs keys
 * [0, q1) only. Query head j = g R + r (R = H / G) reads key/value head g:
 * for each r, one strided-batched call over the G groups. */
#define ATT_BLOCK 64

/* The probabilities: att = softmax(Q K^T / sqrt(D)), causal. */
static hsr_status attention_probs(hsr_device *d, hsr_stream *s, int B, int T, int H, int G, int D, const float *q,
                                  const float *k, float *att) {
  size_t t = (size_t)T, hd = (size_t)H * D, gd = (size_t)G * D, dd = (size_t)D, tt = t * t, R = (size_t)(H / G);
  for (int b = 0; b < B; b++) {
    const float *qb = q + (size_t)b * t * hd, *kb = k + (size_t)b * t * gd;
    float *a = att + (size_t)b * H * tt;
    for (size_t r = 0; r < R; r++)
      for (size_t q0 = 0; q0 < t; q0 += ATT_BLOCK) {
        size_t q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 1, q1 - q0, q1, dd, 1.0f, qb + q0 * hd + r * dd, hd, R * dd, kb, gd,
                                           dd, 0.0f, a + r * tt + q0 * t, t, R * tt, (size_t)G));
      }
  }
  return hsr_kernels_softmax_causal(d, s, (size_t)B * H * t, t, 1.0f / sqrtf((float)D), att, att);
}

hsr_status llama_attention(hsr_device *d, hsr_stream *s, int B, int T, int H, int G, int D, const float *q,
                           const float *k, const float *v, float *att, float *y) {
  size_t t = (size_t)T, hd = (size_t)H * D, gd = (size_t)G * D, dd = (size_t)D, tt = t * t, R = (size_t)(H / G);
  HSR_CHECK(attention_probs(d, s, B, T, H, G, D, q, k, att));
  for (int b = 0; b < B; b++) {
    const float *vb = v + (size_t)b * t * gd, *a = att + (size_t)b * H * tt;
    float *yb = y + (size_t)b * t * hd;
    for (size_t r = 0; r < R; r++)
      for (size_t q0 = 0; q0 < t; q0 += ATT_BLOCK) {
        size_t q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 0, q1 - q0, dd, q1, 1.0f, a + r * tt + q0 * t, t, R * tt, vb, gd,
                                           dd, 0.0f, yb + q0 * hd + r * dd, hd, R * dd, (size_t)G));
      }
  }
  return HSR_OK;
}

hsr_status llama_attention_bwd(hsr_device *d, hsr_stream *s, int B, int T, int H, int G, int D, const float *q,
                               const float *k, const float *v, const float *att, const float *dy, float *dq, float *dk,
                               float *dv, float *scratch) {
  size_t t = (size_t)T, hd = (size_t)H * D, gd = (size_t)G * D, dd = (size_t)D, tt = t * t, R = (size_t)(H / G);
  size_t nblk = (t + ATT_BLOCK - 1) / ATT_BLOCK; /* the last block first: it covers every key, so it sets dV, dK */
  float *dp = scratch;
  for (int b = 0; b < B; b++) {
    const float *qb = q + (size_t)b * t * hd, *kb = k + (size_t)b * t * gd, *vb = v + (size_t)b * t * gd;
    const float *a = att + (size_t)b * H * tt, *g = dy + (size_t)b * t * hd;
    float *dqb = dq + (size_t)b * t * hd, *dkb = dk + (size_t)b * t * gd, *dvb = dv + (size_t)b * t * gd;
    /* dP = dY V^T; dV = sum over the group's heads and query blocks of P^T dY */
    for (size_t r = 0; r < R; r++)
      for (size_t kb_ = nblk; kb_-- > 0;) {
        size_t q0 = kb_ * ATT_BLOCK, q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
        float acc = r == 0 && kb_ + 1 == nblk ? 0.0f : 1.0f;
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 1, q1 - q0, q1, dd, 1.0f, g + q0 * hd + r * dd, hd, R * dd, vb, gd,
                                           dd, 0.0f, dp + r * tt + q0 * t, t, R * tt, (size_t)G));
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 1, 0, q1, dd, q1 - q0, 1.0f, a + r * tt + q0 * t, t, R * tt,
                                           g + q0 * hd + r * dd, hd, R * dd, acc, dvb, gd, dd, (size_t)G));
      }
    /* dS = softmax'(dP); dQ = dS K; dK = sum of dS^T Q */
    HSR_CHECK(hsr_kernels_softmax_causal_bwd(d, s, (size_t)H * t, t, 1.0f / sqrtf((float)D), a, dp, dp));
    for (size_t r = 0; r < R; r++)
      for (size_t kb_ = nblk; kb_-- > 0;) {
        size_t q0 = kb_ * ATT_BLOCK, q1 = q0 + ATT_BLOCK < t ? q0 + ATT_BLOCK : t;
        float acc = r == 0 && kb_ + 1 == nblk ? 0.0f : 1.0f;
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 0, 0, q1 - q0, dd, q1, 1.0f, dp + r * tt + q0 * t, t, R * tt, kb, gd,
                                           dd, 0.0f, dqb + q0 * hd + r * dd, hd, R * dd, (size_t)G));
        HSR_CHECK(hsr_kernels_gemm_batched(d, s, 1, 0, q1, dd, q1 - q0, 1.0f, dp + r * tt + q0 * t, t, R * tt,
                                           qb + q0 * hd + r * dd, hd, R * dd, acc, dkb, gd, dd, (size_t)G));
      }
  }
  return HSR_OK;
}

/* Windows of the pieces of block l (as gpt.c): block wrap opens the block's
 * unit at the first piece (forward 0, backward 3) and closes it after the last. */
static hsr_status piece_open(const pass *p, int l, int piece, int bwd) {
  if (!p->c->wrap_linear && piece != (bwd ? 3 : 0)) return HSR_OK;
  return p->b->acquire(p->b->ctx, unit_of(p->c, l, piece), bwd, p->w->wp, p->w->gp);
}
/* A closed unit's pointers are cleared: a use outside its window crashes in
 * the tests instead of reading stale weights. */
static hsr_status release(const pass *p, int unit, int bwd) {
  for (int i = 0; i < p->w->np; i++)
    if (llama_param_unit(p->c, i) == unit) p->w->wp[i] = NULL, p->w->gp[i] = NULL;
  return p->b->release(p->b->ctx, unit, bwd);
}
static hsr_status piece_close(const pass *p, int l, int piece, int bwd) {
  if (!p->c->wrap_linear && piece != (bwd ? 0 : 3)) return HSR_OK;
  return release(p, unit_of(p->c, l, piece), bwd);
}

#define LAYER(buf, l, n) ((buf) + (size_t)(l) * (n))

/* Block l's buffers: the kept ones at layer l, the others in the one layer
 * of scratch the recompute policy leaves them (as gpt.c). */
typedef struct lbufs {
  const float *x;
  float *out, *b[LB_COUNT];
} lbufs;
static lbufs layer_bufs(const pass *p, int l) {
  llama_work *w = p->w;
  size_t nc = (size_t)p->N * p->C;
  lbufs r = {LAYER(w->res, l, nc), LAYER(w->res, l + 1, nc), {0}};
  for (int k = 0; k < LB_COUNT; k++)
    r.b[k] = LAYER(w->ab[k], lb_kept(w->policy, k) ? l : 0, (size_t)p->N * lb_per_token(p->c, p->T, k));
  return r;
}

/* The block's forward up to SwiGLU, on weights already open when it is a
 * recompute (rc: the whole block is one unit), bitwise the forward's. */
static hsr_status block_fwd_body(const pass *p, int l, int rc) {
  llama_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, KV = (size_t)p->G * p->D, F = (size_t)p->F;
  const float **W = w->wp;
  lbufs b = layer_bufs(p, l);
  float **B = b.b;
#define PW(kk) W[LLAMA_PARAM(l, kk)]
  if (!rc) HSR_CHECK(piece_open(p, l, 0, 0));
  TIMED(p, GPT_T_OTHER, hsr_kernels_rmsnorm(DEV(p), N, C, b.x, PW(LLAMA_IN_NORM), LLAMA_RMS_EPS, B[LB_H1], B[LB_R1]));
  HSR_CHECK(linear(p, C, C, B[LB_H1], PW(LLAMA_Q), B[LB_Q], 0));
  HSR_CHECK(linear(p, C, KV, B[LB_H1], PW(LLAMA_K), B[LB_K], 0));
  HSR_CHECK(linear(p, C, KV, B[LB_H1], PW(LLAMA_V), B[LB_V], 0));
  if (!rc) HSR_CHECK(piece_close(p, l, 0, 0));
  TIMED(p, GPT_T_ATTN, hsr_kernels_rope(DEV(p), N, (size_t)p->T, (size_t)p->H, (size_t)p->D, w->rope, 0, B[LB_Q]));
  TIMED(p, GPT_T_ATTN, hsr_kernels_rope(DEV(p), N, (size_t)p->T, (size_t)p->G, (size_t)p->D, w->rope, 0, B[LB_K]));
  TIMED(p, GPT_T_ATTN,
        llama_attention(DEV(p), p->B, p->T, p->H, p->G, p->D, B[LB_Q], B[LB_K], B[LB_V], B[LB_ATT], B[LB_ATTY]));
  if (!rc) HSR_CHECK(piece_open(p, l, 1, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, B[LB_MID], b.x, N * C * sizeof(float), w->s)); /* the residual */
  HSR_CHECK(linear(p, C, C, B[LB_ATTY], PW(LLAMA_O), B[LB_MID], 1));
  if (!rc) HSR_CHECK(piece_close(p, l, 1, 0));
  if (!rc) HSR_CHECK(piece_open(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm(DEV(p), N, C, B[LB_MID], PW(LLAMA_POST_NORM), LLAMA_RMS_EPS, B[LB_H2], B[LB_R2]));
  HSR_CHECK(linear(p, C, F, B[LB_H2], PW(LLAMA_GATE), B[LB_GT], 0));
  HSR_CHECK(linear(p, C, F, B[LB_H2], PW(LLAMA_UP), B[LB_UP], 0));
  if (!rc) HSR_CHECK(piece_close(p, l, 2, 0));
  TIMED(p, GPT_T_OTHER, hsr_kernels_swiglu(DEV(p), N * F, B[LB_GT], B[LB_UP], B[LB_ACT]));
#undef PW
  return HSR_OK;
}

static hsr_status block_fwd(const pass *p, int l) {
  size_t C = (size_t)p->C, F = (size_t)p->F;
  HSR_CHECK(block_fwd_body(p, l, 0));
  lbufs b = layer_bufs(p, l);
  HSR_CHECK(piece_open(p, l, 3, 0));
  TIMED(p, GPT_T_OTHER, hsr_device_copy(p->d, b.out, b.b[LB_MID], (size_t)p->N * C * sizeof(float), p->w->s));
  HSR_CHECK(linear(p, F, C, b.b[LB_ACT], p->w->wp[LLAMA_PARAM(l, LLAMA_DOWN)], b.out, 1));
  return piece_close(p, l, 3, 0);
}

/* selective: the RMSNorms' outputs (their statistics again, bit for bit),
 * the attention's probabilities from the kept rotated q and k, SwiGLU. */
static hsr_status block_recompute_selective(const pass *p, int l) {
  llama_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, F = (size_t)p->F;
  const float **W = w->wp;
  lbufs b = layer_bufs(p, l);
  float **B = b.b;
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm(DEV(p), N, C, b.x, W[LLAMA_PARAM(l, LLAMA_IN_NORM)], LLAMA_RMS_EPS, B[LB_H1], B[LB_R1]));
  TIMED(p, GPT_T_ATTN, attention_probs(DEV(p), p->B, p->T, p->H, p->G, p->D, B[LB_Q], B[LB_K], B[LB_ATT]));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm(DEV(p), N, C, B[LB_MID], W[LLAMA_PARAM(l, LLAMA_POST_NORM)], LLAMA_RMS_EPS, B[LB_H2],
                            B[LB_R2]));
  TIMED(p, GPT_T_OTHER, hsr_kernels_swiglu(DEV(p), N * F, B[LB_GT], B[LB_UP], B[LB_ACT]));
  return HSR_OK;
}

static hsr_status block_recompute(const pass *p, int l) {
  int policy = p->w->policy, unit = unit_of(p->c, l, 0);
  if (policy == HSR_RT_RECOMPUTE_NONE) return HSR_OK;
  if (p->b->recompute) HSR_CHECK(p->b->recompute(p->b->ctx, unit, 1));
  HSR_CHECK(policy == HSR_RT_RECOMPUTE_FULL ? block_fwd_body(p, l, 1) : block_recompute_selective(p, l));
  return p->b->recompute ? p->b->recompute(p->b->ctx, unit, 0) : HSR_OK;
}

/* w->dres holds d(output of block l) and becomes d(input of block l) */
static hsr_status block_bwd(const pass *p, int l) {
  llama_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, KV = (size_t)p->G * p->D, F = (size_t)p->F;
  const float **W = w->wp;
  float **G = w->gp;
  HSR_CHECK(piece_open(p, l, 3, 1));
  HSR_CHECK(block_recompute(p, l));
  lbufs b = layer_bufs(p, l);
  const float *x = b.x, *h1 = b.b[LB_H1], *q = b.b[LB_Q], *k = b.b[LB_K], *v = b.b[LB_V], *att = b.b[LB_ATT];
  const float *atty = b.b[LB_ATTY], *mid = b.b[LB_MID], *h2 = b.b[LB_H2], *gt = b.b[LB_GT], *up = b.b[LB_UP];
  const float *act = b.b[LB_ACT];
#define PW(kk) W[LLAMA_PARAM(l, kk)]
#define PG(kk) G[LLAMA_PARAM(l, kk)]
  HSR_CHECK(linear_bwd(p, F, C, act, PW(LLAMA_DOWN), w->dres, w->dact, PG(LLAMA_DOWN), 0));
  HSR_CHECK(piece_close(p, l, 3, 1));
  TIMED(p, GPT_T_OTHER, hsr_kernels_swiglu_bwd(DEV(p), N * F, gt, up, w->dact, w->dg, w->du));
  HSR_CHECK(piece_open(p, l, 2, 1));
  HSR_CHECK(linear_bwd(p, C, F, h2, PW(LLAMA_GATE), w->dg, w->dh, PG(LLAMA_GATE), 0));
  HSR_CHECK(linear_bwd(p, C, F, h2, PW(LLAMA_UP), w->du, w->dh, PG(LLAMA_UP), 1));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm_bwd(DEV(p), N, C, w->dh, mid, PW(LLAMA_POST_NORM), b.b[LB_R2], w->dres,
                                PG(LLAMA_POST_NORM)));
  HSR_CHECK(piece_close(p, l, 2, 1));
  HSR_CHECK(piece_open(p, l, 1, 1));
  HSR_CHECK(linear_bwd(p, C, C, atty, PW(LLAMA_O), w->dres, w->datty, PG(LLAMA_O), 0));
  HSR_CHECK(piece_close(p, l, 1, 1));
  TIMED(
      p, GPT_T_ATTN,
      llama_attention_bwd(DEV(p), p->B, p->T, p->H, p->G, p->D, q, k, v, att, w->datty, w->dq, w->dk, w->dv, w->datt));
  /* back through the rotation: the gradients of the unrotated q and k */
  TIMED(p, GPT_T_ATTN, hsr_kernels_rope(DEV(p), N, (size_t)p->T, (size_t)p->H, (size_t)p->D, w->rope, 1, w->dq));
  TIMED(p, GPT_T_ATTN, hsr_kernels_rope(DEV(p), N, (size_t)p->T, (size_t)p->G, (size_t)p->D, w->rope, 1, w->dk));
  HSR_CHECK(piece_open(p, l, 0, 1));
  HSR_CHECK(linear_bwd(p, C, C, h1, PW(LLAMA_Q), w->dq, w->dh, PG(LLAMA_Q), 0));
  HSR_CHECK(linear_bwd(p, C, KV, h1, PW(LLAMA_K), w->dk, w->dh, PG(LLAMA_K), 1));
  HSR_CHECK(linear_bwd(p, C, KV, h1, PW(LLAMA_V), w->dv, w->dh, PG(LLAMA_V), 1));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm_bwd(DEV(p), N, C, w->dh, x, PW(LLAMA_IN_NORM), b.b[LB_R1], w->dres, PG(LLAMA_IN_NORM)));
#undef PW
#undef PG
  return piece_close(p, l, 0, 1);
}

static hsr_status pass_init(pass *p, const gpt_cfg *c, llama_work *w, int B, int T, const gpt_binder *b) {
  if (B < 1 || B > w->B || T < 1 || T > w->T || (size_t)B * T > (size_t)w->B * w->T)
    return hsr_error(HSR_ERR_INVALID, "model: %d x %d tokens exceed the workspace (%d x %d)", B, T, w->B, w->T);
  if (c->n_layer != w->L || c->n_embd != w->C || c->n_head != w->H || c->vocab != w->V || llama_kv_heads(c) != w->G ||
      llama_ff(c) != w->F)
    return hsr_error(HSR_ERR_INVALID, "model: workspace made for another configuration");
  *p = (pass){c, w, w->gpu ? w->dev : w->host, b, B, T, B * T, w->C, w->H, w->G, w->D, w->F, w->V};
  return HSR_OK;
}

/* Embedding, blocks, final RMSNorm, head, loss; the root stays open when the
 * backward follows (keep). */
static hsr_status forward(const pass *p, const int32_t *tok, const int32_t *tgt, int keep, double *loss) {
  llama_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, V = (size_t)p->V;
  HSR_CHECK(p->b->acquire(p->b->ctx, 0, 0, w->wp, w->gp));
  /* no position table: every token its own 1-token row, at the zero position row */
  TIMED(p, GPT_T_OTHER, hsr_kernels_embed(DEV(p), N, 1, C, V, tok, w->wp[LLAMA_EMBED], w->zpos, w->res));
  for (int l = 0; l < p->c->n_layer; l++) HSR_CHECK(block_fwd(p, l));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm(DEV(p), N, C, LAYER(w->res, p->c->n_layer, N * C), w->wp[LLAMA_NORM], LLAMA_RMS_EPS, w->hf,
                            w->rf));
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 0, 1, N, V, C, 1.0f, w->hf, C, w->wp[LLAMA_HEAD], C, 0.0f, w->logits, V));
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
  llama_work *w = p->w;
  size_t C = (size_t)p->C, N = (size_t)p->N, V = (size_t)p->V;
  HSR_CHECK(release(p, 0, 0));
  HSR_CHECK(p->b->acquire(p->b->ctx, 0, 1, w->wp, w->gp));
  /* the head: logits now hold dloss/dlogits */
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 1, 0, V, C, N, 1.0f, w->logits, V, w->hf, C, 1.0f, w->gp[LLAMA_HEAD], C));
  TIMED(p, GPT_T_GEMM,
        hsr_kernels_gemm(DEV(p), 0, 0, N, C, V, 1.0f, w->logits, V, w->wp[LLAMA_HEAD], C, 0.0f, w->dh, C));
  TIMED(p, GPT_T_OTHER, hsr_device_memset(p->d, w->dres, 0, N * C * sizeof(float), w->s));
  TIMED(p, GPT_T_OTHER,
        hsr_kernels_rmsnorm_bwd(DEV(p), N, C, w->dh, LAYER(w->res, p->c->n_layer, N * C), w->wp[LLAMA_NORM], w->rf,
                                w->dres, w->gp[LLAMA_NORM]));
  for (int l = p->c->n_layer - 1; l >= 0; l--) HSR_CHECK(block_bwd(p, l));
  TIMED(p, GPT_T_OTHER, hsr_device_memset(p->d, w->dzpos, 0, C * sizeof(float), w->s)); /* the unused row's sink */
  TIMED(p, GPT_T_OTHER, hsr_kernels_embed_bwd(DEV(p), N, 1, C, V, tok, w->dres, w->gp[LLAMA_EMBED], w->dzpos));
  return release(p, 0, 1);
}

hsr_status llama_forward(const gpt_cfg *c, llama_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                         const gpt_binder *b, double *loss) {
  pass p;
  HSR_CHECK(pass_init(&p, c, w, B, T, b));
  return forward(&p, tokens, targets, 0, loss);
}

hsr_status llama_fwd_bwd(const gpt_cfg *c, llama_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                         const gpt_binder *b, double *loss) {
  pass p;
  HSR_CHECK(pass_init(&p, c, w, B, T, b));
  if (!targets) return hsr_error(HSR_ERR_INVALID, "model: a backward pass needs targets");
  HSR_CHECK(forward(&p, tokens, targets, 1, loss));
  return backward(&p, tokens);
}
