#include "core/unix_addr.h"

#include <gtest/gtest.h>
#include <sys/un.h>

#include <cstddef>
#include <string>

namespace vigil {
namespace {

TEST(UnixAddr, PathBecomesASockaddrUn) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  ASSERT_TRUE(make_unix_sockaddr("/run/app.sock", ss, len));
  const auto& sun = reinterpret_cast<const sockaddr_un&>(ss);
  EXPECT_EQ(sun.sun_family, AF_UNIX);
  EXPECT_EQ(std::string(sun.sun_path), "/run/app.sock");
  EXPECT_EQ(len, offsetof(sockaddr_un, sun_path) + 14);
}

TEST(UnixAddr, EmptyTooLongOrNulIsRefusedAndLeavesTheAddress) {
  sockaddr_storage ss{};
  ss.ss_family = AF_INET;
  socklen_t len = 7;
  const std::string longest(sizeof(sockaddr_un::sun_path) - 1, 'x');
  EXPECT_FALSE(make_unix_sockaddr("", ss, len));
  EXPECT_FALSE(make_unix_sockaddr(longest + "x", ss, len));
  EXPECT_FALSE(make_unix_sockaddr(std::string("/a\0b", 4), ss, len));
  EXPECT_EQ(ss.ss_family, AF_INET);
  EXPECT_EQ(len, 7u);
  EXPECT_TRUE(make_unix_sockaddr(longest, ss, len));
  EXPECT_EQ(ss.ss_family, AF_UNIX);
}

}  // namespace
}  // namespace vigil
