/* hsr tune's view of a program: the sequence of lifecycle calls of one
 * training step, from which the tuner predicts the engine's memory ledger
 * without a run (a model describes its program with these). */
#ifndef HSR_TUNE_LEDGER_H
#define HSR_TUNE_LEDGER_H

#include "hsr/ledger.h"
#include "hsr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_prog_op {
  HSR_PROG_FWD_BEGIN = 0,
  HSR_PROG_FWD_END,
  HSR_PROG_BWD_BEGIN,
  HSR_PROG_BWD_END,
  HSR_PROG_STEP,
  HSR_PROG_RECOMPUTE /* hsr_rt_recompute_begin .. _end inside the unit's backward window */
} hsr_prog_op;
typedef struct hsr_prog_call {
  hsr_prog_op op;
  int unit;
} hsr_prog_call;

/* The program of one step of a model whose first `outer` units wrap the rest
 * (like an embedding/head root unit: begun before the inner units, ended
 * after them), with `micro` forward/backward passes, then hsr_rt_step and
 * hsr_rt_zero_grad. Inner units run in order forward, in reverse backward;
 * with recompute other than none each inner unit recomputes right after its
 * backward_begin. *calls is malloc'd (caller frees). */
HSR_API hsr_status hsr_tune_prog_nested(int nunits, int outer, int micro, hsr_rt_recompute recompute,
                                        hsr_prog_call **calls, int *n);

#ifdef __cplusplus
}
#endif
#endif
