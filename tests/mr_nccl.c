/* Multi-rank test of the NCCL backend (device memory). Exits 77 (skipped)
 * where the build has no NCCL or the machine has no usable GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "collectives/comm_internal.h"
#include "hsr/config.h"

#if HSR_HAVE_NCCL
#include <cuda_runtime.h>

static int g_rank;
#include "mr_check.h"

static int check_comm(hsr_comm *c, size_t count) {
  int n = hsr_comm_size(c), r = hsr_comm_rank(c);
  size_t bytes = count * (size_t)n * sizeof(float);
  float *h = malloc(bytes), *d_in, *d_out;
  OK(comm_mem_alloc(c, bytes, (void **)&d_in));
  OK(comm_mem_alloc(c, bytes, (void **)&d_out));
  /* all-gather */
  for (size_t i = 0; i < count; i++) h[i] = (float)(r * 1000 + (int)(i % 1000));
  if (cudaMemcpy(d_in, h, count * 4, cudaMemcpyHostToDevice) != cudaSuccess) FAIL("cudaMemcpy");
  hsr_req *q;
  OK(hsr_comm_allgather(c, d_in, d_out, count, HSR_F32, &q));
  OK(hsr_req_wait(q, -1));
  cudaMemcpy(h, d_out, bytes, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count * (size_t)n; i++)
    if (h[i] != (float)((int)(i / count) * 1000 + (int)(i % count % 1000)))
      FAIL("all_gather element %zu = %g", i, h[i]);
  /* reduce-scatter (avg) */
  for (size_t i = 0; i < count * (size_t)n; i++) h[i] = (float)(r + 1);
  cudaMemcpy(d_in, h, bytes, cudaMemcpyHostToDevice);
  OK(hsr_comm_reduce_scatter(c, d_in, d_out, count, HSR_F32, HSR_AVG, NULL));
  cudaMemcpy(h, d_out, count * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++)
    if (h[i] != (float)(n + 1) / 2) FAIL("reduce_scatter avg element %zu = %g", i, h[i]);
  /* all-reduce (max, in place) and broadcast */
  for (size_t i = 0; i < count; i++) h[i] = (float)(r * 3);
  cudaMemcpy(d_in, h, count * 4, cudaMemcpyHostToDevice);
  OK(hsr_comm_allreduce(c, d_in, d_in, count, HSR_F32, HSR_MAX, NULL));
  OK(hsr_comm_bcast(c, d_in, count, HSR_F32, n - 1, NULL));
  OK(hsr_comm_barrier(c, NULL));
  cudaMemcpy(h, d_in, count * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++)
    if (h[i] != (float)((n - 1) * 3)) FAIL("all_reduce max element %zu = %g", i, h[i]);
  hsr_comm_counter k;
  OK(comm_counters(c, HSR_OP_ALLGATHER, &k));
  if (k.calls != 1 || k.bytes_recv != (uint64_t)(n - 1) * count * 4) FAIL("all_gather counters");
  comm_mem_free(c, d_in);
  comm_mem_free(c, d_out);
  free(h);
  return 0;
}

int main(void) {
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) return 1;
  g_rank = hsr_boot_rank(boot);
  hsr_comm *w = NULL;
  hsr_status st = hsr_comm_world(boot, HSR_BACKEND_NCCL, &w);
  if (st == HSR_ERR_UNSUPPORTED) {
    if (g_rank == 0) printf("mr_nccl: skipped: %s\n", hsr_last_error());
    hsr_boot_finalize(boot);
    return 77;
  }
  if (st != HSR_OK) FAIL("world: %s", hsr_last_error());
  int rc = check_comm(w, 100003);
  hsr_comm *half = NULL;
  if (!rc) {
    OK(comm_split(w, g_rank % 2, g_rank, &half));
    rc = check_comm(half, 4099);
    hsr_comm_free(half);
  }
  hsr_comm_free(w);
  if (!rc && g_rank == 0) printf("mr_nccl OK\n");
  hsr_boot_finalize(boot);
  return rc;
}
#else
int main(void) {
  printf("mr_nccl: skipped: this build has no NCCL\n");
  return 77;
}
#endif
