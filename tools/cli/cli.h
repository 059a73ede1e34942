/* Shared pieces of the hsr command-line front end. */
#ifndef HSR_TOOLS_CLI_H
#define HSR_TOOLS_CLI_H

#include "hsr/boot.h"
#include "hsr/common.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "common/common_internal.h"
#include "common/sys.h"

/* Exit codes of every hsr command. */
enum { HSR_EXIT_OK = 0, HSR_EXIT_FAIL = 1, HSR_EXIT_USAGE = 2 };

typedef struct cli_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} cli_command;

/* Prints "hsr <cmd>: <msg>" and a hint to --help on stderr; returns
 * HSR_EXIT_USAGE. Under a launcher, before any bootstrap: said once per job
 * (rank 0; on a job spanning hosts also the first rank of each other host),
 * the other ranks exit 2 silently. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "hsr <cmd>: warning: <msg>" on stderr, once per job as usage errors are. */
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit code of a status, one class per kind of input everywhere: 0 for
 * HSR_OK, HSR_EXIT_USAGE for HSR_ERR_INVALID (bad input: flags, or a file
 * given, such as a checkpoint's manifest, that is not valid), HSR_EXIT_FAIL
 * for any other failure (a read that failed, damaged data, a peer). */
int cli_exit_code(hsr_status st);
/* Prints the status and the last error detail; returns HSR_EXIT_USAGE for
 * HSR_ERR_INVALID (bad input) and HSR_EXIT_FAIL otherwise. Bad input, and an
 * error all ranks share (error_share), once per job as above. */
int cli_fail(const char *cmd, hsr_status st);
/* cli_fail for a multi-rank command after the bootstrap: one line per
 * rank at most: none from a rank that printed a peer's verdict already, rank
 * 0's alone for an error every rank agreed on (error_share), else this
 * rank's. When this rank found a peer that is alive but silent or stopped (it
 * would keep the job alive: srun waits for it), also ends the job a second
 * after the failure was found, so every survivor prints its line first. */
int cli_fail_job(const char *cmd, hsr_status st, hsr_boot *b);
/* An error every rank shares (error_share), printed by rank 0 now,
 * before a teardown that may take longer than the launcher waits once the
 * other ranks have exited: 1 when it is this job's line (said here, or by
 * rank 0), so the caller ends with cli_end_job instead. */
int cli_say_shared(const char *cmd, hsr_status st, hsr_boot *b);
/* cli_fail_job without the line: the exit code, and the job ended as
 * cli_fail_job ends it. */
int cli_end_job(hsr_status st, hsr_boot *b);

/* `text` and a newline as output `path` (out_open, HSR_OUT_WHOLE): every
 * write checked, a device or a FIFO written in place. */
hsr_status cli_write_text(const char *what, const char *path, const char *text);

/* gnuplot drawing into output `path`: the script goes to gnuplot's stdin and
 * the picture comes back on its stdout into sys_out, so no file name (user
 * text) is ever part of a gnuplot script (whose system() runs commands). */
typedef struct cli_plot {
  FILE *script; /* write the script here (no 'set output') */
  int pid;
  sys_out out;
} cli_plot;
hsr_status cli_plot_open(cli_plot *p, const char *what, const char *path);
/* Ends the script, waits for gnuplot, renames the picture into place. */
hsr_status cli_plot_close(cli_plot *p);

/* Weights a command reads (--init): a readable safetensors file or index,
 * or a directory holding model.safetensors.index.json or model.safetensors
 * (runtime/io/safetensors_sharded.h). HSR_ERR_INVALID naming `what` and the path. */
hsr_status cli_check_weights(const char *what, const char *path);
/* A checkpoint path: a directory (a checkpoint or a root) or a root's
 * `latest` file (ckpt_resolve). */
hsr_status cli_check_ckpt(const char *what, const char *path);
/* Where sharded weights go: an existing writable directory, or a missing
 * one whose parent exists (a file there is refused, saying why). */
hsr_status cli_check_out_dir(const char *what, const char *path);

/* Subcommands (one file each under tools/). */
int cmd_version(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_mesh(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_coordinator(int argc, char **argv);

#endif
