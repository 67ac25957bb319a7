# Read by ctest after the discovered tests of this directory (TEST_INCLUDE_FILES): both locks on
# every PackagesSystemTest (gtest_discover_tests cannot pass a list-valued property: it splits it).
foreach(t IN LISTS packages_system_test_TESTS)
  set_tests_properties("${t}" PROPERTIES RESOURCE_LOCK "mesh_cpack;dpkg" COST 200)  # COST: decision 129
endforeach()
