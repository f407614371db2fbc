// The version the library was built as (vigil/version.h is generated from
// project(VERSION) in CMakeLists.txt).
#include "vigil/version.h"

namespace vigil {

unsigned version() {
  return VIGIL_VERSION_HEX;
}

const char* version_string() {
  return VIGIL_VERSION_STRING;
}

}  // namespace vigil
