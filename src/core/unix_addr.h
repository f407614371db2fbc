#pragma once
// The address of a unix-domain stream socket named by its path: what
// "unix:/path" means in listen, upstream server and proxy_pass.

#include <sys/socket.h>

#include <string_view>

namespace vigil {

// `path` (the text after "unix:") as a sockaddr_un in `ss`, its length in
// `len`; false, `ss` untouched, when the path is empty, does not fit in
// sun_path with its terminating NUL (107 bytes on Linux) or holds a NUL.
bool make_unix_sockaddr(std::string_view path, sockaddr_storage& ss, socklen_t& len);

}  // namespace vigil
