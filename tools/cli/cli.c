/* Front-end helpers that every command uses (tools/ and bench/): usage
 * errors and failures, with the exit codes of cli.h; the check of the
 * weights a command reads. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "runtime/io/safetensors_sharded.h"
#include "common/sys.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

/* ---- one message per job ---------------------------------------------------
 * Before the bootstrap a rank knows its place only from the launcher's
 * environment. Every rank of a job parses the same arguments, so a usage
 * error is said by rank 0 alone; on a job spanning hosts also by the first
 * rank of each other host (a path or a size can differ there). */
static long env_num(const char *const *names) {
  for (int i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    char *end;
    if (!v || !*v) continue;
    long n = strtol(v, &end, 10);
    if (!*end && n >= 0) return n;
  }
  return -1;
}

static int speaks_for_job(void) {
  static const char *const rank[] = {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", NULL};
  static const char *const local[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", NULL};
  static const char *const lsize[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", NULL};
  static const char *const size[] = {"OMPI_COMM_WORLD_SIZE", NULL};
  static const char *const nodes[] = {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", NULL};
  long r = env_num(rank);
  if (r <= 0) return 1;
  long lr = env_num(local), ls = env_num(lsize), n = env_num(size), nn = env_num(nodes);
  int hosts = nn > 1 || (ls > 0 && n > ls);
  return hosts && lr == 0;
}

/* A silent rank lets the speaker's line out first: a launcher that sees a
 * rank fail ends the others, and a silent rank that exited at once could
 * take the job's only message with it. The speaker exits within
 * microseconds, and the launcher then ends this rank; the bound is a
 * backstop (interrupted by any signal). */
static void let_the_speaker_speak(void) {
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  if (!speaks_for_job()) {
    let_the_speaker_speak();
    return HSR_EXIT_USAGE;
  }
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hsr %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see 'hsr %s --help')\n", cmd);
  va_end(ap);
  return HSR_EXIT_USAGE;
}

void cli_warn(const char *cmd, const char *fmt, ...) {
  if (!speaks_for_job()) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hsr %s: warning: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

int cli_exit_code(hsr_status st) {
  return st == HSR_OK ? HSR_EXIT_OK : st == HSR_ERR_INVALID ? HSR_EXIT_USAGE : HSR_EXIT_FAIL;
}

int cli_fail(const char *cmd, hsr_status st) {
  int code = cli_exit_code(st);
  if ((code == HSR_EXIT_USAGE || error_shared()) && !speaks_for_job()) {
    let_the_speaker_speak();
    return code;
  }
  fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
  return code;
}

int cli_fail_job(const char *cmd, hsr_status st, hsr_boot *b) {
  int code = cli_exit_code(st);
  /* a rank that found a peer's failure has printed the verdict: its one line.
   * An error every rank agreed on: rank 0's line. */
  if (b && boot_failure(b)) {
  } else if (b && error_shared() && hsr_boot_size(b) > 1) {
    if (hsr_boot_rank(b) == 0) fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
  } else { /* this rank's own error, after the bootstrap: it says it */
    fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
  }
  fflush(stdout);
  if (b) boot_end_failed_job(b, code, 1.0);
  return code;
}

int cli_say_shared(const char *cmd, hsr_status st, hsr_boot *b) {
  if (st == HSR_OK || !b || boot_failure(b) || !error_shared() || hsr_boot_size(b) < 2) return 0;
  if (hsr_boot_rank(b) == 0) {
    fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
    fflush(stderr);
  }
  return 1;
}

int cli_end_job(hsr_status st, hsr_boot *b) {
  int code = cli_exit_code(st);
  fflush(stdout);
  if (b) boot_end_failed_job(b, code, 1.0);
  return code;
}

hsr_status cli_write_text(const char *what, const char *path, const char *text) {
  if (!text) return hsr_error(HSR_ERR_NOMEM, "%s: out of memory", what);
  sys_out o;
  HSR_CHECK(out_open(&o, what, path, HSR_OUT_WHOLE));
  fputs(text, o.f);
  fputc('\n', o.f);
  return out_close(&o);
}

hsr_status cli_plot_open(cli_plot *p, const char *what, const char *path) {
  memset(p, 0, sizeof *p);
  p->pid = -1;
  HSR_CHECK(out_open(&p->out, what, path, HSR_OUT_WHOLE));
  int in[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    out_abort(&p->out);
    return hsr_error(HSR_ERR_SYSTEM, "%s: pipe: %s", what, strerror(errno));
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) { /* gnuplot: the script on stdin, the picture on stdout */
    dup2(in[0], 0);
    dup2(p->out.fd, 1);
    execlp("gnuplot", "gnuplot", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  if (pid < 0 || !(p->script = fdopen(in[1], "w"))) {
    int e = errno;
    close(in[1]);
    if (pid > 0) waitpid(pid, NULL, 0);
    out_abort(&p->out);
    return hsr_error(HSR_ERR_SYSTEM, "%s: cannot start gnuplot: %s", what, strerror(e));
  }
  p->pid = (int)pid;
  return HSR_OK;
}

hsr_status cli_plot_close(cli_plot *p) {
  if (p->script) fclose(p->script);
  p->script = NULL;
  int status = 0;
  while (p->pid > 0 && waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {}
  p->pid = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    hsr_status st = hsr_error(HSR_ERR_SYSTEM, "%s: gnuplot failed (status %d) drawing '%s'", p->out.what, status,
                              p->out.path ? p->out.path : "");
    out_abort(&p->out);
    return st;
  }
  return out_close(&p->out);
}

hsr_status cli_check_weights(const char *what, const char *path) {
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) return path_check_read(what, path);
  char *file = NULL;
  int is_index = 0;
  hsr_status st = st_set_locate(path, &file, &is_index);
  if (st != HSR_OK) {
    char why[900];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    st = hsr_error(st, "%s: %s", what, why);
  } else {
    st = path_check_read(what, file);
  }
  free(file);
  return st;
}

hsr_status cli_check_ckpt(const char *what, const char *path) {
  struct stat sb;
  const char *slash = path ? strrchr(path, '/') : NULL, *base = slash ? slash + 1 : path;
  if (path && !stat(path, &sb) && S_ISREG(sb.st_mode) && !strcmp(base, "latest")) return path_check_read(what, path);
  return path_check_dir(what, path, 0);
}

hsr_status cli_check_out_dir(const char *what, const char *path) {
  struct stat sb;
  if (!path || !*path) return hsr_error(HSR_ERR_INVALID, "%s: empty path", what);
  if (stat(path, &sb)) return path_check_write(what, path); /* to be made: its parent exists */
  if (!S_ISDIR(sb.st_mode))
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s' is a file: with --max-shard-size the weights are a directory (%s or "
                     "model-00001-of-0000N.safetensors and %s, as save_pretrained writes them)",
                     what, path, HSR_ST_SINGLE_NAME, HSR_ST_INDEX_NAME);
  return path_check_dir(what, path, 1);
}
