/* The commit protocol of a checkpoint, whatever its format (ckpt_format):
 * rank 0 stages the directory (the root made, a crashed attempt's files
 * removed; a committed checkpoint stays valid until its index is replaced),
 * and after every rank's data is durable commits it: the format's index
 * under a temporary name, fsync, rename, directory fsync (from here on the
 * checkpoint exists), then `latest` the same way, then the files the format
 * does not keep go. Retention keeps the newest committed checkpoints and
 * removes older ones and crashed saves' leftovers (first the index, so a
 * crash midway leaves no half checkpoint). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "ckpt_int.h"

static hsr_status mkdir_p(const char *path) {
  char p[4096];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return hsr_error(HSR_ERR_INVALID, "path too long");
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c == '/' || c == 0) {
      *s = 0;
      if (mkdir(p, 0755) && errno != EEXIST)
        return hsr_error(HSR_ERR_IO, "creating checkpoint directory '%s' failed: %s", p, strerror(errno));
      *s = c;
    }
    if (!c) break;
  }
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode))
    return hsr_error(HSR_ERR_IO, "checkpoint root '%s' is not a directory", path);
  return HSR_OK;
}

/* Removes a directory's files that `keep` says are not to be kept. */
static void remove_files(const char *dir, int (*keep)(const char *name, ckpt_job *job), ckpt_job *job) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[4400];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (keep && keep(e->d_name, job))) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (unlink(p)) HSR_LOG_W("checkpoint: could not remove '%s': %s", p, strerror(errno));
  }
  closedir(d);
}

hsr_status ckpt_commit_prepare(const ckpt_commit_at *x, const ckpt_format *f) {
  HSR_CHECK(mkdir_p(x->root));
  char m[4400];
  snprintf(m, sizeof m, "%s/%s", x->dir, f->index);
  struct stat sb;
  if (!stat(x->dir, &sb)) {
    if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_IO, "'%s' exists and is not a directory", x->dir);
    /* a committed checkpoint stays valid until the new manifest replaces it
     * (new data files have new names); a crashed attempt's files go */
    if (stat(m, &sb)) remove_files(x->dir, NULL, NULL);
    return HSR_OK;
  }
  if (mkdir(x->dir, 0755)) return hsr_error(HSR_ERR_IO, "creating '%s' failed: %s", x->dir, strerror(errno));
  return ckpt_fsync_dir(x->root);
}

static void remove_ckpt(const char *root, const char *name, const char *index) {
  char d[4200], m[4400];
  snprintf(d, sizeof d, "%s/%s", root, name);
  snprintf(m, sizeof m, "%s/%s", d, index);
  /* first it stops being a checkpoint, then its files go */
  if (!unlink(m) && ckpt_fsync_dir(d) != HSR_OK) HSR_LOG_W("checkpoint: %s", hsr_last_error());
  remove_files(d, NULL, NULL);
  if (rmdir(d)) HSR_LOG_W("checkpoint: could not remove '%s': %s", d, strerror(errno));
}

static int step_of(const char *name, int64_t *step) {
  if (strncmp(name, "step-", 5) || !name[5]) return 0;
  char *end;
  long long v = strtoll(name + 5, &end, 10);
  if (*end || v < 0) return 0;
  *step = v;
  return 1;
}

typedef struct old_ckpt {
  char name[CKPT_NAME_MAX];
  int64_t step;
  int committed;
} old_ckpt;

static int old_cmp(const void *a, const void *b) {
  const old_ckpt *x = a, *y = b;
  return x->step > y->step ? -1 : x->step < y->step;
}

/* Keeps the new checkpoint and the keep - 1 newest older ones; removes the
 * rest and the leftovers of crashed saves older than the new one.
 * Checkpoints of a later step (an abandoned run) are left alone. */
void ckpt_commit_prune(const ckpt_commit_at *x, const ckpt_format *f, int keep) {
  DIR *d = opendir(x->root);
  if (!d) return;
  old_ckpt *v = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int64_t s;
    if (!step_of(e->d_name, &s) || s >= x->step || !strcmp(e->d_name, x->name) || strlen(e->d_name) >= CKPT_NAME_MAX)
      continue;
    if (grow_array(&v, &cap, n, sizeof *v, 16, "checkpoint retention") != HSR_OK) break;
    char m[4400];
    struct stat sb;
    snprintf(m, sizeof m, "%s/%s/%s", x->root, e->d_name, f->index);
    snprintf(v[n].name, sizeof v[n].name, "%.127s", e->d_name); /* shorter names only (checked above) */
    v[n].step = s;
    v[n++].committed = !stat(m, &sb);
  }
  closedir(d);
  if (n) qsort(v, (size_t)n, sizeof *v, old_cmp);
  int kept = 1;
  for (int i = 0; i < n; i++) {
    if (v[i].committed && kept < keep) {
      kept++;
      continue;
    }
    HSR_LOG_I("checkpoint: removing %s/%s (%s)", x->root, v[i].name, v[i].committed ? "--keep" : "incomplete");
    remove_ckpt(x->root, v[i].name, f->index);
  }
  free(v);
}

hsr_status ckpt_commit_run(const ckpt_commit_at *x, const ckpt_format *f, ckpt_job *job, int *committed) {
  char *text;
  size_t len;
  HSR_CHECK(f->index_text(job, &text, &len));
  int fault = x->fault == CKPT_FAULT_BEFORE_MANIFEST_RENAME;
  hsr_status st = ckpt_fsync_dir(x->dir); /* the data files' renames are durable before the index names them */
  if (st == HSR_OK) st = ckpt_write_small(x->dir, f->index, text, len, fault);
  free(text);
  if (st == HSR_OK && fault) ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_MANIFEST_RENAME, x->rank, x->step);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->dir);
  HSR_CHECK(st);
  *committed = 1; /* from here on the checkpoint exists */
  ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_LATEST, x->rank, x->step);
  char line[CKPT_NAME_MAX + 2];
  int n = snprintf(line, sizeof line, "%s\n", x->name);
  st = ckpt_write_small(x->root, CKPT_LATEST, line, (size_t)n, 0);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->root);
  remove_files(x->dir, f->keep, job);
  return st;
}
