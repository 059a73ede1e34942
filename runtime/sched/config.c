/* Engine configuration: defaults, flag-value parsers, mesh-shape resolution. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "common/dtype_internal.h"
#include "common/common_internal.h"

static const char *const strategy_names[] = {"ddp", "zero1", "zero2", "fsdp", "hybrid", NULL};
static const char *const sync_names[] = {"full", "none", "rs_only", NULL};
static const char *const outer_names[] = {"none", "optim", NULL};
static const char *const offload_names[] = {"none", "optim", NULL};
static const char *const recompute_names[] = {"none", "full", "selective", NULL};

hsr_status hsr_rt_config_default(hsr_rt_config *c) {
  if (!c) return hsr_error(HSR_ERR_INVALID, "config is NULL");
  memset(c, 0, sizeof *c);
  c->strategy = HSR_RT_FSDP;
  c->reshard = HSR_RT_RESHARD_FULL;
  c->prefetch = 1;
  c->max_live = 0;
  c->param_dtype = HSR_F32;
  c->reduce_dtype = HSR_F32;
  c->sync = HSR_RT_SYNC_FULL;
  c->micro_batches = 1;
  c->align = 16;
  c->num_groups = 1;
  c->groups[0] = (hsr_rt_opt_group){1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  c->poison = -1;
  c->device = HSR_DEVICE_HOST;
  c->device_ordinal = -1;
  return HSR_OK;
}

const char *rt_strategy_name(hsr_rt_strategy s) {
  return s >= 0 && s < HSR_RT_STRATEGY_COUNT ? strategy_names[s] : "?";
}
rt_sharding rt_strategy_sharding(hsr_rt_strategy s) {
  int params = s == HSR_RT_FSDP || s == HSR_RT_HYBRID;
  return (rt_sharding){.params = params, .grads = params || s == HSR_RT_ZERO2};
}
const char *rt_sync_name(hsr_rt_sync s) { return s >= 0 && s <= HSR_RT_SYNC_RS_ONLY ? sync_names[s] : "?"; }
const char *rt_outer_shard_name(hsr_rt_outer o) { return o >= 0 && o <= HSR_RT_OUTER_OPTIM ? outer_names[o] : "?"; }

hsr_status hsr_rt_parse_strategy(const char *s, hsr_rt_strategy *out) {
  int i;
  HSR_CHECK(parse_choice("strategy", s, strategy_names, &i));
  *out = (hsr_rt_strategy)i;
  return HSR_OK;
}

hsr_status rt_parse_sync(const char *s, hsr_rt_sync *out) {
  int i;
  HSR_CHECK(parse_choice("sync", s, sync_names, &i));
  *out = (hsr_rt_sync)i;
  return HSR_OK;
}

hsr_status rt_parse_outer_shard(const char *s, hsr_rt_outer *out) {
  int i;
  HSR_CHECK(parse_choice("outer-shard", s, outer_names, &i));
  *out = (hsr_rt_outer)i;
  return HSR_OK;
}

hsr_status rt_parse_offload(const char *s, hsr_rt_offload *out) {
  int i;
  HSR_CHECK(parse_choice("offload", s, offload_names, &i));
  *out = (hsr_rt_offload)i;
  return HSR_OK;
}

const char *rt_offload_name(hsr_rt_offload o) { return o >= 0 && o <= HSR_RT_OFFLOAD_OPTIM ? offload_names[o] : "?"; }

hsr_status rt_parse_recompute(const char *s, hsr_rt_recompute *out) {
  int i;
  HSR_CHECK(parse_choice("recompute", s, recompute_names, &i));
  *out = (hsr_rt_recompute)i;
  return HSR_OK;
}
const char *hsr_rt_recompute_name(hsr_rt_recompute r) {
  return r >= 0 && r <= HSR_RT_RECOMPUTE_SELECTIVE ? recompute_names[r] : "?";
}

hsr_status rt_parse_device(const char *s, hsr_device_kind *kind, int *ordinal) {
  if (!s || !kind || !ordinal) return hsr_error(HSR_ERR_INVALID, "device: NULL argument");
  if (!strcmp(s, "host") || !strcmp(s, "cpu")) {
    *kind = HSR_DEVICE_HOST;
    *ordinal = -1;
    return HSR_OK;
  }
  if (!strcmp(s, "cuda")) {
    *kind = HSR_DEVICE_CUDA;
    *ordinal = -1;
    return HSR_OK;
  }
  if (!strcmp(s, "sim")) { /* the emulated device: CUDA's stream semantics on the CPU */
    *kind = HSR_DEVICE_SIM;
    *ordinal = -1;
    return HSR_OK;
  }
  long v;
  if (!strncmp(s, "cuda:", 5) && parse_long("device cuda:N", s + 5, 0, 1 << 16, &v) == HSR_OK) {
    *kind = HSR_DEVICE_CUDA;
    *ordinal = (int)v;
    return HSR_OK;
  }
  return hsr_error(HSR_ERR_INVALID, "device '%s' is not valid (valid: host, cuda, cuda:N with N >= 0, sim)", s);
}

hsr_status rt_parse_reshard(const char *s, hsr_rt_reshard *out, int *k) {
  if (!s || !out || !k) return hsr_error(HSR_ERR_INVALID, "reshard: NULL argument");
  if (!strcmp(s, "full")) {
    *out = HSR_RT_RESHARD_FULL;
    *k = 0;
    return HSR_OK;
  }
  if (!strcmp(s, "none")) {
    *out = HSR_RT_RESHARD_NONE;
    *k = 0;
    return HSR_OK;
  }
  if (!strncmp(s, "partial:", 8)) {
    long v;
    if (parse_long("reshard partial:K", s + 8, 1, 1 << 20, &v) != HSR_OK)
      return hsr_error(HSR_ERR_INVALID, "reshard '%s': K must be a positive integer dividing the shard size", s);
    *out = HSR_RT_RESHARD_PARTIAL;
    *k = (int)v;
    return HSR_OK;
  }
  return hsr_error(HSR_ERR_INVALID, "reshard '%s' is not valid (valid: full, none, partial:K with K dividing S)", s);
}

static void divisors(int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int d = 1; d <= n && o + 16 < len; d++)
    if (n % d == 0) o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? ", " : "", d);
}

/* Every fact of strategy and mesh, once: for the engine (S and R resolved
 * on a world) and for the front ends before the launch (S and R as given,
 * 0 when the launch decides). The messages name the flags, which are the
 * config's fields. */
static hsr_status check_mesh(const hsr_rt_config *c, int S, int R, int world) {
  char dv[512], mesh[64];
  if (world)
    snprintf(mesh, sizeof mesh, "a %d x %d mesh (replicate x shard)", R, S);
  else
    snprintf(mesh, sizeof mesh, "--replicate %d", R);
  if (c->strategy == HSR_RT_DDP && S > 1)
    return hsr_error(HSR_ERR_INVALID, "--shard %d with --strategy ddp: ddp does not shard (S = 1; drop --shard)", S);
  if (c->strategy == HSR_RT_FSDP && R > 1)
    return hsr_error(HSR_ERR_INVALID, "%s with --strategy fsdp: fsdp has R = 1 (use --strategy hybrid)", mesh);
  if (c->strategy == HSR_RT_HYBRID && R == 1)
    return hsr_error(HSR_ERR_INVALID, "%s with --strategy hybrid: hybrid needs R > 1 (use --strategy fsdp)", mesh);
  if (c->outer_shard == HSR_RT_OUTER_OPTIM && R == 1 && world)
    return hsr_error(HSR_ERR_INVALID,
                     "--outer-shard optim on a %d x %d mesh: it splits the optimizer state over the R replicas, and "
                     "with R = 1 there are none (give R > 1 replicas: --replicate, or --shard S below the %d ranks; "
                     "or drop --outer-shard)",
                     R, S, world);
  if (c->outer_shard == HSR_RT_OUTER_OPTIM && R == 1)
    return hsr_error(HSR_ERR_INVALID, "--outer-shard optim with --replicate 1: it needs R > 1 replicas to split "
                                      "the optimizer state over");
  if (c->outer_shard == HSR_RT_OUTER_OPTIM && c->strategy != HSR_RT_HYBRID)
    return hsr_error(HSR_ERR_INVALID,
                     "--outer-shard optim with --strategy %s: it splits the optimizer state over the replicas of "
                     "hybrid (use --strategy hybrid with R > 1, or drop --outer-shard)",
                     rt_strategy_name(c->strategy));
  if (c->reshard == HSR_RT_RESHARD_PARTIAL && (c->partial_k < 1 || (S > 0 && S % c->partial_k))) {
    divisors(S, dv, sizeof dv);
    return hsr_error(HSR_ERR_INVALID, "--reshard partial:%d: K must divide the shard size %d (valid K: %s)",
                     c->partial_k, S, dv);
  }
  return HSR_OK;
}

/* The settings that need no mesh. */
static hsr_status check_fields(const hsr_rt_config *c) {
  if (c->strategy < 0 || c->strategy >= HSR_RT_STRATEGY_COUNT)
    return hsr_error(HSR_ERR_INVALID, "strategy %d is not valid", (int)c->strategy);
  if (c->shard < 0 || c->replicate < 0)
    return hsr_error(HSR_ERR_INVALID, "shard %d / replicate %d must be >= 0 (0 = auto)", c->shard, c->replicate);
  if (c->outer_replicas < 0 || (c->outer_replicas > 0 && (c->outer_rank < 0 || c->outer_rank >= c->outer_replicas)))
    return hsr_error(HSR_ERR_INVALID, "outer replica %d of %d (valid: 0 to replicas - 1)", c->outer_rank,
                     c->outer_replicas);
  if (c->outer_shard != HSR_RT_OUTER_NONE && c->outer_shard != HSR_RT_OUTER_OPTIM)
    return hsr_error(HSR_ERR_INVALID, "outer shard %d is not valid (valid: none, optim)", (int)c->outer_shard);
  if (c->offload != HSR_RT_OFFLOAD_NONE && c->offload != HSR_RT_OFFLOAD_OPTIM)
    return hsr_error(HSR_ERR_INVALID, "offload %d is not valid (valid: none, optim)", (int)c->offload);
  hsr_device_kind kind = c->dev ? hsr_device_kind_of(c->dev) : c->device;
  if (c->offload == HSR_RT_OFFLOAD_OPTIM && kind == HSR_DEVICE_HOST)
    return hsr_error(HSR_ERR_INVALID,
                     "--offload optim on the host device: it moves the optimizer state off a device into host "
                     "memory, and on the host path all state already lives in host memory (use --device sim or "
                     "--device cuda with --offload optim, or drop --offload)");
  if (c->param_dtype != HSR_F32 && c->param_dtype != HSR_BF16)
    return hsr_error(HSR_ERR_INVALID, "param dtype %s is not supported (valid: f32, bf16)", dtype_name(c->param_dtype));
  if (c->reduce_dtype != HSR_F32 && c->reduce_dtype != HSR_BF16)
    return hsr_error(HSR_ERR_INVALID, "reduce dtype %s is not supported (valid: f32, bf16)",
                     dtype_name(c->reduce_dtype));
  if (c->micro_batches < 1) return hsr_error(HSR_ERR_INVALID, "micro-batches %d (must be >= 1)", c->micro_batches);
  if (c->recompute < HSR_RT_RECOMPUTE_NONE || c->recompute > HSR_RT_RECOMPUTE_SELECTIVE)
    return hsr_error(HSR_ERR_INVALID, "recompute %d is not valid (valid: none, full, selective)", (int)c->recompute);
  if (c->prefetch < 0 || c->max_live < 0)
    return hsr_error(HSR_ERR_INVALID, "prefetch %d / max-live %d must be >= 0", c->prefetch, c->max_live);
  if (c->sync < HSR_RT_SYNC_FULL || c->sync > HSR_RT_SYNC_RS_ONLY)
    return hsr_error(HSR_ERR_INVALID, "sync mode %d is not valid", (int)c->sync);
  if (c->num_groups < 1 || c->num_groups > HSR_RT_MAX_GROUPS)
    return hsr_error(HSR_ERR_INVALID, "%d optimizer groups (valid: 1 to %d)", c->num_groups, HSR_RT_MAX_GROUPS);
  if (c->align < 1) return hsr_error(HSR_ERR_INVALID, "alignment must be >= 1 element");
  if (c->device != HSR_DEVICE_HOST && c->device != HSR_DEVICE_CUDA && c->device != HSR_DEVICE_SIM)
    return hsr_error(HSR_ERR_INVALID, "device kind %d is not valid (valid: host, cuda, sim)", (int)c->device);
  return HSR_OK;
}

hsr_status rt_config_resolve(const hsr_rt_config *c, int world, int auto_shard, int *S_out, int *R_out) {
  if (!c || world < 0) return hsr_error(HSR_ERR_INVALID, "config resolve: bad arguments");
  char dv[512];
  HSR_CHECK(check_fields(c));
  int S = c->shard, R = c->replicate;
  if (!world) { /* before the launch: what the given values already decide */
    HSR_CHECK(check_mesh(c, S, R, 0));
    if (S_out) *S_out = S;
    if (R_out) *R_out = R;
    return HSR_OK;
  }
  if (c->strategy == HSR_RT_DDP) {
    HSR_CHECK(check_mesh(c, S, 0, 0)); /* ddp does not shard */
    S = 1;
  } else if (S == 0) {
    if (c->strategy == HSR_RT_FSDP)
      S = R ? world / R : world;
    else
      S = auto_shard > 0 ? auto_shard : world;
    if (S < 1) S = 1;
  }
  if (S > world || world % S) {
    divisors(world, dv, sizeof dv);
    return hsr_error(HSR_ERR_INVALID, "shard size %d does not divide the %d ranks (valid: %s)", S, world, dv);
  }
  if (R == 0) R = world / S;
  if (R * S != world)
    return hsr_error(HSR_ERR_INVALID, "mesh %d x %d (replicate x shard) does not cover the %d ranks", R, S, world);
  HSR_CHECK(check_mesh(c, S, R, world));
  if (S_out) *S_out = S;
  if (R_out) *R_out = R;
  return HSR_OK;
}

double rt_lr_at(const rt_lr_schedule *s, int64_t step) {
  if (!s) return 0;
  int64_t it = step > 0 ? step - 1 : 0;
  if (s->warmup > 0 && it < s->warmup) return s->lr * (double)(it + 1) / (double)s->warmup;
  if (s->total <= 0) return s->lr;
  if (it >= s->total) return s->lr_min;
  double ratio = (double)(it - s->warmup) / (double)(s->total - s->warmup);
  return s->lr_min + 0.5 * (1.0 + cos(M_PI * ratio)) * (s->lr - s->lr_min);
}

hsr_status rt_lr_check(const rt_lr_schedule *s) {
  if (!s) return hsr_error(HSR_ERR_INVALID, "learning-rate schedule: NULL");
  if (!(s->lr > 0) || !isfinite(s->lr))
    return hsr_error(HSR_ERR_INVALID, "learning rate %g: must be a positive number", s->lr);
  if (s->lr_min < 0 || s->lr_min > s->lr)
    return hsr_error(HSR_ERR_INVALID, "minimum learning rate %g: must be between 0 and the learning rate %g", s->lr_min,
                     s->lr);
  if (s->warmup < 0 || s->total < 0)
    return hsr_error(HSR_ERR_INVALID, "learning-rate schedule: negative warm-up (%lld) or length (%lld)",
                     (long long)s->warmup, (long long)s->total);
  if (s->total > 0 && s->warmup >= s->total)
    return hsr_error(HSR_ERR_INVALID, "warm-up of %lld steps must be shorter than the %lld-step schedule",
                     (long long)s->warmup, (long long)s->total);
  return HSR_OK;
}
