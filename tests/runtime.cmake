# runtime/: layout and config (unit), the example model (unit), the engine (multi-rank).
hsr_add_unit(test_rt_layout test_rt_layout.c)
hsr_add_unit(test_ckpt_geom test_ckpt_geom.c)
# The example models come from the hsr_examples archive (tests/CMakeLists.txt).
hsr_add_unit(test_mlp test_mlp.c)
# The model on CUDA against the CPU (label gpu, exit 77 without a GPU).
hsr_add_unit(test_mlp_gpu test_mlp_gpu.c)

# Multi-rank: equivalence with the single-rank reference over meshes, strategies,
# reshard policies, prefetch depths, accumulation modes; counts; determinism.
hsr_add_program(mr_runtime mr_runtime.c)
set(_c "clip=0.05")
hsr_add_mpi_test(NAME rt_equiv_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_runtime> equiv
  # 1 x 4: fsdp, every reshard policy and prefetch depth, each sync mode
  strategy=fsdp,S=4,reshard=full,prefetch=0,${_c},twice=1,same=f4
  strategy=fsdp,S=4,reshard=full,prefetch=1,${_c},same=f4
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=2,${_c},same=f4
  strategy=fsdp,S=4,reshard=none,prefetch=1,${_c},same=f4
  strategy=fsdp,S=4,reshard=partial:2,prefetch=0,${_c},same=f4
  strategy=fsdp,S=4,reshard=partial:2,prefetch=2,root=1,${_c},same=f4
  strategy=fsdp,S=4,reshard=full,micro=2,sync=full,${_c}
  strategy=fsdp,S=4,reshard=partial:2,micro=2,sync=none,${_c}
  strategy=fsdp,S=4,reshard=none,micro=2,sync=rs_only,${_c}
  strategy=zero1,S=4,${_c}
  strategy=zero2,S=4,micro=2,sync=none,${_c}
  # 2 x 2: hybrid, zero1, zero2
  strategy=hybrid,S=2,reshard=full,prefetch=1,${_c},twice=1,same=h22
  strategy=hybrid,S=2,reshard=none,prefetch=2,${_c},same=h22
  strategy=hybrid,S=2,reshard=partial:2,prefetch=0,${_c},same=h22
  strategy=hybrid,S=2,reshard=full,micro=2,sync=full,${_c}
  strategy=hybrid,S=2,reshard=partial:2,micro=2,sync=none,prefetch=2,${_c}
  strategy=hybrid,S=2,reshard=full,micro=2,sync=rs_only,prefetch=1,${_c}
  strategy=zero1,S=2,R=2,micro=2,sync=rs_only,${_c}
  strategy=zero2,S=2,R=2,${_c}
  # 4 x 1: ddp and the degenerate shard group
  strategy=ddp,${_c},twice=1
  strategy=ddp,micro=2,sync=rs_only,${_c}
  strategy=ddp,micro=2,sync=none,${_c}
  strategy=hybrid,S=1,R=4,${_c}
  # mixed precision (looser tolerance; loss must still fall)
  strategy=hybrid,S=2,pdt=bf16,rdt=bf16,${_c}
  strategy=fsdp,S=4,pdt=bf16,rdt=f32,reshard=partial:2,${_c}
  # 2 x 2 with the optimizer state over the replicas (HFSDP): every reshard policy alike bitwise,
  # micro-batches in each sync mode, the step-end prefetch, mixed precision
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,${_c},twice=1,same=h22o
  strategy=hybrid,S=2,outer=optim,reshard=none,prefetch=2,${_c},same=h22o
  strategy=hybrid,S=2,outer=optim,reshard=partial:2,prefetch=0,${_c},same=h22o
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1,${_c},same=h22o
  strategy=hybrid,S=2,outer=optim,reshard=full,micro=2,sync=full,${_c}
  strategy=hybrid,S=2,outer=optim,reshard=partial:2,micro=2,sync=none,prefetch=2,${_c}
  strategy=hybrid,S=2,outer=optim,reshard=full,micro=2,sync=rs_only,prefetch=1,${_c}
  strategy=hybrid,S=1,R=4,outer=optim,${_c}
  strategy=hybrid,S=2,outer=optim,pdt=bf16,rdt=bf16,${_c}
  strategy=hybrid,S=2,outer=optim,pdt=bf16,rdt=f32,micro=2,sync=rs_only,${_c})
# Three replicas (R = 3 divides neither the alignment nor a power of two):
# the outer shard's pieces, the replicate averages and the partial group on
# 3 simulated nodes, against the single-rank reference.
hsr_add_mpi_test(NAME rt_equiv_6 NP 6 NODES 3 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_runtime> --batch 48 equiv
  strategy=hybrid,S=2,R=3,reshard=full,prefetch=1,${_c}
  strategy=hybrid,S=2,R=3,outer=optim,reshard=partial:2,micro=2,sync=rs_only,${_c}
  strategy=hybrid,S=2,R=3,outer=optim,pdt=bf16,${_c}
  strategy=hybrid,S=1,R=6,outer=optim,${_c}
  strategy=zero2,S=2,R=3,${_c})
hsr_add_mpi_test(NAME rt_equiv_8 NP 8 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_runtime> equiv
  strategy=hybrid,S=4,R=2,reshard=full,prefetch=1,${_c},twice=1
  strategy=hybrid,S=4,R=2,reshard=partial:2,prefetch=2,micro=2,sync=rs_only,${_c}
  strategy=hybrid,S=4,R=2,reshard=none,micro=2,sync=none,${_c}
  strategy=zero2,S=4,R=2,${_c}
  strategy=zero1,S=4,R=2,${_c}
  strategy=ddp,${_c}
  # the outer shard on 2 x 4 and 4 x 2 (every rank holds 1/8 of the optimizer state)
  strategy=hybrid,S=4,R=2,outer=optim,reshard=full,prefetch=1,${_c},twice=1
  strategy=hybrid,S=4,R=2,outer=optim,reshard=partial:2,prefetch=2,micro=2,sync=rs_only,${_c}
  strategy=hybrid,S=2,R=4,outer=optim,reshard=partial:2,prefetch=1,pstep=1,${_c}
  strategy=hybrid,S=2,R=4,outer=optim,reshard=none,micro=2,sync=none,pdt=bf16,${_c})
hsr_add_mpi_test(NAME rt_bad_use NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_runtime> bad)

# hsr train: help, bad values (exit 2 with what is valid), a short real run with a log.
add_test(NAME train_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr train" $<TARGET_FILE:hsr_cli> train --help)
add_test(NAME train_bad_k COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid K: 1, 2, 4"
         $<TARGET_FILE:hsr_cli> train --shard 4 --reshard partial:3)
add_test(NAME train_bad_reshard COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: full, none, partial:K"
         $<TARGET_FILE:hsr_cli> train --reshard half)
add_test(NAME train_bad_strategy COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "ddp"
         $<TARGET_FILE:hsr_cli> train --strategy zero3)
add_test(NAME train_bad_dtype COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "f32, bf16"
         $<TARGET_FILE:hsr_cli> train --param-dtype f64)
add_test(NAME train_bad_steps COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "steps"
         $<TARGET_FILE:hsr_cli> train --steps 0)
add_test(NAME train_bad_flag COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "" $<TARGET_FILE:hsr_cli> train --bogus)
add_test(NAME train_bad_k_auto COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "K must divide"
         ${HSR_RUN} -n 4 --nodes 2 --launcher mpirun -- $<TARGET_FILE:hsr_cli> train --strategy fsdp --reshard partial:3 --steps 2)
add_test(NAME train_run_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/train_check.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(train_bad_k_auto train_run_4 PROPERTIES TIMEOUT 180 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")

# GPU (label gpu; exit 77 without a usable GPU, so CI skips them): the engine's
# device path on one GPU with an NCCL world of one rank, against the CPU
# reference (every lifecycle/strategy the one rank can run, bitwise repeat,
# bf16), and a few steps of hsr train --device cuda. bench/gpu_check.sh runs them.
add_test(NAME rt_gpu_equiv_1 COMMAND $<TARGET_FILE:mr_runtime> equiv
  device=cuda,strategy=fsdp,reshard=full,prefetch=1,${_c},twice=1
  device=cuda,strategy=fsdp,reshard=none,prefetch=2,micro=2,sync=full,${_c}
  device=cuda,strategy=fsdp,reshard=full,prefetch=0,micro=2,sync=rs_only,${_c}
  device=cuda,strategy=zero1,${_c}
  device=cuda,strategy=ddp,micro=2,sync=none,${_c}
  device=cuda,strategy=fsdp,pdt=bf16,rdt=bf16,${_c})
add_test(NAME train_gpu COMMAND ${CMAKE_SOURCE_DIR}/tests/train_gpu.sh $<TARGET_FILE:hsr_cli>)
add_test(NAME train_gpu_refused COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: host, cuda, cuda:N"
         $<TARGET_FILE:hsr_cli> train --device tpu)
set_tests_properties(rt_gpu_equiv_1 train_gpu test_mlp_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 150
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# The GPT example: layers against double-precision finite differences, the
# whole model's gradient, wrapping, data windows, the reference learning.
hsr_add_unit(test_gpt test_gpt.c)
# The Llama-style model: RMSNorm, SwiGLU, the rotary embedding and grouped-query
# attention against double-precision finite differences, the whole model's
# gradient, wrapping, LlamaForCausalLM's names and shapes, the reference learning.
hsr_add_unit(test_llama test_llama.c)

# safetensors: the specification's vectors byte for byte, a streaming round
# trip, malformed files rejected with the file and the problem named.
hsr_add_unit(test_safetensors test_safetensors.c)
# Hugging Face's sharded layout: the shard size, the plan, a round trip through
# shards and the index (its text byte for byte), re-exports, an aborted one,
# malformed indexes each refused naming the index and the problem.
hsr_add_unit(test_st_sharded test_st_sharded.c)

# The GPT under the engine: equivalence with the single-rank reference, every
# step (loss, gradient norm, every parameter, the tied wte), on the MLP's
# meshes, strategies, reshard policies and prefetch depths, block and linear
# wrapping, a warm-up + cosine schedule, validation passes in between; and the
# safetensors export / --init round trip.
hsr_add_program(mr_gpt mr_gpt.c ${CMAKE_SOURCE_DIR}/tools/train/train_io.c)
set(_g "clip=0.05")
set(_gpt_specs_4
  strategy=fsdp,S=4,reshard=full,prefetch=0,${_g},twice=1,same=f4
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=2,${_g},same=f4
  strategy=fsdp,S=4,reshard=none,prefetch=1,${_g},val=1,same=f4
  strategy=fsdp,S=4,reshard=partial:2,prefetch=1,root=1,${_g},same=f4
  strategy=fsdp,S=4,reshard=full,prefetch=1,wrap=linear,${_g},same=f4
  strategy=fsdp,S=4,reshard=partial:2,micro=2,sync=none,wrap=linear,${_g}
  strategy=fsdp,S=4,reshard=none,micro=2,sync=rs_only,${_g}
  strategy=zero1,S=4,${_g}
  strategy=zero2,S=4,micro=2,sync=none,${_g}
  strategy=hybrid,S=2,reshard=full,prefetch=1,${_g},val=1,twice=1,same=h22
  strategy=hybrid,S=2,reshard=partial:2,prefetch=2,wrap=linear,${_g},same=h22
  strategy=hybrid,S=2,reshard=full,micro=2,sync=full,${_g}
  strategy=zero1,S=2,R=2,micro=2,sync=rs_only,${_g}
  strategy=ddp,${_g},val=1
  strategy=hybrid,S=1,R=4,micro=2,sync=none,${_g}
  strategy=hybrid,S=2,pdt=bf16,rdt=bf16,${_g}
  strategy=fsdp,S=4,reshard=full,clip=0
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,${_g},val=1,twice=1
  strategy=hybrid,S=2,outer=optim,reshard=partial:2,micro=2,sync=rs_only,wrap=linear,${_g}
  strategy=hybrid,S=1,R=4,outer=optim,pdt=bf16,${_g})
hsr_add_mpi_test(NAME gpt_equiv_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> equiv
  ${_gpt_specs_4})
set(_gpt_specs_8
  strategy=hybrid,S=4,R=2,reshard=partial:2,prefetch=1,${_g},val=1
  strategy=hybrid,S=4,R=2,reshard=full,wrap=linear,micro=1,${_g}
  strategy=zero2,S=4,R=2,rc=selective,${_g}
  strategy=hybrid,S=2,R=4,outer=optim,reshard=partial:2,prefetch=1,rc=full,${_g},val=1)
hsr_add_mpi_test(NAME gpt_equiv_8 NP 8 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> equiv
  ${_gpt_specs_8})
# Activation recompute (full, selective) against the reference that keeps
# every activation, and bitwise against the same cell without it (same=):
# every strategy, reshard full/none/partial, micro-batches, validation.
set(_rc_specs_4
  strategy=fsdp,S=4,reshard=full,prefetch=1,${_g},same=rf
  strategy=fsdp,S=4,reshard=full,prefetch=1,rc=full,${_g},val=1,same=rf
  strategy=fsdp,S=4,reshard=full,prefetch=2,rc=selective,${_g},same=rf
  strategy=fsdp,S=4,reshard=none,prefetch=1,rc=full,${_g},same=rf
  strategy=hybrid,S=2,reshard=partial:2,micro=2,rc=selective,${_g},same=rp
  strategy=hybrid,S=2,reshard=partial:2,micro=2,rc=full,${_g},same=rp
  strategy=hybrid,S=2,reshard=partial:2,micro=2,${_g},same=rp
  strategy=zero1,S=2,R=2,rc=full,${_g}
  strategy=zero2,S=2,R=2,rc=selective,${_g}
  strategy=ddp,micro=2,sync=none,rc=full,${_g}
  strategy=hybrid,S=2,outer=optim,pdt=bf16,rc=full,${_g})
hsr_add_mpi_test(NAME gpt_recompute_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> equiv
  ${_rc_specs_4})
hsr_add_mpi_test(NAME llama_recompute_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> --llama equiv
  ${_rc_specs_4})
add_test(NAME gpt_recompute_1 COMMAND $<TARGET_FILE:mr_gpt> equiv
  strategy=fsdp,${_g},same=r1 strategy=fsdp,rc=full,${_g},same=r1 strategy=fsdp,rc=selective,${_g},val=1,same=r1
  strategy=ddp,micro=2,rc=selective,${_g})
set_tests_properties(gpt_recompute_1 PROPERTIES TIMEOUT 120 ENVIRONMENT OPENBLAS_NUM_THREADS=1)
hsr_add_mpi_test(NAME gpt_equiv_6 NP 6 NODES 3 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> --batch 12 equiv
  strategy=hybrid,S=2,R=3,outer=optim,reshard=full,prefetch=1,rc=selective,${_g}
  strategy=fsdp,S=6,reshard=partial:2,micro=2,rc=full,${_g}
  strategy=hybrid,S=1,R=6,pdt=bf16,${_g})
hsr_add_mpi_test(NAME gpt_export_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> export
  ${CMAKE_BINARY_DIR}/gpt_export_4.safetensors)
# The Llama-style model through the same specs (every strategy, reshard
# full/none/partial, prefetch, micro-batches, wrapping, bf16, validation) and
# the same export / --init round trip.
hsr_add_mpi_test(NAME llama_equiv_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> --llama equiv
  ${_gpt_specs_4})
hsr_add_mpi_test(NAME llama_equiv_8 NP 8 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> --llama equiv
  ${_gpt_specs_8})
hsr_add_mpi_test(NAME llama_export_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_gpt> --llama
  export ${CMAKE_BINARY_DIR}/llama_export_4.safetensors)
# one GPU (label gpu; exit 77 without one): the GPT and the llama on CUDA against the CPU reference
add_test(NAME gpt_gpu_equiv_1 COMMAND $<TARGET_FILE:mr_gpt> equiv
  device=cuda,strategy=fsdp,reshard=full,prefetch=1,${_g},twice=1
  device=cuda,strategy=fsdp,reshard=none,micro=2,sync=full,wrap=linear,val=1,${_g}
  device=cuda,strategy=ddp,${_g}
  device=cuda,strategy=fsdp,pdt=bf16,rdt=bf16,${_g})
add_test(NAME llama_gpu_equiv_1 COMMAND $<TARGET_FILE:mr_gpt> --llama equiv
  device=cuda,strategy=fsdp,reshard=full,prefetch=1,${_g},twice=1
  device=cuda,strategy=fsdp,reshard=none,micro=2,sync=full,wrap=linear,val=1,${_g}
  device=cuda,strategy=ddp,${_g}
  device=cuda,strategy=fsdp,pdt=bf16,rdt=bf16,${_g})
set_tests_properties(gpt_gpu_equiv_1 llama_gpu_equiv_1 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 150
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# hsr train --model gpt end to end on the default data; the export read by an
# independent Python reader (json + struct) whose forward matches the printed
# validation loss; hsr eval = hsr train; --init reproduces; sample; wrap diagnostic.
add_test(NAME train_gpt_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/train_gpt_check.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(train_gpt_4 PROPERTIES TIMEOUT 300 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# hsr train --recompute: bitwise logs, activations predicted = measured = the
# shapes' count, gathers as the schedule predicts, the trace's recompute spans
add_test(NAME train_recompute_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/train_recompute.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(train_recompute_4 PROPERTIES LABELS mpi TIMEOUT 300 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# --export-init: the weights a run starts from (what bench/peers starts its peers from)
add_test(NAME train_export_init COMMAND ${CMAKE_SOURCE_DIR}/tests/export_init.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(train_export_init PROPERTIES TIMEOUT 120 ENVIRONMENT "HSR_BOOT_TIMEOUT=120" LABELS mpi)
# hsr train --model llama end to end: the directory export (shards, index,
# config.json) read by an independent Python reader configured from
# config.json alone; eval = train; --init reproduces; a file without hsr's
# metadata; the wrap diagnostic; hsr ckpt export writes the same.
add_test(NAME train_llama_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/train_llama_check.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(train_llama_4 PROPERTIES TIMEOUT 300 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
add_test(NAME train_bad_model COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: mlp, gpt, llama"
         $<TARGET_FILE:hsr_cli> train --model bert)
add_test(NAME train_gpt_bad_heads COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "multiple of the heads"
         $<TARGET_FILE:hsr_cli> train --model gpt --dim 30 --heads 4)
add_test(NAME train_mlp_bad_seq COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "does not apply to --model mlp"
         $<TARGET_FILE:hsr_cli> train --seq 64)
add_test(NAME train_bad_lr_min COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "exceeds --lr"
         $<TARGET_FILE:hsr_cli> train --lr 1e-3 --lr-min 1e-2)
add_test(NAME eval_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr eval" $<TARGET_FILE:hsr_cli> eval --help)
add_test(NAME eval_needs_init COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--init FILE and --data FILE are required"
         $<TARGET_FILE:hsr_cli> eval --data x)
add_test(NAME sample_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr sample" $<TARGET_FILE:hsr_cli> sample --help)
add_test(NAME sample_bad_temperature COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--temperature"
         $<TARGET_FILE:hsr_cli> sample --init x --temperature -1)
# The layer kernels, the GPT and the llama on CUDA against the CPU (label gpu, exit 77 without a GPU).
hsr_add_unit(test_gpt_gpu test_gpt_gpu.c)
hsr_add_unit(test_llama_gpu test_llama_gpu.c)
set_tests_properties(test_gpt_gpu test_llama_gpu PROPERTIES LABELS gpu TIMEOUT 150 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
# Checkpoints (hsr/ckpt.h): resume on the same mesh (bitwise) and on other
# meshes and strategies (tolerance), with the LR schedule and clipping on;
# small blocks and buffers so loads chunk, cross blocks and read twice;
# every kind of broken checkpoint refused on every rank; the state API.
hsr_add_program(mr_ckpt mr_ckpt.c)
# HSR_CKPT_IN_PLACE differing between ranks: the load goes in place only where every rank does
add_test(NAME ckpt_in_place_agree COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_in_place_agree.sh $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_in_place_agree PROPERTIES LABELS mpi TIMEOUT 300)
hsr_add_mpi_test(NAME ckpt_resume_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_ckpt> resume
  "strategy=hybrid,S=2->strategy=hybrid,S=2"
  "strategy=fsdp,S=4,block=256->strategy=fsdp,S=4,block=256,buffer=4096,inplace=off"
  "strategy=fsdp,S=4,block=256->strategy=hybrid,S=2,iov=3"
  "strategy=hybrid,S=2->strategy=fsdp,S=4,reshard=partial:2,prefetch=2"
  "strategy=hybrid,S=2,block=512->strategy=ddp,buffer=4096,inplace=off"
  "strategy=hybrid,S=2,block=512->strategy=ddp,iov=2"
  "strategy=hybrid,S=2->strategy=hybrid,S=1,R=4"
  "strategy=zero1,S=4->strategy=zero1,S=4"
  "strategy=zero2,S=2,R=2->strategy=zero2,S=2,R=2"
  "strategy=hybrid,S=2->strategy=hybrid,S=2,exchange=off,inplace=off"
  "strategy=hybrid,S=2->strategy=hybrid,S=1,R=4,exchange=on"
  "strategy=ddp->strategy=ddp"
  "strategy=hybrid,S=2->strategy=zero1,S=2,R=2"
  "strategy=hybrid,S=2->strategy=zero2,S=4"
  "strategy=fsdp,S=4->strategy=hybrid,S=2,reshard=none,micro=2"
  "strategy=hybrid,S=2->strategy=hybrid,S=2,pdt=bf16"
  # the outer shard (master, m, v over S x R): itself bitwise, optim to none and back, onto other meshes
  "strategy=hybrid,S=2,outer=optim->strategy=hybrid,S=2,outer=optim"
  "strategy=hybrid,S=2,outer=optim->strategy=hybrid,S=2"
  "strategy=hybrid,S=2->strategy=hybrid,S=2,outer=optim,block=256,buffer=4096,inplace=off"
  "strategy=hybrid,S=2,outer=optim->strategy=fsdp,S=4,reshard=partial:2"
  "strategy=hybrid,S=1,R=4,outer=optim,pdt=bf16->strategy=hybrid,S=2,outer=optim,micro=2,sync=rs_only"
  "strategy=zero1,S=4->strategy=hybrid,S=1,R=4,outer=optim"
  "strategy=hybrid,S=2,async=1->strategy=hybrid,S=2"
  "strategy=fsdp,S=4,async=1,block=256->strategy=hybrid,S=2,buffer=4096,inplace=off"
  "strategy=hybrid,S=2->strategy=zero2,S=2,R=2,inplace=off"
  "strategy=zero1,S=2,R=2,async=1->strategy=zero1,S=2,R=2")
hsr_add_mpi_test(NAME ckpt_corrupt_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_ckpt> corrupt)
add_test(NAME ckpt_state COMMAND $<TARGET_FILE:mr_ckpt> state)
# hsr train --ckpt/--resume across meshes (bitwise on the same mesh), --keep,
# inspect/verify, a corrupted checkpoint refused; a crash at each commit stage.
add_test(NAME ckpt_train COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_train.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
add_test(NAME ckpt_crash COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_crash.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
# the checkpoints' disk space, checked before the first step (a tmpfs in a private mount namespace)
add_test(NAME train_disk COMMAND ${CMAKE_SOURCE_DIR}/tests/train_disk.sh $<TARGET_FILE:hsr_cli>)
set_tests_properties(train_disk PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
set_tests_properties(ckpt_train ckpt_crash PROPERTIES TIMEOUT 360 ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
add_test(NAME ckpt_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr ckpt inspect" $<TARGET_FILE:hsr_cli> ckpt --help)
add_test(NAME ckpt_bad_action COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: inspect, verify" $<TARGET_FILE:hsr_cli> ckpt fix x)
add_test(NAME ckpt_not_a_ckpt COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "not a checkpoint" $<TARGET_FILE:hsr_cli> ckpt verify ${CMAKE_SOURCE_DIR}/tests)
add_test(NAME train_bad_keep COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--keep needs --ckpt" $<TARGET_FILE:hsr_cli> train --keep 2)
add_test(NAME train_bad_resume COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--resume latest needs --ckpt" $<TARGET_FILE:hsr_cli> train --resume latest)
add_test(NAME train_bad_warmup COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "warm-up of 20 steps must be shorter" $<TARGET_FILE:hsr_cli> train --steps 10 --warmup 20)
# hsr ckpt bench runs on 2 x 2 and reports every figure (no timing asserted).
add_test(NAME ckpt_bench_json COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_bench_json.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_bench_json PROPERTIES TIMEOUT 180 LABELS mpi ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# hsr ckpt plan: the engine-less planner is the plan real 4-rank saves used
# (every tensor's ranges), and its plans for 64, 64 -> 128 and 8 -> 16 ranks
# read what each rank holds (no timing asserted).
add_test(NAME ckpt_plan COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_plan.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_plan PROPERTIES TIMEOUT 180 LABELS mpi ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
# One exit code per kind of bad checkpoint across ckpt inspect, verify, export and train --resume.
add_test(NAME ckpt_bad_input COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_bad_input.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_bad_input PROPERTIES TIMEOUT 300 LABELS mpi ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
# hsr ckpt export: the independent reader checks the file against the checkpoint.
add_test(NAME ckpt_export COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_export.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_export PROPERTIES TIMEOUT 180 ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
# --init into sharded meshes (fsdp, hybrid, partial, bf16 compute, zero2,
# ddp) = the single-rank load, bit for bit, from a file whose header and bytes
# lie in other orders, with BF16 tensors (tests/st_relayout.py).
add_test(NAME init_mesh COMMAND ${CMAKE_SOURCE_DIR}/tests/init_mesh.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(init_mesh PROPERTIES TIMEOUT 240 ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
# The model travels with the checkpoint, ROOT/latest everywhere, Hugging Face's
# sharded layout: checked by tests/ckpt_read.py (json + struct), see the script.
add_test(NAME ckpt_model COMMAND ${CMAKE_SOURCE_DIR}/tests/ckpt_model.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ckpt_model PROPERTIES TIMEOUT 240 ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
add_test(NAME ckpt_export_usage COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "needs a checkpoint DIR and --safetensors"
         $<TARGET_FILE:hsr_cli> ckpt export /tmp)
add_test(NAME train_init_and_resume COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--init and --resume both set the weights"
         $<TARGET_FILE:hsr_cli> train --init x.safetensors --resume /tmp)

# runtime/'s rooms (sched, engine, ckpt, io) call each other without a loop.
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/objects-runtime.txt CONTENT "$<JOIN:$<TARGET_OBJECTS:hsr_runtime>,\n>\n")
add_test(NAME rt_call_graph COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/call_graph.py runtime --by-dir
         @${CMAKE_BINARY_DIR}/objects-runtime.txt)
set_tests_properties(rt_call_graph PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
