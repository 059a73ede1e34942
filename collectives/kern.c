/* Host data movement for the collectives: a streaming (non-temporal) copy and
 * n-input reductions. Optimised even in Debug builds: the tests move hundreds
 * of MiB and an -O0 loop would dominate the suite's runtime. */
#if !defined(__clang__) /* clang has no optimize pragma (the fuzz build) */
#pragma GCC optimize("O3")
#endif
#include <immintrin.h>
#include <string.h>

#include "kern.h"
#include "hsr/kmath.h"

/* glibc's memcpy never streams below its (huge) non-temporal threshold here,
 * so a copy whose destination is not read again soon writes through the cache
 * twice. Large copies stream instead. */
#define STREAM_MIN_BYTES (256u << 10)

__attribute__((target("avx2"))) static void copy_stream_avx2(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t head = (32 - ((uintptr_t)d & 31)) & 31;
  if (head > n) head = n;
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  size_t blocks = n / 128;
  for (size_t i = 0; i < blocks; i++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(s + 0));
    __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
    _mm256_stream_si256((__m256i *)(d + 0), a);
    _mm256_stream_si256((__m256i *)(d + 32), b);
    _mm256_stream_si256((__m256i *)(d + 64), c);
    _mm256_stream_si256((__m256i *)(d + 96), e);
    s += 128, d += 128;
  }
  n -= blocks * 128;
  _mm_sfence();
  memcpy(d, s, n);
}

void coll_copy(void *dst, const void *src, size_t n, int have_avx2) {
  if (dst == src || n == 0) return;
  if (have_avx2 && n >= STREAM_MIN_BYTES)
    copy_stream_avx2(dst, src, n);
  else
    memcpy(dst, src, n);
}

/* bf16 and f16 are summed in f32 per element and rounded once, with the
 * kernels' casts (one definition of the rounding for the whole project). */
static inline float bf16_to_f32(uint16_t h) { return hsr_km_bf16_to_f32(h); }
static inline uint16_t f32_to_bf16(float f) { return hsr_km_f32_to_bf16(f); }
static inline float f16_to_f32(uint16_t h) { return hsr_km_f16_to_f32(h); }
static inline uint16_t f32_to_f16(float f) { return hsr_km_f32_to_f16(f); }

float coll_half_to_f32(hsr_dtype dt, uint16_t h) { return dt == HSR_BF16 ? bf16_to_f32(h) : f16_to_f32(h); }
uint16_t coll_f32_to_half(hsr_dtype dt, float f) { return dt == HSR_BF16 ? f32_to_bf16(f) : f32_to_f16(f); }

#define BLK 1024

/* out = op over ins[0..nin) (in that order); AVG divides the sum by `divisor`.
 * `out` may alias ins[k] element for element. */
#define REDUCE_LOOP(T, ACC, LOAD, STORE, DIV)                     \
  do {                                                            \
    const T **in = (const T **)ins;                               \
    T *o = out;                                                   \
    ACC acc[BLK];                                                 \
    for (size_t base = 0; base < count; base += BLK) {            \
      size_t m = count - base < BLK ? count - base : BLK;         \
      const T *p0 = in[0] + base;                                 \
      for (size_t i = 0; i < m; i++) acc[i] = LOAD(p0[i]);        \
      for (int k = 1; k < nin; k++) {                             \
        const T *p = in[k] + base;                                \
        if (op == HSR_MAX)                                        \
          for (size_t i = 0; i < m; i++) {                        \
            ACC v = LOAD(p[i]);                                   \
            acc[i] = v > acc[i] ? v : acc[i];                     \
          }                                                       \
        else                                                      \
          for (size_t i = 0; i < m; i++) acc[i] += LOAD(p[i]);    \
      }                                                           \
      if (op == HSR_AVG)                                          \
        for (size_t i = 0; i < m; i++) acc[i] = DIV(acc[i]);      \
      for (size_t i = 0; i < m; i++) o[base + i] = STORE(acc[i]); \
    }                                                             \
  } while (0)

#define ID(x) (x)
#define BF_LOAD(x) bf16_to_f32(x)
#define BF_STORE(x) f32_to_bf16(x)
#define H_LOAD(x) f16_to_f32(x)
#define H_STORE(x) f32_to_f16(x)

/* An ifunc resolver runs before ThreadSanitizer's runtime is up: no clones there. */
#ifdef __SANITIZE_THREAD__
#define HSR_CLONES
#else
#define HSR_CLONES __attribute__((target_clones("avx2", "default")))
#endif

HSR_CLONES static void reduce_f32(void *out, const void **ins, int nin, size_t count, hsr_redop op, float inv) {
#define FDIV(x) ((x)*inv)
  REDUCE_LOOP(float, float, ID, ID, FDIV);
}
static void reduce_f64(void *out, const void **ins, int nin, size_t count, hsr_redop op, double div) {
#define DDIV(x) ((x) / div)
  REDUCE_LOOP(double, double, ID, ID, DDIV);
}
static void reduce_bf16(void *out, const void **ins, int nin, size_t count, hsr_redop op, float div) {
#define HDIV(x) ((x) / div)
  REDUCE_LOOP(uint16_t, float, BF_LOAD, BF_STORE, HDIV);
}
static void reduce_f16(void *out, const void **ins, int nin, size_t count, hsr_redop op, float div) {
  REDUCE_LOOP(uint16_t, float, H_LOAD, H_STORE, HDIV);
}
static void reduce_i32(void *out, const void **ins, int nin, size_t count, hsr_redop op, int64_t div) {
  /* Integers wrap like two's complement (summed in 64 bits, truncated). */
#define IDIV(x) ((x) / div)
#define I_STORE(x) ((int32_t)(uint32_t)(x))
  REDUCE_LOOP(int32_t, int64_t, ID, I_STORE, IDIV);
}
static void reduce_u8(void *out, const void **ins, int nin, size_t count, hsr_redop op, int64_t div) {
#define U_STORE(x) ((uint8_t)(x))
  REDUCE_LOOP(uint8_t, int64_t, ID, U_STORE, IDIV);
}

void coll_reduce(hsr_dtype dt, hsr_redop op, void *out, const void **ins, int nin, size_t count, int divisor) {
  if (count == 0) return;
  switch (dt) {
  case HSR_F32: reduce_f32(out, ins, nin, count, op, 1.0f / (float)divisor); break;
  case HSR_F64: reduce_f64(out, ins, nin, count, op, (double)divisor); break;
  case HSR_BF16: reduce_bf16(out, ins, nin, count, op, (float)divisor); break;
  case HSR_F16: reduce_f16(out, ins, nin, count, op, (float)divisor); break;
  case HSR_I32: reduce_i32(out, ins, nin, count, op, divisor); break;
  case HSR_U8: reduce_u8(out, ins, nin, count, op, divisor); break;
  default: break;
  }
}
