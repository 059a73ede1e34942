/* runtime/engine/state.h (SHARED with the other rooms of runtime/): what the
 * checkpoint room (runtime/ckpt) may know of an engine and all it may
 * change, so a checkpoint never reads the engine's private struct. Per unit
 * and kind of state: the element range a rank holds, how many ranks hold the
 * same range, and this rank's memory of it; plus installing loaded state.
 * Kinds need not share a range (an outer-sharded master, m and v cover part
 * of a rank's parameter shard), so every caller asks per kind. */
#ifndef HSR_RUNTIME_ENGINE_STATE_H
#define HSR_RUNTIME_ENGINE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"

typedef enum rt_state_kind {
  RT_STATE_MASTER = 0, /* f32 master weights */
  RT_STATE_M,          /* AdamW's first moment (f32) */
  RT_STATE_V,          /* and second moment (f32) */
  RT_STATE_PARAM,      /* the parameters in the param dtype (derived from the master) */
  RT_STATE_KINDS
} rt_state_kind;

/* The engine's configuration and place, read-only (valid while it lives).
 * rep: the replicate group (the ranks that hold a shard alike), on the
 * device's backend. */
typedef struct rt_state_info {
  const hsr_rt_config *cfg;
  const rt_layout *layout;
  const hsr_mesh *mesh;
  hsr_boot *boot;
  hsr_comm *world, *rep;
  int rank, world_size, S, R, K;
  int gpu;        /* the engine runs on a device (cuda, sim): copies go through its streams */
  int host_state; /* the saved kinds (master, m, v) live in host memory: a host run, or a device run with
                     offload optim; a save writes them and a load reads into them directly */
  int64_t step;   /* steps taken */
  int nunits;
} rt_state_info;
void rt_state_info_of(const hsr_rt *rt, rt_state_info *out);

/* Threads: every call here is the training thread's, except
 * rt_state_unit_of, rt_state_range_at and rt_state_fault, which read only
 * what commit fixed (or an atomic counter): a background thread of the
 * checkpoint room may call them while the engine lives. */

/* Unit u: its name, root flag, padded and shard lengths, and its layout
 * parameters in layout order (params[0 .. nparams)). */
typedef struct rt_state_unit {
  const char *name;
  int is_root;
  size_t len, shard_len;
  const int *params;
  int nparams;
} rt_state_unit;
hsr_status rt_state_unit_of(const hsr_rt *rt, int u, rt_state_unit *out);

/* Kind k of unit u as the rank at mesh coordinates (rep, sh) holds it:
 * elements [lo, lo + n) of the unit's flat buffer, held alike by `parts`
 * ranks of which this one is the part-th (0-based). */
typedef struct rt_state_range {
  size_t lo, n;
  int part, parts;
  hsr_dtype dtype;
} rt_state_range;
hsr_status rt_state_range_at(const hsr_rt *rt, int u, rt_state_kind k, int rep, int sh, rt_state_range *out);
/* This rank's memory of that range (host or device: rt_state_info.gpu). */
void *rt_state_ptr(hsr_rt *rt, int u, rt_state_kind k);

/* Between steps: no window open, no backward pass or reduction pending;
 * need_sharded: and no gather in flight (what: "save" or "load"). */
hsr_status rt_state_idle(hsr_rt *rt, const char *what, int need_sharded);
/* Device: every queued update has reached the state (before it is read). */
hsr_status rt_state_quiesce(hsr_rt *rt);
/* A copy between the state and host memory, queued on the engine's compute
 * stream; rt_state_sync waits for what was queued there. */
hsr_status rt_state_copy(hsr_rt *rt, void *dst, const void *src, size_t bytes);
hsr_status rt_state_sync(hsr_rt *rt);
/* After a load wrote the master weights and moments of this rank: its
 * parameters derived from the master, completed. */
hsr_status rt_state_installed(hsr_rt *rt);
/* Then (collective over the shard group) the strategies that keep full
 * parameters gather them; their calls, and those of the load's exchange
 * before, do not count toward the next step. */
hsr_status rt_state_regather(hsr_rt *rt);
/* The optimizer's step count after a load. */
void rt_state_set_step(hsr_rt *rt, int64_t step);
/* 1 while the state is only the engine's initialization: no step taken,
 * nothing loaded, no gradient pending. */
int rt_state_fresh(const hsr_rt *rt);
/* A load writing in place marks the state torn while it runs: until it is
 * cleared (a load that succeeds), every use but another load is refused. */
void rt_state_torn(hsr_rt *rt, int torn);
/* hsr_rt_commit for a load, which a torn state does not refuse. */
hsr_status rt_state_commit(hsr_rt *rt);

/* The ledger and the fault hook: the checkpoint phase begins; HSR_FAULT at
 * `phase`. */
void rt_state_phase(hsr_rt *rt);
void rt_state_fault(hsr_rt *rt, const char *phase);
/* Host staging memory through the device layer (pinned on a GPU), in the
 * ledger as ckpt_staging. */
hsr_status rt_state_host_alloc(hsr_rt *rt, size_t bytes, void **p);
void rt_state_host_free(hsr_rt *rt, void *p, size_t bytes);

/* The checkpoint room's own object on this engine (the background saver:
 * its thread, communicator and staging), kept until hsr_rt_destroy, which
 * calls fini(obj) before it frees anything else. One at a time. */
void *rt_state_attached(const hsr_rt *rt);
void rt_state_attach(hsr_rt *rt, void *obj, void (*fini)(void *obj));

#endif
