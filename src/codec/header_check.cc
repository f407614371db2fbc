#include "codec/header_check.h"

#include <limits>

#include "codec/authority.h"
#include "codec/chars.h"

namespace vigil::http {
std::int64_t parse_content_length(std::string_view v) {
  if (v.empty()) return -1;
  std::int64_t n = 0;
  for (char c : v) {
    if (!chars::is_digit(c)) return -1;
    const int d = c - '0';
    if (n > (std::numeric_limits<std::int64_t>::max() - d) / 10) return -1;
    n = n * 10 + d;
  }
  return n;
}

void HeaderChecker::error(int status, const char* why) {
  if (out_.status != 0) return;  // the first problem is the one reported
  out_.status = status;
  out_.error = why;
}

void HeaderChecker::add(const HeaderField& field) {
  switch (field.id) {
    case HeaderId::kHost:
      // RFC 9112 §3.2: more than one Host line, or an invalid value, is a 400.
      if (++hosts_ > 1) break;
      // An empty one is refused too, as nginx does: the target URI would
      // be "http" with an empty host, which RFC 9110 §4.2.1 says to reject
      // (RFC 9112 §3.3 lets a server refuse it or use its default).
      {
        Authority a;
        if (!field.value.empty() && parse_authority(field.value, false, a)) {
          out_.host = a.host;
          out_.port = a.port;
        } else {
          host_valid_ = false;
        }
      }
      break;

    case HeaderId::kContentLength: {
      // RFC 9112 §6.3 (5) lets a recipient either reject repeated values or
      // keep one when all are identical. We reject any second Content-Length,
      // and lists ("42, 42"): one value, one meaning, nothing for an
      // intermediary in front of us to read differently.
      if (has_content_length_) {
        error(400, "duplicate Content-Length");
        break;
      }
      has_content_length_ = true;
      out_.content_length = parse_content_length(field.value);
      if (out_.content_length < 0) error(400, "invalid Content-Length");
      break;
    }

    case HeaderId::kTransferEncoding: {
      // Several Transfer-Encoding lines form one list (RFC 9110 §5.3).
      has_transfer_encoding_ = true;
      ListReader r(field.value);
      std::string_view coding;
      while (r.next(coding)) add_transfer_coding(coding);
      break;
    }

    case HeaderId::kConnection: {
      ListReader r(field.value);
      std::string_view option;
      while (r.next(option)) {
        if (iequals(option, "close")) close_ = true;
        if (iequals(option, "keep-alive")) keep_alive_token_ = true;
      }
      break;
    }

    case HeaderId::kExpect:
      // Other expectations are ignored rather than answered with 417 (RFC 9110
      // §10.1.1 makes 417 a MAY); nginx ignores them too.
      if (list_has_token(field.value, "100-continue")) out_.expect_continue = true;
      break;

    default:
      break;
  }
}

void HeaderChecker::add_transfer_coding(std::string_view coding) {
  // Codings are case-insensitive (RFC 9112 §7). "chunked" with parameters
  // is not the chunked coding we know.
  const bool chunked = iequals(coding, "chunked");
  if (chunked && te_chunked_) te_chunked_twice_ = true;
  if (!chunked) te_unknown_ = true;
  te_chunked_ = te_chunked_ || chunked;
  te_last_chunked_ = chunked;
  ++te_codings_;
}

HeaderCheck HeaderChecker::finish() {
  if (hosts_ > 1) error(400, "duplicate Host");
  if (!host_valid_) error(400, "invalid Host");
  // RFC 9112 §3.2: an HTTP/1.1 request without Host MUST get a 400, even in
  // absolute-form, whose host then overrides Host's value (§3.2.2).
  if (hosts_ == 0 && line_.version >= 1001) error(400, "missing Host");
  if (line_.form == TargetForm::kAbsolute || line_.form == TargetForm::kAuthority) {
    out_.host = line_.host;
    out_.port = line_.port;
  }

  if (has_transfer_encoding_) {
    if (line_.version < 1001) {
      // RFC 9112 §6.1: framing of an HTTP/1.0 message with Transfer-Encoding
      // is faulty; we refuse it instead of guessing.
      error(400, "Transfer-Encoding in an HTTP/1.0 request");
    } else if (has_content_length_) {
      // RFC 9112 §6.1: a server MAY reject a request with both, and should
      // since it is the classic request smuggling vector.
      error(400, "both Transfer-Encoding and Content-Length");
    } else if (te_codings_ == 0) {
      error(400, "empty Transfer-Encoding");
    } else if (!te_last_chunked_) {
      // RFC 9112 §6.3 (4): chunked is not the final coding: the body length
      // cannot be known; the server MUST answer 400.
      error(400, "chunked is not the final transfer coding");
    } else if (te_chunked_twice_) {
      error(400, "chunked applied more than once");  // RFC 9112 §6.1 forbids it
    } else if (te_unknown_) {
      // RFC 9112 §6.1: a transfer coding we do not implement (gzip, ...): 501.
      error(501, "unsupported transfer coding");
    } else {
      out_.chunked = true;
    }
  }

  // RFC 9112 §9.3: persistence.
  out_.keep_alive = line_.version >= 1001 ? !close_ : keep_alive_token_ && !close_;
  // RFC 9110 §10.1.1: a 100-continue expectation in HTTP/1.0 MUST be ignored.
  if (line_.version < 1001) out_.expect_continue = false;
  if (out_.status != 0) out_.keep_alive = false;
  return out_;
}

HeaderCheck check_headers(const RequestLine& line, std::span<const HeaderField> fields) {
  HeaderChecker checker(line);
  for (const auto& f : fields) checker.add(f);
  return checker.finish();
}

}  // namespace vigil::http
