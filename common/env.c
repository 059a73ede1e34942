#include "hsr/common.h"
#include "common/common_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

hsr_status parse_long(const char *what, const char *s, long min, long max, long *out) {
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

hsr_status parse_double(const char *what, const char *s, double min, double max, double *out) {
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

hsr_status parse_size(const char *what, const char *s, size_t *out) {
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

hsr_status parse_choice(const char *what, const char *s, const char *const *choices, int *out) {
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

#define HOSTPORT_FORM "HOST:PORT: a host name or IP address and a port 1 to 65535, comma-separated for several"

/* A DNS name: labels of 1-63 letters, digits and '-' (not at either end),
 * at most 253 in all; all-numeric is an IPv4 address gone wrong, not a name. */
static int host_name_ok(const char *h, size_t n) {
  if (n == 0 || n > 253) return 0;
  size_t label = 0;
  int alpha = 0;
  for (size_t i = 0; i < n; i++) {
    char c = h[i];
    if (c == '.') {
      if (label == 0 || h[i - 1] == '-') return 0;
      label = 0;
      continue;
    }
    int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!letter && !(c >= '0' && c <= '9') && c != '-') return 0;
    if (c == '-' && label == 0) return 0;
    alpha |= letter || c == '-';
    if (++label > 63) return 0;
  }
  return label > 0 && h[n - 1] != '-' && alpha;
}

static hsr_status hostport_one(const char *what, const char *all, const char *p, size_t n) {
  char item[320];
  snprintf(item, sizeof item, "%.*s", (int)(n < 300 ? n : 300), p);
  if (n >= 7 && strncmp(p, "http://", 7) == 0)
    p += 7, n -= 7;
  else if (memchr(p, '/', n))
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s': '%s' is not an address (expected " HOSTPORT_FORM
                     "; http:// in front is the only scheme)",
                     what, all, item);
  const char *colon = NULL;
  for (size_t i = 0; i < n; i++)
    if (p[i] == ':') colon = p + i;
  if (!colon)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' has no port (expected " HOSTPORT_FORM ")", what, all, item);
  size_t hn = (size_t)(colon - p), pn = n - hn - 1;
  const char *port = colon + 1;
  long pv = 0;
  int digits = pn > 0 && pn <= 5;
  for (size_t i = 0; digits && i < pn; i++) {
    digits = port[i] >= '0' && port[i] <= '9';
    pv = pv * 10 + (port[i] - '0');
  }
  if (!digits || pv < 1 || pv > 65535)
    return hsr_error(HSR_ERR_INVALID, "%s '%s': '%s' has no valid port (expected " HOSTPORT_FORM ")", what, all, item);
  char host[256];
  int ok = 0;
  if (hn >= 2 && p[0] == '[' && p[hn - 1] == ']' && hn - 2 < sizeof host) {
    struct in6_addr a6;
    snprintf(host, sizeof host, "%.*s", (int)(hn - 2), p + 1);
    ok = inet_pton(AF_INET6, host, &a6) == 1;
  } else if (hn > 0 && hn < sizeof host) {
    struct in_addr a4;
    snprintf(host, sizeof host, "%.*s", (int)hn, p);
    ok = inet_pton(AF_INET, host, &a4) == 1 || host_name_ok(host, hn);
  }
  if (!ok)
    return hsr_error(HSR_ERR_INVALID,
                     "%s '%s': '%s' has no valid host (expected " HOSTPORT_FORM "; an IPv6 address in brackets)", what,
                     all, item);
  return HSR_OK;
}

hsr_status parse_hostports(const char *what, const char *s, int max) {
  if (!s || !*s) return hsr_error(HSR_ERR_INVALID, "%s: empty value (expected " HOSTPORT_FORM ")", what);
  int count = 0;
  for (const char *p = s;; p++) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 0)
      return hsr_error(HSR_ERR_INVALID, "%s '%s': an empty item in the list (expected " HOSTPORT_FORM ")", what, s);
    if (++count > max) return hsr_error(HSR_ERR_INVALID, "%s '%s': more than %d addresses", what, s, max);
    HSR_CHECK(hostport_one(what, s, p, n));
    if (!e) break;
    p = e;
  }
  return HSR_OK;
}

/* NULL when unset; set but empty is an error (it is never the default in disguise). */
static const char *env_value(const char *name, hsr_status *st) {
  const char *v = getenv(name);
  *st = v && !*v ? hsr_error(HSR_ERR_INVALID, "%s is set but empty (unset it for the default)", name) : HSR_OK;
  return v && *v ? v : NULL;
}

hsr_status env_long(const char *name, long def, long min, long max, long *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return parse_long(name, v, min, max, out);
}

hsr_status env_double(const char *name, double def, double min, double max, double *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return parse_double(name, v, min, max, out);
}

hsr_status env_size(const char *name, size_t def, size_t *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return parse_size(name, v, out);
}

hsr_status env_choice(const char *name, const char *const *choices, int def, int *out) {
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  return parse_choice(name, v, choices, out);
}

hsr_status env_bool(const char *name, int def, int *out) {
  static const char *const names[] = {"0", "1", "false", "true", "no", "yes", "off", "on", NULL};
  int idx = 0;
  hsr_status st;
  const char *v = env_value(name, &st);
  if (!v) {
    *out = def;
    return st;
  }
  HSR_CHECK(parse_choice(name, v, names, &idx));
  *out = idx & 1;
  return HSR_OK;
}
