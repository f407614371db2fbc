#pragma once
// Where the tests find the programs they start (force-included in every
// test file): the build's own vigil, examples and support programs, unless
// VIGIL_TEST_BUILD_DIR names another build's directory. `make asan` runs
// the release build's integration tests, drivers of what they start, with
// VIGIL_TEST_BUILD_DIR=build/asan: the programs under test are the
// instrumented ones, and the drivers are not compiled a second time.
#include <cstdlib>
#include <string>

inline const char* vigil_test_programs_dir() {
  const char* dir = std::getenv("VIGIL_TEST_BUILD_DIR");
  return dir != nullptr && *dir != '\0' ? dir : VIGIL_PROGRAMS_DIR_BUILT;
}

inline const char* vigil_test_binary() {
  static const std::string binary = std::string(vigil_test_programs_dir()) + "/vigil";
  return binary.c_str();
}

#define VIGIL_BINARY (vigil_test_binary())
#define VIGIL_EXAMPLES_DIR (vigil_test_programs_dir())
#define VIGIL_SUPPORT_DIR (vigil_test_programs_dir())
