// split_clients' hash: MurmurHash2 with seed 0, checked against values
// computed independently (the reference algorithm, in Python), so that a
// source lands in the same part as with nginx.
#include "core/split_clients.h"

#include <gtest/gtest.h>

#include <string>

namespace vigil::http {
namespace {

std::uint32_t hash(const std::string& s) {
  return murmur_hash2(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

TEST(SplitClients, MurmurHash2) {
  EXPECT_EQ(hash(""), 0x0u);
  EXPECT_EQ(hash("a"), 0x92685f5eu);
  EXPECT_EQ(hash("1"), 0x49342fafu);
  EXPECT_EQ(hash("hello"), 0xe56129cbu);
  EXPECT_EQ(hash("127.0.0.1AAA"), 0xb5fc5e4bu);  // a tail of 0 bytes after 3 blocks
}

}  // namespace
}  // namespace vigil::http
