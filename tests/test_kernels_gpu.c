/* GPU test of kernels/: every CUDA kernel against the CPU loop on the same
 * inputs. kmath.h pins the rounding of every operation, so the results must
 * be the same bits (GEMM excepted: cuBLAS and OpenBLAS sum in different
 * orders). Also the CUDA device layer: streams with priorities, events,
 * cross-stream ordering, bounded waits. Exits 77 (skip) without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "hsr/kmath.h"
#include "common/dtype_internal.h"
#include "kernels_ref.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static hsr_device *gpu, *cpu;

/* Sizes around every vector width, tail and sumsq chunk boundary, plus a
 * large one (> 1024 sumsq chunks). */
static const size_t sizes[] = {0, 1, 3, 4, 7, 8, 9, 255, 1000, 4097, 65536 + 13, (size_t)5 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define MAXN (((size_t)5 << 20) + 16)

/* Random values with the special ones sprinkled in. */
static void fill_f32(float *x, size_t n, uint64_t seed, float scale) {
  static const uint32_t special[] = {0x7fc00000u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x00000000u,
                                     0x80000000u, 0x00000001u, 0x007fffffu, 0x7f7fffffu, 0x3f808000u,
                                     0x3f818000u, 0x33800000u, 0x477ff000u, 0x387fc000u};
  for (size_t i = 0; i < n; i++) {
    x[i] = ref_uniform(&seed, -scale, scale);
    if (i % 97 == 5) x[i] = ref_float(special[(i / 97) % (sizeof special / sizeof special[0])]);
  }
}

static void *dev_from(const void *host, size_t bytes, size_t offset) {
  void *d = NULL;
  OK(hsr_device_alloc(gpu, bytes + offset + 16, &d));
  OK(hsr_device_copy(gpu, (char *)d + offset, host, bytes, NULL));
  return d;
}

static void to_host(void *host, const void *dev, size_t bytes) { OK(hsr_device_copy(gpu, host, dev, bytes, NULL)); }

static void drain(void) {
  /* the legacy default stream: sync through an event on it */
  dev_event *e = NULL;
  OK(event_create(gpu, &e));
  OK(event_record(e, NULL));
  OK(event_sync(e, 60.0));
  OK(event_destroy(e));
}

static int is_nan(const void *p, hsr_dtype dt) {
  uint16_t h;
  switch (dt) {
  case HSR_F32: return isnan(*(const float *)p);
  case HSR_F64: return isnan(*(const double *)p);
  case HSR_BF16: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7f80;
  default: memcpy(&h, p, 2); return (h & 0x7fff) > 0x7c00;
  }
}

/* Same bits, except that a NaN only has to be a NaN: arithmetic on a NaN
 * keeps its payload on x86 but gives the canonical NaN on the GPU. */
static void expect_same(const char *what, size_t n, const void *a, const void *b, hsr_dtype dt) {
  size_t es = dtype_size(dt);
  if (memcmp(a, b, n * es) == 0) return;
  for (size_t i = 0; i < n; i++) {
    const char *x = (const char *)a + i * es, *y = (const char *)b + i * es;
    if (memcmp(x, y, es) && !(is_nan(x, dt) && is_nan(y, dt)))
      fail_msg("%s n=%zu: element %zu differs between GPU and CPU", what, n, i);
  }
}

static const hsr_dtype float_dts[] = {HSR_F32, HSR_BF16, HSR_F16};

static void test_casts(void **state) {
  (void)state;
  float *src = malloc(MAXN * 4);
  void *want = malloc(MAXN * 4), *got = malloc(MAXN * 4), *in = malloc(MAXN * 4);
  assert_true(src && want && got && in);
  for (size_t k = 0; k < NSIZES; k++)
    for (size_t off = 0; off < 2; off++) /* off=1 element: the unaligned path */
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
          if (a == b) continue;
          size_t n = sizes[k];
          hsr_dtype sdt = float_dts[a], ddt = float_dts[b];
          size_t ss = dtype_size(sdt), ds = dtype_size(ddt);
          fill_f32(src, n, 17 + k, 7e4f);
          OK(hsr_kernels_cast(cpu, NULL, n, src, HSR_F32, in, sdt)); /* f32 -> f32 copies */
          OK(hsr_kernels_cast(cpu, NULL, n, in, sdt, want, ddt));
          char *dsrc = dev_from(in, n * ss, off * ss), *ddst = NULL;
          OK(hsr_device_alloc(gpu, n * ds + 64, (void **)&ddst));
          OK(hsr_kernels_cast(gpu, NULL, n, dsrc + off * ss, sdt, ddst + off * ds, ddt));
          to_host(got, ddst + off * ds, n * ds);
          drain();
          char what[64];
          snprintf(what, sizeof what, "cast %s->%s off %zu", dtype_name(sdt), dtype_name(ddt), off);
          expect_same(what, n, want, got, ddt);
          OK(hsr_device_free(gpu, dsrc));
          OK(hsr_device_free(gpu, ddst));
        }
  free(src), free(want), free(got), free(in);
}

static void test_scale_axpy(void **state) {
  (void)state;
  static const hsr_dtype dts[] = {HSR_F32, HSR_F64, HSR_BF16, HSR_F16};
  float *f = malloc(MAXN * 4);
  void *x = malloc(MAXN * 8), *y = malloc(MAXN * 8), *got = malloc(MAXN * 8);
  assert_true(f && x && y && got);
  for (size_t k = 0; k < NSIZES; k++)
    for (size_t off = 0; off < 2; off++)
      for (int t = 0; t < 4; t++) {
        size_t n = sizes[k];
        hsr_dtype dt = dts[t];
        size_t es = dtype_size(dt);
        fill_f32(f, n, 5 + k, 100.0f);
        if (dt == HSR_F64)
          for (size_t i = 0; i < n; i++) ((double *)x)[i] = f[i] * 1.0000001;
        else
          OK(hsr_kernels_cast(cpu, NULL, n, f, HSR_F32, x, dt));
        fill_f32(f, n, 99 + k, 100.0f);
        if (dt == HSR_F64)
          for (size_t i = 0; i < n; i++) ((double *)y)[i] = f[i] * 0.9999999;
        else
          OK(hsr_kernels_cast(cpu, NULL, n, f, HSR_F32, y, dt));
        char *dx = dev_from(x, n * es, off * es), *dy = dev_from(y, n * es, off * es);
        OK(hsr_kernels_axpy(cpu, NULL, n, -0.37, x, y, dt));
        OK(hsr_kernels_axpy(gpu, NULL, n, -0.37, dx + off * es, dy + off * es, dt));
        to_host(got, dy + off * es, n * es);
        drain();
        expect_same("axpy", n, y, got, dt);
        OK(kernels_scale(cpu, NULL, n, y, dt, 1.0 / 3.0));
        OK(kernels_scale(gpu, NULL, n, dy + off * es, dt, 1.0 / 3.0));
        to_host(got, dy + off * es, n * es);
        drain();
        expect_same("scale", n, y, got, dt);
        OK(hsr_device_free(gpu, dx));
        OK(hsr_device_free(gpu, dy));
      }
  free(f), free(x), free(y), free(got);
}

static void test_adamw(void **state) {
  (void)state;
  size_t n = ((size_t)1 << 20) + 3;
  float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4), *g = malloc(n * 4), *o = malloc(n * 4);
  float *gp = malloc(n * 4), *gm = malloc(n * 4), *gv = malloc(n * 4), *go = malloc(n * 4);
  uint16_t *gb = malloc(n * 2);
  assert_true(p && m && v && g && o && gp && gm && gv && go && gb);
  for (int gdt = 0; gdt < 2; gdt++)
    for (int odt = 0; odt < 3; odt++) /* no output, f32, bf16 */
      for (size_t off = 0; off < 2; off++) {
        hsr_dtype G = gdt ? HSR_BF16 : HSR_F32, O = odt == 2 ? HSR_BF16 : HSR_F32;
        uint64_t seed = 1234;
        for (size_t i = 0; i < n; i++) {
          p[i] = ref_uniform(&seed, -1, 1);
          m[i] = v[i] = 0;
        }
        size_t gs = dtype_size(G), os = dtype_size(O);
        char *dp = dev_from(p, n * 4, off * 4), *dm = dev_from(m, n * 4, off * 4), *dv = dev_from(v, n * 4, off * 4);
        char *dg = NULL, *dout = NULL;
        OK(hsr_device_alloc(gpu, n * 4 + 64, (void **)&dg));
        OK(hsr_device_alloc(gpu, n * 4 + 64, (void **)&dout));
        for (int step = 1; step <= 3; step++) {
          adamw_hparams hp = {.lr = 3e-3f,
                                  .beta1 = 0.9f,
                                  .beta2 = 0.95f,
                                  .eps = 1e-8f,
                                  .weight_decay = 0.1f,
                                  .step = step,
                                  .grad_scale = 0.25f};
          fill_f32(g, n, 777 + (uint64_t)step, 3.0f);
          for (size_t i = 0; i < n; i++)
            if (!isfinite(g[i])) g[i] = 0.5f; /* a NaN gradient would poison both sides equally; keep the check sharp */
          const void *gh = g;
          if (G == HSR_BF16) {
            OK(hsr_kernels_cast(cpu, NULL, n, g, HSR_F32, gb, HSR_BF16));
            gh = gb;
          }
          OK(hsr_device_copy(gpu, dg + off * gs, gh, n * gs, NULL));
          OK(kernels_adamw(cpu, NULL, n, p, m, v, gh, G, odt ? o : NULL, O, &hp));
          OK(kernels_adamw(gpu, NULL, n, (float *)(dp + off * 4), (float *)(dm + off * 4), (float *)(dv + off * 4),
                           dg + off * gs, G, odt ? dout + off * os : NULL, O, &hp));
        }
        to_host(gp, dp + off * 4, n * 4);
        to_host(gm, dm + off * 4, n * 4);
        to_host(gv, dv + off * 4, n * 4);
        if (odt) to_host(go, dout + off * os, n * os);
        drain();
        expect_same("adamw master", n, p, gp, HSR_F32);
        expect_same("adamw m", n, m, gm, HSR_F32);
        expect_same("adamw v", n, v, gv, HSR_F32);
        if (odt) expect_same("adamw param_out", n, o, go, O);
        OK(hsr_device_free(gpu, dp)), OK(hsr_device_free(gpu, dm)), OK(hsr_device_free(gpu, dv));
        OK(hsr_device_free(gpu, dg)), OK(hsr_device_free(gpu, dout));
      }
  free(p), free(m), free(v), free(g), free(o), free(gp), free(gm), free(gv), free(go), free(gb);
}

static void test_sumsq(void **state) {
  (void)state;
  static const hsr_dtype dts[] = {HSR_F32, HSR_F64, HSR_BF16, HSR_F16};
  float *f = malloc(MAXN * 4);
  void *x = malloc(MAXN * 8);
  assert_true(f && x);
  hsr_stream *s = NULL;
  OK(stream_create(gpu, 0, &s));
  for (size_t k = 0; k < NSIZES; k++)
    for (int t = 0; t < 4; t++) {
      size_t n = sizes[k];
      hsr_dtype dt = dts[t];
      size_t es = dtype_size(dt);
      uint64_t seed = 3 + k;
      for (size_t i = 0; i < n; i++) f[i] = ref_uniform(&seed, -50, 50);
      if (dt == HSR_F64)
        for (size_t i = 0; i < n; i++) ((double *)x)[i] = f[i] * 1.0000001;
      else
        OK(hsr_kernels_cast(cpu, NULL, n, f, HSR_F32, x, dt));
      void *dx = dev_from(x, n * es, 0);
      double want = -1, got = -2, got2 = -3;
      OK(kernels_sumsq(cpu, NULL, n, x, dt, &want));
      OK(hsr_device_copy(gpu, dx, x, n * es, s)); /* ordered on s */
      OK(kernels_sumsq(gpu, s, n, dx, dt, &got));
      OK(kernels_sumsq(gpu, s, n, dx, dt, &got2)); /* two queued results, one scratch */
      OK(hsr_stream_sync(s, 60.0));
      if (memcmp(&want, &got, 8) || memcmp(&got, &got2, 8))
        fail_msg("sumsq %s n=%zu: GPU %.17g / %.17g, CPU %.17g", dtype_name(dt), n, got, got2, want);
      OK(hsr_device_free(gpu, dx));
    }
  OK(stream_destroy(s));
  free(f), free(x);
}

static void test_gemm(void **state) {
  (void)state;
  enum { M = 67, N = 45, K = 33 };
  float a[K * M + 64], b[K * N + 64], c[M * N], c0[M * N], got[M * N];
  uint64_t seed = 8;
  for (size_t i = 0; i < sizeof a / 4; i++) a[i] = ref_uniform(&seed, -1, 1);
  for (size_t i = 0; i < sizeof b / 4; i++) b[i] = ref_uniform(&seed, -1, 1);
  for (size_t i = 0; i < M * N; i++) c0[i] = ref_uniform(&seed, -1, 1);
  float *da = dev_from(a, sizeof a, 0), *db = dev_from(b, sizeof b, 0), *dc = NULL;
  OK(hsr_device_alloc(gpu, sizeof c, (void **)&dc));
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      size_t lda = ta ? M : K, ldb = tb ? K : N;
      memcpy(c, c0, sizeof c);
      OK(hsr_device_copy(gpu, dc, c0, sizeof c, NULL));
      OK(hsr_kernels_gemm(cpu, NULL, ta, tb, M, N, K, 0.75f, a, lda, b, ldb, -0.5f, c, N));
      OK(hsr_kernels_gemm(gpu, NULL, ta, tb, M, N, K, 0.75f, da, lda, db, ldb, -0.5f, dc, N));
      to_host(got, dc, sizeof c);
      drain();
      for (int i = 0; i < M * N; i++)
        if (!(fabsf(got[i] - c[i]) <= 1e-4f)) fail_msg("gemm ta=%d tb=%d [%d]: GPU %g CPU %g", ta, tb, i, got[i], c[i]);
    }
  OK(hsr_device_free(gpu, da)), OK(hsr_device_free(gpu, db)), OK(hsr_device_free(gpu, dc));
}

/* Cross-stream ordering: stream b (high priority) waits an event recorded
 * on stream a, then works on a's output. */
static void test_streams_events(void **state) {
  (void)state;
  const size_t n = (size_t)16 << 20;
  float *h = malloc(n * 4), *back = malloc(n * 4);
  assert_true(h && back);
  for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000);
  hsr_stream *a = NULL, *b = NULL;
  dev_event *e = NULL;
  OK(stream_create(gpu, 0, &a));
  OK(stream_create(gpu, 1, &b));
  assert_non_null(stream_native(a));
  OK(event_create(gpu, &e));
  float *d = NULL;
  OK(hsr_device_alloc(gpu, n * 4, (void **)&d));
  OK(hsr_device_memset(gpu, d, 0, n * 4, a));
  OK(hsr_device_copy(gpu, d, h, n * 4, a));
  OK(kernels_scale(gpu, a, n, d, HSR_F32, 2.0));
  OK(event_record(e, a));
  OK(stream_wait_event(b, e));
  OK(kernels_scale(gpu, b, n, d, HSR_F32, 0.5)); /* must see a's x2 */
  OK(hsr_kernels_axpy(gpu, b, n, 1.0, d, d, HSR_F32));
  OK(hsr_device_copy(gpu, back, d, n * 4, b));
  OK(hsr_stream_sync(b, 60.0));
  int done = 0;
  OK(event_query(e, &done));
  assert_int_equal(done, 1);
  for (size_t i = 0; i < n; i++)
    if (back[i] != 2.0f * (float)(i % 1000)) fail_msg("stream ordering: [%zu] = %g", i, back[i]);
  /* a zero timeout on busy work reports a timeout, not a hang */
  for (int r = 0; r < 20; r++) OK(kernels_scale(gpu, a, n, d, HSR_F32, 1.0));
  hsr_status st = hsr_stream_sync(a, 0.0);
  assert_true(st == HSR_OK || st == HSR_ERR_TIMEOUT);
  OK(hsr_stream_sync(a, 60.0));
  OK(hsr_device_free(gpu, d));
  OK(event_destroy(e));
  OK(stream_destroy(a));
  OK(stream_destroy(b));
  hsr_device *bad = NULL;
  assert_int_equal(hsr_device_open(HSR_DEVICE_CUDA, device_cuda_count(), &bad), HSR_ERR_NOT_FOUND);
  free(h), free(back);
}

int main(void) {
  int count = device_cuda_count();
  if (count == 0) {
    printf("no CUDA device: skipping the GPU kernel tests\n");
    return 77;
  }
  if (hsr_device_open(HSR_DEVICE_CUDA, 0, &gpu) != HSR_OK || hsr_device_open(HSR_DEVICE_HOST, 0, &cpu) != HSR_OK) {
    fprintf(stderr, "cannot open the devices: %s\n", hsr_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_casts), cmocka_unit_test(test_scale_axpy), cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_sumsq), cmocka_unit_test(test_gemm),       cmocka_unit_test(test_streams_events),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hsr_device_close(gpu);
  hsr_device_close(cpu);
  return rc;
}
