/* ft/ internal: the quorum and the vote, as pure functions (no I/O), so that
 * every group computes the same next quorum from the same frozen votes.
 *
 * A step (done + 1) runs on the participants of a quorum: its members and
 * the joiners it admitted (each healed by every member at the step's start,
 * a slice each).
 * Every participant votes once. The votes are frozen when every
 * participant has voted, or when an abort marker exists (written only while
 * a vote is missing or failed; a vote is written only while no abort marker
 * exists: etcd's transactions make the two exclusive). From the frozen votes:
 *   commit  every participant voted ok: members + joiners become the
 *           members; the joiners the votes saw waiting are admitted, each
 *           assigned a first healer (members in turn)
 *   abort   the step is dropped; excluded are a voter that more than half
 *           of the voters could not hear from, and a participant that did
 *           not vote and that a voter could not hear from or the abort
 *           marker names as gone (its record went, or the votes' timeout
 *           passed); one that did not vote for neither reason was only
 *           slower and stays. A joiner that did not heal stays a joiner
 *           (healed again, maybe by another member) */
#ifndef HSR_FT_QUORUM_H
#define HSR_FT_QUORUM_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"

#define FT_MAX_REPLICAS 1024
#define FT_MAX_CULPRITS 32 /* groups one failure report names: those that die at once are dropped at once */

#define FT_MAX_SEEN 16

typedef struct ft_quorum {
  int64_t epoch, done; /* the step about to run is done + 1 */
  int nmem, mem[FT_MAX_REPLICAS];
  int njoin, join[FT_MAX_REPLICAS], healer[FT_MAX_REPLICAS];
} ft_quorum;

typedef struct ft_vote {
  int id, ok, healed;
  int ncul, cul[FT_MAX_CULPRITS];
  int nseen, seen[FT_MAX_SEEN]; /* groups this one saw waiting to join */
  int64_t hs;                   /* the step of the state hash h (-1: none) */
  uint64_t h;
  char why[320];
} ft_vote;

/* Participants, sorted; the index of `id` among them (-1: not one). */
int ft_quorum_parts(const ft_quorum *q, int *out);
int ft_quorum_index(const ft_quorum *q, int id);
int ft_quorum_is_member(const ft_quorum *q, int id);
int ft_quorum_healer_of(const ft_quorum *q, int joiner); /* -1: not a joiner */
/* Every healer of a joiner: its assigned healer first (the one that sends the
 * header and the program state), then the other members in id order from
 * there, cyclically; 0: not a joiner. Every member holds the same state (all
 * committed the same steps), so each sends a slice of it. */
int ft_quorum_healers(const ft_quorum *q, int joiner, int *out);
/* The index among k healers that sends unit u: units in turn (u mod k).
 * Units interleave so that every healer's next send is at most k - 1 units
 * behind the joiner's receive (each send stays within its bound), and the
 * slices differ by at most one unit. */
static inline int ft_heal_slice_owner(int u, int k) { return k > 0 ? u % k : 0; }

enum { FT_PENDING = -1, FT_ABORT = 0, FT_COMMIT = 1 };
/* From the votes of (q, done + 1) seen so far: FT_COMMIT (every participant
 * voted ok), FT_ABORT (one voted not ok, or aborted: the marker exists), or
 * FT_PENDING. */
int ft_quorum_decide(const ft_quorum *q, const ft_vote *v, int nv, int aborted);
/* The quorum after a decided step. why: what changed, for the log ("" when
 * nothing did). */
void ft_quorum_next(const ft_quorum *q, const ft_vote *v, int nv, int commit, const int *gone, int ngone,
                    ft_quorum *next, char *why, size_t n);
/* Two votes with hashes of the same step that differ: 1 and the pair. */
int ft_quorum_hash_mismatch(const ft_vote *v, int nv, int *a, int *b);

/* A decided step, as the deciding group writes it once into the step's
 * r/ key: the others read this one small key instead of every vote. Made
 * from the frozen votes by the pure functions above, so it is what every
 * group would compute from them. */
typedef struct ft_decision {
  int commit;   /* the step commits */
  int mismatch; /* two state hashes of one step differ: every group stops */
  int64_t mm_step;
  int mm_a, mm_b;
  uint64_t mm_ha, mm_hb;
  ft_quorum next;                      /* the quorum after the step */
  int nrev, rev_id[FT_MAX_REPLICAS];   /* record revisions of next's participants that q lacks (-1: no record) */
  int64_t rev[FT_MAX_REPLICAS];
  int64_t base, count; /* the decider's read: its revision and the records then (0: not given) */
  char why[600];    /* what changed (ft_quorum_next's), "" when nothing did */
  char reason[320]; /* the first failed vote's why ("" when none failed) */
} ft_decision;

/* The decision from the frozen votes of (q, done + 1): commit or abort
 * (ft_quorum_next, the hashes compared, the first failed vote's reason).
 * d->nrev is 0: the caller adds the joiners' record revisions. */
void ft_decision_make(const ft_quorum *q, const ft_vote *v, int nv, int commit, const int *gone, int ngone,
                      ft_decision *d);
/* The step committed with the quorum unchanged: a participant voted on the
 * next step in this epoch, so it committed this one through the exchange. */
void ft_decision_ahead(const ft_quorum *q, ft_decision *d);
hsr_status ft_decision_json(const ft_decision *d, char **out);
hsr_status ft_decision_parse(const char *js, ft_decision *d);

/* JSON text of the quorum / a vote, and back (strict: missing fields are errors). */
hsr_status ft_quorum_json(const ft_quorum *q, char **out);
hsr_status ft_quorum_parse(const char *js, ft_quorum *q);
hsr_status ft_vote_json(const ft_vote *v, char **out);
hsr_status ft_vote_parse(const char *js, ft_vote *v);
/* "0,2,3" */
void ft_ids_text(const int *ids, int n, char *buf, size_t len);

#endif
