/* Calibration of the cost model from `hsr bench <collective> -J` files:
 * every row is a sample (bytes this rank sent in the operation, as the
 * communicators counted them, and its time), fitted per tier and collective
 * to t = alpha + bytes / busbw by least squares on the relative error, so
 * small and large sizes weigh alike. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/json.h"
#include "tune/tune.h"

typedef struct sample {
  int tier, op, conc, two; /* two: a two-level row (node stage + cross stage) */
  double x, x_cross, t;    /* bytes sent (two-level: node stage), cross-stage bytes, seconds */
  int file;
} sample;

struct tune_calib {
  tune_net host; /* the host collectives' algorithms, for the rows' volumes */
  sample *s;
  int n, cap;
  char (*names)[64];
  int nnames;
};

hsr_status tune_calib_create(tune_calib **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "tune_calib_create: NULL argument");
  *out = calloc(1, sizeof **out);
  if (!*out) return hsr_error(HSR_ERR_NOMEM, "calibration: out of memory");
  return tune_net_default("host", &(*out)->host);
}

void tune_calib_free(tune_calib *c) {
  if (!c) return;
  free(c->s);
  free(c->names);
  free(c);
}

int tune_calib_rows(const tune_calib *c) { return c ? c->n : 0; }

static hsr_status push(tune_calib *c, sample s) {
  HSR_CHECK(grow_array(&c->s, &c->cap, c->n, sizeof *c->s, 64, "calibration"));
  c->s[c->n++] = s;
  return HSR_OK;
}

static double num(const cJSON *o, const char *k, double def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int op_of(const char *coll) {
  if (!coll) return -1;
  if (!strcmp(coll, "all_gather")) return HSR_OP_ALLGATHER;
  if (!strcmp(coll, "reduce_scatter")) return HSR_OP_REDUCE_SCATTER;
  if (!strcmp(coll, "all_reduce")) return HSR_OP_ALLREDUCE;
  return -1;
}

static double type_size(const char *t) {
  if (!t) return 0;
  if (!strcmp(t, "float") || !strcmp(t, "int32") || !strcmp(t, "uint32")) return 4;
  if (!strcmp(t, "double") || !strcmp(t, "int64") || !strcmp(t, "uint64")) return 8;
  if (!strcmp(t, "bfloat16") || !strcmp(t, "half") || !strcmp(t, "float16")) return 2;
  if (!strcmp(t, "int8") || !strcmp(t, "uint8")) return 1;
  return 0;
}

/* One placement (out_of_place / in_place) of a row. The row's bytes must be
 * what the model's volumes say this collective moves on this group (the
 * calibration then fits each stage to the bytes the model gives it, the
 * same split the timeline uses): a file whose counters disagree comes from
 * collectives the model does not describe, and is refused. */
/* a and b equal but for the rounding of a written number (hsr bench writes
 * every digit; 0.5% leaves room for a file rounded to 3 places) */
static int agree(double a, double b) { return fabs(a - b) <= 0.005 * fmax(fabs(a), fabs(b)) + 1e-6; }

/* A row's own numbers must agree with each other: size = count x element
 * size (x the group for all_gather and reduce_scatter), alg_bw = size /
 * time, bus_bw = alg_bw x the collective's factor. A time that contradicts
 * its row's bandwidth (1e308 beside 0.1 GB/s) is an edited or broken file,
 * not a measurement to fit. */
static hsr_status check_row(const cJSON *row, const cJSON *p, const char *place, int op, int n, double es, double count,
                            int idx, const char *nm) {
  double size = num(row, "size", -1), t_us = num(p, "time", -1), alg = num(p, "alg_bw", -1), bus = num(p, "bus_bw", -1),
         full = count * es * (op == HSR_OP_ALLREDUCE ? 1 : n);
  double factor = op == HSR_OP_ALLREDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  if (size >= 0 && fabs(size - full) > 1e-9 * full + 0.5) /* a byte count: exact */
    return hsr_error(HSR_ERR_INVALID,
                     "%s: row %d (size %g): its size disagrees with count %.0f x %g bytes%s = %.0f (expected rows of "
                     "`hsr bench -J`)",
                     nm, idx, size, count, es, op == HSR_OP_ALLREDUCE ? "" : " x the group", full);
  if (size > 0 && alg >= 0 && !agree(alg, size / t_us / 1e3))
    return hsr_error(HSR_ERR_INVALID,
                     "%s: row %d (size %g, %s): time %g us and alg_bw %g GB/s disagree (size / time is %g GB/s): the "
                     "row was edited or is broken (rerun hsr bench)",
                     nm, idx, size, place, t_us, alg, size / t_us / 1e3);
  if (alg >= 0 && bus >= 0 && !agree(bus, alg * factor))
    return hsr_error(HSR_ERR_INVALID,
                     "%s: row %d (size %g, %s): bus_bw %g GB/s is not alg_bw %g x %g (the factor of a group of %d): "
                     "the row was edited or is broken (rerun hsr bench)",
                     nm, idx, size, place, bus, alg, factor, n);
  return HSR_OK;
}

static hsr_status add_place(tune_calib *c, const cJSON *row, const cJSON *h, const char *place, int op, int file,
                            int idx, const char *nm) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(row, place), *hp = cJSON_GetObjectItemCaseSensitive(h, place);
  double t = num(p, "time", -1) * 1e-6, sent = num(hp, "sent_bytes_per_op", -1);
  /* fabric_bytes_per_op is what crossed nodes, sent plus received */
  double fab = num(hp, "fabric_bytes_per_op", 0);
  int n = (int)num(h, "group_size", 0), nodes = (int)num(h, "nodes_spanned", 1);
  if (!(t > 0) || !(sent > 0) || n < 2 || nodes < 1 || nodes > n) return HSR_OK; /* nothing moved: no sample */
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(row, "type");
  double es = type_size(cJSON_IsString(ty) ? ty->valuestring : NULL), count = num(row, "count", -1);
  tune_shape g = {n, nodes, n % nodes == 0 ? n / nodes : 0, nodes};
  tune_vol v;
  if (!(es > 0) || !(count > 0) || tune_volume(&c->host, op, &g, count, (size_t)es, &v) != HSR_OK)
    return hsr_error(HSR_ERR_INVALID,
                     "%s: row %d (size %g): no usable \"count\" and \"type\" (expected rows of `hsr bench -J`)", nm,
                     idx, num(row, "size", 0));
  HSR_CHECK(check_row(row, p, place, op, n, es, count, idx, nm));
  double vf = v.fabric_sent + v.fabric_recv;
  if (fabs(v.sent - sent) > 0.02 * sent + 64 || fabs(vf - fab) > 0.02 * (fab > vf ? fab : vf) + 64)
    return hsr_error(HSR_ERR_INVALID,
                     "%s: row %d (size %g, %s, group of %d on %d nodes): it records %.0f bytes sent and %.0f across "
                     "nodes per op, the model's %s moves %.0f and %.0f: the file comes from collectives this hsr does "
                     "not model (rerun hsr bench)",
                     nm, idx, num(row, "size", 0), place, n, nodes, sent, fab, v.algo, v.sent, vf);
  const cJSON *cw = cJSON_GetObjectItemCaseSensitive(h, "concurrent_with");
  sample s = {.op = op, .conc = cJSON_GetArraySize(cw) > 0, .t = t, .file = file};
  for (int i = 0; i < v.nstages; i++) {
    if (v.stage[i].tier == HSR_TUNE_INTRA)
      s.x += v.stage[i].bytes;
    else
      s.x_cross += v.stage[i].bytes;
  }
  if (nodes == 1) {
    s.tier = HSR_TUNE_INTRA;
  } else if (s.x == 0) {
    s.tier = HSR_TUNE_CROSS, s.x = s.x_cross, s.x_cross = 0;
  } else { /* two-level: a node stage and a cross stage */
    s.tier = HSR_TUNE_CROSS, s.two = 1;
    if (s.x_cross <= 0) return HSR_OK;
  }
  return push(c, s);
}

hsr_status tune_calib_add_json(tune_calib *c, const char *text, const char *name) {
  if (!c || !text) return hsr_error(HSR_ERR_INVALID, "tune_calib_add_json: NULL argument");
  const char *nm = name ? name : "bench JSON";
  cJSON *root = cJSON_Parse(text);
  if (!root) return hsr_error(HSR_ERR_INVALID, "%s: not JSON (expected a file of `hsr bench <collective> -J`)", nm);
  if (json_check_finite(root, HSR_ERR_INVALID, nm) != HSR_OK) { /* a 1e999 would be an infinite time */
    cJSON_Delete(root);
    return HSR_ERR_INVALID;
  }
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "hsr"),
              *res = cJSON_GetObjectItemCaseSensitive(root, "results");
  const cJSON *coll = cJSON_GetObjectItemCaseSensitive(h, "collective");
  int op = op_of(cJSON_IsString(coll) ? coll->valuestring : NULL);
  hsr_status st = HSR_OK;
  if (!cJSON_IsObject(h) || !cJSON_IsArray(res))
    st = hsr_error(HSR_ERR_INVALID, "%s: no \"hsr\" object or \"results\" array (not written by `hsr bench -J`)", nm);
  else if (op < 0)
    st = hsr_error(HSR_ERR_INVALID, "%s: collective '%s' (the model fits all_gather, reduce_scatter, all_reduce)", nm,
                   cJSON_IsString(coll) ? coll->valuestring : "?");
  int file = c->nnames, before = c->n;
  if (st == HSR_OK) {
    char(*p)[64] = realloc(c->names, (size_t)(c->nnames + 1) * sizeof *p);
    if (!p) st = hsr_error(HSR_ERR_NOMEM, "calibration: out of memory");
    if (p) {
      c->names = p;
      const char *base = strrchr(nm, '/');
      snprintf(c->names[c->nnames++], 64, "%s", base ? base + 1 : nm);
    }
  }
  const cJSON *row;
  int idx = 0; /* rows named from 1, as a reader counts them */
  if (st == HSR_OK) cJSON_ArrayForEach(row, res) {
      const cJSON *rh = cJSON_GetObjectItemCaseSensitive(row, "hsr");
      idx++;
      if (!cJSON_IsObject(rh)) continue;
      st = add_place(c, row, rh, "out_of_place", op, file, idx, nm);
      if (st == HSR_OK) st = add_place(c, row, rh, "in_place", op, file, idx, nm);
      if (st != HSR_OK) break;
    }
  cJSON_Delete(root);
  if (st == HSR_OK && c->n == before)
    st = hsr_error(HSR_ERR_INVALID, "%s: no row with a time and bytes sent (sizes above 0, groups of 2+ ranks)", nm);
  return st;
}

/* ---- the fit ---- */
typedef struct fit {
  double alpha, gamma; /* seconds, seconds per byte */
  int n;
  double worst; /* largest relative error */
  double ss;    /* sum of squared relative errors */
  unsigned files;
} fit;

/* Minimises sum ((alpha + gamma x - t) / t)^2 over samples that match. */
static fit solve(const double *x, const double *t, int n) {
  fit f = {0};
  double aa = 0, ab = 0, bb = 0, sa = 0, sb = 0;
  for (int i = 0; i < n; i++) {
    double a = 1 / t[i], b = x[i] / t[i];
    aa += a * a, ab += a * b, bb += b * b, sa += a, sb += b;
  }
  double det = aa * bb - ab * ab;
  if (n >= 2 && fabs(det) > 1e-12 * aa * bb) {
    f.alpha = (sa * bb - sb * ab) / det;
    f.gamma = (aa * sb - ab * sa) / det;
  }
  if (n < 2 || f.alpha < 0 || f.gamma <= 0) { /* bandwidth only */
    f.alpha = 0;
    f.gamma = bb > 0 ? sb / bb : 0;
  }
  f.n = n;
  for (int i = 0; i < n; i++) {
    double e = fabs(f.alpha + f.gamma * x[i] - t[i]) / t[i];
    if (e > f.worst) f.worst = e;
    f.ss += e * e;
  }
  return f;
}

/* Samples of (tier, op, conc): x, t (two-level rows: the cross stage after
 * the fitted node stage). */
static int has_flat(const tune_calib *c, int tier, int op) {
  for (int i = 0; i < c->n; i++)
    if (c->s[i].tier == tier && c->s[i].op == op && !c->s[i].two) return 1;
  return 0;
}

static int collect(const tune_calib *c, const tune_net *net, int tier, int op, int conc, double *x, double *t,
                   unsigned *files) {
  int k = 0, flat = has_flat(c, tier, op);
  for (int i = 0; i < c->n; i++) {
    const sample *s = &c->s[i];
    if (s->tier != tier || s->op != op || s->conc != conc || (s->two && flat)) continue;
    if (s->two) {
      const tune_link *l = &net->link[HSR_TUNE_INTRA][op];
      double node = l->alpha_us * 1e-6 + (l->busbw_gbs > 0 ? s->x / (l->busbw_gbs * 1e9) : 0);
      if (s->t - node < 0.05 * s->t) continue; /* the node stage took it all: nothing to fit */
      x[k] = s->x_cross, t[k] = s->t - node;
    } else {
      x[k] = s->x, t[k] = s->t;
    }
    *files |= 1u << (s->file < 31 ? s->file : 31);
    k++;
  }
  return k;
}

static void label(const tune_calib *c, unsigned files, const char *what, int n, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "fit: %d rows of ", n);
  int first = 1;
  for (int i = 0; i < c->nnames && o < len; i++)
    if (files & (1u << (i < 31 ? i : 31))) {
      o += (size_t)snprintf(buf + o, len - o, "%s%s", first ? "" : ", ", c->names[i]);
      first = 0;
    }
  if (what && o < len) snprintf(buf + o, len - o, "%s", what);
}

static void set_link(tune_link *l, fit f) {
  l->alpha_us = f.alpha * 1e6;
  l->busbw_gbs = 1 / (f.gamma * 1e9);
  l->samples = f.n;
  l->is_default = 0;
}

static size_t say(char *r, size_t len, size_t o, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t say(char *r, size_t len, size_t o, const char *fmt, ...) {
  if (!r || o >= len) return o;
  va_list ap;
  va_start(ap, fmt);
  o += (size_t)vsnprintf(r + o, len - o, fmt, ap);
  va_end(ap);
  return o;
}

static const char *const tier_names[] = {"intra-node", "cross-node"};
static const char *const op_names[] = {"all_gather", "reduce_scatter", "all_reduce"};

/* Fits the links of one tier; *fitted gets which ops got rows. */
static size_t fit_tier(const tune_calib *c, tune_net *net, int tier, double *x, double *t, int *fitted, char *r,
                       size_t len, size_t o) {
  double ss = 0;
  int rows = 0;
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    unsigned files = 0;
    int conc = 0, k = collect(c, net, tier, op, 0, x, t, &files);
    if (!k) k = collect(c, net, tier, op, conc = 1, x, t, &files); /* only run beside the other tier */
    fitted[op] = k > 0;
    if (!k) continue;
    fit f = solve(x, t, k);
    if (f.gamma <= 0) continue;
    tune_link *l = &net->link[tier][op];
    set_link(l, f);
    ss += f.ss, rows += f.n;
    label(c, files, conc ? " (run beside the other tier)" : "", k, l->source, sizeof l->source);
    o = say(r, len, o, "%s %s: alpha %.1f us, busbw %.3f GB/s (%s; worst row off by %.0f%%)\n", tier_names[tier],
            op_names[op], l->alpha_us, l->busbw_gbs, l->source, 100 * f.worst);
  }
  if (rows) net->rel_rms[tier] = sqrt(ss / rows);
  return o;
}

/* Links without rows, from the ones that have them. */
static size_t derive(tune_net *net, int tier, const int *fitted, char *r, size_t len, size_t o) {
  tune_link *ag = &net->link[tier][HSR_OP_ALLGATHER], *rs = &net->link[tier][HSR_OP_REDUCE_SCATTER],
                *ar = &net->link[tier][HSR_OP_ALLREDUCE];
  if (!fitted[HSR_OP_ALLREDUCE] && fitted[HSR_OP_ALLGATHER] && fitted[HSR_OP_REDUCE_SCATTER]) {
    ar->alpha_us = ag->alpha_us + rs->alpha_us; /* reduce-scatter then all-gather, half the bytes each */
    ar->busbw_gbs = 2 / (1 / ag->busbw_gbs + 1 / rs->busbw_gbs);
    ar->is_default = 0;
    snprintf(ar->source, sizeof ar->source, "derived: reduce-scatter + all-gather fits");
    o = say(r, len, o, "%s all_reduce: derived from reduce_scatter + all_gather (busbw %.3f GB/s)\n", tier_names[tier],
            ar->busbw_gbs);
  }
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    tune_link *l = &net->link[tier][op];
    if (fitted[op] || !l->is_default) continue;
    int from = fitted[HSR_OP_ALLGATHER]        ? HSR_OP_ALLGATHER
               : fitted[HSR_OP_REDUCE_SCATTER] ? HSR_OP_REDUCE_SCATTER
               : fitted[HSR_OP_ALLREDUCE]      ? HSR_OP_ALLREDUCE
                                               : -1;
    if (from < 0) continue;
    *l = net->link[tier][from];
    l->samples = 0;
    snprintf(l->source, sizeof l->source, "assumed as the %s fit", op_names[from]);
    o = say(r, len, o, "%s %s: no rows, assumed as %s\n", tier_names[tier], op_names[op], op_names[from]);
  }
  return o;
}

/* Bandwidth factor while the other tier runs, from the concurrent rows. */
static size_t contention(const tune_calib *c, tune_net *net, int tier, double *x, double *t, char *r,
                         size_t len, size_t o) {
  double sum = 0;
  int n = 0;
  for (int op = 0; op < HSR_TUNE_OPS; op++) {
    unsigned files = 0;
    int k = collect(c, net, tier, op, 1, x, t, &files);
    const tune_link *l = &net->link[tier][op];
    if (!k || l->samples == 0 || strstr(l->source, "beside")) continue;
    double a = l->alpha_us * 1e-6, num_ = 0, den = 0;
    for (int i = 0; i < k; i++) {
      double ai = 1 / t[i], bi = x[i] / t[i];
      num_ += bi * (1 - a * ai), den += bi * bi;
    }
    if (num_ <= 0 || den <= 0) continue;
    double gamma_c = num_ / den, f = 1 / (gamma_c * 1e9) / l->busbw_gbs;
    sum += f * k, n += k;
  }
  if (!n) return o;
  double f = sum / n;
  net->concurrent[tier] = f < 0.05 ? 0.05 : f > 1.5 ? 1.5 : f;
  net->concurrent_default[tier] = 0;
  return say(r, len, o, "%s: %.2fx its bandwidth while the other tier runs (%d concurrent rows)\n", tier_names[tier],
             net->concurrent[tier], n);
}

/* Two-level rows where flat cross rows fitted the cross tier: the cross
 * stage of a two-level operation gets its own fit (alpha + bytes / busbw of
 * what is left of the row's time after its node stage), so a stage that
 * overlaps or shares the link unlike a flat ring is timed as measured; the
 * span factor stays 1. */
static size_t span_fit(const tune_calib *c, tune_net *net, int op, double *x, double *t, char *r, size_t len,
                       size_t o) {
  if (!has_flat(c, HSR_TUNE_CROSS, op)) return o;
  int k = 0;
  unsigned files = 0;
  for (int i = 0; i < c->n; i++) {
    const sample *s = &c->s[i];
    if (!s->two || s->op != op || s->conc) continue;
    const tune_link *l = &net->link[HSR_TUNE_INTRA][op];
    double node = l->alpha_us * 1e-6 + (l->busbw_gbs > 0 ? s->x / (l->busbw_gbs * 1e9) : 0);
    if (s->t - node < 0.05 * s->t) continue; /* the node stage took it all: nothing to fit */
    x[k] = s->x_cross, t[k] = s->t - node;
    files |= 1u << (s->file < 31 ? s->file : 31);
    k++;
  }
  if (!k) return o;
  fit f = solve(x, t, k);
  if (f.gamma <= 0) return o;
  tune_link *l = &net->span_link[op];
  set_link(l, f);
  label(c, files, " (the cross stage of two-level operations)", k, l->source, sizeof l->source);
  net->span[op] = 1;
  net->span_samples[op] = k;
  return say(r, len, o,
             "groups spanning nodes, %s: their cross stage alpha %.1f us, busbw %.3f GB/s (%d two-level rows; the flat "
             "cross-node fit would say %.3f GB/s; worst row off by %.0f%%)\n",
             op_names[op], l->alpha_us, l->busbw_gbs, k, net->link[HSR_TUNE_CROSS][op].busbw_gbs, 100 * f.worst);
}

hsr_status tune_calib_fit(const tune_calib *c, tune_net *net, char *report, size_t len) {
  if (!c || !net) return hsr_error(HSR_ERR_INVALID, "tune_calib_fit: NULL argument");
  if (report && len) report[0] = '\0';
  if (c->n == 0) return hsr_error(HSR_ERR_INVALID, "calibration: no bench rows to fit");
  double *x = malloc(sizeof *x * (size_t)c->n), *t = malloc(sizeof *t * (size_t)c->n);
  if (!x || !t) {
    free(x), free(t);
    return hsr_error(HSR_ERR_NOMEM, "calibration: out of memory");
  }
  size_t o = 0;
  int fitted[HSR_TUNE_TIER_COUNT][HSR_TUNE_OPS];
  /* intra first: the two-level rows' cross stage is what their node stage leaves */
  for (int tier = 0; tier < HSR_TUNE_TIER_COUNT; tier++) {
    o = fit_tier(c, net, tier, x, t, fitted[tier], report, len, o);
    o = derive(net, tier, fitted[tier], report, len, o);
  }
  for (int tier = 0; tier < HSR_TUNE_TIER_COUNT; tier++) o = contention(c, net, tier, x, t, report, len, o);
  for (int op = 0; op < HSR_TUNE_OPS; op++) o = span_fit(c, net, op, x, t, report, len, o);
  free(x), free(t);
  return HSR_OK;
}

/* ---- inside a step ---- */
typedef struct sfit {
  tune_net *net;
  tune_model *m;
  const tune_probe *p;
  int n;
  hsr_status err;
} sfit;

static double rel2(double pred, double meas) { return meas > 0 ? (pred - meas) * (pred - meas) / (meas * meas) : 0; }

/* Squared relative errors of step, communication and compute over the probes. */
static double cost(sfit *f) {
  double c = 0;
  for (int i = 0; i < f->n && f->err == HSR_OK; i++) {
    tune_result r;
    f->err = tune_eval(f->m, f->net, &f->p[i].cfg, f->p[i].S, f->p[i].R, f->p[i].shapes, &r);
    c += rel2(r.step_ms, f->p[i].step_ms) + rel2(r.comm_ms, f->p[i].comm_ms) + rel2(r.compute_ms, f->p[i].compute_ms);
  }
  return c;
}

/* Golden-section search of one parameter in [lo, hi] (log scale when lo > 0). */
static void line(sfit *f, double *x, double lo, double hi) {
  int lg = lo > 0;
  double a = lg ? log(lo) : lo, b = lg ? log(hi) : hi, g = 0.618033988749895;
  double c = b - g * (b - a), d = a + g * (b - a), best = *x, bc = cost(f);
  for (int it = 0; it < 24 && f->err == HSR_OK; it++) {
    *x = lg ? exp(c) : c;
    double fc = cost(f);
    *x = lg ? exp(d) : d;
    double fd = cost(f);
    if (fc < bc) bc = fc, best = lg ? exp(c) : c;
    if (fd < bc) bc = fd, best = lg ? exp(d) : d;
    if (fc < fd)
      b = d, d = c, c = b - g * (b - a);
    else
      a = c, c = d, d = a + g * (b - a);
  }
  *x = best;
}

/* What the fitted model leaves unexplained in the probes, as relative rms:
 * the step and the compute. (Each group's busy time is not a residual of
 * the model: a rank's span of a collective includes waiting for its slowest
 * peer to post it, which a model of one symmetric rank has no place for.) */
static hsr_status residuals(sfit *f) {
  double ss_step = 0, ss_comp = 0;
  for (int i = 0; i < f->n; i++) {
    tune_result r;
    HSR_CHECK(tune_eval(f->m, f->net, &f->p[i].cfg, f->p[i].S, f->p[i].R, f->p[i].shapes, &r));
    ss_step += rel2(r.step_ms, f->p[i].step_ms);
    ss_comp += rel2(r.compute_ms, f->p[i].compute_ms);
  }
  f->net->step_rel_rms = sqrt(ss_step / f->n);
  f->net->compute_rel_rms = sqrt(ss_comp / f->n);
  return HSR_OK;
}

hsr_status tune_calib_step(tune_net *net, tune_model *m, const tune_probe *p, int n, char *report,
                           size_t len) {
  if (!net || !m || !p || n < 1) return hsr_error(HSR_ERR_INVALID, "tune_calib_step: no probe runs");
  sfit f = {net, m, p, n, HSR_OK};
  double work = m->units * (1 + m->bwd_ratio), least = 0;
  for (int i = 0; i < n; i++)
    if (!least || p[i].compute_ms < least) least = p[i].compute_ms;
  m->fwd_ms = least / work; /* the start: all measured compute is the units' */
  double f0 = m->fwd_ms, before = cost(&f);
  for (int round = 0; round < 3 && f.err == HSR_OK; round++) {
    line(&f, &m->fwd_ms, f0 * 0.3, f0 * 1.5);
    line(&f, &net->slow[HSR_TUNE_INTRA], 0.3, 30);
    if (net->link[HSR_TUNE_CROSS][0].samples) line(&f, &net->slow[HSR_TUNE_CROSS], 0.3, 30);
    if (net->compute_off_host || net->device_is_gpu) continue; /* compute takes no core from the collectives */
    line(&f, &net->slow_busy[HSR_TUNE_INTRA], 0.3, 10);
    if (net->link[HSR_TUNE_CROSS][0].samples) line(&f, &net->slow_busy[HSR_TUNE_CROSS], 0.3, 10);
    line(&f, &net->steal[HSR_TUNE_INTRA], 0, 0.95);
    if (net->link[HSR_TUNE_CROSS][0].samples) line(&f, &net->steal[HSR_TUNE_CROSS], 0, 0.95);
  }
  double after = cost(&f);
  if (f.err != HSR_OK) return f.err;
  HSR_CHECK(residuals(&f));
  if (report && len)
    snprintf(report, len,
             "in-step (fit to %d probe run%s, rms error %.0f%% -> %.0f%%): collectives take %.2fx (intra-node) and "
             "%.2fx (cross-node) their benchmarked time, %.2fx / %.2fx that again beside compute; busy, they take "
             "%.0f%% / %.0f%% of compute speed; compute %.3f ms per unit forward; left unexplained (rms): step "
             "%.1f%%, compute %.1f%%; the bench fits': intra-node %.1f%%, cross-node %.1f%%\n",
             n, n > 1 ? "s" : "", 100 * sqrt(before / (3 * n)), 100 * sqrt(after / (3 * n)), net->slow[0], net->slow[1],
             net->slow_busy[0], net->slow_busy[1], 100 * net->steal[0], 100 * net->steal[1], m->fwd_ms,
             100 * net->step_rel_rms, 100 * net->compute_rel_rms, 100 * net->rel_rms[0], 100 * net->rel_rms[1]);
  return HSR_OK;
}
