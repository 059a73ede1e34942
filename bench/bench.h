/* Benchmarks run by `hsr bench <name>` (argv[0] is the benchmark name). */
#ifndef HSR_BENCH_H
#define HSR_BENCH_H

int hsr_bench_coll(int argc, char **argv);
int hsr_bench_copy(int argc, char **argv);
int hsr_bench_step(int argc, char **argv);

#endif
