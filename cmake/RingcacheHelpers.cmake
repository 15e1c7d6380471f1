# Test groups (ctest labels; `deploy/test.sh --label L` runs one, docs/testing.md):
#   unit       in one process: googletest binaries and small tool runs, no daemon started
#   cluster    cross-process: a test that starts real daemons (data node, etcd, ringcache-local)
#   e2e        end-to-end scripts: clusters of daemons driven by real clients (qemu-io, fio, ...)
#   fault      the fault-injection checker (tests/fault/fault_test.py) and its nemeses
#   sanitizer  what the ASan+UBSan build (RINGCACHE_SANITIZE) runs; only that tree has it
# Every test carries exactly one label, so that the groups add up to the whole suite.
set(RINGCACHE_TEST_LABELS unit cluster e2e fault sanitizer)

# rc_label_tests(LABEL test...): sets the label of tests registered with add_test.
function(rc_label_tests label)
  if(NOT label IN_LIST RINGCACHE_TEST_LABELS)
    message(FATAL_ERROR "rc_label_tests: unknown label ${label}")
  endif()
  set_tests_properties(${ARGN} PROPERTIES LABELS ${label})
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
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS ${ARG_LABEL})
endfunction()

# rc_sanitizer_needs(target...): targets the sanitizer pass's tests run besides their own binary
# (daemons, test servers); `sanitizer-tests` builds them too.
function(rc_sanitizer_needs)
  if(RINGCACHE_SANITIZE)
    set_property(GLOBAL APPEND PROPERTY RINGCACHE_SANITIZER_TARGETS ${ARGN})
  endif()
endfunction()
