/* What this machine can hold, and checks of the paths a user names: the
 * pieces every front end needs to refuse bad input before any work starts. */
#ifndef HSR_SYS_H
#define HSR_SYS_H

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MemAvailable of /proc/meminfo, in bytes (HSR_ERR_UNSUPPORTED where the
 * kernel does not say); HSR_MEM_AVAILABLE, a test hook, when it is set. */
HSR_API hsr_status hsr_sys_mem_available(uint64_t *bytes);
/* Bytes an unprivileged writer may still use on the file system holding
 * `path` (statvfs: f_bavail x f_frsize); /dev/shm for shared memory. */
HSR_API hsr_status hsr_sys_fs_available(const char *path, uint64_t *bytes);
/* "1.50 GiB", "12.0 MiB", "512 bytes". */
HSR_API void hsr_sys_bytes_text(double bytes, char *buf, size_t len);

/* A file to read: it exists, is a regular file (not a directory) and is
 * readable. HSR_ERR_INVALID naming `what` ("--xml") and the path. */
HSR_API hsr_status hsr_path_check_read(const char *what, const char *path);
/* A file to write: not a directory, and its directory exists and is
 * writable (the file itself may be missing; an existing one must be
 * writable). */
HSR_API hsr_status hsr_path_check_write(const char *what, const char *path);
/* A directory: it exists (writable: and this process may create files in it). */
HSR_API hsr_status hsr_path_check_dir(const char *what, const char *path, int writable);
/* A directory the program makes when missing (mkdir -p): an existing one
 * must be a writable directory, else its nearest existing ancestor must. */
HSR_API hsr_status hsr_path_check_mkdir(const char *what, const char *path);

#ifdef __cplusplus
}
#endif
#endif
