/* etcd v3 through its JSON gateway (ft/etcd.h). Why the gateway and not
 * gRPC: every request is one small JSON POST that libcurl and cJSON (both
 * Debian packages, cJSON already used) handle in a few lines, while etcd's
 * gRPC API in C would need gRPC core and protobuf stubs of etcd's protos
 * that no package ships; the gateway's cost is below a millisecond a request
 * on loopback (docs/fault-tolerance.md). */
#include "etcd.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/common_internal.h"

#define MAX_EP 16
#define REQ_S 3.0 /* one request to one member; a member without quorum answers etcd's own timeout later */

struct ft_etcd {
  char *ep[MAX_EP];
  int nep, cur;
  char *token;       /* root's password; NULL: no auth */
  char auth[256];    /* etcd's auth token ("" before authenticating) */
  double deadline_s; /* per call */
  CURL *c;
  char err[CURL_ERROR_SIZE];
  atomic_long nreq; /* requests sent (watches included): read by other threads (hsr bench ft) */
};

typedef struct buf {
  char *p;
  size_t n, cap;
  int watch, events; /* the watch stream: stop at the first event */
} buf;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
  buf *b = ud;
  size_t n = size * nmemb;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *q = realloc(b->p, cap);
    if (!q) return 0;
    b->p = q, b->cap = cap;
  }
  memcpy(b->p + b->n, ptr, n);
  b->n += n;
  b->p[b->n] = 0;
  if (b->watch && (strstr(b->p, "\"events\"") || strstr(b->p, "\"canceled\""))) {
    b->events = 1;
    return 0; /* ends the transfer: the caller reads the store again */
  }
  return n;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

hsr_status ft_b64_encode(const void *in, size_t n, char **out) {
  char *o = malloc(4 * ((n + 2) / 3) + 1);
  if (!o) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  EVP_EncodeBlock((unsigned char *)o, in, (int)n);
  *out = o;
  return HSR_OK;
}

hsr_status ft_b64_decode(const char *in, void **out, size_t *n) {
  size_t L = strlen(in);
  if (L % 4) return hsr_error(HSR_ERR_IO, "coordinator: a value is not base64 (length %zu)", L);
  unsigned char *o = malloc(L / 4 * 3 + 1);
  if (!o) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  int k = L ? EVP_DecodeBlock(o, (const unsigned char *)in, (int)L) : 0;
  if (k < 0) {
    free(o);
    return hsr_error(HSR_ERR_IO, "coordinator: a value is not base64");
  }
  size_t m = (size_t)k; /* EVP_DecodeBlock counts the padding as bytes */
  if (L >= 1 && in[L - 1] == '=') m--;
  if (L >= 2 && in[L - 2] == '=') m--;
  o[m] = 0;
  *out = o;
  *n = m;
  return HSR_OK;
}

static hsr_status add_b64(cJSON *o, const char *field, const char *s, size_t n) {
  char *b = NULL;
  HSR_CHECK(ft_b64_encode(s, n, &b));
  cJSON_AddStringToObject(o, field, b);
  free(b);
  return HSR_OK;
}

static void add_i64(cJSON *o, const char *field, int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%" PRId64, v);
  cJSON_AddStringToObject(o, field, s);
}

static int64_t get_i64(const cJSON *o, const char *field) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);
  if (cJSON_IsString(f)) return strtoll(f->valuestring, NULL, 10);
  if (cJSON_IsNumber(f)) return (int64_t)f->valuedouble;
  return 0;
}

/* The end of the range of keys starting with `prefix`: the prefix with its
 * last byte incremented (etcd's own rule). */
static void prefix_end(const char *prefix, char *out, size_t n) {
  snprintf(out, n, "%s", prefix);
  size_t L = strlen(out);
  while (L > 0 && (unsigned char)out[L - 1] == 0xff) out[--L] = 0;
  if (L > 0) out[L - 1]++;
}

void ft_etcd_set_deadline(ft_etcd *e, double d) { e->deadline_s = d; }
long ft_etcd_requests(const ft_etcd *e) { return e ? atomic_load_explicit(&e->nreq, memory_order_relaxed) : 0; }
const char *ft_etcd_endpoint(const ft_etcd *e) { return e->ep[e->cur]; }

void ft_etcd_close(ft_etcd *e) {
  if (!e) return;
  for (int i = 0; i < e->nep; i++) free(e->ep[i]);
  free(e->token);
  if (e->c) curl_easy_cleanup(e->c);
  free(e);
}

/* etcd's answers about the request itself (gRPC codes INVALID_ARGUMENT,
 * NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED):
 * another member says the same. Any other error (no leader, a leader change,
 * its own timeout, a member shutting down: "the client connection is
 * closing") is the member's: the next one is asked. */
static int retryable(int code) { return code != 3 && code != 5 && code != 9 && code != 7 && code != 16; }

static hsr_status authenticate(ft_etcd *e);

/* One POST of `body` to `path`, retried on the members until the deadline.
 * *resp: the parsed answer (the caller frees it). */
static hsr_status request(ft_etcd *e, const char *path, const cJSON *body, cJSON **resp) {
  char *js = cJSON_PrintUnformatted(body);
  if (!js) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  double end = clock_s() + e->deadline_s;
  char last[512] = "no member answered";
  int reauth = 0;
  hsr_status st = HSR_ERR_TIMEOUT;
  *resp = NULL;
  for (int attempt = 0;; attempt++) {
    double left = end - clock_s();
    if (attempt > 0 && left <= 0) break;
    char url[512];
    snprintf(url, sizeof url, "%s%s", e->ep[e->cur], path);
    buf b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (e->auth[0]) {
      char a[300];
      snprintf(a, sizeof a, "Authorization: %s", e->auth);
      h = curl_slist_append(h, a);
    }
    /* one member: the whole deadline (a request that timed out is still in the member's queue: asking again
     * adds to its load); several: REQ_S each, then the next */
    double tmo = left < REQ_S || e->nep == 1 ? (left > 0.05 ? left : 0.05) : REQ_S;
    curl_easy_setopt(e->c, CURLOPT_URL, url);
    curl_easy_setopt(e->c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e->c, CURLOPT_POSTFIELDS, js);
    curl_easy_setopt(e->c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e->c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e->c, CURLOPT_TIMEOUT_MS, (long)(tmo * 1e3));
    atomic_fetch_add_explicit(&e->nreq, 1, memory_order_relaxed);
    CURLcode cc = curl_easy_perform(e->c);
    curl_slist_free_all(h);
    long http = 0;
    curl_easy_getinfo(e->c, CURLINFO_RESPONSE_CODE, &http);
    cJSON *r = cc == CURLE_OK && b.p ? cJSON_Parse(b.p) : NULL;
    free(b.p);
    if (cc != CURLE_OK || !r) {
      snprintf(last, sizeof last, "%s: %s", e->ep[e->cur], cc != CURLE_OK ? e->err : "an answer that is not JSON");
      cJSON_Delete(r);
      e->cur = (e->cur + 1) % e->nep;
      if ((attempt + 1) % e->nep == 0) sleep_s(0.1); /* every member refused: etcd may be starting */
      continue;
    }
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(r, "error");
    if (!er) er = cJSON_GetObjectItemCaseSensitive(r, "message");
    int code = (int)get_i64(r, "code");
    if (http >= 400 || er) {
      const char *msg = cJSON_IsString(er) ? er->valuestring : "(no message)";
      if ((code == 16 || strstr(msg, "invalid auth token")) && e->token && reauth++ < 2) {
        cJSON_Delete(r);
        e->auth[0] = 0;
        st = authenticate(e);
        if (st != HSR_OK) break;
        continue;
      }
      if (retryable(code)) {
        snprintf(last, sizeof last, "%s: %s", e->ep[e->cur], msg);
        cJSON_Delete(r);
        e->cur = (e->cur + 1) % e->nep;
        sleep_s(0.05);
        continue;
      }
      st = hsr_error(code == 3 && strstr(msg, "authentication failed") ? HSR_ERR_INVALID : HSR_ERR_STATE,
                     "coordinator %s: %s", e->ep[e->cur], msg);
      cJSON_Delete(r);
      free(js);
      return st;
    }
    *resp = r;
    free(js);
    return HSR_OK;
  }
  free(js);
  if (st != HSR_ERR_TIMEOUT) return st;
  return hsr_error(HSR_ERR_TIMEOUT, "coordinator unreachable for %.1f s (every member of %s%s%s): last: %s",
                   e->deadline_s, e->ep[0], e->nep > 1 ? " and " : "", e->nep > 1 ? "the others" : "", last);
}

static hsr_status authenticate(ft_etcd *e) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  cJSON_AddStringToObject(b, "name", "root");
  cJSON_AddStringToObject(b, "password", e->token);
  hsr_status st = request(e, "/v3/auth/authenticate", b, &r);
  cJSON_Delete(b);
  if (st == HSR_ERR_INVALID || (st != HSR_OK && strstr(hsr_last_error(), "authentication failed")))
    return hsr_error(HSR_ERR_INVALID,
                     "HSR_FT_TOKEN is not the coordinator's token: %s refused it (authentication failed); every "
                     "group and the coordinator need the same HSR_FT_TOKEN",
                     e->ep[e->cur]);
  if (st != HSR_OK && strstr(hsr_last_error(), "authentication is not enabled"))
    return hsr_error(HSR_ERR_INVALID,
                     "the coordinator at %s does not check tokens (etcd authentication is off): start it with 'hsr "
                     "coordinator' (HSR_FT_TOKEN set), or enable etcd's auth with root's password = HSR_FT_TOKEN",
                     e->ep[e->cur]);
  HSR_CHECK(st);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "token");
  if (cJSON_IsString(t)) snprintf(e->auth, sizeof e->auth, "%s", t->valuestring);
  cJSON_Delete(r);
  if (!e->auth[0]) return hsr_error(HSR_ERR_STATE, "coordinator %s: authenticated without a token", e->ep[e->cur]);
  return HSR_OK;
}

hsr_status ft_etcd_open(const char *endpoints, const char *token, double deadline_s, ft_etcd **out) {
  *out = NULL;
  if (!endpoints || !*endpoints) return hsr_error(HSR_ERR_INVALID, "coordinator: no address");
  /* strict before curl sees it: a malformed item must not become a DNS lookup */
  HSR_CHECK(parse_hostports("coordinator", endpoints, MAX_EP));
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return hsr_error(HSR_ERR_SYSTEM, "libcurl: global init");
  ft_etcd *e = calloc(1, sizeof *e);
  if (!e) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  atomic_init(&e->nreq, 0);
  e->deadline_s = deadline_s > 0 ? deadline_s : 10;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", endpoints);
  for (char *s = tmp, *t; (t = strsep(&s, ","));) {
    if (!*t) continue;
    if (e->nep == MAX_EP) {
      ft_etcd_close(e);
      return hsr_error(HSR_ERR_INVALID, "coordinator: more than %d addresses in '%s'", MAX_EP, endpoints);
    }
    char u[512];
    snprintf(u, sizeof u, "%s%s", strstr(t, "://") ? "" : "http://", t);
    size_t L = strlen(u);
    while (L && u[L - 1] == '/') u[--L] = 0;
    e->ep[e->nep++] = strdup(u);
  }
  if (!e->nep) {
    ft_etcd_close(e);
    return hsr_error(HSR_ERR_INVALID, "coordinator: no address in '%s'", endpoints);
  }
  e->c = curl_easy_init();
  e->token = token ? strdup(token) : NULL;
  if (!e->c) {
    ft_etcd_close(e);
    return hsr_error(HSR_ERR_SYSTEM, "libcurl: cannot create a handle");
  }
  curl_easy_setopt(e->c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e->c, CURLOPT_ERRORBUFFER, e->err);
  curl_easy_setopt(e->c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  curl_easy_setopt(e->c, CURLOPT_TCP_NODELAY, 1L);
  hsr_status st = token ? authenticate(e) : HSR_OK;
  if (st != HSR_OK) {
    ft_etcd_close(e);
    return st;
  }
  *out = e;
  return HSR_OK;
}

void ft_kvs_free(ft_kvs *k) {
  if (!k) return;
  for (int i = 0; i < k->n; i++) free(k->kv[i].key), free(k->kv[i].val);
  free(k->kv);
  memset(k, 0, sizeof *k);
}

const ft_kv *ft_kvs_find(const ft_kvs *k, const char *key) {
  for (int i = 0; i < k->n; i++)
    if (!strcmp(k->kv[i].key, key)) return &k->kv[i];
  return NULL;
}

static hsr_status parse_kvs(const cJSON *r, ft_kvs *out) {
  memset(out, 0, sizeof *out);
  const cJSON *hd = cJSON_GetObjectItemCaseSensitive(r, "header");
  out->rev = hd ? get_i64(hd, "revision") : 0;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs");
  int n = cJSON_IsArray(kvs) ? cJSON_GetArraySize(kvs) : 0;
  out->kv = calloc((size_t)(n ? n : 1), sizeof *out->kv);
  if (!out->kv) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  const cJSON *it;
  cJSON_ArrayForEach(it, kvs) {
    ft_kv *kv = &out->kv[out->n++];
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "key"), *v = cJSON_GetObjectItemCaseSensitive(it, "value");
    size_t kn = 0;
    void *kp = NULL, *vp = NULL;
    HSR_CHECK(ft_b64_decode(cJSON_IsString(k) ? k->valuestring : "", &kp, &kn));
    kv->key = kp;
    HSR_CHECK(ft_b64_decode(cJSON_IsString(v) ? v->valuestring : "", &vp, &kv->vlen));
    kv->val = vp;
    kv->create_rev = get_i64(it, "create_revision");
    kv->mod_rev = get_i64(it, "mod_revision");
    kv->lease = get_i64(it, "lease");
  }
  return HSR_OK;
}

static hsr_status range_body(cJSON *o, const char *key, int prefix) {
  HSR_CHECK(add_b64(o, "key", key, strlen(key)));
  if (prefix) {
    char end[1024];
    prefix_end(key, end, sizeof end);
    HSR_CHECK(add_b64(o, "range_end", end, strlen(end)));
  }
  return HSR_OK;
}

hsr_status ft_etcd_get(ft_etcd *e, const char *key, int prefix, ft_kvs *out) {
  memset(out, 0, sizeof *out);
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  hsr_status st = range_body(b, key, prefix);
  if (st == HSR_OK) st = request(e, "/v3/kv/range", b, &r);
  cJSON_Delete(b);
  if (st == HSR_OK) st = parse_kvs(r, out);
  cJSON_Delete(r);
  if (st != HSR_OK) ft_kvs_free(out);
  return st;
}

static hsr_status parse_ranges(const cJSON *r, const ft_range *rg, int n, ft_kvs *out);

/* The ranges as a transaction's operations. */
static hsr_status add_ranges(cJSON *arr, const ft_range *rg, int n) {
  hsr_status st = HSR_OK;
  for (int i = 0; i < n && st == HSR_OK; i++) {
    cJSON *o = cJSON_CreateObject(), *q = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddItemToObject(o, "request_range", q);
    st = range_body(q, rg[i].key, rg[i].prefix);
    if (rg[i].keys_only) cJSON_AddTrueToObject(q, "keys_only");
    if (rg[i].min_mod_rev > 0) add_i64(q, "min_mod_revision", rg[i].min_mod_rev);
    if (rg[i].count_only) cJSON_AddTrueToObject(q, "count_only");
    if (rg[i].rev > 0) add_i64(q, "revision", rg[i].rev);
  }
  return st;
}

hsr_status ft_etcd_read(ft_etcd *e, const ft_range *rg, int n, ft_kvs *out) {
  memset(out, 0, sizeof *out);
  cJSON *b = cJSON_CreateObject(), *r = NULL, *sa = cJSON_AddArrayToObject(b, "success");
  cJSON_AddArrayToObject(b, "compare");
  hsr_status st = add_ranges(sa, rg, n);
  if (st == HSR_OK) st = request(e, "/v3/kv/txn", b, &r);
  cJSON_Delete(b);
  if (st == HSR_OK) st = parse_ranges(r, rg, n, out);
  cJSON_Delete(r);
  return st;
}

/* A transaction's range responses, their keys appended in order. */
static hsr_status parse_ranges(const cJSON *r, const ft_range *rg, int n, ft_kvs *out) {
  hsr_status st = HSR_OK;
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r, "responses"), *it;
  const cJSON *hd = r ? cJSON_GetObjectItemCaseSensitive(r, "header") : NULL;
  out->rev = hd ? get_i64(hd, "revision") : 0;
  int i = 0;
  cJSON_ArrayForEach(it, rs) { /* each range's keys, appended */
    if (st != HSR_OK || i >= n) break;
    ft_kvs one;
    const cJSON *rr = cJSON_GetObjectItemCaseSensitive(it, "response_range");
    st = parse_kvs(rr, &one);
    if (rg[i++].count_only) out->count = get_i64(rr, "count"); /* absent when 0 (proto3's JSON) */
    ft_kv *kv = st == HSR_OK ? realloc(out->kv, sizeof *kv * (size_t)(out->n + one.n + 1)) : NULL;
    if (st == HSR_OK && !kv) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    if (st == HSR_OK) {
      out->kv = kv;
      memcpy(out->kv + out->n, one.kv, sizeof *kv * (size_t)one.n);
      out->n += one.n;
      free(one.kv);
    } else {
      ft_kvs_free(&one);
    }
  }
  if (st != HSR_OK) ft_kvs_free(out);
  return st;
}

hsr_status ft_etcd_put(ft_etcd *e, const char *key, const char *val, int64_t lease) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  hsr_status st = add_b64(b, "key", key, strlen(key));
  if (st == HSR_OK) st = add_b64(b, "value", val, strlen(val));
  if (lease) add_i64(b, "lease", lease);
  if (st == HSR_OK) st = request(e, "/v3/kv/put", b, &r);
  cJSON_Delete(b);
  cJSON_Delete(r);
  return st;
}

hsr_status ft_etcd_delete(ft_etcd *e, const char *key, int prefix) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  hsr_status st = range_body(b, key, prefix);
  if (st == HSR_OK) st = request(e, "/v3/kv/deleterange", b, &r);
  cJSON_Delete(b);
  cJSON_Delete(r);
  return st;
}

hsr_status ft_etcd_txn(ft_etcd *e, const ft_cmp *cmp, int ncmp, const ft_op *ok, int nok, int *succeeded,
                       int64_t *rev) {
  return ft_etcd_txn_else(e, cmp, ncmp, ok, nok, NULL, 0, succeeded, rev, NULL);
}

hsr_status ft_etcd_txn_else(ft_etcd *e, const ft_cmp *cmp, int ncmp, const ft_op *ok, int nok, const ft_range *fr,
                            int nfr, int *succeeded, int64_t *rev, ft_kvs *out) {
  if (out) memset(out, 0, sizeof *out);
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  cJSON *ca = cJSON_AddArrayToObject(b, "compare"), *sa = cJSON_AddArrayToObject(b, "success");
  hsr_status fst = nfr ? add_ranges(cJSON_AddArrayToObject(b, "failure"), fr, nfr) : HSR_OK;
  hsr_status st = HSR_OK;
  for (int i = 0; i < ncmp && st == HSR_OK; i++) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ca, c);
    st = add_b64(c, "key", cmp[i].key, strlen(cmp[i].key));
    if (st == HSR_OK && cmp[i].prefix) {
      char end[512];
      prefix_end(cmp[i].key, end, sizeof end);
      st = add_b64(c, "range_end", end, strlen(end));
    }
    cJSON_AddStringToObject(c, "target", cmp[i].target == FT_CMP_CREATE ? "CREATE" : "MOD");
    cJSON_AddStringToObject(c, "result", "EQUAL");
    add_i64(c, cmp[i].target == FT_CMP_CREATE ? "create_revision" : "mod_revision", cmp[i].rev);
  }
  for (int i = 0; i < nok && st == HSR_OK; i++) {
    cJSON *o = cJSON_CreateObject(), *q = cJSON_CreateObject();
    cJSON_AddItemToArray(sa, o);
    cJSON_AddItemToObject(o, ok[i].kind == FT_OP_PUT ? "request_put" : "request_delete_range", q);
    st = add_b64(q, "key", ok[i].key, strlen(ok[i].key));
    if (st == HSR_OK && ok[i].kind == FT_OP_PUT) {
      st = add_b64(q, "value", ok[i].val, strlen(ok[i].val));
      if (ok[i].lease) add_i64(q, "lease", ok[i].lease);
    } else if (st == HSR_OK && ok[i].val) {
      st = add_b64(q, "range_end", ok[i].val, strlen(ok[i].val));
    }
  }
  if (st == HSR_OK) st = fst;
  if (st == HSR_OK) st = request(e, "/v3/kv/txn", b, &r);
  cJSON_Delete(b);
  if (st == HSR_OK) {
    *succeeded = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(r, "header");
    if (rev) *rev = hd ? get_i64(hd, "revision") : 0;
    if (!*succeeded && nfr && out) st = parse_ranges(r, fr, nfr, out);
  }
  cJSON_Delete(r);
  return st;
}

hsr_status ft_etcd_lease_grant(ft_etcd *e, int ttl_s, int64_t *id) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  add_i64(b, "TTL", ttl_s);
  hsr_status st = request(e, "/v3/lease/grant", b, &r);
  cJSON_Delete(b);
  if (st == HSR_OK) *id = get_i64(r, "ID");
  cJSON_Delete(r);
  if (st == HSR_OK && !*id) return hsr_error(HSR_ERR_STATE, "coordinator %s: granted no lease", e->ep[e->cur]);
  return st;
}

hsr_status ft_etcd_lease_keepalive(ft_etcd *e, int64_t id, int64_t *ttl) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  add_i64(b, "ID", id);
  hsr_status st = request(e, "/v3/lease/keepalive", b, &r);
  cJSON_Delete(b);
  if (st == HSR_OK) {
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
    *ttl = res ? get_i64(res, "TTL") : 0;
  }
  cJSON_Delete(r);
  return st;
}

hsr_status ft_etcd_lease_revoke(ft_etcd *e, int64_t id) {
  cJSON *b = cJSON_CreateObject(), *r = NULL;
  add_i64(b, "ID", id);
  hsr_status st = request(e, "/v3/lease/revoke", b, &r);
  cJSON_Delete(b);
  cJSON_Delete(r);
  return st;
}

hsr_status ft_etcd_watch(ft_etcd *e, const char *prefix, int64_t from_rev, double wait_s, int *changed) {
  *changed = 0;
  if (wait_s <= 0) return HSR_OK;
  cJSON *b = cJSON_CreateObject(), *cr = cJSON_CreateObject();
  cJSON_AddItemToObject(b, "create_request", cr);
  hsr_status st = range_body(cr, prefix, 1);
  add_i64(cr, "start_revision", from_rev);
  char *js = st == HSR_OK ? cJSON_PrintUnformatted(b) : NULL;
  cJSON_Delete(b);
  if (!js) return st != HSR_OK ? st : hsr_error(HSR_ERR_NOMEM, "out of memory");
  CURL *c = curl_easy_init();
  if (!c) {
    free(js);
    return hsr_error(HSR_ERR_SYSTEM, "libcurl: cannot create a handle");
  }
  double end = clock_s() + wait_s;
  for (int tries = 0; tries < e->nep; tries++) {
    char url[512];
    snprintf(url, sizeof url, "%s/v3/watch", e->ep[e->cur]);
    buf w = {.watch = 1};
    struct curl_slist *h = NULL;
    if (e->auth[0]) {
      char a[300];
      snprintf(a, sizeof a, "Authorization: %s", e->auth);
      h = curl_slist_append(h, a);
    }
    double left = end - clock_s();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, js);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)((left > 0.01 ? left : 0.01) * 1e3));
    atomic_fetch_add_explicit(&e->nreq, 1, memory_order_relaxed);
    CURLcode cc = curl_easy_perform(c);
    curl_slist_free_all(h);
    free(w.p);
    if (w.events || cc == CURLE_OPERATION_TIMEDOUT) {
      *changed = w.events;
      break;
    }
    /* refused or cut off: the next member; the caller reads the store again */
    e->cur = (e->cur + 1) % e->nep;
    if (tries + 1 == e->nep) {
      sleep_s(end - clock_s() < 0.2 ? end - clock_s() : 0.2);
      *changed = 1;
    }
  }
  curl_easy_cleanup(c);
  free(js);
  return HSR_OK;
}

static hsr_status auth_call(ft_etcd *e, const char *path, cJSON *b, const char *benign) {
  cJSON *r = NULL;
  hsr_status st = request(e, path, b, &r);
  cJSON_Delete(b);
  cJSON_Delete(r);
  if (st != HSR_OK && benign && strstr(hsr_last_error(), benign)) return HSR_OK;
  return st;
}

hsr_status ft_etcd_enable_auth(ft_etcd *e, const char *token) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "name", "root");
  cJSON_AddStringToObject(b, "password", token);
  HSR_CHECK(auth_call(e, "/v3/auth/user/add", b, "user name already exists"));
  b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "name", "root");
  HSR_CHECK(auth_call(e, "/v3/auth/role/add", b, "role name already exists"));
  b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "user", "root");
  cJSON_AddStringToObject(b, "role", "root");
  HSR_CHECK(auth_call(e, "/v3/auth/user/grant", b, NULL));
  return auth_call(e, "/v3/auth/enable", cJSON_CreateObject(), NULL);
}

hsr_status ft_etcd_version(ft_etcd *e, char *out, size_t n) {
  char url[512];
  snprintf(url, sizeof url, "%s/version", e->ep[e->cur]);
  buf b = {0};
  curl_easy_setopt(e->c, CURLOPT_URL, url);
  curl_easy_setopt(e->c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(e->c, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(e->c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(e->c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(e->c, CURLOPT_TIMEOUT_MS, 2000L);
  CURLcode cc = curl_easy_perform(e->c);
  curl_easy_setopt(e->c, CURLOPT_HTTPGET, 0L);
  cJSON *r = cc == CURLE_OK && b.p ? cJSON_Parse(b.p) : NULL;
  free(b.p);
  const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, "etcdserver") : NULL;
  hsr_status st = HSR_OK;
  if (cJSON_IsString(v))
    snprintf(out, n, "%s", v->valuestring);
  else
    st = hsr_error(HSR_ERR_TIMEOUT, "coordinator %s: no version (%s)", e->ep[e->cur],
                   cc != CURLE_OK ? e->err : "not etcd");
  cJSON_Delete(r);
  return st;
}
