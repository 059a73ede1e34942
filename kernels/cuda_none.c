/* Host-only build: the CUDA entry points exist and say so. No CUDA device
 * can be opened, so only kc_count is ever reached in practice. */
#include "hsr/config.h"
#include "kernels/kernels_internal.h"
#include "internal.h"

#if !HSR_HAVE_CUDA
#define NO_CUDA return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA")

int kc_count(void) { return 0; }
hsr_status kc_open(hsr_device *d) {
  (void)d;
  NO_CUDA;
}
hsr_status kc_close(hsr_device *d) {
  (void)d;
  NO_CUDA;
}
hsr_status kc_alloc(hsr_device *d, size_t bytes, void **ptr) {
  (void)d;
  (void)bytes;
  (void)ptr;
  NO_CUDA;
}
hsr_status kc_free(hsr_device *d, void *ptr) {
  (void)d;
  (void)ptr;
  NO_CUDA;
}
hsr_status kc_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  (void)d;
  (void)bytes;
  (void)ptr;
  NO_CUDA;
}
hsr_status kc_host_free(hsr_device *d, void *ptr) {
  (void)d;
  (void)ptr;
  NO_CUDA;
}
hsr_status kc_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes,
                     const hsr_access *acc, int nacc) {
  (void)s, (void)k, (void)args, (void)args_bytes, (void)acc, (void)nacc;
  NO_CUDA;
}
hsr_status kc_copy(hsr_stream *s, void *dst, const void *src, size_t bytes) {
  (void)s;
  (void)dst;
  (void)src;
  (void)bytes;
  NO_CUDA;
}
hsr_status kc_memset(hsr_stream *s, void *dst, int value, size_t bytes) {
  (void)s;
  (void)dst;
  (void)value;
  (void)bytes;
  NO_CUDA;
}
hsr_status kc_stream_init(hsr_stream *s, int priority, int create) {
  (void)s;
  (void)priority;
  (void)create;
  NO_CUDA;
}
hsr_status kc_stream_fini(hsr_stream *s) {
  (void)s;
  NO_CUDA;
}
hsr_status kc_stream_query(hsr_stream *s, int *done) {
  (void)s;
  (void)done;
  NO_CUDA;
}
hsr_status kc_event_init(dev_event *e) {
  (void)e;
  NO_CUDA;
}
hsr_status kc_event_fini(dev_event *e) {
  (void)e;
  NO_CUDA;
}
hsr_status kc_event_record(dev_event *e, hsr_stream *s) {
  (void)e;
  (void)s;
  NO_CUDA;
}
hsr_status kc_stream_wait_event(hsr_stream *s, dev_event *e) {
  (void)s;
  (void)e;
  NO_CUDA;
}
hsr_status kc_event_query(dev_event *e, int *done) {
  (void)e;
  (void)done;
  NO_CUDA;
}
hsr_status kc_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c) {
  (void)s;
  (void)n;
  (void)master;
  (void)m;
  (void)v;
  (void)grad;
  (void)grad_dt;
  (void)param_out;
  (void)param_dt;
  (void)c;
  NO_CUDA;
}
hsr_status kc_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt) {
  (void)s;
  (void)n;
  (void)src;
  (void)src_dt;
  (void)dst;
  (void)dst_dt;
  NO_CUDA;
}
hsr_status kc_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha) {
  (void)s;
  (void)n;
  (void)x;
  (void)dt;
  (void)alpha;
  NO_CUDA;
}
hsr_status kc_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt) {
  (void)s;
  (void)n;
  (void)alpha;
  (void)x;
  (void)y;
  (void)dt;
  NO_CUDA;
}
hsr_status kc_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out) {
  (void)s;
  (void)n;
  (void)x;
  (void)dt;
  (void)out;
  NO_CUDA;
}
hsr_status kc_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc) {
  (void)s;
  (void)trans_a;
  (void)trans_b;
  (void)m;
  (void)n;
  (void)k;
  (void)alpha;
  (void)a;
  (void)lda;
  (void)b;
  (void)ldb;
  (void)beta;
  (void)c;
  (void)ldc;
  NO_CUDA;
}
#endif
