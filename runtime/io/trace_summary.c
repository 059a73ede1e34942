/* hsr trace summarize: per step, all-gathers per unit, exposed communication
 * (communication time not covered by compute) and the overlap ratio. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/json.h"
#include "common/sys.h"
#include "trace.h"

static int cmp_ival(const void *x, const void *y) {
  double d = ((const ival *)x)->a - ((const ival *)y)->a;
  return d < 0 ? -1 : d > 0;
}

hsr_status ival_merge(ival *v, int *n) {
  if (!n || (*n > 0 && !v)) return hsr_error(HSR_ERR_INVALID, "ival_merge: NULL argument");
  if (*n <= 0) return HSR_OK;
  qsort(v, (size_t)*n, sizeof *v, cmp_ival);
  int m = 0;
  for (int i = 1; i < *n; i++) {
    if (v[i].a <= v[m].b) {
      if (v[i].b > v[m].b) v[m].b = v[i].b;
    } else
      v[++m] = v[i];
  }
  *n = m + 1;
  return HSR_OK;
}

double ival_length(const ival *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += v[i].b - v[i].a;
  return s;
}

double ival_overlap(const ival *x, int nx, const ival *y, int ny) {
  double s = 0;
  int i = 0, j = 0;
  while (i < nx && j < ny) {
    double a = x[i].a > y[j].a ? x[i].a : y[j].a, b = x[i].b < y[j].b ? x[i].b : y[j].b;
    if (b > a) s += b - a;
    if (x[i].b < y[j].b)
      i++;
    else
      j++;
  }
  return s;
}

typedef struct {
  const char *name;
  long count;
} unit_count;

typedef struct {
  trace_step_summary s;
  unit_count *units;
  int nunits;
} step_acc;

static const char *str_of(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}
static double num_of(const cJSON *o, const char *k, double def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* An integer field: a value beyond the type reads as `def` (casting it would
 * be undefined; found by fuzzing). */
static int64_t int_of(const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t def) {
  double d = num_of(o, k, (double)def);
  return d >= (double)lo && d <= (double)hi ? (int64_t)d : def;
}

static hsr_status load(const char *path, cJSON **out) {
  FILE *f;
  HSR_CHECK(file_fopen_read("trace", path, &f));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
    fclose(f);
    free(buf);
    return hsr_error(HSR_ERR_IO, "trace: cannot read %s", path);
  }
  fclose(f);
  buf[len] = '\0';
  cJSON *doc = cJSON_Parse(buf);
  free(buf);
  if (!doc || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "traceEvents"))) {
    cJSON_Delete(doc);
    return hsr_error(HSR_ERR_IO, "trace: %s is not a Chrome trace (expected {\"traceEvents\":[...]})", path);
  }
  char what[4200];
  snprintf(what, sizeof what, "trace '%s'", path);
  hsr_status st = json_check_finite(doc, HSR_ERR_IO, what); /* a 1e999 duration would be infinite */
  if (st != HSR_OK) {
    cJSON_Delete(doc);
    return st;
  }
  *out = doc;
  return HSR_OK;
}

/* A complete event, read once from the JSON (strings point into the document). */
typedef struct {
  int pid, cat; /* cat: 0 step, 1 compute, 2 comm, 3 other */
  int is_ag;
  int grp; /* comm: 0 shard, 1 replicate, 2 partial (the "group" argument), else -1 */
  double t0, t1;
  int64_t step;
  const char *unit;
} xev;

static int cmp_xev(const void *x, const void *y) {
  const xev *a = x, *b = y;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

static void free_acc(step_acc *acc, int n) {
  for (int k = 0; k < n; k++) free(acc[k].units);
  free(acc);
}

/* The analysis: every complete event, scratch interval lists (one slot per
 * event), the per-step accumulators and a hash from step to accumulator.
 * Every pass is O(n log n) in the events: a trace of 100,000 steps is read in
 * seconds (a linear search per step made it quadratic). */
typedef struct {
  xev *xs;
  int n;
  ival *comp, *comm, *ag, *gb;
  step_acc *acc;
  int nacc, cap;
  int *slot;  /* hash of step -> acc index + 1; 0 empty */
  int nslot;  /* a power of two, at least twice nacc */
  int *steps; /* this rank's step events (indices into xs, by start) */
} analysis;

static void free_scratch(analysis *z) {
  free(z->slot);
  free(z->steps);
  free(z->xs);
  free(z->comp);
  free(z->comm);
  free(z->ag);
  free(z->gb);
}

/* Reads the complete events once, sorted by rank, then start. */
static hsr_status read_events(const cJSON *events, analysis *z) {
  int total = cJSON_GetArraySize(events);
  z->xs = malloc(sizeof *z->xs * (size_t)(total + 1));
  z->comp = malloc(sizeof(ival) * (size_t)(total + 1));
  z->comm = malloc(sizeof(ival) * (size_t)(total + 1));
  z->ag = malloc(sizeof(ival) * (size_t)(total + 1));
  z->gb = malloc(sizeof(ival) * (size_t)(total + 1));
  if (!z->xs || !z->comp || !z->comm || !z->ag || !z->gb) return hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const char *ph = str_of(e, "ph"), *cat = str_of(e, "cat");
    if (!ph || strcmp(ph, "X") || !cat) continue;
    xev *x = &z->xs[z->n++];
    x->pid = (int)int_of(e, "pid", INT32_MIN, INT32_MAX, -1);
    x->cat = !strcmp(cat, "step") ? 0 : !strcmp(cat, "compute") ? 1 : !strcmp(cat, "comm") ? 2 : 3;
    const char *nm = str_of(e, "name");
    x->is_ag = x->cat == 2 && nm && !strcmp(nm, "all_gather");
    x->t0 = num_of(e, "ts", 0);
    x->t1 = x->t0 + num_of(e, "dur", 0);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    x->step = int_of(args, "step", -((int64_t)1 << 53), (int64_t)1 << 53, 0);
    x->unit = str_of(args, "unit");
    const char *g = x->cat == 2 ? str_of(args, "group") : NULL;
    x->grp = !g                            ? -1
             : !strncmp(g, "shard", 5)     ? 0
             : !strncmp(g, "replicate", 9) ? 1
             : !strncmp(g, "partial", 7)   ? 2
                                           : -1;
  }
  qsort(z->xs, (size_t)z->n, sizeof *z->xs, cmp_xev);
  return HSR_OK;
}

static unsigned hash_step(int64_t s, int nslot) {
  uint64_t h = (uint64_t)s * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 32) & (unsigned)(nslot - 1);
}

static step_acc *find_step(analysis *z, int64_t step) {
  if (!z->nslot) return NULL;
  for (unsigned i = hash_step(step, z->nslot);; i = (i + 1) & (unsigned)(z->nslot - 1)) {
    int k = z->slot[i];
    if (!k) return NULL;
    if (z->acc[k - 1].s.step == step) return &z->acc[k - 1];
  }
}

static hsr_status rehash(analysis *z, int nslot) {
  int *s = calloc((size_t)nslot, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  free(z->slot);
  z->slot = s, z->nslot = nslot;
  for (int k = 0; k < z->nacc; k++) {
    unsigned i = hash_step(z->acc[k].s.step, nslot);
    while (s[i]) i = (i + 1) & (unsigned)(nslot - 1);
    s[i] = k + 1;
  }
  return HSR_OK;
}

static hsr_status step_of(analysis *z, int64_t step, step_acc **out) {
  *out = find_step(z, step);
  if (*out) return HSR_OK;
  HSR_CHECK(grow_array(&z->acc, &z->cap, z->nacc, sizeof *z->acc, 64, "trace"));
  *out = &z->acc[z->nacc++];
  memset(*out, 0, sizeof **out);
  (*out)->s.step = step;
  if (2 * z->nacc > z->nslot) return rehash(z, z->nslot ? 2 * z->nslot : 128);
  unsigned i = hash_step(step, z->nslot);
  while (z->slot[i]) i = (i + 1) & (unsigned)(z->nslot - 1);
  z->slot[i] = z->nacc;
  return HSR_OK;
}

/* The first event of [lo, hi) that can reach into a window starting at s0:
 * events are sorted by start and none lasts longer than maxdur. */
static int first_reaching(const analysis *z, int lo, int hi, double s0, double maxdur) {
  double from = s0 - maxdur;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (z->xs[mid].t0 < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* One rank's step window (events [lo, hi) of that rank, the longest of them
 * maxdur): compute, communication and all-gather time inside it, and what
 * compute covers. */
static void step_times(analysis *z, int lo, int hi, double maxdur, const xev *step, step_acc *a) {
  double s0 = step->t0, s1 = step->t1;
  int nc = 0, nm = 0, ng = 0;
  lo = first_reaching(z, lo, hi, s0, maxdur);
  /* events are sorted by start: stop at the first that starts after the step */
  for (int j = lo; j < hi && z->xs[j].t0 <= s1; j++) {
    const xev *x = &z->xs[j];
    if (x->cat == 0 || x->cat == 3 || x->t1 < s0) continue;
    double a0 = x->t0 < s0 ? s0 : x->t0, a1 = x->t1 > s1 ? s1 : x->t1;
    if (x->cat == 1) {
      z->comp[nc++] = (ival){a0, a1};
      continue;
    }
    z->comm[nm++] = (ival){a0, a1};
    if (x->is_ag) z->ag[ng++] = (ival){a0, a1};
  }
  ival_merge(z->comp, &nc);
  ival_merge(z->comm, &nm);
  ival_merge(z->ag, &ng);
  double cl = ival_length(z->comp, nc), ml = ival_length(z->comm, nm);
  double hidden = ival_overlap(z->comp, nc, z->comm, nm), gl = ival_length(z->ag, ng);
  a->s.gather_ms += gl / 1e3;
  a->s.gather_exposed_ms += (gl - ival_overlap(z->comp, nc, z->ag, ng)) / 1e3;
  a->s.ranks++;
  a->s.step_ms += (s1 - s0) / 1e3;
  a->s.compute_ms += cl / 1e3;
  a->s.comm_ms += ml / 1e3;
  a->s.exposed_ms += (ml - hidden) / 1e3;
  for (int g = 0; g < 3; g++) {
    int nb = 0;
    for (int j = lo; j < hi && z->xs[j].t0 <= s1; j++) {
      const xev *x = &z->xs[j];
      if (x->cat != 2 || x->grp != g || x->t1 < s0) continue;
      z->gb[nb++] = (ival){x->t0 < s0 ? s0 : x->t0, x->t1 > s1 ? s1 : x->t1};
    }
    ival_merge(z->gb, &nb);
    a->s.group_busy_ms[g] += ival_length(z->gb, nb) / 1e3;
  }
}

/* The step of a gather without a step argument: the window of this rank's
 * steps (ns of them in z->steps, by start) that it starts in, 0 if none. */
static int64_t window_of(const analysis *z, int ns, double t, double maxstep) {
  int lo = 0, hi = ns; /* the first step starting after t */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (z->xs[z->steps[mid]].t0 <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t s = 0; /* the earliest window holding t with a step number */
  for (int i = lo - 1; i >= 0 && z->xs[z->steps[i]].t0 >= t - maxstep; i--) {
    const xev *w = &z->xs[z->steps[i]];
    if (w->t0 <= t && t <= w->t1 && w->step > 0) s = w->step;
  }
  return s;
}

/* Counts go to the step that issued the gather (its step argument, as the
 * communicators count it), also when it ran into the next step (the
 * step-end prefetch); times go to the step whose window they fall in. */
static void count_gathers(analysis *z, int lo, int hi) {
  int ns = 0;
  double maxstep = 0;
  for (int i = lo; i < hi; i++)
    if (z->xs[i].cat == 0) {
      z->steps[ns++] = i;
      if (z->xs[i].t1 - z->xs[i].t0 > maxstep) maxstep = z->xs[i].t1 - z->xs[i].t0;
    }
  for (int j = lo; j < hi; j++) {
    const xev *x = &z->xs[j];
    if (!x->is_ag) continue;
    int64_t s = x->step;
    if (s <= 0) s = window_of(z, ns, x->t0, maxstep); /* no step argument: the window it starts in */
    step_acc *a = find_step(z, s);
    if (!a) continue;
    a->s.all_gathers++;
    const char *u = x->unit ? x->unit : "?";
    int k;
    for (k = 0; k < a->nunits; k++)
      if (!strcmp(a->units[k].name, u)) break;
    if (k == a->nunits) {
      unit_count *p = realloc(a->units, sizeof *p * (size_t)(a->nunits + 1));
      if (p) {
        a->units = p;
        a->units[a->nunits++] = (unit_count){u, 0};
      }
    }
    if (k < a->nunits) a->units[k].count++;
  }
}

/* Sums over ranks become means per rank. */
static void per_rank(step_acc *acc, int nacc) {
  for (int k = 0; k < nacc; k++) {
    trace_step_summary *s = &acc[k].s;
    double r = s->ranks ? s->ranks : 1;
    s->step_ms /= r;
    s->compute_ms /= r;
    s->comm_ms /= r;
    s->exposed_ms /= r;
    s->gather_ms /= r;
    s->gather_exposed_ms /= r;
    for (int g = 0; g < 3; g++) s->group_busy_ms[g] /= r;
    s->all_gathers = (long)(s->all_gathers / r + 0.5);
    s->overlap = s->comm_ms > 0 ? 1.0 - s->exposed_ms / s->comm_ms : 1.0;
  }
}

/* Builds per-step accumulators from the events of every rank. */
static hsr_status analyse(const cJSON *events, step_acc **out, int *nout) {
  analysis z = {0};
  hsr_status st = read_events(events, &z);
  if (st == HSR_OK && !(z.steps = malloc(sizeof *z.steps * (size_t)(z.n + 1))))
    st = hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
  for (int lo = 0, hi; st == HSR_OK && lo < z.n; lo = hi) { /* one rank at a time: [lo, hi) */
    double maxdur = 0;
    for (hi = lo; hi < z.n && z.xs[hi].pid == z.xs[lo].pid; hi++)
      if (z.xs[hi].cat != 0 && z.xs[hi].t1 - z.xs[hi].t0 > maxdur) maxdur = z.xs[hi].t1 - z.xs[hi].t0;
    for (int i = lo; i < hi && st == HSR_OK; i++) {
      step_acc *a;
      if (z.xs[i].cat != 0) continue;
      st = step_of(&z, z.xs[i].step, &a);
      if (st == HSR_OK) step_times(&z, lo, hi, maxdur, &z.xs[i], a);
    }
    if (st == HSR_OK) count_gathers(&z, lo, hi);
  }
  free_scratch(&z);
  if (st != HSR_OK) {
    free_acc(z.acc, z.nacc);
    return st;
  }
  per_rank(z.acc, z.nacc);
  *out = z.acc;
  *nout = z.nacc;
  return HSR_OK;
}

hsr_status trace_steps(const char *path, trace_step_summary **out, int *n) {
  if (!path || !out || !n) return hsr_error(HSR_ERR_INVALID, "trace_steps: NULL argument");
  cJSON *doc = NULL;
  HSR_CHECK(load(path, &doc));
  step_acc *acc = NULL;
  int nacc = 0;
  hsr_status st = analyse(cJSON_GetObjectItemCaseSensitive(doc, "traceEvents"), &acc, &nacc);
  if (st == HSR_OK) {
    *out = malloc(sizeof **out * (size_t)(nacc ? nacc : 1));
    if (!*out)
      st = hsr_error(HSR_ERR_NOMEM, "trace: out of memory");
    else {
      for (int k = 0; k < nacc; k++) (*out)[k] = acc[k].s;
      *n = nacc;
    }
  }
  free_acc(acc, nacc);
  cJSON_Delete(doc);
  return st;
}

hsr_status trace_summarize(const char *path, int json, FILE *f) {
  if (!path || !f) return hsr_error(HSR_ERR_INVALID, "trace_summarize: NULL argument");
  cJSON *doc = NULL;
  HSR_CHECK(load(path, &doc));
  step_acc *acc = NULL;
  int nacc = 0;
  hsr_status st = analyse(cJSON_GetObjectItemCaseSensitive(doc, "traceEvents"), &acc, &nacc);
  if (st == HSR_OK && nacc == 0) /* a header and nothing under it would read as "no steps ran" */
    st = hsr_error(HSR_ERR_IO,
                   "trace '%s' has no step events (its traceEvents hold no 'step' spans): nothing to summarize "
                   "(is it a trace that 'hsr train --trace' wrote?)",
                   path);
  if (st != HSR_OK) {
    free_acc(acc, nacc);
    cJSON_Delete(doc);
    return st;
  }
  if (json) {
    cJSON *root = cJSON_CreateObject(), *steps = cJSON_AddArrayToObject(root, "steps");
    for (int k = 0; k < nacc; k++) {
      const trace_step_summary *s = &acc[k].s;
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "step", (double)s->step);
      cJSON_AddNumberToObject(o, "ranks", s->ranks);
      cJSON_AddNumberToObject(o, "step_ms", s->step_ms);
      cJSON_AddNumberToObject(o, "compute_ms", s->compute_ms);
      cJSON_AddNumberToObject(o, "comm_ms", s->comm_ms);
      cJSON_AddNumberToObject(o, "exposed_comm_ms", s->exposed_ms);
      cJSON_AddNumberToObject(o, "overlap", s->overlap);
      cJSON_AddNumberToObject(o, "all_gather_ms", s->gather_ms);
      cJSON_AddNumberToObject(o, "all_gather_exposed_ms", s->gather_exposed_ms);
      cJSON_AddNumberToObject(o, "all_gathers", (double)s->all_gathers);
      cJSON *gb = cJSON_AddObjectToObject(o, "busy_ms");
      static const char *const gn[3] = {"shard", "replicate", "partial"};
      for (int g = 0; g < 3; g++) cJSON_AddNumberToObject(gb, gn[g], s->group_busy_ms[g]);
      cJSON *u = cJSON_AddObjectToObject(o, "all_gathers_per_unit");
      for (int i = 0; i < acc[k].nunits; i++)
        cJSON_AddNumberToObject(u, acc[k].units[i].name, (double)acc[k].units[i].count / (s->ranks ? s->ranks : 1));
      cJSON_AddItemToArray(steps, o);
    }
    char *txt = cJSON_Print(root);
    if (txt) fprintf(f, "%s\n", txt);
    free(txt);
    cJSON_Delete(root);
  } else {
    fprintf(f, "%6s %6s %10s %11s %9s %11s %8s %12s\n", "step", "ranks", "step(ms)", "compute(ms)", "comm(ms)",
            "exposed(ms)", "overlap", "all-gathers");
    for (int k = 0; k < nacc; k++) {
      const trace_step_summary *s = &acc[k].s;
      fprintf(f, "%6lld %6d %10.3f %11.3f %9.3f %11.3f %7.1f%% %12ld\n", (long long)s->step, s->ranks, s->step_ms,
              s->compute_ms, s->comm_ms, s->exposed_ms, 100.0 * s->overlap, s->all_gathers);
      if (acc[k].nunits) {
        fprintf(f, "       all-gathers per unit (per rank):");
        for (int i = 0; i < acc[k].nunits; i++)
          fprintf(f, " %s=%g", acc[k].units[i].name, (double)acc[k].units[i].count / (s->ranks ? s->ranks : 1));
        fputc('\n', f);
      }
    }
  }
  free_acc(acc, nacc);
  cJSON_Delete(doc);
  return HSR_OK;
}
