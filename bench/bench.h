/* Benchmarks run by `hsr bench <name>` (argv[0] is the benchmark name). */
#ifndef HSR_BENCH_H
#define HSR_BENCH_H

int hsr_bench_all_gather(int argc, char **argv);
int hsr_bench_reduce_scatter(int argc, char **argv);
int hsr_bench_all_reduce(int argc, char **argv);
int hsr_bench_broadcast(int argc, char **argv);
int hsr_bench_coll(int argc, char **argv); /* deprecated: --op picks the collective */
int hsr_bench_copy(int argc, char **argv);
int hsr_bench_step(int argc, char **argv);

#endif
