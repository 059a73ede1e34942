/* The host kind: every call runs synchronously on the calling thread;
 * streams and events are trivially complete. Its kernels are the CPU
 * twins (kh_* in loops.c, nn.c and gemm.c), which the sim kind runs too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "kernels/kernels_internal.h"

/* Host buffers share cudaMalloc's alignment, so vectorised code and the
 * flat-buffer layout see the same guarantees on every kind. */
#define HOST_ALIGN 256

static hsr_status kh_open(hsr_device *d) {
  (void)d;
  return HSR_OK;
}

static hsr_status kh_close(hsr_device *d) {
  (void)d;
  return HSR_OK;
}

static hsr_status kh_alloc(hsr_device *d, size_t bytes, void **ptr) {
  (void)d;
  size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
  void *p = aligned_alloc(HOST_ALIGN, rounded ? rounded : HOST_ALIGN);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes failed", bytes);
  *ptr = p;
  return HSR_OK;
}

static hsr_status kh_free(hsr_device *d, void *ptr) {
  (void)d;
  free(ptr);
  return HSR_OK;
}

/* Host staging: mapped and faulted in by the kernel at once (MAP_POPULATE),
 * which costs a fraction of taking the first touch of every page as a fault
 * (and far less here than huge pages, whose compaction stalls); a page in
 * front keeps the mapping's length for the free. */
#define HOST_HEAD ((size_t)4096)

static hsr_status kh_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  (void)d;
  size_t len = HOST_HEAD + (bytes + HOST_HEAD - 1) / HOST_HEAD * HOST_HEAD;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes failed: %s", bytes, strerror(errno));
  memcpy(p, &len, sizeof len);
  *ptr = p + HOST_HEAD;
  return HSR_OK;
}

static hsr_status kh_host_free(hsr_device *d, void *ptr) {
  (void)d;
  char *p = (char *)ptr - HOST_HEAD;
  size_t len;
  memcpy(&len, p, sizeof len);
  if (munmap(p, len)) return hsr_error(HSR_ERR_SYSTEM, "munmap of a %zu-byte staging buffer: %s", len, strerror(errno));
  return HSR_OK;
}

static hsr_status kh_copy(hsr_stream *s, void *dst, const void *src, size_t bytes) {
  (void)s;
  memcpy(dst, src, bytes);
  return HSR_OK;
}

static hsr_status kh_memset(hsr_stream *s, void *dst, int value, size_t bytes) {
  (void)s;
  memset(dst, value, bytes);
  return HSR_OK;
}

static hsr_status kh_stream_init(hsr_stream *s, int priority, int create) {
  (void)s, (void)priority, (void)create;
  return HSR_OK;
}

static hsr_status kh_stream_fini(hsr_stream *s) {
  (void)s;
  return HSR_OK;
}

static hsr_status kh_done(hsr_stream *s, int *done) {
  (void)s;
  *done = 1;
  return HSR_OK;
}

static hsr_status kh_event(dev_event *e) {
  (void)e;
  return HSR_OK;
}

static hsr_status kh_event_record(dev_event *e, hsr_stream *s) {
  (void)e, (void)s;
  return HSR_OK;
}

static hsr_status kh_wait_event(hsr_stream *s, dev_event *e) {
  (void)s, (void)e;
  return HSR_OK;
}

static hsr_status kh_event_query(dev_event *e, int *done) {
  (void)e;
  *done = 1;
  return HSR_OK;
}

hsr_status kh_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes, const hsr_access *acc,
                     int nacc) {
  (void)s, (void)args_bytes, (void)acc, (void)nacc;
  k->host(args);
  return HSR_OK;
}

const kern_kind kern_host = {
    .name = "host",
    .open = kh_open,
    .close = kh_close,
    .alloc = kh_alloc,
    .free = kh_free,
    .host_alloc = kh_host_alloc,
    .host_free = kh_host_free,
    .copy = kh_copy,
    .memset = kh_memset,
    .stream_init = kh_stream_init,
    .stream_fini = kh_stream_fini,
    .stream_query = kh_done,
    .event_init = kh_event,
    .event_fini = kh_event,
    .event_record = kh_event_record,
    .stream_wait_event = kh_wait_event,
    .event_query = kh_event_query,
    .launch = kh_launch,
    .adamw = kh_adamw,
    .cast = kh_cast,
    .scale = kh_scale,
    .axpy = kh_axpy,
    .sumsq = kh_sumsq,
    .gemm = kh_gemm,
    .gemm_batched = kh_gemm_batched,
    .layernorm = kh_layernorm,
    .layernorm_bwd = kh_layernorm_bwd,
    .gelu = kh_gelu,
    .gelu_bwd = kh_gelu_bwd,
    .bias_add = kh_bias_add,
    .bias_bwd = kh_bias_bwd,
    .softmax_causal = kh_softmax_causal,
    .softmax_causal_bwd = kh_softmax_causal_bwd,
    .xent = kh_xent,
    .embed = kh_embed,
    .embed_bwd = kh_embed_bwd,
    .rmsnorm = kh_rmsnorm,
    .rmsnorm_bwd = kh_rmsnorm_bwd,
    .swiglu = kh_swiglu,
    .swiglu_bwd = kh_swiglu_bwd,
    .rope_table = kh_rope_table,
    .rope = kh_rope,
};
