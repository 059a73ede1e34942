/* What this machine can hold (memory, a file system's free space) and the
 * checks of paths a user names (hsr/sys.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hsr/env.h"
#include "hsr/sys.h"

hsr_status hsr_sys_mem_available(uint64_t *bytes) {
  size_t hook = 0;
  const char *set = NULL;
  HSR_CHECK(hsr_env_get_str("HSR_MEM_AVAILABLE", &set));
  if (set) { /* a test's budget, so a check can be tried at any size */
    HSR_CHECK(hsr_env_get_size("HSR_MEM_AVAILABLE", &hook));
    *bytes = hook;
    return HSR_OK;
  }
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long kb = 0;
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
  if (f) fclose(f);
  if (!found) return hsr_error(HSR_ERR_UNSUPPORTED, "/proc/meminfo has no MemAvailable");
  *bytes = (uint64_t)kb * 1024;
  return HSR_OK;
}

hsr_status hsr_sys_fs_available(const char *path, uint64_t *bytes) {
  struct statvfs sv;
  if (statvfs(path, &sv) != 0) return hsr_error(HSR_ERR_SYSTEM, "statvfs(%s): %s", path, strerror(errno));
  *bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
  return HSR_OK;
}

void hsr_sys_bytes_text(double b, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) {
    snprintf(buf, len, "%.0f bytes", b);
    return;
  }
  int u = -1;
  while (u < 4 && b >= 1024) b /= 1024, u++;
  snprintf(buf, len, b < 10 ? "%.2f %s" : b < 100 ? "%.1f %s" : "%.0f %s", b, units[u]);
}

hsr_status hsr_path_check_read(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) != 0) return hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is a directory, not a file", what, path);
  if (!S_ISREG(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a regular file", what, path);
  if (access(path, R_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s' is not readable: %s", what, path, strerror(errno));
  return HSR_OK;
}

hsr_status hsr_path_check_write(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is a directory, not a file", what, path);
    if (access(path, W_OK) != 0)
      return hsr_error(HSR_ERR_INVALID, "%s '%s' is not writable: %s", what, path, strerror(errno));
    return HSR_OK;
  }
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  if (stat(dir, &sb) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': its directory '%s' does not exist", what, path, dir);
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' is not a directory", what, path, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': its directory '%s' is not writable: %s", what, path, dir,
                     strerror(errno));
  return HSR_OK;
}

hsr_status hsr_path_check_dir(const char *what, const char *path, int writable) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) != 0) return hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a directory", what, path);
  if (writable && access(path, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a writable directory: %s", what, path, strerror(errno));
  return HSR_OK;
}

hsr_status hsr_path_check_mkdir(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) == 0) return hsr_path_check_dir(what, path, 1);
  char up[4096];
  snprintf(up, sizeof up, "%s", path);
  for (;;) {
    char *slash = strrchr(up, '/');
    while (slash && slash > up && slash[1] == '\0') { /* trailing slashes */
      *slash = '\0';
      slash = strrchr(up, '/');
    }
    if (!slash) {
      snprintf(up, sizeof up, ".");
    } else if (slash == up) {
      up[1] = '\0';
    } else {
      *slash = '\0';
    }
    if (stat(up, &sb) == 0) break;
    if (!slash) return hsr_error(HSR_ERR_INVALID, "%s '%s': no existing directory above it", what, path);
  }
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' is not a directory", what, path, up);
  if (access(up, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': cannot create it in '%s': %s", what, path, up, strerror(errno));
  return HSR_OK;
}
