/* safetensors files, both ways, exactly per the format's specification
 * (github.com/huggingface/safetensors):
 *
 *   8 bytes   N, unsigned little-endian 64-bit: the header's length
 *   N bytes   a UTF-8 JSON object that starts with '{', padded with spaces
 *             (0x20): {"__metadata__": {"k": "v", ...},
 *                      "NAME": {"dtype": "F32", "shape": [2, 3],
 *                               "data_offsets": [BEGIN, END]}, ...}
 *             offsets relative to the byte buffer, END one past the last byte
 *   rest      the byte buffer: tensors back to back, little-endian, row-major
 *
 * The writer streams: the header goes first (from names, dtypes and shapes),
 * then the tensors' bytes in the order given, so the whole model is never in
 * memory; the file appears under its name only when complete (written to a
 * temporary name, synced, renamed). Its header is compact JSON padded to a
 * multiple of 8, byte for byte what the reference implementation writes for
 * the same tensors in the same order.
 *
 * The reader validates strictly and names the file and the problem: the
 * length field, a header within 100,000,000 bytes and inside the file,
 * valid UTF-8 JSON starting with '{', nothing but spaces after it, entries
 * of exactly dtype (a known one) / shape (non-negative integers) /
 * data_offsets ([BEGIN, END], END - BEGIN = bytes of the shape), no
 * duplicate names or keys, no holes or overlaps, the tensors covering the
 * buffer exactly, __metadata__ a string-to-string map. */
#ifndef HSR_SAFETENSORS_H
#define HSR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HSR_ST_MAX_DIMS 8
#define HSR_ST_HEADER_MAX 100000000u

/* Bytes per element of a dtype name ("F32", "BF16", "I64", ...); 0 when the
 * name is not one of BOOL U8 I8 F8_E5M2 F8_E4M3 I16 U16 F16 BF16 I32 U32 F32
 * F64 I64 U64. */
size_t st_dtype_size(const char *dtype);

typedef struct st_tensor {
  const char *name;
  const char *dtype;
  int ndim; /* 0 (a scalar) .. HSR_ST_MAX_DIMS */
  int64_t shape[HSR_ST_MAX_DIMS];
} st_tensor;

typedef struct st_kv {
  const char *key, *value;
} st_kv;

/* ---- writer ---- */
typedef struct st_writer st_writer;

/* The header of these tensors (in this order) and metadata, padded: *out is
 * malloc'd, *len a multiple of 8 (the N of the file). */
hsr_status st_header(const st_tensor *t, int n, const st_kv *meta, int nmeta, char **out, size_t *len);
/* Opens `path`'s temporary sibling and writes the length and the header. */
hsr_status st_create(const char *path, const st_tensor *t, int n, const st_kv *meta, int nmeta,
                     st_writer **out);
/* The same over a stream the caller opened and names (the commit protocol's
 * staging, runtime/ckpt/ckpt_commit.c): the length and the header written
 * to f; st_end then checks every byte was written and frees w, leaving f
 * open (the caller flushes, syncs and renames it). label names f in errors. */
hsr_status st_begin(FILE *f, const char *label, const st_tensor *t, int n, const st_kv *meta, int nmeta,
                    st_writer **out);
hsr_status st_end(st_writer *w);
/* Appends bytes of the tensors, in order (any chunking). */
hsr_status st_write(st_writer *w, const void *data, size_t bytes);
/* Checks every byte was written, syncs, renames into place; frees w. */
hsr_status st_finish(st_writer *w);
/* Removes st_create's temporary file; frees w (NULL is fine). */
void st_abort(st_writer *w);

/* ---- reader ---- */
typedef struct st_file st_file;

typedef struct st_info {
  const char *name, *dtype; /* valid until st_close */
  size_t dtype_size;
  int ndim;
  int64_t shape[HSR_ST_MAX_DIMS];
  uint64_t numel, begin, end; /* end - begin = numel x dtype_size bytes */
} st_info;

/* Opens and validates a file (reads only the header). */
hsr_status st_open(const char *path, st_file **out);
/* The same over a whole file held in memory (it must outlive the result);
 * `label` names it in errors. */
hsr_status st_parse(const void *bytes, size_t len, const char *label, st_file **out);
void st_close(st_file *f);
/* Tensors in header order. */
int st_count(const st_file *f);
hsr_status st_info_at(const st_file *f, int i, st_info *out);
hsr_status st_find(const st_file *f, const char *name, int *index);
/* __metadata__: the value of a key (NULL when absent), and every pair in order. */
const char *st_meta(const st_file *f, const char *key);
int st_meta_count(const st_file *f);
hsr_status st_meta_at(const st_file *f, int i, const char **key, const char **value);
/* Bytes [offset, offset + bytes) of tensor i's data. */
hsr_status st_read(const st_file *f, int i, uint64_t offset, void *dst, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
