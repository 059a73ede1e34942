/* Multi-rank test of the PMIx bootstrap, launched for real (mpirun, srun or
 * no launcher). Checks identity, node indices, allgather, bcast and barrier.
 * --hold S: then prints "mr_boot: holding" and waits up to S s inside the
 * job (tests/lifeline_path.sh ends its launcher meanwhile); --keep-term: a
 * SIGTERM handler of the program's own that keeps the rank alive, as a
 * program that ignores its lifeline's signal would. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsr/boot.h"
#include "launch/boot_internal.h"

static int g_rank; /* for FAIL */
#include "mr_check.h"

static int check(hsr_boot *b, int expect_size, int expect_nodes) {
  int rank = hsr_boot_rank(b), size = hsr_boot_size(b);
  g_rank = rank;
  if (expect_size > 0 && size != expect_size) FAIL("size %d, expected %d", size, expect_size);
  if (rank < 0 || rank >= size) FAIL("rank %d outside [0,%d)", rank, size);
  int nodes = boot_num_nodes(b);
  if (expect_nodes > 0 && nodes != expect_nodes) FAIL("%d nodes, expected %d", nodes, expect_nodes);
  if (size % nodes) FAIL("%d nodes do not divide %d ranks", nodes, size);
  /* One host, block mapping: node = rank / per-node, local rank = rank % per-node. */
  int per = size / nodes;
  if (boot_local_size(b) != per) FAIL("local size %d, expected %d", boot_local_size(b), per);
  if (boot_node(b) != rank / per) FAIL("node %d, expected %d", boot_node(b), rank / per);
  if (boot_local_rank(b) != rank % per) FAIL("local rank %d, expected %d", boot_local_rank(b), rank % per);
  for (int r = 0; r < size; r++) {
    if (boot_node_of(b, r) != r / per) FAIL("node_of(%d) = %d, expected %d", r, boot_node_of(b, r), r / per);
    if (strcmp(boot_hostname_of(b, r), boot_hostname(b)) != 0) FAIL("hostname_of(%d) differs", r);
  }
  if (boot_node_of(b, size) != -1) FAIL("node_of(size) should be -1");

  /* Allgather of an odd-sized blob, twice (keys must not collide). */
  for (int round = 0; round < 2; round++) {
    enum { BYTES = 37 };
    unsigned char mine[BYTES], *all = malloc((size_t)size * BYTES);
    for (int i = 0; i < BYTES; i++) mine[i] = (unsigned char)(rank * 7 + i + round * 13);
    hsr_status st = boot_allgather(b, mine, BYTES, all);
    if (st != HSR_OK) FAIL("allgather: %s %s", hsr_status_str(st), hsr_last_error());
    for (int r = 0; r < size; r++)
      for (int i = 0; i < BYTES; i++)
        if (all[r * BYTES + i] != (unsigned char)(r * 7 + i + round * 13))
          FAIL("allgather round %d: byte %d of rank %d is %u", round, i, r, all[r * BYTES + i]);
    free(all);
  }
  /* A larger blob (topology records are a few KiB). */
  {
    size_t bytes = 8192;
    unsigned *mine = malloc(bytes), *all = malloc(bytes * (size_t)size);
    for (size_t i = 0; i < bytes / 4; i++) mine[i] = (unsigned)(rank * 100000 + i);
    hsr_status st = boot_allgather(b, mine, bytes, all);
    if (st != HSR_OK) FAIL("allgather 8K: %s %s", hsr_status_str(st), hsr_last_error());
    for (int r = 0; r < size; r++)
      for (size_t i = 0; i < bytes / 4; i++)
        if (all[(size_t)r * bytes / 4 + i] != (unsigned)(r * 100000 + i)) FAIL("allgather 8K: rank %d word %zu", r, i);
    free(mine);
    free(all);
  }
  /* Bcast from the last rank. */
  char msg[32];
  memset(msg, 0, sizeof msg);
  if (rank == size - 1) snprintf(msg, sizeof msg, "hello from %d", size - 1);
  hsr_status st = boot_bcast(b, msg, sizeof msg, size - 1);
  if (st != HSR_OK) FAIL("bcast: %s %s", hsr_status_str(st), hsr_last_error());
  char want[32];
  snprintf(want, sizeof want, "hello from %d", size - 1);
  if (strcmp(msg, want) != 0) FAIL("bcast got '%s'", msg);
  if (boot_bcast(b, msg, sizeof msg, size) != HSR_ERR_INVALID) FAIL("bcast with a bad root accepted");
  st = boot_barrier(b);
  if (st != HSR_OK) FAIL("barrier: %s %s", hsr_status_str(st), hsr_last_error());
  if (rank == 0) printf("mr_boot OK: %d ranks, %d nodes, launcher %s\n", size, nodes, boot_launcher(b));
  return 0;
}

static void keep_term(int sig) { (void)sig; }

int main(int argc, char **argv) {
  int expect_size = -1, expect_nodes = -1, hold = 0;
  const char *expect_launcher = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--size"))
      expect_size = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nodes"))
      expect_nodes = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--launcher"))
      expect_launcher = argv[i + 1];
    else if (!strcmp(argv[i], "--hold"))
      hold = atoi(argv[i + 1]);
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--keep-term")) signal(SIGTERM, keep_term);
  hsr_boot *b = NULL;
  hsr_status st = hsr_boot_init(&b);
  if (st != HSR_OK) {
    fprintf(stderr, "mr_boot: init failed: %s %s\n", hsr_status_str(st), hsr_last_error());
    return 1;
  }
  int rc = check(b, expect_size, expect_nodes);
  if (!rc && expect_launcher && strcmp(expect_launcher, boot_launcher(b)) != 0) {
    fprintf(stderr, "mr_boot: launcher %s, expected %s\n", boot_launcher(b), expect_launcher);
    rc = 1;
  }
  if (!rc && hold > 0) {
    printf("mr_boot: holding\n");
    fflush(stdout);
    for (int i = 0; i < hold * 10; i++) nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
  }
  st = hsr_boot_finalize(b);
  if (st != HSR_OK) {
    fprintf(stderr, "mr_boot: finalize: %s %s\n", hsr_status_str(st), hsr_last_error());
    rc = 1;
  }
  return rc;
}
