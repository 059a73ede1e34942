/* train_run: a program that trains a model with hsr's training driver
 * (tools/train/train.h, the one `hsr train` runs): a configuration from
 * defaults and fields, checked, then one job. Alone it is one rank; under
 * `hsr-run -n N` it is N, sharded as hsr train shards them.
 *
 *   train_run [mlp|gpt|llama] [STEPS] [JSON]
 *
 * Unlike the example models, it calls the front ends' internal API
 * (libhsr_train.a over libhsr.a), not only include/hsr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/train/train.h"

int main(int argc, char **argv) {
  if (argc > 4 || (argc > 1 && !strcmp(argv[1], "--help"))) {
    fprintf(argc > 4 ? stderr : stdout, "usage: train_run [mlp|gpt|llama] [STEPS] [JSON]\n");
    return argc > 4 ? 2 : 0;
  }
  train_args a;
  train_args_default(&a); /* what hsr train does with no flag */
  const char *model = argc > 1 ? argv[1] : "gpt";
  if (!strcmp(model, "mlp"))
    a.model = &train_model_mlp;
  else if (!strcmp(model, "gpt"))
    a.model = &train_model_gpt;
  else if (!strcmp(model, "llama"))
    a.model = &train_model_llama;
  else {
    fprintf(stderr, "train_run: model '%s' is not one of mlp, gpt, llama\n", model);
    return 2;
  }
  a.steps = 20;
  if (argc > 2) {
    char *end;
    errno = 0;
    long n = strtol(argv[2], &end, 10);
    if (errno || *end || end == argv[2] || n < 1 || n > 1000000) {
      fprintf(stderr, "train_run: STEPS '%s' is not a whole number from 1 to 1000000\n", argv[2]);
      return 2;
    }
    a.steps = (int)n;
  }
  /* a small model: fields left at -1 take the model's defaults */
  a.layers = 2;
  a.dim = 64;
  a.batch = 8;
  a.lr = 3e-3f;
  a.progress = 0;                   /* no progress bar: the log lines only */
  a.json = argc > 3 ? argv[3] : NULL; /* hsr train's --json summary */
  int code = train_args_finish(&a); /* the model's defaults and every check, said once per job */
  return code ? code : train_job(&a);
}
