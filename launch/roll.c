/* The roll call of a bootstrap exchange: a fence that names who is missing.
 *
 * A PMIx fence only says "not everyone came" when its timeout ends. While it
 * waits, this one asks the launcher for its process table (mpirun answers
 * PMIX_QUERY_PROC_TABLE; srun does not) and fails at once, naming the rank,
 * when a rank has ended (exit 0 before joining, a crash). When the timeout
 * ends it names the ranks that did not arrive: each rank publishes a marker
 * before it enters the fence, and the ranks whose marker cannot be read are
 * the ones missing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "boot_int.h"
#include "common/common_internal.h"

#define ROLL_FIRST_S 1.0 /* the first look at the process table */
#define ROLL_EVERY_S 2.0
#define ROLL_GET_S 2  /* how long a missing marker is waited for at the end */
#define ROLL_NAMES 16 /* ranks named in a message; the rest are counted */

typedef struct roll_gets { /* the markers read at the end */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int pending;
  int *found; /* per rank */
  pmix_info_t info;
} roll_gets;

typedef struct roll_get_one {
  roll_gets *g;
  int rank;
} roll_get_one;

static void wait_init(pthread_mutex_t *mu, pthread_cond_t *cv) {
  pthread_mutex_init(mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

static void deadline(struct timespec *ts, double s) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)s;
  ts->tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
  if (ts->tv_nsec >= 1000000000) ts->tv_sec++, ts->tv_nsec -= 1000000000;
}

/* Keeps a structure PMIx may still call back into until after PMIx_Finalize. */
static void abandon(hsr_boot *b, void *p) {
  void **n = realloc(b->roll_left, (size_t)(b->nroll_left + 1) * sizeof *n);
  if (!n) return; /* leaked: a callback may still come */
  n[b->nroll_left++] = p;
  b->roll_left = n;
}

void boot_roll_free(hsr_boot *b) {
  for (int i = 0; i < b->nroll_left; i++) free(b->roll_left[i]);
  free(b->roll_left);
  b->roll_left = NULL, b->nroll_left = 0;
}

/* ---- the launcher's process table ------------------------------------------------- */

static const char *state_text(pmix_proc_state_t s) {
  switch (s) {
  case PMIX_PROC_STATE_TERMINATED: return "exited";
  case PMIX_PROC_STATE_KILLED_BY_CMD: return "was killed by the launcher";
  case PMIX_PROC_STATE_ABORTED: return "aborted";
  case PMIX_PROC_STATE_FAILED_TO_START: return "failed to start";
  case PMIX_PROC_STATE_ABORTED_BY_SIG: return "was killed by a signal";
  case PMIX_PROC_STATE_TERM_WO_SYNC: return "exited without leaving PMIx";
  case PMIX_PROC_STATE_CALLED_ABORT: return "called PMIx_Abort";
  case PMIX_PROC_STATE_TERM_NON_ZERO: return "exited with an error";
  case PMIX_PROC_STATE_FAILED_TO_LAUNCH: return "could not be launched";
  default: return "ended";
  }
}

/* The process exists and is not a zombie. */
static int alive(pid_t pid) {
  char path[64], b[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return kill(pid, 0) == 0 || errno != ESRCH;
  size_t len = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[len] = '\0';
  const char *c = strrchr(b, ')');
  return !(c && c[1] == ' ' && (c[2] == 'Z' || c[2] == 'X'));
}

/* A rank of this job that has ended, from the launcher's process table:
 * 1 with `msg` filled ("rank 1 (host vm, pid 4242) exited with code 0"),
 * 0 when none has or the launcher does not answer (then not asked again). */
static int ended_rank_of(hsr_boot *b, char *msg, size_t n, int abnormal_only) {
  if (b->no_proc_table) return 0;
  pmix_query_t q;
  PMIX_QUERY_CONSTRUCT(&q);
  pmix_status_t rc = PMIX_SUCCESS;
  PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PROC_TABLE);
  PMIX_QUERY_QUALIFIERS_CREATE(&q, 1);
  PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, b->me.nspace, PMIX_STRING);
  pmix_info_t *res = NULL;
  size_t nres = 0;
  rc = PMIx_Query_info(&q, 1, &res, &nres);
  PMIX_QUERY_DESTRUCT(&q);
  int found = 0;
  if (rc != PMIX_SUCCESS) {
    b->no_proc_table = 1;
    HSR_LOG_D("boot: the launcher has no process table (%s): missing ranks are named at the timeout",
              PMIx_Error_string(rc));
  }
  for (size_t i = 0; rc == PMIX_SUCCESS && i < nres && !found; i++) {
    if (res[i].value.type != PMIX_DATA_ARRAY || !res[i].value.data.darray) continue;
    pmix_data_array_t *da = res[i].value.data.darray;
    if (da->type != PMIX_INFO) continue;
    pmix_info_t *row = da->array;
    for (size_t k = 0; k < da->size && !found; k++) {
      if (row[k].value.type != PMIX_PROC_INFO || !row[k].value.data.pinfo) continue;
      const pmix_proc_info_t *p = row[k].value.data.pinfo;
      if (!PMIX_CHECK_NSPACE(p->proc.nspace, b->me.nspace) || (int)p->proc.rank == b->rank) continue;
      int r = (int)p->proc.rank;
      if (b->table_pid && r >= 0 && r < b->size && p->hostname && !strcmp(p->hostname, b->hostname))
        b->table_pid[r] = (int)p->pid; /* for boot_gone_rank, which cannot ask */
      /* abnormal: killed or crashed, not a rank that left the job as it should */
      int abnormal = p->state == PMIX_PROC_STATE_ABORTED_BY_SIG || p->state == PMIX_PROC_STATE_TERM_WO_SYNC ||
                     p->state == PMIX_PROC_STATE_ABORTED || p->state == PMIX_PROC_STATE_COMM_FAILED;
      char node[32] = "";
      if (b->node_of && !atomic_load(&b->booting) && r >= 0 && r < b->size)
        snprintf(node, sizeof node, "node %d, ", b->node_of[r]);
      if (p->state > PMIX_PROC_STATE_UNTERMINATED && (abnormal || !abnormal_only)) {
        snprintf(msg, n, "rank %d (%shost %s, pid %d) %s before reaching it", r, node,
                 p->hostname ? p->hostname : "?", (int)p->pid, state_text(p->state));
        if (p->state == PMIX_PROC_STATE_TERMINATED || p->state == PMIX_PROC_STATE_TERM_NON_ZERO ||
            p->state == PMIX_PROC_STATE_TERM_WO_SYNC) {
          size_t len = strlen(msg);
          snprintf(msg + len, n - len, " (exit code %d)", p->exit_code);
        }
      } else if (!abnormal_only && p->state < PMIX_PROC_STATE_CONNECTED && p->pid > 0 && p->hostname &&
                 !strcmp(p->hostname, b->hostname) && !alive(p->pid)) {
        /* mpirun keeps a rank that exited before PMIx_Init in an undefined state: its process says more */
        snprintf(msg, n, "rank %d (host %s, pid %d) exited without joining the job", (int)p->proc.rank, p->hostname,
                 (int)p->pid);
      } else if (atomic_load(&b->booting) && p->state < PMIX_PROC_STATE_UNTERMINATED && p->pid > 0 && p->hostname &&
                 !strcmp(p->hostname, b->hostname) && !alive(p->pid)) {
        /* mpirun lists a rank killed in the bootstrap as running for a while; its process is gone, and no
         * rank leaves the bootstrap's exchange as it should */
        snprintf(msg, n, "rank %d (%shost %s, pid %d) ended in the bootstrap (its process is gone) before reaching it",
                 r, node, p->hostname, (int)p->pid);
      } else {
        continue;
      }
      found = 1;
    }
  }
  if (res) PMIX_INFO_FREE(res, nres);
  return found;
}

static int ended_rank(hsr_boot *b, char *msg, size_t n) { return ended_rank_of(b, msg, n, 0); }

/* The value of `key` (with its '=') in a NUL-separated environment, or NULL. */
static const char *env_in(const char *env, size_t n, const char *key) {
  size_t k = strlen(key);
  for (size_t i = 0; i < n; i += strlen(env + i) + 1)
    if (!strncmp(env + i, key, k)) return env + i + k;
  return NULL;
}

/* A rank's holder of its PMIx connection (hold.c): a fork of the rank, with
 * its environment, that may outlive it; not a rank. Named so once it runs
 * (comm), and before that a child of a process of this program. */
static int is_hold(int pid, const char *self, ssize_t ls) {
  char path[64], b[256], exe[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n <= 0) return 0;
  b[n] = '\0';
  const char *o = strchr(b, '('), *c = strrchr(b, ')');
  if (!o || !c || c < o) return 0;
  if ((size_t)(c - o - 1) == strlen(BOOT_HOLD_COMM) && !strncmp(o + 1, BOOT_HOLD_COMM, strlen(BOOT_HOLD_COMM)))
    return 1;
  int ppid = 0;
  if (sscanf(c + 1, " %*c %d", &ppid) != 1 || ppid <= 1) return 0;
  snprintf(path, sizeof path, "/proc/%d/exe", ppid);
  ssize_t le = readlink(path, exe, sizeof exe - 1);
  return le == ls && memcmp(exe, self, (size_t)ls) == 0;
}

/* No process table (srun): this host's ranks are the processes of this
 * program whose environment names this job and a rank (PMIX_NAMESPACE,
 * PMIX_RANK), read from /proc; a wrapper between the launcher and the rank
 * runs another program and is not taken for it, nor is a rank's holder. */
static void scan_proc(hsr_boot *b) {
  char self[512], exe[512], path[64], key[PMIX_MAX_NSLEN + 24];
  ssize_t ls = readlink("/proc/self/exe", self, sizeof self - 1);
  DIR *d = ls > 0 ? opendir("/proc") : NULL;
  if (!d) return;
  self[ls] = '\0';
  snprintf(key, sizeof key, "PMIX_NAMESPACE=");
  size_t cap = 1 << 16;
  char *env = malloc(cap);
  struct dirent *e;
  while (env && (e = readdir(d))) {
    int pid = atoi(e->d_name);
    if (pid <= 0 || pid == (int)getpid()) continue;
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    ssize_t le = readlink(path, exe, sizeof exe - 1);
    if (le != ls || memcmp(exe, self, (size_t)ls) != 0 || is_hold(pid, self, ls)) continue;
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    size_t n = 0;
    for (ssize_t got; n < cap - 1 && (got = read(fd, env + n, cap - 1 - n)) > 0;) n += (size_t)got;
    close(fd);
    env[n] = '\0';
    const char *ns = env_in(env, n, key), *rk = env_in(env, n, "PMIX_RANK=");
    if (!ns || !rk || strcmp(ns, b->me.nspace) != 0) continue;
    int r = atoi(rk);
    if (r >= 0 && r < b->size && r != b->rank) b->table_pid[r] = pid;
  }
  free(env);
  closedir(d);
}

#define PID_KEY "hsr.pid"

/* No process table: each rank gives its host's peers its pid (PMIX_LOCAL,
 * held by the local PMIx server) before the bootstrap's first exchange, so
 * a rank that started before a peer's process did can still find it. */
static void put_pid(void) {
  pmix_value_t val;
  PMIX_VALUE_CONSTRUCT(&val);
  val.type = PMIX_UINT32;
  val.data.uint32 = (uint32_t)getpid();
  if (PMIx_Put(PMIX_LOCAL, PID_KEY, &val) == PMIX_SUCCESS) PMIx_Commit();
}

/* The pids /proc did not show (peers started after the scan), from what
 * they put; only this host's ranks (PMIX_LOCAL_PEERS), each Get bounded. */
static void get_missing_pids(hsr_boot *b) {
  pmix_proc_t wild;
  PMIX_LOAD_PROCID(&wild, b->me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t *peers = NULL;
  if (PMIx_Get(&wild, PMIX_LOCAL_PEERS, NULL, 0, &peers) != PMIX_SUCCESS) return;
  if (peers->type == PMIX_STRING && peers->data.string) {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    int t = 1;
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &t, PMIX_INT);
    for (const char *c = peers->data.string; *c;) {
      char *end;
      long r = strtol(c, &end, 10);
      if (end == c) break;
      c = *end == ',' ? end + 1 : end;
      if (r < 0 || r >= b->size || r == b->rank || b->table_pid[r] > 0) continue;
      pmix_proc_t p;
      PMIX_LOAD_PROCID(&p, b->me.nspace, (pmix_rank_t)r);
      pmix_value_t *v = NULL;
      if (PMIx_Get(&p, PID_KEY, &info, 1, &v) == PMIX_SUCCESS) {
        if (v->type == PMIX_UINT32) b->table_pid[r] = (int)v->data.uint32;
        PMIX_VALUE_RELEASE(v);
      }
    }
    PMIX_INFO_DESTRUCT(&info);
  }
  PMIX_VALUE_RELEASE(peers);
}

void boot_table_pids(hsr_boot *b) {
  if (b->singleton || b->table_pid) return;
  b->table_pid = calloc((size_t)b->size, sizeof *b->table_pid);
  char msg[256];
  if (b->table_pid) ended_rank_of(b, msg, sizeof msg, 1);
  if (b->table_pid && b->no_proc_table) {
    put_pid();
    scan_proc(b);
  }
  int known = 0;
  for (int r = 0; b->table_pid && r < b->size; r++) known += b->table_pid[r] > 0;
  HSR_LOG_D("boot: the launcher's process table: %d of %d ranks' pids on this host", known, b->size);
  atomic_store(&b->table_read, 1);
}

int boot_rank_alive(hsr_boot *b, int rank) {
  if (!b || !b->table_pid || !atomic_load(&b->table_read) || rank < 0 || rank >= b->size || rank == b->rank ||
      b->table_pid[rank] <= 0)
    return -1;
  return alive(b->table_pid[rank]);
}

/* The one rank of this host whose process is gone, -1 when none or more
 * (a second gone rank may be one that left on finding the first). */
static int gone_one(hsr_boot *b) {
  int gone = -1, count = 0;
  for (int r = 0; b->table_pid && r < b->size; r++)
    if (r != b->rank && b->table_pid[r] > 0 && !alive(b->table_pid[r])) gone = r, count++;
  return count == 1 ? gone : -1;
}

int boot_gone_rank(hsr_boot *b, char *msg, size_t n) {
  int gone = gone_one(b);
  if (gone < 0) return 0;
  snprintf(msg, n, "rank %d (host %s, pid %d) ended in the bootstrap (its process is gone) before reaching it", gone,
           b->hostname, b->table_pid[gone]);
  return 1;
}

int boot_killed_rank(hsr_boot *b, char *msg, size_t n, double wait_s) {
  /* the launcher's table may lag the fence that failed by its news */
  for (double t0 = clock_s();;) {
    /* in the exchange, a rank of this host whose process is gone (no launcher needed) */
    if (atomic_load(&b->booting) && b->no_proc_table && b->table_pid && !b->pids_asked) {
      b->pids_asked = 1;
      get_missing_pids(b);
    }
    if (atomic_load(&b->booting) && boot_gone_rank(b, msg, n)) return 1;
    if (ended_rank_of(b, msg, n, 1)) return 1;
    /* after the bootstrap, where the launcher's table does not say (srun has
     * none; mpirun's lags): the one rank of this host whose process is gone */
    int g = atomic_load(&b->booting) ? -1 : gone_one(b);
    if (g >= 0) {
      char node[32] = "";
      if (b->node_of) snprintf(node, sizeof node, "node %d, ", b->node_of[g]);
      snprintf(msg, n, "rank %d (%shost %s, pid %d) was killed or crashed: its process is gone", g, node, b->hostname,
               b->table_pid[g]);
      return 1;
    }
    /* srun has no table, but the /proc one may need a moment: a killed
     * peer's socket closes before its process is a zombie */
    if ((b->no_proc_table && !b->table_pid) || clock_s() - t0 >= wait_s) return 0;
    struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* ---- who did not arrive ------------------------------------------------------------------ */

static void got_one(pmix_status_t st, pmix_value_t *kv, void *cbdata) {
  roll_get_one *o = cbdata;
  roll_gets *g = o->g;
  (void)kv; /* PMIx releases it */
  pthread_mutex_lock(&g->mu);
  g->found[o->rank] = st == PMIX_SUCCESS;
  g->pending--;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* "ranks 1, 3 (2 of 4)" of the ranks whose marker `key` cannot be read; "" if
 * every marker could be read or none could be asked. */
static void missing(hsr_boot *b, const char *key, char *out, size_t n) {
  out[0] = '\0';
  roll_gets *g = calloc(1, sizeof *g);
  roll_get_one *ones = calloc((size_t)b->size, sizeof *ones);
  if (g) g->found = calloc((size_t)b->size, sizeof *g->found);
  if (!g || !ones || !g->found) {
    if (g) free(g->found);
    free(g), free(ones);
    return;
  }
  wait_init(&g->mu, &g->cv);
  int t = ROLL_GET_S;
  PMIX_INFO_CONSTRUCT(&g->info);
  PMIX_INFO_LOAD(&g->info, PMIX_TIMEOUT, &t, PMIX_INT);
  g->found[b->rank] = 1;
  int asked = 0;
  for (int r = 0; r < b->size; r++) {
    if (r == b->rank) continue;
    pmix_proc_t p;
    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, b->me.nspace, (pmix_rank_t)r);
    ones[r] = (roll_get_one){g, r};
    pthread_mutex_lock(&g->mu);
    g->pending++;
    pthread_mutex_unlock(&g->mu);
    if (PMIx_Get_nb(&p, key, &g->info, 1, got_one, &ones[r]) != PMIX_SUCCESS) {
      pthread_mutex_lock(&g->mu);
      g->pending--;
      g->found[r] = -1; /* not asked */
      pthread_mutex_unlock(&g->mu);
    } else {
      asked++;
    }
  }
  struct timespec ts;
  deadline(&ts, ROLL_GET_S + 1.0);
  pthread_mutex_lock(&g->mu);
  while (g->pending > 0 && pthread_cond_timedwait(&g->cv, &g->mu, &ts) != ETIMEDOUT) {}
  int late = g->pending;
  int nmiss = 0;
  size_t off = 0;
  for (int r = 0; asked && r < b->size; r++) {
    if (g->found[r] != 0) continue;
    if (nmiss < ROLL_NAMES && off < n) off += (size_t)snprintf(out + off, n - off, "%s%d", nmiss ? ", " : "", r);
    nmiss++;
  }
  pthread_mutex_unlock(&g->mu);
  if (nmiss && off < n)
    snprintf(out + off, n - off, "%s (%d of %d)", nmiss > ROLL_NAMES ? ", ..." : "", nmiss, b->size);
  const char *pre = nmiss == 1 ? "rank " : "ranks "; /* "rank 3 (1 of 4)", "ranks 1, 3 (2 of 4)" */
  size_t pl = strlen(pre);
  if (nmiss && out[0] && n > pl + 1) { /* in place: no second buffer to truncate into */
    size_t len = strnlen(out, n - 1);
    if (len > n - 1 - pl) len = n - 1 - pl;
    memmove(out + pl, out, len);
    memcpy(out, pre, pl);
    out[pl + len] = 0;
  }
  if (late) { /* PMIx still holds them */
    abandon(b, ones);
    abandon(b, g->found);
    abandon(b, g);
    return;
  }
  PMIX_INFO_DESTRUCT(&g->info);
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g->found), free(g), free(ones);
}

/* ---- the one bounded fence ---------------------------------------------------------------- */

typedef struct fence_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  pmix_status_t st;
  pmix_info_t info[2]; /* must outlive the nonblocking call */
} fence_wait;

static void fence_done(pmix_status_t st, void *cbdata) {
  fence_wait *f = cbdata;
  pthread_mutex_lock(&f->mu);
  f->st = st;
  f->done = 1;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void fence_free(fence_wait *f) {
  PMIX_INFO_DESTRUCT(&f->info[0]);
  PMIX_INFO_DESTRUCT(&f->info[1]);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

pmix_status_t boot_fence_wait(hsr_boot *b, int collect, int pmix_timeout_s, double slice_s,
                              int (*give_up)(void *arg), void *arg, int *done, pmix_status_t *fst) {
  *done = 0;
  *fst = PMIX_SUCCESS;
  fence_wait *f = calloc(1, sizeof *f);
  if (!f) return PMIX_ERR_NOMEM;
  wait_init(&f->mu, &f->cv);
  bool yes = collect ? true : false;
  PMIX_INFO_CONSTRUCT(&f->info[0]);
  PMIX_INFO_CONSTRUCT(&f->info[1]);
  PMIX_INFO_LOAD(&f->info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  PMIX_INFO_LOAD(&f->info[1], PMIX_TIMEOUT, &pmix_timeout_s, PMIX_INT);
  pmix_proc_t wild;
  PMIX_PROC_CONSTRUCT(&wild);
  PMIX_LOAD_PROCID(&wild, b->me.nspace, PMIX_RANK_WILDCARD);
  pmix_status_t rc = PMIx_Fence_nb(&wild, 1, f->info, 2, fence_done, f);
  if (rc != PMIX_SUCCESS) {
    fence_free(f);
    return rc;
  }
  pthread_mutex_lock(&f->mu);
  while (!f->done) {
    struct timespec ts;
    deadline(&ts, slice_s);
    pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    if (f->done) break;
    pthread_mutex_unlock(&f->mu);
    int stop = give_up(arg);
    pthread_mutex_lock(&f->mu);
    if (stop) break;
  }
  *done = f->done;
  *fst = f->st;
  pthread_mutex_unlock(&f->mu);
  if (*done)
    fence_free(f);
  else
    abandon(b, f); /* PMIx still holds f */
  return PMIX_SUCCESS;
}

/* ---- the roll call ------------------------------------------------------------------------ */

typedef struct roll_wait {
  hsr_boot *b;
  double t0, next;
  char msg[256];
  int ended;
  int after_failure; /* given up: this rank has found a peer's failure (srun) */
} roll_wait;

/* Past HSR_BOOT_TIMEOUT, or a rank has ended: the launcher's table every
 * ROLL_EVERY_S; without one (srun), each slice, a rank of this host whose
 * process is gone (from /proc, and after ROLL_FIRST_S the pids the peers
 * put). The table says more (a rank that exited before joining the job), so
 * where there is one it is what speaks. */
static int roll_give_up(void *arg) {
  roll_wait *w = arg;
  double now = clock_s();
  if (now - w->t0 > w->b->timeout_s) return 1;
  /* Under srun nothing ends a rank after a peer's death (hold.c keeps Slurm
   * from killing the step) and a dead peer's fence never fails by itself: a
   * rank that has said its verdict leaves the fence rather than wait for the
   * dead rank until HSR_BOOT_TIMEOUT. Under mpirun the launcher ends it. */
  if (w->b->hold_wfd >= 0 && boot_failure(w->b)) return w->after_failure = 1;
  if (atomic_load(&w->b->booting) && w->b->no_proc_table) {
    /* the pids /proc did not show, asked once: a victim that started after
     * this rank's scan (its fence does not fail on the death: hold.c) */
    if (w->b->table_pid && !w->b->pids_asked && now - w->t0 >= ROLL_FIRST_S) {
      w->b->pids_asked = 1;
      get_missing_pids(w->b);
    }
    if (boot_gone_rank(w->b, w->msg, sizeof w->msg)) return w->ended = 1;
  }
  if (now < w->next) return 0;
  w->next = now + ROLL_EVERY_S;
  w->ended = ended_rank(w->b, w->msg, sizeof w->msg);
  return w->ended;
}

static hsr_status put_marker(const char *key) {
  pmix_value_t val;
  PMIX_VALUE_CONSTRUCT(&val);
  val.type = PMIX_UINT8;
  val.data.uint8 = 1;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &val);
  if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return hsr_error(HSR_ERR_BOOT, "PMIx_Put of %s failed: %s", key, PMIx_Error_string(rc));
  return HSR_OK;
}

/* A fence that named the rank that ended: the rank stays until the
 * launcher ends the job (boot.c), and its lifeline repeats the finding. */
static hsr_status named(hsr_boot *b, const char *what, const char *who) {
  snprintf(b->named_msg, sizeof b->named_msg, "boot %s: %s", what, who);
  atomic_store(&b->named, 1);
  return hsr_error(HSR_ERR_BOOT, "%s", b->named_msg);
}

hsr_status boot_fence(hsr_boot *b, int collect, const char *what) {
  char key[48];
  fault_hook_hit(&b->hook, "boot"); /* HSR_FAULT, a test hook */
  snprintf(key, sizeof key, "hsr.at.%lu", b->fence_seq++);
  HSR_CHECK(put_marker(key));
  int t = b->timeout_s + 2 * ROLL_GET_S + 2; /* PMIx's own bound: after ours, and after naming who is missing */
  roll_wait w = {.b = b, .t0 = clock_s()};
  w.next = w.t0 + ROLL_FIRST_S;
  int done;
  pmix_status_t fst, rc = boot_fence_wait(b, collect, t, 0.25, roll_give_up, &w, &done, &fst);
  if (rc == PMIX_ERR_NOMEM) return hsr_error(HSR_ERR_NOMEM, "boot %s", what);
  if (rc != PMIX_SUCCESS)
    return hsr_error(HSR_ERR_BOOT, "PMIx fence of boot %s failed: %s", what, PMIx_Error_string(rc));
  if (!done) {
    if (w.ended) return named(b, what, w.msg);
    if (w.after_failure) /* its verdict is this rank's line (cli_fail_job says nothing more) */
      return hsr_error(HSR_ERR_BOOT, "boot %s: given up: this rank has found a peer's failure", what);
    char who[512];
    missing(b, key, who, sizeof who);
    if (who[0])
      return hsr_error(HSR_ERR_TIMEOUT, "boot %s: %s did not arrive within HSR_BOOT_TIMEOUT=%d s", what, who,
                       b->timeout_s);
    return hsr_error(HSR_ERR_TIMEOUT, "boot %s: not every rank arrived within HSR_BOOT_TIMEOUT=%d s", what,
                     b->timeout_s);
  }
  if (fst == PMIX_ERR_TIMEOUT)
    return hsr_error(HSR_ERR_TIMEOUT, "boot %s: not every rank arrived within HSR_BOOT_TIMEOUT=%d s", what,
                     b->timeout_s);
  if (fst != PMIX_SUCCESS) { /* the launcher failed it: a rank has ended, which the process table names */
    if (boot_killed_rank(b, w.msg, sizeof w.msg, 1.0)) return named(b, what, w.msg);
    return hsr_error(HSR_ERR_BOOT, "PMIx fence of boot %s failed: %s", what, PMIx_Error_string(fst));
  }
  return HSR_OK;
}
