/* ft/ internal: a client of etcd's v3 API through its JSON gateway (POST
 * /v3/... on the client port, keys and values base64), over libcurl.
 *
 * One handle per thread. Every call is bounded: a request that cannot reach
 * a member (refused, reset, no answer within a few seconds, "no leader") is
 * sent to the next endpoint, and the call fails with HSR_ERR_TIMEOUT when no
 * member answered before its deadline. etcd's own errors (a refused txn is
 * not one) come back as HSR_ERR_STATE with etcd's message. The handle
 * authenticates as etcd's root user with the token and renews its auth
 * token when etcd says it is no longer valid. */
#ifndef HSR_FT_ETCD_H
#define HSR_FT_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"

typedef struct ft_etcd ft_etcd;

/* endpoints: comma-separated host:port or http://host:port. token: the
 * root password (NULL: no authentication, for the coordinator's own set-up
 * of an etcd without auth). deadline_s bounds each call. */
hsr_status ft_etcd_open(const char *endpoints, const char *token, double deadline_s, ft_etcd **out);
void ft_etcd_close(ft_etcd *e);
/* The endpoint the last request went to ("http://127.0.0.1:2379"). */
const char *ft_etcd_endpoint(const ft_etcd *e);
void ft_etcd_set_deadline(ft_etcd *e, double deadline_s);
/* Requests sent so far (watches included); any thread may read it. */
long ft_etcd_requests(const ft_etcd *e);

typedef struct ft_kv {
  char *key, *val; /* NUL-terminated (values are JSON text here) */
  size_t vlen;
  int64_t create_rev, mod_rev, lease;
} ft_kv;

typedef struct ft_kvs {
  ft_kv *kv;
  int n;
  int64_t rev;   /* the store's revision the read saw */
  int64_t count; /* ft_etcd_read: the keys a count_only range counted */
} ft_kvs;
void ft_kvs_free(ft_kvs *k);
const ft_kv *ft_kvs_find(const ft_kvs *k, const char *key);

/* The key, or every key starting with it when prefix != 0. */
hsr_status ft_etcd_get(ft_etcd *e, const char *key, int prefix, ft_kvs *out);
/* Several ranges read at one revision (a transaction of reads): their keys
 * appended in order. keys_only: no values; min_mod_rev > 0: only keys
 * written at or after it; count_only: no keys, their number in out->count;
 * rev > 0: the range as it was at that revision. */
typedef struct ft_range {
  const char *key;
  int prefix, keys_only;
  int64_t min_mod_rev;
  int count_only;
  int64_t rev;
} ft_range;
hsr_status ft_etcd_read(ft_etcd *e, const ft_range *rg, int n, ft_kvs *out);
hsr_status ft_etcd_put(ft_etcd *e, const char *key, const char *val, int64_t lease);
hsr_status ft_etcd_delete(ft_etcd *e, const char *key, int prefix);

/* A transaction: if every comparison holds, the success operations run,
 * else the failure ones. */
typedef enum { FT_CMP_CREATE = 0, FT_CMP_MOD } ft_cmp_target;
typedef struct ft_cmp {
  const char *key;
  ft_cmp_target target;
  int64_t rev; /* equal to this create or mod revision (0: the key is absent) */
  int prefix;  /* every key under the prefix `key` (CREATE 0: no key under it) */
} ft_cmp;
typedef enum { FT_OP_PUT = 0, FT_OP_DELETE_RANGE } ft_op_kind;
typedef struct ft_op {
  ft_op_kind kind;
  const char *key, *val; /* put: value; delete: [key, val) when val is set, else the key */
  int64_t lease;
} ft_op;
hsr_status ft_etcd_txn(ft_etcd *e, const ft_cmp *cmp, int ncmp, const ft_op *ok, int nok, int *succeeded, int64_t *rev);
/* The same, and when a comparison fails, the ranges fr read in its stead (at
 * the same revision) into *out (the caller frees it; empty on success). */
hsr_status ft_etcd_txn_else(ft_etcd *e, const ft_cmp *cmp, int ncmp, const ft_op *ok, int nok, const ft_range *fr,
                            int nfr, int *succeeded, int64_t *rev, ft_kvs *out);

hsr_status ft_etcd_lease_grant(ft_etcd *e, int ttl_s, int64_t *id);
/* *ttl: what is left (0: the lease has expired). */
hsr_status ft_etcd_lease_keepalive(ft_etcd *e, int64_t id, int64_t *ttl);
hsr_status ft_etcd_lease_revoke(ft_etcd *e, int64_t id);

/* Blocks until a key under `prefix` changes at a revision >= from_rev, or
 * for at most wait_s (*changed = 0): a watch stream, closed on the first
 * event. */
hsr_status ft_etcd_watch(ft_etcd *e, const char *prefix, int64_t from_rev, double wait_s, int *changed);

/* The coordinator's set-up: a root user whose password is the token, and
 * authentication on (both idempotent). Needs an unauthenticated handle. */
hsr_status ft_etcd_enable_auth(ft_etcd *e, const char *token);
/* etcd's version ("3.4.23") from /version. */
hsr_status ft_etcd_version(ft_etcd *e, char *buf, size_t n);

/* base64 (OpenSSL's EVP block coding); out malloc'd, NUL-terminated. */
hsr_status ft_b64_encode(const void *in, size_t n, char **out);
hsr_status ft_b64_decode(const char *in, void **out, size_t *n);

#endif
