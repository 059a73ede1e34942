/* The memory ledger's internals: per-rank bytes by category, current and
 * peak, split persistent (lives across steps) from transient, with the phase
 * and unit in which each peak was reached. The runtime records every
 * allocation it makes. Not installed, not exported from libhsr.so (docs/api.md
 * holds the contract). */
#ifndef HSR_RUNTIME_IO_LEDGER_INTERNAL_H
#define HSR_RUNTIME_IO_LEDGER_INTERNAL_H
#include <stdio.h>

#include "hsr/ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mem_cat {
  /* persistent */
  HSR_MEM_PARAM_SHARD = 0,
  HSR_MEM_GRAD_SHARD,
  HSR_MEM_MASTER,
  HSR_MEM_MOMENT_M,
  HSR_MEM_MOMENT_V,
  /* transient */
  HSR_MEM_FULL_UNIT,
  HSR_MEM_PARTIAL_SLICE,
  HSR_MEM_RS_BUF,
  HSR_MEM_AR_BUF,
  HSR_MEM_STAGING,
  HSR_MEM_CKPT_STAGING, /* checkpoint save/load staging (host memory, hsr/ckpt.h) */
  HSR_MEM_ACTIVATION,
  /* host memory (persistent): the optimizer state a device run offloads
   * (hsr_rt_config.offload), pinned; not in the device totals below */
  HSR_MEM_HOST_MASTER,
  HSR_MEM_HOST_MOMENT_M,
  HSR_MEM_HOST_MOMENT_V,
  HSR_MEM_HOST_GRAD_SHARD,
  HSR_MEM_HOST_STAGING, /* per unit: the reduced gradient copied down, the updated parameters before they go up */
  HSR_MEM_CAT_COUNT
} mem_cat;

typedef enum ledger_phase {
  HSR_PHASE_INIT = 0,
  HSR_PHASE_FORWARD,
  HSR_PHASE_BACKWARD,
  HSR_PHASE_REDUCE,
  HSR_PHASE_STEP,
  HSR_PHASE_CKPT,      /* inside hsr_ckpt_save / hsr_ckpt_load */
  HSR_PHASE_RECOMPUTE, /* between hsr_rt_recompute_begin and _end */
  HSR_PHASE_COUNT
} ledger_phase;

/* Where a peak happened. unit -1: not inside a unit. */
typedef struct ledger_where {
  ledger_phase phase;
  int unit;
  int64_t step;
} ledger_where;
hsr_status ledger_create(hsr_ledger **out);
void ledger_free(hsr_ledger *l);
hsr_status ledger_reset(hsr_ledger *l);
hsr_status ledger_alloc(hsr_ledger *l, mem_cat cat, size_t bytes);

/* Releasing more than is alive in the category is HSR_ERR_STATE (a bookkeeping bug). */
hsr_status ledger_release(hsr_ledger *l, mem_cat cat, size_t bytes);

/* The phase/unit/step that later allocations are attributed to. */
hsr_status ledger_set_phase(hsr_ledger *l, ledger_phase phase, int unit, int64_t step);
int mem_cat_persistent(mem_cat cat);
/* 1 for the host categories (HSR_MEM_HOST_*), which the totals below leave
 * out: they count device memory (and the program's activations). */
int mem_cat_host(mem_cat cat);
const char *mem_cat_name(mem_cat cat); /* "param_shard", "full_unit", ... */
const char *phase_name(ledger_phase p);       /* "init", "forward", ... */
uint64_t ledger_current(const hsr_ledger *l, mem_cat cat);
uint64_t ledger_peak(const hsr_ledger *l, mem_cat cat);
/* Host memory: current and peak over the host categories. */
uint64_t ledger_host(const hsr_ledger *l);
uint64_t ledger_host_peak(const hsr_ledger *l);

/* Totals over the persistent categories, the transient ones, and all
 * (every one but the host categories). */
uint64_t ledger_persistent(const hsr_ledger *l);
uint64_t ledger_transient_peak(const hsr_ledger *l);
uint64_t ledger_total_peak(const hsr_ledger *l);

/* Peak of the runtime's own allocations (every category but activations). */
uint64_t ledger_runtime_peak(const hsr_ledger *l);
ledger_where ledger_total_peak_where(const hsr_ledger *l);
ledger_where ledger_runtime_peak_where(const hsr_ledger *l);

/* A human table: measured, and `predicted` beside it when not NULL. nparams > 0
 * adds persistent bytes per parameter. */
hsr_status ledger_print(const hsr_ledger *measured, const hsr_ledger *predicted, double nparams, FILE *f);

/* JSON object text (malloc'd, caller frees). */
hsr_status ledger_json(const hsr_ledger *l, char **out);

#ifdef __cplusplus
}
#endif
#endif
