/* The committed checkpoints of a root (hsr/ckpt.h): a checkpoint exists when
 * its manifest does, whatever `latest` says (a crash between the manifest
 * and `latest` leaves `latest` one checkpoint behind, or missing). */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_int.h"
#include "runtime/ckpt/ckpt_internal.h"

int ckpt_committed(const char *root, const char *name) {
  if (!root || !name) return 0;
  char m[4400];
  struct stat sb;
  snprintf(m, sizeof m, "%s/%s/%s", root, name, CKPT_MANIFEST);
  return !stat(m, &sb) && S_ISREG(sb.st_mode);
}

hsr_status ckpt_newest(const char *root, char *name, size_t n, int64_t *step) {
  if (!root || !name || !n) return hsr_error(HSR_ERR_INVALID, "ckpt_newest: NULL argument");
  name[0] = '\0';
  DIR *d = opendir(root);
  if (!d) return hsr_error(HSR_ERR_NOT_FOUND, "checkpoint root '%s' cannot be read", root);
  int64_t best = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    if (strncmp(e->d_name, "step-", 5) || !e->d_name[5] || strlen(e->d_name) >= CKPT_NAME_MAX) continue;
    long long v = strtoll(e->d_name + 5, &end, 10);
    if (*end || v < 0 || v <= best || !ckpt_committed(root, e->d_name)) continue;
    best = v;
    snprintf(name, n, "%s", e->d_name);
  }
  closedir(d);
  if (best < 0) return hsr_error(HSR_ERR_NOT_FOUND, "no committed checkpoint under '%s'", root);
  if (step) *step = best;
  return HSR_OK;
}
