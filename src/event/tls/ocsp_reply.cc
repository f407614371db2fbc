#include "event/tls/ocsp_reply.h"

#include <cstddef>

namespace vigil {
namespace {

constexpr char kInvalid[] = "OCSP responder sent invalid response";
constexpr char kInvalidType[] = "OCSP responder sent invalid \"Content-Type\" header";

bool is_digit(char ch) {
  return ch >= '0' && ch <= '9';
}

bool is_name_char(char ch) {
  const char low = static_cast<char>(ch | 0x20);
  return (low >= 'a' && low <= 'z') || is_digit(ch) || ch == '-';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x | 0x20);
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y | 0x20);
    if (x != y) return false;
  }
  return true;
}

// The line starting at `pos`, without its LF or CRLF; npos when it has no
// end yet, `bad` when a CR is not followed by LF.
std::size_t line_end(std::string_view in, std::size_t pos, std::size_t& next, bool& bad) {
  const std::size_t lf = in.find('\n', pos);
  if (lf == std::string_view::npos) return std::string_view::npos;
  next = lf + 1;
  std::size_t end = lf;
  if (end > pos && in[end - 1] == '\r') --end;
  bad = in.substr(pos, end - pos).find('\r') != std::string_view::npos;
  return end;
}

bool parse_status_line(std::string_view line, int& status) {
  if (!line.starts_with("HTTP/")) return false;  // layer-names-ok: OCSP over HTTP (RFC 6960 A.1)
  std::size_t i = 5;
  if (i >= line.size() || line[i] < '1' || line[i] > '9') return false;
  while (i < line.size() && is_digit(line[i])) ++i;
  if (i >= line.size() || line[i] != '.') return false;
  ++i;
  if (i >= line.size() || !is_digit(line[i])) return false;
  while (i < line.size() && is_digit(line[i])) ++i;
  if (i >= line.size() || line[i] != ' ') return false;
  while (i < line.size() && line[i] == ' ') ++i;
  int code = 0;
  for (int n = 0; n < 3; ++n, ++i) {
    if (i >= line.size() || !is_digit(line[i])) return false;
    code = code * 10 + (line[i] - '0');
  }
  // Then the end, or a reason after a space (or after '.': IIS's "403.1").
  if (i < line.size() && line[i] != ' ' && line[i] != '.') return false;
  status = code;
  return true;
}

}  // namespace

bool ocsp_parse_reply(std::string_view in, OcspReply& out) {
  out = OcspReply{};
  std::size_t next = 0;
  bool bad = false;
  std::size_t end = line_end(in, 0, next, bad);
  if (end == std::string_view::npos) return false;
  if (bad || !parse_status_line(in.substr(0, end), out.status)) {
    out.error = kInvalid;
    return false;
  }
  for (;;) {
    const std::size_t pos = next;
    end = line_end(in, pos, next, bad);
    if (end == std::string_view::npos) return false;
    if (bad) {
      out.error = kInvalid;
      return false;
    }
    const std::string_view line = in.substr(pos, end - pos);
    if (line.empty()) break;
    std::size_t i = 0;
    while (i < line.size() && is_name_char(line[i])) ++i;
    if (i == 0 || (i < line.size() && line[i] != ':')) {
      out.error = kInvalid;
      return false;
    }
    const std::string_view name = line.substr(0, i);
    std::string_view value = i < line.size() ? line.substr(i + 1) : std::string_view();
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (iequals(name, "Content-Type") && !iequals(value, "application/ocsp-response")) {
      out.content_type = value;
      out.error = kInvalidType;
      return false;
    }
  }
  out.body = in.substr(next);
  return true;
}

}  // namespace vigil
