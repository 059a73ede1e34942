/* hsr bench all_gather|reduce_scatter|all_reduce|broadcast (bench_coll*.c),
 * private to bench/: options, groups, results, and the three parts
 * (bench_coll.c: options and the sweep; bench_coll_run.c: one size;
 * bench_coll_out.c: table, JSON in nccl-tests' schema, plot). */
#ifndef HSR_BENCH_COLL_H
#define HSR_BENCH_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "collectives/comm_internal.h"
#include "nccl_table.h"

enum { BC_WORLD = 0, BC_SHARD, BC_REPLICATE, BC_PARTIAL, BC_KINDS };
extern const char *const bc_kind_names[]; /* "world", "shard", "replicate", "partial", NULL */

enum {
  BC_GIVEN_OP = 1u << 0,
  BC_GIVEN_ROOT = 1u << 1,
  BC_GIVEN_FACTOR = 1u << 2,
  BC_GIVEN_STEP = 1u << 3,
  BC_GIVEN_SHARD = 1u << 4,
  BC_GIVEN_PARTIAL = 1u << 5
};

/* Exit codes beyond cli.h's 0 (ok), 1 (failure), 2 (usage, sizes that do not fit). */
enum { BC_EXIT_WRONG = 3, BC_EXIT_MIN_BW = 4 };

typedef struct bc_opts {
  int coll;         /* NT_* */
  const char *prog; /* "all_gather", ...; "coll" for the deprecated alias */
  size_t minb, maxb, stepb;
  double factor; /* 0: add stepb instead */
  long iters, agg, warmup, cycles, check;
  hsr_redop redop;
  hsr_dtype dt;
  long root;
  int blocking;   /* -z 0..3, nccl-tests' meanings */
  double timeout; /* -T seconds; 0: HSR_COMM_TIMEOUT */
  int average;    /* -a 0 rank 0, 1 mean, 2 min, 3 max over ranks */
  int per_iter;   /* -I */
  int kinds[BC_KINDS], nkinds, concurrent;
  long shard, partial;
  int comm_mem;  /* -R 1 / --mem comm (default): comm_mem_alloc buffers */
  double min_bw; /* GB/s, < 0: unchecked */
  const char *json, *plot;
  unsigned given; /* BC_GIVEN_* of the flags on the command line */
  int argc;
  char **argv;
} bc_opts;

/* One group kind of the run: this rank's communicator of that kind. */
typedef struct bc_group {
  int kind;
  hsr_comm *c;
  int n, ngroups, nodes_spanned; /* group size, groups of the kind, most nodes one group spans */
  char *a, *b;                   /* input, output buffers (the largest size) */
} bc_group;

typedef struct bc_iter {
  double min, max, avg, p50, p95, p99, stdev, cv; /* us */
  double *times;                                  /* us, per iteration (max over ranks) */
  double *procs;                                  /* us, per rank and iteration (rank-major) */
  int nprocs;
} bc_iter;

typedef struct bc_one {
  double time_us, algbw, busbw;
  long long wrong;
  double sent_per_op, fabric_per_op; /* bytes per op, most over ranks (counters) */
  int have_iter;
  bc_iter it;
} bc_one;

/* One row: a size for one group kind, both placements. */
typedef struct bc_row {
  int cycle, g; /* index into the groups */
  size_t bytes, count;
  bc_one place[2]; /* out of place, in place */
} bc_row;

/* bench_coll_run.c: times one size (out of place or in place) on groups
 * g[0..ng-1] at once (ng = 2 with --concurrent). */
hsr_status bc_run_size(const bc_opts *o, hsr_boot *boot, hsr_comm *world, bc_group *g, int ng, size_t bytes,
                       int inplace, bc_one *res);
/* Elements per rank (all-gather, reduce-scatter) or in the vector, for `bytes`. */
size_t bc_count(const bc_opts *o, const bc_group *g, size_t bytes);

/* What the output needs besides the rows (rank 0 holds all of it). */
typedef struct bc_ctx {
  const bc_opts *o;
  hsr_boot *boot;
  bc_group *g;
  int ng;
  int *pids;   /* per world rank */
  int *colors; /* per world rank: its group index of the first kind */
  char start_time[32];
} bc_ctx;

/* bench_coll_out.c: rank 0 prints and writes. */
void bc_print_header(const bc_ctx *x);
void bc_print_row(const bc_ctx *x, const bc_row *r);
void bc_print_footer(const bc_ctx *x, const bc_row *rows, int nrows, long long wrong, double avg_busbw);
hsr_status bc_json_write(const bc_ctx *x, const bc_row *rows, int nrows, long long wrong, double avg_busbw);
hsr_status bc_plot(const bc_ctx *x, const bc_row *rows, int nrows);
/* 1 if gnuplot is on PATH. */
int bc_have_gnuplot(void);
/* "%Y-%m-%d %H:%M:%S", as nccl-tests writes times. */
void bc_now(char *buf, size_t len);

#endif
