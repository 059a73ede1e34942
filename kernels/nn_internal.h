/* kernels/ private: the CUDA entry points of the transformer layers
 * (kernels/cuda_nn.cu; kernels/cuda_nn_none.c in a host-only build).
 * Arguments are already validated by kernels/nn.c. */
#ifndef HSR_KERNELS_NN_INTERNAL_H
#define HSR_KERNELS_NN_INTERNAL_H

#include <limits.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layers' argument checks (nn.c, nn_llama.c). */
static inline hsr_status need(const void *p, const char *what, const char *fn) {
  if (!p) return hsr_error(HSR_ERR_INVALID, "%s: %s is NULL", fn, what);
  return HSR_OK;
}
#define NEED(p, fn) HSR_CHECK(need((p), #p, (fn)))
static inline hsr_status fits_int(size_t v, const char *what, const char *fn) {
  if (v > INT_MAX) return hsr_error(HSR_ERR_INVALID, "%s: %s = %zu exceeds %d", fn, what, v, INT_MAX);
  return HSR_OK;
}

hsr_status kc_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                           const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                           float beta, float *c, size_t ldc, size_t stride_c, size_t count);
hsr_status kc_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd);
hsr_status kc_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db);
hsr_status kc_gelu(hsr_stream *s, size_t n, const float *x, float *y);
hsr_status kc_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx);
hsr_status kc_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y);
hsr_status kc_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db);
hsr_status kc_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p);
hsr_status kc_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx);
hsr_status kc_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss);
hsr_status kc_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out);
hsr_status kc_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe);

#ifdef __cplusplus
}
#endif
#endif
