/* hsr bench step: a synthetic model of U units of a given size with a given
 * compute time per unit (real GEMMs, calibrated), run through the engine's
 * real lifecycle on the real mesh, for each reshard policy and prefetch
 * depth. Figures come from the lifecycle trace of every rank: step time,
 * compute, communication, exposed communication (communication not covered
 * by compute), exposed all-gather time, and the speed-up of prefetch depth
 * D over 0. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tools/cli/cli.h"
#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "hsr/comm.h"
#include "hsr/kernels.h"
#include "hsr/runtime.h"
#include "common/sys.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "runtime/io/trace_summary.h"
#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"
#include "runtime/io/ledger_internal.h"

#define MAX_LIST 8
#define GEMM_N 96

typedef struct sopts {
  long units, steps, warmup, shard, replicate;
  int keep_last, prefetch_step;
  int wait;               /* --compute wait: a unit holds its rank for the time without a core (a kernel on a device) */
  hsr_device_kind device; /* --device host | sim */
  hsr_rt_offload offload; /* --offload none | optim (a device run) */
  size_t unit_bytes;
  double compute_ms, bwd_ratio;
  int nres, npre, nouter;
  hsr_rt_reshard res[MAX_LIST];
  int res_k[MAX_LIST];
  int pre[MAX_LIST];
  hsr_rt_outer outer[2];
  const char *json, *trace;
} sopts;

void openblas_set_num_threads(int); /* OpenBLAS: ranks share the cores, one thread each */

/* The probe's trace as `keep` (sys_out: a device or a FIFO is written in place, never renamed over). */
static hsr_status keep_trace(const char *path, const char *keep) {
  FILE *in;
  HSR_CHECK(file_fopen_read("trace", path, &in));
  sys_out o;
  hsr_status st = out_open(&o, "--trace", keep, HSR_OUT_WHOLE);
  char buf[1 << 16];
  size_t n;
  while (st == HSR_OK && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, o.f);
  fclose(in);
  return st == HSR_OK ? out_close(&o) : st;
}

static void usage(void) {
  printf("usage: hsr bench step [options]   (under a launcher: hsr-run -n 4 --nodes 2 -- hsr bench step)\n"
         "A synthetic model of U units through the engine's real lifecycle (gather, forward, reshard,\n"
         "gather, backward, reduce-scatter, all-reduce, AdamW) on the real mesh. Each unit's forward is\n"
         "real work (f32 GEMMs reading the gathered unit), calibrated to --compute-ms on this machine, or\n"
         "with --compute wait a device-like kernel: the rank sleeps until the unit's deadline, holding no core.\n"
         "  --units U           units (default 8)\n"
         "  --unit-size N       gathered (full) bytes per unit, K/M/G suffixes (default 4M)\n"
         "  --compute-ms T      forward compute per unit in ms (default 4)\n"
         "  --bwd-ratio X       backward compute = X x forward (default 2)\n"
         "  --compute cpu|wait  cpu (default): GEMMs on this rank's core, beside the collectives' copies;\n"
         "                      wait: each forward and backward sleeps until its deadline, as a kernel\n"
         "                      occupies a GPU and not the host (the miniature of a GPU cluster)\n"
         "  --device host|sim   where the engine runs (default host). sim: the emulated device, whose compute\n"
         "                      stream's thread runs each unit's compute while the host runs ahead and queues\n"
         "                      the next gather, as on a GPU; the trace's spans are the device's\n"
         "  --offload X         none | optim (with --device sim: the optimizer state in host memory,\n"
         "                      AdamW on the host's cores; default none)\n"
         "  --steps N           timed steps per configuration (default 5)\n"
         "  --warmup N          untimed steps first (default 2; the first records the order)\n"
         "  --shard S           shard group size (default: all ranks, fsdp; S < ranks: hybrid)\n"
         "  --reshard LIST      comma list of full, none, partial:K (default full,none and partial:2\n"
         "                      when S is even and > 2)\n"
         "  --prefetch LIST     comma list of depths (default 0,1,2)\n"
         "  --outer-shard LIST  comma list of none, optim (default none; optim: hybrid's optimizer state\n"
         "                      split over the replicas too, HFSDP; needs --shard S < ranks)\n"
         "  --no-keep-last      reshard the last unit after its forward too (default: it is a root unit,\n"
         "                      kept FULL until its backward, which follows at once - FSDP2's idiom)\n"
         "  --no-prefetch-step  do not gather the first unit at the end of each step (default: with\n"
         "                      prefetch > 0 it is, hiding the next step's first gather)\n"
         "  --json FILE         also write the results as JSON (rank 0)\n"
         "  --trace PREFIX      keep each configuration's lifecycle trace as PREFIX-<reshard>-p<D>.json\n"
         "                      (-optim before .json with the outer shard)\n"
         "Columns (ms per step, means over ranks and timed steps): step, compute (union of compute\n"
         "spans), comm (union of collective spans), exposed (comm not covered by compute), ag\n"
         "(all-gather), ag exposed, hidden (1 - ag exposed / ag), step / max(compute, comm), and\n"
         "the speed-up of this prefetch depth over depth 0 for the same reshard policy; then per step\n"
         "the bytes every rank sent across nodes together (the communicators' fabric counters) and the\n"
         "largest rank's runtime memory peak (its ledger: what the engine holds from the allocator).\n");
}

/* res: 1 reshard policies, 0 prefetch depths, 2 outer shards. */
static int parse_list(const char *s, sopts *o, int res) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  int n = 0;
  for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
    if (n == (res == 2 ? 2 : MAX_LIST))
      return cli_usage_error("bench step", "at most %d values in a list", res == 2 ? 2 : MAX_LIST);
    if (res == 2) {
      if (rt_parse_outer_shard(t, &o->outer[n]) != HSR_OK) return cli_usage_error("bench step", "%s", hsr_last_error());
    } else if (res) {
      if (rt_parse_reshard(t, &o->res[n], &o->res_k[n]) != HSR_OK)
        return cli_usage_error("bench step", "%s", hsr_last_error());
    } else {
      long v;
      if (parse_long("--prefetch", t, 0, 64, &v) != HSR_OK)
        return cli_usage_error("bench step", "%s", hsr_last_error());
      o->pre[n] = (int)v;
    }
    n++;
  }
  if (!n) return cli_usage_error("bench step", "empty list '%s'", s);
  if (res == 2)
    o->nouter = n;
  else if (res)
    o->nres = n;
  else
    o->npre = n;
  return 0;
}

static int parse(int argc, char **argv, sopts *o) {
  static const struct option lo[] = {{"help", no_argument, 0, 'h'},
                                     {"units", required_argument, 0, 'u'},
                                     {"unit-size", required_argument, 0, 's'},
                                     {"compute-ms", required_argument, 0, 't'},
                                     {"bwd-ratio", required_argument, 0, 'r'},
                                     {"steps", required_argument, 0, 'n'},
                                     {"warmup", required_argument, 0, 'w'},
                                     {"shard", required_argument, 0, 'S'},
                                     {"reshard", required_argument, 0, 'R'},
                                     {"prefetch", required_argument, 0, 'p'},
                                     {"json", required_argument, 0, 'J'},
                                     {"no-keep-last", no_argument, 0, 'K'},
                                     {"no-prefetch-step", no_argument, 0, 'P'},
                                     {"trace", required_argument, 0, 'T'},
                                     {"compute", required_argument, 0, 'C'},
                                     {"outer-shard", required_argument, 0, 'O'},
                                     {"device", required_argument, 0, 'D'},
                                     {"offload", required_argument, 0, 'F'},
                                     {0, 0, 0, 0}};
  *o = (sopts){.units = 8,
               .steps = 5,
               .warmup = 2,
               .unit_bytes = 4 << 20,
               .compute_ms = 4,
               .bwd_ratio = 2,
               .npre = 3,
               .pre = {0, 1, 2},
               .nouter = 1,
               .keep_last = 1,
               .prefetch_step = 1};
  optind = 1;
  opterr = 0;
  int c, e, no_pstep = 0;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h': usage(); return -1;
    case 'u': st = parse_long("--units", optarg, 1, 4096, &o->units); break;
    case 's': st = parse_size("--unit-size", optarg, &o->unit_bytes); break;
    case 't': st = parse_double("--compute-ms", optarg, 0, 1e4, &o->compute_ms); break;
    case 'r': st = parse_double("--bwd-ratio", optarg, 0, 100, &o->bwd_ratio); break;
    case 'n': st = parse_long("--steps", optarg, 1, 100000, &o->steps); break;
    case 'w': st = parse_long("--warmup", optarg, 1, 100000, &o->warmup); break;
    case 'S': st = parse_long("--shard", optarg, 1, 1 << 20, &o->shard); break;
    case 'R':
      if ((e = parse_list(optarg, o, 1))) return e;
      break;
    case 'p':
      if ((e = parse_list(optarg, o, 0))) return e;
      break;
    case 'O':
      if ((e = parse_list(optarg, o, 2))) return e;
      break;
    case 'J': o->json = optarg; break;
    case 'K': o->keep_last = 0; break;
    case 'T': o->trace = optarg; break;
    case 'C': {
      static const char *const modes[] = {"cpu", "wait", NULL};
      st = parse_choice("--compute", optarg, modes, &o->wait);
      break;
    }
    case 'D': {
      static const char *const kinds[] = {"host", "sim", NULL};
      int k = 0;
      st = parse_choice("--device", optarg, kinds, &k);
      o->device = k ? HSR_DEVICE_SIM : HSR_DEVICE_HOST;
      break;
    }
    case 'F': st = rt_parse_offload(optarg, &o->offload); break;
    case 'P':
      o->prefetch_step = 0;
      no_pstep = 1;
      break;
    default: return cli_usage_error("bench step", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("bench step", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("bench step", "unexpected argument '%s'", argv[optind]);
  if (o->unit_bytes < 4096) return cli_usage_error("bench step", "--unit-size must be at least 4K");
  if (o->unit_bytes > ((size_t)1 << 40)) return cli_usage_error("bench step", "--unit-size is above 1T");
  if (o->offload == HSR_RT_OFFLOAD_OPTIM && o->device == HSR_DEVICE_HOST)
    return cli_usage_error("bench step",
                           "--offload optim on the host device: all state already lives in host memory (use "
                           "--device sim with --offload optim, or drop --offload)");
  int any_prefetch = 0;
  for (int i = 0; i < o->npre; i++) any_prefetch |= o->pre[i] > 0;
  if (no_pstep && !any_prefetch)
    return cli_usage_error("bench step", "--no-prefetch-step has no effect with --prefetch 0 (no step-end "
                                         "gather happens without prefetch)");
  hsr_status st = o->json ? path_check_output("--json", o->json) : HSR_OK;
  if (st == HSR_OK && o->trace) { /* PREFIX-<reshard>-p<D>.json: PREFIX's directory must take files */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s-full-p0.json", o->trace);
    st = path_check_write("--trace", probe);
  }
  return st == HSR_OK ? 0 : cli_usage_error("bench step", "%s", hsr_last_error());
}

typedef struct work {
  hsr_device *dev; /* the host device the calibration runs on */
  float *a, *c, *b;
  long reps; /* GEMMs per forward of one unit */
  int wait;  /* sleep for ms x scale instead */
  double ms; /* forward compute per unit */
} work;

/* Where a configuration's compute runs: the engine's device and compute
 * stream, with the GEMM operands in its memory. */
typedef struct where {
  hsr_device *dev;
  hsr_stream *s;
  float *a, *b, *c;
} where;

/* Device-like compute: the stream is busy until the deadline but holds no
 * core, so the collectives' copies and the progress threads run on the
 * cores as they do on a GPU cluster, where the kernel runs on the device.
 * On a host device the caller's thread sleeps; on sim the compute stream's
 * thread does, and the host runs ahead. */
typedef struct hold_args {
  const float *w; /* what the kernel reads of the gathered unit */
  float *c;
  double seconds;
} hold_args;
static void k_hold(const void *p) {
  const hold_args *a = p;
  a->c[0] = a->w ? a->w[0] : 0;
  struct timespec d;
  clock_gettime(CLOCK_MONOTONIC, &d);
  double ns = (double)d.tv_nsec + a->seconds * 1e9;
  d.tv_sec += (time_t)(ns / 1e9);
  d.tv_nsec = (long)(ns - 1e9 * (double)(time_t)(ns / 1e9));
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) == EINTR) {}
}
static const hsr_kernel_def hold_kernel = {"bench compute (wait)", k_hold, NULL};

/* The gradient depends on the work: g[0] += c[0] * 1e-12. */
typedef struct touch_args {
  float *g;
  const float *c;
} touch_args;
static void k_touch(const void *p) {
  const touch_args *a = p;
  a->g[0] += a->c[0] * 1e-12f;
}
static const hsr_kernel_def touch_kernel = {"bench gradient touch", k_touch, NULL};

/* One forward's worth of compute (x scale) on x's stream; w: the gathered
 * unit (read as the B matrix when big enough). */
static hsr_status compute_on(const work *k, const where *x, const float *w, size_t wn, double scale) {
  if (k->wait) {
    hold_args a = {wn ? w : NULL, x->c, k->ms * 1e-3 * scale};
    hsr_access acc[] = {{a.w, a.w ? sizeof(float) : 0, 0}, {x->c, sizeof(float), 1}};
    return hsr_kernels_launch(x->dev, x->s, &hold_kernel, &a, sizeof a, acc, 2);
  }
  const float *b = wn >= (size_t)GEMM_N * GEMM_N ? w : x->b;
  long n = (long)(k->reps * scale + 0.5);
  for (long i = 0; i < n; i++)
    HSR_CHECK(hsr_kernels_gemm(x->dev, x->s, 0, 0, GEMM_N, GEMM_N, GEMM_N, 1.0f, x->a, GEMM_N, b, GEMM_N, 0.0f, x->c,
                               GEMM_N));
  return HSR_OK;
}

static hsr_status touch(const where *x, float *g) {
  touch_args a = {g, x->c};
  hsr_access acc[] = {{x->c, sizeof(float), 0}, {g, sizeof(float), 1}};
  return hsr_kernels_launch(x->dev, x->s, &touch_kernel, &a, sizeof a, acc, 2);
}

/* The host calibration's compute (host device, caller's thread). */
static hsr_status compute(work *k, const float *w, size_t wn, double scale) {
  where x = {k->dev, NULL, k->a, k->b, k->c};
  return compute_on(k, &x, w, wn, scale);
}

/* The configuration's operands on the engine's device (host: the host ones). */
static hsr_status where_open(const work *k, hsr_rt *rt, where *x) {
  *x = (where){hsr_rt_device(rt), hsr_rt_compute_stream(rt), NULL, NULL, NULL};
  size_t bytes = (size_t)GEMM_N * GEMM_N * sizeof(float);
  float **p[3] = {&x->a, &x->b, &x->c};
  for (int i = 0; i < 3; i++) HSR_CHECK(hsr_device_alloc(x->dev, bytes, (void **)p[i]));
  HSR_CHECK(hsr_device_copy(x->dev, x->a, k->a, bytes, x->s));
  HSR_CHECK(hsr_device_copy(x->dev, x->b, k->b, bytes, x->s));
  return hsr_device_memset(x->dev, x->c, 0, bytes, x->s);
}

static void where_close(where *x) {
  if (x->s) hsr_stream_sync(x->s, 60.0); /* nothing queued still reads them */
  hsr_device_free(x->dev, x->a), hsr_device_free(x->dev, x->b), hsr_device_free(x->dev, x->c);
}

/* GEMMs per --compute-ms, measured with every rank computing at once (as in the run). */
static hsr_status calibrate(hsr_boot *boot, hsr_comm *world, work *k, double ms) {
  k->ms = ms;
  if (k->wait) return HSR_OK;
  k->reps = 16;
  HSR_CHECK(compute(k, k->b, 0, 1));
  double t = 0;
  for (int round = 0; round < 3; round++) {
    HSR_CHECK(boot_barrier(boot));
    double t0 = clock_s();
    HSR_CHECK(compute(k, k->b, 0, 1));
    double d = clock_s() - t0;
    t = round ? (d < t ? d : t) : d;
  }
  double per = t / 16; /* seconds per GEMM; the slowest rank sets the pace */
  HSR_CHECK(hsr_comm_allreduce(world, &per, &per, 1, HSR_F64, HSR_MAX, NULL));
  k->reps = (long)(ms * 1e-3 / per + 0.5);
  if (k->reps < 1 && ms > 0) k->reps = 1;
  return HSR_OK;
}

typedef struct result {
  char reshard[24];
  int prefetch;
  hsr_rt_outer outer;
  double step, comp, comm, exposed, ag, ag_exposed;
  double busy[3];                 /* union of each group kind's collectives: shard, replicate, partial */
  double fabric, fabric_group[3]; /* bytes sent across nodes per timed step, all ranks together */
  double peak, persistent;        /* the largest rank's runtime peak and persistent bytes (its ledger) */
} result;

static hsr_status run_config(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const sopts *o, work *k,
                             hsr_rt_reshard pol, int K, int depth, hsr_rt_outer outer, const char *path, result *res) {
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  int n = hsr_boot_size(boot);
  c.shard = o->shard ? (int)o->shard : n;
  c.strategy = c.shard < n ? HSR_RT_HYBRID : HSR_RT_FSDP;
  c.outer_shard = outer;
  c.reshard = pol;
  c.partial_k = K;
  c.prefetch = depth;
  c.poison = 0;
  c.prefetch_step = o->prefetch_step;
  c.device = o->device;
  c.offload = o->offload;
  hsr_rt *rt = NULL;
  HSR_CHECK(hsr_rt_create(boot, world, cl, &c, &rt));
  where x = {0};
  size_t per = o->unit_bytes / 4 / (size_t)c.shard * (size_t)c.shard; /* f32 elements per unit */
  hsr_status st = HSR_OK;
  char name[32];
  for (long u = 0; u < o->units && st == HSR_OK; u++) {
    int id;
    snprintf(name, sizeof name, "u%ld", u);
    st = hsr_rt_unit_add(rt, name, o->keep_last && u == o->units - 1, &id);
    snprintf(name, sizeof name, "u%ld.w", u);
    int64_t shape[1] = {(int64_t)per};
    if (st == HSR_OK) st = hsr_rt_param_add(rt, id, name, 1, shape, 0);
  }
  if (st == HSR_OK) st = hsr_rt_commit(rt);
  if (st == HSR_OK) st = where_open(k, rt, &x);
  if (st == HSR_OK) st = rt_trace_enable(rt, 1);
  double fab[4] = {0}; /* per group, then the total: this rank's fabric bytes sent over the timed steps */
  for (long s = 0; s < o->warmup + o->steps && st == HSR_OK; s++) {
    for (long u = 0; u < o->units && st == HSR_OK; u++) {
      void *w;
      snprintf(name, sizeof name, "u%ld.w", u);
      st = hsr_rt_forward_begin(rt, (int)u);
      if (st == HSR_OK) st = hsr_rt_param_view(rt, name, &w);
      if (st == HSR_OK) st = compute_on(k, &x, w, per, 1);
      if (st == HSR_OK) st = hsr_rt_forward_end(rt, (int)u);
    }
    for (long u = o->units - 1; u >= 0 && st == HSR_OK; u--) {
      void *w;
      float *g;
      snprintf(name, sizeof name, "u%ld.w", u);
      st = hsr_rt_backward_begin(rt, (int)u);
      if (st == HSR_OK) st = hsr_rt_param_view(rt, name, &w);
      if (st == HSR_OK) st = hsr_rt_grad_view(rt, name, &g);
      if (st == HSR_OK) st = compute_on(k, &x, w, per, o->bwd_ratio);
      if (st == HSR_OK) st = touch(&x, g); /* the gradient depends on the work */
      if (st == HSR_OK) st = hsr_rt_backward_end(rt, (int)u);
    }
    hsr_rt_step_info info;
    if (st == HSR_OK) st = hsr_rt_step(rt, &info);
    for (int g = 0; st == HSR_OK && s >= o->warmup && g < HSR_RT_GROUP_COUNT; g++)
      for (int op = 0; op < HSR_OP_COUNT; op++) fab[g] += (double)info.comm[g][op].fabric_sent;
    if (st == HSR_OK) st = hsr_rt_zero_grad(rt);
  }
  /* every rank's fabric bytes together, and the largest rank's memory */
  double mem[2] = {0, 0};
  if (st == HSR_OK) {
    fab[3] = fab[0] + fab[1] + fab[2];
    mem[0] = (double)ledger_runtime_peak(hsr_rt_ledger(rt));
    mem[1] = (double)ledger_persistent(hsr_rt_ledger(rt));
    st = hsr_comm_allreduce(world, fab, fab, 4, HSR_F64, HSR_SUM, NULL);
  }
  if (st == HSR_OK) st = hsr_comm_allreduce(world, mem, mem, 2, HSR_F64, HSR_MAX, NULL);
  if (st == HSR_OK) st = rt_trace_write(rt, path);
  if (x.dev) where_close(&x);
  hsr_status d = hsr_rt_destroy(rt);
  if (st == HSR_OK) st = d;
  HSR_CHECK(st);
  if (hsr_boot_rank(boot) != 0) return HSR_OK;
  trace_step_summary *sum = NULL;
  int ns = 0;
  HSR_CHECK(trace_steps(path, &sum, &ns));
  memset(res, 0, sizeof *res);
  if (pol == HSR_RT_RESHARD_PARTIAL)
    snprintf(res->reshard, sizeof res->reshard, "partial:%d", K);
  else
    snprintf(res->reshard, sizeof res->reshard, "%s", pol == HSR_RT_RESHARD_FULL ? "full" : "none");
  char keep[512];
  if (o->trace) {
    snprintf(keep, sizeof keep, "%s-%s-p%d%s.json", o->trace, res->reshard, depth,
             outer == HSR_RT_OUTER_OPTIM ? "-optim" : "");
    for (char *q = keep + strlen(o->trace); *q; q++)
      if (*q == ':') *q = '_';
    if (keep_trace(path, keep) != HSR_OK) HSR_LOG_W("bench step: cannot keep the trace: %s", hsr_last_error());
    remove(path);
  } else {
    remove(path);
  }
  int m = 0;
  for (int i = 0; i < ns; i++) {
    if (sum[i].step <= o->warmup) continue;
    res->step += sum[i].step_ms;
    res->comp += sum[i].compute_ms;
    res->comm += sum[i].comm_ms;
    res->exposed += sum[i].exposed_ms;
    res->ag += sum[i].gather_ms;
    res->ag_exposed += sum[i].gather_exposed_ms;
    for (int g = 0; g < 3; g++) res->busy[g] += sum[i].group_busy_ms[g];
    m++;
  }
  free(sum);
  if (m) {
    res->step /= m, res->comp /= m, res->comm /= m, res->exposed /= m, res->ag /= m, res->ag_exposed /= m;
    for (int g = 0; g < 3; g++) res->busy[g] /= m;
  }
  res->prefetch = depth;
  res->outer = outer;
  for (int g = 0; g < 3; g++) res->fabric_group[g] = fab[g] / (double)o->steps;
  res->fabric = fab[3] / (double)o->steps;
  res->peak = mem[0], res->persistent = mem[1];
  return HSR_OK;
}

/* The engine's peak per rank (its held ledger: shards, master and moments,
 * and the transient gathered units, gradient and reduce buffers) over every
 * configuration of the run, predicted from sizes and policy alone
 * (hsr/tune_ledger.h), so the check is the engine's own count. */
/* The run's units as run_config registers them; the outer shard cuts every
 * shard into R pieces, as the engine's commit does. */
static hsr_status bench_layout(const sopts *o, long S, int parts, size_t align, rt_layout **out) {
  rt_layout *lay = NULL;
  HSR_CHECK(rt_layout_create(align, &lay));
  int64_t per = (int64_t)(o->unit_bytes / 4 / (size_t)S * (size_t)S);
  char name[32];
  hsr_status st = parts > 1 ? rt_layout_set_subshards(lay, parts) : HSR_OK;
  for (long u = 0; u < o->units && st == HSR_OK; u++) {
    int id;
    snprintf(name, sizeof name, "u%ld", u);
    st = rt_layout_add_unit(lay, name, &id);
    snprintf(name, sizeof name, "u%ld.w", u);
    if (st == HSR_OK) st = rt_layout_add_param(lay, id, name, 1, &per, 0);
  }
  if (st == HSR_OK) st = rt_layout_finalize(lay, (int)S);
  if (st != HSR_OK) rt_layout_free(lay), lay = NULL;
  *out = lay;
  return st;
}

static hsr_status predicted_peak(const sopts *o, long S, int n, double *peak) {
  hsr_ledger *held = NULL;
  hsr_prog_call *prog = NULL;
  int nprog = 0, *is_root = calloc((size_t)o->units, sizeof *is_root);
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  hsr_status st = is_root ? ledger_create(&held) : hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) st = hsr_tune_prog_nested((int)o->units, 0, 1, HSR_RT_RECOMPUTE_NONE, &prog, &nprog);
  if (st == HSR_OK && o->keep_last) is_root[o->units - 1] = 1;
  *peak = 0;
  for (int h = 0; h < o->nouter && st == HSR_OK; h++) {
    rt_layout *lay = NULL;
    int R = n / (int)S;
    st = bench_layout(o, S, o->outer[h] == HSR_RT_OUTER_OPTIM ? R : 1, c.align, &lay);
    for (int i = 0; i < o->nres && st == HSR_OK; i++)
      for (int j = 0; j < o->npre && st == HSR_OK; j++) {
        c.shard = (int)S;
        c.strategy = S < n ? HSR_RT_HYBRID : HSR_RT_FSDP;
        c.reshard = o->res[i], c.partial_k = o->res_k[i], c.prefetch = o->pre[j];
        c.outer_shard = o->outer[h], c.prefetch_step = o->prefetch_step, c.poison = 0;
        st = tune_ledger_predict(lay, is_root, &c, (int)S, R, prog, nprog, 3, held, NULL);
        if (st == HSR_OK && (double)ledger_runtime_peak(held) > *peak) *peak = (double)ledger_runtime_peak(held);
      }
    rt_layout_free(lay);
  }
  free(prog), free(is_root);
  ledger_free(held);
  return st;
}

/* Every rank of a host reaches the engine's peak (predicted_peak) and holds
 * the GEMM operands; refused before the run when the host's memory cannot
 * hold that. Rank 0 decides for all. */
static hsr_status step_fits(hsr_boot *boot, const sopts *o, long S, double *per_rank) {
  int n = hsr_boot_size(boot), here = 0;
  for (int r = 0; r < n; r++) here += !strcmp(boot_hostname_of(boot, r), boot_hostname(boot));
  double peak = 0;
  HSR_CHECK(predicted_peak(o, S, n, &peak));
  double persistent = 5.0 * (double)o->units * (double)o->unit_bytes / (double)S;
  double per = peak + 3.0 * GEMM_N * GEMM_N * 4, need = per * here;
  *per_rank = per;
  char msg[512] = "";
  uint64_t mem = 0;
  if (hsr_boot_rank(boot) == 0 && sys_mem_available(&mem) == HSR_OK && need > 0.9 * (double)mem) {
    char a[32], b[32], c[32], d[32];
    sys_bytes_text(need, a, sizeof a), sys_bytes_text(per, b, sizeof b), sys_bytes_text((double)mem, c, sizeof c),
        sys_bytes_text(persistent, d, sizeof d);
    snprintf(msg, sizeof msg,
             "--units %ld --unit-size %zu does not fit: the %d rank(s) on this host need about %s (%s each at the "
             "engine's peak: %s of shards, master and moments, the rest gathered units and gradient buffers, "
             "1/%ld of every unit sharded), %s of memory is available",
             o->units, o->unit_bytes, here, a, b, d, S, c);
  }
  HSR_CHECK(boot_bcast(boot, msg, sizeof msg, 0));
  return msg[0] ? hsr_error(HSR_ERR_INVALID, "%s", msg) : HSR_OK;
}

/* given: a bootstrap the caller keeps (hsr tune --validate), else our own. */
static int step_run(int argc, char **argv, hsr_boot *given) {
  sopts o;
  int pr = parse(argc, argv, &o);
  if (pr < 0) return HSR_EXIT_OK;
  if (pr > 0) return pr;
  openblas_set_num_threads(1);
  hsr_boot *boot = given;
  hsr_status st = given ? HSR_OK : hsr_boot_init(&boot);
  if (st != HSR_OK) return cli_fail("bench step", st);
  int rank = hsr_boot_rank(boot), n = hsr_boot_size(boot);
  hsr_topo *topo = NULL;
  hsr_cluster *cl = NULL;
  hsr_comm *world = NULL;
  work k = {.wait = o.wait};
  result *res = NULL;
  int nres = 0;
  FILE *jf = NULL;
  sys_out jo = {0};
  long S = o.shard ? o.shard : n;
  if (n % S) {
    st = hsr_error(HSR_ERR_INVALID, "--shard %ld does not divide the %d ranks", S, n);
    goto out;
  }
  for (int i = 0; i < o.nouter; i++)
    if (o.outer[i] == HSR_RT_OUTER_OPTIM && S == n) {
      st = hsr_error(HSR_ERR_INVALID,
                     "--outer-shard optim splits the optimizer state over the replicas of hybrid: give --shard S "
                     "below the %d ranks (S = %ld is fsdp, R = 1)",
                     n, S);
      goto out;
    }
  if (!o.nres) { /* default policies */
    o.res[o.nres++] = HSR_RT_RESHARD_FULL;
    o.res[o.nres++] = HSR_RT_RESHARD_NONE;
    if (S > 2 && S % 2 == 0) o.res[o.nres] = HSR_RT_RESHARD_PARTIAL, o.res_k[o.nres++] = 2;
  }
  for (int i = 0; i < o.nres; i++)
    if (o.res[i] == HSR_RT_RESHARD_PARTIAL && S % o.res_k[i]) {
      st = hsr_error(HSR_ERR_INVALID, "--reshard partial:%d: K must divide the shard size %ld", o.res_k[i], S);
      goto out;
    }
  double need_per_rank = 0;
  if ((st = step_fits(boot, &o, S, &need_per_rank)) != HSR_OK) goto out;
  if (o.json) {
    int ok = 1;
    char why[512] = "";
    if (rank == 0 && out_open(&jo, "--json", o.json, HSR_OUT_WHOLE) != HSR_OK)
      ok = 0, snprintf(why, sizeof why, "%s", hsr_last_error());
    if ((st = boot_bcast(boot, &ok, sizeof ok, 0)) != HSR_OK) goto out;
    if (!ok) {
      st = hsr_error(HSR_ERR_IO, "%s", rank == 0 ? why : "rank 0 cannot write --json");
      goto out;
    }
    jf = jo.f;
  }
  if ((st = topo_discover(NULL, &topo)) != HSR_OK) goto out;
  if ((st = cluster_gather(boot, topo, &cl)) != HSR_OK) goto out;
  if ((st = hsr_comm_world(boot, HSR_BACKEND_HOST, &world)) != HSR_OK) goto out;
  if ((st = hsr_device_open(HSR_DEVICE_HOST, 0, &k.dev)) != HSR_OK) goto out;
  k.a = malloc(GEMM_N * GEMM_N * sizeof(float));
  k.b = malloc(GEMM_N * GEMM_N * sizeof(float));
  k.c = malloc(GEMM_N * GEMM_N * sizeof(float));
  res = calloc((size_t)(o.nouter * o.nres * o.npre), sizeof *res);
  if (!k.a || !k.b || !k.c || !res) {
    st = hsr_error(HSR_ERR_NOMEM, "bench step: out of memory");
    goto out;
  }
  for (int i = 0; i < GEMM_N * GEMM_N; i++) k.a[i] = k.b[i] = (float)((i * 7919) % 1000) * 1e-3f;
  if ((st = calibrate(boot, world, &k, o.compute_ms)) != HSR_OK) goto out;
  char path[256];
  int pid = (int)getpid();
  if ((st = boot_bcast(boot, &pid, sizeof pid, 0)) != HSR_OK) goto out;
  snprintf(path, sizeof path, "/tmp/hsr-bench-step-%d.json", pid);
  if (rank == 0) {
    char how[64];
    if (k.wait)
      snprintf(how, sizeof how, "wait: held without a core");
    else
      snprintf(how, sizeof how, "cpu: %ld GEMMs %dx%d", k.reps, GEMM_N, GEMM_N);
    printf("# hsr bench step: %d ranks, %d node(s), %s device, mesh %d x %ld, %ld units of %.2f MiB gathered, "
           "compute %.2f ms/unit forward (%s), x%.1f backward, %ld timed steps after %ld; "
           "last unit %s, step-end prefetch %s%s\n",
           n, boot_num_nodes(boot), o.device == HSR_DEVICE_SIM ? "sim" : "host", (int)(n / S), S, o.units,
           (double)o.unit_bytes / (1 << 20), o.compute_ms, how, o.bwd_ratio, o.steps, o.warmup,
           o.keep_last ? "kept until backward" : "resharded", o.prefetch_step ? "on" : "off",
           o.offload == HSR_RT_OFFLOAD_OPTIM ? "; offload optim (optimizer state in host memory)" : "");
    printf("%-10s %6s %8s %9s %9s %9s %9s %9s %9s %7s %9s %8s %12s %10s\n", "reshard", "outer", "prefetch", "step",
           "compute", "comm", "exposed", "ag", "ag_exp", "hidden", "step/max", "speedup", "fabric/step", "peak MiB");
    fflush(stdout);
  }
  for (int h = 0; h < o.nouter; h++)
    for (int i = 0; i < o.nres; i++)
      for (int j = 0; j < o.npre; j++) {
        result *r = &res[nres];
        st = run_config(boot, world, cl, &o, &k, o.res[i], o.res_k[i], o.pre[j], o.outer[h], path, r);
        if (st != HSR_OK) goto out;
        nres++;
        if (rank != 0) continue;
        double base = 0;
        for (int q = (h * o.nres + i) * o.npre; q < nres; q++)
          if (res[q].prefetch == 0) base = res[q].step;
        double mx = r->comp > r->comm ? r->comp : r->comm;
        printf("%-10s %6s %8d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %6.1f%% %9.3f", r->reshard,
               rt_outer_shard_name(r->outer), r->prefetch, r->step, r->comp, r->comm, r->exposed, r->ag, r->ag_exposed,
               r->ag > 0 ? 100.0 * (1 - r->ag_exposed / r->ag) : 100, mx > 0 ? r->step / mx : 0);
        if (base > 0)
          printf(" %7.2fx", base / r->step);
        else
          printf(" %8s", "-");
        printf(" %12.0f %10.2f\n", r->fabric, r->peak / (1 << 20));
        fflush(stdout);
      }
  if (rank == 0 && jf) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "ranks", n);
    cJSON_AddNumberToObject(root, "shard", (double)S);
    cJSON_AddNumberToObject(root, "units", (double)o.units);
    cJSON_AddNumberToObject(root, "unit_bytes", (double)o.unit_bytes);
    cJSON_AddNumberToObject(root, "compute_ms", o.compute_ms);
    cJSON_AddNumberToObject(root, "bwd_ratio", o.bwd_ratio);
    cJSON_AddStringToObject(root, "compute", k.wait ? "wait" : "cpu");
    cJSON_AddStringToObject(root, "device", o.device == HSR_DEVICE_SIM ? "sim" : "host");
    cJSON_AddStringToObject(root, "offload", rt_offload_name(o.offload));
    cJSON_AddNumberToObject(root, "gemms_per_unit", (double)k.reps);
    cJSON_AddBoolToObject(root, "keep_last", o.keep_last);
    cJSON_AddBoolToObject(root, "prefetch_step", o.prefetch_step);
    cJSON_AddNumberToObject(root, "fit_need_bytes_per_rank", need_per_rank);
    cJSON *arr = cJSON_AddArrayToObject(root, "results");
    for (int q = 0; q < nres; q++) {
      result *r = &res[q];
      double base = 0;
      for (int p = 0; p < nres; p++)
        if (!strcmp(res[p].reshard, r->reshard) && res[p].outer == r->outer && res[p].prefetch == 0) base = res[p].step;
      double mx = r->comp > r->comm ? r->comp : r->comm;
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "reshard", r->reshard);
      cJSON_AddStringToObject(e, "outer_shard", rt_outer_shard_name(r->outer));
      cJSON_AddNumberToObject(e, "prefetch", r->prefetch);
      cJSON_AddNumberToObject(e, "step_ms", r->step);
      cJSON_AddNumberToObject(e, "compute_ms", r->comp);
      cJSON_AddNumberToObject(e, "comm_ms", r->comm);
      cJSON_AddNumberToObject(e, "exposed_comm_ms", r->exposed);
      cJSON_AddNumberToObject(e, "all_gather_ms", r->ag);
      cJSON_AddNumberToObject(e, "all_gather_exposed_ms", r->ag_exposed);
      cJSON_AddNumberToObject(e, "all_gather_hidden", r->ag > 0 ? 1 - r->ag_exposed / r->ag : 1);
      cJSON *gb = cJSON_AddObjectToObject(e, "busy_ms");
      static const char *const gn[3] = {"shard", "replicate", "partial"};
      for (int g = 0; g < 3; g++) cJSON_AddNumberToObject(gb, gn[g], r->busy[g]);
      cJSON_AddNumberToObject(e, "step_over_max", mx > 0 ? r->step / mx : 0);
      cJSON_AddNumberToObject(e, "fabric_bytes_per_step_all_ranks", r->fabric);
      cJSON *fg = cJSON_AddObjectToObject(e, "fabric_bytes_per_step_by_group");
      for (int g = 0; g < 3; g++) cJSON_AddNumberToObject(fg, gn[g], r->fabric_group[g]);
      cJSON_AddNumberToObject(e, "runtime_peak_bytes_max_rank", r->peak);
      cJSON_AddNumberToObject(e, "persistent_bytes_max_rank", r->persistent);
      if (base > 0)
        cJSON_AddNumberToObject(e, "speedup_vs_prefetch0", base / r->step);
      else
        cJSON_AddNullToObject(e, "speedup_vs_prefetch0");
      cJSON_AddItemToArray(arr, e);
    }
    char *txt = cJSON_Print(root);
    if (txt) fprintf(jf, "%s\n", txt);
    free(txt);
    cJSON_Delete(root);
  }
out:
  if (jf && st == HSR_OK)
    st = out_close(&jo); /* a write error is the run's error */
  else
    out_abort(&jo);
  free(res);
  free(k.a), free(k.b), free(k.c);
  if (k.dev) hsr_device_close(k.dev);
  hsr_comm_free(world);
  cluster_free(cl);
  topo_free(topo);
  if (st != HSR_OK) {
    int code = cli_fail_job("bench step", st, boot);
    if (!given) hsr_boot_finalize(boot);
    return code;
  }
  st = given ? HSR_OK : hsr_boot_finalize(boot);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("bench step", st);
}

int bench_step(int argc, char **argv) { return step_run(argc, argv, NULL); }
int bench_step_on(hsr_boot *boot, int argc, char **argv) { return step_run(argc, argv, boot); }
