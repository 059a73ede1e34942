# hsr tune: the cost model, ledger, timeline, fit and recommendation on
# hand-computed cases (test_tune); the model's bytes against the
# communicators' counters in a real run (tune_bytes_4); the command: bad
# inputs (exit 2), the table, JSON, emitters, the calculator, topologies from
# files and the live job, --plot, a short --validate.
hsr_add_unit(test_tune test_tune.c)
# the activation model of hsr's GPT example equal to the example's own count
hsr_add_unit(test_tune_act test_tune_act.c ${CMAKE_SOURCE_DIR}/examples/gpt.c ${CMAKE_SOURCE_DIR}/examples/gpt_data.c
             ${CMAKE_SOURCE_DIR}/examples/llama.c)
hsr_add_program(mr_tune mr_tune.c)
# 4 ranks as 2 nodes of 2: two-level shard groups (S = 4), node-local ones
# (S = 2) with replicate groups across, partial groups in the node; a ring
# all-reduce above the recursive-doubling threshold (elems=65536: 256 KiB).
hsr_add_mpi_test(NAME tune_bytes_4 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_tune>
  strategy=fsdp,S=4,reshard=full,prefetch=1,pstep=1
  strategy=fsdp,S=4,reshard=partial:2,prefetch=0,last=1
  strategy=fsdp,S=4,reshard=none,prefetch=2,pdt=bf16,rdt=bf16
  strategy=hybrid,S=2,reshard=full,prefetch=1
  strategy=hybrid,S=2,reshard=partial:2,prefetch=1,micro=2,sync=rs_only
  strategy=hybrid,S=2,reshard=full,micro=2,sync=none
  strategy=zero1,S=4
  strategy=zero2,S=2,R=2
  strategy=ddp,elems=65536
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1
  strategy=hybrid,S=2,outer=optim,reshard=partial:2,prefetch=1,micro=2,sync=rs_only,pdt=bf16
  strategy=hybrid,S=1,R=4,outer=optim,elems=65536)

set(_x ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh)
set(_hsr $<TARGET_FILE:hsr_cli>)
set(_d ${CMAKE_SOURCE_DIR}/tests/data)
set(_big --params 7e9 --units 32 --world 64 --gpus-per-node 8 --mem-budget 80G --param-dtype bf16)
string(REPLACE ";" " " _bigs "${_big}") # inside sh -c strings
function(hsr_tune_cli name code regex)
  add_test(NAME ${name} COMMAND ${_x} ${code} "${regex}" ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
endfunction()
hsr_tune_cli(tune_help 0 "usage: hsr tune" ${_hsr} tune --help)
hsr_tune_cli(tune_bad_params 2 "--params: 'seven' is not a number" ${_hsr} tune --params seven --world 8 --gpus-per-node 8)
hsr_tune_cli(tune_bad_size 2 "--mem-budget: '80X' has an unknown suffix" ${_hsr} tune ${_big} --mem-budget 80X)
hsr_tune_cli(tune_no_model 2 "give the model" ${_hsr} tune --world 8 --gpus-per-node 8)
hsr_tune_cli(tune_bad_shard 2 "shard S=3: rule 'S divides the world' broken .*valid S: 1, 2, 4, 8, 16, 32, 64"
             ${_hsr} tune ${_big} --shard 3)
hsr_tune_cli(tune_bad_world 2 "--world 60 is not a multiple of --gpus-per-node 8" ${_hsr} tune --params 1e9 --world 60
             --gpus-per-node 8)
hsr_tune_cli(tune_budget 2 "no layout fits --mem-budget 1.00 GiB: the smallest needs [0-9.]+ GiB more per rank"
             ${_hsr} tune --params 7e9 --world 8 --gpus-per-node 8 --mem-budget 1G)
hsr_tune_cli(tune_bad_emit 2 "valid: fsdp2\\|torchtitan\\|deepspeed" ${_hsr} tune ${_big} --emit megatron)
hsr_tune_cli(tune_two_topos 2 "--gpus-per-node goes without --xml" ${_hsr} tune --params 1e9 --xml ${_d}/dgx-h100-like.xml
             --gpus-per-node 8)
hsr_tune_cli(tune_two_computes 2 "give one of --compute-ms-per-unit, --tflops" ${_hsr} tune ${_big} --tflops 400
             --compute-ms-per-unit 3)
hsr_tune_cli(tune_validate_alone 2 "--validate runs under a launcher" ${_hsr} tune --validate)
hsr_tune_cli(tune_no_topology 2 "no topology: give --world W with --gpus-per-node G" ${_hsr} tune --params 1e9)
hsr_tune_cli(tune_bad_bench 2 "--bench '/nonexistent.json': No such file" ${_hsr} tune ${_big} --bench /nonexistent.json)
# the table: defaults labelled, ddp rejected over 80 GiB with the amount, the explanation
hsr_tune_cli(tune_table 0 "ddp 64x1: over the memory budget: needs 118.98 GiB .* 38.98 GiB over 80.00 GiB"
             ${_hsr} tune ${_big})
hsr_tune_cli(tune_explain 0 "recommended:.*all-gathers: .* inside one node \\(NVLink\\).*runner-up"
             sh -c "${_hsr} tune ${_bigs} | tr '\\n' ' '")
hsr_tune_cli(tune_defaults 0 "default: H100 NVLink all-gather busbw ~360 GB/s" ${_hsr} tune ${_big})
hsr_tune_cli(tune_json 0 "^\\{\"tool\":\"hsr tune\",\"world\":64.*\"defaults_used\":true.*\"candidates\":\\[\\{\"rank\":1,\"label\":.*\"outer_shard\":\"none\".*\"fabric_bytes_per_step_all_ranks\":.*\"outer_shard\":\"optim\".*\"chosen\":\\{"
             ${_hsr} tune ${_big} --json)
hsr_tune_cli(tune_emit_fsdp2 0 "init_device_mesh\\(\"cuda\", \\(8, 8\\), mesh_dim_names=\\(\"replicate\", \"shard\"\\)\\)"
             ${_hsr} tune ${_big} --emit fsdp2)
hsr_tune_cli(tune_emit_titan 0 "data_parallel_replicate_degree = 8" ${_hsr} tune ${_big} --emit torchtitan)
hsr_tune_cli(tune_emit_ds 0 "\"zero_optimization\": \\{" ${_hsr} tune ${_big} --emit deepspeed)
# the outer shard: a budget that only it lets the 8 x 8 hybrid fit; the trade said; the emitters say
# what FSDP2 and torchtitan lack (pytorch#148257) and what DeepSpeed has nearest
hsr_tune_cli(tune_explain_outer 0 "recommended:.*hybrid 8x8 full p1 outer:optim.*outer-shard optim vs none: -[0-9.]+ GiB persistent per rank.*all-gathered over the replicate group"
             sh -c "${_hsr} tune ${_bigs} --mem-budget 9G | tr '\\n' ' '")
hsr_tune_cli(tune_emit_outer 0 "pytorch#148257" ${_hsr} tune ${_big} --mem-budget 9G --emit fsdp2)
hsr_tune_cli(tune_emit_outer_ds 0 "outer-shard optim .* has no DeepSpeed form" ${_hsr} tune ${_big} --mem-budget 9G
             --emit deepspeed)
hsr_tune_cli(tune_only_outer 0 "rank  layout.*   1  hybrid [0-9]+x[0-9]+ [a-z:0-9]+ p[0-9] outer:optim"
             sh -c "${_hsr} tune ${_bigs} --outer-shard optim | tr '\\n' ' '")
hsr_tune_cli(tune_16k 0 "16384 ranks on 2048 nodes.*layouts evaluated in" sh -c
             "${_hsr} tune --params 7e9 --units 32 --world 16384 --gpus-per-node 8 --top 1 | tr '\\n' ' '")
# the calculator: hsr train's 16/S (FSDP2's: the master is the parameter shard), bf16 parameters 16/S
# too (the gathers cast the master), zero1 4 + 16/S; the outer shard at S = R = 8, bf16: 0.5 bytes
hsr_tune_cli(tune_calc 0 "persistent .* = 16/S with S = 8" ${_hsr} tune --params 1.6e7 --units 4 --shard 8)
hsr_tune_cli(tune_calc_bf16 0 "= 16/S with S = 8" ${_hsr} tune --params 1.6e7 --units 4 --shard 8 --param-dtype bf16)
hsr_tune_cli(tune_calc_outer 0 "persistent .* 0.5000  = 2/S \\+ 16/\\(S R\\) with S = 8, R = 8" ${_hsr} tune --params 7e9
             --units 32 --shard 8 --replicate 8 --param-dtype bf16 --outer-shard optim)
hsr_tune_cli(tune_calc_outer_fsdp 2 "--outer-shard optim splits the optimizer state over the replicas of hybrid"
             ${_hsr} tune --params 1.6e7 --shard 8 --outer-shard optim)
hsr_tune_cli(tune_bad_outer 2 "outer-shard: .params. is not valid .valid: none\\|optim" ${_hsr} tune ${_big} --outer-shard params)
hsr_tune_cli(tune_calc_zero1 0 "= 4 \\+ 16/S with S = 4" ${_hsr} tune --params 1.6e7 --units 4 --shard 4
             --strategy zero1)
hsr_tune_cli(tune_calc_partial 2 "partial:3: K must divide the shard size 8" ${_hsr} tune --params 1.6e7 --shard 8
             --reshard partial:3)
# topologies from files: hwloc per node, NCCL's format
hsr_tune_cli(tune_xml 0 "16 ranks on 2 nodes .*one NVSwitch domain" ${_hsr} tune --params 1e9 --units 16
             --xml ${_d}/dgx-h100-like.xml --nodes 2)
hsr_tune_cli(tune_nccl_xml 0 "ranks on 2 nodes" ${_hsr} tune --params 1e9 --units 16
             --nccl-xml ${_d}/nccl/dgx-h100-like.xml --nodes 2)
# --plot: an SVG from gnuplot, or (without gnuplot) exit 2 that says so
set(_j ${CMAKE_BINARY_DIR}/tune_test)
add_test(NAME tune_plot COMMAND sh -c
  "mkdir -p ${_j} && rm -f ${_j}/t.svg && if command -v gnuplot >/dev/null; then ${_hsr} tune ${_bigs} --plot ${_j}/t.svg >/dev/null && grep -q '<svg' ${_j}/t.svg && grep -q 'exposed communication, predicted' ${_j}/t.svg; else ${_x} 2 'needs gnuplot' ${_hsr} tune ${_bigs} --plot ${_j}/t.svg; fi")
set_tests_properties(tune_plot PROPERTIES TIMEOUT 60)
# Under a launcher, rank 0's output checked from outside it.
function(hsr_tune_mpi_cli name code regex np timeout)
  add_test(NAME ${name} COMMAND ${_x} ${code} "${regex}" ${HSR_RUN} --launcher mpirun -n ${np} --nodes 2 -- ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60" ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
endfunction()
# the live job; a bench file fitted (cross-node rows labelled with the file)
hsr_tune_mpi_cli(tune_live_4 0 "this job: 4 ranks on 2 nodes" 4 60 ${_hsr} tune --params 1e8 --units 8 --top 3)
add_test(NAME tune_bench_fit COMMAND sh -c
  "mkdir -p ${_j} && ${HSR_RUN} --launcher mpirun -n 4 --nodes 2 -- ${_hsr} bench all_gather -b 64K -e 1M -f 4 -n 3 -w 1 --group shard,replicate --shard 2 -J ${_j}/ag.json >/dev/null && ${_x} 0 'cost cross-node all_gather: .* \\(fit: [0-9]+ rows of ag.json' ${_hsr} tune --params 1e8 --units 8 --world 4 --nodes 2 --hw host --bench ${_j}/ag.json --top 2")
set_tests_properties(tune_bench_fit PROPERTIES TIMEOUT 120 LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60" ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
# --validate end to end, small: calibration, probes, one top and one bad layout
# (and its temporary bench files removed: nothing left in TMPDIR)
add_test(NAME tune_validate_4 COMMAND ${_x} 0 "# recommended .* measured .* fastest measured .* slower"
         ${CMAKE_SOURCE_DIR}/tests/leaves_nothing.sh ${HSR_RUN} --launcher mpirun -n 4 --nodes 2 -- ${_hsr} tune
         --validate --units 4 --unit-size 256K --compute-ms-per-unit 1 --validate-steps 1 --validate-top 1
         --validate-bad 1)
set_tests_properties(tune_validate_4 PROPERTIES TIMEOUT 240 LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60"
                     ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
# The memory checks of hsr train and hsr bench step budget by the peak: a
# budget (HSR_MEM_AVAILABLE) just below a run's measured peak is refused.
add_test(NAME size_checks COMMAND ${CMAKE_SOURCE_DIR}/tests/size_checks.sh ${CMAKE_BINARY_DIR})
set_tests_properties(size_checks PROPERTIES TIMEOUT 300 LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60;OPENBLAS_NUM_THREADS=1"
                     ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
# --validate --compute wait --json on 4 ranks as 2 nodes: the JSON's schema, every figure present and finite
add_test(NAME tune_validate_json COMMAND ${CMAKE_SOURCE_DIR}/tests/tune_validate_json.sh ${HSR_RUN} ${_hsr})
set_tests_properties(tune_validate_json PROPERTIES TIMEOUT 300 LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60"
                     ENVIRONMENT_MODIFICATION "HSR_TOPO_XML=unset:")
# The model's shape: activations per recompute policy, recompute searched with
# the layouts, --hw bounding memory by the GPU less the reserve. The 70B job
# on 256 H200s fits 141 GiB less the reserve (131.95 GiB): with parameters
# alone (activations not counted, and said so), and with Llama-3 70B's shape,
# where only full recompute fits and the explanation says so.
set(_fit "recommended: +[^(]+: step [0-9.]+ ms \\([^)]+\\), peak ([0-9]|[0-9][0-9]|1[0-2][0-9]|13[01])\\.[0-9][0-9] GiB per rank")
hsr_tune_cli(tune_70b_fits 0 "within the budget of 131.95 GiB per rank.*${_fit}.*activations are not counted" sh -c
             "${_hsr} tune --params 70e9 --world 256 --gpus-per-node 8 --hw h200 --top 3 | tr '\\n' ' '")
hsr_tune_cli(tune_70b_arch_fits 0 "llama3-70b.*7.055e\\+10 parameters.*${_fit}.*activations: [0-9.]+ GiB per rank with recompute full.*none does not fit: needs [0-9.]+ GiB more.*selective does not fit"
             sh -c "${_hsr} tune --arch llama3-70b --world 256 --gpus-per-node 8 --hw h200 --top 3 | tr '\\n' ' '")
hsr_tune_cli(tune_70b_emit 0 "\\[activation_checkpoint\\] mode = \"full\"" sh -c
             "${_hsr} tune --arch llama3-70b --params 70e9 --world 256 --gpus-per-node 8 --hw h200 --emit torchtitan | tr '\\n' ' '")
hsr_tune_cli(tune_shape_json 0 "\"shape\":\\{\"arch\":\"llama3-8b\".*\"activations\":\\{\"none\":\\{\"saved_per_layer\":.*\"recompute\":\"selective\".*\"act_bytes\""
             ${_hsr} tune --arch llama3-8b --world 64 --gpus-per-node 8 --hw h100 --json)
# hsr's GPT example to the byte (L 2, C 64, H 4, T 32, V 256, B 2: test_tune's hand-computed case)
hsr_tune_cli(tune_act_hsr_gpt 0 "activations +871424 .*recompute none .*activations +591872 .*recompute full .*activations +740352 .*recompute selective .* <"
             sh -c "${_hsr} tune --arch hsr-gpt --layers 2 --width 64 --heads 4 --seq 32 --vocab 256 --micro-batch 2 --shard 2 --recompute selective | tr '\\n' ' '")
hsr_tune_cli(tune_shape_params 2 "--params 7e\\+09 contradicts the model's shape \\(llama3-70b: .*\\) of 7.055e\\+10 parameters"
             ${_hsr} tune --arch llama3-70b --params 7e9 --world 8 --gpus-per-node 8)
hsr_tune_cli(tune_bad_arch 2 "--arch: unknown 'llama4' \\(valid: gpt2-124m, llama3-8b, llama3-70b" ${_hsr} tune --arch llama4
             --world 8 --gpus-per-node 8)
hsr_tune_cli(tune_shape_heads 2 "--heads 12 does not divide --width 100 \\(valid widths: 96, 108" ${_hsr} tune --layers 4
             --width 100 --heads 12 --seq 64 --vocab 256 --world 8 --gpus-per-node 8)
hsr_tune_cli(tune_recompute_no_shape 2 "--recompute needs the model's shape" ${_hsr} tune --params 1e8 --shard 2
             --recompute full)
# a tighter budget changes the pick: GPT-2 124M (8 sequences per rank) recomputes selectively under 9 GiB, fully under 6 GiB
hsr_tune_cli(tune_recompute_pick 0 "rank +layout.*   1  hybrid 2x8 none p1 recompute:selective .*activations: [0-9.]+ GiB per rank with recompute selective .*none does not fit: needs"
             sh -c "${_hsr} tune --arch gpt2-124m --micro-batch 8 --world 16 --gpus-per-node 8 --hw a100 --mem-budget 9G --top 1 | tr '\\n' ' '")
