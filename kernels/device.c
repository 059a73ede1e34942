/* The device layer: one API, a host implementation here (synchronous, on the
 * calling thread) and a CUDA one in cuda_device.cu. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hsr/config.h"
#include "internal.h"

/* Host buffers share cudaMalloc's alignment, so vectorised code and the
 * flat-buffer layout see the same guarantees on both kinds. */
#define HOST_ALIGN 256

void kern_backoff(unsigned *us) {
  struct timespec ts = {0, (long)*us * 1000L};
  nanosleep(&ts, NULL);
  if (*us < 1000) *us *= 2;
}

int hsr_device_cuda_count(void) { return HSR_HAVE_CUDA ? kc_count() : 0; }

hsr_status hsr_device_open(hsr_device_kind kind, int ordinal, hsr_device **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "hsr_device_open: out is NULL");
  *out = NULL;
  if (kind != HSR_DEVICE_HOST && kind != HSR_DEVICE_CUDA)
    return hsr_error(HSR_ERR_INVALID, "device kind %d is not HSR_DEVICE_HOST (0) or HSR_DEVICE_CUDA (1)", (int)kind);
  if (ordinal < 0) return hsr_error(HSR_ERR_INVALID, "device ordinal %d must be >= 0", ordinal);
  if (kind == HSR_DEVICE_CUDA) {
    if (!HSR_HAVE_CUDA)
      return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA (HSR_WITH_CUDA=OFF or no nvcc)");
    int count = kc_count();
    if (count == 0) return hsr_error(HSR_ERR_UNSUPPORTED, "no CUDA device is visible (no GPU or no driver)");
    if (ordinal >= count)
      return hsr_error(HSR_ERR_NOT_FOUND, "CUDA device %d requested, %d visible (0..%d)", ordinal, count, count - 1);
  }
  hsr_device *d = calloc(1, sizeof *d);
  if (!d) return hsr_error(HSR_ERR_NOMEM, "device object");
  d->kind = kind;
  d->ordinal = ordinal;
  d->dflt.dev = d;
  if (kind == HSR_DEVICE_CUDA) {
    hsr_status st = kc_open(d);
    if (st != HSR_OK) {
      free(d);
      return st;
    }
  }
  *out = d;
  return HSR_OK;
}

hsr_status hsr_device_close(hsr_device *d) {
  if (!d) return HSR_OK;
  hsr_status st = HSR_OK;
  if (d->kind == HSR_DEVICE_CUDA) st = kc_close(d);
  free(d);
  return st;
}

hsr_device_kind hsr_device_kind_of(const hsr_device *d) { return d ? d->kind : HSR_DEVICE_HOST; }

hsr_status hsr_device_alloc(hsr_device *d, size_t bytes, void **ptr) {
  if (!d || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_device_alloc: NULL device or out pointer");
  *ptr = NULL;
  if (bytes > SIZE_MAX - HOST_ALIGN) return hsr_error(HSR_ERR_NOMEM, "allocation of %zu bytes", bytes);
  if (d->kind == HSR_DEVICE_CUDA) return kc_alloc(d, bytes, ptr);
  size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
  void *p = aligned_alloc(HOST_ALIGN, rounded ? rounded : HOST_ALIGN);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes failed", bytes);
  *ptr = p;
  return HSR_OK;
}

hsr_status hsr_device_free(hsr_device *d, void *ptr) {
  if (!d) return hsr_error(HSR_ERR_INVALID, "hsr_device_free: NULL device");
  if (!ptr) return HSR_OK;
  if (d->kind == HSR_DEVICE_CUDA) return kc_free(d, ptr);
  free(ptr);
  return HSR_OK;
}

/* Host staging: mapped and faulted in by the kernel at once (MAP_POPULATE),
 * which costs a fraction of taking the first touch of every page as a fault
 * (and far less here than huge pages, whose compaction stalls); a page in
 * front keeps the mapping's length for the free. */
#define HOST_HEAD ((size_t)4096)

hsr_status hsr_device_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  if (!d || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_device_host_alloc: NULL device or out pointer");
  *ptr = NULL;
  if (bytes > SIZE_MAX / 2) return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes", bytes);
  if (d->kind == HSR_DEVICE_CUDA) return kc_host_alloc(d, bytes, ptr);
  size_t len = HOST_HEAD + (bytes + HOST_HEAD - 1) / HOST_HEAD * HOST_HEAD;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes failed: %s", bytes, strerror(errno));
  memcpy(p, &len, sizeof len);
  *ptr = p + HOST_HEAD;
  return HSR_OK;
}

hsr_status hsr_device_host_free(hsr_device *d, void *ptr) {
  if (!d) return hsr_error(HSR_ERR_INVALID, "hsr_device_host_free: NULL device");
  if (!ptr) return HSR_OK;
  if (d->kind == HSR_DEVICE_CUDA) return kc_host_free(d, ptr);
  char *p = (char *)ptr - HOST_HEAD;
  size_t len;
  memcpy(&len, p, sizeof len);
  if (munmap(p, len)) return hsr_error(HSR_ERR_SYSTEM, "munmap of a %zu-byte staging buffer: %s", len, strerror(errno));
  return HSR_OK;
}

/* Resolves the stream argument: NULL means the device's default stream. */
static hsr_status pick_stream(hsr_device *d, hsr_stream *s, hsr_stream **out) {
  if (!d) return hsr_error(HSR_ERR_INVALID, "NULL device");
  if (!s) s = &d->dflt;
  if (s->dev != d) return hsr_error(HSR_ERR_INVALID, "the stream belongs to another device");
  *out = s;
  return HSR_OK;
}

hsr_status hsr_device_copy(hsr_device *d, void *dst, const void *src, size_t bytes, hsr_stream *s) {
  HSR_CHECK(pick_stream(d, s, &s));
  if (bytes == 0) return HSR_OK;
  if (!dst || !src) return hsr_error(HSR_ERR_INVALID, "hsr_device_copy of %zu bytes with a NULL pointer", bytes);
  if (d->kind == HSR_DEVICE_CUDA) return kc_copy(s, dst, src, bytes);
  memcpy(dst, src, bytes);
  return HSR_OK;
}

hsr_status hsr_device_memset(hsr_device *d, void *dst, int value, size_t bytes, hsr_stream *s) {
  HSR_CHECK(pick_stream(d, s, &s));
  if (bytes == 0) return HSR_OK;
  if (!dst) return hsr_error(HSR_ERR_INVALID, "hsr_device_memset of %zu bytes with a NULL pointer", bytes);
  if (d->kind == HSR_DEVICE_CUDA) return kc_memset(s, dst, value, bytes);
  memset(dst, value, bytes);
  return HSR_OK;
}

hsr_status kern_resolve_stream(hsr_device *d, hsr_stream *s, hsr_stream **out) { return pick_stream(d, s, out); }

hsr_status hsr_stream_create(hsr_device *d, int priority, hsr_stream **out) {
  if (!d || !out) return hsr_error(HSR_ERR_INVALID, "hsr_stream_create: NULL device or out pointer");
  *out = NULL;
  if (priority != 0 && priority != 1)
    return hsr_error(HSR_ERR_INVALID, "stream priority %d: valid are 0 (normal) and 1 (high)", priority);
  hsr_stream *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "stream object");
  s->dev = d;
  if (d->kind == HSR_DEVICE_CUDA) {
    hsr_status st = kc_stream_init(s, priority, 1);
    if (st != HSR_OK) {
      free(s);
      return st;
    }
  }
  *out = s;
  return HSR_OK;
}

hsr_status hsr_stream_destroy(hsr_stream *s) {
  if (!s) return HSR_OK;
  hsr_status st = HSR_OK;
  if (s->dev->kind == HSR_DEVICE_CUDA) st = kc_stream_fini(s);
  free(s);
  return st;
}

static hsr_status check_timeout(double timeout_s) {
  if (!(timeout_s >= 0.0) || isinf(timeout_s))
    return hsr_error(HSR_ERR_INVALID, "timeout %g s: must be a finite number of seconds >= 0", timeout_s);
  return HSR_OK;
}

hsr_status hsr_stream_sync(hsr_stream *s, double timeout_s) {
  if (!s) return hsr_error(HSR_ERR_INVALID, "hsr_stream_sync: NULL stream");
  HSR_CHECK(check_timeout(timeout_s));
  if (s->dev->kind != HSR_DEVICE_CUDA) return HSR_OK;
  double t0 = hsr_clock_s();
  unsigned us = 20;
  for (;;) {
    int done = 0;
    HSR_CHECK(kc_stream_query(s, &done));
    if (done) return HSR_OK;
    if (hsr_clock_s() - t0 >= timeout_s)
      return hsr_error(HSR_ERR_TIMEOUT, "stream did not drain within %.3f s", timeout_s);
    kern_backoff(&us);
  }
}

void *hsr_stream_native(hsr_stream *s) { return s ? s->native : NULL; }

hsr_status hsr_event_create(hsr_device *d, hsr_event **out) {
  if (!d || !out) return hsr_error(HSR_ERR_INVALID, "hsr_event_create: NULL device or out pointer");
  *out = NULL;
  hsr_event *e = calloc(1, sizeof *e);
  if (!e) return hsr_error(HSR_ERR_NOMEM, "event object");
  e->dev = d;
  if (d->kind == HSR_DEVICE_CUDA) {
    hsr_status st = kc_event_init(e);
    if (st != HSR_OK) {
      free(e);
      return st;
    }
  }
  *out = e;
  return HSR_OK;
}

hsr_status hsr_event_destroy(hsr_event *e) {
  if (!e) return HSR_OK;
  hsr_status st = HSR_OK;
  if (e->dev->kind == HSR_DEVICE_CUDA) st = kc_event_fini(e);
  free(e);
  return st;
}

hsr_status hsr_event_record(hsr_event *e, hsr_stream *s) {
  if (!e) return hsr_error(HSR_ERR_INVALID, "hsr_event_record: NULL event");
  HSR_CHECK(pick_stream(e->dev, s, &s));
  if (e->dev->kind == HSR_DEVICE_CUDA) return kc_event_record(e, s);
  return HSR_OK;
}

hsr_status hsr_stream_wait_event(hsr_stream *s, hsr_event *e) {
  if (!s || !e) return hsr_error(HSR_ERR_INVALID, "hsr_stream_wait_event: NULL stream or event");
  if (s->dev != e->dev) return hsr_error(HSR_ERR_INVALID, "stream and event belong to different devices");
  if (s->dev->kind == HSR_DEVICE_CUDA) return kc_stream_wait_event(s, e);
  return HSR_OK;
}

hsr_status hsr_event_query(hsr_event *e, int *done) {
  if (!e || !done) return hsr_error(HSR_ERR_INVALID, "hsr_event_query: NULL event or out pointer");
  *done = 1;
  if (e->dev->kind == HSR_DEVICE_CUDA) return kc_event_query(e, done);
  return HSR_OK;
}

hsr_status hsr_event_sync(hsr_event *e, double timeout_s) {
  if (!e) return hsr_error(HSR_ERR_INVALID, "hsr_event_sync: NULL event");
  HSR_CHECK(check_timeout(timeout_s));
  double t0 = hsr_clock_s();
  unsigned us = 20;
  for (;;) {
    int done = 0;
    HSR_CHECK(hsr_event_query(e, &done));
    if (done) return HSR_OK;
    if (hsr_clock_s() - t0 >= timeout_s)
      return hsr_error(HSR_ERR_TIMEOUT, "event not reached within %.3f s", timeout_s);
    kern_backoff(&us);
  }
}
