/* CUDA kernel of the example model (examples/mlp_cuda.cu; a host-only build
 * gets examples/mlp_nocuda.c, whose entry point says so): the loss, on the
 * given stream, by the formula of mlp_math.h. */
#ifndef HSR_EXAMPLES_MLP_CUDA_H
#define HSR_EXAMPLES_MLP_CUDA_H

#include <stddef.h>

#include "hsr/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* per row: rowloss[r] = CE loss, z[r] = dloss/dz, on stream (a cudaStream_t) */
hsr_status mlp_cuda_ce(void *stream, int n, int C, float *z, const int *y, double *rowloss);

#ifdef __cplusplus
}
#endif
#endif
