# kernels/: element math, host loops, host device layer, GEMM (CPU); the GPU
# test compares every kernel with the CPU loop and skips (77) without a GPU.
hsr_add_unit(test_kernels test_kernels.c)
hsr_add_unit(test_kernels_gpu test_kernels_gpu.c)
set_tests_properties(test_kernels_gpu PROPERTIES LABELS gpu)

# hsr-kbench runs end to end on the host device (tiny, no timing asserted)
# and refuses bad flags; gpu_check.sh documents itself and refuses bad usage.
add_test(NAME kbench_host_smoke COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0
         "\"kernel\":[[:space:]]+\"adamw_f32grad_bf16out\"" $<TARGET_FILE:hsr_kbench> --device host --elems 4K
         --iters 1 --reps 1 --json -)
add_test(NAME kbench_bad_flags COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--elems.*unknown suffix"
         $<TARGET_FILE:hsr_kbench> --elems 12Q)
add_test(NAME kbench_bad_device COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "--device"
         $<TARGET_FILE:hsr_kbench> --device tpu)
add_test(NAME gpu_check_usage COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "gpu_check.sh OUTDIR"
         ${CMAKE_SOURCE_DIR}/bench/gpu_check.sh)
add_test(NAME gpu_check_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "hsr-kbench"
         ${CMAKE_SOURCE_DIR}/bench/gpu_check.sh --help)
set_tests_properties(kbench_host_smoke kbench_bad_flags kbench_bad_device gpu_check_usage gpu_check_help
                     PROPERTIES TIMEOUT 60)
