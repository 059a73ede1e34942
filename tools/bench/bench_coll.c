/* hsr bench all_gather|reduce_scatter|all_reduce|broadcast: collective
 * bandwidth the way nccl-tests measures it (its binaries' names, flags,
 * table, bus-bandwidth formulas and JSON), in every group of a kind at once
 * (like NCCL_TESTS_SPLIT). Groups come from rank arithmetic only: shard =
 * r / S, replicate = r % S, partial = r / K (K consecutive ranks of a shard
 * group). This file: options, the groups, the size check, the sweep, exit
 * codes; one size is bench_coll_run.c, output bench_coll_out.c. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_coll.h"
#include "tools/cli/cli.h"
#include "common/sys.h"
#include "common/env.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"
#include "common/dtype_internal.h"

const char *const bc_kind_names[] = {"world", "shard", "replicate", "partial", NULL};

static void usage(const char *prog) {
  printf("usage: hsr bench %s [options]   (nccl-tests' %s_perf; under a launcher: hsr-run -n 4 -- hsr bench %s ...)\n"
         "  -b, --minbytes N        smallest size (K/M/G suffixes; default 32M)\n"
         "  -e, --maxbytes N        largest size (default 64M)\n"
         "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
         "  -i, --stepbytes N       add N bytes each step instead of -f\n"
         "  -n, --iters N           timed iterations per size (default 20)\n"
         "  -m, --agg_iters N       operations per iteration, posted together (default 1)\n"
         "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
         "  -N, --run_cycles N      run the whole sweep N times, each printed (default 1)\n"
         "  -c, --check N           check iterations after timing, wrong elements counted (default 1; 0 = off)\n"
         "  -o, --op OP             reduction: sum (default), avg, max (reduce_scatter: sum, avg)\n"
         "  -d, --datatype T        float (default), double, bfloat16, half, int32, uint8 (or f32, bf16, ...)\n"
         "  -r, --root R            broadcast root, a rank of the group (default 0)\n"
         "  -z, --blocking Z        0: post every op, then wait (default); 1: wait each op, barrier after each;\n"
         "                          2: wait each op; 3: wait each iteration, barrier excluded from the time\n"
         "  -a, --average A         time over ranks: 0 rank 0, 1 mean (default), 2 min, 3 max\n"
         "  -T, --timeout S         a wait without progress for S seconds fails (default: HSR_COMM_TIMEOUT)\n"
         "  -I, --per_iter_timing 1 per-iteration times (max over ranks): i_min i_max i_p99 i_cv%% columns\n"
         "  -R, --local_register R  1: buffers from comm_mem_alloc, read in place (default); 0: malloc (staged)\n"
         "  -G, --cudagraph N       only 0: hsr's host collectives have no CUDA graphs\n"
         "  -J, --output_file FILE  write the results as JSON in nccl-tests' schema (rank 0); also --json FILE\n"
         "  --group G[,G2]          world (default), shard, replicate, partial: run in every group of that kind at\n"
         "                          once; two kinds run one after the other, or together with --concurrent\n"
         "  --concurrent            with two kinds: both at once (a hybrid step), each kind's bandwidth measured\n"
         "                          from its own operations while the other runs\n"
         "  --shard S               shard group size (default: the ranks of one node; must divide the ranks)\n"
         "  --partial K             partial group size (must divide S)\n"
         "  --mem comm|user         same as -R 1 / -R 0\n"
         "  --min-bw X              exit %d when the average bus bandwidth is below X GB/s (or HSR_BENCH_MIN_BW)\n"
         "  --plot FILE.svg         bus bandwidth against size, one curve per group kind and cycle (gnuplot)\n"
         "Sizes are nccl-tests': the gathered size for all_gather and reduce_scatter (count is per rank).\n"
         "algbw = size / time; busbw = algbw x (n-1)/n (all_gather, reduce_scatter), 2(n-1)/n (all_reduce),\n"
         "1 (broadcast). Exit status: 0 ok, 1 failure (an operation failed or timed out), 2 bad usage or\n"
         "sizes that do not fit in memory, %d wrong results, %d below the minimum bandwidth.\n",
         prog, prog, prog, BC_EXIT_MIN_BW, BC_EXIT_WRONG, BC_EXIT_MIN_BW);
}

/* ---- options -------------------------------------------------------------------- */

static int parse_kinds(const char *cmd, const char *s, bc_opts *o) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  o->nkinds = 0;
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    int k = -1;
    for (int i = 0; bc_kind_names[i]; i++)
      if (!strcmp(t, bc_kind_names[i])) k = i;
    if (k < 0) return cli_usage_error(cmd, "--group '%s' (valid: world, shard, replicate, partial)", t);
    for (int i = 0; i < o->nkinds; i++)
      if (o->kinds[i] == k) return cli_usage_error(cmd, "--group: '%s' given twice", t);
    if (o->nkinds == 2) return cli_usage_error(cmd, "--group: at most two kinds (e.g. shard,replicate)");
    o->kinds[o->nkinds++] = k;
  }
  return o->nkinds ? 0 : cli_usage_error(cmd, "--group needs a kind");
}

/* nccl-tests flags that mean nothing for host collectives: a clear refusal. */
static int unsupported(const char *cmd, int c, long v) {
  if (c == 'G' && v != 0)
    return cli_usage_error(cmd, "-G %ld: CUDA graphs are not supported by hsr's host collectives (only -G 0)", v);
  if ((c == 't' || c == 'g') && v != 1)
    return cli_usage_error(cmd,
                           "-%c %ld: not supported: hsr runs one rank per process (start more ranks with "
                           "hsr-run -n)",
                           c, v);
  if (c == 'p' && v != 0) return cli_usage_error(cmd, "-p %ld: parallel init is not supported (only -p 0)", v);
  if (c == 'R' && v == 2)
    return cli_usage_error(cmd, "-R 2: symmetric registration is NCCL's; hsr has -R 1 (registered) and 0 (malloc)");
  return 0;
}

static const struct option long_opts[] = {{"help", no_argument, 0, 'h'},
                                          {"minbytes", required_argument, 0, 'b'},
                                          {"maxbytes", required_argument, 0, 'e'},
                                          {"stepbytes", required_argument, 0, 'i'},
                                          {"stepfactor", required_argument, 0, 'f'},
                                          {"iters", required_argument, 0, 'n'},
                                          {"agg_iters", required_argument, 0, 'm'},
                                          {"warmup_iters", required_argument, 0, 'w'},
                                          {"run_cycles", required_argument, 0, 'N'},
                                          {"check", required_argument, 0, 'c'},
                                          {"op", required_argument, 0, 'o'},
                                          {"datatype", required_argument, 0, 'd'},
                                          {"root", required_argument, 0, 'r'},
                                          {"blocking", required_argument, 0, 'z'},
                                          {"timeout", required_argument, 0, 'T'},
                                          {"average", required_argument, 0, 'a'},
                                          {"per_iter_timing", required_argument, 0, 'I'},
                                          {"output_file", required_argument, 0, 'J'},
                                          {"json", required_argument, 0, 'J'},
                                          {"cudagraph", required_argument, 0, 'G'},
                                          {"local_register", required_argument, 0, 'R'},
                                          {"nthreads", required_argument, 0, 't'},
                                          {"ngpus", required_argument, 0, 'g'},
                                          {"parallel_init", required_argument, 0, 'p'},
                                          {"group", required_argument, 0, 1},
                                          {"concurrent", no_argument, 0, 2},
                                          {"shard", required_argument, 0, 3},
                                          {"partial", required_argument, 0, 4},
                                          {"mem", required_argument, 0, 5},
                                          {"min-bw", required_argument, 0, 6},
                                          {"plot", required_argument, 0, 7},
                                          {"op_type", required_argument, 0, 8}, /* deprecated 'coll' only */
                                          {0, 0, 0, 0}};

static void defaults(bc_opts *o, int coll, const char *prog, int argc, char **argv) {
  *o = (bc_opts){.coll = coll,
                 .prog = prog,
                 .minb = 32u << 20,
                 .maxb = 64u << 20,
                 .factor = 2,
                 .iters = 20,
                 .agg = 1,
                 .warmup = 5,
                 .cycles = 1,
                 .check = 1,
                 .redop = HSR_SUM,
                 .dt = HSR_F32,
                 .average = 1,
                 .kinds = {BC_WORLD},
                 .nkinds = 1,
                 .comm_mem = 1,
                 .min_bw = -1,
                 .argc = argc,
                 .argv = argv};
}

/* One option; legacy: the deprecated 'hsr bench coll', where --op picks the collective. */
static hsr_status one_opt(bc_opts *o, int c, const char *cmd, int *urc) {
  long v = 0;
  hsr_status st = HSR_OK;
  switch (c) {
  case 'b': return parse_size("-b", optarg, &o->minb);
  case 'e': return parse_size("-e", optarg, &o->maxb);
  case 'i': o->factor = 0; return parse_size("-i", optarg, &o->stepb);
  case 'f': return parse_double("-f", optarg, 1.0001, 1024, &o->factor);
  case 'n': return parse_long("-n", optarg, 1, 1000000, &o->iters);
  case 'm': return parse_long("-m", optarg, 1, 1024, &o->agg);
  case 'w': return parse_long("-w", optarg, 0, 1000000, &o->warmup);
  case 'N':
    if (!strcmp(optarg, "0")) return hsr_error(HSR_ERR_INVALID, "-N 0 (run forever) is not supported: give a count");
    return parse_long("-N", optarg, 1, 1000, &o->cycles);
  case 'c': return parse_long("-c", optarg, 0, 1000, &o->check);
  case 'o':
  case 8: return redop_parse(optarg, &o->redop);
  case 9:
    if ((o->coll = nt_op_parse(optarg)) < 0)
      return hsr_error(HSR_ERR_INVALID, "--op '%s' (valid: all_gather, reduce_scatter, all_reduce, broadcast)", optarg);
    return HSR_OK;
  case 'd': return dtype_parse(optarg, &o->dt);
  case 'r': return parse_long("-r", optarg, 0, 1 << 24, &o->root);
  case 'z':
    st = parse_long("-z", optarg, 0, 3, &v);
    o->blocking = (int)v;
    return st;
  case 'T': return parse_double("-T", optarg, 0, 1e6, &o->timeout);
  case 'a':
    st = parse_long("-a", optarg, 0, 3, &v);
    o->average = (int)v;
    return st;
  case 'I':
    st = parse_long("-I", optarg, 0, 1, &v);
    o->per_iter = (int)v;
    return st;
  case 'J': o->json = optarg; return HSR_OK;
  case 'G':
  case 't':
  case 'g':
  case 'p':
  case 'R':
    st = parse_long(c == 'G'   ? "-G"
                    : c == 't' ? "-t"
                    : c == 'g' ? "-g"
                    : c == 'p' ? "-p"
                               : "-R",
                    optarg, 0, 1 << 20, &v);
    if (st == HSR_OK) *urc = unsupported(cmd, c, v);
    if (st == HSR_OK && c == 'R') o->comm_mem = v != 0;
    return st;
  case 1: *urc = parse_kinds(cmd, optarg, o); return HSR_OK;
  case 2: o->concurrent = 1; return HSR_OK;
  case 3: return parse_long("--shard", optarg, 1, 1 << 20, &o->shard);
  case 4: return parse_long("--partial", optarg, 1, 1 << 20, &o->partial);
  case 5:
    if (strcmp(optarg, "comm") && strcmp(optarg, "user"))
      return hsr_error(HSR_ERR_INVALID, "--mem '%s' (valid: comm, user)", optarg);
    o->comm_mem = !strcmp(optarg, "comm");
    return HSR_OK;
  case 6: return parse_double("--min-bw", optarg, 0, 1e9, &o->min_bw);
  case 7: o->plot = optarg; return HSR_OK;
  default: return HSR_ERR_INVALID;
  }
}

/* The size after s (from 0, 1 byte); s itself when nothing larger is representable. */
static size_t next_size(const bc_opts *o, size_t s) {
  if (o->factor > 0) {
    double n = s ? (double)s * o->factor : 1;
    return n >= (double)SIZE_MAX ? s : (size_t)n;
  }
  return s > SIZE_MAX - o->stepb ? s : s + o->stepb;
}

/* nccl-tests' binaries take -o and -r and ignore them where they mean
 * nothing; so does hsr (scripts pass one set of flags to every
 * collective), but it says so. */
static void note_ignored(const char *cmd, const bc_opts *o) {
  const char *r = getenv("PMIX_RANK");
  if (r && *r && strcmp(r, "0")) return;
  if ((o->given & BC_GIVEN_OP) && (o->coll == NT_ALLGATHER || o->coll == NT_BCAST))
    fprintf(stderr, "hsr %s: warning: -o %s has no effect on %s (it reduces nothing)\n", cmd, redop_name(o->redop),
            o->coll == NT_ALLGATHER ? "all_gather" : "broadcast");
  if ((o->given & BC_GIVEN_ROOT) && o->coll != NT_BCAST)
    fprintf(stderr, "hsr %s: warning: -r %ld has no effect: only broadcast has a root\n", cmd, o->root);
}

static int check_opts(const char *cmd, bc_opts *o) {
  if (o->minb > o->maxb) return cli_usage_error(cmd, "-b %zu is larger than -e %zu", o->minb, o->maxb);
  if ((o->given & BC_GIVEN_FACTOR) && (o->given & BC_GIVEN_STEP))
    return cli_usage_error(cmd, "-f (multiply) and -i (add) both step the size: give one");
  int grouped = 0, partial = 0;
  for (int i = 0; i < o->nkinds; i++) grouped |= o->kinds[i] != BC_WORLD, partial |= o->kinds[i] == BC_PARTIAL;
  if ((o->given & BC_GIVEN_SHARD) && !grouped)
    return cli_usage_error(cmd,
                           "--shard %ld has no effect on --group world (give --group shard, replicate or "
                           "partial)",
                           o->shard);
  if ((o->given & BC_GIVEN_PARTIAL) && !partial)
    return cli_usage_error(cmd, "--partial %ld has no effect without --group partial", o->partial);
  hsr_status pst = o->json ? path_check_output("-J", o->json) : HSR_OK;
  if (pst == HSR_OK && o->plot) pst = path_check_output("--plot", o->plot);
  if (pst == HSR_OK) pst = path_check_distinct("-J", o->json, "--plot", o->plot);
  if (pst != HSR_OK) return cli_usage_error(cmd, "%s", hsr_last_error());
  note_ignored(cmd, o);
  if (o->factor == 0 && o->stepb == 0) return cli_usage_error(cmd, "-i must be at least 1 byte");
  if (o->coll == NT_REDUCE_SCATTER && o->redop == HSR_MAX)
    return cli_usage_error(cmd, "reduce_scatter supports -o sum or avg (not max)");
  if (o->concurrent && o->nkinds != 2)
    return cli_usage_error(cmd, "--concurrent needs two group kinds (e.g. --group shard,replicate)");
  for (int i = 0; i < o->nkinds; i++)
    if (o->kinds[i] == BC_PARTIAL && !o->partial) return cli_usage_error(cmd, "--group partial needs --partial K");
  if (o->partial && o->shard && o->shard % o->partial)
    return cli_usage_error(cmd, "--partial %ld does not divide --shard %ld", o->partial, o->shard);
  if (o->plot) {
    size_t l = strlen(o->plot);
    if (l < 5 || strcmp(o->plot + l - 4, ".svg") || strchr(o->plot, '\''))
      return cli_usage_error(cmd, "--plot '%s': expected a FILE.svg name without quotes", o->plot);
    if (!bc_have_gnuplot())
      return cli_usage_error(cmd, "--plot needs gnuplot, which is not installed (apt-get install gnuplot-nox)");
  }
  if (o->min_bw < 0) {
    if (env_get_double("HSR_BENCH_MIN_BW", &o->min_bw) != HSR_OK) /* -1 when unset */
      return cli_usage_error(cmd, "%s", hsr_last_error());
  }
  /* a bounded sweep: sizes grow (from 0, the next size is 1 byte) */
  long rows = 0;
  for (size_t s = o->minb; s <= o->maxb && rows <= 100000; rows++) {
    size_t next = next_size(o, s);
    if (next <= s) break;
    s = next;
  }
  if (rows > 100000) return cli_usage_error(cmd, "-b/-e/-i give more than 100000 sizes");
  return 0;
}

/* Returns 0 to run, -1 after --help, else the exit code. */
static int parse(int argc, char **argv, int coll, const char *prog, bc_opts *o) {
  int legacy = coll < 0;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "bench %s", prog);
  defaults(o, legacy ? NT_ALLGATHER : coll, prog, argc, argv);
  /* the deprecated command: --op is the collective, --op_type (or -o) the reduction */
  enum { NOPTS = sizeof long_opts / sizeof long_opts[0] };
  struct option lo[NOPTS];
  memcpy(lo, long_opts, sizeof lo);
  for (int i = 0; i < NOPTS - 1; i++) {
    if (legacy && !strcmp(lo[i].name, "op")) lo[i].val = 9;
    if (!legacy && !strcmp(lo[i].name, "op_type")) lo[i].name = "\001"; /* matches nothing */
  }
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "hb:e:i:f:n:m:w:N:c:o:d:r:z:T:a:I:J:G:R:t:g:p:", lo, NULL)) != -1) {
    if (c == 'h') {
      usage(prog);
      if (legacy)
        printf("  --op OP                 (this deprecated command) the collective; -o / --op_type: the reduction\n");
      return -1;
    }
    if (c == '?' || c == ':') return cli_usage_error(cmd, "unknown option or missing value '%s'", argv[optind - 1]);
    int urc = 0;
    hsr_status st = one_opt(o, c, cmd, &urc);
    if (urc) return urc;
    if (st != HSR_OK) return cli_usage_error(cmd, "%s", hsr_last_error());
    o->given |= c == 'o' || c == 8 ? BC_GIVEN_OP
                : c == 'r'         ? BC_GIVEN_ROOT
                : c == 'f'         ? BC_GIVEN_FACTOR
                : c == 'i'         ? BC_GIVEN_STEP
                : c == 3           ? BC_GIVEN_SHARD
                : c == 4           ? BC_GIVEN_PARTIAL
                                   : 0u;
  }
  if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
  return check_opts(cmd, o);
}

/* ---- groups and sizes ------------------------------------------------------------------ */

static int color_of(const bc_opts *o, int kind, int r) {
  switch (kind) {
  case BC_SHARD: return r / (int)o->shard;
  case BC_REPLICATE: return r % (int)o->shard;
  case BC_PARTIAL: return r / (int)o->partial;
  default: return 0;
  }
}

/* S (default: the ranks of one node), K and -r against the job; rank 0 reports. */
static int check_job(const char *cmd, bc_opts *o, hsr_boot *boot) {
  int n = hsr_boot_size(boot), nodes = boot_num_nodes(boot), me = hsr_boot_rank(boot), need_s = 0;
  for (int i = 0; i < o->nkinds; i++) need_s |= o->kinds[i] != BC_WORLD;
  if (need_s && !o->shard) o->shard = n % nodes == 0 ? n / nodes : n;
  char msg[256] = "";
  if (need_s && (o->shard > n || n % o->shard))
    snprintf(msg, sizeof msg, "--shard %ld does not divide the %d ranks", o->shard, n);
  else if (o->partial && o->shard % o->partial)
    snprintf(msg, sizeof msg, "--partial %ld does not divide the shard size %ld", o->partial, o->shard);
  for (int i = 0; i < o->nkinds && !msg[0]; i++) {
    int k = o->kinds[i], gn = k == BC_WORLD     ? n
                              : k == BC_SHARD   ? (int)o->shard
                              : k == BC_PARTIAL ? (int)o->partial
                                                : n / (int)o->shard;
    if (o->coll == NT_BCAST && o->root >= gn)
      snprintf(msg, sizeof msg, "-r %ld is not a rank of the %s groups (valid: 0 to %d)", o->root, bc_kind_names[k],
               gn - 1);
  }
  if (!msg[0]) return 0;
  if (me == 0) cli_usage_error(cmd, "%s", msg);
  return HSR_EXIT_USAGE;
}

static double gib(double b) { return b / (1024.0 * 1024 * 1024); }

static double mem_available(void) {
  uint64_t b = 0;
  return sys_mem_available(&b) == HSR_OK ? (double)b : -1;
}

/* Every rank of this host holds two buffers of the largest size per group
 * kind and a staging copy (registered buffers, -R 1, are node-shared memfds:
 * memory like the rest, whatever /dev/shm's size). Refused up front when
 * that does not fit in this host's memory, or its memory cgroup's; rank 0
 * measures and decides for all. */
static int check_fit(const char *cmd, const bc_opts *o, hsr_boot *boot) {
  int n = hsr_boot_size(boot), me = hsr_boot_rank(boot), host = 0;
  for (int r = 0; r < n; r++) host += !strcmp(boot_hostname_of(boot, r), boot_hostname(boot));
  char msg[400] = "";
  if (me == 0) {
    double buf = (double)o->maxb + 4096, k = o->nkinds;
    double mem_need = host * k * (o->comm_mem ? 2 : 3) * buf, mem = mem_available();
    const char *what = o->comm_mem ? "registered buffers" : "buffers, staged";
    if (mem >= 0 && mem_need > 0.9 * mem)
      snprintf(msg, sizeof msg,
               "-e %zu does not fit: it needs %.2f GiB of memory on host %s (%d ranks x %d group kind%s, %s of "
               "%.2f GiB), %.2f GiB is available (this host's, or its memory cgroup's)",
               o->maxb, gib(mem_need), boot_hostname(boot), host, o->nkinds, o->nkinds > 1 ? "s" : "", what, gib(buf),
               gib(mem));
  }
  if (boot_bcast(boot, msg, sizeof msg, 0) != HSR_OK) return cli_fail(cmd, HSR_ERR_TRANSPORT);
  if (!msg[0]) return 0;
  if (me == 0) cli_usage_error(cmd, "%s", msg);
  return HSR_EXIT_USAGE;
}

static void *alloc_buf(hsr_comm *c, size_t bytes, int comm_mem, hsr_status *st) {
  void *p = NULL;
  if (comm_mem) {
    *st = comm_mem_alloc(c, bytes, &p);
  } else {
    p = malloc(bytes);
    *st = p ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "malloc(%zu)", bytes);
  }
  if (p) memset(p, 0, bytes); /* fault the pages in before timing */
  return p;
}

/* This rank's communicator of each kind, its buffers, and how the groups lie. */
static hsr_status groups_make(const bc_opts *o, hsr_boot *boot, hsr_comm *w, bc_group *g) {
  int me = hsr_boot_rank(boot);
  for (int k = 0; k < o->nkinds; k++) {
    g[k].kind = o->kinds[k];
    if (g[k].kind == BC_WORLD)
      g[k].c = w;
    else
      HSR_CHECK(comm_split(w, color_of(o, g[k].kind, me), me, &g[k].c));
    g[k].n = hsr_comm_size(g[k].c);
    g[k].ngroups = hsr_boot_size(boot) / g[k].n;
    int nodes[64], nn = 0; /* distinct nodes of my group, then the most over groups */
    for (int j = 0; j < g[k].n && nn < 64; j++) {
      int nd = boot_node_of(boot, comm_world_rank(g[k].c, j)), seen = 0;
      for (int q = 0; q < nn; q++) seen |= nodes[q] == nd;
      if (!seen) nodes[nn++] = nd;
    }
    double span = nn;
    HSR_CHECK(hsr_comm_allreduce(w, &span, &span, 1, HSR_F64, HSR_MAX, NULL));
    g[k].nodes_spanned = (int)span;
    hsr_status st = HSR_OK;
    g[k].a = alloc_buf(g[k].c, o->maxb + 4096, o->comm_mem, &st);
    if (st == HSR_OK) g[k].b = alloc_buf(g[k].c, o->maxb + 4096, o->comm_mem, &st);
    HSR_CHECK(st);
  }
  return HSR_OK;
}

static void groups_free(const bc_opts *o, hsr_comm *w, bc_group *g) {
  for (int k = 0; k < o->nkinds; k++) {
    if (!g[k].c) continue;
    char *bufs[2] = {g[k].a, g[k].b};
    for (int i = 0; i < 2; i++)
      if (bufs[i]) o->comm_mem ? (void)comm_mem_free(g[k].c, bufs[i]) : free(bufs[i]);
    if (g[k].c != w) hsr_comm_free(g[k].c);
  }
}

/* ---- the sweep ----------------------------------------------------------------------------- */

static hsr_status sweep(const bc_ctx *x, hsr_comm *w, bc_row **rows_out, int *nrows_out) {
  const bc_opts *o = x->o;
  int me = hsr_comm_rank(w), nr = 0, cap = 64;
  bc_row *rows = calloc((size_t)cap, sizeof *rows);
  hsr_status st = rows ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "rows");
  size_t es = dtype_size(o->dt);
  for (long cyc = 0; cyc < o->cycles && st == HSR_OK; cyc++)
    for (size_t s = o->minb; s <= o->maxb && st == HSR_OK;) {
      int per = o->concurrent ? x->ng : 1; /* groups timed together */
      for (int k0 = 0; k0 < x->ng && st == HSR_OK; k0 += per) {
        if (nr + per > cap) {
          bc_row *n2 = realloc(rows, (size_t)(cap *= 2) * sizeof *rows);
          if (!n2) {
            st = hsr_error(HSR_ERR_NOMEM, "rows");
            break;
          }
          rows = n2;
        }
        bc_one res[2][BC_KINDS];
        memset(res, 0, sizeof res);
        for (int p = 0; p < 2 && st == HSR_OK; p++) st = bc_run_size(o, x->boot, w, &x->g[k0], per, s, p, res[p]);
        for (int k = 0; k < per && st == HSR_OK; k++) {
          bc_row *r = &rows[nr++];
          size_t cnt = bc_count(o, &x->g[k0 + k], s);
          *r = (bc_row){.cycle = (int)cyc,
                        .g = k0 + k,
                        .count = cnt,
                        .bytes = cnt * es * (o->coll <= NT_REDUCE_SCATTER ? (size_t)x->g[k0 + k].n : 1)};
          r->place[0] = res[0][k], r->place[1] = res[1][k];
          if (me == 0) bc_print_row(x, r);
        }
      }
      size_t next = next_size(o, s);
      if (next <= s) break;
      s = next;
    }
  *rows_out = rows;
  *nrows_out = nr;
  return st;
}

static void rows_free(bc_row *rows, int nr) {
  for (int i = 0; i < nr; i++)
    for (int p = 0; p < 2; p++) free(rows[i].place[p].it.times), free(rows[i].place[p].it.procs);
  free(rows);
}

/* Results, footers, files; the exit code. */
static int report(const bc_ctx *x, bc_row *rows, int nr) {
  const bc_opts *o = x->o;
  long long wrong = 0;
  double bw = 0;
  for (int i = 0; i < nr; i++)
    for (int p = 0; p < 2; p++) wrong += rows[i].place[p].wrong, bw += rows[i].place[p].busbw;
  double avg = nr ? bw / (2.0 * nr) : 0;
  int rc = HSR_EXIT_OK;
  if (hsr_boot_rank(x->boot) == 0) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "bench %s", o->prog);
    bc_print_footer(x, rows, nr, wrong, avg);
    if (o->json && bc_json_write(x, rows, nr, wrong, avg) != HSR_OK) rc = cli_fail(cmd, HSR_ERR_IO);
    if (o->plot) {
      hsr_status st = bc_plot(x, rows, nr);
      if (st != HSR_OK)
        rc = cli_fail(cmd, st);
      else
        printf("# plot: %s\n", o->plot);
    }
  }
  if (rc == HSR_EXIT_OK && wrong) rc = BC_EXIT_WRONG;
  if (rc == HSR_EXIT_OK && o->min_bw >= 0 && avg < o->min_bw) rc = BC_EXIT_MIN_BW;
  return rc;
}

/* given: a bootstrap the caller keeps (hsr tune --validate runs several
 * benchmarks in one job: PMIx does not re-initialise reliably), else one of
 * our own. */
static int run(int argc, char **argv, int coll, const char *prog, hsr_boot *given) {
  bc_opts o;
  int prc = parse(argc, argv, coll, prog, &o);
  if (prc) return prc < 0 ? HSR_EXIT_OK : prc;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "bench %s", prog);
  hsr_boot *boot = given;
  hsr_status st = given ? HSR_OK : hsr_boot_init(&boot);
  if (st != HSR_OK) return cli_fail(cmd, st);
  int rc = check_job(cmd, &o, boot);
  if (!rc) rc = check_fit(cmd, &o, boot);
  if (rc) {
    if (!given) hsr_boot_finalize(boot);
    return rc;
  }
  int n = hsr_boot_size(boot), me = hsr_boot_rank(boot);
  hsr_comm *w = NULL;
  bc_group g[BC_KINDS];
  memset(g, 0, sizeof g);
  bc_ctx x = {.o = &o, .boot = boot, .g = g, .ng = o.nkinds};
  x.pids = calloc((size_t)n, sizeof *x.pids);
  x.colors = calloc((size_t)n, sizeof *x.colors);
  bc_row *rows = NULL;
  int nr = 0, pid = (int)getpid();
  bc_now(x.start_time, sizeof x.start_time);
  st = x.pids && x.colors ? boot_allgather(boot, &pid, sizeof pid, x.pids) : hsr_error(HSR_ERR_NOMEM, "tables");
  for (int r = 0; r < n && x.colors; r++) x.colors[r] = color_of(&o, o.kinds[0], r);
  if (st == HSR_OK) st = hsr_comm_world(boot, HSR_BACKEND_HOST, &w);
  if (st == HSR_OK) st = groups_make(&o, boot, w, g);
  if (st == HSR_OK && me == 0) bc_print_header(&x);
  if (st == HSR_OK) st = sweep(&x, w, &rows, &nr);
  rc = st == HSR_OK ? report(&x, rows, nr) : cli_fail_job(cmd, st, boot);
  rows_free(rows, nr);
  groups_free(&o, w, g);
  hsr_comm_free(w);
  free(x.pids);
  free(x.colors);
  if (!given) hsr_boot_finalize(boot);
  return rc;
}

int bench_all_gather(int argc, char **argv) { return run(argc, argv, NT_ALLGATHER, "all_gather", NULL); }
int bench_reduce_scatter(int argc, char **argv) { return run(argc, argv, NT_REDUCE_SCATTER, "reduce_scatter", NULL); }
int bench_all_reduce(int argc, char **argv) { return run(argc, argv, NT_ALLREDUCE, "all_reduce", NULL); }
int bench_broadcast(int argc, char **argv) { return run(argc, argv, NT_BCAST, "broadcast", NULL); }
int bench_collective_on(hsr_boot *boot, const char *coll, int argc, char **argv) {
  static const char *const names[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast"};
  static const int ids[] = {NT_ALLGATHER, NT_REDUCE_SCATTER, NT_ALLREDUCE, NT_BCAST};
  for (int i = 0; i < 4; i++)
    if (!strcmp(coll, names[i])) return run(argc, argv, ids[i], names[i], boot);
  return cli_usage_error("bench", "unknown collective '%s'", coll);
}

/* Deprecated: 'hsr bench coll --op X' picks the collective with --op. */
int bench_coll(int argc, char **argv) {
  int help = 0;
  const char *pr = getenv("PMIX_RANK"); /* once per job, before the bootstrap */
  for (int i = 1; i < argc; i++) help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
  if (!help && (!pr || !strcmp(pr, "0")))
    fprintf(stderr, "hsr bench coll is deprecated: use 'hsr bench all_gather|reduce_scatter|all_reduce|broadcast' "
                    "(nccl-tests' names; there -o/--op is the reduction op)\n");
  return run(argc, argv, -1, "coll", NULL);
}
