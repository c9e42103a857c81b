# cmake -P script run by CTest (see CMakeLists.txt). Fails with a message naming the step.

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sdk test: ${step} failed (${rc}):\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

function(hash_host out_var)
  file(GLOB core_libs "${PREFIX}/lib/libmoequant_core.so*")
  set(hashes "")
  foreach(f "${PREFIX}/bin/moequant" ${core_libs})
    if(NOT IS_SYMLINK "${f}")
      file(SHA256 "${f}" h)
      string(APPEND hashes "${f} ${h}\n")
    endif()
  endforeach()
  set(${out_var} "${hashes}" PARENT_SCOPE)
endfunction()

set(PREFIX "${WORK_DIR}/prefix")
set(EXT_BUILD "${WORK_DIR}/external-build")
file(REMOVE_RECURSE "${WORK_DIR}")

# 1. Install the SDK and the host.
run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}")
foreach(f bin/moequant include/moequant/plugin.hpp include/moequant/version.hpp
          lib/cmake/moequant/moequantConfig.cmake lib/cmake/moequant/MoequantPluginHelpers.cmake)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "sdk test: the install lacks ${f}")
  endif()
endforeach()
hash_host(before)
if(before STREQUAL "")
  message(FATAL_ERROR "sdk test: nothing to hash in ${PREFIX}")
endif()

# 2. Build the example out of tree, knowing only the install prefix.
set(launcher_arg "")
if(LAUNCHER)
  set(launcher_arg "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
run("configure the example" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/third_party_quantizer" -B "${EXT_BUILD}"
    -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${launcher_arg})
run("build the example" ${CMAKE_COMMAND} --build "${EXT_BUILD}")
set(module "${EXT_BUILD}/moequant-plugins/moequant-quantizer-example_absmax_int8.so")
if(NOT EXISTS "${module}")
  message(FATAL_ERROR "sdk test: the example build did not produce ${module}")
endif()

# 3. The installed host lists it from --plugin-dir ...
run("list with --plugin-dir" ${CMAKE_COMMAND} -E env --unset=MOEQUANT_PLUGIN_PATH
    "${PREFIX}/bin/moequant" plugins --no-default-plugins --plugin-dir "${EXT_BUILD}/moequant-plugins")
if(NOT LAST_OUTPUT MATCHES "example_absmax_int8 +quantizer +1\\.0\\.0" OR NOT LAST_OUTPUT MATCHES "example-absmax-int8")
  message(FATAL_ERROR "sdk test: the host did not list the example plugin:\n${LAST_OUTPUT}")
endif()

# 4. ... and, once the plugin is installed into the prefix, from its own plugin folder.
run("install the example" ${CMAKE_COMMAND} --install "${EXT_BUILD}" --prefix "${PREFIX}")
run("list from the plugin folder" ${CMAKE_COMMAND} -E env --unset=MOEQUANT_PLUGIN_PATH
    "${PREFIX}/bin/moequant" plugins)
if(NOT LAST_OUTPUT MATCHES "example_absmax_int8" OR NOT LAST_OUTPUT MATCHES "lib/moequant/plugins/moequant-quantizer-example_absmax_int8.so")
  message(FATAL_ERROR "sdk test: the installed host did not find the installed plugin:\n${LAST_OUTPUT}")
endif()

# 5. The host was not touched.
hash_host(after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "sdk test: the installed host changed:\nbefore:\n${before}after:\n${after}")
endif()
message(STATUS "sdk test: the unchanged installed host loads the out-of-tree plugin\n${before}")
