/* The engine's device path: device, streams, events, deferred requests and
 * the pool's release events (see device_path.h for the ordering rules). */
#include <stdlib.h>
#include <string.h>

#include "device_path.h"
#include "common/env.h"
#include "kernels/sim.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"
#include "kernels/kernels_internal.h"
#include "runtime/io/ledger_internal.h"

enum { S_COMPUTE = 0, S_GATHER, S_REDUCE, S_COUNT };

typedef struct blk_ev {
  dev_event *ev[S_COUNT];
  int recorded;
} blk_ev;

struct rt_dev {
  hsr_device *dev;
  int own_dev, async; /* async: streams and events order the work (CUDA, sim) */
  hsr_stream *s[S_COUNT];
  int own_cs;
  dev_event *join; /* reusable: a wait captures the event as recorded at the time */
  dev_event **uev; /* per unit: gather done */
  int nunits;
  blk_ev *bev; /* per pool block */
  int nbev;
  hsr_req **pend; /* requests the streams already order */
  int npend, cappend;
  double *d64; /* device word for the norm all-reduce */
  double *slots;
  int nslots;
  double timeout;
  rt_drop drop; /* HSR_SIM_DROP */
};

static hsr_status open_cuda(rt_dev *dv, const hsr_rt_config *cfg, hsr_boot *boot) {
  int count = device_cuda_count();
  if (count == 0) { /* fails with the reason: a host-only build, or no GPU / driver */
    hsr_status st = hsr_device_open(HSR_DEVICE_CUDA, 0, &dv->dev);
    dv->own_dev = st == HSR_OK;
    return st == HSR_OK ? hsr_error(HSR_ERR_INTERNAL, "runtime: no CUDA device counted, yet one opened") : st;
  }
  /* The NCCL world communicator binds local rank % GPUs; buffers must live there. */
  int bound = boot_local_rank(boot) % count;
  int ord = cfg->device_ordinal < 0 ? bound : cfg->device_ordinal;
  if (ord >= count)
    return hsr_error(HSR_ERR_NOT_FOUND, "runtime device cuda:%d: %d GPU(s) visible (valid: cuda:0 to cuda:%d)", ord,
                     count, count - 1);
  if (ord != bound)
    return hsr_error(HSR_ERR_INVALID,
                     "runtime device cuda:%d: this rank (local rank %d) is bound to GPU %d by NCCL; use 'cuda' "
                     "(automatic) or cuda:%d, or select GPUs with CUDA_VISIBLE_DEVICES",
                     ord, boot_local_rank(boot), bound, bound);
  HSR_CHECK(hsr_device_open(HSR_DEVICE_CUDA, ord, &dv->dev));
  dv->own_dev = 1;
  return HSR_OK;
}

hsr_status rt_dev_open(const hsr_rt_config *cfg, hsr_boot *boot, double timeout_s, rt_dev **out) {
  *out = NULL;
  if (cfg->stream && !cfg->dev)
    return hsr_error(HSR_ERR_INVALID, "runtime config: a compute stream was given without its device (cfg.dev)");
  if (cfg->device != HSR_DEVICE_HOST && cfg->device != HSR_DEVICE_CUDA && cfg->device != HSR_DEVICE_SIM)
    return hsr_error(HSR_ERR_INVALID, "runtime config: device kind %d (valid: host, cuda, sim)", (int)cfg->device);
  rt_dev *dv = calloc(1, sizeof *dv);
  if (!dv) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  hsr_status st = HSR_OK;
  if (timeout_s > 0)
    dv->timeout = timeout_s;
  else
    st = env_get_double("HSR_COMM_TIMEOUT", &dv->timeout);
  if (st != HSR_OK) goto fail;
  if (cfg->dev) {
    dv->dev = cfg->dev;
  } else if (cfg->device == HSR_DEVICE_CUDA) {
    if ((st = open_cuda(dv, cfg, boot)) != HSR_OK) goto fail;
  } else if (cfg->device == HSR_DEVICE_SIM) {
    if ((st = hsr_device_open(HSR_DEVICE_SIM, cfg->device_ordinal < 0 ? 0 : cfg->device_ordinal, &dv->dev)) != HSR_OK)
      goto fail;
    dv->own_dev = 1;
  } else {
    if ((st = hsr_device_open(HSR_DEVICE_HOST, 0, &dv->dev)) != HSR_OK) goto fail;
    dv->own_dev = 1;
  }
  dv->async = hsr_device_kind_of(dv->dev) != HSR_DEVICE_HOST;
  int drop = 0;
  if ((st = env_get_choice("HSR_SIM_DROP", &drop)) != HSR_OK) goto fail;
  dv->drop = (rt_drop)drop;
  if (drop && hsr_device_kind_of(dv->dev) != HSR_DEVICE_SIM) {
    st = hsr_error(HSR_ERR_INVALID, "HSR_SIM_DROP is a test hook of the sim device (--device sim); unset it");
    goto fail;
  }
  if (!dv->async) { /* host: NULL streams, synchronous device layer */
    *out = dv;
    return HSR_OK;
  }
  if (cfg->stream) {
    dv->s[S_COMPUTE] = cfg->stream;
  } else {
    if ((st = stream_create(dv->dev, 0, &dv->s[S_COMPUTE])) != HSR_OK) goto fail;
    dv->own_cs = 1;
  }
  if ((st = stream_create(dv->dev, 1, &dv->s[S_GATHER])) != HSR_OK) goto fail;
  if ((st = stream_create(dv->dev, 1, &dv->s[S_REDUCE])) != HSR_OK) goto fail;
  static const char *const names[S_COUNT] = {"compute", "gather", "reduce"};
  for (int i = 0; i < S_COUNT; i++)
    if ((st = kern_stream_label(dv->s[i], names[i])) != HSR_OK) goto fail;
  if ((st = event_create(dv->dev, &dv->join)) != HSR_OK) goto fail;
  if ((st = hsr_device_alloc(dv->dev, 64, (void **)&dv->d64)) != HSR_OK) goto fail;
  *out = dv;
  return HSR_OK;
fail:
  rt_dev_close(dv);
  return st;
}

static void keep(hsr_status *st, hsr_status s) {
  if (*st == HSR_OK && s != HSR_OK) *st = s;
}

hsr_status rt_dev_quiesce(rt_dev *dv) {
  if (!dv || !dv->async) return HSR_OK;
  hsr_status st = HSR_OK;
  for (int i = 0; i < S_COUNT; i++)
    if (dv->s[i]) keep(&st, hsr_stream_sync(dv->s[i], dv->timeout));
  for (int i = 0; i < dv->npend; i++) keep(&st, hsr_req_wait(dv->pend[i], dv->timeout));
  dv->npend = 0;
  return st;
}

hsr_status rt_dev_close(rt_dev *dv) {
  if (!dv) return HSR_OK;
  hsr_status st = rt_dev_quiesce(dv);
  for (int u = 0; u < dv->nunits; u++) keep(&st, event_destroy(dv->uev[u]));
  for (int b = 0; b < dv->nbev; b++)
    for (int i = 0; i < S_COUNT; i++) keep(&st, event_destroy(dv->bev[b].ev[i]));
  keep(&st, event_destroy(dv->join));
  if (dv->d64) keep(&st, hsr_device_free(dv->dev, dv->d64));
  keep(&st, stream_destroy(dv->s[S_REDUCE]));
  keep(&st, stream_destroy(dv->s[S_GATHER]));
  if (dv->own_cs) keep(&st, stream_destroy(dv->s[S_COMPUTE]));
  if (dv->own_dev) keep(&st, hsr_device_close(dv->dev));
  free(dv->uev);
  free(dv->bev);
  free(dv->pend);
  free(dv->slots);
  free(dv);
  return st;
}

int rt_dev_async(const rt_dev *dv) { return dv && dv->async; }
hsr_device *rt_dev_device(rt_dev *dv) { return dv ? dv->dev : NULL; }
/* NCCL for CUDA memory; the host collectives for host and sim memory (a sim
 * device runs them in its streams' order). */
hsr_backend rt_dev_backend(const rt_dev *dv) {
  return dv && hsr_device_kind_of(dv->dev) == HSR_DEVICE_CUDA ? HSR_BACKEND_NCCL : HSR_BACKEND_HOST;
}
hsr_stream *rt_dev_cs(rt_dev *dv) { return dv ? dv->s[S_COMPUTE] : NULL; }
hsr_stream *rt_dev_gs(rt_dev *dv) { return dv ? dv->s[S_GATHER] : NULL; }
hsr_stream *rt_dev_rs(rt_dev *dv) { return dv ? dv->s[S_REDUCE] : NULL; }

hsr_status rt_dev_join(rt_dev *dv, hsr_stream *waiter, hsr_stream *on) {
  if (!rt_dev_async(dv) || waiter == on) return HSR_OK;
  HSR_CHECK(event_record(dv->join, on));
  return stream_wait_event(waiter, dv->join);
}

hsr_status rt_dev_use(rt_dev *dv, hsr_comm *c, hsr_stream *s) {
  if (!rt_dev_async(dv) || !c) return HSR_OK;
  return hsr_comm_set_stream(c, s);
}

hsr_status rt_dev_units(rt_dev *dv, int nunits) {
  if (!rt_dev_async(dv)) return HSR_OK;
  dv->uev = calloc((size_t)(nunits ? nunits : 1), sizeof *dv->uev);
  if (!dv->uev) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  for (; dv->nunits < nunits; dv->nunits++) HSR_CHECK(event_create(dv->dev, &dv->uev[dv->nunits]));
  return HSR_OK;
}

hsr_status rt_dev_gather_issued(rt_dev *dv, int unit) {
  if (!rt_dev_async(dv)) return HSR_OK;
  return event_record(dv->uev[unit], dv->s[S_GATHER]);
}

int rt_dev_dropped(const rt_dev *dv, rt_drop what) { return dv && dv->drop == what; }

hsr_status rt_dev_gather_consume(rt_dev *dv, int unit) {
  if (!rt_dev_async(dv) || dv->drop == RT_DROP_GATHER_WAIT) return HSR_OK;
  return stream_wait_event(dv->s[S_COMPUTE], dv->uev[unit]);
}

hsr_status rt_dev_reap(rt_dev *dv) {
  if (!rt_dev_async(dv)) return HSR_OK;
  hsr_status st = HSR_OK;
  int k = 0;
  for (int i = 0; i < dv->npend; i++) {
    int done = 0;
    hsr_status t = req_test(dv->pend[i], &done);
    if (t != HSR_OK || done)
      keep(&st, req_free(dv->pend[i])); /* free returns the op's error, if any */
    else
      dv->pend[k++] = dv->pend[i];
    keep(&st, t);
  }
  dv->npend = k;
  return st;
}

hsr_status rt_dev_defer(rt_dev *dv, hsr_req *r) {
  if (!r) return HSR_OK;
  if (dv->npend == dv->cappend) {
    int cap = dv->cappend ? 2 * dv->cappend : 32;
    hsr_req **np = realloc(dv->pend, (size_t)cap * sizeof *np);
    if (!np) {
      hsr_req_wait(r, dv->timeout);
      return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    }
    dv->pend = np;
    dv->cappend = cap;
  }
  dv->pend[dv->npend++] = r;
  return rt_dev_reap(dv);
}

hsr_status rt_dev_block_release(rt_dev *dv, int block) {
  if (!rt_dev_async(dv)) return HSR_OK;
  if (block >= dv->nbev) {
    int n = block + 32;
    blk_ev *nb = realloc(dv->bev, (size_t)n * sizeof *nb);
    if (!nb) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    memset(nb + dv->nbev, 0, (size_t)(n - dv->nbev) * sizeof *nb);
    dv->bev = nb;
    dv->nbev = n;
  }
  blk_ev *b = &dv->bev[block];
  for (int i = 0; i < S_COUNT; i++) {
    if (!b->ev[i]) HSR_CHECK(event_create(dv->dev, &b->ev[i]));
    HSR_CHECK(event_record(b->ev[i], dv->s[i]));
  }
  b->recorded = 1;
  return HSR_OK;
}

/* The stream that touches a recycled buffer of this category first. */
static int first_user(rt_mem_cat cat) {
  switch (cat) {
  case HSR_MEM_FULL_UNIT: return S_GATHER;
  case HSR_MEM_AR_BUF:
  case HSR_MEM_STAGING: return S_REDUCE;
  default: return S_COMPUTE; /* gradient buffers, partial slices; persistent state is never recycled */
  }
}

hsr_status rt_dev_block_reuse(rt_dev *dv, int block, rt_mem_cat cat) {
  if (!rt_dev_async(dv) || block >= dv->nbev || !dv->bev[block].recorded || dv->drop == RT_DROP_POOL_REUSE)
    return HSR_OK;
  hsr_stream *user = dv->s[first_user(cat)];
  for (int i = 0; i < S_COUNT; i++)
    if (dv->s[i] != user) HSR_CHECK(stream_wait_event(user, dv->bev[block].ev[i]));
  return HSR_OK;
}

static hsr_status stamp_lane(void *ctx, int lane, _Atomic uint64_t *slot) {
  rt_dev *dv = ctx;
  return kern_stream_stamp(dv->s[lane], slot);
}

void rt_dev_clock(rt_dev *dv, rt_obs *obs) {
  if (rt_dev_async(dv) && kern_can_stamp(dv->dev)) rt_obs_set_stamper(obs, stamp_lane, dv);
}

double rt_dev_timeout(const rt_dev *dv) { return dv->timeout; }

hsr_status rt_dev_sync(rt_dev *dv, hsr_stream *s) {
  if (!rt_dev_async(dv) || !s) return HSR_OK;
  return hsr_stream_sync(s, dv->timeout);
}

hsr_status rt_dev_slots(rt_dev *dv, int n, double **slots) {
  if (n > dv->nslots) {
    double *ns = realloc(dv->slots, (size_t)n * sizeof *ns);
    if (!ns) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    dv->slots = ns;
    dv->nslots = n;
  }
  *slots = dv->slots;
  return HSR_OK;
}

hsr_status rt_dev_allreduce_f64(rt_dev *dv, hsr_comm *c, double *x) {
  if (!rt_dev_async(dv)) return hsr_comm_allreduce(c, x, x, 1, HSR_F64, HSR_SUM, NULL);
  hsr_stream *rs = dv->s[S_REDUCE];
  HSR_CHECK(hsr_device_copy(dv->dev, dv->d64, x, sizeof *x, rs));
  HSR_CHECK(rt_dev_use(dv, c, rs));
  /* blocking: waits (bounded) for the collective's event */
  HSR_CHECK(hsr_comm_allreduce(c, dv->d64, dv->d64, 1, HSR_F64, HSR_SUM, NULL));
  HSR_CHECK(hsr_device_copy(dv->dev, x, dv->d64, sizeof *x, rs));
  return hsr_stream_sync(rs, dv->timeout);
}
