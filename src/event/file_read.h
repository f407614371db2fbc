#pragma once
// Reading a response's file range into memory, for those that cannot send it
// with sendfile(2): the HTTP/1 writer with sendfile off, TLS without kTLS,
// the compression filters (src/event/io.cc).

#include <sys/types.h>

#include <cstddef>

namespace vigil {

class Connection;

// One pread(2) of up to `len` bytes at `off`, retried on EINTR: the count
// read, or 0 after logging on c's log why nothing could be (an error at
// crit, a file that ended before its range at alert).
std::size_t read_file_some(Connection& c, int fd, off_t off, char* to, std::size_t len);
// Exactly `len` bytes (read_file_some until they are all there); false as
// soon as one read gives none.
bool read_file_exact(Connection& c, int fd, off_t off, char* to, std::size_t len);

}  // namespace vigil
