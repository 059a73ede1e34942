/* Where hsr's UCX context listens. UCX's TCP transport listens on every
 * network interface it uses, and by default it uses them all: every rank of
 * a one-host job accepted connections on the machine's external address.
 * So hsr's own context gets UCX_NET_DEVICES (ucp_config_modify, as the
 * emulated network does): its TCP interfaces are loopback when the job runs
 * on one host, else the interfaces the routing table picks to reach the
 * job's other hosts; every network device that is not TCP (InfiniBand,
 * RoCE) stays. A UCX_NET_DEVICES the user set is left alone. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uct/api/uct.h>

#include "ucx.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

#define IFACES_MAX 1024

static void add_name(char *list, size_t n, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; *p;) { /* already there? */
    size_t k = strcspn(p, ",");
    if (k == len && !strncmp(p, name, len)) return;
    p += k + (p[k] == ',');
  }
  size_t used = strlen(list);
  if (used + len + 2 > n) return;
  if (used) list[used++] = ',';
  memcpy(list + used, name, len + 1);
}

/* The interface this host's routing table sends to `host` from: its name in
 * out; 0 when the host does not resolve or no interface holds the source. */
static int route_iface(const char *host, char *out, size_t n) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
  if (getaddrinfo(host, "9", &hints, &ai) != 0 || !ai) return 0;
  int found = 0;
  for (struct addrinfo *a = ai; a && !found; a = a->ai_next) {
    int s = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    /* a UDP connect sends nothing: it only asks the kernel for the route */
    if (connect(s, a->ai_addr, a->ai_addrlen) == 0 && getsockname(s, (struct sockaddr *)&me, &ml) == 0) {
      struct ifaddrs *ifs = NULL;
      if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
          if (!i->ifa_addr || i->ifa_addr->sa_family != me.ss_family) continue;
          int same =
              me.ss_family == AF_INET
                  ? ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == ((struct sockaddr_in *)&me)->sin_addr.s_addr
                  : !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, &((struct sockaddr_in6 *)&me)->sin6_addr,
                            sizeof(struct in6_addr));
          if (same) snprintf(out, n, "%s", i->ifa_name), found = 1;
        }
        freeifaddrs(ifs);
      }
    }
    close(s);
  }
  freeaddrinfo(ai);
  return found;
}

/* Every network device UCX has that is not TCP (those never listen on an IP
 * socket and carry the fast paths between hosts), into list. */
static void rdma_devices(char *list, size_t n) {
  uct_component_h *comps = NULL;
  unsigned ncomp = 0;
  if (uct_query_components(&comps, &ncomp) != UCS_OK) return;
  for (unsigned c = 0; c < ncomp; c++) {
    uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
    if (uct_component_query(comps[c], &ca) != UCS_OK || !ca.md_resource_count) continue;
    uct_md_resource_desc_t *mds = calloc(ca.md_resource_count, sizeof *mds);
    if (!mds) continue;
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    ca.md_resources = mds;
    if (uct_component_query(comps[c], &ca) == UCS_OK) {
      for (unsigned m = 0; m < ca.md_resource_count; m++) {
        uct_md_config_t *mc = NULL;
        uct_md_h md = NULL;
        if (uct_md_config_read(comps[c], NULL, NULL, &mc) != UCS_OK) continue;
        if (uct_md_open(comps[c], mds[m].md_name, mc, &md) == UCS_OK) {
          uct_tl_resource_desc_t *tl = NULL;
          unsigned ntl = 0;
          if (uct_md_query_tl_resources(md, &tl, &ntl) == UCS_OK) {
            for (unsigned t = 0; t < ntl; t++)
              if (tl[t].dev_type == UCT_DEVICE_TYPE_NET && strcmp(tl[t].tl_name, "tcp"))
                add_name(list, n, tl[t].dev_name);
            uct_release_tl_resource_list(tl);
          }
          uct_md_close(md);
        }
        uct_config_release(mc);
      }
    }
    free(mds);
  }
  uct_release_component_list(comps);
}

hsr_status ucx_config_ifaces(coll_ctx *x, ucp_config_t *cfg) {
  if (x->tune.emulate[0]) return HSR_OK; /* loopback already (ucx_emul.c) */
  const char *user = getenv("UCX_NET_DEVICES");
  if (user && *user) {
    if (x->rank == 0) HSR_LOG_I("collectives: UCX_NET_DEVICES=%s (set by the user): UCX listens there", user);
    return HSR_OK;
  }
  hsr_boot *b = x->boot;
  int n = hsr_boot_size(b), hosts = 0;
  char list[IFACES_MAX] = "", tcp[IFACES_MAX] = "", why[256] = "";
  for (int r = 0; r < n; r++) {
    int first = 1;
    for (int q = 0; q < r && first; q++) first = strcmp(boot_hostname_of(b, q), boot_hostname_of(b, r)) != 0;
    if (!first) continue;
    hosts++;
    if (!strcmp(boot_hostname_of(b, r), boot_hostname(b))) continue;
    char ifn[64];
    if (route_iface(boot_hostname_of(b, r), ifn, sizeof ifn))
      add_name(tcp, sizeof tcp, ifn);
    else if (!why[0])
      snprintf(why, sizeof why, "host %s does not resolve to a routed address", boot_hostname_of(b, r));
  }
  if (why[0]) { /* better every interface than a job that cannot connect */
    HSR_LOG_W("collectives: cannot tell which interface reaches the other hosts (%s): UCX listens on every "
              "interface (set UCX_NET_DEVICES to choose)",
              why);
    return HSR_OK;
  }
  if (hosts == 1 || boot_sim_nodes(b) > 1) add_name(tcp, sizeof tcp, "lo"); /* simulated nodes: TCP on lo */
  snprintf(list, sizeof list, "%s", tcp);
  rdma_devices(list, sizeof list);
  ucs_status_t us = ucp_config_modify(cfg, "NET_DEVICES", list);
  if (us != UCS_OK)
    return hsr_error(HSR_ERR_TRANSPORT, "ucp_config_modify(UCX_NET_DEVICES=%s): %s", list, ucs_status_string(us));
  if (x->rank == 0)
    HSR_LOG_I("collectives: UCX_NET_DEVICES=%s for hsr's context (%d host%s; TCP listens on %s only)", list, hosts,
              hosts == 1 ? "" : "s", tcp);
  return HSR_OK;
}
