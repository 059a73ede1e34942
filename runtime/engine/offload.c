/* Offload optim (hsr_rt_config.offload on a device run): the f32 master,
 * m, v and the gradient accumulator live in pinned host memory (the
 * schedule's HSR_MEM_HOST_* buffers), AdamW runs on the host's cores.
 *
 *   down  RETIRE: the reduced piece (the reduce-scatter's slice, or the
 *         replicate stage's piece) is copied into the unit's GRAD_DOWN on
 *         the reduce stream, right behind its reduction, and an event is
 *         recorded; the host accumulates it into the accumulator later
 *         (the unit's next RETIRE or DEFERRED_AR, NORM, GRAD_ZERO), after a
 *         bounded wait on that event, so each copy overlaps the backward of
 *         the others.
 *   up    OPTIM: AdamW on the host writes the new parameters in the param
 *         dtype into the unit's PARAM_UP; one copy on the gather stream
 *         takes them to the device's PARAM, ahead of any gather of the
 *         unit on that stream, while the host updates the next unit.
 *
 * AdamW is element-wise, so the pool of threads (HSR_OFFLOAD_THREADS, the
 * caller included) splits each update into contiguous chunks with the same
 * per-element arithmetic as one thread: bitwise the same result. The norm's
 * sum of squares runs on one thread (its order depends on size only). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "common/env.h"
#include "kernels/sim.h"
#include "common/dtype_internal.h"

#define OFF_MAX_THREADS 64
#define OFF_CHUNK_ALIGN 64 /* elements: chunks start on whole cache lines */

typedef struct off_job {
  size_t n;
  float *master, *m, *v;
  const float *g;
  void *out;
  hsr_dtype pdt;
  adamw_hparams hp;
} off_job;

typedef struct off_worker {
  struct rt_off *o;
  int index;
  pthread_t th;
  int started;
  hsr_device *host;
} off_worker;

struct rt_off {
  hsr_device *host; /* the caller's CPU twins */
  dev_event **down; /* per unit: its GRAD_DOWN copy landed */
  int *pending;     /* per unit: 0 nothing; GRAD_DOWN waits to be added to (1) or to replace (2) the accumulator */
  size_t *count;    /* per unit: the elements GRAD_DOWN holds */
  int nunits;
  double timeout;
  int threads; /* the caller and threads - 1 workers */
  off_worker *w;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t gen; /* a new job */
  int left, stop;
  hsr_status err;
  off_job job;
};

static size_t chunk_lo(size_t n, int parts, int i) {
  size_t per = (n + (size_t)parts - 1) / (size_t)parts;
  per = (per + OFF_CHUNK_ALIGN - 1) / OFF_CHUNK_ALIGN * OFF_CHUNK_ALIGN;
  size_t lo = per * (size_t)i;
  return lo < n ? lo : n;
}

/* Part i of the job: elements [lo, hi) through the CPU twin. */
static hsr_status run_part(const off_job *j, hsr_device *d, int parts, int i) {
  size_t lo = chunk_lo(j->n, parts, i), hi = chunk_lo(j->n, parts, i + 1);
  if (hi <= lo) return HSR_OK;
  void *out = j->out ? (char *)j->out + lo * dtype_size(j->pdt) : NULL;
  return kernels_adamw(d, NULL, hi - lo, j->master + lo, j->m + lo, j->v + lo, j->g + lo, HSR_F32, out, j->pdt, &j->hp);
}

static void *worker(void *arg) {
  off_worker *w = arg;
  struct rt_off *o = w->o;
  uint64_t seen = 0;
  pthread_mutex_lock(&o->mu);
  for (;;) {
    while (o->gen == seen && !o->stop) pthread_cond_wait(&o->cv, &o->mu);
    if (o->stop) break;
    seen = o->gen;
    off_job j = o->job;
    pthread_mutex_unlock(&o->mu);
    hsr_status st = run_part(&j, w->host, o->threads, w->index);
    pthread_mutex_lock(&o->mu);
    if (st != HSR_OK && o->err == HSR_OK) o->err = st;
    if (--o->left == 0) pthread_cond_broadcast(&o->cv);
  }
  pthread_mutex_unlock(&o->mu);
  return NULL;
}

/* One AdamW update over the pool; the wait for the workers is bounded. */
static hsr_status adamw(struct rt_off *o, const off_job *j) {
  if (o->threads == 1 || j->n < (size_t)o->threads * OFF_CHUNK_ALIGN * 4) return run_part(j, o->host, 1, 0);
  pthread_mutex_lock(&o->mu);
  o->job = *j;
  o->left = o->threads - 1;
  o->err = HSR_OK;
  o->gen++;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
  hsr_status st = run_part(j, o->host, o->threads, 0);
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += (time_t)o->timeout + 1;
  pthread_mutex_lock(&o->mu);
  while (o->left > 0)
    if (pthread_cond_timedwait(&o->cv, &o->mu, &dl) == ETIMEDOUT && o->left > 0) {
      pthread_mutex_unlock(&o->mu);
      return hsr_error(HSR_ERR_TIMEOUT, "offload: %d optimizer thread(s) did not finish within %.0f s", o->left,
                       o->timeout);
    }
  if (st == HSR_OK) st = o->err;
  pthread_mutex_unlock(&o->mu);
  return st;
}

static hsr_status pool_start(struct rt_off *o) {
  long t = 0;
  HSR_CHECK(env_get_long("HSR_OFFLOAD_THREADS", &t));
  o->threads = t > OFF_MAX_THREADS ? OFF_MAX_THREADS : t < 1 ? 1 : (int)t;
  if (o->threads == 1) return HSR_OK;
  o->w = calloc((size_t)o->threads, sizeof *o->w);
  if (!o->w) return hsr_error(HSR_ERR_NOMEM, "offload: out of memory");
  for (int i = 1; i < o->threads; i++) {
    off_worker *w = &o->w[i];
    w->o = o;
    w->index = i;
    HSR_CHECK(hsr_device_open(HSR_DEVICE_HOST, 0, &w->host)); /* a device object is one thread's */
    int e = pthread_create(&w->th, NULL, worker, w);
    if (e) return hsr_error(HSR_ERR_SYSTEM, "offload: optimizer thread: %s", strerror(e));
    w->started = 1;
  }
  return HSR_OK;
}

hsr_status rt_off_open(hsr_rt *rt) {
  if (!hsr_sched_offload(rt->sched)) return HSR_OK;
  struct rt_off *o = calloc(1, sizeof *o);
  if (!o) return hsr_error(HSR_ERR_NOMEM, "offload: out of memory");
  rt->off = o;
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
  o->threads = 1; /* until the pool starts */
  o->timeout = rt_dev_timeout(rt->dv);
  o->nunits = rt->nunits;
  o->down = calloc((size_t)rt->nunits, sizeof *o->down);
  o->pending = calloc((size_t)rt->nunits, sizeof *o->pending);
  o->count = calloc((size_t)rt->nunits, sizeof *o->count);
  if (!o->down || !o->pending || !o->count) return hsr_error(HSR_ERR_NOMEM, "offload: out of memory");
  HSR_CHECK(hsr_device_open(HSR_DEVICE_HOST, 0, &o->host));
  for (int u = 0; u < rt->nunits; u++) HSR_CHECK(event_create(rt->dev, &o->down[u]));
  return pool_start(o);
}

void rt_off_close(hsr_rt *rt) {
  struct rt_off *o = rt->off;
  if (!o) return;
  if (o->threads > 1) {
    pthread_mutex_lock(&o->mu);
    o->stop = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
  }
  for (int i = 1; o->w && i < o->threads; i++) {
    if (o->w[i].started) pthread_join(o->w[i].th, NULL);
    if (o->w[i].host) hsr_device_close(o->w[i].host);
  }
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cv);
  for (int u = 0; o->down && u < o->nunits; u++)
    if (o->down[u]) event_destroy(o->down[u]);
  if (o->host) hsr_device_close(o->host);
  free(o->w);
  free(o->down);
  free(o->pending);
  free(o->count);
  free(o);
  rt->off = NULL;
}

hsr_device *rt_off_host(hsr_rt *rt) { return rt->off ? rt->off->host : NULL; }

/* The host's own reads and writes of host buffers, for the sim device's
 * stream-order check (a no-op elsewhere). */
static hsr_status host_touch(hsr_rt *rt, const char *name, const void *r, size_t rb, void *w, size_t wb) {
  hsr_access acc[2] = {{r, rb, 0}, {w, wb, 1}};
  return kern_host_access(rt->dev, name, acc, 2);
}

/* RETIRE: the reduced piece down into GRAD_DOWN, on the reduce stream behind
 * its reduction; what GRAD_DOWN held before is added first. */
hsr_status rt_off_down(hsr_rt *rt, sched_red *r) {
  struct rt_off *o = rt->off;
  int ui = r->unit;
  HSR_CHECK(rt_off_settle(rt, ui));
  /* the piece (outer: the replicate stage's), or the whole slice (rs_only's
   * micro-batches before the last sum slices) */
  size_t n = r->outer ? rt_piece_len(rt, ui) : rt->units[ui].Ls;
  const void *res = r->outer ? r->oslice : r->slice;
  RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, rt_buf(rt, ui, HSR_SCHED_BUF_GRAD_DOWN), res, n * rt->res, RS(rt)));
  HSR_CHECK(event_record(o->down[ui], RS(rt)));
  o->count[ui] = n;
  o->pending[ui] = r->deferred ? 2 : 1; /* a deferred stage's result replaces the sum it was made of */
  return HSR_OK;
}

hsr_status rt_off_deferred(hsr_rt *rt, sched_red *r) {
  int ui = r->unit;
  HSR_CHECK(rt_off_settle(rt, ui)); /* every earlier micro-batch's slice is in the accumulator */
  size_t n = rt->units[ui].Ls;
  const float *acc = rt_f32(rt, ui, HSR_SCHED_BUF_GRAD_SHARD);
  char *down = rt_buf(rt, ui, HSR_SCHED_BUF_GRAD_DOWN);
  HSR_CHECK(host_touch(rt, "offload: the accumulator for the deferred stage", acc, n * 4, down, n * rt->res));
  RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->off->host, NULL, n, acc, HSR_F32, down, rt->cfg.reduce_dtype));
  RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, r->slice, down, n * rt->res, RS(rt)));
  return HSR_OK;
}

/* acc += (f32) piece, element by element as the device's cast and axpy. */
static hsr_status accumulate(hsr_rt *rt, float *acc, const void *piece, size_t n) {
  hsr_device *h = rt->off->host;
  if (rt->cfg.reduce_dtype == HSR_F32) return hsr_kernels_axpy(h, NULL, n, 1.0, piece, acc, HSR_F32);
  float tmp[1024];
  for (size_t i = 0; i < n; i += 1024) {
    size_t k = n - i < 1024 ? n - i : 1024;
    HSR_CHECK(hsr_kernels_cast(h, NULL, k, (const char *)piece + i * rt->res, rt->cfg.reduce_dtype, tmp, HSR_F32));
    HSR_CHECK(hsr_kernels_axpy(h, NULL, k, 1.0, tmp, acc + i, HSR_F32));
  }
  return HSR_OK;
}

hsr_status rt_off_settle(hsr_rt *rt, int unit) {
  struct rt_off *o = rt->off;
  if (!o) return HSR_OK;
  for (int ui = unit < 0 ? 0 : unit; ui < (unit < 0 ? rt->nunits : unit + 1); ui++) {
    if (!o->pending[ui]) continue;
    uint64_t t = hsr_clock_ns();
    if (!rt_dev_dropped(rt->dv, RT_DROP_OFFLOAD_WAIT)) HSR_CHECK(event_sync(o->down[ui], o->timeout));
    rt_obs_wait(rt->obs, hsr_clock_ns() - t);
    size_t n = o->count[ui];
    float *acc = rt_f32(rt, ui, HSR_SCHED_BUF_GRAD_SHARD);
    const void *piece = rt_buf(rt, ui, HSR_SCHED_BUF_GRAD_DOWN);
    HSR_CHECK(host_touch(rt, "offload: accumulate", piece, n * rt->res, acc, n * 4));
    if (o->pending[ui] == 2) /* the deferred stage's result replaces the accumulator's first n */
      RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(o->host, NULL, n, piece, rt->cfg.reduce_dtype, acc, HSR_F32));
    else
      RT_TIMED(rt, RT_T_DATA, accumulate(rt, acc, piece, n));
    o->pending[ui] = 0;
  }
  return HSR_OK;
}

hsr_status rt_off_zero(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_off_settle(rt, ui));
  size_t bytes = sched_acc_len(rt->sched, ui) * 4;
  float *acc = rt_f32(rt, ui, HSR_SCHED_BUF_GRAD_SHARD);
  HSR_CHECK(host_touch(rt, "offload: zero the accumulator", NULL, 0, acc, bytes));
  memset(acc, 0, bytes);
  return HSR_OK;
}

/* Where the piece of unit ui sits in its PARAM buffer (elements). */
static size_t param_at(const hsr_rt *rt, int ui) {
  size_t lo = rt_piece_lo(rt, ui);
  return rt->sh.params ? lo - (size_t)rt->srank * rt->units[ui].Ls : lo;
}

/* PARAM_UP up into the device's PARAM, on the gather stream. */
static hsr_status up(hsr_rt *rt, int ui) {
  size_t n = rt_piece_len(rt, ui);
  char *param = rt_buf(rt, ui, HSR_SCHED_BUF_PARAM);
  RT_TIMED(rt, RT_T_DATA,
           hsr_device_copy(rt->dev, param + param_at(rt, ui) * rt->pes, rt_buf(rt, ui, HSR_SCHED_BUF_PARAM_UP),
                           n * rt->pes, GS(rt)));
  return HSR_OK;
}

hsr_status rt_off_optim(hsr_rt *rt, int ui, const adamw_hparams *hps) {
  size_t lo = rt_piece_lo(rt, ui), n = rt_piece_len(rt, ui);
  float *master = rt_master(rt, ui), *m = rt_f32(rt, ui, HSR_SCHED_BUF_MOMENT_M),
        *v = rt_f32(rt, ui, HSR_SCHED_BUF_MOMENT_V), *g = rt_f32(rt, ui, HSR_SCHED_BUF_GRAD_SHARD);
  char *pu = rt_buf(rt, ui, HSR_SCHED_BUF_PARAM_UP);
  /* the previous copy up read PARAM_UP: NORM drained the streams since */
  HSR_CHECK(host_touch(rt, "offload: AdamW (reads)", g, n * 4, NULL, 0));
  HSR_CHECK(host_touch(rt, "offload: AdamW", NULL, 0, master, n * 4));
  HSR_CHECK(host_touch(rt, "offload: AdamW", NULL, 0, m, n * 4));
  HSR_CHECK(host_touch(rt, "offload: AdamW", NULL, 0, v, n * 4));
  HSR_CHECK(host_touch(rt, "offload: AdamW", NULL, 0, pu, n * rt->pes));
  for (int j = rt->ubeg[ui]; j < rt->ubeg[ui + 1]; j++) {
    rt_param_info p;
    HSR_CHECK(rt_layout_param(rt->layout, rt->uparam[j], &p));
    size_t x, y;
    if (!rt_piece_range(rt, ui, p.offset, p.numel, &x, &y)) continue;
    size_t o = x - lo;
    off_job job = {y - x, master + o, m + o, v + o, g + o, pu + o * rt->pes, rt->cfg.param_dtype, hps[p.group]};
    HSR_CHECK(adamw(rt->off, &job));
  }
  return up(rt, ui);
}

/* After a load or a peer's copy wrote the master: the parameters from it,
 * cast on the host and copied up; completed before this returns. */
hsr_status rt_off_installed(hsr_rt *rt) {
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  for (int ui = 0; ui < rt->nunits; ui++) {
    size_t n = rt_piece_len(rt, ui);
    char *pu = rt_buf(rt, ui, HSR_SCHED_BUF_PARAM_UP);
    const float *master = rt_master(rt, ui);
    HSR_CHECK(host_touch(rt, "offload: parameters from the master", master, n * 4, pu, n * rt->pes));
    HSR_CHECK(hsr_kernels_cast(rt->off->host, NULL, n, master, HSR_F32, pu, rt->cfg.param_dtype));
    HSR_CHECK(up(rt, ui));
  }
  return rt_dev_sync(rt->dv, GS(rt));
}
