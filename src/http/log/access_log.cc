#include "http/log/access_log.h"

#include <cstring>

#include "codec/head_writer.h"
#include "vigil/core/clock.h"

namespace vigil::http {
namespace {

char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* put_uint(char* p, std::uint64_t v) {
  char tmp[20];
  return put(p, decimal(v, tmp));
}

// A value that is empty is logged as "-", as nginx does for unset variables.
char* put_value(char* p, std::string_view s) {
  if (s.empty()) return put(p, "-");
  return escape_log_value(s, p);
}

}  // namespace

std::size_t combined_line_size(const AccessLogLine& l) {
  // Worst case: every value byte escaped to 4, plus the fixed parts.
  return 4 * (l.request.size() + l.referer.size() + l.user_agent.size() + l.remote_user.size()) +
         l.remote_addr.size() + 128;
}

char* write_combined_line(const AccessLogLine& l, char* p) {
  p = put(p, l.remote_addr.empty() ? std::string_view("-") : l.remote_addr);
  p = put(p, " - ");
  p = put_value(p, l.remote_user);
  p = put(p, " [");
  p = put(p, clock::common_log_time());
  p = put(p, "] \"");
  p = escape_log_value(l.request, p);
  p = put(p, "\" ");
  p = put_uint(p, static_cast<std::uint64_t>(l.status));
  *p++ = ' ';
  p = put_uint(p, static_cast<std::uint64_t>(l.body_bytes > 0 ? l.body_bytes : 0));
  p = put(p, " \"");
  p = put_value(p, l.referer);
  p = put(p, "\" \"");
  p = put_value(p, l.user_agent);
  return put(p, "\"\n");
}

bool write_combined(AccessLog& log, const AccessLogLine& l, Log& err) {
  char* line = log.begin(combined_line_size(l), err);
  return log.end(write_combined_line(l, line), err);
}

}  // namespace vigil::http
