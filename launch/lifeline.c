/* The end of a rank's job: a rank ends when its launcher does, and says what
 * it knows when the launcher ends it.
 *
 * Three things end a rank from outside: its parent exits (a pidfd), the
 * connection to its PMIx server is lost (PMIx's PMIX_ERR_LOST_CONNECTION),
 * or a signal asks (SIGTERM, SIGINT, SIGHUP: mpirun and srun send SIGTERM to
 * the survivors of a failed job). One thread waits for all three in poll().
 * It lets the subscribers (collectives/) print their verdict first, within
 * a bound, then ends the rank with the signal's default action. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "boot_int.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

#define LIFE_STOP 0xff /* finalize: the thread returns */
#define LIFE_LOST 0xfe /* the PMIx server's connection is gone */
#define LIFE_KILL_AFTER_S 5.0

/* The write end of the lifeline's pipe. A signal handler gets no argument,
 * so this one descriptor is the process's; one lifeline at a time owns it. */
static _Atomic int life_wfd = -1;

static const int life_sigs[LIFE_NSIGS] = {SIGTERM, SIGINT, SIGHUP};

static void on_signal(int sig) {
  int e = errno, fd = atomic_load(&life_wfd);
  unsigned char c = (unsigned char)sig;
  if (fd >= 0 && write(fd, &c, 1) < 0) { /* a full pipe already holds a reason */
  }
  errno = e;
}

static void poke(boot_life *l, unsigned char c) {
  if (l->wfd >= 0 && write(l->wfd, &c, 1) < 0) { /* as above */
  }
}

static void on_lost(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                    pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
  (void)id, (void)status, (void)source, (void)results, (void)nresults;
  for (size_t i = 0; i < ninfo; i++)
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_RETURN_OBJECT) && info[i].value.type == PMIX_POINTER) {
      hsr_boot *b = info[i].value.data.ptr;
      poke(&b->life, LIFE_LOST);
    }
  if (cbfunc) cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Does not return: the subscribers' last word, then the signal's default action. */
static void end_rank(hsr_boot *b, int why) {
  boot_life *l = &b->life;
  /* each path names itself: the fault matrix asserts which one ended a rank */
  if (why == LIFE_LOST)
    HSR_LOG_E("the launcher is gone (the connection to its PMIx server was lost): this rank ends");
  else if (why < 0)
    HSR_LOG_E("the launcher is gone (parent process %d exited): this rank ends", (int)l->ppid);
  else
    HSR_LOG_I("lifeline: SIG%s from outside: this rank ends", why == SIGTERM ? "TERM" : why == SIGINT ? "INT" : "HUP");
  pthread_mutex_lock(&l->mu);
  for (int i = 0; i < LIFE_NSUBS; i++)
    if (l->fn[i]) l->fn[i](l->arg[i]);
  pthread_mutex_unlock(&l->mu);
  /* The launcher ends this rank in the bootstrap (no collectives yet) and
   * nobody here has named why: a rank of this host whose process is gone is
   * the reason (from the process table read before the exchange: the
   * launcher, ending the job, no longer answers). */
  char who[256];
  int by_sig = why > 0 && why < LIFE_LOST;
  if (by_sig && !boot_failure(b) && atomic_load(&b->named) && b->named_msg[0]) /* the exchange's own finding */
    HSR_LOG_E("%s (seen as the launcher ended this rank)", b->named_msg);
  else if (by_sig && atomic_load(&b->booting) && !boot_failure(b) && !atomic_load(&b->named) &&
           boot_gone_rank(b, who, sizeof who))
    HSR_LOG_E("%s (seen as the launcher ended this rank)", who);
  else if (by_sig && !strcmp(b->launcher, "mpirun") && !atomic_load(&b->table_read))
    HSR_LOG_W("the launcher ended this rank before its bootstrap had read who the job's ranks are: it cannot say "
              "which rank failed, if one did");
  int sig = why > 0 && why < LIFE_LOST ? why : SIGTERM;
  int k = -1;
  for (int i = 0; i < LIFE_NSIGS; i++)
    if (life_sigs[i] == sig && l->caught[i]) k = i;
  if (k >= 0) signal(sig, SIG_DFL); /* ours: the default action ends the rank with the signal's status */
  kill(getpid(), sig);
  /* the program's own handler runs instead: it gets a bound */
  sleep_s(LIFE_KILL_AFTER_S);
  HSR_LOG_E("did not end %.0f s after SIG%s: killing this rank", LIFE_KILL_AFTER_S,
            sig == SIGTERM  ? "TERM"
            : sig == SIGINT ? "INT"
                            : "HUP");
  kill(getpid(), SIGKILL);
  for (;;) sleep_s(1);
}

static void *life_main(void *arg) {
  hsr_boot *b = arg;
  boot_life *l = &b->life;
  for (;;) {
    struct pollfd pf[2] = {{.fd = l->rfd, .events = POLLIN}, {.fd = l->pidfd, .events = POLLIN}};
    int n = poll(pf, l->pidfd >= 0 ? 2 : 1, -1);
    if (n < 0 && errno != EINTR) return NULL;
    if (n <= 0) continue;
    unsigned char c = 0;
    if ((pf[0].revents & POLLIN) && read(l->rfd, &c, 1) == 1) {
      if (c == LIFE_STOP) return NULL;
      end_rank(b, c);
    }
    if (l->pidfd >= 0 && (pf[1].revents & (POLLIN | POLLHUP))) end_rank(b, -1);
  }
}

void boot_life_start(hsr_boot *b) {
  boot_life *l = &b->life;
  pthread_mutex_init(&l->mu, NULL);
  l->rfd = l->wfd = l->pidfd = -1;
  l->inited = 1;
  if (b->singleton) return;
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    HSR_LOG_W("boot: no lifeline (pipe: %s): this rank will not notice its launcher's death", strerror(errno));
    return;
  }
  l->rfd = p[0], l->wfd = p[1];
  fcntl(l->rfd, F_SETFL, 0); /* the thread blocks on it; writers never do */
  l->ppid = getppid();
#ifdef SYS_pidfd_open
  l->pidfd = (int)syscall(SYS_pidfd_open, l->ppid, 0);
  if (l->pidfd >= 0 && getppid() != l->ppid) { /* it died before the pidfd: gone already */
    close(l->pidfd);
    l->pidfd = -1;
    poke(l, LIFE_LOST);
  }
#endif
  pmix_status_t codes[] = {PMIX_ERR_LOST_CONNECTION};
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[0], PMIX_EVENT_RETURN_OBJECT, b, PMIX_POINTER);
  PMIX_INFO_LOAD(&info[1], PMIX_EVENT_HDLR_NAME, "hsr-lifeline", PMIX_STRING);
  pmix_status_t rc = PMIx_Register_event_handler(codes, 1, info, 2, on_lost, NULL, NULL);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc >= 0) l->lost_ref = (size_t)rc, l->lost_registered = 1;
  /* the signals: only those the program has left at their default action,
   * and only by the first lifeline of the process */
  int expect = -1;
  if (atomic_compare_exchange_strong(&life_wfd, &expect, l->wfd)) {
    l->owns_signals = 1;
    for (int i = 0; i < LIFE_NSIGS; i++) {
      struct sigaction old, sa;
      if (sigaction(life_sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      l->caught[i] = sigaction(life_sigs[i], &sa, NULL) == 0;
    }
  }
  l->started = pthread_create(&l->thread, NULL, life_main, b) == 0;
  if (!l->started) HSR_LOG_W("boot: no lifeline thread: this rank will not notice its launcher's death");
  HSR_LOG_D("boot: lifeline: parent %d (pidfd %s), PMIx connection loss %s", (int)l->ppid,
            l->pidfd >= 0 ? "open" : "none", l->lost_registered ? "watched" : PMIx_Error_string(rc));
}

void boot_life_stop(hsr_boot *b) {
  boot_life *l = &b->life;
  if (!l->inited) return;
  if (l->lost_registered) PMIx_Deregister_event_handler(l->lost_ref, NULL, NULL);
  l->lost_registered = 0;
  if (l->owns_signals) { /* the default actions back, then the pipe is no longer the process's */
    for (int i = 0; i < LIFE_NSIGS; i++)
      if (l->caught[i]) signal(life_sigs[i], SIG_DFL), l->caught[i] = 0;
    atomic_store(&life_wfd, -1);
    l->owns_signals = 0;
  }
  if (l->started) {
    unsigned char c = LIFE_STOP;
    while (write(l->wfd, &c, 1) < 0 && errno == EAGAIN) sleep_s(0.001);
    pthread_join(l->thread, NULL);
    l->started = 0;
  }
  if (l->pidfd >= 0) close(l->pidfd);
  if (l->rfd >= 0) close(l->rfd);
  if (l->wfd >= 0) close(l->wfd);
  l->pidfd = l->rfd = l->wfd = -1;
  pthread_mutex_destroy(&l->mu);
  l->inited = 0;
}

hsr_status boot_on_end(hsr_boot *b, hsr_boot_end_fn fn, void *arg) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_on_end: NULL context");
  if (!arg) return hsr_error(HSR_ERR_INVALID, "boot_on_end: NULL argument");
  boot_life *l = &b->life;
  if (!l->inited) return HSR_OK;
  hsr_status st = HSR_OK;
  pthread_mutex_lock(&l->mu);
  int at = -1;
  for (int i = 0; i < LIFE_NSUBS && at < 0; i++)
    if (l->arg[i] == arg) at = i;
  for (int i = 0; fn && i < LIFE_NSUBS && at < 0; i++)
    if (!l->fn[i]) at = i;
  if (at >= 0) {
    l->fn[at] = fn;
    l->arg[at] = fn ? arg : NULL;
  } else if (fn) {
    st = hsr_error(HSR_ERR_STATE, "boot_on_end: already %d subscribers", LIFE_NSUBS);
  }
  pthread_mutex_unlock(&l->mu);
  return st;
}
