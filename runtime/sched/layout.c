/* Units, parameters and the deterministic flat layout.
 *
 * Each unit's parameters are laid end to end in registration order, each
 * offset rounded up to `align` elements; the unit length is padded to a
 * multiple of shards * align so that every shard is the same contiguous,
 * aligned slice [i*L/S, (i+1)*L/S). Parameters may straddle shards. With
 * subshards P (the outer shard) every shard is cut again into P equal,
 * aligned pieces: the padding is to shards * P * align. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"

typedef struct lunit {
  char name[HSR_RT_NAME_MAX];
  size_t len;
} lunit;

struct rt_layout {
  size_t align;
  int shards; /* 0 until finalized */
  int parts;  /* pieces of each shard (>= 1) */
  lunit *units;
  int nunits, cap_units;
  rt_param_info *params;
  int nparams, cap_params;
};

hsr_status rt_layout_create(size_t align, rt_layout **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "layout: out is NULL");
  if (align < 1 || align > (1u << 20))
    return hsr_error(HSR_ERR_INVALID, "layout: alignment %zu elements is out of range (valid: 1 to %u)", align,
                     1u << 20);
  rt_layout *l = calloc(1, sizeof *l);
  if (!l) return hsr_error(HSR_ERR_NOMEM, "layout: out of memory");
  l->align = align;
  l->parts = 1;
  *out = l;
  return HSR_OK;
}

void rt_layout_free(rt_layout *l) {
  if (!l) return;
  free(l->units);
  free(l->params);
  free(l);
}

static hsr_status check_name(const char *what, const char *name) {
  if (!name || !*name) return hsr_error(HSR_ERR_INVALID, "%s name is empty", what);
  if (strlen(name) >= HSR_RT_NAME_MAX)
    return hsr_error(HSR_ERR_INVALID, "%s name '%s' is too long (at most %d characters)", what, name,
                     HSR_RT_NAME_MAX - 1);
  return HSR_OK;
}

hsr_status rt_layout_add_unit(rt_layout *l, const char *name, int *unit) {
  if (!l) return hsr_error(HSR_ERR_INVALID, "layout is NULL");
  HSR_CHECK(check_name("unit", name));
  if (l->shards)
    return hsr_error(HSR_ERR_STATE,
                     "unit '%s' registered after the layout was fixed (the first step); "
                     "register every unit before training starts",
                     name);
  for (int i = 0; i < l->nunits; i++)
    if (!strcmp(l->units[i].name, name)) return hsr_error(HSR_ERR_INVALID, "unit '%s' registered twice", name);
  HSR_CHECK(grow_array(&l->units, &l->cap_units, l->nunits, sizeof *l->units, 8, "layout"));
  memset(&l->units[l->nunits], 0, sizeof l->units[0]);
  strcpy(l->units[l->nunits].name, name);
  if (unit) *unit = l->nunits;
  l->nunits++;
  return HSR_OK;
}

hsr_status rt_layout_add_param(rt_layout *l, int unit, const char *name, int ndim, const int64_t *shape,
                               int group) {
  if (!l) return hsr_error(HSR_ERR_INVALID, "layout is NULL");
  HSR_CHECK(check_name("parameter", name));
  if (l->shards)
    return hsr_error(HSR_ERR_STATE, "parameter '%s' registered after the layout was fixed (the first step)", name);
  if (unit < 0 || unit >= l->nunits)
    return hsr_error(HSR_ERR_INVALID, "parameter '%s': unit %d does not exist (%d units registered)", name, unit,
                     l->nunits);
  if (ndim < 0 || ndim > HSR_RT_MAX_DIMS || (ndim > 0 && !shape))
    return hsr_error(HSR_ERR_INVALID, "parameter '%s': %d dimensions (valid: 0 to %d)", name, ndim, HSR_RT_MAX_DIMS);
  if (group < 0 || group >= HSR_RT_MAX_GROUPS)
    return hsr_error(HSR_ERR_INVALID, "parameter '%s': optimizer group %d (valid: 0 to %d)", name, group,
                     HSR_RT_MAX_GROUPS - 1);
  size_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0 || shape[d] > (int64_t)1 << 40)
      return hsr_error(HSR_ERR_INVALID, "parameter '%s': dimension %d is %lld", name, d, (long long)shape[d]);
    numel *= (size_t)shape[d];
  }
  for (int i = 0; i < l->nparams; i++)
    if (!strcmp(l->params[i].name, name))
      return hsr_error(HSR_ERR_INVALID,
                       "parameter '%s' registered twice (already in unit '%s'); a tied parameter is registered "
                       "once, in its owner unit, and viewed through it",
                       name, l->units[l->params[i].unit].name);
  HSR_CHECK(grow_array(&l->params, &l->cap_params, l->nparams, sizeof *l->params, 16, "layout"));
  rt_param_info *p = &l->params[l->nparams++];
  memset(p, 0, sizeof *p);
  strcpy(p->name, name);
  p->unit = unit;
  p->group = group;
  p->ndim = ndim;
  for (int d = 0; d < ndim; d++) p->shape[d] = shape[d];
  p->numel = numel;
  return HSR_OK;
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

hsr_status rt_layout_set_subshards(rt_layout *l, int parts) {
  if (!l) return hsr_error(HSR_ERR_INVALID, "layout is NULL");
  if (l->shards) return hsr_error(HSR_ERR_STATE, "layout: subshards set after the layout was fixed");
  if (parts < 1 || parts > 1 << 20)
    return hsr_error(HSR_ERR_INVALID, "layout: %d pieces per shard (valid: 1 to %d)", parts, 1 << 20);
  l->parts = parts;
  return HSR_OK;
}

int rt_layout_subshards(const rt_layout *l) { return l ? l->parts : 0; }

hsr_status rt_layout_finalize(rt_layout *l, int shards) {
  if (!l) return hsr_error(HSR_ERR_INVALID, "layout is NULL");
  if (l->shards) return hsr_error(HSR_ERR_STATE, "layout already finalized");
  if (shards < 1 || shards > 1 << 20)
    return hsr_error(HSR_ERR_INVALID, "layout: %d shards (valid: 1 to %d)", shards, 1 << 20);
  if ((size_t)shards * (size_t)l->parts > (size_t)1 << 24)
    return hsr_error(HSR_ERR_INVALID, "layout: %d shards x %d pieces is more than %d", shards, l->parts, 1 << 24);
  for (int u = 0; u < l->nunits; u++) {
    size_t off = 0;
    for (int i = 0; i < l->nparams; i++) {
      if (l->params[i].unit != u) continue;
      off = round_up(off, l->align);
      l->params[i].offset = off;
      off += l->params[i].numel;
    }
    /* An empty unit still gets one aligned slot per piece so pieces are never empty buffers. */
    size_t q = (size_t)shards * (size_t)l->parts * l->align;
    l->units[u].len = off ? round_up(off, q) : q;
  }
  l->shards = shards;
  return HSR_OK;
}

int rt_layout_num_units(const rt_layout *l) { return l ? l->nunits : 0; }
int rt_layout_num_params(const rt_layout *l) { return l ? l->nparams : 0; }
int rt_layout_shards(const rt_layout *l) { return l ? l->shards : 0; }
size_t rt_layout_align(const rt_layout *l) { return l ? l->align : 0; }
const char *rt_layout_unit_name(const rt_layout *l, int unit) {
  return l && unit >= 0 && unit < l->nunits ? l->units[unit].name : "?";
}
size_t rt_layout_unit_len(const rt_layout *l, int unit) {
  return l && unit >= 0 && unit < l->nunits ? l->units[unit].len : 0;
}
size_t rt_layout_shard_len(const rt_layout *l, int unit) {
  return l && l->shards ? rt_layout_unit_len(l, unit) / (size_t)l->shards : 0;
}

hsr_status rt_layout_param(const rt_layout *l, int index, rt_param_info *out) {
  if (!l || !out || index < 0 || index >= l->nparams)
    return hsr_error(HSR_ERR_INVALID, "parameter index %d out of range (%d parameters)", index, l ? l->nparams : 0);
  *out = l->params[index];
  return HSR_OK;
}

hsr_status rt_layout_find(const rt_layout *l, const char *name, int *index) {
  if (!l || !name) return hsr_error(HSR_ERR_INVALID, "layout or name is NULL");
  for (int i = 0; i < l->nparams; i++)
    if (!strcmp(l->params[i].name, name)) {
      if (index) *index = i;
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_NOT_FOUND, "no parameter named '%s'", name);
}

int rt_layout_owner(const rt_layout *l, int unit, size_t elem) {
  if (!l || !l->shards || unit < 0 || unit >= l->nunits || elem >= l->units[unit].len) return -1;
  return (int)(elem / (l->units[unit].len / (size_t)l->shards));
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t rt_layout_hash(const rt_layout *l) {
  uint64_t h = 0xcbf29ce484222325ull;
  if (!l) return h;
  uint64_t hdr[4] = {l->align, (uint64_t)l->shards, (uint64_t)l->nunits, (uint64_t)l->parts};
  h = fnv(h, hdr, sizeof hdr);
  for (int u = 0; u < l->nunits; u++) {
    h = fnv(h, l->units[u].name, strlen(l->units[u].name) + 1);
    uint64_t len = l->units[u].len;
    h = fnv(h, &len, sizeof len);
  }
  for (int i = 0; i < l->nparams; i++) {
    const rt_param_info *p = &l->params[i];
    h = fnv(h, p->name, strlen(p->name) + 1);
    int64_t v[4 + HSR_RT_MAX_DIMS] = {p->unit, p->group, p->ndim, (int64_t)p->offset};
    for (int d = 0; d < p->ndim; d++) v[4 + d] = p->shape[d];
    h = fnv(h, v, sizeof v);
  }
  return h;
}
