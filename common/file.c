/* Files a user names, opened the same way everywhere (common/sys.h): inputs
 * must be regular files (a FIFO would block the open, a device would be read
 * forever), outputs never rename a new file over something that is not a
 * regular file, every write is checked, and an output is never one of the
 * inputs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sys.h"

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

/* ---- inputs --------------------------------------------------------------------- */

hsr_status file_open_read(const char *what, const char *path, int *fd) {
  *fd = -1;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  /* O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (f < 0) return hsr_error(HSR_ERR_IO, "cannot open %s '%s': %s", what, path, strerror(errno));
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    int e = errno;
    close(f);
    return hsr_error(HSR_ERR_IO, "%s '%s': %s", what, path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(f);
    return hsr_error(HSR_ERR_IO, "%s '%s' is %s, not a regular file", what, path, kind_of(sb.st_mode));
  }
  int fl = fcntl(f, F_GETFL);
  if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  return HSR_OK;
}

hsr_status file_fopen_read(const char *what, const char *path, FILE **out) {
  *out = NULL;
  int fd;
  HSR_CHECK(file_open_read(what, path, &fd));
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    close(fd);
    return hsr_error(HSR_ERR_IO, "%s '%s': %s", what, path, strerror(e));
  }
  *out = f;
  return HSR_OK;
}

/* ---- where an output really goes ------------------------------------------------------ */

/* Paths whose file is whatever a descriptor points at (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N): written in place, never resolved and renamed over. */
static int magic(const char *p) {
  return !strncmp(p, "/dev/std", 8) || !strncmp(p, "/dev/fd/", 8) || !strncmp(p, "/proc/", 6);
}

/* The file an output path names: through symlinks (the link stays, its target
 * is written); for a new file, the path itself with its directory resolved. */
static hsr_status resolve(const char *what, const char *path, char *out, size_t n) {
  char buf[PATH_MAX];
  if (realpath(path, buf)) {
    snprintf(out, n, "%s", buf);
    return HSR_OK;
  }
  if (errno != ENOENT) return hsr_error(HSR_ERR_INVALID, "%s '%s': %s", what, path, strerror(errno));
  struct stat lsb;
  if (lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode))
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s' is a symbolic link to a file that does not exist (valid: a file, a "
                     "new path, a link to an existing file, or a device such as /dev/null)",
                     what, path);
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  if (!*base) return hsr_error(HSR_ERR_INVALID, "%s '%s' names a directory, not a file", what, path);
  if (!realpath(dir, buf))
    return hsr_error(HSR_ERR_INVALID, "%s '%s': its directory '%s': %s", what, path, dir, strerror(errno));
  size_t lb = strlen(buf), ln = strlen(base), sep = strcmp(buf, "/") != 0;
  if (lb + sep + ln >= n) return hsr_error(HSR_ERR_INVALID, "%s '%s': path too long", what, path);
  memcpy(out, buf, lb);
  if (sep) out[lb] = '/';
  memcpy(out + lb + sep, base, ln + 1);
  return HSR_OK;
}

hsr_status path_check_output(const char *what, const char *path) {
  HSR_CHECK(path_check_write(what, path));
  if (magic(path)) return HSR_OK;
  char t[PATH_MAX];
  HSR_CHECK(resolve(what, path, t, sizeof t));
  struct stat sb;
  if (stat(t, &sb) != 0 || S_ISREG(sb.st_mode) || S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode)) return HSR_OK;
  return hsr_error(HSR_ERR_INVALID,
                   "%s '%s' is %s (valid: a file, a new path, a character device such as /dev/null, "
                   "or a FIFO)",
                   what, path, kind_of(sb.st_mode));
}

/* Both name the same file: the same inode when both exist, else the same
 * resolved path. */
static int same(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ra[PATH_MAX], rb[PATH_MAX];
  if (resolve("", a, ra, sizeof ra) != HSR_OK || resolve("", b, rb, sizeof rb) != HSR_OK) return 0;
  return !strcmp(ra, rb);
}

hsr_status path_check_distinct(const char *what_a, const char *a, const char *what_b, const char *b) {
  if (!a || !b) return HSR_OK;
  if (magic(a) && magic(b) && strcmp(a, b)) return HSR_OK; /* /dev/stdout and /dev/stderr may be one terminal */
  struct stat sb;
  if (stat(a, &sb) == 0 && S_ISCHR(sb.st_mode)) return HSR_OK; /* /dev/null twice is fine */
  if (!same(a, b)) return HSR_OK;
  return hsr_error(HSR_ERR_INVALID,
                   "%s '%s' and %s '%s' are the same file: an output must not overwrite an input "
                   "or another output",
                   what_a, a, what_b, b);
}

hsr_status path_check_outside(const char *what, const char *path, const char *what_dir, const char *dir) {
  if (!path || !dir || magic(path)) return HSR_OK;
  char rp[PATH_MAX], rd[PATH_MAX];
  if (resolve(what, path, rp, sizeof rp) != HSR_OK || !realpath(dir, rd)) return HSR_OK; /* checked elsewhere */
  size_t n = strlen(rd);
  if (strncmp(rp, rd, n) == 0 && (rp[n] == '/' || rp[n] == '\0' || !strcmp(rd, "/")))
    return hsr_error(HSR_ERR_INVALID, "%s '%s' lies inside %s '%s', whose files are hsr's: write it elsewhere", what,
                     path, what_dir, dir);
  return HSR_OK;
}

/* ---- writing an output ---------------------------------------------------------------------- */

/* The stream's descriptor and the first write error on it: stdio keeps only
 * a flag once a buffered write failed, and the message should say why. */
typedef struct out_sink {
  int fd, err;
} out_sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
  out_sink *s = cookie;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(s->fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (!s->err) s->err = w < 0 ? errno : EIO;
      return done ? (ssize_t)done : -1;
    }
    done += (size_t)w;
  }
  return (ssize_t)done;
}

static int sink_close(void *cookie) {
  out_sink *s = cookie;
  int rc = close(s->fd);
  if (rc != 0 && !s->err) s->err = errno;
  int bad = s->err != 0;
  free(s);
  return bad ? -1 : 0;
}

/* Removes what o made, keeping the error that made it fail (the removal may
 * set another). */
static hsr_status abort_keeping(sys_out *o, hsr_status st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", hsr_last_error());
  out_abort(o);
  return hsr_error(st, "%s", msg);
}

hsr_status out_open(sys_out *o, const char *what, const char *path, int mode) {
  memset(o, 0, sizeof *o);
  o->fd = -1;
  snprintf(o->what, sizeof o->what, "%s", what);
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  o->path = strdup(path);
  if (!o->path) return hsr_error(HSR_ERR_NOMEM, "%s: out of memory", what);
  int fd = -1;
  char t[PATH_MAX];
  struct stat sb;
  hsr_status st = HSR_OK;
  if (magic(path) || (resolve(what, path, t, sizeof t) == HSR_OK && stat(t, &sb) == 0 && !S_ISREG(sb.st_mode))) {
    /* a device, a FIFO, a descriptor: written in place. A FIFO without a
     * reader is an error now rather than a wait. */
    if (!magic(path) && !S_ISCHR(sb.st_mode) && !S_ISFIFO(sb.st_mode))
      st = hsr_error(HSR_ERR_IO, "%s '%s' is %s, not a file to write", what, path, kind_of(sb.st_mode));
    else if ((fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
      st = hsr_error(HSR_ERR_IO, "%s '%s': %s", what, path,
                     errno == ENXIO ? "a FIFO that no process reads" : strerror(errno));
    o->in_place = 1;
  } else {
    st = resolve(what, path, t, sizeof t);
    if (st == HSR_OK && mode == HSR_OUT_STREAM) { /* read while it grows: in place */
      if ((fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0644)) < 0)
        st = hsr_error(HSR_ERR_IO, "%s '%s': %s", what, path, strerror(errno));
      o->in_place = 1;
    } else if (st == HSR_OK) { /* whole or not at all: a temporary beside the target */
      size_t n = strlen(t) + 32;
      o->target = strdup(t);
      o->tmp = malloc(n);
      if (!o->target || !o->tmp)
        st = hsr_error(HSR_ERR_NOMEM, "%s: out of memory", what);
      else
        snprintf(o->tmp, n, "%s.tmp.%ld", t, (long)getpid());
      if (st == HSR_OK && (fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0644)) < 0)
        st = hsr_error(HSR_ERR_IO, "%s '%s': cannot create '%s': %s", what, path, o->tmp, strerror(errno));
    }
  }
  if (st == HSR_OK && fd >= 0) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    out_sink *s = malloc(sizeof *s);
    cookie_io_functions_t io = {.write = sink_write, .close = sink_close};
    if (s) *s = (out_sink){fd, 0};
    if (!s || !(o->f = fopencookie(s, "w", io))) {
      st = hsr_error(HSR_ERR_IO, "%s '%s': %s", what, path, strerror(errno ? errno : ENOMEM));
      free(s);
      close(fd);
    } else {
      o->sink = s;
      o->fd = fd;
    }
  }
  if (st != HSR_OK) return abort_keeping(o, st);
  return HSR_OK;
}

/* 0, or the errno of a failed write: fflush's, or (an earlier write failed
 * and stdio kept only its flag) that of writing what is still buffered again. */
static int write_error(sys_out *o) {
  int bad = fflush(o->f) != 0 || ferror(o->f);
  out_sink *s = o->sink;
  if (!bad) return 0;
  return s && s->err ? s->err : EIO;
}

hsr_status out_flush(sys_out *o) {
  if (!o || !o->f) return HSR_OK;
  int e = write_error(o);
  if (e) return hsr_error(HSR_ERR_IO, "%s '%s': write failed: %s", o->what, o->path, strerror(e));
  return HSR_OK;
}

hsr_status out_close(sys_out *o) {
  if (!o || !o->path) return HSR_OK;
  hsr_status st = HSR_OK;
  if (o->f) {
    int e = write_error(o), bad = e != 0;
    out_sink *s = o->sink;
    if (!bad && o->tmp && fsync(s->fd) != 0) bad = 1, e = errno;
    if (fclose(o->f) != 0 && !bad) bad = 1, e = EIO; /* the close: the sink has gone with it */
    o->f = NULL, o->sink = NULL, o->fd = -1;
    if (bad) st = hsr_error(HSR_ERR_IO, "%s '%s': write failed: %s", o->what, o->path, strerror(e));
  }
  if (st == HSR_OK && o->tmp && rename(o->tmp, o->target) != 0)
    st = hsr_error(HSR_ERR_IO, "%s '%s': cannot rename '%s' into place: %s", o->what, o->path, o->tmp, strerror(errno));
  if (st == HSR_OK) {
    free(o->tmp);
    o->tmp = NULL;
  }
  if (st != HSR_OK) return abort_keeping(o, st);
  out_abort(o); /* frees; nothing left to remove */
  return HSR_OK;
}

void out_abort(sys_out *o) {
  if (!o) return;
  if (o->f) fclose(o->f); /* closes the sink */
  o->sink = NULL;
  if (o->tmp) unlink(o->tmp);
  free(o->tmp), free(o->target), free(o->path);
  o->f = NULL, o->tmp = NULL, o->target = NULL, o->path = NULL, o->fd = -1;
}
