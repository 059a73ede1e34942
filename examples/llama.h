/* The Llama-style model that `hsr train --model llama` trains, the second
 * architecture behind gpt.h's interface (gpt_cfg.arch = GPT_ARCH_LLAMA: the
 * gpt_* calls dispatch here, so the engine binding, the reference trainer,
 * the data, export, eval and sample are the GPT's).
 *
 *   x = embed_tokens[tokens]                  (no position table)
 *   L blocks: x += attn(rmsnorm_1(x)); x += mlp(rmsnorm_2(x))   (eps 1e-5)
 *     attn: q = h Wq^T (H heads of D = C/H), k = h Wk^T, v = h Wv^T (G
 *           key/value heads, G dividing H: query head j reads key/value
 *           head j / (H/G)); rotary embeddings on q and k (theta 10000,
 *           transformers' rotate-half pairs (i, i + D/2)); causal softmax
 *           scaled by 1/sqrt(D); output projection Wo
 *     mlp:  down(silu(gate(h)) * up(h)), width F
 *   logits = rmsnorm(x) lm_head^T             (untied; no biases anywhere)
 *
 * Tensor names, shapes and [out, in] layouts are transformers'
 * LlamaForCausalLM ones (model.embed_tokens.weight [V, C],
 * model.layers.N.self_attn.q_proj.weight [C, C], k_proj / v_proj [G D, C],
 * o_proj [C, C], mlp.gate_proj / up_proj [F, C], down_proj [C, F],
 * input_layernorm / post_attention_layernorm [C], model.norm.weight,
 * lm_head.weight [V, C]). Initialisation: N(0, 0.02) for every matrix
 * (transformers' initializer_range), RMSNorm weights 1.
 *
 * Units: 0 = root (embed_tokens, norm, lm_head), then one per block, or
 * with wrap_linear four per block like the GPT's: input_layernorm with
 * q/k/v, o_proj, post_attention_layernorm with gate/up, down_proj. */
#ifndef HSR_EXAMPLES_LLAMA_H
#define HSR_EXAMPLES_LLAMA_H

#include "gpt.h"

#define LLAMA_RMS_EPS 1e-5f
#define LLAMA_ROPE_THETA 10000.0f

enum { LLAMA_EMBED = 0, LLAMA_NORM, LLAMA_HEAD, LLAMA_ROOT_PARAMS };
enum {
  LLAMA_IN_NORM = 0,
  LLAMA_Q,
  LLAMA_K,
  LLAMA_V,
  LLAMA_O,
  LLAMA_POST_NORM,
  LLAMA_GATE,
  LLAMA_UP,
  LLAMA_DOWN,
  LLAMA_BLOCK_PARAMS
};
#define LLAMA_PARAM(l, k) (LLAMA_ROOT_PARAMS + (l)*LLAMA_BLOCK_PARAMS + (k))

/* The MLP width when n_ff is 0: 8C/3 rounded up to a multiple of 8
 * (Llama's 2/3 of 4C, so SwiGLU's three matrices cost the GELU MLP's two). */
int llama_default_ff(int C);
int llama_kv_heads(const gpt_cfg *c);
int llama_ff(const gpt_cfg *c);

hsr_status llama_cfg_check(const gpt_cfg *c);
int llama_num_params(const gpt_cfg *c);
void llama_param_name(const gpt_cfg *c, int i, char *buf, size_t len);
int llama_param_shape(const gpt_cfg *c, int i, int64_t shape[2], int *group);
void llama_param_init(const gpt_cfg *c, int i, float *out);
int llama_num_units(const gpt_cfg *c);
int llama_param_unit(const gpt_cfg *c, int i);
void llama_unit_name(const gpt_cfg *c, int u, char *buf, size_t len);
double llama_flops_per_token(const gpt_cfg *c, int T);

/* Activations (gpt_work holds one of these for a llama configuration). */
typedef struct llama_work llama_work;
hsr_status llama_work_create(const gpt_cfg *c, int B, int T, hsr_device *dev, hsr_stream *s, llama_work **out);
size_t llama_work_bytes(const gpt_cfg *c, int B, int T);
/* gpt_act_plan_of's figures for the llama (llama.c keeps per policy what gpt.c does) and the bytes allocated. */
hsr_status llama_act_plan(const gpt_cfg *c, int B, int T, gpt_act_plan *out);
size_t llama_work_allocated(const llama_work *w);
void llama_work_free(llama_work *w);
void llama_work_timing(llama_work *w, double seconds[GPT_T_COUNT], int reset);
const double *llama_row_loss(const llama_work *w);
const float *llama_logits(const llama_work *w);
hsr_status llama_fwd_bwd(const gpt_cfg *c, llama_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                         const gpt_binder *b, double *loss);
hsr_status llama_forward(const gpt_cfg *c, llama_work *w, const int32_t *tokens, const int32_t *targets, int B, int T,
                         const gpt_binder *b, double *loss);

/* Grouped-query causal attention of B sequences of T tokens (exposed for
 * the tests): q is B T x H D, k and v B T x G D (rotary already applied),
 * att keeps the B H T x T probabilities, y is B T x H D. The backward
 * writes dq, dk, dv; scratch holds H T x T. */
hsr_status llama_attention(hsr_device *d, hsr_stream *s, int B, int T, int H, int G, int D, const float *q,
                           const float *k, const float *v, float *att, float *y);
hsr_status llama_attention_bwd(hsr_device *d, hsr_stream *s, int B, int T, int H, int G, int D, const float *q,
                               const float *k, const float *v, const float *att, const float *dy, float *dq, float *dk,
                               float *dv, float *scratch);

#endif
