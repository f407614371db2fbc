#pragma once
// HTTP-date (RFC 9110 §5.6.7), for If-Modified-Since and If-Unmodified-Since.

#include <ctime>
#include <optional>
#include <string_view>

namespace vigil::http {

// Parses the three formats a recipient MUST accept:
//   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
//   rfc850-date  "Sunday, 06-Nov-94 08:49:37 GMT"
//   asctime-date "Sun Nov  6 08:49:37 1994"
// Exactly as the grammar spells them: HTTP-date is case-sensitive (§5.6.7),
// single spaces, "GMT". The day name must be a real one but is not checked
// against the date (nothing depends on it; nginx does not either). Dates
// must exist (no Feb 30); second 60 (a leap second) is accepted and counts
// as the next second. rfc850's two-digit year is the most recent year with
// those digits that is not more than 50 years after `now` (§5.6.7).
// Nothing (std::nullopt) when the value is not a valid HTTP-date: the caller
// then ignores the header (RFC 9110 §13.1.3).
std::optional<std::time_t> parse_http_date(std::string_view s, std::time_t now);

}  // namespace vigil::http
