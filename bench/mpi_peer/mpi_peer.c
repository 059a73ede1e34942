/* mpi_peer: times MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce and
 * MPI_Bcast with the flags, table and formulas of `hsr bench <collective>`,
 * so the two can run side by side (bench/coll_vs_mpi.sh). Its JSON uses
 * nccl-tests' key names, as hsr's does.
 *
 *   mpirun -n 4 mpi_peer all_gather -b 64M -e 64M -n 20 -w 5 -c 1 [-d float] [-o sum] [-J F]
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/bench/nccl_table.h"

static int g_rank;

static void usage(void) {
  printf("usage: mpirun -n N mpi_peer all_gather|reduce_scatter|all_reduce|broadcast [-b SIZE] [-e SIZE]\n"
         "                [-f FACTOR] [-n ITERS] [-w WARMUP] [-c CHECKS] [-o sum|max] [-d float|double|int32|uint8]\n"
         "                [-J FILE]\n"
         "Same meanings as 'hsr bench <collective>' (MPI has no bfloat16/half and no avg); --op C and --json F\n"
         "are older spellings of the collective and -J.\n");
}

static int die(const char *fmt, const char *arg) {
  if (g_rank == 0) {
    fprintf(stderr, "mpi_peer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see mpi_peer --help)\n");
  }
  MPI_Finalize();
  return 2;
}

static int parse_size(const char *s, size_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  if (*end == 'K' || *end == 'k')
    v *= 1024, end++;
  else if (*end == 'M' || *end == 'm')
    v *= 1048576, end++;
  else if (*end == 'G' || *end == 'g')
    v *= 1073741824.0, end++;
  if (*end) return -1;
  *out = (size_t)v;
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int op = NT_ALLGATHER, type = 0, check = 1;
  size_t minb = 32u << 20, maxb = 64u << 20;
  double factor = 2;
  long iters = 20, warmup = 5;
  const char *redop = "sum", *json = NULL;
  int first_arg = 1;
  if (argc > 1 && argv[1][0] != '-') {
    if ((op = nt_op_parse(argv[1])) < 0) return die("unknown collective '%s'", argv[1]);
    first_arg = 2;
  }
  for (int i = first_arg; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      if (g_rank == 0) usage();
      MPI_Finalize();
      return 0;
    }
    if (!v) return die("option '%s' needs a value", a);
    i++;
    if (!strcmp(a, "--op")) {
      if ((op = nt_op_parse(v)) < 0) return die("unknown --op '%s'", v);
    } else if (!strcmp(a, "-b")) {
      if (parse_size(v, &minb)) return die("bad size '%s'", v);
    } else if (!strcmp(a, "-e")) {
      if (parse_size(v, &maxb)) return die("bad size '%s'", v);
    } else if (!strcmp(a, "-f")) {
      factor = atof(v);
      if (factor <= 1) return die("-f must be > 1 (got '%s')", v);
    } else if (!strcmp(a, "-n")) {
      iters = atol(v);
      if (iters < 1) return die("-n must be >= 1 (got '%s')", v);
    } else if (!strcmp(a, "-w")) {
      warmup = atol(v);
    } else if (!strcmp(a, "-c")) {
      check = atoi(v);
    } else if (!strcmp(a, "-o")) {
      if (strcmp(v, "sum") && strcmp(v, "max")) return die("-o '%s': MPI peer supports sum and max", v);
      redop = v;
    } else if (!strcmp(a, "-d")) {
      if (!strcmp(v, "float") || !strcmp(v, "f32"))
        type = 0;
      else if (!strcmp(v, "double") || !strcmp(v, "f64"))
        type = 1;
      else if (!strcmp(v, "int32") || !strcmp(v, "i32"))
        type = 4;
      else if (!strcmp(v, "uint8") || !strcmp(v, "u8"))
        type = 5;
      else
        return die("-d '%s': MPI peer supports float, double, int32, uint8", v);
    } else if (!strcmp(a, "--json") || !strcmp(a, "-J")) {
      json = v;
    } else {
      return die("unknown option '%s'", a);
    }
  }
  if (minb > maxb) return die("-b is larger than -e%s", "");
  MPI_Datatype dt = type == 0 ? MPI_FLOAT : type == 1 ? MPI_DOUBLE : type == 4 ? MPI_INT32_T : MPI_UINT8_T;
  size_t es = type == 0 || type == 4 ? 4 : type == 1 ? 8 : 1;
  MPI_Op mop = strcmp(redop, "max") ? MPI_SUM : MPI_MAX;
  char *a = malloc(maxb + 4096), *b = malloc(maxb + 4096);
  memset(a, 0, maxb + 4096);
  memset(b, 0, maxb + 4096);
  FILE *jf = NULL;
  if (g_rank == 0) {
    printf("# mpi_peer: op %s, type %s, redop %s, %d ranks (Open MPI)\n", nt_op_names[op], nt_type_names[type], redop,
           n);
    nt_print_header(stdout);
    if (json && !(jf = fopen(json, "w"))) fprintf(stderr, "mpi_peer: cannot write %s\n", json);
    if (jf)
      fprintf(jf, "{\"version\":3,\"hsr\":{\"tool\":\"mpi\",\"collective\":\"%s\",\"ranks\":%d},\"results\":[",
              nt_op_names[op], n);
  }
  double bw_sum = 0;
  int bw_n = 0;
  long long wrong_total = 0;
  int first = 1;
  for (double sz = (double)minb; sz <= (double)maxb * 1.0000001; sz *= factor) {
    size_t bytes = (size_t)sz;
    size_t count = op <= NT_REDUCE_SCATTER ? bytes / es / (size_t)n : bytes / es;
    size_t total = op <= NT_REDUCE_SCATTER ? count * (size_t)n : count;
    nt_result res[2] = {{0}};
    for (int ip = 0; ip < 2; ip++) {
      int ic = (int)count;
      double t0 = 0, t1 = 0;
      for (long it = -warmup; it < iters + check; it++) {
        if (it == 0) {
          MPI_Barrier(MPI_COMM_WORLD);
          t0 = MPI_Wtime();
        }
        if (it == iters) t1 = MPI_Wtime();
        int checking = it >= iters;
        char *in = op == NT_ALLGATHER && ip ? b + (size_t)g_rank * count * es : op == NT_BCAST && !ip ? b : a;
        size_t nin = op == NT_REDUCE_SCATTER ? total : count;
        if (checking)
          for (size_t i = 0; i < nin; i++) {
            double val = op == NT_BCAST && g_rank != 0 ? 3 : nt_val(g_rank, i, type == 5);
            if (type == 0)
              ((float *)in)[i] = (float)val;
            else if (type == 1)
              ((double *)in)[i] = val;
            else if (type == 4)
              ((int32_t *)in)[i] = (int32_t)val;
            else
              ((uint8_t *)in)[i] = (uint8_t)val;
          }
        const char *out = NULL;
        switch (op) {
        case NT_ALLGATHER:
          if (ip)
            MPI_Allgather(MPI_IN_PLACE, 0, dt, b, ic, dt, MPI_COMM_WORLD);
          else
            MPI_Allgather(a, ic, dt, b, ic, dt, MPI_COMM_WORLD);
          out = b;
          break;
        case NT_REDUCE_SCATTER:
          if (ip)
            MPI_Reduce_scatter_block(MPI_IN_PLACE, a, ic, dt, mop, MPI_COMM_WORLD), out = a;
          else
            MPI_Reduce_scatter_block(a, b, ic, dt, mop, MPI_COMM_WORLD), out = b;
          break;
        case NT_ALLREDUCE:
          if (ip)
            MPI_Allreduce(MPI_IN_PLACE, a, ic, dt, mop, MPI_COMM_WORLD), out = a;
          else
            MPI_Allreduce(a, b, ic, dt, mop, MPI_COMM_WORLD), out = b;
          break;
        default:
          MPI_Bcast(ip ? a : b, ic, dt, 0, MPI_COMM_WORLD);
          out = ip ? a : b;
          break;
        }
        if (!checking) continue;
        size_t nout = op == NT_ALLGATHER ? total : count;
        long long wrong = 0;
        for (size_t i = 0; i < nout; i++) {
          double want;
          if (op == NT_ALLGATHER) {
            want = nt_val((int)(i / count), i % count, type == 5);
          } else if (op == NT_BCAST) {
            want = nt_val(0, i, type == 5);
          } else {
            size_t gi = op == NT_REDUCE_SCATTER ? (size_t)g_rank * count + i : i;
            want = nt_val(0, gi, type == 5);
            for (int r = 1; r < n; r++) {
              double v = nt_val(r, gi, type == 5);
              want = mop == MPI_MAX ? fmax(want, v) : want + v;
            }
            if (type == 5) want = fmod(want, 256);
          }
          double got = type == 0   ? ((float *)out)[i]
                       : type == 1 ? ((double *)out)[i]
                       : type == 4 ? ((int32_t *)out)[i]
                                   : ((uint8_t *)out)[i];
          if (got != want) wrong++;
        }
        res[ip].wrong += wrong;
      }
      if (check <= 0) t1 = MPI_Wtime();
      double t[2] = {(t1 - t0) / (double)iters, (double)res[ip].wrong};
      MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      double bytes_s = (double)total * (double)es;
      res[ip].time_us = t[0] / n * 1e6;
      res[ip].algbw = bytes_s / (res[ip].time_us * 1e-6) / 1e9;
      res[ip].busbw = res[ip].algbw * nt_bus_factor(op, n);
      res[ip].wrong = (long long)t[1];
      bw_sum += res[ip].busbw;
      bw_n++;
      wrong_total += res[ip].wrong;
    }
    if (g_rank == 0) {
      const char *rname = op == NT_ALLGATHER || op == NT_BCAST ? "none" : redop;
      nt_print_row(stdout, total * es, count, type, rname, op == NT_BCAST ? 0 : -1, &res[0], &res[1]);
      fflush(stdout);
      if (jf)
        fprintf(jf,
                "%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":\"%6d\","
                "\"out_of_place\":{\"time\":%g,\"alg_bw\":%g,\"bus_bw\":%g,\"nwrong\":%lld},"
                "\"in_place\":{\"time\":%g,\"alg_bw\":%g,\"bus_bw\":%g,\"nwrong\":%lld},"
                "\"actual_iterations\":%ld,\"experiment_name\":\"\"}",
                first ? "" : ",", total * es, count, nt_type_names[type], rname, op == NT_BCAST ? 0 : -1,
                res[0].time_us, res[0].algbw, res[0].busbw, res[0].wrong, res[1].time_us, res[1].algbw, res[1].busbw,
                res[1].wrong, iters);
      first = 0;
    }
  }
  if (g_rank == 0) {
    nt_print_footer(stdout, wrong_total, bw_n ? bw_sum / bw_n : 0);
    if (jf) {
      fprintf(jf,
              "],\"out_of_bounds\":{\"count\":%lld,\"okay\":%s},\"average_bus_bandwidth\":{\"bandwidth\":%g,"
              "\"okay\":\"unchecked\"}}\n",
              wrong_total, wrong_total ? "false" : "true", bw_n ? bw_sum / bw_n : 0);
      fclose(jf);
    }
  }
  free(a);
  free(b);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
