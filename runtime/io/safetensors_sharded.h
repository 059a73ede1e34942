/* A model's weights in one safetensors file or in Hugging Face's sharded
 * layout (what transformers' save_pretrained writes):
 *
 *   DIR/model-00001-of-00003.safetensors    safetensors files (runtime/io/safetensors.h),
 *   DIR/model-00002-of-00003.safetensors    each tensor whole in exactly one
 *   DIR/model-00003-of-00003.safetensors
 *   DIR/model.safetensors.index.json        {"metadata": {"total_size": BYTES},
 *                                            "weight_map": {"TENSOR": "FILE", ...}}
 *
 * total_size is the tensors' bytes (headers not counted). A model that fits
 * one shard is written as DIR/model.safetensors alone, as save_pretrained
 * does. A tensor is never split: one bigger than the limit gets a file of
 * its own.
 *
 * The writer is the checkpoint room's (runtime/ckpt/ckpt_export.h): the
 * files staged, then committed as a checkpoint is (ckpt_commit.c).
 *
 * One reader for every form (st_set_open): a .safetensors file, an
 * index (.json), or a directory holding model.safetensors.index.json or
 * model.safetensors. The index is validated strictly and every problem
 * names the index and the item: a weight_map that is not an object of
 * strings, a tensor named twice, a file name that leaves the directory
 * (only plain names), a missing or malformed shard, a tensor absent from
 * the shard the map names or present in a shard the map does not name for
 * it, shards whose __metadata__ differ. */
#ifndef HSR_SAFETENSORS_SHARDED_H
#define HSR_SAFETENSORS_SHARDED_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "runtime/io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSR_ST_INDEX_NAME "model.safetensors.index.json"
#define HSR_ST_SINGLE_NAME "model.safetensors"
#define HSR_ST_MAX_SHARDS 99999 /* the names' five digits */

/* A shard size: a positive number of bytes, save_pretrained's way ("5GB" =
 * 5 x 10^9; KB, MB, GB, TB decimal; KiB, MiB, GiB, TiB binary; a plain
 * integer: bytes). A bare K/M/G/T is refused as ambiguous, and so is a
 * lowercase b (transformers reads "5Gb" as gigabits). HSR_ERR_INVALID
 * naming `what`. */
hsr_status st_parse_shard_size(const char *what, const char *s, uint64_t *out);

/* Which shard each tensor goes to (bytes[i]: tensor i's bytes, in order):
 * tensors in order fill a shard while its bytes stay within max_bytes; a
 * tensor bigger than max_bytes gets a shard of its own. shard[i] is
 * 0-based; *nshards >= 1 (no tensors: one empty shard). Pure. */
hsr_status st_shard_plan(const uint64_t *bytes, int n, uint64_t max_bytes, int *shard, int *nshards);

/* ---- reader ---- */
typedef struct st_set st_set;

/* The file `path` denotes: path itself when it is a file (an index when its
 * name ends in ".json"), else the index or model.safetensors of the
 * directory (neither or both: HSR_ERR_INVALID saying so). *file malloc'd. */
hsr_status st_set_locate(const char *path, char **file, int *is_index);
/* Opens and validates every file of the model (headers only). */
hsr_status st_set_open(const char *path, st_set **out);
void st_set_close(st_set *s);
/* Tensors: the files in name order, each in header order. */
int st_set_count(const st_set *s);
hsr_status st_set_info_at(const st_set *s, int i, st_info *out);
hsr_status st_set_find(const st_set *s, const char *name, int *index);
/* Bytes [offset, offset + bytes) of tensor i. */
hsr_status st_set_read(const st_set *s, int i, uint64_t offset, void *dst, size_t bytes);
/* __metadata__ (the same in every shard). */
const char *st_set_meta(const st_set *s, const char *key);
int st_set_meta_count(const st_set *s);
hsr_status st_set_meta_at(const st_set *s, int i, const char **key, const char **value);
/* The safetensors files (1 without an index), the one holding tensor i,
 * and the tensors' bytes. Strings valid until st_set_close. */
int st_set_num_files(const st_set *s);
const char *st_set_file_of(const st_set *s, int i);
uint64_t st_set_total_bytes(const st_set *s);
/* What errors call it: the path given to st_set_open. */
const char *st_set_label(const st_set *s);

/* ---- the layout's names and index (the writer: runtime/ckpt/ckpt_export.h) ---- */
/* Shard k's (0-based) file name of nshards: model-0000k-of-0000N.safetensors,
 * or model.safetensors when nshards is 1. */
void st_shard_name(int k, int nshards, char *buf, size_t len);
/* 1 when name is a shard's: model-NNNNN-of-NNNNN.safetensors. */
int st_shard_like(const char *name);
/* The index of tensors t (shard[i]: tensor i's shard, of nshards) as
 * save_pretrained writes it: {"metadata": {"total_size": N}, "weight_map":
 * {...}} through json.dumps(indent=2, sort_keys=True) + "\n", names in
 * ASCII (\uXXXX beyond). *text malloc'd. */
hsr_status st_index_text(const st_tensor *t, const int *shard, int n, int nshards, char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
