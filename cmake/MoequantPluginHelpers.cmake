# moequant_add_plugin(<id> KIND adapter|quantizer|format|encoding|reader SOURCES <src>...
#                     [ISA_SOURCES <src>... ISA_FLAGS <flag>...]
#                     [LINK_LIBRARIES <lib>...] [OUTPUT_DIRECTORY <dir>]
#                     [INSTALL | NO_INSTALL])
#
# Builds one moequant plugin module named moequant-<kind>-<id>.so, the way every plugin
# (first-party or third-party) must be built:
#  - a MODULE library linked against the shared moequant::sdk only (never a second copy of it,
#    never the host engine);
#  - hidden visibility, so only the entry point exported by MOEQUANT_PLUGIN is visible;
#  - --no-undefined, so a missing symbol fails at link time instead of at load time;
#  - --exclude-libs,ALL, so static dependencies do not leak symbols into other plugins;
#  - ISA flags (e.g. -mavx512f) only on ISA_SOURCES, so nothing runs vector code before the
#    run-time CPU check.
# In the moequant source tree the module goes to the build tree's plugin folder and is
# installed with the host; outside it goes to ${CMAKE_BINARY_DIR}/moequant-plugins and is
# installed (with INSTALL) into the plugin folder of the consumer's install prefix.
# NO_INSTALL keeps an in-tree module (e.g. a test fixture) out of the install.
include_guard(GLOBAL)

function(moequant_add_plugin id)
  cmake_parse_arguments(P "INSTALL;NO_INSTALL" "KIND;OUTPUT_DIRECTORY"
                        "SOURCES;ISA_SOURCES;ISA_FLAGS;LINK_LIBRARIES" ${ARGN})
  if(NOT id MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "moequant_add_plugin: plugin id '${id}' must match [a-z0-9_]+")
  endif()
  if(NOT P_KIND MATCHES "^(adapter|quantizer|format|encoding|reader)$")
    message(FATAL_ERROR "moequant_add_plugin(${id}): KIND must be adapter, quantizer, format, encoding or reader")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "moequant_add_plugin(${id}): SOURCES is empty")
  endif()
  if(DEFINED MOEQUANT_CXX_COMPILER_ID AND
     NOT "${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}" MATCHES
         "^${MOEQUANT_CXX_COMPILER_ID}-${MOEQUANT_CXX_COMPILER_MAJOR}\\.")
    message(FATAL_ERROR
      "moequant_add_plugin(${id}): this moequant SDK was built with "
      "${MOEQUANT_CXX_COMPILER_ID} ${MOEQUANT_CXX_COMPILER_MAJOR}, but this project uses "
      "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}. Plugins must use the same "
      "compiler family and major version (C++ interfaces cross the plugin boundary).")
  endif()

  set(target "moequant-${P_KIND}-${id}")
  add_library(${target} MODULE ${P_SOURCES} ${P_ISA_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "moequant-${P_KIND}-${id}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PRIVATE cxx_std_20)
  if(P_ISA_SOURCES AND P_ISA_FLAGS)
    set_source_files_properties(${P_ISA_SOURCES} TARGET_DIRECTORY ${target}
                                PROPERTIES COMPILE_OPTIONS "${P_ISA_FLAGS}")
  endif()
  target_link_libraries(${target} PRIVATE moequant::sdk ${P_LINK_LIBRARIES})
  target_link_options(${target} PRIVATE "LINKER:--exclude-libs,ALL")
  # ASan/UBSan builds leave runtime symbols to the host executable.
  if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize" AND NOT MOEQUANT_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()

  if(PROJECT_NAME STREQUAL "moequant" AND DEFINED MOEQUANT_PLUGIN_OUTPUT_DIR)
    set(outdir "${MOEQUANT_PLUGIN_OUTPUT_DIR}")
    if(NOT P_NO_INSTALL)
      set(P_INSTALL ON)
    endif()
    set(installdir "${MOEQUANT_PLUGIN_INSTALL_DIR}")
  else()
    set(outdir "${CMAKE_BINARY_DIR}/moequant-plugins")
    set(installdir "${MOEQUANT_PLUGIN_RELATIVE_INSTALL_DIR}")
  endif()
  if(P_OUTPUT_DIRECTORY)
    set(outdir "${P_OUTPUT_DIRECTORY}")
  endif()
  set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${outdir}")
  if(P_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${installdir}")
  endif()
endfunction()
