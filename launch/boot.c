/* PMIx bootstrap: job identity, node indices, and small-blob exchange. */
#include "boot_int.h"
#include "common/env.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/common_internal.h"

/* The variables whose value decides what every rank of a collective does
 * (which algorithm, how a ring is cut, which transport): ranks that read them
 * differently would run different protocols against each other, so they
 * must agree before anything runs (HSR_SIM_NODES is agreed with the nodes). */
static const char *const agreed[] = {"HSR_ALGO_ALLREDUCE", "HSR_ALGO_ALLREDUCE_RD_MAX", "HSR_UCX_CHUNK",
                                     "HSR_ALGO_TWO_LEVEL", "HSR_UCX_PEER_ERRORS"};
#define BOOT_AGREED (int)(sizeof agreed / sizeof agreed[0])

/* What each rank tells the others at start. */
typedef struct {
  char host[HSR_HOSTNAME_MAX];
  int32_t local_rank, local_size, sim_nodes, pad;
  uint64_t agreed[BOOT_AGREED];     /* each agreed variable's value as read (a choice's index, a size in bytes) */
  char agreed_text[BOOT_AGREED][24]; /* and as set ("" when unset), for the message */
} boot_record;

/* This rank's reading of the agreed variables (checked before: valid). */
static hsr_status read_agreed(boot_record *r) {
  for (int i = 0; i < BOOT_AGREED; i++) {
    const env_info *v = env_find(agreed[i]);
    if (!v) return hsr_error(HSR_ERR_INTERNAL, "boot: %s is not in the registry", agreed[i]);
    if (v->kind == HSR_ENV_CHOICE) {
      int c = 0;
      HSR_CHECK(env_get_choice(agreed[i], &c));
      r->agreed[i] = (uint64_t)c;
    } else {
      size_t z = 0;
      HSR_CHECK(env_get_size(agreed[i], &z));
      r->agreed[i] = z;
    }
    const char *t = getenv(agreed[i]);
    snprintf(r->agreed_text[i], sizeof r->agreed_text[i], "%s", t ? t : "");
  }
  return HSR_OK;
}

static hsr_status check_agreed(const boot_record *rec, int n) {
  for (int i = 0; i < BOOT_AGREED; i++)
    for (int r = 1; r < n; r++)
      if (rec[r].agreed[i] != rec[0].agreed[i]) {
        const char *a = rec[0].agreed_text[i], *b = rec[r].agreed_text[i];
        return hsr_error(HSR_ERR_MISMATCH,
                         "%s differs between ranks: rank 0 has %s%s%s, rank %d has %s%s%s; it decides what every rank "
                         "of a collective runs, so set it alike on every rank (or on none)",
                         agreed[i], *a ? "'" : "", *a ? a : "it unset", *a ? "'" : "", r, *b ? "'" : "",
                         *b ? b : "it unset", *b ? "'" : "");
      }
  return HSR_OK;
}

static hsr_status pmix_fail(const char *what, pmix_status_t rc) {
  return hsr_error(rc == PMIX_ERR_TIMEOUT ? HSR_ERR_TIMEOUT : HSR_ERR_BOOT, "PMIx %s failed: %s", what,
                   PMIx_Error_string(rc));
}

static hsr_status get_number(const pmix_proc_t *proc, const char *key, long *out, int *found) {
  pmix_value_t *val = NULL;
  pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &val);
  *found = 0;
  if (rc != PMIX_SUCCESS) return HSR_OK;
  size_t n = 0;
  /* Types differ between launchers (mpirun: UINT32, srun: INT, ...). */
  PMIX_VALUE_GET_NUMBER(rc, val, n, size_t);
  PMIX_VALUE_RELEASE(val);
  if (rc != PMIX_SUCCESS) return pmix_fail(key, rc);
  *out = (long)n;
  *found = 1;
  return HSR_OK;
}

static void detect_launcher(hsr_boot *b) {
  const char *l = "pmix";
  if (getenv("SLURM_STEP_ID") || getenv("SLURM_STEPID"))
    l = "srun";
  else if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("OMPI_MCA_ess"))
    l = "mpirun";
  snprintf(b->launcher, sizeof b->launcher, "%s", b->singleton ? "singleton" : l);
}

/* Every rank derives the same node numbering from the gathered hostnames:
 * hosts in order of their lowest rank, each split into sim_nodes nodes. */
static hsr_status derive_nodes(hsr_boot *b, const boot_record *rec) {
  int n = b->size;
  if (n < 1) return hsr_error(HSR_ERR_INTERNAL, "boot: world size %d", n);
  int *host_of = calloc((size_t)n, sizeof *host_of);
  int *host_first = calloc((size_t)n, sizeof *host_first);
  if (!host_of || !host_first) {
    free(host_of);
    free(host_first);
    return hsr_error(HSR_ERR_NOMEM, "boot: out of memory deriving nodes");
  }
  int nhosts = 0;
  hsr_status st = HSR_OK;
  for (int r = 0; r < n && st == HSR_OK; r++) {
    int h = -1;
    for (int k = 0; k < nhosts; k++)
      if (strncmp(rec[host_first[k]].host, rec[r].host, HSR_HOSTNAME_MAX) == 0) {
        h = k;
        break;
      }
    if (h < 0) {
      h = nhosts++;
      host_first[h] = r;
    }
    host_of[r] = h;
    if (rec[r].sim_nodes != rec[0].sim_nodes)
      st = hsr_error(HSR_ERR_MISMATCH, "HSR_SIM_NODES differs between ranks: rank 0 has %d, rank %d has %d",
                     rec[0].sim_nodes, r, rec[r].sim_nodes);
  }
  int sim = rec[0].sim_nodes;
  for (int r = 0; r < n && st == HSR_OK; r++) {
    int ls = rec[r].local_size;
    if (ls % sim != 0) {
      char valid[256];
      size_t off = 0;
      valid[0] = '\0';
      for (int d = 1; d <= ls && off < sizeof valid; d++)
        if (ls % d == 0) off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%d", off ? ", " : "", d);
      st = hsr_error(HSR_ERR_INVALID, "HSR_SIM_NODES=%d does not divide the %d ranks on host %s (valid values: %s)",
                     sim, ls, rec[r].host, valid);
    }
  }
  if (st == HSR_OK) {
    for (int r = 0; r < n; r++) {
      int per = rec[r].local_size / sim;
      b->node_of[r] = host_of[r] * sim + rec[r].local_rank / per;
      memcpy(b->hosts[r], rec[r].host, HSR_HOSTNAME_MAX);
    }
    int per = rec[b->rank].local_size / sim;
    b->num_nodes = nhosts * sim;
    b->node = b->node_of[b->rank];
    b->local_rank = rec[b->rank].local_rank % per;
    b->local_size = per;
  }
  free(host_of);
  free(host_first);
  return st;
}

/* Join the launcher's job, or run as a singleton when there is none.
 * lrank/lsize: -1 when the launcher did not say. */
static hsr_status join_job(hsr_boot *b, long *lrank, long *lsize) {
  /* No PMIx server address in the environment: no launcher. Skip PMIx_Init
   * so a singleton starts fast and prints nothing. */
  int have_server = getenv("PMIX_NAMESPACE") != NULL || getenv("PMIX_SERVER_URI4") != NULL ||
                    getenv("PMIX_SERVER_URI41") != NULL || getenv("PMIX_SERVER_URI3") != NULL ||
                    getenv("PMIX_SERVER_URI2") != NULL;
  pmix_status_t rc = PMIX_ERR_UNREACH;
  if (have_server) rc = PMIx_Init(&b->me, NULL, 0);
  if (rc == PMIX_ERR_UNREACH || rc == PMIX_ERR_NOT_FOUND || !have_server) {
    b->singleton = 1;
    b->rank = 0;
    b->size = 1;
    return HSR_OK;
  }
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Init", rc);
  pmix_proc_t wild;
  PMIX_PROC_CONSTRUCT(&wild);
  PMIX_LOAD_PROCID(&wild, b->me.nspace, PMIX_RANK_WILDCARD);
  long size = 0;
  int found = 0;
  hsr_status st = get_number(&wild, PMIX_JOB_SIZE, &size, &found);
  if (st == HSR_OK && !found) st = hsr_error(HSR_ERR_BOOT, "PMIx: the launcher did not provide PMIX_JOB_SIZE");
  if (st == HSR_OK) st = get_number(&b->me, PMIX_LOCAL_RANK, lrank, &found);
  if (st == HSR_OK && !found) *lrank = -1;
  if (st == HSR_OK) st = get_number(&wild, PMIX_LOCAL_SIZE, lsize, &found);
  if (st == HSR_OK && !found) *lsize = -1;
  if (st != HSR_OK) {
    PMIx_Finalize(NULL, 0);
    return st;
  }
  b->rank = (int)b->me.rank;
  b->size = (int)size;
  return HSR_OK;
}

/* Every rank's host, local rank and size; then the (simulated) nodes. */
static hsr_status exchange_records(hsr_boot *b, long lrank, long lsize) {
  b->hosts = calloc((size_t)b->size, sizeof *b->hosts);
  b->node_of = calloc((size_t)b->size, sizeof *b->node_of);
  boot_record *rec = calloc((size_t)b->size, sizeof *rec);
  hsr_status st = (b->hosts && b->node_of && rec) ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "boot: out of memory");
  if (st == HSR_OK) {
    boot_record mine;
    memset(&mine, 0, sizeof mine);
    memcpy(mine.host, b->hostname, sizeof mine.host);
    mine.local_rank = (int32_t)lrank;
    mine.local_size = (int32_t)lsize;
    mine.sim_nodes = b->sim_nodes;
    st = read_agreed(&mine);
    if (st == HSR_OK) st = boot_allgather(b, &mine, sizeof mine, rec);
  }
  if (st == HSR_OK) {
    /* A launcher that gave no local rank/size: derive them from hostnames. */
    for (int r = 0; r < b->size; r++) {
      if (rec[r].local_rank >= 0 && rec[r].local_size > 0) continue;
      int lr = 0, ls = 0;
      for (int q = 0; q < b->size; q++) {
        if (strncmp(rec[q].host, rec[r].host, HSR_HOSTNAME_MAX) != 0) continue;
        ls++;
        if (q < r) lr++;
      }
      rec[r].local_rank = lr;
      rec[r].local_size = ls;
    }
    st = derive_nodes(b, rec);
    if (st == HSR_OK) st = check_agreed(rec, b->size);
    if (st == HSR_ERR_MISMATCH) error_share(); /* every rank found the same: the job's one line */
  }
  free(rec);
  return st;
}

hsr_status hsr_boot_init(hsr_boot **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "hsr_boot_init: out is NULL");
  *out = NULL;
  /* every HSR_* variable, before anything starts: a program using libhsr
   * gets the errors hsr's commands give (common/env.h) */
  HSR_CHECK(env_check_all(0));
  long sim = 1, timeout = 300;
  HSR_CHECK(env_get_long("HSR_SIM_NODES", &sim));
  HSR_CHECK(env_get_long("HSR_BOOT_TIMEOUT", &timeout));

  hsr_boot *b = calloc(1, sizeof *b);
  if (!b) return hsr_error(HSR_ERR_NOMEM, "hsr_boot_init: out of memory");
  b->timeout_s = (int)timeout;
  b->sim_nodes = (int)sim;
  if (gethostname(b->hostname, sizeof b->hostname) != 0) snprintf(b->hostname, sizeof b->hostname, "localhost");
  b->hostname[HSR_HOSTNAME_MAX - 1] = '\0';

  long lrank = 0, lsize = 1;
  hsr_status st = join_job(b, &lrank, &lsize);
  if (st != HSR_OK) {
    free(b);
    return st;
  }
  detect_launcher(b);
  boot_hold_start(b); /* before any other descriptor: the child keeps only PMIx's */
  st = fault_hook_init(&b->hook, b->rank);
  if (st != HSR_OK) {
    if (!b->singleton && PMIx_Finalize(NULL, 0) == PMIX_SUCCESS) boot_hold_release(b);
    free(b);
    return st;
  }
  crash_report_install(); /* a crash names its rank, thread and code (unless the program has its own handler) */
  boot_life_start(b);     /* from here on this rank ends with its launcher */
  boot_table_pids(b); /* what a rank killed in the exchange was: mpirun's table, or /proc */
  atomic_store(&b->booting, 1);
  st = exchange_records(b, lrank, lsize);
  atomic_store(&b->booting, 0);
  /* A rank killed in the exchange, named: this rank stays until mpirun ends
   * the job (its lifeline then says it), for at most 5 s. Leaving at once
   * would make this rank's own exit a second death to a rank that looks
   * later, which then names no one. Under srun (hold.c: nothing ends the
   * step on a death) it stays the 5 s, then leaves with its error. */
  int stay = !strcmp(b->launcher, "mpirun") || b->hold_wfd >= 0;
  for (int i = 0; st != HSR_OK && atomic_load(&b->named) && stay && i < 100; i++)
    nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
  if (st != HSR_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hsr_last_error());
    hsr_boot_finalize(b);
    return hsr_error(st, "%s", msg);
  }
  boot_watch_init(b);
  HSR_LOG_D("boot: rank %d/%d local %d/%d node %d/%d host %s launcher %s", b->rank, b->size, b->local_rank,
            b->local_size, b->node, b->num_nodes, b->hostname, b->launcher);
  *out = b;
  return HSR_OK;
}

hsr_status hsr_boot_finalize(hsr_boot *b) {
  if (!b) return HSR_OK;
  hsr_status st = HSR_OK;
  boot_life_stop(b);
  boot_watch_fini(b);
  /* after a rank was found killed, PMIx_Finalize may wait on the launcher
   * until it ends this rank, before the error is printed: the job is over */
  if (!b->singleton && !atomic_load(&b->named)) {
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) st = pmix_fail("PMIx_Finalize", rc);
    else boot_hold_release(b);
  }
  boot_watch_free(b);
  boot_roll_free(b);
  free(b->hosts);
  free(b->node_of);
  free(b->table_pid);
  free(b);
  return st;
}

int hsr_boot_rank(const hsr_boot *b) { return b->rank; }
int hsr_boot_size(const hsr_boot *b) { return b->size; }
int boot_local_rank(const hsr_boot *b) { return b->local_rank; }
int boot_local_size(const hsr_boot *b) { return b->local_size; }
int boot_node(const hsr_boot *b) { return b->node; }
int boot_num_nodes(const hsr_boot *b) { return b->num_nodes; }
int boot_node_of(const hsr_boot *b, int rank) { return (rank >= 0 && rank < b->size) ? b->node_of[rank] : -1; }
int boot_sim_nodes(const hsr_boot *b) { return b->sim_nodes; }
int boot_is_singleton(const hsr_boot *b) { return b->singleton; }
const char *boot_hostname(const hsr_boot *b) { return b->hostname; }
const char *boot_hostname_of(const hsr_boot *b, int rank) {
  return (rank >= 0 && rank < b->size) ? b->hosts[rank] : "";
}
const char *boot_launcher(const hsr_boot *b) { return b->launcher; }

static hsr_status fence(hsr_boot *b, int collect, const char *what) { return boot_fence(b, collect, what); }

static hsr_status put_blob(const char *key, const void *data, size_t bytes) {
  pmix_value_t val;
  PMIX_VALUE_CONSTRUCT(&val);
  val.type = PMIX_BYTE_OBJECT;
  val.data.bo.bytes = (char *)data; /* PMIx_Put copies the value */
  val.data.bo.size = bytes;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &val);
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Put", rc);
  rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Commit", rc);
  return HSR_OK;
}

static hsr_status get_blob(hsr_boot *b, int rank, const char *key, void *dst, size_t bytes) {
  pmix_proc_t p;
  PMIX_PROC_CONSTRUCT(&p);
  PMIX_LOAD_PROCID(&p, b->me.nspace, (pmix_rank_t)rank);
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  int t = b->timeout_s;
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &t, PMIX_INT);
  pmix_value_t *val = NULL;
  pmix_status_t rc = PMIx_Get(&p, key, &info, 1, &val);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS)
    return hsr_error(HSR_ERR_BOOT, "PMIx_Get of %s from rank %d failed: %s", key, rank, PMIx_Error_string(rc));
  hsr_status st = HSR_OK;
  if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != bytes)
    st = hsr_error(HSR_ERR_MISMATCH, "boot exchange %s: rank %d sent %zu bytes, this rank expected %zu", key, rank,
                   val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0, bytes);
  else
    memcpy(dst, val->data.bo.bytes, bytes);
  PMIX_VALUE_RELEASE(val);
  return st;
}

hsr_status boot_allgather(hsr_boot *b, const void *send, size_t bytes, void *recv) {
  if (!b || (bytes && (!send || !recv))) return hsr_error(HSR_ERR_INVALID, "boot_allgather: NULL argument");
  if (b->singleton || bytes == 0) {
    if (bytes) memmove(recv, send, bytes);
    return b->singleton ? HSR_OK : fence(b, 0, "allgather");
  }
  char key[64];
  snprintf(key, sizeof key, "hsr.ag.%lu", b->seq++);
  HSR_CHECK(put_blob(key, send, bytes));
  HSR_CHECK(fence(b, 1, "allgather"));
  for (int r = 0; r < b->size; r++) {
    char *dst = (char *)recv + (size_t)r * bytes;
    if (r == b->rank)
      memmove(dst, send, bytes);
    else
      HSR_CHECK(get_blob(b, r, key, dst, bytes));
  }
  return HSR_OK;
}

hsr_status boot_bcast(hsr_boot *b, void *buf, size_t bytes, int root) {
  if (!b || (bytes && !buf)) return hsr_error(HSR_ERR_INVALID, "boot_bcast: NULL argument");
  if (root < 0 || root >= b->size)
    return hsr_error(HSR_ERR_INVALID, "boot_bcast: root %d out of range (valid: 0 to %d)", root, b->size - 1);
  if (b->singleton) return HSR_OK;
  char key[64];
  snprintf(key, sizeof key, "hsr.bc.%lu", b->seq++);
  if (b->rank == root) HSR_CHECK(put_blob(key, buf, bytes));
  HSR_CHECK(fence(b, 1, "bcast"));
  if (b->rank != root) HSR_CHECK(get_blob(b, root, key, buf, bytes));
  return HSR_OK;
}

void boot_fault_hook(hsr_boot *b, const char *phase) {
  if (b) fault_hook_hit(&b->hook, phase);
}

hsr_status boot_barrier(hsr_boot *b) {
  if (!b) return hsr_error(HSR_ERR_INVALID, "boot_barrier: NULL context");
  if (b->singleton) return HSR_OK;
  return fence(b, 0, "barrier");
}

hsr_status boot_abort(hsr_boot *b, int code, const char *msg) {
  if (msg) {
    fprintf(stderr, "[rank %d] hsr: aborting the job: %s\n", b ? b->rank : 0, msg);
    fflush(stderr);
  }
  if (b && !b->singleton) {
    pmix_status_t rc = PMIx_Abort(code, msg ? msg : "hsr abort", NULL, 0);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Abort", rc);
    return HSR_OK;
  }
  exit(code);
}
