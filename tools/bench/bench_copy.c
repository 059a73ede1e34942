/* hsr bench copy: the physical reference for the host collectives. Measures
 * glibc memcpy on one thread and an AVX2 streaming (non-temporal) copy on 1
 * and T threads. On a machine with C cores an all-gather over n ranks cannot
 * beat busbw = (C-thread streaming copy) x (n-1)/n^2: every rank writes its
 * whole output. */
#include <getopt.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "common/sys.h"
#include "tools/cli/cli.h"
#include "common/common_internal.h"

__attribute__((target("avx2"))) static void stream_copy(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  size_t head = (32 - ((uintptr_t)d & 31)) & 31;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    __m256i a = _mm256_loadu_si256((const __m256i *)s), b = _mm256_loadu_si256((const __m256i *)(s + 32));
    _mm256_stream_si256((__m256i *)d, a);
    _mm256_stream_si256((__m256i *)(d + 32), b);
  }
  _mm_sfence();
  memcpy(d, s, n);
}

typedef struct job {
  char *dst;
  const char *src;
  size_t bytes;
  int reps, stream;
  pthread_barrier_t *bar;
} job;

static void *worker(void *arg) {
  job *j = arg;
  pthread_barrier_wait(j->bar);
  for (int r = 0; r < j->reps; r++) {
    if (j->stream)
      stream_copy(j->dst, j->src, j->bytes);
    else
      memcpy(j->dst, j->src, j->bytes);
  }
  return NULL;
}

static void free_bufs(char **bufs, int n) {
  for (int t = 0; bufs && t < n; t++) free(bufs[t]);
  free(bufs);
}

/* GB/s of `threads` threads each copying `bytes` (own buffers) `reps` times;
 * best of 3. < 0 when the buffers cannot be allocated. */
static double measure(size_t bytes, int threads, int stream, int reps) {
  double best = 0;
  char **bufs = calloc((size_t)threads * 2, sizeof *bufs);
  for (int t = 0; bufs && t < 2 * threads; t++) {
    if (posix_memalign((void **)&bufs[t], 64, bytes) != 0) {
      bufs[t] = NULL;
      free_bufs(bufs, 2 * threads);
      return -1;
    }
    memset(bufs[t], t + 1, bytes);
  }
  if (!bufs) return -1;
  for (int trial = 0; trial < 3; trial++) {
    pthread_t th[64];
    job jobs[64];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
      jobs[t] = (job){
          .dst = bufs[2 * t], .src = bufs[2 * t + 1], .bytes = bytes, .reps = reps, .stream = stream, .bar = &bar};
      pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    double t0 = clock_s();
    pthread_barrier_wait(&bar);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    double gbs = (double)bytes * reps * threads / (clock_s() - t0) / 1e9;
    if (gbs > best) best = gbs;
    pthread_barrier_destroy(&bar);
  }
  free_bufs(bufs, 2 * threads);
  return best;
}

int bench_copy(int argc, char **argv) {
  static const struct option lo[] = {{"help", no_argument, 0, 'h'},          {"size", required_argument, 0, 's'},
                                     {"threads", required_argument, 0, 't'}, {"reps", required_argument, 0, 'r'},
                                     {"json", no_argument, 0, 'j'},          {0, 0, 0, 0}};
  size_t bytes = 64u << 20;
  long threads = sysconf(_SC_NPROCESSORS_ONLN), reps = 5;
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h':
      printf("usage: hsr bench copy [--size 64M] [--threads T] [--reps N] [--json]\n"
             "  Copy bandwidth (GB/s of bytes copied): glibc memcpy on 1 thread, AVX2 streaming copy on 1\n"
             "  and on T threads (default: the online CPUs), best of 3 trials of N copies each. The\n"
             "  all-gather ceiling printed is T-thread streaming x (n-1)/n^2 for n = 4 and 8 ranks.\n");
      return HSR_EXIT_OK;
    case 's': st = parse_size("--size", optarg, &bytes); break;
    case 't': st = parse_long("--threads", optarg, 1, 64, &threads); break;
    case 'r': st = parse_long("--reps", optarg, 1, 10000, &reps); break;
    case 'j': json = 1; break;
    default: return cli_usage_error("bench copy", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("bench copy", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("bench copy", "unexpected argument '%s'", argv[optind]);
  if (bytes < 4096) return cli_usage_error("bench copy", "--size must be at least 4K");
  /* the largest run holds 2 buffers per thread: refuse up front what memory cannot hold */
  uint64_t mem = 0;
  double need = 2.0 * (double)(threads > 1 ? threads : 1) * (double)bytes,
         avail = sys_mem_available(&mem) == HSR_OK ? (double)mem : -1;
  if (avail >= 0 && need > 0.9 * avail)
    return cli_usage_error("bench copy",
                           "--size %zu does not fit: %ld thread(s) x 2 buffers need %.2f GiB, %.2f GiB of memory "
                           "is available",
                           bytes, threads, need / 1073741824.0, avail / 1073741824.0);
  if (!__builtin_cpu_supports("avx2")) {
    fprintf(stderr, "hsr bench copy: this CPU has no AVX2\n");
    return HSR_EXIT_FAIL;
  }
  double m1 = measure(bytes, 1, 0, (int)reps), s1 = measure(bytes, 1, 1, (int)reps);
  double st = measure(bytes, (int)threads, 1, (int)reps);
  if (m1 < 0 || s1 < 0 || st < 0) {
    fprintf(stderr, "hsr bench copy: cannot allocate the buffers (%zu bytes each)\n", bytes);
    return HSR_EXIT_FAIL;
  }
  double c4 = st * 3 / 16, c8 = st * 7 / 64;
  if (json)
    printf("{\"size\":%zu,\"memcpy_1t\":%.3f,\"stream_1t\":%.3f,\"threads\":%ld,\"stream_nt\":%.3f,"
           "\"ag_ceiling_4\":%.3f,\"ag_ceiling_8\":%.3f}\n",
           bytes, m1, s1, threads, st, c4, c8);
  else
    printf("# hsr bench copy: %zu bytes\n"
           "memcpy      1 thread : %6.2f GB/s\n"
           "stream copy 1 thread : %6.2f GB/s\n"
           "stream copy %ld threads: %6.2f GB/s\n"
           "all-gather busbw ceiling: %.2f GB/s at 4 ranks, %.2f GB/s at 8 ranks\n",
           bytes, m1, s1, threads, st, c4, c8);
  return HSR_EXIT_OK;
}
