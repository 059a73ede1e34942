#include "hsr/common.h"
#include "common/common_internal.h"
#include "common/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The registry's choices of HSR_LOG are these, in this order (env_table.c). */
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};

/* Read each time: logging is off the hot path and this keeps no global state.
 * A bad value logs at warn here; every command refuses it before it starts. */
static int current_level(void) {
  int lvl = HSR_LOG_WARN;
  if (env_get_choice("HSR_LOG", &lvl) != HSR_OK) return HSR_LOG_WARN;
  return lvl;
}

hsr_status log_check_env(void) { return env_check("HSR_LOG"); }

int log_enabled(log_level level) { return (int)level <= current_level(); }

void log_msg(log_level level, const char *fmt, ...) {
  if (!log_enabled(level)) return;
  char line[2048];
  int off = 0;
  const char *rank = getenv("PMIX_RANK");
  off = snprintf(line, sizeof line, "[rank %s] hsr %s: ", rank && *rank ? rank : "0", level_names[level]);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + off, sizeof line - (size_t)off, fmt, ap);
  va_end(ap);
  size_t n = strlen(line);
  if (n + 1 < sizeof line && (n == 0 || line[n - 1] != '\n')) {
    line[n++] = '\n';
    line[n] = '\0';
  }
  fputs(line, stderr); /* one write per line so ranks do not interleave mid-line */
}
