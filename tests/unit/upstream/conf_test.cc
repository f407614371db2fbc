// The upstream { } block: nginx's defaults, parameters, name resolution, and
// the errors nginx reports (with file:line).
#include <arpa/inet.h>
#include <netdb.h>

#include <set>

#include "unit/upstream/upstream_test_util.h"
#include "core/shm_zone.h"
#include "upstream/group.h"

namespace vigil::upstream {
namespace {

using testing::UpstreamConfTest;

TEST_F(UpstreamConfTest, NginxDefaults) {
  Group* g = load_group("upstream b { server 127.0.0.1:8080; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->name, "b");
  EXPECT_EQ(g->method, Method::kRoundRobin);
  EXPECT_EQ(g->keepalive, 0u);
  EXPECT_EQ(g->keepalive_requests, 1000u);
  EXPECT_EQ(g->keepalive_timeout, 60000u);
  EXPECT_TRUE(g->zone.empty());
  ASSERT_EQ(g->peers.size(), 1u);
  const Peer& p = g->peers[0];
  EXPECT_EQ(p.name, "127.0.0.1:8080");
  EXPECT_EQ(p.weight, 1);
  EXPECT_EQ(p.max_fails, 1u);
  EXPECT_EQ(p.fail_timeout, 10000u);
  EXPECT_FALSE(p.backup);
  EXPECT_FALSE(p.down);
  EXPECT_NE(p.health, nullptr);
  EXPECT_NE(p.stats, nullptr);
}

TEST_F(UpstreamConfTest, ParametersAndBackupsAfterPrimaries) {
  Group* g = load_group(
      "upstream b {\n"
      " server 127.0.0.1:1 backup;\n"
      " server 127.0.0.1:2 weight=5 max_fails=3 fail_timeout=30s;\n"
      " server 127.0.0.1:3 down;\n"
      " keepalive 8; keepalive_requests 50; keepalive_timeout 5s;\n"
      " least_conn;\n"
      "}");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->peers.size(), 3u);
  EXPECT_EQ(g->primaries, 2u);
  EXPECT_EQ(g->backups(), 1u);
  EXPECT_EQ(g->peers[0].name, "127.0.0.1:2");
  EXPECT_EQ(g->peers[0].weight, 5);
  EXPECT_EQ(g->peers[0].max_fails, 3u);
  EXPECT_EQ(g->peers[0].fail_timeout, 30000u);
  EXPECT_TRUE(g->peers[1].down);
  EXPECT_TRUE(g->peers[2].backup);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(g->peers[i].index, i);
  EXPECT_EQ(g->method, Method::kLeastConn);
  EXPECT_EQ(g->keepalive, 8u);
  EXPECT_EQ(g->keepalive_requests, 50u);
  EXPECT_EQ(g->keepalive_timeout, 5000u);
}

TEST_F(UpstreamConfTest, HttpPortDefaultsTo80StreamNeedsOne) {
  Group* g = load_group("upstream b { server 127.0.0.1; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->peers[0].name, "127.0.0.1:80");
  EXPECT_EQ(error("upstream b { server 127.0.0.1; }", Protocol::kStream),
            "no port in upstream \"127.0.0.1\" in conf/vigil.conf:3");
}

TEST_F(UpstreamConfTest, ANameGivesOnePeerPerAddress) {
  // As many peers as the resolver has distinct addresses for the name.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  ASSERT_EQ(::getaddrinfo("localhost", nullptr, &hints, &res), 0);
  std::set<std::string> addrs;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    char host[INET6_ADDRSTRLEN] = {};
    const void* a = ai->ai_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    ::inet_ntop(ai->ai_family, a, host, sizeof host);
    addrs.insert(host);
  }
  ::freeaddrinfo(res);
  Group* g = load_group("upstream b { server localhost:9001 weight=3; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->peers.size(), addrs.size());
  for (const Peer& p : g->peers) {
    EXPECT_EQ(p.server, "localhost:9001");
    EXPECT_EQ(p.weight, 3);
    EXPECT_TRUE(p.name.ends_with(":9001")) << p.name;
  }
}

TEST_F(UpstreamConfTest, IPv6AndUnixAddresses) {
  Group* g = load_group("upstream b { server [::1]:8080; server unix:/tmp/x.sock; }");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->peers.size(), 2u);
  EXPECT_EQ(g->peers[0].name, "[::1]:8080");
  EXPECT_EQ(g->peers[0].addr.ss_family, AF_INET6);
  EXPECT_EQ(g->peers[1].name, "unix:/tmp/x.sock");
  EXPECT_EQ(g->peers[1].addr.ss_family, AF_UNIX);
}

TEST_F(UpstreamConfTest, HashMethods) {
  Group* g = load_group("upstream b { hash $request_uri; server 127.0.0.1:1; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->method, Method::kHash);
  EXPECT_EQ(g->hash_key, "$request_uri");
  EXPECT_TRUE(g->ring.empty());
  g = load_group("upstream b { hash $k consistent; server 127.0.0.1:1 weight=2; server 127.0.0.1:2; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->method, Method::kConsistentHash);
  EXPECT_EQ(g->ring.size(), 160u * 3);
  EXPECT_TRUE(std::is_sorted(g->ring.begin(), g->ring.end(),
                             [](const RingPoint& a, const RingPoint& b) { return a.hash < b.hash; }));
  g = load_group("upstream b { ip_hash; server 127.0.0.1:1; }");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->method, Method::kIpHash);
}

TEST_F(UpstreamConfTest, ZoneSharesHealthAcrossGroupsOfOneName) {
  GroupSet* set = load_set(
      "upstream a { zone z 64k; server 127.0.0.1:1; }\n"
      "upstream b { zone z; server 127.0.0.1:2; server 127.0.0.1:3; }\n"
      "upstream c { server 127.0.0.1:4; }");
  ASSERT_NE(set, nullptr) << error_;
  ShmZone* zone = conf_->zones().find("z");
  ASSERT_NE(zone, nullptr);
  ASSERT_TRUE(zone->mapped());
  EXPECT_EQ(zone->size(), 64u * 1024);
  auto* base = static_cast<char*>(zone->addr());
  for (const char* name : {"a", "b"}) {
    for (const Peer& p : set->find(name)->peers) {
      auto* h = reinterpret_cast<char*>(p.health);
      EXPECT_TRUE(h >= base && h < base + 64 * 1024) << name << " in the zone";
    }
  }
  const Peer& local = set->find("c")->peers[0];
  auto* h = reinterpret_cast<char*>(local.health);
  EXPECT_FALSE(h >= base && h < base + 64 * 1024) << "without zone: the worker's own memory";
}

TEST_F(UpstreamConfTest, ImplicitGroupsForAddresses) {
  GroupSet* set = load_set("upstream a { server 127.0.0.1:1; }");
  ASSERT_NE(set, nullptr);
  auto a = set->find_or_add("a", 80, " in x:1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a.value(), set->find("a"));
  auto b = set->find_or_add("127.0.0.1:8080", 80, " in x:2");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b.value()->implicit);
  EXPECT_EQ(b.value()->peers.size(), 1u);
  EXPECT_NE(b.value()->peers[0].stats, nullptr);
  auto again = set->find_or_add("127.0.0.1:8080", 80, " in x:3");
  ASSERT_TRUE(again);
  EXPECT_EQ(again.value(), b.value()) << "one group per address";
  auto port80 = set->find_or_add("localhost", 80, " in x:4");
  ASSERT_TRUE(port80);
  EXPECT_TRUE(port80.value()->peers[0].name.ends_with(":80"));
  auto noport = set->find_or_add("nowhere", 0, " in x:5");
  ASSERT_FALSE(noport);
  EXPECT_EQ(noport.status().message(), "no port in upstream \"nowhere\" in x:5");
}

TEST_F(UpstreamConfTest, ErrorsAsNginxWithFileAndLine) {
  const std::string at3 = " in conf/vigil.conf:3";
  EXPECT_EQ(error("upstream b { }"), "no servers are inside upstream" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1; }\nupstream b { server 127.0.0.1:2; }"),
            "duplicate upstream \"b\" in conf/vigil.conf:4");
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1 weight=0; }"),
            "invalid parameter \"weight=0\"" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1 max_fails=x; }"),
            "invalid parameter \"max_fails=x\"" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1 fail_timeout=1q; }"),
            "invalid parameter \"fail_timeout=1q\"" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1 slow_start=1; }"),
            "invalid parameter \"slow_start=1\"" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:99999; }"),
            "invalid port in upstream \"127.0.0.1:99999\"" + at3);
  EXPECT_EQ(error("upstream b {\n hash $x;\n server 127.0.0.1:1 backup;\n}"),
            "balancing method does not support parameter \"backup\" in conf/vigil.conf:5");
  EXPECT_EQ(error("upstream b {\n server 127.0.0.1:1 backup;\n ip_hash;\n}"),
            "balancing method does not support parameter \"backup\" in conf/vigil.conf:4");
  EXPECT_EQ(error("upstream b { least_conn; hash $x; server 127.0.0.1:1; }"),
            "load balancing method redefined" + at3);
  EXPECT_EQ(error("upstream b { hash $x inconsistent; server 127.0.0.1:1; }"),
            "invalid parameter \"inconsistent\"" + at3);
  EXPECT_EQ(error("upstream b { keepalive 0; server 127.0.0.1:1; }"),
            "invalid value \"0\" in \"keepalive\" directive" + at3);
  EXPECT_EQ(error("upstream b { keepalive_timeout 1x; server 127.0.0.1:1; }"),
            "invalid value \"1x\" in \"keepalive_timeout\" directive" + at3);
  EXPECT_EQ(error("upstream b { zone z 1k; server 127.0.0.1:1; }"), "zone \"z\" is too small" + at3);
  EXPECT_EQ(error("upstream b { zone z x; server 127.0.0.1:1; }"), "invalid zone size \"x\"" + at3);
  EXPECT_EQ(error("upstream b { zone z; server 127.0.0.1:1; }"),
            "zero size shared memory zone \"z\"" + at3);
  EXPECT_EQ(error("upstream b { zone z 64k; zone y 64k; server 127.0.0.1:1; }"),
            "\"zone\" directive is duplicate" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1; }\nupstream c { zone z 64k; server 127.0.0.1:1; }\n"
                  "upstream d { zone z 128k; server 127.0.0.1:1; }"),
            "the size 131072 of shared memory zone \"z\" conflicts with already declared size 65536 "
            "in conf/vigil.conf:5");
  EXPECT_EQ(error("upstream b { server host.invalid:80; }").substr(0, 40),
            "host not found in upstream \"host.invalid");
  EXPECT_TRUE(error("upstream b { server host.invalid:80; }").ends_with(at3));
  EXPECT_EQ(error("upstream b { server [::1:80; }"), "invalid IPv6 address in upstream \"[::1:80\"" + at3);
  // Directives nginx's stream upstream does not have.
  EXPECT_EQ(error("upstream b { keepalive 2; server 127.0.0.1:1; }", Protocol::kStream),
            "\"keepalive\" directive is not allowed here" + at3);
  EXPECT_EQ(error("upstream b { ip_hash; server 127.0.0.1:1; }", Protocol::kStream),
            "\"ip_hash\" directive is not allowed here" + at3);
  EXPECT_EQ(error("upstream b { server 127.0.0.1:1; }\nserver 127.0.0.1:2;"),
            "\"server\" directive is not allowed here in conf/vigil.conf:4");
}

TEST_F(UpstreamConfTest, ZoneTooSmallForItsServers) {
  std::string body = "upstream b { zone z 32k;\n";
  for (int i = 0; i < 2000; ++i) body += " server 127.0.0.1:" + std::to_string(1000 + i) + ";\n";
  body += "}";
  std::string e = error(body);
  EXPECT_EQ(e, "zone \"z\" is too small for upstream \"b\" in conf/vigil.conf:3") << e;
}

}  // namespace
}  // namespace vigil::upstream

namespace vigil::upstream {
namespace {

// A reload keeps the zone (same name, size and tag): the new generation's
// health arrays replace the old ones in it, so reloads do not fill the zone.
TEST_F(UpstreamConfTest, ReloadReusesTheZoneWithoutLeaking) {
  std::string body = "upstream b { zone z 32k;\n";
  for (int i = 0; i < 300; ++i) body += " server 127.0.0.1:" + std::to_string(1000 + i) + ";\n";
  body += "}";
  write("conf/vigil.conf", "events {}\ntesthttp {\n" + body + "\n}\n");
  ConfLoadOptions o = options();
  o.modules = &testing::registry();
  auto first = Configuration::load(o);
  ASSERT_TRUE(first) << first.status().message();
  std::unique_ptr<Configuration> previous = std::move(first.value());
  ASSERT_TRUE(previous->zones().map(nullptr));
  void* addr = previous->zones().find("z")->addr();
  for (int reload = 0; reload < 20; ++reload) {
    auto next = Configuration::load(o);
    ASSERT_TRUE(next) << next.status().message();
    Status s = next.value()->zones().map(&previous->zones());
    ASSERT_TRUE(s) << "reload " << reload << ": " << s.message();
    ShmZone* z = next.value()->zones().find("z");
    EXPECT_TRUE(z->reused());
    EXPECT_EQ(z->addr(), addr);
    previous = std::move(next.value());
  }
}

}  // namespace
}  // namespace vigil::upstream
