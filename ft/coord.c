/* The coordinator's side (hsr/ft.h): an etcd made to check tokens, and its
 * quorum watched for `hsr coordinator`'s status lines. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_int.h"
#include "common/common_internal.h"
#include "ft/ft_internal.h"

#define WATCH_DEADLINE_S 3.0

struct ft_coord {
  ft_etcd *e;
  int64_t rev; /* the store's revision last read */
  char last[2048];
};

static void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

hsr_status ft_coord_open(const char *addr, const char *token, double timeout_s, ft_coord **out, char *version,
                         size_t n) {
  if (!addr || !token || !*token || !out) return hsr_error(HSR_ERR_INVALID, "ft_coord_open: no address or token");
  *out = NULL;
  ft_etcd *plain = NULL;
  HSR_CHECK(ft_etcd_open(addr, NULL, timeout_s, &plain));
  double end = clock_s() + timeout_s;
  hsr_status st;
  char v[64] = "";
  while ((st = ft_etcd_version(plain, v, sizeof v)) != HSR_OK && clock_s() < end) nap(0.1);
  if (st == HSR_OK) { /* a member answers; writes need the cluster's quorum, which etcd's own retry waits for */
    st = ft_etcd_enable_auth(plain, token);
    if (st != HSR_OK && (strstr(hsr_last_error(), "user name is empty") || strstr(hsr_last_error(), "permission")))
      st = HSR_OK; /* authentication is on already: the token must be this one (checked next) */
  }
  ft_etcd_close(plain);
  HSR_CHECK(st);
  ft_coord *c = calloc(1, sizeof *c);
  if (!c) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  st = ft_etcd_open(addr, token, timeout_s, &c->e);
  if (st != HSR_OK) {
    free(c);
    return st;
  }
  /* from here on each watch's request is bounded by one try per member, not
   * by the start's wait: an etcd without quorum answers nothing, and the
   * coordinator must still stop promptly on a signal */
  ft_etcd_set_deadline(c->e, WATCH_DEADLINE_S);
  if (version) snprintf(version, n, "%s", v);
  *out = c;
  return HSR_OK;
}

void ft_coord_close(ft_coord *c) {
  if (!c) return;
  ft_etcd_close(c->e);
  free(c);
}

hsr_status ft_coord_watch(ft_coord *c, double wait_s, int *changed, int *groups, char *line, size_t n) {
  *changed = 0;
  *groups = 0;
  if (line && n) line[0] = 0;
  if (c->rev > 0) {
    int ch = 0;
    HSR_CHECK(ft_etcd_watch(c->e, FT_PREFIX "q", c->rev + 1, wait_s, &ch));
  }
  ft_kvs k;
  HSR_CHECK(ft_etcd_get(c->e, FT_PREFIX "m/", 1, &k));
  *groups = k.n;
  ft_kvs_free(&k);
  HSR_CHECK(ft_etcd_get(c->e, FT_PREFIX "q", 0, &k));
  c->rev = k.rev;
  char now[2048] = "no quorum yet"; /* room for the three id lists whole */
  ft_quorum q;
  if (k.n && ft_quorum_parse(k.kv[0].val, &q) == HSR_OK) {
    char m[512], j[512] = "", h[512];
    ft_ids_text(q.mem, q.nmem, m, sizeof m);
    size_t o =
        (size_t)snprintf(now, sizeof now, "epoch %" PRId64 ", %" PRId64 " steps done: replicas %s", q.epoch, q.done, m);
    if (q.njoin && o < sizeof now) {
      ft_ids_text(q.join, q.njoin, j, sizeof j);
      ft_ids_text(q.healer, q.njoin, h, sizeof h);
      snprintf(now + o, sizeof now - o, "; joining %s (healers %s)", j, h);
    }
  }
  ft_kvs_free(&k);
  if (strcmp(now, c->last)) {
    snprintf(c->last, sizeof c->last, "%s", now);
    *changed = 1;
  }
  if (line && n) snprintf(line, n, "%s", now);
  return HSR_OK;
}
