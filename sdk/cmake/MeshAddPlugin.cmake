# mesh_add_plugin(NAME KIND SOURCES ... [LIBRARIES ...] [NO_INSTALL] [COMPONENT COMP])
#
# Builds a Nox Mesh plugin as a MODULE library named mesh-<KIND>-<NAME>.so, with hidden
# visibility, a linker version script that exports exactly the entry point mesh_plugin_info_v1
# (MESH_PLUGIN_INFO_SYMBOL in mesh/sdk/abi.h) and makes every other symbol local — also the weak
# template instantiations of libstdc++ or Boost that hidden visibility alone leaves exported, and
# that could interpose with another module's copies —, -fno-gnu-unique with GCC (so unloading
# behaves the same everywhere; clang has no such flag and emits no unique symbols) and
# -Wl,--no-undefined. The same helper is used in the Nox Mesh tree and shipped with the installed
# SDK (find_package(NoxMeshSdk)), so a third-party plugin's CMakeLists.txt looks exactly like ours.
# It builds with GCC and clang (GNU ld, gold or lld). The target name is mesh-<KIND>-<NAME>.
# NO_INSTALL leaves the plugin out of `cmake --install` (test-only plugins). COMPONENT names the
# install component (and so the CPack package) the plugin belongs to; without it, install()'s
# default (CMAKE_INSTALL_DEFAULT_COMPONENT_NAME, normally "Unspecified").
#
# mesh_add_plugin_library(TARGET STATIC|OBJECT SOURCES...)
#
# A static or object library whose code ends up inside a plugin module (a plugin's implementation,
# kept out of the module so that tests can link it; or code shared by several plugins): built with
# the same code generation as mesh_add_plugin gives the module's own sources (see
# mesh_plugin_code_generation), so that nothing it defines is exported from the module or
# interposes with another module's copies. Link it into the module with mesh_add_plugin's
# LIBRARIES. Usage requirements (include directories, libraries) are added with the usual
# target_* commands.
#
# mesh_plugin_code_generation(TARGET)
#
# Gives an existing target the code generation of a plugin: position-independent code, hidden
# visibility (inline functions too), C++20, -Wall -Wextra, and -fno-gnu-unique with GCC only.
# mesh_add_plugin and mesh_add_plugin_library call it; call it yourself for a target made
# otherwise.
#
# Variables read (all optional):
#   MESH_PLUGIN_OUTPUT_DIR    where the built .so goes (default: the current binary dir)
#   MESH_PLUGIN_INSTALL_DIR   where `cmake --install` puts it (default: lib/nox-mesh/plugins)
#   MESH_PLUGIN_NO_UNDEFINED  OFF to drop -Wl,--no-undefined (sanitizer builds)
include_guard(GLOBAL)

function(mesh_plugin_code_generation target)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    CXX_STANDARD 20
    CXX_STANDARD_REQUIRED ON)
  # -fno-gnu-unique: GCC's STB_GNU_UNIQUE symbols would keep a module mapped after dlclose; clang
  # emits none and does not know the flag.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-fno-gnu-unique> -Wall -Wextra)
endfunction()

function(mesh_add_plugin_library target type)
  if(NOT type STREQUAL "STATIC" AND NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "mesh_add_plugin_library(${target}): type '${type}' must be STATIC or OBJECT")
  endif()
  add_library(${target} ${type} ${ARGN})
  mesh_plugin_code_generation(${target})
endfunction()

function(mesh_add_plugin name kind)
  cmake_parse_arguments(ARG "NO_INSTALL" "COMPONENT" "SOURCES;LIBRARIES" ${ARGN})
  set(valid_kinds provider transport store stage report)
  if(NOT kind IN_LIST valid_kinds)
    message(FATAL_ERROR "mesh_add_plugin(${name}): kind '${kind}' is not one of ${valid_kinds}")
  endif()
  if(NOT name MATCHES "^[a-z0-9][a-z0-9_-]*$")
    message(FATAL_ERROR "mesh_add_plugin: name '${name}' must match [a-z0-9][a-z0-9_-]*")
  endif()
  set(target mesh-${kind}-${name})
  add_library(${target} MODULE ${ARG_SOURCES} ${ARG_UNPARSED_ARGUMENTS})
  if(TARGET NoxMesh::sdk)
    target_link_libraries(${target} PRIVATE NoxMesh::sdk)
  else()
    target_link_libraries(${target} PRIVATE mesh_sdk)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${target})
  mesh_plugin_code_generation(${target})
  if(MESH_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${MESH_PLUGIN_OUTPUT_DIR})
  endif()
  # One version script for every plugin, written next to the build (rewritten only when its text
  # changes, so it does not force relinking).
  set(exports ${CMAKE_BINARY_DIR}/mesh-plugin-exports.map)
  file(CONFIGURE OUTPUT ${exports} @ONLY CONTENT [[
/* Written by mesh_add_plugin: a Nox Mesh plugin exports exactly its entry point. */
{
  global: mesh_plugin_info_v1;
  local: *;
};
]])
  target_link_options(${target} PRIVATE -Wl,--version-script=${exports})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${exports})
  if(NOT DEFINED MESH_PLUGIN_NO_UNDEFINED OR MESH_PLUGIN_NO_UNDEFINED)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  if(ARG_NO_INSTALL)
    return()
  endif()
  if(MESH_PLUGIN_INSTALL_DIR)
    set(dest ${MESH_PLUGIN_INSTALL_DIR})
  else()
    include(GNUInstallDirs)
    set(dest ${CMAKE_INSTALL_LIBDIR}/nox-mesh/plugins)
  endif()
  if(ARG_COMPONENT)
    install(TARGETS ${target} LIBRARY DESTINATION ${dest} COMPONENT ${ARG_COMPONENT})
  else()
    install(TARGETS ${target} LIBRARY DESTINATION ${dest})
  endif()
endfunction()
