// The CUDA implementation of the device layer. Streams created here are
// non-blocking (no hidden ordering with the legacy default stream; order is
// expressed with events) and waits poll with sleeps, so nothing in steady
// state calls cudaDeviceSynchronize.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "internal.h"
#include "kernels/kernels_internal.h"

static hsr_status cuerr(cudaError_t e, const char *what) {
  return hsr_error(HSR_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}
#define CU(call, what)                             \
  do {                                             \
    cudaError_t _e = (call);                       \
    if (_e != cudaSuccess) return cuerr(_e, what); \
  } while (0)

extern "C" int kc_count(void) {
  int n = 0; // left unset when there is no driver
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" hsr_status kc_open(hsr_device *d) {
  CU(cudaSetDevice(d->ordinal), "cudaSetDevice");
  CU(cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, d->ordinal), "cudaDeviceGetAttribute");
  return kc_stream_init(&d->dflt, 0, 0);
}

extern "C" hsr_status kc_close(hsr_device *d) {
  hsr_status st = kc_stream_fini(&d->dflt);
  if (d->blas) {
    cublasStatus_t b = cublasDestroy((cublasHandle_t)d->blas);
    d->blas = NULL;
    if (b != CUBLAS_STATUS_SUCCESS && st == HSR_OK)
      st = hsr_error(HSR_ERR_CUDA, "cublasDestroy: %s", cublasGetStatusString(b));
  }
  return st;
}

extern "C" hsr_status kc_alloc(hsr_device *d, size_t bytes, void **ptr) {
  CU(cudaSetDevice(d->ordinal), "cudaSetDevice");
  cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 256);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *ptr = NULL;
    return hsr_error(e == cudaErrorMemoryAllocation ? HSR_ERR_NOMEM : HSR_ERR_CUDA,
                     "cudaMalloc of %zu bytes on GPU %d: %s", bytes, d->ordinal, cudaGetErrorString(e));
  }
  return HSR_OK;
}

extern "C" hsr_status kc_free(hsr_device *d, void *ptr) {
  (void)d;
  CU(cudaFree(ptr), "cudaFree");
  return HSR_OK;
}

extern "C" hsr_status kc_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  CU(cudaSetDevice(d->ordinal), "cudaSetDevice");
  cudaError_t e = cudaHostAlloc(ptr, bytes ? bytes : 256, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *ptr = NULL;
    return hsr_error(e == cudaErrorMemoryAllocation ? HSR_ERR_NOMEM : HSR_ERR_CUDA,
                     "cudaHostAlloc of %zu bytes (pinned staging): %s", bytes, cudaGetErrorString(e));
  }
  return HSR_OK;
}

extern "C" hsr_status kc_host_free(hsr_device *d, void *ptr) {
  (void)d;
  CU(cudaFreeHost(ptr), "cudaFreeHost");
  return HSR_OK;
}

extern "C" hsr_status kc_copy(hsr_stream *s, void *dst, const void *src, size_t bytes) {
  CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)s->native), "cudaMemcpyAsync");
  return HSR_OK;
}

extern "C" hsr_status kc_memset(hsr_stream *s, void *dst, int value, size_t bytes) {
  CU(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)s->native), "cudaMemsetAsync");
  return HSR_OK;
}

extern "C" hsr_status kc_stream_init(hsr_stream *s, int priority, int create) {
  s->native = NULL;
  s->owned = 0;
  if (!create) return HSR_OK; // the device default: the legacy stream
  CU(cudaSetDevice(s->dev->ordinal), "cudaSetDevice");
  int least = 0, greatest = 0;
  CU(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  cudaStream_t st;
  CU(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, priority ? greatest : least),
     "cudaStreamCreateWithPriority");
  s->native = st;
  s->owned = 1;
  return HSR_OK;
}

extern "C" hsr_status kc_stream_fini(hsr_stream *s) {
  hsr_status st = HSR_OK;
  // The cuBLAS handle must not outlive the stream it is bound to: rebind it
  // to the legacy stream (cublasDestroy and later GEMMs would use a dead one).
  if (s->owned && s->dev->blas) {
    cudaStream_t cur = NULL;
    cublasHandle_t h = (cublasHandle_t)s->dev->blas;
    if (cublasGetStream(h, &cur) == CUBLAS_STATUS_SUCCESS && cur == (cudaStream_t)s->native) cublasSetStream(h, NULL);
  }
  // sumsq scratch may still be in use by queued work: drain first (bounded;
  // on timeout the scratch is leaked rather than freed under a kernel).
  if (s->parts || s->pinned) st = hsr_stream_sync(s, 60.0);
  if (st == HSR_OK && s->parts) cudaFree(s->parts);
  if (st == HSR_OK && s->pinned) cudaFreeHost(s->pinned);
  s->parts = NULL;
  s->pinned = NULL;
  if (s->owned) {
    cudaError_t e = cudaStreamDestroy((cudaStream_t)s->native);
    if (e != cudaSuccess && st == HSR_OK) st = cuerr(e, "cudaStreamDestroy");
  }
  s->native = NULL;
  s->owned = 0;
  return st;
}

extern "C" hsr_status kc_stream_query(hsr_stream *s, int *done) {
  cudaError_t e = cudaStreamQuery((cudaStream_t)s->native);
  if (e == cudaErrorNotReady) {
    *done = 0;
    return HSR_OK;
  }
  CU(e, "cudaStreamQuery");
  *done = 1;
  return HSR_OK;
}

extern "C" hsr_status kc_event_init(dev_event *e) {
  CU(cudaSetDevice(e->dev->ordinal), "cudaSetDevice");
  cudaEvent_t ev;
  CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  e->native = ev;
  return HSR_OK;
}

extern "C" hsr_status kc_event_fini(dev_event *e) {
  CU(cudaEventDestroy((cudaEvent_t)e->native), "cudaEventDestroy");
  return HSR_OK;
}

extern "C" hsr_status kc_event_record(dev_event *e, hsr_stream *s) {
  CU(cudaEventRecord((cudaEvent_t)e->native, (cudaStream_t)s->native), "cudaEventRecord");
  return HSR_OK;
}

extern "C" hsr_status kc_stream_wait_event(hsr_stream *s, dev_event *e) {
  CU(cudaStreamWaitEvent((cudaStream_t)s->native, (cudaEvent_t)e->native, 0), "cudaStreamWaitEvent");
  return HSR_OK;
}

extern "C" hsr_status kc_event_query(dev_event *e, int *done) {
  cudaError_t r = cudaEventQuery((cudaEvent_t)e->native);
  if (r == cudaErrorNotReady) {
    *done = 0;
    return HSR_OK;
  }
  CU(r, "cudaEventQuery");
  *done = 1;
  return HSR_OK;
}

// The device's cuBLAS handle, created on first use (most devices never run a
// GEMM), bound to stream s.
extern "C" hsr_status kc_blas(hsr_stream *s, void **handle) {
  hsr_device *d = s->dev;
  cublasStatus_t st;
  if (!d->blas) {
    cublasHandle_t h;
    st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) return hsr_error(HSR_ERR_CUDA, "cublasCreate: %s", cublasGetStatusString(st));
    d->blas = h;
    // Plain fp32 (no TF32 tensor-op rounding): GPU and CPU training agree.
    st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) return hsr_error(HSR_ERR_CUDA, "cublasSetMathMode: %s", cublasGetStatusString(st));
  }
  st = cublasSetStream((cublasHandle_t)d->blas, (cudaStream_t)s->native);
  if (st != CUBLAS_STATUS_SUCCESS) return hsr_error(HSR_ERR_CUDA, "cublasSetStream: %s", cublasGetStatusString(st));
  *handle = d->blas;
  return HSR_OK;
}

extern "C" hsr_status kc_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                              const float *a, size_t lda, const float *b, size_t ldb, float beta, float *c,
                              size_t ldc) {
  void *hv = NULL;
  HSR_CHECK(kc_blas(s, &hv));
  cublasHandle_t h = (cublasHandle_t)hv;
  cublasStatus_t st;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  st = cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                   &alpha, b, (int)ldb, a, (int)lda, &beta, c, (int)ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return hsr_error(HSR_ERR_CUDA, "cublasSgemm: %s", cublasGetStatusString(st));
  return HSR_OK;
}

// A program's own kernel: its CUDA launcher on the native stream.
extern "C" hsr_status kc_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes,
                                const hsr_access *acc, int nacc) {
  (void)args_bytes, (void)acc, (void)nacc;
  if (!k->cuda) return hsr_error(HSR_ERR_UNSUPPORTED, "kernel '%s' has no CUDA launcher", k->name);
  return k->cuda(s->native, args);
}
