// DNS messages (event/dns.cc): the query on the wire, and replies parsed
// strictly: the id and the question must be ours, names are read through
// compression pointers with every offset checked, CNAME chains inside one
// reply are followed, and the smallest TTL of what was used is kept.
#include "event/dns.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vigil::dns {
namespace {

using Bytes = std::vector<std::uint8_t>;

void put16(Bytes& b, unsigned v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}
void put32(Bytes& b, std::uint32_t v) {
  put16(b, v >> 16);
  put16(b, v & 0xffff);
}
void put_name(Bytes& b, const std::string& name) {
  std::size_t start = 0;
  while (start < name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    b.push_back(static_cast<std::uint8_t>(dot - start));
    b.insert(b.end(), name.begin() + static_cast<long>(start), name.begin() + static_cast<long>(dot));
    start = dot + 1;
  }
  b.push_back(0);
}

// A reply header and question; answers are appended by the test.
Bytes reply(std::uint16_t id, const std::string& name, std::uint16_t qtype, unsigned an,
            unsigned flags = 0x8180) {
  Bytes b;
  put16(b, id);
  put16(b, flags);
  put16(b, 1);
  put16(b, an);
  put16(b, 0);
  put16(b, 0);
  put_name(b, name);
  put16(b, qtype);
  put16(b, 1);
  return b;
}

void answer_a(Bytes& b, std::uint32_t ttl, const char* ip, bool pointer_to_question = true,
              const std::string& owner = "") {
  if (pointer_to_question) {
    put16(b, 0xc00c);
  } else {
    put_name(b, owner);
  }
  put16(b, kTypeA);
  put16(b, 1);
  put32(b, ttl);
  put16(b, 4);
  in_addr a{};
  inet_pton(AF_INET, ip, &a);
  const auto* p = reinterpret_cast<const std::uint8_t*>(&a);
  b.insert(b.end(), p, p + 4);
}

TEST(Dns, QueryOnTheWire) {
  std::uint8_t buf[300];
  const std::size_t n = build_query(buf, sizeof buf, 0xbeef, "www.Example.net.", kTypeAaaa);
  Bytes want = {0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  put_name(want, "www.Example.net");
  put16(want, kTypeAaaa);
  put16(want, 1);
  ASSERT_EQ(n, want.size());
  EXPECT_EQ(Bytes(buf, buf + n), want);
  EXPECT_EQ(build_query(buf, sizeof buf, 1, "a..b", kTypeA), 0u) << "an empty label";
  EXPECT_EQ(build_query(buf, sizeof buf, 1, std::string(64, 'x') + ".net", kTypeA), 0u);
  EXPECT_EQ(build_query(buf, 10, 1, "a.net", kTypeA), 0u) << "too small a buffer";
  EXPECT_EQ(build_query(buf, sizeof buf, 1, "", kTypeA), 0u);
}

TEST(Dns, ReverseNames) {
  Address a;
  a.family = AF_INET;
  inet_pton(AF_INET, "192.0.2.10", a.bytes);
  char out[80];
  std::size_t n = reverse_name(a, out, sizeof out);
  EXPECT_EQ(std::string(out, n), "10.2.0.192.in-addr.arpa");
  a.family = AF_INET6;
  inet_pton(AF_INET6, "2001:db8::1", a.bytes);
  n = reverse_name(a, out, sizeof out);
  EXPECT_EQ(std::string(out, n),
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
}

TEST(Dns, AddressesWithTheSmallestTtl) {
  Bytes b = reply(7, "a.test", kTypeA, 2);
  answer_a(b, 300, "127.0.0.1");
  answer_a(b, 60, "127.0.0.2");
  Reply r;
  ASSERT_EQ(parse_reply(b.data(), b.size(), 7, "A.TEST", kTypeA, r), Parse::kOk);
  EXPECT_EQ(r.rcode, 0);
  ASSERT_EQ(r.naddrs, 2u);
  EXPECT_EQ(r.addrs[1].bytes[3], 2);
  EXPECT_EQ(r.ttl, 60u);
}

TEST(Dns, NotOurReplyIsRejected) {
  Bytes b = reply(7, "a.test", kTypeA, 1);
  answer_a(b, 60, "127.0.0.1");
  Reply r;
  EXPECT_EQ(parse_reply(b.data(), b.size(), 8, "a.test", kTypeA, r), Parse::kIdMismatch);
  EXPECT_EQ(parse_reply(b.data(), b.size(), 7, "b.test", kTypeA, r), Parse::kQuestionMismatch);
  EXPECT_EQ(parse_reply(b.data(), b.size(), 7, "a.test", kTypeAaaa, r), Parse::kQuestionMismatch);
  Bytes query = reply(7, "a.test", kTypeA, 0, 0x0100);
  EXPECT_EQ(parse_reply(query.data(), query.size(), 7, "a.test", kTypeA, r), Parse::kNotReply);
  EXPECT_EQ(parse_reply(b.data(), 11, 7, "a.test", kTypeA, r), Parse::kShort);
  EXPECT_EQ(parse_reply(b.data(), b.size() - 2, 7, "a.test", kTypeA, r), Parse::kShort);
}

TEST(Dns, RcodesAndTruncation) {
  Reply r;
  Bytes nx = reply(1, "nx.test", kTypeA, 0, 0x8183);
  ASSERT_EQ(parse_reply(nx.data(), nx.size(), 1, "nx.test", kTypeA, r), Parse::kOk);
  EXPECT_EQ(r.rcode, kNxDomain);
  Bytes tc = reply(1, "tc.test", kTypeA, 0, 0x8380);
  ASSERT_EQ(parse_reply(tc.data(), tc.size(), 1, "tc.test", kTypeA, r), Parse::kOk);
  EXPECT_TRUE(r.truncated);
}

TEST(Dns, CnameChainsInsideOneReply) {
  // a CNAME b, b CNAME c, c A: in reverse order in the answer section.
  Bytes b = reply(3, "a.test", kTypeA, 3);
  answer_a(b, 30, "10.0.0.1", false, "c.test");
  const std::size_t b_at = b.size();
  put_name(b, "b.test");
  put16(b, kTypeCname);
  put16(b, 1);
  put32(b, 100);
  put16(b, 8);
  put_name(b, "c.test");
  put16(b, 0xc00c);  // a.test
  put16(b, kTypeCname);
  put16(b, 1);
  put32(b, 20);
  put16(b, 2);
  put16(b, 0xc000 | static_cast<unsigned>(b_at));  // -> b.test
  Reply r;
  ASSERT_EQ(parse_reply(b.data(), b.size(), 3, "a.test", kTypeA, r), Parse::kOk);
  ASSERT_EQ(r.naddrs, 1u);
  EXPECT_EQ(r.addrs[0].bytes[0], 10);
  EXPECT_EQ(r.ttl, 20u);
  EXPECT_EQ(r.cname_len, 0u);
}

TEST(Dns, ACnameAloneIsReportedToFollow) {
  Bytes b = reply(3, "alias.test", kTypeA, 1);
  put16(b, 0xc00c);
  put16(b, kTypeCname);
  put16(b, 1);
  put32(b, 50);
  put16(b, 8);
  put_name(b, "a.test");
  Reply r;
  ASSERT_EQ(parse_reply(b.data(), b.size(), 3, "alias.test", kTypeA, r), Parse::kOk);
  EXPECT_EQ(r.naddrs, 0u);
  EXPECT_EQ(std::string(r.cname, r.cname_len), "a.test");
}

TEST(Dns, PointerLoopsAndOverrunsAreBadNames) {
  Bytes b = reply(3, "a.test", kTypeA, 1);
  const std::size_t at = b.size();
  put16(b, 0xc000 | static_cast<unsigned>(at));  // points at itself
  put16(b, kTypeA);
  put16(b, 1);
  put32(b, 1);
  put16(b, 4);
  put32(b, 0);
  Reply r;
  EXPECT_EQ(parse_reply(b.data(), b.size(), 3, "a.test", kTypeA, r), Parse::kBadName);
  Bytes c = reply(3, "a.test", kTypeA, 1);
  c.push_back(40);  // a label past the end
  c.push_back('x');
  EXPECT_EQ(parse_reply(c.data(), c.size(), 3, "a.test", kTypeA, r), Parse::kBadName);
}

TEST(Dns, PtrNames) {
  Bytes b = reply(9, "1.0.0.127.in-addr.arpa", kTypePtr, 1);
  put16(b, 0xc00c);
  put16(b, kTypePtr);
  put16(b, 1);
  put32(b, 60);
  put16(b, 14);
  put_name(b, "Mail.Example");
  Reply r;
  ASSERT_EQ(parse_reply(b.data(), b.size(), 9, "1.0.0.127.in-addr.arpa", kTypePtr, r), Parse::kOk);
  EXPECT_EQ(std::string(r.ptr, r.ptr_len), "mail.example");
}

}  // namespace
}  // namespace vigil::dns
