#include "hsr/common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

hsr_status hsr_parse_long(const char *what, const char *s, long min, long max, long *out) {
  if (!s || !*s)
    return hsr_error(HSR_ERR_INVALID, "%s: empty value (expected an integer in [%ld, %ld])", what, min, max);
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end != '\0' || end == s)
    return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not an integer (expected an integer in [%ld, %ld])", what, s, min,
                     max);
  if (v < min || v > max)
    return hsr_error(HSR_ERR_INVALID, "%s: %ld is out of range (valid: %ld to %ld)", what, v, min, max);
  *out = v;
  return HSR_OK;
}

hsr_status hsr_parse_double(const char *what, const char *s, double min, double max, double *out) {
  if (!s || !*s) return hsr_error(HSR_ERR_INVALID, "%s: empty value (expected a number in [%g, %g])", what, min, max);
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end != '\0' || end == s || isnan(v))
    return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not a number (expected a number in [%g, %g])", what, s, min, max);
  if (v < min || v > max)
    return hsr_error(HSR_ERR_INVALID, "%s: %g is out of range (valid: %g to %g)", what, v, min, max);
  *out = v;
  return HSR_OK;
}

hsr_status hsr_parse_size(const char *what, const char *s, size_t *out) {
  if (!s || !*s) return hsr_error(HSR_ERR_INVALID, "%s: empty size (expected e.g. 1024, 64K, 64M, 1G)", what);
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || s[0] == '-')
    return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not a size (expected e.g. 1024, 64K, 64M, 1G)", what, s);
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    case 't':
    case 'T': shift = 40; break;
    default: return hsr_error(HSR_ERR_INVALID, "%s: '%s' has an unknown suffix (valid: K, M, G, T)", what, s);
    }
    end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return hsr_error(HSR_ERR_INVALID, "%s: '%s' has trailing characters (expected e.g. 64M)", what, s);
  }
  if (shift && v > (~0ULL >> shift)) return hsr_error(HSR_ERR_INVALID, "%s: '%s' is too large", what, s);
  *out = (size_t)(v << shift);
  return HSR_OK;
}

hsr_status hsr_parse_choice(const char *what, const char *s, const char *const *choices, int *out) {
  for (int i = 0; choices[i]; i++) {
    if (s && strcasecmp(s, choices[i]) == 0) {
      *out = i;
      return HSR_OK;
    }
  }
  char valid[512];
  size_t off = 0;
  valid[0] = '\0';
  for (int i = 0; choices[i] && off < sizeof valid; i++)
    off += (size_t)snprintf(valid + off, sizeof valid - off, "%s%s", i ? "|" : "", choices[i]);
  return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not valid (valid: %s)", what, s ? s : "", valid);
}

/* NULL when unset; set but empty is an error (it is never the default in disguise). */
static const char *env_value(const char *name, hsr_status *st) {
  const char *v = getenv(name);
  *st = v && !*v ? hsr_error(HSR_ERR_INVALID, "%s is set but empty (unset it for the default)", name) : HSR_OK;
  return v && *v ? v : NULL;
}

hsr_status hsr_env_long(const char *name, long def, long min, long max, long *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return hsr_parse_long(name, v, min, max, out);
}

hsr_status hsr_env_double(const char *name, double def, double min, double max, double *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return hsr_parse_double(name, v, min, max, out);
}

hsr_status hsr_env_size(const char *name, size_t def, size_t *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return hsr_parse_size(name, v, out);
}

hsr_status hsr_env_choice(const char *name, const char *const *choices, int def, int *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return hsr_parse_choice(name, v, choices, out);
}

hsr_status hsr_env_bool(const char *name, int def, int *out) {
  static const char *const names[] = {"0", "1", "false", "true", "no", "yes", "off", "on", NULL};
  int idx;
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  HSR_CHECK(hsr_parse_choice(name, v, names, &idx));
  *out = idx & 1;
  return HSR_OK;
}
