/* The commit protocol of a checkpoint or an export, whatever its format
 * (ckpt_format): rank 0 prepares the directory (the root made, a crashed
 * attempt's files removed; a committed output stays valid until its index
 * is replaced), and after every rank's data is durable commits it: staged
 * files take their names (a previous output's index gone first), the
 * format's index under a temporary name, fsync, rename, directory fsync
 * (from here on the output exists), then a checkpoint's `latest` the same
 * way, then the files the format does not keep go. Retention keeps the
 * newest committed checkpoints and removes older ones and crashed saves'
 * leftovers (first the index, so a crash midway leaves no half checkpoint). */
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

#define STAGED ".hsr-staged"

/* Removes a directory's files that `keep` says are not to be kept. */
static void remove_files(const char *dir, int (*keep)(const char *name, const void *w), const void *w) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[4400];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (keep && keep(e->d_name, w))) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (unlink(p)) HSR_LOG_W("checkpoint: could not remove '%s': %s", p, strerror(errno));
  }
  closedir(d);
}

hsr_status ckpt_commit_staged_path(const char *dir, const char *name, char *buf, size_t len) {
  if ((size_t)snprintf(buf, len, "%s/%s" STAGED, dir, name) >= len)
    return hsr_error(HSR_ERR_INVALID, "'%.64s...': the path is too long", dir);
  return HSR_OK;
}

void ckpt_commit_discard(const ckpt_commit_at *x, const ckpt_format *f, const void *w) {
  char name[CKPT_FILE_MAX], p[4400];
  for (int i = 0; f->staged && f->staged(w, i, name, sizeof name); i++)
    if (ckpt_commit_staged_path(x->dir, name, p, sizeof p) == HSR_OK && unlink(p) && errno != ENOENT)
      HSR_LOG_W("checkpoint: could not remove '%s': %s", p, strerror(errno));
}

hsr_status ckpt_commit_prepare(const ckpt_commit_at *x, const ckpt_format *f, const void *w) {
  if (x->root) HSR_CHECK(mkdir_p(x->root));
  char m[4400];
  snprintf(m, sizeof m, "%s/%s", x->dir, f->index(w));
  struct stat sb;
  if (!stat(x->dir, &sb)) {
    if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_IO, "'%s' exists and is not a directory", x->dir);
    /* a committed output stays valid until the new index replaces it (new
     * data files have new names or are staged); a crashed attempt's files go */
    ckpt_commit_discard(x, f, w);
    if (f->own_names && stat(m, &sb)) remove_files(x->dir, NULL, NULL);
    return HSR_OK;
  }
  if (mkdir(x->dir, 0755)) return hsr_error(HSR_ERR_IO, "creating '%s' failed: %s", x->dir, strerror(errno));
  if (x->root) return ckpt_fsync_dir(x->root);
  char parent[4096]; /* an export's directory: its parent holds the new name */
  const char *sl = strrchr(x->dir, '/');
  snprintf(parent, sizeof parent, "%.*s", sl ? (int)(sl - x->dir) + (sl == x->dir) : 1, sl ? x->dir : ".");
  return ckpt_fsync_dir(parent);
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
  const char *index = f->index(NULL);
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
    snprintf(m, sizeof m, "%s/%s/%s", x->root, e->d_name, index);
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
    remove_ckpt(x->root, v[i].name, index);
  }
  free(v);
}

/* The files f retires go, then every staged data file takes its name. */
static hsr_status install_staged(const ckpt_commit_at *x, const ckpt_format *f, const void *w, const char *index) {
  char name[CKPT_FILE_MAX], from[4400], to[4400];
  if (!f->staged || !f->staged(w, 0, name, sizeof name)) return HSR_OK;
  DIR *d = opendir(x->dir);
  if (!d) return hsr_error(HSR_ERR_IO, "cannot open directory '%s': %s", x->dir, strerror(errno));
  struct dirent *e;
  hsr_status st = HSR_OK;
  while (st == HSR_OK && (e = readdir(d)) != NULL)
    if (f->retire && f->retire(e->d_name, w)) {
      snprintf(to, sizeof to, "%s/%s", x->dir, e->d_name);
      if (unlink(to) && errno != ENOENT) st = hsr_error(HSR_ERR_IO, "removing '%s': %s", to, strerror(errno));
    }
  closedir(d);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->dir); /* the old output is gone before any of its files is replaced */
  for (int i = 0; st == HSR_OK && f->staged(w, i, name, sizeof name); i++) {
    if (!strcmp(name, index)) continue; /* the index goes last */
    st = ckpt_commit_staged_path(x->dir, name, from, sizeof from);
    if (st == HSR_OK) st = ckpt_path(to, sizeof to, x->dir, name);
    if (st == HSR_OK && rename(from, to))
      st = hsr_error(HSR_ERR_IO, "renaming '%s' to '%s' failed: %s", from, to, strerror(errno));
  }
  return st == HSR_OK ? ckpt_fsync_dir(x->dir) : st; /* the data's names are durable before the index names them */
}

hsr_status ckpt_commit_run(const ckpt_commit_at *x, const ckpt_format *f, void *w, int *committed) {
  const char *index = f->index(w);
  char *text = NULL;
  size_t len = 0;
  if (f->index_text) HSR_CHECK(f->index_text(w, &text, &len));
  int fault = x->fault == CKPT_FAULT_BEFORE_MANIFEST_RENAME;
  hsr_status st = ckpt_fsync_dir(x->dir); /* the data files' renames are durable before the index names them */
  if (st == HSR_OK) st = install_staged(x, f, w, index);
  int staged = !text; /* the index is a staged data file */
  if (st == HSR_OK && text) st = ckpt_write_small(x->dir, index, text, len, fault);
  free(text);
  if (st == HSR_OK && staged) {
    char from[4400], to[4400];
    st = ckpt_commit_staged_path(x->dir, index, from, sizeof from);
    if (st == HSR_OK) st = ckpt_path(to, sizeof to, x->dir, index);
    if (st == HSR_OK && rename(from, to))
      st = hsr_error(HSR_ERR_IO, "renaming '%s' to '%s' failed: %s", from, to, strerror(errno));
  }
  if (st == HSR_OK && fault) ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_MANIFEST_RENAME, x->rank, x->step);
  if (st == HSR_OK) st = ckpt_fsync_dir(x->dir);
  HSR_CHECK(st);
  *committed = 1; /* from here on the output exists */
  if (x->root) {
    ckpt_fault_here(x->fault, CKPT_FAULT_BEFORE_LATEST, x->rank, x->step);
    char line[CKPT_NAME_MAX + 2];
    int n = snprintf(line, sizeof line, "%s\n", x->name);
    st = ckpt_write_small(x->root, CKPT_LATEST, line, (size_t)n, 0);
    if (st == HSR_OK) st = ckpt_fsync_dir(x->root);
  }
  remove_files(x->dir, f->keep, w);
  return st;
}
