# cmake -P script run by CTest (see CMakeLists.txt). Fails with a message naming the step.

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sdk test: ${step} failed (${rc}):\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

# The listing of one plugin folder shows the module's row (id, kind) and its object's row, each
# column apart from the next however long the id.
function(expect_listed what dir plugin_id kind object_id)
  run("list the ${what}" ${host} plugins --no-default-plugins --plugin-dir "${dir}")
  if(NOT LAST_OUTPUT MATCHES "${plugin_id} +${kind} +[0-9]" OR NOT LAST_OUTPUT MATCHES " ${kind} +${object_id} +[^ ]")
    message(FATAL_ERROR "sdk test: the host did not list the example ${what}:\n${LAST_OUTPUT}")
  endif()
endfunction()

# A run refused with exit code `rc` and an error matching `pattern`.
function(expect_refused step rc pattern)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE got_rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT got_rc EQUAL rc OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "sdk test: ${step} was not refused (${got_rc}):\n${out}\n${err}")
  endif()
endfunction()

function(hash_host out_var)
  file(GLOB sdk_libs "${PREFIX}/lib/libmoequant_sdk.so*")
  set(hashes "")
  foreach(f "${PREFIX}/bin/moequant" ${sdk_libs})
    if(NOT IS_SYMLINK "${f}")
      file(SHA256 "${f}" h)
      string(APPEND hashes "${f} ${h}\n")
    endif()
  endforeach()
  set(${out_var} "${hashes}" PARENT_SCOPE)
endfunction()

set(PREFIX "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")

# 1. Install the SDK and the host.
run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}")
foreach(f bin/moequant include/moequant/plugin.hpp include/moequant/version.hpp
          lib/cmake/moequant/moequantConfig.cmake lib/cmake/moequant/MoequantPluginHelpers.cmake)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "sdk test: the install lacks ${f}")
  endif()
endforeach()
# The host's engine is not part of the SDK: neither its headers nor a library are installed.
file(GLOB_RECURSE engine_files "${PREFIX}/include/moequant/engine/*" "${PREFIX}/lib/*moequant_engine*")
if(engine_files)
  message(FATAL_ERROR "sdk test: the install carries the host engine: ${engine_files}")
endif()
hash_host(before)
if(before STREQUAL "")
  message(FATAL_ERROR "sdk test: nothing to hash in ${PREFIX}")
endif()

# 1b. The package's version rule: the SDK minor version is the plugin ABI, so a consumer asking
# for another one (0.23, the ABI before) is refused when it configures, not when its plugin loads.
file(WRITE "${WORK_DIR}/old_abi_consumer/CMakeLists.txt"
  "cmake_minimum_required(VERSION 3.21)\nproject(old_abi_consumer LANGUAGES CXX)\n"
  "find_package(moequant 0.23 CONFIG REQUIRED)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/old_abi_consumer" -B "${WORK_DIR}/old_abi_consumer/build"
                        -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_PREFIX_PATH=${PREFIX}"
                RESULT_VARIABLE old_rc OUTPUT_VARIABLE old_out ERROR_VARIABLE old_err)
if(old_rc EQUAL 0 OR NOT old_err MATCHES "0\\.23")
  message(FATAL_ERROR "sdk test: a consumer asking for SDK 0.23 was not refused:\n${old_out}\n${old_err}")
endif()

# 2. Build both examples out of tree, knowing only the install prefix.
set(launcher_arg "")
if(LAUNCHER)
  set(launcher_arg "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
foreach(example third_party_quantizer third_party_adapter third_party_encoding third_party_format)
  run("configure ${example}" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/${example}" -B "${WORK_DIR}/${example}"
      -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}"
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${launcher_arg})
  run("build ${example}" ${CMAKE_COMMAND} --build "${WORK_DIR}/${example}")
endforeach()
set(quantizer_dir "${WORK_DIR}/third_party_quantizer/moequant-plugins")
set(adapter_dir "${WORK_DIR}/third_party_adapter/moequant-plugins")
set(encoding_dir "${WORK_DIR}/third_party_encoding/moequant-plugins")
set(format_dir "${WORK_DIR}/third_party_format/moequant-plugins")
set(modules "${quantizer_dir}/moequant-quantizer-example_absmax_int8.so" "${adapter_dir}/moequant-adapter-example_toy_moe.so"
            "${encoding_dir}/moequant-encoding-example_int8_rowwise.so" "${format_dir}/moequant-format-example_layer_safetensors.so")
foreach(module ${modules})
  if(NOT EXISTS "${module}")
    message(FATAL_ERROR "sdk test: the example build did not produce ${module}")
  endif()
endforeach()
# 2b. A plugin links the SDK and nothing of the host's: no tokenizer libraries (PCRE2, utf8proc)
# reach a quantizer.
find_program(LDD ldd REQUIRED)
foreach(module ${modules})
  run("ldd ${module}" ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${PREFIX}/lib" ${LDD} "${module}")
  if(NOT LAST_OUTPUT MATCHES "libmoequant_sdk\\.so")
    message(FATAL_ERROR "sdk test: ${module} does not link libmoequant_sdk:\n${LAST_OUTPUT}")
  endif()
  if(LAST_OUTPUT MATCHES "pcre2|utf8proc|moequant_engine|not found")
    message(FATAL_ERROR "sdk test: ${module} links what only the host may (or misses a library):\n${LAST_OUTPUT}")
  endif()
endforeach()
set(host ${CMAKE_COMMAND} -E env --unset=MOEQUANT_PLUGIN_PATH "${PREFIX}/bin/moequant")

# 3. The installed host lists the quantizer from --plugin-dir ...
expect_listed(quantizer "${quantizer_dir}" example_absmax_int8 quantizer example-absmax-int8)

# ... uses the adapter for a checkpoint of its family (synthesized by the adapter itself) ...
run("synth a toy_moe checkpoint" ${host} --plugin-dir "${adapter_dir}" synth --family toy_moe --out "${WORK_DIR}/toy")
run("inspect the toy_moe checkpoint" ${host} --plugin-dir "${adapter_dir}" inspect "${WORK_DIR}/toy")
if(NOT LAST_OUTPUT MATCHES "family: toy_moe" OR NOT LAST_OUTPUT MATCHES "2 of 2 decoder layers carry routed experts"
   OR NOT LAST_OUTPUT MATCHES "4 routed experts per layer")
  message(FATAL_ERROR "sdk test: the host did not plan the toy_moe checkpoint with the example adapter:\n${LAST_OUTPUT}")
endif()

# ... reads the example encoding's weights (the example adapter synthesizes them): inspect names
# the encoding, convert and verify go through it, and without it the weights are refused.
expect_listed(encoding "${encoding_dir}" example_int8_rowwise encoding example-int8-rowwise)
set(both --plugin-dir "${adapter_dir}" --plugin-dir "${encoding_dir}")
run("synth an int8-rowwise toy_moe checkpoint" ${host} ${both} synth --family toy_moe --dtype int8-rowwise --out "${WORK_DIR}/toy8")
run("inspect the int8-rowwise checkpoint" ${host} ${both} inspect "${WORK_DIR}/toy8")
if(NOT LAST_OUTPUT MATCHES "example-int8-rowwise +INT8, one F32 scale per row" OR NOT LAST_OUTPUT MATCHES "family: toy_moe")
  message(FATAL_ERROR "sdk test: inspect did not show the example encoding:\n${LAST_OUTPUT}")
endif()
run("convert the int8-rowwise checkpoint" ${host} ${both} convert -i "${WORK_DIR}/toy8" -o "${WORK_DIR}/toy8-kt" --quiet)
run("verify the int8-rowwise conversion" ${host} ${both} verify --source "${WORK_DIR}/toy8" --converted "${WORK_DIR}/toy8-kt")
expect_refused("converting without the encoding" 3 "UnsupportedEncoding"
               ${host} --plugin-dir "${adapter_dir}" convert -i "${WORK_DIR}/toy8" -o "${WORK_DIR}/toy8-none")

# ... writes a conversion in the example format (planned sizes first), and verify reads it back
# through the format's own reader; a damaged layer file is refused naming it.
expect_listed(format "${format_dir}" example_layer_safetensors format example-layer-safetensors)
set(with_format --plugin-dir "${adapter_dir}" --plugin-dir "${format_dir}")
run("dry-run the example format" ${host} ${with_format} convert -i "${WORK_DIR}/toy" -o "${WORK_DIR}/toy-layers"
    --format example-layer-safetensors --dry-run)
if(NOT LAST_OUTPUT MATCHES "experts-0\\.safetensors" OR EXISTS "${WORK_DIR}/toy-layers/example-index.txt")
  message(FATAL_ERROR "sdk test: the dry run did not plan the example format's files (or wrote them):\n${LAST_OUTPUT}")
endif()
run("convert into the example format" ${host} ${with_format} convert -i "${WORK_DIR}/toy" -o "${WORK_DIR}/toy-layers"
    --format example-layer-safetensors --quiet)
foreach(f experts-0.safetensors experts-1.safetensors example-index.txt)
  if(NOT EXISTS "${WORK_DIR}/toy-layers/${f}")
    message(FATAL_ERROR "sdk test: the example format did not write ${f}")
  endif()
endforeach()
run("verify the example format" ${host} ${with_format} verify --source "${WORK_DIR}/toy" --converted "${WORK_DIR}/toy-layers")
if(NOT LAST_OUTPUT MATCHES "example-layer-safetensors output of amx-int4")
  message(FATAL_ERROR "sdk test: verify did not read the example format:\n${LAST_OUTPUT}")
endif()
file(WRITE "${WORK_DIR}/toy-layers/experts-1.safetensors" "not a safetensors file")
expect_refused("verifying a damaged example-format file" 3 "experts-1\\.safetensors"
               ${host} ${with_format} verify --source "${WORK_DIR}/toy" --converted "${WORK_DIR}/toy-layers")

# 4. ... and, once all four are installed into the prefix, finds them in its own plugin folder.
foreach(example third_party_quantizer third_party_adapter third_party_encoding third_party_format)
  run("install ${example}" ${CMAKE_COMMAND} --install "${WORK_DIR}/${example}" --prefix "${PREFIX}")
endforeach()
run("list from the plugin folder" ${host} plugins)
if(NOT LAST_OUTPUT MATCHES "lib/moequant/plugins/moequant-quantizer-example_absmax_int8.so"
   OR NOT LAST_OUTPUT MATCHES "lib/moequant/plugins/moequant-adapter-example_toy_moe.so"
   OR NOT LAST_OUTPUT MATCHES "lib/moequant/plugins/moequant-encoding-example_int8_rowwise.so"
   OR NOT LAST_OUTPUT MATCHES "lib/moequant/plugins/moequant-format-example_layer_safetensors.so")
  message(FATAL_ERROR "sdk test: the installed host did not find the installed plugins:\n${LAST_OUTPUT}")
endif()
run("inspect with installed plugins" ${host} inspect "${WORK_DIR}/toy8")
if(NOT LAST_OUTPUT MATCHES "family: toy_moe" OR NOT LAST_OUTPUT MATCHES "example-int8-rowwise")
  message(FATAL_ERROR "sdk test: the installed adapter was not used:\n${LAST_OUTPUT}")
endif()

# 5. The host was not touched.
hash_host(after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "sdk test: the installed host changed:\nbefore:\n${before}after:\n${after}")
endif()
message(STATUS "sdk test: the unchanged installed host loads the out-of-tree plugin\n${before}")
