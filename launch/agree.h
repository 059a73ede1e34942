/* The all-ranks status agreement, once: every rank contributes its status
 * (and its last error, and a few numbers), every rank gets the lowest
 * failing rank's status and message, said once for the job
 * (error_share). The gather is the caller's: the bootstrap
 * (agree_boot_gather) or a communicator. INTERNAL to launch/ and the modules
 * above; static inline over the public API only, so the front ends compile
 * the same code. */
#ifndef HSR_LAUNCH_AGREE_H
#define HSR_LAUNCH_AGREE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "common/common_internal.h"

#define AGREE_MSG 1012
typedef struct agree_vote {
  int32_t status;
  uint32_t crc;
  uint64_t a, b;
  char msg[AGREE_MSG];
} agree_vote;

/* How the failing rank is named: "rank R: " in front of its message
 * (never when the message already starts so, nor in a job of one rank),
 * and not when every rank voted the same failure. */
enum { AGREE_NAME_RANK = 1, AGREE_UNLESS_ALIKE = 2 };

typedef hsr_status (*agree_gather_fn)(void *ctx, const void *mine, size_t bytes, void *all);
static inline hsr_status agree_boot_gather(void *boot, const void *mine, size_t bytes, void *all) {
  return boot_allgather((hsr_boot *)boot, mine, bytes, all);
}

/* n ranks; what (may be NULL) wraps a failed gather: "WHAT: the ranks could
 * not agree (...)". *all_out (may be NULL) receives every vote (malloc'd),
 * also when a rank failed. */
static inline hsr_status agree_votes(agree_gather_fn gather, void *ctx, int n, hsr_status st, uint64_t a, uint64_t b,
                                     uint32_t crc, int how, const char *what, agree_vote **all_out) {
  if (all_out) *all_out = NULL;
  agree_vote mine;
  memset(&mine, 0, sizeof mine);
  mine.status = (int32_t)st, mine.crc = crc, mine.a = a, mine.b = b;
  if (st != HSR_OK) snprintf(mine.msg, sizeof mine.msg, "%s", hsr_last_error());
  agree_vote *all = (agree_vote *)calloc((size_t)(n > 0 ? n : 1), sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "%s%sout of memory", what ? what : "", what ? ": " : "");
  hsr_status gs = gather(ctx, &mine, sizeof mine, all);
  if (gs != HSR_OK) {
    free(all);
    return what ? hsr_error(gs, "%s: the ranks could not agree (%s)", what, hsr_last_error()) : gs;
  }
  hsr_status res = HSR_OK;
  for (int r = 0; r < n && res == HSR_OK; r++) {
    if (all[r].status == HSR_OK) continue;
    char msg[AGREE_MSG];
    memcpy(msg, all[r].msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    int name = (how & AGREE_NAME_RANK) && n > 1 && strncmp(msg, "rank ", 5);
    for (int q = 0; name && (how & AGREE_UNLESS_ALIKE) && q < n; q++)
      if (all[q].status != all[r].status || strncmp(all[q].msg, msg, sizeof msg - 1)) break;
      else if (q == n - 1) name = 0;
    res = name ? hsr_error((hsr_status)all[r].status, "rank %d: %s", r, msg)
               : hsr_error((hsr_status)all[r].status, "%s", msg);
    error_share(); /* every rank holds this one result: rank 0 says it for the job */
  }
  if (all_out)
    *all_out = all;
  else
    free(all);
  return res;
}

#endif
