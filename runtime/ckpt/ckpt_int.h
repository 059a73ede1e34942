/* runtime/ internal: checkpoints (hsr/ckpt.h) shared between their files.
 *
 *   ckpt_manifest.c  the manifest's one schema: write, parse and validate,
 *                    its checksum; version 1's listed ranges
 *   ckpt_derive.c    version 2's ranges, derived with the save's planner
 *   ckpt_reader.c    the engine-less reader (open, info, tensors)
 *   ckpt_io.c        files: durable writes, directory syncs, the verified
 *                    block reader, verify, resolve, the fault hook
 *   ckpt_plan.c      who writes what (pieces of a shard's content per
 *                    replica, from the layout and the mesh's shape alone:
 *                    ckpt_geom), cross-rank agreement, staging buffers
 *   ckpt_sim.c       the manifest a save on a simulated mesh writes
 *   ckpt_save.c      hsr_ckpt_save: a save as a job (check, plan, stage on
 *                    the training thread; run: data files, commit, on
 *                    either thread); the native format's writer
 *   ckpt_commit.c    the commit protocol, whatever the format: staging,
 *                    the index, latest, crash safety, retention
 *   ckpt_export.c    the safetensors formats' writer (ckpt_export.h): one
 *                    file or Hugging Face's sharded layout
 *   ckpt_async.c     the background saver: its thread, communicator and
 *                    staging; hsr_ckpt_wait, ckpt_poll
 *   ckpt_load.c      hsr_ckpt_load: match, plan, verify, install
 *   ckpt_state.c     the program's key/value state
 */
#ifndef HSR_RUNTIME_CKPT_INT_H
#define HSR_RUNTIME_CKPT_INT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "hsr/comm.h"
#include "launch/agree.h"
#include "runtime/engine/state.h"

#define CKPT_MANIFEST "manifest.json"
#define CKPT_LATEST "latest"
#define CKPT_FORMAT "hsr-checkpoint"
#define CKPT_BLOCK ((uint64_t)1 << 20) /* default bytes per checksummed block */
#define CKPT_CHUNK ((size_t)8 << 20)   /* the most bytes one read or write moves */
#define CKPT_KINDS HSR_CKPT_KIND_COUNT
#define CKPT_MSG 480
#define CKPT_NAME_MAX 128
#define CKPT_FILE_MAX 256 /* a file name in an output directory, with its staged suffix */

/* One saved range of a tensor: elements [start, start + count) in `file`,
 * kind k's f32 values at byte off[k]. */
typedef struct ckpt_range {
  uint64_t start, count, off[CKPT_KINDS];
  int file;
} ckpt_range;

typedef struct ckpt_tensor {
  const char *name, *unit, *dtype; /* inside the parsed JSON */
  int ndim, group, unit_index;
  int64_t shape[HSR_RT_MAX_DIMS];
  uint64_t numel, offset;
  ckpt_range *r; /* sorted by start, covering [0, numel) exactly */
  int nr;
} ckpt_tensor;

typedef struct ckpt_file {
  const char *name;
  uint64_t bytes, nblocks;
  uint32_t crc;
  uint32_t *blocks; /* crc32 of each block_bytes block (the last may be short) */
  int rank, rep, sh; /* the rank that wrote it, its mesh coordinates */
} ckpt_file;

struct ckpt_handle {
  char *dir, *text;
  cJSON *json;
  ckpt_info info;
  ckpt_tensor *t;
  int nt;
  ckpt_file *f;
  int nf;
  const char *model;         /* the model's kind (NULL: none recorded) */
  const cJSON *model_config; /* its config object, inside json */
};

/* ---- ckpt_manifest.c: the manifest's one schema, written and parsed ---- */
/* Writes the head (format, versions, step, optimizer, mesh, dtypes) from
 * in, then layout and units (taken) and in->block_bytes. */
hsr_status ckpt_manifest_head(cJSON *m, const ckpt_info *in, cJSON *layout, cJSON *units);
/* A data file's entry (its rank, mesh coordinates, f->nblocks block
 * checksums), and a parameter of the layout as a tensor (name, shape, unit,
 * offset, group; f32, the master's dtype: its ranges
 * are derived from the layout and the files' coordinates when parsed). */
cJSON *ckpt_manifest_file(const ckpt_file *f);
cJSON *ckpt_manifest_tensor(const rt_param_info *p, const char *unit);
/* Parses and validates manifest text read from dir (takes text). */
hsr_status ckpt_parse(const char *dir, char *text, size_t len, ckpt_handle **out);
/* Adds "manifest_crc32" as the last member and prints root with it:
 * *text malloc'd. */
hsr_status ckpt_manifest_print(cJSON *root, char **text, size_t *len);
/* The parser's validated getters: an error says "checkpoint 'DIR':
 * manifest: WHERE: ..." (where: the item being read, or empty). */
typedef struct pctx {
  const char *dir;
  char where[192];
} pctx;
hsr_status ckpt_perr(const pctx *px, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define PERR(px, ...) ckpt_perr(px, __VA_ARGS__)
hsr_status ckpt_jint(const pctx *px, const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *v);
hsr_status ckpt_jstr(const pctx *px, const cJSON *o, const char *k, const char **v);
hsr_status ckpt_jarr(const pctx *px, const cJSON *o, const char *k, const cJSON **v, int *n);
const cJSON *ckpt_jobj(const cJSON *o, const char *k); /* an object member, or NULL */
/* Range i of a tensor: inside its file, no byte of the file twice (covered: bytes per file). */
hsr_status ckpt_check_range(ckpt_handle *c, pctx *px, const ckpt_range *r, int i, uint64_t *covered);
/* ---- ckpt_derive.c: version 2's ranges, derived with the save's planner ---- */
hsr_status ckpt_derive_ranges(ckpt_handle *c, pctx *px, uint64_t *covered);
/* The tensor and kind that byte `off` of file f holds (for messages). */
void ckpt_what_at(const ckpt_handle *c, int f, uint64_t off, char *buf, size_t len); /* ckpt_reader.c */

/* ---- ckpt_io.c ---- */
/* A plain file name: [A-Za-z0-9._-], not starting with '.'. */
int ckpt_safe_name(const char *s);
/* "a/b" into buf (HSR_ERR_INVALID when it does not fit). */
hsr_status ckpt_path(char *buf, size_t len, const char *dir, const char *name);
hsr_status ckpt_write_all(int fd, const void *p, size_t n, const char *path);
hsr_status ckpt_fsync_dir(const char *dir);
/* Writes a small file durably: temporary sibling, fsync, rename; the
 * directory is not synced (the caller does). */
hsr_status ckpt_write_small(const char *dir, const char *name, const void *p, size_t n, int fault_before_rename);
/* A whole file (at most max bytes) into malloc'd memory, NUL-terminated. */
hsr_status ckpt_slurp(const char *path, size_t max, char **out, size_t *len);

/* Incremental crc32 of a file, whole and per block. */
typedef struct ckpt_crc {
  uint64_t block, in_block, bytes, nb, cap;
  uint32_t file, cur;
  uint32_t *blocks;
} ckpt_crc;
void ckpt_crc_init(ckpt_crc *c, uint64_t block);
hsr_status ckpt_crc_feed(ckpt_crc *c, const void *p, size_t n);
hsr_status ckpt_crc_finish(ckpt_crc *c); /* closes a partial last block */
void ckpt_crc_free(ckpt_crc *c);

/* A part of a data file that a reader needs. */
typedef struct ckpt_span {
  int file;
  uint64_t off, len; /* bytes */
  int tensor, kind;  /* what they hold, for messages */
  uint64_t start;    /* first element */
  void *dst;         /* where a load installs them (engine memory) */
  char *hold;        /* a single-read load's host copy (NULL: none) */
} ckpt_span;
/* Receives the verified bytes [pos, pos + n) of span s. */
typedef hsr_status (*ckpt_sink)(void *ctx, ckpt_span *s, uint64_t pos, const void *src, size_t n);
/* Reads the spans (sorted here by file and offset) in block-aligned chunks
 * of at most cap bytes through buf, verifying each block's crc32 and each
 * file's size; sink may be NULL (verify only). *bytes: bytes read. */
hsr_status ckpt_read_spans(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, ckpt_sink sink, void *ctx,
                           uint64_t *bytes);

/* The same into each span's hold memory (none may be NULL): a window that
 * spans contiguous in the file and in memory cover is read straight there
 * and verified in place (a load on the saving mesh copies nothing). */
hsr_status ckpt_read_held(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, uint64_t *bytes);

/* The same straight into each span's dst (host memory; a load in place):
 * each window of whole blocks is one preadv, its vector sending the needed
 * bytes to their spans and the rest of the blocks to buf, then verified
 * across that vector. Nothing is copied but by the kernel. */
hsr_status ckpt_read_into(const ckpt_handle *c, ckpt_span *s, int n, void *buf, size_t cap, uint64_t *bytes);

/* HSR_CKPT_FAULT=STAGE[:STEP] (test hook): rank 0 exits at STAGE of the save
 * of STEP (any step when omitted). */
typedef enum ckpt_stage {
  CKPT_FAULT_NONE = 0,
  CKPT_FAULT_AFTER_DATA,
  CKPT_FAULT_BEFORE_MANIFEST_RENAME,
  CKPT_FAULT_BEFORE_LATEST
} ckpt_stage;
hsr_status ckpt_fault_parse(int64_t step, ckpt_stage *out);
void ckpt_fault_here(ckpt_stage armed, ckpt_stage here, int rank, int64_t step);

/* ---- ckpt_plan.c ---- */
/* What the rank at mesh coordinates (rep, sh) writes: its share of what it
 * holds alike with other ranks (today 1/R of shard sh's content; units in
 * order, parameters in layout order); whole: all it holds. *out malloc'd.
 * The engine-less planner (ckpt_geom_pieces) on the engine's layout and
 * mesh, its ranges checked against the engine's. */
hsr_status ckpt_pieces(hsr_rt *rt, const rt_state_info *in, int rep, int sh, int whole, ckpt_piece **out, int *n);
/* 1 when the engine shards the optimizer state over the replicas too. */
int ckpt_outer_of(hsr_rt *rt, const rt_state_info *in);

/* Who the ranks agree through: a host communicator (bounded by
 * HSR_COMM_TIMEOUT, naming a dead or stopped peer) or the bootstrap. A
 * background save has a communicator of its own (ckpt_async.c). */
typedef struct ckpt_link {
  hsr_comm *comm; /* NULL: the bootstrap */
  hsr_boot *boot;
  int rank, world;
} ckpt_link;
/* The engine's world when it is a host communicator, else the bootstrap. */
void ckpt_link_of(hsr_rt *rt, ckpt_link *l);

/* A rank's vote: its status and message, and two numbers and a crc
 * (launch/agree.h, the one agreement). */
typedef agree_vote ckpt_vote;
/* Every rank contributes (st, its last error, a, b, crc); *all (may be
 * NULL) receives every rank's vote (malloc'd; also when a rank failed).
 * Returns HSR_OK when every rank succeeded, else on every rank the lowest
 * failing rank's status and message ("rank R: ..."). Bounded by the
 * link's timeout. */
hsr_status ckpt_agree(const ckpt_link *l, hsr_status st, uint64_t a, uint64_t b, uint32_t crc, ckpt_vote **all);
/* Every rank's `bytes`. */
hsr_status ckpt_allgather(const ckpt_link *l, const void *mine, size_t bytes, void *all);
/* Host staging memory through the device layer (pinned on a GPU), in the
 * ledger as HSR_MEM_CKPT_STAGING. */
hsr_status ckpt_stage_alloc(hsr_rt *rt, size_t bytes, void **p);
void ckpt_stage_free(hsr_rt *rt, void *p, size_t bytes);
/* HSR_CKPT_BUFFER: the staging bytes a rank may hold (default 64 MiB; a
 * load's read buffer is at least two blocks whatever it says). */
hsr_status ckpt_buffer_cap(size_t *cap);
/* HSR_CKPT_BLOCK: bytes per checksummed block of a new checkpoint (default 1 MiB). */
hsr_status ckpt_block_bytes(uint64_t *block);
const char *ckpt_reshard_name(const hsr_rt_config *c, char *buf, size_t len);

/* ---- ckpt_save.c: a save as a job ---- */
typedef struct ckpt_job ckpt_job;
/* Training thread: *out (always set, free it) and the checks every rank
 * makes alike (refused on every rank before anything is written). */
hsr_status ckpt_job_begin(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *o, ckpt_job **out);
/* Training thread: this rank's part (its pieces; the program state and
 * model copied). A failure may be this rank's alone: vote it (run). */
hsr_status ckpt_job_plan(ckpt_job *x, const hsr_ckpt_save_opts *o);
/* Training thread: this rank's data, in file order, copied into buf
 * (ckpt_job_bytes of host memory); run then writes from there. */
hsr_status ckpt_job_stage(ckpt_job *x, char *buf);
/* Any thread (it reads only the job, the staged data and what commit
 * fixed): the agreements over l, the data file, rank 0's commit. st: the
 * plan's result. *progress (may be NULL) is bumped as it moves. */
hsr_status ckpt_job_run(ckpt_job *x, hsr_status st, const ckpt_link *l, uint64_t *progress);
uint64_t ckpt_job_bytes(const ckpt_job *x);
int64_t ckpt_job_step(const ckpt_job *x);
const char *ckpt_job_dir(const ckpt_job *x);
void ckpt_job_stats(const ckpt_job *x, hsr_ckpt_stats *s);
void ckpt_job_free(ckpt_job *x);

/* ---- ckpt_commit.c: the commit protocol, and a format's writer ---- */
/* A checkpoint format, as the commit protocol sees its writer (w: the
 * writer's state). A writer writes its data files durably first (fsync),
 * under their final names when they are the save's own (the native
 * format's, named by a save id), else staged (ckpt_commit_staged_path) so a
 * committed output in the directory stays whole until the commit; then rank
 * 0 commits. The table of every format: ckpt_formats[]. */
typedef struct ckpt_format {
  const char *name;
  /* 1: data file names are the save's own, so the files of a directory
   * without an index are a crashed attempt's (the protocol removes them) */
  int own_names;
  /* the file whose presence makes the output complete, written last, atomically */
  const char *(*index)(const void *w);
  /* rank 0, once every data file is durable: the index's text (*text
   * malloc'd); *text NULL, or no callback, when the index is itself a data
   * file, staged */
  hsr_status (*index_text)(void *w, char **text, size_t *len);
  /* the final name of staged file i (the index among them when staged);
   * 0 past the last. NULL: none */
  int (*staged)(const void *w, int i, char *name, size_t len);
  /* whether a file must go before the staged files replace any (a previous
   * output's index, which may name them). NULL: none */
  int (*retire)(const char *name, const void *w);
  /* whether a file of the directory stays after the commit */
  int (*keep)(const char *name, const void *w);
} ckpt_format;
extern const ckpt_format ckpt_format_native;      /* data-ID-RANK.bin and manifest.json (ckpt_save.c) */
extern const ckpt_format ckpt_format_safetensors; /* one .safetensors file (ckpt_export.c) */
extern const ckpt_format ckpt_format_hf;          /* Hugging Face's sharded layout (ckpt_export.c) */
/* Every format, NULL-terminated (tests/test_st_sharded.c: each has a test). */
extern const ckpt_format *const ckpt_formats[];

/* Where a save commits: dir, inside root (NULL: an export, which has no
 * `latest` and no retention) as name, and the test hook's stage. */
typedef struct ckpt_commit_at {
  const char *root, *dir, *name;
  int rank;
  int64_t step;
  ckpt_stage fault;
} ckpt_commit_at;
/* Where a staged file of final name `name` is written: dir/name.hsr-staged. */
hsr_status ckpt_commit_staged_path(const char *dir, const char *name, char *buf, size_t len);
/* Rank 0, before any data: the root and the directory made; a crashed
 * attempt's staged files (those f's staged list names) removed, and with
 * own_names every file of a directory that holds no index. */
hsr_status ckpt_commit_prepare(const ckpt_commit_at *at, const ckpt_format *f, const void *w);
/* Rank 0, after every rank's data: the directory synced; if files are
 * staged, the files f retires go, then the staged data files take their
 * names; the index (its text, or its staged file) under its name, directory
 * synced (*committed set: the output exists); with a root, `latest`; the
 * files f does not keep go. */
hsr_status ckpt_commit_run(const ckpt_commit_at *at, const ckpt_format *f, void *w, int *committed);
/* After a failure before the commit: removes what f staged. */
void ckpt_commit_discard(const ckpt_commit_at *at, const ckpt_format *f, const void *w);
/* Rank 0: keeps the new checkpoint and the keep - 1 newest committed older
 * ones; removes the rest and crashed saves' leftovers older than it. */
void ckpt_commit_prune(const ckpt_commit_at *at, const ckpt_format *f, int keep);

/* ---- ckpt_async.c ---- */
/* hsr_ckpt_save with opts->async (committed engine, arguments checked). */
hsr_status ckpt_async_save(hsr_rt *rt, const char *root, const hsr_ckpt_save_opts *o, hsr_ckpt_stats *stats);
/* Before a synchronous save or a load: the background save in flight (if
 * any) finishes first; *waited seconds, *step its step (-1: none). Its
 * failure is returned. */
hsr_status ckpt_async_settle(hsr_rt *rt, double *waited, int64_t *step);

/* ---- ckpt_state.c ---- */
/* Replaces s's pairs with a copy of obj's (a manifest's "program" or its
 * model's "config"; NULL: none); each value must be a number or a string.
 * what names the object in errors ("checkpoint 'X': program state"). */
hsr_status ckpt_state_assign(hsr_ckpt_state *s, const cJSON *obj, const char *what);
/* The state's object (NULL for a NULL state), for the manifest. */
const cJSON *ckpt_state_obj(const hsr_ckpt_state *s);
/* A state key (and a model kind): 1-63 of [A-Za-z0-9_.-]. */
hsr_status ckpt_check_key(const char *key);

#endif
