/* Multi-rank trace: every rank's spans land in one file written by rank 0. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "runtime/io/trace.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int nspans = atoi(argv[2]);
  hsr_boot *b;
  if (hsr_boot_init(&b) != HSR_OK) return 1;
  int rank = hsr_boot_rank(b), size = hsr_boot_size(b);
  trace_log *t;
  trace_create(rank, &t);
  /* Large enough that the gather needs several chunks. */
  for (int i = 0; i < nspans; i++) {
    trace_span s = {i % 2 ? HSR_SPAN_COMM : HSR_SPAN_COMPUTE,
                        i % 2 ? "comm shard" : "compute",
                        i % 2 ? "all_gather" : "forward",
                        "block_with_a_longish_name",
                        "shard",
                        (uint64_t)i * 1000,
                        (uint64_t)i * 1000 + 500,
                        (uint64_t)rank,
                        1};
    trace_add(t, &s);
  }
  hsr_status st = trace_write(t, b, argv[1]);
  trace_free(t);
  int rc = st == HSR_OK ? 0 : 1;
  if (st != HSR_OK) fprintf(stderr, "[rank %d] trace write: %s\n", rank, hsr_last_error());
  if (rank == 0 && rc == 0) {
    FILE *f = fopen(argv[1], "r");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    buf[fread(buf, 1, (size_t)len, f)] = 0;
    fclose(f);
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    int *per = calloc((size_t)size, sizeof *per);
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
      if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) continue;
      int pid = (int)cJSON_GetObjectItem(e, "pid")->valuedouble;
      cJSON *jb = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "bytes");
      int bytes = jb ? (int)jb->valuedouble : 0; /* rank 0's spans carry 0 bytes: no field */
      if (pid < 0 || pid >= size || bytes != pid) {
        fprintf(stderr, "bad event pid %d bytes %d\n", pid, bytes);
        rc = 1;
        break;
      }
      per[pid]++;
    }
    for (int r = 0; r < size; r++)
      if (per[r] != nspans) {
        fprintf(stderr, "rank %d has %d spans, expected %d\n", r, per[r], nspans);
        rc = 1;
      }
    if (!rc) printf("mr_trace OK: %d ranks x %d spans, %ld bytes\n", size, nspans, len);
    free(per);
    cJSON_Delete(doc);
    remove(argv[1]);
  }
  hsr_boot_finalize(b);
  return rc;
}
