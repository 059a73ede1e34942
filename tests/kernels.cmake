# kernels/: element math, host loops, host device layer, GEMM (CPU); the GPU
# test compares every kernel with the CPU loop and skips (77) without a GPU.
hsr_add_unit(test_kernels test_kernels.c)
hsr_add_unit(test_kernels_gpu test_kernels_gpu.c)
set_tests_properties(test_kernels_gpu PROPERTIES LABELS gpu)
