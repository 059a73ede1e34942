/* The GPT example model that `hsr train --model gpt` trains: GPT-2's
 * architecture on byte-level text (vocabulary 256 by default).
 *
 *   x = wte[tokens] + wpe[positions]
 *   L blocks: x += attn(ln_1(x)); x += mlp(ln_2(x))   (pre-LayerNorm, eps 1e-5)
 *     attn: fused qkv (c_attn [C, 3C]), causal multi-head softmax scaled by
 *           1/sqrt(C/H), output projection c_proj [C, C]
 *     mlp:  c_fc [C, 4C], GELU (tanh approximation), c_proj [4C, C]
 *   logits = ln_f(x) wte^T (the head is tied to the token embedding)
 *
 * Parameter names, shapes and [in, out] layouts are GPT-2's published ones
 * (wte.weight, h.0.attn.c_attn.weight, ...), so an exported safetensors file
 * loads into GPT-2 tools with a matching config. Compute: GEMMs through
 * hsr_kernels_gemm(_batched) (OpenBLAS / cuBLAS) and the layer kernels of
 * hsr/kernels.h, one code path for host and CUDA.
 *
 * Units: 0 = root (wte, wpe, ln_f); then one per block, or with wrap_linear
 * one per linear layer (4 per block; ln_1 rides with c_attn, ln_2 with
 * c_fc). wte is registered once, in the root, and the head uses it through
 * the root's view: its gradient gets both uses, accumulated once.
 *
 * gpt_cfg.arch = GPT_ARCH_LLAMA makes the same interface the Llama-style
 * model of llama.h (every gpt_* call below dispatches to it), so whatever is
 * written against gpt.h (the engine binding, the reference trainer, export,
 * eval, sample) serves both. */
#ifndef HSR_EXAMPLES_GPT_H
#define HSR_EXAMPLES_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/runtime.h"
#include "hsr/tune_ledger.h"

#define GPT_LN_EPS 1e-5f
#define GPT_MAX_LAYERS 256

/* The architecture: GPT-2's, or the Llama-style one of examples/llama.h
 * (zero-initialised configurations are GPT-2's). */
enum { GPT_ARCH_GPT2 = 0, GPT_ARCH_LLAMA = 1 };

typedef struct gpt_cfg {
  int n_layer, n_head, n_embd; /* L, H, C (C a multiple of H) */
  int n_ctx;                   /* rows of wpe: the longest sequence (llama: positions the rotary table covers) */
  int vocab;                   /* V (256: bytes) */
  uint64_t seed;               /* initial weights */
  int wrap_linear;             /* engine units per linear layer instead of per block */
  int arch;                    /* GPT_ARCH_* */
  int n_kv_head;               /* llama: key/value heads, dividing n_head (0: n_head) */
  int n_ff;                    /* llama: the MLP's width (0: llama_default_ff) */
  hsr_rt_recompute recompute;  /* activations kept for the backward (gpt only; block units): see gpt.c */
} gpt_cfg;

/* Parameters in registration order: the root's, then 12 per block. */
enum { GPT_WTE = 0, GPT_WPE, GPT_LNF_W, GPT_LNF_B, GPT_ROOT_PARAMS };
enum {
  GPT_LN1_W = 0,
  GPT_LN1_B,
  GPT_ATTN_W,
  GPT_ATTN_B,
  GPT_APROJ_W,
  GPT_APROJ_B,
  GPT_LN2_W,
  GPT_LN2_B,
  GPT_FC_W,
  GPT_FC_B,
  GPT_MPROJ_W,
  GPT_MPROJ_B,
  GPT_BLOCK_PARAMS
};
#define GPT_PARAM(l, k) (GPT_ROOT_PARAMS + (l)*GPT_BLOCK_PARAMS + (k))

/* A clear error naming what is wrong with the configuration. */
hsr_status gpt_cfg_check(const gpt_cfg *c);
int gpt_num_params(const gpt_cfg *c);
void gpt_param_name(const gpt_cfg *c, int i, char *buf, size_t len);
/* ndim (1 or 2) and shape; group 0 (2-D: decayed) or 1 (biases, LayerNorm). */
int gpt_param_shape(const gpt_cfg *c, int i, int64_t shape[2], int *group);
size_t gpt_param_numel(const gpt_cfg *c, int i);
size_t gpt_num_weights(const gpt_cfg *c); /* all parameters' elements */
/* GPT-2's initialisation, deterministic from the seed: N(0, 0.02), the two
 * residual projections N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm (1, 0). */
void gpt_param_init(const gpt_cfg *c, int i, float *out);
/* Engine units and the unit of each parameter (see above). */
int gpt_num_units(const gpt_cfg *c);
int gpt_param_unit(const gpt_cfg *c, int i);
void gpt_unit_name(const gpt_cfg *c, int u, char *buf, size_t len);
/* Training FLOPs per token (forward + backward = 3 x forward, matmuls and
 * attention), at sequence length T. */
double gpt_flops_per_token(const gpt_cfg *c, int T);

/* How the model gets a unit's weights: acquire opens engine unit `unit`'s
 * window and fills w[i] (and g[i], the gradient accumulators, when
 * backward) for its parameters i; release closes it. */
typedef struct gpt_binder {
  void *ctx;
  hsr_status (*acquire)(void *ctx, int unit, int backward, const float **w, float **g);
  hsr_status (*release)(void *ctx, int unit, int backward);
  /* optional (NULL: none): the recompute of `unit` inside its backward
   * window begins (begin 1) or ends (0) */
  hsr_status (*recompute)(void *ctx, int unit, int begin);
} gpt_binder;

/* Activations of a micro-batch of B sequences of up to T tokens, on a device
 * (dev NULL: host). CUDA: tokens, targets and every weight are device
 * memory; the loss is read back after a bounded stream sync. */
typedef struct gpt_work gpt_work;
hsr_status gpt_work_create(const gpt_cfg *c, int B, int T, hsr_device *dev, hsr_stream *s, gpt_work **out);
size_t gpt_work_bytes(const gpt_cfg *c, int B, int T);
/* The activations of a micro-batch of B x T under c->recompute, from the
 * shapes alone (gpt only): bytes kept per layer from its forward to its
 * backward, the one layer of scratch its recompute writes, the rest (the
 * final stream, ln_f, logits, the backward's scratch, the losses), and the
 * total the workspace holds (= gpt_work_bytes). */
typedef struct gpt_act_plan {
  size_t layer, scratch, fixed, total;
} gpt_act_plan;
hsr_status gpt_act_plan_of(const gpt_cfg *c, int B, int T, gpt_act_plan *out);
/* Bytes the workspace allocated, counted as it allocated them. */
size_t gpt_work_allocated(const gpt_work *w);
void gpt_work_free(gpt_work *w);
/* Seconds the model spent in its calls since the last reset, by kind: the
 * linear layers' and the head's GEMMs, attention (its batched GEMMs and
 * softmax), every other kernel and copy. Host time: on CUDA only the time
 * to queue the work. */
enum { GPT_T_GEMM = 0, GPT_T_ATTN, GPT_T_OTHER, GPT_T_COUNT };
void gpt_work_timing(gpt_work *w, double seconds[GPT_T_COUNT], int reset);
#define GPT_SYNC_TIMEOUT_S 600.0

/* Forward + backward of B x T tokens (t <= the workspace's T): gradients of
 * the mean loss over the B x T targets are ADDED to the accumulators. *loss
 * is that mean. */
hsr_status gpt_fwd_bwd(const gpt_cfg *c, gpt_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                       const gpt_binder *b, double *loss);
/* Forward only. With targets: *loss = mean loss, and gpt_row_loss gives the
 * per-token losses; without (NULL): the logits only (gpt_logits). */
hsr_status gpt_forward(const gpt_cfg *c, gpt_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                       const gpt_binder *b, double *loss);
const double *gpt_row_loss(const gpt_work *w); /* host memory, B x T */
const float *gpt_logits(const gpt_work *w);    /* device memory, B x T x V (forward without targets) */

/* The causal self-attention of B sequences of T tokens, one layer (exposed
 * for the tests): qkv is B T x 3C (q, k, v, each C = H heads), att keeps the
 * B H T x T probabilities, y is B T x C. The backward writes dqkv; scratch
 * holds H T x T. */
hsr_status gpt_attention(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv, float *att,
                         float *y);
hsr_status gpt_attention_bwd(hsr_device *d, hsr_stream *s, int B, int T, int C, int H, const float *qkv,
                             const float *att, const float *dy, float *dqkv, float *scratch);

/* ---- byte-level text ---- */
typedef struct gpt_data {
  const uint8_t *bytes;
  size_t len, split; /* [0, split) trains, [split, len) is the held-out tail */
  void *map;         /* mmap'd file (NULL: caller's buffer) */
  size_t map_len;
} gpt_data;
/* Maps a file; the last tenth (at least T + 1 bytes when the file allows)
 * is held out. A clear error when the file cannot hold one training window
 * of T + 1 bytes. */
hsr_status gpt_data_open(const char *path, int T, gpt_data *out);
/* The same over a caller's buffer (it must outlive the data). */
hsr_status gpt_data_wrap(const uint8_t *bytes, size_t len, int T, gpt_data *out);
void gpt_data_close(gpt_data *d);
/* Training window of global sample g (= step x global batch + index in the
 * batch: the same on any mesh, resumable from a sample index): T inputs and
 * the T next bytes, from a position hashed from (seed, g) in [0, split - T). */
void gpt_data_window(const gpt_data *d, uint64_t seed, int64_t g, int T, int32_t *in, int32_t *tgt);
/* Validation window i: bytes [split + i T, split + i T + T + 1). */
int gpt_data_val_windows(const gpt_data *d, int T);
void gpt_data_val_window(const gpt_data *d, int i, int T, int32_t *in, int32_t *tgt);

/* ---- the single-rank reference: whole batch, plain AdamW ---- */
typedef struct gpt_opt {
  float lr, beta1, beta2, eps, weight_decay;
  double clip; /* <= 0 off */
} gpt_opt;
typedef struct gpt_ref gpt_ref;
hsr_status gpt_ref_create(const gpt_cfg *c, const gpt_opt *o, int batch, int T, gpt_ref **out);
void gpt_ref_free(gpt_ref *r);
/* One step on the global batch of `batch` windows starting at global sample
 * g0, at learning rate lr (the schedule is the caller's). */
hsr_status gpt_ref_step(gpt_ref *r, const gpt_data *d, uint64_t data_seed, int64_t g0, float lr, double *loss,
                        double *grad_norm);
float *gpt_ref_param(gpt_ref *r, int i);
/* A binder over plain arrays w[i], g[i] (g may be NULL: forward only). */
typedef struct gpt_arrays {
  const gpt_cfg *c;
  float **w, **g;
} gpt_arrays;
gpt_binder gpt_arrays_binder(gpt_arrays *a);

/* ---- the model under the engine (gpt_rt.c) ---- */
typedef struct gpt_rt_ctx gpt_rt_ctx;
/* Registers units and parameters and commits; initial values from the seed
 * unless the caller loads them (gpt_rt_load). */
hsr_status gpt_rt_setup(const gpt_cfg *c, hsr_rt *rt, int init);
hsr_status gpt_rt_ctx_create(const gpt_cfg *c, hsr_rt *rt, hsr_dtype param_dtype, int T, gpt_rt_ctx **out);
void gpt_rt_ctx_free(gpt_rt_ctx *x);
/* One training step on this rank's slice of the global batch of `batch`
 * windows from global sample g0, in `micro` micro-batches, then hsr_rt_step
 * and hsr_rt_zero_grad. *loss is the global mean (all-reduced). */
hsr_status gpt_rt_train_step(gpt_rt_ctx *x, const gpt_data *d, uint64_t data_seed, int64_t g0, int batch, int micro,
                             double *loss, hsr_rt_step_info *info);
/* Mean loss over validation windows 0..n-1 (forward only, spread over the
 * data-parallel ranks, every rank the same number of passes); collective. */
hsr_status gpt_rt_val_loss(gpt_rt_ctx *x, const gpt_data *d, int n, double *loss);
/* The model's own time by kind (gpt_work_timing) since the last reset. */
void gpt_rt_timing(gpt_rt_ctx *x, double seconds[GPT_T_COUNT], int reset);
/* The lifecycle calls of one step (for the predicted ledger). */
hsr_status gpt_rt_program(const gpt_cfg *c, int micro, hsr_prog_call **calls, int *n);
/* Bytes of activations one micro-batch of B x T notes in the ledger. */
size_t gpt_rt_activation_bytes(const gpt_cfg *c, int B, int T);

#endif
