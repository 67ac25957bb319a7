# Read by ctest after the discovered tests of this directory (TEST_INCLUDE_FILES): both locks on
# every test here. (gtest_discover_tests cannot pass a list-valued property: it splits it.)
#   mesh_cpack: one cpack per build tree at a time (tests/packaging takes it too);
#   dpkg: the overlays' lower layer is the machine's dpkg database, which other system tests change.
# COST: ctest starts the costliest test first (decision 129). These two suites hold both locks for
# about six minutes on the 2-core build machine; begun first, they run beside the other tests
# instead of alone at the end.
foreach(t IN LISTS host_upgrade_system_test_TESTS)
  set_tests_properties("${t}" PROPERTIES RESOURCE_LOCK "mesh_cpack;dpkg" COST 400)
endforeach()
foreach(t IN LISTS host_rollback_script_test_TESTS)
  set_tests_properties("${t}" PROPERTIES RESOURCE_LOCK "mesh_cpack;dpkg" COST 300)
endforeach()
