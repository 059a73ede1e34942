/* The UCX transport on an emulated network (hsr-run --emulate-net): the
 * context is configured for TCP on loopback only, so messages between
 * simulated nodes go through the rate-limited interface instead of UCX's
 * shared-memory transports (posix, sysv, cma), which would bypass the
 * shaping. Set through ucp_config_modify on hsr's own context, not the
 * environment: another UCX user in the same process (Open MPI) keeps its
 * settings, and a UCX_TLS left in the environment cannot undo the emulation.
 * Each new endpoint's lanes are read back from UCX (ucp_ep_print_info) and
 * logged at HSR_LOG=info; on an emulated network a lane that is not TCP is
 * refused. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ucx.h"
#include "common/env.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

/* Under srun the tasks start outside the run's namespace: their PMIx server
 * lives in slurmstepd (slurmd's network namespace) and PMIx connects over
 * TCP loopback, which a namespace cuts. So the bootstrap joins the job
 * first, and only then does this thread enter HSR_EMULATE_NET_NS (the PMIx
 * connection keeps working: a socket stays in the namespace it was made in).
 * Everything made afterwards (UCX's sockets and threads, the progress
 * thread, the wake socket) lives inside. Under mpirun the whole job already
 * runs inside: nothing to do. */
static hsr_status enter_netns(coll_ctx *x) {
  const char *name = NULL;
  HSR_CHECK(env_get_str("HSR_EMULATE_NET_NS", &name));
  if (!name) return HSR_OK;
  if (strchr(name, '/') || strlen(name) > 64)
    return hsr_error(HSR_ERR_INVALID, "HSR_EMULATE_NET_NS='%s': expected a namespace name from hsr-run", name);
  char path[128];
  snprintf(path, sizeof path, "/run/netns/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return hsr_error(HSR_ERR_SYSTEM,
                     "emulated network: cannot open namespace %s: %s (is the hsr-run that made it gone?)", path,
                     strerror(errno));
  struct stat want, now;
  int inside = fstat(fd, &want) == 0 && stat("/proc/thread-self/ns/net", &now) == 0 && want.st_ino == now.st_ino &&
               want.st_dev == now.st_dev;
  hsr_status st = HSR_OK;
  if (!inside && setns(fd, CLONE_NEWNET) != 0)
    st = hsr_error(HSR_ERR_SYSTEM, "emulated network: cannot enter namespace %s: %s (needs CAP_SYS_ADMIN)", name,
                   strerror(errno));
  else if (!inside && x->rank == 0)
    HSR_LOG_I("collectives: entered network namespace %s after joining the PMIx job", name);
  close(fd);
  return st;
}

hsr_status ucx_config_emulated(coll_ctx *x, ucp_config_t *cfg) {
  if (!x->tune.emulate[0]) return HSR_OK;
  HSR_CHECK(enter_netns(x));
  static const char *const kv[][2] = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
    ucs_status_t us = ucp_config_modify(cfg, kv[i][0], kv[i][1]);
    if (us != UCS_OK)
      return hsr_error(HSR_ERR_TRANSPORT, "emulated network: ucp_config_modify(UCX_%s=%s): %s", kv[i][0], kv[i][1],
                       ucs_status_string(us));
  }
  if (x->rank == 0)
    HSR_LOG_I("collectives: emulated network (HSR_EMULATE_NET=%s): hsr's UCX context uses UCX_TLS=tcp "
              "UCX_NET_DEVICES=lo; node-local traffic stays on shared memory",
              x->tune.emulate);
  return HSR_OK;
}

/* "tcp/lo tcp/lo" from ucp_ep_print_info's "lane[i]:  N:tcp/lo.0 md[...]" lines;
 * *all_tcp = 0 when a lane runs on another transport. */
static void lanes_of(const char *info, char *out, size_t cap, int *nlanes, int *all_tcp) {
  size_t o = 0;
  *nlanes = 0, *all_tcp = 1;
  out[0] = 0;
  for (const char *p = strstr(info, "lane["); p; p = strstr(p + 1, "lane[")) {
    const char *q = strchr(p, ':');
    if (!q) break;
    q++;
    while (*q == ' ') q++;
    const char *colon = strchr(q, ':'), *end = q + strcspn(q, " \n");
    if (!colon || colon > end) continue;
    const char *tl = colon + 1, *dot = tl + strcspn(tl, ". \n");
    int len = (int)(dot - tl);
    if (strncmp(tl, "tcp/", 4)) *all_tcp = 0;
    if (o < cap) o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? " " : "", len, tl);
    (*nlanes)++;
  }
}

hsr_status ucx_ep_check(coll_ctx *x, int wr, ucp_ep_h ep) {
  int emulated = x->tune.emulate[0] != 0;
  if (!emulated && !log_enabled(HSR_LOG_INFO)) return HSR_OK;
  char *info = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&info, &len);
  if (!f) return HSR_OK; /* only a report: nothing to check without it */
  ucp_ep_print_info(ep, f);
  fclose(f);
  char lanes[160];
  int n = 0, all_tcp = 1;
  lanes_of(info ? info : "", lanes, sizeof lanes, &n, &all_tcp);
  free(info);
  int peer_node = boot_node_of(x->boot, wr);
  HSR_LOG_I("collectives: UCX endpoint to world rank %d (node %d, %s): %s", wr, peer_node,
            peer_node == x->node ? "same node" : "cross-node", n ? lanes : "(no lanes reported)");
  if (emulated && (!n || !all_tcp))
    return hsr_error(HSR_ERR_TRANSPORT,
                     "emulated network: the UCX endpoint to world rank %d runs on '%s', not TCP: its traffic would "
                     "bypass the rate limit",
                     wr, n ? lanes : "(no lanes reported)");
  return HSR_OK;
}
