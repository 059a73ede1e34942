/* The background saver (hsr_ckpt_save_opts.async), DCP's async_save: the
 * training thread copies this rank's share into host staging memory and
 * returns; a writer thread writes the data file, fsyncs it, and agrees with
 * the other ranks' writers; rank 0's writer commits the manifest and
 * `latest`.
 *
 * Why it cannot deadlock against the training's collectives: the writers
 * agree over a communicator of their own ("ckpt": a split of the engine's
 * host world, or a host world of its own when the engine's is NCCL), made
 * once, on the training thread, at the first async save, where every rank
 * is (a save is collective). Only writer threads post on it, each save's
 * agreements in the same order on every rank, and at most one save is in
 * flight, so its operations match across ranks by that communicator's own
 * sequence and never by the training's. Operations on different
 * communicators progress independently (the progress thread moves them,
 * and a writer's own wait drives them under HSR_PROGRESS=inline), so a
 * writer needs nothing from any training thread, and a training thread
 * waits for its writer only at the next save, load, hsr_ckpt_wait or
 * teardown, where the other ranks' writers need nothing from it either.
 * Every agreement is bounded by HSR_COMM_TIMEOUT; a dead peer is a verdict
 * of the shared context, so the training's own collectives name it too. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "common/env.h"
#include "runtime/engine/state.h"
#include "common/common_internal.h"
#include "collectives/comm_internal.h"
#include "runtime/ckpt/ckpt_internal.h"

typedef struct saver {
  hsr_rt *rt;
  hsr_comm *comm; /* the writers' own */
  int own_world;  /* comm is a host world of its own (the engine's world is NCCL) */
  ckpt_link link;
  char *stage; /* this rank's share, staged; kept for the next save */
  size_t stage_cap;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
  int running;  /* a writer thread to join */
  int finished; /* under mu: its work is done */
  int stuck;    /* a wait gave up on it: it may still be running */
  ckpt_job *job;
  hsr_status plan_st; /* the plan's result, voted by the writer */
  hsr_status result;
  int shared; /* the writer's error is one every rank holds (error_share) */
  char msg[2 * CKPT_MSG];
  uint64_t progress; /* atomic: bumped by the writer as it moves */
  double blocked_s, stage_s, done_at;
} saver;

static void fini(void *obj);

static saver *saver_of(hsr_rt *rt) { return rt_state_attached(rt); }

static hsr_status saver_get(hsr_rt *rt, saver **out) {
  if ((*out = saver_of(rt))) return HSR_OK;
  saver *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  s->rt = rt;
  if (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL)) {
    free(s);
    return hsr_error(HSR_ERR_SYSTEM, "checkpoint: cannot make the saver's lock");
  }
  rt_state_attach(rt, s, fini);
  *out = s;
  return HSR_OK;
}

/* Collective: every rank makes its first async save at the same point. */
static hsr_status saver_link(saver *s) {
  if (s->comm) return HSR_OK;
  rt_state_info in;
  rt_state_info_of(s->rt, &in);
  if (in.world && comm_backend(in.world) == HSR_BACKEND_HOST) {
    HSR_CHECK(comm_split(in.world, 0, in.rank, &s->comm));
  } else {
    HSR_CHECK(hsr_comm_world(in.boot, HSR_BACKEND_HOST, &s->comm));
    s->own_world = 1;
  }
  HSR_CHECK(comm_set_name(s->comm, "ckpt"));
  s->link = (ckpt_link){s->comm, in.boot, in.rank, in.world_size};
  return HSR_OK;
}

static void *writer_main(void *arg) {
  saver *s = arg;
  /* the training thread first: a core it wakes up for is given to it */
  (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  hsr_status st = ckpt_job_run(s->job, s->plan_st, &s->link, &s->progress);
  pthread_mutex_lock(&s->mu);
  s->result = st;
  if (st != HSR_OK) snprintf(s->msg, sizeof s->msg, "%s", hsr_last_error()); /* thread-local: handed over */
  s->shared = st != HSR_OK && error_shared();
  s->done_at = clock_s();
  s->finished = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* HSR_COMM_TIMEOUT (or the engine's timeout) and 10 s: the writer's own
 * agreements time out first and name the rank they waited for. */
static double bound_of(hsr_rt *rt, double timeout_s) {
  if (timeout_s >= 0) return timeout_s;
  rt_state_info in;
  rt_state_info_of(rt, &in);
  double t = in.cfg->timeout_s;
  if (t <= 0 && env_get_double("HSR_COMM_TIMEOUT", &t) != HSR_OK) t = 300;
  return t + 10;
}

/* Waits for the writer (bounded by its progress), joins it and hands over
 * its result; *job_out (may be NULL) takes the finished job. */
static hsr_status collect(saver *s, double timeout_s, hsr_ckpt_stats *stats) {
  if (stats) {
    memset(stats, 0, sizeof *stats);
    stats->step = -1, stats->waited_step = -1;
  }
  if (!s || !s->running) return HSR_OK;
  if (s->stuck)
    return hsr_error(HSR_ERR_TIMEOUT, "checkpoint: the background save of step %lld is still stuck (%s)",
                     (long long)ckpt_job_step(s->job), ckpt_job_dir(s->job));
  double bound = bound_of(s->rt, timeout_s), last_t = clock_s();
  uint64_t last = __atomic_load_n(&s->progress, __ATOMIC_RELAXED);
  pthread_mutex_lock(&s->mu);
  while (!s->finished) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    uint64_t p = __atomic_load_n(&s->progress, __ATOMIC_RELAXED);
    double now = clock_s();
    if (p != last) {
      last = p, last_t = now;
    } else if (!s->finished && now - last_t > bound) {
      pthread_mutex_unlock(&s->mu);
      s->stuck = 1;
      return hsr_error(HSR_ERR_TIMEOUT,
                       "checkpoint: the background save of step %lld made no progress for %.0f s on this rank "
                       "(writing %s); given up",
                       (long long)ckpt_job_step(s->job), now - last_t, ckpt_job_dir(s->job));
    }
  }
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL);
  s->running = 0;
  if (stats) {
    ckpt_job_stats(s->job, stats);
    stats->async = 1;
    stats->seconds = s->blocked_s;
    stats->stage_seconds = s->stage_s;
    stats->staging_bytes = s->stage_cap;
  }
  hsr_status st = s->result;
  int64_t step = ckpt_job_step(s->job);
  ckpt_job_free(s->job);
  s->job = NULL;
  if (st != HSR_OK) {
    hsr_error(st, "the background save of step %lld failed: %s", (long long)step, s->msg);
    if (s->shared) error_share(); /* agreed by the writers: still said once for the job */
    return st;
  }
  return HSR_OK;
}

hsr_status ckpt_async_settle(hsr_rt *rt, double *waited, int64_t *step) {
  saver *s = saver_of(rt);
  *waited = 0, *step = -1;
  if (!s || !s->running) return HSR_OK;
  double t0 = clock_s();
  *step = ckpt_job_step(s->job);
  hsr_status st = collect(s, -1, NULL);
  *waited = clock_s() - t0;
  return st;
}

hsr_status ckpt_async_save(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *o, hsr_ckpt_stats *stats) {
  double t0 = clock_s(), waited = 0;
  int64_t wstep = -1;
  saver *s;
  HSR_CHECK(saver_get(rt, &s));
  HSR_CHECK(ckpt_async_settle(rt, &waited, &wstep)); /* at most one in flight: the next one waits */
  rt_state_phase(rt);
  ckpt_job *x;
  hsr_status st = ckpt_job_begin(rt, root, o, &x);
  if (st == HSR_OK) st = saver_link(s); /* collective, once */
  if (st != HSR_OK) {                   /* the same on every rank: nothing started */
    ckpt_job_free(x);
    return st;
  }
  double ts = clock_s();
  st = ckpt_job_plan(x, o);
  size_t need = (size_t)ckpt_job_bytes(x);
  if (st == HSR_OK && need > s->stage_cap) {
    ckpt_stage_free(rt, s->stage, s->stage_cap);
    s->stage = NULL, s->stage_cap = 0;
    st = ckpt_stage_alloc(rt, need, (void **)&s->stage);
    if (st == HSR_OK) s->stage_cap = need;
  }
  if (st == HSR_OK) st = ckpt_job_stage(x, s->stage);
  s->stage_s = clock_s() - ts;
  /* from here the writer votes this rank's result, so every rank returns it */
  s->job = x, s->plan_st = st, s->result = HSR_OK, s->finished = 0, s->shared = 0, s->msg[0] = 0;
  int e = pthread_create(&s->th, NULL, writer_main, s);
  if (e) {
    s->job = NULL;
    ckpt_job_free(x);
    return hsr_error(HSR_ERR_SYSTEM, "checkpoint: cannot start the background writer: %s", strerror(e));
  }
  s->running = 1;
  s->blocked_s = clock_s() - t0;
  if (stats) {
    memset(stats, 0, sizeof *stats);
    snprintf(stats->dir, sizeof stats->dir, "%.1000s", ckpt_job_dir(x));
    stats->step = ckpt_job_step(x);
    stats->bytes_rank = need;
    stats->seconds = s->blocked_s;
    stats->stage_seconds = s->stage_s;
    stats->staging_bytes = s->stage_cap;
    stats->async = 1;
    stats->waited_seconds = waited;
    stats->waited_step = wstep;
  }
  return HSR_OK;
}

hsr_status hsr_ckpt_wait(hsr_rt *rt, double timeout_s, hsr_ckpt_stats *stats) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "hsr_ckpt_wait: NULL runtime");
  hsr_ckpt_stats own, *w = stats ? stats : &own;
  hsr_status st = collect(saver_of(rt), timeout_s, w);
  if (st == HSR_OK && w->step >= 0) rt_state_fault(rt, "ckpt_done"); /* HSR_FAULT: a background save committed */
  return st;
}

hsr_status ckpt_poll(hsr_rt *rt, int *pending) {
  if (!rt || !pending) return hsr_error(HSR_ERR_INVALID, "ckpt_poll: NULL argument");
  saver *s = saver_of(rt);
  *pending = 0;
  if (!s || !s->running) return HSR_OK;
  pthread_mutex_lock(&s->mu);
  *pending = !s->finished;
  pthread_mutex_unlock(&s->mu);
  return HSR_OK;
}

/* hsr_rt_destroy: the save in flight finishes (bounded) before the
 * communicator's parent and the ledger go. */
static void fini(void *obj) {
  saver *s = obj;
  if (s->running) {
    int64_t step = ckpt_job_step(s->job);
    if (collect(s, -1, NULL) != HSR_OK)
      HSR_LOG_W("checkpoint: at teardown, the background save of step %lld: %s", (long long)step, hsr_last_error());
  }
  if (s->stuck) { /* its thread may still use them: left to the process's exit */
    HSR_LOG_E("checkpoint: a background writer is stuck; its communicator and staging are left");
    return;
  }
  ckpt_stage_free(s->rt, s->stage, s->stage_cap);
  hsr_comm_free(s->comm);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
