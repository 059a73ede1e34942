/* CUDA kernels of the example model (examples/mlp_cuda.cu; a host-only build
 * gets examples/mlp_nocuda.c, whose entry points say so). Each launches on
 * the given stream and applies a formula of mlp_math.h. */
#ifndef HSR_EXAMPLES_MLP_CUDA_H
#define HSR_EXAMPLES_MLP_CUDA_H

#include <stddef.h>

#include "hsr/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[s][o] += b[o] for n rows of `out` columns */
hsr_status mlp_cuda_bias_add(hsr_stream *s, int n, int out, const float *b, float *y);
/* g[i] = gelu(a[i]) */
hsr_status mlp_cuda_gelu(hsr_stream *s, size_t n, const float *a, float *g);
/* dg[i] *= gelu'(a[i]) */
hsr_status mlp_cuda_gelu_bwd(hsr_stream *s, size_t n, const float *a, float *dg);
/* db[o] += sum over rows of dy[.][o] */
hsr_status mlp_cuda_col_sum_add(hsr_stream *s, int n, int cols, const float *dy, float *db);
/* per row: rowloss[r] = CE loss, z[r] = dloss/dz */
hsr_status mlp_cuda_ce(hsr_stream *s, int n, int C, float *z, const int *y, double *rowloss);

#ifdef __cplusplus
}
#endif
#endif
