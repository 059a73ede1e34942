/* HSR_FAULT, the fault matrix's test hook (common/fault_hook.h). */
#include "fault_hook.h"
#include "common/env.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/common_internal.h"

static const char *const phases[] = {"all_gather", "reduce_scatter", "all_reduce",   "broadcast", "barrier", "step",
                                     "ckpt_save",  "ckpt_done",      "ft_allreduce", "ft_vote",   "ft_heal", "boot",
                                     "final",      "teardown",       NULL};

/* read-only data, never executable: the target of the `jump` action */
static const unsigned long not_code = 0;

static hsr_status bad(const char *v, const char *why) {
  return hsr_error(HSR_ERR_INVALID,
                   "HSR_FAULT='%s': %s (valid: RANK:PHASE:N:ACTION, PHASE all_gather|reduce_scatter|all_reduce|"
                   "broadcast|barrier|step|ckpt_save|ckpt_done|ft_allreduce|ft_vote|ft_heal|boot|final|teardown, N >= 1, ACTION "
                   "kill|killnode|stop|jump|sleep:SECONDS; a test hook)",
                   v, why);
}

hsr_status fault_hook_init(fault_hook *h, int rank) {
  if (!h) return hsr_error(HSR_ERR_INVALID, "fault_hook_init: NULL hook");
  memset(h, 0, sizeof *h);
  const char *v = NULL;
  hsr_status st = env_get_str("HSR_FAULT", &v);
  if (st != HSR_OK) return st;
  if (!v) return HSR_OK;
  char buf[128], *part[6] = {0};
  if (strlen(v) >= sizeof buf) return bad(v, "too long");
  snprintf(buf, sizeof buf, "%s", v);
  int np = 0;
  for (char *s = buf, *t; np < 6 && (t = strsep(&s, ":")); np++) part[np] = t;
  if (np < 4 || np > 5 || (np == 5 && strcmp(part[3], "sleep") != 0)) return bad(v, "expected four fields");
  long r, n;
  int ph;
  if (parse_long("HSR_FAULT rank", part[0], 0, 1 << 24, &r) != HSR_OK) return bad(v, "RANK is not a rank");
  if (parse_choice("HSR_FAULT phase", part[1], phases, &ph) != HSR_OK) return bad(v, "unknown PHASE");
  if (parse_long("HSR_FAULT N", part[2], 1, 1L << 40, &n) != HSR_OK) return bad(v, "N is not >= 1");
  if (!strcmp(part[3], "kill") && np == 4)
    h->action = 0;
  else if (!strcmp(part[3], "stop") && np == 4)
    h->action = 1;
  else if (!strcmp(part[3], "jump") && np == 4)
    h->action = 4;
  else if (!strcmp(part[3], "killnode") && np == 4) {
    h->action = 3;
    if (ph >= 5) return bad(v, "killnode needs a collective PHASE (its node peers are the collectives')");
  } else if (np == 5) {
    h->action = 2;
    if (parse_double("HSR_FAULT sleep", part[4], 0, 86400, &h->sleep_s) != HSR_OK)
      return bad(v, "sleep:S needs seconds in [0, 86400]");
  } else
    return bad(v, "unknown ACTION");
  snprintf(h->phase, sizeof h->phase, "%s", phases[ph]);
  h->n = n;
  h->armed = r == rank;
  return HSR_OK;
}

hsr_status fault_hook_hit(fault_hook *h, const char *phase) {
  if (!h || !h->armed || !phase || strcmp(phase, h->phase) != 0) return HSR_OK;
  long k = __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
  if (k != h->n) return HSR_OK;
  HSR_LOG_W("HSR_FAULT: %s at %s #%ld (test hook)",
            h->action == 0   ? "SIGKILL"
            : h->action == 1 ? "SIGSTOP"
            : h->action == 3 ? "SIGKILL to this rank's node"
            : h->action == 4 ? "a call through a pointer to data"
                             : "sleep",
            phase, k);
  if (h->action == 3) /* the node's ranks at once, as a node that loses power */
    for (int i = 0; i < h->n_node_pids; i++) kill((pid_t)h->node_pids[i], SIGKILL);
  if (h->action == 0 || h->action == 3) raise(SIGKILL);
  if (h->action == 1) raise(SIGSTOP);
  if (h->action == 4) { /* a crash as a stale callback makes one: the caller is named by the crash report */
    void (*fn)(void) = (void (*)(void))(uintptr_t)&not_code;
    fn();
  }
  if (h->action == 2) {
    struct timespec ts = {.tv_sec = (time_t)h->sleep_s,
                          .tv_nsec = (long)((h->sleep_s - (double)(time_t)h->sleep_s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  return HSR_OK;
}
