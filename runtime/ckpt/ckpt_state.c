/* The program's state saved with a checkpoint: typed key/value pairs kept as
 * a JSON object (the manifest's "program"). Integers beyond 2^53 and u64
 * words are strings, so every value round-trips exactly. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "ckpt_int.h"
#include "runtime/ckpt/ckpt_internal.h"

struct hsr_ckpt_state {
  cJSON *obj;
};

#define SAFE_INT ((int64_t)1 << 53)

static hsr_status check_key(const char *key) {
  if (!key || !*key) return hsr_error(HSR_ERR_INVALID, "checkpoint state: empty key");
  size_t n = strlen(key);
  if (n >= HSR_CKPT_KEY_MAX)
    return hsr_error(HSR_ERR_INVALID, "checkpoint state: key '%.20s...' is %zu characters (at most %d)", key, n,
                     HSR_CKPT_KEY_MAX - 1);
  for (size_t i = 0; i < n; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return hsr_error(HSR_ERR_INVALID, "checkpoint state: key '%s' has '%c' (valid: A-Z a-z 0-9 _ . -)", key, c);
  }
  return HSR_OK;
}

hsr_status hsr_ckpt_state_create(hsr_ckpt_state **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "hsr_ckpt_state_create: out is NULL");
  *out = calloc(1, sizeof **out);
  if (*out) (*out)->obj = cJSON_CreateObject();
  if (!*out || !(*out)->obj) {
    hsr_ckpt_state_free(*out);
    *out = NULL;
    return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
  }
  return HSR_OK;
}

void hsr_ckpt_state_free(hsr_ckpt_state *s) {
  if (!s) return;
  cJSON_Delete(s->obj);
  free(s);
}

hsr_status ckpt_state_clear(hsr_ckpt_state *s) {
  if (!s) return hsr_error(HSR_ERR_INVALID, "checkpoint state is NULL");
  cJSON *o = cJSON_CreateObject();
  if (!o) return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
  cJSON_Delete(s->obj);
  s->obj = o;
  return HSR_OK;
}

static hsr_status put(hsr_ckpt_state *s, const char *key, cJSON *v) {
  if (!s) {
    cJSON_Delete(v);
    return hsr_error(HSR_ERR_INVALID, "checkpoint state is NULL");
  }
  hsr_status st = check_key(key);
  if (st != HSR_OK) {
    cJSON_Delete(v);
    return st;
  }
  if (!v) return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
  if (cJSON_GetObjectItemCaseSensitive(s->obj, key))
    cJSON_ReplaceItemInObjectCaseSensitive(s->obj, key, v);
  else
    cJSON_AddItemToObject(s->obj, key, v);
  return HSR_OK;
}

/* Numbers go out as raw text printed here: cJSON's own printer may round
 * the last digit of a double (it accepts a 15-digit form within an epsilon). */
static cJSON *number(double v) {
  char b[40];
  if (v == floor(v) && fabs(v) < (double)SAFE_INT)
    snprintf(b, sizeof b, "%" PRId64, (int64_t)v);
  else
    snprintf(b, sizeof b, "%.17g", v);
  return cJSON_CreateRaw(b);
}

/* The value of a number item (parsed, or raw text from number()). */
static int number_of(const cJSON *v, double *d) {
  if (cJSON_IsNumber(v)) {
    *d = v->valuedouble;
    return 1;
  }
  if (!cJSON_IsRaw(v)) return 0;
  char *end;
  *d = strtod(v->valuestring, &end);
  return end != v->valuestring && !*end;
}

hsr_status hsr_ckpt_state_set_i64(hsr_ckpt_state *s, const char *key, int64_t v) {
  if (v > -SAFE_INT && v < SAFE_INT) return put(s, key, number((double)v));
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  return put(s, key, cJSON_CreateString(b));
}

hsr_status ckpt_state_set_u64(hsr_ckpt_state *s, const char *key, uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%016" PRIx64, v);
  return put(s, key, cJSON_CreateString(b));
}

hsr_status hsr_ckpt_state_set_f64(hsr_ckpt_state *s, const char *key, double v) {
  if (!isfinite(v)) return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' = %g is not finite", key ? key : "?", v);
  return put(s, key, number(v));
}

hsr_status hsr_ckpt_state_set_str(hsr_ckpt_state *s, const char *key, const char *v) {
  if (!v) return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s': NULL string", key ? key : "?");
  return put(s, key, cJSON_CreateString(v));
}

static hsr_status get(const hsr_ckpt_state *s, const char *key, const cJSON **v) {
  if (!s || !key) return hsr_error(HSR_ERR_INVALID, "checkpoint state: NULL argument");
  *v = cJSON_GetObjectItemCaseSensitive(s->obj, key);
  if (!*v) return hsr_error(HSR_ERR_NOT_FOUND, "checkpoint state has no '%s'", key);
  return HSR_OK;
}

hsr_status hsr_ckpt_state_get_i64(const hsr_ckpt_state *s, const char *key, int64_t *out) {
  const cJSON *v;
  HSR_CHECK(get(s, key, &v));
  double d;
  if (number_of(v, &d)) {
    if (d != floor(d) || d <= -(double)SAFE_INT || d >= (double)SAFE_INT)
      return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' = %.17g is not an integer", key, d);
    *out = (int64_t)d;
    return HSR_OK;
  }
  if (cJSON_IsString(v)) {
    char *end;
    errno = 0;
    long long x = strtoll(v->valuestring, &end, 10);
    if (!errno && end != v->valuestring && !*end) {
      *out = x;
      return HSR_OK;
    }
  }
  return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' is not an integer", key);
}

hsr_status ckpt_state_get_u64(const hsr_ckpt_state *s, const char *key, uint64_t *out) {
  const cJSON *v;
  HSR_CHECK(get(s, key, &v));
  if (cJSON_IsString(v) && !strncmp(v->valuestring, "0x", 2) && v->valuestring[2]) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->valuestring + 2, &end, 16);
    if (!errno && !*end) {
      *out = x;
      return HSR_OK;
    }
  }
  double d;
  if (number_of(v, &d) && d >= 0 && d < (double)SAFE_INT && d == floor(d)) {
    *out = (uint64_t)d;
    return HSR_OK;
  }
  return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' is not a u64 (\"0x...\")", key);
}

hsr_status hsr_ckpt_state_get_f64(const hsr_ckpt_state *s, const char *key, double *out) {
  const cJSON *v;
  HSR_CHECK(get(s, key, &v));
  if (!number_of(v, out)) return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' is not a number", key);
  return HSR_OK;
}

hsr_status hsr_ckpt_state_get_str(const hsr_ckpt_state *s, const char *key, const char **out) {
  const cJSON *v;
  HSR_CHECK(get(s, key, &v));
  if (!cJSON_IsString(v)) return hsr_error(HSR_ERR_INVALID, "checkpoint state: '%s' is not a string", key);
  *out = v->valuestring;
  return HSR_OK;
}

int ckpt_state_has(const hsr_ckpt_state *s, const char *key) {
  return s && key && cJSON_GetObjectItemCaseSensitive(s->obj, key) != NULL;
}

int ckpt_state_count(const hsr_ckpt_state *s) { return s ? cJSON_GetArraySize(s->obj) : 0; }

hsr_status ckpt_state_json(const hsr_ckpt_state *s, char **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "ckpt_state_json: out is NULL");
  *out = s ? cJSON_PrintUnformatted(s->obj) : NULL;
  if (!*out && !s) *out = strdup("{}");
  if (!*out) return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
  return HSR_OK;
}

hsr_status ckpt_state_assign(hsr_ckpt_state *s, const cJSON *obj, const char *what) {
  if (!s) return hsr_error(HSR_ERR_INVALID, "checkpoint state is NULL");
  if (obj && !cJSON_IsObject(obj)) return hsr_error(HSR_ERR_INVALID, "%s is not a JSON object", what);
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    HSR_CHECK(check_key(it->string));
    if (!cJSON_IsNumber(it) && !cJSON_IsRaw(it) && !cJSON_IsString(it))
      return hsr_error(HSR_ERR_INVALID, "%s: '%s' is neither a number nor a string", what, it->string);
    double d = 0; /* 1e999 parses as inf, which no JSON can hold: it would not read back (found by fuzzing) */
    if (!cJSON_IsString(it) && number_of(it, &d) && !isfinite(d))
      return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not a finite number", what, it->string);
  }
  cJSON *copy = cJSON_CreateObject();
  if (!copy) return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
  cJSON_ArrayForEach(it, obj) {
    double d = 0;
    cJSON *v = number_of(it, &d) ? number(d) : cJSON_CreateString(it->valuestring);
    if (!v) {
      cJSON_Delete(copy);
      return hsr_error(HSR_ERR_NOMEM, "checkpoint state: out of memory");
    }
    cJSON_AddItemToObject(copy, it->string, v);
  }
  cJSON_Delete(s->obj);
  s->obj = copy;
  return HSR_OK;
}

const cJSON *ckpt_state_obj(const hsr_ckpt_state *s) { return s ? s->obj : NULL; }

hsr_status ckpt_check_key(const char *key) { return check_key(key); }

hsr_status ckpt_state_at(const hsr_ckpt_state *s, int i, const char **key, char *value, size_t len) {
  if (!s || !key || !value || !len) return hsr_error(HSR_ERR_INVALID, "ckpt_state_at: NULL argument");
  const cJSON *v = i >= 0 ? cJSON_GetArrayItem(s->obj, i) : NULL;
  if (!v) return hsr_error(HSR_ERR_INVALID, "checkpoint state: pair %d of %d", i, ckpt_state_count(s));
  *key = v->string;
  double d;
  int n;
  if (number_of(v, &d))
    n = d == floor(d) && fabs(d) < (double)SAFE_INT ? snprintf(value, len, "%" PRId64, (int64_t)d)
                                                    : snprintf(value, len, "%.17g", d);
  else
    n = snprintf(value, len, "%s", v->valuestring);
  if (n < 0 || (size_t)n >= len)
    return hsr_error(HSR_ERR_INVALID, "checkpoint state: the value of '%s' does not fit %zu bytes", v->string, len);
  return HSR_OK;
}

hsr_status ckpt_state_from_json(hsr_ckpt_state *s, const char *json) {
  if (!s || !json) return hsr_error(HSR_ERR_INVALID, "ckpt_state_from_json: NULL argument");
  cJSON *o = cJSON_Parse(json);
  if (!o) return hsr_error(HSR_ERR_INVALID, "checkpoint state: not JSON: '%.60s'", json);
  hsr_status st = json_check_finite(o, HSR_ERR_INVALID, "checkpoint state"); /* 1e999 reads as infinity */
  if (st == HSR_OK)
    st = cJSON_IsObject(o) ? ckpt_state_assign(s, o, "checkpoint state")
                           : hsr_error(HSR_ERR_INVALID, "checkpoint state: '%.60s' is not a JSON object", json);
  cJSON_Delete(o);
  return st;
}
