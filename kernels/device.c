/* The device layer's API: argument checks, then the device's kind (a table
 * of entry points: kern_host in host.c, kern_cuda in cuda_table.c, kern_sim
 * in sim.c). Nothing here asks which kind a device is. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsr/config.h"
#include "kernels/kernels_internal.h"
#include "common/common_internal.h"
#include "internal.h"

void kern_backoff(unsigned *us) {
  struct timespec ts = {0, (long)*us * 1000L};
  nanosleep(&ts, NULL);
  if (*us < 1000) *us *= 2;
}

static const kern_kind *kind_table(hsr_device_kind kind) {
  switch (kind) {
  case HSR_DEVICE_HOST: return &kern_host;
  case HSR_DEVICE_CUDA: return &kern_cuda;
  case HSR_DEVICE_SIM: return &kern_sim;
  }
  return NULL;
}

int device_cuda_count(void) { return HSR_HAVE_CUDA ? kc_count() : 0; }

hsr_status hsr_device_open(hsr_device_kind kind, int ordinal, hsr_device **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "hsr_device_open: out is NULL");
  *out = NULL;
  const kern_kind *k = kind_table(kind);
  if (!k)
    return hsr_error(HSR_ERR_INVALID,
                     "device kind %d is not HSR_DEVICE_HOST (0), HSR_DEVICE_CUDA (1) or HSR_DEVICE_SIM (2)", (int)kind);
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
  d->k = k;
  d->ordinal = ordinal;
  d->dflt.dev = d;
  hsr_status st = k->open(d);
  if (st != HSR_OK) {
    free(d);
    return st;
  }
  *out = d;
  return HSR_OK;
}

hsr_status hsr_device_close(hsr_device *d) {
  if (!d) return HSR_OK;
  hsr_status st = d->k->close(d);
  free(d);
  return st;
}

hsr_device_kind hsr_device_kind_of(const hsr_device *d) { return d ? d->kind : HSR_DEVICE_HOST; }

#define MAX_BYTES (SIZE_MAX / 2)

hsr_status hsr_device_alloc(hsr_device *d, size_t bytes, void **ptr) {
  if (!d || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_device_alloc: NULL device or out pointer");
  *ptr = NULL;
  if (bytes > MAX_BYTES) return hsr_error(HSR_ERR_NOMEM, "allocation of %zu bytes", bytes);
  return d->k->alloc(d, bytes, ptr);
}

hsr_status hsr_device_free(hsr_device *d, void *ptr) {
  if (!d) return hsr_error(HSR_ERR_INVALID, "hsr_device_free: NULL device");
  if (!ptr) return HSR_OK;
  return d->k->free(d, ptr);
}

hsr_status device_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  if (!d || !ptr) return hsr_error(HSR_ERR_INVALID, "device_host_alloc: NULL device or out pointer");
  *ptr = NULL;
  if (bytes > MAX_BYTES) return hsr_error(HSR_ERR_NOMEM, "host allocation of %zu bytes", bytes);
  return d->k->host_alloc(d, bytes, ptr);
}

hsr_status device_host_free(hsr_device *d, void *ptr) {
  if (!d) return hsr_error(HSR_ERR_INVALID, "device_host_free: NULL device");
  if (!ptr) return HSR_OK;
  return d->k->host_free(d, ptr);
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
  return d->k->copy(s, dst, src, bytes);
}

hsr_status hsr_device_memset(hsr_device *d, void *dst, int value, size_t bytes, hsr_stream *s) {
  HSR_CHECK(pick_stream(d, s, &s));
  if (bytes == 0) return HSR_OK;
  if (!dst) return hsr_error(HSR_ERR_INVALID, "hsr_device_memset of %zu bytes with a NULL pointer", bytes);
  return d->k->memset(s, dst, value, bytes);
}

hsr_status kern_resolve_stream(hsr_device *d, hsr_stream *s, hsr_stream **out) { return pick_stream(d, s, out); }

hsr_status stream_create(hsr_device *d, int priority, hsr_stream **out) {
  if (!d || !out) return hsr_error(HSR_ERR_INVALID, "stream_create: NULL device or out pointer");
  *out = NULL;
  if (priority != 0 && priority != 1)
    return hsr_error(HSR_ERR_INVALID, "stream priority %d: valid are 0 (normal) and 1 (high)", priority);
  hsr_stream *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "stream object");
  s->dev = d;
  hsr_status st = d->k->stream_init(s, priority, 1);
  if (st != HSR_OK) {
    free(s);
    return st;
  }
  *out = s;
  return HSR_OK;
}

hsr_status stream_destroy(hsr_stream *s) {
  if (!s) return HSR_OK;
  hsr_status st = s->dev->k->stream_fini(s);
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
  if (s->dev->k->stream_sync) return s->dev->k->stream_sync(s, timeout_s);
  double t0 = clock_s();
  unsigned us = 20;
  for (;;) {
    int done = 0;
    HSR_CHECK(s->dev->k->stream_query(s, &done));
    if (done) return HSR_OK;
    if (clock_s() - t0 >= timeout_s) return hsr_error(HSR_ERR_TIMEOUT, "stream did not drain within %.3f s", timeout_s);
    kern_backoff(&us);
  }
}

hsr_device *stream_device(hsr_stream *s) { return s ? s->dev : NULL; }

void *stream_native(hsr_stream *s) { return s && s->dev->kind == HSR_DEVICE_CUDA ? s->native : NULL; }

hsr_status event_create(hsr_device *d, dev_event **out) {
  if (!d || !out) return hsr_error(HSR_ERR_INVALID, "event_create: NULL device or out pointer");
  *out = NULL;
  dev_event *e = calloc(1, sizeof *e);
  if (!e) return hsr_error(HSR_ERR_NOMEM, "event object");
  e->dev = d;
  hsr_status st = d->k->event_init(e);
  if (st != HSR_OK) {
    free(e);
    return st;
  }
  *out = e;
  return HSR_OK;
}

hsr_status event_destroy(dev_event *e) {
  if (!e) return HSR_OK;
  hsr_status st = e->dev->k->event_fini(e);
  free(e);
  return st;
}

hsr_status event_record(dev_event *e, hsr_stream *s) {
  if (!e) return hsr_error(HSR_ERR_INVALID, "event_record: NULL event");
  HSR_CHECK(pick_stream(e->dev, s, &s));
  return e->dev->k->event_record(e, s);
}

hsr_status stream_wait_event(hsr_stream *s, dev_event *e) {
  if (!s || !e) return hsr_error(HSR_ERR_INVALID, "stream_wait_event: NULL stream or event");
  if (s->dev != e->dev) return hsr_error(HSR_ERR_INVALID, "stream and event belong to different devices");
  return s->dev->k->stream_wait_event(s, e);
}

hsr_status event_query(dev_event *e, int *done) {
  if (!e || !done) return hsr_error(HSR_ERR_INVALID, "event_query: NULL event or out pointer");
  *done = 1;
  return e->dev->k->event_query(e, done);
}

hsr_status event_sync(dev_event *e, double timeout_s) {
  if (!e) return hsr_error(HSR_ERR_INVALID, "event_sync: NULL event");
  HSR_CHECK(check_timeout(timeout_s));
  double t0 = clock_s();
  unsigned us = 20;
  for (;;) {
    int done = 0;
    HSR_CHECK(event_query(e, &done));
    if (done) return HSR_OK;
    if (clock_s() - t0 >= timeout_s) return hsr_error(HSR_ERR_TIMEOUT, "event not reached within %.3f s", timeout_s);
    kern_backoff(&us);
  }
}

hsr_status hsr_kernels_launch(hsr_device *d, hsr_stream *s, const hsr_kernel_def *k, const void *args,
                              size_t args_bytes, const hsr_access *acc, int nacc) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (!k || !k->name || !k->host)
    return hsr_error(HSR_ERR_INVALID, "hsr_kernels_launch: the kernel needs a name and its CPU twin (host)");
  if (args_bytes > HSR_KERNEL_ARGS_MAX || (args_bytes && !args))
    return hsr_error(HSR_ERR_INVALID, "hsr_kernels_launch(%s): %zu bytes of arguments (at most %d, not NULL)", k->name,
                     args_bytes, HSR_KERNEL_ARGS_MAX);
  if (nacc < 0 || (nacc && !acc))
    return hsr_error(HSR_ERR_INVALID, "hsr_kernels_launch(%s): %d accesses with a NULL list", k->name, nacc);
  return d->k->launch(s, k, args, args_bytes, acc, nacc);
}
