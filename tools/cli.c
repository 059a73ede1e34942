/* Front-end helpers that every command uses (tools/ and bench/): usage
 * errors and failures, with the exit codes of cli.h; the check of the
 * weights a command reads. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "hsr/safetensors_sharded.h"
#include "hsr/sys.h"

int hsr_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hsr %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see 'hsr %s --help')\n", cmd);
  va_end(ap);
  return HSR_EXIT_USAGE;
}

int hsr_cli_fail(const char *cmd, hsr_status st) {
  fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
  return st == HSR_ERR_INVALID ? HSR_EXIT_USAGE : HSR_EXIT_FAIL;
}

int hsr_cli_fail_job(const char *cmd, hsr_status st, hsr_boot *b) {
  int code = hsr_cli_fail(cmd, st);
  fflush(stdout);
  if (b) hsr_boot_end_failed_job(b, code, 1.0);
  return code;
}

hsr_status hsr_cli_check_weights(const char *what, const char *path) {
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) return hsr_path_check_read(what, path);
  char *file = NULL;
  int is_index = 0;
  hsr_status st = hsr_st_set_locate(path, &file, &is_index);
  if (st != HSR_OK) {
    char why[900];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    st = hsr_error(st, "%s: %s", what, why);
  } else {
    st = hsr_path_check_read(what, file);
  }
  free(file);
  return st;
}

hsr_status hsr_cli_check_ckpt(const char *what, const char *path) {
  struct stat sb;
  const char *slash = path ? strrchr(path, '/') : NULL, *base = slash ? slash + 1 : path;
  if (path && !stat(path, &sb) && S_ISREG(sb.st_mode) && !strcmp(base, "latest"))
    return hsr_path_check_read(what, path);
  return hsr_path_check_dir(what, path, 0);
}

hsr_status hsr_cli_check_out_dir(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb)) return hsr_path_check_write(what, path); /* to be made: its parent exists */
  if (!S_ISDIR(sb.st_mode))
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s' is a file: with --max-shard-size the weights are a directory (%s or "
                     "model-00001-of-0000N.safetensors and %s, as save_pretrained writes them)",
                     what, path, HSR_ST_SINGLE_NAME, HSR_ST_INDEX_NAME);
  return hsr_path_check_dir(what, path, 1);
}
