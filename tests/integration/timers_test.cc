// examples/timers: a repeating timer, a cancelled one, and a wake-up from
// another thread, as a real program on every backend.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_process.h"
#include "test_util.h"
#include "vigil/version.h"

namespace vigil {
namespace {

class TimersExample : public ::testing::TestWithParam<std::string> {};

TEST_P(TimersExample, TicksInOrderNeverRunsTheCancelledTimerAndHearsTheOtherThread) {
  auto [rc, out] =
      test::run({std::string(VIGIL_EXAMPLES_DIR) + "/timers", "4", "10", GetParam()});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(std::string("libvigil ") + VIGIL_VERSION_STRING + ", " + GetParam() +
                     " backend"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cancelled a timer before it fired"), std::string::npos) << out;
  EXPECT_EQ(out.find("the cancelled timer fired"), std::string::npos) << out;
  EXPECT_NE(out.find("message 42 from the other thread"), std::string::npos) << out;
  // Four ticks, counting down, each at least one interval after the last.
  std::regex tick("tick after (\\d+) ms, (\\d+) left");
  int expect_left = 3;
  long last_ms = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), tick); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ(std::stoi((*it)[2]), expect_left--) << out;
    long ms = std::stol((*it)[1]);
    EXPECT_GE(ms, last_ms + 10) << out;
    last_ms = ms;
  }
  EXPECT_EQ(expect_left, -1) << "four ticks:\n" << out;
  EXPECT_TRUE(out.ends_with("done\n")) << out;
}

INSTANTIATE_TEST_SUITE_P(Backends, TimersExample, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil
