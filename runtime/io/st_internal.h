/* runtime/ private: what the safetensors reader and writer share. */
#ifndef HSR_RUNTIME_ST_INTERNAL_H
#define HSR_RUNTIME_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* 1 when s[0..n) is valid UTF-8; else 0 and *bad = offset of the bad sequence. */
int st_utf8_valid(const unsigned char *s, size_t n, size_t *bad);
/* The valid dtype names, for error messages. */
const char *st_dtype_list(void);
/* *out = a * b; 1 when that overflows 64 bits. */
static inline int st_mul_overflows(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }

#endif
