/* hsr kernels: the device layer (host and CUDA implementations behind one
 * API) and the element-wise loops used by reductions, the optimizer and the
 * example model. The per-element formulas are in hsr/kmath.h, shared by the
 * CPU loops and the CUDA kernels.
 *
 * Three kinds of device, one API:
 *   HSR_DEVICE_HOST  every call runs synchronously on the calling thread;
 *                    streams and events are trivially complete.
 *   HSR_DEVICE_CUDA  work is enqueued on the given stream (NULL = the
 *                    device's default stream, CUDA's legacy stream).
 *   HSR_DEVICE_SIM   an emulated device with CUDA's stream semantics and no
 *                    GPU: memory from its own arena, a worker thread per
 *                    stream (the default stream too) running the CPU twins
 *                    of the kernels in stream order, events as CUDA's (a
 *                    record captures the stream's position, a wait waits for
 *                    the last record before it, a never-recorded event is
 *                    complete). Host calls return once the work is queued.
 *                    HSR_SIM_DELAY adds seeded random delays before each
 *                    operation; HSR_SIM_CHECK=1 checks every operation's
 *                    declared reads and writes against the streams' order
 *                    (docs/kernels.md, "The sim device").
 * A program on the engine queues its work on hsr_rt_compute_stream.
 * A process drives one device; a device object is used by one thread at a
 * time.
 */
#ifndef HSR_KERNELS_H
#define HSR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "hsr/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_device_kind { HSR_DEVICE_HOST = 0, HSR_DEVICE_CUDA = 1, HSR_DEVICE_SIM = 2 } hsr_device_kind;

typedef struct hsr_device hsr_device;
typedef struct hsr_stream hsr_stream;

HSR_API hsr_status hsr_device_open(hsr_device_kind kind, int ordinal, hsr_device **out);
HSR_API hsr_status hsr_device_close(hsr_device *d);
HSR_API hsr_device_kind hsr_device_kind_of(const hsr_device *d);

HSR_API hsr_status hsr_device_alloc(hsr_device *d, size_t bytes, void **ptr);
HSR_API hsr_status hsr_device_free(hsr_device *d, void *ptr);
/* Copies between any two pointers the device can address (host<->device too). */
HSR_API hsr_status hsr_device_copy(hsr_device *d, void *dst, const void *src, size_t bytes, hsr_stream *s);
HSR_API hsr_status hsr_device_memset(hsr_device *d, void *dst, int value, size_t bytes, hsr_stream *s);

HSR_API hsr_status hsr_stream_sync(hsr_stream *s, double timeout_s);

/* A kernel of the program's own, with its CPU twin (llm.c's rule): `host`
 * runs on a host device at once and on a sim device on the stream's thread
 * in stream order; `cuda` is called with the native cudaStream_t. args
 * (args_bytes <= HSR_KERNEL_ARGS_MAX) are copied at the call. Every buffer
 * the kernel touches is listed in acc, which the sim device's sanitizer
 * checks against the streams' order. */
#define HSR_KERNEL_ARGS_MAX 256
typedef struct hsr_access {
  const void *ptr;
  size_t bytes;
  int write; /* 0 read, 1 written (read-modify-write counts as written) */
} hsr_access;
typedef struct hsr_kernel_def {
  const char *name;
  void (*host)(const void *args);
  hsr_status (*cuda)(void *stream, const void *args);
} hsr_kernel_def;
HSR_API hsr_status hsr_kernels_launch(hsr_device *d, hsr_stream *s, const hsr_kernel_def *k, const void *args,
                                      size_t args_bytes, const hsr_access *acc, int nacc);

/* dst[i] = (dst_dt) src[i]; f32<->bf16, f32<->f16, same-type copy. */
HSR_API hsr_status hsr_kernels_cast(hsr_device *d, hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt,
                                    void *dst, hsr_dtype dst_dt);
/* y[i] += alpha * x[i] (same dtype; bf16/f16 accumulate in f32 per element). */
HSR_API hsr_status hsr_kernels_axpy(hsr_device *d, hsr_stream *s, size_t n, double alpha, const void *x, void *y,
                                    hsr_dtype dt);

/* Row-major f32 GEMM: C (m x n) = alpha * op(A) * op(B) + beta * C, where
 * op(X) = X, or X transposed when trans_x is nonzero. op(A) is m x k (A is
 * stored k x m when transposed), op(B) is k x n. Leading dimensions are row
 * strides in elements. OpenBLAS on host; cuBLAS on CUDA (full fp32, no TF32). */
HSR_API hsr_status hsr_kernels_gemm(hsr_device *d, hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n,
                                    size_t k, float alpha, const float *a, size_t lda, const float *b, size_t ldb,
                                    float beta, float *c, size_t ldc);

/* The same product for `count` matrices at once: matrix i of A, B and C
 * starts stride_a, stride_b, stride_c elements after matrix i-1 (the heads
 * of an attention block). cuBLAS strided-batched on CUDA. */
HSR_API hsr_status hsr_kernels_gemm_batched(hsr_device *d, hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n,
                                            size_t k, float alpha, const float *a, size_t lda, size_t stride_a,
                                            const float *b, size_t ldb, size_t stride_b, float beta, float *c,
                                            size_t ldc, size_t stride_c, size_t count);

/* ---- transformer layers (the GPT example model) ----------------------------
 * Row-major f32, the per-row formulas of hsr/kmath.h. On a CUDA device every
 * pointer is device memory (tokens, targets and rowloss too). Outputs marked
 * "+=" accumulate into what is there. */

/* y = LayerNorm(x) w + b over `rows` rows of C; mean and rstd (rows each)
 * are kept for the backward. */
HSR_API hsr_status hsr_kernels_layernorm(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *x,
                                         const float *w, const float *b, float eps, float *y, float *mean, float *rstd);
/* dx +=, dw +=, db += the gradients of the LayerNorm above for upstream dy. */
HSR_API hsr_status hsr_kernels_layernorm_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *dy,
                                             const float *x, const float *w, const float *mean, const float *rstd,
                                             float *dx, float *dw, float *db);
/* y = gelu(x) (tanh approximation); dx = dy * gelu'(x) (dx may be dy). */
HSR_API hsr_status hsr_kernels_gelu(hsr_device *d, hsr_stream *s, size_t n, const float *x, float *y);
HSR_API hsr_status hsr_kernels_gelu_bwd(hsr_device *d, hsr_stream *s, size_t n, const float *x, const float *dy,
                                        float *dx);
/* y[r][c] += b[c]; db[c] += sum over r of dy[r][c]. */
HSR_API hsr_status hsr_kernels_bias_add(hsr_device *d, hsr_stream *s, size_t rows, size_t cols, const float *b,
                                        float *y);
HSR_API hsr_status hsr_kernels_bias_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t cols, const float *dy,
                                        float *db);
/* Causal softmax over blocks of T x T scores: row r is row i = r % T of its
 * block, p = softmax(scale * x) over its first i + 1 entries, 0 after (p may
 * be x). The backward gives dx = the gradient with respect to x (dx may be dp). */
HSR_API hsr_status hsr_kernels_softmax_causal(hsr_device *d, hsr_stream *s, size_t rows, size_t T, float scale,
                                              const float *x, float *p);
HSR_API hsr_status hsr_kernels_softmax_causal_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t T, float scale,
                                                  const float *p, const float *dp, float *dx);
/* Softmax cross-entropy of `rows` rows of V logits: rowloss[r] (f64) =
 * -log softmax(z[r])[targets[r]], and z becomes the gradient of
 * grad_scale * sum(rowloss). Targets must be in [0, V). */
HSR_API hsr_status hsr_kernels_xent(hsr_device *d, hsr_stream *s, size_t rows, size_t V, float *z,
                                    const int32_t *targets, float grad_scale, double *rowloss);
/* out[b][t] = wte[tokens[b][t]] + wpe[t] for B x T tokens in [0, V), rows of C;
 * the backward adds dout to the rows it came from (dwte +=, dwpe +=), in a
 * fixed order. */
HSR_API hsr_status hsr_kernels_embed(hsr_device *d, hsr_stream *s, size_t B, size_t T, size_t C, size_t V,
                                     const int32_t *tokens, const float *wte, const float *wpe, float *out);
HSR_API hsr_status hsr_kernels_embed_bwd(hsr_device *d, hsr_stream *s, size_t B, size_t T, size_t C, size_t V,
                                         const int32_t *tokens, const float *dout, float *dwte, float *dwpe);

/* ---- the Llama-style model's layers (kernels/nn_llama.c) ------------------- */

/* y = x rstd w, rstd = 1 / sqrt(mean(x^2) + eps) per row of C (kept for
 * the backward); dx +=, dw += its gradients for upstream dy. */
HSR_API hsr_status hsr_kernels_rmsnorm(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *x,
                                       const float *w, float eps, float *y, float *rstd);
HSR_API hsr_status hsr_kernels_rmsnorm_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *dy,
                                           const float *x, const float *w, const float *rstd, float *dx, float *dw);
/* y = silu(g) u elementwise; dg = dy u silu'(g), du = dy silu(g) (dg may be
 * g's buffer only if nothing reads g afterwards; likewise du). */
HSR_API hsr_status hsr_kernels_swiglu(hsr_device *d, hsr_stream *s, size_t n, const float *g, const float *u, float *y);
HSR_API hsr_status hsr_kernels_swiglu_bwd(hsr_device *d, hsr_stream *s, size_t n, const float *g, const float *u,
                                          const float *dy, float *dg, float *du);
/* The rotary table of T positions x D/2 pairs, (cos, sin) each: 2 T (D/2)
 * floats, for heads of D channels (D even) and base theta. */
HSR_API hsr_status hsr_kernels_rope_table(hsr_device *d, hsr_stream *s, size_t T, size_t D, float theta, float *cs);
/* Rotates, in place, `rows` rows of `heads` heads of D channels: row r is at
 * position r % T (table from hsr_kernels_rope_table, at least T positions);
 * inverse turns back, which is the backward. */
HSR_API hsr_status hsr_kernels_rope(hsr_device *d, hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D,
                                    const float *cs, int inverse, float *x);

#ifdef __cplusplus
}
#endif
#endif
