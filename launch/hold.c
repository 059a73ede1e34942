/* Under srun: a rank's death must not end its survivors before they speak.
 *
 * Slurm's PMIx plugin (src/plugins/mpi/pmix/pmixp_client_v2.c) registers a
 * default event handler with the PMIx server in slurmstepd, _errhandler, that
 * calls slurm_kill_job_step(job, step, SIGKILL) on any event. The PMIx server
 * raises PMIX_ERR_LOST_CONNECTION when a client's connection closes without
 * PMIx_Finalize (openpmix src/mca/ptl/base/ptl_base_sendrecv.c,
 * lost_connection), that is whenever a rank dies: the whole step is
 * SIGKILLed about 1 s later, before the survivors can name the dead rank.
 *
 * A child of the rank, forked right after PMIx_Init, holds a copy of the
 * connection's socket: a rank that dies closes only its own copy, so the
 * server sees nothing and the death is an ordinary task exit. The child
 * (no threads, only system calls) waits on a pipe from the rank:
 *  - a byte: the rank finalized PMIx; the child leaves at once;
 *  - end of file without one: the rank ended without PMIx_Finalize; the
 *    child holds the connection for at most hold_s (the survivors' own
 *    bounds: HSR_COMM_TIMEOUT, HSR_BOOT_TIMEOUT, and a grace to speak),
 *    reading and dropping what the server still sends, and leaves early when
 *    the server closes it (the step is over). Then Slurm's handler runs as
 *    before and ends what is left of the step. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "boot_int.h"
#include "common/common_internal.h"
#include "common/env.h"

#define HOLD_MAX_FDS 8
#define HOLD_GRACE_S 10.0 /* after the survivors' longest wait: to print and exit */
#define HOLD_RELEASE 1

/* The PMIx server's namespace under srun: "slurm.pmix.JOB.STEP" (pmixp_info.c). */
static int under_slurm_pmix(const hsr_boot *b) { return strncmp(b->me.nspace, "slurm.pmix.", 11) == 0; }

/* The port of the PMIx server's TCP address from the URI it gives its clients
 * ("pmix-server.PID;tcp4://127.0.0.1:PORT"), 0 if none. */
static int server_port(void) {
  static const char *const uris[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21",
                                     "PMIX_SERVER_URI2"};
  for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++) {
    const char *u = getenv(uris[i]), *c = u ? strrchr(u, ':') : NULL;
    if (!c || !strstr(u, "://")) continue;
    char *end = NULL;
    long port = strtol(c + 1, &end, 10);
    if (end && !*end && port > 0 && port < 65536) return (int)port;
  }
  return 0;
}

/* This process's connections to the PMIx server (its peer's port is the
 * server's), right after PMIx_Init. Only those: the tasks also inherit
 * slurmstepd's own sockets, which the child must not touch. */
static int server_sockets(int port, int *fds, int max, int *maxfd) {
  int n = 0;
  *maxfd = 2;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int self = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end = NULL;
    long fd = strtol(e->d_name, &end, 10);
    if (!end || *end || fd < 0 || fd == self) continue;
    if (fd > *maxfd) *maxfd = (int)fd;
    struct stat s;
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    if (fd <= 2 || fstat((int)fd, &s) != 0 || !S_ISSOCK(s.st_mode)) continue;
    if (getpeername((int)fd, (struct sockaddr *)&a, &al) != 0) continue;
    int p = a.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&a)->sin_port)
            : a.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
                                      : 0;
    if (p == port && n < max) fds[n++] = (int)fd;
  }
  closedir(d);
  return n;
}

/* The child: system calls only (it was forked from a threaded process). */
static void hold_main(int rfd, const int *fds, int nfds, int maxfd, double hold_s) {
  prctl(PR_SET_NAME, BOOT_HOLD_COMM, 0, 0, 0); /* not taken for a rank by the /proc scan (roll.c) */
  for (int fd = 0; fd <= maxfd; fd++) {
    int keep = fd == rfd;
    for (int i = 0; i < nfds; i++) keep |= fds[i] == fd;
    if (!keep) close(fd);
  }
#ifdef SYS_close_range
  syscall(SYS_close_range, (unsigned)maxfd + 1, ~0u, 0); /* anything opened since the listing */
#endif
  /* the launcher's signals end it like any process of the step */
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  unsigned char c = 0;
  ssize_t r;
  while ((r = read(rfd, &c, 1)) < 0 && errno == EINTR) {}
  if (r == 1 && c == HOLD_RELEASE) _exit(0);
  /* the rank ended without PMIx_Finalize: hold, bounded */
  double until = clock_s() + hold_s;
  struct pollfd pf[HOLD_MAX_FDS];
  for (int i = 0; i < nfds; i++) pf[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
  for (double left = hold_s; left > 0; left = until - clock_s()) {
    int n = poll(pf, (nfds_t)nfds, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; n > 0 && i < nfds; i++) {
      if (!pf[i].revents) continue;
      char buf[4096];
      ssize_t got = recv(pf[i].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) || (pf[i].revents & (POLLHUP | POLLERR)))
        _exit(0); /* the server closed it: the step is over */
    }
  }
  _exit(0);
}

void boot_hold_start(hsr_boot *b) {
  b->hold_wfd = -1;
  b->hold_pid = -1;
  if (b->singleton || !under_slurm_pmix(b)) return;
  double comm = 300, grace = HOLD_GRACE_S;
  if (env_get_double("HSR_COMM_TIMEOUT", &comm) != HSR_OK) comm = 300; /* checked before: valid */
  double hold = (comm > b->timeout_s ? comm : (double)b->timeout_s) + grace;
  int fds[HOLD_MAX_FDS], maxfd = 2, port = server_port();
  int n = port ? server_sockets(port, fds, HOLD_MAX_FDS, &maxfd) : 0;
  if (n <= 0) { /* every rank alike: rank 0 says it */
    if (b->rank == 0)
      HSR_LOG_W("boot: no connection to the PMIx server found to hold (%s): under srun a rank's death then ends the "
                "step before the survivors can say which rank died",
                n < 0  ? strerror(errno)
                : port ? "no socket to its port"
                       : "no TCP address in PMIX_SERVER_URI*");
    return;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    HSR_LOG_W("boot: no PMIx hold (pipe: %s)", strerror(errno));
    return;
  }
  if (p[0] > maxfd) maxfd = p[0];
  if (p[1] > maxfd) maxfd = p[1];
  pid_t pid = fork();
  if (pid == 0) hold_main(p[0], fds, n, maxfd, hold);
  close(p[0]);
  if (pid < 0) {
    close(p[1]);
    HSR_LOG_W("boot: no PMIx hold (fork: %s)", strerror(errno));
    return;
  }
  b->hold_wfd = p[1];
  b->hold_pid = (int)pid;
  HSR_LOG_D("boot: srun: process %d holds this rank's PMIx connection (%d socket%s) for up to %.0f s after an "
            "unfinalized end",
            (int)pid, n, n == 1 ? "" : "s", hold);
}

void boot_hold_release(hsr_boot *b) {
  if (b->hold_wfd < 0) return;
  unsigned char c = HOLD_RELEASE;
  while (write(b->hold_wfd, &c, 1) < 0 && errno == EINTR) {}
  close(b->hold_wfd);
  b->hold_wfd = -1;
  /* it leaves at once: reaped here, so a process that boots again keeps no zombie */
  for (int i = 0; i < 1000 && waitpid(b->hold_pid, NULL, WNOHANG) == 0; i++)
    nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
  b->hold_pid = -1;
}
