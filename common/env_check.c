/* Validation against the HSR_* registry (env_table.c): one check per kind,
 * the readers built on it, the whole-environment check with the nearest
 * name for a typo. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/common_internal.h"

extern char **environ;

#define MAX_CHOICES 16

const env_info *env_find(const char *name) {
  for (int i = 0; name && i < env_count(); i++)
    if (!strcmp(env_at(i)->name, name)) return env_at(i);
  return NULL;
}

/* "a|b|c" -> {"a", "b", "c", NULL} in buf. */
static int split_choices(const char *choices, char *buf, size_t len, const char **out) {
  snprintf(buf, len, "%s", choices ? choices : "");
  int n = 0;
  for (char *sv = NULL, *t = strtok_r(buf, "|", &sv); t && n < MAX_CHOICES; t = strtok_r(NULL, "|", &sv)) out[n++] = t;
  out[n] = NULL;
  return n;
}

static void size_text(double b, char *buf, size_t len) {
  static const char sfx[] = "KMGT";
  int i = -1;
  while (i < 3 && b >= 1024 && b == (double)(long long)(b / 1024) * 1024) b /= 1024, i++;
  if (i < 0)
    snprintf(buf, len, "%.0f", b);
  else
    snprintf(buf, len, "%.0f%c", b, sfx[i]);
}

void env_valid_text(const env_info *v, char *buf, size_t len) {
  char a[32], b[32];
  if (!buf || !len) return;
  buf[0] = '\0';
  if (!v) return;
  switch (v->kind) {
  case HSR_ENV_INT: snprintf(buf, len, "an integer from %.0f to %.0f", v->min, v->max); break;
  case HSR_ENV_FLOAT: snprintf(buf, len, "a number from %.15g to %.15g", v->min, v->max); break;
  case HSR_ENV_SIZE:
    size_text(v->min, a, sizeof a), size_text(v->max, b, sizeof b);
    snprintf(buf, len, "a size from %s to %s, suffixes K/M/G/T", a, b);
    break;
  case HSR_ENV_CHOICE: snprintf(buf, len, "%s", v->choices); break;
  case HSR_ENV_BOOL: snprintf(buf, len, "0|1|false|true|no|yes|off|on"); break;
  case HSR_ENV_STAGE: snprintf(buf, len, "%s, optionally :STEP", v->choices); break;
  case HSR_ENV_RATE: snprintf(buf, len, "a tc rate above zero such as 1gbit or 200mbit"); break;
  case HSR_ENV_NAME: snprintf(buf, len, "a name of letters, digits, '.', '_' and '-'"); break;
  case HSR_ENV_FILE: snprintf(buf, len, "a readable file"); break;
  case HSR_ENV_DIR: snprintf(buf, len, "an existing directory"); break;
  case HSR_ENV_WDIR: snprintf(buf, len, "a writable directory"); break;
  case HSR_ENV_PATH: snprintf(buf, len, "a directory path (made when missing)"); break;
  case HSR_ENV_ARGS: snprintf(buf, len, "extra arguments"); break;
  case HSR_ENV_SECRET: snprintf(buf, len, "a secret (not shown)"); break;
  case HSR_ENV_DELAY: snprintf(buf, len, "MAX_US[:SEED], MAX_US from 0 to %.0f", v->max); break;
  }
}

static hsr_status check_rate(const char *name, const char *s) {
  static const char *const units[] = {"bit", "kbit", "mbit", "gbit", "tbit", "bps", "kbps", "mbps", "gbps", "tbps"};
  const char *p = s;
  int digits = 0, nonzero = 0;
  while (isdigit((unsigned char)*p)) nonzero |= *p++ != '0', digits++;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) nonzero |= *p++ != '0', digits++;
  }
  int unit = 0;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) unit |= !strcmp(p, units[i]);
  if (!digits || !unit)
    return hsr_error(HSR_ERR_INVALID,
                     "%s='%s': expected a tc rate: a number and bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps "
                     "or tbps (e.g. 1gbit)",
                     name, s);
  if (!nonzero) return hsr_error(HSR_ERR_INVALID, "%s='%s': the rate must be above zero", name, s);
  return HSR_OK;
}

static hsr_status check_path(const env_info *v, const char *s) {
  struct stat sb;
  int there = stat(s, &sb) == 0, e = errno;
  if (v->kind == HSR_ENV_PATH) {
    if (there && !S_ISDIR(sb.st_mode))
      return hsr_error(HSR_ERR_INVALID, "%s='%s' exists and is not a directory", v->name, s);
    return HSR_OK;
  }
  if (!there) return hsr_error(HSR_ERR_INVALID, "%s='%s': %s", v->name, s, strerror(e));
  if (v->kind == HSR_ENV_FILE) {
    if (S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s='%s' is a directory, not a file", v->name, s);
    if (!S_ISREG(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s='%s' is not a regular file", v->name, s);
    if (access(s, R_OK)) return hsr_error(HSR_ERR_INVALID, "%s='%s' is not readable: %s", v->name, s, strerror(errno));
    return HSR_OK;
  }
  if (!S_ISDIR(sb.st_mode)) return hsr_error(HSR_ERR_INVALID, "%s='%s' is not a directory", v->name, s);
  if (v->kind == HSR_ENV_WDIR && access(s, W_OK | X_OK))
    return hsr_error(HSR_ERR_INVALID, "%s='%s' is not a writable directory: %s", v->name, s, strerror(errno));
  return HSR_OK;
}

/* Checks a set value of v; *num gets the number (INT, FLOAT, SIZE) or the index (CHOICE, BOOL, STAGE). */
static hsr_status check_value(const env_info *v, const char *s, double *num) {
  char valid[256], buf[512];
  const char *ch[MAX_CHOICES + 1];
  int idx = 0;
  long l = 0;
  size_t z = 0;
  double d = 0;
  env_valid_text(v, valid, sizeof valid);
  if (!*s)
    return hsr_error(HSR_ERR_INVALID, "%s is set but empty (valid: %s; unset it for the default, %s)", v->name, valid,
                     v->def_text);
  switch (v->kind) {
  case HSR_ENV_INT:
    HSR_CHECK(parse_long(v->name, s, (long)v->min, (long)v->max, &l));
    *num = (double)l;
    return HSR_OK;
  case HSR_ENV_FLOAT:
    HSR_CHECK(parse_double(v->name, s, v->min, v->max, &d));
    *num = d;
    return HSR_OK;
  case HSR_ENV_SIZE:
    HSR_CHECK(parse_size(v->name, s, &z));
    if ((double)z < v->min || (double)z > v->max)
      return hsr_error(HSR_ERR_INVALID, "%s: %s is out of range (valid: %s)", v->name, s, valid);
    *num = (double)z;
    return HSR_OK;
  case HSR_ENV_BOOL: {
    static const char *const names[] = {"0", "1", "false", "true", "no", "yes", "off", "on", NULL};
    HSR_CHECK(parse_choice(v->name, s, names, &idx));
    *num = idx & 1;
    return HSR_OK;
  }
  case HSR_ENV_CHOICE:
    split_choices(v->choices, buf, sizeof buf, ch);
    HSR_CHECK(parse_choice(v->name, s, ch, &idx));
    *num = idx;
    return HSR_OK;
  case HSR_ENV_STAGE: {
    char head[128];
    const char *colon = strchr(s, ':');
    snprintf(head, sizeof head, "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
    split_choices(v->choices, buf, sizeof buf, ch);
    if (parse_choice(v->name, head, ch, &idx) != HSR_OK || (colon && parse_long(v->name, colon + 1, 0, 1L << 62, &l)))
      return hsr_error(HSR_ERR_INVALID, "%s='%s' (valid: %s)", v->name, s, valid);
    *num = idx;
    return HSR_OK;
  }
  case HSR_ENV_RATE: return check_rate(v->name, s);
  case HSR_ENV_NAME:
    if (strlen(s) > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(s))
      return hsr_error(HSR_ERR_INVALID, "%s='%s' (valid: %s, at most 63)", v->name, s, valid);
    return HSR_OK;
  case HSR_ENV_FILE:
  case HSR_ENV_DIR:
  case HSR_ENV_WDIR:
  case HSR_ENV_PATH: return check_path(v, s);
  case HSR_ENV_ARGS:
  case HSR_ENV_SECRET: return HSR_OK;
  case HSR_ENV_DELAY: {
    const char *colon = strchr(s, ':');
    snprintf(buf, sizeof buf, "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
    if (parse_long(v->name, buf, (long)v->min, (long)v->max, &l) != HSR_OK ||
        (colon && (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 19)))
      return hsr_error(HSR_ERR_INVALID, "%s='%s' (valid: %s)", v->name, s, valid);
    *num = (double)l;
    return HSR_OK;
  }
  }
  return hsr_error(HSR_ERR_INTERNAL, "%s: unknown kind %d", v->name, (int)v->kind);
}

hsr_status env_check(const char *name) {
  const env_info *v = env_find(name);
  if (!v) return hsr_error(HSR_ERR_NOT_FOUND, "%s is not a variable hsr reads ('hsr env' lists them)", name);
  const char *s = getenv(name);
  double num = 0;
  return s ? check_value(v, s, &num) : HSR_OK;
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (la >= 63 || lb >= 63) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

const char *env_closest(const char *name) {
  const char *best = NULL;
  size_t bd = 99, len = name ? strlen(name) : 0;
  for (int i = 0; name && i < env_count(); i++) {
    size_t d = edit_distance(name, env_at(i)->name);
    if (d < bd) bd = d, best = env_at(i)->name;
  }
  return best && bd <= 3 && bd * 3 <= len ? best : NULL;
}

static int rank0(void) {
  const char *r = getenv("PMIX_RANK");
  return !r || !*r || !strcmp(r, "0");
}

hsr_status env_check_all(int warn_unknown) {
  char msg[1024] = "", name[128];
  hsr_status first = HSR_OK;
  size_t off = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "HSR_", 4)) continue;
    const char *eq = strchr(*e, '=');
    snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - *e) : (int)strlen(*e), *e);
    const env_info *v = env_find(name);
    if (!v) {
      const char *near = env_closest(name);
      if (warn_unknown && rank0())
        HSR_LOG_W("%s is not a variable hsr reads%s%s%s ('hsr env' lists them)", name, near ? "; did you mean " : "",
                  near ? near : "", near ? "?" : "");
      continue;
    }
    double num;
    hsr_status st = check_value(v, eq ? eq + 1 : "", &num);
    if (st == HSR_OK) continue;
    if (first == HSR_OK) first = st;
    if (off < sizeof msg)
      off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s", off ? "; " : "", hsr_last_error());
  }
  return first == HSR_OK ? HSR_OK : hsr_error(first, "%s", msg);
}

/* The registered variable's checked value: its text (NULL when unset) and
 * its number (the registry's default when unset). */
static hsr_status get(const char *name, int kind, const char **s, double *num) {
  const env_info *v = env_find(name);
  if (!v || (kind >= 0 && (int)v->kind != kind))
    return hsr_error(HSR_ERR_INTERNAL, "%s is not in the HSR_* registry as this kind (common/env_table.c)", name);
  *s = getenv(name);
  *num = v->def;
  return *s ? check_value(v, *s, num) : HSR_OK;
}

hsr_status env_get_long(const char *name, long *out) {
  const char *s;
  double num = 0;
  HSR_CHECK(get(name, HSR_ENV_INT, &s, &num));
  *out = (long)num;
  return HSR_OK;
}

hsr_status env_get_double(const char *name, double *out) {
  const char *s;
  return get(name, HSR_ENV_FLOAT, &s, out);
}

hsr_status env_get_size(const char *name, size_t *out) {
  const char *s;
  double num = 0;
  HSR_CHECK(get(name, HSR_ENV_SIZE, &s, &num));
  if (s) return parse_size(name, s, out); /* exact: a double holds sizes up to 2^53 only */
  *out = (size_t)num;
  return HSR_OK;
}

/* CHOICE and BOOL: the number is the choice's index, or 0/1. */
static hsr_status get_int(const char *name, int kind, int *out) {
  const char *s;
  double num = 0;
  HSR_CHECK(get(name, kind, &s, &num));
  *out = (int)num;
  return HSR_OK;
}

hsr_status env_get_choice(const char *name, int *out) { return get_int(name, HSR_ENV_CHOICE, out); }

hsr_status env_get_bool(const char *name, int *out) { return get_int(name, HSR_ENV_BOOL, out); }

hsr_status env_get_str(const char *name, const char **out) {
  double num = 0;
  return get(name, -1, out, &num);
}
