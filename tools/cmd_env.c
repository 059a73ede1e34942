/* hsr env: the HSR_* variables hsr reads (the registry, common/env.h), their
 * values in this environment and whether each is valid. --check is the
 * validation every command runs before it starts, for scripts (hsr-run runs
 * it before it launches anything); --markdown is docs/environment.md's table. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "common/env.h"

extern char **environ;

static void usage(FILE *f) {
  fprintf(f, "usage: hsr env [--json | --markdown] [NAME...]\n"
             "       hsr env --check [--quiet] [NAME...]\n"
             "  Lists every HSR_* variable hsr reads: its value here, whether it is valid, what is valid,\n"
             "  the default, who reads it and what it does (NAME...: only those).\n"
             "  --check     print nothing but the problems: exit 2 when a variable that is set is not valid\n"
             "              (set but empty counts), with what is valid; a name hsr does not read is a\n"
             "              warning with the closest name (what every hsr command checks before it starts)\n"
             "  --quiet     with --check: no warnings, errors only\n"
             "  --json      the list as JSON\n"
             "  --markdown  the list as docs/environment.md's table\n"
             "Exit codes: 0 ok, 2 a variable is not valid (or bad usage).\n");
}

static void md_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|') putchar('\\');
    putchar(*s);
  }
}

static void markdown(const env_info *const *v, int n) {
  printf("| variable | default | valid | read by | meaning |\n| --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < n; i++) {
    char valid[256];
    env_valid_text(v[i], valid, sizeof valid);
    int code = !strchr(v[i]->def_text, ' ') && strcmp(v[i]->def_text, "unset"); /* a value, not words */
    printf("| `%s` | %s", v[i]->name, code ? "`" : "");
    md_cell(v[i]->def_text);
    printf("%s | ", code ? "`" : "");
    md_cell(valid);
    printf(" | %s | ", v[i]->reader);
    md_cell(v[i]->doc);
    printf(" |\n");
  }
}

/* The list (table or JSON); returns how many set variables are not valid. */
static int list(const env_info *const *v, int n, int json) {
  int bad = 0;
  cJSON *arr = json ? cJSON_CreateArray() : NULL;
  if (!json) printf("%-26s %-10s %-22s %-22s %s\n", "variable", "status", "value", "default", "valid");
  for (int i = 0; i < n; i++) {
    const char *val = getenv(v[i]->name);
    hsr_status st = env_check(v[i]->name);
    if (val && *val && v[i]->kind == HSR_ENV_SECRET) val = "(set, hidden)";
    char valid[256];
    env_valid_text(v[i], valid, sizeof valid);
    const char *status = !val ? "unset" : st == HSR_OK ? "ok" : "INVALID";
    bad += val && st != HSR_OK;
    if (json) {
      cJSON *o = cJSON_CreateObject();
      static const char *const kinds[] = {"int",  "float", "size", "choice", "bool", "stage", "rate",
                                          "name", "file",  "dir",  "wdir",   "path", "args",  "secret"};
      cJSON_AddStringToObject(o, "name", v[i]->name);
      cJSON_AddStringToObject(o, "kind", kinds[v[i]->kind]);
      if (v[i]->kind <= HSR_ENV_SIZE) {
        cJSON_AddNumberToObject(o, "min", v[i]->min);
        cJSON_AddNumberToObject(o, "max", v[i]->max);
      }
      if (v[i]->choices) cJSON_AddStringToObject(o, "choices", v[i]->choices);
      cJSON_AddStringToObject(o, "status", status);
      if (val) cJSON_AddStringToObject(o, "value", val);
      if (val && st != HSR_OK) cJSON_AddStringToObject(o, "error", hsr_last_error());
      cJSON_AddStringToObject(o, "default", v[i]->def_text);
      cJSON_AddStringToObject(o, "valid", valid);
      cJSON_AddStringToObject(o, "reader", v[i]->reader);
      cJSON_AddStringToObject(o, "doc", v[i]->doc);
      cJSON_AddItemToArray(arr, o);
    } else {
      printf("%-26s %-10s %-22s %-22s %s\n", v[i]->name, status, val ? val : "-", v[i]->def_text, valid);
      if (val && st != HSR_OK) fprintf(stderr, "hsr env: %s\n", hsr_last_error());
    }
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "variables", arr);
    cJSON *unknown = cJSON_AddArrayToObject(o, "unknown");
    for (char **e = environ; e && *e; e++) {
      if (strncmp(*e, "HSR_", 4)) continue;
      char name[128];
      const char *eq = strchr(*e, '=');
      snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - *e) : (int)strlen(*e), *e);
      if (env_find(name)) continue;
      cJSON *u = cJSON_CreateObject();
      cJSON_AddStringToObject(u, "name", name);
      if (env_closest(name)) cJSON_AddStringToObject(u, "closest", env_closest(name));
      cJSON_AddItemToArray(unknown, u);
    }
    char *txt = cJSON_Print(o);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(o);
  }
  return bad;
}

int cmd_env(int argc, char **argv) {
  enum { O_CHECK = 256, O_QUIET, O_MD };
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},      {"json", no_argument, 0, 'j'},
                                       {"check", no_argument, 0, O_CHECK}, {"quiet", no_argument, 0, O_QUIET},
                                       {"markdown", no_argument, 0, O_MD}, {0, 0, 0, 0}};
  int json = 0, check = 0, quiet = 0, md = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(stdout); return HSR_EXIT_OK;
    case 'j': json = 1; break;
    case O_CHECK: check = 1; break;
    case O_QUIET: quiet = 1; break;
    case O_MD: md = 1; break;
    default: return cli_usage_error("env", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (json + md + check > 1) return cli_usage_error("env", "give one of --check, --json and --markdown");
  if (quiet && !check) return cli_usage_error("env", "--quiet goes with --check");
  int n = argc - optind;
  const env_info **sel = calloc((size_t)(n ? n : env_count()), sizeof *sel);
  if (!sel) return cli_fail("env", hsr_error(HSR_ERR_NOMEM, "out of memory"));
  for (int i = 0; i < n; i++)
    if (!(sel[i] = env_find(argv[optind + i]))) {
      const char *near = env_closest(argv[optind + i]);
      free(sel);
      return cli_usage_error("env", "%s is not a variable hsr reads%s%s%s", argv[optind + i],
                             near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    }
  if (!n)
    for (int i = 0; i < env_count(); i++) sel[i] = env_at(i);
  int count = n ? n : env_count(), rc = HSR_EXIT_OK;
  if (md) {
    markdown(sel, count);
  } else if (check) {
    hsr_status st = HSR_OK;
    for (int i = 0; n && i < count && st == HSR_OK; i++) st = env_check(sel[i]->name);
    if (!n) st = env_check_all(!quiet);
    if (st != HSR_OK) {
      fprintf(stderr, "hsr env: %s\n", hsr_last_error());
      rc = HSR_EXIT_USAGE;
    }
  } else if (list(sel, count, json)) {
    rc = HSR_EXIT_USAGE;
  }
  free(sel);
  return rc;
}
