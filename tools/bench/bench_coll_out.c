/* hsr bench <collective>: what rank 0 prints and writes. The table and its
 * footers are nccl-tests'; the JSON file (-J) follows nccl-tests' writer
 * (src/util.cu, file version 3: version, start_time, args, env, config with
 * devices, results with size/count/type/redop/root and out_of_place /
 * in_place {time, alg_bw, bus_bw, nwrong}, the per-iteration objects,
 * actual_iterations, experiment_name; out_of_bounds, average_bus_bandwidth,
 * end_time), so their tools read it; hsr's own description of the run (group
 * kind and size, nodes spanned, emulated rate, bytes that crossed nodes) is
 * under "hsr" keys beside them. --plot draws bus bandwidth against size with
 * gnuplot. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_coll.h"
#include "tools/cli/cli.h"
#include "hsr/config.h"
#include "hsr/git.h"
#include "common/dtype_internal.h"
#include "collectives/comm_internal.h"
#include "launch/boot_internal.h"

extern char **environ;

void bc_now(char *buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static const char *redop_of(const bc_opts *o) {
  return o->coll == NT_ALLGATHER || o->coll == NT_BCAST ? "none" : redop_name(o->redop);
}
static int root_of(const bc_opts *o) { return o->coll == NT_BCAST ? (int)o->root : -1; }
static const char *emulated(void) {
  const char *e = getenv("HSR_EMULATE_NET");
  return e && *e ? e : NULL;
}

/* ---- table ---------------------------------------------------------------------- */

void bc_print_header(const bc_ctx *x) {
  const bc_opts *o = x->o;
  int n = hsr_boot_size(x->boot), nodes = boot_num_nodes(x->boot);
  printf("# hsr bench %s (nccl-tests' %s_perf): hsr %s\n", nt_op_names[o->coll], nt_op_names[o->coll],
         HSR_VERSION_STRING);
  printf("# nranks %d nodes %d%s%s%s minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %ld iters: %ld agg iters: "
         "%ld validation: %ld graph: 0\n",
         n, nodes, emulated() ? " (emulated network " : "", emulated() ? emulated() : "", emulated() ? ")" : "",
         o->minb, o->maxb, o->factor > 0 ? o->factor : (double)o->stepb, o->factor > 0 ? "factor" : "bytes", o->warmup,
         o->iters, o->agg, o->check);
  if (o->blocking) printf("# Blocking Enabled: -z %d\n", o->blocking);
  printf("# type %s, redop %s, buffers %s, time %s over ranks%s\n", nt_type_names[o->dt], redop_of(o),
         o->comm_mem ? "registered (comm_mem_alloc)" : "user (malloc, staged)",
         (const char *[]){"of rank 0", "mean", "min", "max"}[o->average], o->timeout > 0 ? ", -T set" : "");
  for (int k = 0; k < x->ng; k++) {
    const bc_group *g = &x->g[k];
    printf("# group %s: %d group%s of %d rank%s, %s %d node%s%s\n", bc_kind_names[g->kind], g->ngroups,
           g->ngroups > 1 ? "s" : "", g->n, g->n > 1 ? "s" : "", g->nodes_spanned > 1 ? "spanning" : "each on",
           g->nodes_spanned, g->nodes_spanned > 1 ? "s" : "", o->concurrent && x->ng > 1 ? " (concurrently)" : "");
  }
  printf("#\n# Using devices\n");
  for (int r = 0; r < n; r++)
    printf("#  Rank %2d Group %2d Pid %6d on %10s node %d host\n", r, x->colors[r], x->pids[r],
           boot_hostname_of(x->boot, r), boot_node_of(x->boot, r));
  printf("#\n");
  const char *it = o->per_iter ? "   i_min   i_max   i_p99   i_cv%" : "";
  int w = o->per_iter ? 63 : 31; /* one placement's columns */
  printf("# %10s  %12s  %8s  %6s  %6s", "", "", "", "", "");
  printf("  %-*s  %-*s\n", w, o->per_iter ? "         out-of-place (+ per-iteration)" : "         out-of-place", w,
         o->per_iter ? "           in-place (+ per-iteration)" : "           in-place");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s%s  %7s  %6s  %6s  %6s%s%s\n", "size", "count", "type",
         "redop", "root", "time", "algbw", "busbw", "#wrong", it, "time", "algbw", "busbw", "#wrong", it,
         x->ng > 1 ? "  group" : "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s%s  %7s  %6s  %6s  %6s%s\n", "(B)", "(elements)", "", "", "",
         "(us)", "(GB/s)", "(GB/s)", "", o->per_iter ? "    (us)    (us)    (us)     (%)" : "", "(us)", "(GB/s)",
         "(GB/s)", "", o->per_iter ? "    (us)    (us)    (us)     (%)" : "");
  fflush(stdout);
}

/* nccl-tests' getFloatStr: as many decimals as fit the width. */
static void num(char *s, int w, double v) {
  if (snprintf(s, (size_t)w + 1, "%*.2f", w, v) <= w) return;
  if (snprintf(s, (size_t)w + 1, "%*.1f", w, v) <= w) return;
  if (snprintf(s, (size_t)w + 1, "%*.0f", w, v) <= w) return;
  snprintf(s, (size_t)w + 1, w >= 7 ? "%*.1e" : "%*.0e", w, v);
}

void bc_print_row(const bc_ctx *x, const bc_row *r) {
  const bc_opts *o = x->o;
  printf("  %10zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, nt_type_names[o->dt], redop_of(o), root_of(o));
  for (int p = 0; p < 2; p++) {
    const bc_one *e = &r->place[p];
    char t[16], a[16], b[16];
    num(t, 7, e->time_us), num(a, 6, e->algbw), num(b, 6, e->busbw);
    printf("  %7s  %6s  %6s  %6lld", t, a, b, e->wrong);
    if (o->per_iter) {
      char m0[16], m1[16], m2[16], m3[16];
      num(m0, 7, e->it.min), num(m1, 7, e->it.max), num(m2, 7, e->it.p99), num(m3, 7, e->it.cv);
      printf(" %7s %7s %7s %7s", m0, m1, m2, m3);
    }
  }
  if (x->ng > 1) printf("  %s", bc_kind_names[x->g[r->g].kind]);
  printf("\n");
  fflush(stdout);
}

void bc_print_footer(const bc_ctx *x, const bc_row *rows, int nrows, long long wrong, double avg) {
  const bc_opts *o = x->o;
  printf("# %-20s : %lld %s\n", "Out of bounds values", wrong, wrong ? "FAILED" : "OK");
  printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, o->min_bw < 0 ? "" : avg < o->min_bw ? "FAILED" : "OK");
  if (x->ng > 1)
    for (int k = 0; k < x->ng; k++) {
      double s = 0;
      int c = 0;
      for (int i = 0; i < nrows; i++)
        if (rows[i].g == k) s += rows[i].place[0].busbw + rows[i].place[1].busbw, c += 2;
      printf("# %-20s : %g (%s)\n", "Avg bus bandwidth", c ? s / c : 0, bc_kind_names[x->g[k].kind]);
    }
  if (o->min_bw >= 0 && avg < o->min_bw)
    printf("# Average bus bandwidth %g GB/s is below the minimum %g GB/s (HSR_BENCH_MIN_BW / --min-bw)\n", avg,
           o->min_bw);
  printf("#\n# Collective test concluded: %s\n", nt_op_names[o->coll]);
  fflush(stdout);
}

/* ---- JSON ------------------------------------------------------------------------ */

static cJSON *one_json(const bc_one *e) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "time", e->time_us);
  cJSON_AddNumberToObject(j, "alg_bw", e->algbw);
  cJSON_AddNumberToObject(j, "bus_bw", e->busbw);
  cJSON_AddNumberToObject(j, "nwrong", (double)e->wrong);
  return j;
}

static cJSON *iter_json(const bc_one *e, long iters) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "skipped_iterations", 0);
  const char *k[] = {"min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct"};
  double v[] = {e->it.min, e->it.max, e->it.avg, e->it.p50, e->it.p95, e->it.p99, e->it.stdev, e->it.cv};
  for (int i = 0; i < 8; i++) cJSON_AddNumberToObject(j, k[i], v[i]);
  cJSON *t = cJSON_AddArrayToObject(j, "times_us");
  for (long i = 0; i < iters; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(e->it.times[i]));
  if (e->it.procs && e->it.nprocs > 1) {
    cJSON *pp = cJSON_AddArrayToObject(j, "per_process_max_times_us");
    for (int r = 0; r < e->it.nprocs; r++) {
      cJSON *row = cJSON_CreateArray();
      for (long i = 0; i < iters; i++)
        cJSON_AddItemToArray(row, cJSON_CreateNumber(e->it.procs[(size_t)r * (size_t)iters + (size_t)i]));
      cJSON_AddItemToArray(pp, row);
    }
  }
  return j;
}

static cJSON *group_json(const bc_ctx *x, int k) {
  const bc_group *g = &x->g[k];
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "group", bc_kind_names[g->kind]);
  cJSON_AddNumberToObject(j, "group_size", g->n);
  cJSON_AddNumberToObject(j, "groups", g->ngroups);
  cJSON_AddNumberToObject(j, "nodes_spanned", g->nodes_spanned);
  cJSON_AddStringToObject(j, "link", g->nodes_spanned > 1 ? "inter-node" : "intra-node");
  return j;
}

static cJSON *row_json(const bc_ctx *x, const bc_row *r) {
  const bc_opts *o = x->o;
  cJSON *j = cJSON_CreateObject();
  char root[16];
  snprintf(root, sizeof root, "%6i", root_of(o));
  cJSON_AddNumberToObject(j, "size", (double)r->bytes);
  cJSON_AddNumberToObject(j, "count", (double)r->count);
  cJSON_AddStringToObject(j, "type", nt_type_names[o->dt]);
  cJSON_AddStringToObject(j, "redop", redop_of(o));
  cJSON_AddStringToObject(j, "root", root);
  cJSON_AddItemToObject(j, "out_of_place", one_json(&r->place[0]));
  cJSON_AddItemToObject(j, "in_place", one_json(&r->place[1]));
  if (r->place[0].have_iter) cJSON_AddItemToObject(j, "out_of_place_per_iter", iter_json(&r->place[0], o->iters));
  if (r->place[1].have_iter) cJSON_AddItemToObject(j, "in_place_per_iter", iter_json(&r->place[1], o->iters));
  cJSON_AddNumberToObject(j, "actual_iterations", (double)o->iters);
  cJSON_AddStringToObject(j, "experiment_name", "");
  cJSON *h = group_json(x, r->g);
  cJSON_AddNumberToObject(h, "cycle", r->cycle);
  cJSON *cw = cJSON_AddArrayToObject(h, "concurrent_with");
  if (o->concurrent)
    for (int k = 0; k < x->ng; k++)
      if (k != r->g) cJSON_AddItemToArray(cw, cJSON_CreateString(bc_kind_names[x->g[k].kind]));
  const char *pl[2] = {"out_of_place", "in_place"};
  for (int p = 0; p < 2; p++) {
    cJSON *b = cJSON_AddObjectToObject(h, pl[p]);
    cJSON_AddNumberToObject(b, "sent_bytes_per_op", r->place[p].sent_per_op);
    cJSON_AddNumberToObject(b, "fabric_bytes_per_op", r->place[p].fabric_per_op);
  }
  cJSON_AddItemToObject(j, "hsr", h);
  return j;
}

static cJSON *config_json(const bc_ctx *x) {
  const bc_opts *o = x->o;
  cJSON *c = cJSON_CreateObject();
  cJSON_AddNumberToObject(c, "nthreads", 1);
  cJSON_AddNumberToObject(c, "ngpus", 1);
  cJSON_AddNumberToObject(c, "minimum_bytes", (double)o->minb);
  cJSON_AddNumberToObject(c, "maximum_bytes", (double)o->maxb);
  if (o->factor > 0)
    cJSON_AddNumberToObject(c, "step_factor", o->factor);
  else
    cJSON_AddNumberToObject(c, "step_bytes", (double)o->stepb);
  cJSON_AddNumberToObject(c, "warmup_iters", (double)o->warmup);
  cJSON_AddNumberToObject(c, "iterations", (double)o->iters);
  cJSON_AddNumberToObject(c, "aggregated_iterations", (double)o->agg);
  cJSON_AddNumberToObject(c, "validation", (double)o->check);
  cJSON_AddNumberToObject(c, "graph", 0);
  cJSON_AddBoolToObject(c, "blocking_collectives", o->blocking != 0);
  cJSON_AddBoolToObject(c, "per_iter_timing", o->per_iter != 0);
  cJSON_AddNumberToObject(c, "per_iter_skip", 0);
  cJSON_AddBoolToObject(c, "parallel_init", 0);
  cJSON *d = cJSON_AddArrayToObject(c, "devices");
  for (int r = 0; r < hsr_boot_size(x->boot); r++) {
    cJSON *e = cJSON_CreateObject();
    char info[64];
    snprintf(info, sizeof info, "host (node %d)", boot_node_of(x->boot, r));
    cJSON_AddNumberToObject(e, "rank", r);
    cJSON_AddNumberToObject(e, "group", x->colors[r]);
    cJSON_AddNumberToObject(e, "pid", x->pids[r]);
    cJSON_AddStringToObject(e, "hostname", boot_hostname_of(x->boot, r));
    cJSON_AddNumberToObject(e, "device", -1);
    cJSON_AddStringToObject(e, "device_hex", "");
    cJSON_AddStringToObject(e, "device_info", info);
    cJSON_AddItemToArray(d, e);
  }
  return c;
}

/* What a cost model fitted to this file needs to know about the run. */
static cJSON *bc_hsr_json(const bc_ctx *x) {
  const bc_opts *o = x->o;
  cJSON *h = cJSON_CreateObject();
  int n = hsr_boot_size(x->boot), nodes = boot_num_nodes(x->boot);
  cJSON_AddStringToObject(h, "tool", "hsr");
  cJSON_AddStringToObject(h, "version", HSR_VERSION_STRING);
  cJSON_AddStringToObject(h, "git", HSR_GIT_HASH);
  cJSON_AddStringToObject(h, "collective", nt_op_names[o->coll]);
  cJSON_AddNumberToObject(h, "ranks", n);
  cJSON_AddNumberToObject(h, "nodes", nodes);
  cJSON_AddNumberToObject(h, "ranks_per_node", nodes ? (double)n / nodes : n);
  cJSON_AddNumberToObject(h, "simulated_nodes", boot_sim_nodes(x->boot));
  if (emulated())
    cJSON_AddStringToObject(h, "emulated_net", emulated());
  else
    cJSON_AddNullToObject(h, "emulated_net");
  cJSON_AddStringToObject(h, "mem", o->comm_mem ? "comm" : "user");
  cJSON_AddBoolToObject(h, "concurrent", o->concurrent);
  cJSON_AddStringToObject(h, "time_over_ranks", (const char *[]){"rank0", "mean", "min", "max"}[o->average]);
  cJSON_AddNumberToObject(h, "blocking", o->blocking);
  cJSON_AddNumberToObject(h, "run_cycles", (double)o->cycles);
  if (o->min_bw >= 0)
    cJSON_AddNumberToObject(h, "min_bus_bw", o->min_bw);
  else
    cJSON_AddNullToObject(h, "min_bus_bw");
  cJSON *gs = cJSON_AddArrayToObject(h, "groups");
  for (int k = 0; k < x->ng; k++) cJSON_AddItemToArray(gs, group_json(x, k));
  return h;
}

static int env_kept(const char *e) { return !strncmp(e, "HSR_", 4) || !strncmp(e, "UCX_", 4); }

hsr_status bc_json_write(const bc_ctx *x, const bc_row *rows, int nrows, long long wrong, double avg) {
  const bc_opts *o = x->o;
  cJSON *j = cJSON_CreateObject();
  char end[32];
  bc_now(end, sizeof end);
  cJSON_AddNumberToObject(j, "version", 3);
  cJSON_AddStringToObject(j, "start_time", x->start_time);
  cJSON *a = cJSON_AddArrayToObject(j, "args");
  for (int i = 0; i < o->argc; i++) cJSON_AddItemToArray(a, cJSON_CreateString(o->argv[i]));
  cJSON *e = cJSON_AddArrayToObject(j, "env"); /* hsr's and UCX's variables only, not the whole environment */
  for (char **p = environ; p && *p; p++)
    if (env_kept(*p)) cJSON_AddItemToArray(e, cJSON_CreateString(*p));
  cJSON_AddNumberToObject(j, "nccl_version", 0); /* host collectives: no NCCL */
  cJSON_AddItemToObject(j, "config", config_json(x));
  cJSON *res = cJSON_AddArrayToObject(j, "results");
  for (int i = 0; i < nrows; i++) cJSON_AddItemToArray(res, row_json(x, &rows[i]));
  cJSON *ob = cJSON_AddObjectToObject(j, "out_of_bounds");
  cJSON_AddNumberToObject(ob, "count", (double)wrong);
  cJSON_AddBoolToObject(ob, "okay", wrong == 0);
  cJSON *bw = cJSON_AddObjectToObject(j, "average_bus_bandwidth");
  cJSON_AddNumberToObject(bw, "bandwidth", avg);
  if (o->min_bw < 0)
    cJSON_AddStringToObject(bw, "okay", "unchecked");
  else
    cJSON_AddBoolToObject(bw, "okay", avg >= o->min_bw);
  cJSON_AddStringToObject(j, "end_time", end);
  cJSON_AddItemToObject(j, "hsr", bc_hsr_json(x));
  char *txt = cJSON_Print(j);
  cJSON_Delete(j);
  hsr_status st = cli_write_text("-J", o->json, txt);
  free(txt);
  return st;
}

/* ---- plot -------------------------------------------------------------------------- */

int bc_have_gnuplot(void) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  char buf[4096];
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, p);
    if (n && access(buf, X_OK) == 0) return 1;
    p += n + (p[n] == ':');
  }
  return 0;
}

/* One curve (out-of-place bus bandwidth against size) per group kind and run
 * cycle, as gnuplot data blocks. */
hsr_status bc_plot(const bc_ctx *x, const bc_row *rows, int nrows) {
  const bc_opts *o = x->o;
  cli_plot pl;
  HSR_CHECK(cli_plot_open(&pl, "--plot", o->plot));
  FILE *gp = pl.script;
  int n = hsr_boot_size(x->boot), nodes = boot_num_nodes(x->boot), curves = 0;
  for (long c = 0; c < o->cycles; c++)
    for (int k = 0; k < x->ng; k++) {
      fprintf(gp, "$d%d << EOD\n", curves++);
      for (int i = 0; i < nrows; i++)
        if (rows[i].cycle == c && rows[i].g == k && rows[i].bytes > 0 && rows[i].place[0].busbw > 0)
          fprintf(gp, "%zu %g\n", rows[i].bytes, rows[i].place[0].busbw);
      fprintf(gp, "EOD\n");
    }
  fprintf(gp,
          "set terminal svg size 900,560 dynamic background rgb 'white'\n"
          "set logscale x 2\nset logscale y\nset format x '%%.0b%%B'\nset grid\nset key left top\n"
          "set xlabel 'size (bytes; gathered size for all_gather / reduce_scatter)'\n"
          "set ylabel 'bus bandwidth, out of place (GB/s)'\n"
          "set title 'hsr bench %s: %d ranks, %d node%s%s%s'\nplot ",
          nt_op_names[o->coll], n, nodes, nodes > 1 ? "s" : "", emulated() ? ", emulated network " : "",
          emulated() ? emulated() : "");
  curves = 0;
  for (long c = 0; c < o->cycles; c++)
    for (int k = 0; k < x->ng; k++) {
      const bc_group *g = &x->g[k];
      fprintf(gp, "%s$d%d using 1:2 with linespoints title '%s (%d ranks, %d node%s)", curves ? ", " : "", curves,
              bc_kind_names[g->kind], g->n, g->nodes_spanned, g->nodes_spanned > 1 ? "s" : "");
      if (o->cycles > 1) fprintf(gp, " cycle %ld", c + 1);
      fprintf(gp, "'");
      curves++;
    }
  fprintf(gp, "\n");
  return cli_plot_close(&pl);
}
