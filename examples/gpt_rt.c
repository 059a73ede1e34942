/* The GPT example under the engine: registration, views, one training step,
 * the validation loss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

struct gpt_rt_ctx {
  gpt_cfg c;
  hsr_rt *rt;
  hsr_device *dev; /* the engine's: host or CUDA */
  hsr_stream *s;   /* its compute stream (NULL on host) */
  int gpu, np, nunits, T;
  hsr_dtype pdt;
  char (*names)[HSR_RT_NAME_MAX];
  int *ubeg, *uparam; /* parameters of unit u: uparam[ubeg[u] .. ubeg[u+1]) */
  float **scratch;    /* f32 copies of bf16 views, per parameter, on dev */
  gpt_work *w;
  int wb; /* sequences the workspace holds */
  int32_t *in, *tgt, *ind, *tgtd;
  double *d64;
};

hsr_status gpt_rt_setup(const gpt_cfg *c, hsr_rt *rt, int init) {
  HSR_CHECK(gpt_cfg_check(c));
  char name[HSR_RT_NAME_MAX];
  int id = -1, cur = -1;
  for (int i = 0; i < gpt_num_params(c); i++) {
    int u = gpt_param_unit(c, i);
    if (u != cur) { /* parameters come unit by unit in registration order */
      gpt_unit_name(c, u, name, sizeof name);
      HSR_CHECK(hsr_rt_unit_add(rt, name, u == 0, &id));
      cur = u;
    }
    int64_t shape[2];
    int g, nd = gpt_param_shape(c, i, shape, &g);
    gpt_param_name(c, i, name, sizeof name);
    HSR_CHECK(hsr_rt_param_add(rt, id, name, nd, shape, g));
  }
  HSR_CHECK(hsr_rt_commit(rt));
  if (!init) return HSR_OK;
  for (int i = 0; i < gpt_num_params(c); i++) {
    float *v = malloc((gpt_param_numel(c, i) + 1) * sizeof(float));
    if (!v) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
    gpt_param_init(c, i, v);
    gpt_param_name(c, i, name, sizeof name);
    hsr_status st = hsr_rt_param_init(rt, name, v);
    free(v);
    HSR_CHECK(st);
  }
  return HSR_OK;
}

static hsr_status acquire(void *ctx, int unit, int backward, const float **w, float **g) {
  gpt_rt_ctx *x = ctx;
  HSR_CHECK(backward ? hsr_rt_backward_begin(x->rt, unit) : hsr_rt_forward_begin(x->rt, unit));
  for (int j = x->ubeg[unit]; j < x->ubeg[unit + 1]; j++) {
    int i = x->uparam[j];
    void *v;
    HSR_CHECK(hsr_rt_param_view(x->rt, x->names[i], &v));
    if (x->pdt == HSR_F32) {
      w[i] = v;
    } else { /* bf16 weights, f32 compute */
      HSR_CHECK(hsr_kernels_cast(x->dev, x->s, gpt_param_numel(&x->c, i), v, HSR_BF16, x->scratch[i], HSR_F32));
      w[i] = x->scratch[i];
    }
    g[i] = NULL;
    if (backward) HSR_CHECK(hsr_rt_grad_view(x->rt, x->names[i], &g[i]));
  }
  return HSR_OK;
}

static hsr_status release(void *ctx, int unit, int backward) {
  gpt_rt_ctx *x = ctx;
  return backward ? hsr_rt_backward_end(x->rt, unit) : hsr_rt_forward_end(x->rt, unit);
}

static hsr_status recompute(void *ctx, int unit, int begin) {
  gpt_rt_ctx *x = ctx;
  return begin ? hsr_rt_recompute_begin(x->rt, unit) : hsr_rt_recompute_end(x->rt, unit);
}

void gpt_rt_ctx_free(gpt_rt_ctx *x) {
  if (!x) return;
  if (x->s) hsr_stream_sync(x->s, GPT_SYNC_TIMEOUT_S); /* nothing queued still reads what is freed here */
  if (x->scratch)
    for (int i = 0; i < x->np; i++) hsr_device_free(x->dev, x->scratch[i]);
  free(x->scratch);
  gpt_work_free(x->w);
  free(x->in), free(x->tgt), free(x->names), free(x->ubeg), free(x->uparam);
  if (x->gpu) {
    hsr_device_free(x->dev, x->ind);
    hsr_device_free(x->dev, x->tgtd);
    hsr_device_free(x->dev, x->d64);
  }
  free(x);
}

hsr_status gpt_rt_ctx_create(const gpt_cfg *c, hsr_rt *rt, hsr_dtype param_dtype, int T, gpt_rt_ctx **out) {
  HSR_CHECK(gpt_cfg_check(c));
  if (T < 1 || T > c->n_ctx)
    return hsr_error(HSR_ERR_INVALID, "model: sequence length %d (valid: 1 to the context %d)", T, c->n_ctx);
  gpt_rt_ctx *x = calloc(1, sizeof *x);
  if (!x) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  x->c = *c, x->rt = rt, x->pdt = param_dtype, x->T = T;
  x->np = gpt_num_params(c), x->nunits = gpt_num_units(c);
  x->dev = hsr_rt_device(rt);
  x->s = hsr_rt_compute_stream(rt);
  x->gpu = hsr_device_kind_of(x->dev) != HSR_DEVICE_HOST;
  x->names = calloc((size_t)x->np, sizeof *x->names);
  x->ubeg = calloc((size_t)x->nunits + 1, sizeof *x->ubeg);
  x->uparam = calloc((size_t)x->np, sizeof *x->uparam);
  hsr_status st = x->names && x->ubeg && x->uparam ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  for (int i = 0; st == HSR_OK && i < x->np; i++) {
    gpt_param_name(c, i, x->names[i], sizeof x->names[i]);
    x->ubeg[gpt_param_unit(c, i) + 1]++;
  }
  for (int u = 0; st == HSR_OK && u < x->nunits; u++) x->ubeg[u + 1] += x->ubeg[u];
  for (int i = 0, k = 0; st == HSR_OK && i < x->np; i++) x->uparam[k++] = i; /* units are contiguous */
  if (st == HSR_OK && x->gpu) st = hsr_device_alloc(x->dev, 64, (void **)&x->d64);
  if (st == HSR_OK && param_dtype != HSR_F32) {
    x->scratch = calloc((size_t)x->np, sizeof(float *));
    if (!x->scratch) st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
    for (int i = 0; i < x->np && st == HSR_OK; i++)
      st = hsr_device_alloc(x->dev, gpt_param_numel(c, i) * sizeof(float) + 4, (void **)&x->scratch[i]);
  }
  if (st != HSR_OK) {
    gpt_rt_ctx_free(x);
    return st;
  }
  *out = x;
  return HSR_OK;
}

/* A workspace and token buffers for micro-batches of b sequences. */
static hsr_status ensure_work(gpt_rt_ctx *x, int b) {
  if (b <= x->wb) return HSR_OK;
  if (x->s) HSR_CHECK(hsr_stream_sync(x->s, GPT_SYNC_TIMEOUT_S));
  gpt_work_free(x->w);
  free(x->in), free(x->tgt);
  x->w = NULL, x->wb = 0;
  size_t n = (size_t)b * x->T;
  x->in = malloc(n * sizeof(int32_t));
  x->tgt = malloc(n * sizeof(int32_t));
  if (!x->in || !x->tgt) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  if (x->gpu) {
    hsr_device_free(x->dev, x->ind), hsr_device_free(x->dev, x->tgtd);
    x->ind = x->tgtd = NULL;
    HSR_CHECK(hsr_device_alloc(x->dev, n * sizeof(int32_t), (void **)&x->ind));
    HSR_CHECK(hsr_device_alloc(x->dev, n * sizeof(int32_t), (void **)&x->tgtd));
  }
  HSR_CHECK(gpt_work_create(&x->c, b, x->T, x->gpu ? x->dev : NULL, x->s, &x->w));
  x->wb = b;
  return HSR_OK;
}

/* The tokens of the current micro-batch where the model reads them. */
static hsr_status stage_tokens(gpt_rt_ctx *x, int b, const int32_t **in, const int32_t **tgt) {
  *in = x->in, *tgt = x->tgt;
  if (!x->gpu) return HSR_OK;
  size_t bytes = (size_t)b * x->T * sizeof(int32_t); /* pageable: the copies return once the sources may be reused */
  HSR_CHECK(hsr_device_copy(x->dev, x->ind, x->in, bytes, x->s));
  HSR_CHECK(hsr_device_copy(x->dev, x->tgtd, x->tgt, bytes, x->s));
  *in = x->ind, *tgt = x->tgtd;
  return HSR_OK;
}

/* In-place reduction of doubles over the world (NCCL: through device words). */
static hsr_status world_reduce(gpt_rt_ctx *x, double *v, int n, hsr_redop op) {
  hsr_comm *w = hsr_rt_world(x->rt);
  if (hsr_comm_size(w) == 1) return HSR_OK;
  if (!x->gpu) return hsr_comm_allreduce(w, v, v, (size_t)n, HSR_F64, op, NULL);
  HSR_CHECK(hsr_device_copy(x->dev, x->d64, v, (size_t)n * sizeof *v, x->s));
  HSR_CHECK(hsr_comm_set_stream(w, x->s)); /* in the compute stream's order; the engine never uses the world */
  hsr_status st = hsr_comm_allreduce(w, x->d64, x->d64, (size_t)n, HSR_F64, op, NULL);
  hsr_status un = hsr_comm_set_stream(w, NULL); /* the stream goes with this context: no binding outlives it */
  HSR_CHECK(st);
  HSR_CHECK(un);
  HSR_CHECK(hsr_device_copy(x->dev, v, x->d64, (size_t)n * sizeof *v, x->s));
  return hsr_stream_sync(x->s, GPT_SYNC_TIMEOUT_S);
}

void gpt_rt_timing(gpt_rt_ctx *x, double seconds[GPT_T_COUNT], int reset) {
  for (int i = 0; i < GPT_T_COUNT; i++) seconds[i] = 0;
  if (x->w) gpt_work_timing(x->w, seconds, reset);
}

size_t gpt_rt_activation_bytes(const gpt_cfg *c, int B, int T) { return gpt_work_bytes(c, B, T); }

hsr_status gpt_rt_train_step(gpt_rt_ctx *x, const gpt_data *d, uint64_t data_seed, int64_t g0, int batch, int micro,
                             double *loss, hsr_rt_step_info *info) {
  int N = hsr_rt_dp_size(x->rt), r = hsr_rt_dp_rank(x->rt), T = x->T;
  if (batch < 1 || micro < 1 || batch % (N * micro))
    return hsr_error(HSR_ERR_INVALID,
                     "global batch %d must be a multiple of data-parallel ranks x micro-batches = %d x %d = %d", batch,
                     N, micro, N * micro);
  int per = batch / N, mb = per / micro;
  HSR_CHECK(ensure_work(x, mb));
  gpt_binder b = {x, acquire, release, recompute};
  int64_t act = (int64_t)gpt_work_allocated(x->w); /* alive from a micro-batch's forward to its backward: as allocated */
  hsr_ledger *led = hsr_rt_ledger(x->rt);
  double sum = 0;
  for (int m = 0; m < micro; m++) {
    int64_t first = g0 + (int64_t)r * per + (int64_t)m * mb;
    for (int s = 0; s < mb; s++)
      gpt_data_window(d, data_seed, first + s, T, x->in + (size_t)s * T, x->tgt + (size_t)s * T);
    const int32_t *in, *tgt;
    HSR_CHECK(stage_tokens(x, mb, &in, &tgt));
    double l = 0;
    HSR_CHECK(hsr_ledger_note(led, act));
    hsr_status st = gpt_fwd_bwd(&x->c, x->w, in, tgt, mb, T, &b, &l);
    HSR_CHECK(hsr_ledger_note(led, -act));
    HSR_CHECK(st);
    sum += l;
  }
  HSR_CHECK(hsr_rt_step(x->rt, info));
  HSR_CHECK(hsr_rt_zero_grad(x->rt));
  double mean = sum / micro;
  HSR_CHECK(world_reduce(x, &mean, 1, HSR_AVG));
  if (loss) *loss = mean;
  return HSR_OK;
}

hsr_status gpt_rt_val_loss(gpt_rt_ctx *x, const gpt_data *d, int n, double *loss) {
  int N = hsr_rt_dp_size(x->rt), r = hsr_rt_dp_rank(x->rt), T = x->T;
  if (n < 1 || n > gpt_data_val_windows(d, T))
    return hsr_error(HSR_ERR_INVALID, "validation: %d windows of %d + 1 bytes (the held-out tail holds %d)", n, T,
                     gpt_data_val_windows(d, T));
  int mb = x->wb > 0 ? x->wb : 1;
  HSR_CHECK(ensure_work(x, mb));
  gpt_binder b = {x, acquire, release, recompute};
  /* pass p gives rank r windows [(p N + r) mb, +mb); every rank runs every
   * pass (the gathers are collective), one that has no window left runs a
   * dummy one and drops it */
  int passes = (n + N * mb - 1) / (N * mb);
  double acc[2] = {0, 0}; /* loss sum over tokens, tokens */
  for (int p = 0; p < passes; p++) {
    int first = (p * N + r) * mb, have = n - first < mb ? n - first : mb;
    if (have < 0) have = 0;
    for (int s = 0; s < mb; s++)
      gpt_data_val_window(d, s < have ? first + s : 0, T, x->in + (size_t)s * T, x->tgt + (size_t)s * T);
    const int32_t *in, *tgt;
    HSR_CHECK(stage_tokens(x, mb, &in, &tgt));
    double l;
    int64_t act = (int64_t)gpt_work_allocated(x->w);
    HSR_CHECK(hsr_ledger_note(hsr_rt_ledger(x->rt), act));
    hsr_status st = gpt_forward(&x->c, x->w, in, tgt, mb, T, &b, &l);
    HSR_CHECK(hsr_ledger_note(hsr_rt_ledger(x->rt), -act));
    HSR_CHECK(st);
    const double *rl = gpt_row_loss(x->w);
    for (size_t i = 0; i < (size_t)have * T; i++) acc[0] += rl[i];
    acc[1] += (double)have * T;
  }
  HSR_CHECK(world_reduce(x, acc, 2, HSR_SUM));
  *loss = acc[0] / acc[1];
  return HSR_OK;
}

hsr_status gpt_rt_program(const gpt_cfg *c, int micro, hsr_prog_call **calls, int *n) {
  if (!c->wrap_linear) return hsr_tune_prog_nested(gpt_num_units(c), 1, micro, c->recompute, calls, n);
  /* per linear layer: each unit's window closes before the next opens (gpt.c's pieces) */
  int U = gpt_num_units(c), len = micro * 4 * U + 1, k = 0;
  hsr_prog_call *p = malloc((size_t)len * sizeof *p);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  for (int m = 0; m < micro; m++) {
    p[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, 0};
    for (int u = 1; u < U; u++) {
      p[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, u};
      p[k++] = (hsr_prog_call){HSR_PROG_FWD_END, u};
    }
    p[k++] = (hsr_prog_call){HSR_PROG_FWD_END, 0};
    p[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, 0};
    for (int u = U - 1; u >= 1; u--) {
      p[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, u};
      p[k++] = (hsr_prog_call){HSR_PROG_BWD_END, u};
    }
    p[k++] = (hsr_prog_call){HSR_PROG_BWD_END, 0};
  }
  p[k++] = (hsr_prog_call){HSR_PROG_STEP, -1};
  *calls = p;
  *n = k;
  return HSR_OK;
}
