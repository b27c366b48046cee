# Unit tests: one GoogleTest binary beside each subsystem (<subsystem>/test),
# labelled "unit", with the fixtures the tiers share (tests/README.md).
include(GoogleTest)

# sysfs fixture trees are generated (they need empty directories git can't hold).
set(PREFLIGHT_SYSFS_FIXTURES_DIR ${CMAKE_BINARY_DIR}/fixtures/sysfs)
execute_process(COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fixtures/sysfs/make_fixtures.sh ${PREFLIGHT_SYSFS_FIXTURES_DIR}
  RESULT_VARIABLE _fixtures_rc)
if(NOT _fixtures_rc EQUAL 0)
  message(FATAL_ERROR "tests/fixtures/sysfs/make_fixtures.sh failed")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fixtures/sysfs/make_fixtures.sh)

# preflight_unit_test(NAME SOURCES file... LIBS target...)
# Every binary sees: the captured topologies (PREFLIGHT_TOPO_FIXTURES), the
# fake NVML loaded through the real dlopen path (PREFLIGHT_FAKE_NVML), the
# sysfs fixture trees (PREFLIGHT_SYSFS_FIXTURES) and the stand-in training
# program (PF_TEST_APP).
function(preflight_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} preflight_test_support GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    PREFLIGHT_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology"
    PREFLIGHT_FAKE_NVML="$<TARGET_FILE:fake_nvml>"
    PREFLIGHT_SYSFS_FIXTURES="${PREFLIGHT_SYSFS_FIXTURES_DIR}"
    PF_TEST_APP="$<TARGET_FILE:pf_test_app>")
  add_dependencies(${name} fake_nvml pf_test_app)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS unit)
endfunction()
