# One CMake target per module of docs/design.md ("Layers"), each allowed to include exactly
# the modules of its "may include" column. The rule is checked at build time
# (cmake/layer_check.cmake): an include of a module that is not allowed, or of
# another module's private header, fails the build with the rule it broke.
#
#   hsr_module(NAME name [DEPS module...] HEADERS public-headers... SOURCES files...
#              [CUDA_SOURCES files...] [LIBS external-targets...]
#              [INTERNAL headers...] [SHARED headers...])
#
# HEADERS are the module's public headers under include/hsr/ (file names),
# installed and exported (HSR_API); SOURCES are paths relative to the source
# tree, listed rather than globbed; CUDA_SOURCES are built only with CUDA.
# A module's folder may hold rooms (sub-folders): a private header is visible
# only in its own folder (and a header in the module's top folder to the whole
# module), unless it is listed as SHARED (every file of the module may include
# it) or INTERNAL (also the modules above that may include this one, and the
# tests; never installed). Both name headers by their path from the source
# tree, which is how other folders include them: #include "runtime/sched/schedule.h".
# hsr_modules_finish() then checks that every .c/.cu file under a module
# folder is listed, so a forgotten file is an error at configure time rather
# than a silently missing symbol.
#
# FRONT marks a front-end module (tools/): the same checks, but its sources
# are no part of libhsr: no object library is made, the caller builds its
# programs and archives from HSR_MODULE_<name>_FILES and makes them depend on
# hsr_<name>_layers.

set(HSR_MODULE_NAMES "")     # every module, in the layer table
set(HSR_LIB_MODULE_NAMES "") # those whose objects make libhsr

function(hsr_module)
  cmake_parse_arguments(M "FRONT" "NAME" "DEPS;HEADERS;SOURCES;CUDA_SOURCES;LIBS;INTERNAL;SHARED" ${ARGN})
  set(m ${M_NAME})
  set(srcs ${M_SOURCES})
  if(HSR_HAVE_CUDA)
    list(APPEND srcs ${M_CUDA_SOURCES})
  endif()
  list(TRANSFORM srcs PREPEND ${CMAKE_SOURCE_DIR}/)
  foreach(d ${M_DEPS})
    if(NOT TARGET hsr_${d}_layers)
      message(FATAL_ERROR "module ${m} depends on ${d}, which is not defined yet (define modules bottom-up)")
    endif()
  endforeach()
  if(NOT M_FRONT)
    add_library(hsr_${m} OBJECT ${srcs})
    target_include_directories(hsr_${m} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/include>)
    # INTERNAL and SHARED headers by their path from the source tree
    target_include_directories(hsr_${m} PRIVATE ${CMAKE_SOURCE_DIR})
    # Only the public API leaves libhsr.so (HSR_API in include/hsr/*.h).
    set_target_properties(hsr_${m} PROPERTIES C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                          VISIBILITY_INLINES_HIDDEN ON)
    target_link_libraries(hsr_${m} PUBLIC ${M_LIBS})
    foreach(d ${M_DEPS})
      target_link_libraries(hsr_${m} PUBLIC hsr_${d})
    endforeach()
  endif()

  # the build-time layer check of this module's sources and public headers
  set(files ${M_SOURCES} ${M_CUDA_SOURCES})
  file(GLOB_RECURSE priv RELATIVE ${CMAKE_SOURCE_DIR} CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${m}/*.h)
  list(APPEND files ${priv})
  foreach(h ${M_HEADERS})
    list(APPEND files include/hsr/${h})
  endforeach()
  set(stamp ${CMAKE_BINARY_DIR}/layers/${m}.ok)
  set(abs ${files})
  list(TRANSFORM abs PREPEND ${CMAKE_SOURCE_DIR}/)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DMODULE=${m} "-DFILES=${files}" -DSRC=${CMAKE_SOURCE_DIR}
            -DSTAMP=${stamp} -DTABLE=${CMAKE_BINARY_DIR}/layers/table.cmake
            -P ${CMAKE_SOURCE_DIR}/cmake/layer_check.cmake
    DEPENDS ${abs} ${CMAKE_SOURCE_DIR}/cmake/layer_check.cmake ${CMAKE_BINARY_DIR}/layers/table.cmake
    COMMENT "layers: checking the includes of ${m}/" VERBATIM)
  add_custom_target(hsr_${m}_layers DEPENDS ${stamp})
  if(NOT M_FRONT)
    add_dependencies(hsr_${m} hsr_${m}_layers)
    set(HSR_LIB_MODULE_NAMES ${HSR_LIB_MODULE_NAMES} ${m} PARENT_SCOPE)
  endif()

  set(HSR_MODULE_NAMES ${HSR_MODULE_NAMES} ${m} PARENT_SCOPE)
  set(HSR_MODULE_${m}_DEPS ${M_DEPS} PARENT_SCOPE)
  set(HSR_MODULE_${m}_HEADERS ${M_HEADERS} PARENT_SCOPE)
  set(HSR_MODULE_${m}_FILES ${M_SOURCES} ${M_CUDA_SOURCES} PARENT_SCOPE)
  foreach(h ${M_INTERNAL} ${M_SHARED})
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/${h} OR NOT h MATCHES "^${m}/")
      message(FATAL_ERROR "module ${m}: INTERNAL/SHARED header ${h} is not a header of ${m}/")
    endif()
  endforeach()
  set(HSR_MODULE_${m}_INTERNAL ${M_INTERNAL} PARENT_SCOPE)
  set(HSR_MODULE_${m}_SHARED ${M_SHARED} PARENT_SCOPE)
endfunction()

# Writes the table the layer check reads, and checks that every source file
# in a module folder is listed in its module.
function(hsr_modules_finish)
  set(t "# generated: module -> allowed modules and public headers\n")
  string(APPEND t "set(HSR_MODULES \"${HSR_MODULE_NAMES}\")\n")
  foreach(m ${HSR_MODULE_NAMES})
    string(APPEND t "set(HSR_DEPS_${m} \"${HSR_MODULE_${m}_DEPS}\")\n")
    string(APPEND t "set(HSR_HEADERS_${m} \"${HSR_MODULE_${m}_HEADERS}\")\n")
    string(APPEND t "set(HSR_INTERNAL_${m} \"${HSR_MODULE_${m}_INTERNAL}\")\n")
    string(APPEND t "set(HSR_SHARED_${m} \"${HSR_MODULE_${m}_SHARED}\")\n")
    file(GLOB_RECURSE present RELATIVE ${CMAKE_SOURCE_DIR} CONFIGURE_DEPENDS
         ${CMAKE_SOURCE_DIR}/${m}/*.c ${CMAKE_SOURCE_DIR}/${m}/*.cu)
    foreach(f ${present})
      list(FIND HSR_MODULE_${m}_FILES ${f} at)
      if(at LESS 0)
        message(FATAL_ERROR "${f} is not listed in module '${m}': add it to the hsr_module(NAME ${m} ...) "
                            "SOURCES (or CUDA_SOURCES) in CMakeLists.txt")
      endif()
    endforeach()
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/layers/table.cmake.new "${t}")
  # rewrite only on change, so the checks do not rerun on every configure
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${CMAKE_BINARY_DIR}/layers/table.cmake.new
                  ${CMAKE_BINARY_DIR}/layers/table.cmake)
endfunction()
