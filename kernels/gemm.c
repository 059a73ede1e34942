/* Row-major f32 GEMM for the example model: OpenBLAS on host (and sim), cuBLAS on CUDA. */
#include <cblas.h>
#include <limits.h>

#include "internal.h"

hsr_status hsr_kernels_gemm(hsr_device *d, hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                            float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta, float *c,
                            size_t ldc) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
    return hsr_error(HSR_ERR_INVALID, "gemm %zux%zux%zu: sizes and leading dimensions must be <= %d", m, n, k, INT_MAX);
  size_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  if (lda < (a_cols ? a_cols : 1) || ldb < (b_cols ? b_cols : 1) || ldc < (n ? n : 1))
    return hsr_error(HSR_ERR_INVALID,
                     "gemm m=%zu n=%zu k=%zu trans=%d,%d: leading dimensions lda=%zu ldb=%zu ldc=%zu must be "
                     ">= %zu, %zu, %zu",
                     m, n, k, trans_a, trans_b, lda, ldb, ldc, a_cols, b_cols, n);
  if (m == 0 || n == 0) return HSR_OK;
  if (!c || (k && (!a || !b))) return hsr_error(HSR_ERR_INVALID, "gemm: NULL matrix pointer");
  return d->k->gemm(s, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

hsr_status kh_gemm(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float *a,
                   size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc) {
  (void)s;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
              (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
  return HSR_OK;
}
