#include "core/split_clients.h"

#include <utility>

namespace vigil {

std::uint32_t murmur_hash2(const unsigned char* data, std::size_t len) {
  constexpr std::uint32_t m = 0x5bd1e995;
  std::uint32_t h = static_cast<std::uint32_t>(len);
  while (len >= 4) {
    std::uint32_t k =
        static_cast<std::uint32_t>(data[0]) | (static_cast<std::uint32_t>(data[1]) << 8) |
        (static_cast<std::uint32_t>(data[2]) << 16) | (static_cast<std::uint32_t>(data[3]) << 24);
    k *= m;
    k ^= k >> 24;
    k *= m;
    h *= m;
    h ^= k;
    data += 4;
    len -= 4;
  }
  switch (len) {
    case 3:
      h ^= static_cast<std::uint32_t>(data[2]) << 16;
      [[fallthrough]];
    case 2:
      h ^= static_cast<std::uint32_t>(data[1]) << 8;
      [[fallthrough]];
    case 1:
      h ^= data[0];
      h *= m;
      break;
    default:
      break;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return h;
}

namespace {

// "51.2%" as hundredths of a percent (5120); -1 when malformed.
long parse_percent(std::string_view s) {
  if (s.size() < 2 || s.back() != '%') return -1;
  s.remove_suffix(1);
  long whole = 0;
  long frac = 0;
  int digits = 0;
  bool dot = false;
  for (char ch : s) {
    if (ch == '.' && !dot) {
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return -1;
    if (!dot) {
      whole = whole * 10 + (ch - '0');
      if (whole > 100) return -1;
    } else {
      if (++digits > 2) return -1;
      frac = frac * 10 + (ch - '0');
    }
  }
  while (digits < 2) {
    frac *= 10;
    ++digits;
  }
  return whole * 100 + frac;
}

}  // namespace

Status SplitClientsSink::on_statement(ConfParser& parser, const ConfStatement& st) {
  const std::string where = parser.origin().where(st.words[0].line);
  if (st.end != ConfTerminator::kSemicolon) return Status::error("unexpected \"{\"" + where);
  if (st.words.size() != 2) {
    return Status::error("invalid number of arguments in \"split_clients\" block" + where);
  }
  SplitPart p;
  p.value = st.words[1].text;
  if (st.words[0].text == "*") {
    p.rest = true;
  } else {
    const long pct = parse_percent(st.words[0].text);
    if (pct <= 0)
      return Status::error("invalid percent value \"" + st.words[0].text + "\"" + where);
    sum_ += pct;
    if (sum_ > 10000) return Status::error("percent total is greater than 100%" + where);
    p.upto = static_cast<std::uint32_t>(static_cast<std::uint64_t>(sum_) * 0xffffffffULL / 10000);
  }
  parts_.push_back(std::move(p));
  return Status::ok();
}

std::string_view split_value(const std::vector<SplitPart>& parts, std::uint32_t hash) {
  for (const SplitPart& p : parts) {
    if (p.rest || hash < p.upto) return p.value;
  }
  return {};
}

}  // namespace vigil
