/* hsr bench coll: collective bandwidth with nccl-tests' flags, table and
 * formulas, in every group of a kind at once (like NCCL_TESTS_SPLIT).
 * Groups come from rank arithmetic only: shard = r / S, replicate = r % S,
 * partial = r / K (K consecutive ranks inside a shard group). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "hsr/boot.h"
#include "hsr/comm.h"
#include "hsr/kmath.h"
#include "nccl_table.h"

typedef struct bopts {
  int op;
  size_t minb, maxb;
  double factor;
  long iters, warmup, check;
  hsr_redop redop;
  hsr_dtype dt;
  int group; /* 0 world, 1 shard, 2 replicate, 3 partial */
  long shard, partial;
  int comm_mem;
  const char *json;
} bopts;

static const char *const group_names[] = {"world", "shard", "replicate", "partial", NULL};

static void usage(void) {
  printf("usage: hsr bench coll [options]   (under a launcher: hsr-run -n 4 -- hsr bench coll ...)\n"
         "  --op OP            all_gather (default), reduce_scatter, all_reduce, broadcast\n"
         "  -b, --minbytes N   smallest size (K/M/G suffixes; default 32M)\n"
         "  -e, --maxbytes N   largest size (default 64M)\n"
         "  -f, --stepfactor F multiply the size by F each step (default 2)\n"
         "  -n, --iters N      timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N  untimed iterations first (default 5)\n"
         "  -c, --check N      check iterations after timing, wrong elements counted (default 1; 0 = off)\n"
         "  -o, --op_type OP   redop: sum (default), avg, max (reduce_scatter: sum, avg)\n"
         "  -d, --datatype T   float (default), double, bfloat16, half, int32, uint8 (or f32, bf16, ...)\n"
         "  --group G          world (default), shard, replicate, partial: run in every group of that kind at once\n"
         "  --shard S          shard group size for --group shard|replicate|partial (must divide the ranks)\n"
         "  --partial K        partial group size (must divide S)\n"
         "  --mem M            comm: buffers from hsr_comm_mem_alloc (default); user: malloc (staged)\n"
         "  --json FILE        also write the results as JSON (rank 0)\n"
         "Sizes are nccl-tests': the gathered size for all_gather/reduce_scatter. algbw = size / time,\n"
         "busbw = algbw x (n-1)/n (all_gather, reduce_scatter), 2(n-1)/n (all_reduce), 1 (broadcast);\n"
         "time is the per-iteration average over ranks. Exit status 1 when a check finds wrong elements.\n");
}

static int parse(int argc, char **argv, bopts *o) {
  static const struct option lo[] = {{"help", no_argument, 0, 'h'},
                                     {"op", required_argument, 0, 'O'},
                                     {"minbytes", required_argument, 0, 'b'},
                                     {"maxbytes", required_argument, 0, 'e'},
                                     {"stepfactor", required_argument, 0, 'f'},
                                     {"iters", required_argument, 0, 'n'},
                                     {"warmup_iters", required_argument, 0, 'w'},
                                     {"check", required_argument, 0, 'c'},
                                     {"op_type", required_argument, 0, 'o'},
                                     {"datatype", required_argument, 0, 'd'},
                                     {"group", required_argument, 0, 'G'},
                                     {"shard", required_argument, 0, 'S'},
                                     {"partial", required_argument, 0, 'K'},
                                     {"mem", required_argument, 0, 'M'},
                                     {"json", required_argument, 0, 'J'},
                                     {0, 0, 0, 0}};
  *o = (bopts){.op = NT_ALLGATHER,
               .minb = 32u << 20,
               .maxb = 64u << 20,
               .factor = 2,
               .iters = 20,
               .warmup = 5,
               .check = 1,
               .redop = HSR_SUM,
               .dt = HSR_F32,
               .comm_mem = 1};
  const char *cmd = "bench coll";
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hb:e:f:n:w:c:o:d:", lo, NULL)) != -1) {
    hsr_status st = HSR_OK;
    long v;
    int idx;
    switch (c) {
    case 'h': usage(); return -1;
    case 'O':
      if ((o->op = nt_op_parse(optarg)) < 0)
        return hsr_cli_usage_error(cmd, "--op '%s' (valid: all_gather, reduce_scatter, all_reduce, broadcast)", optarg);
      break;
    case 'b': st = hsr_parse_size("-b", optarg, &o->minb); break;
    case 'e': st = hsr_parse_size("-e", optarg, &o->maxb); break;
    case 'f': st = hsr_parse_double("-f", optarg, 1.0001, 1024, &o->factor); break;
    case 'n': st = hsr_parse_long("-n", optarg, 1, 1000000, &o->iters); break;
    case 'w': st = hsr_parse_long("-w", optarg, 0, 1000000, &o->warmup); break;
    case 'c': st = hsr_parse_long("-c", optarg, 0, 1000, &o->check); break;
    case 'o': st = hsr_redop_parse(optarg, &o->redop); break;
    case 'd': st = hsr_dtype_parse(optarg, &o->dt); break;
    case 'G':
      st = hsr_parse_choice("--group", optarg, group_names, &idx);
      o->group = idx;
      break;
    case 'S': st = hsr_parse_long("--shard", optarg, 1, 1 << 20, &o->shard); break;
    case 'K': st = hsr_parse_long("--partial", optarg, 1, 1 << 20, &o->partial); break;
    case 'M':
      if (!strcmp(optarg, "comm"))
        o->comm_mem = 1;
      else if (!strcmp(optarg, "user"))
        o->comm_mem = 0;
      else
        return hsr_cli_usage_error(cmd, "--mem '%s' (valid: comm, user)", optarg);
      break;
    case 'J': o->json = optarg; break;
    default: return hsr_cli_usage_error(cmd, "unknown option or missing value '%s'", argv[optind - 1]);
    }
    (void)v;
    if (st != HSR_OK) return hsr_cli_usage_error(cmd, "%s", hsr_last_error());
  }
  if (optind < argc) return hsr_cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
  if (o->minb > o->maxb) return hsr_cli_usage_error(cmd, "-b %zu is larger than -e %zu", o->minb, o->maxb);
  if (o->op == NT_REDUCE_SCATTER && o->redop == HSR_MAX)
    return hsr_cli_usage_error(cmd, "reduce_scatter supports -o sum or avg (not max)");
  if (o->group && !o->shard) return hsr_cli_usage_error(cmd, "--group %s needs --shard S", group_names[o->group]);
  if (o->group == 3 && !o->partial) return hsr_cli_usage_error(cmd, "--group partial needs --partial K");
  if (o->partial && o->shard % o->partial)
    return hsr_cli_usage_error(cmd, "--partial %ld does not divide --shard %ld", o->partial, o->shard);
  return 0;
}

/* ---- element access ------------------------------------------------------- */
/* The bench's values (small integers and their quarters) are exact in every
 * dtype; 16-bit formats go through the kernels' casts (kmath.h). */
static void put(hsr_dtype dt, void *p, size_t i, double v) {
  switch (dt) {
  case HSR_F32: ((float *)p)[i] = (float)v; break;
  case HSR_F64: ((double *)p)[i] = v; break;
  case HSR_BF16: ((uint16_t *)p)[i] = hsr_km_f32_to_bf16((float)v); break;
  case HSR_F16: ((uint16_t *)p)[i] = hsr_km_f32_to_f16((float)v); break;
  case HSR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((uint8_t *)p)[i] = (uint8_t)v; break;
  }
}
static double get(hsr_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case HSR_F32: return ((const float *)p)[i];
  case HSR_F64: return ((const double *)p)[i];
  case HSR_BF16: return hsr_km_bf16_to_f32(((const uint16_t *)p)[i]);
  case HSR_F16: return hsr_km_f16_to_f32(((const uint16_t *)p)[i]);
  case HSR_I32: return ((const int32_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}
static double ref_reduce(hsr_dtype dt, hsr_redop op, int n, size_t i) {
  int u8 = dt == HSR_U8;
  double acc = nt_val(0, i, u8);
  for (int r = 1; r < n; r++) {
    double v = nt_val(r, i, u8);
    acc = op == HSR_MAX ? fmax(acc, v) : acc + v;
  }
  if (op == HSR_AVG) acc = (dt == HSR_I32 || u8) ? (double)((long long)acc / n) : acc / n;
  return acc;
}

/* ---- one size ------------------------------------------------------------------ */
typedef struct bufs {
  char *a, *b;
} bufs;

static hsr_status issue(const bopts *o, hsr_comm *g, bufs *B, size_t count, int inplace, hsr_req **req) {
  int r = hsr_comm_rank(g);
  size_t es = hsr_dtype_size(o->dt);
  switch (o->op) {
  case NT_ALLGATHER:
    return inplace ? hsr_comm_allgather(g, B->b + (size_t)r * count * es, B->b, count, o->dt, req)
                   : hsr_comm_allgather(g, B->a, B->b, count, o->dt, req);
  case NT_REDUCE_SCATTER:
    return inplace ? hsr_comm_reduce_scatter(g, B->a, B->a + (size_t)r * count * es, count, o->dt, o->redop, req)
                   : hsr_comm_reduce_scatter(g, B->a, B->b, count, o->dt, o->redop, req);
  case NT_ALLREDUCE: return hsr_comm_allreduce(g, B->a, inplace ? B->a : B->b, count, o->dt, o->redop, req);
  default: return hsr_comm_bcast(g, inplace ? B->a : B->b, count, o->dt, 0, req);
  }
}

/* Fills the inputs, runs once, returns the number of wrong elements. */
static long long check_once(const bopts *o, hsr_comm *g, bufs *B, size_t count, int inplace, hsr_status *st) {
  int n = hsr_comm_size(g), r = hsr_comm_rank(g), u8 = o->dt == HSR_U8;
  size_t es = hsr_dtype_size(o->dt);
  char *in = o->op == NT_ALLGATHER && inplace ? B->b + (size_t)r * count * es
             : o->op == NT_BCAST && !inplace  ? B->b
                                              : B->a;
  size_t nin = o->op == NT_REDUCE_SCATTER ? count * (size_t)n : count;
  for (size_t i = 0; i < nin; i++) put(o->dt, in, i, o->op == NT_BCAST && r != 0 ? 3 : nt_val(r, i, u8));
  *st = issue(o, g, B, count, inplace, NULL);
  if (*st != HSR_OK) return 0;
  const char *out = o->op == NT_REDUCE_SCATTER ? (inplace ? B->a + (size_t)r * count * es : B->b)
                    : o->op == NT_ALLGATHER    ? B->b
                    : inplace                  ? B->a
                                               : B->b;
  size_t nout = o->op == NT_ALLGATHER ? count * (size_t)n : count;
  long long wrong = 0;
  for (size_t i = 0; i < nout; i++) {
    double want;
    switch (o->op) {
    case NT_ALLGATHER: want = nt_val((int)(i / count), i % count, u8); break;
    case NT_REDUCE_SCATTER: want = ref_reduce(o->dt, o->redop, n, (size_t)r * count + i); break;
    case NT_ALLREDUCE: want = ref_reduce(o->dt, o->redop, n, i); break;
    default: want = nt_val(0, i, u8); break;
    }
    if (get(o->dt, out, i) != want) wrong++;
  }
  return wrong;
}

static hsr_status run_size(const bopts *o, hsr_comm *w, hsr_comm *g, bufs *B, size_t count, int inplace, nt_result *res,
                           hsr_req **reqs) {
  hsr_status st = HSR_OK;
  for (long i = 0; i < o->warmup && st == HSR_OK; i++) st = issue(o, g, B, count, inplace, NULL);
  if (st == HSR_OK) st = hsr_comm_barrier(w, NULL);
  if (st != HSR_OK) return st;
  double t0 = hsr_clock_s();
  for (long i = 0; i < o->iters && st == HSR_OK; i++) st = issue(o, g, B, count, inplace, &reqs[i]);
  for (long i = 0; i < o->iters; i++) {
    hsr_status s2 = reqs[i] ? hsr_req_wait(reqs[i], -1) : HSR_OK;
    reqs[i] = NULL;
    if (st == HSR_OK) st = s2;
  }
  double t = (hsr_clock_s() - t0) / (double)o->iters;
  if (st != HSR_OK) return st;
  double sum[2] = {t, 0};
  long long wrong = 0;
  for (long i = 0; i < o->check && st == HSR_OK; i++) wrong += check_once(o, g, B, count, inplace, &st);
  if (st != HSR_OK) return st;
  sum[1] = (double)wrong;
  HSR_CHECK(hsr_comm_allreduce(w, sum, sum, 2, HSR_F64, HSR_SUM, NULL));
  int n = hsr_comm_size(g);
  size_t es = hsr_dtype_size(o->dt);
  double bytes = (double)count * (double)es * (o->op <= NT_REDUCE_SCATTER ? n : 1);
  res->time_us = sum[0] / hsr_comm_size(w) * 1e6;
  res->algbw = bytes / (res->time_us * 1e-6) / 1e9;
  res->busbw = res->algbw * nt_bus_factor(o->op, n);
  res->wrong = (long long)sum[1];
  return HSR_OK;
}

static void *alloc_buf(hsr_comm *g, size_t bytes, int comm_mem, hsr_status *st) {
  void *p = NULL;
  if (comm_mem) {
    *st = hsr_comm_mem_alloc(g, bytes, &p);
  } else {
    p = malloc(bytes);
    *st = p ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "malloc(%zu)", bytes);
  }
  if (p) memset(p, 0, bytes); /* fault the pages in before timing */
  return p;
}

int hsr_bench_coll(int argc, char **argv) {
  bopts o;
  int prc = parse(argc, argv, &o);
  if (prc) return prc < 0 ? HSR_EXIT_OK : prc;
  const char *cmd = "bench coll";
  hsr_boot *boot = NULL;
  hsr_status st = hsr_boot_init(&boot);
  if (st != HSR_OK) return hsr_cli_fail(cmd, st);
  int n = hsr_boot_size(boot), rank = hsr_boot_rank(boot), color = 0;
  if (o.group && (o.shard > n || n % o.shard)) {
    if (rank == 0) hsr_cli_usage_error(cmd, "--shard %ld does not divide the %d ranks", o.shard, n);
    hsr_boot_finalize(boot);
    return HSR_EXIT_USAGE;
  }
  if (o.group == 1)
    color = rank / (int)o.shard;
  else if (o.group == 2)
    color = rank % (int)o.shard;
  else if (o.group == 3)
    color = rank / (int)o.partial;
  hsr_comm *w = NULL, *g = NULL;
  bufs B = {0};
  hsr_req **reqs = calloc((size_t)o.iters, sizeof *reqs);
  int rc = HSR_EXIT_OK;
  st = hsr_comm_world(boot, HSR_BACKEND_HOST, &w);
  if (st == HSR_OK) {
    if (o.group)
      st = hsr_comm_split(w, color, rank, &g);
    else
      g = w;
  }
  if (st != HSR_OK) goto out;
  int gn = hsr_comm_size(g);
  size_t es = hsr_dtype_size(o.dt);
  /* a: inputs (the full reduce-scatter input), b: outputs (the full gather). */
  B.a = alloc_buf(g, o.maxb + 4096, o.comm_mem, &st);
  if (st == HSR_OK) B.b = alloc_buf(g, o.maxb + 4096, o.comm_mem, &st);
  if (st != HSR_OK) goto out;

  cJSON *jroot = NULL, *jres = NULL;
  if (rank == 0) {
    printf("# hsr bench coll: op %s, type %s, redop %s, group %s (%d group%s of %d ranks), mem %s\n", nt_op_names[o.op],
           nt_type_names[o.dt], hsr_redop_name(o.redop), group_names[o.group], n / gn, n / gn > 1 ? "s" : "", gn,
           o.comm_mem ? "comm" : "user");
    printf("#  nranks %d, nodes %d, iters %ld, warmup %ld, check %ld\n", n, hsr_boot_num_nodes(boot), o.iters, o.warmup,
           o.check);
    nt_print_header(stdout);
    if (o.json) {
      jroot = cJSON_CreateObject();
      cJSON_AddStringToObject(jroot, "tool", "hsr");
      cJSON_AddStringToObject(jroot, "op", nt_op_names[o.op]);
      cJSON_AddStringToObject(jroot, "type", nt_type_names[o.dt]);
      cJSON_AddStringToObject(jroot, "redop", hsr_redop_name(o.redop));
      cJSON_AddStringToObject(jroot, "group", group_names[o.group]);
      cJSON_AddNumberToObject(jroot, "group_size", gn);
      cJSON_AddNumberToObject(jroot, "ranks", n);
      cJSON_AddNumberToObject(jroot, "nodes", hsr_boot_num_nodes(boot));
      cJSON_AddStringToObject(jroot, "mem", o.comm_mem ? "comm" : "user");
      cJSON_AddNumberToObject(jroot, "iters", (double)o.iters);
      jres = cJSON_AddArrayToObject(jroot, "results");
    }
  }
  double bw_sum = 0;
  int bw_n = 0;
  long long wrong_total = 0;
  for (double sz = (double)o.minb; sz <= (double)o.maxb * 1.0000001; sz *= o.factor) {
    size_t bytes = (size_t)sz;
    size_t count = o.op <= NT_REDUCE_SCATTER ? bytes / es / (size_t)gn : bytes / es;
    size_t total = o.op <= NT_REDUCE_SCATTER ? count * (size_t)gn : count;
    nt_result oop = {0}, ip = {0};
    st = run_size(&o, w, g, &B, count, 0, &oop, reqs);
    if (st == HSR_OK) st = run_size(&o, w, g, &B, count, 1, &ip, reqs);
    if (st != HSR_OK) goto out;
    wrong_total += oop.wrong + ip.wrong;
    bw_sum += oop.busbw + ip.busbw;
    bw_n += 2;
    if (rank == 0) {
      nt_print_row(stdout, total * es, total, o.dt,
                   o.op == NT_ALLGATHER || o.op == NT_BCAST ? "none" : hsr_redop_name(o.redop),
                   o.op == NT_BCAST ? 0 : -1, &oop, &ip);
      fflush(stdout);
      if (jres) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "size", (double)(total * es));
        cJSON_AddNumberToObject(row, "count", (double)total);
        const nt_result *rs[2] = {&oop, &ip};
        const char *nm[2] = {"out_of_place", "in_place"};
        for (int k = 0; k < 2; k++) {
          cJSON *e = cJSON_AddObjectToObject(row, nm[k]);
          cJSON_AddNumberToObject(e, "time_us", rs[k]->time_us);
          cJSON_AddNumberToObject(e, "algbw", rs[k]->algbw);
          cJSON_AddNumberToObject(e, "busbw", rs[k]->busbw);
          cJSON_AddNumberToObject(e, "wrong", (double)rs[k]->wrong);
        }
        cJSON_AddItemToArray(jres, row);
      }
    }
    if (o.factor <= 1.0) break;
  }
  if (rank == 0) {
    nt_print_footer(stdout, wrong_total, bw_n ? bw_sum / bw_n : 0);
    if (jroot) {
      cJSON_AddNumberToObject(jroot, "avg_busbw", bw_n ? bw_sum / bw_n : 0);
      cJSON_AddNumberToObject(jroot, "wrong", (double)wrong_total);
      char *txt = cJSON_Print(jroot);
      FILE *f = fopen(o.json, "w");
      if (!f || !txt || fputs(txt, f) < 0) {
        fprintf(stderr, "hsr bench coll: cannot write %s\n", o.json);
        rc = HSR_EXIT_FAIL;
      }
      if (f) fclose(f);
      free(txt);
      cJSON_Delete(jroot);
    }
  }
  if (wrong_total) rc = HSR_EXIT_FAIL;
out:
  if (st != HSR_OK) rc = hsr_cli_fail_job(cmd, st, boot);
  if (B.a) o.comm_mem ? hsr_comm_mem_free(g, B.a) : (free(B.a), HSR_OK);
  if (B.b) o.comm_mem ? hsr_comm_mem_free(g, B.b) : (free(B.b), HSR_OK);
  if (g && g != w) hsr_comm_free(g);
  hsr_comm_free(w);
  free(reqs);
  hsr_boot_finalize(boot);
  return rc;
}
