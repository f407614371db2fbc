#include "core/unix_addr.h"

#include <sys/un.h>

#include <cstddef>
#include <cstring>

namespace vigil {

bool make_unix_sockaddr(std::string_view path, sockaddr_storage& ss, socklen_t& len) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path) ||
      path.find('\0') != std::string_view::npos) {
    return false;
  }
  ss = {};
  auto& sun = reinterpret_cast<sockaddr_un&>(ss);
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.data(), path.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return true;
}

}  // namespace vigil
