/* What this machine can hold (memory, a file system's free space) and the
 * checks of paths a user names (common/sys.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/env.h"
#include "common/sys.h"

/* ---- memory: the machine's, and what a memory cgroup leaves ------------------ */

/* One number from a cgroup file ("max": none); -1 when unreadable. */
static int64_t cg_num(const char *dir, const char *file) {
  char p[4200], b[64];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  int ok = fgets(b, sizeof b, f) != NULL;
  fclose(f);
  if (!ok || !strncmp(b, "max", 3)) return -1;
  char *end;
  unsigned long long v = strtoull(b, &end, 10);
  return end == b || v >= (1ull << 62) ? -1 : (int64_t)v; /* v1's "no limit" is about 2^63 */
}

/* memory.stat's `key` (bytes); 0 when absent. */
static int64_t cg_stat(const char *dir, const char *key) {
  char p[4200], line[256];
  snprintf(p, sizeof p, "%s/memory.stat", dir);
  FILE *f = fopen(p, "r");
  int64_t v = 0;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, k) && line[k] == ' ') {
      v = strtoll(line + k + 1, NULL, 10);
      break;
    }
  if (f) fclose(f);
  return v;
}

hsr_status sys_cgroup_room(const char *proc_cgroup, const char *root, uint64_t *bytes) {
  if (!proc_cgroup || !root || !bytes) return hsr_error(HSR_ERR_INVALID, "sys_cgroup_room: NULL argument");
  FILE *f = fopen(proc_cgroup, "r");
  if (!f) return hsr_error(HSR_ERR_UNSUPPORTED, "%s: %s", proc_cgroup, strerror(errno));
  char line[4096], path[4096] = "", base[4200] = "";
  int v2 = 0;
  while (fgets(line, sizeof line, f)) { /* "4:memory:/a/b" (v1) or "0::/a/b" (v2) */
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *ctl = c1 + 1;
    int mem = !strcmp(ctl, "memory") || !strncmp(ctl, "memory,", 7) || strstr(ctl, ",memory") != NULL;
    if (mem) { /* v1 wins where both are there: the v1 hierarchy then holds the memory controller */
      snprintf(path, sizeof path, "%s", c2 + 1);
      snprintf(base, sizeof base, "%s/memory", root);
      v2 = 0;
      break;
    }
    if (!*ctl && c1 == line + 1 && line[0] == '0') {
      snprintf(path, sizeof path, "%s", c2 + 1);
      char t[4200];
      snprintf(t, sizeof t, "%s/cgroup.controllers", root);
      struct stat sb;
      snprintf(base, sizeof base, stat(t, &sb) == 0 ? "%s" : "%s/unified", root);
      v2 = 1;
    }
  }
  fclose(f);
  if (!base[0]) return hsr_error(HSR_ERR_UNSUPPORTED, "%s names no memory cgroup", proc_cgroup);
  /* the cgroup's folder; in a cgroup namespace or another mount the path may
   * not be there: the nearest folder above it that is */
  char dir[8400];
  struct stat sb;
  for (;;) {
    snprintf(dir, sizeof dir, "%s%s", base, path);
    if (stat(dir, &sb) == 0 || !path[0]) break;
    char *sl = strrchr(path, '/');
    if (!sl) break;
    *sl = '\0';
  }
  int64_t room = -1;
  size_t nb = strlen(base);
  for (;;) { /* this cgroup and every one above it: the tightest limit holds */
    int64_t lim = cg_num(dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    int64_t use = cg_num(dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (lim >= 0 && use >= 0) {
      /* page cache is reclaimed before the limit bites; shared memory (memfds) is not */
      int64_t cache = cg_stat(dir, v2 ? "file" : "cache") - cg_stat(dir, "shmem");
      int64_t r = lim - use + (cache > 0 ? cache : 0);
      if (r < 0) r = 0;
      if (room < 0 || r < room) room = r;
    }
    if (strlen(dir) <= nb) break;
    char *sl = strrchr(dir, '/');
    if (!sl || (size_t)(sl - dir) < nb) break;
    *sl = '\0';
  }
  if (room < 0) return hsr_error(HSR_ERR_NOT_FOUND, "no memory cgroup limit applies");
  *bytes = (uint64_t)room;
  return HSR_OK;
}

hsr_status sys_mem_available(uint64_t *bytes) {
  size_t hook = 0;
  const char *set = NULL;
  HSR_CHECK(env_get_str("HSR_MEM_AVAILABLE", &set));
  if (set) { /* a test's budget, so a check can be tried at any size */
    HSR_CHECK(env_get_size("HSR_MEM_AVAILABLE", &hook));
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
  uint64_t cg = 0; /* a container's limit: what private memory and memfds are both charged to */
  if (sys_cgroup_room("/proc/self/cgroup", "/sys/fs/cgroup", &cg) == HSR_OK && cg < *bytes) *bytes = cg;
  return HSR_OK;
}

hsr_status sys_fs_available(const char *path, uint64_t *bytes) {
  struct statvfs sv;
  if (statvfs(path, &sv) != 0) return hsr_error(HSR_ERR_SYSTEM, "statvfs(%s): %s", path, strerror(errno));
  *bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
  return HSR_OK;
}

void sys_bytes_text(double b, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (b < 1024) {
    snprintf(buf, len, "%.0f bytes", b);
    return;
  }
  int u = -1;
  while (u < 4 && b >= 1024) b /= 1024, u++;
  snprintf(buf, len, b < 10 ? "%.2f %s" : b < 100 ? "%.1f %s" : "%.0f %s", b, units[u]);
}

/* Why stat() failed on a path that may still be made: ENOENT is "not there
 * yet" (0); a symbolic link loop, a file where a directory is meant on the
 * way, or a directory that cannot be searched would fail the first write of
 * the run, so they are said now. */
static hsr_status unreachable(const char *what, const char *path, const char *part, int e) {
  if (e == ENOENT) return HSR_OK;
  const char *why = e == ELOOP     ? "is a symbolic link loop (or a chain of more than 40 links)"
                    : e == ENOTDIR ? "has a file where a directory is meant on its way"
                                   : NULL;
  if (!strcmp(part, path))
    return why ? hsr_error(HSR_ERR_INVALID, "%s '%s' %s", what, path, why)
               : hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(e));
  return why ? hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' %s", what, path, part, why)
             : hsr_error(HSR_ERR_INVALID, "%s '%s': '%s': %s", what, path, part, strerror(e));
}

hsr_status path_check_read(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) != 0) return hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is a directory, not a file", what, path);
  if (!S_ISREG(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a regular file", what, path);
  if (access(path, R_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s' is not readable: %s", what, path, strerror(errno));
  return HSR_OK;
}

hsr_status path_check_write(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is a directory, not a file", what, path);
    if (access(path, W_OK) != 0)
      return hsr_error(HSR_ERR_INVALID, "%s '%s' is not writable: %s", what, path, strerror(errno));
    return HSR_OK;
  }
  HSR_CHECK(unreachable(what, path, path, errno));
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  if (stat(dir, &sb) != 0) {
    HSR_CHECK(unreachable(what, path, dir, errno));
    return hsr_error(HSR_ERR_INVALID, "%s '%s': its directory '%s' does not exist", what, path, dir);
  }
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' is not a directory", what, path, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': its directory '%s' is not writable: %s", what, path, dir,
                     strerror(errno));
  return HSR_OK;
}

hsr_status path_check_dir(const char *what, const char *path, int writable) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) != 0) return hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a directory", what, path);
  if (writable && access(path, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s' is not a writable directory: %s", what, path, strerror(errno));
  return HSR_OK;
}

hsr_status path_check_mkdir(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb) == 0) return path_check_dir(what, path, 1);
  HSR_CHECK(unreachable(what, path, path, errno));
  /* a link to nothing: mkdir would find the name taken */
  if (lstat(path, &sb) == 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s' is a symbolic link to nothing (a dangling link)", what, path);
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
    HSR_CHECK(unreachable(what, path, up, errno));
    if (lstat(up, &sb) == 0)
      return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' is a symbolic link to nothing (a dangling link)", what, path,
                       up);
    if (!slash) return hsr_error(HSR_ERR_INVALID, "%s '%s': no existing directory above it", what, path);
  }
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' is not a directory", what, path, up);
  if (access(up, W_OK | X_OK) != 0)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': cannot create it in '%s': %s", what, path, up, strerror(errno));
  return HSR_OK;
}
