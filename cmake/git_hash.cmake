# Script mode: writes OUT (hsr/git.h) with the commit the build compiles,
# rewriting it only when it changes, so that a new commit rebuilds the few
# files that print it and nothing else. Run at every build (target hsr_git):
# a hash taken when CMake configured would name an older commit after the
# next one, and benchmark headers and checkpoint manifests carry it.
set(h "unknown")
if(GIT)
  execute_process(COMMAND ${GIT} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE out
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE r)
  if(r EQUAL 0)
    set(h ${out})
    # tracked files changed since that commit: the build is not the commit's
    execute_process(COMMAND ${GIT} diff --quiet HEAD -- WORKING_DIRECTORY ${SRC} RESULT_VARIABLE d ERROR_QUIET)
    if(d EQUAL 1)
      set(h "${h}-dirty")
    endif()
  endif()
endif()
file(WRITE ${OUT}.new "/* Generated at build time (cmake/git_hash.cmake): the commit this build compiles. */\n"
     "#ifndef HSR_GIT_H\n#define HSR_GIT_H\n#define HSR_GIT_HASH \"${h}\"\n#endif\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
file(REMOVE ${OUT}.new)
