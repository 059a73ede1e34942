/* The public communicator API: argument checks, then the backend's
 * constructors (select.c) or the communicator's transport table (coll.h) do
 * the work. Nothing here depends on which transport a communicator runs on. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "collectives/comm_internal.h"
#include "common/dtype_internal.h"

hsr_status hsr_comm_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  if (!boot || !out) return hsr_error(HSR_ERR_INVALID, "hsr_comm_world: boot and out must not be NULL");
  *out = NULL;
  const coll_backend *b = coll_backend_of(backend);
  if (!b)
    return hsr_error(HSR_ERR_INVALID, "hsr_comm_world: unknown backend %d (valid: HSR_BACKEND_HOST, HSR_BACKEND_NCCL)",
                     (int)backend);
  return b->world(boot, backend, out);
}

hsr_status comm_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  if (!parent || !out) return hsr_error(HSR_ERR_INVALID, "comm_split: parent and out must not be NULL");
  *out = NULL;
  if (parent->failed)
    return hsr_error(HSR_ERR_STATE, "comm_split: communicator '%s' has failed: %s", parent->name, parent->fail_msg);
  return coll_backend_of(parent->backend)->split(parent, color, key, out);
}

hsr_status hsr_comm_free(hsr_comm *c) {
  if (!c) return HSR_OK;
  return c->tp->free(c);
}

int hsr_comm_rank(const hsr_comm *c) { return c ? c->rank : -1; }
int hsr_comm_size(const hsr_comm *c) { return c ? c->size : 0; }
int comm_world_rank(const hsr_comm *c, int r) { return c && r >= 0 && r < c->size ? c->world[r] : -1; }
hsr_backend comm_backend(const hsr_comm *c) { return c ? c->backend : HSR_BACKEND_HOST; }
const char *comm_name(const hsr_comm *c) { return c ? c->name : "(null)"; }

hsr_status comm_set_name(hsr_comm *c, const char *name) {
  if (!c || !name) return hsr_error(HSR_ERR_INVALID, "comm_set_name: NULL argument");
  if (strlen(name) >= sizeof c->name)
    return hsr_error(HSR_ERR_INVALID, "comm_set_name: '%s' is longer than %zu characters", name, sizeof c->name - 1);
  snprintf(c->name, sizeof c->name, "%s", name);
  return HSR_OK;
}

hsr_status hsr_comm_set_stream(hsr_comm *c, hsr_stream *stream) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "hsr_comm_set_stream: NULL communicator");
  return c->tp->set_stream(c, stream);
}

hsr_status comm_mem_alloc(hsr_comm *c, size_t bytes, void **ptr) {
  if (!c || !ptr) return hsr_error(HSR_ERR_INVALID, "comm_mem_alloc: NULL argument");
  *ptr = NULL;
  return c->tp->mem_alloc(c, bytes, ptr);
}

hsr_status comm_mem_free(hsr_comm *c, void *ptr) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "comm_mem_free: NULL communicator");
  if (!ptr) return HSR_OK;
  hsr_status st = c->tp->mem_free(c, ptr);
  if (st == HSR_ERR_INVALID) /* said here, where the public names are */
    return hsr_error(st, "comm_mem_free: %p was not returned by comm_mem_alloc (or was freed already)", ptr);
  return st;
}

/* ---- argument checks -------------------------------------------------------- */

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  const char *x = a, *y = b;
  return an && bn && x < y + bn && y < x + an;
}

static hsr_status check_common(hsr_comm *c, const char *what, size_t count, hsr_dtype dt, size_t mult, size_t *bytes) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "%s: NULL communicator", what);
  size_t es = dtype_size(dt);
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
  coll_op *op = coll_op_new(c, HSR_OP_ALLGATHER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt;
  return coll_op_issue(op, count == 0, req);
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
  coll_op *op = coll_op_new(c, HSR_OP_REDUCE_SCATTER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt, op->redop = rop;
  return coll_op_issue(op, count == 0, req);
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
  coll_op *op = coll_op_new(c, HSR_OP_ALLREDUCE);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = send, op->recv = recv, op->count = count, op->dt = dt, op->redop = rop;
  return coll_op_issue(op, count == 0, req);
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
  coll_op *op = coll_op_new(c, HSR_OP_BCAST);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->send = buf, op->recv = buf, op->count = count, op->dt = dt, op->root = root;
  return coll_op_issue(op, count == 0, req);
}

hsr_status hsr_comm_barrier(hsr_comm *c, hsr_req **req) {
  size_t b = 0;
  if (req) *req = NULL;
  HSR_CHECK(check_common(c, "barrier", 0, HSR_U8, 1, &b));
  coll_op *op = coll_op_new(c, HSR_OP_BARRIER);
  if (!op) return hsr_error(HSR_ERR_NOMEM, "request");
  op->dt = HSR_U8;
  return coll_op_issue(op, 0, req);
}

/* ---- requests -------------------------------------------------------------------- */

hsr_status req_test(hsr_req *op, int *done) {
  if (!op || !done) return hsr_error(HSR_ERR_INVALID, "req_test: NULL argument");
  return op->c->tp->test(op, done);
}

hsr_status hsr_req_wait(hsr_req *op, double timeout_s) {
  if (!op) return hsr_error(HSR_ERR_INVALID, "hsr_req_wait: NULL request");
  return op->c->tp->wait(op, timeout_s);
}

hsr_status req_free(hsr_req *r) {
  if (!r) return HSR_OK;
  return hsr_req_wait(r, -1);
}

hsr_status req_times(const hsr_req *op, uint64_t *start_ns, uint64_t *end_ns) {
  if (!op) return hsr_error(HSR_ERR_INVALID, "req_times: NULL request");
  if (start_ns) *start_ns = op->t_start;
  int fin = atomic_load_explicit(&((hsr_req *)op)->done, memory_order_acquire);
  if (end_ns) *end_ns = fin ? op->t_end : 0;
  return HSR_OK;
}

/* ---- counters ---------------------------------------------------------------------- */

hsr_status comm_counters(const hsr_comm *c, hsr_op op, hsr_comm_counter *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "comm_counters: NULL argument");
  if ((unsigned)op >= HSR_OP_COUNT) return hsr_error(HSR_ERR_INVALID, "comm_counters: unknown op %d", (int)op);
  if (c->mu) pthread_mutex_lock(c->mu);
  *out = c->counters[op];
  if (c->mu) pthread_mutex_unlock(c->mu);
  return HSR_OK;
}

hsr_status comm_counters_reset(hsr_comm *c) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "comm_counters_reset: NULL communicator");
  if (c->mu) pthread_mutex_lock(c->mu);
  memset(c->counters, 0, sizeof c->counters);
  if (c->mu) pthread_mutex_unlock(c->mu);
  return HSR_OK;
}
