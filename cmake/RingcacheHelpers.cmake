# Test groups (ctest labels; `deploy/test.sh --label L` runs one, docs/testing.md):
#   unit       in one process: googletest binaries and small tool runs, no daemon started
#   cluster    cross-process: a test that starts real daemons (data node, etcd, ringcache-local)
#   e2e        end-to-end scripts: clusters of daemons driven by real clients (qemu-io, fio, ...)
#   fault      the fault-injection checker (tests/fault/fault_test.py) and its nemeses
#   sanitizer  what the ASan+UBSan build (RINGCACHE_SANITIZE) runs; only that tree has it
# Every test carries exactly one label, so that the groups add up to the whole suite.
set(RINGCACHE_TEST_LABELS unit cluster e2e fault sanitizer)

# Every test also carries its name in its environment (RINGCACHE_CTEST; a googletest binary's
# tests the binary's name), and so does every process it starts, daemons included:
# deploy/test_cpu.py adds up the CPU each test used by it.

# rc_name_tests(test...): puts RINGCACHE_CTEST=<name> in the environment of each test.
function(rc_name_tests)
  foreach(t IN LISTS ARGN)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT RINGCACHE_CTEST=${t})
  endforeach()
endfunction()

# rc_label_tests(LABEL test...): sets the label of tests registered with add_test (and names
# them, rc_name_tests).
function(rc_label_tests label)
  if(NOT label IN_LIST RINGCACHE_TEST_LABELS)
    message(FATAL_ERROR "rc_label_tests: unknown label ${label}")
  endif()
  set_tests_properties(${ARGN} PROPERTIES LABELS ${label})
  rc_name_tests(${ARGN})
endfunction()

# rc_add_gtest(NAME SOURCES a_test.cc ... LIBS lib ... [LABEL unit|cluster] [SANITIZER])
# Builds a googletest binary and registers each of its tests with ctest under LABEL (default
# unit). SANITIZER puts the binary in the sanitizer pass: in a RINGCACHE_SANITIZE build its tests
# carry the label `sanitizer` instead, and the target `sanitizer-tests` builds it.
function(rc_add_gtest name)
  cmake_parse_arguments(ARG "SANITIZER" "LABEL" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_LABEL IN_LIST RINGCACHE_TEST_LABELS)
    message(FATAL_ERROR "rc_add_gtest(${name}): unknown label ${ARG_LABEL}")
  endif()
  if(ARG_SANITIZER AND RINGCACHE_SANITIZE)
    set(ARG_LABEL sanitizer)
    set_property(GLOBAL APPEND PROPERTY RINGCACHE_SANITIZER_TARGETS ${name})
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 300 LABELS ${ARG_LABEL} ENVIRONMENT RINGCACHE_CTEST=${name})
endfunction()

# rc_sanitizer_needs(target...): targets the sanitizer pass's tests run besides their own binary
# (daemons, test servers); `sanitizer-tests` builds them too.
function(rc_sanitizer_needs)
  if(RINGCACHE_SANITIZE)
    set_property(GLOBAL APPEND PROPERTY RINGCACHE_SANITIZER_TARGETS ${ARGN})
  endif()
endfunction()

# rc_add_fuzz(NAME SOURCES a_fuzz.cc ... LIBS lib ... CORPUS dir [RUNS n])
# A fuzz target (a file defining LLVMFuzzerTestOneInput) linked with the project's driver
# (common/testing/fuzz_main.cc), registered as the test Fuzz.NAME: every seed of the checked-in
# CORPUS, then RUNS (default 20000) mutated inputs of a fixed seed, so that a run is the same
# every time. Label unit; in a RINGCACHE_SANITIZE build it runs in the sanitizer pass (ASan,
# UBSan), which is where a fuzz target finds most. tests/fuzz/fuzz.sh runs them longer.
function(rc_add_fuzz name)
  cmake_parse_arguments(ARG "" "CORPUS;RUNS" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_RUNS)
    set(ARG_RUNS 20000)
  endif()
  set(label unit)
  if(RINGCACHE_SANITIZE)
    set(label sanitizer)
    set_property(GLOBAL APPEND PROPERTY RINGCACHE_SANITIZER_TARGETS ${name})
  endif()
  add_executable(${name} ${ARG_SOURCES} ${CMAKE_SOURCE_DIR}/common/testing/fuzz_main.cc)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  add_test(NAME Fuzz.${name} COMMAND ${name} --runs ${ARG_RUNS} --seed 1 ${ARG_CORPUS})
  set_tests_properties(Fuzz.${name} PROPERTIES TIMEOUT 300 LABELS ${label})
  rc_name_tests(Fuzz.${name})
  set_property(GLOBAL APPEND PROPERTY RINGCACHE_FUZZ_TARGETS ${name})
endfunction()
