/* Host-only build: the model's CUDA entry points exist and say so (a CUDA
 * device cannot be opened in such a build, so they are never reached). */
#include "hsr/config.h"
#include "mlp_cuda.h"

#if !HSR_HAVE_CUDA
#define NO_CUDA return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA")
hsr_status mlp_cuda_bias_add(hsr_stream *s, int n, int out, const float *b, float *y) {
  (void)s, (void)n, (void)out, (void)b, (void)y;
  NO_CUDA;
}
hsr_status mlp_cuda_gelu(hsr_stream *s, size_t n, const float *a, float *g) {
  (void)s, (void)n, (void)a, (void)g;
  NO_CUDA;
}
hsr_status mlp_cuda_gelu_bwd(hsr_stream *s, size_t n, const float *a, float *dg) {
  (void)s, (void)n, (void)a, (void)dg;
  NO_CUDA;
}
hsr_status mlp_cuda_col_sum_add(hsr_stream *s, int n, int cols, const float *dy, float *db) {
  (void)s, (void)n, (void)cols, (void)dy, (void)db;
  NO_CUDA;
}
hsr_status mlp_cuda_ce(hsr_stream *s, int n, int C, float *z, const int *y, double *rowloss) {
  (void)s, (void)n, (void)C, (void)z, (void)y, (void)rowloss;
  NO_CUDA;
}
#else
typedef int mlp_nocuda_unused; /* ISO C wants a declaration in every file */
#endif
