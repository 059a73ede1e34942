/* The example model that `hsr train` trains: a stack of residual MLP blocks
 * (Linear d->4d, GELU, Linear 4d->d, + input) between an input embedding
 * (Linear in->d) and a softmax cross-entropy head (Linear d->classes), on
 * synthetic data labelled by a fixed random teacher. CPU compute (OpenBLAS)
 * or CUDA (cuBLAS GEMMs and the kernels of mlp_cuda.cu), one code path.
 *
 * Units: 0 = root (embedding + head), 1..L = blocks. The same forward /
 * backward code runs under the engine (views of gathered units) and in the
 * single-rank reference trainer (plain arrays); only how a unit's weights are
 * obtained differs (mlp_binder). */
#ifndef HSR_EXAMPLES_MLP_H
#define HSR_EXAMPLES_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/runtime.h"
#include "hsr/tune_ledger.h"

typedef struct mlp_cfg {
  int layers, dim, in_dim, classes;
  uint64_t seed;
  int wrap_linear; /* under the engine: one unit per linear layer (2 per block) instead of one per block */
} mlp_cfg;

/* Parameters of the model, in registration order. */
enum { MLP_EW = 0, MLP_EB, MLP_HW, MLP_HB, MLP_ROOT_PARAMS };
enum { MLP_W1 = 0, MLP_B1, MLP_W2, MLP_B2, MLP_BLOCK_PARAMS };

/* Pointers to one unit's weights and gradient accumulators (f32). */
typedef struct mlp_unit_ptrs {
  const float *w[4];
  float *g[4];
} mlp_unit_ptrs;

/* How the driver obtains a unit's weights: acquire fills p (weights, and
 * gradients when backward), release ends the window. */
typedef struct mlp_binder {
  void *ctx;
  hsr_status (*acquire)(void *ctx, int unit, int backward, mlp_unit_ptrs *p);
  hsr_status (*release)(void *ctx, int unit, int backward);
} mlp_binder;

/* Number of parameters of unit u and their names/shapes. */
int mlp_num_units(const mlp_cfg *c);
int mlp_unit_params(const mlp_cfg *c, int unit);
void mlp_param_name(int unit, int k, char *buf, size_t len);
/* ndim (1 or 2), shape; group 0 (weights, decayed) or 1 (biases, not decayed). */
int mlp_param_shape(const mlp_cfg *c, int unit, int k, int64_t shape[2], int *group);
size_t mlp_param_numel(const mlp_cfg *c, int unit, int k);
/* Deterministic initial values. */
void mlp_param_init(const mlp_cfg *c, int unit, int k, float *out);
/* Samples [first, first+n) of the global batch of `step`: x (n x in_dim), y (n).
 * A generator keeps the teacher (drawn once); mlp_data makes one per call. */
typedef struct mlp_gen mlp_gen;
hsr_status mlp_gen_create(const mlp_cfg *c, mlp_gen **out);
void mlp_gen_free(mlp_gen *g);
void mlp_gen_batch(mlp_gen *g, int64_t step, int64_t first, int n, float *x, int *y);
void mlp_data(const mlp_cfg *c, int64_t step, int64_t first, int n, float *x, int *y);
/* The same samples made a micro-batch ahead on a helper thread (mlp_feed.c):
 * get returns (step, first, n) in buffers valid until the next get, made
 * ahead when `ahead` asked for exactly them, else now. */
typedef struct mlp_feed mlp_feed;
hsr_status mlp_feed_create(const mlp_cfg *c, mlp_feed **out);
void mlp_feed_free(mlp_feed *f);
hsr_status mlp_feed_get(mlp_feed *f, int64_t step, int64_t first, int n, const float **x, const int **y);
hsr_status mlp_feed_ahead(mlp_feed *f, int64_t step, int64_t first, int n);
/* OpenBLAS threads (1 when several ranks share the cores). */
void mlp_blas_threads(int n);

/* Scratch activations for a micro-batch of n samples. */
typedef struct mlp_work mlp_work;
hsr_status mlp_work_create(const mlp_cfg *c, int n, mlp_work **out);
/* The same on a device: activations in its memory, work queued on stream s
 * (CUDA: x, y and every weight/gradient pointer are device memory; the
 * per-micro-batch loss is read back after a bounded stream sync). */
hsr_status mlp_work_create_on(const mlp_cfg *c, int n, hsr_device *dev, hsr_stream *s, mlp_work **out);
#define MLP_SYNC_TIMEOUT_S 600.0
/* Bytes of that scratch (the activations of one micro-batch). */
size_t mlp_work_bytes(const mlp_cfg *c, int n);
void mlp_work_free(mlp_work *w);
/* Forward + backward of one micro-batch: gradients of the mean loss over the
 * n samples are ADDED to the gradient accumulators. *loss = mean loss. */
hsr_status mlp_fwd_bwd(const mlp_cfg *c, mlp_work *w, const float *x, const int *y, int n, const mlp_binder *b,
                       double *loss);

/* ---- the single-rank reference: whole batch, plain AdamW ---- */
typedef struct mlp_ref mlp_ref;
typedef struct mlp_opt {
  float lr, beta1, beta2, eps, weight_decay;
  double clip; /* <= 0 off */
} mlp_opt;
hsr_status mlp_ref_create(const mlp_cfg *c, const mlp_opt *o, int batch, mlp_ref **out);
void mlp_ref_free(mlp_ref *r);
/* One step on the whole global batch of step `step` (0-based). */
hsr_status mlp_ref_step(mlp_ref *r, int64_t step, double *loss, double *grad_norm);
/* The same on some samples of the step's global batch only: nr ranges
 * [first, first + count) (the slices of the replica groups that were live). */
hsr_status mlp_ref_step_ranges(mlp_ref *r, int64_t step, int nr, const int64_t *first, const int *count, double *loss,
                               double *grad_norm);
const float *mlp_ref_param(const mlp_ref *r, int unit, int k);
/* The gradient of the last step (of the mean loss over the whole batch, before clipping). */
const float *mlp_ref_grad(const mlp_ref *r, int unit, int k);

/* ---- the model under the engine ---- */
/* Registers units and parameters, commits, initializes the parameters. */
hsr_status mlp_rt_setup(const mlp_cfg *c, hsr_rt *rt);
typedef struct mlp_rt_ctx mlp_rt_ctx;
hsr_status mlp_rt_ctx_create(const mlp_cfg *c, hsr_rt *rt, hsr_dtype param_dtype, mlp_rt_ctx **out);
void mlp_rt_ctx_free(mlp_rt_ctx *x);
/* One training step: this rank's slice of the global batch (batch / dp ranks
 * samples) in `micro` micro-batches, then hsr_rt_step. *loss is the global
 * mean loss (all-reduced over the world). */
/* Engine units of the model: 1 + layers (wrap per block) or 1 + 2 x layers
 * (per linear layer); unit 0 is the root. */
int mlp_rt_num_units(const mlp_cfg *c);
/* The lifecycle calls of one training step (for the predicted ledger,
 * hsr/tune_ledger.h); *calls malloc'd. */
hsr_status mlp_rt_program(const mlp_cfg *c, int micro, hsr_prog_call **calls, int *n);
hsr_status mlp_rt_train_step(mlp_rt_ctx *x, int64_t step, int batch, int micro, double *loss, hsr_rt_step_info *info);

#endif
