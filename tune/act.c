/* The activation model: a model's shape, its parameters and FLOPs, and the
 * bytes its activations take per rank per micro-batch under each recompute
 * policy. Three families: the transformer of Korthikanti et al. 2022 (gpt),
 * its adaptation to Llama (llama), and hsr's own GPT example (hsr-gpt,
 * exactly as examples/gpt.c keeps its buffers). docs/tuning.md has the
 * formulas. Pure arithmetic, in doubles: a 70B model's bytes exceed 2^53
 * never, its FLOPs do not need to be exact. */
#include <stdio.h>
#include <string.h>

#include "tune/tune.h"
#include "common/dtype_internal.h"

const char *tune_family_name(tune_family f) {
  static const char *const n[] = {"gpt", "llama", "hsr-gpt", "hsr-llama"};
  return f >= 0 && f <= HSR_TUNE_FAM_HSR_LLAMA ? n[f] : "?";
}

typedef struct preset {
  const char *name;
  tune_arch a;
} preset;

static const preset presets[] = {
    {"gpt2-124m", {HSR_TUNE_FAM_GPT, 12, 768, 12, 12, 3072, 1024, 50257, 1, 1024, HSR_BF16, ""}},
    {"llama3-8b", {HSR_TUNE_FAM_LLAMA, 32, 4096, 32, 8, 14336, 8192, 128256, 1, 0, HSR_BF16, ""}},
    {"llama3-70b", {HSR_TUNE_FAM_LLAMA, 80, 8192, 64, 8, 28672, 8192, 128256, 1, 0, HSR_BF16, ""}},
    {"gpt", {HSR_TUNE_FAM_GPT, 0, 0, 0, 0, 0, 0, 0, 1, 0, HSR_BF16, ""}},
    {"llama", {HSR_TUNE_FAM_LLAMA, 0, 0, 0, 0, 0, 0, 0, 1, 0, HSR_BF16, ""}},
    {"hsr-gpt", {HSR_TUNE_FAM_HSR_GPT, 0, 0, 0, 0, 0, 0, 0, 1, 0, HSR_F32, ""}},
    {"hsr-llama", {HSR_TUNE_FAM_HSR_LLAMA, 0, 0, 0, 0, 0, 0, 0, 1, 0, HSR_F32, ""}},
};

const char *tune_arch_names(void) { return "gpt2-124m, llama3-8b, llama3-70b, gpt, llama, hsr-gpt, hsr-llama"; }

static int is_llama(const tune_arch *a) {
  return a->family == HSR_TUNE_FAM_LLAMA || a->family == HSR_TUNE_FAM_HSR_LLAMA;
}

hsr_status tune_arch_preset(const char *name, tune_arch *out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "tune_arch_preset: NULL argument");
  for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
    if (!strcmp(name, presets[i].name)) {
      *out = presets[i].a;
      snprintf(out->name, sizeof out->name, "%s", presets[i].name);
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_INVALID, "--arch: unknown '%s' (valid: %s)", name ? name : "(null)", tune_arch_names());
}

/* Llama's MLP width: 8C/3 rounded up to a multiple of 256 (hsr's example: of 8). */
static int llama_ffn(int C, int mult) { return (int)(((8L * C / 3) + mult - 1) / mult * mult); }

hsr_status tune_arch_check(tune_arch *a) {
  if (!a) return hsr_error(HSR_ERR_INVALID, "tune_arch_check: NULL argument");
  const char *f = tune_family_name(a->family);
  static const char *const what[] = {"--layers", "--width", "--heads", "--seq", "--vocab", "--micro-batch"};
  int v[] = {a->layers, a->width, a->heads, a->seq, a->vocab, a->micro_batch};
  for (int i = 0; i < 6; i++)
    if (v[i] < 1)
      return hsr_error(HSR_ERR_INVALID,
                       "model shape (%s): %s missing or below 1 (give --layers, --width, --heads, "
                       "--seq, --vocab; --micro-batch defaults to 1)",
                       f, what[i]);
  if (a->width % a->heads)
    return hsr_error(HSR_ERR_INVALID, "model shape: --heads %d does not divide --width %d (valid widths: %d, %d, ...)",
                     a->heads, a->width, a->heads * (a->width / a->heads ? a->width / a->heads : 1),
                     a->heads * (a->width / a->heads + 1));
  if (!a->kv_heads) a->kv_heads = a->heads;
  if (!is_llama(a) && a->kv_heads != a->heads)
    return hsr_error(HSR_ERR_INVALID,
                     "model shape (%s): --kv-heads %d, but %s has multi-head attention (kv heads = "
                     "heads = %d; grouped-query attention is --arch llama)",
                     f, a->kv_heads, f, a->heads);
  if (a->kv_heads < 1 || a->kv_heads > a->heads || a->heads % a->kv_heads)
    return hsr_error(HSR_ERR_INVALID, "model shape: --kv-heads %d must divide --heads %d", a->kv_heads, a->heads);
  if (is_llama(a)) {
    if (!a->ffn) a->ffn = llama_ffn(a->width, a->family == HSR_TUNE_FAM_HSR_LLAMA ? 8 : 256);
  } else {
    if (a->ffn && a->ffn != 4 * a->width)
      return hsr_error(HSR_ERR_INVALID,
                       "model shape (%s): --ffn %d, but %s's MLP is 4 x width = %d (another width "
                       "is --arch llama)",
                       f, a->ffn, f, 4 * a->width);
    a->ffn = 4 * a->width;
  }
  if (a->ffn < 1) return hsr_error(HSR_ERR_INVALID, "model shape: --ffn %d must be at least 1", a->ffn);
  if (is_llama(a))
    a->ctx = 0;
  else if (a->ctx < a->seq)
    a->ctx = a->seq;
  if (a->act_dtype != HSR_F32 && a->act_dtype != HSR_BF16)
    return hsr_error(HSR_ERR_INVALID, "--act-dtype: %s (valid: f32, bf16)", dtype_name(a->act_dtype));
  if ((a->family == HSR_TUNE_FAM_HSR_GPT || a->family == HSR_TUNE_FAM_HSR_LLAMA) && a->act_dtype != HSR_F32)
    return hsr_error(HSR_ERR_INVALID, "--act-dtype %s: hsr's %s example keeps f32 activations (valid: f32)",
                     dtype_name(a->act_dtype), a->family == HSR_TUNE_FAM_HSR_GPT ? "GPT" : "Llama");
  return HSR_OK;
}

static double kv_width(const tune_arch *a) { return (double)a->width * a->kv_heads / a->heads; }

double tune_arch_layer_params(const tune_arch *a) {
  if (!a) return 0;
  double C = a->width, F = a->ffn;
  if (is_llama(a)) /* q, o: C x C; k, v: C x kv; gate, up, down: C x F; two RMSNorm weights */
    return 2 * C * C + 2 * C * kv_width(a) + 3 * C * F + 2 * C;
  /* c_attn C x 3C + 3C, c_proj C x C + C, c_fc C x 4C + 4C, c_proj 4C x C + C, two LayerNorms 2C each */
  return 4 * C * C + 2 * C * F + 9 * C + F;
}

double tune_arch_root_params(const tune_arch *a) {
  if (!a) return 0;
  double C = a->width, V = a->vocab;
  if (is_llama(a)) return 2 * V * C + C;     /* embedding, untied head, final RMSNorm */
  return V * C + (double)a->ctx * C + 2 * C; /* wte (tied head), wpe, ln_f */
}

double tune_arch_params(const tune_arch *a) {
  return a ? a->layers * tune_arch_layer_params(a) + tune_arch_root_params(a) : 0;
}

static double tokens(const tune_arch *a) { return (double)a->micro_batch * a->seq; }

/* The attention's QK^T and AV over the whole T x T square (the convention
 * of Megatron's FLOP count; a causal kernel does about half). */
double tune_arch_layer_flops(const tune_arch *a) {
  if (!a) return 0;
  return tokens(a) * (2 * tune_arch_layer_params(a) + 4.0 * a->seq * a->width);
}

double tune_arch_root_flops(const tune_arch *a) { return a ? tokens(a) * 2.0 * a->vocab * a->width : 0; }

/* Per token, in bytes: what a layer keeps with no recompute, and with rc. */
static void per_token(const tune_arch *a, hsr_rt_recompute rc, double *none, double *kept) {
  double C = a->width, F = a->ffn, H = a->heads, T = a->seq, e = (double)dtype_size(a->act_dtype);
  switch (a->family) {
  case HSR_TUNE_FAM_HSR_GPT: /* elements of examples/gpt.c's buffers, f32 */
    *none = 4 * (16 * C + H * T + 4);
    *kept = rc == HSR_RT_RECOMPUTE_FULL ? 4 * C : rc == HSR_RT_RECOMPUTE_SELECTIVE ? 4 * (10 * C + 4) : *none;
    return;
  case HSR_TUNE_FAM_HSR_LLAMA: { /* examples/llama.c's buffers, f32 */
    double kv = kv_width(a);
    /* block input, norm 1 out, its rstd, q, k, v (rotated), probabilities, attention out, residual, norm 2
     * out, its rstd, gate, up, SwiGLU out; selective recomputes the norms' outputs, the probabilities and
     * SwiGLU's output */
    *none = 4 * (6 * C + 2 * kv + H * T + 3 * F + 2);
    *kept = rc == HSR_RT_RECOMPUTE_FULL        ? 4 * C
            : rc == HSR_RT_RECOMPUTE_SELECTIVE ? 4 * (4 * C + 2 * kv + 2 * F + 2)
                                               : *none;
    return;
  }
  case HSR_TUNE_FAM_LLAMA: {
    double kv = kv_width(a);
    /* x, norm1 out, q k v after rotary, attention out, residual, norm2 out:
     * 6C + 2kv; gate, up, their product: 3F; f32: two rstd, logsumexp per head */
    *none = e * (6 * C + 2 * kv + 3 * F) + 4 * (2 + H);
    *kept = rc == HSR_RT_RECOMPUTE_FULL        ? e * C
            : rc == HSR_RT_RECOMPUTE_SELECTIVE ? e * (4 * C + 2 * kv + 2 * F) + 4 * (2 + H)
                                               : *none;
    return;
  }
  default: /* Korthikanti's 34 C + 5 H T at 16 bits: 16 C + 2 H T elements, 2 C + H T one-byte masks */
    *none = e * (16 * C + 2 * H * T) + (2 * C + H * T);
    *kept = rc == HSR_RT_RECOMPUTE_FULL ? e * C : rc == HSR_RT_RECOMPUTE_SELECTIVE ? e * 16 * C + 2 * C : *none;
    return;
  }
}

/* The shape with its defaults filled and checked (callers may pass one
 * unchecked), and the policy checked. */
static hsr_status arg_check(const tune_arch *a, hsr_rt_recompute rc, const char *fn, tune_arch *c) {
  if (!a) return hsr_error(HSR_ERR_INVALID, "%s: NULL argument", fn);
  if (rc < 0 || rc >= HSR_TUNE_RECOMPUTES)
    return hsr_error(HSR_ERR_INVALID, "%s: recompute %d (valid: none, full, selective)", fn, (int)rc);
  *c = *a;
  return tune_arch_check(c);
}

hsr_status tune_act_layer(const tune_arch *arch, hsr_rt_recompute rc, double *saved, double *scratch) {
  tune_arch c = {0}, *a = &c;
  HSR_CHECK(arg_check(arch, rc, "tune_act_layer", &c));
  double none, kept;
  per_token(a, rc, &none, &kept);
  if (saved) *saved = kept * tokens(a);
  if (scratch) *scratch = (none - kept) * tokens(a);
  return HSR_OK;
}

/* The root: hsr-gpt as examples/gpt.c allocates it (the last residual, ln_f
 * out and stats, the logits, the loss per row in f64, and the backward's
 * working buffers: residual, norm, qkv, attention-out and fc gradients of
 * one layer, 10 C per token, and one sequence's attention-probability
 * gradient H T^2); hsr-llama as examples/llama.c allocates it (the same,
 * with its own gradient buffers, the rotary table and the zero position
 * row); gpt and llama: the embedding output and the final norm's output
 * (the head's input), the logits in f32 and their gradient, and (gpt) the
 * embedding's dropout mask. */
static double root_bytes(const tune_arch *a) {
  double C = a->width, V = a->vocab, H = a->heads, T = a->seq, N = tokens(a);
  double e = (double)dtype_size(a->act_dtype);
  if (a->family == HSR_TUNE_FAM_HSR_GPT) return 4 * N * (2 * C + 2 + V) + 8 * N + 4 * (10 * C * N + H * T * T);
  if (a->family == HSR_TUNE_FAM_HSR_LLAMA) { /* also the rotary table (T x head dim) and the zero row and its sink */
    double kv = kv_width(a), F = a->ffn;
    return 4 * N * (2 * C + 1 + V) + 4 * (4 * N * C + 2 * N * kv + 3 * N * F + H * T * T + T * (C / H) + 2 * C) + 8 * N;
  }
  return N * (2 * C * e + 8 * V + (a->family == HSR_TUNE_FAM_GPT ? C : 0));
}

hsr_status tune_act_predict(const tune_arch *arch, hsr_rt_recompute rc, tune_act *out) {
  tune_arch c = {0}, *a = &c;
  HSR_CHECK(arg_check(arch, rc, "tune_act_predict", &c));
  if (!out) return hsr_error(HSR_ERR_INVALID, "tune_act_predict: NULL argument");
  HSR_CHECK(tune_act_layer(a, rc, &out->saved, &out->scratch));
  out->root = root_bytes(a);
  out->peak = a->layers * out->saved + out->scratch + out->root;
  return HSR_OK;
}

/* full: the layer's forward again, its FLOPs and the elementwise work
 * below (the forward does it too). selective: gpt, hsr-gpt and hsr-llama
 * recompute the attention's scores (QK^T, 2 T C FLOPs per token) and their
 * softmax, hsr-gpt also ln_1, ln_2 and GELU, hsr-llama its two norms and
 * SwiGLU's output; llama its two norms and SwiGLU's product (its fused
 * attention recomputes the scores in every policy). Elementwise work counts
 * as the bytes it reads and writes. */
hsr_status tune_recompute_cost(const tune_arch *arch, hsr_rt_recompute rc, double *flops, double *bytes) {
  tune_arch c = {0}, *a = &c;
  HSR_CHECK(arg_check(arch, rc, "tune_recompute_cost", &c));
  double C = a->width, F = a->ffn, H = a->heads, T = a->seq, N = tokens(a), e = (double)dtype_size(a->act_dtype);
  double fl = 0, by = 0;
  if (rc != HSR_RT_RECOMPUTE_NONE) {
    if (a->family == HSR_TUNE_FAM_LLAMA) {
      by = N * e * (4 * C + 3 * F); /* two norms: read C, write C; the product: read 2F, write F */
    } else if (a->family == HSR_TUNE_FAM_HSR_LLAMA) {
      fl = N * 2 * T * C;                       /* the probabilities from the kept q and k */
      by = N * 4 * (3 * H * T + 4 * C + 3 * F); /* softmax, the two norms, SwiGLU's output */
    } else {
      fl = N * 2 * T * C;
      by = N * e * 3 * H * T; /* softmax: read the scores, write the probabilities (and gpt's dropout) */
      if (a->family == HSR_TUNE_FAM_HSR_GPT) by += N * 4 * (4 * C + 8 * C); /* ln_1, ln_2; GELU 4C in, 4C out */
    }
  }
  if (rc == HSR_RT_RECOMPUTE_FULL) fl = tune_arch_layer_flops(a);
  if (flops) *flops = fl;
  if (bytes) *bytes = by;
  return HSR_OK;
}
