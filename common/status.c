#include "hsr/common.h"
#include "common/common_internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];
static _Thread_local int last_shared; /* every rank of the job holds this error (error_share) */

const char *hsr_status_str(hsr_status st) {
  switch (st) {
  case HSR_OK: return "HSR_OK";
  case HSR_ERR_INVALID: return "HSR_ERR_INVALID";
  case HSR_ERR_NOMEM: return "HSR_ERR_NOMEM";
  case HSR_ERR_TIMEOUT: return "HSR_ERR_TIMEOUT";
  case HSR_ERR_BOOT: return "HSR_ERR_BOOT";
  case HSR_ERR_TRANSPORT: return "HSR_ERR_TRANSPORT";
  case HSR_ERR_SYSTEM: return "HSR_ERR_SYSTEM";
  case HSR_ERR_IO: return "HSR_ERR_IO";
  case HSR_ERR_UNSUPPORTED: return "HSR_ERR_UNSUPPORTED";
  case HSR_ERR_MISMATCH: return "HSR_ERR_MISMATCH";
  case HSR_ERR_STATE: return "HSR_ERR_STATE";
  case HSR_ERR_NOT_FOUND: return "HSR_ERR_NOT_FOUND";
  case HSR_ERR_CUDA: return "HSR_ERR_CUDA";
  case HSR_ERR_INTERNAL: return "HSR_ERR_INTERNAL";
  }
  return "HSR_ERR_UNKNOWN";
}

const char *hsr_last_error(void) { return last_error; }

void clear_error(void) { last_error[0] = '\0', last_shared = 0; }

void error_share(void) { last_shared = last_error[0] != '\0'; }

int error_shared(void) { return last_shared; }

/* Formats into a scratch buffer first: callers wrap the previous error
 * (hsr_error(st, "...: %s", hsr_last_error())), and vsnprintf must not read
 * the buffer it writes. */
hsr_status hsr_error(hsr_status st, const char *fmt, ...) {
  char msg[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* a wrap of a shared error ("...: <it>") is still the job's */
  last_shared = last_shared && last_error[0] && strstr(msg, last_error) != NULL;
  memcpy(last_error, msg, sizeof msg);
  return st;
}
