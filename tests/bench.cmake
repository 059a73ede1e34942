# hsr bench <collective> (nccl-tests' binaries), copy, the deprecated coll:
# flag parsing and refusals (exit 2), sizes that do not fit (exit 2), the
# table, groups, the JSON in nccl-tests' schema, exit codes for wrong results
# (3) and below the minimum bandwidth (4), --concurrent, --plot.
set(_x ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh)
set(_hsr $<TARGET_FILE:hsr_cli>)

# Like hsr_add_mpi_test, but checks the exit code and rank 0's output from outside the launcher.
function(hsr_coll_cli_test name code regex np)
  cmake_parse_arguments(T "" "NODES;ENV" "" ${ARGN})
  set(run ${HSR_RUN} --launcher mpirun -n ${np})
  if(T_NODES)
    list(APPEND run --nodes ${T_NODES})
  endif()
  add_test(NAME ${name} COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh ${code} "${regex}" ${run} -- ${T_UNPARSED_ARGUMENTS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 ENVIRONMENT "HSR_BOOT_TIMEOUT=60;${T_ENV}" LABELS "mpi")
endfunction()

# ---- flags: help, names, refusals (no launcher needed) ----
add_test(NAME bench_help COMMAND ${_x} 0 "usage: hsr bench all_gather" ${_hsr} bench all_gather --help)
add_test(NAME bench_list COMMAND ${_x} 0 "reduce_scatter.*reduce_scatter_perf" ${_hsr} bench --help)
add_test(NAME bench_perf_name COMMAND ${_x} 0 "usage: hsr bench all_reduce" ${_hsr} bench all_reduce_perf --help)
add_test(NAME bench_unknown COMMAND ${_x} 2 "unknown benchmark" ${_hsr} bench frob)
foreach(case
    "bad_dtype|valid|all_gather;-d;float7"
    "bad_redop|valid|all_reduce;-o;prod"
    "op_type_gone|unknown option|all_gather;--op_type;sum"
    "rs_max|sum or avg|reduce_scatter;-o;max"
    "bad_z|-z|all_gather;-z;4"
    "bad_a|-a|all_gather;-a;4"
    "bad_I|-I|all_gather;-I;2"
    "bad_T|-T|all_gather;-T;soon"
    "cudagraph|CUDA graphs are not supported|all_gather;-G;1"
    "symmetric|symmetric registration|all_gather;-R;2"
    "threads|one rank per process|all_gather;-t;2"
    "gpus|one rank per process|all_gather;-g;4"
    "run_forever|run forever|all_gather;-N;0"
    "concurrent_one|needs two group kinds|all_gather;--concurrent"
    "group_bad|valid: world, shard|all_gather;--group;node"
    "group_three|at most two|all_gather;--group;shard,replicate,partial"
    "partial_k|needs --partial K|all_gather;--group;partial"
    "partial_div|does not divide|all_gather;--group;partial;--shard;4;--partial;3"
    "b_above_e|larger than -e|all_gather;-b;2M;-e;1M"
    "step_zero|-i must be|all_gather;-i;0"
    "plot_name|FILE.svg|all_gather;--plot;x.png"
    "too_many_sizes|100000 sizes|all_gather;-b;0;-e;1G;-i;1"
    "does_not_fit|does not fit: it needs .* GiB of memory on host .*, .* GiB is available|all_gather;-b;100G;-e;100G"
    "coll_bad_op|valid: all_gather|coll;--op;gather")
  string(REPLACE "|" ";" _c "${case}")
  list(GET _c 0 _n)
  list(GET _c 1 _re)
  list(SUBLIST _c 2 -1 _args)
  add_test(NAME bench_flag_${_n} COMMAND ${_x} 2 "${_re}" ${_hsr} bench ${_args})
endforeach()
add_test(NAME bench_copy_small COMMAND ${_x} 0 "stream copy" ${_hsr} bench copy --size 1M --reps 2)
add_test(NAME bench_copy_too_big COMMAND ${_x} 2 "does not fit" ${_hsr} bench copy --size 200G)
hsr_coll_cli_test(bench_shard_ranks 2 "does not divide the 4 ranks" 4 ${_hsr} bench all_gather --group shard --shard 3)
hsr_coll_cli_test(bench_root_range 2 "-r 5 is not a rank" 2 ${_hsr} bench broadcast -r 5 -b 1K -e 1K)

# ---- runs: the table, groups, checks ----
hsr_coll_cli_test(bench_ag_world 0 "Out of bounds values : 0 OK" 4
                  ${_hsr} bench all_gather -b 4K -e 4M -f 32 -n 2 -w 1 -R 0 -I 1)
hsr_coll_cli_test(bench_ar_bf16_avg 0 "Out of bounds values : 0 OK" 4 NODES 2
                  ${_hsr} bench all_reduce -d bfloat16 -o avg -b 1K -e 1M -f 32 -n 2 -w 1)
hsr_coll_cli_test(bench_ar_max 0 "float +max +-1" 2 ${_hsr} bench all_reduce -o max -b 64K -e 64K -n 2 -w 1)
hsr_coll_cli_test(bench_rs_replicate 0 "group replicate: 2 groups of 2 ranks" 4
                  ${_hsr} bench reduce_scatter --group replicate --shard 2 -b 64K -e 64K -n 2 -w 1)
hsr_coll_cli_test(bench_bcast_partial 0 "group partial: 4 groups of 2 ranks" 8
                  ${_hsr} bench broadcast --group partial --shard 4 --partial 2 -r 1 -b 64K -e 64K -n 2 -w 1)
hsr_coll_cli_test(bench_zero_size 0 "^ +0 +0 +float" 2 ${_hsr} bench all_gather -b 0 -e 0 -n 2 -w 1)
hsr_coll_cli_test(bench_blocking 0 "Blocking Enabled: -z 3" 4 NODES 2
                  ${_hsr} bench reduce_scatter -z 3 -m 2 -b 64K -e 64K -n 3 -w 1 -I 1)
hsr_coll_cli_test(bench_coll_deprecated 0 "hsr bench coll is deprecated: use 'hsr bench all_gather" 2
                  ${_hsr} bench coll --op reduce_scatter --op_type avg -b 64K -e 64K -n 2 -w 1)
# exit codes: wrong results 3 (a fault injected into the check), below the minimum bandwidth 4
hsr_coll_cli_test(bench_exit_wrong 3 "Out of bounds values : [1-9][0-9]* FAILED" 2 ENV HSR_BENCH_CHECK_FAULT=1
                  ${_hsr} bench all_gather -b 64K -e 64K -n 2 -w 1)
hsr_coll_cli_test(bench_exit_min_bw 4 "below the minimum 1e\\+06 GB/s" 2 ENV HSR_BENCH_MIN_BW=1e6
                  ${_hsr} bench all_gather -b 64K -e 64K -n 2 -w 1)
hsr_coll_cli_test(bench_min_bw_ok 0 "Avg bus bandwidth +: [0-9.e+-]+ OK" 2
                  ${_hsr} bench all_gather -b 64K -e 64K -n 2 -w 1 --min-bw 0)
hsr_coll_cli_test(bench_exit_bad_env 2 "HSR_BENCH_MIN_BW" 1 ENV HSR_BENCH_MIN_BW=fast
                  ${_hsr} bench all_gather -b 64K -e 64K -n 2 -w 1)

# ---- JSON: nccl-tests' keys and structure, hsr's description of the run ----
set(_j ${CMAKE_BINARY_DIR}/bench_json)
add_test(NAME bench_json_keys COMMAND sh -c
  "mkdir -p ${_j} && ${HSR_RUN} -n 2 -- ${_hsr} bench all_gather -b 64K -e 256K -n 3 -w 1 -N 2 -a 3 -I 1 -J ${_j}/keys.json >/dev/null && jq -e '
    .version == 3 and (.start_time | type) == \"string\" and (.end_time | type) == \"string\" and (.args | index(\"-N\")) != null
    and (.env | type) == \"array\" and .nccl_version == 0
    and .config.nthreads == 1 and .config.ngpus == 1 and .config.minimum_bytes == 65536 and .config.maximum_bytes == 262144
    and .config.step_factor == 2 and .config.iterations == 3 and .config.warmup_iters == 1 and .config.aggregated_iterations == 1
    and .config.validation == 1 and .config.graph == 0 and .config.blocking_collectives == false and .config.per_iter_timing == true
    and (.config.devices | length) == 2 and (.config.devices[1] | has(\"rank\", \"group\", \"pid\", \"hostname\", \"device\", \"device_hex\", \"device_info\"))
    and (.results | length) == 6
    and all(.results[]; has(\"size\", \"count\", \"type\", \"redop\", \"root\", \"actual_iterations\", \"experiment_name\")
        and (.out_of_place | has(\"time\", \"alg_bw\", \"bus_bw\", \"nwrong\")) and (.in_place | has(\"time\", \"alg_bw\", \"bus_bw\", \"nwrong\"))
        and (.out_of_place_per_iter | has(\"min_us\", \"max_us\", \"avg_us\", \"p50_us\", \"p95_us\", \"p99_us\", \"stdev_us\", \"cv_pct\", \"times_us\", \"per_process_max_times_us\"))
        and (.out_of_place_per_iter.times_us | length) == 3 and (.in_place_per_iter.per_process_max_times_us | length) == 2
        and .out_of_place.bus_bw > 0 and .out_of_place.nwrong == 0 and .type == \"float\" and .redop == \"none\")
    and .results[0].size == 65536 and .results[0].count == 8192 and .results[3].size == 65536 and .results[3].hsr.cycle == 1
    and .out_of_bounds.count == 0 and .out_of_bounds.okay == true
    and .average_bus_bandwidth.bandwidth > 0 and .average_bus_bandwidth.okay == \"unchecked\"
    and .hsr.tool == \"hsr\" and .hsr.collective == \"all_gather\" and .hsr.ranks == 2 and .hsr.time_over_ranks == \"max\"
    and .hsr.groups[0].group == \"world\" and .hsr.groups[0].group_size == 2 and .hsr.emulated_net == null' ${_j}/keys.json")
set_tests_properties(bench_json_keys PROPERTIES TIMEOUT 120 LABELS "mpi")
# two kinds at once on 2 simulated nodes: each group's figures, how it lies on nodes, what crossed them
add_test(NAME bench_json_concurrent COMMAND sh -c
  "mkdir -p ${_j} && ${HSR_RUN} -n 4 --nodes 2 -- ${_hsr} bench all_gather --group shard,replicate --concurrent -b 64K -e 64K -n 3 -w 1 -J ${_j}/conc.json >/dev/null && jq -e '
    .hsr.concurrent == true and .hsr.nodes == 2 and (.hsr.groups | map(.group)) == [\"shard\", \"replicate\"]
    and (.results | length) == 2
    and .results[0].hsr.group == \"shard\" and .results[0].hsr.group_size == 2 and .results[0].hsr.nodes_spanned == 1
    and .results[0].hsr.concurrent_with == [\"replicate\"] and .results[0].hsr.out_of_place.fabric_bytes_per_op == 0
    and .results[1].hsr.group == \"replicate\" and .results[1].hsr.nodes_spanned == 2 and .results[1].hsr.link == \"inter-node\"
    and .results[1].hsr.out_of_place.fabric_bytes_per_op == 65536 and .results[1].hsr.out_of_place.sent_bytes_per_op == 32768
    and all(.results[]; .out_of_place.bus_bw > 0 and .in_place.nwrong == 0)' ${_j}/conc.json")
set_tests_properties(bench_json_concurrent PROPERTIES TIMEOUT 120 LABELS "mpi")
add_test(NAME bench_json_wrong_min_bw COMMAND sh -c
  "mkdir -p ${_j} && HSR_BENCH_CHECK_FAULT=1 ${HSR_RUN} -n 2 -- ${_hsr} bench reduce_scatter -b 64K -e 64K -n 2 -w 1 --min-bw 1e6 -J ${_j}/bad.json >/dev/null; rc=$?; test $rc = 3 && jq -e '.out_of_bounds.okay == false and .out_of_bounds.count > 0 and .average_bus_bandwidth.okay == false and .hsr.min_bus_bw == 1e6' ${_j}/bad.json")
set_tests_properties(bench_json_wrong_min_bw PROPERTIES TIMEOUT 120 LABELS "mpi")
# --plot: an SVG from gnuplot, or (without gnuplot) exit 2 that says so
add_test(NAME bench_plot COMMAND sh -c
  "mkdir -p ${_j} && rm -f ${_j}/p.svg && if command -v gnuplot >/dev/null; then ${HSR_RUN} -n 2 -- ${_hsr} bench all_gather -b 4K -e 64K -f 4 -n 2 -w 1 -N 2 --plot ${_j}/p.svg >/dev/null && grep -q '<svg' ${_j}/p.svg && grep -q 'world (2 ranks, 1 node) cycle 2' ${_j}/p.svg; else ${_x} 2 'needs gnuplot' ${_hsr} bench all_gather --plot ${_j}/p.svg; fi")
set_tests_properties(bench_plot PROPERTIES TIMEOUT 120 LABELS "mpi")
if(TARGET mpi_peer)
  hsr_coll_cli_test(bench_mpi_peer 0 "Out of bounds values : 0 OK" 2
                    $<TARGET_FILE:mpi_peer> reduce_scatter -b 1M -e 1M -n 2 -w 1)
  # the peer is Open MPI's code, not hsr's: its leaks are not ours to report
  set_property(TEST bench_mpi_peer APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
