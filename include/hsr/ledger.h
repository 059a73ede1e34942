/* hsr memory ledger: the engine's per-rank account of its memory
 * (hsr_rt_ledger); a program adds its activations with hsr_ledger_note. The
 * categories, peaks and reports are internal (runtime/io/ledger_internal.h). */
#ifndef HSR_LEDGER_H
#define HSR_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hsr_ledger hsr_ledger;

/* Activations reported by the program: delta > 0 allocates, < 0 releases. */
HSR_API hsr_status hsr_ledger_note(hsr_ledger *l, int64_t delta_bytes);

#ifdef __cplusplus
}
#endif
#endif
