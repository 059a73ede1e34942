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
/* Marks the current error as the job's: every rank has agreed on it (it is
 * printed once, by rank 0). An error that wraps it (its text contains the
 * marked text) stays marked; any other new error clears the mark. */
HSR_API void hsr_error_share(void);
HSR_API int hsr_error_shared(void);
HSR_API void hsr_clear_error(void);

/* Logging. Level from HSR_LOG=error|warn|info|debug (default warn); lines go to
 * stderr prefixed "[rank N]" where the launcher has set PMIX_RANK. */
typedef enum hsr_log_level { HSR_LOG_ERROR = 0, HSR_LOG_WARN = 1, HSR_LOG_INFO = 2, HSR_LOG_DEBUG = 3 } hsr_log_level;
HSR_API void hsr_log(hsr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
HSR_API int hsr_log_enabled(hsr_log_level level);
/* Validates HSR_LOG; a malformed value is an error. */
HSR_API hsr_status hsr_log_check_env(void);

#define HSR_LOG_E(...) hsr_log(HSR_LOG_ERROR, __VA_ARGS__)
#define HSR_LOG_W(...) hsr_log(HSR_LOG_WARN, __VA_ARGS__)
#define HSR_LOG_I(...) hsr_log(HSR_LOG_INFO, __VA_ARGS__)
#define HSR_LOG_D(...) hsr_log(HSR_LOG_DEBUG, __VA_ARGS__)

/* Strict parsers: the whole string must be a value in range, else
 * HSR_ERR_INVALID with a message naming `what` and the valid range. */
HSR_API hsr_status hsr_parse_long(const char *what, const char *s, long min, long max, long *out);
HSR_API hsr_status hsr_parse_double(const char *what, const char *s, double min, double max, double *out);
/* Byte sizes with optional K/M/G/T suffix (powers of 1024), e.g. "64M". */
HSR_API hsr_status hsr_parse_size(const char *what, const char *s, size_t *out);
/* One of `choices` (NULL-terminated); *out is its index. */
HSR_API hsr_status hsr_parse_choice(const char *what, const char *s, const char *const *choices, int *out);
/* A comma list of at most `max` network addresses, each HOST:PORT with an
 * optional http:// in front: HOST a host name (letters, digits, '-' and '.'
 * in labels of at most 63), an IPv4 address or a bracketed IPv6 one, PORT 1
 * to 65535, nothing else (no path, no empty item). Only checks the text:
 * nothing is resolved, so a malformed value never reaches DNS. */
HSR_API hsr_status hsr_parse_hostports(const char *what, const char *s, int max);

/* Env helpers for any variable: an unset one gives `def`; one set but empty,
 * or malformed, is an error (never silently ignored). hsr's own HSR_*
 * variables are read through their registry instead (hsr/env.h). */
HSR_API hsr_status hsr_env_long(const char *name, long def, long min, long max, long *out);
HSR_API hsr_status hsr_env_double(const char *name, double def, double min, double max, double *out);
HSR_API hsr_status hsr_env_size(const char *name, size_t def, size_t *out);
HSR_API hsr_status hsr_env_choice(const char *name, const char *const *choices, int def, int *out);
HSR_API hsr_status hsr_env_bool(const char *name, int def, int *out);

/* Monotonic clock. */
HSR_API uint64_t hsr_clock_ns(void);
HSR_API double hsr_clock_s(void);

#define HSR_CHECK(expr)                    \
  do {                                     \
    hsr_status _hsr_st = (expr);           \
    if (_hsr_st != HSR_OK) return _hsr_st; \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
