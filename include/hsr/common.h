/* hsr common layer: status codes, last-error detail, logging, env parsing, clock.
 * Nothing here depends on any other part of hsr. */
#ifndef HSR_COMMON_H
#define HSR_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

/* The public API: libhsr.so is built with -fvisibility=hidden, so only what
 * is declared with HSR_API is exported. */
#if defined(__GNUC__)
#define HSR_API __attribute__((visibility("default")))
#else
#define HSR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_status {
  HSR_OK = 0,
  HSR_ERR_INVALID,     /* bad argument or bad user input */
  HSR_ERR_NOMEM,       /* allocation failed */
  HSR_ERR_TIMEOUT,     /* a bounded wait expired */
  HSR_ERR_BOOT,        /* launcher / PMIx failure */
  HSR_ERR_TRANSPORT,   /* UCX, shared memory or NCCL transport failure */
  HSR_ERR_SYSTEM,      /* an OS call failed (errno in the detail) */
  HSR_ERR_IO,          /* file read/write/parse failure */
  HSR_ERR_UNSUPPORTED, /* valid request this build or machine cannot do */
  HSR_ERR_MISMATCH,    /* ranks disagree (config hash, layout, sizes) */
  HSR_ERR_STATE,       /* call made in the wrong lifecycle state */
  HSR_ERR_NOT_FOUND,   /* named thing does not exist */
  HSR_ERR_CUDA,        /* CUDA runtime error */
  HSR_ERR_INTERNAL     /* a bug in hsr */
} hsr_status;

/* Short fixed name of a status code ("HSR_ERR_TIMEOUT"); never NULL. */
HSR_API const char *hsr_status_str(hsr_status st);

/* Thread-local detail of the last error raised on this thread ("" if none). */
HSR_API const char *hsr_last_error(void);
/* Records a detail message for st on this thread and returns st, so that
 * failures read `return hsr_error(HSR_ERR_INVALID, "count %zu ...", n);`. */
HSR_API hsr_status hsr_error(hsr_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock. */
HSR_API uint64_t hsr_clock_ns(void);

#define HSR_CHECK(expr)                    \
  do {                                     \
    hsr_status _hsr_st = (expr);           \
    if (_hsr_st != HSR_OK) return _hsr_st; \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
