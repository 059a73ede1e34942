/* Memory ledger: current/peak bytes per category with the phase of each peak. */
#include "hsr/ledger.h"
#include "runtime/io/ledger_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

struct hsr_ledger {
  uint64_t cur[HSR_MEM_CAT_COUNT], peak[HSR_MEM_CAT_COUNT];
  uint64_t total, total_peak, runtime, runtime_peak, transient, transient_peak, host, host_peak;
  ledger_where now, total_where, runtime_where;
};

static const char *const cat_names[HSR_MEM_CAT_COUNT] = {
    "param_shard",   "grad_shard",         "master",         "moment_m",        "moment_v",     "full_unit",
    "partial_slice", "reduce_scatter_buf", "all_reduce_buf", "staging",         "ckpt_staging", "activation",
    "host_master",   "host_moment_m",      "host_moment_v",  "host_grad_shard", "host_staging"};
static const char *const phase_names[HSR_PHASE_COUNT] = {"init", "forward", "backward", "reduce", "step", "checkpoint", "recompute"};

int mem_cat_persistent(mem_cat cat) { return cat <= HSR_MEM_MOMENT_V || mem_cat_host(cat); }
int mem_cat_host(mem_cat cat) { return cat >= HSR_MEM_HOST_MASTER && cat < HSR_MEM_CAT_COUNT; }
const char *mem_cat_name(mem_cat cat) { return (unsigned)cat < HSR_MEM_CAT_COUNT ? cat_names[cat] : "?"; }
const char *phase_name(ledger_phase p) { return (unsigned)p < HSR_PHASE_COUNT ? phase_names[p] : "?"; }

hsr_status ledger_create(hsr_ledger **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "ledger_create: out is NULL");
  *out = calloc(1, sizeof **out);
  if (!*out) return hsr_error(HSR_ERR_NOMEM, "ledger_create: out of memory");
  (*out)->now.unit = -1;
  (*out)->total_where.unit = -1;
  (*out)->runtime_where.unit = -1;
  return HSR_OK;
}

void ledger_free(hsr_ledger *l) { free(l); }

hsr_status ledger_reset(hsr_ledger *l) {
  if (!l) return hsr_error(HSR_ERR_INVALID, "ledger_reset: NULL ledger");
  memset(l, 0, sizeof *l);
  l->now.unit = l->total_where.unit = l->runtime_where.unit = -1;
  return HSR_OK;
}

/* Returned from the caller at once: a check whose status the caller tests
 * leaves gcc a path that indexes with the bad category, which it warns about. */
static hsr_status bad_cat(mem_cat cat) {
  return hsr_error(HSR_ERR_INVALID, "ledger: unknown category %d (valid: 0 to %d)", (int)cat, HSR_MEM_CAT_COUNT - 1);
}

hsr_status ledger_alloc(hsr_ledger *l, mem_cat cat, size_t bytes) {
  if (!l) return HSR_OK; /* a runtime without a ledger records nothing */
  if ((unsigned)cat >= HSR_MEM_CAT_COUNT) return bad_cat(cat);
  l->cur[cat] += bytes;
  if (l->cur[cat] > l->peak[cat]) l->peak[cat] = l->cur[cat];
  if (mem_cat_host(cat)) { /* host memory: its own total */
    l->host += bytes;
    if (l->host > l->host_peak) l->host_peak = l->host;
    return HSR_OK;
  }
  l->total += bytes;
  if (l->total > l->total_peak) {
    l->total_peak = l->total;
    l->total_where = l->now;
  }
  if (!mem_cat_persistent(cat)) {
    l->transient += bytes;
    if (l->transient > l->transient_peak) l->transient_peak = l->transient;
  }
  if (cat != HSR_MEM_ACTIVATION) {
    l->runtime += bytes;
    if (l->runtime > l->runtime_peak) {
      l->runtime_peak = l->runtime;
      l->runtime_where = l->now;
    }
  }
  return HSR_OK;
}

hsr_status ledger_release(hsr_ledger *l, mem_cat cat, size_t bytes) {
  if (!l) return HSR_OK;
  if ((unsigned)cat >= HSR_MEM_CAT_COUNT) return bad_cat(cat);
  if (bytes > l->cur[cat])
    return hsr_error(HSR_ERR_STATE, "ledger: releasing %zu bytes of %s but only %llu are alive", bytes, cat_names[cat],
                     (unsigned long long)l->cur[cat]);
  l->cur[cat] -= bytes;
  if (mem_cat_host(cat)) {
    l->host -= bytes;
    return HSR_OK;
  }
  l->total -= bytes;
  if (!mem_cat_persistent(cat)) l->transient -= bytes;
  if (cat != HSR_MEM_ACTIVATION) l->runtime -= bytes;
  return HSR_OK;
}

hsr_status hsr_ledger_note(hsr_ledger *l, int64_t delta) {
  if (delta >= 0) return ledger_alloc(l, HSR_MEM_ACTIVATION, (size_t)delta);
  return ledger_release(l, HSR_MEM_ACTIVATION, (size_t)(-delta));
}

hsr_status ledger_set_phase(hsr_ledger *l, ledger_phase phase, int unit, int64_t step) {
  if (!l) return HSR_OK;
  if ((unsigned)phase >= HSR_PHASE_COUNT) return hsr_error(HSR_ERR_INVALID, "ledger: unknown phase %d", (int)phase);
  l->now.phase = phase;
  l->now.unit = unit;
  l->now.step = step;
  return HSR_OK;
}

uint64_t ledger_current(const hsr_ledger *l, mem_cat cat) {
  return (unsigned)cat < HSR_MEM_CAT_COUNT ? l->cur[cat] : 0;
}
uint64_t ledger_peak(const hsr_ledger *l, mem_cat cat) {
  return (unsigned)cat < HSR_MEM_CAT_COUNT ? l->peak[cat] : 0;
}
uint64_t ledger_persistent(const hsr_ledger *l) {
  uint64_t s = 0;
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++)
    if (mem_cat_persistent((mem_cat)c) && !mem_cat_host((mem_cat)c)) s += l->cur[c];
  return s;
}
uint64_t ledger_host(const hsr_ledger *l) { return l->host; }
uint64_t ledger_host_peak(const hsr_ledger *l) { return l->host_peak; }
uint64_t ledger_transient_peak(const hsr_ledger *l) { return l->transient_peak; }
uint64_t ledger_total_peak(const hsr_ledger *l) { return l->total_peak; }
uint64_t ledger_runtime_peak(const hsr_ledger *l) { return l->runtime_peak; }
ledger_where ledger_total_peak_where(const hsr_ledger *l) { return l->total_where; }
ledger_where ledger_runtime_peak_where(const hsr_ledger *l) { return l->runtime_where; }

static void fmt_bytes(char *buf, size_t n, uint64_t b) {
  if (b >= (1ull << 30))
    snprintf(buf, n, "%.2f GiB", (double)b / (1ull << 30));
  else if (b >= (1ull << 20))
    snprintf(buf, n, "%.2f MiB", (double)b / (1ull << 20));
  else if (b >= (1ull << 10))
    snprintf(buf, n, "%.2f KiB", (double)b / (1ull << 10));
  else
    snprintf(buf, n, "%llu B", (unsigned long long)b);
}

hsr_status ledger_print(const hsr_ledger *m, const hsr_ledger *p, double nparams, FILE *f) {
  if (!m || !f) return hsr_error(HSR_ERR_INVALID, "ledger_print: NULL argument");
  char a[32], b[32], c[32];
  fprintf(f, "%-20s %-11s %12s %12s%s\n", "category", "kind", "current", "peak", p ? "   predicted peak" : "");
  for (int i = 0; i < HSR_MEM_CAT_COUNT; i++) {
    mem_cat cat = (mem_cat)i;
    if (!m->peak[i] && !(p && p->peak[i])) continue;
    fmt_bytes(a, sizeof a, m->cur[i]);
    fmt_bytes(b, sizeof b, m->peak[i]);
    if (p) fmt_bytes(c, sizeof c, p->peak[i]);
    fprintf(f, "%-20s %-11s %12s %12s", cat_names[i],
            mem_cat_host(cat)         ? "host"
            : mem_cat_persistent(cat) ? "persistent"
                                          : "transient",
            a, b);
    if (p) fprintf(f, "   %14s", c);
    fputc('\n', f);
  }
  fmt_bytes(a, sizeof a, ledger_persistent(m));
  fprintf(f, "persistent total     %s", a);
  if (nparams > 0) fprintf(f, " (%.2f bytes/param)", (double)ledger_persistent(m) / nparams);
  fputc('\n', f);
  if (m->host_peak || (p && p->host_peak)) {
    fmt_bytes(a, sizeof a, m->host);
    fprintf(f, "host total           %s (pinned; not device memory)", a);
    if (nparams > 0) fprintf(f, " (%.2f bytes/param)", (double)m->host / nparams);
    fputc('\n', f);
  }
  fmt_bytes(a, sizeof a, m->transient_peak);
  fprintf(f, "transient peak       %s\n", a);
  ledger_where w = m->runtime_where;
  fmt_bytes(a, sizeof a, m->runtime_peak);
  fprintf(f, "runtime peak         %s in %s", a, phase_names[w.phase]);
  if (w.unit >= 0) fprintf(f, " of unit %d", w.unit);
  fprintf(f, ", step %lld", (long long)w.step);
  if (p) {
    fmt_bytes(b, sizeof b, p->runtime_peak);
    double d =
        p->runtime_peak ? 100.0 * ((double)m->runtime_peak - (double)p->runtime_peak) / (double)p->runtime_peak : 0.0;
    fprintf(f, " (predicted %s, %+.2f%%)", b, d);
  }
  fputc('\n', f);
  fmt_bytes(a, sizeof a, m->total_peak);
  fprintf(f, "total peak           %s (with reported activations)\n", a);
  return HSR_OK;
}

static cJSON *where_json(ledger_where w) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "phase", phase_names[w.phase]);
  cJSON_AddNumberToObject(o, "unit", w.unit);
  cJSON_AddNumberToObject(o, "step", (double)w.step);
  return o;
}

hsr_status ledger_json(const hsr_ledger *l, char **out) {
  if (!l || !out) return hsr_error(HSR_ERR_INVALID, "ledger_json: NULL argument");
  cJSON *root = cJSON_CreateObject(), *cats = cJSON_AddObjectToObject(root, "categories");
  for (int i = 0; i < HSR_MEM_CAT_COUNT; i++) {
    cJSON *c = cJSON_AddObjectToObject(cats, cat_names[i]);
    cJSON_AddBoolToObject(c, "persistent", mem_cat_persistent((mem_cat)i));
    cJSON_AddBoolToObject(c, "host", mem_cat_host((mem_cat)i));
    cJSON_AddNumberToObject(c, "current", (double)l->cur[i]);
    cJSON_AddNumberToObject(c, "peak", (double)l->peak[i]);
  }
  cJSON_AddNumberToObject(root, "persistent", (double)ledger_persistent(l));
  cJSON_AddNumberToObject(root, "host", (double)l->host);
  cJSON_AddNumberToObject(root, "host_peak", (double)l->host_peak);
  cJSON_AddNumberToObject(root, "transient_peak", (double)l->transient_peak);
  cJSON_AddNumberToObject(root, "runtime_peak", (double)l->runtime_peak);
  cJSON_AddItemToObject(root, "runtime_peak_at", where_json(l->runtime_where));
  cJSON_AddNumberToObject(root, "total_peak", (double)l->total_peak);
  cJSON_AddItemToObject(root, "total_peak_at", where_json(l->total_where));
  *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return *out ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "ledger_json: out of memory");
}
