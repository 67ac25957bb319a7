# MixedDeclarationSystemTest: one declaration with file, package, service and container resources,
# applied by the real mesh-host inside a systemd sandbox against apt (a local repository), systemd
# and podman (label system; root; skips with the reason when a backend is missing). It reuses the
# providers' test fixtures, so it is built only when their libraries are.
if(TARGET mesh_test_systemd AND TARGET mesh_test_apt_repo AND TARGET mesh_test_podman)
  add_executable(mixed_system_test ${CMAKE_CURRENT_LIST_DIR}/mixed_system_test.cpp)
  target_link_libraries(mixed_system_test PRIVATE
    mesh_test_systemd mesh_test_apt_repo mesh_test_podman GTest::gtest_main)
  target_compile_definitions(mixed_system_test PRIVATE ${MESH_TEST_DEFINITIONS}
    MESH_TEST_BUILD_DIR="${CMAKE_BINARY_DIR}")
  add_dependencies(mixed_system_test mesh-host
    mesh-provider-file mesh-provider-package mesh-provider-service mesh-provider-container)
  gtest_discover_tests(mixed_system_test
    PROPERTIES LABELS system RESOURCE_LOCK dpkg COST 100 TIMEOUT 600 DISCOVERY_TIMEOUT 30)
endif()
