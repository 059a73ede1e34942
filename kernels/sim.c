/* The sim device: CUDA's stream semantics without a GPU.
 *
 *   memory   its own arena (every block tracked, so a host pointer is never
 *            taken for device memory), plus memory adopted from a
 *            communicator's segment and pinned staging
 *   streams  a worker thread each (the default stream too) running its
 *            queue in order; host calls return once the work is queued
 *   events   a record captures the stream's position; a wait makes the
 *            stream wait for the last record before it; a never-recorded
 *            event is complete; queries and syncs are bounded
 *   copies   as cudaMemcpyAsync: a pageable source is read at the call, a
 *            pageable destination makes the call wait for the copy
 *   failure  a task's error fails the device: later work is skipped and
 *            every later call returns the first error (CUDA's sticky error)
 *   delays   HSR_SIM_DELAY=MAX_US[:SEED]: a seeded random sleep before each
 *            operation, so an order that holds only because a stream was
 *            fast breaks
 *   checks   HSR_SIM_CHECK=1: every operation declares the ranges it reads
 *            and writes; happens-before is a vector clock per stream (queue
 *            order, event record and wait, host syncs), computed when the
 *            host queues the work, so a report does not depend on timing.
 *            An unordered read-after-write, write-after-read or
 *            write-after-write is reported with both operations and fails
 *            the call that queued the second. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/env.h"
#include "internal.h"
#include "sim.h"
#include "sim_int.h"
#include "common/common_internal.h"
#include "kernels/kernels_internal.h"

#define ALIGN 256
#define HOST_ID SIM_MAX_STREAMS /* the host's slot in a vector clock */
#define NAME_MAX_ 64

typedef struct rec {
  uintptr_t lo, hi;
  int stream, write;
  uint32_t pos;
  char name[NAME_MAX_];
} rec;

typedef struct blk {
  uintptr_t lo, hi;
  int kind; /* BLK_ARENA, BLK_ADOPTED, BLK_PINNED */
  char label[96];
  rec *r;
  int nr, capr;
} blk;
enum { BLK_ARENA, BLK_ADOPTED, BLK_PINNED };

typedef uint32_t vclock[SIM_MAX_STREAMS + 1];

typedef struct task {
  struct task *next;
  char name[NAME_MAX_];
  hsr_status (*run)(void *arg);
  void (*skip)(void *arg, const char *why);
  void *arg;
  struct sstream *wait_on; /* a wait for another stream's position */
  uint32_t wait_pos, pos;
  void *heap; /* what the task owns: a pageable source's snapshot */
  _Alignas(16) unsigned char buf[SIM_ARGS_MAX];
} task;

typedef struct sstream {
  sim_dev *sd;
  int id;
  char name[32];
  pthread_t th;
  int started, stop;
  task *head, *tail;
  uint32_t queued, done;
  uint64_t rng;
  vclock vc;
} sstream;

typedef struct sevent {
  sstream *s; /* compared, never followed, once its stream may be gone: sd and id say where to look */
  sim_dev *sd;
  int id;
  uint32_t pos;
  vclock vc;
  int recorded;
} sevent;

struct sim_dev {
  pthread_mutex_t mu; /* everything below */
  pthread_cond_t cv;  /* any task finished or was queued */
  int failed;
  char fail_msg[1024];
  sstream *streams[SIM_MAX_STREAMS];
  int next_id;
  unsigned delay_us;
  uint64_t seed;
  int check;
  double bound_s; /* the longest a call waits for the device */
  blk *b;
  int nb, capb;
  vclock host;
  long reports;
};

/* ---- small helpers ---- */

static uint64_t rng_next(uint64_t *x) { /* xorshift64* */
  *x ^= *x >> 12;
  *x ^= *x << 25;
  *x ^= *x >> 27;
  return *x * 0x2545F4914F6CDD1DULL;
}

static void vc_join(vclock a, const vclock b) {
  for (int i = 0; i <= SIM_MAX_STREAMS; i++)
    if (b[i] > a[i]) a[i] = b[i];
}

static void deadline_after(struct timespec *ts, double s) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  double whole = (double)(time_t)s;
  ts->tv_sec += (time_t)s;
  ts->tv_nsec += (long)((s - whole) * 1e9);
  if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

static sim_dev *sd_of(hsr_device *d) { return d->sim; }
static sstream *ss_of(hsr_stream *s) { return s->native; }

static hsr_status failed_locked(sim_dev *sd) {
  return hsr_error(HSR_ERR_STATE, "sim device: an earlier operation failed: %s", sd->fail_msg);
}

/* ---- memory blocks (sorted by address) ---- */

static int blk_find(sim_dev *sd, uintptr_t p) { /* index of the block holding p, or -1 */
  int lo = 0, hi = sd->nb - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (p < sd->b[mid].lo)
      hi = mid - 1;
    else if (p >= sd->b[mid].hi)
      lo = mid + 1;
    else
      return mid;
  }
  return -1;
}

static hsr_status blk_add(sim_dev *sd, void *ptr, size_t bytes, int kind, const char *label) {
  HSR_CHECK(grow_array(&sd->b, &sd->capb, sd->nb, sizeof *sd->b, 64, "sim device: block table"));
  uintptr_t lo = (uintptr_t)ptr;
  int i = sd->nb;
  while (i > 0 && sd->b[i - 1].lo > lo) i--;
  memmove(&sd->b[i + 1], &sd->b[i], (size_t)(sd->nb - i) * sizeof *sd->b);
  sd->b[i] = (blk){.lo = lo, .hi = lo + (bytes ? bytes : 1), .kind = kind};
  snprintf(sd->b[i].label, sizeof sd->b[i].label, "%s", label);
  sd->nb++;
  return HSR_OK;
}

static void blk_remove(sim_dev *sd, int i) {
  free(sd->b[i].r);
  memmove(&sd->b[i], &sd->b[i + 1], (size_t)(sd->nb - i - 1) * sizeof *sd->b);
  sd->nb--;
}

/* ---- the sanitizer ---- */

static const char *stream_name(sim_dev *sd, int id) {
  if (id == HOST_ID) return "host";
  return sd->streams[id] ? sd->streams[id]->name : "(destroyed stream)";
}

static void describe(char *out, size_t n, sim_dev *sd, const char *name, int stream, uint32_t pos) {
  snprintf(out, n, "'%s' (#%" PRIu32 " on stream '%s')", name, pos, stream_name(sd, stream));
}

/* One conflict: what the second operation does, against the first. */
static hsr_status report(sim_dev *sd, const blk *b, uintptr_t lo, uintptr_t hi, const rec *first, const char *name,
                         int stream, uint32_t pos, int write) {
  char a[160], o[160];
  describe(a, sizeof a, sd, first->name, first->stream, first->pos);
  describe(o, sizeof o, sd, name, stream, pos);
  const char *kind = write && first->write ? "write-after-write" : write ? "write-after-read" : "read-after-write";
  uintptr_t x = lo > first->lo ? lo : first->lo, y = hi < first->hi ? hi : first->hi;
  char msg[900];
  snprintf(msg, sizeof msg,
           "sim stream-order check: %s race on %s [+%zu, +%zu): %s %s it, but %s %s it and nothing orders that "
           "before (no event, stream or host sync between them)",
           kind, b->label[0] ? b->label : "device memory", (size_t)(x - b->lo), (size_t)(y - b->lo), o,
           write ? "writes" : "reads", a, first->write ? "wrote" : "still reads");
  sd->reports++;
  if (!sd->failed) {
    sd->failed = 1;
    snprintf(sd->fail_msg, sizeof sd->fail_msg, "%s", msg);
  }
  HSR_LOG_E("%s", msg);
  return hsr_error(HSR_ERR_STATE, "%s", msg);
}

static hsr_status rec_add(blk *b, rec r) {
  HSR_CHECK(grow_array(&b->r, &b->capr, b->nr, sizeof *b->r, 8, "sim device: access records"));
  b->r[b->nr++] = r;
  return HSR_OK;
}

/* Checks one access of an operation with clock v at (stream, pos), then
 * records it. Records an ordered write fully covers are dropped; a later
 * read from the same stream replaces an earlier one of the same range. */
static hsr_status check_one(sim_dev *sd, blk *b, uintptr_t lo, uintptr_t hi, int write, const char *name, int stream,
                            uint32_t pos, const uint32_t *v) {
  hsr_status st = HSR_OK;
  int k = 0;
  for (int i = 0; i < b->nr; i++) {
    rec *r = &b->r[i];
    int overlaps = r->lo < hi && lo < r->hi;
    int ordered = r->stream == stream || v[r->stream] >= r->pos;
    if (overlaps && !ordered && (write || r->write) && st == HSR_OK)
      st = report(sd, b, lo, hi, r, name, stream, pos, write);
    int drop = overlaps && r->lo >= lo && r->hi <= hi &&
               (write ? ordered : (!r->write && r->stream == stream && r->lo == lo && r->hi == hi));
    if (!drop) b->r[k++] = *r;
  }
  b->nr = k;
  rec n = {.lo = lo, .hi = hi, .stream = stream, .write = write, .pos = pos};
  snprintf(n.name, sizeof n.name, "%s", name);
  hsr_status a = rec_add(b, n);
  return st != HSR_OK ? st : a;
}

/* Every access of an operation: device memory for a kernel (kernel = 1:
 * anything else is a host pointer handed to a device kernel), any memory
 * for a copy (untracked host memory is not checked). Lock held. */
static hsr_status check_accesses(sim_dev *sd, const char *name, int kernel, int stream, uint32_t pos, const uint32_t *v,
                                 const hsr_access *acc, int nacc) {
  for (int i = 0; i < nacc; i++) {
    if (!acc[i].ptr || !acc[i].bytes) continue;
    uintptr_t lo = (uintptr_t)acc[i].ptr, hi = lo + acc[i].bytes;
    int bi = blk_find(sd, lo);
    if (bi < 0 || hi > sd->b[bi].hi) {
      if (!kernel && bi < 0 && blk_find(sd, hi - 1) < 0) continue; /* host memory */
      return hsr_error(HSR_ERR_INVALID,
                       "sim device: '%s' %s %zu bytes at %p, which %s device memory (a host pointer given to a device "
                       "operation, or a range past the end of its allocation)",
                       name, acc[i].write ? "writes" : "reads", acc[i].bytes, acc[i].ptr,
                       bi < 0 ? "is not" : "runs past the end of its");
    }
    if (sd->check) HSR_CHECK(check_one(sd, &sd->b[bi], lo, hi, acc[i].write, name, stream, pos, v));
  }
  return HSR_OK;
}

/* ---- the worker ---- */

static void *worker(void *arg) {
  sstream *s = arg;
  sim_dev *sd = s->sd;
  pthread_mutex_lock(&sd->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&sd->cv, &sd->mu);
    if (!s->head) break;
    task *t = s->head;
    hsr_status st = HSR_OK;
    if (t->wait_on) {
      while (t->wait_on && t->wait_on->done < t->wait_pos && !sd->failed) pthread_cond_wait(&sd->cv, &sd->mu);
    } else if (sd->failed) {
      char why[1100];
      snprintf(why, sizeof why, "not run: an earlier operation failed: %s", sd->fail_msg);
      pthread_mutex_unlock(&sd->mu);
      if (t->skip) t->skip(t->arg, why);
      pthread_mutex_lock(&sd->mu);
    } else {
      unsigned delay = sd->delay_us ? (unsigned)(rng_next(&s->rng) % (sd->delay_us + 1u)) : 0;
      pthread_mutex_unlock(&sd->mu);
      if (delay) {
        struct timespec ts = {delay / 1000000u, (long)(delay % 1000000u) * 1000L};
        nanosleep(&ts, NULL);
      }
      st = t->run(t->arg);
      pthread_mutex_lock(&sd->mu);
      if (st != HSR_OK && !sd->failed) {
        sd->failed = 1;
        snprintf(sd->fail_msg, sizeof sd->fail_msg, "'%s' on stream '%s': %s", t->name, s->name, hsr_last_error());
      }
    }
    s->head = t->next;
    if (!s->head) s->tail = NULL;
    s->done = t->pos;
    pthread_cond_broadcast(&sd->cv);
    free(t->heap);
    free(t);
  }
  pthread_mutex_unlock(&sd->mu);
  return NULL;
}

/* Queues t on s (lock held): its position, and the stream's clock joined
 * with what the host has seen complete. */
static void push_locked(sstream *s, task *t) {
  t->pos = ++s->queued;
  vc_join(s->vc, s->sd->host);
  s->vc[s->id] = t->pos;
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  pthread_cond_broadcast(&s->sd->cv);
}

/* Waits (bounded) until s has run everything up to pos; the host then knows
 * what it knew. Lock held. */
static hsr_status wait_pos_locked(sim_dev *sd, sstream *s, uint32_t pos, const uint32_t *vc, double timeout_s,
                                  const char *what) {
  struct timespec dl;
  deadline_after(&dl, timeout_s);
  /* after a failure too: the stream skips what is left quickly, and the
   * caller may free what those tasks point to once this returns */
  while (s->done < pos)
    if (pthread_cond_timedwait(&sd->cv, &sd->mu, &dl) == ETIMEDOUT && s->done < pos)
      return sd->failed ? failed_locked(sd)
                        : hsr_error(HSR_ERR_TIMEOUT,
                                    "sim device: %s: stream '%s' did not reach it within %.3f s (%" PRIu32
                                    " of %" PRIu32 " operations done)",
                                    what, s->name, timeout_s, s->done, pos);
  vc_join(sd->host, vc);
  return sd->failed ? failed_locked(sd) : HSR_OK;
}

/* One operation onto stream s: its accesses checked, args copied, queued. */
static hsr_status enqueue(hsr_stream *hs, const char *name, int kernel, hsr_status (*run)(void *),
                          void (*skip)(void *, const char *), const void *args, size_t args_bytes, void *ext_arg,
                          void *heap, const hsr_access *acc, int nacc, uint32_t *pos_out) {
  sstream *s = ss_of(hs);
  sim_dev *sd = s->sd;
  if (args_bytes > SIM_ARGS_MAX) {
    free(heap);
    return hsr_error(HSR_ERR_INVALID, "sim device: '%s' arguments are %zu bytes (at most %d)", name, args_bytes,
                     SIM_ARGS_MAX);
  }
  task *t = calloc(1, sizeof *t);
  if (!t) {
    free(heap);
    return hsr_error(HSR_ERR_NOMEM, "sim device: task");
  }
  snprintf(t->name, sizeof t->name, "%s", name);
  t->run = run;
  t->skip = skip;
  t->heap = heap;
  if (args_bytes) memcpy(t->buf, args, args_bytes);
  t->arg = ext_arg ? ext_arg : t->buf;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  if (st == HSR_OK) {
    vclock v;
    memcpy(v, s->vc, sizeof v);
    vc_join(v, sd->host);
    v[s->id] = s->queued + 1;
    st = check_accesses(sd, name, kernel, s->id, s->queued + 1, v, acc, nacc);
  }
  if (st != HSR_OK) {
    pthread_mutex_unlock(&sd->mu);
    free(t->heap);
    free(t);
    return st;
  }
  push_locked(s, t);
  if (pos_out) *pos_out = t->pos;
  pthread_mutex_unlock(&sd->mu);
  return HSR_OK;
}

hsr_status sim_launch(hsr_stream *s, const char *name, hsr_status (*run)(void *), const void *args, size_t args_bytes,
                      const hsr_access *acc, int nacc) {
  return enqueue(s, name, 1, run, NULL, args, args_bytes, NULL, NULL, acc, nacc, NULL);
}

/* ---- the device ---- */

/* The launcher's rank of this process (0 without one): the delays of rank r
 * derive from the seed and r, so the one seed rank 0 prints repeats them all. */
static uint64_t launch_rank(void) {
  const char *r = getenv("PMIX_RANK");
  return r && *r ? strtoull(r, NULL, 10) : 0;
}

static hsr_status parse_delay(sim_dev *sd) {
  const char *e = NULL;
  HSR_CHECK(env_get_str("HSR_SIM_DELAY", &e));
  if (!e || !*e) return HSR_OK;
  char *end;
  sd->delay_us = (unsigned)strtoul(e, &end, 10);
  int given = *end == ':';
  sd->seed = given ? (uint64_t)strtoull(end + 1, NULL, 10) : (uint64_t)time(NULL);
  uint64_t rank = launch_rank();
  /* once per job: rank 0 says it (the others at debug level) */
  log_msg(rank == 0 ? HSR_LOG_WARN : HSR_LOG_DEBUG,
          "sim device: up to %u us of delay before each operation, seed %" PRIu64 "%s (HSR_SIM_DELAY=%u:%" PRIu64
          " repeats them)",
          sd->delay_us, sd->seed, given ? "" : " (chosen)", sd->delay_us, sd->seed);
  sd->seed ^= 0xD1B54A32D192ED03ULL * (rank + 1);
  return HSR_OK;
}

static hsr_status ks_stream_init(hsr_stream *s, int priority, int create);
static hsr_status ks_stream_fini(hsr_stream *s);

static hsr_status ks_open(hsr_device *d) {
  sim_dev *sd = calloc(1, sizeof *sd);
  if (!sd) return hsr_error(HSR_ERR_NOMEM, "sim device");
  pthread_mutex_init(&sd->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&sd->cv, &ca);
  pthread_condattr_destroy(&ca);
  d->sim = sd;
  hsr_status st = parse_delay(sd);
  int check = 0;
  if (st == HSR_OK) st = env_get_bool("HSR_SIM_CHECK", &check);
  sd->check = check;
  double t = 0;
  if (st == HSR_OK) st = env_get_double("HSR_COMM_TIMEOUT", &t);
  sd->bound_s = 2 * t + 10; /* past any collective's own timeout: that one names the peer */
  if (st == HSR_OK) st = ks_stream_init(&d->dflt, 0, 1);
  if (st == HSR_OK) st = kern_stream_label(&d->dflt, "default");
  if (st != HSR_OK) {
    pthread_cond_destroy(&sd->cv);
    pthread_mutex_destroy(&sd->mu);
    free(sd);
    d->sim = NULL;
  }
  return st;
}

static hsr_status ks_close(hsr_device *d) {
  sim_dev *sd = sd_of(d);
  if (!sd) return HSR_OK;
  hsr_status st = ks_stream_fini(&d->dflt);
  for (int i = 0; i < sd->nb; i++)
    if (sd->b[i].kind == BLK_ARENA) free((void *)sd->b[i].lo);
  for (int i = 0; i < sd->nb; i++) free(sd->b[i].r);
  free(sd->b);
  pthread_cond_destroy(&sd->cv);
  pthread_mutex_destroy(&sd->mu);
  free(sd);
  d->sim = NULL;
  return st;
}

static hsr_status ks_alloc(hsr_device *d, size_t bytes, void **ptr) {
  sim_dev *sd = sd_of(d);
  size_t rounded = (bytes + ALIGN - 1) / ALIGN * ALIGN;
  void *p = aligned_alloc(ALIGN, rounded ? rounded : ALIGN);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "sim device: allocation of %zu bytes failed", bytes);
  pthread_mutex_lock(&sd->mu);
  hsr_status st = blk_add(sd, p, rounded ? rounded : ALIGN, BLK_ARENA, "");
  pthread_mutex_unlock(&sd->mu);
  if (st != HSR_OK) {
    free(p);
    return st;
  }
  *ptr = p;
  return HSR_OK;
}

/* Every stream drained first, as cudaFree synchronizes the device. */
static hsr_status drain_all_locked(sim_dev *sd, const char *what) {
  for (int i = 0; i < SIM_MAX_STREAMS; i++) {
    sstream *s = sd->streams[i];
    if (s) HSR_CHECK(wait_pos_locked(sd, s, s->queued, s->vc, sd->bound_s, what));
  }
  return HSR_OK;
}

static hsr_status untrack(hsr_device *d, void *ptr, int kind, const char *what) {
  sim_dev *sd = sd_of(d);
  pthread_mutex_lock(&sd->mu);
  int i = blk_find(sd, (uintptr_t)ptr);
  hsr_status st = HSR_OK;
  if (i < 0 || sd->b[i].lo != (uintptr_t)ptr || sd->b[i].kind != kind) {
    st = hsr_error(HSR_ERR_INVALID, "sim device: %s of %p, which is not the start of such an allocation", what, ptr);
  } else {
    if (kind != BLK_ADOPTED) st = drain_all_locked(sd, what);
    for (int k = 0; st == HSR_OK && sd->check && k < sd->b[i].nr; k++) { /* adopted: nothing synchronizes */
      rec *r = &sd->b[i].r[k];
      if (r->stream != HOST_ID && sd->host[r->stream] < r->pos) {
        rec freer = {.lo = sd->b[i].lo, .hi = sd->b[i].hi, .stream = HOST_ID, .write = 1};
        snprintf(freer.name, sizeof freer.name, "%s", what);
        st = report(sd, &sd->b[i], sd->b[i].lo, sd->b[i].hi, r, freer.name, HOST_ID, 0, 1);
      }
    }
    if (kind == BLK_ARENA && st == HSR_OK) free(ptr);
    if (st == HSR_OK) blk_remove(sd, i);
  }
  pthread_mutex_unlock(&sd->mu);
  return st;
}

static hsr_status ks_free(hsr_device *d, void *ptr) { return untrack(d, ptr, BLK_ARENA, "hsr_device_free"); }

static hsr_status ks_host_alloc(hsr_device *d, size_t bytes, void **ptr) {
  HSR_CHECK(kern_host.host_alloc(d, bytes, ptr));
  sim_dev *sd = sd_of(d);
  pthread_mutex_lock(&sd->mu);
  hsr_status st = blk_add(sd, *ptr, bytes, BLK_PINNED, "pinned host staging");
  pthread_mutex_unlock(&sd->mu);
  return st;
}

static hsr_status ks_host_free(hsr_device *d, void *ptr) {
  HSR_CHECK(untrack(d, ptr, BLK_PINNED, "device_host_free"));
  return kern_host.host_free(d, ptr);
}

/* ---- copies and memsets ---- */

typedef struct copy_args {
  void *dst;
  const void *src;
  size_t bytes;
  int value;
} copy_args;

static hsr_status run_copy(void *p) {
  copy_args *a = p;
  memcpy(a->dst, a->src, a->bytes);
  return HSR_OK;
}

static hsr_status run_memset(void *p) {
  copy_args *a = p;
  memset(a->dst, a->value, a->bytes);
  return HSR_OK;
}

/* Pageable: host memory that is neither device memory nor pinned staging. */
static int pageable(sim_dev *sd, const void *p) {
  pthread_mutex_lock(&sd->mu);
  int i = blk_find(sd, (uintptr_t)p);
  pthread_mutex_unlock(&sd->mu);
  return i < 0;
}

static hsr_status ks_copy(hsr_stream *s, void *dst, const void *src, size_t bytes) {
  sim_dev *sd = ss_of(s)->sd;
  copy_args a = {dst, src, bytes, 0};
  void *heap = NULL;
  if (pageable(sd, src)) { /* read at the call: the caller may reuse the source on return */
    if (!(heap = malloc(bytes))) return hsr_error(HSR_ERR_NOMEM, "sim device: staging %zu bytes", bytes);
    memcpy(heap, src, bytes);
    a.src = heap;
  }
  hsr_access acc[2] = {{src, bytes, 0}, {dst, bytes, 1}};
  uint32_t pos = 0;
  HSR_CHECK(enqueue(s, "copy", 0, run_copy, NULL, &a, sizeof a, NULL, heap, acc, 2, &pos));
  if (!pageable(sd, dst)) return HSR_OK;
  /* a pageable destination: the call returns once the copy landed */
  sstream *ss = ss_of(s);
  pthread_mutex_lock(&sd->mu);
  vclock v;
  memcpy(v, ss->vc, sizeof v);
  hsr_status st = wait_pos_locked(sd, ss, pos, v, sd->bound_s, "copy to pageable host memory");
  pthread_mutex_unlock(&sd->mu);
  return st;
}

static hsr_status ks_memset(hsr_stream *s, void *dst, int value, size_t bytes) {
  copy_args a = {dst, NULL, bytes, value};
  hsr_access acc = {dst, bytes, 1};
  return enqueue(s, "memset", 1, run_memset, NULL, &a, sizeof a, NULL, NULL, &acc, 1, NULL);
}

/* ---- streams and events ---- */

static hsr_status ks_stream_init(hsr_stream *s, int priority, int create) {
  (void)priority, (void)create; /* the default stream is a worker too */
  sim_dev *sd = s->dev->sim;
  sstream *ss = calloc(1, sizeof *ss);
  if (!ss) return hsr_error(HSR_ERR_NOMEM, "sim device: stream");
  ss->sd = sd;
  pthread_mutex_lock(&sd->mu);
  int id = -1;
  for (int i = 0; i < SIM_MAX_STREAMS && id < 0; i++)
    if (!sd->streams[(sd->next_id + i) % SIM_MAX_STREAMS]) id = (sd->next_id + i) % SIM_MAX_STREAMS;
  if (id >= 0) {
    sd->streams[id] = ss;
    sd->next_id = id + 1;
  }
  pthread_mutex_unlock(&sd->mu);
  if (id < 0) {
    free(ss);
    return hsr_error(HSR_ERR_NOMEM, "sim device: %d streams at once (the most it has)", SIM_MAX_STREAMS);
  }
  ss->id = id;
  snprintf(ss->name, sizeof ss->name, "stream %d", id);
  /* a slot reused: its clock continues, so records of the old stream stay ordered */
  ss->queued = ss->done = sd->host[id];
  memcpy(ss->vc, sd->host, sizeof ss->vc);
  ss->rng = (sd->seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(id + 1))) | 1;
  int e = pthread_create(&ss->th, NULL, worker, ss);
  if (e) {
    pthread_mutex_lock(&sd->mu);
    sd->streams[id] = NULL;
    pthread_mutex_unlock(&sd->mu);
    free(ss);
    return hsr_error(HSR_ERR_SYSTEM, "sim device: stream thread: %s", strerror(e));
  }
  ss->started = 1;
  s->native = ss;
  s->owned = 1;
  return HSR_OK;
}

static hsr_status ks_stream_fini(hsr_stream *s) {
  sstream *ss = ss_of(s);
  if (!ss) return HSR_OK;
  sim_dev *sd = ss->sd;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = wait_pos_locked(sd, ss, ss->queued, ss->vc, sd->bound_s, "destroying a stream");
  if (st != HSR_OK && sd->failed) st = HSR_OK; /* a failed device still lets go of its streams */
  if (st == HSR_OK) {
    ss->stop = 1;
    pthread_cond_broadcast(&sd->cv);
  }
  pthread_mutex_unlock(&sd->mu);
  if (st != HSR_OK) return st; /* still running work: leaked rather than freed under it */
  pthread_join(ss->th, NULL);
  pthread_mutex_lock(&sd->mu);
  for (int i = 0; i < SIM_MAX_STREAMS; i++) /* waits for it are met: it drained */
    for (task *t = sd->streams[i] ? sd->streams[i]->head : NULL; t; t = t->next)
      if (t->wait_on == ss) t->wait_on = NULL;
  vc_join(sd->host, ss->vc); /* its clock survives in the host's: a reused slot continues from it */
  sd->host[ss->id] = ss->queued;
  sd->streams[ss->id] = NULL;
  pthread_mutex_unlock(&sd->mu);
  free(ss);
  s->native = NULL;
  return HSR_OK;
}

static hsr_status ks_stream_query(hsr_stream *s, int *done) {
  sstream *ss = ss_of(s);
  sim_dev *sd = ss->sd;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  *done = ss->done == ss->queued;
  if (*done && st == HSR_OK) vc_join(sd->host, ss->vc);
  pthread_mutex_unlock(&sd->mu);
  return st;
}

hsr_status sim_stream_sync(hsr_stream *s, double timeout_s) {
  sstream *ss = ss_of(s);
  sim_dev *sd = ss->sd;
  pthread_mutex_lock(&sd->mu);
  vclock v;
  memcpy(v, ss->vc, sizeof v);
  hsr_status st = wait_pos_locked(sd, ss, ss->queued, v, timeout_s, "stream sync");
  pthread_mutex_unlock(&sd->mu);
  return st;
}

static hsr_status ks_event_init(dev_event *e) {
  sevent *se = calloc(1, sizeof *se);
  if (!se) return hsr_error(HSR_ERR_NOMEM, "sim device: event");
  e->native = se;
  return HSR_OK;
}

static hsr_status ks_event_fini(dev_event *e) {
  free(e->native);
  e->native = NULL;
  return HSR_OK;
}

static hsr_status ks_event_record(dev_event *e, hsr_stream *s) {
  sevent *se = e->native;
  sstream *ss = ss_of(s);
  sim_dev *sd = ss->sd;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  if (st == HSR_OK) { /* the stream's position now: everything queued before the record */
    se->s = ss;
    se->sd = sd;
    se->id = ss->id;
    se->pos = ss->queued;
    memcpy(se->vc, ss->vc, sizeof se->vc);
    vc_join(se->vc, sd->host);
    se->recorded = 1;
  }
  pthread_mutex_unlock(&sd->mu);
  return st;
}

static hsr_status run_nothing(void *p) {
  (void)p;
  return HSR_OK;
}

static hsr_status ks_stream_wait_event(hsr_stream *s, dev_event *e) {
  sevent *se = e->native;
  sstream *ss = ss_of(s);
  sim_dev *sd = ss->sd;
  if (!se->recorded) return HSR_OK; /* CUDA: a never-recorded event is complete */
  task *t = calloc(1, sizeof *t);
  if (!t) return hsr_error(HSR_ERR_NOMEM, "sim device: task");
  snprintf(t->name, sizeof t->name, "wait for an event");
  t->run = run_nothing;
  t->arg = t->buf;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  if (st == HSR_OK && sd->streams[se->id] != se->s) { /* its stream is gone: it drained before it went */
    t->wait_on = NULL;
  } else {
    t->wait_on = se->s;
    t->wait_pos = se->pos;
  }
  if (st == HSR_OK) {
    vc_join(ss->vc, se->vc);
    push_locked(ss, t);
  }
  pthread_mutex_unlock(&sd->mu);
  if (st != HSR_OK) free(t);
  return st;
}

static hsr_status ks_event_query(dev_event *e, int *done) {
  sevent *se = e->native;
  *done = 1;
  if (!se->recorded) return HSR_OK;
  sim_dev *sd = se->sd;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  if (st == HSR_OK && sd->streams[se->id] == se->s) *done = se->s->done >= se->pos;
  if (st == HSR_OK && *done) vc_join(sd->host, se->vc);
  pthread_mutex_unlock(&sd->mu);
  return st;
}

/* ---- the hooks of sim.h ---- */

hsr_status kern_label(hsr_device *d, const void *ptr, size_t bytes, const char *label) {
  (void)bytes;
  if (!d || !d->sim || !ptr || !label) return HSR_OK;
  sim_dev *sd = d->sim;
  pthread_mutex_lock(&sd->mu);
  int i = blk_find(sd, (uintptr_t)ptr);
  if (i >= 0) snprintf(sd->b[i].label, sizeof sd->b[i].label, "%s", label);
  pthread_mutex_unlock(&sd->mu);
  return HSR_OK;
}

hsr_status kern_adopt(hsr_device *d, void *ptr, size_t bytes, const char *label) {
  if (!d || !d->sim || !ptr) return HSR_OK;
  sim_dev *sd = d->sim;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = blk_find(sd, (uintptr_t)ptr) >= 0
                      ? hsr_error(HSR_ERR_INVALID, "sim device: %p is already device memory", ptr)
                      : blk_add(sd, ptr, bytes, BLK_ADOPTED, label ? label : "");
  pthread_mutex_unlock(&sd->mu);
  return st;
}

hsr_status kern_unadopt(hsr_device *d, void *ptr) {
  if (!d || !d->sim || !ptr) return HSR_OK;
  return untrack(d, ptr, BLK_ADOPTED, "release of adopted memory");
}

hsr_status kern_stream_label(hsr_stream *s, const char *name) {
  if (!s || !kern_stream_is_sim(s) || !name) return HSR_OK;
  sstream *ss = ss_of(s);
  pthread_mutex_lock(&ss->sd->mu);
  snprintf(ss->name, sizeof ss->name, "%s", name);
  pthread_mutex_unlock(&ss->sd->mu);
  return HSR_OK;
}

int kern_stream_is_sim(const hsr_stream *s) { return s && s->dev && s->dev->kind == HSR_DEVICE_SIM && s->native; }

hsr_status kern_stream_task(hsr_stream *s, const char *name, hsr_status (*run)(void *arg),
                            void (*skip)(void *arg, const char *why), void *arg, const hsr_access *acc, int nacc) {
  if (!kern_stream_is_sim(s))
    return hsr_error(HSR_ERR_INVALID, "a host task in stream order needs a stream of a sim device");
  return enqueue(s, name, 0, run, skip, NULL, 0, arg, NULL, acc, nacc, NULL);
}

static hsr_status run_stamp(void *p) {
  atomic_store_explicit((_Atomic uint64_t *)p, hsr_clock_ns(), memory_order_release);
  return HSR_OK;
}

int kern_can_stamp(const hsr_device *d) { return d && d->kind == HSR_DEVICE_SIM; }

hsr_status kern_stream_stamp(hsr_stream *s, _Atomic uint64_t *slot) {
  if (!kern_stream_is_sim(s)) return hsr_error(HSR_ERR_UNSUPPORTED, "device clock stamps: a sim device's stream only");
  return enqueue(s, "clock stamp", 0, run_stamp, NULL, NULL, 0, (void *)slot, NULL, NULL, 0, NULL);
}

hsr_status kern_host_access(hsr_device *d, const char *name, const hsr_access *acc, int nacc) {
  if (!d || !d->sim || !acc) return HSR_OK;
  sim_dev *sd = d->sim;
  pthread_mutex_lock(&sd->mu);
  hsr_status st = sd->failed ? failed_locked(sd) : HSR_OK;
  if (st == HSR_OK) { /* the host's slot counts its accesses: later queued work joins it (push_locked) */
    uint32_t pos = ++sd->host[HOST_ID];
    st = check_accesses(sd, name ? name : "host access", 0, HOST_ID, pos, sd->host, acc, nacc);
  }
  pthread_mutex_unlock(&sd->mu);
  return st;
}

long kern_sim_reports(const hsr_device *d) {
  if (!d || !d->sim) return 0;
  pthread_mutex_lock(&d->sim->mu);
  long n = d->sim->reports;
  pthread_mutex_unlock(&d->sim->mu);
  return n;
}

/* ---- a program's own kernel ---- */

typedef struct launch_args {
  void (*host)(const void *args);
  _Alignas(16) unsigned char args[HSR_KERNEL_ARGS_MAX];
} launch_args;

static hsr_status run_launch(void *p) {
  launch_args *a = p;
  a->host(a->args);
  return HSR_OK;
}

static hsr_status ks_launch(hsr_stream *s, const hsr_kernel_def *k, const void *args, size_t args_bytes,
                            const hsr_access *acc, int nacc) {
  launch_args a = {.host = k->host};
  memcpy(a.args, args, args_bytes);
  return enqueue(s, k->name, 1, run_launch, NULL, &a, sizeof a, NULL, NULL, acc, nacc, NULL);
}

const kern_kind kern_sim = {
    .name = "sim",
    .open = ks_open,
    .close = ks_close,
    .alloc = ks_alloc,
    .free = ks_free,
    .host_alloc = ks_host_alloc,
    .host_free = ks_host_free,
    .copy = ks_copy,
    .memset = ks_memset,
    .stream_init = ks_stream_init,
    .stream_fini = ks_stream_fini,
    .stream_query = ks_stream_query,
    .stream_sync = sim_stream_sync,
    .event_init = ks_event_init,
    .event_fini = ks_event_fini,
    .event_record = ks_event_record,
    .stream_wait_event = ks_stream_wait_event,
    .event_query = ks_event_query,
    .launch = ks_launch,
    SIM_KERNELS,
};
