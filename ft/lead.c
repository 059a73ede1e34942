/* Rank 0's side of the coordinator (ft/ft_int.h): the group's record and
 * lease, the quorum's formation and admission, the vote and the decision,
 * the final comparison of state hashes.
 *
 * Keys under /hsr/ft/:
 *   m/IIII               a group's record (lease-bound: it goes when the group does): what the start and the
 *                        decisions compare, a few hundred bytes
 *   x/IIII               its identity's flags and every rank's UCX address, written with it (the same revision)
 *   q                    the quorum (epoch, steps done, members, joiners and their healers)
 *   v/SSSSSSSSSS/EEEEEE/IIII   a vote on step S in epoch E
 *   a/SSSSSSSSSS/EEEEEE  the abort marker of (S, E): no vote is written after it
 *   r/SSSSSSSSSS/EEEEEE  (S, E)'s decision, written once by its decider (the smallest participant): the others
 *                        read it instead of the votes
 *   d/IIII               a group's final state hash */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ft_int.h"
#include "hsr/config.h"
#include "hsr/git.h"
#include "common/common_internal.h"

#define KEY_MAX 128

static void key_member(char *k, int id) { snprintf(k, KEY_MAX, FT_PREFIX "m/%04d", id); }
static void key_extra(char *k, int id) { snprintf(k, KEY_MAX, FT_PREFIX "x/%04d", id); }
static void key_vote(char *k, int64_t s, int64_t e, int id) {
  snprintf(k, KEY_MAX, FT_PREFIX "v/%010" PRId64 "/%06" PRId64 "/%04d", s, e, id);
}
/* the prefix of step s's votes in epoch e */
static void key_votes(char *k, int64_t s, int64_t e) {
  snprintf(k, KEY_MAX, FT_PREFIX "v/%010" PRId64 "/%06" PRId64 "/", s, e);
}
static void key_abort(char *k, int64_t s, int64_t e) {
  snprintf(k, KEY_MAX, FT_PREFIX "a/%010" PRId64 "/%06" PRId64, s, e);
}
static void key_done(char *k, int id) { snprintf(k, KEY_MAX, FT_PREFIX "d/%04d", id); }
static void key_result(char *k, int64_t s, int64_t e) {
  snprintf(k, KEY_MAX, FT_PREFIX "r/%010" PRId64 "/%06" PRId64, s, e);
}

static void nap_until(double t) {
  double s = t - clock_s();
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- the lease's keep-alive thread ---- */

/* The lease's renewal period: a fifth of the TTL (a loaded host may delay
 * a renewal or two); 1 s up to 256 groups, N/256 s beyond (at most 4 s),
 * where N groups' renewals are most of the coordinator's load, and the TTL
 * with it. A failed renewal is tried again a quarter of the period later. */
static double ka_period(const hsr_ft *ft) {
  double p = ft->c.replicas / 256.0;
  return p < 1 ? 1 : p > 4 ? 4 : p;
}
/* Five periods; past 512 groups at least N/1024 minutes: N groups starting at once keep the coordinator busy for
 * tens of seconds, and a renewal waits behind that (1,024 groups: leases of 20 s ran out in the start, of 60 s not) */
static int lease_ttl(const hsr_ft *ft) {
  double t = FT_LEASE_TTL * ka_period(ft), big = ft->c.replicas > 512 ? 60.0 * ft->c.replicas / 1024 : 0;
  return (int)((t > big ? t : big) + 0.5);
}
/* One group in K looks for joiners in a period, in turn: a joiner one group
 * sees clears that group's commit bit, and the exchange's MAX clears every
 * group's, so about 64 reads a period find it as soon as N would. */
static int ka_readers_every(const hsr_ft *ft) { return ft->c.replicas / 64 > 1 ? ft->c.replicas / 64 : 1; }

static void *keepalive(void *arg) {
  hsr_ft *ft = arg;
  double wait = ka_period(ft);
  long tick = 0;
  int every = ka_readers_every(ft);
  pthread_mutex_lock(&ft->mu);
  while (!ft->ka_stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + wait;
    ts.tv_sec = (time_t)t, ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&ft->cv, &ft->mu, &ts);
    if (ft->ka_stop) break;
    int turn = (tick++ + ft->c.replica_id) % every == 0;
    /* no joiner to look for before it is in a quorum, nor outside its turn */
    int64_t ttl = -1, base = ft->ka_read && turn ? ft->ka_base : 0;
    int64_t count = ft->ka_count, orev[FT_MAX_SEEN];
    int no = ft->ka_nother;
    char ok[FT_MAX_SEEN][KEY_MAX];
    ft_range rg[1 + FT_MAX_SEEN] = {{FT_PREFIX "m/", 1, 1, 0, 1, 0}};
    for (int i = 0; i < no; i++) {
      key_member(ok[i], ft->ka_other[i]);
      orev[i] = ft->ka_other_rev[i];
      rg[1 + i] = (ft_range){ok[i], 0, 1, 0, 0, 0};
    }
    pthread_mutex_unlock(&ft->mu);
    hsr_status st = ft_etcd_lease_keepalive(ft->ka, ft->lease, &ttl);
    wait = ka_period(ft) / (st == HSR_OK ? 1 : 4);
    /* a record written since the leader last read the store (none in a steady run): more records than then, or
     * another revision of one outside the quorum (a restart that replaced its predecessor's); a joiner waiting
     * makes the next step go through the coordinator, which admits it. The count and a few keys, not the
     * records: etcd reads every record of a range it is asked for, whatever the filter */
    ft_kvs k = {0};
    hsr_status rs = st == HSR_OK && ttl > 0 && base > 0 ? ft_etcd_read(ft->ka, rg, 1 + no, &k) : HSR_ERR_STATE;
    pthread_mutex_lock(&ft->mu);
    if (st == HSR_OK && ttl <= 0) ft->lease_lost = 1; /* expired: the others dropped this group's record */
    if (rs == HSR_OK && base == ft->ka_base) {
      int fresh = k.count > count;
      for (int i = 0; i < no; i++) {
        const ft_kv *kv = ft_kvs_find(&k, ok[i]);
        fresh |= kv && kv->mod_rev != orev[i];
      }
      ft->ka_nnew = 0;
      if (fresh) ft->ka_new[ft->ka_nnew++] = -1; /* who: the vote's read says */
    }
    ft_kvs_free(&k);
  }
  pthread_mutex_unlock(&ft->mu);
  return NULL;
}

/* The start's slice: N groups starting at once keep etcd busy for seconds,
 * so until it is admitted a leader's request may take that long, and its
 * ranks hear from it as often (they wait HSR_COMM_TIMEOUT for it): a third
 * of the bound, at most 5 s, at least a heartbeat. */
static double start_slice(const hsr_ft *ft) {
  double s = ft->T / 3 < 5 ? ft->T / 3 : 5;
  return s > ft->beat ? s : ft->beat;
}


hsr_status ft_lead_open(hsr_ft *ft) {
  /* a failing coordinator is retried until ft->T */
  double d = ft->T > 3 ? ft->T : 3;
  HSR_CHECK(ft_etcd_open(ft->coord, ft->token, d, &ft->e));
  ft->slice = start_slice(ft);
  ft_etcd_set_deadline(ft->e, ft->slice);
  HSR_CHECK(ft_etcd_open(ft->coord, ft->token, d, &ft->ka));
  /* renewed every period (1 to 4 s): at least two tries within the TTL on a loaded coordinator */
  ft_etcd_set_deadline(ft->ka, ka_period(ft) > 2 ? ka_period(ft) : 2.0);
  return HSR_OK;
}

/* A busy coordinator at the start: the next try after a pause of a quarter
 * to a whole heartbeat, spread over the groups (retried at once, N groups'
 * requests that time out would keep it busy). */
static void start_backoff(hsr_ft *ft, double until) {
  unsigned x = (unsigned)ft->c.replica_id * 2654435761u + (unsigned)(++ft->start_tries) * 40503u;
  double t = clock_s() + ft->beat * (0.25 + 0.75 * (double)(x % 1000u) / 1000.0);
  nap_until(t < until ? t : until);
}

void ft_lead_close(hsr_ft *ft) {
  if (ft->ka_on) {
    pthread_mutex_lock(&ft->mu);
    ft->ka_stop = 1;
    pthread_cond_signal(&ft->cv);
    pthread_mutex_unlock(&ft->mu);
    pthread_join(ft->ka_thread, NULL);
    ft->ka_on = 0;
  }
  if (ft->e && ft->lease) { /* the records go now, not a TTL later */
    ft_etcd_set_deadline(ft->e, 2);
    ft_etcd_lease_revoke(ft->e, ft->lease);
  }
  ft_etcd_close(ft->e);
  ft_etcd_close(ft->ka);
  ft->e = ft->ka = NULL;
  for (int i = 0; i < FT_MAX_REPLICAS; i++) {
    free(ft->rec[i].addrs), free(ft->rec[i].js);
    ft->rec[i].addrs = ft->rec[i].js = NULL;
  }
  free(ft->my_addrs);
  ft->my_addrs = NULL;
  free(ft->vb);
  ft->vb = NULL;
  free(ft->fin);
  ft->fin = NULL;
}

/* ---- reading the store ---- */

typedef struct view {
  ft_kvs kvs;
  ft_vote *votes; /* of (done + 1, epoch), by id (read_all with votes) */
  int nv, aborted;
  int64_t arev;       /* the abort marker's create revision (0: none) */
  const char *result; /* the step's decision (r/S/E; NULL: not decided yet), in kvs */
  int ahead[FT_MAX_REPLICAS], nahead; /* participants that voted on (done + 2, epoch): they committed done + 1 */
  int prev_aborted;                   /* the marker of (done, epoch) exists: this group's last step was dropped */
  int gone[FT_MAX_REPLICAS], ngone;   /* the abort marker's groups that did not vote and are gone */
} view;

static void view_free(view *v) {
  ft_kvs_free(&v->kvs);
  free(v->votes);
  memset(v, 0, sizeof *v);
}

static hsr_status parse_rec(const ft_kv *kv, ft_rec *r) {
  cJSON *o = cJSON_Parse(kv->val);
  if (!o) return hsr_error(HSR_ERR_IO, "coordinator: record '%s' is not JSON", kv->key);
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "host"), *p = cJSON_GetObjectItemCaseSensitive(o, "pid"),
              *j = cJSON_GetObjectItemCaseSensitive(o, "join"), *s = cJSON_GetObjectItemCaseSensitive(o, "start"),
              *sh = cJSON_GetObjectItemCaseSensitive(o, "start_hash");
  hsr_status st = cJSON_IsString(h) && cJSON_IsNumber(p) && cJSON_IsNumber(j) && cJSON_IsNumber(s)
                      ? HSR_OK
                      : hsr_error(HSR_ERR_IO, "coordinator: record '%s' lacks fields", kv->key);
  char *js = st == HSR_OK ? strdup(kv->val) : NULL;
  if (st == HSR_OK && !js) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) {
    free(r->js);
    r->js = js;
    r->present = 1;
    r->rev = kv->mod_rev; /* records are written once: the put that made this one (a restart replaces it) */
    snprintf(r->host, sizeof r->host, "%s", h->valuestring);
    r->pid = (int)p->valuedouble;
    r->join = j->valuedouble != 0;
    r->start = (int64_t)s->valuedouble;
    snprintf(r->start_hash, sizeof r->start_hash, "%s", cJSON_IsString(sh) ? sh->valuestring : "?");
  }
  cJSON_Delete(o);
  return st;
}

/* The records outside quorum q as last read, for the keep-alive thread:
 * another revision of one of them is a restart that replaced its
 * predecessor's record (the count of records does not change). */
static void ka_note(hsr_ft *ft, const ft_quorum *q) {
  pthread_mutex_lock(&ft->mu);
  ft->ka_nother = 0;
  for (int id = 0; id < FT_MAX_REPLICAS && ft->ka_nother < FT_MAX_SEEN; id++)
    if (ft->rec[id].present && id != ft->c.replica_id && ft_quorum_index(q, id) < 0) {
      ft->ka_other[ft->ka_nother] = id;
      ft->ka_other_rev[ft->ka_nother++] = ft->rec[id].rev;
    }
  pthread_mutex_unlock(&ft->mu);
}

/* The store as the decisions need it: records, the quorum, the abort
 * marker and decision of the step about to commit, and the joiners
 * waiting; with votes (the step's decider), the step's votes and the
 * next step's voters too. One transaction reads, at one revision, the
 * records written since the last read (values: a few hundred bytes each),
 * the number of records, the quorum, the marker and the decision, and the
 * votes written since the decider's last read. A count that the new records
 * do not explain means records went (a lease ran out, a group left): then
 * their keys are listed at that revision. So a leader reads each record
 * once and a decider each vote once, and N groups starting or voting cost
 * O(N) bytes each, not O(N) records or votes on every wake-up (hsr bench
 * ft). */
static hsr_status read_all(hsr_ft *ft, view *v, int votes) {
  memset(v, 0, sizeof *v);
  char vp[KEY_MAX], ak[KEY_MAX], np[KEY_MAX], pk[KEY_MAX], rk[KEY_MAX];
  int64_t s = ft->q.done + 1;
  key_votes(vp, s, ft->q.epoch);
  key_votes(np, s + 1, ft->q.epoch);
  key_abort(ak, s, ft->q.epoch);
  key_abort(pk, s - 1, ft->q.epoch);
  key_result(rk, s, ft->q.epoch);
  if (votes && !ft->vb && !(ft->vb = calloc(1, sizeof *ft->vb))) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  ft_vbuf *vb = votes ? ft->vb : NULL;
  if (vb && (vb->step != s || vb->epoch != ft->q.epoch)) {
    memset(vb->has, 0, sizeof vb->has);
    vb->step = s, vb->epoch = ft->q.epoch, vb->rev = 0;
  }
  ft_range rg[8] = {{FT_PREFIX "m/", 1, 0, ft->m_rev + 1, 0, 0},
                    {FT_PREFIX "m/", 1, 1, 0, 1, 0},
                    {FT_PREFIX "q", 0, 0, 0, 0, 0},
                    {ak, 0, 0, 0, 0, 0},
                    {pk, 0, 1, 0, 0, 0},
                    {rk, 0, 0, 0, 0, 0},
                    {vp, 1, 0, vb ? vb->rev + 1 : 0, 0, 0},
                    {np, 1, 1, 0, 0, 0}};
  HSR_CHECK(ft_etcd_read(ft->e, rg, vb ? 8 : 6, &v->kvs));
  ft->read_stale = 0;
  ft->qpresent = 0;
  ft->qmod = 0;
  size_t ml = strlen(FT_PREFIX "m/"), vl = strlen(vp), nl = strlen(np);
  int64_t created = 0; /* records whose key is new since the last read */
  for (int i = 0; i < v->kvs.n; i++) {
    const ft_kv *kv = &v->kvs.kv[i];
    if (!strncmp(kv->key, FT_PREFIX "m/", ml)) {
      created += kv->create_rev > ft->m_rev;
      int id = atoi(kv->key + ml);
      if (id >= 0 && id < FT_MAX_REPLICAS) HSR_CHECK(parse_rec(kv, &ft->rec[id]));
    } else if (!strcmp(kv->key, FT_PREFIX "q")) {
      HSR_CHECK(ft_quorum_parse(kv->val, &ft->qkey));
      ft->qpresent = 1;
      ft->qmod = kv->mod_rev;
    } else if (vb && !strncmp(kv->key, vp, vl)) {
      ft_vote x;
      HSR_CHECK(ft_vote_parse(kv->val, &x));
      if (x.id >= 0 && x.id < FT_MAX_REPLICAS) vb->v[x.id] = x, vb->has[x.id] = 1;
    } else if (vb && !strncmp(kv->key, np, nl)) {
      int id = atoi(kv->key + nl);
      if (ft_quorum_index(&ft->q, id) >= 0 && v->nahead < FT_MAX_REPLICAS) v->ahead[v->nahead++] = id;
    } else if (!strcmp(kv->key, pk)) {
      v->prev_aborted = 1;
    } else if (!strcmp(kv->key, rk)) {
      v->result = kv->val;
    } else if (!strcmp(kv->key, ak)) {
      v->aborted = 1;
      v->arev = kv->create_rev;
      cJSON *o = cJSON_Parse(kv->val);
      const cJSON *g = o ? cJSON_GetObjectItemCaseSensitive(o, "gone") : NULL, *it;
      cJSON_ArrayForEach(it, g) if (cJSON_IsNumber(it) && v->ngone < FT_MAX_REPLICAS) v->gone[v->ngone++] =
          (int)it->valuedouble;
      cJSON_Delete(o);
    }
  }
  if (vb) { /* every vote read so far, by id: the order of their keys */
    vb->rev = v->kvs.rev;
    int nv = 0;
    for (int id = 0; id < FT_MAX_REPLICAS; id++) nv += vb->has[id];
    v->votes = malloc(sizeof *v->votes * (size_t)(nv + 1));
    if (!v->votes) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    for (int id = 0; id < FT_MAX_REPLICAS; id++)
      if (vb->has[id]) v->votes[v->nv++] = vb->v[id];
  }
  if (v->kvs.count != ft->m_count + created) { /* records went: which, at the same revision */
    ft_kvs k;
    ft_range lr = {FT_PREFIX "m/", 1, 1, 0, 0, v->kvs.rev};
    HSR_CHECK(ft_etcd_read(ft->e, &lr, 1, &k));
    unsigned char there[FT_MAX_REPLICAS] = {0};
    for (int i = 0; i < k.n; i++) {
      int id = atoi(k.kv[i].key + ml);
      if (id >= 0 && id < FT_MAX_REPLICAS) there[id] = 1;
    }
    ft_kvs_free(&k);
    for (int id = 0; id < FT_MAX_REPLICAS; id++)
      if (!there[id]) ft->rec[id].present = 0;
  }
  ft->m_rev = v->kvs.rev;
  ft->m_count = v->kvs.count;
  pthread_mutex_lock(&ft->mu); /* the keep-alive thread looks for records written after this read */
  ft->ka_base = v->kvs.rev;
  ft->ka_nnew = 0;
  ft->ka_count = ft->m_count;
  pthread_mutex_unlock(&ft->mu);
  ka_note(ft, &ft->q);
  ft->nseen = 0;
  for (int id = 0; id < FT_MAX_REPLICAS && ft->nseen < FT_MAX_SEEN; id++)
    if (ft->rec[id].present && ft->rec[id].join && ft_quorum_index(&ft->q, id) < 0 && id != ft->c.replica_id)
      ft->seen[ft->nseen++] = id;
  return HSR_OK;
}

/* Whether the quorum key describes groups that are still there: one of
 * its groups has a record older than the key (a group that registered
 * after it, a later run's, is not one of them). */
static int quorum_live(const hsr_ft *ft) {
  if (!ft->qpresent) return 0;
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(&ft->qkey, p);
  for (int i = 0; i < n; i++)
    if (p[i] != ft->c.replica_id && ft->rec[p[i]].present && ft->rec[p[i]].rev < ft->qmod) return 1;
  return 0;
}

static int is_coord_error(hsr_status st) { return st == HSR_ERR_TIMEOUT || st == HSR_ERR_STATE; }

/* How long a start waits for the quorum (and a busy coordinator). */
static double start_limit(const hsr_ft *ft) { return 4 * ft->T > 60 ? 4 * ft->T : 60; }

/* ---- the record and the identity check ---- */

/* The record (m/IIII) and what only some read (x/IIII): the identity's
 * flags, compared through their hash, and every rank's UCX address, which
 * only a peer that connects to this group needs. */
static hsr_status my_record(hsr_ft *ft, int64_t done, uint64_t hash, char **out, char **extra) {
  cJSON *o = cJSON_CreateObject(), *x = cJSON_CreateObject(), *idj = cJSON_Parse(ft->identity);
  char *ids = idj ? cJSON_PrintUnformatted(idj) : NULL, ih[24];
  snprintf(ih, sizeof ih, "%016" PRIx64, ids ? (uint64_t)XXH3_64bits(ids, strlen(ids)) : 0);
  free(ids);
  char host[64] = "?", ver[96], h[24];
  gethostname(host, sizeof host - 1);
  snprintf(ver, sizeof ver, "%s (git %s)", HSR_VERSION_STRING, HSR_GIT_HASH);
  snprintf(h, sizeof h, "%016" PRIx64, hash);
  cJSON_AddNumberToObject(o, "id", ft->c.replica_id);
  cJSON_AddStringToObject(o, "host", host);
  cJSON_AddNumberToObject(o, "pid", (double)getpid());
  cJSON_AddNumberToObject(o, "shard_group", ft->S);
  cJSON_AddNumberToObject(o, "replicas", ft->c.replicas);
  cJSON_AddStringToObject(o, "version", ver);
  char lay[24]; /* the flat layout: units, offsets, padding (what is exchanged shard by shard) */
  snprintf(lay, sizeof lay, "%016" PRIx64, ft->layout_hash);
  cJSON_AddStringToObject(o, "layout", lay);
  cJSON_AddStringToObject(o, "ident", ih);
  cJSON_AddNumberToObject(o, "join", ft->c.join);
  cJSON_AddNumberToObject(o, "start", (double)done);
  cJSON_AddStringToObject(o, "start_hash", h);
  cJSON_AddItemToObject(x, "identity", idj);
  cJSON_AddItemToObject(x, "addrs", cJSON_Parse(ft->my_addrs));
  *out = cJSON_PrintUnformatted(o);
  *extra = cJSON_PrintUnformatted(x);
  cJSON_Delete(o);
  cJSON_Delete(x);
  if (*out && *extra) return HSR_OK;
  free(*out), free(*extra);
  *out = *extra = NULL;
  return hsr_error(HSR_ERR_NOMEM, "out of memory");
}

static const char *str_or(const cJSON *o, const char *k, char *buf, size_t n) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, k);
  if (cJSON_IsString(f)) return f->valuestring;
  if (cJSON_IsNumber(f)) {
    snprintf(buf, n, "%.17g", f->valuedouble);
    return buf;
  }
  return "(not set)";
}

/* The first difference between this group's record and another's, or "". */
static void difference(const cJSON *mine, const cJSON *other, char *out, size_t n) {
  out[0] = 0;
  char a[64], b[64];
  static const char *const top[] = {"shard_group", "replicas", "version", "layout"};
  static const char *const what[] = {"the group has %s rank(s) here and %s in", "--replicas is %s here and %s in",
                                     "hsr is %s here and %s in", "the engine's layout hash is %s here and %s in"};
  for (int i = 0; i < 3; i++) { /* the layout last: the flags that make it differ are named first */
    const char *x = str_or(mine, top[i], a, sizeof a), *y = str_or(other, top[i], b, sizeof b);
    if (strcmp(x, y)) {
      snprintf(out, n, what[i], x, y);
      return;
    }
  }
  const cJSON *im = cJSON_GetObjectItemCaseSensitive(mine, "identity"),
              *io = cJSON_GetObjectItemCaseSensitive(other, "identity"), *it;
  for (int pass = 0; pass < 2; pass++) {
    const cJSON *arr = pass ? io : im;
    cJSON_ArrayForEach(it, arr) {
      const char *x = str_or(im, it->string, a, sizeof a), *y = str_or(io, it->string, b, sizeof b);
      if (strcmp(x, y)) {
        snprintf(out, n, "%s is %s here and %s in", it->string, x, y);
        return;
      }
    }
  }
  const char *x = str_or(mine, top[3], a, sizeof a), *y = str_or(other, top[3], b, sizeof b);
  if (strcmp(x, y)) snprintf(out, n, what[3], x, y);
}

/* Every record read against this group's: the identity's flags compared
 * through their hash, and read (x/IIII) only from a record whose hash
 * differs, to name the first difference. */
static hsr_status check_identity(hsr_ft *ft, const char *mine_js) {
  cJSON *mine = cJSON_Parse(mine_js);
  if (!mine) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  cJSON_AddItemToObject(mine, "identity", cJSON_Parse(ft->identity));
  char a[64], b[64];
  const char *mi = str_or(mine, "ident", a, sizeof a);
  hsr_status st = HSR_OK;
  for (int id = 0; id < FT_MAX_REPLICAS && st == HSR_OK; id++) {
    const ft_rec *r = &ft->rec[id];
    if (!r->present || !r->js || id == ft->c.replica_id) continue;
    cJSON *o = cJSON_Parse(r->js);
    if (!o) continue;
    const char *oi = str_or(o, "ident", b, sizeof b);
    int known = !strcmp(mi, oi); /* the same flags: compared as equal */
    if (known) {
      cJSON_AddItemToObject(o, "identity", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(mine, "identity"), 1));
    } else {
      char xk[KEY_MAX];
      ft_kvs k;
      key_extra(xk, id);
      st = ft_etcd_get(ft->e, xk, 0, &k);
      cJSON *x = st == HSR_OK && k.n && k.kv[0].mod_rev == r->rev ? cJSON_Parse(k.kv[0].val) : NULL;
      cJSON *xi = x ? cJSON_DetachItemFromObjectCaseSensitive(x, "identity") : NULL;
      if (xi) cJSON_AddItemToObject(o, "identity", xi), known = 1;
      cJSON_Delete(x);
      if (st == HSR_OK) ft_kvs_free(&k);
    }
    char d[512];
    difference(mine, o, d, sizeof d);
    if (!d[0] && !known) /* the other's flags are gone with it, or never written (another build) */
      snprintf(d, sizeof d, "the flags' hash is %s here and %s in", mi, oi);
    if (st == HSR_OK && d[0])
      st = hsr_error(HSR_ERR_INVALID,
                     "replica %d cannot join: %s replica %d (host %s, pid %d); every replica group must run the same "
                     "hsr with the same model, data, optimizer and group size",
                     ft->c.replica_id, d, id, r->host, r->pid);
    cJSON_Delete(o);
  }
  cJSON_Delete(mine);
  return st;
}

/* This id's record, kept by a group the quorum counts and, on this host,
 * whose process lives: the id is taken (a restart, whose predecessor has
 * died, is not refused here). */
static hsr_status check_id_taken(const hsr_ft *ft) {
  int me = ft->c.replica_id;
  const ft_rec *r = &ft->rec[me];
  if (!r->present || !ft->qpresent || ft_quorum_index(&ft->qkey, me) < 0) return HSR_OK;
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  if (!strcmp(host, r->host) && r->pid > 0 && kill(r->pid, 0) != 0 && errno == ESRCH) return HSR_OK;
  char freeids[256] = "";
  size_t o = 0;
  for (int id = 0; id < ft->c.replicas && o + 12 < sizeof freeids; id++)
    if (!ft->rec[id].present) o += (size_t)snprintf(freeids + o, sizeof freeids - o, "%s%d", o ? "," : "", id);
  if (freeids[0])
    return hsr_error(HSR_ERR_INVALID,
                     "replica %d is taken: a live group holds it (host %s, pid %d; quorum epoch %" PRId64 ", %" PRId64
                     " steps done): give a free --replica-id (%s)",
                     me, r->host, r->pid, ft->qkey.epoch, ft->qkey.done, freeids);
  return hsr_error(HSR_ERR_INVALID,
                   "replica %d is taken: a live group holds it (host %s, pid %d; quorum epoch %" PRId64 ", %" PRId64
                   " steps done), and every id 0 to %d is held: this run has all its groups",
                   me, r->host, r->pid, ft->qkey.epoch, ft->qkey.done, ft->c.replicas - 1);
}

static hsr_status lead_register(hsr_ft *ft, int64_t done, uint64_t hash, double until, int *final) {
  char *mine = NULL, *extra = NULL, mk[KEY_MAX], xk[KEY_MAX];
  *final = 0;
  HSR_CHECK(my_record(ft, done, hash, &mine, &extra));
  key_member(mk, ft->c.replica_id);
  key_extra(xk, ft->c.replica_id);
  hsr_status st = HSR_OK;
  if (ft->lease) goto put; /* a later slice: the checks are done */
  view v;
  st = read_all(ft, &v, 0);
  if (st == HSR_OK) st = check_identity(ft, mine);
  /* a crashed job's records stay until their leases run out: a start waits that long for them to go before it
   * takes them for a running job (a stale quorum never blocks a start) */
  double stale_end = ft->t_reg + lease_ttl(ft) + 1, now = clock_s();
  if (st == HSR_OK && !ft->c.join && quorum_live(ft) && now < stale_end) {
    int64_t rev = v.kvs.rev;
    int ch;
    view_free(&v);
    free(mine), free(extra);
    return ft_etcd_watch(ft->e, FT_PREFIX "m/", rev + 1, (until < stale_end ? until : stale_end) - now, &ch);
  }
  char ids[256];
  if (st == HSR_OK && ft->qpresent) ft_ids_text(ft->qkey.mem, ft->qkey.nmem, ids, sizeof ids);
  if (st == HSR_OK && !ft->c.join) st = check_id_taken(ft);
  if (st == HSR_OK && !ft->c.join && quorum_live(ft))
    st = hsr_error(HSR_ERR_INVALID,
                   "replica %d cannot start: replicas %s are training (quorum epoch %" PRId64 ", %" PRId64
                   " steps done); restart this group with --join to heal from them",
                   ft->c.replica_id, ids, ft->qkey.epoch, ft->qkey.done);
  if (st == HSR_OK && ft->c.join && !quorum_live(ft))
    st = hsr_error(HSR_ERR_INVALID,
                   "replica %d cannot join: no replica group is training (the coordinator holds %s); start every "
                   "group without --join (--resume to continue from a checkpoint)",
                   ft->c.replica_id, ft->qpresent ? "a quorum whose groups are all gone" : "no quorum");
  view_free(&v);
  if (st == HSR_OK) st = ft_etcd_lease_grant(ft->e, lease_ttl(ft), &ft->lease);
  if (st == HSR_OK && !ft->ka_on) {
    if (pthread_create(&ft->ka_thread, NULL, keepalive, ft))
      st = hsr_error(HSR_ERR_SYSTEM, "ft: cannot start the lease's keep-alive thread");
    else
      ft->ka_on = 1;
  }
  ft->t_begin = clock_s();
put:; /* a previous run of this id may still hold the key until its lease ends */
  double end = ft->t_begin + lease_ttl(ft) + 3;
  while (st == HSR_OK) {
    ft_cmp c = {mk, FT_CMP_CREATE, 0, 0};
    ft_op op[2] = {{FT_OP_PUT, mk, mine, ft->lease}, {FT_OP_PUT, xk, extra, ft->lease}}; /* one revision */
    int ok = 0;
    int64_t rev = 0;
    st = ft_etcd_txn(ft->e, &c, 1, op, 2, &ok, &rev);
    if (st != HSR_OK) break;
    if (ok) {
      ft->my_rev = rev;
      *final = 1;
      break;
    }
    ft_kvs k, qk = {0};
    st = ft_etcd_get(ft->e, mk, 0, &k);
    if (st == HSR_OK && k.n && k.kv[0].lease == ft->lease) { /* a retried put that had landed */
      ft->my_rev = k.kv[0].mod_rev;
      *final = 1;
      ft_kvs_free(&k);
      break;
    }
    if (st == HSR_OK && k.n) st = ft_etcd_get(ft->e, FT_PREFIX "q", 0, &qk);
    if (st != HSR_OK) {
      ft_kvs_free(&k);
      break;
    }
    /* the record of a group the quorum has dropped since (a restart before its
     * lease ran out): replaced, not waited for; a group still in the quorum is
     * waited for (it may be alive) */
    ft_quorum q;
    if (k.n && qk.n && qk.kv[0].mod_rev > k.kv[0].mod_rev && ft_quorum_parse(qk.kv[0].val, &q) == HSR_OK &&
        ft_quorum_index(&q, ft->c.replica_id) < 0) {
      ft_cmp c2 = {mk, FT_CMP_MOD, k.kv[0].mod_rev, 0};
      int64_t rev = 0;
      st = ft_etcd_txn(ft->e, &c2, 1, op, 2, &ok, &rev);
      ft_kvs_free(&qk);
      ft_kvs_free(&k);
      if (st == HSR_OK && ok) {
        ft->my_rev = rev;
        *final = 1;
        break;
      }
      continue;
    }
    ft_kvs_free(&qk);
    if (clock_s() > end) {
      char host[64] = "?";
      int pid = 0;
      if (k.n) {
        ft_rec r = {0};
        if (parse_rec(&k.kv[0], &r) == HSR_OK) snprintf(host, sizeof host, "%s", r.host), pid = r.pid;
        free(r.js);
      }
      st = hsr_error(HSR_ERR_INVALID, "replica %d is already running (host %s, pid %d): give another --replica-id",
                     ft->c.replica_id, host, pid);
    } else if (clock_s() >= until) {
      ft_kvs_free(&k);
      break; /* a heartbeat to the group, then on */
    } else {
      int ch;
      st = ft_etcd_watch(ft->e, mk, k.rev + 1, until - clock_s(), &ch);
    }
    ft_kvs_free(&k);
  }
  free(mine), free(extra);
  if (*final) ft->t_begin = clock_s(); /* the quorum's wait starts */
  return st;
}

hsr_status ft_lead_register(hsr_ft *ft, int64_t done, uint64_t hash, double until, int *final) {
  if (ft->t_reg <= 0) ft->t_reg = clock_s();
  hsr_status st = lead_register(ft, done, hash, until, final);
  /* a busy coordinator (many groups starting at once) is asked again after a heartbeat; refusals are
   * HSR_ERR_INVALID and end the start at once */
  if (st != HSR_OK && is_coord_error(st) && clock_s() < ft->t_reg + start_limit(ft)) {
    start_backoff(ft, until);
    return HSR_OK;
  }
  return st;
}

/* ---- the quorum's formation and admission ---- */

static void note_revs(hsr_ft *ft, const ft_quorum *q) {
  ka_note(ft, q);
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(q, p);
  for (int i = 0; i < n; i++) ft->part_rev[p[i]] = ft->rec[p[i]].present ? ft->rec[p[i]].rev : -1;
  ft->part_rev[ft->c.replica_id] = ft->my_rev;
}

/* The UCX addresses of q's participants that this leader does not hold for
 * their current records: one read of the address keys written since the
 * oldest of them (a start: every one, once). Only a group with a data plane
 * connects to its peers (hsr bench ft's simulated groups have none). */
static hsr_status load_addrs(hsr_ft *ft, const ft_quorum *q) {
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(q, p);
  int64_t oldest = 0;
  for (int i = 0; i < n; i++) {
    const ft_rec *r = &ft->rec[p[i]];
    if (p[i] == ft->c.replica_id || !r->present || (r->addrs && r->arev == r->rev)) continue;
    oldest = oldest && oldest < r->rev ? oldest : r->rev;
  }
  if (!oldest) return HSR_OK;
  ft_kvs k;
  ft_range rg = {FT_PREFIX "x/", 1, 0, oldest, 0, 0};
  HSR_CHECK(ft_etcd_read(ft->e, &rg, 1, &k));
  size_t xl = strlen(FT_PREFIX "x/");
  hsr_status st = HSR_OK;
  for (int i = 0; i < k.n && st == HSR_OK; i++) {
    int id = atoi(k.kv[i].key + xl);
    ft_rec *r = id >= 0 && id < FT_MAX_REPLICAS ? &ft->rec[id] : NULL;
    if (!r || !r->present || k.kv[i].mod_rev != r->rev) continue; /* not the record held: the next read's */
    cJSON *o = cJSON_Parse(k.kv[i].val);
    const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "addrs") : NULL;
    char *as = cJSON_IsArray(a) ? cJSON_PrintUnformatted(a) : NULL;
    if (as) {
      free(r->addrs);
      r->addrs = as, r->arev = r->rev;
    } else {
      st = hsr_error(HSR_ERR_IO, "coordinator: '%s' holds no addresses", k.kv[i].key);
    }
    cJSON_Delete(o);
  }
  ft_kvs_free(&k);
  return st;
}

/* The blob; with_addrs: the participants' addresses in it (its ranks connect). */
static hsr_status make_blob(hsr_ft *ft, const ft_quorum *q, const char *extra, int with_addrs, char **blob) {
  if (with_addrs && ft->peers) HSR_CHECK(load_addrs(ft, q));
  char *qs = NULL;
  HSR_CHECK(ft_quorum_json(q, &qs));
  cJSON *o = extra ? cJSON_Parse(extra) : cJSON_CreateObject();
  if (!o) o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "q", cJSON_Parse(qs));
  free(qs);
  cJSON *ad = cJSON_AddObjectToObject(o, "addrs");
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(q, p);
  for (int i = 0; i < n; i++) {
    const ft_rec *r = &ft->rec[p[i]];
    if (p[i] == ft->c.replica_id || !r->present || !r->addrs || r->arev != r->rev) continue;
    char id[16];
    snprintf(id, sizeof id, "%d", p[i]);
    cJSON_AddItemToObject(ad, id, cJSON_Parse(ft->rec[p[i]].addrs));
  }
  *blob = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return *blob ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
}

hsr_status ft_lead_blob(hsr_ft *ft, const ft_quorum *q, const char *extra, char **blob) {
  return make_blob(ft, q, extra, 1, blob);
}

/* Every group started: the first leader to see all N records writes the
 * quorum (the others see it written). */
static hsr_status form(hsr_ft *ft, int *formed) {
  *formed = 0;
  int N = ft->c.replicas, start = -1;
  int64_t s0 = 0;
  for (int id = 0; id < N; id++) {
    if (!ft->rec[id].present || ft->rec[id].join) return HSR_OK;
    if (start < 0) s0 = ft->rec[id].start, start = id;
    if (ft->rec[id].start != s0)
      return hsr_error(HSR_ERR_INVALID,
                       "replica %d starts after %" PRId64 " steps and replica %d after %" PRId64
                       ": start every replica group from the same checkpoint (--resume), or restart this one with "
                       "--join",
                       id, ft->rec[id].start, start, s0);
    if (strcmp(ft->rec[id].start_hash, ft->rec[start].start_hash))
      return hsr_error(HSR_ERR_INVALID,
                       "replica %d starts from another state than replica %d after %" PRId64
                       " steps (state_hash %s, %s): start every group from the same checkpoint",
                       id, start, s0, ft->rec[id].start_hash, ft->rec[start].start_hash);
  }
  ft_quorum q = {0};
  q.epoch = (ft->qpresent ? ft->qkey.epoch : 0) + 1;
  q.done = s0;
  for (int id = 0; id < N; id++) q.mem[q.nmem++] = id;
  char *qs = NULL, qk[KEY_MAX] = FT_PREFIX "q", ve[KEY_MAX] = FT_PREFIX "w", ae[KEY_MAX] = FT_PREFIX "b",
       de[KEY_MAX] = FT_PREFIX "e", re[KEY_MAX] = FT_PREFIX "s";
  HSR_CHECK(ft_quorum_json(&q, &qs));
  /* and every member's record revision, so that the others need not read N records to begin the epoch */
  cJSON *qo = cJSON_Parse(qs), *rv = qo ? cJSON_AddArrayToObject(qo, "revs") : NULL;
  for (int id = 0; rv && id < N; id++) cJSON_AddItemToArray(rv, cJSON_CreateNumber((double)ft->rec[id].rev));
  char *qr = qo ? cJSON_PrintUnformatted(qo) : NULL;
  cJSON_Delete(qo);
  if (qr) free(qs), qs = qr;
  ft_cmp c = {qk, FT_CMP_MOD, ft->qmod, 0};
  ft_op ops[5] = {{FT_OP_PUT, qk, qs, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "v/", ve, 0}, /* a previous run's votes, markers and hashes */
                  {FT_OP_DELETE_RANGE, FT_PREFIX "a/", ae, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "d/", de, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "r/", re, 0}};
  int ok = 0;
  hsr_status st = ft_etcd_txn(ft->e, &c, 1, ops, 5, &ok, NULL);
  free(qs);
  *formed = st == HSR_OK;
  return st;
}

static hsr_status wait_quorum(hsr_ft *ft, double until, double limit, int *final, char **blob, int *coord);

hsr_status ft_lead_wait_quorum(hsr_ft *ft, void *arg, double until, int *final, char **blob) {
  (void)arg;
  *final = 0;
  double limit = ft->t_begin + start_limit(ft);
  int coord = 0;
  hsr_status st = wait_quorum(ft, until, limit, final, blob, &coord);
  /* a busy coordinator (many groups starting at once) is asked again after a heartbeat, up to the limit */
  if (st != HSR_OK && coord && is_coord_error(st) && clock_s() < limit) {
    start_backoff(ft, until);
    return HSR_OK;
  }
  return st;
}

/* In the quorum: the blob for the group, the steps' slices and bound. */
static hsr_status admitted(hsr_ft *ft, int *final, char **blob, int *coord) {
  *coord = 1; /* the addresses' read */
  HSR_CHECK(ft_lead_blob(ft, &ft->q, NULL, blob));
  pthread_mutex_lock(&ft->mu);
  ft->ka_read = 1; /* from now on its keep-alive thread looks for joiners */
  pthread_mutex_unlock(&ft->mu);
  ft->slice = 0;
  /* a request may take a start's slice: N groups going to the vote at once keep the coordinator busy for that
   * long, and a request retried after a second would add to what it has yet to answer */
  ft_etcd_set_deadline(ft->e, start_slice(ft));
  *final = 1;
  return HSR_OK;
}

/* A starter that waited: the quorum key formed with this group as a member,
 * which carries every member's record revision; the records as they were
 * when it was written are then known without reading them (a later read
 * takes those written since, and lists the keys if some went). */
static int adopt_formed(hsr_ft *ft, const ft_kv *kv) {
  ft_quorum q;
  cJSON *o = cJSON_Parse(kv->val);
  const cJSON *rv = o ? cJSON_GetObjectItemCaseSensitive(o, "revs") : NULL;
  int ok = cJSON_IsArray(rv) && ft_quorum_parse(kv->val, &q) == HSR_OK && kv->mod_rev > ft->my_rev &&
           ft_quorum_is_member(&q, ft->c.replica_id) && q.njoin == 0 && cJSON_GetArraySize(rv) == q.nmem;
  for (int i = 0; ok && i < q.nmem; i++) {
    const cJSON *r = cJSON_GetArrayItem(rv, i);
    ok = cJSON_IsNumber(r) && q.mem[i] >= 0 && q.mem[i] < FT_MAX_REPLICAS &&
         (q.mem[i] != ft->c.replica_id || (int64_t)r->valuedouble == ft->my_rev);
  }
  for (int i = 0; ok && i < q.nmem; i++) {
    ft_rec *r = &ft->rec[q.mem[i]];
    r->rev = (int64_t)cJSON_GetArrayItem(rv, i)->valuedouble;
  }
  cJSON_Delete(o);
  if (!ok) return 0;
  int n = 0;
  for (int id = 0; id < FT_MAX_REPLICAS; id++) n += ft->rec[id].present = ft_quorum_index(&q, id) >= 0;
  ft->qkey = q;
  ft->qpresent = 1;
  ft->qmod = kv->mod_rev;
  ft->m_rev = kv->mod_rev;
  ft->m_count = n; /* etcd's count then, unless other records were there: the next read lists them */
  ft->read_stale = 1;
  pthread_mutex_lock(&ft->mu);
  ft->ka_base = kv->mod_rev;
  ft->ka_count = n;
  ft->ka_nnew = 0;
  pthread_mutex_unlock(&ft->mu);
  return 1;
}

/* *coord: the error is a coordinator call's */
static hsr_status wait_quorum(hsr_ft *ft, double until, double limit, int *final, char **blob, int *coord) {
  for (;;) {
    /* a starter that does not form the quorum reads the records again only when the quorum key changed (or
     * for its messages): the quorum key and the records' count, then a watch of the key for the slice (etcd
     * reads every record of a range it is asked for: N groups reading them each slice cost O(N^2)) */
    int former = !ft->c.join;
    for (int id = 0; id < ft->c.replica_id && former; id++) former = !ft->rec[id].present;
    double now = clock_s();
    if (!former && !ft->c.join && ft->m_rev > 0 && now < limit && (ft->said_waiting || now - ft->t_begin <= 5)) {
      if (ft->qw_rev > 0) { /* the key was as held at qw_rev: a watch from there, no read (N groups, each slice) */
        int ch;
        hsr_status st = ft_etcd_watch(ft->e, FT_PREFIX "q", ft->qw_rev + 1, (until < limit ? until : limit) - now, &ch);
        *coord = st != HSR_OK;
        HSR_CHECK(st);
        if (!ch) return HSR_OK; /* the slice is over */
        ft->qw_rev = 0;
      }
      ft_kvs k;
      ft_range rg = {FT_PREFIX "q", 0, 0, 0, 0, 0};
      hsr_status st = ft_etcd_read(ft->e, &rg, 1, &k);
      *coord = st != HSR_OK;
      HSR_CHECK(st);
      int64_t qm = k.n ? k.kv[0].mod_rev : 0, rev = k.rev;
      int took = qm != ft->qmod && qm > ft->m_rev && adopt_formed(ft, &k.kv[0]);
      ft_kvs_free(&k);
      if (took) {
        ft->q = ft->qkey;
        note_revs(ft, &ft->q);
        return admitted(ft, final, blob, coord);
      }
      if (qm == ft->qmod) {
        int ch;
        ft->qw_rev = rev;
        st = ft_etcd_watch(ft->e, FT_PREFIX "q", rev + 1, (until < limit ? until : limit) - clock_s(), &ch);
        *coord = st != HSR_OK;
        HSR_CHECK(st);
        if (!ch) return HSR_OK; /* the slice is over */
        ft->qw_rev = 0;
        continue;
      }
    }
    view v;
    hsr_status st = read_all(ft, &v, 0);
    if (st != HSR_OK) {
      view_free(&v);
      *coord = 1;
      return st;
    }
    int64_t rev = v.kvs.rev;
    view_free(&v);
    /* a quorum written after this group registered that holds it: as a
     * member (formed) or a joiner (admitted) */
    int me = ft->c.replica_id;
    if (ft->qpresent && ft->qmod > ft->my_rev &&
        (ft->c.join ? ft_quorum_healer_of(&ft->qkey, me) >= 0 : ft_quorum_is_member(&ft->qkey, me))) {
      ft->q = ft->qkey;
      note_revs(ft, &ft->q);
      return admitted(ft, final, blob, coord);
    }
    if (!ft->c.join) {
      if (quorum_live(ft) && ft_quorum_index(&ft->qkey, ft->c.replica_id) < 0)
        return hsr_error(HSR_ERR_INVALID, "replica %d cannot start: a quorum formed without it; restart it with --join",
                         ft->c.replica_id);
      int formed = 0;
      st = form(ft, &formed);
      *coord = st != HSR_OK;
      HSR_CHECK(st);
      if (formed) continue;
    } else if (!quorum_live(ft)) {
      return hsr_error(HSR_ERR_STATE, "replica %d: every live replica group left before admitting this one",
                       ft->c.replica_id);
    }
    now = clock_s();
    if (now - ft->t_begin > 5 && !ft->said_waiting) { /* a line, once, while a slow start keeps the group waiting */
      int miss[FT_MAX_REPLICAS], n = 0;
      for (int id = 0; id < ft->c.replicas && !ft->c.join; id++)
        if (!ft->rec[id].present) miss[n++] = id;
      char m[256];
      ft_ids_text(miss, n, m, sizeof m);
      if (ft->c.join)
        printf("replica group %d: waiting to be admitted by the running groups (up to %.0f s)\n", ft->c.replica_id,
               limit - ft->t_begin);
      else
        printf("replica group %d: waiting for replica(s) %s to register (up to %.0f s)\n", ft->c.replica_id, m,
               limit - ft->t_begin);
      fflush(stdout);
      ft->said_waiting = 1;
    }
    if (now >= limit) {
      int miss[FT_MAX_REPLICAS], n = 0;
      for (int id = 0; id < ft->c.replicas; id++)
        if (!ft->rec[id].present) miss[n++] = id;
      char m[256];
      ft_ids_text(miss, n, m, sizeof m);
      if (ft->c.join)
        return hsr_error(HSR_ERR_TIMEOUT, "replica %d was not admitted within %.0f s (are the running groups stuck?)",
                         ft->c.replica_id, limit - ft->t_begin);
      return hsr_error(HSR_ERR_TIMEOUT, "the quorum did not form within %.0f s: replica(s) %s never registered",
                       limit - ft->t_begin, m);
    }
    if (now >= until) return HSR_OK;
    /* only the group that forms the quorum (the smallest id registered) wakes on every registration; the
     * others on the quorum key, and read again each slice (the records written since their last read): N
     * groups starting at once would otherwise each read the store on every other's registration */
    former = !ft->c.join;
    for (int id = 0; id < ft->c.replica_id && former; id++) former = !ft->rec[id].present;
    if (!former && !ft->c.join) continue; /* the quorum key, then its watch */
    int ch, nmiss = 0;
    for (int id = 0; id < ft->c.replicas; id++) nmiss += !ft->rec[id].present;
    if (former && nmiss > 64) /* many to come: a pause lets a few register (each read takes those since the last) */
      nap_until(now + 0.05 < until ? now + 0.05 : until);
    now = clock_s();
    st = ft_etcd_watch(ft->e, former ? FT_PREFIX : FT_PREFIX "q", rev + 1, (until < limit ? until : limit) - now, &ch);
    *coord = st != HSR_OK;
    HSR_CHECK(st);
  }
}

/* ---- the vote and the decision ---- */

/* A decision every rank acts on: a JSON object merged into the blob. */
static hsr_status decision(hsr_ft *ft, const ft_quorum *next, int commit, int stop, int coord_lost, const char *line,
                           char **blob) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "commit", commit);
  cJSON_AddNumberToObject(o, "stop", stop);
  cJSON_AddNumberToObject(o, "coord_lost", coord_lost);
  cJSON_AddStringToObject(o, "line", line);
  char *ex = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!ex) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = make_blob(ft, next, ex, !stop, blob); /* a group that stops connects to none */
  free(ex);
  return st;
}

static hsr_status coord_lost(hsr_ft *ft, char **blob) {
  char line[1024];
  snprintf(line, sizeof line,
           "the coordinator is unreachable (%.700s): step %" PRId64 " is dropped (no vote is possible), this group "
           "stops",
           hsr_last_error(), ft->q.done + 1);
  ft->voted = 0;
  return decision(ft, &ft->q, 0, 1, 1, line, blob);
}

/* A vote that is not written reads, at that revision, what the group then
 * needs (vote_frozen's keys), in the same request. */
static void frozen_keys(const hsr_ft *ft, char mk[KEY_MAX], char ak[KEY_MAX], char pk[KEY_MAX], char rk[KEY_MAX],
                        ft_range rg[4]) {
  key_member(mk, ft->c.replica_id);
  key_abort(ak, ft->q.done + 1, ft->q.epoch);
  key_abort(pk, ft->q.done, ft->q.epoch);
  key_result(rk, ft->q.done + 1, ft->q.epoch);
  rg[0] = (ft_range){mk, 0, 1, 0, 0, 0}, rg[1] = (ft_range){ak, 0, 1, 0, 0, 0};
  rg[2] = (ft_range){pk, 0, 1, 0, 0, 0}, rg[3] = (ft_range){rk, 0, 0, 0, 0, 0};
}

static hsr_status write_vote(hsr_ft *ft, const ft_outcome *o, int *written, int64_t *rev, ft_kvs *fk) {
  ft_vote v = {0};
  v.id = ft->c.replica_id;
  v.ok = o->ok;
  v.healed = o->healed;
  v.ncul = o->n;
  memcpy(v.cul, o->culprit, sizeof v.cul);
  v.nseen = ft->nseen;
  memcpy(v.seen, ft->seen, sizeof v.seen);
  v.hs = ft->hash_step;
  v.h = ft->hash;
  snprintf(v.why, sizeof v.why, "%s", o->why);
  char *js = NULL, vk[KEY_MAX], ak[KEY_MAX], mk[KEY_MAX], vend[KEY_MAX], aend[KEY_MAX], rend[KEY_MAX];
  HSR_CHECK(ft_vote_json(&v, &js));
  int64_t s = ft->q.done + 1;
  key_vote(vk, s, ft->q.epoch, v.id);
  key_abort(ak, s, ft->q.epoch);
  key_member(mk, v.id);
  /* every group has decided the steps before the previous one: their votes go */
  snprintf(vend, sizeof vend, FT_PREFIX "v/%010" PRId64, s - 1);
  snprintf(aend, sizeof aend, FT_PREFIX "a/%010" PRId64, s - 1);
  snprintf(rend, sizeof rend, FT_PREFIX "r/%010" PRId64, s - 1);
  /* nor the previous step's marker: a group that committed that step through the exchange while the others
   * dropped it in the coordinator (they named it: write_abort) is out, and learns it here */
  char pk[KEY_MAX];
  key_abort(pk, s - 1, ft->q.epoch);
  /* and no decision yet (one that committed the step for a vote on the next, with no marker) */
  char rk[KEY_MAX];
  key_result(rk, s, ft->q.epoch);
  ft_cmp c[4] = {{ak, FT_CMP_CREATE, 0, 0},
                 {mk, FT_CMP_MOD, ft->my_rev, 0},
                 {pk, FT_CMP_CREATE, 0, 0},
                 {rk, FT_CMP_CREATE, 0, 0}};
  ft_op ops[5] = {{FT_OP_PUT, vk, js, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "v/", vend, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "a/", aend, 0},
                  {FT_OP_DELETE_RANGE, FT_PREFIX "r/", rend, 0}};
  /* the decider of the previous step committed it through the exchange: groups in doubt about it wait for its
   * decision, which this vote proves (a commit, the quorum unchanged); written with it, since a marker of that
   * step (pk) and this vote exclude each other */
  int p[FT_MAX_REPLICAS], nop = 4;
  char prk[KEY_MAX], *ps = NULL;
  hsr_status st = HSR_OK;
  if (ft->xchg_done == s - 1 && ft_quorum_parts(&ft->q, p) > 1 && p[0] == v.id) {
    ft_decision *d = calloc(1, sizeof *d);
    if (!d) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    if (d) {
      d->commit = 1;
      d->next = ft->q; /* after s - 1 steps */
      st = ft_decision_json(d, &ps);
      free(d);
    }
    key_result(prk, s - 1, ft->q.epoch);
    ops[nop++] = (ft_op){FT_OP_PUT, prk, ps, 0};
  }
  char fm[KEY_MAX], fa[KEY_MAX], fp[KEY_MAX], fr[KEY_MAX];
  ft_range frg[4];
  frozen_keys(ft, fm, fa, fp, fr, frg);
  if (st == HSR_OK) st = ft_etcd_txn_else(ft->e, c, 4, ops, nop, frg, 4, written, rev, fk);
  free(js), free(ps);
  return st;
}

static hsr_status write_abort(hsr_ft *ft, const int *gone, int ngone, const char *why) {
  char ak[KEY_MAX], vk[FT_MAX_CULPRITS + 2][KEY_MAX];
  int64_t s = ft->q.done + 1;
  key_abort(ak, s, ft->q.epoch);
  ft_cmp c[FT_MAX_CULPRITS + 2];
  int nc = 0;
  c[nc++] = (ft_cmp){ak, FT_CMP_CREATE, 0, 0};
  /* and no vote on the next step in this epoch: its group committed this step through the exchange */
  key_votes(vk[nc], s + 1, ft->q.epoch);
  c[nc] = (ft_cmp){vk[nc], FT_CMP_CREATE, 0, 1};
  nc++;
  cJSON *o = cJSON_CreateObject(), *g = cJSON_AddArrayToObject(o, "gone");
  cJSON_AddNumberToObject(o, "by", ft->c.replica_id);
  cJSON_AddStringToObject(o, "why", why);
  for (int i = 0; i < ngone; i++) { /* gone: the abort holds only while none of their votes exists */
    cJSON_AddItemToArray(g, cJSON_CreateNumber(gone[i]));
    if (nc == FT_MAX_CULPRITS + 2) continue;
    key_vote(vk[nc], s, ft->q.epoch, gone[i]);
    c[nc] = (ft_cmp){vk[nc], FT_CMP_CREATE, 0, 0};
    nc++;
  }
  char *val = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!val) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  ft_op op = {FT_OP_PUT, ak, val, 0};
  int ok;
  hsr_status st = ft_etcd_txn(ft->e, c, nc, &op, 1, &ok, NULL);
  free(val);
  return st;
}

/* The decision applied on this group: the line, the next quorum's record
 * revisions (the decider's, for the participants whose revision it does not
 * share with every group), the blob. Every group applies the same decision. */
static hsr_status apply_decision(hsr_ft *ft, const ft_decision *d, char **blob) {
  char line[1024] = "";
  ft->voted = 0;
  ft->deciding = 0;
  ft->read_stale = 1; /* the next vote reads the joiners waiting first */
  if (d->mismatch) {
    snprintf(line, sizeof line,
             "the training state differs between replica groups: after %" PRId64 " steps replica %d has state_hash "
             "%016" PRIx64 " and replica %d %016" PRIx64 " (a bug: every group stops)",
             d->mm_step, d->mm_a, d->mm_ha, d->mm_b, d->mm_hb);
    return decision(ft, &ft->q, 0, 1, 0, line, blob);
  }
  int stay = ft_quorum_index(&d->next, ft->c.replica_id) >= 0;
  if (!d->commit) {
    char what[400];
    snprintf(what, sizeof what, "%s%s%s", d->reason[0] ? " (" : "", d->reason, d->reason[0] ? ")" : "");
    if (stay)
      snprintf(line, sizeof line, "step %" PRId64 " dropped on every replica%.400s: %.400s; the step runs again",
               ft->q.done + 1, what, d->why);
    else
      snprintf(line, sizeof line,
               "replica %d was dropped from the quorum at step %" PRId64 "%s; restart it with --join to heal from "
               "the others",
               ft->c.replica_id, ft->q.done + 1, what);
  } else if (d->why[0]) {
    snprintf(line, sizeof line, "after step %" PRId64 ": %.900s", ft->q.done + 1, d->why);
  }
  for (int i = 0; i < d->nrev; i++) {
    int id = d->rev_id[i];
    if (id == ft->c.replica_id) continue;
    ft->part_rev[id] = d->rev[i];
    if (d->rev[i] > 0) ft->rec[id].present = 1, ft->rec[id].rev = d->rev[i];
  }
  ft->part_rev[ft->c.replica_id] = ft->my_rev;
  pthread_mutex_lock(&ft->mu); /* the keep-alive thread looks for records written after the decider's read */
  if (d->base > ft->ka_base) ft->ka_base = d->base, ft->ka_count = d->count, ft->ka_nnew = 0;
  pthread_mutex_unlock(&ft->mu);
  ka_note(ft, &d->next);
  return decision(ft, &d->next, d->commit, !stay, 0, line, blob);
}

/* The decider's: the record revisions of next's participants that not
 * every group holds (a joiner's; a participant's that changed), as this
 * group read them. */
static void decision_revs(const hsr_ft *ft, ft_decision *d) {
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(&d->next, p);
  d->nrev = 0;
  for (int i = 0; i < n; i++) {
    int64_t r = ft->rec[p[i]].present ? ft->rec[p[i]].rev : -1;
    if (p[i] == ft->c.replica_id || (ft_quorum_index(&ft->q, p[i]) >= 0 && r == ft->part_rev[p[i]])) continue;
    d->rev_id[d->nrev] = p[i], d->rev[d->nrev++] = r;
  }
}

/* The decider writes the decision once (r/S/E), and the next quorum when
 * the membership changed, only while what it decided from still holds:
 * no decision yet, the abort marker as it read it (absent, or the same),
 * the quorum key as it read it. The votes cannot change once frozen (every
 * participant voted, or the marker exists), so a decision written is the
 * one every group would compute. *ok = 0: something changed; read again. */
static hsr_status write_decision(hsr_ft *ft, const ft_decision *d, int64_t arev, int *ok) {
  char rk[KEY_MAX], ak[KEY_MAX], qk[KEY_MAX] = FT_PREFIX "q", *ds = NULL, *qs = NULL;
  int64_t s = ft->q.done + 1;
  key_result(rk, s, ft->q.epoch);
  key_abort(ak, s, ft->q.epoch);
  HSR_CHECK(ft_decision_json(d, &ds));
  int newq = d->next.epoch != ft->q.epoch && !d->mismatch;
  hsr_status st = newq ? ft_quorum_json(&d->next, &qs) : HSR_OK;
  ft_cmp c[3] = {{rk, FT_CMP_CREATE, 0, 0}, {ak, FT_CMP_CREATE, arev, 0}, {qk, FT_CMP_MOD, ft->qmod, 0}};
  ft_op ops[2] = {{FT_OP_PUT, rk, ds, 0}, {FT_OP_PUT, qk, qs, 0}};
  if (st == HSR_OK) st = ft_etcd_txn(ft->e, c, newq ? 3 : 2, ops, newq ? 2 : 1, ok, NULL);
  free(ds), free(qs);
  return st;
}

/* The decision in r/S/E applied (malloc'd: a decision holds a quorum). */
static hsr_status apply_result(hsr_ft *ft, const char *js, char **blob) {
  ft_decision *d = malloc(sizeof *d);
  if (!d) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = ft_decision_parse(js, d);
  if (st == HSR_OK) st = apply_decision(ft, d, blob);
  free(d);
  return st;
}

int ft_lead_fast_ok(hsr_ft *ft) {
  /* a coordinator that does not answer does not stop it: only a membership change needs the coordinator */
  pthread_mutex_lock(&ft->mu);
  int ok = !ft->lease_lost;
  for (int i = 0; i < ft->ka_nnew && ok; i++)
    ok = ft->ka_new[i] == ft->c.replica_id || ft_quorum_index(&ft->q, ft->ka_new[i]) >= 0;
  pthread_mutex_unlock(&ft->mu);
  return ok;
}

/* A coordinator error in the vote: retried in the next slice (each call is
 * bounded by a heartbeat's period) until the failures have lasted ft->T;
 * then no vote is possible. Other errors are hsr's own. */
static hsr_status vote_error(hsr_ft *ft, hsr_status st, int *final, char **blob) {
  if (!is_coord_error(st)) {
    *final = 1;
    return st;
  }
  double now = clock_s();
  if (ft->coord_fail_since <= 0) ft->coord_fail_since = now;
  if (now - ft->coord_fail_since < ft->T) return HSR_OK; /* a heartbeat to the group, then again */
  *final = 1;
  ft->coord_fail_since = 0;
  return coord_lost(ft, blob);
}

/* A participant that does not decide waits for the step's decision, one
 * small key (r/S/E): it reads it, or watches it for the slice. It takes
 * over deciding when every participant before it in id order is gone (their
 * records went or were replaced; only the first FT_MAX_CULPRITS look), and
 * every one does once the votes' bound and half more passed with no
 * decision: a decider that died does not leave the step undecided. */
static hsr_status await_decision(hsr_ft *ft, double until, int *final, char **blob) {
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(&ft->q, p), at = 0;
  for (int i = 0; i < n; i++)
    if (p[i] == ft->c.replica_id) at = i;
  int nb = at <= FT_MAX_CULPRITS ? at : 0;
  char rk[KEY_MAX], mk[FT_MAX_CULPRITS][KEY_MAX];
  /* a watch window of the start's slice (a third of the bound, at most 5 s): N groups waiting cost a watch each
   * that long, not a read and a watch each heartbeat */
  double now = clock_s(), fall = ft->t_voted + (ft->doubt ? 2 : 1) * ft->T + ft->T / 2,
         win = now + start_slice(ft) > until ? now + start_slice(ft) : until;
  if (win > fall) win = fall;
  if (ft->rk_rev > 0 && !nb && now < fall) { /* the key was absent at rk_rev: a watch from there, no read */
    int ch;
    key_result(rk, ft->q.done + 1, ft->q.epoch);
    HSR_CHECK(ft_etcd_watch(ft->e, rk, ft->rk_rev + 1, win - now, &ch));
    if (!ch) return HSR_OK;
    ft->rk_rev = 0;
  }
  ft_range rg[1 + FT_MAX_CULPRITS];
  key_result(rk, ft->q.done + 1, ft->q.epoch);
  rg[0] = (ft_range){rk, 0, 0, 0, 0, 0};
  for (int i = 0; i < nb; i++) {
    key_member(mk[i], p[i]);
    rg[1 + i] = (ft_range){mk[i], 0, 1, 0, 0, 0};
  }
  ft_kvs k;
  HSR_CHECK(ft_etcd_read(ft->e, rg, 1 + nb, &k));
  const ft_kv *r = ft_kvs_find(&k, rk);
  hsr_status st = HSR_OK;
  if (r) {
    st = apply_result(ft, r->val, blob);
    if (st == HSR_OK) *final = 1;
    ft_kvs_free(&k);
    return st;
  }
  int before_gone = nb > 0;
  for (int i = 0; i < nb && before_gone; i++) {
    const ft_kv *m = ft_kvs_find(&k, mk[i]);
    before_gone = !m || m->mod_rev != ft->part_rev[p[i]];
  }
  int64_t rev = k.rev;
  ft_kvs_free(&k);
  now = clock_s();
  if (before_gone || now >= fall) {
    ft->deciding = 1;
    return HSR_OK;
  }
  int ch;
  ft->rk_rev = rev;
  HSR_CHECK(ft_etcd_watch(ft->e, rk, rev + 1, (nb ? (until < fall ? until : fall) : win) - now, &ch));
  if (ch) ft->rk_rev = 0;
  return HSR_OK;
}

hsr_status ft_lead_vote(hsr_ft *ft, void *arg, double until, int *final, char **blob) {
  const ft_outcome *o = arg;
  *final = 0;
  hsr_status st = HSR_OK;
  ft_kvs fk = {0}; /* what a vote that was not written read instead */
  int have_fk = 0;
  if (!ft->voted) {
    int lost;
    pthread_mutex_lock(&ft->mu);
    lost = ft->lease_lost;
    pthread_mutex_unlock(&ft->mu);
    int written = 0;
    int p[FT_MAX_REPLICAS];
    ft_quorum_parts(&ft->q, p);
    ft->deciding = p[0] == ft->c.replica_id;
    ft->rk_rev = 0;
    /* the decider's vote names the joiners waiting (it reads the records first: the last read may be steps ago);
     * the others' name none, so that N voters do not each read the store before voting */
    if (!ft->deciding) ft->nseen = 0;
    if (!lost && ft->read_stale && ft->deciding) {
      view v;
      st = read_all(ft, &v, 0);
      view_free(&v);
      if (st != HSR_OK) return vote_error(ft, st, final, blob);
    }
    int64_t vrev = 0;
    if (!lost) st = write_vote(ft, o, &written, &vrev, &fk);
    have_fk = st == HSR_OK && !lost && !written;
    if (st != HSR_OK) return vote_error(ft, st, final, blob); /* a retry writes the same vote */
    ft->coord_fail_since = 0;
    ft->voted = 1;
    ft->t_voted = clock_s();
    ft->vote_written = written && !lost;
    /* the smallest participant decides: it reads the votes as they come and writes the decision (r/S/E) once;
     * the others watch that key alone (absent when the vote was written: from there). N groups each reading
     * every vote would cost O(N^2) bytes a step */
    if (ft->vote_written) ft->rk_rev = vrev;
  }
  if (!ft->vote_written) { /* the record is gone, or the votes were frozen without this one */
    /* its own record, the step's marker and decision, the previous step's marker: a few keys (N groups whose
     * votes found the marker read no records) */
    char mk[KEY_MAX], ak[KEY_MAX], pk[KEY_MAX], rk[KEY_MAX];
    ft_range rg[4];
    frozen_keys(ft, mk, ak, pk, rk, rg);
    ft_kvs k = fk;
    if (!have_fk) st = ft_etcd_read(ft->e, rg, 4, &k);
    if (st != HSR_OK) return vote_error(ft, st, final, blob);
    const ft_kv *r = ft_kvs_find(&k, rk), *m = ft_kvs_find(&k, mk);
    if (r) { /* decided without it */
      st = apply_result(ft, r->val, blob);
      ft_kvs_free(&k);
      if (st != HSR_OK) return vote_error(ft, st, final, blob);
      *final = 1;
      return HSR_OK;
    }
    int mine = m && m->mod_rev == ft->my_rev, aborted = ft_kvs_find(&k, ak) != NULL,
        prev = ft_kvs_find(&k, pk) != NULL, lost;
    int64_t krev = k.rev;
    ft_kvs_free(&k);
    pthread_mutex_lock(&ft->mu);
    lost = ft->lease_lost;
    pthread_mutex_unlock(&ft->mu);
    if (mine && !lost && prev) { /* it committed the last step through the exchange; the others dropped it */
      char line[512];
      snprintf(line, sizeof line,
               "replica %d was dropped from the quorum at step %" PRId64 ": the others could not complete the step's "
               "commit exchange with it and dropped the step, which it had committed; restart it with --join",
               ft->c.replica_id, ft->q.done);
      ft->voted = 0;
      *final = 1;
      return decision(ft, &ft->q, 0, 1, 0, line, blob);
    }
    if (!mine || lost || !aborted) {
      char line[512];
      snprintf(line, sizeof line,
               "replica %d was dropped from the quorum at step %" PRId64 ": its lease expired (was the group stopped "
               "or cut off from the coordinator for more than %d s?); restart it with --join",
               ft->c.replica_id, ft->q.done + 1, lease_ttl(ft));
      ft->voted = 0;
      *final = 1;
      return decision(ft, &ft->q, 0, 1, 0, line, blob);
    }
    ft->vote_written = 1; /* frozen without it: decide from the others' (no decision at krev: watched from there) */
    ft->rk_rev = krev;
  }
  for (;;) {
    if (clock_s() >= until) return HSR_OK; /* a heartbeat to the group, then on */
    if (!ft->deciding) {
      st = await_decision(ft, until, final, blob);
      if (st != HSR_OK) return vote_error(ft, st, final, blob);
      ft->coord_fail_since = 0;
      if (*final) return HSR_OK;
      continue;
    }
    view v;
    st = read_all(ft, &v, 1);
    if (st != HSR_OK) {
      view_free(&v);
      return vote_error(ft, st, final, blob);
    }
    ft->coord_fail_since = 0;
    if (v.result) { /* decided (another group took over) */
      st = apply_result(ft, v.result, blob);
      view_free(&v);
      if (st != HSR_OK) return vote_error(ft, st, final, blob);
      *final = 1;
      return HSR_OK;
    }
    int d = ft_quorum_decide(&ft->q, v.votes, v.nv, v.aborted), p[FT_MAX_REPLICAS], n = ft_quorum_parts(&ft->q, p);
    if ((d != FT_ABORT && v.nahead) || d == FT_COMMIT || (d == FT_ABORT && v.aborted)) {
      /* frozen. A participant that voted on the next step in this epoch committed this one through the exchange,
       * so every group's all-reduce completed and every group commits it, the quorum unchanged (the exchange ran
       * only without joiners); write_abort and write_vote make this and a marker exclusive */
      ft_decision *dec = malloc(sizeof *dec);
      int ok = 0;
      if (!dec) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
      if (st == HSR_OK) {
        if (d != FT_ABORT && v.nahead) { /* the membership unchanged: no revision changes */
          ft_decision_ahead(&ft->q, dec);
        } else {
          ft_decision_make(&ft->q, v.votes, v.nv, d == FT_COMMIT, v.gone, v.ngone, dec);
          decision_revs(ft, dec);
        }
        dec->base = v.kvs.rev, dec->count = v.kvs.count;
        st = write_decision(ft, dec, v.arev, &ok);
      }
      if (st == HSR_OK && ok) st = apply_decision(ft, dec, blob);
      free(dec);
      view_free(&v);
      if (st != HSR_OK) return vote_error(ft, st, final, blob);
      if (ok) *final = 1;
      if (ok) return HSR_OK;
      continue; /* something changed since the read: read again */
    }
    double now = clock_s();
    if (d == FT_ABORT) { /* a failed vote: freeze the votes before deciding */
      st = write_abort(ft, NULL, 0, "a vote failed");
    } else { /* missing votes: gone, or past the bound */
      /* a group whose commit exchange did not complete waits longer: one that completed it, committed, and ran
       * into the next step's all-reduce without this one names it after the bound, then votes on that step */
      double bound = (ft->doubt ? 2 : 1) * ft->T;
      int miss[FT_MAX_REPLICAS], nm = 0, dead[FT_MAX_REPLICAS], nd = 0, late = now >= ft->t_voted + bound;
      for (int i = 0; i < n; i++) {
        int got = 0;
        for (int k = 0; k < v.nv && !got; k++) got = v.votes[k].id == p[i];
        if (got) continue;
        miss[nm++] = p[i];
        if (!ft->rec[p[i]].present || ft->rec[p[i]].rev != ft->part_rev[p[i]]) dead[nd++] = p[i];
      }
      /* a missing group that lives may have committed the step through the exchange (its vote on the next one
       * comes): the marker waits until every missing group is gone; past the bound every one counts as gone */
      if ((nd && nd == nm) || late) {
        char w[300], ids[200];
        ft_ids_text(late ? miss : dead, late ? nm : nd, ids, sizeof ids);
        snprintf(w, sizeof w, "no vote from replica(s) %s %s", ids, late ? "within the timeout" : "(gone)");
        st = write_abort(ft, late ? miss : dead, late ? nm : nd, w);
      } else {
        /* it wakes on every change under the prefix: with many votes to come, after a pause that lets a few
         * arrive (each read takes those written since the last) */
        int ch;
        double end = ft->t_voted + bound, to = end < until ? end : until, pause = 0.02 * nm / 256;
        if (nm > 64) nap_until(now + (pause < 0.05 ? pause : 0.05) < to ? now + (pause < 0.05 ? pause : 0.05) : to);
        now = clock_s();
        st = ft_etcd_watch(ft->e, FT_PREFIX, v.kvs.rev + 1, to - now, &ch);
      }
    }
    view_free(&v);
    if (st != HSR_OK) return vote_error(ft, st, final, blob);
  }
}

/* ---- the end: every group's final state hash ---- */

hsr_status ft_lead_finish(hsr_ft *ft, void *arg, double until, int *final, char **blob) {
  const uint64_t *a = arg; /* done, hash */
  *final = 0;
  char dk[KEY_MAX];
  key_done(dk, ft->c.replica_id);
  hsr_status st = HSR_OK;
  if (!ft->wrote_done) {
    char val[128];
    snprintf(val, sizeof val, "{\"done\":%" PRIu64 ",\"hash\":\"%016" PRIx64 "\"}", a[0], a[1]);
    if (!ft->finishing) ft->t_begin = clock_s(), ft->finishing = 1; /* once: a failing put is retried until T */
    if ((st = ft_etcd_put(ft->e, dk, val, 0)) != HSR_OK) goto unreachable;
    ft->wrote_done = 1;
  }
  for (;;) {
    /* the hashes written since the last read (each group reads each once; N groups reading every hash on every
     * wake-up would cost O(N^2)) */
    ft_kvs k;
    ft_range rg = {FT_PREFIX "d/", 1, 0, ft->fin_rev + 1, 0, 0};
    if ((st = ft_etcd_read(ft->e, &rg, 1, &k)) != HSR_OK) goto unreachable;
    if (!ft->fin) ft->fin = calloc(2 * FT_MAX_REPLICAS, sizeof *ft->fin);
    if (!ft->fin) {
      ft_kvs_free(&k);
      return hsr_error(HSR_ERR_NOMEM, "out of memory");
    }
    size_t dl = strlen(FT_PREFIX "d/");
    for (int i = 0; i < k.n; i++) {
      int id = atoi(k.kv[i].key + dl);
      cJSON *o = cJSON_Parse(k.kv[i].val);
      const cJSON *d = o ? cJSON_GetObjectItemCaseSensitive(o, "done") : NULL,
                  *h = o ? cJSON_GetObjectItemCaseSensitive(o, "hash") : NULL;
      if (id >= 0 && id < FT_MAX_REPLICAS && cJSON_IsNumber(d) && cJSON_IsString(h) &&
          (uint64_t)d->valuedouble == a[0]) { /* reported: 1 equal, 2 not; the hash beside */
        ft->fin[FT_MAX_REPLICAS + id] = strtoull(h->valuestring, NULL, 16);
        ft->fin[id] = ft->fin[FT_MAX_REPLICAS + id] == a[1] ? 1 : 2;
      }
      cJSON_Delete(o);
    }
    int p[FT_MAX_REPLICAS], n = ft_quorum_parts(&ft->q, p), miss[FT_MAX_REPLICAS], nm = 0, diff = -1;
    uint64_t hd = 0;
    for (int i = 0; i < n; i++) {
      uint64_t f = ft->fin[p[i]];
      if (!f)
        miss[nm++] = p[i];
      else if (f != 1 && diff < 0)
        diff = p[i], hd = ft->fin[FT_MAX_REPLICAS + p[i]];
    }
    int64_t rev = k.rev;
    ft->fin_rev = rev;
    ft_kvs_free(&k);
    char ids[256], line[600];
    ft_ids_text(p, n, ids, sizeof ids);
    if (diff >= 0)
      return hsr_error(HSR_ERR_MISMATCH,
                       "state_hash after %" PRIu64 " steps: %016" PRIx64 " here (replica %d), %016" PRIx64
                       " in replica %d: the replica groups' states differ",
                       a[0], a[1], ft->c.replica_id, hd, diff);
    double now = clock_s();
    if (nm == 0 || now >= ft->t_begin + ft->T) {
      if (nm == 0)
        snprintf(line, sizeof line, "state_hash %016" PRIx64 " after %" PRIu64 " steps: equal on replicas %s", a[1],
                 a[0], ids);
      else {
        char m[256];
        ft_ids_text(miss, nm, m, sizeof m);
        snprintf(line, sizeof line,
                 "state_hash %016" PRIx64 " after %" PRIu64 " steps; replica(s) %s did not report theirs within "
                 "%.1f s",
                 a[1], a[0], m, ft->T);
      }
      *final = 1;
      *blob = strdup(line);
      return *blob ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
    }
    if (now >= until) return HSR_OK;
    int ch;
    double to = ft->t_begin + ft->T < until ? ft->t_begin + ft->T : until;
    if (nm > 64) /* many to come: a pause lets a few arrive */
      nap_until(now + 0.05 < to ? now + 0.05 : to);
    now = clock_s();
    if ((st = ft_etcd_watch(ft->e, FT_PREFIX "d/", rev + 1, to - now, &ch)) != HSR_OK) goto unreachable;
  }
unreachable: /* the training is done; only the comparison is not possible */
  if (!is_coord_error(st)) return st;
  if (clock_s() - ft->t_begin < ft->T) return HSR_OK; /* again, after a heartbeat */
  char line[1200];
  snprintf(line, sizeof line,
           "state_hash %016" PRIx64 " after %" PRIu64 " steps; not compared: the coordinator is unreachable (%.900s)",
           a[1], a[0], hsr_last_error());
  *final = 1;
  *blob = strdup(line);
  return *blob ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
}
