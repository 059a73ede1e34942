# fixture for tests/layer_privacy.cmake: two modules, runtime (rooms engine,
# ckpt, sched) and tune above it
set(HSR_MODULES "runtime;tune")
set(HSR_DEPS_runtime "")
set(HSR_HEADERS_runtime "")
set(HSR_INTERNAL_runtime "runtime/sched/schedule.h")
set(HSR_SHARED_runtime "runtime/engine/state.h")
set(HSR_DEPS_tune "runtime")
set(HSR_HEADERS_tune "")
set(HSR_INTERNAL_tune "")
set(HSR_SHARED_tune "")
