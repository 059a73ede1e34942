/* hsr ckpt bench: checkpoint save and load throughput beside the disk's own,
 * measured in the same run on the same directory: one writer writing the
 * checkpoint's bytes sequentially with fsync (the yardstick), every
 * rank writing its share in parallel, one rank's share alone (what a save
 * may block training for), and cold sequential reads (page cache dropped
 * with posix_fadvise). Then the asynchronous save beside training steps of
 * the engine (every unit's gathers and reductions, --step-ms of compute as
 * a wait without a core, as a GPU kernel, and AdamW on the shard, which
 * writes the master and moments the save must not see), timed without a
 * save and while the background write runs; the time the save blocked
 * against one copy of the rank's share out of the engine's state into host
 * memory. Loads twice a round: in place and held (HSR_CKPT_IN_PLACE).
 * Medians over --repeat rounds. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "common/sys.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "runtime/runtime_internal.h"
#include "launch/boot_internal.h"
#include "common/common_internal.h"

typedef struct bench_args {
  size_t size;
  int units, repeat, keep_files, steps;
  double step_ms;
  const char *dir, *json;
  hsr_rt_config cfg;
  int load_r, load_s; /* --load-mesh RxS (0: none) */
} bench_args;

enum {
  M_SEQ_W,
  M_PAR_W,
  M_SHARE_W,
  M_SAVE,
  M_BLOCKED,
  M_SAVE_DATA,
  M_SEQ_R,
  M_PAR_R,
  M_LOAD,
  M_LOAD_DATA,
  M_LOAD_HELD,
  M_LOAD_HELD_DATA,
  M_COPY,
  M_A_BLOCKED,
  M_A_STAGE,
  M_A_COMMIT,
  M_A_WRITE,
  M_STEP,
  M_STEP_BG,
  M_COPY_TOUCHED,
  M_LOAD_OTHER, /* --load-mesh only: reported apart */
  M_COUNT
};
static const char *const m_names[M_COUNT] = {
    "disk_seq_write_s", "disk_parallel_write_s", "disk_share_write_s",   "save_s",         "save_blocked_s",
    "save_data_s",      "disk_seq_read_s",       "disk_parallel_read_s", "load_s",         "load_data_s",
    "load_held_s",      "load_held_data_s",
    "staging_copy_s",   "async_blocked_s",       "async_stage_s",        "async_commit_s", "async_write_s",
    "step_s",           "step_during_write_s",   "memcpy_touched_s", "load_other_mesh_s"};

static void bench_usage(void) {
  printf("usage: hsr-run -n 4 -- hsr ckpt bench [options]\n"
         "Saves and loads a checkpoint of a synthetic model and measures, in the same run and directory, the\n"
         "disk's own sequential synced write of the same bytes (one writer), every rank writing its share in\n"
         "parallel, one rank's share alone, and cold sequential reads (page cache dropped with posix_fadvise).\n"
         "Each round loads twice from a cold cache: in place (HSR_CKPT_IN_PLACE=on, as into a fresh engine)\n"
         "and held (=off, as into one that has trained); the async save's block is set against one copy of the\n"
         "share out of the engine's master, m and v.\n"
         "  --size BYTES     checkpoint data bytes (12 per parameter: master, m, v) (default 256M)\n"
         "  --units N        units of the model, one parameter each (default 8)\n"
         "  --dir DIR        where to write (default /tmp); files are removed afterwards\n"
         "  --shard S        shard group size (default: every rank); --replicate R (default world / S)\n"
         "  --strategy X     ddp | zero1 | zero2 | fsdp | hybrid (default fsdp, hybrid when R > 1)\n"
         "  --repeat N       rounds; medians are reported (default 3)\n"
         "  --steps N        training steps timed without a save and after the async save (default 4)\n"
         "  --step-ms MS     a step's compute, spread over the units' forward and backward as waits without a\n"
         "                   core, as a GPU kernel (default 1000: a step of a GPU job, its host mostly idle)\n"
         "  --load-mesh RxS  also load each round's checkpoint, cold, into an engine on this other mesh (R x S =\n"
         "                   the ranks; fsdp for R = 1, else hybrid), as a job restarted on another layout\n"
         "  --json FILE      the figures as JSON\n"
         "  --keep-files     leave the checkpoint in DIR\n");
}

static int parse(int argc, char **argv, bench_args *a) {
  static const struct option opts[] = {{"size", required_argument, 0, 's'},
                                       {"units", required_argument, 0, 'u'},
                                       {"dir", required_argument, 0, 'd'},
                                       {"shard", required_argument, 0, 'S'},
                                       {"replicate", required_argument, 0, 'R'},
                                       {"strategy", required_argument, 0, 'x'},
                                       {"repeat", required_argument, 0, 'n'},
                                       {"json", required_argument, 0, 'j'},
                                       {"keep-files", no_argument, 0, 'k'},
                                       {"steps", required_argument, 0, 't'},
                                       {"step-ms", required_argument, 0, 'm'},
                                       {"load-mesh", required_argument, 0, 'L'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  memset(a, 0, sizeof *a);
  a->size = (size_t)256 << 20, a->units = 8, a->repeat = 3, a->dir = "/tmp", a->steps = 4, a->step_ms = 1000;
  hsr_rt_config_default(&a->cfg);
  a->cfg.strategy = HSR_RT_STRATEGY_COUNT; /* not given */
  int c;
  long v;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h': bench_usage(); return -1;
    case 's': st = parse_size("--size", optarg, &a->size); break;
    case 'u':
      if ((st = parse_long("--units", optarg, 1, 4096, &v)) == HSR_OK) a->units = (int)v;
      break;
    case 'n':
      if ((st = parse_long("--repeat", optarg, 1, 100, &v)) == HSR_OK) a->repeat = (int)v;
      break;
    case 'S':
      if ((st = parse_long("--shard", optarg, 1, 1 << 20, &v)) == HSR_OK) a->cfg.shard = (int)v;
      break;
    case 'R':
      if ((st = parse_long("--replicate", optarg, 1, 1 << 20, &v)) == HSR_OK) a->cfg.replicate = (int)v;
      break;
    case 't':
      if ((st = parse_long("--steps", optarg, 1, 1000, &v)) == HSR_OK) a->steps = (int)v;
      break;
    case 'm': st = parse_double("--step-ms", optarg, 0, 60000, &a->step_ms); break;
    case 'x': st = hsr_rt_parse_strategy(optarg, &a->cfg.strategy); break;
    case 'd': a->dir = optarg; break;
    case 'j': a->json = optarg; break;
    case 'k': a->keep_files = 1; break;
    case 'L': {
      char *e = NULL;
      long r = strtol(optarg, &e, 10), s = 0;
      if (e && *e == 'x') s = strtol(e + 1, &e, 10);
      if (!e || *e || r < 1 || s < 1 || r > (1 << 20) || s > (1 << 20))
        return cli_usage_error("ckpt bench", "--load-mesh '%s': RxS, two positive integers (e.g. 2x2)", optarg);
      a->load_r = (int)r, a->load_s = (int)s;
      break;
    }
    default: return cli_usage_error("ckpt bench", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("ckpt bench", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("ckpt bench", "unexpected argument '%s'", argv[optind]);
  if (a->size < (size_t)12 * a->units) return cli_usage_error("ckpt bench", "--size is under 12 bytes per unit");
  if (a->cfg.strategy == HSR_RT_DDP && a->cfg.shard > 1)
    return cli_usage_error("ckpt bench", "--shard %d with --strategy ddp: ddp does not shard", a->cfg.shard);
  hsr_status st = path_check_dir("--dir", a->dir, 1);
  if (st == HSR_OK && a->json) st = path_check_output("--json", a->json);
  return st == HSR_OK ? 0 : cli_usage_error("ckpt bench", "%s", hsr_last_error());
}

static hsr_status write_file(const char *path, size_t bytes, const char *buf, size_t chunk) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "creating '%s' failed: %s", path, strerror(errno));
  hsr_status st = HSR_OK;
  for (size_t done = 0; done < bytes && st == HSR_OK;) {
    size_t n = bytes - done < chunk ? bytes - done : chunk;
    ssize_t w = write(fd, buf, n);
    if (w <= 0 && errno != EINTR) st = hsr_error(HSR_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
    if (w > 0) done += (size_t)w;
  }
  if (st == HSR_OK && fsync(fd)) st = hsr_error(HSR_ERR_IO, "fsync of '%s' failed: %s", path, strerror(errno));
  close(fd);
  return st;
}

/* Drops a file's pages from the page cache (clean after fsync), so that the
 * next read comes from the disk. */
static void drop_cache(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

static void drop_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[4400];
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (!stat(p, &sb) && S_ISDIR(sb.st_mode))
      drop_dir(p);
    else
      drop_cache(p);
  }
  if (d) closedir(d);
}

static hsr_status read_file(const char *path, char *buf, size_t chunk) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "opening '%s' failed: %s", path, strerror(errno));
  ssize_t r;
  while ((r = read(fd, buf, chunk)) > 0 || (r < 0 && errno == EINTR)) {}
  close(fd);
  return HSR_OK;
}

/* The slowest rank's time. */
static hsr_status slowest(hsr_boot *b, double mine, double *out) {
  int n = hsr_boot_size(b);
  double *all = calloc((size_t)n, sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = boot_allgather(b, &mine, sizeof mine, all);
  *out = 0;
  for (int r = 0; r < n; r++) *out = all[r] > *out ? all[r] : *out;
  free(all);
  return st;
}

typedef struct bench_ctx {
  bench_args *a;
  hsr_boot *boot;
  hsr_rt *rt;
  hsr_rt *rt2; /* --load-mesh's engine */
  int rank, world, reads, overlapped, readers, held_reads;
  char base[4096];
  char *buf;
  size_t chunk;
  uint64_t bytes, share; /* checkpoint data bytes, the largest rank's share */
} bench_ctx;

static void remove_tree(const char *dir);

static void wait_s(double w) {
  if (w <= 0) return;
  struct timespec d = {(time_t)w, (long)((w - (double)(time_t)w) * 1e9)};
  nanosleep(&d, NULL);
}

/* A training step of the engine: every unit's forward and backward with
 * its gathers and reductions, each unit's compute a wait (--step-ms over
 * the step, as a GPU kernel holds no core), then AdamW on the shard. */
static hsr_status train_step(bench_ctx *x, double *sec) {
  double t0 = clock_s(), w = x->a->step_ms * 1e-3 / (2.0 * x->a->units);
  for (int u = 0; u < x->a->units; u++) {
    HSR_CHECK(hsr_rt_forward_begin(x->rt, u));
    wait_s(w);
    HSR_CHECK(hsr_rt_forward_end(x->rt, u));
  }
  for (int u = x->a->units - 1; u >= 0; u--) {
    HSR_CHECK(hsr_rt_backward_begin(x->rt, u));
    wait_s(w);
    HSR_CHECK(hsr_rt_backward_end(x->rt, u));
  }
  hsr_rt_step_info info;
  HSR_CHECK(hsr_rt_step(x->rt, &info));
  HSR_CHECK(hsr_rt_zero_grad(x->rt));
  *sec = clock_s() - t0;
  return HSR_OK;
}

static int dbl_cmp(const void *a, const void *b);

/* Steps without a save; an async save; the same number of steps while it
 * runs (a rank times those that started before its writer finished), then
 * the wait. The yardstick of the block: one copy of the share out of the
 * engine's master, m and v (rt_slice_get) after a step, which is what
 * staging must do at the least. */
static hsr_status async_round(bench_ctx *x, const char *ck, double *t) {
  hsr_boot *b = x->boot;
  int n = x->a->steps, over = 0;
  double *st = calloc((size_t)n, sizeof *st), bg = 0, dt;
  if (!st) return hsr_error(HSR_ERR_NOMEM, "ckpt bench: out of memory");
  hsr_status rc = HSR_OK;
  for (int i = 0; i < n && rc == HSR_OK; i++) rc = train_step(x, &st[i]);
  qsort(st, (size_t)n, sizeof *st, dbl_cmp);
  double base = st[n / 2];
  free(st);
  HSR_CHECK(rc);
  HSR_CHECK(slowest(b, base, &t[M_STEP]));
  /* The staging copy alone, as the save must make it: the share's bytes
   * from the engine's master, m and v (cold after the steps, as the save
   * finds them) into a touched buffer; and, for scale, between two touched
   * buffers (the memory's own copy speed). */
  size_t share = (size_t)x->share;
  char *src = malloc(share + 1), *dst = malloc(share + 1);
  if (!src || !dst) rc = hsr_error(HSR_ERR_NOMEM, "ckpt bench: out of memory for two %zu-byte buffers", share);
  if (rc == HSR_OK) {
    memset(src, 1, share), memset(dst, 2, share);
    double t0 = clock_s();
    memcpy(dst, src, share);
    dt = clock_s() - t0;
    volatile char seen = dst[share / 2]; /* the copy is used */
    (void)seen;
    rc = slowest(b, dt, &t[M_COPY_TOUCHED]);
  }
  free(src);
  if (rc == HSR_OK) rc = train_step(x, &dt); /* the state as a step leaves it */
  if (rc == HSR_OK) {
    double t0 = clock_s();
    size_t off = 0;
    for (int u = 0; u < x->a->units && off < share && rc == HSR_OK; u++) {
      rt_slice sl;
      rc = rt_slice_get(x->rt, u, &sl);
      const float *kinds[3] = {sl.master, sl.m, sl.v};
      for (int k = 0; k < 3 && rc == HSR_OK && off < share; k++) {
        size_t take = sl.len * 4 < share - off ? sl.len * 4 : share - off;
        memcpy(dst + off, kinds[k], take);
        off += take;
      }
    }
    dt = clock_s() - t0;
    volatile char seen = dst[share / 2];
    (void)seen;
    if (rc == HSR_OK) rc = slowest(b, dt, &t[M_COPY]);
  }
  free(dst);
  HSR_CHECK(rc);
  if (x->rank == 0) remove_tree(ck);
  HSR_CHECK(boot_barrier(b));
  hsr_ckpt_save_opts o = {NULL, 0, NULL, NULL, NULL, 1};
  hsr_ckpt_stats s, w;
  double t0 = clock_s();
  HSR_CHECK(hsr_ckpt_save(x->rt, ck, &o, &s));
  HSR_CHECK(slowest(b, clock_s() - t0, &t[M_A_BLOCKED]));
  for (int i = 0; i < n; i++) {
    int pending = 0;
    HSR_CHECK(ckpt_poll(x->rt, &pending));
    HSR_CHECK(train_step(x, &dt));
    if (pending) bg += dt, over++;
  }
  HSR_CHECK(hsr_ckpt_wait(x->rt, -1, &w));
  double commit = clock_s() - t0; /* an upper bound when the wait found it done */
  HSR_CHECK(slowest(b, s.stage_seconds, &t[M_A_STAGE]));
  HSR_CHECK(slowest(b, w.background_seconds, &t[M_A_WRITE]));
  HSR_CHECK(slowest(b, over ? bg / over : base, &t[M_STEP_BG]));
  x->overlapped = over;
  return slowest(b, over < n ? w.background_seconds + s.seconds : commit, &t[M_A_COMMIT]);
}

/* A load from a cold page cache with HSR_CKPT_IN_PLACE=mode: "on" as into a
 * fresh engine (what --resume does), "off" as into one that has trained. */
static hsr_status load_cold(bench_ctx *x, hsr_rt *rt, const char *ck, const char *mode, double *sec, double *data,
                            hsr_ckpt_stats *s) {
  hsr_boot *b = x->boot;
  const char *was = getenv("HSR_CKPT_IN_PLACE");
  char keep[64];
  snprintf(keep, sizeof keep, "%s", was ? was : "");
  if (x->rank == 0) drop_dir(ck);
  HSR_CHECK(boot_barrier(b));
  setenv("HSR_CKPT_IN_PLACE", mode, 1);
  double t0 = clock_s();
  hsr_status st = hsr_ckpt_load(rt, ck, NULL, s);
  double dt = clock_s() - t0;
  if (was)
    setenv("HSR_CKPT_IN_PLACE", keep, 1);
  else
    unsetenv("HSR_CKPT_IN_PLACE");
  HSR_CHECK(st);
  if (s->in_place != !strcmp(mode, "on"))
    return hsr_error(HSR_ERR_INTERNAL, "ckpt bench: a load with HSR_CKPT_IN_PLACE=%s was%s in place", mode,
                     s->in_place ? "" : " not");
  HSR_CHECK(slowest(b, dt, sec));
  return slowest(b, s->data_seconds, data);
}

/* One round: every figure of m_names, in seconds. */
static hsr_status round_once(bench_ctx *x, double *t) {
  char p[4300], ck[4300];
  hsr_boot *b = x->boot;
  hsr_status st = HSR_OK;
  snprintf(ck, sizeof ck, "%s/ckpt", x->base);
  /* one writer, the whole size; then the same file read cold */
  snprintf(p, sizeof p, "%s/seq.bin", x->base);
  if (x->rank == 0) {
    double t0 = clock_s();
    st = write_file(p, (size_t)x->bytes, x->buf, x->chunk);
    t[M_SEQ_W] = clock_s() - t0;
    drop_cache(p);
    t0 = clock_s();
    if (st == HSR_OK) st = read_file(p, x->buf, x->chunk);
    t[M_SEQ_R] = clock_s() - t0;
    unlink(p);
    /* one rank's share, alone */
    snprintf(p, sizeof p, "%s/share.bin", x->base);
    t0 = clock_s();
    if (st == HSR_OK) st = write_file(p, (size_t)x->share, x->buf, x->chunk);
    t[M_SHARE_W] = clock_s() - t0;
    unlink(p);
  }
  HSR_CHECK(boot_bcast(b, &st, sizeof st, 0));
  if (st != HSR_OK) return hsr_error(st, "rank 0's disk baseline failed");
  /* every rank its share, in parallel */
  snprintf(p, sizeof p, "%s/par-%05d.bin", x->base, x->rank);
  HSR_CHECK(boot_barrier(b));
  double t0 = clock_s();
  st = write_file(p, (size_t)(x->bytes / (uint64_t)x->world), x->buf, x->chunk);
  HSR_CHECK(slowest(b, clock_s() - t0, &t[M_PAR_W]));
  drop_cache(p);
  HSR_CHECK(boot_barrier(b));
  t0 = clock_s();
  if (st == HSR_OK) st = read_file(p, x->buf, x->chunk);
  HSR_CHECK(slowest(b, clock_s() - t0, &t[M_PAR_R]));
  unlink(p);
  HSR_CHECK(st);
  /* the save, then the load from a cold cache */
  hsr_ckpt_stats s;
  hsr_ckpt_save_opts o = {NULL, 0, NULL, NULL, NULL, 0};
  if (x->rank == 0) remove_tree(ck); /* the last round's, outside the timing */
  HSR_CHECK(boot_barrier(b));
  t0 = clock_s();
  HSR_CHECK(hsr_ckpt_save(x->rt, ck, &o, &s));
  HSR_CHECK(slowest(b, clock_s() - t0, &t[M_SAVE]));
  HSR_CHECK(slowest(b, s.seconds, &t[M_BLOCKED]));
  HSR_CHECK(slowest(b, s.data_seconds, &t[M_SAVE_DATA]));
  HSR_CHECK(load_cold(x, x->rt, ck, "on", &t[M_LOAD], &t[M_LOAD_DATA], &s));
  x->reads = s.reads, x->readers = s.readers;
  HSR_CHECK(load_cold(x, x->rt, ck, "off", &t[M_LOAD_HELD], &t[M_LOAD_HELD_DATA], &s));
  x->held_reads = s.reads;
  if (x->rt2) { /* the same checkpoint into the other mesh's engine, as a fresh one */
    double data;
    HSR_CHECK(load_cold(x, x->rt2, ck, "on", &t[M_LOAD_OTHER], &data, &s));
  }
  return async_round(x, ck, t);
}

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static hsr_status report(bench_ctx *x, double med[M_COUNT]) {
  bench_args *a = x->a;
  double B = (double)x->bytes, gb = 1e9;
  double seq = B / med[M_SEQ_W] / gb, par = B / med[M_PAR_W] / gb, save = B / med[M_SAVE] / gb;
  double rd = B / med[M_SEQ_R] / gb, prd = B / med[M_PAR_R] / gb, load = B / med[M_LOAD] / gb;
  double held = B / med[M_LOAD_HELD] / gb;
  printf("hsr ckpt bench: %d ranks, mesh %d x %d (replicate x shard), %s; %" PRIu64 " checkpoint bytes (%d units), "
         "largest share %" PRIu64 " bytes; dir %s; median of %d\n",
         x->world, rt_replicate(x->rt), rt_shard(x->rt), rt_strategy_name(a->cfg.strategy), x->bytes,
         a->units, x->share, a->dir, a->repeat);
  printf("%-52s %9s %9s\n", "", "seconds", "GB/s");
  printf("%-52s %9.3f %9.3f\n", "disk: one writer, sequential, fsync (same bytes)", med[M_SEQ_W], seq);
  printf("%-52s %9.3f %9.3f\n", "disk: every rank its share in parallel, fsync", med[M_PAR_W], par);
  printf("%-52s %9.3f %9.3f   %.0f%% of one writer (target >= 70%%)\n", "save (hsr_ckpt_save)", med[M_SAVE], save,
         100 * save / seq);
  printf("%-52s %9.3f %9s   training blocked; one rank's share alone takes %.3f s\n",
         "  blocked in the call (slowest "
         "rank)",
         med[M_BLOCKED], "", med[M_SHARE_W]);
  printf("%-52s %9.3f %9s   its own data file (write, fsync, rename)\n", "  of which the slowest rank's data",
         med[M_SAVE_DATA], "");
  printf("%-52s %9.3f %9.3f\n", "disk: one reader, sequential, cold", med[M_SEQ_R], rd);
  printf("%-52s %9.3f %9.3f\n", "disk: every rank its share in parallel, cold", med[M_PAR_R], prd);
  printf("%-52s %9.3f %9.3f   %.0f%% of one reader, %.0f%% of parallel readers; read %s\n",
         "load, in place (fresh engine: --resume), cold", med[M_LOAD], load, 100 * load / rd, 100 * load / prd,
         x->reads == 1 ? "once" : "twice (HSR_CKPT_BUFFER)");
  if (rt_replicate(x->rt) > 1)
    printf("%-52s %9s %9s   %s\n", "", "", "",
           x->readers == 1 ? "by 1 rank: the replicas split the reads and exchange them"
                           : "by each replica: all of its shard (HSR_CKPT_EXCHANGE=off)");
  printf("%-52s %9.3f %9s   reading and verifying what it needs, installing\n", "  of which the slowest rank's data",
         med[M_LOAD_DATA], "");
  printf("%-52s %9.3f %9.3f   %.0f%% of parallel readers; verified before it is installed, read %s\n",
         "load, held (an engine that has trained), cold", med[M_LOAD_HELD], held, 100 * held / prd,
         x->held_reads == 1 ? "once" : "twice (HSR_CKPT_BUFFER)");
  if (x->rt2)
    printf("%-52s %9.3f %9.3f   into mesh %d x %d (%s), as a job restarted on another layout\n",
           "load onto another mesh, in place, cold", med[M_LOAD_OTHER], B / med[M_LOAD_OTHER] / gb, a->load_r,
           a->load_s, a->load_r > 1 ? "hybrid" : "fsdp");
  double slow = 100 * (med[M_STEP_BG] / med[M_STEP] - 1), ratio = med[M_A_BLOCKED] / med[M_COPY];
  printf("async save (opts.async; after one untimed, which makes its communicator and staging), beside %d training "
         "steps (gathers, reductions, %.0f ms of compute as a wait, AdamW):\n",
         a->steps, a->step_ms);
  printf("%-52s %9.3f %9s   %.2fx one copy of the share from the engine's memory (%.3f s; target <= 1.2x); "
         "%.3f s between two touched buffers\n",
         "  blocked in the call (slowest rank)", med[M_A_BLOCKED], "", ratio, med[M_COPY], med[M_COPY_TOUCHED]);
  printf("%-52s %9.3f %9s   of which its own staging copy (blocked %.2fx it)\n", "  staging", med[M_A_STAGE], "",
         med[M_A_BLOCKED] / med[M_A_STAGE]);
  printf("%-52s %9.3f %9.3f   its data, fsync, agreements, commit; %.0f%% of the parallel write\n",
         "  background write (slowest rank)", med[M_A_WRITE], B / med[M_A_WRITE] / gb,
         100 * (B / med[M_A_WRITE]) / (B / med[M_PAR_W]));
  printf("%-52s %9.3f %9s   without a save in flight\n", "  step", med[M_STEP], "");
  printf("%-52s %9.3f %9s   %+.1f%% (target <= 5%%), over the last round's %d step(s) it overlapped\n",
         "  step while the background write runs", med[M_STEP_BG], "", slow, x->overlapped);
  if (!a->json) return HSR_OK;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "ranks", x->world);
  cJSON_AddNumberToObject(o, "replicate", rt_replicate(x->rt));
  cJSON_AddNumberToObject(o, "shard", rt_shard(x->rt));
  cJSON_AddStringToObject(o, "strategy", rt_strategy_name(a->cfg.strategy));
  cJSON_AddNumberToObject(o, "bytes", B);
  cJSON_AddNumberToObject(o, "share_bytes", (double)x->share);
  cJSON_AddNumberToObject(o, "repeat", a->repeat);
  for (int i = 0; i < M_COUNT; i++)
    if (i != M_LOAD_OTHER || x->rt2) cJSON_AddNumberToObject(o, m_names[i], med[i]);
  if (x->rt2) {
    char m[48];
    snprintf(m, sizeof m, "%dx%d", a->load_r, a->load_s);
    cJSON_AddStringToObject(o, "other_mesh", m);
    cJSON_AddNumberToObject(o, "load_other_mesh_gbps", B / med[M_LOAD_OTHER] / gb);
  }
  cJSON_AddNumberToObject(o, "disk_seq_write_gbps", seq);
  cJSON_AddNumberToObject(o, "save_gbps", save);
  cJSON_AddNumberToObject(o, "disk_parallel_write_gbps", par);
  cJSON_AddNumberToObject(o, "save_vs_disk", save / seq);
  cJSON_AddNumberToObject(o, "disk_seq_read_gbps", rd);
  cJSON_AddNumberToObject(o, "load_gbps", load);
  cJSON_AddNumberToObject(o, "disk_parallel_read_gbps", prd);
  cJSON_AddNumberToObject(o, "load_vs_disk", load / rd);
  cJSON_AddNumberToObject(o, "load_vs_parallel_read", load / prd);
  cJSON_AddNumberToObject(o, "load_reads", x->reads);
  cJSON_AddNumberToObject(o, "load_held_reads", x->held_reads);
  cJSON_AddNumberToObject(o, "load_held_vs_parallel_read", held / prd);
  cJSON_AddNumberToObject(o, "load_readers", x->readers);
  cJSON_AddNumberToObject(o, "steps", a->steps);
  cJSON_AddNumberToObject(o, "step_ms", a->step_ms);
  cJSON_AddNumberToObject(o, "async_blocked_vs_copy", ratio);
  cJSON_AddNumberToObject(o, "async_blocked_vs_stage", med[M_A_BLOCKED] / med[M_A_STAGE]);
  cJSON_AddNumberToObject(o, "async_step_slowdown", med[M_STEP_BG] / med[M_STEP] - 1);
  cJSON_AddNumberToObject(o, "async_write_vs_parallel_write", med[M_PAR_W] / med[M_A_WRITE]);
  cJSON_AddNumberToObject(o, "async_overlapped_steps", x->overlapped);
  char *s = cJSON_Print(o);
  hsr_status st = cli_write_text("--json", a->json, s);
  free(s);
  cJSON_Delete(o);
  return st;
}

/* The synthetic model: `units` units of one 1-D parameter each, filled with
 * pseudo-random values (a disk or file system that compresses must not see
 * zeros). */
static hsr_status setup_model(bench_ctx *x, hsr_rt *rt, int init) {
  uint64_t params = x->a->size / 12, per = params / (uint64_t)x->a->units;
  char name[64];
  for (int u = 0; u < x->a->units; u++) {
    int id;
    int64_t n = (int64_t)(u + 1 < x->a->units ? per : params - per * (uint64_t)(x->a->units - 1));
    snprintf(name, sizeof name, "u%d", u);
    HSR_CHECK(hsr_rt_unit_add(rt, name, 0, &id));
    snprintf(name, sizeof name, "u%d.w", u);
    HSR_CHECK(hsr_rt_param_add(rt, id, name, 1, &n, 0));
  }
  HSR_CHECK(hsr_rt_commit(rt));
  if (!init) return HSR_OK; /* a load fills it */
  uint64_t maxn = params - per * (uint64_t)(x->a->units - 1);
  float *v = malloc((size_t)maxn * sizeof *v + 4);
  if (!v) return hsr_error(HSR_ERR_NOMEM, "ckpt bench: out of memory for %" PRIu64 " values", maxn);
  uint64_t z = 0x9e3779b97f4a7c15ull;
  for (uint64_t i = 0; i < maxn; i++) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    v[i] = (float)(z >> 40) / (float)(1 << 24) - 0.5f;
  }
  hsr_status st = HSR_OK;
  for (int u = 0; u < x->a->units && st == HSR_OK; u++) {
    snprintf(name, sizeof name, "u%d.w", u);
    st = hsr_rt_param_init(rt, name, v);
  }
  free(v);
  x->bytes = 12 * params;
  x->share = (x->bytes + (uint64_t)x->world - 1) / (uint64_t)x->world;
  return st;
}

/* An untimed async save first: the saver's communicator and staging buffer
 * are made once per engine, which a training run pays once. */
static hsr_status warm_up(bench_ctx *x) {
  char ck[4300];
  snprintf(ck, sizeof ck, "%s/warm", x->base);
  hsr_ckpt_save_opts o = {NULL, 0, NULL, NULL, NULL, 1};
  HSR_CHECK(hsr_ckpt_save(x->rt, ck, &o, NULL));
  HSR_CHECK(hsr_ckpt_wait(x->rt, -1, NULL));
  HSR_CHECK(boot_barrier(x->boot));
  if (x->rank == 0) remove_tree(ck);
  return HSR_OK;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[4400];
  while (d && (e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (!lstat(p, &sb) && S_ISDIR(sb.st_mode))
      remove_tree(p);
    else
      unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static hsr_status bench_run(bench_ctx *x) {
  bench_args *a = x->a;
  if (x->rank == 0) {
    snprintf(x->base, sizeof x->base, "%s/hsr-ckpt-bench-%d", a->dir, (int)getpid());
    if (mkdir(x->base, 0755)) x->base[0] = 0;
  }
  HSR_CHECK(boot_bcast(x->boot, x->base, sizeof x->base, 0));
  if (!x->base[0]) return hsr_error(HSR_ERR_IO, "ckpt bench: cannot create a directory under '%s'", a->dir);
  x->chunk = (size_t)8 << 20;
  x->buf = malloc(x->chunk);
  hsr_status st = x->buf ? setup_model(x, x->rt, 1) : hsr_error(HSR_ERR_NOMEM, "ckpt bench: out of memory");
  if (st == HSR_OK && x->rt2) st = setup_model(x, x->rt2, 0);
  for (size_t i = 0; x->buf && i < x->chunk; i++) x->buf[i] = (char)(i * 2654435761u >> 13);
  double *t = calloc((size_t)a->repeat * M_COUNT, sizeof *t), med[M_COUNT], col[100];
  if (!t && st == HSR_OK) st = hsr_error(HSR_ERR_NOMEM, "ckpt bench: out of memory");
  if (st == HSR_OK) st = warm_up(x);
  for (int r = 0; r < a->repeat && st == HSR_OK; r++) st = round_once(x, t + (size_t)r * M_COUNT);
  if (st == HSR_OK && x->rank == 0) {
    for (int m = 0; m < M_COUNT; m++) {
      for (int r = 0; r < a->repeat; r++) col[r] = t[(size_t)r * M_COUNT + m];
      qsort(col, (size_t)a->repeat, sizeof *col, dbl_cmp);
      med[m] = col[a->repeat / 2];
    }
    st = report(x, med);
  }
  free(t);
  free(x->buf);
  boot_barrier(x->boot);
  if (x->rank == 0 && !a->keep_files) remove_tree(x->base);
  if (x->rank == 0 && a->keep_files) printf("checkpoint kept in %s/ckpt\n", x->base);
  return st;
}

/* The model in memory (per parameter: 12 bytes of master and moments, 4 of
 * parameter and 4 of gradient, over S ranks; each host holds its ranks'
 * shares) and, at once on the disk, the last round's checkpoint and the
 * one-writer baseline file: refused before the run when either does not
 * fit. Rank 0 decides for all. */
static hsr_status bench_fits(hsr_boot *b, const bench_args *a) {
  int n = hsr_boot_size(b), here = 0;
  for (int r = 0; r < n; r++) here += !strcmp(boot_hostname_of(b, r), boot_hostname(b));
  double S = a->cfg.strategy == HSR_RT_DDP ? 1 : a->cfg.shard, sz = (double)a->size;
  /* and per rank about 4 shares more: the async save's staging, the load's
   * part, the two buffers of the copy yardstick */
  double mem_need = sz * 20 / 12 * here / S + 4 * sz / n * here, disk_need = 2 * sz;
  if (a->load_s) mem_need += sz * 20 / 12 * here / a->load_s; /* --load-mesh's engine */
  uint64_t mem = 0, disk = 0;
  char msg[512] = "", x[32], y[32];
  if (hsr_boot_rank(b) == 0 && sys_mem_available(&mem) == HSR_OK && mem_need > 0.9 * (double)mem) {
    sys_bytes_text(mem_need, x, sizeof x), sys_bytes_text((double)mem, y, sizeof y);
    snprintf(msg, sizeof msg,
             "--size %zu does not fit in memory: the model's state on the %d rank(s) of this host needs about %s "
             "(20 bytes per parameter over %.0f ranks, and 4 shares of staging), %s is available",
             a->size, here, x, S, y);
  } else if (hsr_boot_rank(b) == 0 && sys_fs_available(a->dir, &disk) == HSR_OK && disk_need > (double)disk) {
    sys_bytes_text(disk_need, x, sizeof x), sys_bytes_text((double)disk, y, sizeof y);
    snprintf(msg, sizeof msg,
             "--size %zu does not fit on the disk of --dir %s: a round holds a checkpoint and the baseline file at "
             "once, %s, and %s is free",
             a->size, a->dir, x, y);
  }
  HSR_CHECK(boot_bcast(b, msg, sizeof msg, 0));
  return msg[0] ? hsr_error(HSR_ERR_INVALID, "%s", msg) : HSR_OK;
}

int ckpt_bench_main(int argc, char **argv) {
  bench_args a;
  int pr = parse(argc, argv, &a);
  if (pr) return pr < 0 ? HSR_EXIT_OK : pr;
  hsr_boot *boot = NULL;
  hsr_topo *topo = NULL;
  hsr_cluster *cl = NULL;
  bench_ctx x = {.a = &a};
  hsr_status st = hsr_boot_init(&boot);
  if (st != HSR_OK) return cli_fail("ckpt bench", st);
  x.boot = boot, x.rank = hsr_boot_rank(boot), x.world = hsr_boot_size(boot);
  if (a.load_r && (long)a.load_r * a.load_s != x.world) {
    if (x.rank == 0)
      fprintf(stderr, "hsr ckpt bench: --load-mesh %dx%d: R x S must be the %d ranks\n", a.load_r, a.load_s, x.world);
    hsr_boot_finalize(boot);
    return HSR_EXIT_USAGE;
  }
  if (!a.cfg.shard) a.cfg.shard = a.cfg.replicate ? x.world / a.cfg.replicate : x.world;
  if (a.cfg.shard < 1) a.cfg.shard = 1;
  if (a.cfg.strategy == HSR_RT_STRATEGY_COUNT) a.cfg.strategy = x.world / a.cfg.shard > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
  if (st == HSR_OK) st = bench_fits(boot, &a);
  if (st == HSR_OK) st = topo_discover(NULL, &topo);
  if (st == HSR_OK) st = cluster_gather(boot, topo, &cl);
  if (st == HSR_OK) st = hsr_rt_create(boot, NULL, cl, &a.cfg, &x.rt);
  if (st == HSR_OK && a.load_r) {
    hsr_rt_config c2 = a.cfg;
    c2.replicate = a.load_r, c2.shard = a.load_s;
    c2.strategy = a.load_r > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
    st = hsr_rt_create(boot, NULL, cl, &c2, &x.rt2);
  }
  if (st == HSR_OK) st = bench_run(&x);
  hsr_status d = hsr_rt_destroy(x.rt), d2 = x.rt2 ? hsr_rt_destroy(x.rt2) : HSR_OK;
  if (d == HSR_OK) d = d2;
  if (st == HSR_OK) st = d;
  cluster_free(cl);
  topo_free(topo);
  int code = st == HSR_OK ? HSR_EXIT_OK : cli_fail("ckpt bench", st);
  hsr_boot_finalize(boot);
  return code;
}
