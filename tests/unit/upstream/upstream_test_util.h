#pragma once
// Upstream groups loaded the way a protocol loads them: a test module
// registers the upstream layer's directives in contexts of its own
// ("testhttp { upstream ... }" and "teststream { upstream ... }"), so these
// tests depend on neither http nor stream.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/core_module.h"
#include "event/event_conf.h"
#include "unit/core/conf/conf_test_util.h"
#include "upstream/upstream.h"
#include "vigil/core/log.h"
#include "vigil/event/loop.h"

namespace vigil::upstream::testing {

inline constexpr ConfContextMask kTestHttpMain = 1u << 20;
inline constexpr ConfContextMask kTestHttpUps = 1u << 21;
inline constexpr ConfContextMask kTestStreamMain = 1u << 22;
inline constexpr ConfContextMask kTestStreamUps = 1u << 23;

struct TestModule {
  Module module{"testups"};
  UpstreamSpecs http;
  UpstreamSpecs stream;
  TestModule() {
    http = add_directives(module, kTestHttpMain, kTestHttpUps, Protocol::kHttp);
    stream = add_directives(module, kTestStreamMain, kTestStreamUps, Protocol::kStream);
    module.add_block("testhttp", kMainConf, Arity::none(), kTestHttpMain);
    module.add_block("teststream", kMainConf, Arity::none(), kTestStreamMain);
  }
};

inline TestModule& test_module() {
  static TestModule* m = new TestModule();  // the registry keeps pointers until exit
  return *m;
}

inline const ModuleRegistry& registry() {
  static const ModuleRegistry r{&core_module(), &event_module(), &test_module().module};
  return r;
}

class UpstreamConfTest : public vigil::testing::ConfDirTest {
 protected:
  // Loads "events {} testhttp { BODY }" (or teststream); null on error (in error_).
  GroupSet* load_set(const std::string& body, Protocol p = Protocol::kHttp) {
    conf_.reset();
    const char* block = p == Protocol::kHttp ? "testhttp" : "teststream";
    write("conf/vigil.conf", "events {}\n" + std::string(block) + " {\n" + body + "\n}\n");
    ConfLoadOptions o = options();
    o.modules = &registry();
    auto r = Configuration::load(o);
    if (!r) {
      error_ = r.status().message();
      return nullptr;
    }
    conf_ = std::move(r.value());
    // As the runtime does before it forks: map the shared zones.
    if (Status s = conf_->zones().map(nullptr); !s) {
      error_ = s.message();
      conf_.reset();
      return nullptr;
    }
    const std::size_t m = conf_->modules().index_of(test_module().module);
    for (const auto& child : conf_->main_scope().children()) {
      const ConfContextMask want = p == Protocol::kHttp ? kTestHttpMain : kTestStreamMain;
      if (child->context() != want) continue;
      return find_group_set(*child, m, p == Protocol::kHttp ? test_module().http : test_module().stream);
    }
    return nullptr;
  }
  Group* load_group(const std::string& body, Protocol p = Protocol::kHttp) {
    GroupSet* set = load_set(body, p);
    EXPECT_NE(set, nullptr) << error_;
    if (set == nullptr || set->groups.empty()) return nullptr;
    return set->groups.front().get();
  }
  std::string error(const std::string& body, Protocol p = Protocol::kHttp) {
    error_.clear();
    return load_set(body, p) != nullptr ? std::string("(loaded)") : error_;
  }

  std::unique_ptr<Configuration> conf_;
  std::string error_;
};

// With an event loop of 16 connections for the balancers' PeerRequests.
class UpstreamLoopTest : public UpstreamConfTest {
 protected:
  void SetUp() override {
    UpstreamConfTest::SetUp();
    EventLoopConfig cfg;
    cfg.connections = 16;
    auto r = EventLoop::create(cfg, Log::global());
    ASSERT_TRUE(r) << r.status().to_string();
    loop_ = std::move(r).value();
  }

  std::unique_ptr<EventLoop> loop_;
};

}  // namespace vigil::upstream::testing
