/* Failures as the launcher and this rank see them: PMIx event handlers for a
 * peer's termination (delivered by some launchers only), the failure this
 * rank has found (collectives/ notes it), ending a job whose peer will not
 * end by itself, and a barrier that gives up when told to. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot_int.h"
#include "common/common_internal.h"

/* ---- the launcher's events ------------------------------------------------- */

static void record(hsr_boot *b, int rank, pmix_status_t code, const pmix_info_t *info, size_t ninfo) {
  if (rank < 0 || rank >= b->size || rank == b->rank) return;
  int exit_code = -1;
  for (size_t i = 0; i < ninfo; i++)
    if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
      exit_code = info[i].value.data.integer;
  boot_watch *w = &b->watch;
  pthread_mutex_lock(&w->mu);
  if (!w->gone[rank][0]) {
    if (exit_code >= 0)
      snprintf(w->gone[rank], sizeof w->gone[rank], "terminated, exit code %d (launcher event %s)", exit_code,
               PMIx_Error_string(code));
    else
      snprintf(w->gone[rank], sizeof w->gone[rank], "terminated (launcher event %s)", PMIx_Error_string(code));
  }
  if (w->fn) w->fn(w->arg, rank);
  pthread_mutex_unlock(&w->mu);
}

/* Which ranks of this job an event is about: the affected proc(s), else its source. */
static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t *results, size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata) {
  (void)id, (void)results, (void)nresults;
  hsr_boot *b = NULL;
  for (size_t i = 0; i < ninfo; i++)
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_RETURN_OBJECT) && info[i].value.type == PMIX_POINTER)
      b = info[i].value.data.ptr;
  int told = 0;
  for (size_t i = 0; b && i < ninfo; i++) {
    if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC) {
      const pmix_proc_t *p = info[i].value.data.proc;
      if (PMIX_CHECK_NSPACE(p->nspace, b->me.nspace)) record(b, (int)p->rank, status, info, ninfo), told = 1;
    } else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROCS) && info[i].value.type == PMIX_DATA_ARRAY &&
               info[i].value.data.darray && info[i].value.data.darray->type == PMIX_PROC) {
      const pmix_proc_t *p = info[i].value.data.darray->array;
      for (size_t k = 0; k < info[i].value.data.darray->size; k++)
        if (PMIX_CHECK_NSPACE(p[k].nspace, b->me.nspace)) record(b, (int)p[k].rank, status, info, ninfo), told = 1;
    }
  }
  if (b && !told && source && PMIX_CHECK_NSPACE(source->nspace, b->me.nspace) && status != PMIX_EVENT_JOB_END)
    record(b, (int)source->rank, status, info, ninfo);
  if (cbfunc) cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

void boot_watch_init(hsr_boot *b) {
  boot_watch *w = &b->watch;
  pthread_mutex_init(&w->mu, NULL);
  w->gone = calloc((size_t)b->size, sizeof *w->gone);
  if (b->singleton || !w->gone) return;
  pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED,         PMIX_ERR_PROC_ABORTING,      PMIX_EVENT_PROC_TERMINATED,
                           PMIX_ERR_PROC_TERM_WO_SYNC,    PMIX_ERR_PROC_KILLED_BY_CMD, PMIX_ERR_EXIT_NONZERO_TERM,
                           PMIX_ERR_PROC_REQUESTED_ABORT, PMIX_EVENT_NODE_DOWN};
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[0], PMIX_EVENT_RETURN_OBJECT, b, PMIX_POINTER);
  PMIX_INFO_LOAD(&info[1], PMIX_EVENT_HDLR_NAME, "hsr-peer-failure", PMIX_STRING);
  /* the specific codes, and a default handler for launchers that refuse them
   * (srun's pmix plugin answers the list with an error) */
  pmix_status_t rc = PMIx_Register_event_handler(codes, sizeof codes / sizeof *codes, info, 2, on_event, NULL, NULL);
  if (rc >= 0) w->refs[w->nrefs++] = (size_t)rc;
  pmix_status_t rc2 = PMIx_Register_event_handler(NULL, 0, info, 2, on_event, NULL, NULL);
  if (rc2 >= 0) w->refs[w->nrefs++] = (size_t)rc2;
  HSR_LOG_D("boot: PMIx event handlers: specific %s, default %s", rc >= 0 ? "registered" : PMIx_Error_string(rc),
            rc2 >= 0 ? "registered" : PMIx_Error_string(rc2));
  PMIX_INFO_DESTRUCT(&info[1]);
}

void boot_watch_fini(hsr_boot *b) {
  boot_watch *w = &b->watch;
  if (!w->gone) return;
  for (int i = 0; i < w->nrefs; i++) PMIx_Deregister_event_handler(w->refs[i], NULL, NULL);
  w->nrefs = 0;
}

void boot_watch_free(hsr_boot *b) {
  boot_watch *w = &b->watch;
  if (!w->gone) return;
  free(w->gone);
  w->gone = NULL;
  pthread_mutex_destroy(&w->mu);
}

hsr_status boot_watch_peers(hsr_boot *b, hsr_boot_peer_fn fn, void *arg) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_watch_peers: NULL context");
  if (!b->watch.gone) return HSR_OK;
  pthread_mutex_lock(&b->watch.mu);
  b->watch.fn = fn;
  b->watch.arg = fn ? arg : NULL;
  pthread_mutex_unlock(&b->watch.mu);
  return HSR_OK;
}

int boot_peer_gone(hsr_boot *b, int rank, char *why, size_t why_n) {
  if (!b || !b->watch.gone || rank < 0 || rank >= b->size) return 0;
  pthread_mutex_lock(&b->watch.mu);
  int gone = b->watch.gone[rank][0] != '\0';
  if (gone && why && why_n) snprintf(why, why_n, "%s", b->watch.gone[rank]);
  pthread_mutex_unlock(&b->watch.mu);
  return gone;
}

/* ---- this rank's failure ------------------------------------------------------- */

hsr_status boot_note_failure(hsr_boot *b, int silent) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_note_failure: NULL context");
  if (b->watch.gone) pthread_mutex_lock(&b->watch.mu);
  if (!b->watch.failure) {
    b->watch.failure = silent ? 2 : 1;
    b->watch.failure_at = clock_s();
  }
  if (b->watch.gone) pthread_mutex_unlock(&b->watch.mu);
  return HSR_OK;
}

int boot_failure(const hsr_boot *b) { return b ? b->watch.failure : 0; }

hsr_status boot_end_failed_job(hsr_boot *b, int code, double grace_s) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_end_failed_job: NULL context");
  if (b->watch.failure != 2) return HSR_OK;
  double left = b->watch.failure_at + grace_s - clock_s();
  if (left > 0) {
    struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
  }
  return boot_abort(b, code, NULL);
}

/* ---- a barrier that gives up --------------------------------------------------- */

typedef struct barrier_wait {
  int (*stop)(void *arg);
  void *arg;
  double t0, t_stop, grace, timeout_s;
  hsr_status st;
} barrier_wait;

/* A peer that has passed the fence may close its endpoints before this
 * rank hears that the fence completed, which looks like a death to stop():
 * the fence gets a grace to complete before the barrier is given up. */
static int barrier_give_up(void *arg) {
  barrier_wait *w = arg;
  double now = clock_s();
  if (w->t_stop < 0 && w->stop && w->stop(w->arg)) w->t_stop = now;
  if (w->t_stop >= 0 && now - w->t_stop > w->grace)
    w->st = hsr_error(HSR_ERR_STATE, "barrier abandoned: a peer has failed");
  else if (now - w->t0 > w->timeout_s)
    w->st = hsr_error(HSR_ERR_TIMEOUT, "barrier: not every rank arrived within %.1f s", w->timeout_s);
  return w->st != HSR_OK;
}

hsr_status boot_barrier_until(hsr_boot *b, double timeout_s, int (*stop)(void *arg), void *arg) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_barrier_until: NULL context");
  if (b->singleton) return HSR_OK;
  int t = (int)(timeout_s + 1.999);
  barrier_wait w = {stop, arg, clock_s(), -1, timeout_s < 2.0 ? timeout_s : 2.0, timeout_s, HSR_OK};
  int done;
  pmix_status_t fst, rc = boot_fence_wait(b, 0, t, 0.02, barrier_give_up, &w, &done, &fst);
  if (rc == PMIX_ERR_NOMEM) return hsr_error(HSR_ERR_NOMEM, "barrier");
  if (rc != PMIX_SUCCESS) return hsr_error(HSR_ERR_BOOT, "PMIx_Fence_nb failed: %s", PMIx_Error_string(rc));
  if (!done) return w.st;
  if (fst == PMIX_ERR_TIMEOUT) return hsr_error(HSR_ERR_TIMEOUT, "barrier: not every rank arrived within %d s", t);
  if (fst != PMIX_SUCCESS) {
    char who[256];
    if (boot_killed_rank(b, who, sizeof who, 0.2)) {
      atomic_store(&b->named, 1);
      return hsr_error(HSR_ERR_BOOT, "barrier: %s", who);
    }
    return hsr_error(HSR_ERR_BOOT, "barrier failed: %s", PMIx_Error_string(fst));
  }
  return HSR_OK;
}
