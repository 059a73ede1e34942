/* runtime internals: the calls of hsr/ckpt.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_RUNTIME_CKPT_CKPT_INTERNAL_H
#define HSR_RUNTIME_CKPT_CKPT_INTERNAL_H
#include "hsr/ckpt.h"
#include "runtime/runtime_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

hsr_status ckpt_state_clear(hsr_ckpt_state *s);
hsr_status ckpt_state_set_u64(hsr_ckpt_state *s, const char *key, uint64_t v);
hsr_status ckpt_state_get_u64(const hsr_ckpt_state *s, const char *key, uint64_t *v);
int ckpt_state_has(const hsr_ckpt_state *s, const char *key);
int ckpt_state_count(const hsr_ckpt_state *s);

/* Compact JSON object text (malloc'd, caller frees), and its inverse: the
 * pairs of a JSON object of numbers and strings replace s's. */
hsr_status ckpt_state_json(const hsr_ckpt_state *s, char **out);
hsr_status ckpt_state_from_json(hsr_ckpt_state *s, const char *json);

/* Pair i (0 .. count - 1, in insertion order): its key (valid as for
 * get_str) and its value as text in value[len]: integers in decimal, u64 as
 * "0x...", other numbers as %.17g, strings as they are (HSR_ERR_INVALID
 * when one does not fit). */
hsr_status ckpt_state_at(const hsr_ckpt_state *s, int i, const char **key, char *value, size_t len);

/* *pending = 1 while an asynchronous save is still running, 0 when none is
 * or it has finished (hsr_ckpt_wait then returns at once). Never blocks. */
hsr_status ckpt_poll(hsr_rt *rt, int *pending);

/* The checkpoint directory `path` denotes: path itself when it holds a
 * manifest, else the checkpoint its `latest` names; a path to a root's
 * `latest` file itself (ROOT/latest) is that root. *dir is malloc'd. */
hsr_status ckpt_resolve(const char *path, char **dir);

/* 1 when root/name is a committed checkpoint (its manifest exists). */
int ckpt_committed(const char *root, const char *name);

/* The committed step-NNNNNNNN of `root` with the highest step, whatever
 * `latest` says (a crash before `latest` leaves it behind): its name and
 * step; HSR_ERR_NOT_FOUND when there is none. */
hsr_status ckpt_newest(const char *root, char *name, size_t n, int64_t *step);
typedef struct ckpt_handle ckpt_handle;

/* Opens a checkpoint (path as for ckpt_resolve): reads the manifest and
 * verifies its checksum, format version and structure (every tensor covered
 * exactly by its ranges, every range inside its file). */
hsr_status ckpt_open(const char *path, ckpt_handle **out);
void ckpt_close(ckpt_handle *c);
typedef struct ckpt_info {
  const char *dir, *hsr_version, *git_hash, *strategy, *reshard, *device, *param_dtype, *reduce_dtype;
  int format_version;
  int64_t step;
  int world, replicate, shard, partial, prefetch;
  int outer_shard; /* 1: the optimizer state sharded over the replicas too */
  int num_tensors, num_files, num_groups;
  uint64_t data_bytes, block_bytes, numel;
  double clip;
  hsr_rt_opt_group groups[HSR_RT_MAX_GROUPS];
} ckpt_info;

/* Strings valid until ckpt_close. */
hsr_status ckpt_get_info(const ckpt_handle *c, ckpt_info *out);
typedef struct ckpt_tensor_info {
  const char *name, *unit, *dtype; /* valid until ckpt_close */
  int ndim, group, unit_index, ranges;
  int64_t shape[HSR_RT_MAX_DIMS];
  uint64_t numel, offset; /* elements; offset in the unit's flat buffer */
} ckpt_tensor_info;
int ckpt_num_tensors(const ckpt_handle *c);
hsr_status ckpt_tensor_at(const ckpt_handle *c, int i, ckpt_tensor_info *out);
hsr_status ckpt_find(const ckpt_handle *c, const char *name, int *i);
/* Range k of tensor i: elements [start, start + count), kind j's values at
 * byte off[j] of the data file that rank `rank` wrote. */
typedef struct ckpt_saved_range {
  uint64_t start, count, off[3];
  int rank;
} ckpt_saved_range;
hsr_status ckpt_range_at(const ckpt_handle *c, int i, int k, ckpt_saved_range *out);
typedef enum ckpt_kind {
  HSR_CKPT_MASTER = 0,
  HSR_CKPT_MOMENT_M,
  HSR_CKPT_MOMENT_V,
  HSR_CKPT_KIND_COUNT
} ckpt_kind;
const char *ckpt_kind_name(ckpt_kind k); /* "master", "m", "v" */

/* Elements [start, start + count) of tensor i (f32), read through the block
 * checksums (a mismatch names the file, the block and the tensor). */
hsr_status ckpt_read(const ckpt_handle *c, int i, ckpt_kind kind, uint64_t start, uint64_t count, float *out);

/* Reads every data file whole: size, crc32 per block and of the file.
 * *bytes (may be NULL): bytes read. */
hsr_status ckpt_verify(const ckpt_handle *c, uint64_t *bytes);

/* The saved program state. */
hsr_status ckpt_get_program(const ckpt_handle *c, hsr_ckpt_state *out);

/* The model it records (hsr_ckpt_save_opts.model_kind / model_config):
 * *kind valid until ckpt_close, config (may be NULL) receives its pairs.
 * HSR_ERR_NOT_FOUND, saying so, for a checkpoint that records none (saved by
 * an hsr before checkpoints carried their model, or by a program that gave
 * none). */
hsr_status ckpt_get_model(const ckpt_handle *c, const char **kind, hsr_ckpt_state *config);

/* The manifest's text, as on disk. */
const char *ckpt_manifest_text(const ckpt_handle *c);

/* ---- the planner, without an engine (ckpt_plan.c) ----
 * Who writes and reads what is a function of the layout and the mesh's
 * shape alone: no communicator, no allocated state, so a command can run
 * it for a mesh that does not exist and every rank can run it for any rank. */

/* A piece of shard content: elements [start, start + count) of layout
 * parameter `param` (in unit `unit`), at element `local` of what the rank
 * holds of the unit. */
typedef struct ckpt_piece {
  int param, unit;
  uint64_t start, count, local;
} ckpt_piece;
/* A layout finalized for S shards (and, with the outer shard, R pieces of
 * each: rt_layout_set_subshards) on an R x S mesh. */
typedef struct ckpt_geom ckpt_geom;
hsr_status ckpt_geom_create(const rt_layout *l, int R, int S, int outer, ckpt_geom **out);
void ckpt_geom_free(ckpt_geom *g);
int ckpt_geom_units(const ckpt_geom *g);
/* Unit u's elements [lo, lo + n) that the rank at mesh coordinates (rep,
 * sh) holds (master, m and v alike), held alike by `parts` ranks of which
 * it is the part-th: the engine's rt_state_range_at. */
hsr_status ckpt_geom_range(const ckpt_geom *g, int u, int rep, int sh, uint64_t *lo, uint64_t *n, int *part,
                           int *parts);
/* What (rep, sh) writes: the part-th of `parts` equal parts of its content
 * (units in order, parameters in layout order, padding left out); whole:
 * all it holds (a load's part when its replicas do not exchange). *out
 * malloc'd. O(parameters). */
hsr_status ckpt_geom_pieces(const ckpt_geom *g, int rep, int sh, int whole, ckpt_piece **out, int *n);

/* A load's plan on g's mesh for (rep, sh) from a checkpoint's manifest
 * (ckpt_load.c): the layout's parameters found by name, the pieces of its
 * part (whole: its whole shard), and for each the saved ranges it meets
 * (a binary search per piece). Counts only: what hsr_ckpt_load reads. */
typedef struct ckpt_load_plan {
  int pieces, spans, files; /* spans: per range met, per kind (master, m, v) */
  uint64_t bytes;
} ckpt_load_plan;
hsr_status ckpt_plan_load(const ckpt_handle *c, const rt_layout *l, const ckpt_geom *g, int rep, int sh, int whole,
                          ckpt_load_plan *out);

/* The manifest a save on an R x S mesh of layout l writes (ckpt_sim.c):
 * every rank's data file and every tensor's ranges as rank 0 assembles
 * them, checksums stand-ins (as wide as a crc32's); rank = rep x S + sh.
 * *text malloc'd. */
hsr_status ckpt_sim_manifest(const rt_layout *l, const ckpt_geom *g, int R, int S, uint64_t block_bytes,
                             char **text, size_t *len);
/* Parses and validates manifest text held in memory (what names it in errors). */
hsr_status ckpt_open_text(const char *what, const char *text, size_t len, ckpt_handle **out);

#ifdef __cplusplus
}
#endif
#endif
