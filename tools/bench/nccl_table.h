/* nccl-tests conventions shared by `hsr bench coll` and bench/mpi_peer:
 * the table layout, the dtype names and the bus-bandwidth factors.
 * Header-only so that the standalone MPI peer uses the same text. */
#ifndef HSR_BENCH_NCCL_TABLE_H
#define HSR_BENCH_NCCL_TABLE_H

#include <stdio.h>
#include <string.h>

enum { NT_ALLGATHER = 0, NT_REDUCE_SCATTER, NT_ALLREDUCE, NT_BCAST, NT_NOPS };

static const char *const nt_op_names[NT_NOPS] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast"};
/* nccl-tests' type names, in hsr_dtype order (f32 f64 bf16 f16 i32 u8). */
static const char *const nt_type_names[] = {"float", "double", "bfloat16", "half", "int32", "uint8"};

static inline int nt_op_parse(const char *s) {
  for (int i = 0; i < NT_NOPS; i++)
    if (!strcmp(s, nt_op_names[i])) return i;
  if (!strcmp(s, "allgather")) return NT_ALLGATHER;
  if (!strcmp(s, "reducescatter")) return NT_REDUCE_SCATTER;
  if (!strcmp(s, "allreduce")) return NT_ALLREDUCE;
  if (!strcmp(s, "bcast")) return NT_BCAST;
  return -1;
}

/* busbw = algbw x factor (nccl-tests' PERFORMANCE.md). */
static inline double nt_bus_factor(int op, int n) {
  if (op == NT_ALLREDUCE) return 2.0 * (n - 1) / n;
  if (op == NT_BCAST) return 1.0;
  return (double)(n - 1) / n;
}

static inline void nt_print_header(FILE *f) {
  fprintf(f, "#\n#%54s%-36s%s\n", "", "out-of-place", "in-place");
  fprintf(f, "# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
          "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  fprintf(f, "# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
          "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

typedef struct nt_result {
  double time_us, algbw, busbw;
  long long wrong;
} nt_result;

static inline void nt_print_row(FILE *f, size_t bytes, size_t count, int type, const char *redop, int root,
                                const nt_result *oop, const nt_result *ip) {
  fprintf(f, "  %10zu %12zu %8s %6s %6d %8.1f %7.2f %7.2f %6lld %8.1f %7.2f %7.2f %6lld\n", bytes, count,
          nt_type_names[type], redop, root, oop->time_us, oop->algbw, oop->busbw, oop->wrong, ip->time_us, ip->algbw,
          ip->busbw, ip->wrong);
}

static inline void nt_print_footer(FILE *f, long long wrong, double avg_busbw) {
  fprintf(f, "# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
  fprintf(f, "# Avg bus bandwidth    : %g \n#\n", avg_busbw);
}

/* Element values used by the checks: small integers, exact in every type. */
static inline double nt_val(int rank, size_t i, int is_u8) {
  double v = (double)((rank * 7 + (i % 1000) * 3 + i / 1000) % 17);
  return is_u8 ? v : v - 8;
}

#endif
