/* Checkpoint files: durable writes (write, fsync, rename, directory fsync),
 * the reader that verifies every block it reads against the manifest's
 * crc32s, whole-checkpoint verification, path resolution, the fault hook. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <zlib.h>

#include "ckpt_int.h"
#include "common/env.h"
#include "common/sys.h"
#include "runtime/ckpt/ckpt_internal.h"

int ckpt_safe_name(const char *s) {
  if (!s || !*s || *s == '.' || strlen(s) >= CKPT_NAME_MAX) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
      return 0;
  return 1;
}

hsr_status ckpt_path(char *buf, size_t len, const char *dir, const char *name) {
  int n = snprintf(buf, len, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= len) return hsr_error(HSR_ERR_INVALID, "checkpoint path '%s/%s' is too long", dir, name);
  return HSR_OK;
}

hsr_status ckpt_write_all(int fd, const void *p, size_t n, const char *path) {
  const char *b = p;
  while (n) {
    ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return hsr_error(HSR_ERR_IO, "writing '%s' failed: %s", path, w < 0 ? strerror(errno) : "no progress");
    b += w;
    n -= (size_t)w;
  }
  return HSR_OK;
}

hsr_status ckpt_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "opening directory '%s' to sync it failed: %s", dir, strerror(errno));
  int rc = fsync(fd), e = errno;
  close(fd);
  if (rc) return hsr_error(HSR_ERR_IO, "fsync of directory '%s' failed: %s", dir, strerror(e));
  return HSR_OK;
}

hsr_status ckpt_write_small(const char *dir, const char *name, const void *p, size_t n, int fault_before_rename) {
  char path[4096], tmp[4200];
  HSR_CHECK(ckpt_path(path, sizeof path, dir, name));
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "creating '%s' failed: %s", tmp, strerror(errno));
  hsr_status st = ckpt_write_all(fd, p, n, tmp);
  if (st == HSR_OK && fsync(fd)) st = hsr_error(HSR_ERR_IO, "fsync of '%s' failed: %s", tmp, strerror(errno));
  if (close(fd) && st == HSR_OK) st = hsr_error(HSR_ERR_IO, "closing '%s' failed: %s", tmp, strerror(errno));
  if (st == HSR_OK && fault_before_rename) return HSR_OK; /* the caller's fault hook runs before the rename */
  if (st == HSR_OK && rename(tmp, path))
    st = hsr_error(HSR_ERR_IO, "renaming '%s' to '%s' failed: %s", tmp, path, strerror(errno));
  if (st != HSR_OK) unlink(tmp);
  return st;
}

hsr_status ckpt_slurp(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  int fd;
  struct stat sb;
  if (lstat(path, &sb) != 0 && errno == ENOENT)
    return hsr_error(HSR_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  HSR_CHECK(file_open_read("checkpoint file", path, &fd)); /* a FIFO or a device: refused, not waited on */
  if (fstat(fd, &sb) || (size_t)sb.st_size > max) {
    close(fd);
    return hsr_error(HSR_ERR_IO, "'%s' is unreadable or larger than %zu bytes", path, max);
  }
  size_t n = (size_t)sb.st_size, got = 0;
  char *b = malloc(n + 1);
  if (!b) {
    close(fd);
    return hsr_error(HSR_ERR_NOMEM, "out of memory reading '%s'", path);
  }
  while (got < n) {
    ssize_t r = read(fd, b + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != n) {
    free(b);
    return hsr_error(HSR_ERR_IO, "reading '%s' failed after %zu of %zu bytes", path, got, n);
  }
  b[n] = 0;
  *out = b;
  *len = n;
  return HSR_OK;
}

/* ---- crc32, whole file and per block ---- */
/* zlib's crc32 (the format's), computed by ISA-L with carry-less
 * multiplication: about 20 GB/s against zlib's 2-4 here, which a load pays
 * on every byte it reads and a save on every byte it writes. */
static uint32_t crc_feed(uint32_t crc, const void *p, uint64_t n) { return crc32_gzip_refl(crc, p, n); }

void ckpt_crc_init(ckpt_crc *c, uint64_t block) {
  memset(c, 0, sizeof *c);
  c->block = block;
  c->file = c->cur = (uint32_t)crc32(0L, Z_NULL, 0);
}

static hsr_status close_block(ckpt_crc *c) {
  if (c->nb == c->cap) {
    uint64_t cap = c->cap ? 2 * c->cap : 64;
    uint32_t *nb = realloc(c->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    c->blocks = nb;
    c->cap = cap;
  }
  c->blocks[c->nb++] = c->cur;
  c->file = (uint32_t)crc32_combine(c->file, c->cur, (z_off_t)c->in_block);
  c->cur = (uint32_t)crc32(0L, Z_NULL, 0);
  c->in_block = 0;
  return HSR_OK;
}

hsr_status ckpt_crc_feed(ckpt_crc *c, const void *p, size_t n) {
  const unsigned char *b = p;
  while (n) {
    size_t take = (size_t)(c->block - c->in_block) < n ? (size_t)(c->block - c->in_block) : n;
    c->cur = crc_feed(c->cur, b, take);
    c->in_block += take;
    c->bytes += take;
    b += take;
    n -= take;
    if (c->in_block == c->block) HSR_CHECK(close_block(c));
  }
  return HSR_OK;
}

hsr_status ckpt_crc_finish(ckpt_crc *c) { return c->in_block ? close_block(c) : HSR_OK; }
void ckpt_crc_free(ckpt_crc *c) {
  free(c->blocks);
  c->blocks = NULL;
}

/* ---- the verified reader ---- */
static int span_cmp(const void *a, const void *b) {
  const ckpt_span *x = a, *y = b;
  if (x->file != y->file) return x->file < y->file ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

static hsr_status pread_all(int fd, void *buf, size_t n, uint64_t off) {
  char *b = buf;
  while (n) {
    ssize_t r = pread(fd, b, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return hsr_error(HSR_ERR_IO, "%s", r < 0 ? strerror(errno) : "unexpected end of file");
    b += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return HSR_OK;
}

static void span_what(const ckpt_handle *c, const ckpt_span *s, char *buf, size_t len) {
  snprintf(buf, len, "tensor '%s', %s, elements [%" PRIu64 ", %" PRIu64 ")", c->t[s->tensor].name,
           ckpt_kind_name((ckpt_kind)s->kind), s->start, s->start + s->len / 4);
}

static hsr_status open_data(const ckpt_handle *c, int f, const ckpt_span *s, int *fd) {
  char path[4096], what[256];
  HSR_CHECK(ckpt_path(path, sizeof path, c->dir, c->f[f].name));
  struct stat lsb;
  int missing = lstat(path, &lsb) != 0 && errno == ENOENT;
  hsr_status ost = missing ? HSR_ERR_NOT_FOUND : file_open_read("data file", path, fd); /* a FIFO: refused */
  if (s)
    span_what(c, s, what, sizeof what);
  else
    snprintf(what, sizeof what, "%d tensors", c->nt);
  if (ost == HSR_ERR_NOT_FOUND)
    return hsr_error(ost, "checkpoint '%s': data file '%s' is missing (it holds %s)", c->dir, c->f[f].name, what);
  if (ost != HSR_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    return hsr_error(ost, "checkpoint '%s': %s (it holds %s)", c->dir, why, what);
  }
  struct stat sb;
  if (fstat(*fd, &sb) || (uint64_t)sb.st_size != c->f[f].bytes) {
    uint64_t have = (uint64_t)sb.st_size;
    close(*fd);
    *fd = -1;
    return hsr_error(HSR_ERR_IO,
                     "checkpoint '%s': data file '%s' is %" PRIu64 " bytes, the manifest records %" PRIu64
                     " (%s; it holds %s)",
                     c->dir, c->f[f].name, have, c->f[f].bytes, have < c->f[f].bytes ? "truncated" : "replaced", what);
  }
  return HSR_OK;
}

/* Every block of file bytes [cb, ce), read into the vector v, against the
 * manifest. */
static hsr_status check_vec(const ckpt_handle *c, int f, uint64_t cb, uint64_t ce, const struct iovec *v, int n) {
  const ckpt_file *fi = &c->f[f];
  uint64_t B = c->info.block_bytes, pos = cb, at = 0; /* at: bytes of v[0] already fed */
  for (uint64_t b = cb / B; b * B < ce; b++) {
    uint64_t end = (b + 1) * B < ce ? (b + 1) * B : ce;
    uint32_t got = 0;
    while (pos < end && n) {
      uint64_t take = v->iov_len - at < end - pos ? v->iov_len - at : end - pos;
      got = crc_feed(got, (const char *)v->iov_base + at, take);
      pos += take, at += take;
      if (at == v->iov_len) v++, n--, at = 0;
    }
    if (got != fi->blocks[b]) {
      char what[256];
      ckpt_what_at(c, f, b * B, what, sizeof what); /* where the block starts */
      return hsr_error(HSR_ERR_IO,
                       "checkpoint '%s': data file '%s' block %" PRIu64 " (bytes [%" PRIu64 ", %" PRIu64
                       ")) has crc32 0x%08x, the manifest records 0x%08x: corrupted (the block starts in %s)",
                       c->dir, fi->name, b, b * B, end, got, fi->blocks[b], what);
    }
  }
  return HSR_OK;
}

/* The message of a failed read of [cb, ce) of file f (s: what it was for). */
static hsr_status read_failed(const ckpt_handle *c, int f, uint64_t cb, uint64_t ce, const ckpt_span *s) {
  char what[256];
  if (s)
    span_what(c, s, what, sizeof what);
  else
    ckpt_what_at(c, f, cb, what, sizeof what);
  return hsr_error(HSR_ERR_IO, "checkpoint '%s': reading bytes [%" PRIu64 ", %" PRIu64 ") of '%s' failed: %s (%s)",
                   c->dir, cb, ce, c->f[f].name, hsr_last_error(), what);
}

/* Reads [cb, ce) of file f (cb block-aligned) into buf and checks its blocks. */
static hsr_status read_chunk(const ckpt_handle *c, int f, int fd, uint64_t cb, uint64_t ce, void *buf,
                             const ckpt_span *s) {
  if (pread_all(fd, buf, (size_t)(ce - cb), cb) != HSR_OK) return read_failed(c, f, cb, ce, s);
  struct iovec v = {buf, (size_t)(ce - cb)};
  return check_vec(c, f, cb, ce, &v, 1);
}

hsr_status ckpt_read_spans(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, ckpt_sink sink, void *ctx,
                           uint64_t *bytes) {
  uint64_t B = c->info.block_bytes, capB = cap / B * B;
  if (capB == 0) return hsr_error(HSR_ERR_INTERNAL, "checkpoint: a %zu-byte buffer is under one block", cap);
  if (n) qsort(s, (size_t)n, sizeof *s, span_cmp);
  hsr_status st = HSR_OK;
  for (int i = 0; i < n && st == HSR_OK;) {
    int f = s[i].file, fd = -1;
    st = open_data(c, f, &s[i], &fd);
    uint64_t cb = 0, ce = 0, fb = c->f[f].bytes;
    for (; i < n && s[i].file == f && st == HSR_OK; i++) {
      for (uint64_t pos = s[i].off, end = s[i].off + s[i].len; pos < end && st == HSR_OK;) {
        if (pos < cb || pos >= ce) {
          cb = pos / B * B;
          ce = cb + capB < fb ? cb + capB : fb;
          st = read_chunk(c, f, fd, cb, ce, buf, &s[i]);
          if (st != HSR_OK) break;
          if (bytes) *bytes += ce - cb;
        }
        uint64_t take = (end < ce ? end : ce) - pos;
        if (sink) st = sink(ctx, &s[i], pos - s[i].off, (const char *)buf + (pos - cb), (size_t)take);
        pos += take;
      }
    }
    while (i < n && s[i].file == f) i++;
    if (fd >= 0) close(fd);
  }
  return st;
}

/* Spans k.. from file offset pos on: how far they run on contiguously in the
 * file and in their hold memory. */
static uint64_t run_end(const ckpt_span *s, int k, int n, int f) {
  uint64_t end = s[k].off + s[k].len;
  for (int j = k + 1; j < n && s[j].file == f && s[j].off == end && s[j].hold == s[j - 1].hold + s[j - 1].len; j++)
    end += s[j].len;
  return end;
}

hsr_status ckpt_read_held(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, uint64_t *bytes) {
  uint64_t B = c->info.block_bytes, capB = cap / B * B;
  if (capB == 0) return hsr_error(HSR_ERR_INTERNAL, "checkpoint: a %zu-byte buffer is under one block", cap);
  if (n) qsort(s, (size_t)n, sizeof *s, span_cmp);
  hsr_status st = HSR_OK;
  for (int i = 0; i < n && st == HSR_OK;) {
    int f = s[i].file, fd = -1, e = i;
    while (e < n && s[e].file == f) e++;
    st = open_data(c, f, &s[i], &fd);
    uint64_t fb = c->f[f].bytes, bcb = 0, bce = 0, pos = s[i].off; /* the bounce buffer holds [bcb, bce) */
    for (int k = i; k < e && st == HSR_OK;) {
      uint64_t end = s[k].off + s[k].len;
      if (pos >= end) {
        if (++k < e) pos = s[k].off;
        continue;
      }
      uint64_t cb = pos / B * B, ce = cb + capB < fb ? cb + capB : fb, run = cb == pos ? run_end(s, k, e, f) : 0;
      if (run > cb && (run >= ce || run - cb >= B)) { /* whole blocks straight into the hold memory */
        if (run < ce) ce = run / B * B;
        st = read_chunk(c, f, fd, cb, ce, s[k].hold + (cb - s[k].off), &s[k]);
        if (bytes) *bytes += ce - cb;
        pos = ce;
        while (k < e && s[k].off + s[k].len <= pos) k++; /* read whole */
        if (k < e && s[k].off > pos) pos = s[k].off;
        continue;
      }
      if (pos < bcb || pos >= bce) {
        bcb = cb, bce = ce;
        st = read_chunk(c, f, fd, bcb, bce, buf, &s[k]);
        if (st != HSR_OK) break;
        if (bytes) *bytes += bce - bcb;
      }
      uint64_t take = (end < bce ? end : bce) - pos;
      memcpy(s[k].hold + (pos - s[k].off), (const char *)buf + (pos - bcb), (size_t)take);
      pos += take;
    }
    if (fd >= 0) close(fd);
    i = e;
  }
  return st;
}

/* ---- the reader in place ---- */
#define CKPT_IOV 1024 /* IOV_MAX on Linux */

static hsr_status preadv_all(int fd, struct iovec *v, int n, uint64_t off) {
  while (n) {
    ssize_t r = preadv(fd, v, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return hsr_error(HSR_ERR_IO, "%s", r < 0 ? strerror(errno) : "unexpected end of file");
    off += (uint64_t)r;
    for (size_t got = (size_t)r; n && got >= v->iov_len; n--, v++) got -= v->iov_len, r = (ssize_t)got;
    if (n && r) v->iov_base = (char *)v->iov_base + r, v->iov_len -= (size_t)r;
  }
  return HSR_OK;
}

/* The vector of file bytes [cb, ce) (spans k.. of file f, sorted): each
 * needed byte to its span's memory, the others (what other ranks need of
 * the same blocks) to buf. Returns where it stopped: ce, or before it when
 * the vector is full. */
static uint64_t build_vec(const ckpt_span *s, int k, int e, uint64_t cb, uint64_t ce, char *buf, struct iovec *v,
                          int max, int *nv) {
  uint64_t p = cb;
  *nv = 0;
  while (p < ce && *nv < max) {
    while (k < e && s[k].off + s[k].len <= p) k++;
    uint64_t to;
    char *at;
    if (k < e && s[k].off <= p) {
      to = s[k].off + s[k].len < ce ? s[k].off + s[k].len : ce;
      at = (char *)s[k].dst + (p - s[k].off);
    } else {
      to = k < e && s[k].off < ce ? s[k].off : ce;
      at = buf + (p - cb);
    }
    v[(*nv)++] = (struct iovec){at, (size_t)(to - p)};
    p = to;
  }
  return p;
}

hsr_status ckpt_read_into(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, uint64_t *bytes) {
  uint64_t B = c->info.block_bytes, capB = cap / B * B;
  if (capB == 0) return hsr_error(HSR_ERR_INTERNAL, "checkpoint: a %zu-byte buffer is under one block", cap);
  long max = CKPT_IOV; /* HSR_CKPT_IOV (test hook) */
  HSR_CHECK(env_get_long("HSR_CKPT_IOV", &max));
  struct iovec *v = malloc(2 * (size_t)max * sizeof *v), *w = v + max; /* w: the copy preadv_all moves */
  if (!v) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (n) qsort(s, (size_t)n, sizeof *s, span_cmp);
  hsr_status st = HSR_OK;
  for (int i = 0; i < n && st == HSR_OK;) {
    int f = s[i].file, fd = -1, e = i, nv = 0;
    while (e < n && s[e].file == f) e++;
    st = open_data(c, f, &s[i], &fd);
    uint64_t fb = c->f[f].bytes, last = s[e - 1].off + s[e - 1].len, pos = 0;
    uint64_t lim = (last + B - 1) / B * B < fb ? (last + B - 1) / B * B : fb; /* through the last block needed */
    for (int k = i; k < e && st == HSR_OK;) {
      uint64_t from = s[k].off > pos ? s[k].off : pos, cb = from / B * B, ce = cb + capB < lim ? cb + capB : lim;
      uint64_t got = build_vec(s, k, e, cb, ce, buf, v, (int)max, &nv);
      if (got < ce && got / B * B > cb) /* the vector is full: the window ends at its last whole block */
        ce = got / B * B, build_vec(s, k, e, cb, ce, buf, v, (int)max, &nv);
      if (got < ce) { /* one block of more pieces than a vector holds: through buf */
        ce = cb + B < lim ? cb + B : lim;
        st = read_chunk(c, f, fd, cb, ce, buf, &s[k]);
        for (int j = k; j < e && s[j].off < ce && st == HSR_OK; j++) {
          uint64_t a = s[j].off > cb ? s[j].off : cb, z = s[j].off + s[j].len < ce ? s[j].off + s[j].len : ce;
          if (a < z) memcpy((char *)s[j].dst + (a - s[j].off), (const char *)buf + (a - cb), (size_t)(z - a));
        }
      } else {
        memcpy(w, v, (size_t)nv * sizeof *v);
        st = preadv_all(fd, w, nv, cb) != HSR_OK ? read_failed(c, f, cb, ce, &s[k]) : check_vec(c, f, cb, ce, v, nv);
      }
      if (bytes) *bytes += ce - cb;
      pos = ce;
      while (k < e && s[k].off + s[k].len <= pos) k++;
    }
    if (fd >= 0) close(fd);
    i = e;
  }
  free(v);
  return st;
}

static hsr_status copy_sink(void *ctx, ckpt_span *s, uint64_t pos, const void *src, size_t n) {
  (void)ctx;
  memcpy((char *)s->dst + pos, src, n);
  return HSR_OK;
}

hsr_status ckpt_read(const ckpt_handle *c, int i, ckpt_kind kind, uint64_t start, uint64_t count, float *out) {
  if (!c || (!out && count)) return hsr_error(HSR_ERR_INVALID, "ckpt_read: NULL argument");
  if (i < 0 || i >= c->nt) return hsr_error(HSR_ERR_INVALID, "ckpt_read: tensor %d of %d", i, c->nt);
  if ((unsigned)kind >= CKPT_KINDS) return hsr_error(HSR_ERR_INVALID, "ckpt_read: kind %d (valid: 0 to 2)", kind);
  const ckpt_tensor *t = &c->t[i];
  if (start > t->numel || count > t->numel - start)
    return hsr_error(HSR_ERR_INVALID, "ckpt_read: elements [%" PRIu64 ", +%" PRIu64 ") of '%s' (%" PRIu64 ")", start,
                     count, t->name, t->numel);
  if (!count) return HSR_OK;
  ckpt_span *sp = calloc((size_t)t->nr, sizeof *sp);
  size_t cap = c->info.block_bytes * 2 > CKPT_CHUNK ? (size_t)c->info.block_bytes * 2 : CKPT_CHUNK;
  void *buf = malloc(cap);
  int n = 0;
  for (int j = 0; sp && buf && j < t->nr; j++) {
    const ckpt_range *r = &t->r[j];
    uint64_t a = start > r->start ? start : r->start, b = r->start + r->count;
    if (b > start + count) b = start + count;
    if (a >= b) continue;
    sp[n++] = (ckpt_span){r->file, r->off[kind] + 4 * (a - r->start), 4 * (b - a), i, kind, a, out + (a - start), NULL};
  }
  hsr_status st = sp && buf ? ckpt_read_spans(c, sp, n, buf, cap, copy_sink, NULL, NULL)
                            : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  free(buf);
  free(sp);
  return st;
}

static hsr_status verify_file(const ckpt_handle *c, int f, void *buf, size_t cap, uint64_t *bytes) {
  const ckpt_file *fi = &c->f[f];
  int fd;
  HSR_CHECK(open_data(c, f, NULL, &fd));
  uint64_t capB = cap / c->info.block_bytes * c->info.block_bytes;
  hsr_status st = HSR_OK;
  uint32_t file = (uint32_t)crc32(0L, Z_NULL, 0);
  for (uint64_t cb = 0; cb < fi->bytes && st == HSR_OK; cb += capB) {
    uint64_t ce = cb + capB < fi->bytes ? cb + capB : fi->bytes;
    st = read_chunk(c, f, fd, cb, ce, buf, NULL);
    file = crc_feed(file, buf, ce - cb);
    if (bytes) *bytes += ce - cb;
  }
  close(fd);
  if (st == HSR_OK && file != fi->crc)
    st = hsr_error(HSR_ERR_IO, "checkpoint '%s': data file '%s' has crc32 0x%08x, the manifest records 0x%08x", c->dir,
                   fi->name, file, fi->crc);
  return st;
}

hsr_status ckpt_verify(const ckpt_handle *c, uint64_t *bytes) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "ckpt_verify: NULL checkpoint");
  if (bytes) *bytes = 0;
  size_t cap = c->info.block_bytes * 2 > CKPT_CHUNK ? (size_t)c->info.block_bytes * 2 : CKPT_CHUNK;
  void *buf = malloc(cap);
  if (!buf) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  hsr_status st = HSR_OK;
  for (int f = 0; f < c->nf && st == HSR_OK; f++) st = verify_file(c, f, buf, cap, bytes);
  free(buf);
  return st;
}

static int is_file(const char *path) {
  struct stat sb;
  return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

/* A manifest that is there but not a regular file (a FIFO would hang the read). */
static hsr_status not_regular(const char *path) {
  struct stat sb;
  if (stat(path, &sb) || S_ISREG(sb.st_mode)) return HSR_OK;
  int fd;
  return file_open_read("checkpoint file", path, &fd); /* fails, naming what it is */
}

/* The checkpoint root's `latest` file p names (in root). */
static hsr_status from_latest(const char *root, const char *p, char **dir) {
  char *name;
  size_t len;
  HSR_CHECK(ckpt_slurp(p, 4096, &name, &len));
  while (len && (name[len - 1] == '\n' || name[len - 1] == ' ' || name[len - 1] == '\r')) name[--len] = 0;
  hsr_status st = HSR_OK;
  if (!ckpt_safe_name(name))
    st = hsr_error(HSR_ERR_INVALID, "'%s' does not name a checkpoint directory ('%.64s')", p, name);
  char d[4096], m[4200];
  if (st == HSR_OK) st = ckpt_path(d, sizeof d, root, name);
  if (st == HSR_OK) st = ckpt_path(m, sizeof m, d, CKPT_MANIFEST);
  if (st == HSR_OK) st = not_regular(m);
  if (st == HSR_OK && !is_file(m))
    st = hsr_error(HSR_ERR_INVALID, "'%s' names '%s', which has no %s", p, name, CKPT_MANIFEST);
  free(name);
  if (st == HSR_OK && !(*dir = strdup(d))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  return st;
}

hsr_status ckpt_resolve(const char *path, char **dir) {
  if (!path || !*path || !dir) return hsr_error(HSR_ERR_INVALID, "ckpt_resolve: empty path");
  *dir = NULL;
  struct stat sb;
  if (stat(path, &sb)) return hsr_error(HSR_ERR_NOT_FOUND, "checkpoint '%s' does not exist", path);
  if (!S_ISDIR(sb.st_mode)) {
    /* ROOT/latest, what users type, stands for the checkpoint it names */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (strcmp(base, CKPT_LATEST) || !S_ISREG(sb.st_mode))
      return hsr_error(HSR_ERR_INVALID,
                       "'%s' is not a checkpoint: a checkpoint is a directory with %s (or a root's '%s' file)", path,
                       CKPT_MANIFEST, CKPT_LATEST);
    char root[4096];
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof root) return hsr_error(HSR_ERR_INVALID, "checkpoint path '%.64s...' is too long", path);
    if (n)
      memcpy(root, path, n), root[n] = 0;
    else
      snprintf(root, sizeof root, ".");
    return from_latest(root, path, dir);
  }
  char p[4096];
  HSR_CHECK(ckpt_path(p, sizeof p, path, CKPT_MANIFEST));
  HSR_CHECK(not_regular(p));
  if (is_file(p)) {
    *dir = strdup(path);
    return *dir ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  HSR_CHECK(ckpt_path(p, sizeof p, path, CKPT_LATEST));
  if (!is_file(p))
    return hsr_error(HSR_ERR_INVALID,
                     "'%s' is not a checkpoint: it has no %s (a checkpoint) and no '%s' (a checkpoint root)", path,
                     CKPT_MANIFEST, CKPT_LATEST);
  return from_latest(path, p, dir);
}

/* ---- the fault hook (tests: a crash at each stage of the commit) ---- */
static const char *const stage_names[] = {"none", "after_data", "before_manifest_rename", "before_latest"};

hsr_status ckpt_fault_parse(int64_t step, ckpt_stage *out) {
  *out = CKPT_FAULT_NONE;
  const char *v = NULL;
  HSR_CHECK(env_get_str("HSR_CKPT_FAULT", &v)); /* checked: STAGE[:STEP] */
  if (!v) return HSR_OK;
  char name[64];
  const char *colon = strchr(v, ':');
  size_t n = colon ? (size_t)(colon - v) : strlen(v);
  int found = -1;
  if (n < sizeof name) {
    memcpy(name, v, n);
    name[n] = 0;
    for (int i = 1; i < 4; i++)
      if (!strcmp(name, stage_names[i])) found = i;
  }
  long long at = -1;
  char *end = NULL;
  if (found > 0 && colon) {
    at = strtoll(colon + 1, &end, 10);
    if (end == colon + 1 || *end || at < 0) found = -1;
  }
  if (found < 0)
    return hsr_error(HSR_ERR_INVALID,
                     "HSR_CKPT_FAULT='%s' (valid: after_data, before_manifest_rename, before_latest, each optionally "
                     ":STEP)",
                     v);
  if (at < 0 || at == step) *out = (ckpt_stage)found;
  return HSR_OK;
}

void ckpt_fault_here(ckpt_stage armed, ckpt_stage here, int rank, int64_t step) {
  if (armed == CKPT_FAULT_NONE || armed != here || rank != 0) return;
  fprintf(stderr, "hsr: HSR_CKPT_FAULT: rank 0 exits at %s of the save of step %" PRId64 " (test hook)\n",
          stage_names[here], step);
  fflush(stderr);
  _exit(3);
}
