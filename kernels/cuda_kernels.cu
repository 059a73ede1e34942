// CUDA kernels over the kmath.h formulas: grid-stride loops, 16-byte vector
// loads where the pointers allow it (a scalar instantiation otherwise), all
// launched on the caller's stream.
#include <cuda_runtime.h>
#include <stdlib.h>

#include "internal.h"

#define BLOCK 256

static hsr_status launch_check(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return hsr_error(HSR_ERR_CUDA, "%s launch: %s", what, cudaGetErrorString(e));
  return HSR_OK;
}

// Exactly the blocks that are resident at once on every SM, no more: the
// grid-stride loop covers the rest, and no half-empty second wave forms.
template <typename K> static unsigned grid_for(const hsr_stream *s, K kernel, size_t items) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, 0) != cudaSuccess || per_sm < 1) {
    (void)cudaGetLastError();
    per_sm = 1;
  }
  size_t g = (items + BLOCK - 1) / BLOCK, cap = (size_t)s->dev->sm_count * (size_t)per_sm;
  if (g > cap) g = cap;
  return (unsigned)(g ? g : 1);
}

static inline bool aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

template <typename T, int W> struct alignas(sizeof(T) * W) Vec { T v[W]; };

// ---- element codecs: f32 is `float`, bf16/f16 travel as uint16_t bits ----
enum { C_F32, C_BF16, C_F16, C_F64 };
template <int C> struct Codec;
template <> struct Codec<C_F32> {
  typedef float T;
  __device__ static float dec(float x) { return x; }
  __device__ static float enc(float x) { return x; }
};
template <> struct Codec<C_BF16> {
  typedef uint16_t T;
  __device__ static float dec(uint16_t x) { return hsr_km_bf16_to_f32(x); }
  __device__ static uint16_t enc(float x) { return hsr_km_f32_to_bf16(x); }
};
template <> struct Codec<C_F16> {
  typedef uint16_t T;
  __device__ static float dec(uint16_t x) { return hsr_km_f16_to_f32(x); }
  __device__ static uint16_t enc(float x) { return hsr_km_f32_to_f16(x); }
};

// ---- AdamW ------------------------------------------------------------------
// OUT: -1 no compute copy, else the codec of param_out.
template <int W, int G, int OUT>
__global__ void __launch_bounds__(BLOCK)
    k_adamw(size_t n, float *__restrict__ p, float *__restrict__ m, float *__restrict__ v,
            const void *__restrict__ grad, void *__restrict__ out, hsr_km_adamw_c c) {
  typedef typename Codec<G>::T GT;
  typedef typename Codec<(OUT < 0 ? C_F32 : OUT)>::T OT;
  const GT *g = (const GT *)grad;
  OT *o = (OT *)out;
  size_t nv = n / W, stride = (size_t)gridDim.x * blockDim.x, tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = tid; i < nv; i += stride) {
    Vec<float, W> pv = ((const Vec<float, W> *)p)[i], mv = ((const Vec<float, W> *)m)[i],
                  vv = ((const Vec<float, W> *)v)[i];
    Vec<GT, W> gv = ((const Vec<GT, W> *)g)[i];
    Vec<OT, W> ov;
#pragma unroll
    for (int j = 0; j < W; j++) {
      float np = hsr_km_adamw(&pv.v[j], &mv.v[j], &vv.v[j], Codec<G>::dec(gv.v[j]), &c);
      if (OUT >= 0) ov.v[j] = Codec<(OUT < 0 ? C_F32 : OUT)>::enc(np);
    }
    ((Vec<float, W> *)p)[i] = pv;
    ((Vec<float, W> *)m)[i] = mv;
    ((Vec<float, W> *)v)[i] = vv;
    if (OUT >= 0) ((Vec<OT, W> *)o)[i] = ov;
  }
  size_t i = nv * W + tid; // the tail, one element per thread
  if (i < n) {
    float np = hsr_km_adamw(&p[i], &m[i], &v[i], Codec<G>::dec(g[i]), &c);
    if (OUT >= 0) o[i] = Codec<(OUT < 0 ? C_F32 : OUT)>::enc(np);
  }
}

template <int G, int OUT>
static void launch_adamw(hsr_stream *s, size_t n, float *p, float *m, float *v, const void *g, void *o,
                         const hsr_km_adamw_c *c) {
  cudaStream_t st = (cudaStream_t)s->native;
  bool vec = aligned(p, 16) && aligned(m, 16) && aligned(v, 16) && aligned(g, 4 * (G == C_F32 ? 4 : 2)) &&
             (OUT < 0 || aligned(o, 4 * (OUT == C_F32 ? 4 : 2)));
  if (vec)
    k_adamw<4, G, OUT><<<grid_for(s, k_adamw<4, G, OUT>, n / 4 + 1), BLOCK, 0, st>>>(n, p, m, v, g, o, *c);
  else
    k_adamw<1, G, OUT><<<grid_for(s, k_adamw<1, G, OUT>, n), BLOCK, 0, st>>>(n, p, m, v, g, o, *c);
}

extern "C" hsr_status kc_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad,
                               hsr_dtype grad_dt, void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c) {
  bool g16 = grad_dt == HSR_BF16;
  if (!param_out) {
    if (g16)
      launch_adamw<C_BF16, -1>(s, n, master, m, v, grad, NULL, c);
    else
      launch_adamw<C_F32, -1>(s, n, master, m, v, grad, NULL, c);
  } else if (param_dt == HSR_F32) {
    if (g16)
      launch_adamw<C_BF16, C_F32>(s, n, master, m, v, grad, param_out, c);
    else
      launch_adamw<C_F32, C_F32>(s, n, master, m, v, grad, param_out, c);
  } else {
    if (g16)
      launch_adamw<C_BF16, C_BF16>(s, n, master, m, v, grad, param_out, c);
    else
      launch_adamw<C_F32, C_BF16>(s, n, master, m, v, grad, param_out, c);
  }
  return launch_check("adamw");
}

// ---- element-wise maps: y[i] = op(x[i], y[i]) ---------------------------------
// Each thread loads MAP_U vectors before it computes, so enough bytes are in
// flight to cover memory latency even where a vector is only 8 bytes (the
// 16-bit side of a cast). x and y may be the same array (scale), so no
// __restrict__ here.
#define MAP_U 4
template <int W, typename TX, typename TY, typename Op>
__global__ void __launch_bounds__(BLOCK) k_map(size_t n, const TX *x, TY *y, Op op) {
  typedef Vec<TX, W> VX;
  typedef Vec<TY, W> VY;
  size_t nv = n / W, stride = (size_t)gridDim.x * blockDim.x, tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t base = tid; base < nv; base += MAP_U * stride) {
    VX a[MAP_U];
    VY b[MAP_U];
#pragma unroll
    for (int u = 0; u < MAP_U; u++) {
      size_t i = base + u * stride;
      if (i < nv) {
        a[u] = ((const VX *)x)[i];
        if (Op::reads_y) b[u] = ((const VY *)y)[i];
      }
    }
#pragma unroll
    for (int u = 0; u < MAP_U; u++) {
      size_t i = base + u * stride;
      if (i < nv) {
#pragma unroll
        for (int j = 0; j < W; j++) b[u].v[j] = op(a[u].v[j], b[u].v[j]);
        ((VY *)y)[i] = b[u];
      }
    }
  }
  size_t i = nv * W + tid; // the tail (< W elements), one per thread
  if (i < n) y[i] = op(x[i], Op::reads_y ? y[i] : TY());
}

// W: elements per 16-byte vector of the wider of the two types.
template <typename TX, typename TY, typename Op>
static hsr_status launch_map(hsr_stream *s, size_t n, const void *x, void *y, Op op, const char *what) {
  const int W = 16 / (sizeof(TX) > sizeof(TY) ? sizeof(TX) : sizeof(TY));
  cudaStream_t st = (cudaStream_t)s->native;
  if (aligned(x, W * sizeof(TX)) && aligned(y, W * sizeof(TY)))
    k_map<W><<<grid_for(s, k_map<W, TX, TY, Op>, (n / W + MAP_U - 1) / MAP_U + 1), BLOCK, 0, st>>>(n, (const TX *)x,
                                                                                                   (TY *)y, op);
  else
    k_map<1>
        <<<grid_for(s, k_map<1, TX, TY, Op>, (n + MAP_U - 1) / MAP_U), BLOCK, 0, st>>>(n, (const TX *)x, (TY *)y, op);
  return launch_check(what);
}

template <int CI, int CO> struct CastOp {
  static const bool reads_y = false;
  __device__ typename Codec<CO>::T operator()(typename Codec<CI>::T a, typename Codec<CO>::T) const {
    return Codec<CO>::enc(Codec<CI>::dec(a));
  }
};

extern "C" hsr_status kc_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype sdt, void *dst, hsr_dtype ddt) {
  if (sdt == HSR_F32 && ddt == HSR_BF16)
    return launch_map<float, uint16_t>(s, n, src, dst, CastOp<C_F32, C_BF16>(), "cast");
  if (sdt == HSR_F32 && ddt == HSR_F16)
    return launch_map<float, uint16_t>(s, n, src, dst, CastOp<C_F32, C_F16>(), "cast");
  if (sdt == HSR_BF16 && ddt == HSR_F32)
    return launch_map<uint16_t, float>(s, n, src, dst, CastOp<C_BF16, C_F32>(), "cast");
  if (sdt == HSR_F16 && ddt == HSR_F32)
    return launch_map<uint16_t, float>(s, n, src, dst, CastOp<C_F16, C_F32>(), "cast");
  if (sdt == HSR_BF16 && ddt == HSR_F16)
    return launch_map<uint16_t, uint16_t>(s, n, src, dst, CastOp<C_BF16, C_F16>(), "cast");
  return launch_map<uint16_t, uint16_t>(s, n, src, dst, CastOp<C_F16, C_BF16>(), "cast");
}

template <int C> struct ScaleOp {
  static const bool reads_y = false;
  float a;
  __device__ typename Codec<C>::T operator()(typename Codec<C>::T x, typename Codec<C>::T) const {
    return Codec<C>::enc(hsr_km_scale(Codec<C>::dec(x), a));
  }
};
struct ScaleOp64 {
  static const bool reads_y = false;
  double a;
  __device__ double operator()(double x, double) const { return hsr_km_scale_f64(x, a); }
};

extern "C" hsr_status kc_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha) {
  float a = (float)alpha;
  switch (dt) {
  case HSR_F64: return launch_map<double, double>(s, n, x, x, ScaleOp64{alpha}, "scale");
  case HSR_F32: return launch_map<float, float>(s, n, x, x, ScaleOp<C_F32>{a}, "scale");
  case HSR_BF16: return launch_map<uint16_t, uint16_t>(s, n, x, x, ScaleOp<C_BF16>{a}, "scale");
  default: return launch_map<uint16_t, uint16_t>(s, n, x, x, ScaleOp<C_F16>{a}, "scale");
  }
}

template <int C> struct AxpyOp {
  static const bool reads_y = true;
  float a;
  __device__ typename Codec<C>::T operator()(typename Codec<C>::T x, typename Codec<C>::T y) const {
    return Codec<C>::enc(hsr_km_axpy(a, Codec<C>::dec(x), Codec<C>::dec(y)));
  }
};
struct AxpyOp64 {
  static const bool reads_y = true;
  double a;
  __device__ double operator()(double x, double y) const { return hsr_km_axpy_f64(a, x, y); }
};

extern "C" hsr_status kc_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt) {
  float a = (float)alpha;
  switch (dt) {
  case HSR_F64: return launch_map<double, double>(s, n, x, y, AxpyOp64{alpha}, "axpy");
  case HSR_F32: return launch_map<float, float>(s, n, x, y, AxpyOp<C_F32>{a}, "axpy");
  case HSR_BF16: return launch_map<uint16_t, uint16_t>(s, n, x, y, AxpyOp<C_BF16>{a}, "axpy");
  default: return launch_map<uint16_t, uint16_t>(s, n, x, y, AxpyOp<C_F16>{a}, "axpy");
  }
}

// ---- sum of squares: the order of kmath.h, a part per block, a lane per thread ----

// The kmath.h tree over the block's 256 lanes; the result is in thread 0.
__device__ double block_tree(double acc) {
  __shared__ double sh[HSR_KM_SQ_LANES];
  const int t = threadIdx.x;
  sh[t] = acc;
  __syncthreads();
  for (int h = HSR_KM_SQ_LANES / 2; h >= 32; h /= 2) {
    if (t < h) sh[t] = HSR_KM_DADD(sh[t], sh[t + h]);
    __syncthreads();
  }
  double x = t < 32 ? sh[t] : 0.0;
  if (t < 32)
    for (int h = 16; h >= 1; h /= 2) x = HSR_KM_DADD(x, __shfl_down_sync(0xffffffffu, x, h));
  return x;
}

template <typename T, int C>
__global__ void __launch_bounds__(HSR_KM_SQ_LANES)
    k_sumsq_parts(size_t n, const T *__restrict__ x, double *__restrict__ parts) {
  const size_t P = gridDim.x, chunks = (n + HSR_KM_SQ_CHUNK - 1) / HSR_KM_SQ_CHUNK;
  double acc = 0.0;
  for (size_t c = blockIdx.x; c < chunks; c += P) {
    size_t base = c * HSR_KM_SQ_CHUNK + threadIdx.x;
#pragma unroll
    for (int k = 0; k < HSR_KM_SQ_CHUNK / HSR_KM_SQ_LANES; k++) {
      size_t i = base + (size_t)k * HSR_KM_SQ_LANES;
      if (i < n) {
        double xv;
        if constexpr (C == C_BF16)
          xv = (double)hsr_km_bf16_to_f32(x[i]);
        else if constexpr (C == C_F16)
          xv = (double)hsr_km_f16_to_f32(x[i]);
        else
          xv = (double)x[i];
        acc = hsr_km_sq_acc(acc, xv);
      }
    }
  }
  double r = block_tree(acc);
  if (threadIdx.x == 0) parts[blockIdx.x] = r;
}

__global__ void __launch_bounds__(HSR_KM_SQ_LANES)
    k_sumsq_final(size_t P, const double *__restrict__ parts, double *result) {
  double acc = 0.0;
  for (size_t q = threadIdx.x; q < P; q += HSR_KM_SQ_LANES) acc = HSR_KM_DADD(acc, parts[q]);
  double r = block_tree(acc);
  if (threadIdx.x == 0) *result = r;
}

struct sq_delivery {
  const double *from;
  double *to;
};

// Runs in stream order on a CUDA thread: hands the result to the caller's
// host memory (no CUDA calls allowed here).
static void CUDART_CB sq_deliver(void *arg) {
  sq_delivery *dv = (sq_delivery *)arg;
  *dv->to = *dv->from;
  free(dv);
}

extern "C" hsr_status kc_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out) {
  cudaStream_t st = (cudaStream_t)s->native;
  // Per-stream scratch, so streams never share it; allocated on first use.
  cudaError_t e = cudaSuccess;
  if (!s->parts) e = cudaMalloc(&s->parts, HSR_KM_SQ_MAX_PARTS * sizeof(double));
  if (e == cudaSuccess && !s->pinned) e = cudaHostAlloc(&s->pinned, sizeof(double), cudaHostAllocMapped);
  if (e != cudaSuccess) return hsr_error(HSR_ERR_CUDA, "sumsq scratch: %s", cudaGetErrorString(e));
  size_t P = hsr_km_sumsq_parts(n);
  double *res = NULL;
  e = cudaHostGetDevicePointer((void **)&res, s->pinned, 0);
  if (e != cudaSuccess) return hsr_error(HSR_ERR_CUDA, "cudaHostGetDevicePointer: %s", cudaGetErrorString(e));
  if (P) {
    switch (dt) {
    case HSR_F32:
      k_sumsq_parts<float, C_F32><<<(unsigned)P, HSR_KM_SQ_LANES, 0, st>>>(n, (const float *)x, s->parts);
      break;
    case HSR_F64:
      k_sumsq_parts<double, C_F64><<<(unsigned)P, HSR_KM_SQ_LANES, 0, st>>>(n, (const double *)x, s->parts);
      break;
    case HSR_BF16:
      k_sumsq_parts<uint16_t, C_BF16><<<(unsigned)P, HSR_KM_SQ_LANES, 0, st>>>(n, (const uint16_t *)x, s->parts);
      break;
    default:
      k_sumsq_parts<uint16_t, C_F16><<<(unsigned)P, HSR_KM_SQ_LANES, 0, st>>>(n, (const uint16_t *)x, s->parts);
      break;
    }
  }
  k_sumsq_final<<<1, HSR_KM_SQ_LANES, 0, st>>>(P, s->parts, res);
  HSR_CHECK(launch_check("sumsq"));
  sq_delivery *dv = (sq_delivery *)malloc(sizeof *dv);
  if (!dv) return hsr_error(HSR_ERR_NOMEM, "sumsq delivery record");
  dv->from = s->pinned;
  dv->to = out;
  e = cudaLaunchHostFunc(st, sq_deliver, dv);
  if (e != cudaSuccess) {
    free(dv);
    return hsr_error(HSR_ERR_CUDA, "cudaLaunchHostFunc: %s", cudaGetErrorString(e));
  }
  return HSR_OK;
}
