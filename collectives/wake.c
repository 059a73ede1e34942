/* Waking a context's progress: the kick (a doorbell ring, the event fd when
 * the progress thread sleeps in epoll, the condition variable) and the fds
 * it sleeps on. Below fault.c and progress.c, which both kick. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "coll.h"
#include "common/common_internal.h"

void coll_kick(coll_ctx *x) {
  seg_ring(&x->seg, x->rank);
  /* with a wake socket the progress thread flags when it sleeps in epoll */
  if (x->evfd >= 0 && (x->seg.wakefd < 0 || atomic_load(&x->seg.ctl->sleeping))) {
    uint64_t one = 1;
    ssize_t r = write(x->evfd, &one, sizeof one);
    (void)r;
  }
  pthread_cond_broadcast(&x->cv);
}

hsr_status coll_events_open(coll_ctx *x) {
  x->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  x->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (x->evfd < 0 || x->epfd < 0) return hsr_error(HSR_ERR_SYSTEM, "eventfd/epoll: %s", strerror(errno));
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = x->net_fd};
  struct epoll_event ev2 = {.events = EPOLLIN, .data.fd = x->evfd};
  if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->net_fd, &ev) || epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->evfd, &ev2))
    return hsr_error(HSR_ERR_SYSTEM, "epoll_ctl: %s", strerror(errno));
  /* Wake socket: lets node peers wake this rank's progress thread out of
   * epoll. Without it (bind refused) progress falls back to short polls. */
  int wfd = seg_wake_open(&x->seg);
  struct epoll_event ev3 = {.events = EPOLLIN, .data.fd = wfd};
  if (wfd >= 0 && epoll_ctl(x->epfd, EPOLL_CTL_ADD, wfd, &ev3) == 0) {
    x->seg.wakefd = wfd;
  } else {
    HSR_LOG_I("collectives: no wake socket (%s): shared-memory progress polls", strerror(errno));
    if (wfd >= 0) close(wfd);
  }
  /* a node peer's exit wakes the thread too (fault.c reads the pidfds) */
  for (int r = 0; x->fault.pidfd && r < x->size; r++)
    if (x->fault.pidfd[r] >= 0) {
      struct epoll_event ev4 = {.events = EPOLLIN, .data.fd = x->fault.pidfd[r]};
      epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->fault.pidfd[r], &ev4);
    }
  return HSR_OK;
}

void coll_events_close(coll_ctx *x) {
  if (x->epfd >= 0) close(x->epfd);
  if (x->evfd >= 0) close(x->evfd);
  x->epfd = x->evfd = -1;
}
