/* hsr checkpoints: sharded save, load on any mesh, nothing lost on a crash.
 *
 * A checkpoint is a directory:
 *
 *   manifest.json          format and hsr version, step, optimizer (AdamW
 *                          groups, clip), mesh / strategy / dtypes at save,
 *                          units, and per logical parameter its name, shape,
 *                          dtype, unit, optimizer group, place in the unit's
 *                          flat layout and its saved 1-D element ranges
 *                          (file, byte offsets of master, m and v); every data
 *                          file (bytes, crc32, crc32 per block); the program's
 *                          state ("program"); the model ("model": kind and
 *                          config, when the program gave one); its own crc32
 *                          ("manifest_crc32": the crc32 of the file with that
 *                          value written as "00000000")
 *   data-<id>-<rank>.bin   the ranges one rank wrote: for each range its fp32
 *                          master weights, moment m and moment v, back to back
 *                          (little-endian)
 *
 * Ranges are described per tensor, not per rank, so a load on another mesh
 * intersects intervals per tensor. Replicas hold the same shard: the content
 * of shard s is split over its R replicas, so each of the R x S ranks writes
 * about 1/(R x S) of the state, in parallel. Parameters in the compute dtype
 * are not saved: they are the cast of the master weights.
 *
 * A checkpoint root holds step-NNNNNNNN checkpoints and `latest`, a file
 * naming the newest committed one. Save commits in this order: data files
 * under temporary names, fsync, rename; the manifest under a temporary name,
 * fsync, rename, fsync of the directory; then `latest` the same way. A
 * checkpoint exists only when its manifest does: a crash at any moment leaves
 * the previous one intact (test hook: HSR_CKPT_FAULT, docs/checkpoints.md).
 */
#ifndef HSR_CKPT_H
#define HSR_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "hsr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The manifest's format. 2: the layout, the mesh and each data file's mesh
 * coordinates, the ranges derived from them; block checksums as one hex
 * string per file. 1 (every range listed, a number per block) still reads. */
#define HSR_CKPT_FORMAT_VERSION 2
#define HSR_CKPT_KEY_MAX 64

/* ---- the program's state: typed key/value pairs saved with a checkpoint ----
 * What the runtime cannot know: the data position (as a GLOBAL sample index,
 * so that any number of data-parallel ranks continues with exactly the next
 * samples), every RNG state, the learning-rate schedule. Keys: 1-63 of
 * [A-Za-z0-9_.-]. Stored as the manifest's "program" object: i64 values as
 * JSON numbers (strings beyond 2^53), u64 as "0x..." strings (RNG words,
 * exact), f64 as numbers (round-trip exact), strings as strings. */
typedef struct hsr_ckpt_state hsr_ckpt_state;

HSR_API hsr_status hsr_ckpt_state_create(hsr_ckpt_state **out);
HSR_API void hsr_ckpt_state_free(hsr_ckpt_state *s);
HSR_API hsr_status hsr_ckpt_state_set_i64(hsr_ckpt_state *s, const char *key, int64_t v);
HSR_API hsr_status hsr_ckpt_state_set_f64(hsr_ckpt_state *s, const char *key, double v); /* finite */
HSR_API hsr_status hsr_ckpt_state_set_str(hsr_ckpt_state *s, const char *key, const char *v);
/* HSR_ERR_NOT_FOUND when the key is absent, HSR_ERR_INVALID when its value
 * is not of that type. *v of get_str stays valid until the key is set again
 * or the state is cleared or freed. */
HSR_API hsr_status hsr_ckpt_state_get_i64(const hsr_ckpt_state *s, const char *key, int64_t *v);
HSR_API hsr_status hsr_ckpt_state_get_f64(const hsr_ckpt_state *s, const char *key, double *v);
HSR_API hsr_status hsr_ckpt_state_get_str(const hsr_ckpt_state *s, const char *key, const char **v);

/* ---- save and load (collective over every rank of the engine) ---- */

typedef struct hsr_ckpt_save_opts {
  const hsr_ckpt_state *program; /* saved as "program" (NULL: none); must be the same on every rank */
  int keep;                      /* > 0: keep the newest `keep` checkpoints of the root, remove older ones */
  const char *name;              /* the checkpoint's directory name (NULL: step-NNNNNNNN) */
  /* The model the weights belong to, which the runtime cannot know, saved as
   * the manifest's "model": {"kind": ..., "config": {...}} so that the
   * checkpoint alone says how to run it (hsr ckpt export writes it as the
   * safetensors __metadata__ "hsr.model" = kind and the config's pairs).
   * model_kind NULL: none recorded; else 1-63 of [A-Za-z0-9_.-], with
   * model_config (may be NULL: empty). The same on every rank. */
  const char *model_kind;
  const hsr_ckpt_state *model_config;
  /* 1: asynchronous (PyTorch DCP's async_save): the call returns once this
   * rank's share is copied into host staging memory (pinned on a GPU); the
   * data file, its fsync and checksums, the agreement of the ranks, the
   * manifest and `latest` follow on a writer thread of this rank, agreeing
   * over a communicator of their own. hsr_ckpt_wait gives the result. */
  int async;
} hsr_ckpt_save_opts;

typedef struct hsr_ckpt_stats {
  char dir[1024];            /* the checkpoint directory written or loaded */
  int64_t step;              /* its optimizer step */
  uint64_t bytes_total;      /* data bytes of the whole checkpoint */
  uint64_t bytes_rank;       /* data bytes this rank wrote (save) or read from disk (load) */
  double seconds;            /* this rank's time in the call: the training it blocked */
  double data_seconds;       /* of which its own data files (write + fsync, or read + verify) */
  double gbps;               /* bytes_total / seconds */
  uint64_t staging_bytes;    /* this rank's peak of checkpoint staging buffers (host memory) */
  int reads;                 /* load: 1 when its part fit HSR_CKPT_BUFFER and was read once, 2 when it was
                             read twice (verified, then read again and installed) */
  int async;                 /* save: it runs in the background (hsr_ckpt_save_opts.async) */
  double stage_seconds;      /* async save: copying this rank's share into host staging memory */
  double waited_seconds;     /* time this call waited for the background save before it */
  int64_t waited_step;       /* that save's step (-1: none was in flight) */
  double background_seconds; /* save: its data, agreements and commit on this rank (hsr_ckpt_wait) */
  uint64_t exchanged_bytes;  /* load: bytes this rank received from the other replicas of its shard */
  int readers;               /* load: ranks that read each saved byte: 1 when the R replicas split the reads and
                                exchange them (or with the outer shard, where one rank holds each piece), R when
                                each reads its whole shard (HSR_CKPT_EXCHANGE=off) */
  int in_place;              /* load: read straight into the engine's memory (HSR_CKPT_IN_PLACE), not held first */
} hsr_ckpt_stats;

/* Saves the engine's state (fp32 master weights, moments m and v, step,
 * optimizer groups) and the program's state as root/<name>, then points
 * root/latest at it. Call between steps (after hsr_rt_step/zero_grad).
 * Memory: a staging buffer per rank (at most 8 MiB and HSR_CKPT_BUFFER; the
 * ledger's "ckpt_staging"); an async save stages the rank's whole share
 * (about 12 bytes per parameter / world) and keeps that buffer for the next
 * one; the model is never gathered. stats may be NULL: for an async save
 * they describe the staging (seconds: the time the call blocked). A save
 * waits first for an async save still in flight (stats->waited_seconds) and
 * returns its error, if it failed, instead of starting. Commits the engine
 * first if the program has not (hsr_rt_commit); the first async save also
 * makes the saver's communicator (collective, like the save). */
HSR_API hsr_status hsr_ckpt_save(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *opts, hsr_ckpt_stats *stats);

/* The asynchronous save in flight (opts.async): waits until it has
 * committed or failed and returns its result, the same on every rank (the
 * ranks agreed on it); stats (may be NULL) then describe it. Bounded: it
 * fails when the save makes no progress for timeout_s (< 0: HSR_COMM_TIMEOUT
 * and 10 s; the save's own agreements fail first, naming the rank they
 * waited for). HSR_OK with stats->step = -1 when none is in flight. Not
 * collective; a later hsr_ckpt_save or hsr_ckpt_load waits the same way
 * first (at most one save is in flight), and hsr_rt_destroy too. */
HSR_API hsr_status hsr_ckpt_wait(hsr_rt *rt, double timeout_s, hsr_ckpt_stats *stats);

/* Loads a checkpoint into the engine, on any mesh, strategy, reshard policy
 * and prefetch depth. path: a checkpoint directory or a root (its latest).
 * Every rank verifies the manifest, that the names, shapes, dtypes and
 * optimizer groups match what the program registered, every file's size and
 * the checksum of every block it reads; if any rank fails, every rank
 * returns the same message ("rank R: ...", naming the file, the tensor and
 * the problem). All or nothing for an engine that has trained (or loaded):
 * its state changes only after every rank has verified, so a failed load
 * leaves it unchanged. A fresh engine (no step taken, nothing loaded: what
 * a resume has) on host memory is read in place, as DCP does, with no
 * held copy: the checks that need no data still come first, on every
 * rank, but a corrupted block is found once its window has landed, and
 * then the engine is torn: every call but another load is refused until one
 * succeeds (HSR_CKPT_IN_PLACE: auto, on, off). Restores
 * master weights, moments, the parameters (cast of the masters), the step
 * and each group's learning rate (the program's betas, eps, weight decay and
 * clip stay; a difference is logged). program (may be NULL) receives the
 * saved program state. Call after registration, between steps; commits the
 * engine first if the program has not (hsr_rt_commit). */
HSR_API hsr_status hsr_ckpt_load(hsr_rt *rt, const char *path, hsr_ckpt_state *program, hsr_ckpt_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
