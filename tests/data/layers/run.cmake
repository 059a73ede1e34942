# The layer check (cmake/layer_check.cmake) on a fixture tree
# (tests/data/layers): a room's private header is refused outside its folder,
# a SHARED one outside its module, a ../ path always; INTERNAL headers reach
# the modules above and the tests. Inputs: SRC (the source tree), BIN (scratch).
set(fx ${SRC}/tests/data/layers)
set(rc 0)
function(check module file want_ok needle)
  execute_process(COMMAND ${CMAKE_COMMAND} -DMODULE=${module} -DFILES=${file} -DSRC=${fx} -DSTAMP=${BIN}/layers.stamp
                          -DTABLE=${fx}/table.cmake -P ${SRC}/cmake/layer_check.cmake
                  RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \t\r\n]+" " " msg "${out}${err}")
  if(want_ok AND NOT r EQUAL 0)
    message(SEND_ERROR "layer_privacy: ${module} ${file} refused, should pass: ${msg}")
  elseif(NOT want_ok AND r EQUAL 0)
    message(SEND_ERROR "layer_privacy: ${module} ${file} passed, should be refused")
  elseif(NOT want_ok AND NOT msg MATCHES "${needle}")
    message(SEND_ERROR "layer_privacy: ${module} ${file} refused without '${needle}': ${msg}")
  else()
    message(STATUS "ok ${module} ${file}")
  endif()
endfunction()
check(runtime runtime/engine/own.c.in 1 "")
check(runtime runtime/ckpt/good.c.in 1 "")
check(runtime runtime/ckpt/bad.c.in 0 "runtime/engine/engine.h, private to runtime/engine/")
check(tune tune/good.c.in 1 "")
check(tune tune/bad.c.in 0 "runtime/engine/state.h, a private header of runtime/engine/")
check(tune tune/dotdot.c.in 0 "never with \\.\\./")
check(tests tests/bad.c.in 0 "runtime/engine/engine.h, a private header")
