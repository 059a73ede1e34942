/* hsr kernels: the device layer (host and CUDA implementations behind one
 * API) and the element-wise loops used by reductions, the optimizer and the
 * example model. The per-element formulas are in hsr/kmath.h, shared by the
 * CPU loops and the CUDA kernels.
 *
 * On a host device every call runs synchronously on the calling thread and
 * streams/events are trivially complete; on a CUDA device work is enqueued on
 * the given stream (NULL = the device's default stream, i.e. CUDA's legacy
 * stream). Streams from hsr_stream_create are non-blocking: order them with
 * events. A process drives one GPU; a device object is used by one thread
 * at a time.
 */
#ifndef HSR_KERNELS_H
#define HSR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "hsr/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_device_kind { HSR_DEVICE_HOST = 0, HSR_DEVICE_CUDA = 1 } hsr_device_kind;

typedef struct hsr_device hsr_device;
typedef struct hsr_stream hsr_stream;
typedef struct hsr_event hsr_event;

/* Number of CUDA devices (0 without a driver or in a host-only build). */
HSR_API int hsr_device_cuda_count(void);
HSR_API hsr_status hsr_device_open(hsr_device_kind kind, int ordinal, hsr_device **out);
HSR_API hsr_status hsr_device_close(hsr_device *d);
HSR_API hsr_device_kind hsr_device_kind_of(const hsr_device *d);

HSR_API hsr_status hsr_device_alloc(hsr_device *d, size_t bytes, void **ptr);
HSR_API hsr_status hsr_device_free(hsr_device *d, void *ptr);
/* Copies between any two pointers the device can address (host<->device too). */
HSR_API hsr_status hsr_device_copy(hsr_device *d, void *dst, const void *src, size_t bytes, hsr_stream *s);
HSR_API hsr_status hsr_device_memset(hsr_device *d, void *dst, int value, size_t bytes, hsr_stream *s);

/* priority: 0 normal, 1 high (communication streams). */
HSR_API hsr_status hsr_stream_create(hsr_device *d, int priority, hsr_stream **out);
HSR_API hsr_status hsr_stream_destroy(hsr_stream *s);
HSR_API hsr_status hsr_stream_sync(hsr_stream *s, double timeout_s);
/* The native handle (cudaStream_t), NULL on host. */
HSR_API void *hsr_stream_native(hsr_stream *s);
HSR_API hsr_status hsr_event_create(hsr_device *d, hsr_event **out);
HSR_API hsr_status hsr_event_destroy(hsr_event *e);
HSR_API hsr_status hsr_event_record(hsr_event *e, hsr_stream *s);
HSR_API hsr_status hsr_stream_wait_event(hsr_stream *s, hsr_event *e);
/* *done = 1 once all work before the record has finished. */
HSR_API hsr_status hsr_event_query(hsr_event *e, int *done);
HSR_API hsr_status hsr_event_sync(hsr_event *e, double timeout_s);

/* AdamW hyper-parameters for one call (one optimizer group). */
typedef struct hsr_adamw_hparams {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;     /* 1-based step counter, for bias correction */
  float grad_scale; /* multiplies the gradient first (clipping, 1/accumulation) */
} hsr_adamw_hparams;

/* One AdamW step over n elements of a shard: fp32 master/m/v updated in
 * place from `grad` (grad_dt f32 or bf16); if param_out is not NULL the new
 * master is also written there in param_dt (f32 or bf16) in the same pass. */
HSR_API hsr_status hsr_kernels_adamw(hsr_device *d, hsr_stream *s, size_t n, float *master, float *m, float *v,
                                     const void *grad, hsr_dtype grad_dt, void *param_out, hsr_dtype param_dt,
                                     const hsr_adamw_hparams *hp);
/* dst[i] = (dst_dt) src[i]; f32<->bf16, f32<->f16, same-type copy. */
HSR_API hsr_status hsr_kernels_cast(hsr_device *d, hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt,
                                    void *dst, hsr_dtype dst_dt);
/* x[i] *= alpha (f32, bf16, f16, f64). */
HSR_API hsr_status hsr_kernels_scale(hsr_device *d, hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);
/* y[i] += alpha * x[i] (same dtype; bf16/f16 accumulate in f32 per element). */
HSR_API hsr_status hsr_kernels_axpy(hsr_device *d, hsr_stream *s, size_t n, double alpha, const void *x, void *y,
                                    hsr_dtype dt);
/* Sum of squares in f64 with a fixed, size-only-dependent reduction order
 * (deterministic across runs and between host and device up to rounding of
 * the final blocks). *out is written when the stream reaches it; on host at
 * return. out must be host memory. */
HSR_API hsr_status hsr_kernels_sumsq(hsr_device *d, hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);

/* Row-major f32 GEMM: C (m x n) = alpha * op(A) * op(B) + beta * C, where
 * op(X) = X, or X transposed when trans_x is nonzero. op(A) is m x k (A is
 * stored k x m when transposed), op(B) is k x n. Leading dimensions are row
 * strides in elements. OpenBLAS on host; cuBLAS on CUDA (full fp32, no TF32). */
HSR_API hsr_status hsr_kernels_gemm(hsr_device *d, hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n,
                                    size_t k, float alpha, const float *a, size_t lda, const float *b, size_t ldb,
                                    float beta, float *c, size_t ldc);

#ifdef __cplusplus
}
#endif
#endif
