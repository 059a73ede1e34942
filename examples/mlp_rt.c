/* The example MLP under the engine: registration, views, one training step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

#define MLP_MAX_UNITS 1024

struct mlp_rt_ctx {
  mlp_cfg c;
  hsr_rt *rt;
  hsr_device *dev; /* the engine's: host or CUDA */
  hsr_stream *s;   /* the engine's compute stream (NULL on host) */
  int gpu;
  hsr_dtype pdt;
  int nunits;
  float **scratch; /* f32 copies of bf16 views, per (unit, k), on dev */
  mlp_work *w;
  int wn;
  mlp_feed *feed; /* the samples, made a micro-batch ahead on a helper thread */
  float *xd;      /* GPU: the micro-batch in device memory */
  int *yd;
  double *d64;
};

int mlp_rt_num_units(const mlp_cfg *c) { return 1 + (c->wrap_linear ? 2 : 1) * c->layers; }

/* Engine unit of parameter k of model unit u. */
static int rt_unit(const mlp_cfg *c, int u, int k) {
  if (u == 0 || !c->wrap_linear) return u;
  return 1 + 2 * (u - 1) + (k >= MLP_W2);
}

hsr_status mlp_rt_setup(const mlp_cfg *c, hsr_rt *rt) {
  if (c->layers < 0 || c->layers + 1 > MLP_MAX_UNITS)
    return hsr_error(HSR_ERR_INVALID, "model: %d layers (valid: 0 to %d)", c->layers, MLP_MAX_UNITS - 1);
  char name[64];
  for (int u = 0; u < mlp_num_units(c); u++) {
    int id = -1;
    for (int k = 0; k < mlp_unit_params(c, u); k++) {
      if (k == 0 || rt_unit(c, u, k) != rt_unit(c, u, k - 1)) {
        if (u == 0)
          snprintf(name, sizeof name, "root");
        else if (c->wrap_linear)
          snprintf(name, sizeof name, "blk%d.fc%d", u - 1, k >= MLP_W2 ? 2 : 1);
        else
          snprintf(name, sizeof name, "blk%d", u - 1);
        HSR_CHECK(hsr_rt_unit_add(rt, name, u == 0, &id));
      }
      int64_t shape[2];
      int g, nd = mlp_param_shape(c, u, k, shape, &g);
      mlp_param_name(u, k, name, sizeof name);
      HSR_CHECK(hsr_rt_param_add(rt, id, name, nd, shape, g));
    }
  }
  HSR_CHECK(hsr_rt_commit(rt));
  for (int u = 0; u < mlp_num_units(c); u++)
    for (int k = 0; k < mlp_unit_params(c, u); k++) {
      size_t n = mlp_param_numel(c, u, k);
      float *v = malloc((n ? n : 1) * sizeof(float));
      if (!v) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
      mlp_param_init(c, u, k, v);
      mlp_param_name(u, k, name, sizeof name);
      hsr_status st = hsr_rt_param_init(rt, name, v);
      free(v);
      HSR_CHECK(st);
    }
  return HSR_OK;
}

/* The engine units of model unit u: one, or two (per linear layer). */
static int rt_units(const mlp_cfg *c, int u, int out[2]) {
  out[0] = rt_unit(c, u, 0);
  out[1] = rt_unit(c, u, MLP_W2);
  return out[1] != out[0] ? 2 : 1;
}

static hsr_status acquire(void *ctx, int unit, int backward, mlp_unit_ptrs *p) {
  mlp_rt_ctx *x = ctx;
  int ids[2], n = rt_units(&x->c, unit, ids);
  for (int i = 0; i < n; i++)
    HSR_CHECK(backward ? hsr_rt_backward_begin(x->rt, ids[i]) : hsr_rt_forward_begin(x->rt, ids[i]));
  char name[64];
  for (int k = 0; k < mlp_unit_params(&x->c, unit); k++) {
    mlp_param_name(unit, k, name, sizeof name);
    void *v;
    HSR_CHECK(hsr_rt_param_view(x->rt, name, &v));
    if (x->pdt == HSR_F32) {
      p->w[k] = v;
    } else { /* bf16 weights, f32 compute */
      float *s = x->scratch[unit * 4 + k];
      HSR_CHECK(hsr_kernels_cast(x->dev, x->s, mlp_param_numel(&x->c, unit, k), v, HSR_BF16, s, HSR_F32));
      p->w[k] = s;
    }
    p->g[k] = NULL;
    if (backward) HSR_CHECK(hsr_rt_grad_view(x->rt, name, &p->g[k]));
  }
  return HSR_OK;
}

static hsr_status release(void *ctx, int unit, int backward) {
  mlp_rt_ctx *x = ctx;
  int ids[2], n = rt_units(&x->c, unit, ids);
  for (int i = 0; i < n; i++)
    HSR_CHECK(backward ? hsr_rt_backward_end(x->rt, ids[i]) : hsr_rt_forward_end(x->rt, ids[i]));
  return HSR_OK;
}

hsr_status mlp_rt_program(const mlp_cfg *c, int micro, hsr_prog_call **calls, int *n) {
  if (!c->wrap_linear) return hsr_tune_prog_nested(mlp_rt_num_units(c), 1, micro, HSR_RT_RECOMPUTE_NONE, calls, n);
  /* per linear layer: each block begins and ends its two units together (mlp_fwd_bwd's binder) */
  int len = micro * 4 * mlp_rt_num_units(c) + 1, k = 0, L = c->layers;
  hsr_prog_call *p = malloc((size_t)len * sizeof *p);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  for (int m = 0; m < micro; m++) {
    p[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, 0};
    for (int l = 0; l < L; l++) {
      for (int i = 0; i < 2; i++) p[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, 1 + 2 * l + i};
      for (int i = 0; i < 2; i++) p[k++] = (hsr_prog_call){HSR_PROG_FWD_END, 1 + 2 * l + i};
    }
    p[k++] = (hsr_prog_call){HSR_PROG_FWD_END, 0};
    p[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, 0};
    for (int l = L - 1; l >= 0; l--) {
      for (int i = 0; i < 2; i++) p[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, 1 + 2 * l + i};
      for (int i = 0; i < 2; i++) p[k++] = (hsr_prog_call){HSR_PROG_BWD_END, 1 + 2 * l + i};
    }
    p[k++] = (hsr_prog_call){HSR_PROG_BWD_END, 0};
  }
  p[k++] = (hsr_prog_call){HSR_PROG_STEP, -1};
  *calls = p;
  *n = k;
  return HSR_OK;
}

void mlp_rt_ctx_free(mlp_rt_ctx *x) {
  if (!x) return;
  if (x->s) hsr_stream_sync(x->s, MLP_SYNC_TIMEOUT_S); /* nothing queued still reads what is freed here */
  if (x->scratch)
    for (int i = 0; i < x->nunits * 4; i++) hsr_device_free(x->dev, x->scratch[i]);
  free(x->scratch);
  mlp_work_free(x->w);
  mlp_feed_free(x->feed);
  if (x->gpu) {
    hsr_device_free(x->dev, x->xd);
    hsr_device_free(x->dev, x->yd);
    hsr_device_free(x->dev, x->d64);
  }
  free(x);
}

hsr_status mlp_rt_ctx_create(const mlp_cfg *c, hsr_rt *rt, hsr_dtype param_dtype, mlp_rt_ctx **out) {
  mlp_rt_ctx *x = calloc(1, sizeof *x);
  if (!x) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  x->c = *c;
  x->rt = rt;
  x->pdt = param_dtype;
  x->nunits = mlp_num_units(c);
  x->dev = hsr_rt_device(rt);
  x->s = hsr_rt_compute_stream(rt);
  x->gpu = hsr_device_kind_of(x->dev) != HSR_DEVICE_HOST;
  hsr_status st = mlp_feed_create(c, &x->feed);
  if (st == HSR_OK && x->gpu) st = hsr_device_alloc(x->dev, 64, (void **)&x->d64);
  if (st == HSR_OK && param_dtype != HSR_F32) {
    x->scratch = calloc((size_t)x->nunits * 4, sizeof(float *));
    if (!x->scratch) st = hsr_error(HSR_ERR_NOMEM, "model: out of memory");
    for (int u = 0; u < x->nunits && st == HSR_OK; u++)
      for (int k = 0; k < 4 && st == HSR_OK; k++)
        st = hsr_device_alloc(x->dev, mlp_param_numel(c, u, k) * sizeof(float), (void **)&x->scratch[u * 4 + k]);
  }
  if (st != HSR_OK) {
    mlp_rt_ctx_free(x);
    return st;
  }
  *out = x;
  return HSR_OK;
}

/* Mean of one double over the world (NCCL: through a device word). */
static hsr_status world_mean(mlp_rt_ctx *x, double *v) {
  hsr_comm *w = hsr_rt_world(x->rt);
  if (hsr_comm_size(w) == 1) return HSR_OK;
  if (!x->gpu) return hsr_comm_allreduce(w, v, v, 1, HSR_F64, HSR_AVG, NULL);
  HSR_CHECK(hsr_device_copy(x->dev, x->d64, v, sizeof *v, x->s));
  HSR_CHECK(hsr_comm_set_stream(w, x->s)); /* in the compute stream's order; the engine never uses the world */
  hsr_status st = hsr_comm_allreduce(w, x->d64, x->d64, 1, HSR_F64, HSR_AVG, NULL);
  hsr_status un = hsr_comm_set_stream(w, NULL); /* the stream goes with this context: no binding outlives it */
  HSR_CHECK(st);
  HSR_CHECK(un);
  HSR_CHECK(hsr_device_copy(x->dev, v, x->d64, sizeof *v, x->s));
  return hsr_stream_sync(x->s, MLP_SYNC_TIMEOUT_S);
}

hsr_status mlp_rt_train_step(mlp_rt_ctx *x, int64_t step, int batch, int micro, double *loss, hsr_rt_step_info *info) {
  int N = hsr_rt_dp_size(x->rt), r = hsr_rt_dp_rank(x->rt);
  if (batch < 1 || micro < 1 || batch % (N * micro))
    return hsr_error(HSR_ERR_INVALID,
                     "global batch %d must be a multiple of data-parallel ranks x micro-batches = %d x %d = %d", batch,
                     N, micro, N * micro);
  int per = batch / N, mb = per / micro;
  if (mb > x->wn) {
    if (x->s) HSR_CHECK(hsr_stream_sync(x->s, MLP_SYNC_TIMEOUT_S));
    mlp_work_free(x->w);
    x->w = NULL;
    x->wn = 0;
    if (x->gpu) {
      hsr_device_free(x->dev, x->xd);
      hsr_device_free(x->dev, x->yd);
      x->xd = NULL, x->yd = NULL;
      HSR_CHECK(hsr_device_alloc(x->dev, (size_t)mb * x->c.in_dim * sizeof(float), (void **)&x->xd));
      HSR_CHECK(hsr_device_alloc(x->dev, (size_t)mb * sizeof(int), (void **)&x->yd));
    }
    HSR_CHECK(mlp_work_create_on(&x->c, mb, x->gpu ? x->dev : NULL, x->s, &x->w));
    x->wn = mb;
  }
  mlp_binder b = {x, acquire, release};
  double sum = 0;
  /* the activations of a micro-batch are alive from its forward to its backward */
  int64_t act = (int64_t)mlp_work_bytes(&x->c, mb);
  hsr_ledger *led = hsr_rt_ledger(x->rt);
  for (int m = 0; m < micro; m++) {
    double l;
    int64_t first = (int64_t)r * per + (int64_t)m * mb;
    const float *xs, *xh;
    const int *ys, *yh;
    HSR_CHECK(mlp_feed_get(x->feed, step, first, mb, &xh, &yh));
    /* this rank's next micro-batch is made while this one trains */
    HSR_CHECK(m + 1 < micro ? mlp_feed_ahead(x->feed, step, first + mb, mb)
                            : mlp_feed_ahead(x->feed, step + 1, (int64_t)r * per, mb));
    xs = xh, ys = yh;
    if (x->gpu) { /* pageable sources: the copies return once the host buffers may be reused */
      HSR_CHECK(hsr_device_copy(x->dev, x->xd, xh, (size_t)mb * x->c.in_dim * sizeof(float), x->s));
      HSR_CHECK(hsr_device_copy(x->dev, x->yd, yh, (size_t)mb * sizeof(int), x->s));
      xs = x->xd, ys = x->yd;
    }
    HSR_CHECK(hsr_ledger_note(led, act));
    hsr_status st = mlp_fwd_bwd(&x->c, x->w, xs, ys, mb, &b, &l);
    HSR_CHECK(hsr_ledger_note(led, -act));
    HSR_CHECK(st);
    sum += l;
  }
  HSR_CHECK(hsr_rt_step(x->rt, info));
  HSR_CHECK(hsr_rt_zero_grad(x->rt));
  double mean = sum / micro;
  HSR_CHECK(world_mean(x, &mean));
  if (loss) *loss = mean;
  return HSR_OK;
}
