#pragma once

namespace vigil {

// The nginx release whose behaviour Vigil is compared with and matches
// (docs/compatibility.md); $nginx_version and `vigil -V` tell it.
inline constexpr const char* kNginxCompatibleVersion = "1.22.1";

}  // namespace vigil
