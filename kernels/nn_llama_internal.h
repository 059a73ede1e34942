/* kernels/ private: the CUDA entry points of the Llama-style model's layers
 * (kernels/cuda_nn_llama.cu; kernels/cuda_nn_llama_none.c in a host-only
 * build). Arguments are already validated by kernels/nn_llama.c. */
#ifndef HSR_KERNELS_NN_LLAMA_INTERNAL_H
#define HSR_KERNELS_NN_LLAMA_INTERNAL_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

hsr_status kc_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd);
hsr_status kc_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw);
hsr_status kc_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y);
hsr_status kc_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du);
hsr_status kc_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs);
hsr_status kc_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x);

#ifdef __cplusplus
}
#endif
#endif
