#pragma once
// Checks on a complete request head that no single field line can decide
// (RFC 9112 §3.2, §6, §9.3; RFC 9110 §7.2, §7.6.1, §10.1.1): Host, message
// framing (Content-Length / Transfer-Encoding), persistence and Expect.
//
// The server feeds every field as it is parsed (or passes the stored list to
// check_headers) and acts on the result: status != 0 means answer that status
// and close the connection.

#include <cstdint>
#include <span>
#include <string_view>

#include "codec/parse.h"

namespace vigil::http {

// Content-Length = 1*DIGIT (RFC 9110 §8.6); -1 when invalid or beyond int64.
// Requests and proxied responses share it.
std::int64_t parse_content_length(std::string_view v);

struct HeaderCheck {
  int status = 0;                    // 0: acceptable; else 400 or 501 to answer
  const char* error = "";            // why, for the error log
  std::int64_t content_length = -1;  // -1: no Content-Length
  bool chunked = false;              // Transfer-Encoding: chunked; the body uses chunked.h
  // Whether the connection may stay open after this request (RFC 9112 §9.3):
  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "keep-alive" and
  // without "close". Always false when status != 0.
  bool keep_alive = false;
  bool expect_continue = false;  // "Expect: 100-continue" on an HTTP/1.1 request
  // The target host: from an absolute-form or authority-form target (which
  // overrides Host, RFC 9112 §3.2.2), else from Host. Brackets of an IP
  // literal are kept, the port and one trailing '.' are not, case is not
  // folded. Empty when the request named no host (HTTP/1.0 without Host, or
  // an empty Host value, RFC 9110 §7.2).
  std::string_view host;
  std::string_view port;

  bool ok() const { return status == 0; }
};

class HeaderChecker {
 public:
  // `line` must outlive the checker.
  explicit HeaderChecker(const RequestLine& line) : line_(line) {}

  // Call once per field, in order.
  void add(const HeaderField& field);
  // The verdict on everything added.
  HeaderCheck finish();

 private:
  void error(int status, const char* why);
  void add_transfer_coding(std::string_view coding);

  const RequestLine& line_;
  HeaderCheck out_;
  int hosts_ = 0;
  bool host_valid_ = true;
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  int te_codings_ = 0;
  bool te_chunked_ = false;       // chunked seen
  bool te_last_chunked_ = false;  // the last coding seen so far is chunked
  bool te_chunked_twice_ = false;
  bool te_unknown_ = false;  // a coding other than chunked seen
  bool close_ = false;
  bool keep_alive_token_ = false;
};

// The same for a stored list of fields.
HeaderCheck check_headers(const RequestLine& line, std::span<const HeaderField> fields);

}  // namespace vigil::http
