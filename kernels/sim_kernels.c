/* The sim device's kernels: each one's arguments copied into a task that
 * runs the CPU twin (kh_*) on the stream's thread, and the ranges it reads
 * and writes declared for the stream-order check. */
#include <string.h>

#include "sim_int.h"
#include "common/dtype_internal.h"

#define F4 sizeof(float)

/* Bytes a row-major matrix of `rows` rows of `cols` at stride ld spans. */
static size_t span(size_t rows, size_t cols, size_t ld, size_t es) {
  return rows && cols ? ((rows - 1) * ld + cols) * es : 0;
}

typedef struct {
  size_t n;
  float *master, *m, *v;
  const void *grad;
  hsr_dtype gdt, odt;
  void *out;
  hsr_km_adamw_c c;
} a_adamw;
static hsr_status r_adamw(void *p) {
  a_adamw *a = p;
  return kh_adamw(NULL, a->n, a->master, a->m, a->v, a->grad, a->gdt, a->out, a->odt, &a->c);
}
hsr_status ks_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype gdt,
                    void *out, hsr_dtype odt, const hsr_km_adamw_c *c) {
  a_adamw a = {n, master, m, v, grad, gdt, odt, out, *c};
  hsr_access acc[] = {{grad, n * dtype_size(gdt), 0},
                      {master, n * F4, 1},
                      {m, n * F4, 1},
                      {v, n * F4, 1},
                      {out, out ? n * dtype_size(odt) : 0, 1}};
  return sim_launch(s, "adamw", r_adamw, &a, sizeof a, acc, 5);
}

typedef struct {
  size_t n;
  const void *src;
  void *dst;
  hsr_dtype sdt, ddt;
  double alpha;
} a_map;
static hsr_status r_cast(void *p) {
  a_map *a = p;
  return kh_cast(NULL, a->n, a->src, a->sdt, a->dst, a->ddt);
}
hsr_status ks_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype sdt, void *dst, hsr_dtype ddt) {
  a_map a = {n, src, dst, sdt, ddt, 0};
  hsr_access acc[] = {{src, n * dtype_size(sdt), 0}, {dst, n * dtype_size(ddt), 1}};
  return sim_launch(s, "cast", r_cast, &a, sizeof a, acc, 2);
}
static hsr_status r_scale(void *p) {
  a_map *a = p;
  return kh_scale(NULL, a->n, a->dst, a->ddt, a->alpha);
}
hsr_status ks_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha) {
  a_map a = {n, NULL, x, dt, dt, alpha};
  hsr_access acc = {x, n * dtype_size(dt), 1};
  return sim_launch(s, "scale", r_scale, &a, sizeof a, &acc, 1);
}
static hsr_status r_axpy(void *p) {
  a_map *a = p;
  return kh_axpy(NULL, a->n, a->alpha, a->src, a->dst, a->ddt);
}
hsr_status ks_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt) {
  a_map a = {n, x, y, dt, dt, alpha};
  hsr_access acc[] = {{x, n * dtype_size(dt), 0}, {y, n * dtype_size(dt), 1}};
  return sim_launch(s, "axpy", r_axpy, &a, sizeof a, acc, 2);
}

typedef struct {
  size_t n;
  const void *x;
  hsr_dtype dt;
  double *out;
} a_sumsq;
static hsr_status r_sumsq(void *p) {
  a_sumsq *a = p;
  return kh_sumsq(NULL, a->n, a->x, a->dt, a->out);
}
/* out is host memory (the API's rule), written when the stream reaches it */
hsr_status ks_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out) {
  a_sumsq a = {n, x, dt, out};
  hsr_access acc = {x, n * dtype_size(dt), 0};
  return sim_launch(s, "sumsq", r_sumsq, &a, sizeof a, &acc, 1);
}

typedef struct {
  int ta, tb;
  size_t m, n, k, lda, ldb, ldc, sa, sb, sc, count;
  float alpha, beta;
  const float *a, *b;
  float *c;
} a_gemm;
static hsr_status r_gemm(void *p) {
  a_gemm *g = p;
  if (!g->count)
    return kh_gemm(NULL, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta, g->c, g->ldc);
  return kh_gemm_batched(NULL, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->sa, g->b, g->ldb, g->sb,
                         g->beta, g->c, g->ldc, g->sc, g->count);
}
static hsr_status gemm_task(hsr_stream *s, const char *name, a_gemm *g) {
  size_t cnt = g->count ? g->count : 1;
  size_t ea = span(g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda, F4);
  size_t eb = span(g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb, F4);
  size_t ec = span(g->m, g->n, g->ldc, F4);
  hsr_access acc[] = {{g->a, g->k ? (cnt - 1) * g->sa * F4 + ea : 0, 0},
                      {g->b, g->k ? (cnt - 1) * g->sb * F4 + eb : 0, 0},
                      {g->c, (cnt - 1) * g->sc * F4 + ec, 1}};
  return sim_launch(s, name, r_gemm, g, sizeof *g, acc, 3);
}
hsr_status ks_gemm(hsr_stream *s, int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc) {
  a_gemm g = {ta, tb, m, n, k, lda, ldb, ldc, 0, 0, 0, 0, alpha, beta, a, b, c};
  return gemm_task(s, "gemm", &g);
}
hsr_status ks_gemm_batched(hsr_stream *s, int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
                           size_t lda, size_t sa, const float *b, size_t ldb, size_t sb, float beta, float *c,
                           size_t ldc, size_t sc, size_t count) {
  a_gemm g = {ta, tb, m, n, k, lda, ldb, ldc, sa, sb, sc, count, alpha, beta, a, b, c};
  return gemm_task(s, "gemm_batched", &g);
}

/* The transformer layers: one argument block for all of them. */
typedef struct {
  size_t rows, C, B, T, V;
  float eps, scale;
  const float *x, *w, *b, *dy, *mean, *rstd;
  float *y, *m, *r, *dx, *dw, *db;
  const int32_t *tok;
  double *loss;
} a_nn;

static hsr_status r_ln(void *p) {
  a_nn *a = p;
  return kh_layernorm(NULL, a->rows, a->C, a->x, a->w, a->b, a->eps, a->y, a->m, a->r);
}
hsr_status ks_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd) {
  a_nn a = {.rows = rows, .C = C, .eps = eps, .x = x, .w = w, .b = b, .y = y, .m = mean, .r = rstd};
  hsr_access acc[] = {{x, rows * C * F4, 0}, {w, C * F4, 0},       {b, C * F4, 0},
                      {y, rows * C * F4, 1}, {mean, rows * F4, 1}, {rstd, rows * F4, 1}};
  return sim_launch(s, "layernorm", r_ln, &a, sizeof a, acc, 6);
}

static hsr_status r_ln_bwd(void *p) {
  a_nn *a = p;
  return kh_layernorm_bwd(NULL, a->rows, a->C, a->dy, a->x, a->w, a->mean, a->rstd, a->dx, a->dw, a->db);
}
hsr_status ks_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db) {
  a_nn a = {.rows = rows, .C = C, .dy = dy, .x = x, .w = w, .mean = mean, .rstd = rstd, .dx = dx, .dw = dw, .db = db};
  hsr_access acc[] = {{dy, rows * C * F4, 0}, {x, rows * C * F4, 0},  {w, C * F4, 0},  {mean, rows * F4, 0},
                      {rstd, rows * F4, 0},   {dx, rows * C * F4, 1}, {dw, C * F4, 1}, {db, C * F4, 1}};
  return sim_launch(s, "layernorm_bwd", r_ln_bwd, &a, sizeof a, acc, 8);
}

static hsr_status r_gelu(void *p) {
  a_nn *a = p;
  return kh_gelu(NULL, a->rows, a->x, a->y);
}
hsr_status ks_gelu(hsr_stream *s, size_t n, const float *x, float *y) {
  a_nn a = {.rows = n, .x = x, .y = y};
  hsr_access acc[] = {{x, n * F4, 0}, {y, n * F4, 1}};
  return sim_launch(s, "gelu", r_gelu, &a, sizeof a, acc, 2);
}

static hsr_status r_gelu_bwd(void *p) {
  a_nn *a = p;
  return kh_gelu_bwd(NULL, a->rows, a->x, a->dy, a->dx);
}
hsr_status ks_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx) {
  a_nn a = {.rows = n, .x = x, .dy = dy, .dx = dx};
  hsr_access acc[] = {{x, n * F4, 0}, {dy, n * F4, 0}, {dx, n * F4, 1}};
  return sim_launch(s, "gelu_bwd", r_gelu_bwd, &a, sizeof a, acc, 3);
}

static hsr_status r_bias_add(void *p) {
  a_nn *a = p;
  return kh_bias_add(NULL, a->rows, a->C, a->b, a->y);
}
hsr_status ks_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y) {
  a_nn a = {.rows = rows, .C = cols, .b = b, .y = y};
  hsr_access acc[] = {{b, cols * F4, 0}, {y, rows * cols * F4, 1}};
  return sim_launch(s, "bias_add", r_bias_add, &a, sizeof a, acc, 2);
}

static hsr_status r_bias_bwd(void *p) {
  a_nn *a = p;
  return kh_bias_bwd(NULL, a->rows, a->C, a->dy, a->db);
}
hsr_status ks_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db) {
  a_nn a = {.rows = rows, .C = cols, .dy = dy, .db = db};
  hsr_access acc[] = {{dy, rows * cols * F4, 0}, {db, cols * F4, 1}};
  return sim_launch(s, "bias_bwd", r_bias_bwd, &a, sizeof a, acc, 2);
}

static hsr_status r_softmax(void *p) {
  a_nn *a = p;
  return kh_softmax_causal(NULL, a->rows, a->T, a->scale, a->x, a->y);
}
hsr_status ks_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p) {
  a_nn a = {.rows = rows, .T = T, .scale = scale, .x = x, .y = p};
  hsr_access acc[] = {{x, rows * T * F4, 0}, {p, rows * T * F4, 1}};
  return sim_launch(s, "softmax_causal", r_softmax, &a, sizeof a, acc, 2);
}

static hsr_status r_softmax_bwd(void *p) {
  a_nn *a = p;
  return kh_softmax_causal_bwd(NULL, a->rows, a->T, a->scale, a->x, a->dy, a->dx);
}
hsr_status ks_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx) {
  a_nn a = {.rows = rows, .T = T, .scale = scale, .x = p, .dy = dp, .dx = dx};
  hsr_access acc[] = {{p, rows * T * F4, 0}, {dp, rows * T * F4, 0}, {dx, rows * T * F4, 1}};
  return sim_launch(s, "softmax_causal_bwd", r_softmax_bwd, &a, sizeof a, acc, 3);
}

static hsr_status r_xent(void *p) {
  a_nn *a = p;
  return kh_xent(NULL, a->rows, a->V, a->y, a->tok, a->scale, a->loss);
}
hsr_status ks_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss) {
  a_nn a = {.rows = rows, .V = V, .y = z, .tok = targets, .scale = grad_scale, .loss = rowloss};
  hsr_access acc[] = {{targets, rows * sizeof(int32_t), 0}, {z, rows * V * F4, 1}, {rowloss, rows * sizeof(double), 1}};
  return sim_launch(s, "xent", r_xent, &a, sizeof a, acc, 3);
}

static hsr_status r_embed(void *p) {
  a_nn *a = p;
  return kh_embed(NULL, a->B, a->T, a->C, a->V, a->tok, a->x, a->w, a->y);
}
hsr_status ks_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out) {
  a_nn a = {.B = B, .T = T, .C = C, .V = V, .tok = tokens, .x = wte, .w = wpe, .y = out};
  hsr_access acc[] = {
      {tokens, B * T * sizeof(int32_t), 0}, {wte, V * C * F4, 0}, {wpe, T * C * F4, 0}, {out, B * T * C * F4, 1}};
  return sim_launch(s, "embed", r_embed, &a, sizeof a, acc, 4);
}

static hsr_status r_embed_bwd(void *p) {
  a_nn *a = p;
  return kh_embed_bwd(NULL, a->B, a->T, a->C, a->V, a->tok, a->dy, a->dw, a->db);
}
hsr_status ks_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe) {
  a_nn a = {.B = B, .T = T, .C = C, .V = V, .tok = tokens, .dy = dout, .dw = dwte, .db = dwpe};
  hsr_access acc[] = {
      {tokens, B * T * sizeof(int32_t), 0}, {dout, B * T * C * F4, 0}, {dwte, V * C * F4, 1}, {dwpe, T * C * F4, 1}};
  return sim_launch(s, "embed_bwd", r_embed_bwd, &a, sizeof a, acc, 4);
}

/* The Llama-style model's layers. */
static hsr_status r_rms(void *p) {
  a_nn *a = p;
  return kh_rmsnorm(NULL, a->rows, a->C, a->x, a->w, a->eps, a->y, a->r);
}
hsr_status ks_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd) {
  a_nn a = {.rows = rows, .C = C, .eps = eps, .x = x, .w = w, .y = y, .r = rstd};
  hsr_access acc[] = {{x, rows * C * F4, 0}, {w, C * F4, 0}, {y, rows * C * F4, 1}, {rstd, rows * F4, 1}};
  return sim_launch(s, "rmsnorm", r_rms, &a, sizeof a, acc, 4);
}

static hsr_status r_rms_bwd(void *p) {
  a_nn *a = p;
  return kh_rmsnorm_bwd(NULL, a->rows, a->C, a->dy, a->x, a->w, a->rstd, a->dx, a->dw);
}
hsr_status ks_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw) {
  a_nn a = {.rows = rows, .C = C, .dy = dy, .x = x, .w = w, .rstd = rstd, .dx = dx, .dw = dw};
  hsr_access acc[] = {{dy, rows * C * F4, 0}, {x, rows * C * F4, 0},  {w, C * F4, 0},
                      {rstd, rows * F4, 0},   {dx, rows * C * F4, 1}, {dw, C * F4, 1}};
  return sim_launch(s, "rmsnorm_bwd", r_rms_bwd, &a, sizeof a, acc, 6);
}

static hsr_status r_swiglu(void *p) {
  a_nn *a = p;
  return kh_swiglu(NULL, a->rows, a->x, a->w, a->y);
}
hsr_status ks_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y) {
  a_nn a = {.rows = n, .x = g, .w = u, .y = y};
  hsr_access acc[] = {{g, n * F4, 0}, {u, n * F4, 0}, {y, n * F4, 1}};
  return sim_launch(s, "swiglu", r_swiglu, &a, sizeof a, acc, 3);
}

static hsr_status r_swiglu_bwd(void *p) {
  a_nn *a = p;
  return kh_swiglu_bwd(NULL, a->rows, a->x, a->w, a->dy, a->dx, a->dw);
}
hsr_status ks_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du) {
  a_nn a = {.rows = n, .x = g, .w = u, .dy = dy, .dx = dg, .dw = du};
  hsr_access acc[] = {{g, n * F4, 0}, {u, n * F4, 0}, {dy, n * F4, 0}, {dg, n * F4, 1}, {du, n * F4, 1}};
  return sim_launch(s, "swiglu_bwd", r_swiglu_bwd, &a, sizeof a, acc, 5);
}

static hsr_status r_rope_table(void *p) {
  a_nn *a = p;
  return kh_rope_table(NULL, a->T, a->C, a->scale, a->y);
}
hsr_status ks_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs) {
  a_nn a = {.T = T, .C = D, .scale = theta, .y = cs};
  hsr_access acc = {cs, T * D * F4, 1};
  return sim_launch(s, "rope_table", r_rope_table, &a, sizeof a, &acc, 1);
}

typedef struct {
  size_t rows, T, heads, D;
  const float *cs;
  int inverse;
  float *x;
} a_rope;
static hsr_status r_rope(void *p) {
  a_rope *a = p;
  return kh_rope(NULL, a->rows, a->T, a->heads, a->D, a->cs, a->inverse, a->x);
}
hsr_status ks_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x) {
  a_rope a = {rows, T, heads, D, cs, inverse, x};
  size_t pos = rows < T ? rows : T; /* the positions the rows use */
  hsr_access acc[] = {{cs, pos * D * F4, 0}, {x, rows * heads * D * F4, 1}};
  return sim_launch(s, "rope", r_rope, &a, sizeof a, acc, 2);
}
