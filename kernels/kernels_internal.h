/* kernels internals: the calls of hsr/kernels.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_KERNELS_KERNELS_INTERNAL_H
#define HSR_KERNELS_KERNELS_INTERNAL_H
#include "hsr/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dev_event dev_event;

/* Number of CUDA devices (0 without a driver or in a host-only build). */
int device_cuda_count(void);

/* Host memory the device copies to and from at full speed, for staging:
 * pinned (cudaHostAlloc) on a CUDA device; on a host device page-aligned
 * memory faulted in at once (no page fault on first touch).
 * Any thread may read and write it; free it with device_host_free. */
hsr_status device_host_alloc(hsr_device *d, size_t bytes, void **ptr);
hsr_status device_host_free(hsr_device *d, void *ptr);

/* priority: 0 normal, 1 high (communication streams). */
hsr_status stream_create(hsr_device *d, int priority, hsr_stream **out);
hsr_status stream_destroy(hsr_stream *s);

/* The native handle (cudaStream_t), NULL on host and sim. */
void *stream_native(hsr_stream *s);

/* The device a stream belongs to. */
hsr_device *stream_device(hsr_stream *s);
hsr_status event_create(hsr_device *d, dev_event **out);
hsr_status event_destroy(dev_event *e);
hsr_status event_record(dev_event *e, hsr_stream *s);
hsr_status stream_wait_event(hsr_stream *s, dev_event *e);

/* *done = 1 once all work before the record has finished. */
hsr_status event_query(dev_event *e, int *done);
hsr_status event_sync(dev_event *e, double timeout_s);

/* AdamW hyper-parameters for one call (one optimizer group). */
typedef struct adamw_hparams {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;     /* 1-based step counter, for bias correction */
  float grad_scale; /* multiplies the gradient first (clipping, 1/accumulation) */
} adamw_hparams;

/* One AdamW step over n elements of a shard: fp32 master/m/v updated in
 * place from `grad` (grad_dt f32 or bf16); if param_out is not NULL the new
 * master is also written there in param_dt (f32 or bf16) in the same pass. */
hsr_status kernels_adamw(hsr_device *d, hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad,
                         hsr_dtype grad_dt, void *param_out, hsr_dtype param_dt, const adamw_hparams *hp);

/* x[i] *= alpha (f32, bf16, f16, f64). */
hsr_status kernels_scale(hsr_device *d, hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha);

/* Sum of squares in f64 with a fixed, size-only-dependent reduction order
 * (deterministic across runs and between host and device up to rounding of
 * the final blocks). *out is written when the stream reaches it; on host at
 * return. out must be host memory. */
hsr_status kernels_sumsq(hsr_device *d, hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out);

#ifdef __cplusplus
}
#endif
#endif
