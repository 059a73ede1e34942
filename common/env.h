/* The registry of every HSR_* environment variable: its kind, range or
 * choices, default, who reads it and a one-line description. Every reader
 * (the library, the hsr commands, hsr-run and the scripts) validates against
 * it, so a value is judged the same everywhere; `hsr env` prints it and the
 * variable table of docs/environment.md is generated from it (tests/env_registry.sh checks
 * that they agree). */
#ifndef HSR_ENV_H
#define HSR_ENV_H

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum env_kind {
  HSR_ENV_INT = 0, /* an integer in [min, max] */
  HSR_ENV_FLOAT,   /* a number in [min, max] */
  HSR_ENV_SIZE,    /* bytes, optional K/M/G/T suffix (powers of 1024), in [min, max] */
  HSR_ENV_CHOICE,  /* one of `choices` (case-insensitive) */
  HSR_ENV_BOOL,    /* 0|1|false|true|no|yes|off|on */
  HSR_ENV_STAGE,   /* one of `choices`, optionally ":STEP" (a non-negative integer) */
  HSR_ENV_RATE,    /* a tc rate above zero: a number and bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps */
  HSR_ENV_NAME,    /* letters, digits, '.', '_' and '-', at most 63 */
  HSR_ENV_FILE,    /* an existing, readable regular file */
  HSR_ENV_DIR,     /* an existing directory */
  HSR_ENV_WDIR,    /* an existing directory this process may write */
  HSR_ENV_PATH,    /* a path (need not exist yet) */
  HSR_ENV_ARGS,    /* free text: extra command-line arguments */
  HSR_ENV_SECRET,  /* free text never shown (hsr env prints that it is set) */
  HSR_ENV_DELAY    /* MAX_US[:SEED]: microseconds from 0 to max, an optional unsigned 64-bit seed */
} env_kind;

typedef struct env_info {
  const char *name;
  env_kind kind;
  double min, max;      /* INT, FLOAT, SIZE */
  const char *choices;  /* CHOICE, STAGE: "a|b|c"; a reader's index follows this order */
  double def;           /* the value when unset: numbers, bytes, the CHOICE index, BOOL (-1: decided by the reader) */
  const char *def_text; /* the default as the docs say it */
  const char *reader;   /* who reads it: a layer (launch, collectives, ...), a command, hsr-run, a script */
  const char *doc;      /* one line */
} env_info;

/* The registry, in the docs' order. */
int env_count(void);
const env_info *env_at(int i);
/* The entry of `name` (exact, case-sensitive), NULL if hsr has none. */
const env_info *env_find(const char *name);
/* The registered name nearest to `name` (edit distance), NULL if none is close. */
const char *env_closest(const char *name);
/* "integer 1 to 4096", "error|warn|info|debug", "size 4K to 1G", ...: what is valid. */
void env_valid_text(const env_info *v, char *buf, size_t len);

/* Checks one registered variable: unset is fine; set but empty, or a value
 * its kind and range refuse, is HSR_ERR_INVALID naming the variable and what
 * is valid. An unregistered name is HSR_ERR_NOT_FOUND. */
hsr_status env_check(const char *name);
/* Checks every HSR_* variable in the environment (all of them, the messages
 * joined). With warn_unknown, a name that is not registered is logged as a
 * warning with the closest registered name (on rank 0 only: PMIX_RANK unset
 * or 0); it is never an error, so a newer tool's variable does not stop an
 * older library. hsr_boot_init calls it (errors only), hsr's commands call it
 * with warnings before any work. */
hsr_status env_check_all(int warn_unknown);

/* Readers of registered variables: the registry's default when unset, its
 * range and choices for the check. The name must be registered with the
 * reader's kind (HSR_ERR_INTERNAL otherwise). */
hsr_status env_get_long(const char *name, long *out);
hsr_status env_get_double(const char *name, double *out);
hsr_status env_get_size(const char *name, size_t *out);
/* CHOICE: the index into the registry's choices. */
hsr_status env_get_choice(const char *name, int *out);
/* BOOL: 0 or 1; the registry's default, which may be -1 (the reader decides). */
hsr_status env_get_bool(const char *name, int *out);
/* Any kind: the checked value as text, NULL when unset. STAGE: the whole value. */
hsr_status env_get_str(const char *name, const char **out);

#ifdef __cplusplus
}
#endif
#endif
