/* Numbers in the JSON files hsr reads (common/json.h). cJSON reads a number too
 * large for a double (1e999) as infinity and gives no error: every parser
 * of a file a user hands hsr checks the whole document once, so a
 * non-finite value is refused naming where it sits instead of turning into
 * an infinite bandwidth or a NaN step time later. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

/* The path of the first non-finite number under node, appended to path. */
static int walk(const cJSON *node, char *path, size_t n, size_t at) {
  if (cJSON_IsNumber(node)) return !isfinite(node->valuedouble);
  int i = 0;
  for (const cJSON *c = node ? node->child : NULL; c; c = c->next, i++) {
    int w = cJSON_IsArray(node) ? snprintf(path + at, n - at, "[%d]", i)
                                : snprintf(path + at, n - at, "%s%s", at ? "." : "", c->string ? c->string : "?");
    size_t len = w < 0 ? 0 : (size_t)w;
    if (at + len >= n) len = n - at - 1;
    if (walk(c, path, n, at + len)) return 1;
    path[at] = '\0';
  }
  return 0;
}

hsr_status json_check_finite(const cJSON *doc, hsr_status st, const char *what) {
  char path[256] = "";
  if (!doc || !walk(doc, path, sizeof path, 0)) return HSR_OK;
  return hsr_error(st,
                   "%s: %s is not a finite number (a value beyond a double's range, such as 1e999, reads as "
                   "infinity): refused",
                   what ? what : "JSON", path[0] ? path : "the document");
}
