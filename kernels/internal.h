/* kernels/ private: the objects behind the device API and the CUDA entry
 * points (kernels/cuda_*.cu; kernels/cuda_none.c in a host-only build). */
#ifndef HSR_KERNELS_INTERNAL_H
#define HSR_KERNELS_INTERNAL_H

#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "hsr/kmath.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_kind kern_kind;
typedef struct sim_stream sim_stream;
typedef struct sim_dev sim_dev;

struct hsr_stream {
  hsr_device *dev;
  void *native;   /* cudaStream_t (NULL = the legacy default stream); sim: its worker */
  int owned;      /* native was created by stream_create */
  double *parts;  /* device scratch for sumsq partials (HSR_KM_SQ_MAX_PARTS) */
  double *pinned; /* pinned host slot the sumsq result lands in */
};

struct hsr_device {
  hsr_device_kind kind;
  const kern_kind *k; /* the entry points of this kind (kinds.c) */
  int ordinal;
  int sm_count;
  void *blas;      /* cublasHandle_t */
  sim_dev *sim;    /* the emulated device's state (sim.c) */
  hsr_stream dflt; /* what a NULL stream argument means */
};

struct dev_event {
  hsr_device *dev;
  void *native; /* cudaEvent_t; sim: its record */
};

/* One kind of device: the entry points every kind fills (NCCL's transport
 * table shape). The public functions check their arguments, then call
 * these; nothing above the table asks which kind it is.
 *   kern_host  synchronous, on the calling thread (the kh_* CPU twins)
 *   kern_cuda  the CUDA runtime, cuBLAS and the kernels of cuda_*.cu (kc_*)
 *   kern_sim   the emulated device: a worker thread per stream that runs the
 *              CPU twins in stream order, CUDA's event rules, delays and the
 *              stream-order sanitizer (sim.c, sim_kernels.c) */
struct kern_kind {
  const char *name;
  hsr_status (*open)(hsr_device *d);
  hsr_status (*close)(hsr_device *d);
  hsr_status (*alloc)(hsr_device *d, size_t bytes, void **ptr);
  hsr_status (*free)(hsr_device *d, void *ptr);
  hsr_status (*host_alloc)(hsr_device *d, size_t bytes, void **ptr);
  hsr_status (*host_free)(hsr_device *d, void *ptr);
  hsr_status (*copy)(hsr_stream *s, void *dst, const void *src, size_t bytes);
  hsr_status (*memset)(hsr_stream *s, void *dst, int value, size_t bytes);
  hsr_status (*stream_init)(hsr_stream *s, int priority, int create);
  hsr_status (*stream_fini)(hsr_stream *s);
  hsr_status (*stream_query)(hsr_stream *s, int *done);
  hsr_status (*stream_sync)(hsr_stream *s, double timeout_s); /* NULL: stream_query with sleeps */
  hsr_status (*event_init)(dev_event *e);
  hsr_status (*event_fini)(dev_event *e);
  hsr_status (*event_record)(dev_event *e, hsr_stream *s);
  hsr_status (*stream_wait_event)(hsr_stream *s, dev_event *e);
  hsr_status (*event_query)(dev_event *e, int *done);
  /* a program's own kernel (hsr_kernels_launch) */
  hsr_status (*launch)(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes,
                       const hsr_access *acc, int nacc);

  hsr_status (*adamw)(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                      void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c);
  hsr_status (*cast)(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt);
  hsr_status (*scale)(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
  hsr_status (*axpy)(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt);
  hsr_status (*sumsq)(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);
  hsr_status (*gemm)(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                     size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);
  hsr_status (*gemm_batched)(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                             const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                             float beta, float *c, size_t ldc, size_t stride_c, size_t count);
  hsr_status (*layernorm)(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b,
                          float eps, float *y, float *mean, float *rstd);
  hsr_status (*layernorm_bwd)(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                              const float *mean, const float *rstd, float *dx, float *dw, float *db);
  hsr_status (*gelu)(hsr_stream *s, size_t n, const float *x, float *y);
  hsr_status (*gelu_bwd)(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx);
  hsr_status (*bias_add)(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y);
  hsr_status (*bias_bwd)(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db);
  hsr_status (*softmax_causal)(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p);
  hsr_status (*softmax_causal_bwd)(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                   float *dx);
  hsr_status (*xent)(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                     double *rowloss);
  hsr_status (*embed)(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                      const float *wpe, float *out);
  hsr_status (*embed_bwd)(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens,
                          const float *dout, float *dwte, float *dwpe);
  /* the Llama-style model's layers (nn_llama.c) */
  hsr_status (*rmsnorm)(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                        float *rstd);
  hsr_status (*rmsnorm_bwd)(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *rstd, float *dx, float *dw);
  hsr_status (*swiglu)(hsr_stream *s, size_t n, const float *g, const float *u, float *y);
  hsr_status (*swiglu_bwd)(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                           float *du);
  hsr_status (*rope_table)(hsr_stream *s, size_t T, size_t D, float theta, float *cs);
  hsr_status (*rope)(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                     float *x);
};

extern const kern_kind kern_host, kern_cuda, kern_sim;

/* The CPU twins (kern_host's kernels): the stream argument is unused. The
 * sim kind runs the same functions on its stream threads. */
hsr_status kh_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes, const hsr_access *acc,
                     int nacc);
hsr_status kh_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c);
hsr_status kh_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt);
hsr_status kh_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
hsr_status kh_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt);
hsr_status kh_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);
hsr_status kh_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);
hsr_status kh_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                           const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                           float beta, float *c, size_t ldc, size_t stride_c, size_t count);
hsr_status kh_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd);
hsr_status kh_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db);
hsr_status kh_gelu(hsr_stream *s, size_t n, const float *x, float *y);
hsr_status kh_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx);
hsr_status kh_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y);
hsr_status kh_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db);
hsr_status kh_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p);
hsr_status kh_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx);
hsr_status kh_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss);
hsr_status kh_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out);
hsr_status kh_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe);
hsr_status kh_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd);
hsr_status kh_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw);
hsr_status kh_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y);
hsr_status kh_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du);
hsr_status kh_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs);
hsr_status kh_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x);

/* Bounded polling: sleeps that grow from 20 us to 1 ms (never spin). */
void kern_backoff(unsigned *us);
/* NULL -> the device default stream; checks the stream is the device's. */
hsr_status kern_resolve_stream(hsr_device *d, hsr_stream *s, hsr_stream **out);

/* CUDA implementation. Arguments are already validated. */
int kc_count(void);
hsr_status kc_open(hsr_device *d);
hsr_status kc_close(hsr_device *d);
hsr_status kc_alloc(hsr_device *d, size_t bytes, void **ptr);
hsr_status kc_free(hsr_device *d, void *ptr);
hsr_status kc_host_alloc(hsr_device *d, size_t bytes, void **ptr);
hsr_status kc_host_free(hsr_device *d, void *ptr);
hsr_status kc_copy(hsr_stream *s, void *dst, const void *src, size_t bytes);
hsr_status kc_memset(hsr_stream *s, void *dst, int value, size_t bytes);
hsr_status kc_stream_init(hsr_stream *s, int priority, int create);
hsr_status kc_stream_fini(hsr_stream *s);
hsr_status kc_stream_query(hsr_stream *s, int *done);
hsr_status kc_event_init(dev_event *e);
hsr_status kc_event_fini(dev_event *e);
hsr_status kc_event_record(dev_event *e, hsr_stream *s);
hsr_status kc_stream_wait_event(hsr_stream *s, dev_event *e);
hsr_status kc_event_query(dev_event *e, int *done);

hsr_status kc_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c);
hsr_status kc_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt);
hsr_status kc_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
hsr_status kc_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt);
hsr_status kc_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);
/* The device's cuBLAS handle (cublasHandle_t), created on first use, bound to s. */
hsr_status kc_blas(hsr_stream *s, void **handle);
hsr_status kc_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes, const hsr_access *acc,
                     int nacc);
hsr_status kc_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
