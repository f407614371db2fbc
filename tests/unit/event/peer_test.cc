// Outgoing connections: nonblocking connect completing through the write event,
// refusal reported as "try the next peer", and the get hook.
#include "vigil/event/peer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "test_util.h"
#include "vigil/core/log.h"
#include "vigil/event/listening.h"
#include "vigil/event/loop.h"

namespace vigil {
namespace {

int g_result = -100;
// Records the first outcome only: reading SO_ERROR clears it, and an error
// wakes both the read and the write handler.
void on_connected(Event& ev) {
  auto& c = *ev.owner<Connection>();
  if (g_result == -100) g_result = peer_connect_result(c);
}

PeerConnection loopback_peer(int port) {
  PeerConnection pc;
  auto* sa = reinterpret_cast<sockaddr_in*>(&pc.addr);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  pc.addrlen = sizeof(sockaddr_in);
  pc.name = "127.0.0.1:" + std::to_string(port);
  return pc;
}

class Peer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    EventLoopConfig cfg;
    cfg.use = GetParam();
    cfg.connections = 16;
    auto r = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(r) << r.status().to_string();
    loop_ = std::move(r).value();
  }
  std::unique_ptr<EventLoop> loop_;
};

TEST_P(Peer, ConnectCompletesThroughTheWriteEvent) {
  Listening ls;  // the kernel completes the handshake into the backlog
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  PeerConnection pc = loopback_peer(ls.port());
  std::size_t free_before = loop_->pool().free_count();
  int rc = event_connect_peer(*loop_, pc);
  ASSERT_TRUE(rc == kPeerOk || rc == kPeerAgain) << rc;
  ASSERT_NE(pc.connection, nullptr);
  EXPECT_EQ(loop_->pool().free_count(), free_before - 1) << "counted against worker_connections";
  if (rc == kPeerAgain) {
    g_result = -100;
    pc.connection->write->handler = on_connected;
    pc.connection->read->handler = [](Event&) {};
    ASSERT_TRUE(test::run_until([&] { loop_->process_events_and_timers(); },
                                [&] { return g_result != -100; }));
    EXPECT_EQ(g_result, 0);
  }
  EXPECT_EQ(pc.connection->send(*pc.connection, "ping", 4), 4);
  loop_->pool().close_connection(*pc.connection);
  EXPECT_EQ(loop_->pool().free_count(), free_before);
  ls.close();
}

TEST_P(Peer, RefusedConnectionMeansTryTheNextPeer) {
  Listening ls;
  ASSERT_TRUE(ls.set_address("127.0.0.1:0"));
  ASSERT_TRUE(ls.open());
  int port = ls.port();
  ls.close();  // nobody listens there any more
  PeerConnection pc = loopback_peer(port);
  std::size_t free_before = loop_->pool().free_count();
  int rc = event_connect_peer(*loop_, pc);
  if (rc == kPeerAgain) {
    g_result = -100;
    pc.connection->write->handler = on_connected;
    pc.connection->read->handler = on_connected;
    ASSERT_TRUE(test::run_until([&] { loop_->process_events_and_timers(); },
                                [&] { return g_result != -100; }));
    EXPECT_EQ(g_result, ECONNREFUSED);
    loop_->pool().close_connection(*pc.connection);
  } else {
    EXPECT_EQ(rc, kPeerDeclined);
    EXPECT_EQ(pc.connection, nullptr);
  }
  EXPECT_EQ(loop_->pool().free_count(), free_before) << "no connection may leak";
}

TEST_P(Peer, GetHookCanRefuseWithoutTakingAConnection) {
  PeerConnection pc = loopback_peer(1);
  pc.get = [](PeerConnection&, void*) { return kPeerBusy; };
  std::size_t free_before = loop_->pool().free_count();
  EXPECT_EQ(event_connect_peer(*loop_, pc), kPeerBusy);
  EXPECT_EQ(pc.connection, nullptr);
  EXPECT_EQ(loop_->pool().free_count(), free_before);
}

INSTANTIATE_TEST_SUITE_P(Backends, Peer, ::testing::ValuesIn(test::backend_params()),
                         test::backend_param_name);

}  // namespace
}  // namespace vigil
