/* Benchmarks run by `hsr bench <name>` (argv[0] is the benchmark name). */
#ifndef HSR_BENCH_H
#define HSR_BENCH_H

#include "hsr/boot.h"

int bench_all_gather(int argc, char **argv);
int bench_reduce_scatter(int argc, char **argv);
int bench_all_reduce(int argc, char **argv);
int bench_broadcast(int argc, char **argv);
int bench_coll(int argc, char **argv); /* deprecated: --op picks the collective */
int bench_copy(int argc, char **argv);
int bench_step(int argc, char **argv);
int bench_ft(int argc, char **argv); /* the replica groups' control plane, simulated */

/* The same inside a job that keeps its own bootstrap (hsr tune --validate):
 * boot stays open; coll: all_gather, reduce_scatter, all_reduce, broadcast. */
int bench_collective_on(hsr_boot *boot, const char *coll, int argc, char **argv);
int bench_step_on(hsr_boot *boot, int argc, char **argv);

#endif
