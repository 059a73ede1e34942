/* ft_check: a fault-tolerant run of `hsr train --model mlp` (replica groups,
 * hsr/ft.h) against the single-rank reference.
 *
 *   ft_check --replicas N --group S --batch B --steps T [--layers L --dim D --classes C --seed K]
 *            [--export FILE] [--tol X] [--ptol X] [--partial] LOG...
 *
 * Each LOG is one group's --log. For every step 1..T, the rows of the
 * groups that ran it must agree on `replicas` (the live groups), on
 * grad_norm (bitwise: every group applies the same averaged gradient) and
 * on state_hash where logged; every live group must have logged it once
 * (no step lost, none applied twice). The reference then trains on exactly
 * those groups' slices of the step's global batch (group g holds samples
 * [g S B/(N S), (g+1) S B/(N S))): the mean of the live groups' losses and
 * the gradient norm must equal the reference's within --tol (relative), and
 * the exported weights (FILE, written after the last step) the reference's
 * parameters within --ptol. Float differences grow along a trajectory
 * (1e-5 after a few hundred steps), so --tol is 1e-4 and --ptol 1e-3; a
 * wrong average, over 3 groups where 2 were live, is off by a third. So a
 * dropped group makes the average one over the live ones, a healed group
 * continues exactly, and the loss curve is the reference's with no jump.
 * Prints one summary line; exit 1 on a mismatch. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/io/safetensors.h"
#include "mlp.h"

#define MAXG 64

typedef struct row {
  int have;
  double loss, norm;
  int nrep, rep[MAXG];
  char hash[24];
} row;

static int fail;
#define BAD(...) (fprintf(stderr, "ft_check: FAIL: " __VA_ARGS__), fprintf(stderr, "\n"), fail = 1)

static int g_partial; /* rows after step T are not checked (a run that stopped: T its last) */

static int read_log(const char *path, int steps, row *rows, int *id) {
  FILE *f = fopen(path, "r");
  if (!f) return fprintf(stderr, "ft_check: cannot open %s\n", path), -1;
  char *line = NULL;
  size_t cap = 0;
  *id = -1;
  while (getline(&line, &cap, f) > 0) {
    cJSON *o = cJSON_Parse(line);
    if (!o) continue;
    int s = (int)cJSON_GetObjectItem(o, "step")->valuedouble;
    const cJSON *rid = cJSON_GetObjectItem(o, "replica_id"), *rep = cJSON_GetObjectItem(o, "replicas"),
                *h = cJSON_GetObjectItem(o, "state_hash");
    if (!rid || !rep) {
      cJSON_Delete(o);
      free(line);
      fclose(f);
      return fprintf(stderr, "ft_check: %s has no replica_id/replicas fields\n", path), -1;
    }
    *id = (int)rid->valuedouble;
    if (s > steps && g_partial) {
      /* after the checked steps */
    } else if (s < 1 || s > steps) {
      BAD("%s: step %d outside 1..%d", path, s, steps);
    } else if (rows[s].have) {
      BAD("%s: step %d logged twice (applied twice?)", path, s);
    } else {
      row *r = &rows[s];
      r->have = 1;
      r->loss = cJSON_GetObjectItem(o, "loss")->valuedouble;
      r->norm = cJSON_GetObjectItem(o, "grad_norm")->valuedouble;
      const cJSON *it;
      cJSON_ArrayForEach(it, rep) if (r->nrep < MAXG) r->rep[r->nrep++] = (int)it->valuedouble;
      snprintf(r->hash, sizeof r->hash, "%s", cJSON_IsString(h) ? h->valuestring : "");
    }
    cJSON_Delete(o);
  }
  free(line);
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  int N = 0, S = 0, B = 0, T = 0, L = 4, D = 64, C = 8, nlogs = 0;
  long seed = 1;
  double tol = 1e-4, ptol = 1e-3; /* the weights drift further from the reference over many steps (AdamW) */
  const char *exp = NULL, *logs[MAXG], *expect = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--replicas"))
      N = atoi(v), i++;
    else if (!strcmp(a, "--group"))
      S = atoi(v), i++;
    else if (!strcmp(a, "--batch"))
      B = atoi(v), i++;
    else if (!strcmp(a, "--steps"))
      T = atoi(v), i++;
    else if (!strcmp(a, "--layers"))
      L = atoi(v), i++;
    else if (!strcmp(a, "--dim"))
      D = atoi(v), i++;
    else if (!strcmp(a, "--classes"))
      C = atoi(v), i++;
    else if (!strcmp(a, "--seed"))
      seed = atol(v), i++;
    else if (!strcmp(a, "--export"))
      exp = v, i++;
    else if (!strcmp(a, "--tol"))
      tol = atof(v), i++;
    else if (!strcmp(a, "--ptol"))
      ptol = atof(v), i++;
    else if (!strcmp(a, "--partial"))
      g_partial = 1;
    else if (!strcmp(a, "--expect-replicas"))
      expect = v, i++;
    else if (nlogs < MAXG)
      logs[nlogs++] = a;
  }
  if (N < 1 || N > MAXG || S < 1 || B < 1 || T < 1 || !nlogs || B % (N * S))
    return fprintf(stderr, "usage: ft_check --replicas N --group S --batch B --steps T [...] LOG...\n"), 2;
  row *rows = calloc((size_t)N * (T + 1), sizeof *rows);
  int got[MAXG] = {0};
  for (int i = 0; i < nlogs; i++) {
    row *tmp = calloc((size_t)T + 1, sizeof *tmp);
    int id;
    FILE *probe = fopen(logs[i], "r");
    int empty = !probe || fgetc(probe) == EOF;
    if (probe) fclose(probe);
    if (empty) { /* a group killed before its first step: nothing to check (live groups must have logged) */
      free(tmp);
      continue;
    }
    if (read_log(logs[i], T, tmp, &id) || id < 0 || id >= N)
      return fprintf(stderr, "ft_check: bad log %s\n", logs[i]), 1;
    for (int s = 1; s <= T; s++) /* a group restarted with --join: its runs' logs together */
      if (tmp[s].have) {
        if (rows[id * (T + 1) + s].have) BAD("replica %d logged step %d in two runs", id, s);
        rows[id * (T + 1) + s] = tmp[s];
      }
    got[id] = 1;
    free(tmp);
  }
  mlp_cfg mc = {.layers = L, .dim = D, .in_dim = D, .classes = C, .seed = (uint64_t)seed};
  mlp_opt o = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .clip = 1.0};
  mlp_blas_threads(1);
  mlp_ref *ref;
  if (mlp_ref_create(&mc, &o, B, &ref) != HSR_OK) return fprintf(stderr, "ft_check: %s\n", hsr_last_error()), 1;
  int per = B / N; /* samples of one group */
  double wl = 0, wn = 0;
  int changes = 0, prev[MAXG], nprev = -1;
  char seen_sets[2048] = "";
  for (int s = 1; s <= T && !fail; s++) {
    const row *first = NULL;
    for (int g = 0; g < N; g++)
      if (rows[g * (T + 1) + s].have) {
        first = &rows[g * (T + 1) + s];
        break;
      }
    if (!first) {
      BAD("step %d: no group logged it", s);
      break;
    }
    int64_t f0[MAXG];
    int cnt[MAXG];
    double lsum = 0;
    for (int k = 0; k < first->nrep; k++) {
      int g = first->rep[k];
      const row *r = g >= 0 && g < N ? &rows[g * (T + 1) + s] : NULL;
      if (!r || !r->have) {
        BAD("step %d ran on replicas incl. %d, which did not log it", s, g);
        continue;
      }
      if (r->nrep != first->nrep || memcmp(r->rep, first->rep, sizeof(int) * (size_t)r->nrep))
        BAD("step %d: the groups disagree on the live replicas", s);
      if (r->norm != first->norm)
        BAD("step %d: grad_norm %.17g in replica %d, %.17g in another (not the same averaged gradient)", s, r->norm, g,
            first->norm);
      if (r->hash[0] && first->hash[0] && strcmp(r->hash, first->hash))
        BAD("step %d: state_hash %s in replica %d, %s in another", s, r->hash, g, first->hash);
      f0[k] = (int64_t)g * per;
      cnt[k] = per;
      lsum += r->loss;
    }
    for (int g = 0; g < N; g++) { /* a group that logged the step must have been live in it */
      const row *r = &rows[g * (T + 1) + s];
      int live = 0;
      for (int k = 0; k < first->nrep; k++) live |= first->rep[k] == g;
      if (r->have && !live) BAD("step %d: replica %d logged it but was not live in it", s, g);
    }
    if (nprev != first->nrep || memcmp(prev, first->rep, sizeof(int) * (size_t)first->nrep)) {
      changes++;
      char t[64] = "";
      size_t q = 0;
      for (int k = 0; k < first->nrep; k++)
        q += (size_t)snprintf(t + q, sizeof t - q, "%s%d", k ? "," : "", first->rep[k]);
      size_t L2 = strlen(seen_sets);
      snprintf(seen_sets + L2, sizeof seen_sets - L2, "%s%d:[%s]", L2 ? " " : "", s, t);
      nprev = first->nrep;
      memcpy(prev, first->rep, sizeof(int) * (size_t)first->nrep);
    }
    double rl, rn;
    if (mlp_ref_step_ranges(ref, s - 1, first->nrep, f0, cnt, &rl, &rn) != HSR_OK)
      return fprintf(stderr, "ft_check: %s\n", hsr_last_error()), 1;
    double ml = lsum / first->nrep, el = fabs(ml - rl) / fabs(rl), en = fabs(first->norm - rn) / rn;
    wl = el > wl ? el : wl, wn = en > wn ? en : wn;
    if (el > tol)
      BAD("step %d: mean loss of replicas %d.. %.9g, reference %.9g (relative %.3g > %.0e)", s, first->rep[0], ml, rl,
          el, tol);
    if (en > tol) BAD("step %d: grad_norm %.9g, reference %.9g (relative %.3g > %.0e)", s, first->norm, rn, en, tol);
  }
  double wp = 0;
  if (!fail && exp) {
    st_file *f;
    if (st_open(exp, &f) != HSR_OK) return fprintf(stderr, "ft_check: %s\n", hsr_last_error()), 1;
    char name[64];
    for (int u = 0; u < mlp_num_units(&mc); u++)
      for (int k = 0; k < mlp_unit_params(&mc, u); k++) {
        mlp_param_name(u, k, name, sizeof name);
        size_t n = mlp_param_numel(&mc, u, k);
        int i;
        float *v = malloc((n ? n : 1) * sizeof *v);
        st_info in;
        if (st_find(f, name, &i) != HSR_OK || st_info_at(f, i, &in) != HSR_OK || in.numel != n ||
            st_read(f, i, 0, v, n * 4) != HSR_OK) {
          BAD("%s: tensor %s missing or of another size", exp, name);
          free(v);
          continue;
        }
        const float *r = mlp_ref_param(ref, u, k);
        double md = 0, mr = 0;
        for (size_t j = 0; j < n; j++) {
          double d = fabs((double)v[j] - r[j]);
          md = d > md ? d : md;
          mr = fabs(r[j]) > mr ? fabs(r[j]) : mr;
        }
        double rel = md / (mr > 0 ? mr : 1);
        wp = rel > wp ? rel : wp;
        if (rel > ptol) BAD("%s: %s differs from the reference: relative %.3g > %.0e", exp, name, rel, ptol);
        free(v);
      }
    st_close(f);
  }
  if (expect && strcmp(expect, seen_sets)) BAD("live replicas by step were '%s', expected '%s'", seen_sets, expect);
  mlp_ref_free(ref);
  free(rows);
  printf("ft_check: %s: %d steps, live replicas by first step %s; worst relative difference from the reference: loss "
         "%.2g, grad_norm %.2g, parameters %.2g\n",
         fail ? "FAIL" : "ok", T, seen_sets, wl, wn, wp);
  (void)got;
  return fail;
}
