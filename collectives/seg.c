/* Node-shared memory: segments (the registered-buffer pool and peers' mappings
 * of it), control slots, doorbells and the wake socket. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "seg.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

/* A segment's memfd name (shown in /proc/<pid>/fd and /proc/<pid>/maps). */
static void seg_name(seg_node *s, char *buf, size_t n, int seg) {
  if (seg < 0)
    snprintf(buf, n, "hsr-%016llx-%d-ctl", (unsigned long long)s->job, s->rank);
  else
    snprintf(buf, n, "hsr-%016llx-%d-%d", (unsigned long long)s->job, s->rank, seg);
}

/* Unlinks /dev/shm/hsr-<job>-<pid>-<rank>-* files of this user whose owner
 * process is gone: the named segments of hsr builds before memfds. */
static void stale_cleanup(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    unsigned long long job;
    int pid, rank, used = 0;
    if (sscanf(e->d_name, "hsr-%16llx-%d-%d-%n", &job, &pid, &rank, &used) != 3 || used == 0 || pid <= 0) continue;
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
    if (stat(path, &st) != 0 || st.st_uid != getuid()) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
      char name[300];
      snprintf(name, sizeof name, "/%s", e->d_name);
      if (shm_unlink(name) == 0) HSR_LOG_I("removed stale shared-memory segment %s (process %d is gone)", name, pid);
    }
  }
  closedir(d);
}

/* A memfd of `bytes`, mapped; the fd stays open for peers to open. */
static hsr_status seg_create(const char *name, size_t bytes, void **out, int *fd_out) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return hsr_error(HSR_ERR_SYSTEM, "memfd_create(%s): %s", name, strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    return hsr_error(HSR_ERR_NOMEM, "ftruncate(memfd %s, %zu): %s", name, bytes, strerror(e));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return hsr_error(HSR_ERR_NOMEM, "mmap(memfd %s, %zu): %s", name, bytes, strerror(e));
  }
  *out = p;
  *fd_out = fd;
  return HSR_OK;
}

/* Maps a node peer's memfd: /proc/<pid>/fd/<fd> opens the same file (same
 * user; no ptrace attach needed), which stays valid after the owner dies. */
static hsr_status seg_attach(int rank, int pid, int fd, size_t bytes, void **out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int f = open(path, O_RDWR | O_CLOEXEC);
  if (f < 0)
    return hsr_error(HSR_ERR_TRANSPORT, "opening rank %d's shared memory %s: %s%s", rank, path, strerror(errno),
                     errno == ENOENT ? " (has the rank exited?)" : "");
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  int e = errno;
  close(f);
  if (p == MAP_FAILED) return hsr_error(HSR_ERR_TRANSPORT, "mmap(%s): %s", path, strerror(e));
  *out = p;
  return HSR_OK;
}

/* ---- lifetime -------------------------------------------------------------- */

/* What each rank tells the others at start. */
typedef struct seg_hello {
  uint64_t job; /* rank 0's is the world's: a fresh id per world */
  int32_t pid, ctl_fd;
} seg_hello;

/* A fresh id per world and every rank's pid and control memfd. */
static hsr_status hello(seg_node *s, hsr_boot *boot) {
  seg_hello me = {.pid = (int32_t)getpid(), .ctl_fd = s->ctl_fd}, *all = calloc((size_t)s->size, sizeof *all);
  s->pids = calloc((size_t)s->size, sizeof *s->pids);
  s->ctl_fds = calloc((size_t)s->size, sizeof *s->ctl_fds);
  if (!all || !s->pids || !s->ctl_fds) {
    free(all);
    return hsr_error(HSR_ERR_NOMEM, "pid table");
  }
  if (getrandom(&me.job, sizeof me.job, 0) != sizeof me.job)
    me.job = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ hsr_clock_ns();
  hsr_status st = boot_allgather(boot, &me, sizeof me, all);
  if (st == HSR_OK) {
    s->job = all[0].job;
    for (int r = 0; r < s->size; r++) s->pids[r] = all[r].pid, s->ctl_fds[r] = all[r].ctl_fd;
  }
  free(all);
  return st;
}

hsr_status seg_open(seg_node *s, hsr_boot *boot) {
  s->rank = hsr_boot_rank(boot);
  s->size = hsr_boot_size(boot);
  s->wakefd = s->ctl_fd = -1;
  pthread_mutex_init(&s->pool_mu, NULL);
  if (boot_local_rank(boot) == 0) stale_cleanup();

  char name[96];
  seg_name(s, name, sizeof name, -1);
  HSR_CHECK(seg_create(name, sizeof(seg_ctl), (void **)&s->ctl, &s->ctl_fd));
  atomic_store(&s->ctl->wait_rank, -1);
  s->peer_ctl = calloc((size_t)s->size, sizeof *s->peer_ctl);
  if (!s->peer_ctl) return hsr_error(HSR_ERR_NOMEM, "peer table");
  HSR_CHECK(hello(s, boot));
  int node = boot_node(boot);
  for (int r = 0; r < s->size; r++) {
    if (r == s->rank || boot_node_of(boot, r) != node) continue;
    HSR_CHECK(seg_attach(r, s->pids[r], s->ctl_fds[r], sizeof(seg_ctl), (void **)&s->peer_ctl[r]));
  }
  return HSR_OK;
}

void seg_bye(seg_node *s) {
  if (s->ctl) atomic_store(&s->ctl->bye, 1);
}

void seg_close(seg_node *s) {
  if (s->wakefd >= 0) close(s->wakefd);
  s->wakefd = -1;
  for (int i = 0; i < s->nmaps; i++) munmap(s->maps[i].base, s->maps[i].bytes);
  for (int i = 0; i < s->nsegs; i++) {
    munmap(s->segs[i].base, s->segs[i].bytes);
    close(s->segs[i].fd);
  }
  if (s->peer_ctl)
    for (int r = 0; r < s->size; r++)
      if (s->peer_ctl[r]) munmap(s->peer_ctl[r], sizeof(seg_ctl));
  if (s->ctl) {
    atomic_store(&s->ctl->bye, 1);
    munmap(s->ctl, sizeof(seg_ctl));
  }
  if (s->ctl_fd >= 0) close(s->ctl_fd);
  free(s->peer_ctl);
  free(s->pids);
  free(s->ctl_fds);
  free(s->maps);
  free(s->segs);
  pthread_mutex_destroy(&s->pool_mu);
}

/* ---- segments ------------------------------------------------------------ */

hsr_status seg_pool_alloc(seg_node *s, size_t bytes, void **ptr) {
  size_t page = 4096, want = (bytes + page - 1) / page * page;
  if (want == 0) want = page;
  pthread_mutex_lock(&s->pool_mu);
  /* Reuse a free segment of similar size: peers keep their mappings of it. */
  for (int i = 0; i < s->nsegs; i++) {
    seg_mine *m = &s->segs[i];
    if (!m->in_use && m->bytes >= want && m->bytes <= 2 * want + (1u << 20)) {
      m->in_use = 1;
      *ptr = m->base;
      pthread_mutex_unlock(&s->pool_mu);
      return HSR_OK;
    }
  }
  seg_mine *ns = realloc(s->segs, (size_t)(s->nsegs + 1) * sizeof *ns);
  if (!ns) {
    pthread_mutex_unlock(&s->pool_mu);
    return hsr_error(HSR_ERR_NOMEM, "segment table");
  }
  s->segs = ns;
  char name[96];
  int id = s->next_seg++, fd = -1;
  seg_name(s, name, sizeof name, id);
  void *p;
  hsr_status st = seg_create(name, want, &p, &fd);
  if (st != HSR_OK) {
    pthread_mutex_unlock(&s->pool_mu);
    return st;
  }
  s->segs[s->nsegs++] = (seg_mine){.id = id, .fd = fd, .base = p, .bytes = want, .in_use = 1};
  *ptr = p;
  pthread_mutex_unlock(&s->pool_mu);
  return HSR_OK;
}

hsr_status seg_pool_free(seg_node *s, void *ptr) {
  pthread_mutex_lock(&s->pool_mu);
  for (int i = 0; i < s->nsegs; i++)
    if (s->segs[i].base == ptr && s->segs[i].in_use) {
      s->segs[i].in_use = 0;
      pthread_mutex_unlock(&s->pool_mu);
      return HSR_OK;
    }
  pthread_mutex_unlock(&s->pool_mu);
  return hsr_error(HSR_ERR_INVALID, "%p is not a block of this node's buffer pool in use (or was freed already)", ptr);
}

int seg_describe(seg_node *s, const void *p, size_t bytes, seg_desc *d) {
  const char *q = p;
  int found = 0;
  pthread_mutex_lock(&s->pool_mu);
  for (int i = 0; i < s->nsegs; i++) {
    seg_mine *m = &s->segs[i];
    const char *b = m->base;
    if (m->in_use && q >= b && q + bytes <= b + m->bytes) {
      *d = (seg_desc){.rank = s->rank, .seg = m->id, .off = (uint64_t)(q - b), .seg_bytes = m->bytes, .fd = m->fd};
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&s->pool_mu);
  return found;
}

void *seg_peer_ptr(seg_node *s, const seg_desc *d) {
  if (d->rank == s->rank) {
    for (int i = 0; i < s->nsegs; i++)
      if (s->segs[i].id == d->seg) return (char *)s->segs[i].base + d->off;
    hsr_error(HSR_ERR_INTERNAL, "own segment %d not found", d->seg);
    return NULL;
  }
  for (int i = 0; i < s->nmaps; i++)
    if (s->maps[i].rank == d->rank && s->maps[i].seg == d->seg) return (char *)s->maps[i].base + d->off;
  if (grow_array(&s->maps, &s->cap_maps, s->nmaps, sizeof *s->maps, 16, "peer map table") != HSR_OK) return NULL;
  void *p;
  if (d->rank < 0 || d->rank >= s->size || seg_attach(d->rank, s->pids[d->rank], d->fd, d->seg_bytes, &p) != HSR_OK)
    return NULL;
  s->maps[s->nmaps++] = (seg_map){.rank = d->rank, .seg = d->seg, .base = p, .bytes = d->seg_bytes};
  return (char *)p + d->off;
}

/* ---- control slots ---------------------------------------------------------- */

int seg_slot_alloc(seg_node *s) {
  for (int i = 0; i < SEG_SLOTS; i++)
    if (!s->slot_used[i]) {
      s->slot_used[i] = 1;
      return i;
    }
  return -1;
}

void seg_slot_free(seg_node *s, int slot) {
  if (slot >= 0 && slot < SEG_SLOTS) s->slot_used[slot] = 0;
}

uint64_t seg_slot_base(seg_node *s, int slot) {
  seg_slot *l = &s->ctl->slot[slot];
  uint64_t a = atomic_load(&l->arrive), m = atomic_load(&l->mid), d = atomic_load(&l->done);
  uint64_t b = a > m ? a : m;
  return b > d ? b : d;
}

/* ---- doorbells and the wake socket ------------------------------------------ */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* Abstract socket address of a rank's wake socket; returns the address length. */
static socklen_t wake_addr(seg_node *s, int world_rank, struct sockaddr_un *a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  /* abstract namespace: sun_path[0] = 0, nothing on disk to clean up */
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "hsr-%016llx-%d-%d-wake", (unsigned long long)s->job,
                   s->pids[world_rank], world_rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void seg_ring(seg_node *s, int world_rank) {
  seg_ctl *c = world_rank == s->rank ? s->ctl : s->peer_ctl[world_rank];
  if (!c) return;
  atomic_fetch_add(&c->doorbell, 1); /* seq_cst: pairs with the sleepers' stores of `waiters`/`sleeping` */
  if (atomic_load(&c->waiters)) futex(&c->doorbell, FUTEX_WAKE, INT32_MAX, NULL);
  if (world_rank != s->rank && s->wakefd >= 0 && atomic_load(&c->sleeping)) {
    struct sockaddr_un a;
    socklen_t len = wake_addr(s, world_rank, &a);
    char b = 1;
    ssize_t r = sendto(s->wakefd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&a, len);
    (void)r; /* a full queue already means a pending wake-up */
  }
}

void seg_doorbell_wait(seg_node *s, uint32_t seen, long ns) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
  atomic_fetch_add(&s->ctl->waiters, 1);
  futex(&s->ctl->doorbell, FUTEX_WAIT, seen, &ts);
  atomic_fetch_sub(&s->ctl->waiters, 1);
}

int seg_wake_open(seg_node *s) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  socklen_t len = wake_addr(s, s->rank, &a);
  if (bind(fd, (struct sockaddr *)&a, len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void seg_wake_drain(seg_node *s) {
  char b[64];
  while (recv(s->wakefd, b, sizeof b, MSG_DONTWAIT) > 0) {}
}
