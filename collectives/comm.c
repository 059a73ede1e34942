/* Public communicator API: creation, split, argument checks, requests,
 * counters. Transports live in shm.c (intra-node), ucx.c (across nodes) and
 * nccl.c (device memory). */
#include <errno.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

static const char *const op_names[HSR_OP_COUNT] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast",
                                                   "barrier"};

const char *hsr_op_name(hsr_op op) { return (unsigned)op < HSR_OP_COUNT ? op_names[op] : "?"; }

void hsr_coll_op_done(hsr_op_s *op) {
  op->fin = 1;
  op->t_end = hsr_clock_ns();
}

void hsr_coll_op_publish(hsr_op_s *op) { atomic_store_explicit(&op->done, 1, memory_order_release); }

void hsr_coll_op_fail(hsr_op_s *op, hsr_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op->err, sizeof op->err, fmt, ap);
  va_end(ap);
  op->st = st;
  hsr_coll_op_done(op);
  hsr_comm *c = op->c;
  if (st != HSR_ERR_STATE && !c->failed) {
    c->failed = 1;
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s", op->err);
  }
  HSR_LOG_D("%s", op->err);
}

/* ---- creation -------------------------------------------------------------- */

static uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

typedef struct join_rec {
  int32_t color, key, slot, pad;
  uint64_t base;
} join_rec;

static uint64_t slot_base(coll_ctx *x, int slot) {
  ctl_slot *s = &x->ctl->slot[slot];
  uint64_t a = atomic_load(&s->arrive), m = atomic_load(&s->mid), d = atomic_load(&s->done);
  uint64_t b = a > m ? a : m;
  return b > d ? b : d;
}

static hsr_status comm_alloc(int size, hsr_comm **out) {
  hsr_comm *c = calloc(1, sizeof *c);
  if (!c) return hsr_error(HSR_ERR_NOMEM, "communicator");
  c->world = calloc((size_t)size, sizeof *c->world);
  c->peer_slot = calloc((size_t)size, sizeof *c->peer_slot);
  c->peer_base = calloc((size_t)size, sizeof *c->peer_base);
  if (!c->world || !c->peer_slot || !c->peer_base) {
    free(c->world), free(c->peer_slot), free(c->peer_base), free(c);
    return hsr_error(HSR_ERR_NOMEM, "communicator tables");
  }
  c->size = size;
  c->slot = -1;
  *out = c;
  return HSR_OK;
}

static void comm_dealloc(hsr_comm *c) { free(c->world), free(c->peer_slot), free(c->peer_base), free(c); }

hsr_status hsr_comm_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  if (!boot || !out) return hsr_error(HSR_ERR_INVALID, "hsr_comm_world: boot and out must not be NULL");
  *out = NULL;
  if (backend != HSR_BACKEND_HOST && backend != HSR_BACKEND_NCCL)
    return hsr_error(HSR_ERR_INVALID, "hsr_comm_world: unknown backend %d (valid: HSR_BACKEND_HOST, HSR_BACKEND_NCCL)",
                     (int)backend);
  int size = hsr_boot_size(boot);
  hsr_comm *c;
  HSR_CHECK(comm_alloc(size, &c));
  c->backend = backend;
  c->rank = hsr_boot_rank(boot);
  for (int i = 0; i < size; i++) c->world[i] = i;
  snprintf(c->name, sizeof c->name, "world");
  if (backend == HSR_BACKEND_NCCL) {
    hsr_status st = hsr_coll_nccl_world(c, boot);
    if (st != HSR_OK)
      comm_dealloc(c);
    else
      *out = c;
    return st;
  }
  coll_ctx *x;
  hsr_status st = hsr_coll_ctx_create(boot, &x);
  if (st != HSR_OK) {
    comm_dealloc(c);
    return st;
  }
  c->ctx = x;
  c->timeout_s = x->timeout_s;
  c->id = mix64(x->job, 1);
  c->intra = hsr_boot_num_nodes(boot) == 1;
  c->slot = hsr_coll_slot_alloc(x);
  join_rec me = {.slot = c->slot, .base = slot_base(x, c->slot)}, *all = calloc((size_t)size, sizeof *all);
  if (!all) st = hsr_error(HSR_ERR_NOMEM, "join table");
  if (st == HSR_OK) st = hsr_boot_allgather(boot, &me, sizeof me, all);
  if (st == HSR_OK) {
    for (int i = 0; i < size; i++) c->peer_slot[i] = all[i].slot, c->peer_base[i] = all[i].base;
    st = hsr_coll_ctx_add_comm(x, c);
  }
  free(all);
  if (st != HSR_OK) {
    hsr_coll_ctx_release(x);
    comm_dealloc(c);
    return st;
  }
  if (!c->intra && (st = hsr_coll_two_setup(c)) != HSR_OK) {
    hsr_comm_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

static int cmp_member(const void *a, const void *b) {
  const int *x = a, *y = b; /* (key, parent rank) */
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

hsr_status hsr_comm_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  if (!parent || !out) return hsr_error(HSR_ERR_INVALID, "hsr_comm_split: parent and out must not be NULL");
  *out = NULL;
  if (parent->failed)
    return hsr_error(HSR_ERR_STATE, "hsr_comm_split: communicator '%s' has failed: %s", parent->name, parent->fail_msg);
  int n = parent->size;
  hsr_comm *c = NULL;
  if (parent->backend == HSR_BACKEND_NCCL) {
    if (color >= 0) HSR_CHECK(comm_alloc(1, &c));
    hsr_status st = hsr_coll_nccl_split(parent, c, color, key);
    if (st != HSR_OK) {
      if (c) comm_dealloc(c);
      return st;
    }
    parent->nsplits++;
    *out = c;
    return HSR_OK;
  }
  coll_ctx *x = parent->ctx;
  join_rec me = {.color = color < 0 ? -1 : color, .key = key, .slot = -1};
  if (color >= 0) {
    pthread_mutex_lock(&x->mu);
    me.slot = hsr_coll_slot_alloc(x);
    pthread_mutex_unlock(&x->mu);
    if (me.slot < 0)
      return hsr_error(HSR_ERR_NOMEM, "hsr_comm_split: more than %d live communicators on this rank", CTL_SLOTS);
    me.base = slot_base(x, me.slot);
  }
  join_rec *all = calloc((size_t)n, sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "join table");
  hsr_status st = hsr_comm_allgather(parent, &me, all, sizeof me, HSR_U8, NULL);
  parent->nsplits++;
  if (st != HSR_OK || color < 0) {
    free(all);
    if (me.slot >= 0) {
      pthread_mutex_lock(&x->mu);
      hsr_coll_slot_free(x, me.slot);
      pthread_mutex_unlock(&x->mu);
    }
    return st;
  }
  int m = 0, (*mem)[2] = calloc((size_t)n, sizeof *mem);
  if (!mem) {
    free(all);
    return hsr_error(HSR_ERR_NOMEM, "member table");
  }
  for (int i = 0; i < n; i++)
    if (all[i].color == color) mem[m][0] = all[i].key, mem[m][1] = i, m++;
  qsort(mem, (size_t)m, sizeof *mem, cmp_member);
  st = comm_alloc(m, &c);
  if (st == HSR_OK) {
    c->ctx = x;
    c->backend = HSR_BACKEND_HOST;
    c->timeout_s = parent->timeout_s;
    c->id = mix64(mix64(parent->id, (uint64_t)parent->nsplits), (uint64_t)color);
    c->slot = me.slot;
    c->intra = 1;
    for (int i = 0; i < m; i++) {
      int pr = mem[i][1];
      c->world[i] = parent->world[pr];
      c->peer_slot[i] = all[pr].slot;
      c->peer_base[i] = all[pr].base;
      if (pr == parent->rank) c->rank = i;
      if (hsr_boot_node_of(x->boot, c->world[i]) != x->node) c->intra = 0;
    }
    snprintf(c->name, sizeof c->name, "%.30s.split%d[%d]", parent->name, (parent->nsplits - 1) & 0xffff,
             color & 0xffffff);
    st = hsr_coll_ctx_add_comm(x, c);
    if (st != HSR_OK) comm_dealloc(c);
  }
  free(mem);
  free(all);
  if (st != HSR_OK) return st;
  if (!c->intra && (st = hsr_coll_two_setup(c)) != HSR_OK) {
    hsr_comm_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

hsr_status hsr_comm_free(hsr_comm *c) {
  if (!c) return HSR_OK;
  if (c->backend == HSR_BACKEND_NCCL) {
    hsr_coll_nccl_free(c);
    comm_dealloc(c);
    return HSR_OK;
  }
  coll_ctx *x = c->ctx;
  pthread_mutex_lock(&x->mu);
  hsr_coll_take_incoming(x);
  int busy = c->head != NULL;
  pthread_mutex_unlock(&x->mu);
  if (busy)
    return hsr_error(HSR_ERR_STATE,
                     "hsr_comm_free: communicator '%s' still has outstanding requests (wait for them first)", c->name);
  if (c->node_comm) hsr_comm_free(c->node_comm);
  if (c->cross_comm) hsr_comm_free(c->cross_comm);
  free(c->two);
  hsr_coll_ctx_remove_comm(x, c);
  if (c->scratch) hsr_coll_pool_free(x, c->scratch);
  comm_dealloc(c);
  hsr_coll_ctx_release(x);
  return HSR_OK;
}

int hsr_comm_rank(const hsr_comm *c) { return c ? c->rank : -1; }
int hsr_comm_size(const hsr_comm *c) { return c ? c->size : 0; }
int hsr_comm_world_rank(const hsr_comm *c, int r) { return c && r >= 0 && r < c->size ? c->world[r] : -1; }
hsr_backend hsr_comm_backend(const hsr_comm *c) { return c ? c->backend : HSR_BACKEND_HOST; }
const char *hsr_comm_name(const hsr_comm *c) { return c ? c->name : "(null)"; }

hsr_status hsr_comm_set_name(hsr_comm *c, const char *name) {
  if (!c || !name) return hsr_error(HSR_ERR_INVALID, "hsr_comm_set_name: NULL argument");
  if (strlen(name) >= sizeof c->name)
    return hsr_error(HSR_ERR_INVALID, "hsr_comm_set_name: '%s' is longer than %zu characters", name,
                     sizeof c->name - 1);
  snprintf(c->name, sizeof c->name, "%s", name);
  return HSR_OK;
}

hsr_status hsr_comm_set_stream(hsr_comm *c, void *stream) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "hsr_comm_set_stream: NULL communicator");
  if (c->backend != HSR_BACKEND_NCCL)
    return hsr_error(HSR_ERR_INVALID,
                     "hsr_comm_set_stream: communicator '%s' is a host communicator (streams are for "
                     "HSR_BACKEND_NCCL)",
                     c->name);
  return hsr_coll_nccl_set_stream(c, stream);
}

hsr_status hsr_comm_mem_alloc(hsr_comm *c, size_t bytes, void **ptr) {
  if (!c || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_comm_mem_alloc: NULL argument");
  *ptr = NULL;
  if (c->backend == HSR_BACKEND_NCCL) return hsr_coll_nccl_mem_alloc(bytes, ptr);
  return hsr_coll_pool_alloc(c->ctx, bytes, ptr);
}

hsr_status hsr_comm_mem_free(hsr_comm *c, void *ptr) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "hsr_comm_mem_free: NULL communicator");
  if (!ptr) return HSR_OK;
  if (c->backend == HSR_BACKEND_NCCL) return hsr_coll_nccl_mem_free(ptr);
  return hsr_coll_pool_free(c->ctx, ptr);
}

/* ---- argument checks -------------------------------------------------------- */

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an && bn && x < y + bn && y < x + an;
}

static hsr_status check_common(hsr_comm *c, const char *what, size_t count, hsr_dtype dt, size_t mult, size_t *bytes) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "%s: NULL communicator", what);
  size_t es = hsr_dtype_size(dt);
  if (!es)
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': unknown dtype %d (valid: f32, f64, bf16, f16, i32, u8)", what,
                     c->name, (int)dt);
  if (count > SIZE_MAX / es / (mult ? mult : 1))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': count %zu x %zu bytes overflows", what, c->name, count, es);
  *bytes = count * es;
  if (c->failed)
    return hsr_error(HSR_ERR_STATE, "%s on '%s': the communicator has failed: %s", what, c->name, c->fail_msg);
  return HSR_OK;
}

static hsr_status check_redop(hsr_comm *c, const char *what, hsr_redop op, int allow_max) {
  if ((unsigned)op >= HSR_REDOP_COUNT || (!allow_max && op == HSR_MAX))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': unknown or unsupported redop %d (valid: sum, avg%s)", what, c->name,
                     (int)op, allow_max ? ", max" : "");
  return HSR_OK;
}

/* ---- issuing ------------------------------------------------------------------- */

static hsr_op_s *op_new(hsr_comm *c, hsr_op kind) {
  hsr_op_s *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->kind = kind;
  op->c = c;
  op->wait_peer = -1;
  op->timeout_s = c->timeout_s;
  return op;
}

static hsr_status submit(hsr_op_s *op, int trivial, hsr_req **req) {
  hsr_comm *c = op->c;
  c->counters[op->kind].calls++;
  if (c->backend == HSR_BACKEND_NCCL) {
    hsr_status st = trivial ? HSR_OK : hsr_coll_nccl_start(op);
    if (st != HSR_OK) {
      free(op);
      return st;
    }
    if (trivial) op->fin = 1;
  } else if (trivial) {
    op->fin = 1;
    op->t_end = hsr_clock_ns();
    op->t_start = op->t_end;
    hsr_coll_op_publish(op);
  } else {
    coll_ctx *x = c->ctx;
    if (c->failed) {
      hsr_op kind = op->kind;
      free(op);
      return hsr_error(HSR_ERR_STATE, "%s on '%s': the communicator has failed: %s", hsr_op_name(kind), c->name,
                       c->fail_msg);
    }
    /* no lock: the progress pass takes it from here (a comm that fails
     * meanwhile fails the op there, with the reason) */
    hsr_op_s *old = atomic_load_explicit(&x->incoming, memory_order_relaxed);
    do op->in_next = old;
    while (!atomic_compare_exchange_weak_explicit(&x->incoming, &old, op, memory_order_release, memory_order_relaxed));
    hsr_coll_kick(x);
  }
  if (req) {
    *req = (hsr_req *)op;
    return HSR_OK;
  }
  return hsr_req_wait((hsr_req *)op, -1);
}

hsr_status hsr_comm_allgather(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt, hsr_req **req) {
  const char *w = "all_gather";
  size_t b = 0;
  if (req) *req = NULL;
  if (!c) return hsr_error(HSR_ERR_INVALID, "%s: NULL communicator", w);
  HSR_CHECK(check_common(c, w, count, dt, (size_t)c->size, &b));
  if (count && (!send || !recv))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': NULL %s buffer with count %zu", w, c->name, send ? "recv" : "send",
                     count);
  char *mine = (char *)recv + (size_t)c->rank * b;
  if (send != mine && overlap(send, b, recv, b * (size_t)c->size))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': send overlaps recv but is not recv + rank*count (in place)", w,
                     c->name);
  hsr_op_s *op = op_new(c, HSR_OP_ALLGATHER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt;
  return submit(op, count == 0, req);
}

hsr_status hsr_comm_reduce_scatter(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt, hsr_redop rop,
                                   hsr_req **req) {
  const char *w = "reduce_scatter";
  size_t b = 0;
  if (req) *req = NULL;
  if (!c) return hsr_error(HSR_ERR_INVALID, "%s: NULL communicator", w);
  HSR_CHECK(check_common(c, w, count, dt, (size_t)c->size, &b));
  HSR_CHECK(check_redop(c, w, rop, 0));
  if (count && (!send || !recv))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': NULL %s buffer with count %zu", w, c->name, send ? "recv" : "send",
                     count);
  const char *mine = (const char *)send + (size_t)c->rank * b;
  if ((const char *)recv != mine && overlap(send, b * (size_t)c->size, recv, b))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': recv overlaps send but is not send + rank*count (in place)", w,
                     c->name);
  hsr_op_s *op = op_new(c, HSR_OP_REDUCE_SCATTER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt, op->redop = rop;
  return submit(op, count == 0, req);
}

hsr_status hsr_comm_allreduce(hsr_comm *c, const void *send, void *recv, size_t count, hsr_dtype dt, hsr_redop rop,
                              hsr_req **req) {
  const char *w = "all_reduce";
  size_t b = 0;
  if (req) *req = NULL;
  HSR_CHECK(check_common(c, w, count, dt, 1, &b));
  HSR_CHECK(check_redop(c, w, rop, 1));
  if (count && (!send || !recv))
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': NULL %s buffer with count %zu", w, c->name, send ? "recv" : "send",
                     count);
  if (send != recv && overlap(send, b, recv, b))
    return hsr_error(HSR_ERR_INVALID,
                     "%s on '%s': send and recv overlap without being equal (in place needs send == recv)", w, c->name);
  hsr_op_s *op = op_new(c, HSR_OP_ALLREDUCE);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt, op->redop = rop;
  return submit(op, count == 0, req);
}

hsr_status hsr_comm_bcast(hsr_comm *c, void *buf, size_t count, hsr_dtype dt, int root, hsr_req **req) {
  const char *w = "broadcast";
  size_t b = 0;
  if (req) *req = NULL;
  HSR_CHECK(check_common(c, w, count, dt, 1, &b));
  if (root < 0 || root >= c->size)
    return hsr_error(HSR_ERR_INVALID, "%s on '%s': root %d out of range (valid: 0 to %d)", w, c->name, root,
                     c->size - 1);
  if (count && !buf) return hsr_error(HSR_ERR_INVALID, "%s on '%s': NULL buffer with count %zu", w, c->name, count);
  hsr_op_s *op = op_new(c, HSR_OP_BCAST);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = buf, op->recv = buf, op->count = count, op->dt = dt, op->root = root;
  return submit(op, count == 0, req);
}

hsr_status hsr_comm_barrier(hsr_comm *c, hsr_req **req) {
  size_t b = 0;
  if (req) *req = NULL;
  HSR_CHECK(check_common(c, "barrier", 0, HSR_U8, 1, &b));
  hsr_op_s *op = op_new(c, HSR_OP_BARRIER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->dt = HSR_U8;
  return submit(op, 0, req);
}

/* ---- requests -------------------------------------------------------------------- */

static hsr_status op_result(hsr_op_s *op) {
  if (op->st != HSR_OK) return hsr_error(op->st, "%s", op->err);
  return HSR_OK;
}

static void doorbell_wait(coll_ctx *x, uint32_t seen, long ns) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
  atomic_fetch_add(&x->ctl->waiters, 1);
  syscall(SYS_futex, (uint32_t *)&x->ctl->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
  atomic_fetch_sub(&x->ctl->waiters, 1);
}

hsr_status hsr_req_test(hsr_req *r, int *done) {
  hsr_op_s *op = (hsr_op_s *)r;
  if (!op || !done) return hsr_error(HSR_ERR_INVALID, "hsr_req_test: NULL argument");
  hsr_comm *c = op->c;
  if (c->backend == HSR_BACKEND_NCCL) {
    if (!op->fin) {
      hsr_status st = hsr_coll_nccl_test(op, done);
      if (st != HSR_OK) return st;
    }
    *done = op->fin;
    return op->fin ? op_result(op) : HSR_OK;
  }
  coll_ctx *x = c->ctx;
  *done = atomic_load_explicit(&op->done, memory_order_acquire);
  if (!*done && x->inline_progress) {
    pthread_mutex_lock(&x->mu);
    hsr_coll_progress(x);
    pthread_mutex_unlock(&x->mu);
    *done = atomic_load_explicit(&op->done, memory_order_acquire);
  }
  return *done ? op_result(op) : HSR_OK;
}

static void op_free(hsr_op_s *op) {
  coll_ctx *x = op->c->ctx;
  if (op->st == HSR_OK) { /* a finished op has no transfer in flight; only a failed one may */
    free(op->chunks);
    free(op);
    return;
  }
  pthread_mutex_lock(&x->mu);
  int owned = op->ucx_pending > 0; /* cancelled, not yet called back: UCX frees it */
  if (owned) op->freed_by_transport = 1;
  pthread_mutex_unlock(&x->mu);
  if (!owned) {
    free(op->chunks);
    free(op);
  }
}

hsr_status hsr_req_wait(hsr_req *r, double timeout_s) {
  hsr_op_s *op = (hsr_op_s *)r;
  if (!op) return hsr_error(HSR_ERR_INVALID, "hsr_req_wait: NULL request");
  hsr_comm *c = op->c;
  if (c->backend == HSR_BACKEND_NCCL) {
    double limit = timeout_s >= 0 ? timeout_s : c->timeout_s, t0 = hsr_clock_s();
    long sleep_us = 1;
    while (!op->fin) {
      int d = 0;
      hsr_status st = hsr_coll_nccl_test(op, &d);
      if (st != HSR_OK) {
        free(op);
        return st;
      }
      if (d) break;
      if (hsr_clock_s() - t0 > limit) {
        hsr_coll_op_fail(op, HSR_ERR_TIMEOUT,
                         "communicator '%s': %s made no progress for %.1f s (NCCL communicator aborted)", c->name,
                         hsr_op_name(op->kind), limit);
        hsr_coll_nccl_abort(c);
        break;
      }
      usleep((useconds_t)sleep_us);
      if (sleep_us < 1000) sleep_us *= 2;
    }
    hsr_status st = op_result(op);
    free(op);
    return st;
  }
  coll_ctx *x = c->ctx;
  if (atomic_load_explicit(&op->done, memory_order_acquire)) {
    hsr_status st = op_result(op);
    op_free(op);
    return st;
  }
  pthread_mutex_lock(&x->mu);
  if (timeout_s >= 0) op->timeout_s = timeout_s;
  int spins = 0;
  while (!atomic_load_explicit(&op->done, memory_order_acquire)) {
    if (x->inline_progress) {
      uint32_t seen = atomic_load(&x->ctl->doorbell);
      if (hsr_coll_progress(x)) {
        spins = 0;
        continue;
      }
      pthread_mutex_unlock(&x->mu);
      if (x->have_ucx)
        hsr_coll_ucx_wait(x, spins++ < 4 ? 0 : 1);
      else
        doorbell_wait(x, seen, 1000 * 1000);
      pthread_mutex_lock(&x->mu);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_nsec += 100 * 1000 * 1000;
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
  }
  pthread_mutex_unlock(&x->mu);
  hsr_status st = op_result(op);
  op_free(op);
  return st;
}

hsr_status hsr_req_free(hsr_req *r) {
  if (!r) return HSR_OK;
  return hsr_req_wait(r, -1);
}

hsr_status hsr_req_times(const hsr_req *r, uint64_t *start_ns, uint64_t *end_ns) {
  const hsr_op_s *op = (const hsr_op_s *)r;
  if (!op) return hsr_error(HSR_ERR_INVALID, "hsr_req_times: NULL request");
  if (start_ns) *start_ns = op->t_start;
  int fin = op->c->backend == HSR_BACKEND_NCCL ? op->fin
                                               : atomic_load_explicit(&((hsr_op_s *)op)->done, memory_order_acquire);
  if (end_ns) *end_ns = fin ? op->t_end : 0;
  return HSR_OK;
}

/* ---- counters ---------------------------------------------------------------------- */

hsr_status hsr_comm_counters(const hsr_comm *c, hsr_op op, hsr_comm_counter *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "hsr_comm_counters: NULL argument");
  if ((unsigned)op >= HSR_OP_COUNT) return hsr_error(HSR_ERR_INVALID, "hsr_comm_counters: unknown op %d", (int)op);
  if (c->ctx) pthread_mutex_lock(&c->ctx->mu);
  *out = c->counters[op];
  if (c->ctx) pthread_mutex_unlock(&c->ctx->mu);
  return HSR_OK;
}

hsr_status hsr_comm_counters_reset(hsr_comm *c) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "hsr_comm_counters_reset: NULL communicator");
  if (c->ctx) pthread_mutex_lock(&c->ctx->mu);
  memset(c->counters, 0, sizeof c->counters);
  if (c->ctx) pthread_mutex_unlock(&c->ctx->mu);
  return HSR_OK;
}
