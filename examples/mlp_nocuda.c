/* Host-only build: the model's CUDA entry points exist and say so (a CUDA
 * device cannot be opened in such a build, so they are never reached). */
#include "hsr/config.h"
#include "mlp_cuda.h"

#if !HSR_HAVE_CUDA
#define NO_CUDA return hsr_error(HSR_ERR_UNSUPPORTED, "this hsr was built without CUDA")
hsr_status mlp_cuda_ce(void *stream, int n, int C, float *z, const int *y, double *rowloss) {
  (void)stream, (void)n, (void)C, (void)z, (void)y, (void)rowloss;
  NO_CUDA;
}
#else
typedef int mlp_nocuda_unused; /* ISO C wants a declaration in every file */
#endif
