/* Shared pieces of the hsr command-line front end. */
#ifndef HSR_TOOLS_CLI_H
#define HSR_TOOLS_CLI_H

#include "hsr/boot.h"
#include "hsr/common.h"

/* Exit codes of every hsr command. */
enum { HSR_EXIT_OK = 0, HSR_EXIT_FAIL = 1, HSR_EXIT_USAGE = 2 };

typedef struct hsr_cli_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} hsr_cli_command;

/* Prints "hsr <cmd>: <msg>" and a hint to --help on stderr; returns HSR_EXIT_USAGE. */
int hsr_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the status and the last error detail; returns HSR_EXIT_USAGE for
 * HSR_ERR_INVALID (bad input) and HSR_EXIT_FAIL otherwise. */
int hsr_cli_fail(const char *cmd, hsr_status st);
/* hsr_cli_fail for a multi-rank command; when this rank found a peer that is
 * alive but silent or stopped (it would keep the job alive: srun waits for
 * it), also ends the job a second after the failure was found, so every
 * survivor prints its line first. */
int hsr_cli_fail_job(const char *cmd, hsr_status st, hsr_boot *b);

/* Weights a command reads (--init): a readable safetensors file or index,
 * or a directory holding model.safetensors.index.json or model.safetensors
 * (hsr/safetensors_sharded.h). HSR_ERR_INVALID naming `what` and the path. */
hsr_status hsr_cli_check_weights(const char *what, const char *path);
/* A checkpoint path: a directory (a checkpoint or a root) or a root's
 * `latest` file (hsr_ckpt_resolve). */
hsr_status hsr_cli_check_ckpt(const char *what, const char *path);
/* Where sharded weights go: an existing writable directory, or a missing
 * one whose parent exists (a file there is refused, saying why). */
hsr_status hsr_cli_check_out_dir(const char *what, const char *path);

/* Subcommands (one file each under tools/). */
int hsr_cmd_version(int argc, char **argv);
int hsr_cmd_info(int argc, char **argv);
int hsr_cmd_topo(int argc, char **argv);
int hsr_cmd_mesh(int argc, char **argv);
int hsr_cmd_trace(int argc, char **argv);
int hsr_cmd_bench(int argc, char **argv);
int hsr_cmd_train(int argc, char **argv);
int hsr_cmd_eval(int argc, char **argv);
int hsr_cmd_sample(int argc, char **argv);
int hsr_cmd_ckpt(int argc, char **argv);
int hsr_cmd_env(int argc, char **argv);
int hsr_cmd_tune(int argc, char **argv);
int hsr_cmd_coordinator(int argc, char **argv);

#endif
