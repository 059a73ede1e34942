/* Failure detection and the verdict (fault.h): node peers' exits (pidfds),
 * the launcher's events, UCX endpoint errors, timeouts with the node peers'
 * published state, notices from other ranks; one verdict per context, which
 * fails every communicator, is printed once and is sent to every rank. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"

#define POLL_NS (20 * 1000 * 1000ull)
#define GONE_GRACE_NS (500 * 1000 * 1000ull) /* what a gone peer sent before it left still arrives */
#define BEAT_STALE_NS (3 * 1000 * 1000 * 1000ull)

static int on_my_node(coll_ctx *x, int wr) { return wr != x->rank && x->seg.peer_ctl && x->seg.peer_ctl[wr]; }

/* ---- lifetime ---------------------------------------------------------------- */

static void launcher_event(void *arg, int rank) { /* PMIx's thread: flag and wake only */
  coll_ctx *x = arg;
  (void)rank;
  atomic_fetch_add(&x->fault.launcher_events, 1);
  coll_kick(x);
}

static void last_word(void *arg);

hsr_status coll_fault_open(coll_ctx *x) {
  coll_fault *f = &x->fault;
  HSR_CHECK(fault_hook_init(&f->hook, x->rank));
  f->pidfd = malloc((size_t)x->size * sizeof *f->pidfd);
  f->gone = calloc((size_t)x->size, sizeof *f->gone);
  f->gone_ns = calloc((size_t)x->size, sizeof *f->gone_ns);
  f->why = calloc((size_t)x->size, sizeof *f->why);
  f->stop_ns = calloc((size_t)x->size, sizeof *f->stop_ns);
  if (!f->pidfd || !f->gone || !f->gone_ns || !f->why || !f->stop_ns) return hsr_error(HSR_ERR_NOMEM, "fault tables");
  f->node_pids = calloc((size_t)x->size, sizeof *f->node_pids);
  if (!f->node_pids) return hsr_error(HSR_ERR_NOMEM, "fault tables");
  for (int r = 0; r < x->size; r++) {
    f->pidfd[r] = -1;
    if (on_my_node(x, r)) f->node_pids[f->hook.n_node_pids++] = x->seg.pids[r];
#ifdef SYS_pidfd_open
    if (on_my_node(x, r)) f->pidfd[r] = (int)syscall(SYS_pidfd_open, (pid_t)x->seg.pids[r], 0);
#endif
  }
  f->hook.node_pids = f->node_pids; /* HSR_FAULT killnode */
  HSR_CHECK(boot_on_end(x->boot, last_word, x));
  return boot_watch_peers(x->boot, launcher_event, x);
}

void coll_fault_close(coll_ctx *x) {
  coll_fault *f = &x->fault;
  boot_on_end(x->boot, NULL, x);
  boot_watch_peers(x->boot, NULL, NULL);
  for (int r = 0; f->pidfd && r < x->size; r++)
    if (f->pidfd[r] >= 0) close(f->pidfd[r]);
  f->hook.node_pids = NULL, f->hook.n_node_pids = 0;
  free(f->pidfd), free(f->gone), free(f->gone_ns), free(f->why), free(f->node_pids), free(f->stop_ns);
  f->pidfd = NULL, f->gone = NULL, f->gone_ns = NULL, f->why = NULL, f->node_pids = NULL, f->stop_ns = NULL;
}

void coll_fault_hook(coll_ctx *x, const char *phase) { fault_hook_hit(&x->fault.hook, phase); }

/* ---- words ------------------------------------------------------------------------ */

static hsr_status status_of(int kind) {
  return kind == FAULT_DIED || kind == FAULT_LEFT || kind == FAULT_TRANSPORT ? HSR_ERR_TRANSPORT : HSR_ERR_TIMEOUT;
}

/* "rank 1 (node 0, host vm, pid 123) is stopped (SIGSTOP): communicator ..." */
static void verdict_line(coll_ctx *x, const seg_notice *v, char *buf, size_t n) {
  int off = 0, c = v->culprit;
  if (c >= 0 && c < x->size)
    off = snprintf(buf, n, "rank %d (node %d, host %s, pid %d) %s", c, boot_node_of(x->boot, c),
                   boot_hostname_of(x->boot, c), x->seg.pids[c], v->what);
  else
    off = snprintf(buf, n, "%s", v->what);
  if (off < 0 || (size_t)off >= n) return;
  if (v->reporter == x->rank)
    snprintf(buf + off, n - (size_t)off, "%s%s", v->where[0] ? ": " : "", v->where);
  else if (v->where[0])
    snprintf(buf + off, n - (size_t)off, " (found by rank %d: %s)", v->reporter, v->where);
  else
    snprintf(buf + off, n - (size_t)off, " (found by rank %d)", v->reporter);
}

static void op_where(const coll_op *op, int culprit, double waited, char *buf, size_t n) {
  int len =
      snprintf(buf, n, "communicator '%s' %s #%llu ", op->c->name, op_name(op->kind), (unsigned long long)op->seq);
  if (len < 0 || (size_t)len >= n) return;
  if (culprit < 0)
    snprintf(buf + len, n - (size_t)len, "made no progress for %.1f s", waited);
  else if (waited >= 0.1)
    snprintf(buf + len, n - (size_t)len, "waited %.1f s for it", waited);
  else
    snprintf(buf + len, n - (size_t)len, "was waiting for it");
}

/* Copies at most n - 1 bytes and terminates (cut, never a format warning). */
static void copy_text(char *dst, size_t n, const char *src) {
  size_t len = strnlen(src, n - 1);
  memcpy(dst, src, len);
  dst[len] = '\0';
}

static seg_notice notice(coll_ctx *x, int culprit, int kind, const char *what) {
  seg_notice v = {.culprit = culprit, .kind = kind, .reporter = x->rank};
  copy_text(v.what, sizeof v.what, what);
  return v;
}

/* ---- what a node peer is doing ------------------------------------------------------- */

/* The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 't' traced,
 * 'Z' zombie...), 0 if the process is gone. */
static char proc_state(int pid) {
  char path[64], b[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t len = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[len] = '\0';
  char *p = strrchr(b, ')');
  return p && p[1] == ' ' ? p[2] : 0;
}

static void mark_gone(coll_ctx *x, int wr, int kind, const char *why, uint64_t now) {
  coll_fault *f = &x->fault;
  if (wr < 0 || wr >= x->size || wr == x->rank || f->gone[wr]) return;
  f->gone[wr] = (uint8_t)kind;
  f->gone_ns[wr] = now;
  copy_text(f->why[wr], sizeof f->why[wr], why);
  HSR_LOG_D("collectives: rank %d %s", wr, why);
}

/* Who is really holding up a wait for world rank wr: follows node peers'
 * published waits. 1 with v filled when it is known; 0 when the trail leaves
 * the node (v->culprit is then the remote suspect). */
static int blame(coll_ctx *x, int wr, uint64_t now, seg_notice *v) {
  coll_fault *f = &x->fault;
  char via[32] = "";
  *v = notice(x, wr, FAULT_SILENT, "is part of a cycle of waits");
  for (int hops = 0; hops <= x->size; hops++) {
    if (wr < 0) {
      *v = notice(x, -1, FAULT_SILENT, "no progress (no peer to name)");
      return 1;
    }
    if (f->gone[wr]) {
      *v = notice(x, wr, f->gone[wr], f->why[wr]);
      break;
    }
    if (!on_my_node(x, wr)) {
      *v = notice(x, wr, FAULT_SILENT, "");
      snprintf(v->what, sizeof v->what, "stopped responding%s", via);
      return 0;
    }
    const seg_ctl *pc = x->seg.peer_ctl[wr];
    char s = proc_state(x->seg.pids[wr]);
    uint64_t beat = atomic_load(&pc->beat_ns);
    int next = atomic_load(&pc->wait_rank);
    char what[160];
    if (s == 'T' || s == 't') {
      snprintf(what, sizeof what, "is stopped (%s, process state %c)%s", s == 'T' ? "SIGSTOP" : "a debugger", s, via);
      *v = notice(x, wr, FAULT_STOPPED, what);
    } else if (s == 0 || s == 'Z' || s == 'X') {
      snprintf(what, sizeof what, "%s%s", atomic_load(&pc->bye) ? "left hsr" : "was killed or crashed", via);
      *v = notice(x, wr, atomic_load(&pc->bye) ? FAULT_LEFT : FAULT_DIED, what);
    } else if (atomic_load(&pc->bye)) {
      snprintf(what, sizeof what, "left hsr (freed its communicators)%s", via);
      *v = notice(x, wr, FAULT_LEFT, what);
    } else if (now > beat + BEAT_STALE_NS) {
      snprintf(what, sizeof what, "is alive but its progress engine has not run for %.1f s%s",
               (double)(now - beat) * 1e-9, via);
      *v = notice(x, wr, FAULT_SILENT, what);
    } else if (next == x->rank) {
      snprintf(what, sizeof what, "waits for this rank in another operation (collectives out of order?)");
      *v = notice(x, wr, FAULT_ABSENT, what);
    } else if (next < 0 || next >= x->size) {
      snprintf(what, sizeof what, "is alive but not in this operation (busy elsewhere?)%s", via);
      *v = notice(x, wr, FAULT_ABSENT, what);
    } else {
      if (!via[0]) snprintf(via, sizeof via, " (rank %d waits for it)", wr);
      wr = next;
      continue;
    }
    return 1;
  }
  return 1;
}

/* ---- the verdict ------------------------------------------------------------------------ */

/* Fails every queued op of every communicator; `trigger` is the op that found it. */
static void fail_all(coll_ctx *x, const char *line, coll_op *trigger) {
  coll_take_incoming(x);
  for (int i = 0; i < x->ncomms; i++) {
    hsr_comm *c = x->comms[i];
    for (coll_op *op = c->head; op; op = op->next) {
      if (op->fin) continue;
      if (op == trigger)
        coll_op_fail(op, x->fault.st, "%s", line);
      else
        coll_op_fail(op, x->fault.st, "%s; communicator '%s' %s #%llu failed with it", line, c->name, op_name(op->kind),
                     (unsigned long long)op->seq);
      if (op->tp->cancel) op->tp->cancel(op);
    }
    if (!c->failed) {
      size_t n = strlen(line) < sizeof c->fail_msg ? strlen(line) : sizeof c->fail_msg - 1;
      memcpy(c->fail_msg, line, n);
      c->fail_msg[n] = '\0';
      c->failed = 1;
    }
  }
}

/* The oldest op still queued here, for the printed line. */
static coll_op *oldest_pending(coll_ctx *x) {
  coll_op *best = NULL;
  for (int i = 0; i < x->ncomms; i++) {
    coll_op *op = x->comms[i]->head;
    if (op && (!best || op->t_start < best->t_start)) best = op;
  }
  return best;
}

static void declare_op(coll_ctx *x, const seg_notice *v, coll_op *trigger) {
  coll_fault *f = &x->fault;
  if (f->declared) return;
  f->declared = 1;
  f->verdict = *v;
  f->st = status_of(v->kind);
  char line[512], here[200] = "";
  verdict_line(x, v, line, sizeof line);
  coll_op *p = trigger ? NULL : oldest_pending(x);
  if (p)
    snprintf(here, sizeof here, "; pending here: communicator '%s' %s #%llu", p->c->name, op_name(p->kind),
             (unsigned long long)p->seq);
  HSR_LOG_E("%s%s", line, here);
  /* node peers read it from my control segment, other nodes get a message */
  seg_notice *mine = &x->seg.ctl->notice;
  if (!atomic_load(&mine->valid)) {
    mine->culprit = v->culprit, mine->kind = v->kind, mine->reporter = v->reporter, mine->waited_s = v->waited_s;
    memcpy(mine->what, v->what, sizeof mine->what);
    memcpy(mine->where, v->where, sizeof mine->where);
    atomic_store_explicit(&mine->valid, 1, memory_order_release);
  }
  for (int r = 0; r < x->size; r++)
    if (on_my_node(x, r)) seg_ring(&x->seg, r);
  /* every rank that fails passes it on before it leaves: whoever sees it
   * gone then has its reason already */
  if (x->net && x->net->net_notify) x->net->net_notify(x, v);
  fail_all(x, line, trigger);
  boot_note_failure(x->boot, v->kind == FAULT_STOPPED || v->kind == FAULT_SILENT || v->kind == FAULT_ABSENT);
  coll_kick(x);
}

void coll_fault_declare(coll_ctx *x, const seg_notice *v) { declare_op(x, v, NULL); }

/* The op waiting longest, and for whom (this rank's published state). */
static coll_op *longest_wait(coll_ctx *x) {
  coll_op *best = NULL;
  for (int i = 0; i < x->ncomms; i++) {
    coll_op *op = x->comms[i]->head;
    if (op && !op->fin && op->t_progress && op->wait_peer >= 0 && (!best || op->t_progress < best->t_progress))
      best = op;
  }
  return best;
}

static void peer_exited(coll_ctx *x, int r, uint64_t now);

static void adopt(coll_ctx *x, const seg_notice *n) {
  coll_fault *f = &x->fault;
  if (f->declared) return;
  /* Blamed on a node peer whose process this rank can see: what it sees
   * beats hearsay (a remote finder only had its endpoint's error) */
  int c = n->culprit;
  if (c >= 0 && c < x->size && on_my_node(x, c) && !atomic_load(&x->seg.peer_ctl[c]->bye)) {
    char s = proc_state(x->seg.pids[c]);
    if (s == 0 || s == 'Z' || s == 'X') {
      peer_exited(x, c, hsr_clock_ns());
      if (f->declared) return;
    }
  }
  uint64_t now = hsr_clock_ns(), since = f->last_poll_ns ? now - f->last_poll_ns : 0;
  uint64_t gap = since > f->gap_ns ? since : f->gap_ns;
  /* Blamed while running: this rank knows better whom it waits for. Blamed
   * after a pause of its own (it was the stopped one): the blame stands. */
  if (n->culprit == x->rank && gap < 1000 * 1000 * 1000ull) {
    coll_op *op = longest_wait(x);
    if (op) {
      seg_notice v;
      blame(x, op->c->world[op->wait_peer], hsr_clock_ns(), &v);
      op_where(op, v.culprit, (double)(hsr_clock_ns() - op->t_progress) * 1e-9, v.where, sizeof v.where);
      declare_op(x, &v, op);
      return;
    }
  }
  coll_fault_declare(x, n);
}

void coll_fault_notice_in(coll_ctx *x, const seg_notice *n) { adopt(x, n); }

void coll_fault_peer_error(coll_ctx *x, int wr, const char *why) {
  char what[160];
  snprintf(what, sizeof what, "is unreachable: its UCX endpoint failed (%s)", why);
  mark_gone(x, wr, FAULT_DIED, what, hsr_clock_ns());
  if (on_my_node(x, wr)) x->fault.next_poll_ns = 0; /* its pidfd may say it died: the next pass looks */
}

void coll_fault_xfer_error(coll_op *op, const char *why) {
  if (!op->xfer_err) op->xfer_err = why;
}

/* ---- the poll ----------------------------------------------------------------------------- */

/* A node peer whose process ended: gone; without having left hsr, a verdict. */
static void peer_exited(coll_ctx *x, int r, uint64_t now) {
  coll_fault *f = &x->fault;
  if (atomic_load(&x->seg.peer_ctl[r]->bye)) {
    mark_gone(x, r, FAULT_LEFT, "left hsr (freed its communicators) and exited", now);
    return;
  }
  if (f->gone[r] == FAULT_DIED) /* its endpoint's error came first: the exit says more */
    snprintf(f->why[r], sizeof f->why[r], "was killed or crashed: its process ended without leaving hsr");
  mark_gone(x, r, FAULT_DIED, "was killed or crashed: its process ended without leaving hsr", now);
  if (!f->declared) {
    seg_notice v = notice(x, r, FAULT_DIED, f->why[r]);
    coll_fault_declare(x, &v);
  }
}

static void watch_node(coll_ctx *x, uint64_t now) {
  coll_fault *f = &x->fault;
  struct pollfd pf[64];
  int who[64], n = 0;
  for (int r = 0; r < x->size; r++) {
    if (!on_my_node(x, r)) continue;
    const seg_ctl *pc = x->seg.peer_ctl[r];
    if (!f->declared && atomic_load_explicit(&pc->notice.valid, memory_order_acquire)) {
      seg_notice nn;
      memcpy(&nn, &pc->notice, sizeof nn);
      adopt(x, &nn);
    }
    if (f->gone[r] == FAULT_LEFT) continue;
    if (f->pidfd[r] >= 0 && n < 64) {
      pf[n] = (struct pollfd){.fd = f->pidfd[r], .events = POLLIN};
      who[n++] = r;
    } else if (f->pidfd[r] < 0 && kill(x->seg.pids[r], 0) != 0 && errno == ESRCH) {
      peer_exited(x, r, now);
    }
    if (!f->gone[r] && atomic_load(&pc->bye)) mark_gone(x, r, FAULT_LEFT, "left hsr (freed its communicators)", now);
  }
  if (n > 0 && poll(pf, (nfds_t)n, 0) > 0)
    for (int i = 0; i < n; i++)
      if (pf[i].revents & (POLLIN | POLLHUP)) peer_exited(x, who[i], now);
}

void coll_fault_poll(coll_ctx *x, uint64_t now, int force) {
  coll_fault *f = &x->fault;
  if (!f->gone || (!force && now < f->next_poll_ns)) return;
  f->next_poll_ns = now + POLL_NS;
  f->gap_ns = f->last_poll_ns ? now - f->last_poll_ns : 0;
  f->last_poll_ns = now;
  seg_ctl *me = x->seg.ctl;
  coll_op *w = longest_wait(x);
  atomic_store(&me->wait_rank, w ? w->c->world[w->wait_peer] : -1);
  atomic_store(&me->wait_since_ns, w ? w->t_progress : 0);
  atomic_store(&me->beat_ns, now);
  unsigned ev = atomic_load(&f->launcher_events);
  if (ev != f->launcher_seen) {
    f->launcher_seen = ev;
    char why[96];
    for (int r = 0; r < x->size; r++)
      if (!f->gone[r] && boot_peer_gone(x->boot, r, why, sizeof why)) mark_gone(x, r, FAULT_DIED, why, now);
  }
  watch_node(x, now);
}

void coll_fault_goodbye(coll_ctx *x) {
  if (!x->fault.gone || !x->seg.peer_ctl) return;
  uint64_t t0 = hsr_clock_ns(), bound = (uint64_t)(x->timeout_s * 1e9);
  for (;;) {
    pthread_mutex_lock(&x->mu);
    coll_fault_poll(x, hsr_clock_ns(), 1);
    int waiting = 0;
    for (int r = 0; r < x->size && !x->fault.declared && !waiting; r++)
      waiting = on_my_node(x, r) && !x->fault.gone[r] && !atomic_load(&x->seg.peer_ctl[r]->bye);
    pthread_mutex_unlock(&x->mu);
    if (!waiting || hsr_clock_ns() - t0 > bound) return; /* an alive peer past the bound: not a fault */
    struct timespec ts = {.tv_nsec = 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* ---- an op that moved nothing --------------------------------------------------------------- */

static int first_gone_member(coll_ctx *x, hsr_comm *c) {
  for (int i = 0; i < c->size; i++)
    if (x->fault.gone[c->world[i]]) return c->world[i];
  return -1;
}

/* A failed transfer: blamed on a member already known gone, else on the peer. */
static seg_notice xfer_verdict(coll_ctx *x, coll_op *op, int wr, const char *why) {
  coll_fault *f = &x->fault;
  int g = wr >= 0 && f->gone[wr] ? wr : first_gone_member(x, op->c);
  if (g >= 0) return notice(x, g, f->gone[g], f->why[g]);
  char what[160];
  snprintf(what, sizeof what, "made a transfer fail (%s)", why);
  return notice(x, wr, FAULT_TRANSPORT, what);
}

static int op_peer(const coll_op *op) {
  return op->wait_peer >= 0 && op->wait_peer < op->c->size ? op->c->world[op->wait_peer] : -1;
}

void coll_fault_transfer(coll_op *op, const char *why) {
  coll_ctx *x = op->c->ctx;
  if (!x->fault.declared && x->fault.gone) {
    seg_notice v = xfer_verdict(x, op, op_peer(op), why);
    double idle = (double)(hsr_clock_ns() - op->t_progress) * 1e-9;
    op_where(op, v.culprit, idle > 0 ? idle : 0, v.where, sizeof v.where);
    declare_op(x, &v, op);
  }
  if (!op->fin)
    coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: transfer failed: %s", op->c->name, op_name(op->kind),
                 why);
}

/* A node peer that this op waits for directly, seen stopped (process state
 * T: SIGSTOP) at every look for HSR_STOP_TIMEOUT while this rank ran: it
 * does not run, so the op need not wait for its timeout. A look after a
 * gap of this rank's own (it was stopped or descheduled too, as under a
 * job's suspension) starts the watch again; a debugger's stop ('t') and a
 * peer of another node wait for the timeout. */
static int seen_stopped(coll_ctx *x, int wr, uint64_t now, double idle, seg_notice *v) {
  coll_fault *f = &x->fault;
  if (x->stop_s <= 0 || wr < 0 || !on_my_node(x, wr) || idle < 0.5 || !f->stop_ns || now < f->next_stop_ns) return 0;
  f->next_stop_ns = now + 100 * 1000 * 1000ull;
  if (f->gap_ns > 500 * 1000 * 1000ull || proc_state(x->seg.pids[wr]) != 'T') {
    f->stop_ns[wr] = 0;
    return 0;
  }
  if (!f->stop_ns[wr]) f->stop_ns[wr] = now;
  double s = (double)(now - f->stop_ns[wr]) * 1e-9;
  if (s < x->stop_s) return 0;
  char what[160];
  snprintf(what, sizeof what, "is stopped (SIGSTOP, process state T, seen for %.1f s)", s);
  *v = notice(x, wr, FAULT_STOPPED, what);
  return 1;
}

int coll_fault_check_op(coll_op *op, uint64_t now) {
  coll_ctx *x = op->c->ctx;
  coll_fault *f = &x->fault;
  if (f->declared || !f->gone) return 0;
  int wr = op_peer(op);
  double idle = now > op->t_progress ? (double)(now - op->t_progress) * 1e-9 : 0;
  seg_notice v;
  if (op->xfer_err || (wr >= 0 && f->gone[wr]) || idle > op->timeout_s) {
    coll_fault_poll(x, now, 1); /* a node peer's notice may already say more */
    if (f->declared) return 1;
  }
  int g = op->xfer_err ? (wr >= 0 && f->gone[wr] ? wr : first_gone_member(x, op->c)) : -1;
  if (g >= 0) { /* what a gone peer sent before it left still arrives, and so may a notice */
    if (now < f->gone_ns[g] + GONE_GRACE_NS) return 0;
    v = notice(x, g, f->gone[g], f->why[g]);
  } else if (op->xfer_err) {
    v = xfer_verdict(x, op, wr, op->xfer_err);
  } else if (wr >= 0 && f->gone[wr]) {
    uint64_t since = f->gone_ns[wr] > op->t_progress ? f->gone_ns[wr] : op->t_progress;
    if (now < since + GONE_GRACE_NS) return 0;
    v = notice(x, wr, f->gone[wr], f->why[wr]);
  } else if (idle <= op->timeout_s) {
    if (!seen_stopped(x, wr, now, idle, &v)) return 0;
  } else if ((double)f->gap_ns * 1e-9 > op->timeout_s / 2) {
    /* this rank itself did not run (stopped, descheduled): no evidence
     * against anyone; the clock starts again */
    op->t_progress = now;
    return 0;
  } else if (!op->grace_ns) {
    if (!blame(x, wr, now, &v)) { /* remote: give its node peers' notice a moment to arrive */
      double g = op->timeout_s / 2 < 2 ? op->timeout_s / 2 : 2;
      op->grace_ns = now + (uint64_t)((g < 0.2 ? 0.2 : g) * 1e9);
      return 0;
    }
  } else if (now < op->grace_ns) {
    return 0;
  } else if (!blame(x, wr, now, &v)) {
    snprintf(v.what, sizeof v.what, "stopped responding (no word from it or its node peers)");
  }
  v.waited_s = idle;
  op_where(op, v.culprit, idle, v.where, sizeof v.where);
  declare_op(x, &v, op);
  return 1;
}

/* ---- the job is ending ---------------------------------------------------------------------- */

/* Nothing seen failing, yet the launcher ends the job while this rank
 * waits (no endpoint errors, HSR_UCX_PEER_ERRORS=off, or sooner than the
 * timeout): the rank it waits for, through its node peers' waits. A rank
 * of this host (the launcher's process table) whose process is gone is
 * named as such; one still running is not blamed (another rank of the
 * host that is gone is named instead, if one is); of another host, what
 * the wait shows, and that no failure was seen. */
static void last_wait(coll_ctx *x) {
  coll_op *op = longest_wait(x);
  if (!op) return;
  uint64_t now = hsr_clock_ns();
  double idle = now > op->t_progress ? (double)(now - op->t_progress) * 1e-9 : 0;
  seg_notice v;
  if (blame(x, op->c->world[op->wait_peer], now, &v)) return; /* a node peer's state: the poll says it already */
  int w = v.culprit, c = w, a = boot_rank_alive(x->boot, w);
  for (int r = 0; a == 1 && r < x->size; r++)
    if (r != x->rank && boot_rank_alive(x->boot, r) == 0) c = r, a = 0;
  if (a == 1) return;
  char what[160];
  if (a == 0)
    snprintf(what, sizeof what, "was killed or crashed: its process is gone");
  else
    snprintf(what, sizeof what, "had not answered for %.1f s (no failure of it was seen here)", idle);
  v = notice(x, c, a == 0 ? FAULT_DIED : FAULT_SILENT, what);
  if (c == w) {
    op_where(op, c, idle, v.where, sizeof v.where);
    size_t len = strlen(v.where);
    snprintf(v.where + len, sizeof v.where - len, "; seen as the launcher ended this rank");
  } else {
    copy_text(v.where, sizeof v.where, "seen as the launcher ended this rank");
  }
  coll_fault_declare(x, &v);
}

/* Context lock held: the earliest rank seen gone (dead; or left too, with
 * left_too) becomes the verdict, found `where`, when none holds yet; 1 if so. */
static int declare_earliest_gone(coll_ctx *x, int left_too, const char *where) {
  coll_fault *f = &x->fault;
  int g = -1;
  for (int r = 0; f->gone && !f->declared && r < x->size; r++)
    if (f->gone[r] && (left_too || f->gone[r] != FAULT_LEFT) && (g < 0 || f->gone_ns[r] < f->gone_ns[g])) g = r;
  if (g < 0) return 0;
  seg_notice v = notice(x, g, f->gone[g], f->why[g]);
  copy_text(v.where, sizeof v.where, where);
  coll_fault_declare(x, &v);
  return 1;
}

int coll_fault_declare_gone(coll_ctx *x, const char *where) {
  pthread_mutex_lock(&x->mu);
  int d = declare_earliest_gone(x, 0, where);
  pthread_mutex_unlock(&x->mu);
  return d;
}

/* The launcher ends this rank (its SIGTERM after a death elsewhere, or its
 * own death): what this rank already knows is said now, without the grace a
 * gone peer's last messages get, since nothing more will arrive. The lock is
 * bounded: a rank that cannot say it in time says nothing. */
static void last_word(void *arg) {
  coll_ctx *x = arg;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_nsec += 250 * 1000 * 1000;
  if (dl.tv_nsec >= 1000000000) dl.tv_sec++, dl.tv_nsec -= 1000000000;
  if (pthread_mutex_timedlock(&x->mu, &dl) != 0) return;
  coll_fault *f = &x->fault;
  if (f->gone && !f->declared) {
    for (int k = 0; x->net && k < 64 && x->net->net_progress(x); k++) { /* endpoint errors, notices */
    }
    coll_fault_poll(x, hsr_clock_ns(), 1);
  }
  /* a peer that left hsr cleanly (freed its communicators) is a culprit only
   * to a rank that still waits for it: one that has nothing pending is ending
   * with the job (an error every rank agreed on), and blames no one */
  int pending = atomic_load(&x->incoming) != NULL;
  for (int c = 0; c < x->ncomms && !pending; c++) pending = x->comms[c] && x->comms[c]->head;
  if (!declare_earliest_gone(x, pending, "seen as the launcher ended this rank") && f->gone && !f->declared &&
      pending) {
    last_wait(x);
  }
  pthread_mutex_unlock(&x->mu);
}
