/* The control plane's simulator (hsr/ft.h, hsr bench ft): N replica groups
 * as threads, each a leader (rank 0 of a one-rank group) that runs lead.c and
 * step.c's ft_decide against a real coordinator. Only what needs data is
 * modelled: the cross-group all-reduce's outcome (the killed participants
 * named after detect_s, a stopped one after the bound, as the peer
 * all-reduce of collectives/ names them) and a heal's transfer (heal_s). Every thread blocks (sleeps, etcd's
 * sockets, a condition variable), so a thousand groups fit on two cores. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_int.h"
#include "common/env.h"
#include "common/common_internal.h"
#include "ft/ft_internal.h"

#define SIM_STACK (1u << 20) /* the deciding code keeps a few FT_MAX_REPLICAS arrays on the stack */
#define SIM_H0 0x5eed5eed5eed5eedULL

enum { G_NEW = 0, G_RUN, G_KILLED, G_STOPPED, G_DONE, G_FAILED };

typedef struct sim_world sim_world;

/* The commit exchange of one step as the leaders' peer all-reduce would run
 * it: the vectors of the epoch's participants reduced with MAX as they arrive. */
#define SIM_XN 16
typedef struct sim_xch {
  int64_t epoch;
  int n, broken; /* broken: a participant left it incomplete (its bound passed): no one completes it after */
  float max[SIM_XN];
} sim_xch;

typedef struct sim_group {
  sim_world *w;
  int id, inc; /* incarnation: 0 the first, 1 restarted with join */
  pthread_t th;
  int started;
  hsr_ft *ft;          /* while it runs (w->mu guards the pointer) */
  int state, admitted; /* admitted: it got into a quorum (w->mu) */
  int64_t rev;         /* its record's revision once registered */
  long req_end;        /* its requests when it ended */
  double t_ready, t_admit, t_first, t_kill, t_stop, t_finish;
  int64_t ready_done, admit_done;
  uint64_t *parts; /* per step: the replicas it committed it with (hash; 0: not committed) */
  double *commit_t;
  float *vote, *period; /* steady steps */
  int nvote, nperiod, drops_kill, drops_stop;
  unsigned char *saw_dropped; /* [id]: it saw the group dropped */
  char line[1024];
  char end[700];
  char phase[48]; /* where it is, for a failure's message */
} sim_group;

struct sim_world {
  ft_sim_config c;
  char token[1024];
  pthread_mutex_t mu;
  pthread_cond_t cv, xcv; /* xcv: an all-reduce's or exchange's arrivals complete, or its epoch changed (waking
                             N waiting threads on every arrival would keep two cores busy) */
  sim_group *g; /* N first incarnations, then the restarted */
  int ng, nrun;
  int victim[FT_MAX_REPLICAS], nvictim, stop_id;
  double stop_s; /* HSR_STOP_TIMEOUT: a stopped participant answers no heartbeat for this long */
  int64_t max_done;
  char *addrs;  /* a record's addresses: S base64 strings */
  sim_xch *xch; /* [step]: its commit exchange (mu) */
  sim_xch *ar;  /* [step]: its all-reduce's arrivals (mu) */
};

static void nap(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts)) {}
}

static int is_victim(const sim_world *w, int id) {
  for (int i = 0; i < w->nvictim; i++)
    if (w->victim[i] == id) return 1;
  return 0;
}

/* The participant this group's quorum holds for `id` is dead: a victim whose
 * record there is not its restarted incarnation's. */
static int dead_for(sim_world *w, const hsr_ft *ft, int id, int64_t s) {
  if (!w->c.kill || s < w->c.kill_step + w->c.kill_xchg || !is_victim(w, id)) return 0;
  pthread_mutex_lock(&w->mu);
  int alive = 0;
  for (int k = w->c.groups; k < w->ng; k++)
    if (w->g[k].id == id && w->g[k].rev && w->g[k].rev == ft->part_rev[id]) alive = 1;
  pthread_mutex_unlock(&w->mu);
  return !alive;
}

/* CLOCK_REALTIME's time s seconds from now (pthread_cond_timedwait's). */
static struct timespec deadline(double s) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + s;
  ts.tv_sec = (time_t)t, ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  return ts;
}

/* The all-reduce cannot complete before every participant of the epoch
 * entered it: groups that began the epoch at different times (a start's
 * admissions, spread over seconds at N groups) meet here, within the bound,
 * as over UCX. */
static void model_arrival(sim_group *g, int64_t s) {
  sim_world *w = g->w;
  hsr_ft *ft = g->ft;
  struct timespec ts = deadline(ft->T);
  pthread_mutex_lock(&w->mu);
  sim_xch *x = &w->ar[s];
  int wake = 0;
  if (x->epoch < ft->q.epoch) x->epoch = ft->q.epoch, x->n = 0, wake = 1;
  if (x->epoch == ft->q.epoch && ++x->n >= ft->nparts) wake = 1;
  if (wake) pthread_cond_broadcast(&w->xcv);
  while (x->epoch == ft->q.epoch && x->n < ft->nparts)
    if (pthread_cond_timedwait(&w->xcv, &w->mu, &ts)) break;
  pthread_mutex_unlock(&w->mu);
}

/* The all-reduce's outcome as peer_allreduce reports it: every participant it
 * knows dead (up to FT_MAX_CULPRITS), after the detection delay; with none dead, a
 * stopped one, after its heartbeats' silence (0.5 s and HSR_STOP_TIMEOUT), or the
 * bound and the stall round's grace (a quarter of the bound, at most 1 s: the one
 * waiting for it names it) when sooner; otherwise once every
 * participant entered it. */
static void model_allreduce(sim_group *g, int64_t s, ft_outcome *o) {
  sim_world *w = g->w;
  hsr_ft *ft = g->ft;
  memset(o, 0, sizeof *o);
  o->ok = 1, o->healed = 1;
  int stopped = -1;
  for (int i = 0; i < ft->nparts; i++) {
    int p = ft->parts[i];
    if (p == g->id) continue;
    if (w->c.stop_step && p == w->stop_id && s >= w->c.stop_step) stopped = p;
    if (!dead_for(w, ft, p, s)) continue;
    if (o->ok) snprintf(o->why, sizeof o->why, "cannot send to replica %d (modelled)", p);
    o->ok = 0;
    if (o->n < FT_MAX_CULPRITS) o->culprit[o->n++] = p;
  }
  if (!o->ok) {
    nap(w->c.detect_s);
  } else if (stopped >= 0) {
    /* its heartbeats: the 0.5 s before the first ping and HSR_STOP_TIMEOUT without a pong; the bound and the
     * stall round's grace when that is sooner (or heartbeats are off) */
    double bound = ft->T + (ft->T / 4 < 1.0 ? ft->T / 4 : 1.0), hb = w->stop_s > 0 ? 0.5 + w->stop_s : bound;
    nap(hb < bound ? hb : bound);
    o->ok = 0, o->n = 1, o->culprit[0] = stopped;
    if (hb < bound)
      snprintf(o->why, sizeof o->why, "replica %d answered no heartbeat in %.1f s (modelled)", stopped, w->stop_s);
    else
      snprintf(o->why, sizeof o->why, "replica %d sent nothing within the bound (modelled)", stopped);
  } else {
    model_arrival(g, s);
  }
}

/* The commit exchange (ft_decide's, as the peer all-reduce on the leaders'
 * view runs it): a dead participant named after the detection delay; else
 * the sum once every participant of the epoch gave its bit, or nothing
 * within the exchange's bound (half the cross-group bound). */
static hsr_status model_exchange(hsr_ft *ft, int64_t s, float *bits, int n, ft_result *r) {
  sim_group *g = ft->xchg_ctx;
  sim_world *w = g->w;
  memset(r, 0, sizeof *r);
  r->ok = 1;
  for (int i = 0; i < ft->nparts; i++) {
    int p = ft->parts[i];
    if (p == g->id || !dead_for(w, ft, p, s)) continue;
    if (r->ok) snprintf(r->why, sizeof r->why, "cannot send to replica %d (modelled)", p);
    r->ok = 0;
    if (r->n < FT_MAX_CULPRITS) r->culprit[r->n++] = p;
  }
  if (!r->ok) {
    nap(w->c.detect_s);
    return HSR_OK;
  }
  /* --kill-in-exchange: a victim gives its vector and dies (SIGKILL); a group with a larger id than a victim
   * waited on its later message in vain (in doubt), the others complete */
  int xk = w->c.kill && w->c.kill_xchg && s == w->c.kill_step && g->inc == 0, after = -1;
  for (int i = 0; xk && i < ft->nparts; i++)
    if (is_victim(w, ft->parts[i]) && ft->parts[i] < g->id && after < 0) after = ft->parts[i];
  if (n > SIM_XN) return hsr_error(HSR_ERR_INTERNAL, "hsr bench ft: a commit exchange of %d elements", n);
  struct timespec ts = deadline(ft->T / 2);
  pthread_mutex_lock(&w->mu);
  sim_xch *x = &w->xch[s];
  int wake = 0;
  if (x->epoch < ft->q.epoch) x->epoch = ft->q.epoch, x->n = 0, x->broken = 0, wake = 1;
  int mine = x->epoch == ft->q.epoch;
  for (int i = 0; i < n && mine; i++) x->max[i] = x->n == 0 || bits[i] > x->max[i] ? bits[i] : x->max[i];
  if (mine && ++x->n >= ft->nparts) wake = 1;
  if (wake) pthread_cond_broadcast(&w->xcv);
  while (mine && x->epoch == ft->q.epoch && x->n < ft->nparts && !x->broken)
    if (pthread_cond_timedwait(&w->xcv, &w->mu, &ts)) break;
  if (mine && x->epoch == ft->q.epoch && x->n < ft->nparts && !x->broken) { /* it leaves: the rest cannot complete */
    x->broken = 1;
    pthread_cond_broadcast(&w->xcv);
  }
  if (xk && is_victim(w, g->id)) {
    pthread_mutex_unlock(&w->mu);
    g->t_kill = clock_s();
    g->state = G_KILLED;
    return hsr_error(HSR_ERR_STATE, "killed in the commit exchange (modelled)");
  }
  if (mine && x->epoch == ft->q.epoch && x->n >= ft->nparts && !x->broken && !(xk && after >= 0)) {
    memcpy(bits, x->max, sizeof(float) * (size_t)n);
  } else if (xk && after >= 0) {
    r->ok = 0, r->n = 1, r->culprit[0] = after;
    snprintf(r->why, sizeof r->why, "replica %d is gone (modelled: in the commit exchange)", after);
  } else {
    r->ok = 0;
    snprintf(r->why, sizeof r->why, "the commit exchange did not complete within the bound (modelled)");
  }
  pthread_mutex_unlock(&w->mu);
  return HSR_OK;
}

static uint64_t parts_hash(const int *p, int n) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < n; i++) h = (h ^ (uint64_t)p[i]) * 1099511628211ULL;
  return h ? h : 1;
}

static hsr_status register_fn(hsr_ft *ft, void *arg, double until, int *final, char **blob) {
  hsr_status st = ft_lead_register(ft, 0, *(const uint64_t *)arg, until, final);
  if (st == HSR_OK && *final) *blob = strdup("{}");
  return st;
}

static hsr_status group_open(sim_group *g) {
  sim_world *w = g->w;
  hsr_ft *ft = calloc(1, sizeof *ft);
  if (!ft) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  ft->c.coordinator = w->c.coordinator;
  ft->c.replica_id = g->id;
  ft->c.replicas = w->c.groups;
  ft->c.join = g->inc > 0;
  ft->coord = strdup(w->c.coordinator);
  ft->identity = strdup("{\"model\":\"hsr bench ft\"}");
  ft->my_addrs = strdup(w->addrs);
  snprintf(ft->token, sizeof ft->token, "%s", w->token);
  ft->S = 1; /* the group's messages are its leader's own */
  ft->T = 0.75 * w->c.timeout_s;
  ft->beat = w->c.timeout_s / 4 < 1.0 ? w->c.timeout_s / 4 : 1.0;
  ft->hash_step = -1;
  ft->me = -1;
  ft->layout_hash = SIM_H0;
  ft->said_waiting = 1; /* the bench reports; N groups' "waiting for ..." lines would bury it */
  ft->commit_xchg = model_exchange;
  ft->xchg_ctx = g;
  pthread_mutex_init(&ft->mu, NULL);
  pthread_cond_init(&ft->cv, NULL);
  pthread_mutex_lock(&w->mu);
  g->ft = ft;
  pthread_mutex_unlock(&w->mu);
  if (!ft->coord || !ft->identity || !ft->my_addrs) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  return ft_lead_open(ft);
}

static void group_close(sim_group *g, int killed) {
  sim_world *w = g->w;
  hsr_ft *ft = g->ft;
  if (!ft) return;
  if (killed) ft->lease = 0; /* SIGKILL: nothing revoked, the lease runs out */
  long req = ft_etcd_requests(ft->e) + ft_etcd_requests(ft->ka);
  pthread_mutex_lock(&w->mu);
  g->ft = NULL;
  g->req_end = req;
  pthread_mutex_unlock(&w->mu);
  hsr_ft_free(ft);
}

static void committed(sim_group *g, int64_t s, const hsr_ft_step *L, double now) {
  sim_world *w = g->w;
  g->parts[s] = parts_hash(L->replicas, L->nreplicas);
  g->commit_t[s] = now;
  if (g->t_first == 0) g->t_first = now;
  pthread_mutex_lock(&w->mu);
  if (s > w->max_done) {
    w->max_done = s;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
}

static hsr_status group_run(sim_group *g) {
  sim_world *w = g->w;
  const ft_sim_config *c = &w->c;
  snprintf(g->phase, sizeof g->phase, "connecting");
  HSR_CHECK(group_open(g));
  hsr_ft *ft = g->ft;
  uint64_t h = SIM_H0;
  char *blob = NULL;
  snprintf(g->phase, sizeof g->phase, "registering");
  HSR_CHECK(ft_grp_wait(ft, register_fn, &h, &blob));
  free(blob);
  pthread_mutex_lock(&w->mu);
  g->rev = ft->my_rev;
  g->ready_done = w->max_done;
  pthread_mutex_unlock(&w->mu);
  g->t_ready = clock_s();
  snprintf(g->phase, sizeof g->phase, "waiting for the quorum");
  HSR_CHECK(ft_grp_wait(ft, ft_lead_wait_quorum, NULL, &blob));
  hsr_status st = ft_install(ft, blob);
  free(blob);
  HSR_CHECK(st);
  g->t_admit = clock_s();
  g->admit_done = ft->q.done;
  pthread_mutex_lock(&w->mu);
  g->state = G_RUN;
  g->admitted = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  double last_commit = 0;
  while (ft->q.done < c->steps) {
    int64_t s = ft->q.done + 1, epoch = ft->q.epoch;
    if (c->kill && g->inc == 0 && s >= c->kill_step + c->kill_xchg && is_victim(w, g->id)) {
      g->t_kill = clock_s();
      g->state = G_KILLED;
      return HSR_OK;
    }
    int heal = ft->q.njoin > 0;
    for (int i = 0; i < ft->q.njoin; i++)
      if (ft->q.join[i] == g->id || ft->q.healer[i] == g->id) nap(c->heal_s); /* both ends of the transfer */
    nap(c->step_s);
    ft_outcome o;
    if (c->stop_step && g->inc == 0 && g->id == w->stop_id && s == c->stop_step) {
      g->t_stop = clock_s();
      pthread_mutex_lock(&ft->mu); /* SIGSTOP: the lease's keep-alive thread stops too */
      nap(c->stop_s);
      pthread_mutex_unlock(&ft->mu);
      memset(&o, 0, sizeof o); /* its peers gave up on it: their abort notices name it */
      o.n = 1, o.culprit[0] = g->id, o.healed = 1;
      snprintf(o.why, sizeof o.why, "the others gave up on replica %d (modelled)", g->id);
    } else {
      model_allreduce(g, s, &o);
    }
    hsr_ft_step L;
    memset(&L, 0, sizeof L);
    L.nreplicas = ft->nparts;
    memcpy(L.replicas, ft->parts, sizeof(int) * (size_t)ft->nparts);
    int before[FT_MAX_REPLICAS], nb = ft->nparts;
    memcpy(before, ft->parts, sizeof(int) * (size_t)nb);
    snprintf(g->phase, sizeof g->phase, "step %" PRId64, s);
    double t0 = clock_s();
    HSR_CHECK(ft_decide(ft, &o, &L));
    double now = clock_s();
    if (L.committed) {
      committed(g, s, &L, now);
      if (ft->q.epoch == epoch && !heal) {
        g->vote[g->nvote++] = (float)(now - t0);
        if (last_commit > 0) g->period[g->nperiod++] = (float)(now - last_commit);
      }
      last_commit = now;
    } else {
      if (s == c->kill_step) g->drops_kill++;
      if (s == c->stop_step) g->drops_stop++;
      for (int i = 0; i < nb; i++)
        if (ft_quorum_index(&ft->q, before[i]) < 0) g->saw_dropped[before[i]] = 1;
      last_commit = 0;
    }
    if (L.stop) {
      snprintf(g->line, sizeof g->line, "%s", L.line);
      g->state = G_STOPPED;
      return HSR_OK;
    }
  }
  snprintf(g->phase, sizeof g->phase, "the final comparison");
  double t0 = clock_s();
  uint64_t fin[2] = {(uint64_t)c->steps, SIM_H0 ^ (uint64_t)c->steps};
  st = ft_grp_wait(ft, ft_lead_finish, fin, &blob);
  if (st == HSR_OK) snprintf(g->end, sizeof g->end, "%s", blob ? blob : "");
  free(blob);
  HSR_CHECK(st);
  g->t_finish = clock_s() - t0;
  g->state = G_DONE;
  return HSR_OK;
}

static void *group_main(void *arg) {
  sim_group *g = arg;
  hsr_status st = group_run(g);
  if (st != HSR_OK && g->state != G_KILLED) {
    snprintf(g->line, sizeof g->line, "%s: %.900s", g->phase, hsr_last_error());
    g->state = G_FAILED;
  }
  group_close(g, g->state == G_KILLED);
  sim_world *w = g->w;
  pthread_mutex_lock(&w->mu);
  w->nrun--;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static hsr_status start(sim_world *w, sim_group *g) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, SIM_STACK);
  pthread_mutex_lock(&w->mu);
  w->nrun++;
  pthread_mutex_unlock(&w->mu);
  int e = pthread_create(&g->th, &a, group_main, g);
  pthread_attr_destroy(&a);
  if (e) {
    pthread_mutex_lock(&w->mu);
    w->nrun--;
    pthread_mutex_unlock(&w->mu);
    return hsr_error(HSR_ERR_SYSTEM, "hsr bench ft: cannot start group %d's thread (%s)", g->id, strerror(e));
  }
  g->started = 1;
  return HSR_OK;
}

static long requests_now(sim_world *w) {
  long n = 0;
  pthread_mutex_lock(&w->mu);
  for (int i = 0; i < w->ng; i++)
    n += w->g[i].ft ? ft_etcd_requests(w->g[i].ft->e) + ft_etcd_requests(w->g[i].ft->ka) : w->g[i].req_end;
  pthread_mutex_unlock(&w->mu);
  return n;
}

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static double pct(float *v, int n, double p) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_f);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

static hsr_status check_config(const ft_sim_config *c) {
  if (!c->coordinator || !*c->coordinator) return hsr_error(HSR_ERR_INVALID, "hsr bench ft: no coordinator");
  if (c->groups < 2 || c->groups > FT_MAX_REPLICAS)
    return hsr_error(HSR_ERR_INVALID, "--groups %d (valid: 2 to %d)", c->groups, FT_MAX_REPLICAS);
  if (c->group_size < 1 || c->addr_bytes < 1 || c->steps < 1 || c->step_s < 0 || c->timeout_s <= 0)
    return hsr_error(HSR_ERR_INVALID, "hsr bench ft: bad group size, address size, steps, step time or timeout");
  if (c->kill < 0 || c->kill > c->groups - 2 || (c->kill && (c->kill_step < 1 || c->kill_step > c->steps)))
    return hsr_error(HSR_ERR_INVALID, "--kill %d at step %d: at most %d groups (two survive), at a step of 1 to %d",
                     c->kill, c->kill_step, c->groups - 2, c->steps);
  if (c->stop_step && (c->stop_step > c->steps || c->stop_step == c->kill_step || c->stop_s <= 0))
    return hsr_error(HSR_ERR_INVALID, "--stop at step %d: a step of 1 to %d other than the kill's, for some seconds",
                     c->stop_step, c->steps);
  if (c->restart < 0 || c->restart > c->kill || (c->restart && c->kill_step + c->restart_gap >= c->steps))
    return hsr_error(HSR_ERR_INVALID,
                     "--restart %d: at most the %d killed, restarted before the last step (kill step %d + %d)",
                     c->restart, c->kill, c->kill_step, c->restart_gap);
  return HSR_OK;
}

static hsr_status world_init(sim_world *w, const ft_sim_config *c) {
  w->c = *c;
  const char *tok = NULL;
  HSR_CHECK(env_get_str("HSR_FT_TOKEN", &tok));
  if (!tok) return hsr_error(HSR_ERR_INVALID, "hsr bench ft: HSR_FT_TOKEN is not set (the coordinator's token)");
  snprintf(w->token, sizeof w->token, "%s", tok);
  HSR_CHECK(env_get_double("HSR_STOP_TIMEOUT", &w->stop_s));
  int N = c->groups;
  for (int k = 0; k < c->kill; k++) /* spread over 1 .. N-1; from 0 (the decider) with kill_decider */
    w->victim[w->nvictim++] = !c->kill_decider + (int)((int64_t)k * (N - 1) / c->kill);
  w->stop_id = N - 1;
  while (w->stop_id > 0 && is_victim(w, w->stop_id)) w->stop_id--;
  /* one address: random-looking bytes (incompressible, as UCX's are) */
  unsigned char *raw = malloc((size_t)c->addr_bytes);
  if (!raw) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < c->addr_bytes; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, raw[i] = (unsigned char)x;
  char *b = NULL;
  hsr_status st = ft_b64_encode(raw, (size_t)c->addr_bytes, &b);
  free(raw);
  HSR_CHECK(st);
  size_t L = strlen(b), n = (size_t)c->group_size * (L + 3) + 3, o = 0;
  w->addrs = malloc(n);
  if (!w->addrs) {
    free(b);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  o += (size_t)snprintf(w->addrs + o, n - o, "[");
  for (int r = 0; r < c->group_size; r++) o += (size_t)snprintf(w->addrs + o, n - o, "%s\"%s\"", r ? "," : "", b);
  snprintf(w->addrs + o, n - o, "]");
  free(b);
  w->g = calloc((size_t)(N + c->restart), sizeof *w->g);
  w->xch = calloc((size_t)c->steps + 2, sizeof *w->xch);
  w->ar = calloc((size_t)c->steps + 2, sizeof *w->ar);
  if (!w->g || !w->xch || !w->ar) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < N + c->restart; i++) {
    sim_group *g = &w->g[i];
    g->w = w;
    g->id = i < N ? i : w->victim[i - N];
    g->inc = i >= N;
    g->parts = calloc((size_t)c->steps + 1, sizeof *g->parts);
    g->commit_t = calloc((size_t)c->steps + 1, sizeof *g->commit_t);
    g->vote = calloc((size_t)c->steps + 1, sizeof *g->vote);
    g->period = calloc((size_t)c->steps + 1, sizeof *g->period);
    g->saw_dropped = calloc((size_t)N, 1);
    if (!g->parts || !g->commit_t || !g->vote || !g->period || !g->saw_dropped)
      return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  w->ng = N;
  return HSR_OK;
}

static void world_free(sim_world *w) {
  for (int i = 0; w->g && i < w->c.groups + w->c.restart; i++) {
    sim_group *g = &w->g[i];
    free(g->parts), free(g->commit_t), free(g->vote), free(g->period), free(g->saw_dropped);
  }
  free(w->g);
  free(w->xch);
  free(w->ar);
  free(w->addrs);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  pthread_cond_destroy(&w->xcv);
}

/* Waits until pred holds (w->mu held), or every group has ended. */
static void wait_for(sim_world *w, int (*pred)(const sim_world *)) {
  pthread_mutex_lock(&w->mu);
  while (!pred(w) && w->nrun > 0) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

static int all_admitted(const sim_world *w) {
  for (int i = 0; i < w->c.groups; i++)
    if (w->g[i].state == G_NEW) return 0;
  return 1;
}
static int restart_due(const sim_world *w) { return w->max_done >= w->c.kill_step + w->c.restart_gap; }
static int last_step(const sim_world *w) { return w->max_done >= w->c.steps; }
static int none_running(const sim_world *w) { return w->nrun == 0; }

static void report(sim_world *w, ft_sim_report *r) {
  const ft_sim_config *c = &w->c;
  int N = c->groups, total = w->ng;
  long nv = 0;
  for (int i = 0; i < total; i++) nv += w->g[i].nvote;
  float *votes = malloc(sizeof(float) * (size_t)(nv + 1)), *per = malloc(sizeof(float) * (size_t)(nv + 1));
  int np = 0;
  nv = 0;
  for (int i = 0; i < total && votes && per; i++) {
    memcpy(votes + nv, w->g[i].vote, sizeof(float) * (size_t)w->g[i].nvote);
    memcpy(per + np, w->g[i].period, sizeof(float) * (size_t)w->g[i].nperiod);
    nv += w->g[i].nvote, np += w->g[i].nperiod;
  }
  if (votes && per) {
    r->nvotes = (int)nv;
    r->vote_p50 = pct(votes, (int)nv, 0.5), r->vote_p99 = pct(votes, (int)nv, 0.99);
    r->vote_max = nv ? votes[nv - 1] : 0;
    r->period_p50 = pct(per, np, 0.5), r->period_p99 = pct(per, np, 0.99);
  }
  free(votes), free(per);
  /* the dead: killed and stopped */
  int dead[FT_MAX_REPLICAS], nd = 0;
  for (int i = 0; i < w->nvictim; i++) dead[nd++] = w->victim[i];
  if (c->stop_step) dead[nd++] = w->stop_id;
  ft_ids_text(dead, nd, r->dead, sizeof r->dead);
  if (!nd) snprintf(r->dead, sizeof r->dead, "none");
  r->expected = N - nd + c->restart;
  r->same_steps = 1;
  r->kill_commit_s = r->stop_commit_s = r->admit_s = r->join_commit_s = -1;
  double t_kill = 0;
  for (int i = 0; i < N; i++)
    if (w->g[i].t_kill > 0 && (t_kill == 0 || w->g[i].t_kill < t_kill)) t_kill = w->g[i].t_kill;
  double t_stop = c->stop_step ? w->g[w->stop_id].t_stop : 0;
  for (int i = 0; i < total; i++) {
    sim_group *g = &w->g[i];
    if (g->state == G_DONE) {
      r->survivors++;
      if (strstr(g->end, "equal on")) r->equal_end++;
      int all = 1; /* a restarted group was not there to see the drops */
      for (int k = 0; k < nd && g->inc == 0; k++) all &= g->saw_dropped[dead[k]];
      r->named += all;
      for (int64_t s = g->admit_done + 1; s <= c->steps; s++)
        if (!g->parts[s]) r->same_steps = 0;
      if (g->inc > 0) {
        r->admitted++;
        double a = g->t_admit - g->t_ready, j = g->t_first - g->t_ready;
        if (a > r->admit_s) r->admit_s = a;
        if (j > r->join_commit_s) r->join_commit_s = j;
        if ((int)(g->admit_done - g->ready_done) > r->admit_steps)
          r->admit_steps = (int)(g->admit_done - g->ready_done);
      } else {
        if (t_kill > 0 && g->commit_t[c->kill_step] - t_kill > r->kill_commit_s)
          r->kill_commit_s = g->commit_t[c->kill_step] - t_kill;
        if (t_stop > 0 && g->commit_t[c->stop_step] - t_stop > r->stop_commit_s)
          r->stop_commit_s = g->commit_t[c->stop_step] - t_stop;
        if (g->drops_kill > r->kill_drops) r->kill_drops = g->drops_kill;
        if (g->drops_stop > r->stop_drops) r->stop_drops = g->drops_stop;
      }
      if (g->t_finish > r->finish_s) r->finish_s = g->t_finish;
    } else if (g->state != G_KILLED && !(g->inc == 0 && c->stop_step && g->id == w->stop_id) && r->failed++ == 0) {
      snprintf(r->failure, sizeof r->failure, "replica %d%s: %.900s", g->id, g->inc ? " (restarted)" : "",
               g->line[0] ? g->line : "did not finish");
    }
  }
  /* all or none: a step committed by several groups was committed with the same replicas */
  for (int64_t s = 1; s <= c->steps; s++) {
    uint64_t h = 0;
    for (int i = 0; i < total; i++) {
      uint64_t x = w->g[i].parts[s];
      if (!x) continue;
      if (h && x != h) r->same_steps = 0;
      h = x;
    }
  }
}

hsr_status ft_sim_run(const ft_sim_config *c, ft_sim_report *r) {
  if (!c || !r) return hsr_error(HSR_ERR_INVALID, "ft_sim_run: NULL argument");
  memset(r, 0, sizeof *r);
  HSR_CHECK(check_config(c));
  sim_world *w = calloc(1, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  pthread_cond_init(&w->xcv, NULL);
  hsr_status st = world_init(w, c);
  double t0 = clock_s(), t1 = 0, t2 = 0;
  long q0 = 0, q1 = 0;
  for (int i = 0; st == HSR_OK && i < c->groups; i++) st = start(w, &w->g[i]);
  int formed = 0;
  if (st == HSR_OK) {
    wait_for(w, all_admitted);
    pthread_mutex_lock(&w->mu);
    formed = 1;
    for (int i = 0; i < c->groups; i++) formed &= w->g[i].admitted;
    pthread_mutex_unlock(&w->mu);
  }
  if (st == HSR_OK && formed) { /* no steps' phase when the start did not form */
    t1 = clock_s();
    q0 = requests_now(w);
    if (c->sample) c->sample(c->sample_ctx, 0);
    if (c->restart) {
      wait_for(w, restart_due);
      for (int k = 0; k < c->restart && st == HSR_OK; k++) {
        pthread_mutex_lock(&w->mu);
        w->ng++;
        pthread_mutex_unlock(&w->mu);
        st = start(w, &w->g[c->groups + k]);
      }
    }
    wait_for(w, last_step);
    t2 = clock_s();
    q1 = requests_now(w);
    if (c->sample) c->sample(c->sample_ctx, 1);
  }
  wait_for(w, none_running);
  for (int i = 0; i < w->ng; i++)
    if (w->g[i].started) pthread_join(w->g[i].th, NULL);
  if (st == HSR_OK) {
    r->setup_s = (formed ? t1 : clock_s()) - t0;
    r->steps_s = t2 - t1;
    r->requests = q1 - q0;
    r->requests_per_s = t2 > t1 ? (double)r->requests / (t2 - t1) : 0;
    report(w, r);
  }
  world_free(w);
  free(w);
  return st;
}
