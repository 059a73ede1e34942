/* Unit tests of the safetensors module: the format specification's own test
 * vectors byte for byte (the reference implementation's serialization
 * tests), a streaming round trip through a file, and malformed files, each
 * rejected with an error that names the file and the problem, and partial
 * reads: every slice of every tensor of files laid out as other tools lay
 * them out (data in another order than the header) equals those bytes, in
 * one file and through Hugging Face's sharded form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime/io/safetensors.h"
#include "runtime/io/safetensors_sharded.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static char g_dir[64];

/* writes tensors (data: all bytes in order) with the streaming writer and
 * reads the whole file back */
static unsigned char *write_file(const char *name, const st_tensor *t, int n, const st_kv *m, int nm,
                                 const void *data, size_t bytes, size_t *len) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  st_writer *w;
  OK(st_create(path, t, n, m, nm, &w));
  for (size_t off = 0; off < bytes; off += 5) /* odd chunks: the writer streams */
    OK(st_write(w, (const char *)data + off, bytes - off < 5 ? bytes - off : 5));
  OK(st_finish(w));
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(*len + 1);
  assert_int_equal(fread(b, 1, *len, f), *len);
  fclose(f);
  return b;
}

static void test_spec_vectors(void **state) {
  (void)state;
  size_t len;
  /* the empty file */
  static const unsigned char empty[16] = {8, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20};
  unsigned char *b = write_file("empty.safetensors", NULL, 0, NULL, 0, NULL, 0, &len);
  assert_int_equal(len, 16);
  assert_memory_equal(b, empty, 16);
  free(b);
  st_file *f;
  OK(st_parse(empty, 16, "empty", &f));
  assert_int_equal(st_count(f), 0);
  assert_int_equal(st_meta_count(f), 0);
  st_close(f);

  /* empty, with metadata {"framework": "pt"} */
  static const unsigned char meta[] = {40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                                       100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                                       111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
  st_kv kv = {"framework", "pt"};
  b = write_file("meta.safetensors", NULL, 0, &kv, 1, NULL, 0, &len);
  assert_int_equal(len, sizeof meta);
  assert_memory_equal(b, meta, sizeof meta);
  free(b);
  OK(st_parse(meta, sizeof meta, "meta", &f));
  assert_string_equal(st_meta(f, "framework"), "pt");
  assert_null(st_meta(f, "nope"));
  st_close(f);

  /* one F32 tensor [1, 2, 3] = 0..5: a 64-byte header needs no padding */
  static const unsigned char one[] = {
      64,  0,  0,   0,  0,   0,  0,   0,   123, 34,  97,  116, 116, 110, 46,  48, 34, 58, 123, 34, 100, 116, 121, 112,
      101, 34, 58,  34, 70,  51, 50,  34,  44,  34,  115, 104, 97,  112, 101, 34, 58, 91, 49,  44, 50,  44,  51,  93,
      44,  34, 100, 97, 116, 97, 95,  111, 102, 102, 115, 101, 116, 115, 34,  58, 91, 48, 44,  50, 52,  93,  125, 125,
      0,   0,  0,   0,  0,   0,  128, 63,  0,   0,   0,   64,  0,   0,   64,  64, 0,  0,  128, 64, 0,   0,   160, 64};
  float vals[6] = {0, 1, 2, 3, 4, 5};
  st_tensor t = {"attn.0", "F32", 3, {1, 2, 3}};
  b = write_file("one.safetensors", &t, 1, NULL, 0, vals, sizeof vals, &len);
  assert_int_equal(len, sizeof one);
  assert_memory_equal(b, one, sizeof one);
  free(b);
  /* [1, 1, 2, 3] under a shorter name: padded with 7 spaces to 72 */
  st_tensor t2 = {"attn0", "F32", 4, {1, 1, 2, 3}};
  b = write_file("pad.safetensors", &t2, 1, NULL, 0, vals, sizeof vals, &len);
  assert_int_equal(len, 8 + 72 + 24);
  assert_int_equal(b[0], 72);
  assert_memory_equal(b + 8 + 65, "       ", 7);
  assert_memory_equal(b + 80, one + 72, 24);
  OK(st_parse(b, len, "pad", &f));
  st_info in;
  OK(st_info_at(f, 0, &in));
  assert_string_equal(in.name, "attn0");
  assert_true(in.ndim == 4 && in.shape[3] == 3 && in.numel == 6 && in.begin == 0 && in.end == 24);
  float back[6];
  OK(st_read(f, 0, 0, back, sizeof back));
  assert_memory_equal(back, vals, sizeof vals);
  st_close(f);
  free(b);

  /* the reference's read example: an unpadded 60-byte header is valid too */
  static const char ex[] = "<\0\0\0\0\0\0\0{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  unsigned char exb[8 + 60 + 16] = {0};
  memcpy(exb, ex, 8 + 60);
  OK(st_parse(exb, sizeof exb, "example", &f));
  int idx;
  OK(st_find(f, "test", &idx));
  assert_int_equal(st_find(f, "nope", &idx), HSR_ERR_NOT_FOUND);
  st_close(f);
}

static void test_round_trip(void **state) {
  (void)state;
  /* several dtypes, a scalar, an empty tensor, names needing escapes, metadata */
  st_tensor t[5] = {{"w", "F32", 2, {3, 4}},
                        {"a \"quoted\"\\name\n", "BF16", 1, {5}},
                        {"empty", "F64", 2, {0, 7}},
                        {"scalar", "I64", 0, {0}},
                        {"bytes", "U8", 1, {3}}};
  st_kv m[2] = {{"hsr.model", "gpt"}, {"n_layer", "12"}};
  unsigned char data[48 + 10 + 0 + 8 + 3];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37 + 1);
  size_t len;
  unsigned char *b = write_file("rt.safetensors", t, 5, m, 2, data, sizeof data, &len);
  assert_int_equal((len - sizeof data) % 8, 0);
  char path[128];
  snprintf(path, sizeof path, "%s/rt.safetensors", g_dir);
  st_file *f;
  OK(st_open(path, &f));
  assert_int_equal(st_count(f), 5);
  assert_string_equal(st_meta(f, "n_layer"), "12");
  size_t off = 0;
  for (int i = 0; i < 5; i++) {
    st_info in;
    OK(st_info_at(f, i, &in));
    assert_string_equal(in.name, t[i].name);
    assert_string_equal(in.dtype, t[i].dtype);
    assert_int_equal(in.ndim, t[i].ndim);
    size_t n = in.end - in.begin;
    unsigned char got[64];
    OK(st_read(f, i, 0, got, n));
    assert_memory_equal(got, data + off, n);
    off += n;
  }
  assert_int_equal(st_read(f, 0, 40, data, 16), HSR_ERR_INVALID); /* past the tensor */
  st_close(f);
  free(b);

  /* bad input to the writer; a failed write leaves no file behind */
  st_writer *w;
  st_tensor dup[2] = {{"x", "F32", 1, {1}}, {"x", "F32", 1, {1}}};
  assert_int_equal(st_create(path, dup, 2, NULL, 0, &w), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "given twice"));
  st_tensor badt = {"x", "F33", 1, {1}};
  assert_int_equal(st_create(path, &badt, 1, NULL, 0, &w), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "valid: BOOL"));
  st_tensor mt = {"__metadata__", "F32", 1, {1}};
  assert_int_equal(st_create(path, &mt, 1, NULL, 0, &w), HSR_ERR_INVALID);
  snprintf(path, sizeof path, "%s/short.safetensors", g_dir);
  OK(st_create(path, t, 1, NULL, 0, &w));
  assert_int_equal(st_write(w, data, 49), HSR_ERR_INVALID); /* more than the header holds */
  OK(st_write(w, data, 40));
  assert_int_equal(st_finish(w), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "40 of the header's 48"));
  assert_int_equal(access(path, F_OK), -1);
}

/* a file of header text h (length field = strlen(h)) and `extra` buffer bytes */
static hsr_status parse_hdr(const char *h, size_t extra, const char *needle) {
  size_t n = strlen(h), len = 8 + n + extra;
  unsigned char *b = calloc(1, len + 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(b + 8, h, n);
  st_file *f = NULL;
  hsr_status st = st_parse(b, len, "bad.safetensors", &f);
  if (st == HSR_OK) {
    st_close(f);
    free(b);
    fail_msg("accepted: %s", h);
  }
  free(b);
  if (!strstr(hsr_last_error(), "bad.safetensors") || !strstr(hsr_last_error(), needle))
    fail_msg("header %s: error '%s' lacks the file name or '%s'", h, hsr_last_error(), needle);
  return st;
}

static void test_malformed(void **state) {
  (void)state;
  st_file *f;
  unsigned char tiny[5] = {0};
  assert_int_equal(st_parse(tiny, 5, "bad.safetensors", &f), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "shorter than the 8-byte header length"));
  unsigned char huge[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100000001 */
  assert_int_equal(st_parse(huge, 16, "bad.safetensors", &f), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "exceeds the 100000000-byte limit"));
  unsigned char past[16] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  assert_int_equal(st_parse(past, 16, "bad.safetensors", &f), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "runs past the end of the file"));

  parse_hdr(" {}     ", 0, "does not start with '{'");
  parse_hdr("[]      ", 0, "does not start with '{'");
  parse_hdr("{\"a\xff\":{}}", 0, "not valid UTF-8");
  parse_hdr("{\"\xc0\xaf\":{}}", 0, "not valid UTF-8"); /* overlong */
  parse_hdr("{abc}   ", 0, "not valid JSON");
  parse_hdr("{}x     ", 0, "only space padding");
  parse_hdr("{}\n     ", 0, "only space padding");
  parse_hdr("{\"a\x01\":1}", 0, "control character");
  const char *T = "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  char h[512];
  snprintf(h, sizeof h, "{%s,%s}", T, T);
  parse_hdr(h, 8, "tensor 't' appears twice");
  parse_hdr("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "key 'k' appears twice");
  parse_hdr("{\"__metadata__\":{\"k\":1}}", 0, "is not a string");
  parse_hdr("{\"__metadata__\":[\"k\"]}", 0, "is not an object");
  parse_hdr("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice");
  parse_hdr("{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype 'F33' is not one of");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "not a non-negative integer");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, "not a non-negative integer");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "shape must be an array");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "[BEGIN, END]");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
            "hold 4 bytes, but F32 x 2 elements need 8");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "a hole of 4 bytes");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"u\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
            12, "overlaps");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9,
            "cover 8 bytes of the 9-byte buffer");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
            "cover 8 bytes of the 4-byte buffer");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"offsets\":[0,8]}}", 8, "unknown key 'offsets'");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks data_offsets");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
            "key 'dtype' twice");
  parse_hdr("{\"t\":[1]}", 0, "is not an object");
  parse_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
            "overflows");
  /* valid edge cases: empty tensors sharing an offset, a scalar, whitespace inside the JSON */
  const char *okh = "{ \"e\" : {\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},\n"
                    "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                    "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}  ";
  size_t n = strlen(okh);
  unsigned char *b = calloc(1, 8 + n + 8);
  b[0] = (unsigned char)n;
  memcpy(b + 8, okh, n);
  OK(st_parse(b, 8 + n + 8, "ok", &f));
  assert_int_equal(st_count(f), 3);
  st_info in;
  OK(st_info_at(f, 1, &in));
  assert_true(in.ndim == 0 && in.numel == 1 && in.end == 8);
  st_close(f);
  free(b);
  /* files: a missing one, a directory */
  assert_int_equal(st_open("/nonexistent/x.safetensors", &f), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "/nonexistent/x.safetensors"));
  assert_int_equal(st_open(g_dir, &f), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "not a regular file"));
  assert_int_equal(st_dtype_size("BF16"), 2);
  assert_int_equal(st_dtype_size("bf16"), 0);
}

/* ---- partial reads: what a sharded --init and every chunked reader do ---- */

/* Every slice [o, o + k) of every tensor of f equals bytes [o, o + k) of
 * that tensor in `buf` (the byte buffer as laid out); nothing is written
 * past k; a slice that leaves the tensor is refused with its name. */
static void sweep_slices(st_file *f, const unsigned char *buf, const char *what) {
  unsigned char got[80 + 8];
  for (int i = 0; i < st_count(f); i++) {
    st_info in;
    OK(st_info_at(f, i, &in));
    uint64_t n = in.end - in.begin;
    assert_true(n + 8 <= sizeof got);
    for (uint64_t o = 0; o <= n; o++)
      for (uint64_t k = 0; o + k <= n; k++) {
        memset(got, 0xA5, sizeof got);
        if (st_read(f, i, o, got, (size_t)k) != HSR_OK)
          fail_msg("%s: tensor '%s' bytes [%llu, %llu): %s", what, in.name, (unsigned long long)o,
                   (unsigned long long)(o + k), hsr_last_error());
        if (memcmp(got, buf + in.begin + o, (size_t)k))
          fail_msg("%s: tensor '%s' (buffer bytes [%llu, %llu)): bytes [%llu, %llu) read differ from the file's", what,
                   in.name, (unsigned long long)in.begin, (unsigned long long)in.end, (unsigned long long)o,
                   (unsigned long long)(o + k));
        for (size_t g = (size_t)k; g < k + 8; g++)
          if (got[g] != 0xA5)
            fail_msg("%s: tensor '%s': a read of %llu bytes wrote past them", what, in.name, (unsigned long long)k);
      }
    assert_int_equal(st_read(f, i, n + 1, got, 0), HSR_ERR_INVALID);
    assert_int_equal(st_read(f, i, n ? n - 1 : 0, got, 2), HSR_ERR_INVALID);
    assert_non_null(strstr(hsr_last_error(), in.name));
  }
}

/* Six tensors (five dtypes, a scalar, an empty one) whose bytes lie in
 * another order than the header lists them, as other tools write files:
 * header neighbours are apart, with other tensors between them. The
 * header of `order` (header index -> data position) is built by hand. */
static unsigned char *other_tool_file(const int *order, const char *prefix, size_t *len, unsigned char **buf_out) {
  static const char *const names[6] = {"h.0.attn.c_attn.weight", "b16", "c.bias", "d64", "scalar", "empty"};
  static const char *const dts[6] = {"F32", "BF16", "U8", "F64", "I64", "F16"};
  static const int nd[6] = {2, 1, 1, 2, 0, 1};
  static const int64_t shp[6][2] = {{3, 5}, {7, 0}, {5, 0}, {2, 2}, {0, 0}, {0, 0}};
  uint64_t bytes[6], at[6], total = 0;
  for (int i = 0; i < 6; i++) {
    bytes[i] = st_dtype_size(dts[i]);
    for (int d = 0; d < nd[i]; d++) bytes[i] *= (uint64_t)shp[i][d];
  }
  for (int pos = 0; pos < 6; pos++) /* the tensor stored pos-th */
    for (int i = 0; i < 6; i++)
      if (order[i] == pos) at[i] = total, total += bytes[i];
  char h[1024];
  int o = snprintf(h, sizeof h, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < 6; i++) {
    o += snprintf(h + o, sizeof h - (size_t)o, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[", prefix, names[i], dts[i]);
    for (int d = 0; d < nd[i]; d++)
      o += snprintf(h + o, sizeof h - (size_t)o, "%s%lld", d ? "," : "", (long long)shp[i][d]);
    o += snprintf(h + o, sizeof h - (size_t)o, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at[i],
                  (unsigned long long)(at[i] + bytes[i]));
  }
  o += snprintf(h + o, sizeof h - (size_t)o, "}");
  while (o % 8) h[o++] = ' ';
  *len = 8 + (size_t)o + total;
  unsigned char *b = malloc(*len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)o >> (8 * i));
  memcpy(b + 8, h, (size_t)o);
  uint32_t r = 12345 + (uint32_t)strlen(prefix);
  for (uint64_t i = 0; i < total; i++) r = r * 1103515245u + 12345u, b[8 + o + i] = (unsigned char)(r >> 16);
  *buf_out = b + 8 + o;
  return b;
}

static void test_partial_reads(void **state) {
  (void)state;
  static const int orders[3][6] = {{0, 1, 2, 3, 4, 5}, {3, 5, 0, 4, 2, 1}, {5, 4, 3, 2, 1, 0}};
  char path[128];
  snprintf(path, sizeof path, "%s/other.safetensors", g_dir);
  for (int k = 0; k < 3; k++) {
    size_t len;
    unsigned char *buf, *b = other_tool_file(orders[k], "", &len, &buf);
    st_file *f;
    OK(st_parse(b, len, "other tool (memory)", &f));
    assert_int_equal(st_count(f), 6);
    st_info in;
    OK(st_info_at(f, 0, &in)); /* header order, whatever the data order */
    assert_string_equal(in.name, "h.0.attn.c_attn.weight");
    sweep_slices(f, buf, "memory");
    st_close(f);
    FILE *w = fopen(path, "wb");
    assert_non_null(w);
    assert_int_equal(fwrite(b, 1, len, w), len);
    fclose(w);
    OK(st_open(path, &f));
    sweep_slices(f, buf, "file");
    st_close(f);
    free(b);
  }
  /* hsr's own writer, streamed in odd chunks */
  st_tensor t[3] = {{"x", "F32", 2, {2, 3}}, {"y", "BF16", 1, {9}}, {"z", "I8", 1, {11}}};
  unsigned char data[24 + 18 + 11];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 29 + 7);
  size_t len;
  unsigned char *b = write_file("own.safetensors", t, 3, NULL, 0, data, sizeof data, &len);
  st_file *f;
  OK(st_parse(b, len, "own (memory)", &f));
  sweep_slices(f, b + len - sizeof data, "hsr's writer, memory");
  st_close(f);
  snprintf(path, sizeof path, "%s/own.safetensors", g_dir);
  OK(st_open(path, &f));
  sweep_slices(f, b + len - sizeof data, "hsr's writer, file");
  st_close(f);
  free(b);
  /* Hugging Face's sharded form: three such shards and an index; every slice
   * of every tensor, through the set, equals its shard's bytes */
  char idx[1024] = "{\"metadata\":{\"total_size\":0},\"weight_map\":{";
  unsigned char *shard[3], *sbuf[3];
  size_t slen[3];
  static const char *const pre[3] = {"a.", "bb.", "ccc."};
  static const char *const sn[6] = {"h.0.attn.c_attn.weight", "b16", "c.bias", "d64", "scalar", "empty"};
  for (int k = 0; k < 3; k++) {
    shard[k] = other_tool_file(orders[2 - k], pre[k], &slen[k], &sbuf[k]);
    char fn[160];
    snprintf(fn, sizeof fn, "%s/model-%05d-of-00003.safetensors", g_dir, k + 1);
    FILE *w = fopen(fn, "wb");
    assert_non_null(w);
    assert_int_equal(fwrite(shard[k], 1, slen[k], w), slen[k]);
    fclose(w);
    for (int i = 0; i < 6; i++)
      snprintf(idx + strlen(idx), sizeof idx - strlen(idx), "%s\"%s%s\":\"model-%05d-of-00003.safetensors\"",
               k || i ? "," : "", pre[k], sn[i], k + 1);
  }
  strcat(idx, "}}");
  /* total_size: the tensors' bytes (every shard's buffer) */
  uint64_t total = 0;
  for (int k = 0; k < 3; k++) total += (uint64_t)(slen[k] - (size_t)(sbuf[k] - shard[k]));
  char num[32];
  snprintf(num, sizeof num, "%llu", (unsigned long long)total);
  char fixed[1100];
  snprintf(fixed, sizeof fixed, "{\"metadata\":{\"total_size\":%s}%s", num, strchr(idx, '}') + 1);
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", g_dir);
  FILE *w = fopen(path, "w");
  assert_non_null(w);
  fputs(fixed, w);
  fclose(w);
  st_set *set;
  if (st_set_open(g_dir, &set) != HSR_OK) fail_msg("the sharded set: %s", hsr_last_error());
  assert_int_equal(st_set_count(set), 18);
  unsigned char got[80 + 8];
  int slices = 0;
  for (int i = 0; i < st_set_count(set); i++) {
    st_info in;
    OK(st_set_info_at(set, i, &in));
    int k = in.name[0] == 'a' ? 0 : in.name[1] == 'b' ? 1 : 2;
    uint64_t n = in.end - in.begin;
    for (uint64_t o = 0; o <= n; o++)
      for (uint64_t q = 0; o + q <= n; q++, slices++) {
        memset(got, 0xA5, sizeof got);
        OK(st_set_read(set, i, o, got, (size_t)q));
        if (memcmp(got, sbuf[k] + in.begin + o, (size_t)q) || got[q] != 0xA5)
          fail_msg("sharded: tensor '%s' (%s) bytes [%llu, %llu) differ from its shard's", in.name,
                   st_set_file_of(set, i), (unsigned long long)o, (unsigned long long)(o + q));
      }
    assert_int_equal(st_set_read(set, i, n + 1, got, 0), HSR_ERR_INVALID);
  }
  assert_true(slices > 3000);
  st_set_close(set);
  for (int k = 0; k < 3; k++) free(shard[k]);
  /* out of order with a real hole is still refused (the format forbids holes),
   * naming the tensor after it */
  parse_hdr("{\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
            "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
            16, "a hole of 4 bytes at buffer offset 8, before tensor 'u'");
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/hsr-st-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_spec_vectors), cmocka_unit_test(test_round_trip),
                                     cmocka_unit_test(test_malformed), cmocka_unit_test(test_partial_reads)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
