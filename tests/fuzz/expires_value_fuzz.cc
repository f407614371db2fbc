// Feeds arbitrary text to expires' value parser (filters/expires.cc), which
// also parses values that variables bring from the request ($arg_e) at run
// time. It may refuse anything, but what it accepts must be one of the forms:
// a daily time within the day and never after "modified", and no keyword
// after "modified"; and the same text gives the same answer again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "http/filters/expires.h"

using vigil::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using vigil::http::Expires;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Expires start : {Expires::kAccess, Expires::kModified}) {
    Expires kind = start;
    std::int64_t time = 0;
    const char* err = vigil::http::parse_expires(text, kind, time);
    if (err != nullptr) {
      check(*err != '\0', "a refusal says why");
      continue;
    }
    if (start == Expires::kModified) {
      check(kind == Expires::kModified, "\"modified\" takes a time only");
    }
    if (kind == Expires::kDaily) check(time >= 0 && time <= 86400, "a daily time is within a day");
    if (kind == Expires::kEpoch || kind == Expires::kMax || kind == Expires::kOff) {
      check(text == "epoch" || text == "max" || text == "off", "keywords only by name");
    }
    Expires again = start;
    std::int64_t time2 = 0;
    check(vigil::http::parse_expires(text, again, time2) == nullptr && again == kind &&
              time2 == time,
          "the same text, the same value");
  }
  return 0;
}
