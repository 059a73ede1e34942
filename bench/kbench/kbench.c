/* hsr-kbench: bandwidth of the kernels/ element-wise kernels, as achieved
 * GB/s and as a fraction of a device-to-device copy measured in the same run
 * (the achievable memory bandwidth). Bytes counted are the bytes each kernel
 * must move: AdamW with an f32 gradient and a bf16 copy reads p, m, v, g and
 * writes p, m, v, copy = 30 bytes per element; a copy moves 2x its size. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hsr/config.h"
#include "common/env.h"
#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "common/common_internal.h"
#include "common/sys.h"
#if HSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct bench_ctx {
  hsr_device *dev;
  hsr_stream *s;
  size_t n;
  float *p, *m, *v, *g, *out, *out2; /* out/out2 also hold 16-bit data */
  double sq;
} bench_ctx;

typedef hsr_status (*bench_fn)(bench_ctx *c);

static hsr_status b_copy(bench_ctx *c) { return hsr_device_copy(c->dev, c->out, c->g, c->n * 4, c->s); }

static const adamw_hparams hp = {
    .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 10, .grad_scale = 1.0f};
static hsr_status b_adamw_f32_bf16(bench_ctx *c) {
  return kernels_adamw(c->dev, c->s, c->n, c->p, c->m, c->v, c->g, HSR_F32, c->out, HSR_BF16, &hp);
}
static hsr_status b_adamw_bf16_bf16(bench_ctx *c) {
  return kernels_adamw(c->dev, c->s, c->n, c->p, c->m, c->v, c->out2, HSR_BF16, c->out, HSR_BF16, &hp);
}
static hsr_status b_adamw_f32_none(bench_ctx *c) {
  return kernels_adamw(c->dev, c->s, c->n, c->p, c->m, c->v, c->g, HSR_F32, NULL, HSR_F32, &hp);
}
static hsr_status b_adamw_f32_f32(bench_ctx *c) {
  return kernels_adamw(c->dev, c->s, c->n, c->p, c->m, c->v, c->g, HSR_F32, c->out, HSR_F32, &hp);
}
static hsr_status b_cast_f32_bf16(bench_ctx *c) {
  return hsr_kernels_cast(c->dev, c->s, c->n, c->g, HSR_F32, c->out, HSR_BF16);
}
static hsr_status b_cast_bf16_f32(bench_ctx *c) {
  return hsr_kernels_cast(c->dev, c->s, c->n, c->out2, HSR_BF16, c->out, HSR_F32);
}
static hsr_status b_cast_f32_f16(bench_ctx *c) {
  return hsr_kernels_cast(c->dev, c->s, c->n, c->g, HSR_F32, c->out, HSR_F16);
}
static hsr_status b_cast_f16_f32(bench_ctx *c) {
  return hsr_kernels_cast(c->dev, c->s, c->n, c->out2, HSR_F16, c->out, HSR_F32);
}
static hsr_status b_axpy_f32(bench_ctx *c) { return hsr_kernels_axpy(c->dev, c->s, c->n, 0.5, c->g, c->out, HSR_F32); }
static hsr_status b_scale_f32(bench_ctx *c) { return kernels_scale(c->dev, c->s, c->n, c->out, HSR_F32, 1.0); }
static hsr_status b_sumsq_f32(bench_ctx *c) { return kernels_sumsq(c->dev, c->s, c->n, c->g, HSR_F32, &c->sq); }

static const struct {
  const char *name;
  bench_fn fn;
  double bytes_per_elem;
  double target; /* fraction of copy bandwidth; 0 = none */
} benches[] = {
    {"copy_d2d", b_copy, 8, 0},
    {"adamw_f32grad_bf16out", b_adamw_f32_bf16, 30, 0.85},
    {"adamw_bf16grad_bf16out", b_adamw_bf16_bf16, 28, 0.85},
    {"adamw_f32grad_f32out", b_adamw_f32_f32, 32, 0.85},
    {"adamw_f32grad_noout", b_adamw_f32_none, 28, 0.85},
    {"cast_f32_bf16", b_cast_f32_bf16, 6, 0.90},
    {"cast_bf16_f32", b_cast_bf16_f32, 6, 0.90},
    {"cast_f32_f16", b_cast_f32_f16, 6, 0.90},
    {"cast_f16_f32", b_cast_f16_f32, 6, 0.90},
    {"axpy_f32", b_axpy_f32, 12, 0},
    {"scale_f32", b_scale_f32, 8, 0},
    {"sumsq_f32", b_sumsq_f32, 4, 0},
};
#define NBENCH (sizeof benches / sizeof benches[0])

static void usage(FILE *f) {
  fprintf(f, "usage: hsr-kbench [--device cuda|host] [--elems N] [--iters N] [--reps N] [--json FILE] [--check]\n"
             "  Bandwidth of the kernels/ element-wise kernels (AdamW, casts, axpy, scale,\n"
             "  sumsq) as GB/s and as a fraction of a device-to-device copy timed in the\n"
             "  same run. Each figure is the best of --reps timings of --iters launches.\n"
             "  --device  cuda (default when a GPU is visible) or host\n"
             "  --elems   elements per array, K/M/G suffixes (default 64M on cuda, 4M on host)\n"
             "  --iters   launches per timing (default 20 on cuda, 3 on host)\n"
             "  --reps    timings per kernel (default 3)\n"
             "  --json    also write the results as JSON to FILE ('-' for stdout)\n"
             "  --check   exit 1 if AdamW < 85%% or a cast < 90%% of the copy bandwidth\n");
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hsr-kbench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see hsr-kbench --help)\n");
  va_end(ap);
  return 2;
}

/* Six arrays of n floats on the device (and n on the host to fill them): refused
 * up front when the device (host: memory) cannot hold them. */
static int check_fit(int kind, size_t n) {
  char need[32], have[32], what[64];
  if (n > ((size_t)1 << 40)) return usage_error("--elems %zu is too large (at most 1T elements)", n);
  double bytes = 6.0 * 4.0 * (double)n + (kind == HSR_DEVICE_CUDA ? 0 : 4.0 * (double)n);
  uint64_t avail = 0;
  snprintf(what, sizeof what, "of memory is available");
#if HSR_HAVE_CUDA
  size_t free_b = 0, total_b = 0;
  if (kind == HSR_DEVICE_CUDA && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    avail = free_b;
    snprintf(what, sizeof what, "is free on the GPU");
  } else if (kind == HSR_DEVICE_CUDA) {
    return 0; /* opening the device reports it */
  }
#endif
  if (kind == HSR_DEVICE_HOST && sys_mem_available(&avail) != HSR_OK) return 0;
  if (bytes <= 0.9 * (double)avail) return 0;
  sys_bytes_text(bytes, need, sizeof need);
  sys_bytes_text((double)avail, have, sizeof have);
  return usage_error("--elems %zu does not fit: 6 arrays of 4-byte elements need %s, %s %s", n, need, have, what);
}

static int fail(hsr_status st, const char *what) {
  fprintf(stderr, "hsr-kbench: %s: %s: %s\n", what, hsr_status_str(st), hsr_last_error());
  return 1;
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},        {"device", required_argument, 0, 'd'},
                                       {"elems", required_argument, 0, 'n'}, {"iters", required_argument, 0, 'i'},
                                       {"reps", required_argument, 0, 'r'},  {"json", required_argument, 0, 'j'},
                                       {"check", no_argument, 0, 'c'},       {0, 0, 0, 0}};
  int kind = device_cuda_count() > 0 ? HSR_DEVICE_CUDA : HSR_DEVICE_HOST, check = 0, c;
  size_t n = 0;
  long iters = 0, reps = 3;
  const char *json_path = NULL;
  static const char *const kinds[] = {"host", "cuda", NULL};
  if (env_check_all(1) != HSR_OK) return usage_error("%s", hsr_last_error());
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hd:n:i:r:j:c", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    switch (c) {
    case 'h': usage(stdout); return 0;
    case 'd': st = parse_choice("--device", optarg, kinds, &kind); break;
    case 'n':
      st = parse_size("--elems", optarg, &n);
      if (st == HSR_OK && n == 0) st = hsr_error(HSR_ERR_INVALID, "--elems 0: give at least 1 element");
      break;
    case 'i': st = parse_long("--iters", optarg, 1, 100000, &iters); break;
    case 'r': st = parse_long("--reps", optarg, 1, 1000, &reps); break;
    case 'j':
      json_path = optarg;
      if (strcmp(optarg, "-")) st = path_check_output("--json", optarg);
      break;
    case 'c': check = 1; break;
    default: return usage_error("unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) {
      fprintf(stderr, "hsr-kbench: %s\n(see hsr-kbench --help)\n", hsr_last_error());
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "hsr-kbench: unexpected argument '%s'\n(see hsr-kbench --help)\n", argv[optind]);
    return 2;
  }
  if (kind == HSR_DEVICE_CUDA && device_cuda_count() == 0)
    return usage_error("--device cuda: no CUDA device is visible (use --device host)");
  if (n == 0) n = kind == HSR_DEVICE_CUDA ? (size_t)64 << 20 : (size_t)4 << 20;
  if (iters == 0) iters = kind == HSR_DEVICE_CUDA ? 20 : 3;
  int fit = check_fit(kind, n);
  if (fit) return fit;

  bench_ctx bc = {.n = n};
  hsr_status st = hsr_device_open((hsr_device_kind)kind, 0, &bc.dev);
  if (st != HSR_OK) return fail(st, "opening the device");
  char devname[256] = "host CPU";
#if HSR_HAVE_CUDA
  struct cudaDeviceProp prop;
  if (kind == HSR_DEVICE_CUDA && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    snprintf(devname, sizeof devname, "%s", prop.name);
#endif
  if ((st = stream_create(bc.dev, 0, &bc.s)) != HSR_OK) return fail(st, "stream");
  float **arrays[] = {&bc.p, &bc.m, &bc.v, &bc.g, &bc.out, &bc.out2};
  float *init = malloc(n * sizeof *init);
  if (!init) return fail(hsr_error(HSR_ERR_NOMEM, "%zu elements", n), "host buffer");
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) { /* xorshift: cheap, non-trivial values */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    init[i] = (float)(x >> 40) * (1.0f / 16777216.0f) - 0.5f;
  }
  for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
    if ((st = hsr_device_alloc(bc.dev, n * 4, (void **)arrays[a])) != HSR_OK) return fail(st, "allocation");
    if ((st = hsr_device_copy(bc.dev, *arrays[a], init, n * 4, bc.s)) != HSR_OK) return fail(st, "upload");
  }
  /* out2 holds bf16 gradients, v (a second moment) must be >= 0 */
  if ((st = hsr_kernels_cast(bc.dev, bc.s, n, bc.g, HSR_F32, bc.out2, HSR_BF16)) != HSR_OK) return fail(st, "init");
  for (size_t i = 0; i < n; i++) init[i] = init[i] * init[i];
  if ((st = hsr_device_copy(bc.dev, bc.v, init, n * 4, bc.s)) != HSR_OK) return fail(st, "upload");
  if ((st = hsr_stream_sync(bc.s, 120.0)) != HSR_OK) return fail(st, "initial sync");
  free(init);

  printf("# hsr-kbench on %s (%s): %zu elements per array, best of %ld x %ld launches\n",
         kind == HSR_DEVICE_CUDA ? "cuda" : "host", devname, n, reps, iters);
  printf("%-24s %10s %12s %10s %9s %9s\n", "kernel", "bytes/elem", "us/launch", "GB/s", "vs copy", "target");
  cJSON *root = cJSON_CreateObject(), *res = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "device", kind == HSR_DEVICE_CUDA ? "cuda" : "host");
  cJSON_AddStringToObject(root, "device_name", devname);
  cJSON_AddNumberToObject(root, "elems", (double)n);
  cJSON_AddNumberToObject(root, "iters", (double)iters);
  cJSON_AddNumberToObject(root, "reps", (double)reps);
  double copy_gbs = 0;
  int missed = 0;
  for (size_t b = 0; b < NBENCH; b++) {
    double best = 1e30;
    for (long r = 0; r < reps + 1; r++) { /* the first round warms up */
      double t0 = clock_s();
      for (long i = 0; i < iters; i++)
        if ((st = benches[b].fn(&bc)) != HSR_OK) return fail(st, benches[b].name);
      if ((st = hsr_stream_sync(bc.s, 300.0)) != HSR_OK) return fail(st, benches[b].name);
      double t = (clock_s() - t0) / (double)iters;
      if (r > 0 && t < best) best = t;
    }
    double gbs = benches[b].bytes_per_elem * (double)n / best / 1e9;
    if (b == 0) copy_gbs = gbs;
    double frac = gbs / copy_gbs;
    /* the targets are GPU targets (H200): on host the figures are informative */
    double target = kind == HSR_DEVICE_CUDA ? benches[b].target : 0;
    int meets = target == 0 || frac >= target;
    if (!meets) missed++;
    char tgt[16] = "-";
    if (target > 0) snprintf(tgt, sizeof tgt, "%.0f%% %s", target * 100, meets ? "ok" : "MISS");
    printf("%-24s %10.0f %12.1f %10.1f %8.1f%% %9s\n", benches[b].name, benches[b].bytes_per_elem, best * 1e6, gbs,
           frac * 100, tgt);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kernel", benches[b].name);
    cJSON_AddNumberToObject(o, "bytes_per_elem", benches[b].bytes_per_elem);
    cJSON_AddNumberToObject(o, "us_per_launch", best * 1e6);
    cJSON_AddNumberToObject(o, "gbs", gbs);
    cJSON_AddNumberToObject(o, "fraction_of_copy", frac);
    if (target > 0) {
      cJSON_AddNumberToObject(o, "target", target);
      cJSON_AddBoolToObject(o, "meets_target", meets);
    }
    cJSON_AddItemToArray(res, o);
  }
  cJSON_AddNumberToObject(root, "copy_gbs", copy_gbs);
  cJSON_AddItemToObject(root, "results", res);
  cJSON_AddNumberToObject(root, "targets_missed", missed);
  printf("copy bandwidth %.1f GB/s; %d kernel(s) below target\n", copy_gbs, missed);
  int rc = 0;
  if (json_path) {
    char *txt = cJSON_Print(root);
    sys_out o;
    hsr_status st = HSR_OK;
    if (!strcmp(json_path, "-")) {
      if (!txt || printf("%s\n", txt) < 0 || fflush(stdout) != 0) st = hsr_error(HSR_ERR_IO, "--json -: write failed");
    } else if ((st = out_open(&o, "--json", json_path, HSR_OUT_WHOLE)) == HSR_OK) {
      if (txt) fprintf(o.f, "%s\n", txt);
      st = txt ? out_close(&o) : (out_abort(&o), hsr_error(HSR_ERR_NOMEM, "out of memory"));
    }
    if (st != HSR_OK) {
      fprintf(stderr, "hsr-kbench: %s\n", hsr_last_error());
      rc = 1;
    }
    free(txt);
  }
  cJSON_Delete(root);
  for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) hsr_device_free(bc.dev, *arrays[a]);
  stream_destroy(bc.s);
  hsr_device_close(bc.dev);
  if (rc) return rc;
  return check && missed ? 1 : 0;
}
