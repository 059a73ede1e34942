#include "hsr/dtype.h"
#include "common/dtype_internal.h"
#include "common/common_internal.h"

#include <string.h>
#include <strings.h>

size_t dtype_size(hsr_dtype dt) {
  switch (dt) {
  case HSR_F32:
  case HSR_I32: return 4;
  case HSR_F64: return 8;
  case HSR_BF16:
  case HSR_F16: return 2;
  case HSR_U8: return 1;
  default: return 0;
  }
}

static const char *const dtype_names[] = {"f32", "f64", "bf16", "f16", "i32", "u8"};
static const char *const dtype_alias[] = {"float", "double", "bfloat16", "half", "int32", "uint8"};

const char *dtype_name(hsr_dtype dt) { return ((unsigned)dt < HSR_DTYPE_COUNT) ? dtype_names[dt] : "?"; }

hsr_status dtype_parse(const char *s, hsr_dtype *out) {
  for (int i = 0; i < HSR_DTYPE_COUNT; i++)
    if (s && (!strcasecmp(s, dtype_names[i]) || !strcasecmp(s, dtype_alias[i]))) {
      *out = (hsr_dtype)i;
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_INVALID,
                   "unknown dtype '%s' (valid: f32|f64|bf16|f16|i32|u8, or float|double|"
                   "bfloat16|half|int32|uint8)",
                   s ? s : "");
}

static const char *const redop_names[] = {"sum", "avg", "max", NULL};

const char *redop_name(hsr_redop op) { return ((unsigned)op < HSR_REDOP_COUNT) ? redop_names[op] : "?"; }

hsr_status redop_parse(const char *s, hsr_redop *out) {
  int i;
  HSR_CHECK(parse_choice("redop", s, redop_names, &i));
  *out = (hsr_redop)i;
  return HSR_OK;
}
