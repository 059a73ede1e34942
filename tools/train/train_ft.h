/* hsr train's replica groups (hsr/ft.h): --coordinator ADDR --replica-id I
 * --replicas N [--join] [--hash-every N]; what the shared loop calls around
 * each step, and the log's `replicas` and `state_hash`. */
#ifndef HSR_TOOLS_TRAIN_FT_H
#define HSR_TOOLS_TRAIN_FT_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "hsr/ft.h"
#include "train_ckpt.h"

struct train_args;
struct train_run;

typedef struct train_ft {
  const char *coord;
  int id, replicas, join, hash_every;
  int given; /* any of the flags */
  hsr_ft *ft;
  void *prog;       /* the program state's description (train_ft.c) */
  hsr_ft_step last; /* the last step's outcome */
  int have_hash;    /* the last committed step's state_hash was computed */
  uint64_t hash;
  int64_t hash_done;
} train_ft;

enum { TRAIN_OPT_COORD = 0x300, TRAIN_OPT_REPLICA_ID, TRAIN_OPT_REPLICAS, TRAIN_OPT_JOIN, TRAIN_OPT_HASH_EVERY };
void train_ft_usage(FILE *f);
/* 1: ours (parsed), 0: not ours, < 0: bad value (printed; exit 2). */
int train_ft_option(train_ft *f, int code, const char *arg);
/* Flags that need each other or refuse others; 0 or 2 after printing. */
int train_ft_check(const struct train_args *a);

/* After the bootstrap, before the engine: the context, attached to cfg. */
hsr_status train_ft_create(struct train_run *r);
/* After the model's setup (and --resume): into the quorum; *start: the
 * steps done where this group continues. */
hsr_status train_ft_join(struct train_run *r, int64_t *start);
/* Before step s + 1: healing at the boundary (a healed group checks the
 * program state it got against its own flags). */
hsr_status train_ft_begin(struct train_run *r, int64_t s);
/* After the model's step: *again = 1 when the step was dropped (run it
 * again); an error when this group must stop (after saving a checkpoint
 * when the coordinator is gone and this group is the saver). Prints the
 * quorum's changes (rank 0). */
hsr_status train_ft_end(struct train_run *r, int64_t s, const train_ckpt_state *ts, int *again);
/* The log row's fields: replicas, and state_hash every --hash-every steps
 * and at the last (computed here: collective). */
hsr_status train_ft_log(struct train_run *r, int64_t done, cJSON *row);
/* 1 when this group saves checkpoints (no replica groups, or the smallest live id). */
int train_ft_saver(const struct train_run *r);
/* After the last step: every group's final state hash compared. */
hsr_status train_ft_finish(struct train_run *r, int64_t done);
void train_ft_free(struct train_run *r);

#endif
