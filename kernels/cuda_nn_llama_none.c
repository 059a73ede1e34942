/* Host-only build: the CUDA entry points of the Llama-style layers exist and
 * say so (no CUDA device can be opened in such a build). */
#include "hsr/config.h"
#include "nn_llama_internal.h"

#if !HSR_HAVE_CUDA
#define NO_CUDA return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA")
hsr_status kc_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd) {
  (void)s, (void)rows, (void)C, (void)x, (void)w, (void)eps, (void)y, (void)rstd;
  NO_CUDA;
}
hsr_status kc_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw) {
  (void)s, (void)rows, (void)C, (void)dy, (void)x, (void)w, (void)rstd, (void)dx, (void)dw;
  NO_CUDA;
}
hsr_status kc_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y) {
  (void)s, (void)n, (void)g, (void)u, (void)y;
  NO_CUDA;
}
hsr_status kc_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du) {
  (void)s, (void)n, (void)g, (void)u, (void)dy, (void)dg, (void)du;
  NO_CUDA;
}
hsr_status kc_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs) {
  (void)s, (void)T, (void)D, (void)theta, (void)cs;
  NO_CUDA;
}
hsr_status kc_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x) {
  (void)s, (void)rows, (void)T, (void)heads, (void)D, (void)cs, (void)inverse, (void)x;
  NO_CUDA;
}
#else
typedef int nn_llama_nocuda_unused; /* ISO C wants a declaration in every file */
#endif
