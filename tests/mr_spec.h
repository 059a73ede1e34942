/* The policy keys the multi-rank runtime tests share in their specs
 * ("strategy=fsdp,S=4,reshard=partial:2,prefetch=1,..."). */
#ifndef HSR_TESTS_MR_SPEC_H
#define HSR_TESTS_MR_SPEC_H

#include <stdlib.h>
#include <string.h>

#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "common/dtype_internal.h"

/* 1 if `key` is a policy key (*st: whether its value parsed), 0 if not. */
static int mr_spec_policy(hsr_rt_config *c, const char *key, const char *v, hsr_status *st) {
  *st = HSR_OK;
  if (!strcmp(key, "strategy"))
    *st = hsr_rt_parse_strategy(v, &c->strategy);
  else if (!strcmp(key, "S"))
    c->shard = atoi(v);
  else if (!strcmp(key, "R"))
    c->replicate = atoi(v);
  else if (!strcmp(key, "reshard"))
    *st = rt_parse_reshard(v, &c->reshard, &c->partial_k);
  else if (!strcmp(key, "prefetch"))
    c->prefetch = atoi(v);
  else if (!strcmp(key, "live"))
    c->max_live = atoi(v);
  else if (!strcmp(key, "sync"))
    *st = rt_parse_sync(v, &c->sync);
  else if (!strcmp(key, "outer"))
    *st = rt_parse_outer_shard(v, &c->outer_shard);
  else if (!strcmp(key, "off"))
    *st = rt_parse_offload(v, &c->offload);
  else if (!strcmp(key, "micro"))
    c->micro_batches = atoi(v);
  else if (!strcmp(key, "clip"))
    c->clip = atof(v);
  else if (!strcmp(key, "pdt"))
    *st = dtype_parse(v, &c->param_dtype);
  else if (!strcmp(key, "rdt"))
    *st = dtype_parse(v, &c->reduce_dtype);
  else if (!strcmp(key, "root"))
    c->root_reshard = atoi(v);
  else if (!strcmp(key, "pstep"))
    c->prefetch_step = atoi(v);
  else if (!strcmp(key, "device"))
    *st = rt_parse_device(v, &c->device, &c->device_ordinal);
  else
    return 0;
  return 1;
}

#endif
