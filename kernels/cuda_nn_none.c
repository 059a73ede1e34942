/* Host-only build: the CUDA entry points of the transformer layers exist
 * and say so (no CUDA device can be opened in such a build). */
#include "hsr/config.h"
#include "nn_internal.h"

#if !HSR_HAVE_CUDA
#define NO_CUDA return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA")
hsr_status kc_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                           const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                           float beta, float *c, size_t ldc, size_t stride_c, size_t count) {
  (void)s, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)stride_a,
      (void)b, (void)ldb, (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c, (void)count;
  NO_CUDA;
}
hsr_status kc_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd) {
  (void)s, (void)rows, (void)C, (void)x, (void)w, (void)b, (void)eps, (void)y, (void)mean, (void)rstd;
  NO_CUDA;
}
hsr_status kc_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db) {
  (void)s, (void)rows, (void)C, (void)dy, (void)x, (void)w, (void)mean, (void)rstd, (void)dx, (void)dw, (void)db;
  NO_CUDA;
}
hsr_status kc_gelu(hsr_stream *s, size_t n, const float *x, float *y) {
  (void)s, (void)n, (void)x, (void)y;
  NO_CUDA;
}
hsr_status kc_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx) {
  (void)s, (void)n, (void)x, (void)dy, (void)dx;
  NO_CUDA;
}
hsr_status kc_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y) {
  (void)s, (void)rows, (void)cols, (void)b, (void)y;
  NO_CUDA;
}
hsr_status kc_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db) {
  (void)s, (void)rows, (void)cols, (void)dy, (void)db;
  NO_CUDA;
}
hsr_status kc_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p) {
  (void)s, (void)rows, (void)T, (void)scale, (void)x, (void)p;
  NO_CUDA;
}
hsr_status kc_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx) {
  (void)s, (void)rows, (void)T, (void)scale, (void)p, (void)dp, (void)dx;
  NO_CUDA;
}
hsr_status kc_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss) {
  (void)s, (void)rows, (void)V, (void)z, (void)targets, (void)grad_scale, (void)rowloss;
  NO_CUDA;
}
hsr_status kc_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out) {
  (void)s, (void)B, (void)T, (void)C, (void)V, (void)tokens, (void)wte, (void)wpe, (void)out;
  NO_CUDA;
}
hsr_status kc_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe) {
  (void)s, (void)B, (void)T, (void)C, (void)V, (void)tokens, (void)dout, (void)dwte, (void)dwpe;
  NO_CUDA;
}
#else
typedef int nn_nocuda_unused; /* ISO C wants a declaration in every file */
#endif
