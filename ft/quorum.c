/* The quorum and the vote (ft/quorum.h): pure functions and their JSON. */
#include "quorum.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int has(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return 1;
  return 0;
}

int ft_quorum_parts(const ft_quorum *q, int *out) {
  int n = 0;
  for (int i = 0; i < q->nmem; i++) out[n++] = q->mem[i];
  for (int i = 0; i < q->njoin; i++)
    if (!has(out, n, q->join[i])) out[n++] = q->join[i];
  qsort(out, (size_t)n, sizeof *out, cmp_int);
  return n;
}

int ft_quorum_index(const ft_quorum *q, int id) {
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(q, p);
  for (int i = 0; i < n; i++)
    if (p[i] == id) return i;
  return -1;
}

int ft_quorum_is_member(const ft_quorum *q, int id) { return has(q->mem, q->nmem, id); }

int ft_quorum_healer_of(const ft_quorum *q, int j) {
  for (int i = 0; i < q->njoin; i++)
    if (q->join[i] == j) return q->healer[i];
  return -1;
}

int ft_quorum_healers(const ft_quorum *q, int j, int *out) {
  int first = ft_quorum_healer_of(q, j), mem[FT_MAX_REPLICAS], n = 0, at = 0;
  if (first < 0) return 0;
  for (int i = 0; i < q->nmem; i++) mem[n++] = q->mem[i];
  qsort(mem, (size_t)n, sizeof *mem, cmp_int);
  for (int i = 0; i < n; i++)
    if (mem[i] == first) at = i;
  if (!has(mem, n, first)) { /* a healer that is not a member (a record from elsewhere): it alone */
    out[0] = first;
    return 1;
  }
  for (int i = 0; i < n; i++) out[i] = mem[(at + i) % n];
  return n;
}

static const ft_vote *vote_of(const ft_vote *v, int nv, int id) {
  for (int i = 0; i < nv; i++)
    if (v[i].id == id) return &v[i];
  return NULL;
}

int ft_quorum_decide(const ft_quorum *q, const ft_vote *v, int nv, int aborted) {
  if (aborted) return FT_ABORT;
  int p[FT_MAX_REPLICAS], n = ft_quorum_parts(q, p), all = 1;
  for (int i = 0; i < n; i++) {
    const ft_vote *x = vote_of(v, nv, p[i]);
    if (x && !x->ok) return FT_ABORT;
    all &= x != NULL;
  }
  return all ? FT_COMMIT : FT_PENDING;
}

void ft_ids_text(const int *ids, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", ids[i]);
  if (n == 0) snprintf(buf, len, "none");
}

/* Joiners for the next quorum: those the votes saw, not already in it. */
static void add_seen(const ft_vote *v, int nv, ft_quorum *next) {
  int seen[FT_MAX_REPLICAS], ns = 0;
  for (int i = 0; i < nv; i++)
    for (int k = 0; k < v[i].nseen; k++)
      if (!has(seen, ns, v[i].seen[k]) && ns < FT_MAX_REPLICAS) seen[ns++] = v[i].seen[k];
  qsort(seen, (size_t)ns, sizeof *seen, cmp_int);
  for (int i = 0; i < ns; i++)
    if (!has(next->mem, next->nmem, seen[i]) && !has(next->join, next->njoin, seen[i]) && next->njoin < FT_MAX_REPLICAS)
      next->join[next->njoin++] = seen[i];
}

/* Healers in turn over the members (sorted), in joiner order. */
static void assign_healers(ft_quorum *next) {
  qsort(next->mem, (size_t)next->nmem, sizeof *next->mem, cmp_int);
  qsort(next->join, (size_t)next->njoin, sizeof *next->join, cmp_int);
  for (int i = 0; i < next->njoin; i++) next->healer[i] = next->nmem ? next->mem[i % next->nmem] : -1;
}

void ft_quorum_next(const ft_quorum *q, const ft_vote *v, int nv, int commit, const int *gone, int ngone,
                    ft_quorum *next, char *why, size_t n) {
  memset(next, 0, sizeof *next);
  next->epoch = q->epoch;
  next->done = q->done + (commit ? 1 : 0);
  char a[256], b[256];
  if (why) why[0] = 0;
  if (commit) {
    for (int i = 0; i < q->nmem; i++) next->mem[next->nmem++] = q->mem[i];
    for (int i = 0; i < q->njoin; i++)
      if (!has(next->mem, next->nmem, q->join[i])) next->mem[next->nmem++] = q->join[i];
    add_seen(v, nv, next);
    assign_healers(next);
    int changed = next->nmem != q->nmem || next->njoin > 0;
    if (changed) next->epoch++;
    if (why && q->njoin) {
      ft_ids_text(q->join, q->njoin, a, sizeof a);
      snprintf(why, n, "replica(s) %s healed and joined", a);
    }
    if (why && next->njoin) {
      size_t o = strlen(why);
      ft_ids_text(next->join, next->njoin, b, sizeof b);
      snprintf(why + o, n - o, "%sreplica(s) %s admitted (healing at the next step)", o ? "; " : "", b);
    }
    return;
  }
  /* abort: a voter more than half of the voters could not hear from; a
   * non-voter that one could not, or that is gone */
  int p[FT_MAX_REPLICAS], np = ft_quorum_parts(q, p), voters = 0;
  for (int i = 0; i < np; i++) voters += vote_of(v, nv, p[i]) != NULL;
  int out[FT_MAX_REPLICAS] = {0}, nout = 0;
  for (int i = 0; i < np; i++) {
    const ft_vote *x = vote_of(v, nv, p[i]);
    int named = 0;
    for (int k = 0; k < nv; k++)
      if (v[k].id != p[i] && has(v[k].cul, v[k].ncul, p[i])) named++;
    if (x ? 2 * named > voters : named > 0 || has(gone, ngone, p[i])) {
      out[nout++] = p[i];
      continue;
    }
    if (ft_quorum_is_member(q, p[i]) || (x && x->healed))
      next->mem[next->nmem++] = p[i];
    else
      next->join[next->njoin++] = p[i]; /* heal again */
  }
  add_seen(v, nv, next);
  for (int i = 0; i < nout; i++) /* an excluded group is not re-admitted on hearsay of the same votes */
    for (int k = 0; k < next->njoin; k++)
      if (next->join[k] == out[i]) next->join[k] = next->join[--next->njoin];
  assign_healers(next);
  next->epoch = q->epoch + 1;
  if (why) {
    ft_ids_text(out, nout, a, sizeof a);
    int kept[FT_MAX_REPLICAS], nk = ft_quorum_parts(next, kept);
    ft_ids_text(kept, nk, b, sizeof b);
    if (nout)
      snprintf(why, n, "replica(s) %s dropped; replicas now %s", a, b);
    else
      snprintf(why, n, "no replica dropped; replicas %s", b);
  }
}

int ft_quorum_hash_mismatch(const ft_vote *v, int nv, int *a, int *b) {
  for (int i = 0; i < nv; i++)
    for (int k = i + 1; k < nv; k++)
      if (v[i].hs >= 0 && v[i].hs == v[k].hs && v[i].h != v[k].h) {
        *a = i, *b = k;
        return 1;
      }
  return 0;
}

/* ---- JSON ---- */

static void add_ids(cJSON *o, const char *name, const int *ids, int n) {
  cJSON *a = cJSON_AddArrayToObject(o, name);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
}

static hsr_status get_ids(const cJSON *o, const char *name, int *ids, int *n, int max) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name), *it;
  if (!cJSON_IsArray(a)) return hsr_error(HSR_ERR_IO, "coordinator record: no array '%s'", name);
  *n = 0;
  cJSON_ArrayForEach(it, a) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= FT_MAX_REPLICAS || *n >= max)
      return hsr_error(HSR_ERR_IO, "coordinator record: '%s' holds a bad replica id", name);
    ids[(*n)++] = (int)it->valuedouble;
  }
  return HSR_OK;
}

static hsr_status get_num(const cJSON *o, const char *name, double *v) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsNumber(f)) return hsr_error(HSR_ERR_IO, "coordinator record: no number '%s'", name);
  *v = f->valuedouble;
  return HSR_OK;
}

static hsr_status emit(cJSON *o, char **out) {
  *out = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return *out ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
}

hsr_status ft_quorum_json(const ft_quorum *q, char **out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "epoch", (double)q->epoch);
  cJSON_AddNumberToObject(o, "done", (double)q->done);
  add_ids(o, "members", q->mem, q->nmem);
  add_ids(o, "joiners", q->join, q->njoin);
  add_ids(o, "healers", q->healer, q->njoin);
  return emit(o, out);
}

hsr_status ft_quorum_parse(const char *js, ft_quorum *q) {
  memset(q, 0, sizeof *q);
  cJSON *o = cJSON_Parse(js);
  if (!o) return hsr_error(HSR_ERR_IO, "coordinator: the quorum record is not JSON");
  double e = 0, d = 0;
  int nh = 0;
  hsr_status st = get_num(o, "epoch", &e);
  if (st == HSR_OK) st = get_num(o, "done", &d);
  if (st == HSR_OK) st = get_ids(o, "members", q->mem, &q->nmem, FT_MAX_REPLICAS);
  if (st == HSR_OK) st = get_ids(o, "joiners", q->join, &q->njoin, FT_MAX_REPLICAS);
  if (st == HSR_OK) st = get_ids(o, "healers", q->healer, &nh, FT_MAX_REPLICAS);
  if (st == HSR_OK && nh != q->njoin) st = hsr_error(HSR_ERR_IO, "coordinator: the quorum's healers do not match");
  q->epoch = (int64_t)e, q->done = (int64_t)d;
  cJSON_Delete(o);
  return st;
}

hsr_status ft_vote_json(const ft_vote *v, char **out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", v->id);
  cJSON_AddNumberToObject(o, "ok", v->ok);
  cJSON_AddNumberToObject(o, "healed", v->healed);
  add_ids(o, "culprits", v->cul, v->ncul);
  add_ids(o, "seen", v->seen, v->nseen);
  cJSON_AddNumberToObject(o, "hash_step", (double)v->hs);
  char h[24];
  snprintf(h, sizeof h, "%016" PRIx64, v->h);
  cJSON_AddStringToObject(o, "hash", h);
  cJSON_AddStringToObject(o, "why", v->why);
  return emit(o, out);
}

hsr_status ft_vote_parse(const char *js, ft_vote *v) {
  memset(v, 0, sizeof *v);
  cJSON *o = cJSON_Parse(js);
  if (!o) return hsr_error(HSR_ERR_IO, "coordinator: a vote is not JSON");
  double id = 0, ok = 0, he = 0, hs = 0;
  hsr_status st = get_num(o, "id", &id);
  if (st == HSR_OK) st = get_num(o, "ok", &ok);
  if (st == HSR_OK) st = get_num(o, "healed", &he);
  if (st == HSR_OK) st = get_num(o, "hash_step", &hs);
  if (st == HSR_OK) st = get_ids(o, "culprits", v->cul, &v->ncul, FT_MAX_CULPRITS);
  if (st == HSR_OK) st = get_ids(o, "seen", v->seen, &v->nseen, FT_MAX_SEEN);
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hash"), *w = cJSON_GetObjectItemCaseSensitive(o, "why");
  if (st == HSR_OK && (!cJSON_IsString(h) || !cJSON_IsString(w)))
    st = hsr_error(HSR_ERR_IO, "coordinator: a vote lacks 'hash' or 'why'");
  if (st == HSR_OK) {
    v->id = (int)id, v->ok = ok != 0, v->healed = he != 0, v->hs = (int64_t)hs;
    v->h = strtoull(h->valuestring, NULL, 16);
    snprintf(v->why, sizeof v->why, "%s", w->valuestring);
  }
  cJSON_Delete(o);
  return st;
}

/* ---- the decision ---- */

void ft_decision_make(const ft_quorum *q, const ft_vote *v, int nv, int commit, const int *gone, int ngone,
                      ft_decision *d) {
  memset(d, 0, sizeof *d);
  d->commit = commit;
  ft_quorum_next(q, v, nv, commit, gone, ngone, &d->next, d->why, sizeof d->why);
  int a, b;
  if (ft_quorum_hash_mismatch(v, nv, &a, &b)) {
    d->mismatch = 1, d->commit = 0;
    d->mm_step = v[a].hs, d->mm_a = v[a].id, d->mm_b = v[b].id, d->mm_ha = v[a].h, d->mm_hb = v[b].h;
  }
  for (int i = 0; i < nv && !commit; i++)
    if (!v[i].ok) {
      snprintf(d->reason, sizeof d->reason, "%s", v[i].why);
      break;
    }
}

void ft_decision_ahead(const ft_quorum *q, ft_decision *d) {
  memset(d, 0, sizeof *d);
  d->commit = 1;
  d->next = *q;
  d->next.done++;
}

static void add_hex(cJSON *o, const char *name, uint64_t h) {
  char s[24];
  snprintf(s, sizeof s, "%016" PRIx64, h);
  cJSON_AddStringToObject(o, name, s);
}

hsr_status ft_decision_json(const ft_decision *d, char **out) {
  char *qs = NULL;
  HSR_CHECK(ft_quorum_json(&d->next, &qs));
  cJSON *o = cJSON_CreateObject(), *qo = cJSON_Parse(qs);
  free(qs);
  if (!o || !qo) {
    cJSON_Delete(o), cJSON_Delete(qo);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  cJSON_AddNumberToObject(o, "commit", d->commit);
  cJSON_AddItemToObject(o, "next", qo);
  cJSON *r = cJSON_AddArrayToObject(o, "revs"); /* [id, rev] pairs */
  for (int i = 0; i < d->nrev; i++) {
    cJSON *p = cJSON_CreateArray();
    cJSON_AddItemToArray(p, cJSON_CreateNumber(d->rev_id[i]));
    cJSON_AddItemToArray(p, cJSON_CreateNumber((double)d->rev[i]));
    cJSON_AddItemToArray(r, p);
  }
  cJSON_AddNumberToObject(o, "base", (double)d->base);
  cJSON_AddNumberToObject(o, "count", (double)d->count);
  cJSON_AddStringToObject(o, "why", d->why);
  cJSON_AddStringToObject(o, "reason", d->reason);
  if (d->mismatch) {
    cJSON *m = cJSON_AddObjectToObject(o, "mismatch");
    cJSON_AddNumberToObject(m, "step", (double)d->mm_step);
    cJSON_AddNumberToObject(m, "a", d->mm_a);
    cJSON_AddNumberToObject(m, "b", d->mm_b);
    add_hex(m, "ha", d->mm_ha);
    add_hex(m, "hb", d->mm_hb);
  }
  return emit(o, out);
}

hsr_status ft_decision_parse(const char *js, ft_decision *d) {
  memset(d, 0, sizeof *d);
  cJSON *o = cJSON_Parse(js);
  if (!o) return hsr_error(HSR_ERR_IO, "coordinator: a decision is not JSON");
  double c = 0, base = 0, count = 0;
  hsr_status st = get_num(o, "commit", &c);
  if (st == HSR_OK) st = get_num(o, "base", &base);
  if (st == HSR_OK) st = get_num(o, "count", &count);
  const cJSON *nx = cJSON_GetObjectItemCaseSensitive(o, "next"), *r = cJSON_GetObjectItemCaseSensitive(o, "revs"),
              *w = cJSON_GetObjectItemCaseSensitive(o, "why"), *rs = cJSON_GetObjectItemCaseSensitive(o, "reason"),
              *m = cJSON_GetObjectItemCaseSensitive(o, "mismatch"), *it;
  if (st == HSR_OK && (!cJSON_IsObject(nx) || !cJSON_IsArray(r) || !cJSON_IsString(w) || !cJSON_IsString(rs)))
    st = hsr_error(HSR_ERR_IO, "coordinator: a decision lacks 'next', 'revs', 'why' or 'reason'");
  if (st == HSR_OK) {
    char *qs = cJSON_PrintUnformatted(nx);
    st = qs ? ft_quorum_parse(qs, &d->next) : hsr_error(HSR_ERR_NOMEM, "out of memory");
    free(qs);
  }
  const cJSON *revs = st == HSR_OK ? r : NULL;
  cJSON_ArrayForEach(it, revs) {
    const cJSON *id = cJSON_GetArrayItem(it, 0), *rv = cJSON_GetArrayItem(it, 1);
    if (!cJSON_IsNumber(id) || !cJSON_IsNumber(rv) || id->valuedouble < 0 || id->valuedouble >= FT_MAX_REPLICAS ||
        d->nrev >= FT_MAX_REPLICAS) {
      st = hsr_error(HSR_ERR_IO, "coordinator: a decision's 'revs' holds a bad pair");
      break;
    }
    d->rev_id[d->nrev] = (int)id->valuedouble, d->rev[d->nrev++] = (int64_t)rv->valuedouble;
  }
  if (st == HSR_OK && m) {
    double s = 0, a = 0, b = 0;
    const cJSON *ha = cJSON_GetObjectItemCaseSensitive(m, "ha"), *hb = cJSON_GetObjectItemCaseSensitive(m, "hb");
    st = get_num(m, "step", &s);
    if (st == HSR_OK) st = get_num(m, "a", &a);
    if (st == HSR_OK) st = get_num(m, "b", &b);
    if (st == HSR_OK && (!cJSON_IsString(ha) || !cJSON_IsString(hb)))
      st = hsr_error(HSR_ERR_IO, "coordinator: a decision's mismatch lacks its hashes");
    if (st == HSR_OK) {
      d->mismatch = 1, d->mm_step = (int64_t)s, d->mm_a = (int)a, d->mm_b = (int)b;
      d->mm_ha = strtoull(ha->valuestring, NULL, 16), d->mm_hb = strtoull(hb->valuestring, NULL, 16);
    }
  }
  if (st == HSR_OK) {
    d->commit = c != 0;
    d->base = (int64_t)base, d->count = (int64_t)count;
    snprintf(d->why, sizeof d->why, "%s", w->valuestring);
    snprintf(d->reason, sizeof d->reason, "%s", rs->valuestring);
  }
  cJSON_Delete(o);
  return st;
}
