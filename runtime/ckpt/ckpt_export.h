/* Exports: a model's tensors streamed into safetensors, one file or Hugging
 * Face's sharded layout (runtime/io/safetensors_sharded.h), committed by the
 * checkpoint's commit protocol (ckpt_commit.c): every file is written under
 * a staged name (NAME.hsr-staged) and synced; then the previous output's
 * index goes, the shards take their names, the index comes last (temporary
 * name, fsync, rename, directory fsync), and an earlier export's files that
 * this one does not name go. A crash before the commit leaves the previous
 * export whole (and staged files the next export removes). A character
 * device or a FIFO (one file only) is written in place: nothing to commit. */
#ifndef HSR_RUNTIME_CKPT_EXPORT_H
#define HSR_RUNTIME_CKPT_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/common.h"
#include "runtime/io/safetensors.h"

typedef struct ckpt_export ckpt_export;

/* max_shard_bytes 0: one safetensors file at `path` (ckpt_format_safetensors;
 * a symlink's target is written, the link stays). Otherwise `path` is a
 * directory (created when missing; its parent must exist) that receives the
 * shards (st_shard_plan), every shard carrying the same metadata, and the
 * index, or model.safetensors alone when one shard holds every tensor
 * (ckpt_format_hf). Bad tensors or metadata touch no file. */
hsr_status ckpt_export_begin(const char *path, uint64_t max_shard_bytes, const st_tensor *t, int n,
                             const st_kv *meta, int nmeta, ckpt_export **out);
/* Appends bytes of the tensors, in order (any chunking, across tensors and shards). */
hsr_status ckpt_export_write(ckpt_export *e, const void *data, size_t bytes);
/* Checks every byte was written, then commits; frees e (also on failure). */
hsr_status ckpt_export_finish(ckpt_export *e);
/* Removes what e staged; frees e (NULL is fine). The previous export stays. */
void ckpt_export_abort(ckpt_export *e);
/* The safetensors files e writes (0 for NULL). */
int ckpt_export_files(const ckpt_export *e);

/* The name of format i of the commit protocol's table (ckpt_formats[]:
 * the native checkpoint, these two); NULL past the last. */
const char *ckpt_format_name(int i);

#endif
