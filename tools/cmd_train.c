/* hsr train: the training driver (tools/train, train.h) from the command
 * line: the flags into a configuration, then one job. */
#include "tools/cli/cli.h"
#include "tools/train/train.h"

int cmd_train(int argc, char **argv) {
  train_args a;
  int pr = train_parse(argc, argv, &a);
  if (pr < 0) return HSR_EXIT_OK;
  if (pr > 0) return pr;
  return train_job(&a);
}
