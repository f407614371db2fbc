// The version the headers announce is the one the library was built as, and
// the one CMake's project(VERSION) gives the build.
#include "vigil/version.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil {
namespace {

TEST(Version, MacrosAndRunTimeAgree) {
  const std::string parts = std::to_string(VIGIL_VERSION_MAJOR) + "." +
                            std::to_string(VIGIL_VERSION_MINOR) + "." +
                            std::to_string(VIGIL_VERSION_PATCH);
  EXPECT_EQ(parts, VIGIL_VERSION_STRING);
  EXPECT_EQ(std::string(version_string()), VIGIL_VERSION_STRING);
  EXPECT_EQ(version(), static_cast<unsigned>(VIGIL_VERSION_HEX));
  EXPECT_EQ(version() >> 16, static_cast<unsigned>(VIGIL_VERSION_MAJOR));
  EXPECT_EQ((version() >> 8) & 0xff, static_cast<unsigned>(VIGIL_VERSION_MINOR));
  EXPECT_EQ(version() & 0xff, static_cast<unsigned>(VIGIL_VERSION_PATCH));
#ifdef VIGIL_VERSION
  EXPECT_EQ(std::string(VIGIL_VERSION), VIGIL_VERSION_STRING) << "project(VERSION) in CMakeLists.txt";
#endif
  static_assert(VIGIL_VERSION_HEX >= 0x000100, "0.1.0 was the first");
}

}  // namespace
}  // namespace vigil
