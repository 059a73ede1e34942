/* Straightforward reference formulas for the kernels tests (host and GPU):
 * decoding by ldexp and rounding by searching the two nearest candidates in
 * double, independent of the bit tricks in hsr/kmath.h. */
#ifndef HSR_TESTS_KERNELS_REF_H
#define HSR_TESTS_KERNELS_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t ref_rand(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static inline float ref_uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((ref_rand(s) >> 40) * (1.0 / 16777216.0));
}

static inline uint32_t ref_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float ref_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A small float format with `eb` exponent bits and `mb` mantissa bits
 * (bf16: 8/7, f16: 5/10): value of a non-negative, non-NaN encoding, with
 * the all-ones exponent decoded as 2^(emax+1) so that rounding "to inf" is
 * the IEEE unbounded-exponent rule. */
static inline double ref_small_value(uint32_t h, int eb, int mb) {
  int bias = (1 << (eb - 1)) - 1;
  uint32_t e = h >> mb, m = h & ((1u << mb) - 1);
  if (e == (1u << eb) - 1) return ldexp(1.0, bias + 1);
  if (e == 0) return ldexp((double)m, 1 - bias - mb);
  return ldexp((double)((1u << mb) | m), (int)e - bias - mb);
}

/* Decodes sign too; NaN encodings give NaN, all-ones exponent with m=0 inf. */
static inline float ref_small_decode(uint16_t h, int eb, int mb) {
  uint32_t sign = h >> (eb + mb), mag = h & ((1u << (eb + mb)) - 1);
  uint32_t e = mag >> mb, m = mag & ((1u << mb) - 1);
  double v;
  if (e == (1u << eb) - 1)
    v = m ? NAN : INFINITY;
  else
    v = ref_small_value(mag, eb, mb);
  return (float)(sign ? -v : v);
}

/* Rounds a finite or infinite non-NaN float to the small format, nearest,
 * ties to even, by bisection over the (monotonic) encodings. */
static inline uint16_t ref_small_round(float f, int eb, int mb) {
  uint32_t sign = signbit(f) ? 1u << (eb + mb) : 0;
  double a = fabs((double)f);
  uint32_t inf = ((1u << eb) - 1) << mb;
  if (isinf(f)) return (uint16_t)(sign | inf);
  uint32_t lo = 0, hi = inf; /* invariant: value(lo) <= a < value(hi) or a >= value(inf) */
  if (a >= ref_small_value(inf, eb, mb)) return (uint16_t)(sign | inf);
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (ref_small_value(mid, eb, mb) <= a)
      lo = mid;
    else
      hi = mid;
  }
  double dlo = a - ref_small_value(lo, eb, mb), dhi = ref_small_value(hi, eb, mb) - a;
  uint32_t r = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1u) ? hi : lo;
  return (uint16_t)(sign | r);
}

static inline int ref_is_quiet_nan16(uint16_t h, int eb, int mb) {
  uint32_t e = (h >> mb) & ((1u << eb) - 1), m = h & ((1u << mb) - 1);
  return e == (1u << eb) - 1 && (m >> (mb - 1)) == 1;
}

#endif
