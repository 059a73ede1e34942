/* common internals: the calls of hsr/common.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_COMMON_COMMON_INTERNAL_H
#define HSR_COMMON_COMMON_INTERNAL_H
#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the current error as the job's: every rank has agreed on it (it is
 * printed once, by rank 0). An error that wraps it (its text contains the
 * marked text) stays marked; any other new error clears the mark. */
void error_share(void);
int error_shared(void);
void clear_error(void);

/* Logging. Level from HSR_LOG=error|warn|info|debug (default warn); lines go to
 * stderr prefixed "[rank N]" where the launcher has set PMIX_RANK. */
typedef enum log_level { HSR_LOG_ERROR = 0, HSR_LOG_WARN = 1, HSR_LOG_INFO = 2, HSR_LOG_DEBUG = 3 } log_level;
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int log_enabled(log_level level);

/* Installs the fatal-signal report (common/crash.c) for the signals still
 * at their default action, unless HSR_CRASH_REPORT=0. */
void crash_report_install(void);

/* Validates HSR_LOG; a malformed value is an error. */
hsr_status log_check_env(void);
#define HSR_LOG_E(...) log_msg(HSR_LOG_ERROR, __VA_ARGS__)
#define HSR_LOG_W(...) log_msg(HSR_LOG_WARN, __VA_ARGS__)
#define HSR_LOG_I(...) log_msg(HSR_LOG_INFO, __VA_ARGS__)
#define HSR_LOG_D(...) log_msg(HSR_LOG_DEBUG, __VA_ARGS__)

/* Strict parsers: the whole string must be a value in range, else
 * HSR_ERR_INVALID with a message naming `what` and the valid range. */
hsr_status parse_long(const char *what, const char *s, long min, long max, long *out);
hsr_status parse_double(const char *what, const char *s, double min, double max, double *out);

/* Byte sizes with optional K/M/G/T suffix (powers of 1024), e.g. "64M". */
hsr_status parse_size(const char *what, const char *s, size_t *out);

/* One of `choices` (NULL-terminated); *out is its index. */
hsr_status parse_choice(const char *what, const char *s, const char *const *choices, int *out);

/* A comma list of at most `max` network addresses, each HOST:PORT with an
 * optional http:// in front: HOST a host name (letters, digits, '-' and '.'
 * in labels of at most 63), an IPv4 address or a bracketed IPv6 one, PORT 1
 * to 65535, nothing else (no path, no empty item). Only checks the text:
 * nothing is resolved, so a malformed value never reaches DNS. */
hsr_status parse_hostports(const char *what, const char *s, int max);

/* Env helpers for any variable: an unset one gives `def`; one set but empty,
 * or malformed, is an error (never silently ignored). hsr's own HSR_*
 * variables are read through their registry instead (common/env.h). */
hsr_status env_long(const char *name, long def, long min, long max, long *out);
hsr_status env_double(const char *name, double def, double min, double max, double *out);
hsr_status env_size(const char *name, size_t def, size_t *out);
hsr_status env_choice(const char *name, const char *const *choices, int def, int *out);
hsr_status env_bool(const char *name, int def, int *out);
double clock_s(void);

#ifdef __cplusplus
}
#endif
#endif
