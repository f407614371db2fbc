#include "core/geo_table.h"

#include <arpa/inet.h>

#include <cstring>

namespace vigil {
namespace {

// `text` as a NUL-terminated copy in `buf` (false when it cannot be an address).
bool terminated(std::string_view text, char (&buf)[64]) {
  if (text.empty() || text.size() >= sizeof buf || text.find('\0') != std::string_view::npos) {
    return false;
  }
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  return true;
}

bool parse_v4(std::string_view text, std::uint32_t& out) {
  char buf[64];
  ::in_addr a;
  if (!terminated(text, buf) || ::inet_pton(AF_INET, buf, &a) != 1) return false;
  out = ntohl(a.s_addr);
  return true;
}

GeoU128 all_ones(unsigned bits) {
  return bits == 0 ? GeoU128{0} : ~GeoU128{0} >> (128 - bits);
}

}  // namespace

bool parse_geo_net(std::string_view text, GeoNet& net, bool& warning) {
  warning = false;
  const std::size_t slash = text.find('/');
  char buf[64];
  if (!terminated(text.substr(0, slash), buf)) return false;
  unsigned max;
  std::uint8_t bytes[16];
  if (::inet_pton(AF_INET, buf, bytes) == 1) {
    net.v6 = false;
    max = 32;
    net.addr = (GeoU128{bytes[0]} << 24) | (GeoU128{bytes[1]} << 16) | (GeoU128{bytes[2]} << 8) |
               GeoU128{bytes[3]};
  } else if (::inet_pton(AF_INET6, buf, bytes) == 1) {
    net.v6 = true;
    max = 128;
    net.addr = 0;
    for (std::uint8_t b : bytes) net.addr = (net.addr << 8) | b;
  } else {
    return false;
  }
  net.prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return false;
    unsigned n = 0;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return false;
      n = n * 10 + static_cast<unsigned>(ch - '0');
    }
    if (n > max) return false;
    net.prefix = n;
  }
  const GeoU128 host = all_ones(max - net.prefix);
  if ((net.addr & host) != 0) {
    warning = true;
    net.addr &= ~host;
  }
  return true;
}

bool parse_geo_range(std::string_view text, std::uint32_t& start, std::uint32_t& end) {
  const std::size_t dash = text.find('-');
  if (dash == std::string_view::npos) return false;
  return parse_v4(text.substr(0, dash), start) && parse_v4(text.substr(dash + 1), end) &&
         start <= end;
}

template <typename T>
bool GeoBuilder::Painter<T>::clear(T lo, T hi) {
  bool any = false;
  auto it = segs_.lower_bound(lo);  // the first starting at lo or past it
  if (it != segs_.begin()) {
    auto prev = std::prev(it);  // starts before lo
    if (prev->second.first >= lo) {
      any = true;
      const T end = prev->second.first;
      const std::uint32_t value = prev->second.second;
      prev->second.first = lo - 1;
      if (end > hi) {  // [lo, hi] was inside it: its tail stays
        segs_.emplace_hint(it, hi + 1, std::make_pair(end, value));
        return true;
      }
    }
  }
  while (it != segs_.end() && it->first <= hi) {
    any = true;
    if (it->second.first > hi) {  // crosses hi: its tail stays
      auto node = segs_.extract(it);
      node.key() = hi + 1;
      segs_.insert(std::move(node));
      break;
    }
    it = segs_.erase(it);
  }
  return any;
}

std::uint32_t GeoBuilder::intern(std::string_view value) {
  if (auto it = index_.find(value); it != index_.end()) return it->second;
  const auto i = static_cast<std::uint32_t>(values_.size());
  values_.emplace_back(value);
  index_.emplace(std::string(value), i);
  return i;
}

bool GeoBuilder::add_net(const GeoNet& net, std::string_view value, std::string& old) {
  const std::uint32_t v = intern(value);
  auto [it, added] = cidr_.try_emplace({{net.v6, net.prefix}, net.addr}, v);
  if (added) return true;
  old = values_[it->second];
  it->second = v;
  return false;
}

bool GeoBuilder::delete_net(const GeoNet& net) {
  return cidr_.erase({{net.v6, net.prefix}, net.addr}) != 0;
}

void GeoBuilder::add_range(std::uint32_t start, std::uint32_t end, std::string_view value) {
  v4_.paint(start, end, intern(value));
  v4_any_ = true;
}

bool GeoBuilder::delete_range(std::uint32_t start, std::uint32_t end) {
  return v4_.clear(start, end);
}

bool GeoBuilder::set_default(std::string_view value, std::string& old) {
  if (ranges_) {
    fallback_ = value;
    return true;
  }
  GeoNet any4;
  GeoNet any6;
  any6.v6 = true;
  std::string old6;
  const bool fresh4 = add_net(any4, value, old);
  const bool fresh6 = add_net(any6, value, old6);
  if (fresh4 && !fresh6) old = old6;
  return fresh4 && fresh6;
}

GeoTable GeoBuilder::build() const {
  GeoTable t;
  t.values_ = values_;
  t.fallback_ = fallback_;
  if (ranges_) {
    v4_.flatten(t.v4_);
    return t;
  }
  // The networks painted in prefix order, so a more specific one wins.
  Painter<std::uint32_t> p4;
  Painter<GeoU128> p6;
  for (const auto& [key, value] : cidr_) {
    const bool v6 = key.first.first;
    const unsigned prefix = key.first.second;
    const GeoU128 addr = key.second;
    if (v6) {
      p6.paint(addr, addr | all_ones(128 - prefix), value);
    } else {
      const auto a = static_cast<std::uint32_t>(addr);
      p4.paint(a, static_cast<std::uint32_t>(addr | all_ones(32 - prefix)), value);
    }
  }
  p4.flatten(t.v4_);
  p6.flatten(t.v6_);
  return t;
}

}  // namespace vigil
