#include "event/local_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

namespace vigil {

// The local address of the connection: the listener's, or the socket's own
// when the listener is a wildcard (nginx's ngx_connection_local_sockaddr).
bool connection_local_text(const Connection& conn, char* text, std::size_t cap, std::size_t& len) {
  const Connection* c = &conn;
  if (c->local_addr == nullptr) return false;
  sockaddr_storage ss{};
  const sockaddr* sa = c->local_addr;
  bool wildcard = false;
  if (sa->sa_family == AF_UNIX) {
    // "unix:/path", as nginx's.
    const char* path = reinterpret_cast<const sockaddr_un*>(sa)->sun_path;
    const std::size_t n = ::strnlen(path, sizeof(sockaddr_un::sun_path));
    if (n + 6 > cap) return false;
    std::memcpy(text, "unix:", 5);
    std::memcpy(text + 5, path, n);
    text[n + 5] = '\0';
    len = n + 5;
    return true;
  }
  if (sa->sa_family == AF_INET) {
    wildcard = reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  } else if (sa->sa_family == AF_INET6) {
    wildcard = IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  }
  if (wildcard) {
    socklen_t sl = sizeof ss;
    if (::getsockname(c->fd, reinterpret_cast<sockaddr*>(&ss), &sl) == -1) return false;
    sa = reinterpret_cast<const sockaddr*>(&ss);
  }
  const void* a =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  if (::inet_ntop(sa->sa_family, a, text, static_cast<socklen_t>(cap)) == nullptr) return false;
  len = std::strlen(text);
  return true;
}

}  // namespace vigil
