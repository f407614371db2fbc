// The allocator of the worker's nghttp2 sessions (http/v2/memory.h), used
// as nghttp2 uses it: small blocks freed go to the worker's free lists by
// their size class and come back for the next block of that class, every
// class keeps its own list, realloc keeps the contents, and page-sized
// blocks are the session's page blocks. Under AddressSanitizer a block on
// a free list is poisoned, so a use after free is reported.
#include "http/v2/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "http/v2/session.h"
#include "http/v2/shutdown.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::http::h2 {
namespace {

class H2Memory : public ::testing::Test {
 protected:
  void SetUp() override {
    EventLoopConfig cfg;
    cfg.connections = 4;
    auto created = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(created) << created.status().to_string();
    loop_ = std::move(created.value());
    s_.h2w = h2_worker(*loop_);
    ASSERT_NE(s_.h2w, nullptr);
    mem_ = session_mem(s_);
  }
  void TearDown() override {
    if (loop_ != nullptr) exit_worker(*loop_);
  }

  void* alloc(std::size_t n) { return mem_.malloc(n, mem_.mem_user_data); }
  void release(void* p) { mem_.free(p, mem_.mem_user_data); }

  std::unique_ptr<EventLoop> loop_;
  Session s_;
  nghttp2_mem mem_{};
};

// Blocks of two classes freed in turn: each class gets back its own
// blocks, most recently freed first, and none is handed out twice.
TEST_F(H2Memory, FreedBlocksComeBackByTheirClass) {
  std::vector<void*> small, large;
  for (int i = 0; i < 4; ++i) {
    small.push_back(alloc(40));
    large.push_back(alloc(500));
    ASSERT_NE(small.back(), nullptr);
    ASSERT_NE(large.back(), nullptr);
  }
  for (int i = 0; i < 4; ++i) {
    release(small[i]);
    release(large[i]);
  }
  std::set<void*> seen;
  for (int i = 3; i >= 0; --i) {
    void* s = alloc(33);   // the same class as 40
    void* l = alloc(497);  // the same class as 500
    EXPECT_EQ(s, small[i]) << i;
    EXPECT_EQ(l, large[i]) << i;
    EXPECT_TRUE(seen.insert(s).second);
    EXPECT_TRUE(seen.insert(l).second);
  }
  // The lists are empty now: a new block is a new one.
  void* fresh = alloc(40);
  EXPECT_EQ(seen.count(fresh), 0U);
  for (void* p : seen) release(p);
  release(fresh);
}

TEST_F(H2Memory, ReallocKeepsTheContentsAcrossClasses) {
  auto* p = static_cast<unsigned char*>(alloc(20));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 20; ++i) p[i] = static_cast<unsigned char>(i + 1);
  auto* q = static_cast<unsigned char*>(mem_.realloc(p, 700, mem_.mem_user_data));
  ASSERT_NE(q, nullptr);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(q[i], i + 1) << i;
  auto* r = static_cast<unsigned char*>(mem_.realloc(q, 10000, mem_.mem_user_data));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r) % 4096, 0U);  // a page block
  for (int i = 0; i < 20; ++i) EXPECT_EQ(r[i], i + 1) << i;
  release(r);
  // calloc zeroes a block that came back from a free list.
  auto* z = static_cast<unsigned char*>(alloc(20));
  std::memset(z, 0xff, 20);
  release(z);
  auto* c = static_cast<unsigned char*>(mem_.calloc(4, 5, mem_.mem_user_data));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c[i], 0) << i;
  release(c);
}

// A real nghttp2 session made and deleted on this allocator, again and
// again: its blocks go round the free lists (LeakSanitizer checks that
// none is lost).
TEST_F(H2Memory, SessionsComeAndGo) {
  nghttp2_session_callbacks* cbs = nullptr;
  ASSERT_EQ(nghttp2_session_callbacks_new(&cbs), 0);
  for (int i = 0; i < 50; ++i) {
    nghttp2_session* ng = nullptr;
    ASSERT_EQ(nghttp2_session_server_new3(&ng, cbs, nullptr, nullptr, &mem_), 0);
    const nghttp2_settings_entry iv{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100};
    ASSERT_EQ(nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, &iv, 1), 0);
    const std::uint8_t* data = nullptr;
    EXPECT_GT(nghttp2_session_mem_send(ng, &data), 0);
    nghttp2_session_del(ng);
  }
  nghttp2_session_callbacks_del(cbs);
}

}  // namespace
}  // namespace vigil::http::h2
