/* What every fuzz target shares: hsr's parsers take paths, so an input goes
 * to an in-memory file (a memfd, reused) named /proc/self/fd/N. Test code,
 * not the library: a static is fine here. */
#ifndef HSR_FUZZ_IO_H
#define HSR_FUZZ_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file; NULL if it cannot be written. */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("hsr-fuzz", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0) return NULL;
  size_t off = 0;
  while (off < size) {
    ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
    if (w <= 0) return NULL;
    off += (size_t)w;
  }
  return path;
}

#endif
