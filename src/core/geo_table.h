#pragma once
// The lookup tables of the geo module (geo.cc): the configuration's networks
// (CIDR) or address ranges flattened, when the block has been read, into
// sorted arrays of disjoint intervals, one for IPv4 and one for IPv6, each
// interval naming its value. A lookup is a binary search: no allocation, no
// pointer chasing through a tree.
//
// CIDR mode: the most specific network holding an address decides, whatever
// the order the networks were written in (nginx's radix tree). Ranges mode
// (IPv4 only): the ranges are applied in order, a later one replacing what
// it overlaps of the earlier ones.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vigil {

__extension__ typedef unsigned __int128 GeoU128;

// One IPv4 (32-bit) or IPv6 (128-bit) network, its address's bits outside
// the prefix cleared.
struct GeoNet {
  bool v6 = false;
  GeoU128 addr = 0;  // host order: the low 32 bits for IPv4
  unsigned prefix = 0;
};

// "address[/prefix]" as a network. False for anything else; `warning` set
// (and the bits cleared) when the address has bits outside the prefix.
bool parse_geo_net(std::string_view text, GeoNet& net, bool& warning);
// "a.b.c.d-e.f.g.h" (start <= end) as an IPv4 range, host order.
bool parse_geo_range(std::string_view text, std::uint32_t& start, std::uint32_t& end);

// The built tables.
class GeoTable {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  std::string_view lookup_v4(std::uint32_t addr) const {
    return value(find(v4_, addr));
  }
  std::string_view lookup_v6(GeoU128 addr) const {
    return value(find(v6_, addr));
  }
  std::size_t intervals() const { return v4_.size() + v6_.size(); }

 private:
  friend class GeoBuilder;
  template <typename T>
  struct Interval {
    T lo;
    T hi;
    std::uint32_t value;
  };
  template <typename T>
  static std::uint32_t find(const std::vector<Interval<T>>& v, T a) {
    std::size_t lo = 0;
    std::size_t hi = v.size();
    while (lo < hi) {  // the first interval starting past a
      const std::size_t mid = lo + (hi - lo) / 2;
      if (v[mid].lo <= a) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo == 0 || v[lo - 1].hi < a) return kNone;
    return v[lo - 1].value;
  }
  std::string_view value(std::uint32_t i) const {
    return i == kNone ? std::string_view(fallback_) : std::string_view(values_[i]);
  }

  std::vector<Interval<std::uint32_t>> v4_;
  std::vector<Interval<GeoU128>> v6_;
  std::vector<std::string> values_;
  std::string fallback_;  // where no interval holds the address
};

// Collects a geo block's entries, then builds its table.
class GeoBuilder {
 public:
  explicit GeoBuilder(bool ranges = false) : ranges_(ranges) {}
  bool ranges() const { return ranges_; }
  void set_ranges() { ranges_ = true; }
  bool empty() const { return cidr_.empty() && !v4_any_; }

  // CIDR mode. add_net: true, or false with `old` the value it replaced
  // (the same network given twice). delete_net: false when the network was
  // never given.
  bool add_net(const GeoNet& net, std::string_view value, std::string& old);
  bool delete_net(const GeoNet& net);
  // Ranges mode. delete_range: false when no address of the range had a value.
  void add_range(std::uint32_t start, std::uint32_t end, std::string_view value);
  bool delete_range(std::uint32_t start, std::uint32_t end);
  // `default`: in CIDR mode the networks 0.0.0.0/0 and ::/0 (`old` as for
  // add_net), in ranges mode the value of addresses no range holds.
  bool set_default(std::string_view value, std::string& old);

  GeoTable build() const;

 private:
  std::uint32_t intern(std::string_view value);

  // Disjoint intervals (start -> end, value), painted one over the other.
  template <typename T>
  class Painter {
   public:
    bool clear(T lo, T hi);
    void paint(T lo, T hi, std::uint32_t value) {
      clear(lo, hi);
      segs_.emplace(lo, std::make_pair(hi, value));
    }
    template <typename Out>
    void flatten(Out& out) const {
      for (const auto& [lo, seg] : segs_) {
        if (!out.empty() && out.back().value == seg.second && out.back().hi + 1 == lo) {
          out.back().hi = seg.first;  // one interval for neighbours of the same value
        } else {
          out.push_back({lo, seg.first, seg.second});
        }
      }
    }

   private:
    std::map<T, std::pair<T, std::uint32_t>> segs_;
  };

  bool ranges_;
  // CIDR: (v6, prefix, address) -> value index; built in prefix order.
  std::map<std::pair<std::pair<bool, unsigned>, GeoU128>, std::uint32_t> cidr_;
  Painter<std::uint32_t> v4_;
  bool v4_any_ = false;
  std::string fallback_;
  std::vector<std::string> values_;
  std::map<std::string, std::uint32_t, std::less<>> index_;
};

}  // namespace vigil
