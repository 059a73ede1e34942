/* Deterministic randomness of the example models: a counter-based hash, so
 * any rank can produce any value (weight, sample, window) without shared
 * state. */
#ifndef HSR_EXAMPLES_EX_RAND_H
#define HSR_EXAMPLES_EX_RAND_H

#include <math.h>
#include <stdint.h>

static inline uint64_t ex_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline uint64_t ex_hash3(uint64_t a, uint64_t b, uint64_t c) { return ex_mix(ex_mix(ex_mix(a) ^ b) ^ c); }
/* A standard normal from a hash (Box-Muller). */
static inline float ex_normal(uint64_t h) {
  double u1 = ((ex_mix(h) >> 11) + 1.0) / 9007199254740993.0,
         u2 = (ex_mix(h ^ 0x5bd1e995ull) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
/* Uniform in [0, 1) from a hash. */
static inline double ex_uniform(uint64_t h) { return (double)(ex_mix(h) >> 11) / 9007199254740992.0; }

#endif
