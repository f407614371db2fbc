// A request body in a temporary file (request_body.h; nginx's
// ngx_http_write_request_body and ngx_create_temp_file): the file is made in
// the location's client_body_temp_path, named by a ten-digit number, inside
// the directory levels the path asks for (the last digits of the name, as
// nginx's "levels"). The directories are made when a file first needs them,
// by the worker that writes it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "http/core/request.h"
#include "http/core/request_body.h"
#include "http/core/worker.h"
#include "vigil/core/log.h"

namespace vigil::http {
namespace {

constexpr std::size_t kNameDigits = 10;
constexpr int kMaxNameTries = 64;

// The next file number of this process (a worker writes its own files; the
// pid spreads the workers apart, O_EXCL settles any collision).
std::uint32_t next_number() {
  static std::uint32_t number = static_cast<std::uint32_t>(::getpid()) * 7919u % 1000000000u;
  number = number >= 4000000000u ? 1 : number + 1;
  return number;
}

// Writes "<path>/<levels...>/<number>" with its NUL into `out` (room for
// it checked by the caller); returns the length.
std::size_t format_name(const HttpLocConf& loc, std::uint32_t number, char* out) {
  char digits[kNameDigits + 1];
  std::snprintf(digits, sizeof digits, "%010u", number);
  char* p = out;
  std::memcpy(p, loc.client_body_temp_path.data(), loc.client_body_temp_path.size());
  p += loc.client_body_temp_path.size();
  std::size_t from = kNameDigits;  // levels take digits from the end of the name
  for (const std::uint8_t level : loc.client_body_temp_levels) {
    if (level == 0) break;
    from -= level;
    *p++ = '/';
    std::memcpy(p, digits + from, level);
    p += level;
  }
  *p++ = '/';
  std::memcpy(p, digits, kNameDigits);
  p += kNameDigits;
  *p = '\0';
  return static_cast<std::size_t>(p - out);
}

// Makes the temporary path's directory and its levels above `name` (each
// may exist already).
bool make_directories(char* name, std::size_t path_len, std::size_t name_len, Connection& c) {
  for (std::size_t i = path_len; i < name_len; ++i) {
    if (name[i] != '/') continue;
    name[i] = '\0';
    const int rc = ::mkdir(name, 0700);
    const int err = errno;
    if (rc == -1 && err != EEXIST) {
      VIGIL_LOG(*c.log, kCrit, err, "*%llu mkdir() \"%s\" failed",
                static_cast<unsigned long long>(c.number), name);
      name[i] = '/';
      return false;
    }
    name[i] = '/';
  }
  return true;
}

bool open_file(Request& r) {
  RequestBody& rb = r.body;
  const HttpLocConf& loc = *r.loc;
  Connection& c = *r.c;
  const std::size_t need = loc.client_body_temp_path.size() + 3 * 3 + 1 + kNameDigits + 1;
  if (r.hc->worker->buffers().reserve(rb.file_name, rb.file_name_size, need) == nullptr) {
    return false;
  }
  bool dirs_made = false;
  std::size_t len = 0;
  for (int attempt = 0; attempt < kMaxNameTries; ++attempt) {
    if (len == 0) len = format_name(loc, next_number(), rb.file_name);
    const int fd = ::open(rb.file_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd != -1) {
      rb.file_fd = fd;
      rb.file_name_len = static_cast<std::uint32_t>(len);
      rb.file_keep = loc.client_body_in_file_only == BodyInFile::kOn;
      rb.file_size = 0;
      return true;
    }
    const int err = errno;
    if (err == EEXIST) {
      len = 0;  // another name
      continue;
    }
    if (err == ENOENT && !dirs_made) {  // the same name again, in the directories made
      dirs_made = true;
      if (!make_directories(rb.file_name, loc.client_body_temp_path.size(), len, c)) return false;
      continue;
    }
    VIGIL_LOG(*c.log, kCrit, err, "*%llu open() \"%s\" failed",
              static_cast<unsigned long long>(c.number), rb.file_name);
    return false;
  }
  VIGIL_LOG(*c.log, kCrit, 0, "*%llu no free temporary file name in \"%s\"",
            static_cast<unsigned long long>(c.number), loc.client_body_temp_path.c_str());
  return false;
}

}  // namespace

bool request_body_in_file_only(const Request& r) {
  return r.loc != nullptr && r.loc->client_body_in_file_only != BodyInFile::kOff;
}

bool request_body_write(Request& r) {
  RequestBody& rb = r.body;
  if (rb.file_fd == -1 && !open_file(r)) return false;
  Buf& b = rb.buf;
  while (b.pos < b.last) {
    const ssize_t n = ::pwrite(rb.file_fd, b.pos, static_cast<std::size_t>(b.last - b.pos),
                               rb.file_size);
    if (n == -1) {
      if (errno == EINTR) continue;
      const int err = errno;
      VIGIL_LOG(*r.c->log, kCrit, err, "*%llu pwrite() \"%s\" failed",
                static_cast<unsigned long long>(r.c->number), rb.file_name);
      return false;
    }
    b.pos += n;
    rb.file_size += n;
  }
  b.pos = b.last = b.start;
  return true;
}

void request_body_done_in_file(Request& r) {
  RequestBody& rb = r.body;
  rb.file = Buf{};
  rb.file.in_file = true;
  rb.file.file_fd = rb.file_fd;
  rb.file.file_pos = 0;
  rb.file.file_last = rb.file_size;
}

Buf& request_body_data(Request& r) {
  return r.body.file.in_file ? r.body.file : r.body.buf;
}

void release_request_body_file(Request& r) {
  RequestBody& rb = r.body;
  if (rb.file_fd != -1) {
    if (::close(rb.file_fd) == -1) {
      VIGIL_LOG(*r.c->log, kAlert, errno, "*%llu close() \"%s\" failed",
                static_cast<unsigned long long>(r.c->number), rb.file_name);
    }
    if (!rb.file_keep && ::unlink(rb.file_name) == -1) {
      VIGIL_LOG(*r.c->log, kCrit, errno, "*%llu unlink() \"%s\" failed",
                static_cast<unsigned long long>(r.c->number), rb.file_name);
    }
    rb.file_fd = -1;
  }
  if (rb.file_name != nullptr) {
    r.hc->worker->buffers().put(rb.file_name, rb.file_name_size);
    rb.file_name = nullptr;
    rb.file_name_size = 0;
  }
  rb.file = Buf{};
}

}  // namespace vigil::http
