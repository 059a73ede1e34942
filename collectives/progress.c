/* The progress engine of a host context: a pass over every communicator's
 * queue (the head op's algorithm is chosen, started and advanced; timeouts
 * name the peer), the progress thread and how it sleeps, issuing an op, and
 * the host transports' start, test and wait. */
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "kernels/sim.h"
#include "collectives/comm_internal.h"
#include "common/dtype_internal.h"

/* ---- one pass ------------------------------------------------------------ */

/* The op's first step picks its algorithm and starts it; later steps advance it. */
static int run(coll_op *op) {
  if (op->algo) return op->algo->advance(op);
  op->algo = coll_select(op);
  if (!op->algo) {
    coll_op_fail(op, HSR_ERR_INTERNAL, "communicator '%s': no %s algorithm on transport %s", op->c->name,
                 op_name(op->kind), op->c->tp->name);
    return 1;
  }
  op->tp = op->algo->tp;
  return op->algo->start(op);
}

/* One step of the op at the head of c's queue: 1 if it moved. An op that
 * moved nothing (or whose transfer failed) goes to fault.c: a gone peer, a
 * failed transfer or the timeout makes a verdict that names the culprit. */
static int step(hsr_comm *c, coll_op *op, uint64_t *now) {
  int gate = atomic_load_explicit(&op->gate, memory_order_acquire);
  if (gate == COLL_GATE_CLOSED) return 0; /* its stream has not reached it: not started, no timeout */
  if (gate == COLL_GATE_CANCELLED) {
    coll_op_fail(op, HSR_ERR_STATE, "%s on '%s' #%llu: %s", op_name(op->kind), c->name, (unsigned long long)op->seq,
                 op->gate_why);
    return 1;
  }
  if (c->failed) {
    coll_op_fail(op, HSR_ERR_STATE, "communicator '%s' has failed earlier: %s", c->name, c->fail_msg);
    return 0;
  }
  if (!op->t_start) {
    op->t_start = *now;
    op->t_progress = *now;
  }
  if (!op->xfer_err && run(op)) {
    op->t_progress = *now = hsr_clock_ns();
    return 1;
  }
  coll_fault_check_op(op, *now);
  return 0;
}

/* Ops complete in issue order: only the head runs; finished heads leave. */
static int drain(coll_ctx *x, hsr_comm *c, uint64_t *now) {
  int moved = 0;
  while (c->head) {
    coll_op *op = c->head;
    if (!op->fin && step(c, op, now)) moved = 1;
    if (!op->fin) break;
    moved = 1;
    coll_op *done = coll_op_dequeue(c);
    if (done->detached)
      coll_op_release_locked(done); /* nobody waits for it */
    else
      coll_op_publish(done); /* the caller may free it from here on */
    pthread_cond_broadcast(&x->cv);
  }
  return moved;
}

int coll_progress(coll_ctx *x) {
  int moved = 0;
  coll_take_incoming(x);
  if (x->net)
    while (x->net->net_progress(x)) moved = 1;
  uint64_t now = hsr_clock_ns();
  coll_fault_poll(x, now, 0);
  for (int i = 0; i < x->ncomms; i++)
    if (drain(x, x->comms[i], &now)) moved = 1;
  return moved;
}

/* ---- sleeping ------------------------------------------------------------------ */

/* Blocks up to ms for the network transport, a kick or a node peer's ring;
 * caller does not hold mu. */
static void net_sleep(coll_ctx *x, int ms) {
  if (ms <= 0) {
    sched_yield();
    return;
  }
  pthread_mutex_lock(&x->mu);
  int busy = x->net->net_arm(x);
  pthread_mutex_unlock(&x->mu);
  if (busy) return;
  struct epoll_event ev[8];
  int n = epoll_wait(x->epfd, ev, 8, ms);
  for (int i = 0; i < n; i++) {
    if (ev[i].data.fd == x->evfd) {
      uint64_t v;
      ssize_t rr = read(x->evfd, &v, sizeof v);
      (void)rr;
    } else if (ev[i].data.fd == x->seg.wakefd) {
      seg_wake_drain(&x->seg);
    } else if (ev[i].data.fd != x->net_fd) { /* a peer's pidfd: it stays readable, so once is enough */
      epoll_ctl(x->epfd, EPOLL_CTL_DEL, ev[i].data.fd, NULL);
      pthread_mutex_lock(&x->mu);
      coll_fault_poll(x, hsr_clock_ns(), 1);
      pthread_mutex_unlock(&x->mu);
    }
  }
}

static int any_pending(coll_ctx *x) {
  if (atomic_load_explicit(&x->incoming, memory_order_relaxed)) return 1;
  for (int i = 0; i < x->ncomms; i++) /* an op at its gate waits for a kick, not a timer */
    if (x->comms[i]->head && atomic_load(&x->comms[i]->head->gate) != COLL_GATE_CLOSED) return 1;
  return 0;
}

/* The progress thread's sleep between passes that moved nothing. */
static void thread_sleep(coll_ctx *x, uint32_t seen, int pending, int *idle) {
  seg_ctl *me = x->seg.ctl;
  if (x->net && x->seg.wakefd >= 0) {
    /* Node peers ring the wake socket while `sleeping` is set; the bound
     * only limits the damage of a lost datagram. */
    atomic_store(&me->sleeping, 1);
    if (atomic_load(&me->doorbell) == seen) net_sleep(x, pending ? 10 : 100);
    atomic_store(&me->sleeping, 0);
  } else if (x->net) {
    /* No wake socket: shared-memory flags cannot wake epoll, so back off
     * from 0 to 1 ms while work is pending, sleep long when idle. */
    int ms = pending ? (*idle < 4 ? 0 : 1) : 100;
    if (ms == 0)
      sched_yield();
    else
      net_sleep(x, ms);
    (*idle)++;
  } else { /* a node peer's exit cannot ring: look again at least every 20 ms while ops wait */
    seg_doorbell_wait(&x->seg, seen, (pending ? 20 : 100) * 1000 * 1000);
  }
}

static void *progress_main(void *arg) {
  coll_ctx *x = arg;
  int idle = 0;
  pthread_mutex_lock(&x->mu);
  while (!x->stop) {
    uint32_t seen = atomic_load_explicit(&x->seg.ctl->doorbell, memory_order_acquire);
    if (coll_progress(x)) {
      idle = 0;
      continue;
    }
    int pending = any_pending(x);
    pthread_mutex_unlock(&x->mu);
    thread_sleep(x, seen, pending, &idle);
    pthread_mutex_lock(&x->mu);
  }
  pthread_mutex_unlock(&x->mu);
  return NULL;
}

hsr_status coll_progress_start(coll_ctx *x) {
  if (x->inline_progress) return HSR_OK;
  if (pthread_create(&x->thread, NULL, progress_main, x) != 0)
    return hsr_error(HSR_ERR_SYSTEM, "cannot start the progress thread: %s", strerror(errno));
  x->thread_started = 1;
  return HSR_OK;
}

void coll_progress_stop(coll_ctx *x) {
  if (!x->thread_started) return;
  coll_kick(x);
  pthread_join(x->thread, NULL);
  x->thread_started = 0;
}

/* ---- issuing ---------------------------------------------------------------------- */

/* ---- ops in a sim stream's order ---------------------------------------------------- */

static void wait_done(coll_op *op, double timeout_s);

/* The stream reached the op: open its gate, wait (the progress engine's
 * timeouts and verdicts bound it) and pass its result to the stream. */
static hsr_status gate_run(void *arg) {
  coll_op *op = arg;
  coll_ctx *x = op->c->ctx;
  atomic_store_explicit(&op->gate, COLL_GATE_OPEN, memory_order_release);
  coll_kick(x);
  wait_done(op, -1);
  hsr_status st = coll_op_result(op);
  coll_op_destroy(op); /* the stream's reference */
  return st;
}

/* The stream failed before reaching the op: it fails with that reason. */
static void gate_skip(void *arg, const char *why) {
  coll_op *op = arg;
  snprintf(op->gate_why, sizeof op->gate_why, "%s", why);
  atomic_store_explicit(&op->gate, COLL_GATE_CANCELLED, memory_order_release);
  coll_kick(op->c->ctx);
  coll_op_destroy(op);
}

/* What the op reads and writes in this rank's memory, for the stream-order check. */
static int op_accesses(const coll_op *op, hsr_access *acc) {
  size_t b = op->count * dtype_size(op->dt), n = (size_t)op->c->size;
  switch (op->kind) {
  case HSR_OP_ALLGATHER: acc[0] = (hsr_access){op->send, b, 0}, acc[1] = (hsr_access){op->recv, b * n, 1}; return 2;
  case HSR_OP_REDUCE_SCATTER:
    acc[0] = (hsr_access){op->send, b * n, 0}, acc[1] = (hsr_access){op->recv, b, 1};
    return 2;
  case HSR_OP_ALLREDUCE: acc[0] = (hsr_access){op->send, b, 0}, acc[1] = (hsr_access){op->recv, b, 1}; return 2;
  case HSR_OP_BCAST: acc[0] = (hsr_access){op->recv, b, op->c->rank != op->root}; return 1;
  default: return 0;
  }
}

/* Posts the op closed at its gate (so every rank's ops of this communicator
 * keep their program order, NCCL's rule) and queues the task that opens it. */
static hsr_status stream_issue(coll_op *op) {
  hsr_comm *c = op->c;
  atomic_store(&op->gate, COLL_GATE_CLOSED);
  atomic_store(&op->refs, 2);
  hsr_status st = c->tp->start(op);
  if (st != HSR_OK) {
    atomic_store(&op->refs, 1);
    coll_op_destroy(op);
    return st;
  }
  hsr_access acc[2];
  int nacc = op_accesses(op, acc);
  char name[96];
  snprintf(name, sizeof name, "%s on '%s'", op_name(op->kind), c->name);
  st = kern_stream_task(c->stream, name, gate_run, gate_skip, op, acc, nacc);
  if (st == HSR_OK) return HSR_OK;
  /* not queued: the op fails at its gate and nobody waits for it */
  char why[256];
  snprintf(why, sizeof why, "%s", hsr_last_error());
  pthread_mutex_lock(&c->ctx->mu);
  op->detached = 1;
  pthread_mutex_unlock(&c->ctx->mu);
  gate_skip(op, why);
  return hsr_error(st, "%s", why);
}

/* Counts the call and hands the op to its transport (trivial: done at once);
 * req == NULL waits for it (the transport's own wait, bounded). */
hsr_status coll_op_issue(coll_op *op, int trivial, hsr_req **req) {
  hsr_comm *c = op->c;
  coll_op_count_call(op);
  if (c->ctx) coll_fault_hook(c->ctx, op_name(op->kind)); /* HSR_FAULT, a test hook */
  if (trivial) {
    coll_op_skip(op);
  } else if (c->stream) {
    HSR_CHECK(stream_issue(op));
  } else {
    hsr_status st = c->tp->start(op);
    if (st != HSR_OK) {
      coll_op_destroy(op);
      return st;
    }
  }
  if (req) {
    *req = op;
    return HSR_OK;
  }
  return c->tp->wait(op, -1);
}

/* ---- the host transports' requests ---------------------------------------------- */

hsr_status coll_host_start(coll_op *op) {
  hsr_comm *c = op->c;
  if (c->failed)
    return hsr_error(HSR_ERR_STATE, "%s on '%s': the communicator has failed: %s", op_name(op->kind), c->name,
                     c->fail_msg);
  /* no lock: the progress pass takes it from here (a comm that fails
   * meanwhile fails the op there, with the reason) */
  coll_op_post(op);
  coll_kick(c->ctx);
  return HSR_OK;
}

hsr_status coll_host_test(coll_op *op, int *done) {
  coll_ctx *x = op->c->ctx;
  *done = atomic_load_explicit(&op->done, memory_order_acquire);
  if (!*done && x->inline_progress) {
    pthread_mutex_lock(&x->mu);
    coll_progress(x);
    pthread_mutex_unlock(&x->mu);
    *done = atomic_load_explicit(&op->done, memory_order_acquire);
  }
  return *done ? coll_op_result(op) : HSR_OK;
}

/* Inline progress: the waiting caller drives the engine, sleeping on the
 * network transport or the doorbell between passes that moved nothing. */
static void wait_inline(coll_ctx *x, coll_op *op) {
  int spins = 0;
  while (!atomic_load_explicit(&op->done, memory_order_acquire)) {
    uint32_t seen = atomic_load(&x->seg.ctl->doorbell);
    if (coll_progress(x)) {
      spins = 0;
      continue;
    }
    pthread_mutex_unlock(&x->mu);
    if (x->net)
      net_sleep(x, spins++ < 4 ? 0 : 1);
    else
      seg_doorbell_wait(&x->seg, seen, 1000 * 1000);
    pthread_mutex_lock(&x->mu);
  }
}

static void wait_thread(coll_ctx *x, coll_op *op) {
  while (!atomic_load_explicit(&op->done, memory_order_acquire)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
  }
}

/* Until the op is done (the progress engine's timeouts and verdicts bound it). */
static void wait_done(coll_op *op, double timeout_s) {
  coll_ctx *x = op->c->ctx;
  if (atomic_load_explicit(&op->done, memory_order_acquire)) return;
  pthread_mutex_lock(&x->mu);
  if (timeout_s >= 0) op->timeout_s = timeout_s;
  if (x->inline_progress)
    wait_inline(x, op);
  else
    wait_thread(x, op);
  pthread_mutex_unlock(&x->mu);
}

hsr_status coll_host_wait(coll_op *op, double timeout_s) {
  wait_done(op, timeout_s);
  hsr_status st = coll_op_result(op);
  coll_op_release(op);
  return st;
}
