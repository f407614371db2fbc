// The balancers: nginx's smooth weighted round-robin sequence, weights over
// many picks, down and backup servers, least_conn, hash (modulo with rehash),
// the consistent ring's remapping, ip_hash.
#include <arpa/inet.h>
#include <sys/un.h>

#include <array>
#include <map>

#include "unit/upstream/upstream_test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream {
namespace {

class Balancer : public testing::UpstreamLoopTest {
 protected:
  void SetUp() override {
    UpstreamLoopTest::SetUp();
    if (HasFatalFailure()) return;
    clock::time_update();
  }

  // One request: the peer the balancer picks first (its port), -1 for none.
  int pick(Group& g, std::string_view key = {}, const sockaddr* client = nullptr) {
    PeerRequest pr;
    pr.init(g, *loop_, 0, key, client);
    Peer* p = select_peer(pr);
    return p ? port_of(*p) : -1;
  }
  static int port_of(const Peer& p) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&p.addr)->sin_port);
  }
  std::string sequence(Group& g, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('a' + pick(g) - 1);
    return s;
  }
};

TEST_F(Balancer, SmoothWeightedRoundRobinSequence) {
  Group* g = load_group(
      "upstream b { server 127.0.0.1:1 weight=5; server 127.0.0.1:2; server 127.0.0.1:3; }");
  ASSERT_NE(g, nullptr);
  // nginx's sequence for 5,1,1: spread out, not "a a a a a b c".
  EXPECT_EQ(sequence(*g, 14), "aabacaaaabacaa");
}

TEST_F(Balancer, WeightsOverManyRequests) {
  Group* g = load_group(
      "upstream b { server 127.0.0.1:1 weight=3; server 127.0.0.1:2 weight=2; server 127.0.0.1:3; }");
  ASSERT_NE(g, nullptr);
  std::map<int, int> n;
  for (int i = 0; i < 600; ++i) ++n[pick(*g)];
  EXPECT_EQ(n[1], 300);
  EXPECT_EQ(n[2], 200);
  EXPECT_EQ(n[3], 100);
}

TEST_F(Balancer, DownIsNeverUsedBackupOnlyWhenPrimariesAreGone) {
  Group* g = load_group(
      "upstream b { server 127.0.0.1:1; server 127.0.0.1:2 down; server 127.0.0.1:3 backup; }");
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick(*g), 1);
  // The primary fails (max_fails=1): the backup takes over.
  PeerRequest pr;
  pr.init(*g, *loop_, 0);
  PeerConnection pc;
  pr.attach(pc);
  ASSERT_EQ(PeerRequest::get(pc, &pr), kPeerOk);
  EXPECT_EQ(pc.name, "127.0.0.1:1");
  PeerRequest::free(pc, &pr, kPeerFailed);
  ASSERT_EQ(PeerRequest::get(pc, &pr), kPeerOk) << "the next try of the same request";
  EXPECT_EQ(pc.name, "127.0.0.1:3");
  PeerRequest::free(pc, &pr, 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(pick(*g), 3) << "the primary is failed for fail_timeout";
}

TEST_F(Balancer, TriesAreServersOrTheCallersLimit) {
  Group* g = load_group(
      "upstream b { server 127.0.0.1:1; server 127.0.0.1:2; server 127.0.0.1:3; server 127.0.0.1:4 backup; }");
  ASSERT_NE(g, nullptr);
  PeerRequest pr;
  PeerConnection pc;
  pr.init(*g, *loop_, 0);
  pr.attach(pc);
  EXPECT_EQ(pc.tries, 4u);
  pr.init(*g, *loop_, 2);
  pr.attach(pc);
  EXPECT_EQ(pc.tries, 2u);
  // Each failed try uses one; every server is tried once, then busy.
  pr.init(*g, *loop_, 0);
  pr.attach(pc);
  std::set<std::string> seen;
  while (pc.tries > 0) {
    ASSERT_EQ(PeerRequest::get(pc, &pr), kPeerOk);
    seen.insert(pc.name);
    PeerRequest::free(pc, &pr, kPeerFailed);
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(PeerRequest::get(pc, &pr), kPeerBusy);
  EXPECT_EQ(pc.name, "b");
}

TEST_F(Balancer, LeastConnPrefersFewestConnectionsPerWeight) {
  Group* g = load_group(
      "upstream b { least_conn; server 127.0.0.1:1 weight=2; server 127.0.0.1:2; }");
  ASSERT_NE(g, nullptr);
  // Hold connections open: peer 1 (weight 2) takes two for each one of peer 2.
  std::vector<std::unique_ptr<PeerRequest>> open;
  std::vector<std::unique_ptr<PeerConnection>> pcs;
  std::map<std::string, int> n;
  for (int i = 0; i < 9; ++i) {
    open.push_back(std::make_unique<PeerRequest>());
    pcs.push_back(std::make_unique<PeerConnection>());
    open.back()->init(*g, *loop_, 0);
    open.back()->attach(*pcs.back());
    ASSERT_EQ(PeerRequest::get(*pcs.back(), open.back().get()), kPeerOk);
    ++n[pcs.back()->name];
  }
  EXPECT_EQ(n["127.0.0.1:1"], 6);
  EXPECT_EQ(n["127.0.0.1:2"], 3);
  // Release three of peer 1's: the next picks all go to peer 1.
  int released = 0;
  for (std::size_t i = 0; i < pcs.size() && released < 3; ++i) {
    if (pcs[i]->name != "127.0.0.1:1") continue;
    PeerRequest::free(*pcs[i], open[i].get(), 0);
    ++released;
  }
  for (int i = 0; i < 3; ++i) {
    PeerRequest pr;
    PeerConnection pc;
    pr.init(*g, *loop_, 0);
    pr.attach(pc);
    ASSERT_EQ(PeerRequest::get(pc, &pr), kPeerOk);
    EXPECT_EQ(pc.name, "127.0.0.1:1");
  }
}

// max_conns=N: a server holding N connections (of this worker) is passed
// over; with every server full, backups serve, then nothing does ("no live
// upstreams"). max_conns=0 is no limit.
TEST_F(Balancer, MaxConnsPassesOverAFullServer) {
  // Each connection stays open (counted) until the vector goes.
  struct Held {
    PeerRequest pr;
    PeerConnection pc;
  };
  auto hold = [this](Group& g, std::vector<std::unique_ptr<Held>>& held, std::string_view key) {
    held.push_back(std::make_unique<Held>());
    Held& h = *held.back();
    h.pr.init(g, *loop_, 0, key);
    h.pr.attach(h.pc);
    return PeerRequest::get(h.pc, &h.pr);
  };
  auto release = [](std::vector<std::unique_ptr<Held>>& held) {
    for (auto& h : held) {
      if (!h->pc.name.empty()) PeerRequest::free(h->pc, &h->pr, 0);
    }
  };
  for (const char* method : {"", "least_conn;"}) {
    SCOPED_TRACE(method);
    Group* g = load_group(std::string("upstream b { ") + method +
                          " server 127.0.0.1:1 max_conns=2; server 127.0.0.1:2 max_conns=1;"
                          " server 127.0.0.1:3 backup max_conns=1; }");
    ASSERT_NE(g, nullptr);
    std::vector<std::unique_ptr<Held>> held;
    std::map<std::string, int> n;
    int busy = 0;
    for (int i = 0; i < 5; ++i) {
      const int rc = hold(*g, held, "key" + std::to_string(i));
      if (rc == kPeerOk) {
        ++n[held.back()->pc.name];
      } else {
        EXPECT_EQ(rc, kPeerBusy);
        ++busy;
      }
    }
    EXPECT_EQ(n["127.0.0.1:1"], 2);
    EXPECT_EQ(n["127.0.0.1:2"], 1);
    EXPECT_EQ(n["127.0.0.1:3"], 1);
    EXPECT_EQ(busy, 1);
    release(held);
  }
  // hash (which takes no backup): full servers are rehashed away from.
  Group* h = load_group(
      "upstream b { hash $remote_addr; server 127.0.0.1:1 max_conns=2;"
      " server 127.0.0.1:2 max_conns=1; }");
  ASSERT_NE(h, nullptr);
  std::vector<std::unique_ptr<Held>> hashed;
  int ok = 0;
  for (int i = 0; i < 4; ++i) ok += hold(*h, hashed, "same key") == kPeerOk ? 1 : 0;
  EXPECT_EQ(ok, 3);
  release(hashed);

  Group* g = load_group("upstream b { server 127.0.0.1:1 max_conns=0; }");
  ASSERT_NE(g, nullptr);
  std::vector<std::unique_ptr<Held>> unlimited;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(hold(*g, unlimited, {}), kPeerOk) << i;
  release(unlimited);
}

TEST_F(Balancer, HashIsStableAndSpreads) {
  Group* g = load_group(
      "upstream b { hash $k; server 127.0.0.1:1; server 127.0.0.1:2; server 127.0.0.1:3; }");
  ASSERT_NE(g, nullptr);
  std::map<int, int> n;
  for (int i = 0; i < 3000; ++i) {
    std::string key = "/item/" + std::to_string(i);
    int a = pick(*g, key);
    EXPECT_EQ(pick(*g, key), a) << "the same key goes to the same server";
    ++n[a];
  }
  for (int port = 1; port <= 3; ++port) {
    EXPECT_GT(n[port], 800) << port;
    EXPECT_LT(n[port], 1200) << port;
  }
}

TEST_F(Balancer, HashRehashesAwayFromAFailedServerOnly) {
  Group* g = load_group(
      "upstream b { hash $k; server 127.0.0.1:1 max_fails=1; server 127.0.0.1:2; server 127.0.0.1:3; }");
  ASSERT_NE(g, nullptr);
  std::map<std::string, int> before;
  for (int i = 0; i < 300; ++i) before["k" + std::to_string(i)] = pick(*g, "k" + std::to_string(i));
  // Fail server 1.
  g->peers[0].health->fails = 1;
  g->peers[0].health->checked = clock::current_msec();
  for (const auto& [key, port] : before) {
    int now = pick(*g, key);
    if (port == 1) {
      EXPECT_NE(now, 1) << key;
      EXPECT_EQ(pick(*g, key), now) << "rehashing is deterministic";
    } else {
      EXPECT_EQ(now, port) << "keys of live servers stay";
    }
  }
}

TEST_F(Balancer, ConsistentHashRemovingOneOfNMovesAboutOneNth) {
  const int n = 5;
  std::string all = "upstream b { hash $k consistent;";
  std::string fewer = all;
  for (int i = 1; i <= n; ++i) {
    all += " server 127.0.0.1:" + std::to_string(i) + ";";
    if (i != 3) fewer += " server 127.0.0.1:" + std::to_string(i) + ";";
  }
  Group* g = load_group(all + " }");
  ASSERT_NE(g, nullptr);
  const int keys = 10000;
  std::vector<int> first(keys);
  for (int i = 0; i < keys; ++i) first[i] = pick(*g, "key" + std::to_string(i));
  g = load_group(fewer + " }");
  ASSERT_NE(g, nullptr);
  int moved = 0;
  for (int i = 0; i < keys; ++i) {
    int now = pick(*g, "key" + std::to_string(i));
    if (now != first[i]) {
      ++moved;
      EXPECT_EQ(first[i], 3) << "only keys of the removed server move";
    }
  }
  // About 1/N of the keys were on the removed server.
  EXPECT_GT(moved, keys / n / 2);
  EXPECT_LT(moved, keys * 2 / n);
}

TEST_F(Balancer, ConsistentHashSkipsAFailedServer) {
  Group* g = load_group("upstream b { hash $k consistent; server 127.0.0.1:1; server 127.0.0.1:2; }");
  ASSERT_NE(g, nullptr);
  g->peers[0].down = true;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pick(*g, "k" + std::to_string(i)), 2);
}

// What nginx 1.22.1 chose, recorded by running it (not computed here): the
// servers below, weighted 1 2 1 3 1, in `upstream`s of an http block, one
// request per key /loc?k=k0 ... k199 through "hash $arg_k [consistent]",
// each backend answering with its number. In "down", servers 1, 3 and 4 are
// `down` (and all of weight 1 but server 2); in "retry", 3 and 4 are not
// listening (max_fails=0), so nginx retries on the next server its algorithm
// gives. An operator moving from nginx keeps every key on the same server.
struct NginxHashCase {
  const char* name;
  std::array<const char*, 5> params;  // of each server
  const char* dead;                   // servers that refuse, in the retry case
  const char* expected;               // the server (1-5) of k0 ... k199
};

constexpr std::array<const char*, 5> kWeights = {"", " weight=2", "", " weight=3", ""};

// Server n (1-5) is 127.0.0.<n+1>:<base+n>.
std::string nginx_hash_upstream(const NginxHashCase& c, bool consistent, int base = 28080) {
  std::string u = std::string("upstream b { hash $k") + (consistent ? " consistent" : "") + ";";
  for (int n = 1; n <= 5; ++n) {
    u += " server 127.0.0." + std::to_string(n + 1) + ":" + std::to_string(base + n) +
         c.params[n - 1] + ";";
  }
  return u + " }";
}

// The first server a request would use, then, while it is one of `dead`,
// the next attempt of the same request: the server (1-5) that answers.
int answering(Group& g, EventLoop& loop, std::string_view key, std::string_view dead,
              int base = 28080) {
  PeerRequest pr;
  pr.init(g, loop, 0, key);
  for (;;) {
    Peer* p = select_peer(pr);
    if (p == nullptr) return -1;
    const int n = ntohs(reinterpret_cast<const sockaddr_in*>(&p->addr)->sin_port) - base;
    if (dead.find(static_cast<char>('0' + n)) == std::string_view::npos) return n;
  }
}

void expect_nginx_choices(Group& g, EventLoop& loop, const NginxHashCase& c) {
  std::string got;
  for (int i = 0; i < 200; ++i) {
    got += static_cast<char>('0' + answering(g, loop, "k" + std::to_string(i), c.dead));
  }
  EXPECT_EQ(got, c.expected) << c.name;
}

TEST_F(Balancer, HashPicksTheServerNginxPicks) {
  const NginxHashCase cases[] = {
      {"all up", kWeights, "",
       "24514324245124244343244351242424514324241542423434"
       "34424215154215344242423415424242341542424215344242"
       "42341542424215344242344242151515424234342451432424"
       "24435124245124244343432424515143242451515124244343"},
      {"down", {{" down", " weight=2", " down", " down", ""}}, "",
       "22222555222225222552252252222255552225222222522252"
       "22222222252222222222222222552552522225222225522252"
       "25555252222522522252525225252552522255525522222552"
       "52225525525255525252252252525255252252225522525255"},
      {"retry", kWeights, "34",
       "22512222225122222121222151222222512122221522221212"
       "12222215152215122222221215222222121522222215122222"
       "52551552525215555252555252151515525255552551552525"
       "25555125255125255555552525515155252551515125255555"},
  };
  for (const NginxHashCase& c : cases) {
    Group* g = load_group(nginx_hash_upstream(c, false));
    ASSERT_NE(g, nullptr);
    expect_nginx_choices(*g, *loop_, c);
  }
}

TEST_F(Balancer, ConsistentHashPicksTheServerNginxPicks) {
  const NginxHashCase cases[] = {
      {"all up", kWeights, "",
       "41142442234144324251534223424124344232223425441454"
       "12252235244444452112442551344212444445223315534444"
       "34422452544444144444444421245451555442412225424244"
       "42114224424424444451442521255124243152415214415245"},
      {"down", {{" down", " weight=2", " down", " down", ""}}, "",
       "25252522225225522252522225222522222222225225222255"
       "22252225222522252222552555222222222255222255525222"
       "22222552522225252522252525255555555522522225222225"
       "22222225522225552252222525255222252252525252255225"},
      {"retry", kWeights, "34",
       "21152522215125122251522225121122212222225225221155"
       "12252225222522252112552551122212222155222115525121"
       "22222552522125152112251521255551555522512225222225"
       "22112221522225151251222521255121211152515212215215"},
  };
  for (const NginxHashCase& c : cases) {
    Group* g = load_group(nginx_hash_upstream(c, true));
    ASSERT_NE(g, nullptr);
    expect_nginx_choices(*g, *loop_, c);
  }
}

// The stream form, recorded the same way: "hash $remote_addr [consistent]"
// in a stream block (the servers at ports 28091-28095), one connection from
// each of 127.0.0.1 ... 127.0.0.40.
TEST_F(Balancer, StreamRemoteAddrHashPicksTheServerNginxPicks) {
  const NginxHashCase plain = {"stream", kWeights, "",
                               "5424234342451432424432424515151242443434"};
  const NginxHashCase consistent = {"stream consistent", kWeights, "",
                                    "4334224444453234345512424233433422444254"};
  for (const NginxHashCase* c : {&plain, &consistent}) {
    Group* g = load_group(nginx_hash_upstream(*c, c == &consistent, 28090), Protocol::kStream);
    ASSERT_NE(g, nullptr);
    std::string got;
    for (int i = 1; i <= 40; ++i) {
      got += static_cast<char>('0' + answering(*g, *loop_, "127.0.0." + std::to_string(i), "", 28090));
    }
    EXPECT_EQ(got, c->expected) << c->name;
  }
}

// An empty key (the variable was empty) is no key: nginx balances those
// requests round-robin, with and without `consistent` (the sequence is
// nginx's, recorded with the servers above).
TEST_F(Balancer, HashWithAnEmptyKeyIsRoundRobin) {
  for (bool consistent : {false, true}) {
    Group* g = load_group(nginx_hash_upstream({"empty", kWeights, "", ""}, consistent));
    ASSERT_NE(g, nullptr);
    std::string got;
    for (int i = 0; i < 16; ++i) got += static_cast<char>('0' + answering(*g, *loop_, "", ""));
    EXPECT_EQ(got, "4213452442134524") << (consistent ? "consistent" : "plain");
  }
}

TEST_F(Balancer, IpHashUsesThreeOctetsOfIPv4AndAllOfIPv6) {
  Group* g = load_group(
      "upstream b { ip_hash; server 127.0.0.1:1; server 127.0.0.1:2; server 127.0.0.1:3; server 127.0.0.1:4; }");
  ASSERT_NE(g, nullptr);
  auto v4 = [](const char* ip) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, ip, &sa.sin_addr);
    return sa;
  };
  std::map<int, int> n;
  for (int net = 0; net < 200; ++net) {
    std::string prefix = "10." + std::to_string(net) + ".7.";
    sockaddr_in a = v4((prefix + "1").c_str());
    int first = pick(*g, {}, reinterpret_cast<sockaddr*>(&a));
    ++n[first];
    for (int host : {2, 99, 254}) {
      sockaddr_in b = v4((prefix + std::to_string(host)).c_str());
      EXPECT_EQ(pick(*g, {}, reinterpret_cast<sockaddr*>(&b)), first) << "same /24, same server";
    }
  }
  EXPECT_EQ(n.size(), 4u) << "different networks spread over the servers";
  // IPv6: every byte counts, so two addresses differing only at the end may differ.
  std::set<int> v6;
  for (int i = 0; i < 64; ++i) {
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    std::string ip = "2001:db8::" + std::to_string(i + 1);
    ::inet_pton(AF_INET6, ip.c_str(), &sa.sin6_addr);
    int a = pick(*g, {}, reinterpret_cast<sockaddr*>(&sa));
    EXPECT_EQ(pick(*g, {}, reinterpret_cast<sockaddr*>(&sa)), a);
    v6.insert(a);
  }
  EXPECT_GT(v6.size(), 1u);
  // A unix-domain client hashes as one pseudo address: every such client
  // sticks to one server, as nginx's (not round-robin).
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  const int first = pick(*g, {}, reinterpret_cast<sockaddr*>(&un));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(pick(*g, {}, reinterpret_cast<sockaddr*>(&un)), first) << "unix client " << i;
  }
}

}  // namespace
}  // namespace vigil::upstream
