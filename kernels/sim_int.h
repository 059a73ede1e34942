/* kernels/ private: what sim.c and sim_kernels.c share. */
#ifndef HSR_KERNELS_SIM_INT_H
#define HSR_KERNELS_SIM_INT_H

#include "internal.h"

#define SIM_MAX_STREAMS 64 /* streams of one sim device at once */
#define SIM_ARGS_MAX 320   /* a task's copied arguments */

/* Queues run(args copy) on s, after checking the declared accesses (every
 * range must be device memory: a kernel). */
hsr_status sim_launch(hsr_stream *s, const char *name, hsr_status (*run)(void *), const void *args, size_t args_bytes,
                      const hsr_access *acc, int nacc);
hsr_status sim_stream_sync(hsr_stream *s, double timeout_s);

/* sim_kernels.c: the kernels as tasks over the CPU twins. */
hsr_status ks_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c);
hsr_status ks_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt);
hsr_status ks_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
hsr_status ks_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt);
hsr_status ks_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);
hsr_status ks_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);
hsr_status ks_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                           const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                           float beta, float *c, size_t ldc, size_t stride_c, size_t count);
hsr_status ks_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd);
hsr_status ks_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db);
hsr_status ks_gelu(hsr_stream *s, size_t n, const float *x, float *y);
hsr_status ks_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx);
hsr_status ks_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y);
hsr_status ks_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db);
hsr_status ks_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p);
hsr_status ks_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx);
hsr_status ks_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss);
hsr_status ks_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out);
hsr_status ks_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe);

hsr_status ks_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd);
hsr_status ks_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw);
hsr_status ks_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y);
hsr_status ks_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du);
hsr_status ks_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs);
hsr_status ks_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x);

#define SIM_KERNELS                                                                                               \
  .adamw = ks_adamw, .cast = ks_cast, .scale = ks_scale, .axpy = ks_axpy, .sumsq = ks_sumsq, .gemm = ks_gemm,     \
  .gemm_batched = ks_gemm_batched, .layernorm = ks_layernorm, .layernorm_bwd = ks_layernorm_bwd, .gelu = ks_gelu, \
  .gelu_bwd = ks_gelu_bwd, .bias_add = ks_bias_add, .bias_bwd = ks_bias_bwd, .softmax_causal = ks_softmax_causal, \
  .softmax_causal_bwd = ks_softmax_causal_bwd, .xent = ks_xent, .embed = ks_embed, .embed_bwd = ks_embed_bwd,     \
  .rmsnorm = ks_rmsnorm, .rmsnorm_bwd = ks_rmsnorm_bwd, .swiglu = ks_swiglu, .swiglu_bwd = ks_swiglu_bwd,         \
  .rope_table = ks_rope_table, .rope = ks_rope

#endif
