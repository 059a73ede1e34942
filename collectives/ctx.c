/* The world context behind every host communicator: node-shared segments,
 * control slots, the UCX worker and the progress engine. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

/* /dev/shm/hsr-<job>-<owner pid>-<rank>-<segment|ctl>: the pid lets a later
 * job remove what a killed one left behind (stale_cleanup). */
static void shm_name_pid(char *buf, size_t n, uint64_t job, int pid, int rank, int seg) {
  if (seg < 0)
    snprintf(buf, n, "/hsr-%016llx-%d-%d-ctl", (unsigned long long)job, pid, rank);
  else
    snprintf(buf, n, "/hsr-%016llx-%d-%d-%d", (unsigned long long)job, pid, rank, seg);
}

static void shm_name(coll_ctx *x, char *buf, size_t n, int rank, int seg) {
  shm_name_pid(buf, n, x->job, x->pids[rank], rank, seg);
}

/* Unlinks hsr segments of this user whose owner process is gone. */
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

static hsr_status shm_create(const char *name, size_t bytes, void **out) {
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return hsr_error(HSR_ERR_SYSTEM, "shm_open(%s): %s", name, strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name);
    return hsr_error(HSR_ERR_NOMEM, "ftruncate(%s, %zu): %s (is /dev/shm full?)", name, bytes, strerror(e));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return hsr_error(HSR_ERR_NOMEM, "mmap(%s, %zu): %s", name, bytes, strerror(errno));
  }
  *out = p;
  return HSR_OK;
}

static hsr_status shm_attach(const char *name, size_t bytes, void **out) {
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return hsr_error(HSR_ERR_TRANSPORT, "shm_open(%s) of a peer segment: %s", name, strerror(errno));
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return hsr_error(HSR_ERR_TRANSPORT, "mmap(%s): %s", name, strerror(errno));
  *out = p;
  return HSR_OK;
}

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

socklen_t hsr_coll_wake_addr(coll_ctx *x, int world_rank, struct sockaddr_un *a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  char name[96];
  shm_name(x, name, sizeof name, world_rank, -1);
  /* abstract namespace: sun_path[0] = 0, nothing on disk to clean up */
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "%s-wake", name);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void hsr_coll_ring(coll_ctx *x, int world_rank) {
  ctl_seg *c = world_rank == x->rank ? x->ctl : x->peer_ctl[world_rank];
  if (!c) return;
  atomic_fetch_add(&c->doorbell, 1); /* seq_cst: pairs with the sleepers' stores of `waiters`/`sleeping` */
  if (atomic_load(&c->waiters)) futex(&c->doorbell, FUTEX_WAKE, INT32_MAX, NULL);
  if (world_rank != x->rank && x->wakefd >= 0 && atomic_load(&c->sleeping)) {
    struct sockaddr_un a;
    socklen_t len = hsr_coll_wake_addr(x, world_rank, &a);
    char b = 1;
    ssize_t r = sendto(x->wakefd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&a, len);
    (void)r; /* a full queue already means a pending wake-up */
  }
}

void hsr_coll_kick(coll_ctx *x) {
  hsr_coll_ring(x, x->rank);
  /* with a wake socket the progress thread flags when it sleeps in epoll */
  if (x->evfd >= 0 && (x->wakefd < 0 || atomic_load(&x->ctl->sleeping))) {
    uint64_t one = 1;
    ssize_t r = write(x->evfd, &one, sizeof one);
    (void)r;
  }
  pthread_cond_broadcast(&x->cv);
}

/* ---- segments ------------------------------------------------------------ */

hsr_status hsr_coll_pool_alloc(coll_ctx *x, size_t bytes, void **ptr) {
  size_t page = 4096, want = (bytes + page - 1) / page * page;
  if (want == 0) want = page;
  pthread_mutex_lock(&x->pool_mu);
  /* Reuse a free segment of similar size: peers keep their mappings of it. */
  for (int i = 0; i < x->nsegs; i++) {
    seg *s = &x->segs[i];
    if (!s->in_use && s->bytes >= want && s->bytes <= 2 * want + (1u << 20)) {
      s->in_use = 1;
      *ptr = s->base;
      pthread_mutex_unlock(&x->pool_mu);
      return HSR_OK;
    }
  }
  seg *ns = realloc(x->segs, (size_t)(x->nsegs + 1) * sizeof *ns);
  if (!ns) {
    pthread_mutex_unlock(&x->pool_mu);
    return hsr_error(HSR_ERR_NOMEM, "segment table");
  }
  x->segs = ns;
  char name[96];
  int id = x->next_seg++;
  shm_name(x, name, sizeof name, x->rank, id);
  void *p;
  hsr_status st = shm_create(name, want, &p);
  if (st != HSR_OK) {
    pthread_mutex_unlock(&x->pool_mu);
    return st;
  }
  x->segs[x->nsegs++] = (seg){.id = id, .base = p, .bytes = want, .in_use = 1};
  *ptr = p;
  pthread_mutex_unlock(&x->pool_mu);
  return HSR_OK;
}

hsr_status hsr_coll_pool_free(coll_ctx *x, void *ptr) {
  pthread_mutex_lock(&x->pool_mu);
  for (int i = 0; i < x->nsegs; i++)
    if (x->segs[i].base == ptr && x->segs[i].in_use) {
      x->segs[i].in_use = 0;
      pthread_mutex_unlock(&x->pool_mu);
      return HSR_OK;
    }
  pthread_mutex_unlock(&x->pool_mu);
  return hsr_error(HSR_ERR_INVALID,
                   "hsr_comm_mem_free: %p was not returned by hsr_comm_mem_alloc (or was freed already)", ptr);
}

int hsr_coll_describe(coll_ctx *x, const void *p, size_t bytes, shm_desc *d) {
  const char *q = p;
  int found = 0;
  pthread_mutex_lock(&x->pool_mu);
  for (int i = 0; i < x->nsegs; i++) {
    seg *s = &x->segs[i];
    const char *b = s->base;
    if (s->in_use && q >= b && q + bytes <= b + s->bytes) {
      *d = (shm_desc){.rank = x->rank, .seg = s->id, .off = (uint64_t)(q - b), .seg_bytes = s->bytes};
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&x->pool_mu);
  return found;
}

void *hsr_coll_peer_ptr(coll_ctx *x, const shm_desc *d) {
  if (d->rank == x->rank) {
    for (int i = 0; i < x->nsegs; i++)
      if (x->segs[i].id == d->seg) return (char *)x->segs[i].base + d->off;
    hsr_error(HSR_ERR_INTERNAL, "own segment %d not found", d->seg);
    return NULL;
  }
  for (int i = 0; i < x->nmaps; i++)
    if (x->maps[i].rank == d->rank && x->maps[i].seg == d->seg) return (char *)x->maps[i].base + d->off;
  if (x->nmaps == x->cap_maps) {
    int cap = x->cap_maps ? 2 * x->cap_maps : 16;
    peer_map *m = realloc(x->maps, (size_t)cap * sizeof *m);
    if (!m) {
      hsr_error(HSR_ERR_NOMEM, "peer map table");
      return NULL;
    }
    x->maps = m, x->cap_maps = cap;
  }
  char name[96];
  shm_name(x, name, sizeof name, d->rank, d->seg);
  void *p;
  if (shm_attach(name, d->seg_bytes, &p) != HSR_OK) return NULL;
  x->maps[x->nmaps++] = (peer_map){.rank = d->rank, .seg = d->seg, .base = p, .bytes = d->seg_bytes};
  return (char *)p + d->off;
}

int hsr_coll_slot_alloc(coll_ctx *x) {
  for (int i = 0; i < CTL_SLOTS; i++)
    if (!x->slot_used[i]) {
      x->slot_used[i] = 1;
      return i;
    }
  return -1;
}

void hsr_coll_slot_free(coll_ctx *x, int slot) {
  if (slot >= 0 && slot < CTL_SLOTS) x->slot_used[slot] = 0;
}

hsr_status hsr_coll_comm_scratch(hsr_comm *c, size_t bytes, void **p) {
  if (c->scratch_bytes < bytes) {
    if (c->scratch) hsr_coll_pool_free(c->ctx, c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    HSR_CHECK(hsr_coll_pool_alloc(c->ctx, bytes, &c->scratch));
    c->scratch_bytes = bytes;
  }
  *p = c->scratch;
  return HSR_OK;
}

/* ---- progress -------------------------------------------------------------- */

static int advance(hsr_op_s *op) {
  if (op->c->intra) return hsr_coll_shm_advance(op);
  if (op->c->two_level &&
      (op->kind == HSR_OP_ALLGATHER || op->kind == HSR_OP_REDUCE_SCATTER || op->kind == HSR_OP_ALLREDUCE))
    return hsr_coll_two_advance(op);
  return hsr_coll_ucx_advance(op);
}

void hsr_coll_take_incoming(coll_ctx *x) {
  hsr_op_s *l = atomic_exchange_explicit(&x->incoming, NULL, memory_order_acquire), *rev = NULL;
  while (l) { /* newest first: reverse to posting order */
    hsr_op_s *n = l->in_next;
    l->in_next = rev;
    rev = l;
    l = n;
  }
  for (hsr_op_s *op = rev, *n; op; op = n) {
    n = op->in_next;
    op->in_next = NULL;
    hsr_comm *c = op->c;
    op->seq = ++c->seq;
    if (c->tail)
      c->tail->next = op;
    else
      c->head = op;
    c->tail = op;
  }
}

int hsr_coll_progress(coll_ctx *x) {
  int moved = 0;
  hsr_coll_take_incoming(x);
  if (x->have_ucx)
    while (ucp_worker_progress(x->worker)) moved = 1;
  uint64_t now = hsr_clock_ns();
  for (int i = 0; i < x->ncomms; i++) {
    hsr_comm *c = x->comms[i];
    while (c->head) {
      hsr_op_s *op = c->head;
      if (!op->fin) {
        if (c->failed) {
          hsr_coll_op_fail(op, HSR_ERR_STATE, "communicator '%s' has failed earlier: %s", c->name, c->fail_msg);
        } else {
          if (!op->t_start) {
            op->t_start = now;
            op->t_progress = now;
          }
          if (advance(op)) {
            moved = 1;
            op->t_progress = now = hsr_clock_ns();
          } else if (now > op->t_progress && (double)(now - op->t_progress) * 1e-9 > op->timeout_s) {
            int wr = op->wait_peer >= 0 ? c->world[op->wait_peer] : -1;
            hsr_coll_op_fail(op, HSR_ERR_TIMEOUT,
                             "communicator '%s': %s (op #%llu) made no progress for %.1f s waiting for rank %d "
                             "(world rank %d)",
                             c->name, hsr_op_name(op->kind), (unsigned long long)op->seq, op->timeout_s, op->wait_peer,
                             wr);
            if (!c->intra) hsr_coll_ucx_cancel(op);
          }
        }
      }
      if (!op->fin) break;
      moved = 1;
      c->head = op->next;
      if (!c->head) c->tail = NULL;
      op->next = NULL;
      hsr_coll_op_publish(op); /* the caller may free it from here on */
      pthread_cond_broadcast(&x->cv);
    }
  }
  return moved;
}

static int any_pending(coll_ctx *x) {
  if (atomic_load_explicit(&x->incoming, memory_order_relaxed)) return 1;
  for (int i = 0; i < x->ncomms; i++)
    if (x->comms[i]->head) return 1;
  return 0;
}

static void *progress_main(void *arg) {
  coll_ctx *x = arg;
  int idle = 0;
  pthread_mutex_lock(&x->mu);
  while (!x->stop) {
    uint32_t seen = atomic_load_explicit(&x->ctl->doorbell, memory_order_acquire);
    if (hsr_coll_progress(x)) {
      idle = 0;
      continue;
    }
    int pending = any_pending(x);
    pthread_mutex_unlock(&x->mu);
    if (x->have_ucx && x->wakefd >= 0) {
      /* Node peers ring the wake socket while `sleeping` is set; the bound
       * only limits the damage of a lost datagram. */
      atomic_store(&x->ctl->sleeping, 1);
      if (atomic_load(&x->ctl->doorbell) == seen) hsr_coll_ucx_wait(x, pending ? 10 : 100);
      atomic_store(&x->ctl->sleeping, 0);
    } else if (x->have_ucx) {
      /* No wake socket: shared-memory flags cannot wake epoll, so back off
       * from 0 to 1 ms while work is pending, sleep long when idle. */
      int ms = pending ? (idle < 4 ? 0 : 1) : 100;
      if (ms == 0)
        sched_yield();
      else
        hsr_coll_ucx_wait(x, ms);
      idle++;
    } else {
      struct timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
      atomic_fetch_add(&x->ctl->waiters, 1);
      futex(&x->ctl->doorbell, FUTEX_WAIT, seen, &ts);
      atomic_fetch_sub(&x->ctl->waiters, 1);
    }
    pthread_mutex_lock(&x->mu);
  }
  pthread_mutex_unlock(&x->mu);
  return NULL;
}

hsr_status hsr_coll_ctx_add_comm(coll_ctx *x, hsr_comm *c) {
  pthread_mutex_lock(&x->mu);
  if (x->ncomms == x->cap_comms) {
    int cap = x->cap_comms ? 2 * x->cap_comms : 8;
    hsr_comm **n = realloc(x->comms, (size_t)cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&x->mu);
      return hsr_error(HSR_ERR_NOMEM, "communicator table");
    }
    x->comms = n, x->cap_comms = cap;
  }
  x->comms[x->ncomms++] = c;
  x->refs++;
  pthread_mutex_unlock(&x->mu);
  return HSR_OK;
}

void hsr_coll_ctx_remove_comm(coll_ctx *x, hsr_comm *c) {
  pthread_mutex_lock(&x->mu);
  for (int i = 0; i < x->ncomms; i++)
    if (x->comms[i] == c) {
      x->comms[i] = x->comms[--x->ncomms];
      break;
    }
  hsr_coll_slot_free(x, c->slot);
  pthread_mutex_unlock(&x->mu);
}

/* ---- lifetime ------------------------------------------------------------- */

hsr_status hsr_coll_ctx_create(hsr_boot *boot, coll_ctx **out) {
  coll_ctx *x = calloc(1, sizeof *x);
  if (!x) return hsr_error(HSR_ERR_NOMEM, "collectives context");
  x->boot = boot;
  x->rank = hsr_boot_rank(boot);
  x->size = hsr_boot_size(boot);
  x->node = hsr_boot_node(boot);
  x->evfd = x->efd = x->epfd = x->wakefd = -1;
  pthread_mutex_init(&x->mu, NULL);
  pthread_mutex_init(&x->pool_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&x->cv, &ca);
  pthread_condattr_destroy(&ca);
  x->have_avx2 = __builtin_cpu_supports("avx2");

  static const char *const prog[] = {"thread", "inline", NULL};
  static const char *const ar[] = {"auto", "ring", "rd", NULL};
  int p = 0;
  hsr_status st = hsr_env_choice("HSR_PROGRESS", prog, 0, &p);
  if (st == HSR_OK) st = hsr_env_double("HSR_COMM_TIMEOUT", 300, 0.001, 1e9, &x->timeout_s);
  if (st == HSR_OK) st = hsr_env_choice("HSR_ALGO_ALLREDUCE", ar, 0, &x->algo_allreduce);
  if (st == HSR_OK) st = hsr_env_size("HSR_ALGO_ALLREDUCE_RD_MAX", 64 << 10, &x->rd_max_bytes);
  if (st == HSR_OK) st = hsr_env_size("HSR_UCX_CHUNK", 1 << 20, &x->ucx_chunk);
  if (st == HSR_OK && x->ucx_chunk < 4096)
    st = hsr_error(HSR_ERR_INVALID, "HSR_UCX_CHUNK: %zu bytes is too small (at least 4K)", x->ucx_chunk);
  static const char *const two[] = {"auto", "off", NULL};
  if (st == HSR_OK) st = hsr_env_choice("HSR_ALGO_TWO_LEVEL", two, 0, &x->algo_two_level);
  if (st != HSR_OK) {
    free(x);
    return st;
  }
  x->inline_progress = p == 1;

  /* A fresh id per world: shm names never collide across jobs or worlds. */
  uint64_t job = 0;
  if (x->rank == 0) {
    if (getrandom(&job, sizeof job, 0) != sizeof job) job = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ hsr_clock_ns();
  }
  st = hsr_boot_bcast(boot, &job, sizeof job, 0);
  if (st != HSR_OK) goto fail;
  x->job = job;
  x->pids = calloc((size_t)x->size, sizeof *x->pids);
  if (!x->pids) {
    st = hsr_error(HSR_ERR_NOMEM, "pid table");
    goto fail;
  }
  int32_t mypid = (int32_t)getpid();
  st = hsr_boot_allgather(boot, &mypid, sizeof mypid, x->pids);
  if (st != HSR_OK) goto fail;
  if (hsr_boot_local_rank(boot) == 0) stale_cleanup();

  char name[96];
  shm_name(x, name, sizeof name, x->rank, -1);
  st = shm_create(name, sizeof(ctl_seg), (void **)&x->ctl);
  if (st != HSR_OK) goto fail;
  x->peer_ctl = calloc((size_t)x->size, sizeof *x->peer_ctl);
  if (!x->peer_ctl) {
    st = hsr_error(HSR_ERR_NOMEM, "peer table");
    goto fail;
  }
  st = hsr_boot_barrier(boot);
  for (int r = 0; st == HSR_OK && r < x->size; r++) {
    if (r == x->rank || hsr_boot_node_of(boot, r) != x->node) continue;
    char pn[96];
    shm_name(x, pn, sizeof pn, r, -1);
    st = shm_attach(pn, sizeof(ctl_seg), (void **)&x->peer_ctl[r]);
  }
  hsr_status st2 = hsr_boot_barrier(boot);
  shm_unlink(name); /* every peer has it mapped now */
  if (st == HSR_OK) st = st2;
  if (st != HSR_OK) goto fail;

  if (hsr_boot_num_nodes(boot) > 1) {
    st = hsr_coll_ucx_init(x);
    if (st != HSR_OK) goto fail;
  }
  if (!x->inline_progress) {
    if (pthread_create(&x->thread, NULL, progress_main, x) != 0) {
      st = hsr_error(HSR_ERR_SYSTEM, "cannot start the progress thread: %s", strerror(errno));
      goto fail;
    }
    x->thread_started = 1;
  }
  *out = x;
  return HSR_OK;
fail:
  hsr_coll_ctx_release(x);
  return st;
}

void hsr_coll_ctx_release(coll_ctx *x) {
  if (!x) return;
  pthread_mutex_lock(&x->mu);
  if (x->refs > 0) x->refs--;
  int last = x->refs == 0;
  if (last) x->stop = 1;
  pthread_mutex_unlock(&x->mu);
  if (!last) return;
  if (x->thread_started) {
    hsr_coll_kick(x);
    pthread_join(x->thread, NULL);
  }
  hsr_coll_ucx_fini(x);
  for (int i = 0; i < x->nmaps; i++) munmap(x->maps[i].base, x->maps[i].bytes);
  for (int i = 0; i < x->nsegs; i++) {
    char name[96];
    shm_name(x, name, sizeof name, x->rank, x->segs[i].id);
    shm_unlink(name);
    munmap(x->segs[i].base, x->segs[i].bytes);
  }
  if (x->peer_ctl)
    for (int r = 0; r < x->size; r++)
      if (x->peer_ctl[r]) munmap(x->peer_ctl[r], sizeof(ctl_seg));
  if (x->ctl) munmap(x->ctl, sizeof(ctl_seg));
  free(x->peer_ctl);
  free(x->pids);
  free(x->maps);
  free(x->segs);
  free(x->comms);
  pthread_cond_destroy(&x->cv);
  pthread_mutex_destroy(&x->mu);
  pthread_mutex_destroy(&x->pool_mu);
  free(x);
}
