/* hsr train's checkpoints: --ckpt DIR --save-every N --keep K --resume
 * DIR|latest, and the program state it saves through hsr/ckpt.h (the data
 * position as a global sample index, the RNG, the learning-rate schedule). */
#ifndef HSR_TOOLS_TRAIN_CKPT_H
#define HSR_TOOLS_TRAIN_CKPT_H

#include <stdint.h>
#include <stdio.h>

#include "hsr/boot.h"
#include "hsr/ckpt.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/safetensors.h"

typedef struct train_ckpt {
  const char *dir, *resume; /* --ckpt, --resume */
  int save_every, keep;
  int async_save; /* --async-save */
} train_ckpt;

/* getopt_long codes of --ckpt, --save-every, --keep, --resume, --async-save. */
enum { TRAIN_OPT_CKPT = 0x200, TRAIN_OPT_SAVE_EVERY, TRAIN_OPT_KEEP, TRAIN_OPT_RESUME, TRAIN_OPT_ASYNC_SAVE };
void train_ckpt_usage(FILE *f);
/* 1: the option was one of ours (parsed), 0: not ours, < 0: bad value
 * (printed; exit 2). */
int train_ckpt_option(train_ckpt *c, int code, const char *arg);
/* Flags that need each other; 0 or the exit code (2) after printing. */
int train_ckpt_check(const train_ckpt *c);

/* What the MLP run saves and checks on resume. */
typedef struct train_ckpt_state {
  const char *model;
  int64_t batch;
  uint64_t seed;
  const rt_lr_schedule *sched; /* NULL: constant learning rate */
  /* the model, as the export's __metadata__ (kv[0] "hsr.model" = kind, then
   * its config): saved as the manifest's "model", compared on resume */
  const st_kv *model_meta;
  int nmodel_meta;
} train_ckpt_state;

/* The program state at `done` steps (what a checkpoint saves; what a
 * replica group sends the one it heals, hsr/ft.h), and the check that one
 * describes this run's data stream (`from` names where it came from). */
hsr_status train_ckpt_program(hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t done);
hsr_status train_ckpt_check_program(const hsr_ckpt_state *p, const train_ckpt_state *ts, int64_t step,
                                    const char *from);

/* --resume: loads into rt (collective) and sets *start to the number of
 * steps already trained (0 for a fresh start: --resume latest with no
 * checkpoint yet). Refuses a checkpoint of another batch, seed or model (its
 * kind, or a config that differs from the run's: named). */
hsr_status train_ckpt_resume(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, const train_ckpt_state *ts, int64_t steps,
                             int64_t *start);
/* After `done` steps of `steps`: saves when due (every --save-every steps,
 * and after the last one). Collective. */
hsr_status train_ckpt_after_step(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt, const train_ckpt_state *ts,
                                 int64_t done, int64_t steps);
/* After the last step: --async-save's save in flight commits (or fails: the
 * same on every rank) and is reported. Not collective. */
hsr_status train_ckpt_finish(const train_ckpt *c, hsr_boot *boot, hsr_rt *rt);

#endif
