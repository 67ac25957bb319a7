# Compile options for the libFuzzer build (MESH_BUILD_FUZZ=ON). Included by the top-level
# CMakeLists.txt before any library is defined, so that everything the fuzz targets link
# (mesh_common, mesh_engine, mesh_host, mesh_control, the file provider) is compiled with
# coverage instrumentation and the sanitizers; the fuzz targets themselves add
# -fsanitize=fuzzer at link time (fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "MESH_BUILD_FUZZ needs clang with libFuzzer: configure with "
                      "CC=clang-14 CXX=clang++-14 (scripts/fuzz.sh does)")
endif()
if(MESH_SANITIZE)
  message(FATAL_ERROR "MESH_BUILD_FUZZ already builds with ASan and UBSan: leave MESH_SANITIZE OFF")
endif()
# UB is fatal (a report stops the run, like an ASan report) so that scripts/fuzz.sh fails on it.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
# Plugins built in this tree resolve the sanitizer runtimes from the host executable.
set(MESH_PLUGIN_NO_UNDEFINED OFF)
