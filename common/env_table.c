/* Every HSR_* environment variable hsr reads, in one table (common/env.h).
 * A new variable gets a row here and is read with an env_get_* reader;
 * docs/environment.md's table is `hsr env --markdown` (tests/env_registry.sh). */
#include "common/env.h"

#define K 1024.0
#define M (1024.0 * 1024.0)
#define G (1024.0 * 1024.0 * 1024.0)
#define T (1024.0 * G)

static const env_info table[] = {
    /* ---- the library ---- */
    {"HSR_LOG", HSR_ENV_CHOICE, 0, 0, "error|warn|info|debug", 1, "warn", "common",
     "log level; lines go to stderr prefixed `[rank N]`"},
    {"HSR_CRASH_REPORT", HSR_ENV_BOOL, 0, 0, NULL, 1, "1", "common",
     "on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) left at its default action, print the rank, the "
     "thread, and the file and offset of the instruction, the fault address, the caller and each frame, then end "
     "with the signal's default action (its exit status, a core where the limit allows); 0: no handler"},
    {"HSR_SIM_NODES", HSR_ENV_INT, 1, 4096, NULL, 1, "1", "launch",
     "split each host's ranks into N simulated nodes (contiguous local ranks); must divide the ranks per host; "
     "every rank alike (the bootstrap checks)"},
    {"HSR_BOOT_TIMEOUT", HSR_ENV_INT, 1, 86400, NULL, 300, "300", "launch",
     "seconds a bootstrap exchange (allgather, bcast, barrier) waits for every rank; under srun, with "
     "HSR_COMM_TIMEOUT, it also bounds how long a dead rank's PMIx connection is held (docs/faults.md)"},
    {"HSR_COMM_TIMEOUT", HSR_ENV_FLOAT, 1, 1e9, NULL, 300, "300", "collectives",
     "seconds without progress before a wait fails with HSR_ERR_TIMEOUT naming the communicator, the operation and "
     "the rank waited for; at least 1 (below, a rank descheduled on a loaded host, or computing between two "
     "collectives, would be accused)"},
    {"HSR_STOP_TIMEOUT", HSR_ENV_FLOAT, 0, 1e9, NULL, 2, "2", "collectives",
     "seconds before a rank whose process does not run is named, without waiting for HSR_COMM_TIMEOUT: a rank of "
     "this host that an operation waits for, seen stopped (SIGSTOP, process state T) all that time while the waiting "
     "rank ran; across replica groups, a member that answered no heartbeat ping for that long (a thread of its own "
     "answers, so a member that computes or waits is never named by it; pings go every 0.25 s to the member an "
     "operation has waited 0.5 s for). A debugger's stop and a silent rank of another host wait for HSR_COMM_TIMEOUT; "
     "0: HSR_COMM_TIMEOUT only"},
    {"HSR_PROGRESS", HSR_ENV_CHOICE, 0, 0, "thread|inline", 0, "thread", "collectives",
     "`thread`: a progress thread advances operations while the caller computes; `inline`: only inside "
     "req_test/hsr_req_wait"},
    {"HSR_ALGO_ALLREDUCE", HSR_ENV_CHOICE, 0, 0, "auto|ring|rd", 0, "auto", "collectives",
     "cross-node all-reduce: `ring` (reduce-scatter + all-gather), `rd` (recursive doubling, power-of-two groups), "
     "`auto` (rd up to HSR_ALGO_ALLREDUCE_RD_MAX); every rank alike (the bootstrap checks)"},
    {"HSR_ALGO_ALLREDUCE_RD_MAX", HSR_ENV_SIZE, 0, G, NULL, 64 * K, "64K", "collectives",
     "largest all-reduce (bytes) that `auto` sends by recursive doubling; every rank alike (the bootstrap checks)"},
    {"HSR_UCX_CHUNK", HSR_ENV_SIZE, 4 * K, G, NULL, M, "1M", "collectives",
     "cross-node rings are pipelined in chunks of this many bytes per block (at most 1000 chunks); every rank "
     "alike (the bootstrap checks)"},
    {"HSR_ALGO_TWO_LEVEL", HSR_ENV_CHOICE, 0, 0, "auto|off", 0, "auto", "collectives",
     "`auto`: groups spanning nodes with the same member count per node run two-level; `off`: flat UCX rings; "
     "every rank alike (the bootstrap checks)"},
    {"HSR_UCX_PEER_ERRORS", HSR_ENV_CHOICE, 0, 0, "on|off", 0, "on", "collectives",
     "`on`: UCX endpoints report a peer's death as an error hsr names (between simulated nodes of one host UCX then "
     "uses tcp instead of shared memory and CMA); `off`: the faster transports, for benchmarking on one host; every "
     "rank alike (the bootstrap checks)"},
    {"HSR_EMULATE_NET", HSR_ENV_RATE, 0, 0, NULL, 0, "unset", "collectives",
     "set by `hsr-run --emulate-net RATE` for the ranks: hsr's UCX context uses TCP on loopback only"},
    {"HSR_EMULATE_NET_NS", HSR_ENV_NAME, 0, 0, NULL, 0, "unset", "collectives",
     "set by `hsr-run --emulate-net`: the run's network namespace, which an hsr program started outside it (srun) "
     "enters after joining the PMIx job"},
    {"HSR_TOPO_XML", HSR_ENV_FILE, 0, 0, NULL, 0, "unset (live hwloc)", "topology",
     "describe this host from an hwloc XML file instead (as `--xml`); with simulated nodes every node reads it"},
    {"HSR_TOPO_DUMP_DIR", HSR_ENV_WDIR, 0, 0, NULL, 0, "unset (/tmp, files removed)", "hsr topo",
     "folder for the NCCL topology dumps of `hsr topo --compare-nccl`; when set, the dumps are kept"},
    {"HSR_SIM_DELAY", HSR_ENV_DELAY, 0, 1000000, NULL, 0, "unset (no delay)", "kernels",
     "sim device: sleep a seeded random 0 to MAX_US microseconds before each queued operation, so an order that "
     "holds only because a stream was fast breaks; rank 0 prints the seed (the time when not given), which "
     "repeats the run's delays on every rank"},
    {"HSR_SIM_CHECK", HSR_ENV_BOOL, 0, 0, NULL, 0, "0", "kernels",
     "sim device: check every queued operation's reads and writes against the streams' order (vector clocks); a "
     "race is reported with both operations, their streams and the buffer, and fails the run"},
    {"HSR_SIM_DROP", HSR_ENV_CHOICE, 0, 0, "none|gather_wait|reduce_wait|pool_reuse|optim_wait|offload_wait", 0, "none",
     "runtime",
     "test hook of the sim device (refused on others): the engine leaves out one ordering, so that the stream-order "
     "check and the equivalence tests show they see it: `gather_wait` compute does not wait for a unit's gather, "
     "`reduce_wait` the reduce stream does not wait for the gradient, `pool_reuse` a recycled buffer's first stream "
     "does not wait for its last users, `optim_wait` the optimizer does not wait for the reduce stream, `offload_wait` "
     "(--offload optim) the host "
     "optimizer does not wait for the gradient's copy down"},
    {"HSR_OFFLOAD_THREADS", HSR_ENV_INT, 1, 64, NULL, 2, "2", "runtime",
     "--offload optim: threads (the training thread included) that split each unit's host AdamW update; the "
     "result is bitwise the same for any count"},
    {"HSR_POISON", HSR_ENV_BOOL, 0, 0, NULL, -1, "1 in debug builds, else 0", "runtime",
     "fill released gathered buffers with NaN so that a stale view shows up"},
    {"HSR_CKPT_BUFFER", HSR_ENV_SIZE, 4 * K, T, NULL, G, "1G", "runtime",
     "checkpoint staging a rank may hold: a save writes through at most 8 MiB of it; a held load (HSR_CKPT_IN_PLACE) "
     "holds its part (1/R of its shard) and an 8 MiB read window, and reads twice (verify, then its whole shard "
     "again) when they do not fit; a load in place holds the window only"},
    {"HSR_CKPT_IN_PLACE", HSR_ENV_CHOICE, 0, 0, "auto|on|off", 0, "auto", "runtime",
     "where a load on host memory reads: `auto` straight into the engine when its state is only its "
     "initialization (no step taken, nothing loaded), else into a held copy installed once every rank has "
     "verified; `on` always in place (a failed load then leaves the state torn: only another load may use it); "
     "`off` always held"},
    {"HSR_CKPT_EXCHANGE", HSR_ENV_CHOICE, 0, 0, "on|off", 0, "on", "runtime",
     "a load's replicas of a shard: `on` split the reads and all-gather what they read over the replicate group; "
     "`off` each reads its whole shard (the disk, or one host's page cache, serves each byte R times)"},
    {"HSR_CKPT_BLOCK", HSR_ENV_SIZE, 64, G, NULL, M, "1M", "runtime",
     "bytes per crc32 block of a new checkpoint (a load reads whole blocks)"},
    {"HSR_FT_DEVICE_REDUCE", HSR_ENV_CHOICE, 0, 0, "host|nccl", 0, "host", "ft",
     "replica groups on `--device cuda`: `host` averages the gradient shards across groups in host memory over UCX "
     "(staged from the device); `nccl` keeps them in device memory on an NCCL communicator of the groups' rank i, "
     "shrunk with ncclCommShrink when groups are dropped and made anew when one joins (the groups are named over UCX "
     "after a failure); every group alike. `nccl` has not run on GPUs yet"},
    {"HSR_FT_TOKEN", HSR_ENV_SECRET, 0, 0, NULL, 0, "unset", "ft",
     "the shared token of a fault-tolerant run: `hsr coordinator` admits only replica groups that present it (etcd "
     "authentication), and `hsr train --coordinator` needs it (docs/fault-tolerance.md)"},
    /* ---- commands ---- */
    {"HSR_WRAP_MIN_BYTES", HSR_ENV_SIZE, 0, G, NULL, 64 * K, "64K", "hsr train",
     "the wrap diagnostic: a gathered unit smaller than this is reported as latency-bound"},
    {"HSR_BENCH_MIN_BW", HSR_ENV_FLOAT, 0, 1e9, NULL, -1, "unset", "hsr bench",
     "`hsr bench <collective>`: exit 4 when the average bus bandwidth (GB/s) is below this (as `--min-bw`)"},
    /* ---- hsr-run ---- */
    {"HSR_RANKS", HSR_ENV_INT, 1, 999999999, NULL, 1, "1", "hsr-run", "the default `-n` (at most HSR_RUN_MAX_RANKS)"},
    {"HSR_RUN_MAX_RANKS", HSR_ENV_INT, 1, 999999999, NULL, 4096, "4096", "hsr-run", "the largest `-n` accepted"},
    {"HSR_LAUNCHER", HSR_ENV_CHOICE, 0, 0, "mpirun|srun", 0, "auto", "hsr-run",
     "the default `--launcher` (auto: srun inside a Slurm allocation, else mpirun)"},
    {"HSR_MPIRUN_ARGS", HSR_ENV_ARGS, 0, 0, NULL, 0, "unset", "hsr-run", "extra arguments passed to mpirun"},
    {"HSR_SRUN_ARGS", HSR_ENV_ARGS, 0, 0, NULL, 0, "unset", "hsr-run", "extra arguments passed to srun"},
    /* ---- scripts ---- */
    {"HSR_BUILD_DIR", HSR_ENV_PATH, 0, 0, NULL, 0, "build", "scripts/setup.sh",
     "build directory of setup.sh and regen_golden.sh"},
    {"HSR_BUILD_TYPE", HSR_ENV_CHOICE, 0, 0, "Debug|Release|RelWithDebInfo|MinSizeRel", 2, "RelWithDebInfo",
     "scripts/setup.sh", "CMAKE_BUILD_TYPE of setup.sh"},
    {"HSR_WITH_CUDA", HSR_ENV_CHOICE, 0, 0, "AUTO|ON|OFF", 0, "AUTO", "scripts/setup.sh",
     "setup.sh's HSR_WITH_CUDA: ON requires nvcc + NCCL, OFF skips them"},
    {"HSR_WERROR", HSR_ENV_CHOICE, 0, 0, "ON|OFF", 1, "OFF", "scripts/setup.sh",
     "setup.sh's HSR_WERROR: ON treats compiler warnings as errors (.ci/run and development)"},
    {"HSR_JOBS", HSR_ENV_INT, 1, 4096, NULL, 0, "nproc", "scripts/setup.sh",
     "parallel build (and sanitize.sh test) jobs"},
    {"HSR_BUILD", HSR_ENV_DIR, 0, 0, NULL, 0, "<src>/build", "bench/train_vs_torch.sh",
     "the build tree train_vs_torch.sh runs"},
    {"HSR_GPU_BUILD_DIR", HSR_ENV_PATH, 0, 0, NULL, 0, "<src>/build-gpu", "bench/gpu_check.sh",
     "gpu_check.sh's build directory"},
    {"HSR_GPU_CHECK_JOBS", HSR_ENV_INT, 1, 4096, NULL, 0, "nproc", "bench/gpu_check.sh",
     "gpu_check.sh's parallel build jobs"},
    {"HSR_GPU_CHECK_TRAIN_ARGS", HSR_ENV_ARGS, 0, 0, NULL, 0, "--device cuda --steps 5", "bench/gpu_check.sh",
     "flags gpu_check.sh passes to `hsr train`"},
    {"HSR_KBENCH_ARGS", HSR_ENV_ARGS, 0, 0, NULL, 0, "unset", "bench/gpu_check.sh",
     "extra flags gpu_check.sh passes to `hsr-kbench`"},
    {"HSR_MUTATE_DIR", HSR_ENV_PATH, 0, 0, NULL, 0, "a new one under $TMPDIR", "scripts/mutate.sh",
     "the mutation check's scratch directory"},
    {"HSR_MUTATE_TIMEOUT", HSR_ENV_INT, 1, 86400, NULL, 120, "120", "scripts/mutate.sh",
     "seconds per test of the mutation check"},
    /* ---- test hooks ---- */
    {"HSR_FAULT", HSR_ENV_ARGS, 0, 0, NULL, 0, "unset", "common",
     "test hook of the fault matrix: `RANK:PHASE:N:ACTION` makes world rank RANK, at its Nth `all_gather`, "
     "`reduce_scatter`, `all_reduce`, `broadcast` or `barrier` (host collectives, counted when posted), `step` "
     "(optimizer step), `ckpt_save` (after its checkpoint data, before the ranks agree), `ckpt_done` (once a "
     "background save has committed), `boot` (a PMIx exchange of the bootstrap layer: the first is the bootstrap's "
     "own), `final` (hsr train's final barrier), `teardown` (the collectives' teardown), `ft_allreduce` (a replica "
     "group's cross-group all-reduce), `ft_vote` (before its commit exchange and vote) or `ft_heal` (each unit a "
     "healer sends or a healed group receives), `kill` (SIGKILL) or `stop` (SIGSTOP) itself, `killnode` (SIGKILL "
     "to every rank of its node at once; collective phases), `jump` (a call through a pointer to data: a crash as "
     "a stale callback makes one), or `sleep:S` seconds and go on (docs/faults.md)"},
    {"HSR_BENCH_CHECK_FAULT", HSR_ENV_BOOL, 0, 0, NULL, 0, "0", "hsr bench",
     "test hook: `1` makes the checks count one element wrong on rank 0 of each group (exit code 3)"},
    {"HSR_MEM_AVAILABLE", HSR_ENV_SIZE, 0, 1024 * T, NULL, 0, "unset (MemAvailable)", "common",
     "test hook: the memory the size checks (hsr train, eval, bench, ckpt bench) take as available on each host, "
     "instead of /proc/meminfo's MemAvailable"},
    {"HSR_CKPT_FAULT", HSR_ENV_STAGE, 0, 0, "after_data|before_manifest_rename|before_latest", 0, "unset", "runtime",
     "test hook: rank 0 exits (code 3) at that stage of a save (optionally only the save of step STEP)"},
    {"HSR_CKPT_IOV", HSR_ENV_INT, 2, 1024, NULL, 1024, "1024", "runtime",
     "test hook: the most pieces one read of a load in place scatters (IOV_MAX is 1024); a window that needs more "
     "ends at its last whole block, and a block that needs more goes through the read window"},
    {"HSR_CKPT_DELAY", HSR_ENV_FLOAT, 0, 3600, NULL, 0, "0", "runtime",
     "test hook: an asynchronous save's writer waits this many seconds before it writes its data file, so that a "
     "test can change the engine's state meanwhile"},
};

int env_count(void) { return (int)(sizeof table / sizeof table[0]); }

const env_info *env_at(int i) { return i >= 0 && i < env_count() ? &table[i] : NULL; }
