/* hsr ckpt plan: the checkpoint planner timed for a mesh that does not
 * exist. A subcommand of its own, not a flag of `hsr ckpt bench`: bench
 * runs ranks under a launcher and moves real bytes; the planner needs
 * neither (its inputs are the layout and the mesh's shape), so this runs as
 * one process for any rank count. The model's tensors come from a
 * published shape (tune/'s presets), one unit per block plus the root. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cli/cli.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/runtime_internal.h"
#include "tune/tune.h"

#define CMD "ckpt plan"

static void usage(FILE *f) {
  fprintf(f, "usage: hsr ckpt plan [--ranks N | --shard S --replicate R] [--arch NAME] [--outer-shard optim]\n"
             "                     [--load-ranks M] [--block SIZE] [--json]\n"
             "       hsr ckpt plan --against DIR [--outer-shard optim] [--json]\n"
             "Times the checkpoint planner for a mesh that need not exist, in one process: what each rank\n"
             "computes alone from the layout and the mesh's shape (no communicator, no state).\n"
             "  --ranks N         an FSDP mesh of N ranks (1 x N; 1 to 1048576, default 1024)\n"
             "  --shard S, --replicate R   an R x S (replicate x shard) mesh instead (S up to 1048576,\n"
             "                    R x S up to 16777216)\n"
             "  --arch NAME       the model's tensors: gpt2-124m, llama3-8b or llama3-70b (default), their\n"
             "                    published shapes, one unit per block plus the root\n"
             "  --outer-shard optim   the optimizer state sharded over the replicas too (HFSDP)\n"
             "  --load-ranks M    the load's mesh: FSDP over M ranks (default: the saving mesh)\n"
             "  --block SIZE      bytes per checksummed block (default 1M, as HSR_CKPT_BLOCK)\n"
             "  --against DIR     rebuild a saved checkpoint's layout and mesh from its manifest, plan its save\n"
             "                    and compare every tensor's ranges with the manifest's, and plan its load on\n"
             "                    that mesh against it: every byte once, each rank's part from one file (exit 1\n"
             "                    on a difference)\n"
             "  --json            one JSON object on stdout instead of the table\n"
             "Reported in CPU seconds of one core, for ranks 0, W/2 and W-1: the time to compute the rank's save\n"
             "plan (its pieces) and its load plan (its pieces on the load's mesh and the saved ranges they meet),\n"
             "the pieces; and the manifest: its bytes, the ranges it implies, the time rank 0 takes to assemble\n"
             "it and every rank to parse it and derive them.\n"
             "Exit codes: 0 ok, 1 a difference (--against), 2 bad usage.\n");
}

/* CPU seconds of this process: the planner's cost, not the share of a
 * busy machine's cores it got (every rank plans on a core of its own). */
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the model's layout ---- */
static hsr_status add(rt_layout *l, int u, const char *name, int64_t a, int64_t b) {
  int64_t s[2] = {a, b};
  return rt_layout_add_param(l, u, name, b ? 2 : 1, s, 0);
}

/* Llama: the root (embeddings, final norm, head), then per block its norms,
 * attention (grouped KV) and SwiGLU MLP; GPT: tied head, biases. */
static hsr_status model_layout(const tune_arch *a, int R, int S, int outer, rt_layout **out) {
  rt_layout *l = NULL;
  HSR_CHECK(rt_layout_create(16, &l)); /* the engine's default alignment */
  int64_t C = a->width, V = a->vocab, F = a->ffn, hd = a->width / a->heads, kv = (int64_t)a->kv_heads * hd;
  int llama = a->family == HSR_TUNE_FAM_LLAMA || a->family == HSR_TUNE_FAM_HSR_LLAMA, u;
  hsr_status st = outer ? rt_layout_set_subshards(l, R) : HSR_OK;
  if (st == HSR_OK) st = rt_layout_add_unit(l, "root", &u);
  if (st == HSR_OK) st = add(l, u, llama ? "tok_embeddings.weight" : "wte.weight", V, C);
  if (st == HSR_OK && !llama) st = add(l, u, "wpe.weight", a->ctx ? a->ctx : a->seq, C);
  if (st == HSR_OK) st = add(l, u, llama ? "norm.weight" : "ln_f.weight", C, 0);
  if (st == HSR_OK && !llama) st = add(l, u, "ln_f.bias", C, 0);
  if (st == HSR_OK && llama) st = add(l, u, "output.weight", V, C);
  for (int i = 0; i < a->layers && st == HSR_OK; i++) {
    char n[112], p[48];
    snprintf(n, sizeof n, "layers.%d", i);
    st = rt_layout_add_unit(l, n, &u);
    static const char *const lw[] = {"attention_norm",  "attention.wq",    "attention.wk",
                                     "attention.wv",    "attention.wo",    "ffn_norm",
                                     "feed_forward.w1", "feed_forward.w3", "feed_forward.w2"};
    int64_t lr[][2] = {{C, 0}, {C, C}, {kv, C}, {kv, C}, {C, C}, {C, 0}, {F, C}, {F, C}, {C, F}};
    static const char *const gw[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                                     "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    int64_t gr[][2] = {{C, 0}, {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C}, {C, 0},
                       {C, 0}, {C, 0}, {F, C},     {F, 0},     {C, F}, {C, 0}};
    int n_ = llama ? 9 : 12;
    for (int k = 0; k < n_ && st == HSR_OK; k++) {
      snprintf(p, sizeof p, "%s%s", llama ? lw[k] : gw[k], llama ? ".weight" : "");
      snprintf(n, sizeof n, "layers.%d.%s", i, p);
      st = add(l, u, n, llama ? lr[k][0] : gr[k][0], llama ? lr[k][1] : gr[k][1]);
    }
  }
  if (st == HSR_OK) st = rt_layout_finalize(l, S);
  if (st != HSR_OK) rt_layout_free(l), l = NULL;
  *out = l;
  return st;
}

/* The layout a checkpoint records: its units in order, its tensors in
 * layout order (the manifest lists them so), its alignment and shards. */
static hsr_status saved_layout(const ckpt_handle *c, int outer, rt_layout **out) {
  *out = NULL;
  cJSON *j = cJSON_Parse(ckpt_manifest_text(c));
  const cJSON *lay = j ? cJSON_GetObjectItemCaseSensitive(j, "layout") : NULL, *units, *it;
  const cJSON *al = lay ? cJSON_GetObjectItemCaseSensitive(lay, "align") : NULL;
  units = j ? cJSON_GetObjectItemCaseSensitive(j, "units") : NULL;
  ckpt_info in;
  ckpt_get_info(c, &in);
  rt_layout *l = NULL;
  hsr_status st = cJSON_IsNumber(al) && cJSON_IsArray(units)
                      ? rt_layout_create((size_t)al->valuedouble, &l)
                      : hsr_error(HSR_ERR_INVALID, "checkpoint '%s' records no layout", in.dir);
  if (st == HSR_OK && outer) st = rt_layout_set_subshards(l, in.replicate);
  cJSON_ArrayForEach(it, units) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
    int u;
    if (st == HSR_OK) st = rt_layout_add_unit(l, cJSON_IsString(nm) ? nm->valuestring : "?", &u);
  }
  for (int i = 0; st == HSR_OK && i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info t;
    st = ckpt_tensor_at(c, i, &t);
    if (st == HSR_OK) st = rt_layout_add_param(l, t.unit_index, t.name, t.ndim, t.shape, t.group);
  }
  if (st == HSR_OK) st = rt_layout_finalize(l, in.shard);
  for (int i = 0; st == HSR_OK && i < ckpt_num_tensors(c); i++) { /* the same offsets, or another layout */
    ckpt_tensor_info t;
    rt_param_info p;
    ckpt_tensor_at(c, i, &t);
    st = rt_layout_param(l, i, &p);
    if (st == HSR_OK && p.offset != t.offset)
      st = hsr_error(HSR_ERR_INVALID,
                     "checkpoint '%s': tensor '%s' is at offset %" PRIu64 " of its unit, the rebuilt layout puts it "
                     "at %zu (--outer-shard as at the save?)",
                     in.dir, t.name, t.offset, p.offset);
  }
  cJSON_Delete(j);
  if (st != HSR_OK) rt_layout_free(l), l = NULL;
  *out = l;
  return st;
}

/* Every tensor's ranges in the simulated manifest equal the saved one's:
 * elements, offsets and the rank whose file holds them. */
static hsr_status compare(const ckpt_handle *real, const ckpt_handle *sim, int *ranges) {
  *ranges = 0;
  ckpt_info a, b;
  ckpt_get_info(real, &a);
  ckpt_get_info(sim, &b);
  if (a.num_files != b.num_files || a.num_tensors != b.num_tensors)
    return hsr_error(HSR_ERR_STATE, "the plan has %d data files and %d tensors, the checkpoint %d and %d", b.num_files,
                     b.num_tensors, a.num_files, a.num_tensors);
  static const char *const keys[] = {"start", "count", "master", "m", "v", "rank"};
  for (int i = 0; i < a.num_tensors; i++) {
    ckpt_tensor_info x, y;
    HSR_CHECK(ckpt_tensor_at(real, i, &x));
    HSR_CHECK(ckpt_tensor_at(sim, i, &y));
    if (x.ranges != y.ranges)
      return hsr_error(HSR_ERR_STATE, "tensor '%s': the plan has %d ranges, the checkpoint %d", x.name, y.ranges,
                       x.ranges);
    for (int k = 0; k < x.ranges; k++) {
      ckpt_saved_range p, q;
      HSR_CHECK(ckpt_range_at(real, i, k, &p));
      HSR_CHECK(ckpt_range_at(sim, i, k, &q));
      const uint64_t u[6] = {p.start, p.count, p.off[0], p.off[1], p.off[2], (uint64_t)p.rank};
      const uint64_t v[6] = {q.start, q.count, q.off[0], q.off[1], q.off[2], (uint64_t)q.rank};
      for (int f = 0; f < 6; f++)
        if (u[f] != v[f])
          return hsr_error(HSR_ERR_STATE,
                           "tensor '%s' range %d: %s is %" PRIu64 " in the checkpoint, %" PRIu64 " in the plan", x.name,
                           k, keys[f], u[f], v[f]);
      (*ranges)++;
    }
  }
  return HSR_OK;
}

typedef struct row {
  int rank, load_rank, save_pieces, load_pieces, load_spans, load_files;
  double save_s, load_s;
} row;

/* Best of three: the planner's own time, not the machine's noise. */
#define REPEAT 3

static hsr_status time_save(const rt_layout *l, int R, int S, int outer, int rank, row *r) {
  r->save_s = 1e30;
  for (int k = 0; k < REPEAT; k++) {
    double t0 = cpu_s();
    ckpt_geom *g = NULL;
    ckpt_piece *pc = NULL;
    hsr_status st = ckpt_geom_create(l, R, S, outer, &g);
    if (st == HSR_OK) st = ckpt_geom_pieces(g, rank / S, rank % S, 0, &pc, &r->save_pieces);
    double t = cpu_s() - t0;
    free(pc);
    ckpt_geom_free(g);
    HSR_CHECK(st);
    if (t < r->save_s) r->save_s = t;
  }
  return HSR_OK;
}

static hsr_status time_load(const ckpt_handle *c, const rt_layout *l, int R, int S, int outer, int rank, row *r) {
  r->load_s = 1e30;
  for (int k = 0; k < REPEAT; k++) {
    double t0 = cpu_s();
    ckpt_geom *g = NULL;
    ckpt_load_plan p;
    hsr_status st = ckpt_geom_create(l, R, S, outer, &g);
    /* its part: 1/R of its shard (the replicas exchange the rest) */
    if (st == HSR_OK) st = ckpt_plan_load(c, l, g, rank / S, rank % S, 0, &p);
    double t = cpu_s() - t0;
    ckpt_geom_free(g);
    HSR_CHECK(st);
    if (t < r->load_s) r->load_s = t;
    r->load_pieces = p.pieces, r->load_spans = p.spans, r->load_files = p.files;
  }
  return HSR_OK;
}

typedef struct args {
  int R, S, LR, LS, outer, json, mesh_given;
  const char *arch, *against;
  uint64_t block;
} args;

static int parse(int argc, char **argv, args *a) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"json", no_argument, 0, 'j'},
                                       {"ranks", required_argument, 0, 'n'},
                                       {"shard", required_argument, 0, 's'},
                                       {"replicate", required_argument, 0, 'r'},
                                       {"arch", required_argument, 0, 'a'},
                                       {"outer-shard", required_argument, 0, 'o'},
                                       {"load-ranks", required_argument, 0, 'l'},
                                       {"block", required_argument, 0, 'b'},
                                       {"against", required_argument, 0, 'A'},
                                       {0, 0, 0, 0}};
  *a = (args){1, 1024, 0, 0, 0, 0, 0, "llama3-70b", NULL, (uint64_t)1 << 20};
  long n = 0, s = 0, r = 0, lr = 0;
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
    hsr_status st = HSR_OK;
    size_t sz;
    switch (c) {
    case 'h': usage(stdout); return -1;
    case 'j': a->json = 1; break;
    case 'n': st = parse_long("--ranks", optarg, 1, 1 << 20, &n); break; /* the layout's most shards */
    case 's': st = parse_long("--shard", optarg, 1, 1 << 20, &s); break;
    case 'r': st = parse_long("--replicate", optarg, 1, 1 << 24, &r); break;
    case 'l': st = parse_long("--load-ranks", optarg, 1, 1 << 20, &lr); break;
    case 'a': a->arch = optarg; break;
    case 'A': a->against = optarg; break;
    case 'o':
      if (strcmp(optarg, "optim") && strcmp(optarg, "none"))
        return cli_usage_error(CMD, "--outer-shard: '%s' is not valid (valid: optim, none)", optarg);
      a->outer = !strcmp(optarg, "optim");
      break;
    case 'b':
      st = parse_size("--block", optarg, &sz);
      if (st == HSR_OK && (sz < 64 || sz > ((size_t)1 << 30)))
        return cli_usage_error(CMD, "--block: %zu is out of range (valid: a size from 64 to 1G)", sz);
      a->block = sz;
      break;
    default: return cli_usage_error(CMD, "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error(CMD, "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (a->against && (n || s || r || lr || strcmp(a->arch, "llama3-70b")))
    return cli_usage_error(CMD, "--against DIR takes the model and the mesh from the checkpoint: drop --ranks, "
                                "--shard, --replicate, --load-ranks and --arch");
  if (n && (s || r))
    return cli_usage_error(CMD, "--ranks N is an FSDP mesh: give it or --shard S --replicate R, not both");
  if ((s != 0) != (r != 0)) return cli_usage_error(CMD, "--shard S needs --replicate R and the other way round");
  if (s && s * r > (1L << 24))
    return cli_usage_error(CMD, "--shard %ld x --replicate %ld is over 16777216 ranks", s, r);
  if (n) a->S = (int)n, a->R = 1;
  if (s) a->S = (int)s, a->R = (int)r;
  a->LS = lr ? (int)lr : a->S, a->LR = lr ? 1 : a->R;
  if (a->outer && a->R == 1 && !a->against) cli_warn(CMD, "--outer-shard optim with one replica shards nothing more");
  return 0;
}

static void print_rows(const args *a, const char *model, double params, int W, size_t mbytes, uint64_t ranges,
                       double build_s, double parse_s, const row *rows, int nr) {
  if (a->json) {
    cJSON *o = cJSON_CreateObject(), *ra = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddNumberToObject(o, "params", params);
    cJSON_AddNumberToObject(o, "ranks", W);
    cJSON_AddNumberToObject(o, "replicate", a->R);
    cJSON_AddNumberToObject(o, "shard", a->S);
    cJSON_AddBoolToObject(o, "outer_shard", a->outer);
    cJSON_AddNumberToObject(o, "load_ranks", a->LR * a->LS);
    cJSON_AddNumberToObject(o, "manifest_bytes", (double)mbytes);
    cJSON_AddNumberToObject(o, "manifest_ranges", (double)ranges);
    cJSON_AddNumberToObject(o, "manifest_build_s", build_s);
    cJSON_AddNumberToObject(o, "manifest_parse_s", parse_s);
    for (int i = 0; i < nr; i++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "rank", rows[i].rank);
      cJSON_AddNumberToObject(x, "save_plan_s", rows[i].save_s);
      cJSON_AddNumberToObject(x, "save_pieces", rows[i].save_pieces);
      cJSON_AddNumberToObject(x, "load_rank", rows[i].load_rank);
      cJSON_AddNumberToObject(x, "load_plan_s", rows[i].load_s);
      cJSON_AddNumberToObject(x, "load_pieces", rows[i].load_pieces);
      cJSON_AddNumberToObject(x, "load_spans", rows[i].load_spans);
      cJSON_AddNumberToObject(x, "load_files", rows[i].load_files);
      cJSON_AddItemToArray(ra, x);
    }
    cJSON_AddItemToObject(o, "rows", ra);
    char *t = cJSON_Print(o);
    if (t) printf("%s\n", t);
    free(t);
    cJSON_Delete(o);
    return;
  }
  printf("hsr ckpt plan: %s (%.3g parameters), saved on %d ranks (%d x %d, replicate x shard%s), loaded on %d\n", model,
         params, W, a->R, a->S, a->outer ? ", outer shard" : "", a->LR * a->LS);
  printf("manifest: %zu bytes, %" PRIu64 " ranges; rank 0 assembles it in %.3f s, every rank parses it in %.3f s\n",
         mbytes, ranges, build_s, parse_s);
  printf("%10s %12s %12s %10s %12s %12s %11s %10s\n", "rank", "save plan s", "save pieces", "load rank", "load plan s",
         "load pieces", "load spans", "files read");
  for (int i = 0; i < nr; i++)
    printf("%10d %12.6f %12d %10d %12.6f %12d %11d %10d\n", rows[i].rank, rows[i].save_s, rows[i].save_pieces,
           rows[i].load_rank, rows[i].load_s, rows[i].load_pieces, rows[i].load_spans, rows[i].load_files);
}

static int run_against(const args *a) {
  ckpt_handle *real = NULL, *sim = NULL;
  rt_layout *l = NULL;
  ckpt_geom *g = NULL;
  char *text = NULL;
  size_t len = 0;
  int ranges = 0;
  hsr_status st = ckpt_open(a->against, &real);
  if (st != HSR_OK) return cli_fail(CMD, st);
  ckpt_info in;
  ckpt_get_info(real, &in);
  int outer = a->outer || in.outer_shard; /* version 2 records it; version 1 needs the flag */
  st = saved_layout(real, outer, &l);
  if (st == HSR_OK) st = ckpt_geom_create(l, in.replicate, in.shard, outer, &g);
  if (st == HSR_OK) st = ckpt_sim_manifest(l, g, in.replicate, in.shard, in.block_bytes, &text, &len);
  if (st == HSR_OK) st = ckpt_open_text("(the plan)", text, len, &sim);
  hsr_status cs = st == HSR_OK ? compare(real, sim, &ranges) : st;
  /* and the load on the same mesh, planned against the real manifest: each
   * rank's part from one file, the parts adding up to every saved byte */
  uint64_t lbytes = 0;
  int lfiles = 0;
  for (int r = 0; cs == HSR_OK && r < in.world; r++) {
    ckpt_load_plan p;
    cs = ckpt_plan_load(real, l, g, r / in.shard, r % in.shard, 0, &p);
    lbytes += p.bytes;
    if (p.files > lfiles) lfiles = p.files;
  }
  if (cs == HSR_OK && (lbytes != in.data_bytes || lfiles > 1))
    cs = hsr_error(HSR_ERR_STATE,
                   "loaded on its own mesh, the ranks' parts add up to %" PRIu64 " of its %" PRIu64
                   " bytes, one reads %d files",
                   lbytes, in.data_bytes, lfiles);
  if (cs == HSR_OK) {
    if (a->json) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "checkpoint", in.dir);
      cJSON_AddNumberToObject(o, "ranks", in.world);
      cJSON_AddNumberToObject(o, "replicate", in.replicate);
      cJSON_AddNumberToObject(o, "shard", in.shard);
      cJSON_AddNumberToObject(o, "tensors", in.num_tensors);
      cJSON_AddNumberToObject(o, "ranges", ranges);
      cJSON_AddNumberToObject(o, "data_bytes", (double)in.data_bytes);
      cJSON_AddNumberToObject(o, "load_bytes", (double)lbytes);
      cJSON_AddNumberToObject(o, "load_files_max", lfiles);
      cJSON_AddBoolToObject(o, "same", 1);
      char *t = cJSON_Print(o);
      if (t) printf("%s\n", t);
      free(t);
      cJSON_Delete(o);
    } else
      printf("%s: the planner's save on %d ranks (%d x %d) is the checkpoint's: %d tensors, %d ranges, the same "
             "elements, offsets and ranks; its load there reads each rank's part from one file, %" PRIu64
             " bytes in all\n",
             in.dir, in.world, in.replicate, in.shard, in.num_tensors, ranges, lbytes);
  } else if (st == HSR_OK) {
    fprintf(stderr, "hsr ckpt plan: %s: the plan differs from the checkpoint: %s\n", in.dir, hsr_last_error());
  }
  free(text);
  ckpt_close(sim);
  ckpt_geom_free(g);
  rt_layout_free(l);
  ckpt_close(real);
  if (st != HSR_OK) return cli_fail(CMD, st);
  return cs == HSR_OK ? HSR_EXIT_OK : HSR_EXIT_FAIL;
}

int ckpt_plan_main(int argc, char **argv) {
  args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc < 0 ? HSR_EXIT_OK : rc;
  if (a.against) {
    if (cli_check_ckpt("--against", a.against) != HSR_OK) return cli_usage_error(CMD, "%s", hsr_last_error());
    return run_against(&a);
  }
  tune_arch arch;
  if (tune_arch_preset(a.arch, &arch) != HSR_OK) return cli_usage_error(CMD, "%s", hsr_last_error());
  if (arch.layers < 1 || arch.width < 1)
    return cli_usage_error(CMD, "--arch %s is a family without a shape (valid: gpt2-124m, llama3-8b, llama3-70b)",
                           a.arch);
  if (tune_arch_check(&arch) != HSR_OK) return cli_usage_error(CMD, "%s", hsr_last_error());
  int W = a.R * a.S, LW = a.LR * a.LS;
  rt_layout *l = NULL, *ll = NULL;
  ckpt_geom *g = NULL;
  ckpt_handle *c = NULL;
  char *text = NULL;
  size_t len = 0;
  hsr_status st = model_layout(&arch, a.R, a.S, a.outer, &l);
  if (st == HSR_OK) st = LW == W ? HSR_OK : model_layout(&arch, a.LR, a.LS, 0, &ll);
  const rt_layout *load_l = ll ? ll : l;
  double params = 0, build_s = 0, parse_s = 0;
  for (int i = 0; st == HSR_OK && i < rt_layout_num_params(l); i++) {
    rt_param_info p;
    if (rt_layout_param(l, i, &p) == HSR_OK) params += (double)p.numel;
  }
  /* Before any work: the ranges a parse derives are about one per unit per
   * shard (per rank with the outer shard) plus one per rank and parameter;
   * with the manifest built, printed and parsed here they take about 120
   * bytes each (measured: 0.64 GB at 65,536 FSDP ranks of llama3-70b). */
  uint64_t mem = 0;
  double est = st == HSR_OK ? ((double)(a.outer ? W : a.S) * rt_layout_num_units(l) + W + rt_layout_num_params(l)) : 0;
  if (st == HSR_OK && sys_mem_available(&mem) == HSR_OK && est * 150 > 0.9 * (double)mem) {
    char x[32], y[32];
    sys_bytes_text(est * 150, x, sizeof x), sys_bytes_text((double)mem, y, sizeof y);
    rt_layout_free(l), rt_layout_free(ll);
    return cli_usage_error(
        CMD,
        "%d ranks of %s do not fit in memory: the simulated manifest's %.3g derived ranges need about %s, %s "
        "is available (fewer --ranks, or a smaller --shard with --replicate)",
        W, a.arch, est, x, y);
  }
  /* rank 0's manifest: every rank's pieces, the JSON, printed */
  double t0 = cpu_s();
  if (st == HSR_OK) st = ckpt_geom_create(l, a.R, a.S, a.outer, &g);
  if (st == HSR_OK) st = ckpt_sim_manifest(l, g, a.R, a.S, a.block, &text, &len);
  build_s = cpu_s() - t0;
  t0 = cpu_s();
  if (st == HSR_OK) st = ckpt_open_text("(the plan)", text, len, &c);
  parse_s = cpu_s() - t0;
  uint64_t ranges = 0;
  for (int i = 0; st == HSR_OK && i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info t;
    if (ckpt_tensor_at(c, i, &t) == HSR_OK) ranges += (uint64_t)t.ranges;
  }
  free(text);
  row rows[3];
  int pick[3] = {0, W / 2, W - 1}, nr = 0;
  for (int i = 0; i < 3 && st == HSR_OK; i++) {
    if (i && pick[i] == pick[i - 1]) continue;
    row *r = &rows[nr++];
    memset(r, 0, sizeof *r);
    r->rank = pick[i];
    st = time_save(l, a.R, a.S, a.outer, pick[i], r);
    /* the load's mesh: its rank 0, middle and last rank */
    r->load_rank = i == 0 ? 0 : i == 1 ? LW / 2 : LW - 1;
    if (st == HSR_OK) st = time_load(c, load_l, a.LR, a.LS, ll ? 0 : a.outer, r->load_rank, r);
  }
  if (st == HSR_OK) print_rows(&a, a.arch, params, W, len, ranges, build_s, parse_s, rows, nr);
  ckpt_close(c);
  ckpt_geom_free(g);
  rt_layout_free(l);
  rt_layout_free(ll);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail(CMD, st);
}
