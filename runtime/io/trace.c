/* Lifecycle trace: spans per rank -> one Chrome trace-event JSON file, and a
 * summary of exposed communication per step. */
#include "common/sys.h"
#include "trace.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsr/config.h"
#include "launch/boot_internal.h"

typedef struct {
  span_kind kind;
  char *lane, *name, *unit, *group;
  uint64_t t0, t1, bytes;
  int64_t step;
} span;

struct trace_log {
  int rank;
  span *spans;
  size_t n, cap;
  char **strs; /* interned lane/name/unit/group strings: a span costs no allocation */
  size_t nstrs, capstrs;
};

static const char *const kind_cat[] = {"step", "compute", "comm", "runtime"};

hsr_status trace_create(int rank, trace_log **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "trace_create: out is NULL");
  *out = calloc(1, sizeof **out);
  if (!*out) return hsr_error(HSR_ERR_NOMEM, "trace_create: out of memory");
  (*out)->rank = rank;
  return HSR_OK;
}

void trace_free(trace_log *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nstrs; i++) free(t->strs[i]);
  free(t->strs);
  free(t->spans);
  free(t);
}

size_t trace_count(const trace_log *t) { return t ? t->n : 0; }

/* The interned copy of s (NULL stays NULL; a failed allocation gives NULL). The
 * table is small (lanes, event names, unit and group names), so a linear
 * search from the most recent entry is enough. */
static char *intern(trace_log *t, const char *s) {
  if (!s) return NULL;
  for (size_t i = t->nstrs; i-- > 0;)
    if (!strcmp(t->strs[i], s)) return t->strs[i];
  if (t->nstrs == t->capstrs) {
    size_t cap = t->capstrs ? 2 * t->capstrs : 32;
    char **p = realloc(t->strs, cap * sizeof *p);
    if (!p) return NULL;
    t->strs = p;
    t->capstrs = cap;
  }
  char *d = strdup(s);
  if (d) t->strs[t->nstrs++] = d;
  return d;
}

hsr_status trace_add(trace_log *t, const trace_span *s) {
  if (!t || !s || !s->lane || !s->name) return hsr_error(HSR_ERR_INVALID, "trace_add: NULL trace, span, lane or name");
  if ((unsigned)s->kind > HSR_SPAN_RUNTIME)
    return hsr_error(HSR_ERR_INVALID, "trace_add: unknown span kind %d", (int)s->kind);
  if (s->t1_ns < s->t0_ns) return hsr_error(HSR_ERR_INVALID, "trace_add: span '%s' ends before it starts", s->name);
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    span *p = realloc(t->spans, cap * sizeof *p);
    if (!p) return hsr_error(HSR_ERR_NOMEM, "trace_add: out of memory");
    t->spans = p;
    t->cap = cap;
  }
  span *d = &t->spans[t->n];
  d->kind = s->kind;
  d->lane = intern(t, s->lane);
  d->name = intern(t, s->name);
  d->unit = intern(t, s->unit);
  d->group = intern(t, s->group);
  d->t0 = s->t0_ns;
  d->t1 = s->t1_ns;
  d->bytes = s->bytes;
  d->step = s->step;
  if (!d->lane || !d->name || (s->unit && !d->unit) || (s->group && !d->group))
    return hsr_error(HSR_ERR_NOMEM, "trace_add: out of memory");
  t->n++;
  return HSR_OK;
}

/* This rank's events (and lane-name metadata) as a JSON array text. */
static char *rank_events_json(const trace_log *t) {
  cJSON *arr = cJSON_CreateArray();
  const char *lanes[256];
  int nl = 0;
  cJSON *meta = cJSON_CreateObject();
  cJSON_AddStringToObject(meta, "name", "process_name");
  cJSON_AddStringToObject(meta, "ph", "M");
  cJSON_AddNumberToObject(meta, "pid", t->rank);
  char pname[32];
  snprintf(pname, sizeof pname, "rank %d", t->rank);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "args"), "name", pname);
  cJSON_AddItemToArray(arr, meta);
  for (size_t i = 0; i < t->n; i++) {
    const span *s = &t->spans[i];
    int tid = -1;
    for (int k = 0; k < nl; k++)
      if (!strcmp(lanes[k], s->lane)) {
        tid = k;
        break;
      }
    if (tid < 0 && nl < 256) {
      tid = nl;
      lanes[nl++] = s->lane;
      cJSON *m = cJSON_CreateObject();
      cJSON_AddStringToObject(m, "name", "thread_name");
      cJSON_AddStringToObject(m, "ph", "M");
      cJSON_AddNumberToObject(m, "pid", t->rank);
      cJSON_AddNumberToObject(m, "tid", tid);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", s->lane);
      cJSON_AddItemToArray(arr, m);
    }
    if (tid < 0) tid = 255;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", s->name);
    cJSON_AddStringToObject(e, "cat", kind_cat[s->kind]);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", (double)s->t0 / 1e3);
    cJSON_AddNumberToObject(e, "dur", (double)(s->t1 - s->t0) / 1e3);
    cJSON_AddNumberToObject(e, "pid", t->rank);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON *a = cJSON_AddObjectToObject(e, "args");
    if (s->unit) cJSON_AddStringToObject(a, "unit", s->unit);
    if (s->group) cJSON_AddStringToObject(a, "group", s->group);
    if (s->bytes) cJSON_AddNumberToObject(a, "bytes", (double)s->bytes);
    cJSON_AddNumberToObject(a, "step", (double)s->step);
    cJSON_AddItemToArray(arr, e);
  }
  char *txt = cJSON_PrintUnformatted(arr);
  cJSON_Delete(arr);
  return txt;
}

/* Gathers every rank's text on all ranks through the bootstrap, in chunks
 * (bootstrap blobs are fixed-size). Only rank 0 keeps the result. */
static hsr_status gather_texts(hsr_boot *boot, const char *mine, char ***out) {
  int n = hsr_boot_size(boot), me = hsr_boot_rank(boot);
  uint64_t len = strlen(mine), *lens = calloc((size_t)n, sizeof *lens);
  if (!lens) return hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  hsr_status st = boot_allgather(boot, &len, sizeof len, lens);
  uint64_t max = 0;
  for (int r = 0; r < n; r++) max = lens[r] > max ? lens[r] : max;
  enum { CHUNK = 64 * 1024 };
  char **texts = calloc((size_t)n, sizeof *texts);
  char *send = malloc(CHUNK), *recv = malloc((size_t)n * CHUNK);
  if (st == HSR_OK && (!texts || !send || !recv)) st = hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  for (int r = 0; st == HSR_OK && me == 0 && r < n; r++)
    if (!(texts[r] = calloc(lens[r] + 1, 1))) st = hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  /* Every rank runs the same number of rounds even on error, so none hangs. */
  for (uint64_t off = 0; off < max; off += CHUNK) {
    memset(send, 0, CHUNK);
    if (off < len) memcpy(send, mine + off, (size_t)(len - off < CHUNK ? len - off : CHUNK));
    hsr_status s2 = boot_allgather(boot, send, CHUNK, recv);
    if (st == HSR_OK) st = s2;
    for (int r = 0; st == HSR_OK && me == 0 && r < n; r++)
      if (off < lens[r])
        memcpy(texts[r] + off, recv + (size_t)r * CHUNK, (size_t)(lens[r] - off < CHUNK ? lens[r] - off : CHUNK));
  }
  free(send);
  free(recv);
  free(lens);
  if (st != HSR_OK || me != 0) {
    for (int r = 0; texts && r < n; r++) free(texts[r]);
    free(texts);
    texts = NULL;
  }
  *out = texts;
  return st;
}

hsr_status trace_write(trace_log *t, hsr_boot *boot, const char *path) {
  if (!t || !path) return hsr_error(HSR_ERR_INVALID, "trace_write: NULL trace or path");
  char *mine = rank_events_json(t);
  if (!mine) return hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  int n = boot ? hsr_boot_size(boot) : 1;
  char **texts = NULL;
  hsr_status st = HSR_OK;
  if (boot && n > 1) {
    st = gather_texts(boot, mine, &texts);
    free(mine);
    if (st != HSR_OK || !texts) return st;
  } else {
    texts = calloc(1, sizeof *texts);
    if (!texts) {
      free(mine);
      return hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
    }
    texts[0] = mine;
    n = 1;
  }
  cJSON *root = cJSON_CreateObject(), *events = cJSON_AddArrayToObject(root, "traceEvents");
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  cJSON *other = cJSON_AddObjectToObject(root, "otherData");
  cJSON_AddStringToObject(other, "producer", "hsr " HSR_VERSION_STRING);
  cJSON_AddNumberToObject(other, "ranks", n);
  for (int r = 0; r < n && st == HSR_OK; r++) {
    cJSON *arr = cJSON_Parse(texts[r]);
    if (!arr) {
      st = hsr_error(HSR_ERR_INTERNAL, "trace: rank %d sent unreadable events", r);
      break;
    }
    cJSON *e;
    while ((e = cJSON_DetachItemFromArray(arr, 0)) != NULL) cJSON_AddItemToArray(events, e);
    cJSON_Delete(arr);
  }
  for (int r = 0; r < n; r++) free(texts[r]);
  free(texts);
  if (st == HSR_OK) {
    char *doc = cJSON_PrintUnformatted(root);
    sys_out o; /* whole or not at all; a device or a FIFO in place, never renamed over */
    if (!doc)
      st = hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
    else if ((st = out_open(&o, "trace", path, HSR_OUT_WHOLE)) == HSR_OK) {
      fputs(doc, o.f);
      st = out_close(&o);
    }
    free(doc);
  }
  cJSON_Delete(root);
  return st;
}
