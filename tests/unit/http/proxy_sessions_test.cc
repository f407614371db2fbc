// Tests for ProxySessions (src/http/proxy_sessions.h, proxy_ssl.cc): one
// session per (context, server), replaced by a newer one, forgotten on
// request, and every reference given back (the asan preset checks the
// counts through leaks and use-after-free).

#include "http/proxy/proxy_sessions.h"

#include <gtest/gtest.h>

namespace vigil::http {
namespace {

// A fresh session with a reference the caller owns, and one more held by the
// test to watch it.
struct Watched {
  SSL_SESSION* s = SSL_SESSION_new();
  Watched() { SSL_SESSION_up_ref(s); }
  ~Watched() { SSL_SESSION_free(s); }
};

TEST(ProxySessions, OnePerContextAndServer) {
  ProxySessions sessions;
  int ctx_a = 0, ctx_b = 0, peer_1 = 0, peer_2 = 0;
  Watched a1, a2, b1;
  sessions.keep(&ctx_a, &peer_1, a1.s);
  sessions.keep(&ctx_a, &peer_2, a2.s);
  sessions.keep(&ctx_b, &peer_1, b1.s);
  EXPECT_EQ(sessions.size(), 3u);
  EXPECT_EQ(sessions.find(&ctx_a, &peer_1), a1.s);
  EXPECT_EQ(sessions.find(&ctx_a, &peer_2), a2.s);
  EXPECT_EQ(sessions.find(&ctx_b, &peer_1), b1.s);
  EXPECT_EQ(sessions.find(&ctx_b, &peer_2), nullptr);
}

TEST(ProxySessions, NewerReplacesOlderAndForgetDrops) {
  ProxySessions sessions;
  int ctx = 0, peer = 0;
  Watched older, newer;
  sessions.keep(&ctx, &peer, older.s);
  sessions.keep(&ctx, &peer, newer.s);  // the older one's reference is given back
  EXPECT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions.find(&ctx, &peer), newer.s);
  sessions.forget(&ctx, &peer);
  EXPECT_EQ(sessions.find(&ctx, &peer), nullptr);
  EXPECT_EQ(sessions.size(), 0u);
  sessions.forget(&ctx, &peer);  // nothing kept: nothing happens
}

}  // namespace
}  // namespace vigil::http
