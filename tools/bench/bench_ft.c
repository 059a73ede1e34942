/* hsr bench ft: the replica groups' control plane at scale, simulated
 * (ft_sim_run): N leaders speaking the real protocol to a real
 * `hsr coordinator` that this command starts (loopback, a free port, its
 * own token) and stops, for each N of --groups. Reports the vote's latency,
 * the time from a death to the survivors' next committed step, a joiner's
 * admission, etcd's request rate, CPU and memory: a table, and JSON. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tools/cli/cli.h"
#include "hsr/ft.h"
#include "ft/ft_internal.h"
#include "common/common_internal.h"

#define MAX_RUNS 16

static void usage(FILE *f) {
  fprintf(f,
          "usage: hsr bench ft [--groups N[,N...]] [--steps S] [--step-time SEC] [--timeout SEC]\n"
          "                    [--kill K@STEP] [--kill-in-exchange] [--kill-decider] [--stop STEP:SEC] [--restart R@GAP]\n"
          "                    [--group-size S] [--addr-bytes B] [--detect SEC] [--heal SEC] [--json FILE] [--check]\n"
          "Simulates the control plane of replica groups (docs/fault-tolerance.md, \"At scale\"): N groups,\n"
          "each a leader thread running hsr train's own registration, vote and decision code against a real\n"
          "'hsr coordinator' (etcd) that this command starts on 127.0.0.1 and stops. No training: the\n"
          "cross-group all-reduce's outcome and a heal's transfer are modelled.\n"
          "  --groups LIST      simulated groups, one run each (2 to %d; default 8,64)\n"
          "  --steps S          steps per run (default 10)\n"
          "  --step-time SEC    a step's compute before its all-reduce (default 1)\n"
          "  --timeout SEC      HSR_COMM_TIMEOUT (default 4; the cross-group bound is 3/4 of it)\n"
          "  --kill K@STEP      kill K groups at once at the start of STEP (their leases run out)\n"
          "  --kill-in-exchange the killed die inside STEP's commit exchange, their vectors given: the groups\n"
          "                     with smaller ids complete it and commit STEP, the others are in doubt\n"
          "  --kill-decider     the killed include group 0, the smallest participant, which decides every vote:\n"
          "                     the next participant whose predecessors are gone takes over\n"
          "  --stop STEP:SEC    stop one group in STEP's all-reduce for SEC seconds (SIGSTOP)\n"
          "  --restart R@GAP    restart R of the killed with --join once the others committed STEP + GAP\n"
          "  --group-size S     ranks per group: the UCX addresses a record carries (default 8)\n"
          "  --addr-bytes B     one rank's UCX address (default 215: a UCX worker's on this machine)\n"
          "  --detect SEC       how long the link takes to find a killed peer (default 0.05)\n"
          "  --heal SEC         a heal's transfer at both ends (default 0.1)\n"
          "  --json FILE        the results as JSON there too ('-': stdout instead of the table)\n"
          "  --check            exit 1 unless every survivor committed the same steps, named the dead and\n"
          "                     every restarted group was admitted (the outcomes, not the timings)\n"
          "environment: HSR_FT_TOKEN (default: a new random one for the coordinator started here)\n"
          "Exit codes: 0 done, 1 a run failed (or --check found a wrong outcome), 2 bad usage.\n",
          HSR_FT_MAX_REPLICAS);
}

/* The coordinator this command runs, and its etcd. */
typedef struct coord {
  pid_t pid, etcd;
  char dir[256], addr[256];
  double cpu0, cpu1, t0, t1; /* etcd's CPU seconds and the clock at the steps' start and end */
  long rss_kb, hwm_kb;
} coord;

static double proc_cpu_s(pid_t pid) {
  char p[64], buf[1024];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *s = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long proc_kb(pid_t pid, const char *field) {
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  FILE *f = fopen(p, "r");
  long v = 0;
  size_t L = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, field, L)) v = atol(line + L + 1);
  if (f) fclose(f);
  return v;
}

/* etcd: the coordinator's child named etcd. */
static pid_t find_etcd(pid_t parent) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  pid_t found = 0;
  while (d && (e = readdir(d)) && !found) {
    char p[300], buf[512];
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strrchr(buf, ')');
    int pp = 0;
    if (s && strstr(buf, "(etcd)") && sscanf(s + 2, "%*c %d", &pp) == 1 && pp == parent) found = atoi(e->d_name);
  }
  if (d) closedir(d);
  return found;
}

static void nap(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static void coord_stop(coord *c) {
  if (c->pid > 0) {
    kill(c->pid, SIGTERM);
    int status;
    for (int i = 0; i < 200 && waitpid(c->pid, &status, WNOHANG) == 0; i++) nap(0.05);
    if (waitpid(c->pid, &status, WNOHANG) == 0) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, &status, 0);
    }
    c->pid = 0;
  }
  if (c->dir[0]) {
    char f[300];
    snprintf(f, sizeof f, "%s/addr", c->dir);
    unlink(f);
    snprintf(f, sizeof f, "%s/coordinator.log", c->dir);
    unlink(f);
    rmdir(c->dir);
    c->dir[0] = 0;
  }
}

static hsr_status coord_start(coord *c) {
  memset(c, 0, sizeof *c);
  const char *tmp = getenv("TMPDIR");
  snprintf(c->dir, sizeof c->dir, "%s/hsr-bench-ft.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(c->dir)) {
    c->dir[0] = 0;
    return hsr_error(HSR_ERR_IO, "hsr bench ft: cannot make a scratch folder: %s", strerror(errno));
  }
  char af[300], lf[300], self[4096];
  snprintf(af, sizeof af, "%s/addr", c->dir);
  snprintf(lf, sizeof lf, "%s/coordinator.log", c->dir);
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return hsr_error(HSR_ERR_SYSTEM, "hsr bench ft: cannot find its own program");
  self[n] = 0;
  pid_t parent = getpid();
  c->pid = fork();
  if (c->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the coordinator (and so its etcd) ends with this command */
    if (getppid() != parent) _exit(1);
    FILE *f = freopen(lf, "w", stdout);
    (void)f;
    dup2(1, 2);
    execl(self, "hsr", "coordinator", "--listen", "127.0.0.1:0", "--addr-file", af, (char *)NULL);
    _exit(127);
  }
  if (c->pid < 0) return hsr_error(HSR_ERR_SYSTEM, "hsr bench ft: fork: %s", strerror(errno));
  /* etcd starts in about a second; a missing file is checked every 50 ms */
  for (double end = clock_s() + 60; clock_s() < end; nap(0.05)) {
    int status;
    if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
      c->pid = 0;
      return hsr_error(HSR_ERR_STATE, "hsr bench ft: hsr coordinator exited at its start (see %s)", lf);
    }
    FILE *f = fopen(af, "r");
    if (!f) continue;
    int ok = fgets(c->addr, sizeof c->addr, f) != NULL;
    fclose(f);
    c->addr[strcspn(c->addr, "\n")] = 0;
    if (ok && c->addr[0]) {
      c->etcd = find_etcd(c->pid);
      return HSR_OK;
    }
  }
  return hsr_error(HSR_ERR_TIMEOUT, "hsr bench ft: hsr coordinator did not serve within 60 s");
}

static void sample(void *ctx, int phase) {
  coord *c = ctx;
  double cpu = c->etcd ? proc_cpu_s(c->etcd) : 0;
  if (phase == 0) {
    c->cpu0 = cpu, c->t0 = clock_s();
  } else {
    c->cpu1 = cpu, c->t1 = clock_s();
    c->rss_kb = c->etcd ? proc_kb(c->etcd, "VmRSS:") : 0;
    c->hwm_kb = c->etcd ? proc_kb(c->etcd, "VmHWM:") : 0;
  }
}

typedef struct run {
  int groups;
  ft_sim_report r;
  double etcd_cpu, etcd_rss_mb, etcd_hwm_mb, self_rss_mb;
  int ok;
} run;

static int parse_pair(const char *flag, const char *s, char sep, long *a, double *b, long amin, long amax) {
  const char *p = strchr(s, sep);
  char head[64];
  if (!p || (size_t)(p - s) >= sizeof head) return 0;
  snprintf(head, sizeof head, "%.*s", (int)(p - s), s);
  return parse_long(flag, head, amin, amax, a) == HSR_OK && parse_double(flag, p + 1, 0, 1e6, b) == HSR_OK;
}

static void ms(char *buf, size_t n, double s) {
  if (s < 0)
    snprintf(buf, n, "-");
  else
    snprintf(buf, n, "%.1f", s * 1e3);
}

static void secs(char *buf, size_t n, double s) {
  if (s < 0)
    snprintf(buf, n, "-");
  else
    snprintf(buf, n, "%.2f", s);
}

static char *to_json(const ft_sim_config *c, const run *runs, int nr) {
  size_t cap = 4096 + (size_t)nr * 2048, o = 0;
  char *j = malloc(cap);
  if (!j) return NULL;
  o += (size_t)snprintf(j + o, cap - o,
                        "{\"steps\":%d,\"step_s\":%g,\"timeout_s\":%g,\"kill\":%d,\"kill_step\":%d,"
                        "\"kill_in_exchange\":%d,\"stop_step\":%d,\"stop_s\":%g,\"restart\":%d,\"restart_gap\":%d,"
                        "\"group_size\":%d,\"addr_bytes\":%d,"
                        "\"detect_s\":%g,\"heal_s\":%g,\"runs\":[",
                        c->steps, c->step_s, c->timeout_s, c->kill, c->kill_step, c->kill_xchg, c->stop_step, c->stop_s,
                        c->restart, c->restart_gap, c->group_size, c->addr_bytes, c->detect_s, c->heal_s);
  for (int i = 0; i < nr; i++) {
    const ft_sim_report *r = &runs[i].r;
    o += (size_t)snprintf(
        j + o, cap - o,
        "%s{\"groups\":%d,\"ok\":%s,\"setup_s\":%.3f,\"steps_s\":%.3f,\"finish_s\":%.3f,\"votes\":%d,"
        "\"vote_p50_s\":%.5f,\"vote_p99_s\":%.5f,\"vote_max_s\":%.5f,\"period_p50_s\":%.5f,\"period_p99_s\":%.5f,"
        "\"kill_commit_s\":%.3f,\"kill_drops\":%d,\"stop_commit_s\":%.3f,\"stop_drops\":%d,\"admit_s\":%.3f,"
        "\"admit_steps\":%d,\"join_commit_s\":%.3f,\"etcd_requests\":%ld,\"etcd_requests_per_s\":%.1f,"
        "\"etcd_cpu\":%.3f,\"etcd_rss_mb\":%.1f,\"etcd_peak_rss_mb\":%.1f,\"bench_rss_mb\":%.1f,\"survivors\":%d,"
        "\"expected_survivors\":%d,\"same_steps\":%s,\"named_dead\":%d,\"dead\":\"%s\",\"joiners_admitted\":%d,"
        "\"equal_end\":%d,\"failed\":%d,\"failure\":\"",
        i ? "," : "", runs[i].groups, runs[i].ok ? "true" : "false", r->setup_s, r->steps_s, r->finish_s, r->nvotes,
        r->vote_p50, r->vote_p99, r->vote_max, r->period_p50, r->period_p99, r->kill_commit_s, r->kill_drops,
        r->stop_commit_s, r->stop_drops, r->admit_s, r->admit_steps, r->join_commit_s, r->requests, r->requests_per_s,
        runs[i].etcd_cpu, runs[i].etcd_rss_mb, runs[i].etcd_hwm_mb, runs[i].self_rss_mb, r->survivors, r->expected,
        r->same_steps ? "true" : "false", r->named, r->dead, r->admitted, r->equal_end, r->failed);
    for (const char *p = r->failure; *p && o + 8 < cap; p++) /* JSON-escaped */
      o += (size_t)(*p == '"' || *p == '\\'    ? snprintf(j + o, cap - o, "\\%c", *p)
                    : (unsigned char)*p < 0x20 ? snprintf(j + o, cap - o, " ")
                                               : snprintf(j + o, cap - o, "%c", *p));
    o += (size_t)snprintf(j + o, cap - o, "\"}");
  }
  snprintf(j + o, cap - o, "]}");
  return j;
}

int bench_ft(int argc, char **argv) {
  enum {
    O_GROUPS = 256,
    O_STEPS,
    O_STEP,
    O_TIMEOUT,
    O_KILL,
    O_STOP,
    O_KILLX,
    O_KILLD,
    O_RESTART,
    O_SIZE,
    O_ADDR,
    O_DETECT,
    O_HEAL,
    O_JSON,
    O_CHECK
  };
  static const struct option opts[] = {{"groups", required_argument, 0, O_GROUPS},
                                       {"steps", required_argument, 0, O_STEPS},
                                       {"step-time", required_argument, 0, O_STEP},
                                       {"timeout", required_argument, 0, O_TIMEOUT},
                                       {"kill", required_argument, 0, O_KILL},
                                       {"stop", required_argument, 0, O_STOP},
                                       {"kill-in-exchange", no_argument, 0, O_KILLX},
                                       {"kill-decider", no_argument, 0, O_KILLD},
                                       {"restart", required_argument, 0, O_RESTART},
                                       {"group-size", required_argument, 0, O_SIZE},
                                       {"addr-bytes", required_argument, 0, O_ADDR},
                                       {"detect", required_argument, 0, O_DETECT},
                                       {"heal", required_argument, 0, O_HEAL},
                                       {"json", required_argument, 0, O_JSON},
                                       {"check", no_argument, 0, O_CHECK},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  ft_sim_config c = {
      .group_size = 8, .addr_bytes = 215, .steps = 10, .step_s = 1, .timeout_s = 4, .detect_s = 0.05, .heal_s = 0.1};
  int groups[MAX_RUNS] = {8, 64}, ng = 2, check = 0, c_;
  const char *json = NULL;
  long v;
  double d;
  optind = 1;
  opterr = 0;
  while ((c_ = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c_) {
    case 'h': usage(stdout); return HSR_EXIT_OK;
    case O_GROUPS: {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", optarg);
      ng = 0;
      for (char *s = buf, *t; st == HSR_OK && (t = strsep(&s, ","));) {
        if (ng == MAX_RUNS) {
          st = hsr_error(HSR_ERR_INVALID, "--groups: at most %d runs", MAX_RUNS);
          break;
        }
        st = parse_long("--groups", t, 2, HSR_FT_MAX_REPLICAS, &v);
        groups[ng++] = (int)v;
      }
      break;
    }
    case O_STEPS: st = parse_long("--steps", optarg, 1, 1000000, &v), c.steps = (int)v; break;
    case O_STEP: st = parse_double("--step-time", optarg, 0, 3600, &c.step_s); break;
    case O_TIMEOUT: st = parse_double("--timeout", optarg, 0.1, 3600, &c.timeout_s); break;
    case O_KILL:
      if (!parse_pair("--kill", optarg, '@', &v, &d, 1, HSR_FT_MAX_REPLICAS) || d < 1 || d != (int)d)
        st = hsr_error(HSR_ERR_INVALID, "--kill '%s': expected K@STEP (K groups killed at the start of STEP >= 1)",
                       optarg);
      c.kill = (int)v, c.kill_step = (int)d;
      break;
    case O_KILLX: c.kill_xchg = 1; break;
    case O_KILLD: c.kill_decider = 1; break;
    case O_STOP:
      if (!parse_pair("--stop", optarg, ':', &v, &c.stop_s, 1, 1000000) || c.stop_s <= 0)
        st = hsr_error(HSR_ERR_INVALID, "--stop '%s': expected STEP:SEC (a group stopped in STEP for SEC > 0 s)",
                       optarg);
      c.stop_step = (int)v;
      break;
    case O_RESTART:
      if (!parse_pair("--restart", optarg, '@', &v, &d, 1, HSR_FT_MAX_REPLICAS) || d != (int)d)
        st = hsr_error(HSR_ERR_INVALID,
                       "--restart '%s': expected R@GAP (R killed groups restarted GAP steps after "
                       "the kill)",
                       optarg);
      c.restart = (int)v, c.restart_gap = (int)d;
      break;
    case O_SIZE: st = parse_long("--group-size", optarg, 1, 4096, &v), c.group_size = (int)v; break;
    case O_ADDR: st = parse_long("--addr-bytes", optarg, 1, 65536, &v), c.addr_bytes = (int)v; break;
    case O_DETECT: st = parse_double("--detect", optarg, 0, 3600, &c.detect_s); break;
    case O_HEAL: st = parse_double("--heal", optarg, 0, 3600, &c.heal_s); break;
    case O_JSON: json = optarg; break;
    case O_CHECK: check = 1; break;
    default: return cli_usage_error("bench ft", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("bench ft", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("bench ft", "unexpected argument '%s'", argv[optind]);
  if (json && strcmp(json, "-") && path_check_write("--json", json) != HSR_OK)
    return cli_usage_error("bench ft", "%s", hsr_last_error());
  for (int i = 0; i < ng; i++) { /* every run's settings checked before the first starts */
    ft_sim_config t = c;
    t.groups = groups[i];
    t.coordinator = "127.0.0.1:1";
    ft_sim_report r;
    if (c.restart > c.kill)
      return cli_usage_error("bench ft", "--restart %d: only %d group(s) are killed (--kill)", c.restart, c.kill);
    if (c.kill_xchg && !c.kill)
      return cli_usage_error("bench ft", "--kill-in-exchange without --kill K@STEP: no group is killed");
    if (c.kill_decider && !c.kill)
      return cli_usage_error("bench ft", "--kill-decider without --kill K@STEP: no group is killed");
    if (c.kill >= groups[i] - 1)
      return cli_usage_error("bench ft", "--kill %d with --groups %d: at least two groups must survive", c.kill,
                             groups[i]);
    if (c.stop_step && c.stop_step == c.kill_step)
      return cli_usage_error("bench ft", "--stop and --kill at the same step %d: give them different steps",
                             c.kill_step);
    if ((c.kill && c.kill_step > c.steps) || c.stop_step > c.steps ||
        (c.restart && c.kill_step + c.restart_gap >= c.steps))
      return cli_usage_error("bench ft",
                             "--kill, --stop and --restart must happen before the last step "
                             "(--steps %d)",
                             c.steps);
    (void)t, (void)r;
  }
  char tok[40];
  if (!getenv("HSR_FT_TOKEN")) { /* the coordinator started here and its groups share a token of their own */
    FILE *f = fopen("/dev/urandom", "r");
    unsigned char b[16] = {0};
    if (!f || fread(b, 1, sizeof b, f) != sizeof b) {
      if (f) fclose(f);
      fprintf(stderr, "hsr bench ft: cannot read /dev/urandom for a token\n");
      return HSR_EXIT_FAIL;
    }
    fclose(f);
    for (int i = 0; i < 16; i++) snprintf(tok + 2 * i, 3, "%02x", b[i]);
    setenv("HSR_FT_TOKEN", tok, 1);
  }
  run runs[MAX_RUNS];
  memset(runs, 0, sizeof runs);
  int rc = HSR_EXIT_OK, text = !json || strcmp(json, "-");
  for (int i = 0; i < ng; i++) {
    coord co;
    hsr_status st = coord_start(&co);
    run *R = &runs[i];
    R->groups = groups[i];
    if (st == HSR_OK && i == 0 && nice(5) == -1 && errno) /* the leaders below etcd: as if they ran elsewhere */
      cli_warn("bench ft", "cannot lower its own priority (%s): the leaders compete with etcd", strerror(errno));
    if (st == HSR_OK) {
      c.groups = groups[i];
      c.coordinator = co.addr;
      c.sample = sample;
      c.sample_ctx = &co;
      st = ft_sim_run(&c, &R->r);
    }
    coord_stop(&co);
    if (st != HSR_OK) {
      fprintf(stderr, "hsr bench ft: %d groups: %s\n", groups[i], hsr_last_error());
      rc = HSR_EXIT_FAIL;
      break;
    }
    R->etcd_cpu = co.t1 > co.t0 ? (co.cpu1 - co.cpu0) / (co.t1 - co.t0) : 0;
    R->etcd_rss_mb = (double)co.rss_kb / 1024, R->etcd_hwm_mb = (double)co.hwm_kb / 1024;
    R->self_rss_mb = (double)proc_kb(getpid(), "VmHWM:") / 1024;
    const ft_sim_report *r = &R->r;
    R->ok = !r->failure[0] && r->survivors == r->expected && r->same_steps && r->named == r->survivors &&
            r->admitted == c.restart;
    if (text) {
      fprintf(stderr, "hsr bench ft: %d groups: %d of %d survivors finished, %d failed%s%s\n", groups[i], r->survivors,
              r->expected, r->failed, r->failure[0] ? "; first: " : "", r->failure);
    }
    if (check && !R->ok) rc = HSR_EXIT_FAIL;
  }
  if (text) {
    printf("# hsr bench ft: %d steps of %.2f s, HSR_COMM_TIMEOUT %.1f s, groups of %d ranks (%d-byte addresses)",
           c.steps, c.step_s, c.timeout_s, c.group_size, c.addr_bytes);
    if (c.kill) printf("; %d killed at step %d", c.kill, c.kill_step);
    if (c.stop_step) printf("; one stopped at step %d for %.1f s", c.stop_step, c.stop_s);
    if (c.restart) printf("; %d restarted with --join after step %d", c.restart, c.kill_step + c.restart_gap);
    printf("\n| groups | setup (s) | vote p50 (ms) | p99 | max | step p50 (ms) | p99 | kill to commit (s) | drops | "
           "stop to commit (s) | join admitted (s, steps) | etcd req/s | per group | etcd CPU | etcd RSS (MB) | "
           "outcome |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ng && runs[i].groups; i++) {
      const ft_sim_report *r = &runs[i].r;
      char a[6][32];
      ms(a[0], 32, r->vote_p50), ms(a[1], 32, r->vote_p99), ms(a[2], 32, r->vote_max);
      secs(a[3], 32, r->kill_commit_s), secs(a[4], 32, r->stop_commit_s), secs(a[5], 32, r->admit_s);
      printf("| %d | %.1f | %s | %s | %s | %.0f | %.0f | %s | %d | %s | %s, %d | %.0f | %.2f | %.0f%% | %.0f | %s |\n",
             runs[i].groups, r->setup_s, a[0], a[1], a[2], r->period_p50 * 1e3, r->period_p99 * 1e3, a[3],
             r->kill_drops, a[4], a[5], r->admit_steps, r->requests_per_s, r->requests_per_s / runs[i].groups,
             runs[i].etcd_cpu * 100, runs[i].etcd_hwm_mb, runs[i].ok ? "ok" : "WRONG");
    }
    for (int i = 0; i < ng && runs[i].groups; i++) {
      const ft_sim_report *r = &runs[i].r;
      printf("# %d groups: survivors %d/%d, same steps on all: %s, named the dead (%s): %d, joiners admitted: %d, "
             "final state_hash equal on %d%s%s\n",
             runs[i].groups, r->survivors, r->expected, r->same_steps ? "yes" : "NO", r->dead, r->named, r->admitted,
             r->equal_end, r->failure[0] ? "; first failure: " : "", r->failure);
    }
  }
  if (json) {
    char *j = to_json(&c, runs, ng);
    hsr_status st = j ? (strcmp(json, "-") ? cli_write_text("--json", json, j) : HSR_OK)
                      : hsr_error(HSR_ERR_NOMEM, "out of memory");
    if (j && !strcmp(json, "-")) printf("%s\n", j);
    free(j);
    if (st != HSR_OK) return cli_fail("bench ft", st);
  }
  return rc;
}
