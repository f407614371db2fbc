// Feeds arbitrary text to the allow/deny address parser (access.cc):
// "all", "unix:", an IPv4 or IPv6 address with an optional "/prefix". It may
// refuse anything, but what it accepts must be a consistent rule: no address
// bit outside the mask, a mask that is a run of ones from the left, a
// warning only when it cleared bits, and the same result when parsed again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "http/access/access.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using vigil::http::AccessRule;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  AccessRule rule;
  rule.deny = size % 2 == 1;
  const bool deny = rule.deny;
  std::string error;
  std::string warning;
  const bool ok = vigil::http::parse_access_rule(text, rule, error, warning);
  check(rule.deny == deny, "the rule's kind is the caller's");
  if (!ok) {
    check(!error.empty(), "a refusal says why");
    check(warning.empty(), "no warning with a refusal");
    return 0;
  }
  const std::size_t n = rule.kind == AccessRule::Kind::kInet    ? 4
                        : rule.kind == AccessRule::Kind::kInet6 ? 16
                                                                : 0;
  check(n != 0 || (text == "all" || text == "unix:"), "only all and unix: have no address");
  bool zero_seen = false;
  for (std::size_t i = 0; i < 16; ++i) {
    check((rule.addr[i] & ~rule.mask[i]) == 0, "no address bit outside the mask");
    if (i >= n) {
      check(rule.addr[i] == 0 && rule.mask[i] == 0, "nothing past the family's bytes");
      continue;
    }
    for (int b = 7; b >= 0; --b) {
      const bool one = (rule.mask[i] >> b) & 1;
      check(!(one && zero_seen), "the mask is ones from the left");
      if (!one) zero_seen = true;
    }
  }
  check(warning.empty() || warning.find("meaningless") != std::string::npos,
        "the only warning is the low bits one");
  AccessRule again;
  again.deny = deny;
  std::string error2;
  std::string warning2;
  check(vigil::http::parse_access_rule(text, again, error2, warning2), "parses again");
  check(std::memcmp(&again, &rule, sizeof rule) == 0, "the same rule again");
  return 0;
}
