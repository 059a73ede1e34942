/* kernels/ private: the objects behind the device API and the CUDA entry
 * points (kernels/cuda_*.cu; kernels/cuda_none.c in a host-only build). */
#ifndef HSR_KERNELS_INTERNAL_H
#define HSR_KERNELS_INTERNAL_H

#include "hsr/kernels.h"
#include "hsr/kmath.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hsr_stream {
  hsr_device *dev;
  void *native;   /* cudaStream_t; NULL = the legacy default stream, or host */
  int owned;      /* native was created by hsr_stream_create */
  double *parts;  /* device scratch for sumsq partials (HSR_KM_SQ_MAX_PARTS) */
  double *pinned; /* pinned host slot the sumsq result lands in */
};

struct hsr_device {
  hsr_device_kind kind;
  int ordinal;
  int sm_count;
  void *blas;      /* cublasHandle_t */
  hsr_stream dflt; /* what a NULL stream argument means */
};

struct hsr_event {
  hsr_device *dev;
  void *native; /* cudaEvent_t */
};

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
hsr_status kc_event_init(hsr_event *e);
hsr_status kc_event_fini(hsr_event *e);
hsr_status kc_event_record(hsr_event *e, hsr_stream *s);
hsr_status kc_stream_wait_event(hsr_stream *s, hsr_event *e);
hsr_status kc_event_query(hsr_event *e, int *done);

hsr_status kc_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c);
hsr_status kc_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt);
hsr_status kc_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
hsr_status kc_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt);
hsr_status kc_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);
/* The device's cuBLAS handle (cublasHandle_t), created on first use, bound to s. */
hsr_status kc_blas(hsr_stream *s, void **handle);
hsr_status kc_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
