/* hsr memory ledger: per-rank bytes by category, current and peak, split
 * persistent (lives across steps) from transient, with the phase and unit in
 * which each peak was reached. The runtime records every allocation it makes;
 * programs add their activations with hsr_ledger_note. */
#ifndef HSR_LEDGER_H
#define HSR_LEDGER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_mem_cat {
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
  HSR_MEM_CAT_COUNT
} hsr_mem_cat;

typedef enum hsr_phase {
  HSR_PHASE_INIT = 0,
  HSR_PHASE_FORWARD,
  HSR_PHASE_BACKWARD,
  HSR_PHASE_REDUCE,
  HSR_PHASE_STEP,
  HSR_PHASE_CKPT, /* inside hsr_ckpt_save / hsr_ckpt_load */
  HSR_PHASE_COUNT
} hsr_phase;

typedef struct hsr_ledger hsr_ledger;

/* Activations reported by the program: delta > 0 allocates, < 0 releases. */
HSR_API hsr_status hsr_ledger_note(hsr_ledger *l, int64_t delta_bytes);

#ifdef __cplusplus
}
#endif
#endif
