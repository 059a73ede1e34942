/* hsr coordinator: the coordinator of fault-tolerant training in the
 * foreground: an etcd server (Debian's etcd-server) with its own data
 * directory, made to admit only holders of HSR_FT_TOKEN, and a line each
 * time the quorum of replica groups changes. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "common/env.h"
#include "hsr/ft.h"
#include "ft/ft_internal.h"
#include "common/common_internal.h"
#include "common/sys.h"

static void usage(FILE *f) {
  fprintf(f, "usage: hsr coordinator [--listen ADDR] [--data-dir DIR] [--addr-file FILE] [--json] [--idle-exit S]\n"
             "                       [--name NAME --peer-listen ADDR --cluster NAME=URL,...]\n"
             "Runs the coordinator of fault-tolerant training in the foreground (until SIGINT or SIGTERM): an\n"
             "etcd server that admits only replica groups holding HSR_FT_TOKEN (etcd authentication, root's\n"
             "password), and prints a line each time the quorum of live replica groups changes. Groups join\n"
             "with 'hsr train --coordinator ADDR --replica-id I --replicas N' (docs/fault-tolerance.md).\n"
             "  --listen ADDR       the client address, HOST:PORT (default 127.0.0.1:2379; PORT 0: a free one).\n"
             "                      Loopback unless another host is given\n"
             "  --data-dir DIR      etcd's data (default: a new folder under $TMPDIR, removed at exit; a given\n"
             "                      one is kept)\n"
             "  --addr-file FILE    write the client address (http://HOST:PORT) there once etcd serves\n"
             "  --json              status lines as JSON objects\n"
             "  --idle-exit S       stop once no replica group has been registered for S seconds (hsr-run's\n"
             "                      own coordinator; default: run until a signal)\n"
             "a member of a multi-member etcd (3 members: losing one changes nothing):\n"
             "  --name NAME         this member's name (default hsr0)\n"
             "  --peer-listen ADDR  its peer address, HOST:PORT (default: the client port + 1)\n"
             "  --cluster LIST      every member: NAME=http://HOST:PORT,... of their peer addresses\n"
             "environment: HSR_FT_TOKEN (required), PATH (etcd, from Debian's etcd-server)\n"
             "Exit codes: 0 after SIGINT/SIGTERM, 1 etcd failed, 2 bad usage.\n");
}

typedef struct addr {
  char host[256];
  int port;
} addr;

static hsr_status parse_addr(const char *flag, const char *s, addr *a) {
  const char *p = strncmp(s, "http://", 7) ? s : s + 7, *colon = strrchr(p, ':');
  long port;
  if (!colon || colon == p || (size_t)(colon - p) >= sizeof a->host ||
      parse_long(flag, colon + 1, 0, 65535, &port) != HSR_OK)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': expected HOST:PORT (PORT 0 to 65535, 0: a free one)", flag, s);
  snprintf(a->host, sizeof a->host, "%.*s", (int)(colon - p), p);
  a->port = (int)port;
  /* the host checked as --coordinator's are, before getaddrinfo sees it */
  char probe[300];
  snprintf(probe, sizeof probe, "%s:1", a->host);
  if (parse_hostports(flag, probe, 1) != HSR_OK)
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s': '%s' is not a host name or IP address (expected HOST:PORT, PORT 0 to 65535)", flag, s,
                     a->host);
  return HSR_OK;
}

/* Binds HOST:PORT for a moment: the host must be this machine's, the port
 * free (port 0: the kernel's pick, returned). */
static hsr_status check_bind(const char *flag, addr *a) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(a->host, NULL, &hints, &res) || !res)
    return hsr_error(HSR_ERR_INVALID, "%s: host '%s' does not resolve (give an IPv4 address of this machine)", flag,
                     a->host);
  struct sockaddr_in sa = *(struct sockaddr_in *)res->ai_addr;
  freeaddrinfo(res);
  sa.sin_port = htons((uint16_t)a->port);
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
    int e = errno;
    if (fd >= 0) close(fd);
    return hsr_error(HSR_ERR_INVALID, "%s %s:%d: cannot listen there (%s)", flag, a->host, a->port, strerror(e));
  }
  socklen_t L = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &L);
  a->port = ntohs(sa.sin_port);
  inet_ntop(AF_INET, &sa.sin_addr, a->host, sizeof a->host);
  close(fd);
  return HSR_OK;
}

static int find_etcd(char *out, size_t n) {
  const char *path = getenv("PATH");
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
  for (char *s = buf, *d; (d = strsep(&s, ":"));) {
    snprintf(out, n, "%s/etcd", *d ? d : ".");
    if (access(out, X_OK) == 0) return 1;
  }
  return 0;
}

static volatile sig_atomic_t g_signal;
static void on_signal(int s) { g_signal = s; }

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static void status_line(int json, const char *what, const char *line);

/* Whether any process names `dir` on its command line (etcd runs with
 * --data-dir DIR/etcd): a folder in use is never reaped. */
static int in_use(const char *dir) {
  DIR *d = opendir("/proc");
  if (!d) return 1; /* cannot tell: keep it */
  struct dirent *e;
  int found = 0;
  char p[300], buf[8192];
  size_t L = strlen(dir);
  while (!found && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i + L <= n && !found; i++) found = !memcmp(buf + i, dir, L);
  }
  closedir(d);
  return found;
}

/* Data folders of coordinators that were killed before they could remove
 * theirs (SIGKILL, a crash): named hsr-coordinator.PID.XXXXXX, this user's,
 * removed once PID is gone and no process (their etcd) names them, as
 * hsr-run reaps its session directories. */
static void reap_stale(const char *tmp, int json) {
  DIR *d = opendir(tmp);
  if (!d) return;
  struct dirent *e;
  char path[4400], line[4600];
  while ((e = readdir(d)) != NULL) {
    char *end;
    if (strncmp(e->d_name, "hsr-coordinator.", 16)) continue;
    long pid = strtol(e->d_name + 16, &end, 10);
    if (end == e->d_name + 16 || *end != '.' || strlen(end + 1) != 6 || pid <= 0) continue;
    snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH || in_use(path)) continue;
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0) {
      snprintf(line, sizeof line, "removed %s, the data folder of a coordinator that is gone (pid %ld)", path, pid);
      status_line(json, "reaped", line);
    }
  }
  closedir(d);
}

/* etcd's last lines, when it failed on its own. */
static void tail(const char *log) {
  FILE *f = fopen(log, "r");
  if (!f) return;
  char line[2048], ring[8][2048];
  int n = 0;
  while (fgets(line, sizeof line, f)) snprintf(ring[n++ % 8], sizeof ring[0], "%s", line);
  fclose(f);
  for (int i = n > 8 ? n - 8 : 0; i < n; i++) fprintf(stderr, "  etcd: %s", ring[i % 8]);
}

static void status_line(int json, const char *what, const char *line) {
  time_t t = time(NULL);
  char ts[32];
  strftime(ts, sizeof ts, "%H:%M:%S", localtime(&t));
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "time", (double)t);
    cJSON_AddStringToObject(o, "event", what);
    cJSON_AddStringToObject(o, "text", line);
    char *s = cJSON_PrintUnformatted(o);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
  } else {
    printf("[%s] hsr coordinator: %s\n", ts, line);
  }
  fflush(stdout);
}

int cmd_coordinator(int argc, char **argv) {
  enum { O_LISTEN = 256, O_DATA, O_ADDRF, O_JSON, O_NAME, O_PEER, O_CLUSTER, O_IDLE };
  static const struct option opts[] = {{"listen", required_argument, 0, O_LISTEN},
                                       {"data-dir", required_argument, 0, O_DATA},
                                       {"addr-file", required_argument, 0, O_ADDRF},
                                       {"json", no_argument, 0, O_JSON},
                                       {"name", required_argument, 0, O_NAME},
                                       {"peer-listen", required_argument, 0, O_PEER},
                                       {"cluster", required_argument, 0, O_CLUSTER},
                                       {"idle-exit", required_argument, 0, O_IDLE},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *listen_s = "127.0.0.1:2379", *data = NULL, *addr_file = NULL, *name = NULL, *peer_s = NULL,
             *cluster = NULL;
  int json = 0, c;
  double idle = 0;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(stdout); return HSR_EXIT_OK;
    case O_LISTEN: listen_s = optarg; break;
    case O_DATA: data = optarg; break;
    case O_ADDRF: addr_file = optarg; break;
    case O_JSON: json = 1; break;
    case O_NAME: name = optarg; break;
    case O_PEER: peer_s = optarg; break;
    case O_CLUSTER: cluster = optarg; break;
    case O_IDLE:
      if (parse_double("--idle-exit", optarg, 1, 1e9, &idle) != HSR_OK)
        return cli_usage_error("coordinator", "%s", hsr_last_error());
      break;
    default: return cli_usage_error("coordinator", "unknown option or missing value '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return cli_usage_error("coordinator", "unexpected argument '%s'", argv[optind]);
  addr cl, pe;
  hsr_status st = parse_addr("--listen", listen_s, &cl);
  if (st == HSR_OK && peer_s) st = parse_addr("--peer-listen", peer_s, &pe);
  if (st != HSR_OK) return cli_usage_error("coordinator", "%s", hsr_last_error());
  if ((name || peer_s) && !cluster)
    return cli_usage_error("coordinator", "--name and --peer-listen make a member of a cluster: give --cluster "
                                          "NAME=http://HOST:PORT,... of every member too");
  if (cluster && (!name || !peer_s))
    return cli_usage_error("coordinator", "--cluster needs this member's --name and --peer-listen");
  char self[600] = "";
  if (cluster) {
    snprintf(self, sizeof self, "%s=http://%s:%d", name, pe.host, pe.port);
    char lst[4096];
    int found = 0;
    snprintf(lst, sizeof lst, "%s", cluster);
    for (char *s = lst, *t; (t = strsep(&s, ","));) found |= !strcmp(t, self);
    if (!found)
      return cli_usage_error("coordinator", "--cluster '%s' does not list this member as '%s'", cluster, self);
  }
  /* a missing --data-dir is made, its parents are not: a typo in a parent
   * would otherwise grow a tree somewhere else */
  struct stat dsb;
  if (data &&
      (stat(data, &dsb) == 0 ? path_check_dir("--data-dir", data, 1) : path_check_write("--data-dir", data)) != HSR_OK)
    return cli_usage_error(
        "coordinator", "%s%s", hsr_last_error(),
        strstr(hsr_last_error(), "does not exist") ? " (the coordinator makes the folder, not its parents)" : "");
  if (addr_file && path_check_write("--addr-file", addr_file) != HSR_OK)
    return cli_usage_error("coordinator", "%s", hsr_last_error());
  const char *token = NULL;
  if (env_get_str("HSR_FT_TOKEN", &token) != HSR_OK || !token)
    return cli_usage_error("coordinator", "HSR_FT_TOKEN is not set: the coordinator admits only replica groups "
                                          "that present this token (set the same one for every group)");
  char etcd[4096];
  if (!find_etcd(etcd, sizeof etcd))
    return cli_usage_error("coordinator", "etcd is not on PATH (apt-get install etcd-server)");
  st = check_bind("--listen", &cl);
  if (st == HSR_OK && !peer_s) {
    pe = cl;
    pe.port = cl.port + 1 <= 65535 ? cl.port + 1 : 0;
    if (!strcmp(listen_s + strlen(listen_s) - 2, ":0")) pe.port = 0;
  }
  if (st == HSR_OK) st = check_bind("--peer-listen", &pe);
  if (st != HSR_OK) return cli_usage_error("coordinator", "%s", hsr_last_error());
  if (!cluster) snprintf(self, sizeof self, "%s=http://%s:%d", name ? name : "hsr0", pe.host, pe.port);

  char dir[4096], log[4200], curl_[300], purl[300];
  int made = !data;
  if (data) {
    snprintf(dir, sizeof dir, "%s", data);
    if (mkdir(dir, 0700) && errno != EEXIST)
      return cli_usage_error("coordinator", "--data-dir '%s': cannot make it: %s", dir, strerror(errno));
  } else {
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    reap_stale(tmp, json);
    /* the owner's pid in the name: the next coordinator reaps it once that pid is gone */
    snprintf(dir, sizeof dir, "%s/hsr-coordinator.%ld.XXXXXX", tmp, (long)getpid());
    if (!mkdtemp(dir))
      return cli_usage_error("coordinator", "cannot make a data folder '%s': %s", dir, strerror(errno));
  }
  snprintf(log, sizeof log, "%s/etcd.log", dir);
  snprintf(curl_, sizeof curl_, "http://%s:%d", cl.host, cl.port);
  snprintf(purl, sizeof purl, "http://%s:%d", pe.host, pe.port);
  char edir[4200];
  snprintf(edir, sizeof edir, "%s/etcd", dir);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGPIPE, &sa, NULL); /* its reader gone (| head): stop and remove the data, not die with it */
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* etcd never outlives this process */
    if (getppid() != parent) _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    const char *nm = name ? name : "hsr0";
    /* bcrypt's lowest cost: the token is random (HSR_FT_TOKEN), not a guessable password, and every group's
     * leader authenticates twice at its start: at etcd's default cost (~50 ms of etcd's CPU each) a thousand
     * groups starting at once overrun the requests' bound (hsr bench ft) */
    execl(etcd, "etcd", "--name", nm, "--data-dir", edir, "--listen-client-urls", curl_, "--advertise-client-urls",
          curl_, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl, "--initial-cluster",
          cluster ? cluster : self, "--initial-cluster-state", "new", "--initial-cluster-token", "hsr-ft",
          "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000", "--logger", "zap", "--log-level",
          "warn", "--bcrypt-cost", "4", (char *)NULL);
    _exit(127);
  }
  int rc = HSR_EXIT_FAIL, status = 0, done = 0;
  ft_coord *co = NULL;
  char ver[64] = "?", line[8192];
  if (pid < 0) {
    fprintf(stderr, "hsr coordinator: cannot start etcd: %s\n", strerror(errno));
    goto out;
  }
  st = ft_coord_open(curl_, token, 60, &co, ver, sizeof ver);
  if (waitpid(pid, &status, WNOHANG) == pid) done = 1;
  if (st != HSR_OK || done) {
    fprintf(stderr, "hsr coordinator: etcd at %s did not come up: %s\n", curl_,
            done ? "it exited (its log follows)" : hsr_last_error());
    tail(log);
    rc = st == HSR_ERR_INVALID ? HSR_EXIT_USAGE : HSR_EXIT_FAIL;
    goto out;
  }
  if (addr_file) {
    FILE *f = fopen(addr_file, "w");
    if (f) fprintf(f, "%s\n", curl_), fclose(f);
  }
  snprintf(line, sizeof line,
           "etcd %s serving %s (member %s, data %s%s); groups join with 'hsr train --coordinator %s:%d "
           "--replica-id I --replicas N' and HSR_FT_TOKEN",
           ver, curl_, name ? name : "hsr0", dir, made ? ", removed at exit" : "", cl.host, cl.port);
  status_line(json, "serving", line);
  int down = 0;
  double busy = clock_s(); /* the last moment a group was registered (or the start) */
  while (!g_signal) {
    int changed = 0, groups = 0;
    char q[1024];
    st = ft_coord_watch(co, 1.0, &changed, &groups, q, sizeof q);
    if (st == HSR_OK && groups > 0) busy = clock_s();
    if (idle > 0 && clock_s() - busy > idle) {
      snprintf(line, sizeof line, "no replica group for %.0f s (--idle-exit): stopping", idle);
      status_line(json, "idle", line);
      break;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      done = 1;
      fprintf(stderr, "hsr coordinator: etcd exited on its own (%s %d); its log follows\n",
              WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      tail(log);
      goto out;
    }
    if (st != HSR_OK && !down && !g_signal) {
      snprintf(line, sizeof line, "etcd answers no requests (lost its quorum?): %.900s", hsr_last_error());
      status_line(json, "unavailable", line);
    } else if (st == HSR_OK && (changed || down)) {
      snprintf(line, sizeof line, "quorum: %.1000s", q);
      status_line(json, "quorum", line);
    }
    down = st != HSR_OK;
  }
  rc = HSR_EXIT_OK;
out:
  ft_coord_close(co);
  if (pid > 0 && !done) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) != pid; i++) usleep(50000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
  }
  if (made) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  if (g_signal && rc == HSR_EXIT_OK) {
    snprintf(line, sizeof line, "stopped (signal %d)%s", (int)g_signal, made ? "; data removed" : "");
    status_line(json, "stopped", line);
  }
  return rc;
}
