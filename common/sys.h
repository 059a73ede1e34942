/* What this machine can hold, and checks of the paths a user names: the
 * pieces every front end needs to refuse bad input before any work starts. */
#ifndef HSR_SYS_H
#define HSR_SYS_H

#include <stdio.h>

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The memory this process can still use, in bytes: MemAvailable of
 * /proc/meminfo, or less where a memory cgroup limits it (a container's
 * --memory). hsr's node-shared memory is memfds, which draw on exactly this
 * (charged to the cgroup like private memory), not on /dev/shm's size.
 * HSR_ERR_UNSUPPORTED where the kernel does not say. HSR_MEM_AVAILABLE, a
 * test hook, when it is set. */
hsr_status sys_mem_available(uint64_t *bytes);
/* What the memory cgroup named in `proc_cgroup` (the format of
 * /proc/self/cgroup; v1 or v2) leaves, with the cgroup file systems under
 * `root` (/sys/fs/cgroup): the smallest limit - usage (+ reclaimable page
 * cache) over the cgroup and those above it. HSR_ERR_NOT_FOUND when no limit
 * applies. */
hsr_status sys_cgroup_room(const char *proc_cgroup, const char *root, uint64_t *bytes);
/* Bytes an unprivileged writer may still use on the file system holding
 * `path` (statvfs: f_bavail x f_frsize); /dev/shm for shared memory. */
hsr_status sys_fs_available(const char *path, uint64_t *bytes);
/* "1.50 GiB", "12.0 MiB", "512 bytes". */
void sys_bytes_text(double bytes, char *buf, size_t len);

/* A file to read: it exists, is a regular file (not a directory) and is
 * readable. HSR_ERR_INVALID naming `what` ("--xml") and the path. */
hsr_status path_check_read(const char *what, const char *path);
/* A file to write: not a directory, and its directory exists and is
 * writable (the file itself may be missing; an existing one must be
 * writable). */
hsr_status path_check_write(const char *what, const char *path);
/* A directory: it exists (writable: and this process may create files in it). */
hsr_status path_check_dir(const char *what, const char *path, int writable);
/* A directory the program makes when missing (mkdir -p): an existing one
 * must be a writable directory, else its nearest existing ancestor must. */
hsr_status path_check_mkdir(const char *what, const char *path);

/* An output as it will be written (out_open): a regular file (through
 * symlinks), a new path, a character device (/dev/null) or a FIFO; a
 * directory, a block device, a socket or a link to nothing is refused. */
hsr_status path_check_output(const char *what, const char *path);
/* HSR_ERR_INVALID when `a` and `b` are the same file (an output that is an
 * input, or two outputs on one path); NULL paths and character devices pass. */
hsr_status path_check_distinct(const char *what_a, const char *a, const char *what_b, const char *b);
/* HSR_ERR_INVALID when `path` lies inside directory `dir` (an output among a
 * checkpoint's files). */
hsr_status path_check_outside(const char *what, const char *path, const char *what_dir, const char *dir);

/* ---- opening what the checks allowed ---------------------------------------
 * An input: a regular file only, opened without blocking (a FIFO or a device
 * in a checkpoint would hang or never end the read): HSR_ERR_IO naming
 * `what`, the path and what it is otherwise. */
hsr_status file_open_read(const char *what, const char *path, int *fd);
hsr_status file_fopen_read(const char *what, const char *path, FILE **f);

/* An output. HSR_OUT_WHOLE: a regular file or a new path is written to a
 * temporary file beside its target (a symlink's target: the link stays) and
 * renamed into place by out_close after fsync, so a reader sees the old
 * file or the whole new one. HSR_OUT_STREAM (a log read while it grows): the
 * file itself. Either way a character device or a FIFO is written in place
 * and never renamed over (as root, --trace /dev/null must not replace
 * /dev/null), as are /dev/stdout, /dev/fd/N and /proc/.../fd/N. Every write
 * is checked: out_flush and out_close return HSR_ERR_IO naming `what`
 * and the path (a full disk, /dev/full). */
enum { HSR_OUT_WHOLE = 0, HSR_OUT_STREAM = 1 };
typedef struct sys_out {
  FILE *f; /* write here */
  int fd;  /* its descriptor (for a child process's stdout; f is a cookie stream, fileno() is -1) */
  void *sink;
  char *path, *target, *tmp;
  int in_place;
  char what[32];
} sys_out;
hsr_status out_open(sys_out *o, const char *what, const char *path, int mode);
hsr_status out_flush(sys_out *o);
/* Flushes, checks, renames into place; frees (also on error). */
hsr_status out_close(sys_out *o);
/* Drops what was written (the temporary is removed); frees. */
void out_abort(sys_out *o);

#ifdef __cplusplus
}
#endif
#endif
